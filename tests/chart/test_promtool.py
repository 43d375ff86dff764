"""The chart's alerts and the operator's /metrics, checked by Prometheus' own promtool.

promtool (github.com/prometheus/prometheus v0.316.0, i.e. Prometheus v3.x, built with ``remove_all_sd`` from
e2e/gotools/promtool on first use) runs:

* ``promtool check rules`` on the rendered PrometheusRule's ``spec.groups``;
* ``promtool test rules`` on tests/fixtures/promtool/<Alert>.yaml: one file per alert, each with a case where
  the alert FIRES (labels and rendered annotations compared) and a case where it stays SILENT. The set of
  files must equal the set of alerts the chart renders, so a new alert without a test fails here;
* ``promtool check metrics`` on the exposition the operator's own metrics server (``Metrics.serve``) answers,
  and every ``fitgate_*`` name the dashboard and alerts query must be a series of that exposition.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from e2e import gotools
from prometheus_client.parser import text_string_to_metric_families

from fitgate.operator.base.metrics import Metrics
from tests.chart.test_chart import CHART, helm, render_chart  # noqa: F401 - the helm fixture

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "promtool"
#: Every alert on: the rule, and the workload webhooks with their two alerts.
ALL_ON = ["--set", "metrics.prometheusRule.enabled=true", "--set", "workloadWebhook.enabled=true"]
#: The values that change which alerts render: the workload webhooks' failurePolicy Ignore (default) or Fail.
VARIANTS = {"ignore": ALL_ON, "fail": [*ALL_ON, "--set", "workloadWebhook.failurePolicy=Fail"]}
#: Series of the API server (k8s.io/apiserver pkg/admission/metrics/metrics.go), not of the operator.
APISERVER = {"apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_fail_open_count"}


@pytest.fixture(scope="module")
def promtool(request: pytest.FixtureRequest) -> Path:
    return gotools.ensure(request, "promtool", "promtool")


def _rules(helm: Path, *args: str) -> dict[str, Any]:  # noqa: F811
    (rule,) = [d for d in render_chart(helm, *(args or ALL_ON)) if d["kind"] == "PrometheusRule"]
    return {"groups": rule["spec"]["groups"]}


def _alerts(rules: dict[str, Any]) -> set[str]:
    return {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


def _run(promtool: Path, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=False, timeout=120
    )


def _unit_tests(directory: Path, rules: dict[str, Any]) -> list[Path]:
    """The rules file and the unit-test files of the alerts it holds, copied into ``directory``."""
    (directory / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    files = []
    for f in sorted(FIXTURES.glob("*.yaml")):
        if f.stem not in _alerts(rules):
            continue
        shutil.copy(f, directory / f.name)
        files.append(directory / f.name)
    return files


@pytest.mark.parametrize("variant", VARIANTS)
def test_rules_pass_promtool_check(promtool: Path, helm: Path, tmp_path: Path, variant: str) -> None:  # noqa: F811
    rules = _rules(helm, *VARIANTS[variant])
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    result = _run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    count = sum(len(g["rules"]) for g in rules["groups"])
    assert count >= 9 and f"SUCCESS: {count} rules found" in result.stdout, result.stdout


def test_every_alert_has_a_firing_and_a_silent_case(helm: Path) -> None:  # noqa: F811
    alerts = set().union(*(_alerts(_rules(helm, *args)) for args in VARIANTS.values()))
    assert alerts == {f.stem for f in FIXTURES.glob("*.yaml")}, "one tests/fixtures/promtool/<Alert>.yaml per alert"
    for f in FIXTURES.glob("*.yaml"):
        cases = [c for t in yaml.safe_load(f.read_text())["tests"] for c in t["alert_rule_test"]]
        assert {c["alertname"] for c in cases} == {f.stem}, f.name
        assert any(c["exp_alerts"] for c in cases), f"{f.name}: no case where {f.stem} fires"
        assert any(not c["exp_alerts"] for c in cases), f"{f.name}: no case where {f.stem} stays silent"


@pytest.mark.parametrize("variant", VARIANTS)
def test_alerts_fire_and_stay_silent_under_promtool(promtool: Path, helm: Path, tmp_path: Path, variant: str) -> None:  # noqa: F811
    files = _unit_tests(tmp_path, _rules(helm, *VARIANTS[variant]))
    assert len(files) >= 9, [f.name for f in files]
    result = _run(promtool, "test", "rules", *(f.name for f in files), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files), result.stdout


def test_promtool_test_rules_can_fail(promtool: Path, helm: Path, tmp_path: Path) -> None:  # noqa: F811
    """A looser drift threshold (10 %) no longer fires on 5 %: the unit test notices."""
    rules = _rules(helm)
    for r in rules["groups"][0]["rules"]:
        if r.get("alert") == "FitgatePredictionDrift":
            assert "> 0.02" in r["expr"], r["expr"]
            r["expr"] = r["expr"].replace("> 0.02", "> 0.1")
    _unit_tests(tmp_path, rules)
    result = _run(promtool, "test", "rules", "FitgatePredictionDrift.yaml", cwd=tmp_path)
    assert result.returncode != 0 and "FitgatePredictionDrift" in result.stdout + result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _scrape() -> str:
    """Start the operator's metrics server, record one value of every family, scrape /metrics."""
    m = Metrics()
    port = _free_port()
    await m.serve("127.0.0.1", port)
    try:
        m.observe("ml", "llama", "Fits", 1 << 30, 1 << 29, 4096)
        m.observed("ml", "llama", 100, 1600, -0.01, False, 0.5, 0.0)
        m.observe_workload("ml", "Deployment", "vllm", "Tight")
        m.observed_workload("ml", "Deployment", "vllm", 100, 0.01, True)
        m.admission.labels("allowed").inc()
        m.admission_seconds.observe(0.01)
        m.reconcile_seconds.observe(0.02)
        m.resolution_errors.labels("hub").inc()
        m.scrapes.labels("ok").inc()
        m.workload_admission_errors.labels("Deployment", "allowed").inc()
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as r:
            assert r.status == 200
            return await r.text()
    finally:
        await m.close()


