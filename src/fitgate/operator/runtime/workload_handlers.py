"""kopf handlers of the second webhook: vLLM workloads (Deployments, StatefulSets, ..., KServe), validate only.

Registered at start-up (:func:`register`, called by ``fitgate operator`` before ``kopf.run``) when the settings,
flags applied, ask for it: ``FITGATE_WORKLOAD_WEBHOOK=1`` (the chart sets it with ``workloadWebhook.enabled``)
and no ``--webhook-managed``.
Three webhook paths, each a ValidatingWebhookConfiguration entry of the chart:

* ``/workloads-enforce``: namespaces labelled ``fitgate.io/validate=enforce``: DoesNotFit is denied;
* ``/workloads-warn``: namespaces labelled ``fitgate.io/validate=warn``: DoesNotFit is admitted with a warning;
* ``/workloads-object`` (opt-in, chart value ``workloadWebhook.objectOptIn``): every other namespace
  (not labelled enforce or warn, not a system one); only objects annotated ``fitgate.io/validate:
  enforce|warn`` are evaluated, any other is admitted before it is read (the API server cannot select
  by annotation, so it calls fitgate for every write of these kinds there).

An object's own annotation overrides its namespace's label (``fitgate.io/validate: off`` opts it out).
The webhook never changes the object (no patch): the verdict annotations are the audit's to write.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import kopf

from fitgate.operator.base.bounded import DEADLINE_SETTING, read_workload_bounded
from fitgate.operator.decision.evaluate import unknown
from fitgate.operator.decision.logic import AdmissionOutcome
from fitgate.operator.decision.workloads import (
    MODES,
    VALIDATE_KEY,
    WorkloadVerdict,
    decide_workload,
    evaluate_workload,
    finish,
)
from fitgate.operator.observation.audit import WorkloadAudit
from fitgate.operator.observation.policyreport import PolicyReports
from fitgate.operator.observation.workload_observe import WorkloadObserver
from fitgate.operator.runtime.admission import short
from fitgate.operator.runtime.configmaps import unread
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.settings import OperatorConfig
from fitgate.sizing import ReasonCode
from fitgate.sizing.memo import BoundedMemo, Miss
from fitgate.workloads import Reading
from fitgate.workloads.kinds import admitted_kinds

#: The kinds the webhook is registered for: (group, version, plural), every served version, from the registry.
WORKLOAD_RESOURCES = tuple((k.group, v, k.plural) for k in admitted_kinds() for v in k.versions)


class ReadingCache:
    """Readings by the engine-relevant part of an object (its spec without replicas), least recent out first.

    A rollout that changes only replicas or labels reads and plans nothing again: the reading is found
    here and its evaluation in :mod:`fitgate.operator.decision.logic`'s cache (keyed by the ModelDeployment spec).
    """

    def __init__(self, size: int = 2048) -> None:
        # Bound 2048: one entry per distinct engine-relevant pod template (a model and its settings), not per
        # object; a rollout's ReplicaSets and Pods share one.
        self._entries: BoundedMemo[str, Reading | None] = BoundedMemo(size)

    @staticmethod
    def key(body: Any) -> str:
        """The engine-relevant part of an object: kind and spec minus replicas (not its name)."""
        spec = {k: v for k, v in dict(_spec_of(body)).items() if k not in ("replicas", "minReplicas")}
        # Not sorted: the API server writes an object's keys in a stable order, and a different order
        # only costs a second reading, never a wrong one (a third of the time of sort_keys on a pod spec).
        return json.dumps([body.get("kind"), spec], separators=(",", ":"), default=str)

    async def read(self, body: Any) -> Reading | None:
        """The reading of ``body``, from the cache when its engine-relevant part was read before.

        A new reading is made off the event loop within its deadline (:mod:`fitgate.operator.base.bounded`).
        """
        key = self.key(body)
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "?")
        hit = self._entries.get(key)
        if not isinstance(hit, Miss):
            if hit is None or (hit.namespace, hit.name) == (namespace, name):
                return hit
            return replace(hit, namespace=namespace, name=name)
        reading = await read_workload_bounded(_plain(body))
        if reading is not None and DEADLINE_SETTING in (reading.unknown or ""):
            return reading  # a read past its deadline (a busy moment) is not remembered: the next one tries again
        self._entries.put(key, reading)
        return reading


_READINGS = ReadingCache()


#: Top-level fields that are not the object's desired state.
_NOT_SPEC = ("apiVersion", "kind", "metadata", "status")


def _spec_of(body: Any) -> dict[str, Any]:
    """The desired state: ``spec``, or the top-level fields of a kind without one.

    A KAITO Workspace keeps ``resource`` and ``inference`` beside ``metadata`` (kaito-project/kaito
    api/v1beta1/workspace_types.go).
    """
    if body.get("spec") is not None:
        return dict(body.get("spec") or {})
    return {k: v for k, v in dict(body).items() if k not in _NOT_SPEC}


def _plain(body: Any) -> dict[str, Any]:
    """The parts of an admitted object the reader looks at, as plain dicts."""
    top = {k: v for k, v in dict(body).items() if k not in _NOT_SPEC and k != "spec"}
    return {**top, "kind": body.get("kind"), "metadata": dict(body.get("metadata") or {}), "spec": body.get("spec")}


def _controlled(body: Any) -> bool:
    """Whether a controller owns the object (a Deployment's ReplicaSet, its Pods): checked at the owner."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return isinstance(refs, list) and any(isinstance(ref, Mapping) and ref.get("controller") for ref in refs)


async def validate_workload(
    path_mode: str,
    *,
    body: kopf.Body,
    old: kopf.Body | None,
    dryrun: bool,
    warnings: list[str],
    memo: kopf.Memo,
) -> None:
    """Admission of a vLLM workload; ``path_mode`` is the namespace's (``object``: the annotation only).

    Never answers 500 (issue 22): an exception on the way becomes an Unknown verdict with a one-line
    message, decided by the namespace's mode and the Unknown policy like any other.
    """
    meta = body.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, Mapping) else None) or {}
    mode = annotations.get(VALIDATE_KEY) if isinstance(annotations, Mapping) else None
    mode = mode or (None if path_mode == "object" else path_mode)
    if mode not in MODES or (isinstance(meta, Mapping) and _controlled(body)):
        return
    try:
        await _validate(str(mode), body=body, old=old, dryrun=dryrun, warnings=warnings, memo=memo)
    except kopf.AdmissionError:
        raise
    except Exception as exc:  # hardening (issue 22): one line through the policy, never a 500
        why = f"fitgate could not evaluate this object ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        state = OperatorMemo.of(memo)
        policy = state.config.unknown_policy
        outcome = unknown_outcome(body, str(mode), why, policy, dryrun=bool(dryrun))
        kind = body.get("kind")
        kind = kind if isinstance(kind, str) and kind in _METRIC_KINDS else "other"  # a fixed set, whatever was posted
        state.metrics.workload_admission_errors.labels(kind, str(outcome.allowed).lower()).inc()
        warnings.extend(outcome.warnings)
        if not outcome.allowed:
            raise kopf.AdmissionError(outcome.message, code=outcome.code) from None


