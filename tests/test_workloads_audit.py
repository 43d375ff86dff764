"""The workload audit's decisions (pure) and its metric; the I/O runs in e2e/test_workloads.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fitgate.operator.audit import audit_action
from fitgate.operator.inventory import parse_node
from fitgate.operator.metrics import Metrics
from fitgate.operator.workloads import WorkloadVerdict, evaluate_reading
from fitgate.settings import OperatorConfig
from fitgate.workloads import read_workload
from tests.conftest import model
from tests.test_operator import L4

FIXTURES = Path(__file__).parent / "fixtures" / "workloads"


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
