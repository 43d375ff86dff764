"""Estimated speed of a planned deployment: vLLM's step model on the plan's bytes and FLOPs, with an error band.

This module turns a :class:`~fitgate.sizing.results.Plan` into what one engine step reads and computes
per GPU (:class:`~fitgate.sizing.step_time.Work`); :mod:`fitgate.sizing.step_time` holds the step and
steady-state arithmetic and the fitted constants. Per GPU and pipeline stage, a step reads::

    weights on the GPU - the embedding table (only B rows are gathered) - rotary caches
    - the experts the step's tokens do not route to (MoE: E x (1 - (1 - top_k / E) ^ tokens) are hit)
    + running requests x the KV one request at the decode context holds on the GPU

and computes 2 x active parameters x tokens (at the weights' dtype: fp8 and fp4 run at 2x and 4x the
bf16 peak on GPUs with those tensor cores) plus attention. The load is a request shape (``input_tokens``
ISL, ``output_tokens`` OSL) at a concurrency or a request rate; without the split (only
``context_tokens``) the batch is decoded at that context with no prompt sharing its steps.

The estimate is labelled (``basis``) and comes with a range: the 10th-90th percentile of measured /
estimated over the published points, each estimated by constants fitted without its GPU product or model
family (leave-one-group-out, benchmarks/throughput.py). It is never above the bandwidth roofline (every
byte a step reads at the full datasheet bandwidth and nothing else).

Expert parallelism with DP > 1 pays its all2all per MoE layer (:data:`ALL2ALL_RDMA_GBPS`: NVLink in a
node, RDMA across nodes); with DP 1 EP costs what TP does (vLLM builds no all2all kernels then).
Not modelled: speculative decoding, prefix caching, preemption under KV pressure, CUDA-graph padding, load
imbalance between experts, multi-node tensor parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fitgate.sizing.cudagraphs import V0_MAX_SEQ_LEN_TO_CAPTURE, graph_token_limits
from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layout import one_request_bytes
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.load import SteadyState, steady_state
from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.model import MLA, Attention, ModelArchitecture, MoE, Quantization
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.resolve import async_scheduling
from fitgate.sizing.results import ModelInput, Plan
from fitgate.sizing.serving import ResolvedServing
from fitgate.sizing.step_time import (
    Band,
    Stage,
    Work,
    calibration,
    expert_fraction_touched,
    step_seconds,
)
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import Role, WeightInventory, weights_per_rank

__all__ = ["Performance", "SpeedLoad", "active_parameters", "estimate", "expert_fraction_touched"]

#: The band of an estimate without a measured spread (multiplies by 1).
NO_BAND = Band(1.0, 1.0)
#: The largest request rate accepted (requests/s): far beyond any one replica.
MAX_REQUEST_RATE = 1e6
#: The largest latency target in ms (``--ttft-ms`` / ``--tpot-ms``, a ModelDeployment's ``ttftMs`` / ``tpotMs``): 1 h.
MAX_TARGET_MS = 3.6e6

#: Achieved all-reduce bus bandwidth per GPU, GB/s (NVLink 4 / NVSwitch: ~300 of 450 unidirectional;
#: PCIe 4.0 x16 through the host bridge: ~20). The latency of each all-reduce is in the fitted per-layer cost.
ALLREDUCE_BUS_GBPS = {"nvlink": 300.0, "pcie": 20.0}
#: Expert parallelism's all2all (issue 24), only where vLLM builds all2all kernels: EP with DP > 1
#: (``use_all2all_kernels``, fused_moe/config.py 0.33.0 L1034-1038; with DP 1 the EP ranks see every token
#: and the experts' outputs are all-reduced as under TP). Per MoE layer and step, one GPU moves:
#:
#: * ``allgather_reducescatter`` (the default, config/parallel.py 0.33.0 L220): the dispatch all-gathers the
#:   other DP ranks' hidden states and the combine reduce-scatters them back (``AgRsAll2AllManager``,
#:   distributed/device_communicators/all2all.py 0.33.0): 2 x (DP - 1) / DP x hidden x activation bytes per
#:   token of the step;
#: * the token-routed backends (DeepEP, MoRI, NIXL-EP, FlashInfer, MoonEP): each token goes to the EP ranks
#:   that hold its top-k experts and comes back, spread over the EP group: 2 x min(k, EP) x (EP - 1) / EP^2 x
#:   hidden x activation bytes per token (bf16 both ways; DeepEP's fp8 dispatch halves one leg: not counted).
#:
#: The link: NVLink at the all-reduce bus figure inside a node, else the node's RDMA NIC per GPU, GB/s as
#: DeepEP measures a CX7 400 Gb/s InfiniBand card (deepseek-ai/DeepEP README, normal kernels: 43-58 GB/s
#: internode, ~50 GB/s maximum). No point in benchmarks/throughput/points.json runs EP with DP > 1, so the
#: term is derived, not validated (docs/performance.md, Gaps).
ALL2ALL_RDMA_GBPS = 45.0
#: Backends that send each token only to its experts' ranks (the rest all-gather every token).
TOKEN_ROUTED_ALL2ALL = frozenset(
    {"deepep_high_throughput", "deepep_low_latency", "deepep_v2", "mori", "mori_high_throughput", "mori_low_latency",
     "moonep", "nixl_ep", "flashinfer_all2allv", "flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided"}
)  # fmt: skip
#: GPU architectures whose tensor cores run fp8 (twice the bf16 rate) and fp4 (four times).
FP8_ARCHITECTURES = frozenset({"ada", "hopper", "blackwell", "cdna3", "cdna4"})
FP4_ARCHITECTURES = frozenset({"blackwell", "cdna4"})
FP4_METHODS = frozenset({"mxfp4", "nvfp4", "modelopt_fp4", "nvfp4_per_token"})
INTEGER_METHODS = frozenset({"awq", "gptq", "bitsandbytes", "experts_int8", "int8_per_channel_weight_only", "gguf"})


@dataclass(frozen=True)
class Performance:
    """Estimated speed of one replica under a load (see the module docstring)."""

    decode_tokens_per_s: float  # all running requests together
    per_request_tokens_per_s: float  # one request's decode speed: 1 / TPOT
    prefill_tokens_per_s: float  # a prompt-only step stream at the token budget
    ttft_seconds: float  # mean time to first token under the load (inf: saturated)
    batch: int  # requests in flight
    context_tokens: int  # the decode context (input + half the output when the split is known)
    roofline_decode_tokens_per_s: float  # all of the bandwidth, no overhead, no compute bound
    bytes_read_per_step: int  # summed over pipeline stages, per tensor rank
    basis: str
    tpot_seconds: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_per_s: float = 0.0  # as a client counts it (prefill and decode)
    requests_per_s: float = 0.0
    request_rate: float | None = None
    saturated: bool = False
    tpot_band: Band = NO_BAND
    ttft_band: Band = NO_BAND

    @property
    def tpot_range_seconds(self) -> tuple[float, float]:
        """TPOT x the measured band (measured / estimated, 10th-90th percentile)."""
        return self.tpot_seconds * self.tpot_band.low, self.tpot_seconds * self.tpot_band.high

    @property
    def ttft_range_seconds(self) -> tuple[float, float]:
        """TTFT x the measured band."""
        return self.ttft_seconds * self.ttft_band.low, self.ttft_seconds * self.ttft_band.high

    @property
    def decode_range_tokens_per_s(self) -> tuple[float, float]:
        """Decode rate / the TPOT band, capped at the bandwidth roofline."""
        low = self.decode_tokens_per_s / self.tpot_band.high
        high = min(self.roofline_decode_tokens_per_s, self.decode_tokens_per_s / self.tpot_band.low)
        return low, high


def _only(inventory: WeightInventory, roles: frozenset[Role]) -> WeightInventory:
    return WeightInventory(tuple(e for e in inventory.entries if e.role in roles), inventory.source)


#: Active parameters per inventory (by its identity), memoised for the recommend search.
_ACTIVE: IdentityMemo[int] = IdentityMemo(256)
_ACTIVE_EXPERTS: IdentityMemo[int] = IdentityMemo(256)


def active_parameters(model: ModelInput) -> int:
    """Memoised :func:`count_active_parameters` (keyed by the inventory's identity)."""
    return _ACTIVE.get((model.inventory,), (), lambda: count_active_parameters(model))


def active_expert_parameters(model: ModelInput) -> int:
    """Parameters of the routed experts one token multiplies through (top_k of each MoE layer's experts)."""

    def count() -> int:
        moe = _moe(model.arch)
        share = moe.top_k / moe.num_experts if moe is not None and moe.num_experts else 0.0
        return int(sum(e.numel * share for e in model.inventory.entries if e.role is Role.EXPERT))

    return _ACTIVE_EXPERTS.get((model.inventory,), (), count)


def count_active_parameters(model: ModelInput) -> int:
    """Parameters one token multiplies through: all linear layers, the experts it routes to, the head.

    The embedding gather costs no FLOPs; a tied model's head is its embedding table; the vision
    tower and skipped tensors (MTP layers) do not run per generated token.
    """
    arch = model.arch
    moe = _moe(arch)
    share = moe.top_k / moe.num_experts if moe is not None and moe.num_experts else 1.0
    total = 0.0
    for e in model.inventory.entries:
        if e.role in (Role.SKIPPED, Role.VISION, Role.EMBED_PER_LAYER):
            continue  # Gemma 4's per-layer table is gathered like the embedding: no FLOPs
        if e.role is Role.EMBED:
            total += e.numel if arch.tie_word_embeddings else 0
        elif e.role is Role.LM_HEAD:
            total += 0 if arch.tie_word_embeddings else e.numel
        elif e.role is Role.EXPERT:
            total += e.numel * share
        else:
            total += e.numel
    return int(total)


#: (id of the inventory, tp, pp, pp_rank, dtype, quantization) -> (that inventory, its bytes): keyed by
#: identity because hashing a whole model costs more than the arithmetic it would save.
_RANK_BYTES: dict[tuple[int, int, int, int, str, str], tuple[WeightInventory, tuple[int, int]]] = {}


def _expert_and_embedding_bytes(
    model: ModelInput, tp: int, pp: int, pp_rank: int, dtype: str, runtime_q: Quantization | None
) -> tuple[int, int]:
    """Bytes of experts and of the (untied) embedding table on one GPU, as loaded (memoised for the search)."""
    key = (id(model.inventory), tp, pp, pp_rank, dtype, runtime_q.method if runtime_q else "")
    hit = _RANK_BYTES.get(key)
    if hit is not None and hit[0] is model.inventory:
        return hit[1]
    if len(_RANK_BYTES) > 4096:
        _RANK_BYTES.clear()
    value = _compute_expert_and_embedding_bytes(model, tp, pp, pp_rank, dtype, runtime_q)
    _RANK_BYTES[key] = (model.inventory, value)
    return value


def _compute_expert_and_embedding_bytes(
    model: ModelInput, tp: int, pp: int, pp_rank: int, dtype: str, runtime_q: Quantization | None
) -> tuple[int, int]:

    def rank_bytes(roles: frozenset[Role]) -> int:
        inventory = _only(model.inventory, roles)
        w = weights_per_rank(model.arch, inventory, tp=tp, pp=pp, pp_rank=pp_rank, dtype=dtype,
                             runtime_quantization=runtime_q)  # fmt: skip
        return w.tensors_bytes

    experts = rank_bytes(frozenset({Role.EXPERT})) if _moe(model.arch) is not None else 0
    embedding = 0 if model.arch.tie_word_embeddings else rank_bytes(frozenset({Role.EMBED}))
    if model.arch.per_layer_embedding is not None:
        embedding += rank_bytes(frozenset({Role.EMBED_PER_LAYER}))  # gathered a row a token, not streamed
    return experts, embedding


def _moe(arch: ModelArchitecture) -> MoE | None:
    return arch.first_moe


#: How vLLM runs an MLA layer's attention (issue 24): two ways, chosen per token of the step
#: (``model_executor/layers/attention/mla_attention.py`` 0.24.0, module docstring and L703-708: ``num_mqa_tokens =
#: attn_metadata.num_decode_tokens``, the rest ``num_mha_tokens``). Prompt tokens take the "compute friendly"
#: MHA path: the cached latent is up-projected to ``num_heads`` keys of ``qk_nope + qk_rope`` and values of
#: ``v_head_dim`` (``forward_mha``). Decode tokens take the "data-movement friendly" MQA path: ``W_UK`` is absorbed
#: into the query, and every head attends over the latent itself, QK head dim ``kv_lora_rank + qk_rope_head_dim``
#: and V head dim ``kv_lora_rank`` (``forward_mqa``; "less compute-friendly since Lkv > P"). V0 did the same
#: (``attention/backends/mla/utils.py`` 0.7.3 L444-476: ``_q_proj_and_k_up_proj`` then ``_forward_decode`` for
#: decodes, ``q_proj`` then ``_forward_prefill`` for prompts). So a DeepSeek-V3 decode token does 2 x 128 x
#: (576 + 512) FLOPs a context token and layer, 3.4 x a prompt token's 2 x 128 x (192 + 128). No constant.
MLA_DECODE = "MLA decodes as MQA over the latent, prompts as MHA (vllm mla_attention.py forward_mqa / forward_mha)"


def attention_width(arch: ModelArchitecture, layers: range, context: int, *, decode: bool = False) -> float:
    """Sum over ``layers`` of heads x head_dim x the tokens attended (window-limited), per token of context.

    ``decode``: the width of a decode token's attention, which differs from a prompt token's for MLA
    (:data:`MLA_DECODE`): heads x (kv_lora_rank + qk_rope_head_dim + kv_lora_rank) / 2 instead of heads x
    (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) / 2 (DeepSeek-V3: 128 x 1088 / 2 against 128 x 320 / 2).
    """
    full, windowed = _WIDTHS.get(
        (arch,), (layers.start, layers.stop, layers.step, decode), lambda: _widths(arch, layers, decode)
    )
    return full + sum(w * min(context, span) / context for w, span in windowed)


#: Per model and layer range: the width of the layers that attend to the whole context, and (width, window) of
#: the others (recommend asks for the same ranges at many contexts: issue 24's <= 2 s search).
_WIDTHS: IdentityMemo[tuple[float, tuple[tuple[float, int], ...]]] = IdentityMemo()


def _widths(arch: ModelArchitecture, layers: range, decode: bool) -> tuple[float, tuple[tuple[float, int], ...]]:
    """:func:`attention_width`'s terms: the full-context layers summed, the windowed ones with their window."""
    full = 0.0
    windowed: list[tuple[float, int]] = []
    for i in layers:
        m = arch.layers[i].mixer
        if isinstance(m, Attention):
            width = m.num_heads * (m.head_dim + m.v_head_dim) / 2
            span = m.sliding_window or m.chunk_size
            if span:
                windowed.append((width, span))
            else:
                full += width
        elif isinstance(m, MLA) and decode:
            full += m.num_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) / 2
        elif isinstance(m, MLA):
            full += m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) / 2
    return full, tuple(windowed)


