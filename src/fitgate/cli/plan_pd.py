"""``fitgate plan-pd``: a prefill pool and a decode pool for a request rate, each sized and verdicted on its own."""

from __future__ import annotations

import argparse
from typing import Any

from fitgate.checkpoints import resolve, to_model_input
from fitgate.cli.exits import EXIT_DOES_NOT_FIT, EXIT_FITS
from fitgate.cli.render import json_text
from fitgate.sizing import ServingConfig, SizingError, Verdict
from fitgate.sizing.disagg import (
    DisaggPlan,
    PoolDoesNotFitError,
    PoolPlan,
    PoolShape,
    check_load,
    plan_disaggregated,
)
from fitgate.sizing.instances import lookup_named_gpu
from fitgate.sizing.step_time import calibration
from fitgate.sizing.units import fmt_gib


def _shape(args: argparse.Namespace, role: str) -> PoolShape:
    name = getattr(args, f"{role}_gpu") or args.gpu
    if not name:
        raise SizingError("--gpu", None, f"a GPU from `fitgate gpus` for the {role} pool (--gpu or --{role}-gpu)")
    flag = f"--{role}-gpu" if getattr(args, f"{role}_gpu") else "--gpu"
    tp = getattr(args, f"{role}_tp")
    if tp < 1:
        raise SizingError(f"--{role}-tp", tp, "a tensor-parallel size of at least 1")
    return PoolShape(lookup_named_gpu(name, flag), tp)


def pool_document(p: PoolPlan) -> dict[str, Any]:
    """One pool as JSON: replicas, each one's share of the load, its estimate and its own verdict."""
    cal = calibration()
    return {
        "gpu": p.shape.gpu.name,
        "tensor_parallel_size": p.shape.tensor_parallel_size,
        "replicas": p.replicas,
        "gpus": p.gpus,
        "requests_per_s_per_replica": p.rate_per_replica,
        "capacity_requests_per_s_per_replica": p.capacity_per_replica,
        "in_flight_per_replica": p.in_flight_per_replica,
        "ttft_ms": None if p.ttft_seconds is None else p.ttft_seconds * 1000,
        "tpot_ms": None if p.tpot_seconds is None else p.tpot_seconds * 1000,
        # the measured error band of the step model (10th-90th percentile of measured / estimated; hunt91 G9)
        "ttft_ms_range": None
        if p.ttft_seconds is None
        else [p.ttft_seconds * 1000 * cal.ttft_band.low, p.ttft_seconds * 1000 * cal.ttft_band.high],
        "tpot_ms_range": None
        if p.tpot_seconds is None
        else [p.tpot_seconds * 1000 * cal.tpot_band.low, p.tpot_seconds * 1000 * cal.tpot_band.high],
        "kv_transfer_ms": p.kv_transfer_seconds * 1000,
        "verdict": p.verdict.value,
        "headroom_bytes": p.plan.per_gpu.headroom_bytes,
        "max_num_batched_tokens": p.plan.serving.max_num_batched_tokens,
    }


def disagg_document(model: str, d: DisaggPlan) -> dict[str, Any]:
    """The whole answer as JSON."""
    verdicts = {d.prefill.verdict, d.decode.verdict}
    overall = next((v for v in (Verdict.DOES_NOT_FIT, Verdict.UNKNOWN, Verdict.TIGHT) if v in verdicts), Verdict.FITS)
    return {
        "model": model,
        "verdict": overall.value,  # the worse pool's, as the misfit document's (hunt118 #5: one shape to read)
        "load": {
            "request_rate": d.load.request_rate,
            "input_tokens": d.load.input_tokens,
            "output_tokens": d.load.output_tokens,
            "ttft_ms": None if d.load.ttft_seconds is None else d.load.ttft_seconds * 1000,
            "tpot_ms": None if d.load.tpot_seconds is None else d.load.tpot_seconds * 1000,
            "kv_transfer_gbps": d.load.kv_transfer_gbps,
        },
        "prefill": pool_document(d.prefill),
        "decode": pool_document(d.decode),
        "total_gpus": d.gpus,
        "basis": "estimated: fitgate's vLLM step model per pool (prompt-only steps on prefill, decode-only steps "
        f"on decode), M/D/1 queueing for prompts, Little's law for decode; {calibration().basis}",
    }


