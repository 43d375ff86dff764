"""Availability, measured on a real API server: failover after kill -9, shutdown with a hung Hub.

* Two replicas peer (the chart's default): after ``kill -9`` of the active one, the standby must write
  the status of a new ModelDeployment within ``FAILOVER_TARGET_S``. kopf's standby resumes when the dead
  peer's keep-alive expires, so this is bounded by the peering lifetime (``FITGATE_PEERING_LIFETIME_SECONDS``).
* ``SIGTERM`` while Hub resolutions hang (a Hub that answers one byte a second, more stuck resolutions
  than the Hub pool has threads, reconciles waiting on them) must end the process within
  ``SHUTDOWN_TARGET_S``, well inside the pod's 30 s grace period.

The measured figures are printed (``pytest -s``) and quoted in the README (Speed and scale).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hub_server import HubServer

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, admission_review, post_review
from e2e.test_operator import FITS, NODES, mdep, node_manifest, wait_verdict

REPO = Path(__file__).resolve().parents[1]
FAILOVER_TARGET_S = 15.0
SHUTDOWN_TARGET_S = 10.0
PEERING = """
apiVersion: kopf.dev/v1
kind: ClusterKopfPeering
metadata:
  name: fitgate-e2e-failover
"""


def _cluster(kube: Kube) -> None:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("apply", "-f", str(REPO / "charts" / "fitgate" / "crds" / "clusterkopfpeerings.kopf.dev.yaml"))
    for crd in ("modeldeployments.fitgate.io", "clusterkopfpeerings.kopf.dev"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    for name, labels, allocatable in NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))


def _active(op: Operator) -> bool:
    """Whether kopf runs this peering replica (it logs each resume and each pause)."""
    log = op.log.read_text()
    resumed = [m.start() for m in re.finditer(r"Resuming operations after the pause", log)]
    pauses = [m.start() for m in re.finditer(r"Pausing operations in favour of", log)]
    return bool(resumed) and (not pauses or resumed[-1] > pauses[-1])


@pytest.fixture
def replicas(kube: Kube, tmp_path: Path) -> Iterator[list[Operator]]:
    _cluster(kube)
    kube.kubectl("apply", "-f", "-", stdin=PEERING)
    ops: list[Operator] = []
    try:
        for i in range(2):
            workdir = tmp_path / f"replica{i}"
            workdir.mkdir()
            op = Operator(kube, workdir, managed=None, extra_args=("--peering", "fitgate-e2e-failover"))
            op.start()
            ops.append(op)
        yield ops
    finally:
        for op in ops:
            op.stop()
        kube.kubectl("delete", "clusterkopfpeering", "fitgate-e2e-failover", "--ignore-not-found")


def test_status_writes_resume_on_the_standby_soon_after_kill_9(
    kube: Kube, replicas: list[Operator], namespace: str
) -> None:
    kube.wait_for(lambda: sorted(_active(op) for op in replicas) == [False, True], timeout=60, what="one active")
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("before", FITS))
    wait_verdict(kube, namespace, "before", "Fits", timeout=30)
    active = next(op for op in replicas if _active(op))
    standby = next(op for op in replicas if op is not active)
    assert active.proc is not None
    active.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    active.proc.wait(10)
    active.proc = None
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("after", FITS))
    wait_verdict(kube, namespace, "after", "Fits", timeout=90)
    took = time.monotonic() - killed
    print(f"\nfailover: status written by the standby {took:.1f}s after kill -9 of the active replica")
    assert _active(standby)
    assert took < FAILOVER_TARGET_S, f"status writes resumed {took:.1f}s after kill -9 (log: {standby.log})"


@pytest.fixture
def hung_hub() -> Iterator[HubServer]:
    with HubServer([]) as hub:
        hub.trickle(r"^/api/models/", bytes_per_s=1)
        yield hub


def test_shutdown_with_hung_hub_resolutions_is_quick(
    kube: Kube, hung_hub: HubServer, namespace: str, tmp_path: Path
) -> None:
    _cluster(kube)
    hub_env = {
        "HF_HUB_OFFLINE": "0",
        "HF_ENDPOINT": hung_hub.url,
        "FITGATE_HUB_DEADLINE": "30",
        "FITGATE_ADMISSION_RESOLVE_SECONDS": "0.2",
    }
    op = Operator(kube, tmp_path, managed=None, extra_env=hub_env)
    op.start()
    try:
        # reconciles waiting on the Hub (FITGATE_RECONCILE_RESOLVE_SECONDS, 20 s) ...
        for i in range(3):
            spec = {"model": {"name": f"acme/hung-md-{i}", "source": "hub"}, "serving": {"maxModelLen": 4096}}
            kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep(f"hung-{i}", spec))
        # ... and more stuck Hub resolutions than the Hub pool has threads (8), started by admission
        for i in range(24):
            review = admission_review({"model": {"name": f"acme/hung-{i}", "source": "hub"}})
            assert "Unknown" in " ".join(post_review(op, review).get("warnings") or [])
        kube.wait_for(lambda: len(hung_hub.requests) >= 8, timeout=30, what="the Hub pool to be busy")
        started = time.monotonic()
        code = op.terminate(120)
        took = time.monotonic() - started
    finally:
        op.stop()
    print(f"\nshutdown: exited {took:.1f}s after SIGTERM with {len(hung_hub.requests)} Hub requests hanging")
    assert code == 0, op.log.read_text()[-3000:]
    assert took < SHUTDOWN_TARGET_S, f"shutdown took {took:.1f}s (log: {op.log})"
