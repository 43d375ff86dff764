"""Disaggregated prefill / decode sizing: each pool sized for the rate, re-planned and verdicted on its own."""

from __future__ import annotations

import dataclasses
import math

import pytest

from fitgate.sizing import ServingConfig, SizingError, Verdict, Workload, lookup_gpu, plan
from fitgate.sizing.disagg import (
    DisaggLoad,
    PoolShape,
    check_load,
    decode_in_flight,
    plan_disaggregated,
    prefill_service_seconds,
)
from fitgate.sizing.performance import requests_the_pool_holds, work
from fitgate.sizing.step_time import calibration, step_seconds
from tests.conftest import model

CASES = [
    # (model, GPU, prefill TP, decode TP, rate, ISL, OSL, TTFT target s, TPOT target s)
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 20.0, 2000, 300, 0.5, 0.03),
    ("meta-llama/Llama-3.1-70B-Instruct", "H100", 4, 4, 10.0, 4000, 500, 1.0, 0.05),
    ("meta-llama/Llama-3.1-70B-Instruct", "H200", 2, 4, 3.0, 8000, 1000, None, 0.04),
    ("Qwen/Qwen3-30B-A3B", "A100-80GB", 1, 2, 8.0, 1000, 1000, 0.4, None),
]


@pytest.mark.parametrize(("name", "gpu", "ptp", "dtp", "rate", "isl", "osl", "ttft", "tpot"), CASES)
def test_each_pool_meets_the_rate_and_its_target_and_replans_fits(
    name: str, gpu: str, ptp: int, dtp: int, rate: float, isl: int, osl: int, ttft: float | None, tpot: float | None
) -> None:
    mi = model(name)
    g = lookup_gpu(gpu)
    base = ServingConfig(max_model_len=16384)
    load = DisaggLoad(rate, isl, osl, ttft, tpot)
    d = plan_disaggregated(mi, PoolShape(g, ptp), PoolShape(g, dtp), load, base)
    for pool, tokens in ((d.prefill, isl), (d.decode, isl + osl)):
        # replicas x per-replica rate carries the whole rate, and no replica runs past what it holds
        assert pool.replicas * pool.rate_per_replica >= rate * (1 - 1e-12)
        assert pool.replicas * pool.capacity_per_replica >= rate
        # each pool re-plans on its own, with the requests it holds at once, to Fits or Tight
        again = plan(mi, g, dataclasses.replace(base, tensor_parallel_size=pool.shape.tensor_parallel_size),
                     Workload(pool.in_flight_per_replica, tokens))  # fmt: skip
        assert again.verdict in (Verdict.FITS, Verdict.TIGHT)
        assert pool.verdict is again.verdict
    assert d.prefill.ttft_seconds is not None and d.decode.tpot_seconds is not None
    if ttft is not None:
        assert d.prefill.ttft_seconds <= ttft
    if tpot is not None:
        assert d.decode.tpot_seconds <= tpot
    assert d.gpus == d.prefill.replicas * ptp + d.decode.replicas * dtp


