"""A resync of an unchanged ModelDeployment plans nothing (issue 23); any changed input re-plans it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fitgate.operator import logic
from fitgate.operator.config import OperatorConfig
from fitgate.operator.inventory import Inventory
from fitgate.operator.logic import ReconcileOutcome, forget, reconcile
from fitgate.operator.metrics import Metrics
from tests.test_operator import H100, L4, SPEC, FakeStore, gpus


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts real evaluations (the planning work a resync must skip), by model name."""
    calls: list[str] = []
    real, render = logic.evaluate, logic.status_of

    def counting(spec: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(spec.model.name)
        return real(spec, *args, **kwargs)

    def rendering(*args: Any, **kwargs: Any) -> Any:
        calls.append("status")
        return render(*args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", counting)
    monkeypatch.setattr(logic, "status_of", rendering)
    monkeypatch.setattr(logic, "_CACHE", logic.EvaluationCache(size=1))  # the shared cache cannot help
    monkeypatch.setattr(logic, "_LAST", logic.LastReconciles())
    return calls


def run(
    spec: dict[str, Any], status: dict[str, Any] | None, nodes: Inventory, store: FakeStore, name: str = "a"
) -> ReconcileOutcome:
    return asyncio.run(
        reconcile(
            raw_spec=spec,
            old_status=status,
            generation=1,
            namespace="ml",
            name=name,
            nodes=nodes,
            store=store,
            metrics=Metrics(),
            config=OperatorConfig(webhook_port=0, metrics_port=0),
        )
    )


def test_unchanged_objects_are_not_planned_again(evaluations: list[str]) -> None:
    store, nodes = FakeStore(), Inventory(gpus(H100))
    other = {**SPEC, "workload": {"concurrentRequests": 4, "contextTokens": 1000}}
    first = run(SPEC, None, nodes, store)
    second = run(other, None, nodes, store, name="b")
    assert first.status is not None and second.status is not None
    assert len(evaluations) == 4  # two evaluations, two statuses rendered
    # a resync round: same specs, same inventory object, the written status in place
    again = run(SPEC, first.status, nodes, store)
    run(other, second.status, nodes, store, name="b")
    assert len(evaluations) == 4  # the shared cache holds one entry, so only the per-object memo answered
    assert again.status is None and again.event is None
    assert again.evaluation.verdict == first.evaluation.verdict


@pytest.mark.parametrize("change", ["spec", "inventory", "status", "deleted"])
def test_any_change_plans_again(evaluations: list[str], change: str) -> None:
    store, nodes = FakeStore(), Inventory(gpus(H100))
    first = run(SPEC, None, nodes, store)
    assert first.status is not None
    spec, status = SPEC, first.status
    if change == "spec":
        spec = {**SPEC, "serving": {"maxModelLen": 65536}}
    elif change == "inventory":
        nodes = Inventory(gpus(H100, L4))  # a node event replaces the snapshot
    elif change == "status":
        status = {**first.status, "verdict": "DoesNotFit"}  # someone else wrote the status
    else:
        forget("ml", "a")
    outcome = run(spec, status, nodes, store)
    assert evaluations.count("status") == 2  # not answered from the memo: rendered again
    if change == "status":
        assert outcome.status is not None  # the right status is written back
