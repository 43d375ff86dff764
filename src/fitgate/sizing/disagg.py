"""Disaggregated prefill / decode: how many prefill and how many decode replicas a request rate needs.

A disaggregated deployment (vLLM's ``--kv-transfer-config`` with a ``kv_role`` of ``kv_producer`` or
``kv_consumer``, NIXL or LMCache connectors; NVIDIA Dynamo's and llm-d's P/D deployments) runs prompts on one
pool and decodes on another, and moves each request's KV cache between them once. The question their planners
answer (Dynamo's SLA planner: prefill replicas from the prompt tokens/s a prefill engine sustains within the
TTFT target, decode replicas from the decode load at the ITL target; llm-d's P/D guides the same per pool) is
answered here from fitgate's step model (:mod:`fitgate.sizing.step_time`), each pool sized and verdicted on
its own:

* **prefill pool** (its GPU, TP): a replica runs prompt-only steps of up to ``max_num_batched_tokens``
  tokens, so one prompt of ISL tokens is ``ceil(ISL / budget)`` steps (its service time ``S``); at ``rate / n``
  prompts/s per replica, the mean TTFT is ``S`` + the M/D/1 wait ``S x rho / (2 (1 - rho))``
  (``rho = rate / n x S``) + the KV transfer (the request's KV on one GPU over ``kv_transfer_gbps``, every
  GPU of the replica sending its share at once). The fewest ``n`` with ``rho < 1`` and the TTFT within the
  target, if one is given.
* **decode pool**: a replica decodes ``C`` requests per step with no prompt in its steps; at ``rate / m``
  requests/s Little's law gives ``C = rate / m x (OSL - 1) x TPOT(C)``; the fewest ``m`` whose ``C`` the KV
  pool (and ``max_num_seqs``) holds with TPOT within the target, if one is given.

Each pool is then re-planned (:func:`fitgate.sizing.plan.plan`) with the requests it holds at once (a
prefill replica: the prompts in service and waiting, at ISL tokens; a decode replica: ``ceil(C)`` requests
of ISL + OSL tokens), and must Fit or be Tight. Replicas x per-replica rate >= the target rate in both.
Not modelled: the KV transfer's bandwidth shared between requests (the link is taken as one request's),
prefix caching, and a decode pool that also runs prompts (vLLM's decode instance with local prefill).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.performance import requests_in_flight, requests_the_pool_holds, work
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.step_time import Work, calibration, step_seconds

#: The most replicas one pool may need.
MAX_POOL_REPLICAS = 4096
#: KV-transfer link per GPU, GB/s, when none is given: one 400 Gb/s RDMA NIC per GPU (NIXL over
#: InfiniBand / RoCE, the H100 / H200 / B200 reference nodes), of which ~50 GB/s is achievable.
DEFAULT_KV_TRANSFER_GBPS = 50.0


@dataclass(frozen=True)
class PoolShape:
    """One pool's GPU product and engine shape."""

    gpu: GpuModel
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1


@dataclass(frozen=True)
class DisaggLoad:
    """The load and the targets: a request rate with its ISL / OSL, a TTFT and a TPOT target (seconds)."""

    request_rate: float
    input_tokens: int
    output_tokens: int
    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    kv_transfer_gbps: float = DEFAULT_KV_TRANSFER_GBPS


@dataclass(frozen=True)
class PoolPlan:
    """One pool: how many replicas, each one's share of the load, and its own plan and verdict."""

    role: str  # "prefill" or "decode"
    shape: PoolShape
    replicas: int
    rate_per_replica: float  # requests/s (prompts/s for prefill)
    capacity_per_replica: float  # requests/s one replica holds before it saturates (rho -> 1 / KV full)
    in_flight_per_replica: int  # requests one replica holds at once (what it is planned with)
    ttft_seconds: float | None  # prefill: the mean TTFT (service + wait + KV transfer)
    tpot_seconds: float | None  # decode: the mean TPOT
    kv_transfer_seconds: float  # prefill: one request's KV to the decode pool
    plan: Plan

    @property
    def gpus(self) -> int:
        """GPUs of the whole pool."""
        return self.replicas * self.shape.tensor_parallel_size * self.shape.pipeline_parallel_size

    @property
    def verdict(self) -> Verdict:
        """The pool's own verdict (its re-plan's)."""
        return self.plan.verdict


@dataclass(frozen=True)
class DisaggPlan:
    """A prefill pool and a decode pool for one load."""

    load: DisaggLoad
    prefill: PoolPlan
    decode: PoolPlan

    @property
    def gpus(self) -> int:
        """GPUs of both pools."""
        return self.prefill.gpus + self.decode.gpus


