"""The chart's workloadWebhook.observe: the setting, its contradictions, and no RBAC beyond spec.observe's."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.chart.test_chart import CHART, helm, render_chart

__all__ = ["helm"]

ON = ("--set", "workloadWebhook.enabled=true", "--set", "workloadWebhook.observe=true")


def env(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    return {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


def role(docs: list[dict[str, Any]]) -> list[Any]:
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    return list(cluster_role["rules"])


def test_observe_sets_the_variable_and_grants_nothing_new(helm: Path) -> None:
    audit_only = render_chart(helm, "--set", "workloadWebhook.enabled=true")
    observing = render_chart(helm, *ON)
    assert env(observing)["FITGATE_WORKLOAD_OBSERVE"] == "1"
    assert "FITGATE_WORKLOAD_OBSERVE" not in env(audit_only)
    # pods list and pods/log get: already granted for spec.observe; patch on the workloads (fitgate.io/observed),
    # as with workloadWebhook.annotate (issue 22: without either, the audit has no patch on workloads)
    assert role(observing) == role(
        render_chart(helm, "--set", "workloadWebhook.enabled=true", "--set", "workloadWebhook.annotate=true")
    )
    assert role(observing) != role(audit_only)
    base = [r for r in role(render_chart(helm)) if r["resources"] in (["pods"], ["pods/log"])]
    # pods: list (the observer) and watch (the pod watch counting the GPUs pods hold); pods/log: get
    assert [(r["resources"], r["verbs"]) for r in base] == [(["pods"], ["list", "watch"]), (["pods/log"], ["get"])]


def test_observe_without_the_audit_fails_the_render(helm: Path) -> None:
    for extra in (("--set", "workloadWebhook.auditSeconds=0"), ("--set", "workloadWebhook.enabled=false")):
        result = subprocess.run(
            [str(helm), "template", "fitgate", str(CHART), *ON, *extra], capture_output=True, text=True, check=False
        )
        assert result.returncode != 0
        assert "workloadWebhook.observe reads the pods of the workloads the audit finds" in result.stderr


def test_observe_must_be_a_boolean(helm: Path) -> None:
    result = subprocess.run(
        [str(helm), "template", "fitgate", str(CHART), "--set", "workloadWebhook.observe=often"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0 and "observe" in result.stderr
