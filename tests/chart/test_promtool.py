"""The chart's alerts through Prometheus' own tool: ``promtool check rules`` and ``promtool test rules``.

promtool is built from the Go module proxy (``e2e/gotools/promtool``, prometheus v0.316.0 with the
``remove_all_sd`` tag: a rule checker needs no service discovery). The rendered PrometheusRule's groups are
written out as a rules file; ``tests/fixtures/promtool/alerts_test.yaml`` has one test group per alert, each
with a series that fires and series that stay silent. ``promtool check metrics`` on what the operator's metrics
server serves is ``tests/chart/test_promtool_exposition.py``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from e2e.gotools import ensure

from tests.chart.test_chart import helm, render_chart  # noqa: F401 - the helm fixture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "promtool" / "alerts_test.yaml"
RULES = ["--set", "metrics.prometheusRule.enabled=true", "--set", "workloadWebhook.enabled=true"]


@pytest.fixture(scope="module")
def promtool(request: pytest.FixtureRequest) -> Path:
    return ensure(request, "promtool", "promtool")


def _rules(helm: Path, tmp_path: Path) -> tuple[Path, set[str]]:  # noqa: F811
    (rule,) = [d for d in render_chart(helm, *RULES) if d["kind"] == "PrometheusRule"]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    return path, alerts


def _run(promtool: Path, *args: str, stdin: bytes | None = None, cwd: Path | None = None) -> str:
    result = subprocess.run([str(promtool), *args], input=stdin, capture_output=True, timeout=120, check=False, cwd=cwd)
    out = (result.stdout + result.stderr).decode(errors="replace")
    assert result.returncode == 0, out
    return out


def test_check_rules(promtool: Path, helm: Path, tmp_path: Path) -> None:  # noqa: F811
    path, alerts = _rules(helm, tmp_path)
    out = _run(promtool, "check", "rules", str(path))
    assert f"SUCCESS: {len(alerts)} rules found" in out, out


def test_every_alert_fires_and_stays_silent_as_its_unit_test_says(
    promtool: Path,
    helm: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    _, alerts = _rules(helm, tmp_path)
    tests = yaml.safe_load(FIXTURE.read_text())["tests"]
    tested = {t["name"] for t in tests}
    assert tested == alerts, (
        f"alerts without a promtool test: {sorted(alerts - tested)}; stale: {sorted(tested - alerts)}"
    )
    for t in tests:  # each group: the alert fires for one series, and the other series stay silent
        fired = [e for case in t["alert_rule_test"] for e in case["exp_alerts"]]
        assert fired and len(t["input_series"]) > len(fired), t["name"]
    shutil.copy(FIXTURE, tmp_path / FIXTURE.name)
    out = _run(promtool, "test", "rules", FIXTURE.name, cwd=tmp_path)
    assert "SUCCESS" in out, out


def test_a_wrong_expectation_fails(promtool: Path, helm: Path, tmp_path: Path) -> None:  # noqa: F811
    # the unit test can fail: the drift alert expected for the series at 1 %, which stays silent
    _rules(helm, tmp_path)
    doc = yaml.safe_load(FIXTURE.read_text())
    case = doc["tests"][0]["alert_rule_test"][1]
    case["exp_alerts"][0]["exp_labels"]["name"] = "close"
    (tmp_path / "wrong_test.yaml").write_text(yaml.safe_dump(doc))
    result = subprocess.run(
        [str(promtool), "test", "rules", "wrong_test.yaml"], capture_output=True, timeout=120, check=False, cwd=tmp_path
    )
    assert result.returncode != 0 and b"FitgatePredictionDrift" in result.stdout + result.stderr
