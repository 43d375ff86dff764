"""Issue 22: deleting the ModelDeployment CRD with 200 objects present leaves nothing Terminating.

kopf puts fitgate.io/finalizer on every ModelDeployment; the operator releases it when the CRD is
deleted (src/fitgate/operator/runtime/finalizers.py). Before, the CRD stayed Terminating for good.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator

REPO = Path(__file__).resolve().parents[1]
CRD = REPO / "crds" / "fitgate.io_modeldeployments.yaml"
OBJECTS = 200


@pytest.fixture
def operator(kube: Kube, tmp_path: Path) -> Iterator[Operator]:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(CRD))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    op = Operator(kube, tmp_path, managed=None, resync_s=30.0, verbose=False)
    op.start()
    try:
        yield op
    finally:
        op.stop()
        kube.kubectl("apply", "-f", str(CRD))  # the other e2e tests expect it
        kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=60s")


def test_deleting_the_crd_with_200_objects_leaves_nothing_terminating(
    kube: Kube, namespace: str, operator: Operator
) -> None:
    items = [
        {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": f"m{i}", "namespace": namespace},
            "spec": {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}},
        }
        for i in range(OBJECTS)
    ]
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def finalized() -> int:
        listed = kube.get("mdep", "-n", namespace)["items"]
        return sum("fitgate.io/finalizer" in (i["metadata"].get("finalizers") or []) for i in listed)

    kube.wait_for(lambda: finalized() == OBJECTS, timeout=120, what="kopf's finalizer on every ModelDeployment")
    kube.kubectl("delete", "crd", "modeldeployments.fitgate.io", "--wait=false")
    gone = kube.wait_for(
        lambda: kube.kubectl("get", "crd", "modeldeployments.fitgate.io", check=False).returncode != 0,
        timeout=90,
        what="the CRD (and its 200 objects) to be deleted",
    )
    assert gone
