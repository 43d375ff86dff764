"""Issue 22: the workload audit with the chart's RBAC writes its verdicts as a PolicyReport and never patches
the workloads (the chart grants it no patch on them by default).

The operator runs out of cluster with a token of the chart's ServiceAccount (as e2e/test_chart.py). The
PolicyReport CRD is a test-only stand-in with the upstream names and version (the real schema:
kubernetes-sigs/wg-policy-prototypes@cd234547495ac016843f77ac9b645d6d0bbc8417:
policy-report/crd/wgpolicyk8s.io_policyreports.yaml), its schema left open.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import free_port
from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator
from e2e.test_operator import node_manifest
from e2e.test_workloads import chart_deployment

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "fitgate"
RELEASE, NS = "fgpr", "fitgate-pr"
POLICYREPORT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "policyreports.wgpolicyk8s.io"},
    "spec": {
        "group": "wgpolicyk8s.io",
        "names": {
            "kind": "PolicyReport",
            "listKind": "PolicyReportList",
            "plural": "policyreports",
            "singular": "policyreport",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


@pytest.fixture
def operator(kube: Kube, tmp_path: Path) -> Iterator[Operator]:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(POLICYREPORT_CRD))
    kube.kubectl("wait", "--for=condition=Established", "crd/policyreports.wgpolicyk8s.io", "--timeout=30s")
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin=node_manifest("pr-h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"}),
    )
    port = free_port()
    kube.helm(
        "install", RELEASE, str(CHART), "-n", NS, "--create-namespace",
        "--set", f"webhook.url=https://127.0.0.1:{port}", "--set", "crds.enabled=false",
        "--set", "workloadWebhook.enabled=true", "--set", "operator.peering.enabled=false", "--set", "replicaCount=1",
    )  # fmt: skip
    try:
        certs = tmp_path / "certs"
        certs.mkdir()
        for name, value in kube.get("secret", f"{RELEASE}-fitgate-webhook-tls", "-n", NS)["data"].items():
            (certs / name).write_bytes(base64.b64decode(value))
        token = kube.kubectl("create", "token", f"{RELEASE}-fitgate", "-n", NS, "--duration=1h").stdout.strip()
        config = yaml.safe_load(kube.kubeconfig.read_text())
        config["users"] = [{"name": "sa", "user": {"token": token}}]
        config["contexts"][0]["context"]["user"] = "sa"
        (tmp_path / "sa.kubeconfig").write_text(yaml.safe_dump(config))
        env = {"FITGATE_WORKLOAD_WEBHOOK": "1", "FITGATE_WORKLOAD_AUDIT_SECONDS": "1"}  # reports on, annotate off
        op = Operator(
            kube, tmp_path, managed=None, certs=certs, webhook_port=port,
            kubeconfig=tmp_path / "sa.kubeconfig", extra_env=env,
        )  # fmt: skip
        op.start()
        try:
            yield op
        finally:
            op.stop()
    finally:
        kube.helm("uninstall", RELEASE, "-n", NS, check=False)


def test_the_audit_writes_a_policy_report_and_never_patches_the_workload(
    kube: Kube, namespace: str, operator: Operator
) -> None:
    sa = f"system:serviceaccount:{NS}:{RELEASE}-fitgate"
    can = kube.kubectl("auth", "can-i", "patch", "deployments", "-A", "--as", sa, check=False).stdout.strip()
    assert can == "no"  # the chart's defaults grant no patch on other people's workloads
    kube.kubectl("label", "namespace", namespace, "fitgate.io/validate=warn")
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(chart_deployment("NVIDIA-L4")))

    def report() -> Any:
        got = kube.kubectl("get", "policyreports", "fitgate-workloads", "-n", namespace, "-o", "json", check=False)
        return got.returncode == 0 and json.loads(got.stdout).get("results") and json.loads(got.stdout)

    written = kube.wait_for(report, timeout=60, what="the audit's PolicyReport")
    (result,) = written["results"]
    assert result["resources"][0]["kind"] == "Deployment" and result["policy"] == "fitgate"
    assert result["result"] in ("pass", "warn", "fail", "error")
    assert written["summary"][result["result"]] == 1
    annotations = kube.get("deployment", result["resources"][0]["name"], "-n", namespace)["metadata"].get("annotations")
    assert "fitgate.io/verdict" not in (annotations or {})
