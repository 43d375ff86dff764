"""The operator fed hostile checkpoints through ``source: path`` stays small and answers each in one line.

A 450,000-tensor checkpoint (52 MB of safetensors header, all under the 500,000-tensor limit) is read
as a stream into totals; a 600,000-tensor one is refused at the limit; a path outside
FITGATE_MODEL_ROOTS is refused without being looked at. The operator's peak RSS (VmHWM) must stay far
under the chart's 512Mi limit: 89 MiB at start, 100 MiB after these; reading the first checkpoint as a
tensor list (before issue 13) peaked at 544 MiB.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from tests.conftest import TINY_LLAMA

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator
from e2e.test_operator import NODES, node_manifest

REPO = Path(__file__).resolve().parents[1]
CONFIG = TINY_LLAMA


def checkpoint(path: Path, tensors: int) -> None:
    """config.json and one safetensors file of ``tensors`` small expert tensors (data left as a sparse hole)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(CONFIG))
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    for i in range(tensors):
        entries[f"model.layers.{i % 2}.mlp.experts.{i}.down_proj.weight"] = {
            "dtype": "BF16",
            "shape": [4, 4],
            "data_offsets": [32 * i, 32 * i + 32],
        }
    body = json.dumps(entries, separators=(",", ":")).encode()
    with (path / "model.safetensors").open("wb") as fh:
        fh.write(struct.pack("<Q", len(body)) + body)
        fh.truncate(8 + len(body) + 32 * tensors)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_hostile_checkpoints_keep_the_operator_small(kube: Kube, namespace: str, tmp_path: Path) -> None:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    root = tmp_path / "models"
    checkpoint(root / "many", 450_000)
    checkpoint(root / "too-many", 600_000)
    for name, labels, allocatable in NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    op = Operator(kube, tmp_path, extra_env={"FITGATE_MODEL_ROOTS": str(root)})
    op.start()
    try:
        assert op.proc is not None
        start_mib = peak_rss_mib(op.proc.pid)
        models = {"many": str(root / "many"), "too-many": str(root / "too-many"), "probe": "/proc/self"}
        for name, model in models.items():
            spec = {"model": {"name": model, "source": "path"}, "serving": {"maxModelLen": 2048}}
            manifest = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": name}}
            kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps({**manifest, "spec": spec}))

        def status(name: str) -> dict[str, Any]:
            return dict(kube.get("mdep", name, "-n", namespace).get("status") or {})

        kube.wait_for(lambda: status("many").get("verdict") == "Fits", timeout=120, what=f"a verdict (log {op.log})")
        kube.wait_for(
            lambda: "FITGATE_MAX_TENSORS" in json.dumps(status("too-many")), timeout=120, what="the tensor limit"
        )
        kube.wait_for(lambda: "FITGATE_MODEL_ROOTS" in json.dumps(status("probe")), timeout=60, what="the roots")
        assert "config.json" not in json.dumps(status("probe"))
        peak = peak_rss_mib(op.proc.pid)
        print(f"operator peak RSS: {start_mib:.0f} MiB at start, {peak:.0f} MiB after the hostile checkpoints")
        assert peak < 256, f"peak RSS {peak:.0f} MiB"
    finally:
        op.stop()