_METRIC_KINDS = frozenset(k.kind for k in admitted_kinds())


def unknown_outcome(body: Any, mode: str, why: str, policy: Any, *, dryrun: bool = False) -> AdmissionOutcome:
    """The answer for an object fitgate could not read or evaluate: Unknown, through ``mode`` and ``policy``."""
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    reading = Reading(
        kind=str(body.get("kind") or "?")[:63],
        namespace=str(meta.get("namespace") or "default")[:253],
        name=str(meta.get("name") or "?")[:253],
        container="-",
        how="-",
        model=None,
        unknown=why,
    )
    try:
        verdict = finish(reading, unknown(ReasonCode.WORKLOAD_SETTINGS_UNKNOWN, why))
        return decide_workload(verdict, mode, policy, dryrun=dryrun)
    except Exception:  # the decision itself failed: the Unknown policy, written out
        text = f"fitgate: {reading.source}: {why}"
        if policy == "Deny":
            return AdmissionOutcome(False, f"{text} and the Unknown policy is Deny", (), "denied")
        return AdmissionOutcome(True, text, (text,) if policy == "Warn" else (), "warned")


async def _validate(
    mode: str,
    *,
    body: kopf.Body,
    old: kopf.Body | None,
    dryrun: bool,
    warnings: list[str],
    memo: kopf.Memo,
) -> None:

    started = time.perf_counter()
    state = OperatorMemo.of(memo)
    metrics = state.metrics
    reading = await _READINGS.read(body)
    if reading is None:  # runs no vLLM server
        return
    if old is not None and ReadingCache.key(old) == ReadingCache.key(body):  # replicas, labels: nothing to size
        metrics.admission.labels("unchanged").inc()
        return
    configmaps = state.configmaps
    if reading.config_map is not None:  # its --config file, within the budget
        if configmaps is None:
            reading = unread(reading)
        else:
            resolved = await configmaps.resolve(_plain(body), reading, state.config.admission_resolve_s)
            if resolved is None:
                return
            reading = resolved
    verdict = await evaluate_workload(
        reading, state.inventory(), state.store, state.config.admission_resolve_s, blocking=False
    )
    outcome = decide_workload(verdict, mode, state.config.unknown_policy, dryrun=bool(dryrun))
    warnings.extend(short(w) for w in outcome.warnings)
    metrics.admission.labels(outcome.result).inc()
    metrics.admission_seconds.observe(time.perf_counter() - started)
    if not outcome.allowed:
        meta = body.get("metadata", {})
        logging.getLogger("fitgate.decisions").info(
            "[%s/%s] %s admission denied: %s",
            meta.get("namespace") or "",
            meta.get("name") or meta.get("generateName") or "",
            body.get("kind") or "workload",
            short(outcome.message, 600),
        )
        raise kopf.AdmissionError(outcome.message, code=outcome.code)


