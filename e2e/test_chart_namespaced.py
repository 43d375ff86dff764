"""The chart with ``operator.watchNamespaces``: kopf peers per namespace, and the chart provides for it.

kopf watching given namespaces with peering on wants a KopfPeering (namespaced) in each of them, its
CRD and RBAC on ``kopfpeerings``. The operator runs out of cluster with the chart ServiceAccount's token
(as in test_chart.py), so the chart's RBAC and objects are what it runs with; a status written in the
watched namespace shows that peering let it reconcile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator
from e2e.test_operator import FITS, mdep, node_manifest

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "fitgate"
RELEASE, NS, WATCHED = "fgns", "fitgate-ns-system", "fitgate-ns-models"


@pytest.fixture(scope="module")
def release(kube: Kube) -> Iterator[None]:
    needs_loopback(kube)
    crd = kube.kubectl("get", "crd", "modeldeployments.fitgate.io", check=False).returncode == 0
    kube.kubectl("create", "namespace", WATCHED, check=False)
    kube.helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--create-namespace",
        "--set",
        f"operator.watchNamespaces={{{WATCHED}}}",
        "--set",
        "webhook.enabled=false",
        *(["--set", "crds.enabled=false"] if crd else []),
    )
    try:
        yield
    finally:
        kube.helm("uninstall", RELEASE, "-n", NS, check=False)


def sa_kubeconfig(kube: Kube, path: Path) -> Path:
    token = kube.kubectl("create", "token", f"{RELEASE}-fitgate", "-n", NS, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    admin["users"] = [{"name": "fitgate-sa", "user": {"token": token}}]
    admin["contexts"][0]["context"]["user"] = "fitgate-sa"
    path.write_text(yaml.safe_dump(admin))
    return path


def test_watched_namespace_is_reconciled_with_peering(kube: Kube, release: None, tmp_path: Path) -> None:
    peering = kube.get("kopfpeering", "fitgate", "-n", WATCHED)
    assert peering["kind"] == "KopfPeering"
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin=node_manifest(
            "ns-h100",
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"},
            {"nvidia.com/gpu": "8"},
        ),
    )
    op = Operator(
        kube,
        tmp_path,
        managed=None,
        kubeconfig=sa_kubeconfig(kube, tmp_path / "sa.kubeconfig"),
        extra_args=("--peering", "fitgate", "--namespace", WATCHED),
    )
    op.start()
    try:
        kube.kubectl("apply", "-n", WATCHED, "-f", "-", stdin=mdep("small", FITS))
        kube.wait_for(
            lambda: kube.get("mdep", "small", "-n", WATCHED).get("status", {}).get("verdict") == "Fits",
            timeout=60,
            what=f"status written in the watched namespace (log: {op.log})",
        )
        log = op.log.read_text()
        assert "forbidden" not in log.lower(), log[-3000:]
        # kopf announced this replica in the namespace's peering object
        assert kube.get("kopfpeering", "fitgate", "-n", WATCHED).get("status"), log[-3000:]
    finally:
        op.stop()
        kube.kubectl("delete", "node", "ns-h100", check=False)
        kube.kubectl("delete", "mdep", "small", "-n", WATCHED, "--wait=false", check=False)
