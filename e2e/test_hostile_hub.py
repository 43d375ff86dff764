"""The operator fed hostile checkpoints from the Hub stays under the chart's memory limit and keeps answering.

Issue 13: a legal multi-shard Hub checkpoint (6 shards, 22 MB headers of 230k tensors each) drove the
operator from 101 MiB to 1.58 GB RSS (chart limit 512Mi) and stalled the webhook for seconds. Here a
loopback Hub serves two such repos to a real operator process on a real API server:

* ``acme/wide``: 6 shards x 80,000 tensors (480,000, under ``FITGATE_MAX_TENSORS``), 56 MB of headers,
  read as a stream into totals: a verdict;
* ``acme/huge``: 6 shards x 230,000 tensors (27 MB headers each) listed by a one-tensor-per-shard index:
  refused at the tensor limit, naming it.

While both resolve, admission reviews of a catalog model keep being answered. The operator's peak RSS
(VmHWM) must stay under the chart's ``resources.limits.memory``: 95 MiB at start, 103 MiB after, the
slowest review 0.22 s; the code before issue 13 (``FITGATE_E2E_OPERATOR_SRC=<its src>`` runs the
operator from another source tree) peaked at 664 MiB, the slowest review 2.9 s.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import TINY_LLAMA
from tests.hub_server import HubRepo, HubServer, VirtualFile

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, admission_review, post_review
from e2e.test_operator import FITS, install_crd_and_nodes, mdep, status

PENDING = (None, "CheckpointResolving", "CheckpointUnavailable")
OLD_SRC = os.environ.get("FITGATE_E2E_OPERATOR_SRC", "")
REPO = Path(__file__).resolve().parents[1]
SHA = "e" * 40
SHARDS = 6
CONFIG = TINY_LLAMA


def chart_memory_limit_mib() -> int:
    values = yaml.safe_load((REPO / "charts" / "fitgate" / "values.yaml").read_text())
    limit = str(values["resources"]["limits"]["memory"])
    assert limit.endswith("Mi"), limit
    return int(limit[:-2])


def shard(first: int, count: int) -> tuple[VirtualFile, str]:
    """A safetensors shard of ``count`` 4x4 BF16 expert tensors (data virtual); and its first tensor's name."""
    parts = ['{"__metadata__":{"format":"pt"}']
    for i in range(count):
        n = first + i
        parts.append(
            f',"model.layers.{n % 2}.mlp.experts.{n}.down_proj.weight":'
            f'{{"dtype":"BF16","shape":[4,4],"data_offsets":[{32 * i},{32 * i + 32}]}}'
        )
    parts.append("}")
    body = "".join(parts).encode()
    body += b" " * (-len(body) % 8)
    return VirtualFile(struct.pack("<Q", len(body)) + body, 8 + len(body) + 32 * count), (
        f"model.layers.{first % 2}.mlp.experts.{first}.down_proj.weight"
    )


def repo(repo_id: str, per_shard: int, full_index: bool) -> HubRepo:
    files: dict[str, Any] = {"config.json": json.dumps(CONFIG).encode()}
    weight_map: dict[str, str] = {}
    for s in range(SHARDS):
        name = f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        files[name], first = shard(s * per_shard, per_shard)
        if full_index:
            weight_map |= {
                f"model.layers.{n % 2}.mlp.experts.{n}.down_proj.weight": name
                for n in range(s * per_shard, (s + 1) * per_shard)
            }
        else:  # a short index: the shards' headers hold many more tensors than it lists
            weight_map[first] = name
    index = {"metadata": {"total_size": SHARDS * per_shard * 32}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return HubRepo(repo_id, {SHA: files}, {"main": SHA})


@pytest.fixture(scope="module")
def hostile_hub() -> Iterator[HubServer]:
    with HubServer([repo("acme/wide", 80_000, True), repo("acme/huge", 230_000, False)]) as hub:
        yield hub


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_hostile_hub_checkpoints_keep_the_operator_under_its_memory_limit(
    kube: Kube, hostile_hub: HubServer, namespace: str, tmp_path: Path
) -> None:
    needs_loopback(kube)
    install_crd_and_nodes(kube)
    env = {
        "HF_HUB_OFFLINE": "0",
        "HF_ENDPOINT": hostile_hub.url,
        "FITGATE_HUB_DEADLINE": "120",
        **({"PYTHONPATH": OLD_SRC} if OLD_SRC else {}),  # to check the test against older code
    }
    op = Operator(kube, tmp_path, managed=None, extra_env=env)
    op.start()
    try:
        assert op.proc is not None
        start_mib = peak_rss_mib(op.proc.pid)
        for name in ("wide", "huge"):
            spec = {"model": {"name": f"acme/{name}", "source": "hub"}, "serving": {"maxModelLen": 2048}}
            kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep(name, spec))
        latencies: list[float] = []

        def done() -> bool:
            started = time.monotonic()
            answer = post_review(op, admission_review(FITS))
            latencies.append(time.monotonic() - started)
            assert answer["allowed"] is True, answer
            wide, huge = status(kube, namespace, "wide"), status(kube, namespace, "huge")
            return wide.get("verdict") in ("Fits", "Tight") and huge.get("reason") not in PENDING

        kube.wait_for(done, timeout=240, what=f"both verdicts (log {op.log})")
        peak = peak_rss_mib(op.proc.pid)
        wide, huge = status(kube, namespace, "wide"), status(kube, namespace, "huge")
    finally:
        op.stop()
    limit = chart_memory_limit_mib()
    print(
        f"\nhostile Hub checkpoints: operator peak RSS {start_mib:.0f} MiB at start, {peak:.0f} MiB after "
        f"(chart limit {limit} MiB); {len(latencies)} admission reviews meanwhile, slowest {max(latencies):.2f}s"
    )
    assert peak < limit, f"peak RSS {peak:.0f} MiB over the chart's {limit} MiB limit"
    assert wide["resolvedModel"] == {"revision": SHA, "source": "hub", "weightsBasis": "safetensors"}, wide
    assert "more than 500000 tensors" in huge["message"] and "FITGATE_MAX_TENSORS" in huge["message"], huge
