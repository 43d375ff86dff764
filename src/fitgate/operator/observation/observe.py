"""Observed versus predicted in the cluster: read the serving pods of a ModelDeployment (``spec.observe``).

For each deployment with ``spec.observe`` the observer, every ``intervalSeconds``:

1. lists the pods matching ``spec.observe.selector`` in its namespace (pods get/list);
2. reads each running pod's ``http://<podIP>:<port>/metrics`` in parallel, each read bounded
   (:mod:`fitgate.operator.observation.scrape`: timeout, body size, no redirects), at most ``MAX_PODS`` pods;
3. for a pod whose vLLM container failed to start (waiting in CrashLoopBackOff / Error, or terminated
   with a non-zero code), reads its last log lines (pods/log, bounded) with :mod:`fitgate.observe.logparse`;
4. keeps each pod's scrapes over a window (:data:`WINDOW_S`) in memory and sums them up with
   :mod:`fitgate.observe.metrics` into ``status.observed``, conditions ``PredictionVerified`` and
   ``AtCapacity``, and an Event when the prediction drifts.

It runs in its own kopf timer (handlers.py), so admission and reconcile never wait for a pod. Steps 1-3
(:meth:`Observer.list_matching`, :meth:`Observer.read_pods`) are also the read path of the audited vLLM
workloads (:mod:`fitgate.operator.observation.workload_observe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from fitgate.observe import parse_lines
from fitgate.observe.metrics import (
    MetricsError,
    Observation,
    PodWindow,
    Scrape,
    observe,
    parse_scrape,
    pod_window,
    skipped_message,
)
from fitgate.operator.base.bounded import DeadlineError, off_loop
from fitgate.operator.base.kubeconfig import core_v1
from fitgate.operator.decision.pricing import OperatorPrices, price_of
from fitgate.operator.decision.status import condition
from fitgate.operator.observation.scrape import ScrapeError, ScrapeLimits, fetch_metrics
from fitgate.operator.schema.api import ModelDeploymentSpec, ObservedStatus
from fitgate.sizing import ReasonCode, find_gpu

#: Rates and cost are over at most this much history per pod.
WINDOW_S = 600.0
#: Pods read per deployment and per round (the rest are left out and counted in podsFailed).
MAX_PODS = 64
#: Scrapes in flight at once, all deployments together.
MAX_PARALLEL = 16
#: Log lines read from a pod that failed to start, and their byte limit.
LOG_TAIL_LINES = 400
LOG_LIMIT_BYTES = 256 * 1024
DEFAULT_METRICS_PORT = 8000  # vllm serve --port
#: Seconds one pod's log or /metrics text may take to parse (off the event loop) before it counts as unread.
LOG_PARSE_DEADLINE_S = 10.0
_FAILED_WAITING = {"CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError"}

ListPods = Callable[[str, str], Awaitable[list[dict[str, Any]]]]
ReadLog = Callable[[str, str, str, bool], Awaitable[str]]


@dataclass(frozen=True)
class Target:
    """One pod to read: its metrics URL, or the container whose log says why it failed."""

    pod: str
    url: str | None = None
    failed_container: str | None = None
    previous: bool = False  # read the previous (crashed) container's log
    skipped: str | None = None  # why this pod is not read at all (a hostNetwork pod)


def _port(pod: Mapping[str, Any], override: int | None) -> int:
    if override is not None:
        return override
    containers = (pod.get("spec") or {}).get("containers") or []
    ports = [p for c in containers if isinstance(c, Mapping) for p in c.get("ports") or [] if isinstance(p, Mapping)]
    named = [p for p in ports if p.get("name") in {"metrics", "http"}]
    chosen = (named or ports or [{}])[0].get("containerPort")
    # a port the pod's author wrote: a whole number 1-65535, else vLLM's default (issue 22)
    valid = isinstance(chosen, int) and not isinstance(chosen, bool) and 0 < chosen < 65536
    return chosen if valid and isinstance(chosen, int) else DEFAULT_METRICS_PORT


def _failed_container(pod: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(container, previous) of a container that failed to start, or None."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        crashed_before = "terminated" in (cs.get("lastState") or {})
        if waiting.get("reason") in _FAILED_WAITING:
            return str(cs.get("name")), crashed_before
        if terminated and terminated.get("exitCode") not in (0, None):
            return str(cs.get("name")), False
    return None


def targets(pods: Sequence[Mapping[str, Any]], port: int | None) -> list[Target]:
    """What to read of each pod: a Running pod with an IP -> its /metrics; a failed one -> its log."""
    out: list[Target] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        name = str(meta.get("name") or "")
        status = pod.get("status") or {}
        failed = _failed_container(pod)
        if failed is not None:
            out.append(Target(name, failed_container=failed[0], previous=failed[1]))
        elif (pod.get("spec") or {}).get("hostNetwork"):
            # its IP is the node's: any port its author names is a port of the node (kubelet, node services);
            # fitgate never reads one (issue 22)
            out.append(Target(name, skipped="hostNetwork pod: its /metrics is on the node's address, not read"))
        elif status.get("phase") == "Running" and status.get("podIP"):
            ip = str(status["podIP"])
            host = f"[{ip}]" if ":" in ip else ip
            out.append(Target(name, url=f"http://{host}:{_port(pod, port)}/metrics"))
    return sorted(out, key=lambda t: t.pod)


@dataclass
class _History:
    pods: dict[str, deque[Scrape]] = field(default_factory=dict)
    due: float = 0.0
    drifted: bool | None = None


@dataclass(frozen=True)
class PodsRead:
    """One read of a set of pods: each read pod's window, how many could not be read, and why one failed to start."""

    windows: tuple[PodWindow, ...]
    failed: int
    failure: str | None