@dataclass(frozen=True)
class SpeedLoad:
    """``--input-tokens`` / ``--output-tokens`` / ``--request-rate``: the load the speed is estimated at."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    request_rate: float | None = None

    def kwargs(self) -> dict[str, int | float | None]:
        """Keyword arguments of :func:`estimate`."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "request_rate": self.request_rate,
        }


def speed_load(
    input_tokens: int | None, output_tokens: int | None, request_rate: float | None, longest: int
) -> SpeedLoad:
    """A checked :class:`SpeedLoad`; errors name the flag, the value and the limit."""
    if (input_tokens is None) != (output_tokens is None):
        given, missing = ("--input-tokens", "--output-tokens")[:: 1 if input_tokens is not None else -1]
        raise SizingError(missing, None, f"a number of tokens when {given} is given (both or neither)")
    for flag, value in (("--input-tokens", input_tokens), ("--output-tokens", output_tokens)):
        if value is not None and not 1 <= value <= longest:
            raise SizingError(flag, value, f"from 1 to {longest} tokens (the max_model_len)")
    if input_tokens is not None and output_tokens is not None and input_tokens + output_tokens > longest:
        raise SizingError(
            "--input-tokens", input_tokens, f"at most {longest - output_tokens} with --output-tokens {output_tokens}"
        )
    if request_rate is not None:
        if not 0 < request_rate <= MAX_REQUEST_RATE or not math.isfinite(request_rate):
            raise SizingError(
                "--request-rate", request_rate, f"requests per second above 0, at most {MAX_REQUEST_RATE:g}"
            )
        if input_tokens is None:
            raise SizingError("--input-tokens", None, "--input-tokens and --output-tokens when --request-rate is given")
    return SpeedLoad(input_tokens, output_tokens, request_rate)


