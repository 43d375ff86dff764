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
from dataclasses import dataclass
from typing import Any

from fitgate.sizing import extras, multimodal, offload, speculative
from fitgate.sizing import lora as lora_slots
from fitgate.sizing.activation import CUDA_CONTEXT_BYTES, ProfileEstimate, estimate_profile, pre_snapshot_bytes
from fitgate.sizing.dtypes import MODEL_DTYPES, kv_dtype_bytes, served_dtype
from fitgate.sizing.errors import SizingError
from fitgate.sizing.extensible import (
    MARGIN_FLOOR_BYTES,
    ROCM_MARGIN_FLOOR_BYTES,
    blocks_within,
    measure_kv_bytes,
)
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.kv_layout import (
    MINIMAX_M3_BLOCK,
    KVLayout,
    blocks_per_request,
    build_layout,
    hybrid_block_size,
    layer_specs,
    max_concurrency,
    num_blocks,
    one_request_bytes,
    reported_tokens,
)
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.model import MLA, Attention, ModelArchitecture, Quantization
from fitgate.sizing.parallel import (
    BATCHED_DP_DEFAULT_TOKENS,
    EP_INTERNODE_RESIDENT_BYTES,
    all2all_buffer_bytes,
    all2all_uncounted,
    local_experts,
    resolve_layout,
    shared_experts_replicated,
)
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.results import KVSummary, ModelInput, PerGpu, Plan, RankPlan, Reason, Verdict
from fitgate.sizing.serving import ResolvedServing, ServingConfig, Workload
from fitgate.sizing.units import GiB, cdiv, fmt_gib
from fitgate.sizing.versions import VllmAccounting, accounting_for, release_note
from fitgate.sizing.weights import RankWeights, WeightInventory, pp_layer_ranges, weights_per_rank

#: ``--kv-cache-memory-bytes`` (``CacheConfig.kv_cache_memory_bytes``) exists from this release on.
KV_CACHE_MEMORY_SINCE = (0, 11, 0)
#: vLLM's ``--runner`` values fitgate sizes (``draft`` is internal to speculative decoding).
RUNNERS = ("generate", "pooling")
TIGHT_FRACTION = 0.90  # "Tight" when a requirement uses more than 90 % of what is there
#: The real CUDA-graph pool beyond vLLM's estimate, as a fraction of it (see OutsideNeed; fitted).
GRAPH_EXCESS_FRACTION = 0.43
MAX_CONTEXT = 1 << 24

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


def default_batch(gpu: GpuModel, accounting: VllmAccounting, offline: bool) -> tuple[int, int]:
    """VLLM's default (max_num_batched_tokens, max_num_seqs) for this card (reference section 9)."""
    big = gpu.memory_bytes >= 70 * GiB and not (accounting.a100_small_tier and gpu.is_a100)
    if accounting.big_gpu_tier_bytes is not None and gpu.memory_bytes >= accounting.big_gpu_tier_bytes:
        return 16384, 1024
    if big:
        return (16384 if offline else 8192), 1024
    return (8192 if offline else 2048), 256