def check_load(
    request_rate: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    ttft_ms: float | None,
    tpot_ms: float | None,
    kv_transfer_gbps: float | None,
) -> DisaggLoad:
    """A checked :class:`DisaggLoad`; errors name the flag, the value and the limit."""
    if request_rate is None or not (0 < request_rate <= 1e6 and math.isfinite(request_rate)):
        raise SizingError("--request-rate", request_rate, "requests per second above 0, at most 1000000")
    for flag, n in (("--input-tokens", input_tokens), ("--output-tokens", output_tokens)):
        if n is None or not 1 <= n <= 10_000_000:
            raise SizingError(flag, n, "tokens per request, from 1 to 10000000")
    for flag, ms in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if ms is not None and not (0 < ms <= 3.6e6 and math.isfinite(ms)):
            raise SizingError(flag, ms, "milliseconds above 0, at most 3600000")
    link = DEFAULT_KV_TRANSFER_GBPS if kv_transfer_gbps is None else kv_transfer_gbps
    if not (0 < link <= 1e5 and math.isfinite(link)):
        raise SizingError("--kv-transfer-gbps", kv_transfer_gbps, "GB/s per GPU above 0, at most 100000")
    assert input_tokens is not None and output_tokens is not None  # checked above (mypy)
    return DisaggLoad(
        request_rate, input_tokens, output_tokens,
        None if ttft_ms is None else ttft_ms / 1000, None if tpot_ms is None else tpot_ms / 1000, link,
    )  # fmt: skip


def _serving(base: ServingConfig, shape: PoolShape) -> ServingConfig:
    return replace(
        base, tensor_parallel_size=shape.tensor_parallel_size, pipeline_parallel_size=shape.pipeline_parallel_size
    )


def prefill_service_seconds(w: Work, input_tokens: int) -> float:
    """One prompt alone on a prefill replica: ``ceil(ISL / budget)`` prompt-only steps."""
    k = calibration().constants
    budget = max(1, w.max_num_batched_tokens)
    chunks = max(1, math.ceil(input_tokens / budget))
    step, _ = step_seconds(w, 0.0, input_tokens / chunks, k)
    return chunks * step


def _mdl_wait(service_s: float, rate: float) -> float:
    """M/D/1 mean wait in queue at ``rate`` arrivals/s of ``service_s`` each (inf at rho >= 1)."""
    rho = rate * service_s
    return math.inf if rho >= 1 else service_s * rho / (2 * (1 - rho))


class PoolDoesNotFitError(SizingError):
    """One replica of a pool does not fit its GPUs: a verdict (exit 1), not bad input (hunt91 O8)."""

    def __init__(self, role: str, result: Plan, field: str, value: object, expected: str) -> None:
        super().__init__(field, value, expected)
        self.role = role
        self.result = result


def _probe(model: ModelInput, base: ServingConfig, shape: PoolShape, role: str, tokens: int) -> Plan:
    """One replica of the pool planned with a single request: it must load at all."""
    result = plan(model, shape.gpu, _serving(base, shape), Workload(1, tokens))
    if result.verdict is Verdict.DOES_NOT_FIT:
        raise PoolDoesNotFitError(
            role, result,
            f"--{role}-tp", shape.tensor_parallel_size,
            f"a {role} replica that holds one {tokens}-token request on {shape.gpu.name}: "
            f"{result.reasons[0].message if result.reasons else 'it does not fit'}",
        )  # fmt: skip
    return result


def _fewest(meets: Callable[[int], bool]) -> int | None:
    """The fewest replicas in 1..MAX_POOL_REPLICAS for which ``meets`` holds (monotone), or None."""
    if not meets(MAX_POOL_REPLICAS):
        return None
    return bisect.bisect_left(range(1, MAX_POOL_REPLICAS + 1), True, key=meets) + 1


def _prefill_pool(model: ModelInput, base: ServingConfig, shape: PoolShape, load: DisaggLoad) -> PoolPlan:
    isl = load.input_tokens
    probe = _probe(model, base, shape, "prefill", isl)
    w = work(model, probe, isl, isl)
    service = prefill_service_seconds(w, isl)
    # the request's KV on each GPU of the replica (every GPU sends its own share at once)
    kv_bytes = max(s.kv_bytes_per_request for s in w.stages)
    transfer = kv_bytes / (load.kv_transfer_gbps * 1e9)

    def ttft(n: int) -> float:
        return service + _mdl_wait(service, load.request_rate / n) + transfer

    # prompts in service and waiting at once (Little's law on the prefill's own time), at least one: a replica
    # must hold them all in its KV pool, or its queue near saturation would not fit (issue 24's refit found one)
    most = requests_the_pool_holds(probe, isl)

    def in_flight(n: int) -> int:
        return max(1, math.ceil(load.request_rate / n * (ttft(n) - transfer)))

    def meets(n: int) -> bool:
        t = ttft(n)
        return math.isfinite(t) and (load.ttft_seconds is None or t <= load.ttft_seconds) and in_flight(n) <= most

    n = _fewest(meets)
    if n is None:
        floor = (service + transfer) * 1000
        raise SizingError(
            "--ttft-ms", None if load.ttft_seconds is None else load.ttft_seconds * 1000,
            f"at least {floor:.0f} ms: one {isl}-token prompt alone takes {service * 1000:.0f} ms on "
            f"{shape.gpu.name} x {shape.tensor_parallel_size} plus {transfer * 1000:.1f} ms of KV transfer; "
            "raise --ttft-ms or --prefill-tp",
        )  # fmt: skip
    rate = load.request_rate / n
    final = plan(model, shape.gpu, _serving(base, shape), Workload(in_flight(n), isl))
    return PoolPlan("prefill", shape, n, rate, 1 / service, in_flight(n), ttft(n), None, transfer, final)


