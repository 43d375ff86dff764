"""Which GPUs, how many, how fast, at what cost: the search behind ``fitgate recommend``.

Every combination of GPU product x tensor-parallel size x pipeline-parallel size x KV-cache dtype x
weight quantization that vLLM can load on that GPU is planned (pure: :func:`fitgate.sizing.plan.plan`
on each), and the ones that Fit or are Tight are ranked by what a million output tokens cost
(GPU-hours per million when no price is given), then by fewer GPUs.

With latency targets (``--ttft-ms`` / ``--tpot-ms``, issue 24) each option also gets the fewest
replicas whose estimated TTFT and TPOT meet them at the load (``--request-rate`` split evenly over the
replicas, else the concurrency), found by bisection since more replicas only lower each one's load;
options that no number of replicas up to :data:`MAX_REPLICAS` brings within the targets are dropped, and
the rest are ranked by what all their replicas cost per hour.

Pruned without planning, because they can never be chosen: a set whose weights alone cannot fit
(stored bytes / GPUs above the card's memory), and a pipeline depth beyond the smallest that fits
for the same GPU, TP, KV dtype and quantization (more stages cost more GPUs and, in the estimate,
read the same bytes per step, so they are never cheaper).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fitgate.sizing.cost import DEFAULT_UTILIZATION, Cost, GpuPrices, replica_cost
from fitgate.sizing.dtypes import (
    FP8_KV_MIN_COMPUTE_CAPABILITY,
    FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY,
    compute_capability_at_least,
)
from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.load import steady_state
from fitgate.sizing.performance import (
    MAX_TARGET_MS,
    Performance,
    SpeedLoad,
    estimate,
    requests_in_flight,
    requests_the_pool_holds,
    work,
)
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.quantization import moe_tp_split_refused
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.step_time import calibration
from fitgate.sizing.verdict_rules import short_within_error
from fitgate.sizing.versions import accounting_for

TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (1, 2, 4, 8, 16)
#: Engine ranks tried with ``--enable-expert-parallel`` for MoE models (PP 1): the wide-EP shapes of
#: vLLM's expert-parallel deployment guide and llm-d's wide-EP guide (docs/parallelism.md).
EP_DP_SIZES = (2, 4, 8, 16)
MAX_GPUS = 64
#: A GPU-hour costs this much in the ranking when no price is given (the ranking is then by GPU-hours).
_UNPRICED = 1.0
#: The most replicas one option may need to meet latency targets.
MAX_REPLICAS = 1024


@dataclass(frozen=True)
class LatencyTargets:
    """``--ttft-ms`` / ``--tpot-ms`` (seconds here): the mean TTFT and TPOT each replica must stay within."""

    ttft_seconds: float | None = None
    tpot_seconds: float | None = None

    def met_by(self, ttft_s: float, tpot_s: float) -> bool:
        """Whether an estimated TTFT and TPOT are within the targets."""
        return (self.ttft_seconds is None or ttft_s <= self.ttft_seconds) and (
            self.tpot_seconds is None or tpot_s <= self.tpot_seconds
        )


def check_targets(ttft_ms: float | None, tpot_ms: float | None, load: SpeedLoad | None) -> LatencyTargets | None:
    """Checked targets (None without any); errors name the flag, the value and the limit."""
    if ttft_ms is None and tpot_ms is None:
        return None
    for flag, value in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if value is not None and not (0 < value <= MAX_TARGET_MS and math.isfinite(value)):
            raise SizingError(flag, value, f"milliseconds above 0, at most {MAX_TARGET_MS:.0f}")
    if load is None or load.input_tokens is None:
        raise SizingError(
            "--input-tokens", None, "--input-tokens and --output-tokens when --ttft-ms or --tpot-ms is given"
        )
    return LatencyTargets(None if ttft_ms is None else ttft_ms / 1000, None if tpot_ms is None else tpot_ms / 1000)


def replicas_needed(
    model: ModelInput, result: Plan, targets: LatencyTargets, load: SpeedLoad, concurrency: int
) -> tuple[int, Performance] | None:
    """The fewest replicas of ``result`` whose estimate meets ``targets``, and one replica's estimate then.

    The load is ``load.request_rate`` requests/s split evenly over the replicas, else ``concurrency``
    requests in flight split evenly. None when even :data:`MAX_REPLICAS` replicas miss the targets.
    """
    if load.input_tokens is None or load.output_tokens is None:
        raise SizingError("--input-tokens", None, "--input-tokens and --output-tokens with latency targets")
    isl, osl = load.input_tokens, load.output_tokens
    w = work(model, result, isl + osl // 2, isl)
    k = calibration().constants
    most = requests_in_flight(result, isl, osl)

    def meets(n: int) -> bool:
        if load.request_rate is not None:
            s = steady_state(w, isl, osl, k, request_rate=load.request_rate / n, max_concurrency=most)
        elif math.ceil(concurrency / n) > most:
            return False  # hunt91 G2: a replica's share past what its KV pool runs queues; more replicas hold it
        else:
            s = steady_state(w, isl, osl, k, concurrency=math.ceil(concurrency / n))
        return not s.saturated and targets.met_by(s.ttft_s, s.tpot_s)

    # More replicas only lower each one's load, so meets() is monotone. Each probe is a steady state (issue 24's
    # <= 2 s search): whether any number will do first (the lightest load, the cheapest probe: most configurations
    # of a catalog search miss there), then one replica, then up 2, 4, ... (most answers are a few replicas) and
    # halve the last gap.
    if not meets(MAX_REPLICAS):
        return None
    low, high = 0, 1
    if not meets(1):
        low, high = 1, 2
        while high < MAX_REPLICAS and not meets(high):
            low, high = high, min(2 * high, MAX_REPLICAS)
    while high - low > 1:  # invariant: meets(high) and (low == 0 or not meets(low))
        mid = (low + high) // 2
        if meets(mid):
            high = mid
        else:
            low = mid
    n = high
    if load.request_rate is not None:
        perf = estimate(model, result, input_tokens=isl, output_tokens=osl, request_rate=load.request_rate / n)
    else:
        perf = estimate(model, result, batch=math.ceil(concurrency / n), input_tokens=isl, output_tokens=osl)
    return n, perf


def load_costs(perf: Performance) -> dict[str, Any]:
    """The per-request and per-token inputs of :func:`replica_cost` when the estimate has the request shape."""
    if perf.input_tokens is None or perf.output_tokens is None:
        return {}
    shape = (perf.input_tokens, perf.output_tokens)
    return {
        "requests_per_s": perf.requests_per_s,
        "tokens_per_s": perf.requests_per_s * sum(shape),
        "request_shape": shape,
    }


@dataclass(frozen=True)
class Option:
    """One deployment that Fits or is Tight, with its estimated speed and cost."""

    gpu: GpuModel
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    quantization: str | None
    verdict: Verdict
    headroom_bytes: int
    performance: Performance  # one replica's, at its share of the load
    cost: Cost | None  # one replica's; None when the GPU has no price
    data_parallel_size: int = 1  # engine ranks with --enable-expert-parallel (MoE models; docs/parallelism.md)
    replicas: int = 1  # latency targets (issue 24): the fewest replicas that meet them

    @property
    def expert_parallel(self) -> bool:
        """A data-parallel, expert-parallel shape (``--data-parallel-size N --enable-expert-parallel``)."""
        return self.data_parallel_size > 1

    @property
    def gpus(self) -> int:
        """GPUs per replica."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def total_gpus(self) -> int:
        """GPUs of all replicas."""
        return self.gpus * self.replicas

    @property
    def gpu_hours_per_million_output_tokens(self) -> float:
        """What the ranking uses when no price is given: GPU-hours per 1M output tokens at the utilisation."""
        c = replica_cost(_UNPRICED, self.gpus, self.performance.decode_tokens_per_s, self._utilization)
        return c.usd_per_million_output_tokens or float("inf")

    @property
    def _utilization(self) -> float:
        return self.cost.utilization if self.cost is not None else DEFAULT_UTILIZATION