def _positive_int(value: int | None, name: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SizingError(name, value, f"an integer from {low} to {high}")
    return value


def resolve_serving(
    arch: ModelArchitecture, gpu: GpuModel, serving: ServingConfig, accounting: VllmAccounting
) -> ResolvedServing:
    """Validate the settings and fill in vLLM's defaults; errors name the flag, value and range."""
    tp = _positive_int(serving.tensor_parallel_size, "tensor_parallel_size", 1, 64) or 1
    pp = _positive_int(serving.pipeline_parallel_size, "pipeline_parallel_size", 1, 64) or 1
    if tp * pp > 64:
        raise SizingError("tensor_parallel_size x pipeline_parallel_size", tp * pp, "at most 64 GPUs")
    heads = arch.attention_heads
    if heads and heads % tp:
        raise SizingError(
            "tensor_parallel_size",
            tp,
            f"a divisor of the model's {heads} attention heads",
            "vLLM shards heads evenly",
        )
    kv = arch.kv_heads
    if kv and kv % tp and tp % kv:
        raise SizingError("tensor_parallel_size", tp, f"a divisor or multiple of the model's {kv} KV heads")
    if pp > arch.num_layers:
        raise SizingError("pipeline_parallel_size", pp, f"at most the model's {arch.num_layers} layers")
    extensible = _extensible(serving, accounting)
    gmu = serving.gpu_memory_utilization
    if gmu is None:
        # 0.34: 1.0 with the extensible KV cache (config/cache.py 0.34.0 L495-501), else 0.92
        gmu = 1.0 if extensible else accounting.default_gpu_memory_utilization
    if isinstance(gmu, bool) or not isinstance(gmu, int | float) or not 0 < gmu <= 1:
        raise SizingError("gpu_memory_utilization", gmu, "a fraction greater than 0 and at most 1")
    model_max = arch.max_model_len_limit(accounting.version)
    max_len = _positive_int(serving.max_model_len, "max_model_len", 1, MAX_CONTEXT) or arch.default_max_model_len(
        accounting.version
    )
    if max_len > model_max:
        # vLLM's own refusal (config/model.py 0.34.0 L2700-2727): honoured only with the env override
        key = arch.max_len_key or "max_position_embeddings"
        raise SizingError(
            "max_model_len",
            max_len,
            f"at most the derived max_model_len ({key}={model_max} with RoPE scaling as vLLM "
            f"{accounting.label} applies it); vLLM refuses more unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        )
    dtype = served_dtype(serving.dtype, arch.dtype, arch.model_type, gpu.compute_capability)  # float16 on a T4
    kv_bytes = kv_dtype_bytes(serving.kv_cache_dtype, dtype)
    if arch.compressed_sparse_mla:
        # DeepSeek V4's default CUDA backends store fp8_ds_mla entries: "auto" becomes fp8, anything
        # else but fp8 is an error (vllm/models/deepseek_v4/attention.py 0.33.0 L107-123).
        if serving.kv_cache_dtype != "auto" and not serving.kv_cache_dtype.startswith("fp8"):
            raise SizingError(
                "kv_cache_dtype", serving.kv_cache_dtype, "auto or fp8 (DeepSeek V4 stores fp8_ds_mla entries)"
            )
        kv_bytes = 1
    quant = serving.quantization
    if quant is not None and quant not in RUNTIME_QUANTIZATION and (arch.quantization is None):
        raise SizingError(
            "quantization",
            quant,
            "one of " + ", ".join(RUNTIME_QUANTIZATION) + " for an unquantized checkpoint",
        )
    default_tokens, default_seqs = default_batch(gpu, accounting, serving.offline)
    seqs = _positive_int(serving.max_num_seqs, "max_num_seqs", 1, 65536) or default_seqs
    if accounting.engine == "V0":
        chunked = max_len > 32768
        default_tokens = 2048 if chunked else max(max_len, 2048)
        seqs = serving.max_num_seqs or 256
    layout = resolve_layout(
        arch,
        tp=tp,
        pp=pp,
        data_parallel_size=serving.data_parallel_size,
        data_parallel_size_local=serving.data_parallel_size_local,
        enable_expert_parallel=serving.enable_expert_parallel,
        enable_eplb=serving.enable_eplb,
        num_redundant_experts=serving.num_redundant_experts,
        all2all_backend=serving.all2all_backend,
        decode_context_parallel_size=serving.decode_context_parallel_size,
    )
    if layout.batched_dp_moe and accounting.engine == "V1":
        default_tokens = BATCHED_DP_DEFAULT_TOKENS  # DeepEP low-latency / nixl_ep (arg_utils.py 0.33.0 L3166-3170)
    tokens = _positive_int(serving.max_num_batched_tokens, "max_num_batched_tokens", 1, MAX_CONTEXT) or default_tokens
    kv_memory = _positive_int(serving.kv_cache_memory_bytes, "kv_cache_memory_bytes", 1, gpu.memory_bytes)
    if kv_memory is not None and accounting.version < KV_CACHE_MEMORY_SINCE:
        since = ".".join(map(str, KV_CACHE_MEMORY_SINCE))
        raise SizingError("kv_cache_memory_bytes", kv_memory, f"vLLM {since} or later (--kv-cache-memory-bytes)")
    interconnect = serving.interconnect or gpu.interconnect
    if interconnect not in ("nvlink", "pcie"):
        raise SizingError("interconnect", interconnect, "nvlink or pcie")
    if serving.runner not in RUNNERS:
        raise SizingError("runner", serving.runner, "generate or pooling (vLLM's --runner)")
    block = _positive_int(serving.block_size, "block_size", 1, 4096)
    if block is not None and block % 16 and block not in (1, 8):
        raise SizingError("block_size", block, "1, 8 or a multiple of 16 (vLLM's CUDA block sizes)")
    if block is not None and block % MINIMAX_M3_BLOCK and _block_sparse(arch):
        raise SizingError("block_size", block, "a multiple of 128 (MiniMax M3's 128-token sparse pages)")
    if serving.runner == "pooling" and (serving.speculative_method or serving.speculative_tokens):
        raise SizingError("speculative_config", serving.speculative_method, "none with --runner pooling")
    # --- LoRA, weight offload, KV connectors (issue 20) ---
    lora = lora_slots.resolve_lora(
        enable=serving.enable_lora,
        max_loras=serving.max_loras,
        max_lora_rank=serving.max_lora_rank,
        max_cpu_loras=serving.max_cpu_loras,
        fully_sharded=serving.fully_sharded_loras,
        lora_dtype=serving.lora_dtype,
        model_dtype_bytes=MODEL_DTYPES[dtype],
        tp=tp,
    )
    offload_bytes = serving.cpu_offload_bytes
    if isinstance(offload_bytes, bool) or not isinstance(offload_bytes, int) or not 0 <= offload_bytes <= 1 << 50:
        raise SizingError("cpu_offload_gb", offload_bytes, "a size from 0 to 1 PiB")
    offload.check_kv_transfer(
        serving.kv_connector,
        serving.kv_role,
        serving.kv_offloading_backend,
        serving.kv_offloading_bytes,
        serving.kv_buffer_device,
    )
    mm_cache = 4 * GiB if serving.mm_processor_cache_bytes is None else serving.mm_processor_cache_bytes
    if isinstance(mm_cache, bool) or not isinstance(mm_cache, int) or not 0 <= mm_cache <= 1 << 50:
        raise SizingError("mm_processor_cache_gb", mm_cache, "a size from 0 to 1 PiB")
    if serving.mm_encoder_tp_mode not in ("weights", "data"):
        raise SizingError("mm_encoder_tp_mode", serving.mm_encoder_tp_mode, "weights or data")
    return ResolvedServing(
        max_model_len=max_len,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        block_size=block or _default_block_size(arch, gpu),
        block_size_given=block is not None,
        dtype=dtype,
        kv_cache_dtype=serving.kv_cache_dtype,
        kv_dtype_bytes=kv_bytes,
        quantization=quant,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_memory_utilization=float(gmu),
        enforce_eager=serving.enforce_eager,
        vllm_version=accounting.label,
        kv_cache_memory_bytes=kv_memory,
        interconnect=interconnect,
        runner=serving.runner,
        speculative=speculative.resolve(arch, serving.speculative_method, serving.speculative_tokens),
        parallel=layout,
        lora=lora,
        cpu_offload_bytes=offload_bytes,
        kv_offloading_bytes=serving.kv_offloading_bytes,
        kv_offloading_backend=serving.kv_offloading_backend,
        kv_connector=offload.effective_connector(
            serving.kv_connector, serving.kv_offloading_bytes, serving.kv_offloading_backend
        ),
        kv_role="kv_both" if serving.kv_offloading_bytes is not None else serving.kv_role,
        kv_buffer_device=serving.kv_buffer_device,
        limit_mm_per_prompt=serving.limit_mm_per_prompt,
        mm_encoder_tp_mode=serving.mm_encoder_tp_mode,
        mm_processor_cache_bytes=mm_cache if arch.vision is not None else 0,
        lora_target_modules=serving.lora_target_modules,
        extensible_kv_cache=extensible,
    )


def _extensible(serving: ServingConfig, accounting: VllmAccounting) -> bool:
    """Whether vLLM sizes the KV cache after warm-up (0.34+, ``VllmConfig._resolve_extensible_kv_cache``).

    Off with ``--kv-cache-memory-bytes`` (config/vllm.py 0.34.0 L3203-3207) or
    ``--no-enable-extensible-kv-cache``; asking for both is vLLM's start-up error (L3261-3262).
    Releases before 0.34 have no such cache: the setting is ignored there.
    """
    if not accounting.extensible_kv_cache:
        return False
    if serving.kv_cache_memory_bytes is not None:
        if serving.extensible_kv_cache:
            raise SizingError(
                "enable_extensible_kv_cache",
                True,
                "off with kv_cache_memory_bytes (vLLM: it sizes the KV cache from measured memory, "
                "which kv_cache_memory_bytes overrides)",
            )
        return False
    return serving.extensible_kv_cache is not False


def _block_sparse(arch: ModelArchitecture) -> bool:
    """MiniMax M3: softmax attention layers with an indexer cache (block-sparse, 128-token pages)."""
    return arch.attention_indexed


def _default_block_size(arch: ModelArchitecture, gpu: GpuModel) -> int:
    """16 on CUDA and ROCm; MLA the GPU's MLA backend block (gpus.json: CUTLASS MLA's 128 on Blackwell); sparse MLA 64.

    vllm/platforms/cuda.py: FlashMLA-sparse (DeepSeek V3.2, GLM-5) and FlashMLA use 64-token blocks,
    CUTLASS MLA on Blackwell 128.
    """
    if arch.compressed_sparse_mla:
        # DeepSeek V4: DeepseekSparseSWABackend.get_preferred_block_size() returns 256
        # (vllm/v1/attention/backends/mla/sparse_swa.py 0.33.0 L164-166).
        return 256
    if _block_sparse(arch):
        return MINIMAX_M3_BLOCK
    if arch.mla_indexed:
        return 64
    if arch.uses_mla:
        return gpu.mla_block_size
    return 16


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
        dtype=rs.dtype,
        runtime_quantization=_runtime_quantization(arch, rs.quantization),
        pooling=rs.runner == "pooling",
        drafter_layers=drafter,
        moe_tp=rs.parallel.moe_tp,
        ep_size=rs.parallel.ep_size,
        redundant_experts=rs.parallel.redundant_experts,
        shared_experts_replicated=shared_experts_replicated(arch, rs.parallel),
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
        gpu=gpu,
        interconnect=rs.interconnect,
        pooling=rs.runner == "pooling",
        decode_query_len=rs.decode_query_len,
        moe_tp=rs.parallel.moe_tp,
        all2all_bytes=all2all_buffer_bytes(arch, rs.parallel, rs.max_num_batched_tokens),
        graph_cases=lora_slots.graph_cases(rs.lora),
    )
    kv_layers = [*layers, *drafter]  # the drafter's attention layers share the KV pool
    num_spec = rs.draft_tokens  # conv states keep the draft tokens too
    layout = _kv_layout(arch, tuple(kv_layers), tp, rs.kv_dtype_bytes, dtype_bytes, rs.block_size, accounting, num_spec)
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
    if pp_rank == 0:  # the encoder pass runs on the first pipeline stage (gpu/model_runner.py 0.33.0 L1023)
        encoder = multimodal.encoder_profile(
            arch,
            max_model_len=rs.max_model_len,
            max_num_batched_tokens=rs.max_num_batched_tokens,
            max_num_seqs=rs.max_num_seqs,
            limits=rs.limit_mm_per_prompt,
            tp=tp,
            tp_mode=rs.mm_encoder_tp_mode,
            dtype_bytes=dtype_bytes,
        )
    if encoder is not None and encoder.items:
        # the encoder runs first; its outputs stay in the encoder cache through the decoder's dummy
        # pass and the sampler's (gpu_model_runner.py 0.33.0 L6084-6137)
        peak = max(encoder.forward_bytes, encoder.outputs_bytes + profile.activation_bytes)
        profile = dataclasses.replace(profile, activation_bytes=peak)
    decoder_bytes = weights.tensors_bytes - weights.embedding_bytes
    offloaded = offload.offloaded_bytes(rs.cpu_offload_bytes, decoder_bytes)
    resident = weights.total_bytes - offloaded + (adapters.total_bytes if adapters else 0)
    non_kv = resident + profile.activation_bytes + profile.non_torch_bytes
    if rs.extensible_kv_cache:
        extensible = _extensible_rank(gpu, rs, pp_rank, layers, weights, profile, non_kv, layout, resident)
        return dataclasses.replace(extensible, lora=adapters, offloaded_bytes=offloaded, encoder=encoder)
    if _graphs_in_budget(arch, rs, accounting):
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
        pp_rank,
        layers,
        weights,
        profile,
        requested,
        non_kv,
        available,
        layout,
        num_blocks(layout, available),
        lora=adapters,
        offloaded_bytes=offloaded,
        encoder=encoder,
    )


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
    graphs = 0 if rs.enforce_eager else profile.cuda_graph_bytes
    # Resident after capture: weights, non-torch growth, the persistent MoE workspace, the graph pool.
    on_gpu = weights.total_bytes if weights_resident_bytes is None else weights_resident_bytes
    resident = on_gpu + profile.non_torch_bytes + profile.moe_workspace_bytes + graphs
    # Seed of the transient reserve: peak_activation_memory = transient headroom + graph estimate (0 here).
    transient = profile.activation_bytes - profile.moe_workspace_bytes
    measured = measure_kv_bytes(
        requested_bytes=requested,
        # a multi-node EP group's communicators are resident before the snapshot too (fitgate.sizing.parallel)
        init_free_bytes=gpu.memory_bytes
        - pre_snapshot_bytes(rs.tensor_parallel_size)
        - (EP_INTERNODE_RESIDENT_BYTES if rs.parallel.internode else 0),
        resident_bytes=resident,
        transient_bytes=transient,
        margin_floor_bytes=ROCM_MARGIN_FLOOR_BYTES if gpu.vendor == "amd" else MARGIN_FLOOR_BYTES,
    )
    blocks = blocks_within(measured.available_bytes, _segment_strides(layout), capacity)
    # the null block: packed layouts already count it in one_request_bytes (kv_layout.one_request_bytes)
    held_back = 0 if layout.packed else 1
    available = max(0, (blocks - held_back) * layout.bytes_per_block) if blocks else measured.available_bytes
    return RankPlan(pp_rank, layers, weights, profile, requested, requested - available, available, layout, blocks)