@pytest.fixture(scope="module")
def exposition() -> str:
    return asyncio.run(_scrape())


def test_the_operators_exposition_passes_promtool_check_metrics(promtool: Path, exposition: str) -> None:
    families = list(text_string_to_metric_families(exposition))
    empty = [f.name for f in families if f.name.startswith("fitgate_") and not f.samples]
    assert not empty, f"record a value of {empty} in _scrape so their series are checked"
    result = _run(promtool, "check", "metrics", cwd=Path.cwd(), stdin=exposition)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_metrics_can_fail(promtool: Path) -> None:
    bad = "# HELP fitgate_errors Errors\n# TYPE fitgate_errors counter\nfitgate_errors 1\n"  # no _total suffix
    result = _run(promtool, "check", "metrics", cwd=Path.cwd(), stdin=bad)
    assert result.returncode != 0 and "_total" in result.stdout + result.stderr


def test_every_name_the_dashboard_and_alerts_query_is_exported(helm: Path, exposition: str) -> None:  # noqa: F811
    exported = {s.name for f in text_string_to_metric_families(exposition) for s in f.samples}
    exprs = [r["expr"] for g in _rules(helm)["groups"] for r in g["rules"]]
    dash = json.loads((CHART / "dashboards" / "fitgate-overview.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    # Metric names are the identifiers that open a selector: NAME{...}, NAME[...], or NAME followed by an
    # operator, a comma or a closing parenthesis; label names and values sit inside braces and are removed first.
    # Grouping clauses (by (...), without (...)) and label_values' label argument name labels: removed too.
    bare = [re.sub(r"\b(?:by|without)\s*\([^)]*\)|,\s*\w+\)$", " ", re.sub(r"\{[^}]*\}", "{}", e)) for e in exprs]
    named = {n for e in bare for n in re.findall(r"\b([a-z_][a-z0-9_:]*)\b(?=\s*(?:\{|\[|==|>|<|,|\)))", e)}
    assert named >= APISERVER and len(named - APISERVER) >= 15, sorted(named)
    assert named - APISERVER <= exported, sorted(named - APISERVER - exported)
