"""What the operator serves on /metrics, checked by promtool, and the names the chart's queries use.

Beside ``tests/chart/test_promtool.py`` (the alerts' rules and unit tests), this starts the
operator's own metrics server (``Metrics.serve``, as ``fitgate operator`` does) on a loopback port and scrapes
``/metrics`` over HTTP, so the content type and body Prometheus would receive are what promtool reads:

* every ``fitgate_*`` family carries a sample (a family left empty here is linted by name only, so a new
  metric must be given a value below);
* ``promtool check metrics`` passes on the scrape, and fails on a counter without ``_total`` (the check can fail);
* every metric name the rendered PrometheusRule and the dashboard query (identifiers that open a selector,
  read from the expressions, not from the template text) is a series of that scrape; the ``apiserver_*``
  names are kube-apiserver's (k8s.io/apiserver pkg/admission/metrics/metrics.go).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
from pathlib import Path

import aiohttp
import pytest
from e2e.gotools import ensure
from prometheus_client.parser import text_string_to_metric_families

from fitgate.operator.base.metrics import Metrics
from tests.chart.test_chart import CHART, helm, render_chart  # noqa: F401 - the helm fixture

RULES = ["--set", "metrics.prometheusRule.enabled=true", "--set", "workloadWebhook.enabled=true"]
#: Series of the API server, not of the operator.
APISERVER = {"apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_fail_open_count"}


@pytest.fixture(scope="module")
def promtool(request: pytest.FixtureRequest) -> Path:
    return ensure(request, "promtool", "promtool")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _scrape() -> tuple[str, str]:
    """Start the operator's metrics server, record a value in every family, GET /metrics."""
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
        m.workload_admission_errors.labels("Deployment", "true").inc()
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as r:
            assert r.status == 200
            return r.headers["Content-Type"], await r.text()
    finally:
        await m.close()


@pytest.fixture(scope="module")
def scrape() -> tuple[str, str]:
    return asyncio.run(_scrape())


def _check_metrics(promtool: Path, text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_served_exposition_passes_promtool_check_metrics(promtool: Path, scrape: tuple[str, str]) -> None:
    content_type, text = scrape
    assert content_type.startswith("text/plain; version="), content_type  # the text format, not OpenMetrics
    families = list(text_string_to_metric_families(text))
    assert len([f for f in families if f.name.startswith("fitgate_")]) >= 20
    empty = [f.name for f in families if f.name.startswith("fitgate_") and not f.samples]
    assert not empty, f"record a value of {empty} in _scrape so their series are checked"
    result = _check_metrics(promtool, text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_metrics_can_fail(promtool: Path) -> None:
    bad = "# HELP fitgate_errors Errors\n# TYPE fitgate_errors counter\nfitgate_errors 1\n"  # no _total suffix
    result = _check_metrics(promtool, bad)
    assert result.returncode != 0 and "_total" in result.stdout + result.stderr


def _names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that open a selector (NAME{...}, NAME[...], or NAME
    before an operator, a comma or a closing parenthesis), once label matchers, grouping clauses and
    label_values' label argument are removed."""
    bare = re.sub(r"\{[^}]*\}", "{}", expr)
    bare = re.sub(r"\b(?:by|without)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r",\s*\w+\)$", ")", bare)  # label_values(METRIC, label)
    return set(re.findall(r"\b([a-z_][a-z0-9_:]*)\b(?=\s*(?:\{|\[|==|>|<|,|\)))", bare))


def test_names_are_read_from_expressions() -> None:
    # a selector with matchers, a range, a comparison; the grouping labels and functions are not names
    expr = 'sum by (name, le) (rate(a_total{x="y"}[5m])) > 0 or b_ratio == 1 or label_values(c_info, ns)'
    assert _names(expr) == {"a_total", "b_ratio", "c_info"}


def test_every_name_the_alerts_and_dashboard_query_is_served(helm: Path, scrape: tuple[str, str]) -> None:  # noqa: F811
    served = {s.name for f in text_string_to_metric_families(scrape[1]) for s in f.samples}
    (rule,) = [d for d in render_chart(helm, *RULES) if d["kind"] == "PrometheusRule"]
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    dash = json.loads((CHART / "dashboards" / "fitgate-overview.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    named = set().union(*(_names(e) for e in exprs))
    assert named >= APISERVER and len(named - APISERVER) >= 15, sorted(named)
    assert named - APISERVER <= served, sorted(named - APISERVER - served)