@pytest.mark.parametrize(("name", "gpu", "ptp", "dtp", "rate", "isl", "osl", "ttft", "tpot"), CASES)
def test_one_replica_fewer_misses(
    name: str, gpu: str, ptp: int, dtp: int, rate: float, isl: int, osl: int, ttft: float | None, tpot: float | None
) -> None:
    # The counts are the fewest: one prefill replica fewer saturates, misses the TTFT target or queues more
    # prompts than a replica's KV pool holds; one decode replica fewer overflows its KV pool or misses the TPOT
    # target.
    mi = model(name)
    g = lookup_gpu(gpu)
    base = ServingConfig(max_model_len=16384)
    d = plan_disaggregated(mi, PoolShape(g, ptp), PoolShape(g, dtp), DisaggLoad(rate, isl, osl, ttft, tpot), base)
    if d.prefill.replicas > 1:
        n = d.prefill.replicas - 1
        p = plan(mi, g, dataclasses.replace(base, tensor_parallel_size=ptp), Workload(1, isl))
        service = prefill_service_seconds(work(mi, p, isl, isl), isl)
        rho = rate / n * service
        wait = service * rho / (2 * (1 - rho)) if rho < 1 else math.inf
        queued = math.ceil(rate / n * (service + wait)) if rho < 1 else math.inf
        assert (
            rho >= 1
            or (ttft is not None and service + wait + d.prefill.kv_transfer_seconds > ttft)
            or queued > requests_the_pool_holds(p, isl)
        )
    if d.decode.replicas > 1:
        n = d.decode.replicas - 1
        p = plan(mi, g, dataclasses.replace(base, tensor_parallel_size=dtp), Workload(1, isl + osl))
        w = work(mi, p, isl + osl // 2, isl)
        c, t = decode_in_flight(w, rate / n, osl, float(requests_the_pool_holds(p, isl + osl)))
        assert math.isinf(c) or (tpot is not None and t > tpot)


def test_prefill_ttft_known_answer() -> None:
    # Llama-3.1-8B on one H100, 2000-token prompts at 20 requests/s on n replicas: a prompt is one
    # chunk (the budget is >= 2000), service S = one prompt-only step of 2000 tokens; TTFT = S + the M/D/1
    # wait S x rho / (2 (1 - rho)) with rho = 20 / n x S, + the KV transfer: 2000 tokens x 32 layers x 2
    # (K, V) x 8 KV heads x 128 x 2 B = 262,144,000 B over 50 GB/s = 5.24 ms.
    mi = model("meta-llama/Llama-3.1-8B-Instruct")
    g = lookup_gpu("H100")
    d = plan_disaggregated(mi, PoolShape(g), PoolShape(g), DisaggLoad(20.0, 2000, 300), ServingConfig(16384))
    p = plan(mi, g, ServingConfig(16384), Workload(1, 2000))
    w = work(mi, p, 2000, 2000)
    assert w.max_num_batched_tokens >= 2000
    service = step_seconds(w, 0.0, 2000.0, calibration().constants)[0]
    n = d.prefill.replicas
    assert n == math.floor(20 * service) + 1  # the fewest with rho < 1 (no TTFT target)
    rho = 20 / n * service
    assert d.prefill.kv_transfer_seconds == pytest.approx(262_144_000 / 50e9, rel=0.02)
    assert d.prefill.ttft_seconds == pytest.approx(
        service + service * rho / (2 * (1 - rho)) + d.prefill.kv_transfer_seconds
    )


def test_unreachable_targets_and_bad_input_name_the_flag() -> None:
    mi = model("meta-llama/Llama-3.1-70B-Instruct")
    g = lookup_gpu("H100")
    base = ServingConfig(max_model_len=16384)
    with pytest.raises(SizingError, match="--ttft-ms"):  # one 8000-token 70B prompt alone takes longer
        plan_disaggregated(mi, PoolShape(g, 4), PoolShape(g, 4), DisaggLoad(1.0, 8000, 100, 0.01), base)
    with pytest.raises(SizingError, match="--tpot-ms"):  # one request alone decodes slower than 1 ms
        plan_disaggregated(mi, PoolShape(g, 4), PoolShape(g, 4), DisaggLoad(1.0, 1000, 100, None, 0.001), base)
    with pytest.raises(SizingError, match="--prefill-tp"):  # 70B bf16 weights on one H100
        plan_disaggregated(mi, PoolShape(g, 1), PoolShape(g, 4), DisaggLoad(1.0, 1000, 100), base)
    with pytest.raises(SizingError, match="--input-tokens"):
        plan_disaggregated(mi, PoolShape(g, 4), PoolShape(g, 4), DisaggLoad(1.0, 16000, 1000), base)
    for args, flag in (
        ((0.0, 100, 100, None, None, None), "--request-rate"),
        ((1.0, None, 100, None, None, None), "--input-tokens"),
        ((1.0, 100, 0, None, None, None), "--output-tokens"),
        ((1.0, 100, 100, -5.0, None, None), "--ttft-ms"),
        ((1.0, 100, 100, None, math.inf, None), "--tpot-ms"),
        ((1.0, 100, 100, None, None, 0.0), "--kv-transfer-gbps"),
    ):
        with pytest.raises(SizingError, match=flag):
            check_load(*args)  # type: ignore[arg-type]
