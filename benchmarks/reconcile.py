"""Reconcile at scale: 10,000 ModelDeployments against 5,000 GPU nodes, in the operator's own code path.

Builds 5,000 Node objects with real GPU Feature Discovery / AMD label sets (H100, H200, L4, L40S,
A100 MIG, MI300X), runs them through the node indexer, then reconciles 10,000 ModelDeployments
(20 catalog models x settings x placements) with ``fitgate.operator.decision.logic.reconcile`` (evaluation,
status, annotations, events, metrics), as the create/resume handlers do for a cold start. The API
server is not in the loop: this measures what the operator process itself spends.

With ``--kwok`` the nodes are not built here: the same label sets are created as M kwok nodes on the
scheduling cluster of the e2e tests (kube-apiserver, controller-manager, scheduler and kwok on loopback,
``e2e/cluster.py``; built on first use), kwok makes them Ready, and the Node objects the API server
lists (conditions, addresses, nodeInfo, heartbeats) are what the operator's code indexes.

Usage: python benchmarks/reconcile.py [--deployments N] [--nodes M] [--kwok] [--baseline REF [--rounds 1]] [--scaling]
Ends with one JSON line: {"deployments", "nodes", "wall_s", "per_deployment_ms", "peak_rss_mib", ...}
With ``--baseline REF`` the same run alternates with commit REF's code (``benchmarks/baseline.py``) and the
last line holds both sides' figures and their ratios; ``--scaling`` runs N x M, N/4 x M and N x M/4 and prints
the exponents of ``wall ~ N^a x M^b``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.baseline import run_json, side_by_side

from fitgate.checkpoints import resolve
from fitgate.checkpoints.catalog import catalog_entries
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision import logic
from fitgate.operator.decision.logic import ReconcileOutcome, reconcile
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.gpus.inventory import Inventory, parse_node
from fitgate.operator.schema.config import OperatorConfig

NODE_KINDS = [
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}, {"nvidia.com/gpu": "8"}),
    ({"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "143771"}, {"nvidia.com/gpu": "8"}),
    ({"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.memory": "23034"}, {"nvidia.com/gpu": "1"}),
    ({"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.memory": "46068"}, {"nvidia.com/gpu": "4"}),
    (
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/gpu.memory": "4864"},
        {"nvidia.com/gpu": "56"},
    ),
    ({"amd.com/gpu.product-name": "Instinct_MI300X", "amd.com/gpu.vram": "192G"}, {"amd.com/gpu": "8"}),
]


def nodes(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        labels, allocatable = NODE_KINDS[i % len(NODE_KINDS)]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": {**labels, "pool": f"p{i % 50}"}},
                "status": {"allocatable": allocatable, "capacity": allocatable},
            }
        )
    return out


def specs(count: int) -> list[dict[str, Any]]:
    models = [e.repo_id for e in catalog_entries()][:20]
    placements = [
        {},
        {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
        {"gpuProduct": "NVIDIA-L40S"},
        {"nodeSelector": {"pool": "p7"}},
    ]
    out = []
    for i in range(count):
        tp = (1, 2, 4, 8)[i % 4]
        out.append(
            {
                "model": {"name": models[i % len(models)], "source": "catalog"},
                "serving": {
                    "maxModelLen": (4096, 8192, 32768)[i % 3],
                    "tensorParallelSize": tp,
                    "kvCacheDtype": ("auto", "fp8")[i % 2],
                },
                # no two specs alike: (i % 97, i // 97) differs for every i
                "workload": {"concurrentRequests": 1 + i % 97, "contextTokens": 4000 + i // 97},
                "placement": placements[i % len(placements)],
            }
        )
    return out


def kwok_nodes(count: int, workdir: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """``nodes(count)`` created as kwok nodes on a scheduling cluster, listed back once all are Ready."""
    from e2e import cluster  # noqa: PLC0415 - the e2e control plane, built on first use
    from kubernetes import client  # noqa: PLC0415 - only this mode talks to an API server
    from kubernetes import config as kube_config  # noqa: PLC0415

    cluster.build_scheduling()
    cp = cluster.ControlPlane(workdir / "cluster", scheduling=True).start()
    try:
        api = client.CoreV1Api(kube_config.new_client_from_config(config_file=str(cp.kubeconfig)))
        key, value = cluster.KWOK_NODE_ANNOTATION
        wanted = nodes(count)
        for n in wanted:
            n["metadata"]["annotations"] = {key: value}
            extra = {"cpu": "192", "memory": "2Ti", "pods": "110"}
            n["status"] = {k: {**extra, **v} for k, v in n["status"].items()}
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(api.create_node, wanted))
        created = time.perf_counter() - start

        def ready() -> list[dict[str, Any]]:
            listed = api.api_client.sanitize_for_serialization(api.list_node())["items"]
            return [
                n
                for n in listed
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
            ]

        deadline = time.monotonic() + 60 + count / 10
        while len(listed := ready()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kwok made {len(listed)} of {count} nodes Ready; logs in {cp.directory}")
            time.sleep(0.5)
        return listed, {"create_s": round(created, 2), "ready_s": round(time.perf_counter() - start, 2)}
    finally:
        cp.stop()


async def run(deployments: int, node_count: int, kwok: bool = False) -> dict[str, Any]:
    kwok_times: dict[str, float] = {}
    if kwok:
        with tempfile.TemporaryDirectory(prefix="fitgate-kwok-") as tmp:
            body, kwok_times = kwok_nodes(node_count, Path(tmp))
    else:
        body = nodes(node_count)
    start = time.perf_counter()
    index = {n["metadata"]["name"]: parse_node(n) for n in body}
    inventory = Inventory(g for gpus in index.values() for g in gpus)
    index_s = time.perf_counter() - start
    gpu_nodes = sum(1 for v in index.values() if v)
    store = FactsStore(resolver=lambda name, rev, source: resolve(name, rev, source="catalog"))
    metrics = Metrics()
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    all_specs = specs(deployments)

    def stored(status: Any) -> Any:
        """A status as the API server stores a merge patch of it, and the next resync reads it: no null fields."""
        if isinstance(status, dict):
            return {k: stored(v) for k, v in status.items() if v is not None}
        if isinstance(status, list):
            return [stored(v) for v in status]
        return status

    async def one(i: int, status: dict[str, Any] | None) -> ReconcileOutcome:
        return await reconcile(
            raw_spec=all_specs[i],
            old_status=status,
            generation=1,
            namespace=f"ns{i % 100}",
            name=f"md-{i}",
            nodes=inventory,
            store=store,
            metrics=metrics,
            config=config,
        )

    verdicts: dict[str, int] = {}
    statuses: list[dict[str, Any] | None] = []
    start = time.perf_counter()
    for i in range(len(all_specs)):
        outcome = await one(i, None)
        statuses.append(stored(outcome.status))
        verdicts[outcome.evaluation.verdict.value] = verdicts.get(outcome.evaluation.verdict.value, 0) + 1
    wall = time.perf_counter() - start
    # A resync round of the unchanged cluster: the timers call reconcile again with the status the API server
    # stored (the written one without its null fields: what the live operator reads back).
    start = time.perf_counter()
    patched = 0
    for i in range(len(all_specs)):
        patched += (await one(i, statuses[i])).status is not None
    resync = time.perf_counter() - start
    # Node churn: one L4 node joins (a new snapshot). Only the objects whose pools it touches are evaluated
    # again: placements on any GPU, and misfits (their alternatives are searched cluster-wide).
    body.append(nodes(3)[2] | {"metadata": {"name": "node-joined", "labels": {**NODE_KINDS[2][0], "pool": "new"}}})
    index["node-joined"] = parse_node(body[-1])
    inventory = Inventory(g for gpus in index.values() for g in gpus)
    before = _reuse()
    start = time.perf_counter()
    for i in range(len(all_specs)):
        outcome = await one(i, statuses[i])
        if outcome.status is not None:
            statuses[i] = stored(outcome.status)
    churn = time.perf_counter() - start
    after = _reuse()
    return {
        "deployments": deployments,
        "nodes": node_count,
        "node_source": "kwok" if kwok else "synthetic",
        **{f"kwok_{k}": v for k, v in kwok_times.items()},
        "gpu_nodes_indexed": gpu_nodes,
        "index_s": round(index_s, 2),
        "wall_s": round(wall, 2),
        "per_deployment_ms": round(1000 * wall / deployments, 2),
        "distinct_specs": len({json.dumps(s, sort_keys=True) for s in all_specs}),
        "resync_round_s": round(resync, 2),
        "resync_patches": patched,
        "churn_resync_s": round(churn, 2),
        # (same snapshot, same pools of a new snapshot, evaluated) during the churn round; null: not counted
        "churn_reuse": [a - b for a, b in zip(after, before, strict=True)] if after and before else None,
        "verdicts": verdicts,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def scaling(deployments: int, node_count: int) -> int:
    """Cold wall time at (N, M), (N/4, M) and (N, M/4), each in a new process: t ~ N^a M^b, a and b printed."""
    runs = {}
    for n, m in ((deployments, node_count), (deployments // 4, node_count), (deployments, node_count // 4)):
        argv = [__file__, "--deployments", str(n), "--nodes", str(m)]
        runs[(n, m)] = run_json(argv, None)
        print(json.dumps(runs[(n, m)]), flush=True)
    full = runs[(deployments, node_count)]["wall_s"]
    a = math.log(full / runs[(deployments // 4, node_count)]["wall_s"]) / math.log(4)
    b = math.log(full / runs[(deployments, node_count // 4)]["wall_s"]) / math.log(4)
    print(json.dumps({"scaling": {"deployments_exponent": round(a, 2), "nodes_exponent": round(b, 2)}}))
    return 0


def _reuse() -> tuple[int, ...] | None:
    counts = getattr(logic, "REUSE", None)  # absent from a baseline before it
    return None if counts is None else (counts.same_snapshot, counts.same_pools, counts.evaluated)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--baseline", help="a commit to measure side by side with the working tree")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds with --baseline")
    parser.add_argument(
        "--scaling", action="store_true", help="also at a quarter of the deployments and of the nodes: the exponents"
    )
    parser.add_argument(
        "--kwok", action="store_true", help="the nodes as kwok nodes on a loopback scheduling cluster (e2e/cluster.py)"
    )
    args = parser.parse_args()
    if args.nodes < 1 or args.deployments < 1:
        parser.error(f"--nodes and --deployments must be at least 1 (got {args.nodes}, {args.deployments})")
    if args.kwok and (args.scaling or args.baseline):
        parser.error("--kwok measures one run: not with --scaling or --baseline")
    if args.scaling:
        return scaling(args.deployments, args.nodes)
    if not args.baseline:
        print(json.dumps(asyncio.run(run(args.deployments, args.nodes, args.kwok))))
        return 0
    argv = [__file__, "--deployments", str(args.deployments), "--nodes", str(args.nodes)]
    runs = side_by_side(argv, args.baseline, args.rounds)
    summary: dict[str, Any] = {"baseline": args.baseline, "deployments": args.deployments, "nodes": args.nodes}
    for key in ("wall_s", "resync_round_s", "churn_resync_s", "peak_rss_mib"):
        now, before = [r[key] for r in runs["current"]], [r[key] for r in runs["baseline"]]
        ratio = round(statistics.median(now) / statistics.median(before), 2) if statistics.median(before) else None
        summary[key] = {"current": now, "baseline": before, "ratio": ratio}
    summary["same_verdicts"] = all(r["verdicts"] == runs["current"][0]["verdicts"] for r in runs["baseline"])
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
