"""The estimate objects of the plan contract: ``performance``, ``cost`` and ``recommend``'s options.

Estimates are floats rounded here, once, to the digits the contract prints (docs/plan-json.md).
"""

from __future__ import annotations

import math
from typing import Any

from fitgate.sizing import Cost, Option, Performance


def performance_document(perf: Performance | None) -> dict[str, Any] | None:
    """``performance`` of the plan contract (docs/plan-json.md): estimates, labelled by ``basis``."""
    if perf is None:
        return None
    return {
        "decode_tokens_per_s": round(perf.decode_tokens_per_s, 1),
        "per_request_tokens_per_s": round(perf.per_request_tokens_per_s, 2),
        "prefill_tokens_per_s": round(perf.prefill_tokens_per_s, 1),
        "ttft_seconds": round(perf.ttft_seconds, 4),
        "batch": perf.batch,
        "context_tokens": perf.context_tokens,
        "roofline_decode_tokens_per_s": round(perf.roofline_decode_tokens_per_s, 1),
        "bytes_read_per_step": perf.bytes_read_per_step,
        "basis": perf.basis,
        # speed estimate (issue 24): the load, TPOT and output rate, and the measured error band
        "input_tokens": perf.input_tokens,
        "output_tokens": perf.output_tokens,
        "request_rate": perf.request_rate,
        "saturated": perf.saturated,
        "tpot_seconds": round(perf.tpot_seconds, 5),
        "output_tokens_per_s": round(perf.output_tokens_per_s, 1),
        "requests_per_s": round(perf.requests_per_s, 3),
        "decode_tokens_per_s_range": [round(v, 1) for v in perf.decode_range_tokens_per_s],
        "tpot_seconds_range": [round(v, 5) for v in perf.tpot_range_seconds],
        "ttft_seconds_range": [round(v, 4) for v in perf.ttft_range_seconds] if not perf.saturated else None,
    }


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def cost_document(cost: Cost | None) -> dict[str, Any] | None:
    """``cost`` of the plan contract (docs/plan-json.md); None without a price for the GPU."""
    if cost is None:
        return None
    return {
        "gpus": cost.gpus,
        "usd_per_hour": _round(cost.usd_per_hour, 4),
        "usd_per_million_output_tokens": _round(cost.usd_per_million_output_tokens, 4),
        "breakeven_tokens_per_day": _round(cost.breakeven_tokens_per_day, 0),
        "cheaper_than_api_at": _round(cost.cheaper_than_api_at, 0),
        "utilization": cost.utilization,
        # speed estimate (issue 24): per request and per 1M input + output tokens; where the price is from
        "usd_per_request": _round(cost.usd_per_request, 6),
        "usd_per_million_tokens": _round(cost.usd_per_million_tokens, 4),
        "price_basis": cost.price_basis or None,
        # with an API price and the request shape: the break-even as requests a day (input prices counted)
        "breakeven_requests_per_day": _round(cost.breakeven_requests_per_day, 0),
    }


def option_document(o: Option) -> dict[str, Any]:
    """One ``recommend`` option (docs/plan-json.md, ``fitgate recommend``)."""
    c = o.cost
    return {
        "gpu": o.gpu.name,
        "tensor_parallel_size": o.tensor_parallel_size,
        "pipeline_parallel_size": o.pipeline_parallel_size,
        "data_parallel_size": o.data_parallel_size,  # > 1: with --enable-expert-parallel (docs/parallelism.md)
        "enable_expert_parallel": o.expert_parallel,
        "kv_cache_dtype": o.kv_cache_dtype,
        "quantization": o.quantization,
        "gpus": o.gpus,
        "verdict": o.verdict.value,
        "headroom_bytes": o.headroom_bytes,
        "usd_per_hour": None if c is None else round(c.usd_per_hour, 4),
        "usd_per_million_output_tokens": None
        if c is None or c.usd_per_million_output_tokens is None
        else round(c.usd_per_million_output_tokens, 4),
        "gpu_hours_per_million_output_tokens": round(o.gpu_hours_per_million_output_tokens, 4),
        "decode_tokens_per_s": round(o.performance.decode_tokens_per_s, 1),
        "per_request_tokens_per_s": round(o.performance.per_request_tokens_per_s, 2),
        "ttft_seconds": round(o.performance.ttft_seconds, 4),
        "cost": cost_document(c),
        # latency targets (issue 24): replicas, and one replica's TPOT at its share of the load
        "replicas": o.replicas,
        "total_gpus": o.total_gpus,
        "usd_per_hour_all_replicas": None if c is None else round(c.usd_per_hour * o.replicas, 4),
        "tpot_seconds": round(o.performance.tpot_seconds, 5),
        # the measured error band (hunt91 G9: read it before promising the targets), as plan's performance carries
        "tpot_seconds_range": [round(v, 5) for v in o.performance.tpot_range_seconds],
        "ttft_seconds_range": None
        if o.performance.saturated
        else [round(v, 4) for v in o.performance.ttft_range_seconds],
        # one replica's share of the load, rounded up at 1e-6 so that replicas x it >= the rate as printed (hunt91 O2)
        "requests_per_s": math.ceil(o.performance.requests_per_s * 1e6) / 1e6,
    }
