"""The chart published as people get it: ``helm package``, ``helm push`` to a real OCI registry, ``helm pull``
back, ``helm install oci://...`` onto the real API server.

The registry is the CNCF distribution registry (github.com/distribution/distribution/v3 v3.1.2, the server
behind Docker Hub's and many private registries; e2e/gotools/registry), on 127.0.0.1 with a temporary
configuration and filesystem store, ended by its PID. Helm's OCI support: https://helm.sh/docs/topics/registries/
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e import gotools
from e2e.cluster import free_port
from e2e.conftest import Kube

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "fitgate"
RELEASE, NS = "fgoci", "fitgate-oci"
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ClusterKopfPeering"}


@pytest.fixture(scope="module")
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a distribution registry started for this module."""
    tool = gotools.ensure(request, "registry", "registry")
    directory = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "info"},
        "storage": {"filesystem": {"rootdirectory": str(directory / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (directory / "config.yml").write_text(yaml.safe_dump(config))
    log = (directory / "registry.log").open("wb")
    # no OpenTelemetry exporter: nothing to send traces to (distribution v3 configures one from OTEL_*)
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}
    proc = subprocess.Popen([str(tool), "serve", str(directory / "config.yml")], stdout=log, stderr=log, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the registry did not serve /v2/: {(directory / 'registry.log').read_text()}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()  # by PID: the process this fixture started
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def helm_env(tmp: Path) -> dict[str, str]:
    # registry logins and caches of this test only, not the user's
    return {
        "HELM_REGISTRY_CONFIG": str(tmp / "registry.json"),
        "HELM_CACHE_HOME": str(tmp / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "config"),
    }


def digest(output: str) -> str:
    match = re.search(r"Digest: (sha256:[0-9a-f]{64})", output)
    assert match, output
    return match.group(1)


def test_push_pull_and_install_from_the_oci_registry(kube: Kube, registry: str, tmp_path: Path) -> None:
    env = helm_env(tmp_path)
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    packaged = kube.helm("package", str(CHART), "-d", str(tmp_path / "dist"), env=env)
    archive = tmp_path / "dist" / f"fitgate-{version}.tgz"
    assert archive.is_file(), packaged.stdout
    # .helmignore keeps the helm-unittest suites out of the package
    listing = subprocess.run(["tar", "-tzf", str(archive)], capture_output=True, text=True, check=True).stdout
    assert "fitgate/Chart.yaml" in listing and "fitgate/tests/" not in listing, listing

    pushed = kube.helm("push", str(archive), f"oci://{registry}/charts", "--plain-http", env=env)
    pushed_digest = digest(pushed.stdout + pushed.stderr)
    # the registry itself lists the chart's tag
    with urllib.request.urlopen(f"http://{registry}/v2/charts/fitgate/tags/list", timeout=10) as response:
        assert json.load(response)["tags"] == [version]

    (tmp_path / "pulled").mkdir()  # helm pull -d writes into an existing directory
    pulled = kube.helm(
        "pull",
        f"oci://{registry}/charts/fitgate",
        "--version",
        version,
        "--plain-http",
        "-d",
        str(tmp_path / "pulled"),
        env=env,
    )
    assert digest(pulled.stdout + pulled.stderr) == pushed_digest
    pulled_archive = tmp_path / "pulled" / f"fitgate-{version}.tgz"
    assert hashlib.sha256(pulled_archive.read_bytes()).digest() == hashlib.sha256(archive.read_bytes()).digest()

    # install from the registry: no webhook (nothing serves it here, and a Fail webhook would gate other
    # tests' ModelDeployments), a peering object of its own, CRDs only where no other release owns them
    existing = kube.kubectl("get", "crd", "modeldeployments.fitgate.io", check=False)
    crds = ["--set", "crds.enabled=false"] if existing.returncode == 0 else []
    kube.helm(
        "install",
        RELEASE,
        f"oci://{registry}/charts/fitgate",
        "--version",
        version,
        "--plain-http",
        "-n",
        NS,
        "--create-namespace",
        "--set",
        "webhook.enabled=false",
        "--set",
        "operator.peering.name=fitgate-oci",
        *crds,
        env=env,
    )
    try:
        status = json.loads(kube.helm("status", RELEASE, "-n", NS, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed"
        (listed,) = json.loads(kube.helm("list", "-n", NS, "-o", "json").stdout)
        assert listed["chart"] == f"fitgate-{version}", listed
        manifest = [d for d in yaml.safe_load_all(kube.helm("get", "manifest", RELEASE, "-n", NS).stdout) if d]
        for doc in manifest:
            namespace = [] if doc["kind"] in CLUSTER_SCOPED else ["-n", doc["metadata"].get("namespace", NS)]
            kube.kubectl("get", doc["kind"].lower(), doc["metadata"]["name"], *namespace)
        assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service"} <= {
            d["kind"] for d in manifest
        }
    finally:
        kube.helm("uninstall", RELEASE, "-n", NS, "--wait", check=False)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)
