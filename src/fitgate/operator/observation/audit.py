"""The audit of vLLM workloads already running in opted-in namespaces.

Every ``FITGATE_WORKLOAD_AUDIT_SECONDS`` (0, the default: off) the operator lists the namespaces labelled
``fitgate.io/validate=enforce|warn``, reads their vLLM workloads (the kinds of the workload webhook),
evaluates each on the one ModelDeployment path, writes ``fitgate.io/verdict`` and
``fitgate.io/recommended-args`` with a merge patch of ``metadata.annotations`` (never the spec), posts an
Event when the verdict changes and exports ``fitgate_workload_verdict{namespace,kind,name,verdict}``.
With ``FITGATE_WORKLOAD_AUDIT_OBJECTS`` it also lists those kinds cluster-wide (paged) for objects that opt
in with the annotation in a namespace that is not labelled.

Several replicas (the chart's 2) or a restarted one audit the same objects: the annotations are written
with a merge patch that carries the ``metadata.resourceVersion`` the decision was made on, so the API
server refuses (409 Conflict) a write based on a stale read. The replica whose write lands posts the
Event, after the write; a refused one reads the object again and decides again from its annotations
(by then they hold the verdict, so no Event). One Event per change, at most: a replica that dies between
its write and its Event loses that Event (none is ever posted twice).

:func:`audit_action` decides (pure); :class:`WorkloadAudit` does the I/O with the Kubernetes client's
``ApiClient`` (generic paths, so that LeaderWorkerSets and KServe objects need no typed client; a kind
whose CRD is not installed answers 404 and is skipped).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fitgate.operator.base import kubeconfig
from fitgate.operator.base.bounded import read_workload_bounded
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.logic import ARGS_ANNOTATION, SCHEDULABLE_ANNOTATION, VERDICT_ANNOTATION, no_node_yet
from fitgate.operator.decision.workloads import MODES, VALIDATE_KEY, WorkloadVerdict
from fitgate.operator.observation.policyreport import PolicyReports
from fitgate.operator.observation.workload_observe import Audited, WorkloadObserver
from fitgate.sizing import ReasonCode, Verdict
from fitgate.workloads import Reading
from fitgate.workloads.kinds import admitted_kinds

logger = logging.getLogger("fitgate.audit")

#: What the audit lists in each opted-in namespace: (group, version, plural, kind), from the kinds registry.
AUDITED = tuple((k.group, k.version, k.plural, k.kind) for k in admitted_kinds())


@dataclass(frozen=True)
class AuditAction:
    """What to write for one workload."""

    annotations: dict[str, str | None] | None  # the merge patch of metadata.annotations; None: nothing changed
    event: tuple[str, str, str] | None  # (type, reason, message) when the verdict changed


def audit_action(current: dict[str, str] | None, verdict: WorkloadVerdict) -> AuditAction:
    """The annotations to write and the Event to post for a workload's new verdict."""
    current = current or {}
    wanted: dict[str, str | None] = {
        VERDICT_ANNOTATION: verdict.verdict.value,
        ARGS_ANNOTATION: verdict.recommended_args,
        # no node of its GPU yet (docs/clusters.md): NoNodeYet until one joins, then removed (a null merge patch)
        SCHEDULABLE_ANNOTATION: ReasonCode.NO_NODE_YET.value if no_node_yet(verdict.evaluation) else None,
    }
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    event = None
    if current.get(VERDICT_ANNOTATION) != verdict.verdict.value:
        kind = "Normal" if verdict.verdict is Verdict.FITS else "Warning"
        event = (kind, verdict.verdict.value, verdict.message[:1000])
    return AuditAction(changed or None, event)


class ConflictError(RuntimeError):
    """HTTP 409: the object changed since it was read (another replica wrote it first)."""


#: Objects per page of a list (``limit``): bounds the memory of a cluster-wide list.
PAGE = 500
#: Seconds one REST call may take (its thread is joined when the operator exits; a page of 500 is quick).
REQUEST_TIMEOUT_S = 30.0

#: Writes of one object's annotations per pass when other writers keep changing it.
WRITE_ATTEMPTS = 3


def _path(group: str, version: str, namespace: str, plural: str, name: str = "") -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    return f"{base}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


Evaluate = Callable[[Reading], Awaitable[WorkloadVerdict]]
#: Reads an object (the operator's reads the ConfigMap of a ``--config`` file too).
Read = Callable[[dict[str, Any]], Awaitable[Reading | None]]


async def _read(obj: dict[str, Any]) -> Reading | None:
    return await read_workload_bounded(obj)  # off the event loop, within its deadline


