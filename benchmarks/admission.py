"""Admission latency of the real webhook: AdmissionReview POSTs to a running `fitgate operator`.

Starts the loopback control plane (e2e/controlplane, built if needed), installs the CRD and GPU nodes
(H100, L4, MIG A100), runs `fitgate operator` with its TLS webhook on 127.0.0.1, warms the
checkpoint cache with one review, then sends ``--requests`` AdmissionReviews from ``--concurrency``
concurrent clients over HTTPS (keep-alive): a rotation of a fitting, a tight and a misfit spec
(the misfit computes its suggestions). Latency is measured at the client.

Usage: python benchmarks/admission.py [--concurrency N ...] [--requests M]
Ends with one JSON line per concurrency: {"concurrency": N, "p50_ms": ..., "p99_ms": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import sys
import time
import uuid
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import operator_on_gpu_nodes
from e2e.operator_process import admission_review
from e2e.test_operator import FITS, MISFIT, TIGHT

REPO = Path(__file__).resolve().parents[1]


async def run(url: str, ca: Path, concurrency: int, requests: int) -> list[float]:
    context = ssl.create_default_context(cafile=str(ca))
    specs = [FITS, TIGHT, MISFIT]
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                body = admission_review(specs[i % len(specs)], f"bench-{uuid.uuid4().hex[:8]}")
                start = time.perf_counter()
                async with session.post(url, json=body) as response:
                    payload = await response.json()
                latencies.append((time.perf_counter() - start) * 1000)
                assert payload["response"]["uid"] == body["request"]["uid"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    with operator_on_gpu_nodes() as (_kube, op, workdir):
        url = f"https://127.0.0.1:{op.webhook_port}/fit"
        asyncio.run(run(url, workdir / "ca.crt", 1, 6))  # warm the checkpoint cache
        for n in args.concurrency:
            lat = sorted(asyncio.run(run(url, workdir / "ca.crt", n, args.requests)))
            print(
                json.dumps(
                    {
                        "concurrency": n,
                        "requests": len(lat),
                        "p50_ms": round(statistics.median(lat), 2),
                        "p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
                        "max_ms": round(lat[-1], 2),
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
