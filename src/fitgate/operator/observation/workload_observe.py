"""Observed versus predicted for the vLLM workloads the audit validates (``FITGATE_WORKLOAD_OBSERVE=1``).

After each audit pass (:mod:`fitgate.operator.observation.audit`), for every audited workload:

1. the pods that serve it (:func:`fitgate.workloads.pods.pod_selector`: a Deployment's ``spec.selector``,
   a LeaderWorkerSet's leaders, a KServe predictor's pods, ...) are listed, and read through the
   ModelDeployment observer's one read path (:meth:`fitgate.operator.observation.observe.Observer.read_pods`: each
   ``/metrics`` bounded by the scrape timeout and size, in parallel, the log of a pod that failed to start);
2. their window is set against the workload's prediction (the best pool's ``num_gpu_blocks``);
3. the result goes to the annotation ``fitgate.io/observed`` (compact JSON, a merge patch of
   ``metadata.annotations`` only), a ``PredictionDrift`` Event when the observed
   blocks leave the 2 % tolerance (once: the annotation already written says whether it had drifted, so a
   restart posts no second Event), and the series ``fitgate_workload_observed_kv_blocks``,
   ``fitgate_workload_prediction_error_ratio`` and ``fitgate_workload_at_capacity`` {namespace,kind,name},
   removed when the workload is no longer audited.

:func:`observed_annotation` and :func:`observe_action` decide (pure); :class:`WorkloadObserver` does the I/O
with the audit's own request and Event functions. Nothing here runs in admission.

The annotation is rewritten at once when a decisive figure changes (pods, observed or predicted blocks, the
error, at capacity, a failure) or a figure appears or goes, and at most every :data:`REWRITE_S` when only
the rates and the KV usage move: the API server bumps a Deployment's ``metadata.generation`` on every
annotation change, and the Deployment controller copies its annotations to the ReplicaSet
(kubernetes pkg/registry/apps/deployment/strategy.go, ``PrepareForUpdate``: "annotation updates bump the
generation because annotations are copied from deployments to their replica sets").
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fitgate.observe.metrics import VERIFIED_ERROR_RATIO, Observation, observe
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.workloads import WorkloadVerdict
from fitgate.operator.observation.observe import MAX_PARALLEL, Observer, PodsRead, verified_message
from fitgate.sizing import ReasonCode
from fitgate.workloads.pods import SelectorError, metrics_port, pod_selector

logger = logging.getLogger("fitgate.audit")

#: The annotation the observation is written to (beside the audit's fitgate.io/verdict).
OBSERVED_ANNOTATION = "fitgate.io/observed"
#: The most characters of a failure kept in the annotation.
MAX_FAILURE_CHARS = 300
#: Seconds between two writes of the annotation when only rates and KV usage changed.
REWRITE_S = 300.0
#: The figures whose change is written at once.
DECISIVE = ("pods", "podsFailed", "observedBlocks", "predictedBlocks", "blocksErrorRatio", "atCapacity", "failure")

Request = Callable[..., Awaitable[Any]]
PostEvent = Callable[[dict[str, Any], str, str, str], Awaitable[None]]


@dataclass(frozen=True)
class Audited:
    """One workload the audit evaluated: the object as listed, its API path, its verdict."""

    obj: dict[str, Any]
    path: str
    verdict: WorkloadVerdict


@dataclass(frozen=True)
class ObserveAction:
    """What to write for one workload's observation."""

    annotations: dict[str, str | None] | None  # merge patch of metadata.annotations (None value: remove)
    event: tuple[str, str, str] | None  # (type, reason, message)


def predicted_blocks(verdict: WorkloadVerdict) -> int | None:
    """The prediction compared: ``num_gpu_blocks`` of the best pool's plan (None: nothing sized)."""
    best = verdict.evaluation.best
    return best.plan.kv.num_blocks if best is not None and best.plan is not None else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def observed_annotation(obs: Observation, read: PodsRead) -> str | None:
    """The ``fitgate.io/observed`` value: compact JSON of what the pods report, None when no pod was found.

    Keys as in a ModelDeployment's ``status.observed``; a figure that is not known is left out. No time
    stamp: the annotation is rewritten only when a figure changes.
    """
    if obs.pods == 0 and read.failed == 0:
        return None
    fields: dict[str, Any] = {
        "pods": obs.pods,
        "podsFailed": read.failed,
        "observedBlocks": obs.observed_blocks,
        "predictedBlocks": obs.predicted_blocks,
        "blocksErrorRatio": _round(obs.blocks_error_ratio, 4),
        "peakKvUsage": _round(obs.peak_kv_usage, 4),
        "preemptionsPerMinute": _round(obs.preemptions_per_minute, 3),
        "prefixCacheHitRate": _round(obs.prefix_cache_hit_rate, 4),
        "tokensPerSecond": _round(obs.tokens_per_second, 1),
        "atCapacity": obs.at_capacity,
        "failure": None if read.failure is None else read.failure[:MAX_FAILURE_CHARS],
    }
    return json.dumps({k: v for k, v in fields.items() if v is not None}, separators=(",", ":"))