@dataclass(frozen=True)
class ObserveOutcome:
    """What one round found: the status to write, the event to post (if any), the observation.

    ``status`` holds ``observed`` (to merge-patch) and ``conditions`` (only the observer's two: apply them
    with :func:`put_conditions` on the freshest body, never as a whole list, or a stale snapshot would undo
    reconcile's Ready and Fits).
    """

    status: dict[str, Any]
    observation: Observation
    event: tuple[str, str, str] | None


class Observer:
    """Per-deployment scrape history and the round that reads its pods; one per operator process."""

    def __init__(
        self,
        list_pods: ListPods,
        read_log: ReadLog,
        limits: ScrapeLimits | None = None,
        prices: OperatorPrices | None = None,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.list_pods = list_pods
        self.read_log = read_log
        self.limits = limits or ScrapeLimits()
        self.prices = prices or OperatorPrices()  # none: no cost figures unless the spec names a price
        self.window_s = window_s
        self.clock = clock
        self._history: dict[tuple[str, str], _History] = {}
        self._session: aiohttp.ClientSession | None = None
        self._parallel = asyncio.Semaphore(MAX_PARALLEL)

    def due(self, namespace: str, name: str, spec: ModelDeploymentSpec) -> bool:
        """Whether this deployment's next round is due (its interval since the last one started)."""
        if spec.observe is None:
            return False
        history = self._history.get((namespace, name))
        return history is None or self.clock() >= history.due

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted (or no longer observed) deployment's history."""
        self._history.pop((namespace, name), None)

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def round(
        self, namespace: str, name: str, spec: ModelDeploymentSpec, status: Mapping[str, Any], generation: int
    ) -> ObserveOutcome:
        """Read the deployment's pods once and sum up the window; never raises for a pod's fault."""
        assert spec.observe is not None
        history = self._history.setdefault((namespace, name), _History())
        history.due = self.clock() + spec.observe.interval_seconds
        selector = ",".join(f"{k}={v}" for k, v in sorted(spec.observe.selector.items()))
        errors: list[str] = []
        pods = await self.list_matching(namespace, selector, errors)
        read = await self.read_pods((namespace, name), namespace, pods, spec.observe.port, errors)
        windows, failed, failure = read.windows, read.failed, read.failure
        kv = status.get("kvCache") or {}
        predicted = kv.get("numGpuBlocks") if isinstance(kv, Mapping) else None
        per_replica = spec.serving.tensor_parallel_size * spec.serving.pipeline_parallel_size
        gpus = -(-per_replica * spec.placement.data_parallel_size // spec.placement.nodes_per_replica)  # per pod
        priced = self._price(spec, status)
        price, basis = priced if priced is not None else (None, None)
        obs = observe(
            windows,
            int(predicted) if isinstance(predicted, int) else None,
            gpus_per_pod=gpus,
            usd_per_gpu_hour=price,
        )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        observed = ObservedStatus(
            pods=obs.pods,
            podsFailed=failed,
            observedBlocks=obs.observed_blocks,
            predictedBlocks=obs.predicted_blocks,
            blocksErrorRatio=_round(obs.blocks_error_ratio, 4),
            peakKvUsage=_round(obs.peak_kv_usage, 4),
            preemptionsPerMinute=_round(obs.preemptions_per_minute, 3),
            prefixCacheHitRate=_round(obs.prefix_cache_hit_rate, 4),
            tokensPerSecond=_round(obs.tokens_per_second, 1),
            outputTokensPerSecond=_round(obs.output_tokens_per_second, 1),
            requestsCompleted=obs.requests_completed,
            runningRequests=obs.running_requests,
            waitingRequests=obs.waiting_requests,
            usdPerRequest=_round(obs.usd_per_request, 6),
            gpuHourPriceUsd=price,
            priceBasis=basis[:500] if basis else None,
            windowSeconds=round(obs.window_s, 1),
            failure=failure,
            errors=errors[:5] or None,
            lastScrapeTime=now,
        )
        conditions = self._conditions(obs, failure, status, generation, now)
        event = None
        if obs.verified is not None:  # an Event when the observation starts to disagree, not every round
            if not obs.verified and history.drifted is not True:
                event = ("Warning", "PredictionDrift", verified_message(obs))
            history.drifted = not obs.verified
        return ObserveOutcome(
            {"observed": observed.model_dump(by_alias=True, mode="json"), "conditions": conditions}, obs, event
        )

    async def list_matching(self, namespace: str, selector: str, errors: list[str]) -> list[dict[str, Any]]:
        """The pods of ``namespace`` matching the label ``selector``; a listing error goes to ``errors``."""
        try:
            return await self.list_pods(namespace, selector)
        except Exception as exc:  # the API server's fault: say so in status, try again next round
            errors.append(f"listing pods {selector}: {_one_line(exc)}")
            return []

    async def read_pods(
        self,
        key: tuple[str, str],
        namespace: str,
        pods: Sequence[Mapping[str, Any]],
        port: int | None,
        errors: list[str],
    ) -> PodsRead:
        """Read ``pods`` once (in parallel, bounded) and keep each one's scrapes under ``key``'s window.

        The one read path of ModelDeployments (``spec.observe``) and of audited workloads
        (:mod:`fitgate.operator.observation.workload_observe`): at most :data:`MAX_PODS` pods, failed starts read
        from their log, pods gone since the last round dropped from the history.
        """
        history = self._history.setdefault(key, _History())
        chosen = targets(pods, port)
        if len(chosen) > MAX_PODS:
            errors.append(f"{len(chosen)} pods match; only the first {MAX_PODS} are read")
            chosen = chosen[:MAX_PODS]
        results = await asyncio.gather(*(self._read(namespace, t) for t in chosen))
        live = {t.pod for t in chosen}
        for pod in list(history.pods):
            if pod not in live:
                del history.pods[pod]
        failed = 0
        failure: str | None = None
        for target, result in zip(chosen, results, strict=True):
            if isinstance(result, Scrape):
                if result.skipped_lines:  # hunt83 F2: said, as the pod's other problems are
                    errors.append(f"{target.pod}: {skipped_message(result.skipped_lines)}")
                kept = history.pods.setdefault(target.pod, deque(maxlen=1024))
                kept.append(result)
                while kept and result.at_s - kept[0].at_s > self.window_s:
                    kept.popleft()
                continue
            failed += 1
            history.pods.pop(target.pod, None)
            if target.failed_container is not None and result.startswith("failed to start: "):
                failure = failure or result.removeprefix("failed to start: ")
            errors.append(f"{target.pod}: {result}")
        windows = tuple(pod_window(list(s)) for s in history.pods.values() if s)
        return PodsRead(windows, failed, failure)

    def _price(self, spec: ModelDeploymentSpec, status: Mapping[str, Any]) -> tuple[float, str] | None:
        """The price per GPU-hour of the GPU reconcile chose (status.gpuProduct) and its basis (pricing.py)."""
        product = status.get("gpuProduct")
        return price_of(spec, find_gpu(str(product)) if product else None, self.prices)

    def _conditions(
        self, obs: Observation, failure: str | None, status: Mapping[str, Any], generation: int, now: str
    ) -> list[dict[str, Any]]:
        old = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        if obs.verified is None:
            why = ReasonCode.NOT_OBSERVED if failure is None else ReasonCode.POD_FAILED_TO_START
            text = failure or "no pod has reported num_gpu_blocks yet, or there is no prediction to compare"
            verified = condition(old, "PredictionVerified", "Unknown", why, text, generation, now)
        else:
            verified = condition(
                old,
                "PredictionVerified",
                "True" if obs.verified else "False",
                ReasonCode.WITHIN_TOLERANCE if obs.verified else ReasonCode.PREDICTION_DRIFT,
                verified_message(obs),
                generation,
                now,
            )
        if obs.at_capacity is None:
            unread = "no pod has been read"
            capacity = condition(old, "AtCapacity", "Unknown", ReasonCode.NOT_OBSERVED, unread, generation, now)
        else:
            reason = ReasonCode.PREEMPTING if (obs.preemptions_per_minute or 0) > 0 else ReasonCode.KV_CACHE_FULL
            capacity = condition(
                old,
                "AtCapacity",
                "True" if obs.at_capacity else "False",
                reason if obs.at_capacity else ReasonCode.HAS_ROOM,
                _capacity_message(obs),
                generation,
                now,
            )
        return [c.model_dump(by_alias=True, mode="json") for c in (verified, capacity)]

    async def _read(self, namespace: str, target: Target) -> Scrape | str:
        """A scrape, or one line saying why there is none; one pod's fault never stops the round (issue 22)."""
        try:
            return await self._read_one(namespace, target)
        except DeadlineError as exc:
            return f"not read: parsing {exc}"
        except Exception as exc:
            return f"not read: {_one_line(exc)}"

    async def _read_one(self, namespace: str, target: Target) -> Scrape | str:
        if target.skipped is not None:
            return target.skipped
        async with self._parallel:
            if target.failed_container is not None:
                try:
                    text = await self.read_log(namespace, target.pod, target.failed_container, target.previous)
                except Exception as exc:
                    return f"log not readable: {_one_line(exc)}"
                # off the event loop that answers admission reviews, within a deadline (issue 22)
                log = await off_loop(parse_lines, text.splitlines(), deadline_s=LOG_PARSE_DEADLINE_S)
                if log.failure is not None:
                    return f"failed to start: {log.failure.kind}: {log.failure.message}"
                return f"container {target.failed_container} failed to start (no vLLM failure line in its log)"
            assert target.url is not None
            if self._session is None:
                self._session = aiohttp.ClientSession(auto_decompress=True)
            try:
                text = await fetch_metrics(self._session, target.url, self.limits)
                at = self.clock()
                # ~0.1-0.3 ms per sample read: off the event loop that answers admission reviews.
                return await off_loop(parse_scrape, text, at, deadline_s=LOG_PARSE_DEADLINE_S)
            except (ScrapeError, MetricsError) as exc:
                return str(exc)


#: The condition types the observer owns (reconcile owns Ready and Fits).
CONDITION_TYPES = ("PredictionVerified", "AtCapacity")


def drop_conditions(body: dict[str, Any], types: Sequence[str] = CONDITION_TYPES) -> None:
    """Remove the conditions of these types from ``body["status"]`` (spec.observe was removed)."""
    status = body.get("status") or {}
    if status.get("conditions"):
        status["conditions"] = [c for c in status["conditions"] if c.get("type") not in types]


def put_conditions(body: dict[str, Any], conditions: Sequence[Mapping[str, Any]]) -> None:
    """Replace (or add) these conditions in ``body["status"]["conditions"]`` by type, leaving the others.

    Given to kopf as a patch function: kopf applies it to the object as the API server returned it and
    writes the difference as a JSON patch guarded by resourceVersion.
    """
    status = body.setdefault("status", {})
    current = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    mine = {str(c["type"]): dict(c) for c in conditions}
    merged = [mine.pop(str(c.get("type")), c) for c in current]
    status["conditions"] = merged + list(mine.values())


def _one_line(exc: Exception) -> str:
    """An API or client error in one line: the Kubernetes client's status and message, not its headers."""
    status, body = getattr(exc, "status", None), getattr(exc, "body", None)
    if status is not None:
        message = getattr(exc, "reason", "") or ""
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            message = json.loads(str(body))["message"]
        return f"HTTP {status}: {' '.join(str(message).split())[:300]}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def verified_message(obs: Observation) -> str:
    """Observed against predicted blocks in one line (PredictionVerified, the drift Event)."""
    return (
        f"vLLM allocated {obs.observed_blocks} KV blocks, fitgate predicted {obs.predicted_blocks} "
        f"({(obs.blocks_error_ratio or 0) * 100:+.2f} %; tolerance 2 %)"
    )


def _capacity_message(obs: Observation) -> str:
    usage = "-" if obs.peak_kv_usage is None else f"{obs.peak_kv_usage * 100:.1f} %"
    preempt = "-" if obs.preemptions_per_minute is None else f"{obs.preemptions_per_minute:.2f}"
    return (
        f"peak KV cache usage {usage} (at capacity from 95 %), {preempt} preemptions/min over "
        f"{obs.window_s:.0f} s, {obs.running_requests or 0:g} running and {obs.waiting_requests or 0:g} waiting"
    )


# --------------------------------------------------------------------------------------------
# The Kubernetes side: pods and their logs through the API server, in a thread, bounded.


def kubernetes_reader(request_timeout_s: float = 5.0) -> tuple[ListPods, ReadLog]:
    """``list_pods`` and ``read_log`` on the Kubernetes client (in-cluster, else the kubeconfig)."""
    api: list[Any] = []

    def core() -> Any:
        if not api:
            api.append(core_v1())  # in-cluster, else the kubeconfig
        return api[0]

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            raw = core().list_namespaced_pod(
                namespace,
                label_selector=selector,
                limit=MAX_PODS + 1,
                _preload_content=False,
                _request_timeout=request_timeout_s,
            )
            return list(json.loads(raw.data).get("items") or [])

        return await asyncio.to_thread(call)

    async def read_log(namespace: str, pod: str, container: str, previous: bool) -> str:
        def call() -> str:
            raw = core().read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                previous=previous,
                tail_lines=LOG_TAIL_LINES,
                limit_bytes=LOG_LIMIT_BYTES,
                _preload_content=False,
                _request_timeout=request_timeout_s,
            )
            return bytes(raw.data).decode("utf-8", errors="replace")

        return await asyncio.to_thread(call)

    return list_pods, read_log


async def no_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
    """A lister for tests and for an operator without API access (nothing to read)."""
    return []


async def no_log(namespace: str, pod: str, container: str, previous: bool) -> str:
    """A log reader that has nothing (tests)."""
    return ""