#: The three webhook paths (``/workloads-<mode>``), each a ValidatingWebhookConfiguration entry of the chart.
PATH_MODES = ("enforce", "warn", "object")


def _handler(path_mode: str) -> Callable[..., Awaitable[None]]:
    async def handler(
        *,
        body: kopf.Body,
        dryrun: bool,
        warnings: list[str],
        memo: kopf.Memo,
        old: kopf.Body | None = None,
        **_: Any,
    ) -> None:
        await validate_workload(path_mode, body=body, old=old, dryrun=dryrun, warnings=warnings, memo=memo)

    handler.__name__ = handler.__qualname__ = f"workload_validate_{path_mode}"
    return handler


def enabled(config: OperatorConfig) -> bool:
    """Whether to register the workload webhook: asked for, and not in kopf's managed mode.

    A configuration kopf manages (``--webhook-managed``) carries no namespace selectors, so the
    ``enforce`` path would apply to every namespace; the chart's configuration carries them.
    """
    return config.workload_webhook and not config.webhook_managed


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> bool:
    """Register the three workload paths in ``registry`` when :func:`enabled`; whether it did.

    ``config`` is the one ``fitgate operator`` runs with, its flags applied: the paths follow
    ``--webhook-managed`` even when ``FITGATE_WORKLOAD_WEBHOOK=1`` is in the environment.
    """
    if config.workload_webhook and not enabled(config):
        logging.getLogger("fitgate").warning(
            "FITGATE_WORKLOAD_WEBHOOK is ignored with a kopf-managed webhook configuration (no namespace selector)"
        )
    if not enabled(config):
        return False
    for path_mode in PATH_MODES:
        handler = _handler(path_mode)
        for group, version, plural in WORKLOAD_RESOURCES:
            kopf.on.validate(
                group, version, plural, id=f"workloads-{path_mode}", operations=["CREATE", "UPDATE"], registry=registry
            )(handler)
    return True


def start_audit(state: OperatorMemo, logger: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """Start the audit of existing vLLM workloads when ``FITGATE_WORKLOAD_AUDIT_SECONDS`` > 0.

    Called by ``operator_startup`` once it has built ``state``. The audit waits for this replica's node
    list (the inventory) and evaluates with the shared store, blocking up to the reconcile resolution
    timeout for a checkpoint (it is no admission). Its task is in ``state.tasks``: cleanup cancels it.
    """
    config = state.config
    period = config.workload_audit_s
    if not period:
        return

    async def evaluate(reading: Reading) -> WorkloadVerdict:
        while not state.nodewatch.synced.is_set():
            await asyncio.sleep(0.2)
        return await evaluate_workload(
            reading, state.inventory(), state.store, config.reconcile_resolve_s, blocking=True
        )

    async def read(obj: dict[str, Any]) -> Reading | None:
        reading = await read_workload_bounded(obj)
        if reading is None or reading.config_map is None:
            return reading
        if state.configmaps is None:
            return unread(reading)
        return await state.configmaps.resolve(obj, reading, config.reconcile_resolve_s)

    observer = WorkloadObserver(state.observer, state.metrics) if config.workload_observe else None
    audit = WorkloadAudit(
        objects=config.workload_audit_objects,
        read=read,
        observer=observer,
        annotate=config.workload_annotate,
        reports=PolicyReports() if config.workload_policy_reports else None,
    )
    state.tasks.append(asyncio.create_task(audit.run(period, evaluate, state.metrics)))
    observing = ", reading their pods' /metrics" if config.workload_observe else ""
    logger.info("vLLM workload audit every %.0f s%s", period, observing)