def _line(exc: BaseException) -> str:
    """An exception in one short line (no traceback in the operator's log)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def _name_of(meta: Any) -> str:
    if not isinstance(meta, dict):
        return "?"
    return f"{str(meta.get('namespace'))[:63]}/{str(meta.get('name'))[:253]}"


class WorkloadAudit:
    """The periodic audit; ``api_client`` is a ``kubernetes.client.ApiClient`` (None: configured here).

    With an ``observer`` (``FITGATE_WORKLOAD_OBSERVE``), each pass ends by reading the audited workloads'
    serving pods (:mod:`fitgate.operator.observation.workload_observe`).

    ``objects``: also audit objects annotated ``fitgate.io/validate`` in namespaces that are not opted in
    (``FITGATE_WORKLOAD_AUDIT_OBJECTS``, chart ``workloadWebhook.objectOptIn``): annotations cannot be
    selected by the API server, so every object of the audited kinds is listed, cluster-wide, a page at a time.
    """

    def __init__(
        self,
        api_client: Any = None,
        *,
        objects: bool = False,
        read: Read | None = None,
        observer: WorkloadObserver | None = None,
        annotate: bool = True,
        reports: PolicyReports | None = None,
    ) -> None:
        self._api = api_client
        self.objects = objects
        self._read = read or _read
        self._seen: set[tuple[str, str, str]] = set()
        self.observer = observer
        # hardening (issue 22): verdicts as a PolicyReport per namespace; annotations (and the patch RBAC
        # they need on other people's workloads) only where FITGATE_WORKLOAD_ANNOTATE opts in
        self.annotate = annotate
        self.reports = reports

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client  # noqa: PLC0415 - only the operator needs the client

            kubeconfig.load()
            self._api = client.ApiClient()
        return self._api

    def _call(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None) -> Any:
        """One REST call with the client's auth (kubernetes >= 33: param_serialize, then call_api)."""
        api = self._client()
        kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
        headers = {"Accept": "application/json", "Content-Type": kind}
        verb, url, headers, data, post = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(
            verb, url, header_params=headers, body=data, post_params=post, _request_timeout=REQUEST_TIMEOUT_S
        )
        raw = response.read()
        if response.status == 404:
            return None
        if response.status == 409:
            raise ConflictError(f"{method} {path}: HTTP 409 Conflict")
        if response.status >= 400:
            text = raw.decode(errors="replace")[:300] if isinstance(raw, bytes) else str(raw)[:300]
            raise RuntimeError(f"{method} {path}: HTTP {response.status}: {text}")
        return json.loads(raw)

    async def _request(
        self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None
    ) -> Any:
        return await asyncio.to_thread(self._call, method, path, body, query)

    async def namespaces(self) -> dict[str, str]:
        """Opted-in namespace -> its mode."""
        selector = f"{VALIDATE_KEY} in ({','.join(MODES)})"
        listed = await self._request("GET", "/api/v1/namespaces", query=[("labelSelector", selector)])
        out = {}
        for ns in (listed or {}).get("items", []):
            meta = ns.get("metadata") or {}
            out[str(meta.get("name"))] = str((meta.get("labels") or {}).get(VALIDATE_KEY))
        return out

    async def _pages(self, path: str) -> AsyncIterator[list[dict[str, Any]]]:
        """The items of a list, :data:`PAGE` at a time (a cluster-wide list of Pods is never held whole)."""
        token = ""
        while True:
            query = [("limit", str(PAGE))] + ([("continue", token)] if token else [])
            listed = await self._request("GET", path, query=query) or {}
            yield list(listed.get("items") or [])
            token = str((listed.get("metadata") or {}).get("continue") or "")
            if not token:
                return

    async def _listed(self) -> AsyncIterator[tuple[tuple[str, str, str, str], dict[str, Any], str | None]]:
        """(resource, object, its namespace's mode) of every object the pass looks at.

        The opted-in namespaces' objects; with ``objects``, also every object of those kinds in the other
        namespaces (cluster-wide lists), of which only the annotated ones are evaluated.
        """
        # Each list is read to its end before its objects are evaluated: a continue token held across slow
        # evaluations could expire (410 Gone); of a cluster-wide list only the annotated objects are kept.
        opted = await self.namespaces()
        for namespace, ns_mode in opted.items():
            for group, version, plural, kind in AUDITED:
                try:  # a kind that cannot be listed here (403, a broken CRD) leaves the others audited
                    items = [i async for page in self._pages(_path(group, version, namespace, plural)) for i in page]
                except Exception as exc:
                    logger.warning("cannot list %s in %s: %s", plural, namespace, _line(exc))
                    continue
                for item in items:
                    yield (group, version, plural, kind), item, ns_mode
        if not self.objects:
            return
        for group, version, plural, kind in AUDITED:
            base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            annotated = [
                item
                async for page in self._pages(f"{base}/{plural}")
                for item in page
                if (item.get("metadata") or {}).get("namespace") not in opted
                and ((item.get("metadata") or {}).get("annotations") or {}).get(VALIDATE_KEY)
            ]
            for item in annotated:
                yield (group, version, plural, kind), item, None

    async def audit_once(self, evaluate: Evaluate, metrics: Metrics) -> int:
        """One pass over every opted-in namespace (and annotated object); returns the workloads evaluated."""
        seen: set[tuple[str, str, str]] = set()
        audited: list[Audited] = []
        async for (group, version, plural, kind), item, ns_mode in self._listed():
            obj = {**item, "kind": kind, "apiVersion": f"{group}/{version}" if group else version}
            meta = obj.get("metadata") or {}
            annotations = dict(meta.get("annotations") or {})
            mode = annotations.get(VALIDATE_KEY) or ns_mode
            if mode not in MODES or any(r.get("controller") for r in meta.get("ownerReferences") or []):
                continue
            try:  # one bad object is one bad verdict, never a stopped pass (issue 22)
                reading = await self._read(obj)
                if reading is None:
                    continue
                verdict = await evaluate(reading)
            except Exception as exc:
                logger.warning("cannot audit %s %s: %s", kind, _name_of(meta), _line(exc))
                continue
            namespace = reading.namespace
            seen.add((namespace, kind, reading.name))
            metrics.observe_workload(namespace, kind, reading.name, verdict.verdict.value)
            audited.append(Audited(obj, _path(group, version, namespace, plural, reading.name), verdict))
            if self.reports is not None:
                self.reports.add(obj, verdict)
            if not self.annotate:
                continue
            try:
                await self._write(obj, (group, version, plural, kind), reading, verdict)
            except Exception as exc:  # one object must not stop the pass
                logger.warning("cannot annotate %s: %s", reading.source, str(exc).splitlines()[0])
        for gone in self._seen - seen:
            metrics.observe_workload(*gone, None)
        self._seen = seen
        if self.reports is not None:
            await self.reports.flush(self._request)
        if self.observer is not None:
            await self.observer.observe_all(audited, self._request, self._event)
        return len(seen)

    async def _write(
        self, obj: dict[str, Any], resource: tuple[str, str, str, str], reading: Reading, verdict: WorkloadVerdict
    ) -> None:
        """Write the verdict annotations guarded by the object's resourceVersion; post the Event if this write won.

        On 409 the object is listed again (by name: the audit's RBAC has no ``get``) and the decision made
        again from its fresh annotations; an object whose engine settings changed meanwhile is left to the
        next pass (this verdict is of the old settings).
        """
        group, version, plural, kind = resource
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        path = _path(group, version, namespace, plural, name)
        for _ in range(WRITE_ATTEMPTS):
            action = audit_action(dict(meta.get("annotations") or {}), verdict)
            if action.annotations is None:
                return
            guard = {"resourceVersion": meta["resourceVersion"]} if meta.get("resourceVersion") else {}
            try:
                await self._request("PATCH", path, {"metadata": {**guard, "annotations": action.annotations}})
            except ConflictError:
                listed = await self._request(
                    "GET",
                    _path(group, version, namespace, plural),
                    query=[("fieldSelector", f"metadata.name={name}")],
                )
                items = (listed or {}).get("items") or []
                if not items:
                    return  # deleted meanwhile
                obj = {**items[0], "kind": kind, "apiVersion": obj.get("apiVersion")}
                meta = obj.get("metadata") or {}
                fresh = await self._read(obj)
                if fresh is None or fresh.fingerprint != reading.fingerprint:
                    return  # its engine settings changed: the next pass evaluates them
                continue
            if action.event is not None:  # this write changed the verdict: the one Event of the change
                await self._event(obj, *action.event)
                message = verdict.message if len(verdict.message) <= 600 else verdict.message[:597] + "..."
                logging.getLogger("fitgate.decisions").info(  # one line per decision (operator/runtime/handlers.py)
                    "[%s/%s] %s verdict %s (%s): %s",
                    namespace,
                    name,
                    kind,
                    verdict.verdict.value,
                    verdict.evaluation.reason,
                    message,
                )
            return
        logger.warning("cannot annotate %s: it kept changing (%d conflicts)", reading.source, WRITE_ATTEMPTS)

    async def _event(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.fitgate-", "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": "fitgate"},
            "reportingComponent": "fitgate",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._request("POST", f"/api/v1/namespaces/{meta.get('namespace')}/events", event)

    async def run(self, period_s: float, evaluate: Evaluate, metrics: Metrics) -> None:
        """Audit every ``period_s`` until cancelled; errors are logged and retried next period."""
        while True:
            try:
                count = await self.audit_once(evaluate, metrics)
                logger.debug("audited %d vLLM workloads", count)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("workload audit failed, retrying in %.0f s: %s", period_s, str(exc).splitlines()[0])
            await asyncio.sleep(period_s)