def _segment_strides(layout: KVLayout) -> tuple[int, ...]:
    """The extensible cache's segments: one per KV tensor of a layer-outermost layout (one when packed).

    ``ExtensibleKVCache._segments`` (extensible_kv_cache.py 0.34.0 L127-172): block-compact
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
) -> KVLayout:
    """Layer specs, the hybrid block size and their grouping (:func:`build_layout`) for one rank, memoised."""

    def compute() -> KVLayout:
        specs = layer_specs(arch, kv_layers, tp, kv_dtype_bytes, dtype_bytes, block_size, accounting, num_spec)
        block = hybrid_block_size(specs, block_size, mla=arch.uses_mla)
        if block != block_size:
            specs = layer_specs(arch, kv_layers, tp, kv_dtype_bytes, dtype_bytes, block, accounting, num_spec)
        return build_layout(specs, accounting)

    settings = (kv_layers, tp, kv_dtype_bytes, dtype_bytes, block_size, accounting, num_spec)
    return _LAYOUT_MEMO.get((arch,), settings, compute)


def _ranks(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None
) -> tuple[VllmAccounting, ResolvedServing, tuple[RankPlan, ...]]:
    """The settings resolved and every pipeline rank planned: what a plan is before its workload.

    They depend on the model, the GPU and the settings only, and thousands of deployments (and every
    suggestion and alternative re-planned for them) share those while their workloads differ, so they
    are memoised by the model's and GPU's identity and the settings' value (issue 23). A failure is
    not remembered: the next call raises it again, in the same order (settings, workload, ranks).
    """
    hit = _RANKS_MEMO.peek((model.arch, model.inventory, gpu), (serving,))
    if hit is not None:
        _check_workload(workload)
        return hit
    accounting = accounting_for(serving.vllm_version, serving.engine)
    rs = resolve_serving(model.arch, gpu, serving, accounting)
    if offload.disables_hybrid_manager(rs.kv_connector) and accounting.engine == "V1":
        # a KV connector without SupportsHMA turns the hybrid KV cache manager off (config/vllm.py 0.33.0
        # L2257-2280): sliding-window and chunked-local layers are sized as full attention (issue 20)
        accounting = dataclasses.replace(accounting, hybrid_kv_manager=False, chunked_local_hybrid=False)
    _check_workload(workload)
    stages = pp_layer_ranges(model.arch.num_layers, rs.pipeline_parallel_size)
    ranks = tuple(_rank(model, gpu, rs, accounting, i, layers) for i, layers in enumerate(stages))
    value = (accounting, rs, ranks)
    _RANKS_MEMO.get((model.arch, model.inventory, gpu), (serving,), lambda: value)
    return value


def _check_workload(workload: Workload | None) -> None:
    if workload is not None:
        _positive_int(workload.concurrency, "concurrency", 1, 1 << 20)
        _positive_int(workload.context_tokens, "context_tokens", 1, MAX_CONTEXT)


#: Resolved settings and rank plans by (model, GPU) identity and settings value; see :func:`_ranks`.
_RANKS_MEMO: IdentityMemo[tuple[VllmAccounting, ResolvedServing, tuple[RankPlan, ...]]] = IdentityMemo()


def _longest(ranks: tuple[RankPlan, ...], rs: ResolvedServing, model_max: int) -> int:
    """:func:`max_model_len_that_fits`, once per rank plans (a binary search of ~10 one-request sums)."""
    return _LONGEST_MEMO.get((ranks, rs), (model_max,), lambda: max_model_len_that_fits(ranks, rs, model_max))


#: By the identity of the memoised rank plans (:data:`_RANKS_MEMO`): workloads do not change it.
_LONGEST_MEMO: IdentityMemo[int] = IdentityMemo()


def _graphs_in_budget(arch: ModelArchitecture, rs: ResolvedServing, accounting: VllmAccounting) -> bool:
    """Whether vLLM deducts its CUDA-graph estimate from the KV budget for this run.

    Not with ``--kv-cache-memory-bytes`` (no profiling: gpu_worker.py 0.33.0 L656-681), not under
    ``--enforce-eager``, not on a V2-runner model of 0.22-0.28 (its estimate is a stub returning 0).
    """
    if rs.extensible_kv_cache:
        return not rs.enforce_eager  # measured after capture (gpu_worker.py 0.34.0 L1098-1101, L1226-1240)
    return (
        accounting.cudagraph_in_budget
        and not rs.enforce_eager
        and rs.kv_cache_memory_bytes is None
        and not accounting.v2_runner_without_cudagraph_estimate(arch.architecture)
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
    accounting, rs, ranks = _ranks(model, gpu, serving, workload)
    binding = min(range(len(ranks)), key=lambda i: (ranks[i].num_blocks, ranks[i].available_kv_bytes))
    worst = ranks[binding]
    blocks = worst.num_blocks
    # decode context parallelism: each GPU holds cdiv(tokens, dcp) of a request (fitgate.sizing.parallel)
    dcp = rs.parallel.decode_context_parallel_size
    per_gpu_len = cdiv(rs.max_model_len, dcp)
    shape = ServingShape(per_gpu_len, rs.max_num_batched_tokens, worst.layout.block_size)
    one_request = max(
        one_request_bytes(r.layout, ServingShape(per_gpu_len, rs.max_num_batched_tokens, r.layout.block_size))
        for r in ranks
    )
    workload_blocks = None
    workload_fraction = None
    if workload is not None:
        wlen = cdiv(workload.context_tokens, dcp)
        wshape = ServingShape(wlen, rs.max_num_batched_tokens, worst.layout.block_size)
        workload_blocks = workload.concurrency * blocks_per_request(worst.layout, wshape, accounting)
        workload_fraction = workload_blocks / blocks if blocks else None
    conc = max_concurrency(worst.layout, blocks, shape, accounting) if blocks else 0.0
    kv = KVSummary(
        bytes_per_token=sum(r.layout.bytes_per_token for r in ranks),
        page_size_bytes=worst.layout.page_size_bytes,
        block_size=worst.layout.block_size,
        num_blocks=blocks,
        num_groups=len(worst.layout.groups),
        kinds=worst.layout.kinds,
        reported_tokens=reported_tokens(worst.layout, blocks, shape, accounting) * dcp if blocks else 0,
        max_concurrency=conc,
        one_request_bytes=one_request,
        workload_blocks=workload_blocks,
        workload_fraction=workload_fraction,
    )
    pool_bytes = blocks * worst.layout.bytes_per_block
    required_kv = one_request
    if workload_blocks is not None:
        required_kv = max(required_kv, workload_blocks * worst.layout.bytes_per_block)
    outside = gpu.memory_bytes - worst.requested_bytes
    per_gpu = PerGpu(
        capacity_bytes=gpu.memory_bytes,
        budget_bytes=worst.requested_bytes,
        weights_bytes=worst.loaded_weights_bytes,
        activation_bytes=worst.profile.activation_bytes,
        non_torch_bytes=worst.profile.non_torch_bytes,
        cuda_graph_bytes=worst.profile.cuda_graph_bytes,
        kv_cache_bytes=max(0, pool_bytes),
        headroom_bytes=worst.available_kv_bytes - required_kv,
        outside_budget_bytes=outside,
        cuda_graphs_in_budget=_graphs_in_budget(model.arch, rs, accounting),
        lora_bytes=worst.lora.total_bytes if worst.lora else 0,
        cpu_offload_bytes=worst.offloaded_bytes,
    )
    outside_need = max(
        (_outside_need(model.arch, r, rs, accounting, r is ranks[-1]) for r in ranks), key=lambda n: n.floor_bytes
    )
    verdict, reasons = _verdict(rs, worst, kv, per_gpu, workload, accounting, outside_need)
    host = extras.host_memory(model.arch, rs, ranks)
    return Plan(
        model=model.name,
        gpu=gpu,
        serving=rs,
        workload=workload,
        verdict=verdict,
        reasons=reasons,
        per_gpu=per_gpu,
        kv=kv,
        ranks=ranks,
        binding_rank=binding,
        weights_estimated=model.inventory.estimated,
        max_model_len_that_fits=_longest(ranks, rs, model.arch.max_model_len_limit(accounting.version)),
        notes=_notes(model, rs, per_gpu, accounting, serving.vllm_version)
        + extras.notes(model.arch, rs, ranks, worst, host),
        host=host,
    )


def _notes(
    model: ModelInput, rs: ResolvedServing, g: PerGpu, accounting: VllmAccounting, given_version: str | None = None
) -> tuple[str, ...]:
    notes = []
    newer = release_note(given_version)
    if newer is not None:
        notes.append(newer)
    if rs.extensible_kv_cache:
        notes.append(
            f"vLLM {rs.vllm_version} sizes the KV cache after warm-up and CUDA-graph capture (extensible KV cache): "
            "the pool is the memory left less the transient peak (activation + graph estimate) and a margin of "
            "max(1 GiB, 0.75 x that peak); allocator fragmentation during warm-up is not modelled"
        )
    if model.inventory.estimated:
        notes.append("weights estimated from config.json (no safetensors metadata or total size)")
    if not accounting.chunked_local_hybrid and any(getattr(m.mixer, "chunk_size", None) for m in model.arch.layers):
        notes.append(
            f"chunked local attention is sized as full attention: vLLM {accounting.label} disables the hybrid KV "
            "cache manager for it unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (the default from 0.14)"
        )
    if model.arch.model_type == "deepseek_v4":
        notes.append(
            "DeepSeek V4: its KV layout follows vLLM 0.33, but the model's top-k, prefill and hyper-connection "
            "workspaces are not counted: vLLM's KV budget can be a few GiB per GPU smaller "
            "(on one public 0.25 log, 2 x RTX PRO 6000, the plan had 50 % more available KV than vLLM printed "
            "without counting its MTP drafter)"
        )
    spec = rs.speculative
    if spec is not None and spec.drafter_layers:
        notes.append(
            f"speculative decoding ({spec.method}, {spec.num_tokens} draft tokens): the checkpoint's "
            f"{spec.drafter_layers} MTP layer(s) are counted on the last pipeline stage (weights and KV cache, each "
            f"sized as layer {spec.template_layer}); the drafter's own CUDA graphs and profiling pass are not"
        )
    elif spec is not None and not spec.counted:
        notes.append(
            f"speculative decoding ({spec.method}): the drafter is another checkpoint and is not counted; its "
            "weights, KV cache and CUDA graphs come out of this budget, so the KV pool is overestimated "
            "(keep your --speculative-config: the recommended args do not repeat it)"
        )
    elif spec is not None:
        notes.append(
            f"speculative decoding ({spec.method}, {spec.num_tokens} draft tokens): no drafter memory; CUDA "
            "graphs are captured for up to max_num_seqs x (1 + draft tokens) x 2 tokens"
        )
    if not g.cuda_graphs_in_budget and not rs.enforce_eager:
        notes.append("CUDA graphs are captured after KV sizing and must fit outside the gpu_memory_utilization budget")
    notes.extend(_parallel_notes(model.arch, rs))
    return tuple(notes)


def _parallel_notes(arch: ModelArchitecture, rs: ResolvedServing) -> list[str]:
    """What the data / expert / decode-context layout changed, and what of it is not counted."""
    lay, notes = rs.parallel, []
    moe = arch.first_moe
    tp, dp = rs.tensor_parallel_size, lay.data_parallel_size
    if moe is not None and lay.expert_parallel:
        held = local_experts(moe.num_experts, lay.redundant_experts, lay.ep_size)
        extra = f" + {lay.redundant_experts} redundant (EPLB)" if lay.redundant_experts else ""
        notes.append(
            f"expert parallelism: the experts are spread over TP {tp} x DP {dp} = {lay.ep_size} GPUs, whole; "
            f"the fullest GPU holds {held} of {moe.num_experts}{extra} per MoE layer; attention and dense layers "
            f"are TP {tp}-sharded in each of the {dp} engine ranks, each with its own KV cache"
        )
        if shared_experts_replicated(arch, lay):
            notes.append("sequence-parallel MoE (EP, TP > 1, DP > 1): the shared experts are whole on every GPU")
    elif moe is not None and dp > 1:
        notes.append(
            f"data parallelism without --enable-expert-parallel: vLLM TP-shards every expert over TP {tp} x DP {dp} "
            f"= {lay.moe_tp} GPUs (fused_moe/config.py 0.33.0 L1105-1114)"
        )
    if moe is not None and dp > 1 and (not lay.expert_parallel or lay.all2all_backend == "allgather_reducescatter"):
        notes.append(
            "the MoE workspace is sized for this rank's max_num_batched_tokens; tokens the DP ranks gather into "
            "one MoE call (allgather_reducescatter) are not counted"
        )
    if all2all_uncounted(arch, lay):
        notes.append(f"all2all backend {lay.all2all_backend}: its buffers are sized inside its library; not counted")
    elif moe is not None and lay.expert_parallel and dp > 1 and lay.all2all_backend.startswith("deepep"):
        notes.append(
            f"all2all backend {lay.all2all_backend}: its DeepEP buffers "
            f"({fmt_gib(all2all_buffer_bytes(arch, lay, rs.max_num_batched_tokens))} per GPU) are counted as "
            "non-torch memory"
        )
    if lay.decode_context_parallel_size > 1:
        notes.append(
            f"decode context parallelism {lay.decode_context_parallel_size}: each GPU holds 1/"
            f"{lay.decode_context_parallel_size} of every request's tokens"
        )
        if any(
            not isinstance(layer.mixer, MLA | Attention) or getattr(layer.mixer, "sliding_window", None)
            for layer in arch.layers
            if layer.mixer is not None
        ):
            notes.append(
                "decode context parallelism: vLLM 0.33 supports it for full attention and MLA caches only "
                "(sliding-window, chunked-local and Mamba managers assert dcp_world_size == 1)"
            )
    return notes


@dataclass(frozen=True)
class OutsideNeed:
    """What must fit in ``total - total x gmu`` on one worker after vLLM has allocated the KV cache.

    Attributes:
        pre_snapshot_bytes: CUDA context, cuBLAS, NCCL and all-reduce buffers created before the start
            snapshot (``activation.pre_snapshot_bytes``: measured, 0.51 GiB at TP1, 1.53 GiB at TP > 1).
        graphs_bytes: The CUDA-graph pool where vLLM captures it after sizing the KV cache without
            deducting an estimate (before 0.20; 0.22-0.28 V2-runner models; ``VLLM_MEMORY_PROFILER_
            ESTIMATE_CUDAGRAPHS=0``): ``activation.cuda_graph_bytes`` (fitted on the 0.19 H100 logs).
        sampler_floor_bytes: The post-capture sampler warm-up's floor: the logits of
            ``min(max_num_seqs, max_num_batched_tokens)`` rows in the model dtype plus their fp32 copy
            (``logits.to(torch.float32)``, v1/sample/sampler.py 0.19.0 L89-90). It runs after capture
            on the last pipeline stage, in ``compile_or_warm_up_model`` of the V1 runner (gpu_worker.py
            0.8.5 L244-255, 0.10.1 L317-335, 0.19.0 L660-690, 0.33.0 L1070-1090: not for the V2 runner) and of every
            runner in 0.34 (L1181-1195); its memory is outside the profiled budget.
        sampler_fitted_bytes: The same pass as fitgate's fitted sampler profile (sort buffers included).
        graphs_excess_bytes: Where vLLM deducts its graph estimate, what the real pool takes beyond it
            (fitted: 0.43 x the estimate, the largest actual / estimated ratio, 1.43, of the 36 "CUDA graph
            pool memory: X (actual), Y (estimated)" pairs in the 0.19 H100 logs of shared/calibration).
    """

    pre_snapshot_bytes: int
    graphs_bytes: int
    sampler_floor_bytes: int
    sampler_fitted_bytes: int
    graphs_excess_bytes: int = 0

    @property
    def floor_bytes(self) -> int:
        """What is certainly needed: deny when the card lacks this."""
        return self.pre_snapshot_bytes + self.graphs_bytes + self.sampler_floor_bytes

    @property
    def fitted_bytes(self) -> int:
        """What the fitted terms predict: Tight when the card lacks this."""
        sampler = max(self.sampler_floor_bytes, self.sampler_fitted_bytes)
        return self.pre_snapshot_bytes + self.graphs_bytes + self.graphs_excess_bytes + sampler


def _outside_need(
    arch: ModelArchitecture, rank: RankPlan, rs: ResolvedServing, accounting: VllmAccounting, last_stage: bool
) -> OutsideNeed:
    """The memory outside ``total x gmu`` one worker needs, derived per release (docs/vllm-releases.md section 17).

    Checked on the 0.19 H100 logs of shared/calibration: gpt-oss-20b at gmu 0.95 failed warming up the
    sampler at TP1 and TP2 and ran at TP2 with gmu 0.9; Llama 4 Scout ran with 1M tokens on 8 x H100
    at the default gmu (blog.vllm.ai/2025/04/05/llama4.html, vLLM 0.8.3).
    """
    in_budget = _graphs_in_budget(arch, rs, accounting)
    graphs = 0 if rs.enforce_eager or in_budget else rank.profile.cuda_graph_bytes
    excess = int(GRAPH_EXCESS_FRACTION * rank.profile.cuda_graph_bytes) if in_budget else 0
    warm_up = last_stage and rs.runner != "pooling" and accounting.engine == "V1"
    if accounting.version < (0, 34, 0) and accounting.uses_v2_runner(arch.architecture):
        warm_up = False
    floor = fitted = 0
    if warm_up:
        rows = min(rs.max_num_seqs, rs.max_num_batched_tokens)
        floor = rows * arch.vocab_size * (MODEL_DTYPES[rs.dtype] + 4)
        fitted = rank.profile.sampler_bytes
    return OutsideNeed(pre_snapshot_bytes(rs.tensor_parallel_size), graphs, floor, fitted, excess)


def _verdict(
    rs: ResolvedServing,
    worst: RankPlan,
    kv: KVSummary,
    g: PerGpu,
    workload: Workload | None,
    accounting: VllmAccounting,
    outside: OutsideNeed | None = None,
) -> tuple[Verdict, tuple[Reason, ...]]:
    hard: list[Reason] = []
    soft: list[Reason] = []
    budget, avail = g.budget_bytes, worst.available_kv_bytes
    if rs.kv_cache_memory_bytes is not None and g.capacity_bytes - CUDA_CONTEXT_BYTES < g.budget_bytes:
        hard.append(
            Reason(
                ReasonCode.KV_CACHE_MEMORY_EXCEEDS_GPU,
                f"kv_cache_memory_bytes {fmt_gib(rs.kv_cache_memory_bytes)} + weights and activations "
                f"{fmt_gib(worst.non_kv_bytes)} = {fmt_gib(budget)} per GPU, more than the "
                f"{fmt_gib(g.capacity_bytes - CUDA_CONTEXT_BYTES)} a {fmt_gib(g.capacity_bytes)} card has "
                "after its CUDA context: vLLM runs out of memory allocating the KV cache",
            )
        )
    elif g.capacity_bytes - pre_snapshot_bytes(rs.tensor_parallel_size) < g.budget_bytes and not rs.extensible_kv_cache:
        # vLLM refuses free < requested at its start snapshot (v1/worker/utils.py 0.33.0 L716-772); free is total less
        # what exists before it (CUDA context, NCCL at TP > 1). 0.34's extensible cache skips this check: the
        # budget is only a cap (v1/worker/utils.py 0.34.0 L783-797).
        held = pre_snapshot_bytes(rs.tensor_parallel_size)
        hard.append(
            Reason(
                ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH,
                f"gpu_memory_utilization {rs.gpu_memory_utilization} asks for {fmt_gib(budget)} "
                f"of a {fmt_gib(g.capacity_bytes)} "
                f"card, but the CUDA context{' and NCCL' if rs.tensor_parallel_size > 1 else ''} already "
                f"hold ~{fmt_gib(held)}: vLLM refuses to start",
            )
        )
    if avail <= 0 and rs.extensible_kv_cache:
        hard.append(
            Reason(
                ReasonCode.WEIGHTS_EXCEED_BUDGET if g.weights_bytes > budget else ReasonCode.NO_KV_CACHE_MEMORY,
                f"weights {fmt_gib(g.weights_bytes)} + activation {fmt_gib(g.activation_bytes)} + non-torch "
                f"{fmt_gib(g.non_torch_bytes)} + CUDA graphs {fmt_gib(g.cuda_graph_bytes)}, with vLLM "
                f"{rs.vllm_version}'s warm-up reserve and margin, leave no memory for the KV cache in "
                f"{fmt_gib(budget)} per GPU",
            )
        )
    elif avail <= 0:
        hard.append(
            Reason(
                ReasonCode.WEIGHTS_EXCEED_BUDGET if g.weights_bytes > budget else ReasonCode.NO_KV_CACHE_MEMORY,
                f"weights {fmt_gib(g.weights_bytes)} + activation {fmt_gib(g.activation_bytes)} + non-torch "
                f"{fmt_gib(g.non_torch_bytes)}"
                + (f" + CUDA graphs {fmt_gib(g.cuda_graph_bytes)}" if g.cuda_graphs_in_budget else "")
                + f" = {fmt_gib(worst.non_kv_bytes)} per GPU exceed the "
                f"{fmt_gib(budget)} budget ({rs.gpu_memory_utilization} x {fmt_gib(g.capacity_bytes)}): "
                "no memory left for the KV cache",
            )
        )
    elif kv.one_request_bytes > avail:
        hard.append(
            Reason(
                ReasonCode.KV_CACHE_TOO_SMALL_FOR_MAX_MODEL_LEN,
                f"one {rs.max_model_len}-token request needs {fmt_gib(kv.one_request_bytes)} of KV cache "
                f"per GPU but only "
                f"{fmt_gib(avail)} is left after {fmt_gib(worst.non_kv_bytes)} of weights and activations",
            )
        )
    elif workload is not None and kv.workload_blocks is not None and kv.workload_blocks > kv.num_blocks:
        hard.append(
            Reason(
                ReasonCode.WORKLOAD_EXCEEDS_KV_CACHE,
                f"{workload.concurrency} concurrent requests x {workload.context_tokens} tokens need "
                f"{kv.workload_blocks} KV "
                f"blocks per GPU; the pool has {kv.num_blocks} (max concurrency {kv.max_concurrency:.2f} at "
                f"{rs.max_model_len} tokens)",
            )
        )
    if hard and g.lora_bytes and rs.lora is not None:  # issue 20: name the LoRA slots in the numbers
        slots = (
            f" (weights include {fmt_gib(g.lora_bytes)} of LoRA slots: --max-loras {rs.lora.max_loras} x "
            f"--max-lora-rank {rs.lora.max_lora_rank})"
        )
        hard = [Reason(r.code, r.message + slots) for r in hard]
    if hard:
        return Verdict.DOES_NOT_FIT, tuple(hard)
    if worst.non_kv_bytes > TIGHT_FRACTION * budget:
        soft.append(
            Reason(
                ReasonCode.WEIGHTS_NEAR_BUDGET,
                f"weights and activations take {fmt_gib(worst.non_kv_bytes)} of the {fmt_gib(budget)} budget "
                f"({worst.non_kv_bytes / budget:.0%})",
            )
        )
    if kv.workload_fraction is not None and kv.workload_fraction > TIGHT_FRACTION:
        soft.append(
            Reason(
                ReasonCode.WORKLOAD_NEAR_KV_CAPACITY,
                f"the declared workload uses {kv.workload_fraction:.0%} of the KV pool ({kv.workload_blocks} of "
                f"{kv.num_blocks} blocks)",
            )
        )
    elif kv.one_request_bytes > TIGHT_FRACTION * avail:
        soft.append(
            Reason(
                ReasonCode.MAX_MODEL_LEN_NEAR_KV_CAPACITY,
                f"one {rs.max_model_len}-token request uses {kv.one_request_bytes / avail:.0%} of the KV pool",
            )
        )
    # Tight, never DoesNotFit: on vLLM 0.19's H100 logs gpt-oss-20b TP2 at gmu 0.95 ran out of memory here and
    # Llama 4 Scout TP4 at gmu 0.95 started, with the same 4.08 GiB floor against 3.96 GiB outside
    # (benchmarks/calibration/public-2026.jsonl): the floor cannot tell a run that starts from one that does not.
    if (
        outside is not None
        and not rs.extensible_kv_cache
        and rs.kv_cache_memory_bytes is None
        and g.outside_budget_bytes < outside.floor_bytes
    ):
        soft.append(
            Reason(
                ReasonCode.OUTSIDE_BUDGET_TOO_SMALL,
                f"only {fmt_gib(g.outside_budget_bytes)} of the card is outside the gpu_memory_utilization budget, "
                f"but the CUDA context and NCCL (~{fmt_gib(outside.pre_snapshot_bytes)}), "
                + (
                    f"the CUDA graphs captured after the KV cache (~{fmt_gib(outside.graphs_bytes)}) "
                    if outside.graphs_bytes
                    else ""
                )
                + f"and the sampler warm-up's logits ({fmt_gib(outside.sampler_floor_bytes)}) need at least "
                f"{fmt_gib(outside.floor_bytes)}: vLLM may run out of memory after sizing the KV cache; lower "
                "--gpu-memory-utilization or --max-num-seqs (Tight, not denied: the graph pool in that figure is "
                "fitted, and a public run has started 0.1 GiB below it)",
            )
        )
    reserve = outside.fitted_bytes if outside is not None else CUDA_CONTEXT_BYTES
    # an EP group across nodes holds its NCCL communicators before vLLM's snapshot (fitgate.sizing.parallel)
    communicators = EP_INTERNODE_RESIDENT_BYTES if rs.parallel.internode else 0
    reserve += communicators
    # 0.34's extensible cache measures graphs and warm-up and keeps a margin itself (fitgate.sizing.extensible)
    if (
        g.outside_budget_bytes < reserve
        and not rs.extensible_kv_cache
        and rs.kv_cache_memory_bytes is None
        and not any(r.code is ReasonCode.OUTSIDE_BUDGET_TOO_SMALL for r in soft)
    ):
        soft.append(
            Reason(
                ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET,
                f"only {fmt_gib(g.outside_budget_bytes)} of the card is outside the gpu_memory_utilization budget; "
                "the CUDA context and NCCL, the CUDA graphs captured after the KV cache"
                + (f", a multi-node EP group's communicators (~{fmt_gib(communicators)})" if communicators else "")
                + f" and the sampler warm-up need ~{fmt_gib(reserve)} by fitgate's fitted terms",
            )
        )
    if soft:
        return Verdict.TIGHT, tuple(soft)
    msg = f"{kv.num_blocks} KV blocks ({kv.reported_tokens} tokens) per GPU"
    if workload is not None and kv.workload_fraction is not None:
        msg += f"; the workload uses {kv.workload_fraction:.0%} of them"
    return Verdict.FITS, (Reason(ReasonCode.FITS, msg),)


def max_model_len_that_fits(ranks: tuple[RankPlan, ...], rs: ResolvedServing, model_max: int) -> int:
    """The largest max_model_len whose one-request KV fits every worker (0 if none).

    A binary search over the pure predicate ``fits(n)``, like vLLM's ``estimate_max_model_len``.
    In V0 the profiling batch grows with max_model_len, so the budget used here is only exact
    for V1; V0 callers should re-plan the returned value.
    """

    def fits(n: int) -> bool:
        for r in ranks:
            shape = ServingShape(
                cdiv(n, rs.parallel.decode_context_parallel_size), rs.max_num_batched_tokens, r.layout.block_size
            )
            if r.available_kv_bytes <= 0 or one_request_bytes(r.layout, shape) > r.available_kv_bytes:
                return False
        return True

    high = model_max
    if not fits(1):
        return 0
    if fits(high):
        return high
    low = 1
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low
