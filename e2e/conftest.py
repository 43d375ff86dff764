"""Session fixtures for the e2e tests: a real control plane, kubectl and helm.

``FITGATE_E2E_KUBECONFIG`` points the suite at an existing cluster (e2e/kind/run.sh sets it);
otherwise a local etcd + kube-apiserver is built (cached) and started for the session. Its logs are
kept when a test failed and the path is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e import cluster, tools

RUNS = cluster.CACHE / "runs"


def needs_loopback(kube: Kube) -> None:
    """The one e2e guard: skip when the suite runs against an external cluster (``FITGATE_E2E_KUBECONFIG``).

    The operator, its webhooks and the fake vLLM pods' metrics servers run as processes on 127.0.0.1 beside
    the test, which only the loopback control plane this suite starts can call back.
    """
    if kube.control_plane is None:
        pytest.skip("runs the operator, webhooks or metrics servers on 127.0.0.1: needs the loopback control plane")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under e2e/ carries the ``e2e`` mark (``-m "not e2e"`` deselects them)."""
    for item in items:
        if "/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@dataclass
class Kube:
    """A reachable cluster and the real clients to drive it."""

    kubeconfig: Path
    bin_dir: Path
    control_plane: cluster.ControlPlane | None

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": f"{self.bin_dir}:{os.environ['PATH']}"}

    def run(
        self,
        tool: str,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.bin_dir / tool), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{tool} {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **kw)

    def helm(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, **kw)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def wait_for(self, predicate: Any, timeout: float = 30, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest) -> Iterator[Kube]:
    bin_dir = tools.install()
    external = os.environ.get("FITGATE_E2E_KUBECONFIG")
    if external:
        yield Kube(Path(external), bin_dir, None)
        return
    # pytest captures what the build prints; a cold build takes 7-16 minutes, so its progress lines (one every
    # 30 s, e2e/controlplane/build.sh) go to the terminal pytest shows instead.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        cluster.build()
    else:
        with capture.global_and_fixture_disabled():
            cluster.build()
    run_dir = RUNS / time.strftime("%Y%m%d-%H%M%S")
    cp = cluster.ControlPlane(run_dir).start()
    try:
        yield Kube(cp.kubeconfig, bin_dir, cp)
    finally:
        cp.stop()
        if request.session.testsfailed:
            print(f"\ne2e: control-plane logs kept in {run_dir} (etcd.log, apiserver.log)")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def scheduling_cluster(request: pytest.FixtureRequest) -> Iterator[Kube]:
    """A second loopback control plane that behaves like a cluster: kube-controller-manager (Deployments become
    ReplicaSets and Pods, garbage collection), kube-scheduler and kwok (fake nodes that turn Ready, their pods
    Running). Its own cluster, started only by the tests that ask for it: the session's ``kube`` stays
    envtest-style and no test there is touched by a garbage collector or a scheduler. The controllers' and
    kwok's first build adds a few minutes to a cold run (docs/development.md)."""
    if os.environ.get("FITGATE_E2E_KUBECONFIG"):
        pytest.skip("starts its own controller-manager, scheduler and kwok: needs the loopback control plane")
    bin_dir = tools.install()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        cluster.build_scheduling()
    else:
        with capture.global_and_fixture_disabled():
            cluster.build_scheduling()
    run_dir = RUNS / time.strftime("scheduling-%Y%m%d-%H%M%S")
    cp = cluster.ControlPlane(run_dir, scheduling=True).start()
    failed = request.session.testsfailed
    try:
        yield Kube(cp.kubeconfig, bin_dir, cp)
    finally:
        cp.stop()
        if request.session.testsfailed > failed:
            print(f"\ne2e: scheduling-cluster logs kept in {run_dir} (controller-manager.log, scheduler.log, kwok.log)")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace per test (namespaces are never finalized without kube-controller-manager).

    Its pods are deleted afterwards: with no kubelet and no garbage collector they would stay bound to the
    shared fake GPU nodes, and the operator's pod watch would count their GPUs as held in later tests.
    """
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    yield name
    kube.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force", "--wait=false")
