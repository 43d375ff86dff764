"""The Helm chart on the real control plane: install, webhook through the chart's configuration, upgrade, uninstall.

There is no kubelet here, so the chart's Deployment never runs a pod; the operator runs out of
cluster instead (the chart's ``webhook.url`` mode), with the chart-generated serving certificate and a
kubeconfig carrying the chart ServiceAccount's token, so the chart's RBAC is what it runs with.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.cluster import free_port
from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator
from e2e.test_operator import FITS, MISFIT, mdep, node_manifest

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "fitgate"
RELEASE, NS = "fg", "fitgate-system"
SECRET = "fg-fitgate-webhook-tls"


@pytest.fixture(scope="module")
def release(kube: Kube) -> Iterator[int]:
    needs_loopback(kube)
    port = free_port()
    existing = kube.kubectl("get", "crd", "modeldeployments.fitgate.io", "-o", "json", check=False)
    owned = (
        existing.returncode == 0
        and json.loads(existing.stdout)["metadata"].get("annotations", {}).get("meta.helm.sh/release-name") == RELEASE
    )
    crds = [] if existing.returncode != 0 or owned else ["--set", "crds.enabled=false"]  # applied by another test
    kube.helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--create-namespace",
        "--set",
        f"webhook.url=https://127.0.0.1:{port}",
        *crds,
    )
    try:
        yield port
    finally:
        kube.helm("uninstall", RELEASE, "-n", NS, check=False)


def sa_kubeconfig(kube: Kube, path: Path) -> Path:
    """A kubeconfig with a token of the chart's ServiceAccount (TokenRequest needs no controller)."""
    token = kube.kubectl("create", "token", "fg-fitgate", "-n", NS, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    admin["users"] = [{"name": "fitgate-sa", "user": {"token": token}}]
    admin["contexts"][0]["context"]["user"] = "fitgate-sa"
    path.write_text(yaml.safe_dump(admin))
    return path


def secret_files(kube: Kube, directory: Path) -> dict[str, bytes]:
    data = kube.get("secret", SECRET, "-n", NS)["data"]
    files = {name: base64.b64decode(value) for name, value in data.items()}
    for name, content in files.items():
        (directory / name).write_bytes(content)
    return files


def test_install_upgrade_uninstall(kube: Kube, release: int, tmp_path: Path) -> None:
    # every object of the release was accepted by the API server
    manifest = [d for d in yaml.safe_load_all(kube.helm("get", "manifest", RELEASE, "-n", NS).stdout) if d]
    for doc in manifest:
        namespace = (
            ["-n", doc["metadata"].get("namespace", NS)]
            if doc["kind"]
            not in {
                "ClusterRole",
                "ClusterRoleBinding",
                "ValidatingWebhookConfiguration",
                "CustomResourceDefinition",
                "ClusterKopfPeering",
            }
            else []
        )
        kube.kubectl("get", doc["kind"].lower(), doc["metadata"]["name"], *namespace)
    kinds = {d["kind"] for d in manifest}
    assert {
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ValidatingWebhookConfiguration",
        "Secret",
        "PodDisruptionBudget",
        "ClusterKopfPeering",
    } <= kinds

    # the operator, out of cluster, with the chart's certificate and the chart's RBAC
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin=node_manifest(
            "chart-h100",
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"},
            {"nvidia.com/gpu": "8"},
        ),
    )
    certs = tmp_path / "certs"
    certs.mkdir()
    before = secret_files(kube, certs)
    op = Operator(
        kube,
        tmp_path,
        managed=None,
        certs=certs,
        webhook_port=release,
        kubeconfig=sa_kubeconfig(kube, tmp_path / "sa.kubeconfig"),
        extra_args=("--peering", "fitgate"),
    )
    op.start()
    try:
        ns = "chart-e2e"
        kube.kubectl("create", "namespace", ns)
        denied = kube.wait_for(
            lambda: (
                (r := kube.kubectl("apply", "-n", ns, "-f", "-", stdin=mdep("big", MISFIT), check=False))
                and "does not fit" in r.stderr
                and r
            ),
            timeout=30,
            what="the chart's webhook configuration to deny a misfit",
        )
        assert 'admission webhook "fit.fitgate.io" denied the request' in denied.stderr
        kube.kubectl("apply", "-n", ns, "-f", "-", stdin=mdep("small", FITS))
        status = kube.wait_for(
            lambda: kube.get("mdep", "small", "-n", ns).get("status", {}).get("verdict") == "Fits",
            timeout=45,
            what="status written with the chart's RBAC",
        )
        assert status
        log = op.log.read_text()
        # Every 403 from the apiserver carries reason "Forbidden" / message "... is forbidden: User ...";
        # a bare "403" would also match ports and timestamps in the log.
        assert "forbidden" not in log.lower(), log[-3000:]
    finally:
        op.stop()
        kube.kubectl("delete", "node", "chart-h100", check=False)

    # upgrade keeps the webhook certificate (and the caBundle the API server trusts)
    vwc_before = kube.get("validatingwebhookconfiguration", "fg-fitgate")["webhooks"][0]["clientConfig"]["caBundle"]
    kube.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--reuse-values",  # as an operator upgrades: the install's values (webhook.url, crds) stay
        "--set",
        "operator.resyncSeconds=30",
    )
    after = secret_files(kube, tmp_path)
    assert after == before
    vwc_after = kube.get("validatingwebhookconfiguration", "fg-fitgate")["webhooks"][0]["clientConfig"]["caBundle"]
    assert vwc_after == vwc_before

    # uninstall removes everything but the CRDs
    kube.helm("uninstall", RELEASE, "-n", NS)
    for kind, name, namespace in (
        ("deployment", "fg-fitgate", NS),
        ("secret", SECRET, NS),
        ("serviceaccount", "fg-fitgate", NS),
        ("clusterrole", "fg-fitgate", None),
        ("validatingwebhookconfiguration", "fg-fitgate", None),
        ("mutatingwebhookconfiguration", "fg-fitgate", None),  # kopf's own (managed mode) is never made here
        ("clusterkopfpeering", "fitgate", None),
    ):
        args = ["-n", namespace] if namespace else []
        assert kube.kubectl("get", kind, name, *args, check=False).returncode != 0, f"{kind}/{name} left behind"
    kube.kubectl("get", "crd", "modeldeployments.fitgate.io")
    assert json.loads(kube.kubectl("get", "mdep", "small", "-n", "chart-e2e", "-o", "json").stdout)["spec"] == FITS


def test_install_over_a_crd_applied_by_hand_says_what_to_set(kube: Kube) -> None:
    # A CRD applied by hand: no Helm ownership (an earlier release's is taken off, as a by-hand apply has none).
    crd = "modeldeployments.fitgate.io"
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("annotate", "crd", crd, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-")
    kube.kubectl("label", "crd", crd, "app.kubernetes.io/managed-by-")
    failed = kube.helm("install", "byhand", str(CHART), "-n", "byhand", "--create-namespace", check=False)
    assert failed.returncode != 0
    assert "install with --set crds.enabled=false" in failed.stderr, failed.stderr
    kube.helm("install", "byhand", str(CHART), "-n", "byhand", "--create-namespace", "--set", "crds.enabled=false")
    kube.helm("uninstall", "byhand", "-n", "byhand")