@dataclass(frozen=True)
class Search:
    """The options, cheapest first, and why there are none when there are none."""

    options: tuple[Option, ...]
    reason: str
    planned: int  # plans computed


def _quantizations(model: ModelInput, gpu: GpuModel) -> tuple[str | None, ...]:
    """As stored, plus runtime fp8 for an unquantized checkpoint where vLLM runs fp8 weights."""
    if model.arch.quantization is None and compute_capability_at_least(
        gpu.compute_capability, FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY
    ):
        return (None, "fp8")
    return (None,)


def _kv_dtypes(gpu: GpuModel) -> tuple[str, ...]:
    """The model's dtype, plus fp8 where vLLM has fp8 KV-cache kernels (compute capability 8.0 and later)."""
    fp8 = compute_capability_at_least(gpu.compute_capability, FP8_KV_MIN_COMPUTE_CAPABILITY)
    return ("auto", "fp8") if fp8 else ("auto",)


def _weights_cannot_fit(model: ModelInput, gpu: GpuModel, gpus: int, quantization: str | None) -> bool:
    stored = model.inventory.stored_bytes
    if quantization == "fp8":
        stored //= 2
    return stored / gpus > gpu.memory_bytes


def search(
    model: ModelInput,
    workload: Workload,
    gpus: Sequence[GpuModel],
    *,
    max_model_len: int | None = None,
    max_gpus: int = 16,
    prices: GpuPrices | None = None,
    utilization: float = DEFAULT_UTILIZATION,
    api_usd_per_million: float | None = None,
    api_input_usd_per_million: float | None = None,  # the API's input price (with speed_load's request shape)
    vllm_version: str | None = None,
    kv_cache_dtypes: tuple[str, ...] | None = None,
    quantizations: tuple[str | None, ...] | None = None,
    fewest_gpus_only: bool = False,
    expert_parallel: bool = True,
    speed_load: SpeedLoad | None = None,  # speed estimate (issue 24): ISL / OSL and a request rate
    targets: LatencyTargets | None = None,  # latency targets (issue 24): replicas per option
    price_basis: dict[str, str] | None = None,  # GPU name -> where its price comes from (the cost's price_basis)
) -> Search:
    """Every loadable configuration of ``model`` on ``gpus`` that holds ``workload``, cheapest first.

    ``kv_cache_dtypes`` and ``quantizations`` restrict the search to those settings (default: all
    that vLLM can run on each GPU). ``fewest_gpus_only`` keeps, per GPU product, KV dtype and
    quantization, only the smallest set that holds it (TP before PP at equal count): the question of
    ``fitgate gpus --fits`` and of the operator's alternatives, at a fraction of the plans.
    ``expert_parallel``: also try DP x TP shapes with ``--enable-expert-parallel`` for a MoE model.
    """
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or not 1 <= max_gpus <= MAX_GPUS:
        raise SizingError("--max-gpus", max_gpus, f"an integer from 1 to {MAX_GPUS}")
    if not gpus:
        raise SizingError("--gpus", "", "at least one GPU from the catalog")
    base = ServingConfig(max_model_len=max_model_len or workload.context_tokens, vllm_version=vllm_version)
    found: list[tuple[Option, Plan]] = []
    planned = missed = 0
    floor = (math.inf, math.inf)  # the least TTFT and TPOT of one request alone among the configurations missed
    last_refusal = ""
    release = accounting_for(vllm_version).version
    for gpu in gpus:
        if not (gpu.memory_bandwidth_gbps and gpu.bf16_dense_tflops):
            continue  # a MIG slice or a bare memory size: no speed to rank it by
        price = prices.of(gpu) if prices is not None else None
        for quant in quantizations or _quantizations(model, gpu):
            for kv in kv_cache_dtypes or _kv_dtypes(gpu):
                dead: set[tuple[int, int, int]] = set()
                for tp, pp, dp in _sets(max_gpus, model.arch.is_moe and expert_parallel):
                    if _weights_cannot_fit(model, gpu, tp * pp * dp, quant) or (tp, pp, dp) in dead:
                        continue
                    if moe_tp_split_refused(model.arch, tp, dp > 1, release) is not None:
                        continue  # vLLM refuses to load block-fp8 experts split so (hunt174 F1)
                    serving = replace(
                        base,
                        tensor_parallel_size=tp,
                        pipeline_parallel_size=pp,
                        kv_cache_dtype=kv,
                        quantization=quant,
                        data_parallel_size=dp,
                        enable_expert_parallel=dp > 1,
                    )
                    try:
                        result = plan(model, gpu, serving, workload)
                        split = 1 if fewest_gpus_only else _replicas_to_hold(result, workload)
                        if split > 1:  # hunt91 G3: replicas hold the workload, as plan's suggestions add them
                            result = plan(model, gpu, serving, replace(workload, replicas=split))
                    except SizingError as exc:
                        if exc.field in ("tensor_parallel_size", "pipeline_parallel_size"):
                            dead.update((tp, p, d) for p in PP_SIZES for d in (1, *EP_DP_SIZES) if p >= pp)
                            continue  # e.g. TP not a divisor of the heads
                        raise
                    planned += 1
                    # a plan short of KV within fitgate's error band is Tight, not denied, but no answer to offer
                    # (as advice's suggestions): the planner looks on for one that holds the workload
                    if result.verdict not in (Verdict.FITS, Verdict.TIGHT) or short_within_error(result):
                        last_refusal = f"{gpu.name} x {tp * pp * dp}: {result.reasons[0].message}"
                        continue
                    replicas = split
                    # a request rate without targets still needs the replicas that absorb it (hunt91 G1: one
                    # replica of 59 req/s was offered for 1000 req/s): the fewest not saturated
                    rate_only = targets is None and speed_load is not None and speed_load.request_rate is not None
                    if speed_load is not None and (targets is not None or rate_only):
                        needed = replicas_needed(
                            model, result, targets or LatencyTargets(), speed_load, workload.concurrency
                        )
                        if needed is None:
                            missed += 1
                            if not found:  # the floor is named only when no configuration is found
                                floor = _alone_floor(model, result, speed_load, floor)
                            continue
                        replicas, perf = needed
                        if replicas < split:  # the concurrency split needs more replicas than the targets
                            replicas = split
                            rate = speed_load.request_rate
                            share = None if rate is None else rate / split
                            perf = estimate(model, result, load=replace(speed_load, request_rate=share))
                    else:
                        # with dp engine ranks the workload's batch is split over them: about the same tokens/s
                        perf = estimate(model, result, load=speed_load)
                    cost = None
                    if price is not None:
                        cost = replica_cost(
                            price, tp * pp * dp, perf.decode_tokens_per_s, utilization, api_usd_per_million,
                            api_input_usd_per_million=api_input_usd_per_million, **load_costs(perf),
                            price_basis=(price_basis or {}).get(gpu.name, ""),
                        )  # fmt: skip
                    verdict, headroom = _at_load(model, gpu, serving, result, perf)
                    option = Option(
                        gpu, tp, pp, kv, quant, verdict, headroom, perf, cost,
                        data_parallel_size=dp, replicas=replicas,
                    )  # fmt: skip
                    found.append((option, result))
                    if fewest_gpus_only:
                        break
                    # deeper pipelines cost more GPUs for the same bytes per step
                    dead.update((tp, p, dp) for p in PP_SIZES if p > pp)
    by_total = targets is not None or (speed_load is not None and speed_load.request_rate is not None)
    options = sorted((o for o, _ in found), key=_rank_total if by_total else _rank)
    reason = ""
    if not options and missed:
        what = "meets the latency targets" if targets is not None else "absorbs the request rate"
        reason = f"{missed} configuration(s) hold the workload, but none {what} with at most {MAX_REPLICAS} replicas"
        if targets is not None and math.isfinite(floor[0]):  # hunt91 O7: name the floor, as plan-pd does
            reason += (
                f"; one request alone takes at least TTFT {floor[0] * 1000:.0f} ms and TPOT {floor[1] * 1000:.1f} ms "
                "on any of them: targets below those cannot be met by adding replicas"
            )
    elif not options:
        names = ", ".join(g.name for g in gpus)
        reason = (
            f"no set of at most {max_gpus} GPUs ({names}) holds {model.name} with {workload.concurrency} x "
            f"{workload.context_tokens} tokens"
        )
        if last_refusal:
            reason += f"; the largest tried: {last_refusal}"
        elif planned == 0:
            reason += "; its weights alone exceed every set"
    return Search(tuple(options), reason, planned)


