"""Admission of a vLLM Deployment vs a ModelDeployment review of the same model and settings.

Starts the loopback control plane, GPU nodes and a real `fitgate operator` (workload webhook on), then
POSTs, alternating, an AdmissionReview of the vLLM production-stack chart's engine Deployment (its real
`helm template` output, tests/fixtures/workloads, on H100: it fits) to ``/workloads-enforce`` and of the
ModelDeployment the reader turns it into to ``/fit``, each object with a new name (as separate applies),
and the same Deployment without the annotation to ``/workloads-object`` (chart ``objectOptIn``: admitted unread).
One client, keep-alive, latency measured at the client. Target: the Deployment adds <= 1 ms at p50.

Usage: python benchmarks/workload_admission.py [--requests N]
Ends with one JSON line: {"modeldeployment_p50_ms": ..., "deployment_p50_ms": ..., "added_p50_ms": ...,
"unannotated_object_path_p50_ms": ...}
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import ssl
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import operator_on_gpu_nodes
from e2e.operator_process import admission_review

from fitgate.workloads import read_workload

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "workloads" / "production-stack-deployment.yaml"


def deployment() -> dict[str, Any]:
    """The chart's engine Deployment, its node affinity on the H100 pool (where it fits)."""
    d: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    terms = d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["NVIDIA-H100-80GB-HBM3"]
    return d


def deployment_review(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """An AdmissionReview of a Deployment CREATE, as the API server sends it."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] = name
    review = admission_review({}, name)
    kind = {"group": "apps", "version": "v1", "kind": "Deployment"}
    resource = {"group": "apps", "version": "v1", "resource": "deployments"}
    review["request"].update(
        kind=kind, requestKind=kind, resource=resource, requestResource=resource, object=obj, name=name
    )
    return review


async def run(base: str, ca: Path, requests: int) -> tuple[list[float], list[float], list[float]]:
    obj = deployment()
    reading = read_workload(obj)
    assert reading is not None
    spec = reading.spec()
    context = ssl.create_default_context(cafile=str(ca))
    md: list[float] = []
    dep: list[float] = []
    plain: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=1)) as session:
        for i in range(requests):
            name = f"bench-{uuid.uuid4().hex[:8]}"
            series = [
                ("/fit", admission_review(spec, name), md),
                ("/workloads-enforce", deployment_review(obj, name), dep),
                # objectOptIn: a Deployment without the annotation in an unlabelled namespace (admitted unread)
                ("/workloads-object", deployment_review(obj, name), plain),
            ]
            for path, body, out in series[i % 3 :] + series[: i % 3]:
                start = time.perf_counter()
                async with session.post(base + path, json=body) as response:
                    payload = await response.json()
                out.append((time.perf_counter() - start) * 1000)
                answer = payload["response"]
                assert answer["allowed"], answer
                assert "patch" not in answer  # never mutating
    return md, dep, plain


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    with operator_on_gpu_nodes({"FITGATE_WORKLOAD_WEBHOOK": "1"}, managed=None) as (_kube, op, workdir):
        base = f"https://127.0.0.1:{op.webhook_port}"
        asyncio.run(run(base, workdir / "ca.crt", 10))  # warm the checkpoint cache
        md, dep, plain = asyncio.run(run(base, workdir / "ca.crt", args.requests))
        p50_md, p50_dep = statistics.median(md), statistics.median(dep)
        print(
            json.dumps(
                {
                    "requests": len(md),
                    "modeldeployment_p50_ms": round(p50_md, 3),
                    "deployment_p50_ms": round(p50_dep, 3),
                    "added_p50_ms": round(p50_dep - p50_md, 3),
                    "modeldeployment_p99_ms": round(sorted(md)[int(0.99 * (len(md) - 1))], 3),
                    "deployment_p99_ms": round(sorted(dep)[int(0.99 * (len(dep) - 1))], 3),
                    "unannotated_object_path_p50_ms": round(statistics.median(plain), 3),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
