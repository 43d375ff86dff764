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

# the helpers the old estimate shares with the step model, unchanged since: called, not copied
from fitgate.sizing.performance import _expert_and_embedding_bytes, _moe, active_parameters, attention_width
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.results import ModelInput, Plan

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