def requests_the_pool_holds(result: Plan, tokens: int) -> int:
    """Requests of ``tokens`` tokens the KV pool and ``max_num_seqs`` let run at once (at least 1)."""
    pool_tokens = result.kv.max_concurrency * result.serving.max_model_len
    return max(1, min(result.serving.max_num_seqs, math.floor(pool_tokens / max(1, tokens))))


def requests_in_flight(result: Plan, input_tokens: int, output_tokens: int) -> int:
    """Requests of ``input_tokens`` + ``output_tokens`` that run at once under a steady load (at least 1).

    vLLM allocates a request's KV blocks as it goes: a waiting request is admitted when its prompt chunk's blocks
    are free (``v1/core/sched/scheduler.py`` 0.34.0 L1497 ``allocate_slots``), a running one takes the blocks of its
    new tokens each step (L930) and, when none are left, the last running request is preempted (L949-988). Under a
    steady load the requests are staggered over their lives, so each holds ISL + OSL / 2 tokens on average: the pool
    runs ``pool / (ISL + OSL / 2)`` of them, not only the ``pool / (ISL + OSL)`` that never meet a preemption.
    """
    return requests_the_pool_holds(result, input_tokens + output_tokens // 2)


def _dtype_factor(q: Quantization | None, gen: str) -> float:
    """Peak FLOP/s of matmuls on weights stored as ``q`` relative to bf16 on a GPU of architecture ``gen``.

    fp8 weights run W8A8 on fp8 tensor cores (2 x bf16) where the GPU has them; fp4 weights run on fp4 tensor
    cores (4 x) on Blackwell and CDNA4. Elsewhere vLLM runs them weight-only, dequantized into bf16 matmuls:
    Marlin (``quantization/utils/marlin_utils_fp8.py``, ``marlin_utils_fp4.py``) or, for MXFP4 on Hopper,
    the Triton ``matmul_ogs`` kernels with bf16 activations (``quantization/mxfp4.py`` backend selection), so
    an MXFP4 checkpoint on an H100 computes at the bf16 peak, not the fp8 one (before issue 24's era refit: 2 x).
    """
    if q is None or q.method in INTEGER_METHODS:
        return 1.0
    if q.method in FP4_METHODS and q.weight_bits <= 4:
        return 4.0 if gen in FP4_ARCHITECTURES else 1.0
    if q.weight_bits <= 8 and gen in FP8_ARCHITECTURES:
        return 2.0
    return 1.0


def compute_dtype_factors(model: ModelInput, result: Plan) -> tuple[float, float]:
    """(dense, routed experts) peak FLOP/s relative to bf16 on this GPU, by how each part's weights are stored.

    A checkpoint that quantizes only its experts (gpt-oss MXFP4: ``experts_only``) runs its attention and dense
    layers at bf16; one that stores its experts another way (DeepSeek V4: fp8 linear layers, fp4 experts) runs
    each part at its own rate.
    """
    arch, gen = model.arch, result.gpu.architecture
    q = arch.quantization or RUNTIME_QUANTIZATION.get(result.serving.quantization or "")
    if q is None:
        return 1.0, 1.0
    dense = 1.0 if q.experts_only else _dtype_factor(q, gen)
    return dense, _dtype_factor(q.experts or q, gen)


#: Architectures whose decoder layer runs more TP all-reduces than o_proj's and the MLP's (step_time.TP_NORMS).
#: MiniMax-M2 normalises q and k over all heads, which TP splits, so it all-reduces their variances once per
#: layer (``MiniMaxText01RMSNormTP.forward_qk``: ``torch.cat([q_var, k_var])`` then
#: ``tensor_model_parallel_all_reduce``; models/minimax_m2.py ``MiniMaxM2Attention.forward``).
TP_NORM_ALLREDUCES = {"MiniMaxM2ForCausalLM": 1}


def attention_dtype_factor(kv_cache_dtype: str, gen: str) -> float:
    """Peak FLOP/s of the attention matmuls relative to bf16 (step_time.ATTENTION_DTYPE).

    2 with an fp8 KV cache on a GPU with fp8 tensor cores (FlashAttention quantizes the query to fp8 then), else 1,
    whatever the weights' format.
    """
    return 2.0 if kv_cache_dtype.startswith("fp8") and gen in FP8_ARCHITECTURES else 1.0


def all2all_bytes_per_token(arch: ModelArchitecture, rs: ResolvedServing, activation_bytes: int) -> float:
    """Bytes one GPU moves per token of a step and MoE layer for expert parallelism (:data:`ALL2ALL_RDMA_GBPS`)."""
    lay, moe = rs.parallel, _moe(arch)
    if moe is None or not lay.expert_parallel or lay.data_parallel_size <= 1:
        return 0.0
    hidden = arch.hidden_size * activation_bytes
    if lay.all2all_backend in TOKEN_ROUTED_ALL2ALL:
        ep = lay.ep_size
        return 2 * min(moe.top_k, ep) * (ep - 1) / ep**2 * hidden
    dp = lay.data_parallel_size
    return 2 * (dp - 1) / dp * hidden


def _experts_quantized(arch: ModelArchitecture, runtime_q: Quantization | None) -> bool:
    """Whether the routed experts are stored in 8 bits or fewer (their fused-MoE path quantizes: EAGER_STEP)."""
    q = arch.quantization or runtime_q
    return q is not None and (q.experts or q).weight_bits <= 8


#: The last works computed: a latency-target search asks for one plan's work in every replica probe and again in the
#: estimate it keeps (capacity.replicas_needed; issue 24's <= 2 s search). A few entries: the probes of one plan
#: come together.
_WORKS: IdentityMemo[Work] = IdentityMemo(64)


def work(model: ModelInput, result: Plan, decode_context: int, prompt_tokens: int) -> Work:
    """What one step of ``result``'s replica reads and computes per GPU, at a decode context.

    Raises:
        SizingError: The GPU has no bandwidth or FLOP/s figure (a ``--gpu-memory`` size).
    """
    return _WORKS.get(
        (model, result), (decode_context, prompt_tokens), lambda: _work(model, result, decode_context, prompt_tokens)
    )


def _work(model: ModelInput, result: Plan, decode_context: int, prompt_tokens: int) -> Work:
    rs, gpu, arch = result.serving, result.gpu, model.arch
    if gpu.memory_bandwidth_gbps <= 0 or gpu.bf16_dense_tflops <= 0:
        raise SizingError("gpu", gpu.name, "a catalog GPU with a memory bandwidth and a bf16 FLOP/s figure")
    tp, pp = rs.tensor_parallel_size, rs.pipeline_parallel_size
    moe = _moe(arch)
    runtime_q = RUNTIME_QUANTIZATION.get(rs.quantization or "") if arch.quantization is None else None
    active = active_parameters(model)
    active_experts = active_expert_parameters(model) if moe is not None else 0
    stages = []
    for r in result.ranks:
        expert_bytes, embed_bytes = _expert_and_embedding_bytes(model, tp, pp, r.pp_rank, rs.dtype, runtime_q)
        dense = max(0, r.weights.total_bytes - r.weights.rotary_cache_bytes - embed_bytes - expert_bytes)
        kv = one_request_bytes(r.layout, ServingShape(decode_context, rs.in_flight_tokens, r.layout.block_size))
        share = len(r.layers) / arch.num_layers
        decode_attn = 4 * decode_context * attention_width(arch, r.layers, decode_context, decode=True) / tp
        half_prompt = max(1, prompt_tokens // 2)
        prefill_attn = 4 * half_prompt * attention_width(arch, r.layers, half_prompt) / tp
        moe_layers = sum(1 for i in r.layers if isinstance(arch.layers[i].ffn, MoE)) if moe is not None else 0
        stages.append(
            Stage(len(r.layers), dense, expert_bytes, kv, 2 * active * share / tp, decode_attn, prefill_attn,
                  2 * active_experts * share / tp, moe_layers)
        )  # fmt: skip
    link = rs.interconnect if rs.interconnect in ALLREDUCE_BUS_GBPS else "pcie"
    dense_factor, expert_factor = compute_dtype_factors(model, result)
    activation_bytes = 2 if rs.dtype in ("bfloat16", "float16") else 4
    a2a_per_token, a2a_link = all2all_bytes_per_token(arch, rs, activation_bytes), ALLREDUCE_BUS_GBPS[link]
    graphs = graph_token_limits(
        accounting_for(rs.vllm_version, rs.engine),
        mode=rs.cudagraph_mode if rs.cuda_graphs else "NONE",
        max_num_seqs=rs.max_num_seqs,
        max_num_batched_tokens=rs.max_num_batched_tokens,
        model_max_capture_size=arch.max_capture_size_override,
        compute_capability=gpu.compute_capability,
        decode_query_len=rs.decode_query_len,
        given_sizes=rs.cudagraph_capture_sizes,
        given_max=rs.max_cudagraph_capture_size,
        interactivity=rs.performance_mode == "interactivity",
    )
    if rs.parallel.internode:
        a2a_link = ALL2ALL_RDMA_GBPS
    return Work(
        stages=tuple(stages),
        tp=tp,
        num_experts=moe.num_experts if moe is not None else 0,
        top_k=moe.top_k if moe is not None else 0,
        activation_bytes_per_token=arch.hidden_size * activation_bytes,
        bandwidth_bytes_per_s=gpu.memory_bandwidth_gbps * 1e9,
        peak_flops=gpu.bf16_dense_tflops * 1e12 * dense_factor,
        expert_peak_flops=gpu.bf16_dense_tflops * 1e12 * expert_factor,
        extra_allreduces_per_layer=TP_NORM_ALLREDUCES.get(arch.architecture, 0),
        attention_peak_flops=gpu.bf16_dense_tflops * 1e12 * attention_dtype_factor(rs.kv_cache_dtype, gpu.architecture),
        bus_bytes_per_s=ALLREDUCE_BUS_GBPS[link] * 1e9,
        amd=gpu.vendor == "amd",
        max_num_batched_tokens=rs.max_num_batched_tokens,
        # V0 (before 0.8): its own host cost; without chunked prefill (its budget holds a whole
        # max_model_len prompt) prompts run in prefill-only steps (step_time.ENGINE_ERA).
        v0=rs.engine == "V0",
        async_scheduling=async_scheduling(rs),
        a2a_bytes_per_token=a2a_per_token,
        a2a_bytes_per_s=a2a_link * 1e9,
        prefill_apart=rs.engine == "V0" and rs.max_num_batched_tokens >= rs.max_model_len,
        graph_decode_tokens=0 if rs.engine == "V0" and decode_context > V0_MAX_SEQ_LEN_TO_CAPTURE else graphs[0],
        graph_prompt_tokens=graphs[1],
        quantized_experts=moe is not None and _experts_quantized(arch, runtime_q),
        decode_query_len=rs.decode_query_len,
        dp_ranks=max(1, rs.parallel.data_parallel_size),
    )


#: Tensor-parallel sizes past this span nodes on most systems (8 GPUs a node; GB200 / GB300 NVL72 racks excepted:
#: one NVLink domain of 72); the step model prices TP all-reduces on the GPUs' own link (hunt91 O9).
MULTI_NODE_TP = 8


def estimate(
    model: ModelInput,
    result: Plan,
    batch: int | None = None,
    context_tokens: int | None = None,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    request_rate: float | None = None,
    load: SpeedLoad | None = None,
) -> Performance:
    """Speed of ``result``'s replica under a load (see the module docstring).

    ``batch`` (requests in flight) defaults to the plan's workload concurrency (capped at
    ``max_num_seqs``), else to as many ``max_model_len`` requests as the KV pool holds. With
    ``input_tokens`` and ``output_tokens`` the steady state shares each step with the prompts arriving
    (chunked prefill) and the decode context is ISL + OSL / 2; with ``request_rate`` (requests/s) the
    concurrency follows from Little's law (``load`` sets all three at once). Otherwise
    ``context_tokens`` (default: the workload's, else
    ``max_model_len``) is decoded with no prompt in the steps, and TTFT is one prompt of that length.

    Raises:
        SizingError: The GPU has no bandwidth or FLOP/s figure (a ``--gpu-memory`` size).
    """
    if load is not None:
        input_tokens, output_tokens, request_rate = load.input_tokens, load.output_tokens, load.request_rate
    rs = result.serving
    cal = calibration()
    split = input_tokens is not None and output_tokens is not None
    if input_tokens is not None and output_tokens is not None:
        isl, osl = max(1, input_tokens), max(1, output_tokens)
        context = isl + osl // 2
    else:
        if context_tokens is None:
            context_tokens = result.workload.context_tokens if result.workload else rs.max_model_len
        context = isl = max(1, context_tokens)
        osl = 0
    if batch is None:
        batch = result.workload.per_replica if result.workload else math.floor(result.kv.max_concurrency)
    most = requests_in_flight(result, isl, osl) if split else requests_the_pool_holds(result, context)
    batch = max(1, min(batch, rs.max_num_seqs))
    w = work(model, result, context, isl)
    k = cal.constants
    state: SteadyState = steady_state(
        w, isl, osl, k, concurrency=None if request_rate else batch, request_rate=request_rate, max_concurrency=most
    )
    in_flight = max(1, round(state.concurrency))
    full_budget, _ = step_seconds(w, 0, rs.max_num_batched_tokens, k)
    # the mean bytes of a step (steps with a prompt chunk read more experts): what the roofline reads
    bytes_read = round(state.concurrency / state.roofline_decode_tokens_per_s * w.bandwidth_bytes_per_s)
    basis = (
        f"estimated: vLLM step model (fixed + per-layer overhead + max(bytes / bandwidth, FLOPs / peak)) "
        f"fitted on published vLLM measurements; {cal.basis}"
        + ("" if split else "; input/output split not given: decode at context_tokens, no prefill in the steps")
        + (
            f"; TP {rs.tensor_parallel_size} spans more than one 8-GPU node on most systems: the all-reduces are "
            "priced on the GPUs' own link, not the network between nodes (multi-node TP is slower)"
            if rs.tensor_parallel_size > MULTI_NODE_TP and not result.gpu.name.startswith(("GB200", "GB300"))
            else ""
        )
    )
    return Performance(
        decode_tokens_per_s=state.decode_tokens_per_s,
        per_request_tokens_per_s=state.decode_tokens_per_s / state.concurrency,
        prefill_tokens_per_s=rs.max_num_batched_tokens / full_budget,
        ttft_seconds=state.ttft_s,
        batch=in_flight,
        context_tokens=context,
        roofline_decode_tokens_per_s=state.roofline_decode_tokens_per_s,
        bytes_read_per_step=bytes_read,
        basis=basis,
        tpot_seconds=state.tpot_s,
        input_tokens=isl if split else None,
        output_tokens=osl if split else None,
        output_tokens_per_s=state.output_tokens_per_s,
        requests_per_s=state.requests_per_s,
        request_rate=request_rate,
        saturated=state.saturated,
        tpot_band=cal.tpot_band,
        ttft_band=cal.ttft_band,
    )
