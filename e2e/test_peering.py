"""Two operator replicas with kopf peering (the chart's default): both must answer admission correctly.

The API server sends each review to any replica behind the webhook Service, including the one kopf keeps
paused while its peer reconciles. Its answers must use the same, current GPU inventory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, admission_review, post_review
from e2e.test_operator import FITS, MISFIT, NODES, node_manifest

REPO = Path(__file__).resolve().parents[1]
PEERING = """
apiVersion: kopf.dev/v1
kind: ClusterKopfPeering
metadata:
  name: fitgate-e2e-peering
"""


@pytest.fixture(scope="module")
def replicas(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Operator]]:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("apply", "-f", str(REPO / "charts" / "fitgate" / "crds" / "clusterkopfpeerings.kopf.dev.yaml"))
    for crd in ("modeldeployments.fitgate.io", "clusterkopfpeerings.kopf.dev"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    kube.kubectl("apply", "-f", "-", stdin=PEERING)
    for name, labels, allocatable in NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    ops = []
    try:
        for i in range(2):
            workdir = tmp_path_factory.mktemp(f"replica{i}")
            op = Operator(kube, workdir, managed=None, extra_args=("--peering", "fitgate-e2e-peering"))
            op.start()
            ops.append(op)
        yield ops
    finally:
        for op in ops:
            op.stop()


def paused(op: Operator) -> bool:
    """kopf starts a peering replica paused and says when it resumes (it says nothing while it stays paused)."""
    log = op.log.read_text()
    resumed = [m.start() for m in re.finditer(r"Resuming operations after the pause", log)]
    pauses = [m.start() for m in re.finditer(r"Pausing operations in favour of", log)]
    return not resumed or (bool(pauses) and pauses[-1] > resumed[-1])


def test_both_replicas_deny_a_misfit_with_the_numbers(kube: Kube, replicas: list[Operator]) -> None:
    # One of the two is kept paused by peering; which one depends on their random priorities.
    kube.wait_for(lambda: sorted(paused(op) for op in replicas) == [False, True], timeout=30, what="one paused")
    for op in replicas:
        answer = post_review(op, admission_review(MISFIT))
        assert answer["allowed"] is False, (paused(op), answer)
        assert "131.45 GiB" in answer["status"]["message"]


#: The 8B model at 131072 tokens: one request's 16 GiB of KV fits an H100's pool, not an L4's ~4 GiB nor a 5 GB MIG
#: slice (a declared workload beyond the pool alone is only warned: the engine starts, docs/operator.md).
LONG = {**FITS, "serving": {"maxModelLen": 131072}, "workload": {"concurrentRequests": 1, "contextTokens": 131072}}


def test_node_changes_reach_the_paused_replica(kube: Kube, replicas: list[Operator]) -> None:
    # Without its H100 node the cluster has only an L4 and 5 GB MIG slices: the 8B model at 131072 fits nowhere.
    name, labels, allocatable = NODES[0]
    assert name == "e2e-h100"
    kube.kubectl("delete", "node", name)
    try:
        for op in replicas:
            answer = kube.wait_for(
                lambda op=op: (r := post_review(op, admission_review(LONG))) and not r["allowed"] and r,
                timeout=30,
                what=f"the {'paused' if paused(op) else 'active'} replica to see the node go",
            )
            assert "does not fit" in answer["status"]["message"]
    finally:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    for op in replicas:
        kube.wait_for(
            lambda op=op: post_review(op, admission_review(LONG))["allowed"], timeout=30, what="the node to come back"
        )
