"""The chart as people consume it: helm lint --strict, helm-unittest suites, chart-testing's ct lint.

helm-unittest v1.1.2 and chart-testing v3.14.0 are Go modules of e2e/gotools, built from the Go module proxy
on first use (e2e/gotools/build.sh); kubeconform on every variant is e2e/test_chart_kubeconform.py (it needs
the control plane's OpenAPI for its schemas), the OCI publish e2e/test_chart_oci.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from e2e import gotools, tools
from e2e.chart_variants import VARIANTS

from tests.chart.test_chart import KNOBS

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "fitgate"
VENV_BIN = Path(sys.executable).parent
CHART_TESTING = "github.com/helm/chart-testing/v3@v3.14.0"  # e2e/gotools/chart-testing/go.mod's version


@pytest.fixture(scope="module")
def helm() -> Path:
    return tools.install() / "helm"


def test_the_variants_cover_every_knob_the_chart_tests_render() -> None:
    assert {name: VARIANTS[name] for name in KNOBS} == KNOBS


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_helm_lint_strict_on_every_variant(helm: Path, variant: str) -> None:
    result = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "-n", "fitgate-system", *VARIANTS[variant]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[INFO]" not in result.stdout, result.stdout  # icon, etc.


def run_unittest(request: pytest.FixtureRequest, *args: str) -> subprocess.CompletedProcess[str]:
    tool = gotools.ensure(request, "helm-unittest", "helm-unittest")
    return subprocess.run([str(tool), *args], capture_output=True, text=True, check=False, timeout=300)


def test_helm_unittest_suites(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    result = run_unittest(request, "--strict", "-t", "JUnit", "-o", str(report), str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    suites = sorted(p.name for p in (CHART / "tests").glob("*_test.yaml"))
    assert len(suites) >= 4, suites
    # every suite ran, none skipped: count the cases in the files and in the report
    cases = sum(len(yaml.safe_load(p.read_text())["tests"]) for p in (CHART / "tests").glob("*_test.yaml"))
    ran = len(re.findall(r"<testcase ", report.read_text()))
    assert ran == cases, (ran, cases)


def test_helm_unittest_fails_a_wrong_expectation(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # the same runner on a copy of the chart whose suite expects the wrong failurePolicy
    copy = tmp_path / "fitgate"
    shutil.copytree(CHART, copy)
    suite = copy / "tests" / "webhook_test.yaml"
    text = suite.read_text()
    assert "value: Fail}" in text
    suite.write_text(text.replace("value: Fail}", "value: Ignore}", 1))
    result = run_unittest(request, "--strict", str(copy))
    assert result.returncode != 0, result.stdout
    assert "failurePolicy" in result.stdout, result.stdout


def chart_testing_etc() -> Path:
    """chart-testing's own etc/ (chart_schema.yaml for yamale, lintconf.yaml for yamllint) from its module."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", CHART_TESTING], capture_output=True, text=True, check=False, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(json.loads(result.stdout)["Dir"]) / "etc"


def ct_lint(
    request: pytest.FixtureRequest, helm: Path, tmp_path: Path, chart: Path
) -> subprocess.CompletedProcess[str]:
    ct = gotools.ensure(request, "chart-testing", "ct")
    etc = chart_testing_etc()
    env = {
        **os.environ,
        # ct runs helm, yamllint and yamale from PATH: the repo's helm v4 and the dev extra's pinned ones
        "PATH": os.pathsep.join([str(helm.parent), str(VENV_BIN), os.environ["PATH"]]),
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
    }
    return subprocess.run(
        [
            str(ct),
            "lint",
            "--charts",
            str(chart),
            "--chart-yaml-schema",
            str(etc / "chart_schema.yaml"),
            "--lint-conf",
            str(etc / "lintconf.yaml"),
            "--validate-maintainers=false",  # needs GitHub account names; ours is an organisation
            "--check-version-increment=false",  # no target branch to compare with in a test
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def test_ct_lint(request: pytest.FixtureRequest, helm: Path, tmp_path: Path) -> None:
    result = ct_lint(request, helm, tmp_path, CHART)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All charts linted successfully" in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        ("values.yaml", lambda text: text + "extra: 1   \n", "trailing spaces"),  # yamllint (ct's lintconf)
        ("Chart.yaml", lambda text: text.replace("name: fitgate\n", "name: 7\n", 1), "name"),  # yamale
    ],
)
def test_ct_lint_fails_a_broken_chart(
    request: pytest.FixtureRequest, helm: Path, tmp_path: Path, file: str, edit: Callable[[str], str], message: str
) -> None:
    copy = tmp_path / "fitgate"
    shutil.copytree(CHART, copy)
    (copy / file).write_text(edit((copy / file).read_text()))
    result = ct_lint(request, helm, tmp_path, copy)
    assert result.returncode != 0, result.stdout + result.stderr
    assert message in result.stdout + result.stderr, result.stdout + result.stderr
