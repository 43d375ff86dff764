"""Issue 22: the audit's verdicts as one PolicyReport per namespace, annotations only when opted in, and one
bad object one bad verdict (the audit's REST calls answered by a fake API server)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import yaml

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.workloads import WorkloadVerdict, evaluate_reading
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.observation.audit import WorkloadAudit
from fitgate.operator.observation.policyreport import NAME, PolicyReports, report, result
from fitgate.workloads import Reading
from tests.conftest import model
from tests.fitgate_operator.test_operator import H100, L4

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"
DEPLOYMENT = yaml.safe_load((FIXTURES / "production-stack-deployment.yaml").read_text())


class FakeApi(WorkloadAudit):
    """Namespace `ml` opted in (warn) holding ``items``; PolicyReports kept in ``reports``."""

    def __init__(self, items: list[dict[str, Any]], **kw: Any) -> None:
        super().__init__(api_client=object(), **kw)
        self.items = items
        self.stored: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.crd = True

    async def _request(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        self.calls.append((method, path))
        if path == "/api/v1/namespaces":
            return {"items": [{"metadata": {"name": "ml", "labels": {"fitgate.io/validate": "warn"}}}]}
        if "policyreports" in path:
            if not self.crd:
                return None
            if method == "GET":
                return {"items": [self.stored[path]] if path in self.stored else []}
            key = path if method == "POST" else path.rsplit("/", 1)[0]
            self.stored[key] = copy.deepcopy(body)
            return body
        if path.endswith("/deployments") and method == "GET":
            return {"items": copy.deepcopy(self.items)}
        if method == "GET":
            return {"items": []}
        return {}


def deployment(name: str) -> dict[str, Any]:
    obj = copy.deepcopy(DEPLOYMENT)
    obj["metadata"] = {"name": name, "namespace": "ml", "resourceVersion": "1", "uid": f"uid-{name}"}
    return obj


async def evaluate(reading: Reading) -> WorkloadVerdict:
    if reading.name == "poisoned":
        raise RuntimeError("a bug this object triggers")
    return evaluate_reading(reading, model("meta-llama/Llama-3.1-8B-Instruct"), parse_node(L4))


def test_a_pass_writes_one_report_and_no_annotation_by_default() -> None:
    api = FakeApi([deployment("a"), deployment("b")], reports=PolicyReports(clock=lambda: 1700000000), annotate=False)
    assert asyncio.run(api.audit_once(evaluate, Metrics())) == 2
    assert not [c for c in api.calls if c[0] == "PATCH"]  # nothing written on the workloads
    (written,) = api.stored.values()
    assert written["kind"] == "PolicyReport" and written["metadata"] == {
        "name": NAME,
        "namespace": "ml",
        "labels": {"app.kubernetes.io/managed-by": "fitgate"},
    }
    assert written["summary"] == {"pass": 0, "fail": 2, "warn": 0, "error": 0, "skip": 0}  # DoesNotFit on an L4
    first = written["results"][0]
    assert first["resources"][0] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "a",
        "namespace": "ml",
        "uid": "uid-a",
    }
    assert first["timestamp"] == {"seconds": 1700000000, "nanos": 0} and first["severity"] == "high"
    assert "--kv-cache-dtype fp8" in first["properties"]["recommendedArgs"]
    asyncio.run(api.audit_once(evaluate, Metrics()))  # the second pass updates it (PUT, its resourceVersion)
    assert ("PUT", f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/ml/policyreports/{NAME}") in api.calls


def test_a_poisoned_workload_is_one_bad_verdict_the_others_are_audited() -> None:
    # before: the exception of one object ended the pass; no other workload got a verdict
    api = FakeApi([deployment("a"), deployment("poisoned"), deployment("z")], reports=PolicyReports(), annotate=False)
    assert asyncio.run(api.audit_once(evaluate, Metrics())) == 2
    (written,) = api.stored.values()
    assert [r["resources"][0]["name"] for r in written["results"]] == ["a", "z"]


def test_annotations_only_when_opted_in() -> None:
    api = FakeApi([deployment("a")], annotate=True)
    asyncio.run(api.audit_once(evaluate, Metrics()))
    assert ("PATCH", "/apis/apps/v1/namespaces/ml/deployments/a") in api.calls


def test_without_the_crd_the_report_is_skipped_once() -> None:
    api = FakeApi([deployment("a")], reports=PolicyReports(), annotate=False)
    api.crd = False
    asyncio.run(api.audit_once(evaluate, Metrics()))
    asyncio.run(api.audit_once(evaluate, Metrics()))
    assert len([c for c in api.calls if "policyreports" in c[1]]) == 1


def test_results_map_verdicts() -> None:
    verdict = evaluate_reading(
        Reading("Deployment", "ml", "x", "c", "vllm serve", "meta-llama/Llama-3.1-8B-Instruct", gpus_per_replica=1),
        model("meta-llama/Llama-3.1-8B-Instruct"),
        parse_node(H100),
    )
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "ml"}}
    r = result(obj, verdict, 0)
    expected = {"Fits": "pass", "Tight": "warn", "DoesNotFit": "fail", "Unknown": "error"}[verdict.verdict.value]
    assert r["result"] == expected and r["message"] == verdict.message
    assert report("ml", [r])["summary"][r["result"]] == 1