def _alone_floor(model: ModelInput, result: Plan, load: SpeedLoad, floor: tuple[float, float]) -> tuple[float, float]:
    """``floor`` lowered to one request alone on ``result`` (TTFT, TPOT), where the load states ISL and OSL."""
    if load.input_tokens is None or load.output_tokens is None:
        return floor
    alone = estimate(model, result, batch=1, input_tokens=load.input_tokens, output_tokens=load.output_tokens)
    return min(floor[0], alone.ttft_seconds), min(floor[1], alone.tpot_seconds)


def _at_load(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, result: Plan, perf: Performance
) -> tuple[Verdict, int]:
    """The verdict and headroom of one replica at the requests its estimate has in flight (hunt91 G10).

    At a request rate the search plans one request of the shape (the floor every option must hold); a replica
    then runs ``perf.batch`` of them, each holding ISL + OSL / 2 tokens on average (performance.requests_in_flight),
    so its headroom is the plan's at that load, and a Fits that is Tight there says Tight.
    """
    if perf.request_rate is None or perf.input_tokens is None or perf.output_tokens is None or result.workload is None:
        return result.verdict, result.per_gpu.headroom_bytes
    mean = perf.input_tokens + perf.output_tokens // 2
    if perf.batch <= result.workload.per_replica:
        return result.verdict, result.per_gpu.headroom_bytes
    loaded = plan(model, gpu, serving, Workload(perf.batch, mean))
    if loaded.verdict is Verdict.DOES_NOT_FIT:  # the mean occupancy outgrows the plan's rounding: keep the floor's
        return result.verdict, result.per_gpu.headroom_bytes
    worse = Verdict.TIGHT if Verdict.TIGHT in (loaded.verdict, result.verdict) else Verdict.FITS
    return worse, min(loaded.per_gpu.headroom_bytes, result.per_gpu.headroom_bytes)


