"""Admission latency of the real webhook: AdmissionReview POSTs to a running `fitgate operator`.

Starts the loopback control plane (e2e/controlplane, built if needed), installs the CRD and GPU nodes
(H100, L4, MIG A100), runs `fitgate operator` with its TLS webhook on 127.0.0.1, warms the
checkpoint cache with one review, then sends ``--requests`` AdmissionReviews from ``--concurrency``
concurrent clients over HTTPS (keep-alive). Latency is measured at the client. Three cases (issue 23):

* ``cached``: a rotation of a fitting, a tight and a misfit spec, each already evaluated (GitOps
  re-applies, retries, dry runs);
* ``new``: every review a spec never seen before (what a ``kubectl apply`` of a changed spec is): the
  same three, each with its own workload, so every misfit computes its suggestions;
* ``bare``: the same client against ``benchmarks/bare_webhook.py`` (aiohttp + the same TLS certificate,
  answering ``allowed: true``): the floor, so each fitgate figure is also given as a ratio to it.

Usage: python benchmarks/admission.py [--concurrency N ...] [--requests M] [--cases bare cached new] [--rounds R]
Prints one JSON line per round, case and concurrency: {"round", "case", "concurrency", "p50_ms", "p99_ms",
"ratio_p50", "answers_digest" (the same in every run and code that answers alike)...}, the cases interleaved within
each round, then one summary line per case and concurrency (the median p50 and the median and range of its ratio to
the same round's bare p50). ``--busy N`` then creates N ModelDeployments and measures cached reviews while the
operator reconciles them (as a ratio to the cached p50 before they existed), then while it resyncs them (every
``--resync`` seconds): their resync slots all fall in the first half of the period, so ``--periods`` periods
alternate a window with resyncs and one as long without, and each resync window's p50 is compared with the idle one
after it (:func:`busy`). ``--baseline REF`` runs the operator from commit REF's code instead (the client, the bare
webhook and the cluster unchanged).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import itertools
import json
import math
import os
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.baseline import source_of
from benchmarks.harness import operator_on_gpu_nodes
from e2e.operator_process import admission_review
from e2e.test_operator import FITS, MISFIT, TIGHT

from fitgate.operator.runtime.handlers import resync_slot

REPO = Path(__file__).resolve().parents[1]


_FRESH = itertools.count(1)


#: The contexts of :func:`fresh`'s workloads: 1,000 + (n x 997 mod 6,007) tokens, every value of 1,000-7,006 once in
#: any 6,007 reviews (6,007 is prime), in an order that does not drift, so each case and concurrency of a run gets the
#: same mix of light and heavy workloads wherever it falls in the run (they grew with n before: the later cases
#: were the heavier, and past 7,192 reviews the Tight spec's were over its maxModelLen 8192).
CONTEXT_SPAN = 6007


def fresh(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a workload no review has used yet: a new cache key, so a full evaluation.

    Concurrency 1 + n mod 64 and the context above: the pair is new for 64 x 6,007 reviews (64 and 6,007 are
    coprime), more than any run sends.
    """
    out = copy.deepcopy(spec)
    n = next(_FRESH)
    out["workload"] = {"concurrentRequests": 1 + n % 64, "contextTokens": 1000 + (n * 997) % CONTEXT_SPAN}
    return out


async def run(
    url: str,
    ca: Path,
    concurrency: int,
    requests: int,
    new: bool = False,
    until: float | None = None,
    answers: dict[int, Any] | None = None,
) -> list[float]:
    """``requests`` reviews from ``concurrency`` clients; with ``until`` (``time.monotonic()``), as many as fit.

    ``answers``: filled with each review's response (without its uid) by the review's index.
    """
    context = ssl.create_default_context(cafile=str(ca))
    specs = [FITS, TIGHT, MISFIT]
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    sent = itertools.count()
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while True:
                if until is not None:
                    if time.monotonic() >= until:
                        return
                    i = next(sent)
                else:
                    try:
                        i = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                spec = specs[i % len(specs)]
                body = admission_review(fresh(spec) if new else spec, f"bench-{uuid.uuid4().hex[:8]}")
                start = time.perf_counter()
                async with session.post(url, json=body) as response:
                    payload = await response.json()
                latencies.append((time.perf_counter() - start) * 1000)
                assert payload["response"]["uid"] == body["request"]["uid"]
                if answers is not None:
                    answers[i] = {k: v for k, v in payload["response"].items() if k != "uid"}

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


#: The part of the resync period (from its phase 0) that the ``--busy`` objects' slots fall in: their resyncs
#: all happen in the first half of each period, so the second half is a window of the same length with the same
#: objects, watches and machine but no resync (:func:`busy`).
RESYNC_SHARE = (0.05, 0.45)


def phase_share(name: str, namespace: str = "default") -> float:
    """Where in the resync period (0-1) the operator resyncs this object (its ``handlers.resync_slot``).

    The slots are the working tree's; a ``--baseline`` from before them (c400e69 and older) resynced each
    object one period after its timer started, and its windows mean nothing.
    """
    return resync_slot(0.0, 1.0, f"{namespace}/{name}") % 1.0


