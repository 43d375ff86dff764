"""The per-GPU memory plan: vLLM's budget, term by term, and the verdict.

For each worker (tensor rank 0 of every pipeline stage; tensor ranks are symmetric)::

    requested    = total_gpu_memory x gpu_memory_utilization           (ceil from 0.19)
    non_kv       = weights + activation peak + non-torch (+ CUDA graphs from 0.21)
    available_kv = requested - non_kv                                   "Available KV cache memory"
    num_blocks   = available_kv // page_size // group_size, then min over workers

The verdict follows from the numbers (see :func:`plan`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fitgate.sizing import extras, multimodal, offload
from fitgate.sizing import lora as lora_slots
from fitgate.sizing.activation import ProfileEstimate, estimate_profile
from fitgate.sizing.auto_fit import plan_auto
from fitgate.sizing.dtypes import KV_CACHE_DTYPES_NOT_SIZED, MODEL_DTYPES
from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.extensible import (
    MARGIN_FLOOR_BYTES,
    ROCM_MARGIN_FLOOR_BYTES,
    blocks_within,
    measure_kv_bytes,
)
from fitgate.sizing.frozen import build, copied
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.judge import Prejudged, finish, prejudge
from fitgate.sizing.kv_layout import (
    KVLayout,
    blocks_per_request,
    build_layout,
    hybrid_block_size,
    layer_specs,
    max_concurrency,
    num_blocks,
    reported_tokens,
)
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.model import ModelArchitecture, Quantization
from fitgate.sizing.mxfp4 import mxfp4_layouts
from fitgate.sizing.offload import HostMemory
from fitgate.sizing.parallel import (
    EP_INTERNODE_RESIDENT_BYTES,
    all2all_buffer_bytes,
    shared_experts_replicated,
)
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.resolve import MAX_CONTEXT, accounting_of, checked_int, graphs_in_budget, resolve_serving
from fitgate.sizing.results import KVSummary, ModelInput, PerGpu, Plan, RankPlan, Reason, Verdict
from fitgate.sizing.serving import MAX_REPLICAS, ResolvedServing, ServingConfig, Workload
from fitgate.sizing.units import cdiv, fmt_gib
from fitgate.sizing.verdict_rules import (
    CHECK_BEFORE_UNIFY,
    UNCOUNTED_BYTES,
    OutsideNeed,
    max_model_len_that_fits,
    outside_need,
    plan_notes,
    pool_request_bytes,
    request_check_bytes,
)
from fitgate.sizing.versions import CHUNKED_LOCAL_SPEC_SINCE, VllmAccounting
from fitgate.sizing.weights import RankWeights, WeightInventory, pp_layer_ranges, weights_per_rank

__all__ = [
    "KVSummary",
    "ModelInput",
    "PerGpu",
    "Plan",
    "RankPlan",
    "Reason",
    "ResolvedServing",
    "ServingConfig",
    "Verdict",
    "Workload",
    "plan",
]


# --------------------------------------------------------------------------------------------


def _runtime_quantization(arch: ModelArchitecture, name: str | None) -> Quantization | None:
    if name is None or arch.quantization is not None:
        return None
    return RUNTIME_QUANTIZATION[name]


def _rank(
    model: ModelInput,
    gpu: GpuModel,
    rs: ResolvedServing,
    accounting: VllmAccounting,
    pp_rank: int,
    layers: range,
) -> RankPlan:
    arch = model.arch
    tp, pp = rs.tensor_parallel_size, rs.pipeline_parallel_size
    # an MTP drafter's layers live on the last pipeline stage (see fitgate.sizing.speculative)
    spec = rs.speculative if pp_rank == pp - 1 else None
    drafter = (spec.template_layer,) * spec.drafter_layers if spec is not None and spec.drafter_layers else ()
    weights = _weights_per_rank(
        arch,
        model.inventory,
        tp=tp,
        pp=pp,
        pp_rank=pp_rank,
        partition=rs.pp_layer_partition,
        dtype=rs.dtype,
        runtime_quantization=_runtime_quantization(arch, rs.quantization),
        pooling=rs.runner == "pooling",
        drafter_layers=drafter,
        moe_tp=rs.parallel.moe_tp,
        ep_size=rs.parallel.ep_size,
        redundant_experts=rs.parallel.redundant_experts,
        shared_experts_replicated=shared_experts_replicated(arch, rs.parallel),
        mxfp4_layout=mxfp4_layouts(accounting.version, gpu, rs.mxfp4_backend)[0],
        vision=multimodal.tower_built(arch.architecture, accounting.version, rs.limit_mm_per_prompt),
    )
    dtype_bytes = MODEL_DTYPES[rs.dtype]
    profile = estimate_profile(
        arch,
        layers=layers,
        last_stage=pp_rank == pp - 1,
        tp=tp,
        pp=pp,
        dtype_bytes=dtype_bytes,
        max_num_batched_tokens=rs.max_num_batched_tokens,
        max_num_seqs=rs.max_num_seqs,
        enforce_eager=rs.enforce_eager,
        accounting=accounting,
        flashinfer_sampler=rs.flashinfer_sampler,
        gpu=gpu,
        interconnect=rs.interconnect,
        pooling=rs.runner == "pooling",
        decode_query_len=rs.decode_query_len,
        moe_tp=rs.parallel.moe_tp,
        all2all_bytes=all2all_buffer_bytes(arch, rs.parallel, rs.max_num_batched_tokens),
        graph_cases=lora_slots.graph_cases(rs.lora),
        cudagraph_mode=rs.cudagraph_mode,
        given_sizes=rs.cudagraph_capture_sizes,
        given_max=rs.max_cudagraph_capture_size,
        interactivity=rs.performance_mode == "interactivity",
        v2_runner=rs.v2_runner,
        extensible=rs.extensible_kv_cache,
    )
    # the drafter's attention layers share the KV pool; conv states keep the draft tokens too
    kv = (arch, (*layers, *drafter), tp, rs.kv_dtype_bytes, dtype_bytes, rs.block_size)
    layout = _kv_layout(*kv, accounting, rs.draft_tokens, rs.mamba_ssm_dtype_bytes)
    check = None
    if accounting.engine == "V1" and CHECK_BEFORE_UNIFY[0] <= accounting.version < CHECK_BEFORE_UNIFY[1]:
        chunked = accounting.version >= CHUNKED_LOCAL_SPEC_SINCE  # 0.9 emits chunked layers as full attention
        own = dataclasses.replace(accounting, hybrid_kv_manager=True, chunked_local_hybrid=chunked)
        check = _kv_layout(*kv, own, rs.draft_tokens, rs.mamba_ssm_dtype_bytes)
        check = None if check.spec_counts == layout.spec_counts else check
    # --- LoRA slots and --cpu-offload-gb (issue 20; fitgate.sizing.lora, fitgate.sizing.offload) ---
    adapters = None
    if rs.lora is not None:
        adapters = lora_slots.lora_bytes(
            arch,
            rs.lora,
            layers=layers,
            first_stage=pp_rank == 0,
            last_stage=pp_rank == pp - 1,
            tp=tp,
            max_num_batched_tokens=rs.max_num_batched_tokens,
            targets=rs.lora_target_modules,
        )
        profile = dataclasses.replace(profile, activation_bytes=profile.activation_bytes + adapters.shrink_buffer_bytes)
    encoder = None
    # the encoder pass runs on the first pipeline stage (gpu/model_runner.py 0.33.0 L1023), unless --skip-mm-profiling
    # leaves it out (gpu_model_runner.py 0.19.0 L5721-5729, 0.17.0 L5226; gpu/model_runner.py 0.34.0 L1077)
    if pp_rank == 0 and not rs.mm_skip_profiling:
        encoder = multimodal.encoder_profile(
            arch,
            max_model_len=rs.max_model_len,
            max_num_batched_tokens=rs.max_num_batched_tokens,
            max_num_seqs=rs.max_num_seqs,
            limits=rs.limit_mm_per_prompt,
            tp=tp,
            tp_mode=rs.mm_encoder_tp_mode,
            dtype_bytes=dtype_bytes,
            max_pixels=rs.mm_max_pixels,
            item_pixels=rs.mm_item_pixels,
            videos=rs.engine == "V1",
        )
    if encoder is not None and encoder.items:
        # the encoder runs first; its outputs stay in the encoder cache through the decoder's dummy
        # pass and the sampler's (gpu_model_runner.py 0.33.0 L6084-6137)
        peak = max(encoder.forward_bytes, encoder.outputs_bytes + profile.activation_bytes)
        profile = dataclasses.replace(profile, activation_bytes=peak)
    decoder_bytes = weights.tensors_bytes - weights.embedding_bytes
    offloaded = offload.offloaded_bytes(rs.cpu_offload_bytes, decoder_bytes)
    resident = weights.total_bytes - offloaded + (adapters.total_bytes if adapters else 0)
    non_kv = resident + profile.activation_bytes + profile.non_torch_bytes + profile.runner_state_bytes
    if rs.extensible_kv_cache:
        extensible = _extensible_rank(gpu, rs, pp_rank, layers, weights, profile, non_kv, layout, resident)
        return dataclasses.replace(extensible, lora=adapters, offloaded_bytes=offloaded, encoder=encoder)
    if graphs_in_budget(arch, rs, accounting):
        non_kv += profile.cuda_graph_bytes
    if rs.kv_cache_memory_bytes is not None:
        # --kv-cache-memory-bytes: the pool is that number; gpu_memory_utilization is ignored and what
        # vLLM holds is the non-KV memory plus the pool (reference section 4).
        requested = non_kv + rs.kv_cache_memory_bytes
        available = rs.kv_cache_memory_bytes
    else:
        product = gpu.memory_bytes * rs.gpu_memory_utilization
        requested = math.ceil(product) if accounting.requested_ceil else int(product)
        available = requested - non_kv
    return RankPlan(
        pp_rank, layers, weights, profile, requested, non_kv, available, layout, num_blocks(layout, available),
        lora=adapters, offloaded_bytes=offloaded, encoder=encoder, check_layout=check,
    )  # fmt: skip


def _extensible_rank(
    gpu: GpuModel,
    rs: ResolvedServing,
    pp_rank: int,
    layers: range,
    weights: RankWeights,
    profile: ProfileEstimate,
    non_kv: int,
    layout: KVLayout,
    weights_resident_bytes: int | None = None,
) -> RankPlan:
    """One worker under vLLM 0.34's extensible KV cache (see :mod:`fitgate.sizing.extensible`).

    ``weights_resident_bytes``: the weights on the GPU after ``--cpu-offload-gb`` and with LoRA slots
    (default ``weights.total_bytes``).

    The V2 runner's ``profile_cudagraph_memory`` returns 0 with the extensible cache ("The extensible
    KV cache measures the capture footprint after warmup", gpu/model_runner.py 0.34.0 L1121-1125), so
    the capacity is ``requested - non_kv`` without graphs and the transient reserve is the profiled
    transient alone; the graph pool is resident when the pool is measured. The pool is what
    ``measure_kv_cache_bytes`` keeps after warm-up, at most that capacity, and what vLLM checks one
    ``max_model_len`` request against is ``(blocks - 1) x bytes_per_block`` (kv_cache_planning.py
    0.34.0 L1851-1861: the null block is held back).
    """
    requested = math.ceil(gpu.memory_bytes * rs.gpu_memory_utilization)  # v1/worker/utils.py 0.34.0 L743
    capacity = num_blocks(layout, requested - non_kv)
    graphs = profile.cuda_graph_bytes if rs.cuda_graphs else 0
    # Resident after capture: weights, non-torch growth, the persistent MoE workspace, the graph pool.
    on_gpu = weights.total_bytes if weights_resident_bytes is None else weights_resident_bytes
    resident = on_gpu + profile.non_torch_bytes + profile.runner_state_bytes + profile.moe_workspace_bytes + graphs
    # Seed of the transient reserve: peak_activation_memory = transient headroom + graph estimate (0 here).
    transient = profile.activation_bytes - profile.moe_workspace_bytes
    measured = measure_kv_bytes(
        requested_bytes=requested,
        # a multi-node EP group's communicators are resident before the snapshot too (fitgate.sizing.parallel)
        init_free_bytes=gpu.memory_bytes
        - rs.pre_snapshot_bytes
        - (EP_INTERNODE_RESIDENT_BYTES if rs.parallel.internode else 0),
        resident_bytes=resident,
        transient_bytes=transient,
        margin_floor_bytes=ROCM_MARGIN_FLOOR_BYTES if gpu.vendor == "amd" else MARGIN_FLOOR_BYTES,
    )
    blocks = blocks_within(measured.available_bytes, _segment_strides(layout), capacity)
    # the null block: packed layouts already count it in one_request_bytes (kv_layout.one_request_bytes)
    held_back = 0 if layout.packed else 1
    available = max(0, (blocks - held_back) * layout.bytes_per_block) if blocks else measured.available_bytes
    return RankPlan(
        pp_rank, layers, weights, profile, requested, requested - available, available, layout, blocks,
        kv_short_bytes=measured.short_bytes,
    )  # fmt: skip


def _segment_strides(layout: KVLayout) -> tuple[int, ...]:
    """The extensible cache's segments: one per KV tensor of a layer-outermost layout (one when packed).

    ``ExtensibleKVCache._segments`` (extensible_kv_cache.py 0.34.0 L134-181): block-compact
    layer-outermost layouts get one region per layer tensor, block-outermost ones a single segment.
    """
    if layout.packed:
        return (layout.bytes_per_block,)
    if layout.group_size == 1 and len(layout.groups) == 1 and len(layout.spec_counts) > 1:
        return layout.layer_page_sizes  # UniformTypeKVCacheSpecs: per-layer tensors
    return (layout.page_size_bytes,) * layout.group_size


#: ``weights_per_rank`` depends only on the model and a few settings, yet every plan (and every suggestion,
#: alternative and recommend option re-planned) computed it again: 29 % of a cold reconcile (issue 23).
_WEIGHTS_MEMO: IdentityMemo[RankWeights] = IdentityMemo()
#: The KV layout of a rank depends on the model, its layers on that rank and a few settings, not on the
#: context length or the workload that suggestions and alternatives vary.
_LAYOUT_MEMO: IdentityMemo[KVLayout] = IdentityMemo()


def _weights_per_rank(arch: ModelArchitecture, inventory: WeightInventory, **settings: Any) -> RankWeights:
    """:func:`weights_per_rank`, memoised."""
    return _WEIGHTS_MEMO.get(
        (arch, inventory), tuple(sorted(settings.items())), lambda: weights_per_rank(arch, inventory, **settings)
    )


def _kv_layout(
    arch: ModelArchitecture,
    kv_layers: tuple[int, ...],
    tp: int,
    kv_dtype_bytes: int,
    dtype_bytes: int,
    block_size: int,
    accounting: VllmAccounting,
    num_spec: int,
    ssm_bytes: int = 0,
) -> KVLayout:
    """Layer specs, the hybrid block size and their grouping (:func:`build_layout`) for one rank, memoised."""

    def compute() -> KVLayout:
        specs = layer_specs(
            arch, kv_layers, tp, kv_dtype_bytes, dtype_bytes, block_size, accounting, num_spec, ssm_bytes
        )
        block = hybrid_block_size(specs, block_size, mla=arch.uses_mla)
        if block != block_size:
            specs = layer_specs(
                arch, kv_layers, tp, kv_dtype_bytes, dtype_bytes, block, accounting, num_spec, ssm_bytes
            )
        return build_layout(specs, accounting)

    settings = (kv_layers, tp, kv_dtype_bytes, dtype_bytes, block_size, accounting, num_spec, ssm_bytes)
    return _LAYOUT_MEMO.get((arch,), settings, compute)


def _ranks(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None
) -> tuple[VllmAccounting, ResolvedServing, tuple[RankPlan, ...], _Base]:
    """The settings resolved, every pipeline rank planned and the rest of a plan that its workload leaves alone.

    They depend on the model, the GPU and the settings only, and thousands of deployments (and every
    suggestion and alternative re-planned for them) share those while their workloads differ, so they
    are memoised by the model's and GPU's identity and the settings' value (issue 23). A failure is
    not remembered: the next call raises it again, in the same order (settings, workload, ranks).
    """
    owners = (model.arch, model.inventory, gpu, serving)
    hit = _RANKS_BY_ID.peek(owners, ())
    if hit is None:
        hit = _RANKS_MEMO.peek(owners[:3], (serving,))
        if hit is not None:
            _RANKS_BY_ID.put(owners, (), hit)
    if hit is not None:
        _check_workload(workload)
        return hit
    accounting = accounting_of(model.arch, gpu, serving)
    rs = resolve_serving(model.arch, gpu, serving, accounting)
    if offload.disables_hybrid_manager(rs.kv_connector) and accounting.engine == "V1":
        # a KV connector without SupportsHMA turns the hybrid KV cache manager off (config/vllm.py 0.33.0
        # L2257-2280): sliding-window and chunked-local layers are sized as full attention (issue 20)
        accounting = dataclasses.replace(accounting, hybrid_kv_manager=False, chunked_local_hybrid=False)
    _check_workload(workload)
    stages = pp_layer_ranges(model.arch.num_layers, rs.pipeline_parallel_size, rs.pp_layer_partition)
    ranks = tuple(_rank(model, gpu, rs, accounting, i, layers) for i, layers in enumerate(stages))
    value = (accounting, rs, ranks, _base(model, gpu, serving, accounting, rs, ranks))
    _RANKS_MEMO.put(owners[:3], (serving,), value)
    _RANKS_BY_ID.put(owners, (), value)
    return value


def _check_workload(workload: Workload | None) -> None:
    if workload is not None:
        checked_int(workload.concurrency, "concurrency", 1, 1 << 20)
        checked_int(workload.replicas, "replicas", 1, MAX_REPLICAS)
        checked_int(workload.context_tokens, "context_tokens", 1, MAX_CONTEXT)


#: Resolved settings, rank plans and a plan's workload-free part by (model, GPU) identity and settings value; see
#: :func:`_ranks`.
_RANKS_MEMO: IdentityMemo[tuple[VllmAccounting, ResolvedServing, tuple[RankPlan, ...], _Base]] = IdentityMemo()
#: The same by the settings' identity too: one instance of settings is planned again and again (a deployment's
#: evaluations share :func:`~fitgate.operator.decision.evaluate.serving_config`'s, a suggestion search's candidates
#: are interned by :mod:`fitgate.sizing.advice`), and hashing every field and comparing them with the memo's cost
#: more than the rest of a memoised plan's lookups (issue 23). Bound 4096, as the memo by value it is a view of.
_RANKS_BY_ID: IdentityMemo[tuple[VllmAccounting, ResolvedServing, tuple[RankPlan, ...], _Base]] = IdentityMemo(4096)


def _packed_kv_bound(model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None) -> Plan:
    """A packed sub-byte KV cache (TurboQuant, NVFP4, int4 per head ...), which fitgate does not lay out (hunt32 F3).

    Every such dtype stores less than the model's dtype a token, so the plan at ``auto`` bounds it: where that
    fits, so does the packed cache (the verdict is that plan's, with a note); where it does not, the fit is not
    shown either way: Unknown (``NotModelledError``), never a denial for it.
    """
    bound = plan(model, gpu, dataclasses.replace(serving, kv_cache_dtype="auto"), workload)
    dtype = serving.kv_cache_dtype
    if bound.verdict is Verdict.DOES_NOT_FIT:
        raise NotModelledError(
            "kv_cache_dtype",
            dtype,
            "its packed sub-byte pages and scales; the fit is not checked (it does not fit "
            "at the model's dtype, which takes more)",
        )
    note = (
        f"--kv-cache-dtype {dtype}: its packed sub-byte pages are not sized; this plan holds the KV cache at the "
        "model's dtype, which takes more memory a token, so the packed cache fits at least as well (more tokens)"
    )
    return dataclasses.replace(
        bound, serving=dataclasses.replace(bound.serving, kv_cache_dtype=dtype), notes=(*bound.notes, note)
    )


def plan(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig | None = None,
    workload: Workload | None = None,
) -> Plan:
    """Size ``model`` on ``gpu`` with ``serving`` settings; the verdict comes with its reasons.

    DoesNotFit when weights and the profiling pass leave no KV memory, when the KV pool cannot hold
    one ``max_model_len`` request (vLLM refuses to start), when the declared workload needs more KV
    than the pool, or when the card cannot even provide ``total x gmu`` at start-up. Tight when a
    requirement uses more than 90 % of what is available, or when the memory outside the budget
    cannot hold CUDA graphs, the CUDA context and the sampler warm-up. Fits otherwise.

    Raises:
        SizingError: A setting is out of range or inconsistent with the model.
    """
    serving = serving or ServingConfig()
    if serving.kv_cache_dtype in KV_CACHE_DTYPES_NOT_SIZED:
        return _packed_kv_bound(model, gpu, serving, workload)
    if serving.max_model_len_auto:
        return plan_auto(plan, model, gpu, serving, workload)
    accounting, rs, ranks, base = _ranks(model, gpu, serving, workload)
    worst, kv, per_gpu = ranks[base.binding], base.kv, base.per_gpu
    if workload is not None:
        dcp = rs.parallel.decode_context_parallel_size
        wlen = cdiv(workload.context_tokens, dcp)
        # hunt203 F2: a sliding-window / chunked layer holds its window per running request, a step's batch beyond it
        # once (a step schedules max_num_batched_tokens in all; out-of-window blocks are freed: vLLM's in-flight
        # term caps one request, single_type_kv_cache_manager.py 0.34.0 L218-232), not once per request
        steady = ServingShape(wlen, 1 + rs.draft_tokens, worst.layout.block_size)
        wshape = ServingShape(wlen, rs.in_flight_tokens, worst.layout.block_size)
        once = blocks_per_request(worst.layout, wshape, accounting) - blocks_per_request(
            worst.layout, steady, accounting
        )
        workload_blocks = workload.per_replica * blocks_per_request(worst.layout, steady, accounting) + max(0, once)
        fraction = workload_blocks / kv.num_blocks if kv.num_blocks else None
        kv = copied(kv, {"workload_blocks": workload_blocks, "workload_fraction": fraction})
        required_kv = max(kv.one_request_bytes, workload_blocks * worst.layout.bytes_per_block)
        per_gpu = copied(per_gpu, {"headroom_bytes": worst.available_kv_bytes - required_kv})
    verdict, reasons = finish(base.judged, rs, kv, workload)
    if verdict is Verdict.DOES_NOT_FIT:
        smaller = _smaller_mxfp4_plan(model, gpu, serving, workload, accounting, worst.weights.total_bytes)
        if smaller is not None:
            return smaller
    # every field in field order, as ``Plan(...)`` would set them, without its frozen ``__init__`` (frozen.build)
    return build(
        Plan,
        model=model.name,
        gpu=gpu,
        serving=rs,
        workload=workload,
        verdict=verdict,
        reasons=reasons,
        per_gpu=per_gpu,
        kv=kv,
        ranks=ranks,
        binding_rank=base.binding,
        weights_estimated=model.inventory.estimated,
        max_model_len_that_fits=base.longest,
        notes=base.notes,
        host=base.host,
    )


def _smaller_mxfp4_plan(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    accounting: VllmAccounting,
    weights_bytes: int,
) -> Plan | None:
    """The plan on the smaller MXFP4 layout an install may pick, Tight, where only it fits; else None.

    gpt-oss on Hopper before vLLM 0.12.0: vLLM's image has no ``triton_kernels``, so Marlin's padded layout is
    sized, but an install that has it runs the Triton backend's smaller one (:mod:`fitgate.sizing.mxfp4`).
    fitgate cannot see which, so a start that only the Triton layout fits is Tight, never DoesNotFit; a
    backend stated with ``--mxfp4-backend`` is sized as stated.
    """
    arch = model.arch
    if serving.mxfp4_backend is not None or arch.quantization is None or arch.quantization.method != "mxfp4":
        return None
    if arch.model_type != "gpt_oss":
        return None
    default, other = mxfp4_layouts(accounting.version, gpu)
    if other is None:
        return None
    alt = plan(model, gpu, dataclasses.replace(serving, mxfp4_backend=other.backend), workload)
    if alt.verdict is Verdict.DOES_NOT_FIT:
        return None
    saved = weights_bytes - alt.ranks[alt.binding_rank].weights.total_bytes
    hopper = gpu.compute_capability == "9.0"
    picks = (
        f"picks on this GPU when the triton_kernels package is installed (sized here); vLLM's own image has no "
        f"triton_kernels and picks {default.backend.capitalize()}"
        if hopper
        else "of the gpt-oss launch image (vllm/vllm-openai:gptoss, which loaded gpt-oss-20b unpadded on an RTX 3090: "
        f"vllm#22331; sized here); the PyPI release picks {default.backend.capitalize()}"
    )
    reason = Reason(
        ReasonCode.MXFP4_NEEDS_TRITON_KERNELS,
        f"fits with the {other.backend.capitalize()} MXFP4 MoE layout that vLLM {alt.serving.vllm_version} {picks}, "
        f"whose padded experts take {fmt_gib(saved)} more per GPU ({fmt_gib(weights_bytes)} of weights): it would "
        f"not fit (--mxfp4-backend {default.backend} sizes it)",
    )
    kept = tuple(r for r in alt.reasons if r.code is not ReasonCode.FITS)
    return dataclasses.replace(alt, verdict=Verdict.TIGHT, reasons=(reason, *kept))


@dataclasses.dataclass(frozen=True)
class _Base:
    """What a plan is before its workload: the binding rank, the KV pool and per-GPU numbers without it, the notes."""

    binding: int
    kv: KVSummary  # workload_blocks and workload_fraction None
    per_gpu: PerGpu  # headroom_bytes for one max_model_len request
    need: OutsideNeed
    longest: int
    notes: tuple[str, ...]
    host: HostMemory | None
    judged: Prejudged  # the verdict's reasons that no workload changes (fitgate.sizing.judge)


def _base(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    accounting: VllmAccounting,
    rs: ResolvedServing,
    ranks: tuple[RankPlan, ...],
) -> _Base:
    binding = min(range(len(ranks)), key=lambda i: (ranks[i].num_blocks, ranks[i].available_kv_bytes))
    worst = ranks[binding]
    blocks = worst.num_blocks
    # decode context parallelism: each GPU holds cdiv(tokens, dcp) of a request (fitgate.sizing.parallel)
    dcp = rs.parallel.decode_context_parallel_size
    per_gpu_len = cdiv(rs.max_model_len, dcp)
    shape = ServingShape(per_gpu_len, rs.in_flight_tokens, worst.layout.block_size)
    one_request = max(
        request_check_bytes(r, ServingShape(per_gpu_len, rs.in_flight_tokens, r.layout.block_size)) for r in ranks
    )
    conc = max_concurrency(worst.layout, blocks, shape, accounting) if blocks else 0.0
    kv = KVSummary(
        bytes_per_token=max(r.layout.bytes_per_token for r in ranks),  # a stage's GPU holds its own layers (hunt172 F5)
        page_size_bytes=worst.layout.page_size_bytes,
        block_size=worst.layout.block_size,
        num_blocks=blocks,
        num_groups=len(worst.layout.groups),
        kinds=worst.layout.kinds,
        reported_tokens=reported_tokens(worst.layout, blocks, shape, accounting) * dcp if blocks else 0,
        max_concurrency=conc,
        one_request_bytes=one_request,
        workload_blocks=None,
        workload_fraction=None,
    )
    pool_bytes = blocks * worst.layout.bytes_per_block
    outside = gpu.memory_bytes - worst.requested_bytes
    per_gpu = PerGpu(
        capacity_bytes=gpu.memory_bytes,
        budget_bytes=worst.requested_bytes,
        weights_bytes=worst.loaded_weights_bytes,
        activation_bytes=worst.profile.activation_bytes,
        non_torch_bytes=worst.profile.non_torch_bytes + worst.profile.runner_state_bytes,
        cuda_graph_bytes=worst.profile.cuda_graph_bytes,
        kv_cache_bytes=max(0, pool_bytes),
        headroom_bytes=worst.available_kv_bytes - one_request,
        outside_budget_bytes=outside,
        cuda_graphs_in_budget=graphs_in_budget(model.arch, rs, accounting),
        lora_bytes=worst.lora.total_bytes if worst.lora else 0,
        cpu_offload_bytes=worst.offloaded_bytes,
    )
    need = max(
        (outside_need(model.arch, r, rs, accounting, r is ranks[-1]) for r in ranks), key=lambda n: n.floor_bytes
    )
    host = extras.host_memory(model.arch, rs, ranks)
    return _Base(
        binding,
        kv,
        per_gpu,
        need,
        max_model_len_that_fits(ranks, rs, model.arch.max_model_len_limit(accounting.version)),
        plan_notes(model, rs, per_gpu, accounting, serving.vllm_version)
        + extras.notes(model.arch, rs, ranks, worst, host),
        host,
        prejudge(rs, worst, kv, per_gpu, need, UNCOUNTED_BYTES.get(model.arch.model_type, 0), gpu.unified_memory,
                 pool_request_bytes(ranks, rs, per_gpu_len)),
    )  # fmt: skip