def _replicas_to_hold(result: Plan, workload: Workload) -> int:
    """The replicas over which ``workload``'s concurrency fits, where only its size denies ``result`` (else 1).

    A load balancer splits the requests evenly (:attr:`Workload.per_replica`); a configuration whose pool holds
    ``h`` requests of the context holds ``ceil(concurrency / h)`` replicas' worth. At most :data:`MAX_REPLICAS`.
    """
    if result.verdict is not Verdict.DOES_NOT_FIT or any(
        r.code != ReasonCode.WORKLOAD_EXCEEDS_KV_CACHE for r in result.reasons
    ):
        return 1
    holds = requests_the_pool_holds(result, workload.context_tokens)
    split = math.ceil(workload.concurrency / max(1, holds))
    return split if split <= MAX_REPLICAS else 1


def _sets(max_gpus: int, moe: bool = False) -> list[tuple[int, int, int]]:
    """(TP, PP, DP) of at most ``max_gpus`` GPUs, fewest GPUs first, TP before PP before DP + EP at equal count.

    DP > 1 (with expert parallelism) only for MoE models and PP 1.
    """
    sets = [(tp, pp, 1) for tp in TP_SIZES for pp in PP_SIZES if tp * pp <= max_gpus]
    if moe:
        sets += [(tp, 1, dp) for tp in TP_SIZES for dp in EP_DP_SIZES if tp * dp <= max_gpus]
    return sorted(sets, key=lambda s: (s[0] * s[1] * s[2], s[2] > 1, -s[0]))


