"""The workload audit's decisions (pure) and its metric; the I/O runs in e2e/test_workloads.py."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.workloads import WorkloadVerdict, evaluate_reading
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.observation.audit import ConflictError, WorkloadAudit, audit_action
from fitgate.settings import OperatorConfig
from fitgate.workloads import read_workload
from tests.conftest import model
from tests.fitgate_operator.test_operator import L4

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"


def misfit() -> WorkloadVerdict:
    reading = read_workload(yaml.safe_load((FIXTURES / "production-stack-deployment.yaml").read_text()))
    assert reading is not None
    return evaluate_reading(reading, model("meta-llama/Llama-3.1-8B-Instruct"), parse_node(L4))


def test_first_audit_annotates_and_posts_an_event_then_nothing_until_it_changes() -> None:
    verdict = misfit()
    assert verdict.verdict.value == "DoesNotFit"
    first = audit_action({"team": "a"}, verdict)
    assert first.annotations is not None and first.annotations["fitgate.io/verdict"] == "DoesNotFit"
    assert "--kv-cache-dtype fp8" in first.annotations["fitgate.io/recommended-args"]
    assert first.event is not None and first.event[:2] == ("Warning", "DoesNotFit")
    again = audit_action({"team": "a", **first.annotations}, verdict)
    assert again.annotations is None and again.event is None
    changed = audit_action({**first.annotations, "fitgate.io/verdict": "Fits"}, verdict)
    assert changed.event is not None and changed.annotations == {"fitgate.io/verdict": "DoesNotFit"}


def test_workload_verdict_metric() -> None:
    m = Metrics()
    m.observe_workload("serving", "Deployment", "vllm", "DoesNotFit")
    text = m.exposition().decode()
    assert (
        'fitgate_workload_verdict{kind="Deployment",name="vllm",namespace="serving",verdict="DoesNotFit"} 1.0' in text
    )
    assert 'fitgate_workload_verdict{kind="Deployment",name="vllm",namespace="serving",verdict="Fits"} 0.0' in text
    m.observe_workload("serving", "Deployment", "vllm", None)
    assert "fitgate_workload_verdict{" not in m.exposition().decode()


@pytest.mark.parametrize(("raw", "value"), [("", 0.0), ("0", 0.0), ("300", 300.0)])
def test_audit_period(raw: str, value: float) -> None:
    assert OperatorConfig.from_env({"FITGATE_WORKLOAD_AUDIT_SECONDS": raw}).workload_audit_s == value


@pytest.mark.parametrize("raw", ["often", "-5"])
def test_bad_audit_period_is_one_line(raw: str) -> None:
    with pytest.raises(ValueError, match=f"FITGATE_WORKLOAD_AUDIT_SECONDS: '{raw}' is not valid; expected 0 .off."):
        OperatorConfig.from_env({"FITGATE_WORKLOAD_AUDIT_SECONDS": raw})


class ScriptedApi(WorkloadAudit):
    """The audit's REST calls answered from a dict of objects, as the API server would (resourceVersion kept).

    ``race``: before the first PATCH lands, another writer (a second replica) writes the same verdict.
    """

    def __init__(self, obj: dict[str, Any], race: dict[str, str] | None = None) -> None:
        super().__init__(api_client=object())
        self.obj = obj
        self.race = race
        self.calls: list[tuple[str, str]] = []

    async def _request(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        self.calls.append((method, path))
        meta = self.obj["metadata"]
        if method == "PATCH":
            if self.race is not None:  # the other replica's write lands first
                meta["annotations"] = {**meta.get("annotations", {}), **self.race}
                meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
                self.race = None
            if body["metadata"].get("resourceVersion") not in (None, meta["resourceVersion"]):
                raise ConflictError("409")
            meta["annotations"] = {**meta.get("annotations", {}), **body["metadata"]["annotations"]}
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
            return self.obj
        if method == "GET":
            return {"items": [copy.deepcopy(self.obj)]}
        return {}


def deployment() -> dict[str, Any]:
    d = yaml.safe_load((FIXTURES / "production-stack-deployment.yaml").read_text())
    d["metadata"].update(namespace="serving", resourceVersion="7", uid="u")
    return dict(d)


def test_write_is_guarded_by_resource_version_and_posts_the_event_after_it() -> None:
    verdict = misfit()
    api = ScriptedApi(deployment())
    asyncio.run(
        api._write(copy.deepcopy(api.obj), ("apps", "v1", "deployments", "Deployment"), verdict.reading, verdict)
    )
    assert [m for m, _ in api.calls] == ["PATCH", "POST"]  # the write, then its one Event
    assert api.obj["metadata"]["annotations"]["fitgate.io/verdict"] == "DoesNotFit"


def test_a_write_refused_because_another_replica_wrote_first_posts_no_event() -> None:
    verdict = misfit()
    other = audit_action({}, verdict).annotations  # the other replica decided the same
    assert other is not None
    api = ScriptedApi(deployment(), race=other)
    asyncio.run(
        api._write(copy.deepcopy(api.obj), ("apps", "v1", "deployments", "Deployment"), verdict.reading, verdict)
    )
    # PATCH (409), list by name, and nothing more: its annotations already hold the verdict
    assert api.calls == [
        ("PATCH", "/apis/apps/v1/namespaces/serving/deployments/vllm-llama3-deployment-vllm"),
        ("GET", "/apis/apps/v1/namespaces/serving/deployments"),
    ]


def test_a_write_refused_for_another_verdict_retries_with_the_fresh_version() -> None:
    verdict = misfit()
    api = ScriptedApi(deployment(), race={"fitgate.io/verdict": "Fits", "fitgate.io/recommended-args": ""})
    asyncio.run(
        api._write(copy.deepcopy(api.obj), ("apps", "v1", "deployments", "Deployment"), verdict.reading, verdict)
    )
    assert [m for m, _ in api.calls] == ["PATCH", "GET", "PATCH", "POST"]  # it still changes the verdict: one Event
    assert api.obj["metadata"]["annotations"]["fitgate.io/verdict"] == "DoesNotFit"


class PagedApi(WorkloadAudit):
    """Namespaces none labelled; Deployments cluster-wide in two pages (limit/continue), as the API server pages."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        super().__init__(api_client=object(), objects=True)
        self.pages = pages
        self.calls: list[tuple[str, str, tuple[tuple[str, str], ...]]] = []

    async def _request(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        self.calls.append((method, path, tuple(query or ())))
        if method == "GET" and path == "/apis/apps/v1/deployments":
            token = dict(query or ()).get("continue")
            index = int(token) if token else 0
            more = {"continue": str(index + 1)} if index + 1 < len(self.pages) else {}
            return {"items": self.pages[index], "metadata": more}
        if method == "GET":
            return {"items": []}
        return {}


def test_objects_mode_lists_cluster_wide_in_pages_and_audits_only_annotated_objects() -> None:
    def named(name: str, namespace: str, annotated: bool) -> dict[str, Any]:
        d = deployment()
        d["metadata"].update(
            name=name, namespace=namespace, annotations={"fitgate.io/validate": "warn"} if annotated else {}
        )
        return d

    api = PagedApi([[named("a", "team-a", True), named("b", "team-a", False)], [named("c", "team-b", True)]])

    async def evaluate(reading: Any) -> WorkloadVerdict:
        return evaluate_reading(reading, model("meta-llama/Llama-3.1-8B-Instruct"), parse_node(L4))

    assert asyncio.run(api.audit_once(evaluate, Metrics())) == 2  # a and c; b is not opted in
    lists = [q for m, p, q in api.calls if p == "/apis/apps/v1/deployments"]
    assert lists == [(("limit", "500"),), (("limit", "500"), ("continue", "1"))]
    patched = [p for m, p, _ in api.calls if m == "PATCH"]
    assert patched == [
        "/apis/apps/v1/namespaces/team-a/deployments/a",
        "/apis/apps/v1/namespaces/team-b/deployments/c",
    ]
