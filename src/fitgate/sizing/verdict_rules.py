"""The rules a per-GPU plan's verdict is judged by.

What must fit outside vLLM's budget, the error band of fitgate's fitted terms, the notes and the longest
max_model_len that fits (see :func:`fitgate.sizing.plan.plan`); the verdict and its reasons are
:mod:`fitgate.sizing.judge`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.activation import CUDA_CONTEXT_TYPICAL_BYTES
from fitgate.sizing.dtypes import MODEL_DTYPES
from fitgate.sizing.kv_layout import (
    one_request_bytes,
)
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.model import MLA, Attention, ModelArchitecture
from fitgate.sizing.parallel import (
    all2all_buffer_bytes,
    all2all_uncounted,
    local_experts,
    shared_experts_replicated,
)
from fitgate.sizing.quantization import moe_tp_split_refused
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.resolve import graphs_in_budget
from fitgate.sizing.results import ModelInput, PerGpu, Plan, RankPlan
from fitgate.sizing.serving import ResolvedServing
from fitgate.sizing.units import GiB, cdiv, fmt_gib
from fitgate.sizing.versions import CHUNKED_LOCAL_SPEC_SINCE, VllmAccounting, parse_version, release_note

TIGHT_FRACTION = 0.90  # "Tight" when a requirement uses more than 90 % of what is there
#: The real CUDA-graph pool beyond vLLM's estimate, as a fraction of it (see OutsideNeed; fitted).
GRAPH_EXCESS_FRACTION = 0.43
#: How far fitgate's fitted terms (activation peak, non-torch memory, and the CUDA-graph estimate where vLLM deducts
#: it) may over-count, as a fraction of their sum: the largest (predicted - measured available KV) shortfall on the
#: side that denies, measured available KV above fitgate's, over the 58 sized calibration cases (``python
#: benchmarks/accuracy.py`` prints it as "largest over-count", and both sides' distribution: p50 0.01, p90 1.26 since
#: the V2-runner rule, whose under-counts of 0.25-0.28 activation do not deny).
#: 0.69 is vLLM 0.6 on a 22 GiB card (Llama-3.1-8B at 131k: 0.590 GiB over 0.864 GiB of fitted terms, 0.6826, rounded
#: up: the band is never narrower than the case it is read from; at 0.68 the run that log's own advice starts,
#: ``--max-model-len 37696`` on that A10 at vLLM 0.7, was denied, hunt106 F4); 1.20 GiB, the
#: cap below, was an RTX 5090 at vLLM 0.28 (Qwen3-32B-AWQ: 0.33 GiB of activation and graph estimate printed against
#: fitgate's 1.90), sized on the V1 runner until the V2-runner rule (versions.VllmAccounting.uses_v2_runner) put
#: dense 0.25-0.28 models on V2; the set's largest over-count is now 0.59 GiB, but the cap stays: it is never lowered
#: below what a run outside the set showed (hunt34 F1 below: 0.84 GiB short, must stay Tight). A KV shortfall
#: within min(fraction x those terms, cap) is not shown, so the verdict is Tight (ShortWithinEstimateError), never
#: DoesNotFit: "deny only what you can show". The band was the symmetric p90
#: (0.58, 0.51 GiB) until KAITO's Qwen3-Coder-30B-A3B preset on 2 x 2 A10 (TP 2 x PP 2, gmu 0.7, 2,560 tokens; in
#: its default e2e suite across vLLM 0.12-0.22) came out 0.84 GiB short on 1.88 GiB of fitted terms (hunt34 F1):
#: a p90 leaves one in ten over-counts to deny. Capped in GiB: a large fitted term (PyTorch's sort sampler over
#: 1,024 x 201,088 logits, 7 GiB) is not that much less certain in absolute terms.
ESTIMATE_ERROR_FRACTION = 0.69
ESTIMATE_ERROR_CAP_BYTES = int(1.20 * GiB)
#: Added to that band: what the over-counts above cannot see. The logs print GiB to two decimals (available KV, the
#: total, the weights: 5 MiB each way), and a product's boards report totals a print step apart (the A10: 22.06 GiB in
#: the catalog, 22.07 on OCI's, the log the fraction comes from): a plan on the catalog's card at the exact
#: ``--max-model-len`` such a log prints as the KV cache's capacity is ~4 MiB past a band read on the log's own card.
#: Two print steps, 0.02 GiB, each side of the request's last block.
ESTIMATE_PRINT_SLACK_BYTES = int(0.02 * GiB)


#: Memory a model's vLLM class takes that fitgate does not size, by ``model_type``, from public runs (hunt29 F2):
#: DeepSeek V4's top-k, prefill and hyper-connection workspaces. vllm#44376 (2 x GH200, vLLM 0.22, TP 2 + EP, gmu 0.95):
#: vLLM printed 5.44 GiB of available KV where the plan had 10.45 (5.0 GiB less) and refused a 30,000-token request
#: the plan fitted; vllm#51041 (2 x H20, 0.26): 7.7 GiB against 10.46 (2.8 GiB). The larger gap is taken: a request
#: that fits only in it is Tight (``judge.prejudge``), never denied for it.
UNCOUNTED_BYTES = {"deepseek_v4": 5 * GiB}


def plan_notes(
    model: ModelInput, rs: ResolvedServing, g: PerGpu, accounting: VllmAccounting, given_version: str | None = None
) -> tuple[str, ...]:
    """The plan's notes: release, parallel layout, offload and other facts a reader should know."""
    notes = []
    newer = release_note(given_version)
    if newer is not None:
        notes.append(newer)
    if rs.engine_note is not None:
        notes.append(rs.engine_note)
    if rs.extensible_kv_cache:
        notes.append(
            f"vLLM {rs.vllm_version} sizes the KV cache after warm-up and CUDA-graph capture (extensible KV cache): "
            "the pool is the memory left less the transient peak (the activation; CUDA graphs count as resident) and "
            "a margin of "
            "max(1 GiB (3 GiB on ROCm), 0.75 x that peak); allocator fragmentation during warm-up is not modelled"
        )
    refused = moe_tp_split_refused(
        model.arch, rs.tensor_parallel_size, rs.parallel.expert_parallel, parse_version(rs.vllm_version)
    )
    if refused is not None:
        notes.append(f"TP {rs.tensor_parallel_size}: {refused} (said, not judged: the memory is sized)")
    if rs.extensible_off_by is not None:
        notes.append(
            f"vLLM {rs.vllm_version} turns the extensible KV cache off here ({rs.extensible_off_by}): the KV cache is "
            f"sized at start-up, gpu_memory_utilization defaults to {accounting.default_gpu_memory_utilization}"
        )
    if model.inventory.estimated:
        notes.append("weights estimated from config.json (no safetensors metadata or total size)")
    if rs.kv_cache_dtype_from_checkpoint:
        notes.append(
            f"--kv-cache-dtype auto is {rs.kv_cache_dtype} here: vLLM {rs.vllm_version} takes the KV cache dtype from "
            "the checkpoint's ModelOpt kv_cache_quant_algo / kv_cache_scheme (pass --kv-cache-dtype to override)"
        )
    if rs.kv_cache_dtype_by_architecture:
        notes.append(
            f"--kv-cache-dtype auto is {rs.kv_cache_dtype} here: vLLM {rs.vllm_version} stores this architecture's KV "
            "cache in fp8 on compute capability 10.x GPUs (models/config.py; pass --kv-cache-dtype to override)"
        )
    if rs.kv_cache_dtype.endswith("_per_token_head"):
        notes.append(
            f"--kv-cache-dtype {rs.kv_cache_dtype}: one byte an element; vLLM also keeps a scale per token and KV "
            "head that fitgate does not count (~3 % of the pool at head size 128)"
        )
    if not accounting.chunked_local_hybrid and any(getattr(m.mixer, "chunk_size", None) for m in model.arch.layers):
        notes.append(
            f"chunked local attention is sized as full attention: vLLM {accounting.label} disables the hybrid KV "
            "cache manager for it unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (the default from 0.14)"
            if accounting.version > CHUNKED_LOCAL_SPEC_SINCE and accounting.engine == "V1"
            else f"chunked local attention is sized as full attention: vLLM {accounting.label} has no KV spec of its "
            "own for it"
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
            snapshot (``activation.pre_snapshot_bytes``: measured, 0.51 GiB at TP1, 1.53 GiB at TP > 1 with
            symmetric memory, 0.63 GiB without).
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
    #: What a typical start holds before the snapshot beyond ``pre_snapshot_bytes`` (the smallest a log shows): at
    #: TP 1, 0.51 GiB on the 0.19 H100 logs against the 0.41 GiB floor (activation.CUDA_CONTEXT_TYPICAL_BYTES).
    #: Counted in the Tight need, never in the denial's floor (hunt48 F2: gpt-oss-120b at gmu 0.97, vllm#33155).
    context_excess_bytes: int = 0

    @property
    def floor_bytes(self) -> int:
        """What is certainly needed: deny when the card lacks this."""
        return self.pre_snapshot_bytes + self.graphs_bytes + self.sampler_floor_bytes

    @property
    def fitted_bytes(self) -> int:
        """What the fitted terms predict: Tight when the card lacks this."""
        sampler = max(self.sampler_floor_bytes, self.sampler_fitted_bytes)
        return (
            self.pre_snapshot_bytes + self.context_excess_bytes + self.graphs_bytes + self.graphs_excess_bytes + sampler
        )


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
    if accounting.version < (0, 34, 0) and rs.v2_runner:
        warm_up = False
    floor = fitted = 0
    if warm_up:
        rows = min(rs.max_num_seqs, rs.max_num_batched_tokens)
        floor = rows * arch.vocab_size * (MODEL_DTYPES[rs.dtype] + 4)
        fitted = rank.profile.sampler_bytes
    typical = CUDA_CONTEXT_TYPICAL_BYTES if rs.tensor_parallel_size <= 1 else rs.pre_snapshot_bytes
    return OutsideNeed(rs.pre_snapshot_bytes, graphs, floor, fitted, excess, max(0, typical - rs.pre_snapshot_bytes))


#: Releases whose start-up check runs on each layer's own KV spec before sliding-window and chunked-local layers are
#: unified into full attention (hybrid manager off: no support, a KV connector, chunked layers before 0.14): the check
#: caps those layers at their window while the pool holds them at full length (v1/core/kv_cache_utils.py 0.9.1
#: L940-943, 0.10.2 L1110-1112, 0.11.0 L1240-1257, 0.13.0 L1340-1357; 0.14.0 groups first, L1503 then L1514).
CHECK_BEFORE_UNIFY = ((0, 9, 0), (0, 14, 0))


def request_check_bytes(rank: RankPlan, shape: ServingShape) -> int:
    """The KV bytes vLLM's start-up check counts for one request on ``rank`` (``check_enough_kv_cache_memory``).

    Where the release checks before unifying (:data:`CHECK_BEFORE_UNIFY`, ``rank.check_layout``): the plain sum of
    each layer's ``max_memory_usage_bytes``, sliding-window and chunked layers capped (``max_memory_usage_bytes``,
    kv_cache_utils.py 0.11.0 L625-633). hunt203 F1: counted at full length, Llama 4 Scout at 3.6M on 8 x H100 and
    Gemma 3 27B at 128k on one H100 were denied on 0.9-0.13, which start them.
    """
    if rank.check_layout is not None:
        return sum(n * s.max_memory_usage_bytes(shape) for s, n in rank.check_layout.spec_counts)
    return one_request_bytes(rank.layout, shape)


def pool_request_bytes(ranks: tuple[RankPlan, ...], rs: ResolvedServing, tokens: int) -> int:
    """One request at full length in a pool whose start-up check counted windows (hunt203 F1), else 0."""
    return max(
        (
            one_request_bytes(r.layout, ServingShape(tokens, rs.in_flight_tokens, r.layout.block_size))
            for r in ranks
            if r.check_layout is not None
        ),
        default=0,
    )


def max_model_len_that_fits(ranks: tuple[RankPlan, ...], rs: ResolvedServing, model_max: int) -> int:
    """The largest max_model_len whose one-request KV fits every worker (0 if none).

    A binary search over the pure predicate ``fits(n)``, like vLLM's ``estimate_max_model_len``.
    In V0 the profiling batch grows with max_model_len, so the budget used here is only exact
    for V1; V0 callers should re-plan the returned value.
    """

    def fits(n: int) -> bool:
        for r in ranks:
            shape = ServingShape(
                cdiv(n, rs.parallel.decode_context_parallel_size), rs.in_flight_tokens, r.layout.block_size
            )
            if r.available_kv_bytes <= 0 or request_check_bytes(r, shape) > r.available_kv_bytes:
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


def short_within_error(result: Plan) -> bool:
    """A Tight plan short of KV by less than fitgate's error: no fix to offer (advice, recommend), keep looking."""
    return any(r.code is ReasonCode.SHORT_WITHIN_ESTIMATE_ERROR for r in result.reasons)
