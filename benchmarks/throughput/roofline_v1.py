"""The previous speed estimate (fitgate.sizing.performance before issue 24), frozen for the before/after table.

benchmarks/throughput.py compares it with the step model on the same points. Unchanged but for this line.

Estimated speed of a planned deployment: decode and prefill rooflines, labelled as estimates.

Decode is memory-bound at serving batch sizes: every step each GPU reads its weights once and the
running batch's KV cache, so one step of pipeline stage ``i`` takes::

    step_i = max(bytes_read_i / (bandwidth x BANDWIDTH_EFFICIENCY),
                 decode FLOPs_i / (peak FLOP/s x MFU)) + all-reduce_i

    bytes_read_i = weights on the GPU - the embedding table (only B rows are gathered)
                   - the experts the step does not touch (MoE)
                   + batch x the KV one request of ``context`` tokens holds on the GPU

and ``decode_tokens_per_s = batch / sum_i step_i`` (stages run one after another within a step; no
micro-batch overlap is assumed, so pipeline parallelism adds memory, not decode speed). An MoE step
touches, per layer, the experts hit by ``batch x top_k`` draws: ``E x (1 - (1 - top_k / E) ^ batch)``.
Tensor parallelism adds two all-reduces per layer of ``batch x hidden`` activations (ring:
``2 (t - 1) / t`` of them cross the link) plus a fixed latency each.

Prefill is compute-bound: ``2 x active parameters`` FLOPs per token plus causal attention
(``2 x context x heads x head_dim`` per token and layer, on average) at :data:`MFU` of the card's
dense bf16 peak; time to first token is one prompt of ``context`` tokens on one replica's ``TP``
GPUs (pipeline stages take turns), never less than reading the weights once per prefill chunk.

Not modelled: CPU scheduling and sampling time per step, speculative decoding, prefix caching, CUDA
graph padding, chunked-prefill interference with decode, quantized-kernel speed (fp8 and int4 weights
are only counted as fewer bytes), expert parallelism and load imbalance between experts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layout import one_request_bytes
from fitgate.sizing.kv_specs import ServingShape
from fitgate.sizing.model import MLA, Attention, ModelArchitecture, MoE, Quantization
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.results import ModelInput, Plan
from fitgate.sizing.weights import Role, WeightInventory, weights_per_rank

#: Share of the datasheet memory bandwidth a decode step achieves (streaming GEMV and paged
#: attention kernels reach 70-85 % of peak; launch gaps between layers take the rest).
BANDWIDTH_EFFICIENCY = 0.75
#: Model FLOP utilisation of prefill and of the compute part of decode (the seeds' figure: 0.35,
#: "90 % does not happen in real serving").
MFU = 0.35
#: Fixed cost of one tensor-parallel all-reduce (vLLM's custom all-reduce on NVLink, NCCL over PCIe).
ALLREDUCE_LATENCY_S = {"nvlink": 10e-6, "pcie": 30e-6}
#: Achieved all-reduce bus bandwidth per GPU, GB/s (NVLink 4 / NVSwitch: ~300 of 450 unidirectional;
#: PCIe 4.0 x16 through the host bridge: ~20).
ALLREDUCE_BUS_GBPS = {"nvlink": 300.0, "pcie": 20.0}

BASIS = (
    f"estimated: decode from the memory-bandwidth roofline at {BANDWIDTH_EFFICIENCY:.0%} of the datasheet bandwidth "
    f"(weights + the batch's KV read per step; MoE: the experts a step touches) plus tensor-parallel all-reduces; "
    f"prefill and TTFT from the compute roofline at {MFU:.0%} MFU of the dense bf16 peak; "
    "not modelled: scheduler/sampling time, speculative decoding, prefix caching, quantized-kernel speed"
)


@dataclass(frozen=True)
class Performance:
    """Estimated speed of one replica at a batch of ``batch`` requests of ``context_tokens`` each."""

    decode_tokens_per_s: float
    per_request_tokens_per_s: float
    prefill_tokens_per_s: float
    ttft_seconds: float
    batch: int
    context_tokens: int
    roofline_decode_tokens_per_s: float  # all of the bandwidth, no all-reduce, no compute bound
    bytes_read_per_step: int  # summed over pipeline stages, per tensor rank
    basis: str = BASIS


def expert_fraction_touched(num_experts: int, top_k: int, batch: int) -> float:
    """Expected share of a layer's experts that ``batch`` tokens routing to ``top_k`` each touch.

    A token picks ``top_k`` distinct experts of ``num_experts``; a given expert escapes one token with
    probability ``1 - top_k / num_experts`` and all ``batch`` tokens with that to the ``batch``.
    """
    if num_experts <= 0 or top_k >= num_experts:
        return 1.0
    return 1.0 - (1.0 - top_k / num_experts) ** max(1, batch)


def _only(inventory: WeightInventory, roles: frozenset[Role]) -> WeightInventory:
    return WeightInventory(tuple(e for e in inventory.entries if e.role in roles), inventory.source)


def active_parameters(model: ModelInput) -> int:
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
    return next((layer.ffn for layer in arch.layers if isinstance(layer.ffn, MoE)), None)


def attention_width(arch: ModelArchitecture, layers: range, context: int) -> float:
    """Sum over ``layers`` of heads x head_dim x the tokens attended (window-limited), per token of context."""
    width = 0.0
    for i in layers:
        m = arch.layers[i].mixer
        if isinstance(m, Attention):
            span = min(context, m.sliding_window or m.chunk_size or context)
            width += m.num_heads * (m.head_dim + m.v_head_dim) / 2 * span / context
        elif isinstance(m, MLA):
            width += m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) / 2
    return width


def estimate(
    model: ModelInput, result: Plan, batch: int | None = None, context_tokens: int | None = None
) -> Performance:
    """Decode and prefill speed of ``result``'s deployment (see the module docstring for the formulas).

    ``batch`` and ``context_tokens`` default to the plan's workload (concurrency capped at
    ``max_num_seqs``), else to as many ``max_model_len`` requests as the KV pool holds.

    Raises:
        SizingError: The GPU has no bandwidth or FLOP/s figure (a ``--gpu-memory`` size).
    """
    rs, gpu, arch = result.serving, result.gpu, model.arch
    if gpu.memory_bandwidth_gbps <= 0 or gpu.bf16_dense_tflops <= 0:
        raise SizingError("gpu", gpu.name, "a catalog GPU with a memory bandwidth and a bf16 FLOP/s figure")
    if context_tokens is None:
        context_tokens = result.workload.context_tokens if result.workload else rs.max_model_len
    if batch is None:
        batch = result.workload.concurrency if result.workload else math.floor(result.kv.max_concurrency)
    batch = max(1, min(batch, rs.max_num_seqs))
    context_tokens = max(1, context_tokens)
    tp, pp = rs.tensor_parallel_size, rs.pipeline_parallel_size
    bandwidth = gpu.memory_bandwidth_gbps * 1e9
    peak = gpu.bf16_dense_tflops * 1e12
    moe = _moe(arch)
    touched = expert_fraction_touched(moe.num_experts, moe.top_k, batch) if moe is not None else 1.0
    runtime_q = RUNTIME_QUANTIZATION.get(rs.quantization or "") if arch.quantization is None else None
    active = active_parameters(model)
    link = rs.interconnect if rs.interconnect in ALLREDUCE_LATENCY_S else "pcie"
    activation_bytes = 2 if rs.dtype in ("bfloat16", "float16") else 4

    step = roof = 0.0
    bytes_read = weights_read_total = 0
    for r in result.ranks:
        expert_bytes, embed_bytes = _expert_and_embedding_bytes(model, tp, pp, r.pp_rank, rs.dtype, runtime_q)
        weights_read = r.weights.total_bytes - r.weights.rotary_cache_bytes - embed_bytes
        weights_read -= int(expert_bytes * (1.0 - touched))
        kv = one_request_bytes(r.layout, ServingShape(context_tokens, rs.max_num_batched_tokens, r.layout.block_size))
        stage_bytes = max(0, weights_read) + batch * kv
        bytes_read += stage_bytes
        weights_read_total += max(0, weights_read)
        share = len(r.layers) / arch.num_layers
        flops = (
            2 * active * share / tp * batch
            + 4 * batch * context_tokens * attention_width(arch, r.layers, context_tokens) / tp
        )
        memory_s = stage_bytes / (bandwidth * BANDWIDTH_EFFICIENCY)
        compute_s = flops / (peak * MFU)
        allreduce_s = 0.0
        if tp > 1:
            payload = batch * arch.hidden_size * activation_bytes * 2 * (tp - 1) / tp
            allreduce_s = 2 * len(r.layers) * (ALLREDUCE_LATENCY_S[link] + payload / (ALLREDUCE_BUS_GBPS[link] * 1e9))
        step += max(memory_s, compute_s) + allreduce_s
        roof += stage_bytes / bandwidth
    decode = batch / step
    roofline = batch / roof

    per_token = 2 * active + 2 * context_tokens * attention_width(arch, range(arch.num_layers), context_tokens)
    prefill = tp * pp * peak * MFU / per_token
    chunks = math.ceil(context_tokens / rs.max_num_batched_tokens)
    ttft = max(
        context_tokens * per_token / (tp * peak * MFU),
        chunks * weights_read_total / (bandwidth * BANDWIDTH_EFFICIENCY),
    )
    return Performance(
        decode_tokens_per_s=decode,
        per_request_tokens_per_s=decode / batch,
        prefill_tokens_per_s=prefill,
        ttft_seconds=ttft,
        batch=batch,
        context_tokens=context_tokens,
        roofline_decode_tokens_per_s=roofline,
        bytes_read_per_step=bytes_read,
    )