def decode_in_flight(w: Work, rate: float, output_tokens: int, most: float) -> tuple[float, float]:
    """(requests decoding at once, TPOT) of a decode replica at ``rate`` requests/s: Little's law.

    ``C = rate x (OSL - 1) x TPOT(C)`` with TPOT a decode-only step of ``C`` requests; ``rate x life(C) - C``
    rises then falls through one root, found by bisection in [1, most]; (inf, inf) when even ``most``
    requests cannot absorb the rate.
    """
    k = calibration().constants
    steps = max(1, output_tokens - 1)

    def excess(c: float) -> float:
        return rate * steps * step_seconds(w, c, 0.0, k)[0] - c

    if excess(1.0) <= 0:
        return 1.0, step_seconds(w, 1.0, 0.0, k)[0]
    if excess(most) > 0:
        return math.inf, math.inf
    low, high = 1.0, most
    for _ in range(60):
        mid = (low + high) / 2
        if excess(mid) > 0:
            low = mid
        else:
            high = mid
        if high - low < 1e-6 * high:
            break
    return high, step_seconds(w, high, 0.0, k)[0]


def _decode_pool(model: ModelInput, base: ServingConfig, shape: PoolShape, load: DisaggLoad) -> PoolPlan:
    isl, osl = load.input_tokens, load.output_tokens
    probe = _probe(model, base, shape, "decode", isl + osl)
    w = work(model, probe, isl + osl // 2, isl)
    most = float(requests_in_flight(probe, isl, osl))

    def meets(n: int) -> bool:
        c, tpot = decode_in_flight(w, load.request_rate / n, osl, most)
        return math.isfinite(c) and (load.tpot_seconds is None or tpot <= load.tpot_seconds)

    n = _fewest(meets)
    if n is None:
        one = step_seconds(w, 1.0, 0.0, calibration().constants)[0] * 1000
        raise SizingError(
            "--tpot-ms", None if load.tpot_seconds is None else load.tpot_seconds * 1000,
            f"at least {one:.1f} ms: one request alone decodes at that on {shape.gpu.name} x "
            f"{shape.tensor_parallel_size}; raise --tpot-ms or --decode-tp",
        )  # fmt: skip
    rate = load.request_rate / n
    c, tpot = decode_in_flight(w, rate, osl, most)
    in_flight = max(1, math.ceil(c - 1e-9))
    # what one replica holds before its KV pool is full: the rate at which C reaches ``most``
    capacity = most / (max(1, osl - 1) * step_seconds(w, most, 0.0, calibration().constants)[0])
    # its verdict at the requests in flight, each holding ISL + OSL / 2 tokens on average (vLLM allocates a
    # request's blocks as it decodes: performance.requests_in_flight), the occupancy ``most`` is the pool's at;
    # planned at the full ISL + OSL each, a replica count the pool holds was answered with a pool DoesNotFit
    final = plan(model, shape.gpu, _serving(base, shape), Workload(in_flight, isl + osl // 2))
    return PoolPlan("decode", shape, n, rate, capacity, in_flight, None, tpot, 0.0, final)


def plan_disaggregated(
    model: ModelInput,
    prefill: PoolShape,
    decode: PoolShape,
    load: DisaggLoad,
    base: ServingConfig | None = None,
) -> DisaggPlan:
    """Size the prefill and the decode pool of ``model`` for ``load`` (see the module docstring).

    ``base`` carries the engine settings both pools share (max_model_len, KV dtype, quantization, release);
    its TP / PP are replaced by each pool's. Raises :class:`SizingError` naming the target no number of
    replicas can meet.
    """
    base = base or ServingConfig()
    longest = base.max_model_len or model.arch.derived_max_model_len
    if load.input_tokens + load.output_tokens > longest:
        raise SizingError(
            "--input-tokens", load.input_tokens,
            f"at most {longest - load.output_tokens} with --output-tokens {load.output_tokens} "
            f"(max_model_len {longest})",
        )  # fmt: skip
    return DisaggPlan(load, _prefill_pool(model, base, prefill, load), _decode_pool(model, base, decode, load))


__all__ = [
    "DEFAULT_KV_TRANSFER_GBPS",
    "DisaggLoad",
    "DisaggPlan",
    "PoolPlan",
    "PoolShape",
    "check_load",
    "decode_in_flight",
    "plan_disaggregated",
    "prefill_service_seconds",
]