def cmd_plan_pd(args: argparse.Namespace) -> int:
    """``fitgate plan-pd``: exit 0 when both pools Fit or are Tight, 1 when either does not fit."""
    load = check_load(
        args.request_rate, args.input_tokens, args.output_tokens, args.ttft_ms, args.tpot_ms, args.kv_transfer_gbps
    )
    prefill, decode = _shape(args, "prefill"), _shape(args, "decode")
    model = to_model_input(resolve(args.model, source=args.source))
    base = ServingConfig(
        max_model_len=args.max_model_len,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        vllm_version=args.vllm_version,
    )
    try:
        d = plan_disaggregated(model, prefill, decode, load, base)
    except PoolDoesNotFitError as exc:  # a verdict, exit 1 (docs/disaggregated.md), not a usage error
        message = exc.result.reasons[0].message if exc.result.reasons else str(exc)
        longest = load.input_tokens + load.output_tokens
        if args.max_model_len is None and exc.result.serving.max_model_len > longest:
            # hunt118 #3: sized, as vLLM runs it, at the model's length; the workload's requests are far shorter
            message += (
                f" (at the model's {exc.result.serving.max_model_len} tokens, vLLM's default: --max-model-len "
                f"{longest} holds this workload's {load.input_tokens} + {load.output_tokens}-token requests)"
            )
        if args.output == "json":
            print(json_text({"model": model.name, "verdict": "DoesNotFit", "pool": exc.role, "reason": message}))
        else:
            shape = f"TP {exc.result.serving.tensor_parallel_size} on {exc.result.gpu.name}"
            print(f"fitgate plan-pd: {model.name}: verdict DoesNotFit: a {exc.role} replica ({shape}): {message}")
        return EXIT_DOES_NOT_FIT
    doc = disagg_document(model.name, d)
    ok = all(p.verdict in (Verdict.FITS, Verdict.TIGHT) for p in (d.prefill, d.decode))
    if args.output == "json":
        print(json_text(doc))
        return EXIT_FITS if ok else EXIT_DOES_NOT_FIT
    print(
        f"fitgate plan-pd: {model.name} at {load.request_rate:g} requests/s, {load.input_tokens} in / "
        f"{load.output_tokens} out" + (f", TTFT <= {args.ttft_ms:g} ms" if args.ttft_ms else "")
        + (f", TPOT <= {args.tpot_ms:g} ms" if args.tpot_ms else "")
    )  # fmt: skip
    for p in (d.prefill, d.decode):
        latency = (
            f"TTFT {p.ttft_seconds * 1000:.0f} ms (KV transfer {p.kv_transfer_seconds * 1000:.1f} ms)"
            if p.ttft_seconds is not None
            else f"TPOT {(p.tpot_seconds or 0) * 1000:.1f} ms"
        )
        print(
            f"  {p.role:7s} {p.replicas} x {p.shape.gpu.name} TP{p.shape.tensor_parallel_size} = {p.gpus} GPU(s): "
            f"{p.rate_per_replica:.3g} req/s per replica (holds {p.capacity_per_replica:.3g}), "
            f"{p.in_flight_per_replica} in flight, {latency}; {p.verdict.value}, "
            f"headroom {fmt_gib(p.plan.per_gpu.headroom_bytes)}"
        )
    print(f"  {d.gpus} GPU(s) in all")
    print(f"  {doc['basis']}")
    return EXIT_FITS if ok else EXIT_DOES_NOT_FIT
