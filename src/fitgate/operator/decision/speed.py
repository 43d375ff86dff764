"""A ModelDeployment's speed at its declared load, against its latency targets (issue 24): ``status.performance``.

When ``spec.workload`` gives ``inputTokens`` and ``outputTokens`` (the ISL / OSL a benchmark reports), the best
pool's plan is estimated at that load: ``requestRate`` requests/s over ``replicas`` when given (Little's law sets
one replica's concurrency), else ``concurrentRequests`` in flight over them. With ``ttftMs`` / ``tpotMs`` the
status also says whether that many replicas meet them and how many would (with a rate and no targets: how many
absorb it) (:func:`fitgate.sizing.capacity.
replicas_needed`, the same bisection as ``fitgate recommend``). An estimate, with its band: never a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fitgate.operator.schema.api import WorkloadSpec
from fitgate.sizing import ModelInput, Plan
from fitgate.sizing.capacity import LatencyTargets, replicas_needed
from fitgate.sizing.errors import SizingError
from fitgate.sizing.performance import Performance, SpeedLoad, estimate


@dataclass(frozen=True)
class SpeedAtLoad:
    """One replica's estimate at the declared load and what the targets need."""

    performance: Performance
    replicas: int  # the replicas the load is split over (spec.replicas)
    meets_targets: bool | None  # None: no target given
    replicas_for_targets: int | None  # None: no target, or none up to capacity.MAX_REPLICAS meets them


def speed_at_load(model: ModelInput, plan: Plan, workload: WorkloadSpec, replicas: int) -> SpeedAtLoad | None:
    """The estimate, or None when the workload gives no split or the GPU has no speed figures."""
    if workload.input_tokens is None or workload.output_tokens is None:
        return None
    rate = workload.request_rate
    load = SpeedLoad(workload.input_tokens, workload.output_tokens, None if rate is None else rate / replicas)
    batch = None if rate is not None else math.ceil(workload.concurrent_requests / replicas)
    try:
        perf = estimate(model, plan, batch, load=load)
    except SizingError:  # a GPU given by its memory only: no bandwidth or FLOP/s
        return None
    if workload.ttft_ms is None and workload.tpot_ms is None:
        if rate is None:
            return SpeedAtLoad(perf, replicas, None, None)
        # a rate alone: the replicas that absorb it, not saturated (hunt92 F6, as `fitgate recommend` answers it)
        whole = SpeedLoad(workload.input_tokens, workload.output_tokens, rate)
        absorb = replicas_needed(model, plan, LatencyTargets(), whole, 1)
        return SpeedAtLoad(perf, replicas, None, None if absorb is None else absorb[0])
    targets = LatencyTargets(
        None if workload.ttft_ms is None else workload.ttft_ms / 1000,
        None if workload.tpot_ms is None else workload.tpot_ms / 1000,
    )
    meets = not perf.saturated and targets.met_by(perf.ttft_seconds, perf.tpot_seconds)
    whole = SpeedLoad(workload.input_tokens, workload.output_tokens, rate)
    needed = replicas_needed(model, plan, targets, whole, workload.concurrent_requests)
    return SpeedAtLoad(perf, replicas, meets, None if needed is None else needed[0])