def busy_names(count: int) -> list[str]:
    """``count`` object names whose resync slots fall in :data:`RESYNC_SHARE` of the period."""
    low, high = RESYNC_SHARE
    names = (f"busy-{i}" for i in itertools.count())
    return list(itertools.islice((n for n in names if low <= phase_share(n) < high), count))


def windows(period_s: float, start: float) -> Iterator[tuple[str, float, float]]:
    """Alternate half-period windows from the first period boundary after ``start`` (monotonic time, which is
    the operator's event-loop clock): ("resync", t0, t1) for the first half, ("idle", t1, t2) for the second."""
    t = (math.floor(start / period_s) + 1) * period_s
    while True:
        yield "resync", t, t + period_s / 2
        yield "idle", t + period_s / 2, t + period_s
        t += period_s


def busy(
    kube: Any,
    url: str,
    ca: Path,
    count: int,
    levels: list[int],
    requests: int,
    pid: int | None = None,
    resync_s: float = 600,
    periods: int = 6,
) -> None:
    """Cached reviews while the operator reconciles ``count`` new ModelDeployments, against the same just before.

    ``kubectl apply`` creates them (each through the webhook too), the operator evaluates, renders and patches
    each one's status: a heavier load than a resync round of unchanged objects (which evaluates nothing).
    Then, with ``pid`` (the operator's), its CPU over two resync periods without reviews: the mean, the mean in
    the halves of the period with and without resyncs, and the busiest 100 ms. Then, for each concurrency,
    cached reviews over ``periods`` resync periods, alternating windows of half a period: the objects' slots
    are all in the first half (:func:`busy_names`), so each "resync" window has an "idle" one of the same length
    right after it, with the same objects and machine; the ratio is each resync window's p50 over the next idle
    window's (its median and range over the periods) and the pooled p50s' ratio.
    """
    items = []
    for i, name in enumerate(busy_names(count)):  # distinct fitting specs: every one a new evaluation
        spec = copy.deepcopy(FITS)
        spec["workload"] = {"concurrentRequests": 1 + i % 16, "contextTokens": 2000 + i}
        meta = {"name": name, "namespace": "default"}
        items.append({"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": meta, "spec": spec})
    idle = {n: statistics.median([t for _ in range(3) for t in asyncio.run(run(url, ca, n, requests))]) for n in levels}
    applying = threading.Thread(
        target=kube.kubectl,
        args=("apply", "-f", "-"),
        kwargs={"stdin": json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), "timeout": 600},
    )
    applying.start()
    time.sleep(2.0)  # the first objects are in, the operator is reconciling
    for n in levels:
        p50 = statistics.median(asyncio.run(run(url, ca, n, requests)))
        row = {"case": "cached-during-reconcile", "objects": count, "concurrency": n, "p50_ms": round(p50, 2)}
        row["ratio_to_idle_p50"] = round(p50 / idle[n], 2)
        row["idle_p50_ms"] = round(idle[n], 2)
        row["still_applying"] = applying.is_alive()
        print(json.dumps(row), flush=True)
    applying.join()
    time.sleep(10.0)  # the last reconciles done: what runs now is the resync timers of unchanged objects
    if pid is not None:  # the operator's CPU over two resync periods, no reviews: its mean and its busiest 100 ms
        samples = [(time.monotonic(), cpu_s(pid))]
        while samples[-1][0] - samples[0][0] < 2 * resync_s:
            time.sleep(0.1)
            samples.append((time.monotonic(), cpu_s(pid)))
        steps = [(t1, (c2 - c1) / (t2 - t1)) for (t1, c1), (t2, c2) in itertools.pairwise(samples)]
        total = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
        half = {k: [f for t, f in steps if ((t % resync_s) < resync_s / 2) == (k == "resync")] for k in WINDOWS}
        row = {"case": "operator-cpu-during-resync", "objects": count, "seconds": round(2 * resync_s, 1)}
        row |= {"cpu_fraction_mean": round(total, 3), "cpu_fraction_busiest_100ms": round(max(f for _, f in steps), 3)}
        row |= {f"cpu_fraction_{k}_half": round(statistics.fmean(v), 3) for k, v in half.items() if v}
        print(json.dumps(row), flush=True)
    for n in levels:
        got: dict[str, list[list[float]]] = {k: [] for k in WINDOWS}
        cpu: dict[str, list[float]] = {k: [] for k in WINDOWS}
        for kind, start, end in itertools.islice(windows(resync_s, time.monotonic()), 2 * periods):
            time.sleep(max(0.0, start - time.monotonic()))
            before = cpu_s(pid) if pid is not None else 0.0
            lat = asyncio.run(run(url, ca, n, 0, until=end))
            got[kind].append(lat)
            cpu[kind].append((cpu_s(pid) - before) * 1000 / max(1, len(lat)) if pid is not None else 0.0)
        ratios = [statistics.median(r) / statistics.median(i) for r, i in zip(got["resync"], got["idle"], strict=True)]
        pooled = {k: statistics.median([t for w in v for t in w]) for k, v in got.items()}
        row = {"case": "cached-resync-vs-idle-windows", "objects": count, "concurrency": n, "periods": periods}
        row |= {"window_s": round(resync_s / 2, 2), "p50_resync_ms": round(pooled["resync"], 2)}
        row |= {"p50_idle_ms": round(pooled["idle"], 2), "ratio_pooled": round(pooled["resync"] / pooled["idle"], 2)}
        row |= {"ratio_median": round(statistics.median(ratios), 2)}
        row |= {"ratio_range": [round(min(ratios), 2), round(max(ratios), 2)]}
        row |= {"requests": [sum(len(w) for w in got[k]) for k in WINDOWS]}
        row |= {f"server_cpu_ms_per_review_{k}": round(statistics.median(v), 3) for k, v in cpu.items()}
        print(json.dumps(row), flush=True)


