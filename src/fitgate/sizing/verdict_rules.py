"""The verdict on a per-GPU plan.

What must fit outside vLLM's budget, the verdict and its reasons, the notes and the longest max_model_len
that fits (see :func:`fitgate.sizing.plan.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.activation import CUDA_CONTEXT_BYTES, pre_snapshot_bytes
from fitgate.sizing.dtypes import MODEL_DTYPES
from fitgate.sizing.kv_layout import (
    one_request_bytes,
)
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.model import MLA, Attention, ModelArchitecture
from fitgate.sizing.parallel import (
    EP_INTERNODE_RESIDENT_BYTES,
    all2all_buffer_bytes,
    all2all_uncounted,
    local_experts,
    shared_experts_replicated,
)
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.resolve import graphs_in_budget
from fitgate.sizing.results import KVSummary, ModelInput, PerGpu, RankPlan, Reason, Verdict
from fitgate.sizing.serving import ResolvedServing, Workload
from fitgate.sizing.units import GiB, cdiv, fmt_gib
from fitgate.sizing.versions import VllmAccounting, release_note

TIGHT_FRACTION = 0.90  # "Tight" when a requirement uses more than 90 % of what is there
#: The real CUDA-graph pool beyond vLLM's estimate, as a fraction of it (see OutsideNeed; fitted).
GRAPH_EXCESS_FRACTION = 0.43
#: How far fitgate's fitted terms (activation peak, non-torch memory, and the CUDA-graph estimate where vLLM deducts
#: it) may be off, as a fraction of their sum: the 90th percentile of |predicted - measured available KV| / those
#: terms over the 57 sized calibration cases (``python benchmarks/accuracy.py`` prints the distribution: p50 0.01,
#: p80 0.08, p90 0.58; ~0.02 on the vLLM 0.19 H100 logs the constants were fitted on, 0.1-1.7 on other releases and
#: cards), the same p10-p90 band the speed estimate states. A KV shortfall within it is not shown, so the verdict
#: is Tight (ShortWithinEstimateError), never DoesNotFit: public runs started 0.08-0.20 GiB "short" (an RTX 5090 at
#: vLLM 0.28, docs/accuracy.md). Capped at the same percentile of the error in GiB, 0.51 GiB: a large fitted term
#: (PyTorch's sort sampler over 1,024 x 201,088 logits, 7 GiB) is not that much less certain in absolute terms.
ESTIMATE_ERROR_FRACTION = 0.58
ESTIMATE_ERROR_CAP_BYTES = int(0.51 * GiB)
_KV_SHORT = frozenset({ReasonCode.KV_CACHE_TOO_SMALL_FOR_MAX_MODEL_LEN, ReasonCode.NO_KV_CACHE_MEMORY})


def plan_notes(
    model: ModelInput, rs: ResolvedServing, g: PerGpu, accounting: VllmAccounting, given_version: str | None = None
) -> tuple[str, ...]:
    """The plan's notes: release, parallel layout, offload and other facts a reader should know."""
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
    if not g.cuda_graphs_in_budget and rs.cuda_graphs:
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


def outside_need(
    arch: ModelArchitecture, rank: RankPlan, rs: ResolvedServing, accounting: VllmAccounting, last_stage: bool
) -> OutsideNeed:
    """The memory outside ``total x gmu`` one worker needs, derived per release (docs/vllm-releases.md section 17).

    Checked on the 0.19 H100 logs of shared/calibration: gpt-oss-20b at gmu 0.95 failed warming up the
    sampler at TP1 and TP2 and ran at TP2 with gmu 0.9; Llama 4 Scout ran with 1M tokens on 8 x H100
    at the default gmu (blog.vllm.ai/2025/04/05/llama4.html, vLLM 0.8.3).
    """
    in_budget = graphs_in_budget(arch, rs, accounting)
    graphs = 0 if not rs.cuda_graphs or in_budget else rank.profile.cuda_graph_bytes
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


def _within_estimate_error(hard: list[Reason], worst: RankPlan, kv: KVSummary, g: PerGpu) -> Reason | None:
    """The Tight reason replacing a KV shortfall smaller than the error of fitgate's fitted terms, else None.

    Only a shortfall of KV memory (not weights over the budget, a card too small for the stated KV size or an
    unsatisfiable budget): those terms are exact or vLLM's own refusals.
    """
    if not hard or any(r.code not in _KV_SHORT for r in hard) or g.weights_bytes > g.budget_bytes:
        return None
    fitted = worst.profile.activation_bytes + worst.profile.non_torch_bytes
    fitted += worst.profile.cuda_graph_bytes if g.cuda_graphs_in_budget else 0
    margin = min(int(ESTIMATE_ERROR_FRACTION * fitted), ESTIMATE_ERROR_CAP_BYTES)
    short = kv.one_request_bytes - worst.available_kv_bytes
    if short > margin:
        return None
    return Reason(
        ReasonCode.SHORT_WITHIN_ESTIMATE_ERROR,
        f"{hard[0].message}; {fmt_gib(short)} short, within the error of fitgate's fitted activation, non-torch and "
        f"CUDA-graph terms ({fmt_gib(fitted)} here, +/- {fmt_gib(margin)} on the calibration runs): vLLM may start "
        "or refuse, so it is not denied",
    )


def judge(
    rs: ResolvedServing,
    worst: RankPlan,
    kv: KVSummary,
    g: PerGpu,
    workload: Workload | None,
    accounting: VllmAccounting,
    outside: OutsideNeed | None = None,
) -> tuple[Verdict, tuple[Reason, ...]]:
    """The verdict and its reasons from the worst worker's numbers and what must fit outside the budget."""
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
    within = _within_estimate_error(hard, worst, kv, g)
    if within is not None:
        hard, soft = [], [within]
    if hard:
        return Verdict.DOES_NOT_FIT, tuple(hard)
    extra = worst.profile.without_flashinfer_bytes
    if extra and (avail - extra <= 0 or kv.one_request_bytes > avail - extra):
        # Tight, never DoesNotFit: vLLM 0.8-0.11.0 samples with FlashInfer wherever it is installed (vLLM's image);
        # a pip install without it profiles PyTorch's sort, which vllm#23278 (0.10.1, one H100) ran out on, while
        # gpustack's vLLM 0.10.2 runs of the same model and card started (activation.py ``_flashinfer_sampler``).
        soft.append(
            Reason(
                ReasonCode.SAMPLER_NEEDS_FLASHINFER,
                f"fits with the FlashInfer top-k/top-p sampler that vLLM {rs.vllm_version} uses when FlashInfer is "
                f"installed (vLLM's own image ships it); without it (a pip install without FlashInfer, or "
                f"VLLM_USE_FLASHINFER_SAMPLER=0) the profiling sampler pass takes {fmt_gib(extra)} more and leaves "
                + (
                    "no memory for the KV cache"
                    if avail - extra <= 0
                    else f"{fmt_gib(avail - extra)} for the KV cache, less than one {rs.max_model_len}-token "
                    f"request's {fmt_gib(kv.one_request_bytes)}"
                )
                + ": vLLM would refuse to start",
            )
        )
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
    elif kv.one_request_bytes > TIGHT_FRACTION * avail and within is None:
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