def _drifted(annotation: str | None) -> bool:
    """Whether an earlier ``fitgate.io/observed`` value was out of tolerance (an unreadable one: no)."""
    try:
        ratio = json.loads(annotation or "{}").get("blocksErrorRatio")
    except (ValueError, AttributeError):
        return False
    return isinstance(ratio, int | float) and abs(ratio) > VERIFIED_ERROR_RATIO


def _decisive(annotation: str | None) -> tuple[frozenset[str], tuple[Any, ...]] | None:
    """The keys of an annotation value and its decisive figures (None: none, or not JSON)."""
    try:
        fields = json.loads(annotation) if annotation else None
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    return frozenset(fields), tuple(fields.get(k) for k in DECISIVE)


def observe_action(
    current: Mapping[str, str] | None, value: str | None, obs: Observation, since_write_s: float | None = None
) -> ObserveAction:
    """The annotation patch and the Event for a workload's new observation.

    ``since_write_s``: seconds since this process last wrote the annotation (None: not yet). A change of
    rates or KV usage alone waits until :data:`REWRITE_S` have passed. The Event is posted when the
    observed blocks are out of tolerance and the annotation written before was not (or there was none):
    once per drift, across operator restarts.
    """
    old = (current or {}).get(OBSERVED_ANNOTATION)
    patch = None
    if old != value:
        due = since_write_s is None or since_write_s >= REWRITE_S
        if due or _decisive(old) != _decisive(value):
            patch = {OBSERVED_ANNOTATION: value}
    event = None
    if obs.verified is False and not _drifted(old):
        event = ("Warning", ReasonCode.PREDICTION_DRIFT.value, verified_message(obs))
    return ObserveAction(patch, event)


class WorkloadObserver:
    """Reads the serving pods of audited workloads with the operator's :class:`Observer`; one per audit."""

    def __init__(self, observer: Observer, metrics: Metrics, clock: Callable[[], float] = time.monotonic) -> None:
        self.observer = observer
        self.metrics = metrics
        self.clock = clock
        self._seen: set[tuple[str, str, str]] = set()
        self._written: dict[tuple[str, str, str], float] = {}  # when this process last wrote each annotation
        self._parallel = asyncio.Semaphore(MAX_PARALLEL)

    async def observe_all(self, audited: Sequence[Audited], request: Request, post_event: PostEvent) -> None:
        """Observe every audited workload (in parallel, bounded); forget the ones no longer audited."""
        seen = {_key(a) for a in audited}
        await asyncio.gather(*(self._guarded(a, request, post_event) for a in audited))
        for namespace, kind, name in self._seen - seen:
            self.observer.forget(namespace, f"{kind}/{name}")
            self._written.pop((namespace, kind, name), None)
            self.metrics.observed_workload(namespace, kind, name, None, None, None)
        self._seen = seen

    async def _guarded(self, audited: Audited, request: Request, post_event: PostEvent) -> None:
        async with self._parallel:
            try:
                await self.observe_one(audited, request, post_event)
            except Exception as exc:  # one workload must not stop the others
                logger.warning("cannot observe %s: %s", audited.verdict.reading.source, str(exc).splitlines()[0])

    async def observe_one(self, audited: Audited, request: Request, post_event: PostEvent) -> Observation | None:
        """Read one workload's pods, write its annotation, post the drift Event, set its series."""
        namespace, kind, name = _key(audited)
        reading = audited.verdict.reading
        try:
            selector = pod_selector(audited.obj)
        except SelectorError as exc:
            logger.info("not observing %s: %s", reading.source, exc)
            return None
        errors: list[str] = []
        if selector.pod is not None:
            pods: list[Mapping[str, Any]] = [audited.obj]  # a Pod is its own serving pod
        else:
            pods = list(await self.observer.list_matching(namespace, selector.labels, errors))
            if errors:  # the API server's fault: keep what was written, try again next pass
                logger.warning("observing %s: %s", reading.source, errors[0])
                return None
        read = await self.observer.read_pods(
            (namespace, f"{kind}/{name}"), namespace, pods, metrics_port(reading.args), errors
        )
        obs = observe(read.windows, predicted_blocks(audited.verdict))
        value = observed_annotation(obs, read)
        self.metrics.observed_workload(
            namespace, kind, name, obs.observed_blocks, obs.blocks_error_ratio, obs.at_capacity
        )
        self.metrics.scrapes.labels("ok").inc(obs.pods)
        self.metrics.scrapes.labels("error").inc(read.failed)
        if errors:
            logger.debug("observing %s: %s", reading.source, "; ".join(errors[:5]))
        annotations = (audited.obj.get("metadata") or {}).get("annotations") or {}
        written = self._written.get((namespace, kind, name))
        action = observe_action(annotations, value, obs, None if written is None else self.clock() - written)
        if action.event is not None:  # the Event first: once the annotation says so, the drift is no longer new
            await post_event(audited.obj, *action.event)
        if action.annotations is not None:
            await request("PATCH", audited.path, {"metadata": {"annotations": action.annotations}})
            self._written[(namespace, kind, name)] = self.clock()
        return obs


def _key(audited: Audited) -> tuple[str, str, str]:
    reading = audited.verdict.reading
    return reading.namespace, reading.kind, reading.name
