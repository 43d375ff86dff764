"""The audit's verdicts as one standard ``PolicyReport`` per namespace (issue 22, docs/hardening.md).

Writing verdicts as annotations needs ``patch`` on other people's Deployments, StatefulSets, Pods ... in
the process that parses hostile input. A PolicyReport (``wgpolicyk8s.io/v1alpha2``, the format Kyverno,
Trivy and Falco publish; CRD: kubernetes-sigs/wg-policy-prototypes@cd234547495ac016843f77ac9b645d6d0bbc8417:
policy-report/crd/wgpolicyk8s.io_policyreports.yaml) is fitgate's own object in the namespace: the audit
needs get/create/update on ``policyreports`` only, and annotations are written only where
``workloadWebhook.annotate`` opts in. Without the CRD installed the report is skipped (logged once).

:func:`report` is pure; :class:`PolicyReports` writes with the audit's REST call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fitgate.operator.decision.workloads import WorkloadVerdict
from fitgate.sizing import Verdict

logger = logging.getLogger("fitgate.policyreport")

GROUP, VERSION, PLURAL = "wgpolicyk8s.io", "v1alpha2", "policyreports"
#: The one report fitgate keeps in each audited namespace.
NAME = "fitgate-workloads"
POLICY = "fitgate"
RULE = "fits-gpu-memory"
#: A result's message is cut to this many characters.
MAX_MESSAGE_CHARS = 1000

#: fitgate's verdict as a PolicyReport result: pass (Fits), warn (Tight), fail (DoesNotFit, or what vLLM would
#: refuse), error (Unknown: could not be evaluated, the CRD's own meaning of "error").
_RESULTS = {Verdict.FITS: "pass", Verdict.TIGHT: "warn", Verdict.DOES_NOT_FIT: "fail", Verdict.UNKNOWN: "error"}

Request = Callable[..., Awaitable[Any]]


def result(obj: dict[str, Any], verdict: WorkloadVerdict, now_s: int) -> dict[str, Any]:
    """One workload's PolicyReport result."""
    meta = obj.get("metadata") or {}
    outcome = "fail" if verdict.invalid else _RESULTS[verdict.verdict]
    properties = {"verdict": verdict.verdict.value}
    if verdict.recommended_args:
        properties["recommendedArgs"] = verdict.recommended_args[:MAX_MESSAGE_CHARS]
    if verdict.fix:
        properties["fix"] = verdict.fix[:MAX_MESSAGE_CHARS]
    return {
        "policy": POLICY,
        "rule": RULE,
        "result": outcome,
        "scored": True,
        "source": "fitgate",
        "category": "GPU memory",
        "severity": "high" if outcome == "fail" else "medium" if outcome == "warn" else "low",
        "message": verdict.message[:MAX_MESSAGE_CHARS],
        "timestamp": {"seconds": now_s, "nanos": 0},
        "resources": [
            {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            }
        ],
        "properties": properties,
    }


def report(namespace: str, results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The namespace's PolicyReport: its results (sorted by workload) and their summary."""
    ordered = sorted(results, key=lambda r: (r["resources"][0]["kind"] or "", r["resources"][0]["name"] or ""))
    summary = dict.fromkeys(("pass", "fail", "warn", "error", "skip"), 0)
    for r in ordered:
        summary[r["result"]] += 1
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PolicyReport",
        "metadata": {
            "name": NAME,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "fitgate"},
        },
        "summary": summary,
        "results": ordered,
    }


def _path(namespace: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}" + (f"/{name}" if name else "")


class PolicyReports:
    """Collects one audit pass's results per namespace and writes each namespace's report at its end."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._results: dict[str, list[dict[str, Any]]] = {}
        self._written: set[str] = set()
        self._absent = False

    def add(self, obj: dict[str, Any], verdict: WorkloadVerdict) -> None:
        """Record one workload's verdict for this pass."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
        self._results.setdefault(namespace, []).append(result(obj, verdict, int(self.clock())))

    async def flush(self, request: Request) -> None:
        """Write every namespace's report (an empty one where a namespace has no audited workload left)."""
        pending, self._results = self._results, {}
        for namespace in sorted(set(pending) | self._written):
            if self._absent:
                return
            try:
                await self._put(request, namespace, report(namespace, pending.get(namespace, [])))
            except Exception as exc:  # one namespace's report must not stop the others
                logger.warning("cannot write PolicyReport %s/%s: %s", namespace, NAME, str(exc).splitlines()[0])
                continue
            self._written.add(namespace)
            if namespace not in pending:
                self._written.discard(namespace)  # written empty once; not again

    async def _put(self, request: Request, namespace: str, body: dict[str, Any]) -> None:
        listed = await request("GET", _path(namespace), query=[("fieldSelector", f"metadata.name={NAME}")])
        if listed is None:  # 404 on the collection: the PolicyReport CRD is not installed
            if not self._absent:
                logger.warning("the PolicyReport CRD (policyreports.wgpolicyk8s.io) is not installed: no reports")
            self._absent = True
            return
        items = listed.get("items") or []
        if not items:
            await request("POST", _path(namespace), body)
            return
        body["metadata"]["resourceVersion"] = (items[0].get("metadata") or {}).get("resourceVersion")
        await request("PUT", _path(namespace, NAME), body)