def _rank(o: Option) -> tuple[float, int, int, float]:
    per_million = (
        o.cost.usd_per_million_output_tokens
        if o.cost is not None and o.cost.usd_per_million_output_tokens is not None
        else o.gpu_hours_per_million_output_tokens
    )
    return (per_million, o.gpus, 0 if o.verdict is Verdict.FITS else 1, -o.performance.decode_tokens_per_s)


def _rank_total(o: Option) -> tuple[float, float, float, int, int]:
    """With targets or a rate: what all replicas cost per hour (GPU-hours when unpriced), then the faster, then GPUs.

    Faster: TTFT, then TPOT; at one cost and one rate the same requests are served (hunt92 F5).
    """
    per_hour = o.cost.usd_per_hour if o.cost is not None else o.gpus * _UNPRICED
    speed = o.performance
    return (
        per_hour * o.replicas,
        speed.ttft_seconds,
        speed.tpot_seconds,
        o.total_gpus,
        0 if o.verdict is Verdict.FITS else 1,
    )


def fewest_gpus(options: Sequence[Option]) -> dict[str, Option]:
    """Per GPU product, the option with the fewest GPUs (then Fits before Tight, then the fastest)."""
    best: dict[str, Option] = {}
    for o in sorted(options, key=lambda o: (o.gpus, o.verdict is not Verdict.FITS, -o.performance.decode_tokens_per_s)):
        best.setdefault(o.gpu.name, o)
    return best
