"""ModelDeployment admission: the decision, counted and logged, and the AdmissionReview answer fitgate builds itself.

:func:`fit_decision` is the one decision kopf's handler (``handlers.modeldeployment_validate``) and fitgate's own
``/fit`` path in :class:`~fitgate.operator.runtime.webhook.GuardedWebhookServer` (:func:`answer_fit_review`) share.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from fitgate.operator.decision.logic import AdmissionOutcome, admit
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.schema.api import GROUP, PLURAL

#: One INFO line per decision: a reconcile that writes a verdict, an admission denial (``[namespace/name] verdict
#: DoesNotFit (WeightsExceedBudget): ...``). Its own logger: kopf's per-object one is at WARNING unless
#: ``--verbose`` (run.py), and a denial's kopf line is dropped (it is not an error).
DECISIONS = logging.getLogger("fitgate.decisions")


async def fit_decision(
    state: OperatorMemo,
    spec: Mapping[str, Any],
    old_spec: Mapping[str, Any] | None,
    dryrun: bool,
    namespace: str | None,
    name: str | None,
) -> AdmissionOutcome | None:
    """The admission decision on a ModelDeployment, counted and logged; None: the spec is unchanged (admitted).

    One path for kopf's handler (:func:`modeldeployment_validate`) and fitgate's own (:func:`answer_fit_review`).
    """
    started = time.perf_counter()
    metrics = state.metrics
    if old_spec is not None and dict(old_spec) == dict(spec):
        metrics.admission.labels("unchanged").inc()
        return None
    outcome = await admit(
        raw_spec=spec,
        nodes=state.inventory(),
        store=state.store,
        config=state.config,
        dryrun=dryrun,
        namespace=namespace or "",
    )
    metrics.admission.labels(outcome.result).inc()
    metrics.admission_seconds.observe(time.perf_counter() - started)
    if not outcome.allowed:
        DECISIONS.info("[%s/%s] admission denied: %s", namespace or "", name or "", short(outcome.message, 600))
    return outcome


async def answer_fit_review(state: OperatorMemo, review: Mapping[str, Any]) -> dict[str, Any] | None:
    """The AdmissionReview response to a ModelDeployment review, as kopf's engine builds it; None: kopf's to answer.

    kopf's engine costs as much as the whole TLS round trip again per review (resource lookup, memo recall, a
    cause, a handler run with its log records; issue 23), so :class:`GuardedWebhookServer` hands the ``/fit``
    reviews it decoded here first. The decision is :func:`fit_decision`, the handler's; the response is
    kopf's ``build_response`` for one validating handler: ``allowed``, the warnings, and on a denial
    ``status: {message, code}``. Reviews of anything else (another resource, a subresource, an operation the
    handler does not take, an object that is not one) return None and go to kopf's engine unchanged.
    """
    request = review["request"]  # its shape was checked by the server (webhook.review_problem)
    resource = request["resource"]
    new = request.get("object")
    old = request.get("oldObject")
    if (
        resource.get("group") != GROUP
        or resource.get("resource") != PLURAL
        or request.get("subResource")
        or request.get("operation") not in ("CREATE", "UPDATE")
        or not isinstance(new, dict)
        or not isinstance(new.get("spec") or {}, dict)
        or not isinstance(new.get("metadata") or {}, dict)
        or (old is not None and not isinstance(old.get("spec") or {}, dict))
    ):
        return None
    meta = new.get("metadata") or {}
    outcome = await fit_decision(
        state,
        new.get("spec") or {},
        dict(old.get("spec") or {}) if old is not None else None,
        bool(request.get("dryRun")),
        meta.get("namespace"),
        meta.get("name"),
    )
    payload: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": outcome is None or outcome.allowed}
    if outcome is not None and outcome.warnings:
        payload["warnings"] = [short(w) for w in outcome.warnings]
    if outcome is not None and not outcome.allowed:
        payload["status"] = {"message": outcome.message, "code": outcome.code or 500}
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": review.get("kind", "AdmissionReview"),
        "response": payload,
    }


def short(text: str, limit: int = 1200) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (an AdmissionReview warning's size)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
