"""``fitgate_workload_admission_errors_total``: a workload review fitgate could not evaluate is counted.

The workload webhooks fail open (the chart's ``workloadWebhook.failurePolicy: Ignore``) and the Unknown policy
admits by default, so such a review admits the object unchecked; the chart's FitgateWorkloadAdmissionErrors
alert rates this counter (its promtool test is tests/chart/test_promtool.py).
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest

from fitgate.operator.runtime import workload_handlers
from fitgate.settings import OperatorConfig
from tests.fitgate_operator.test_hardening import review
from tests.fitgate_operator.test_operator import changed, memo, state
from tests.workloads.test_workloads_webhook import CHART

NAME = "fitgate_workload_admission_errors_total"


def count(m: kopf.Memo, kind: str, result: str) -> float:
    value = state(m).metrics.registry.get_sample_value(NAME, {"kind": kind, "result": result})
    return value or 0.0


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    async def boom(*_: Any, **__: Any) -> None:
        raise KeyError("kaputt")

    monkeypatch.setattr(workload_handlers, "evaluate_workload", boom)


def test_an_evaluation_error_admitted_by_the_unknown_policy_is_counted_allowed(broken: None) -> None:
    m = memo()  # Unknown policy Warn
    kind = CHART["kind"]
    assert count(m, kind, "allowed") == 0
    review(copy.deepcopy(CHART), "enforce", m)
    review(copy.deepcopy(CHART), "warn", m)
    assert count(m, kind, "allowed") == 2  # one per review: 0 + 1 + 1
    assert count(m, kind, "denied") == 0


def test_an_evaluation_error_denied_by_the_unknown_policy_is_counted_denied(broken: None) -> None:
    m = changed(memo(), config=OperatorConfig(webhook_port=0, metrics_port=0, unknown_policy="Deny"))
    with pytest.raises(kopf.AdmissionError):
        review(copy.deepcopy(CHART), "enforce", m)
    assert count(m, CHART["kind"], "denied") == 1
    assert count(m, CHART["kind"], "allowed") == 0


def test_an_unknown_kind_is_counted_as_other_so_the_label_stays_bounded() -> None:
    m = memo()
    for kind in ("x" * 300, None, 7):
        workload_handlers.admission_error(state(m).metrics, {"kind": kind}, allowed=True)
    assert count(m, "other", "allowed") == 3


def test_a_review_that_evaluates_is_not_counted() -> None:
    m = memo()
    warnings = review(copy.deepcopy(CHART), "warn", m)  # evaluated: DoesNotFit on its L4, warned
    assert warnings and "could not evaluate" not in warnings[0]
    assert state(m).metrics.registry.get_sample_value(NAME, {"kind": CHART["kind"], "result": "allowed"}) is None
