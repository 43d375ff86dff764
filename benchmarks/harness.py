"""What the admission benchmarks share: the loopback control plane, the CRD, GPU nodes and a real operator."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e import cluster, tools
from e2e.conftest import Kube
from e2e.operator_process import Operator, webhook_listening
from e2e.test_operator import NODES, node_manifest

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def operator_on_gpu_nodes(
    extra_env: dict[str, str] | None = None,
    managed: str | None = "fitgate-e2e.fitgate.io",
    nodes: list[tuple[str, dict[str, str], dict[str, str]]] | None = None,
    resync_s: float = 600,
) -> Iterator[tuple[Kube, Operator, Path]]:
    """A started control plane with the CRD and ``nodes`` (default: the e2e H100, L4 and MIG A100 nodes)
    and a `fitgate operator` whose webhook listens; yields (kube, operator, its workdir with ca.crt)."""
    cluster.build()
    bin_dir = tools.install()
    with tempfile.TemporaryDirectory() as tmp:
        cp = cluster.ControlPlane(Path(tmp) / "cp").start()
        kube = Kube(cp.kubeconfig, bin_dir, cp)
        op = None
        try:
            kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
            kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
            for name, labels, allocatable in NODES if nodes is None else nodes:
                kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
            workdir = Path(tmp) / "op"
            workdir.mkdir()
            op = Operator(kube, workdir, resync_s=resync_s, verbose=False, managed=managed, extra_env=extra_env)
            op.start()
            kube.wait_for(lambda: webhook_listening(op.webhook_port), timeout=60, what="the webhook server")
            yield kube, op, workdir
        finally:
            if op is not None:
                op.stop()
            cp.stop()