WINDOWS = ("resync", "idle")


def digest(answers: dict[int, Any]) -> str:
    """A digest of the answers by review index: equal runs (and codes) answered the same specs alike."""
    return hashlib.sha256(json.dumps(sorted(answers.items())).encode()).hexdigest()[:16]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used: what a busy shared machine disturbs less than latency."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--cases", nargs="+", default=["bare", "cached", "new"], choices=["bare", "cached", "new"])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the summary is their median")
    parser.add_argument("--baseline", help="run the operator from this commit's src (benchmarks/baseline.py)")
    parser.add_argument("--resync", type=float, default=600, help="the operator's resync period (FITGATE_RESYNC)")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="then create this many ModelDeployments and measure cached reviews while the operator reconciles them",
    )
    parser.add_argument(
        "--periods", type=int, default=6, help="with --busy: resync periods of alternating resync / idle windows"
    )
    args = parser.parse_args()
    extra_env = {"PYTHONPATH": str(source_of(args.baseline))} if args.baseline else None
    with operator_on_gpu_nodes(extra_env=extra_env, resync_s=args.resync) as (kube, op, workdir):
        url = f"https://127.0.0.1:{op.webhook_port}/fit"
        ca = workdir / "ca.crt"
        asyncio.run(run(url, ca, 1, 6))  # warm the checkpoint cache
        bare_port = _free_port()
        bare = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "bare_webhook.py"), str(workdir / "tls.crt"),
             str(workdir / "tls.key"), str(bare_port)]
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", bare_port)) == 0:
                        break
                time.sleep(0.1)
            ratios: dict[tuple[str, int], list[float]] = {}
            p50s: dict[tuple[str, int], list[float]] = {}
            cpus: dict[tuple[str, int], list[float]] = {}
            for r in range(args.rounds):  # interleaved: a busy spell of this shared machine hits every case alike
                floor: dict[int, float] = {}
                for n in args.concurrency:
                    for case in args.cases:
                        target = f"https://127.0.0.1:{bare_port}/fit" if case == "bare" else url
                        assert op.proc is not None
                        server = bare.pid if case == "bare" else op.proc.pid
                        cpu_before = cpu_s(server)
                        answers: dict[int, Any] = {}
                        lat = sorted(asyncio.run(run(target, ca, n, args.requests, case == "new", None, answers)))
                        cpu_ms = (cpu_s(server) - cpu_before) * 1000 / len(lat)
                        p50 = statistics.median(lat)
                        if case == "bare":
                            floor[n] = p50
                        row: dict[str, Any] = {
                            "round": r + 1,
                            "case": case,
                            "concurrency": n,
                            "requests": len(lat),
                            "p50_ms": round(p50, 2),
                            "p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
                            "max_ms": round(lat[-1], 2),
                            "server_cpu_ms_per_review": round(cpu_ms, 3),
                            # the answers by review (the same specs in the same order in every run and code)
                            "answers_digest": digest(answers),
                        }
                        cpus.setdefault((case, n), []).append(cpu_ms)
                        p50s.setdefault((case, n), []).append(p50)
                        if n in floor:
                            row["ratio_p50"] = round(p50 / floor[n], 2)
                            ratios.setdefault((case, n), []).append(p50 / floor[n])
                        print(json.dumps(row), flush=True)
            for (case, n), values in p50s.items():
                summary: dict[str, Any] = {"summary": case, "concurrency": n, "rounds": len(values)}
                summary["p50_ms_median"] = round(statistics.median(values), 2)
                summary["server_cpu_ms_per_review_median"] = round(statistics.median(cpus[(case, n)]), 3)
                if (case, n) in ratios:
                    summary["ratio_p50_median"] = round(statistics.median(ratios[(case, n)]), 2)
                    summary["ratio_p50_range"] = [round(min(ratios[(case, n)]), 2), round(max(ratios[(case, n)]), 2)]
                print(json.dumps(summary), flush=True)
            if args.busy:
                assert op.proc is not None
                busy(kube, url, ca, args.busy, args.concurrency, args.requests, op.proc.pid, args.resync, args.periods)
        finally:
            bare.terminate()
            bare.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
