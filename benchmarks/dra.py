"""Admission with DRA at scale: 5,000 GPU nodes plus 40,000 ResourceSlice devices, against node labels alone.

Each mode runs in its own process (so that its RSS is its own):

* ``labels``: 5,000 Nodes with GPU Feature Discovery labels (8 x H100, H200, L40S or A100, 1,250 of each),
  read by the node watch (``NodeWatch._list`` over a fake client serving pages of JSON, the real parsing).
* ``dra``: the same Nodes, plus one ResourceSlice per node with 8 devices in the NVIDIA DRA driver's shape
  (40,000 devices; tests/fixtures/dra cites the driver's source), the driver's two DeviceClasses, 100
  ResourceClaimTemplates, 10,000 allocated ResourceClaims and 10,000 GPU pods, read by the DRA and pod watches
  (``ResourceWatch._list``): the inventory is the merged one (a node known both ways is one pool).

Then ``--requests`` admissions through ``fitgate.operator.decision.logic.admit`` (what the webhook handler awaits),
each spec different (the workload varies) so that no evaluation comes from the cache: label placements in
both modes (the p50 compared), and in ``dra`` mode also placements through a claim template (CEL selectors
over the 40,000 devices, matched once per inventory snapshot). The API server and HTTPS are not in the loop.

Usage: python benchmarks/dra.py [--requests N] [--nodes M] [--rounds R]
Ends with one JSON line: {"labels": {...}, "dra": {...}, "p50_ratio_median": ..., "p50_ratio_runs": [...]}
(R alternating runs of each mode: this shared machine's load moves a 1 ms p50 by +-40 % from run to run).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitgate.checkpoints import resolve
from fitgate.operator.decision.logic import admit
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.schema.config import OperatorConfig
from fitgate.operator.watches.nodewatch import NodeWatch
from fitgate.operator.watches.resourcewatch import Sources

KINDS = [
    ("NVIDIA-H100-80GB-HBM3", "81559", "NVIDIA H100 80GB HBM3", "Hopper", "81559Mi"),
    ("NVIDIA-H200", "143771", "NVIDIA H200", "Hopper", "143771Mi"),
    ("NVIDIA-L40S", "46068", "NVIDIA L40S", "Ada Lovelace", "46068Mi"),
    ("NVIDIA-A100-SXM4-80GB", "81920", "NVIDIA A100-SXM4-80GB", "Ampere", "81920Mi"),
]
DEVICES_PER_NODE = 8


class _Page:
    def __init__(self, items: list[dict[str, Any]], token: str | None) -> None:
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if token:
            meta["continue"] = token
        self.data = json.dumps({"items": items, "metadata": meta}).encode()


class Lazy:
    """``count`` objects made on demand by ``make(i)``: the fake API server holds none (RSS is the operator's)."""

    def __init__(self, count: int, make: Callable[[int], dict[str, Any]]) -> None:
        self.count, self.make = count, make

    def page(self, start: int, end: int) -> list[dict[str, Any]]:
        return [self.make(i) for i in range(start, min(end, self.count))]


def pager(objects: Lazy) -> Callable[..., _Page]:
    """A list call serving ``objects`` in pages, as the API server does (limit / continue)."""

    def call(*_args: Any, limit: int = 500, _continue: str | None = None, **_: Any) -> _Page:
        start = int(_continue or 0)
        end = start + limit
        return _Page(objects.page(start, end), str(end) if end < objects.count else None)

    return call


def node(i: int) -> dict[str, Any]:
    product, memory, *_ = KINDS[i % len(KINDS)]
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": memory, "pool": f"p{i % 50}"}
    allocatable = {"nvidia.com/gpu": str(DEVICES_PER_NODE)}
    return {
        "metadata": {"name": f"node-{i:05d}", "labels": labels},
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def resource_slice(i: int) -> dict[str, Any]:
    _, _, name, arch, memory = KINDS[i % len(KINDS)]
    devices = [
        {
            "name": f"gpu-{m}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{i:08x}-{m:04x}"},
                "productName": {"string": name},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": arch},
                "cudaComputeCapability": {"version": "9.0.0"},
                "driverVersion": {"version": "550.54.15"},
                "cudaDriverVersion": {"version": "12.4.0"},
            },
            "capacity": {"memory": {"value": memory}},
        }
        for m in range(DEVICES_PER_NODE)
    ]
    node_name = f"node-{i:05d}"
    return {
        "metadata": {"name": f"{node_name}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


CLASSES = [
    {
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && "
                        "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                    }
                }
            ]
        },
    }
]


def templates(count: int) -> list[dict[str, Any]]:
    memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}Gi')) >= 0"
    return [
        {
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"t{i}", "namespace": "bench"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "count": 1,
                                    "selectors": [{"cel": {"expression": memory.format(40 + i)}}],
                                },
                            }
                        ]
                    }
                }
            },
        }
        for i in range(count)
    ]


def claim(node_count: int) -> Callable[[int], dict[str, Any]]:
    def make(i: int) -> dict[str, Any]:
        node_name = f"node-{i % node_count:05d}"
        result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node_name, "device": f"gpu-{i // node_count}"}
        return {
            "metadata": {"name": f"c{i}", "namespace": "jobs"},
            "status": {"allocation": {"devices": {"results": [result]}}},
        }

    return make


def pod(node_count: int) -> Callable[[int], dict[str, Any]]:
    def make(i: int) -> dict[str, Any]:
        return {
            "metadata": {"name": f"p{i}", "namespace": "jobs", "labels": {"app": f"a{i % 20}"}},
            "spec": {
                "nodeName": f"node-{(i * 7) % node_count:05d}",
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }

    return make


class FakeCustom:
    def __init__(self, objects: dict[str, Lazy]) -> None:
        self.objects = objects

    def list_cluster_custom_object(self, _group: str, _version: str, plural: str, **kwargs: Any) -> _Page:
        return pager(self.objects.get(plural, Lazy(0, dict)))(**kwargs)


class FakeCore:
    def __init__(self, node_objects: Lazy, pod_objects: Lazy) -> None:
        self.list_node = pager(node_objects)
        self.list_pod_for_all_namespaces = pager(pod_objects)


def spec(i: int, claim: bool) -> dict[str, Any]:
    placements = [{}, {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}, {"nodeSelector": {"pool": "p7"}}]
    placement = {"resourceClaimTemplateName": f"t{i % 100}"} if claim else placements[i % len(placements)]
    return {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
        "serving": {"maxModelLen": 8192},
        "workload": {"concurrentRequests": 4, "contextTokens": 1000 + i},  # no two specs alike: no cache hit
        "placement": placement,
    }


async def admissions(watch: NodeWatch, requests: int, claim: bool, offset: int) -> list[float]:
    store = FactsStore(resolver=lambda name, rev, source: resolve(name, rev, source="catalog"))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    await admit(raw_spec=spec(0, claim), nodes=watch.inventory(), store=store, config=config, dryrun=False)
    times = []
    for i in range(requests):
        start = time.perf_counter()
        outcome = await admit(
            raw_spec=spec(offset + i, claim),
            nodes=watch.inventory(),
            store=store,
            config=config,
            dryrun=False,
            namespace="bench",
        )
        times.append((time.perf_counter() - start) * 1000)
        assert outcome.result in ("allowed", "warned"), outcome.message
    return times


def one_mode(mode: str, node_count: int, requests: int) -> dict[str, Any]:
    node_objects = Lazy(node_count, node)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    sources = None
    if mode == "dra":
        tpl = templates(100)
        custom = FakeCustom(
            {
                "resourceslices": Lazy(node_count, resource_slice),
                "deviceclasses": Lazy(len(CLASSES), CLASSES.__getitem__),
                "resourceclaimtemplates": Lazy(len(tpl), tpl.__getitem__),
                "resourceclaims": Lazy(node_count * 2, claim(node_count)),
            }
        )
        core = FakeCore(node_objects, Lazy(node_count * 2, pod(node_count)))
        sources = Sources(custom_factory=lambda: custom, core_factory=lambda: core)
        for w in sources.watches:
            w._list(custom if w.name != "pods" else core)  # the watch's own LIST, without its thread
    watch = NodeWatch(api_factory=lambda: None, sources=sources)
    watch._list(FakeCore(node_objects, Lazy(0, dict)))
    inventory = watch.inventory()
    load_s = time.perf_counter() - start
    gc.collect()
    labels = asyncio.run(admissions(watch, requests, False, 0))
    result: dict[str, Any] = {
        "nodes": node_count,
        "devices": sum(len(d) for d in sources.state().devices.values()) if sources else 0,
        "gpu_entries": len(inventory.gpus),
        "load_s": round(load_s, 2),
        "admission_p50_ms": round(statistics.median(labels), 2),
        "admission_p99_ms": round(sorted(labels)[int(len(labels) * 0.99) - 1], 2),
    }
    if sources is not None:
        claim_times = asyncio.run(admissions(watch, requests, True, requests))
        result["claim_admission_p50_ms"] = round(statistics.median(claim_times), 2)
        result["claim_admission_p99_ms"] = round(sorted(claim_times)[int(len(claim_times) * 0.99) - 1], 2)
        # a pod starts: the next admission rebuilds the merged inventory once (DRA GPUs cached per node)
        new_pod = pod(node_count)(node_count * 2 + 1)
        sources.pods.apply("ADDED", new_pod)
        start = time.perf_counter()
        watch.inventory()
        result["rebuild_after_pod_event_ms"] = round((time.perf_counter() - start) * 1000, 1)
        # a ResourceSlice changes: every node's devices are regrouped
        sources.dra["resourceslices"].apply("MODIFIED", resource_slice(node_count + 1))
        start = time.perf_counter()
        watch.inventory()
        result["rebuild_after_slice_event_ms"] = round((time.perf_counter() - start) * 1000, 1)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["peak_rss_mib"] = round(rss / 1024, 1)
    result["rss_over_start_mib"] = round((rss - rss0) / 1024, 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating runs of each mode (a shared machine is noisy)"
    )
    parser.add_argument("--mode", choices=["labels", "dra"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(one_mode(args.mode, args.nodes, args.requests)))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {"labels": [], "dra": []}
    for _ in range(args.rounds):
        for mode in ("labels", "dra"):
            argv = [
                sys.executable,
                __file__,
                "--mode",
                mode,
                "--nodes",
                str(args.nodes),
                "--requests",
                str(args.requests),
            ]
            done = subprocess.run(argv, capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"{mode}: {runs[mode][-1]}", file=sys.stderr)
    out: dict[str, Any] = {mode: runs[mode][-1] for mode in runs}
    for mode, results in runs.items():
        out[mode]["admission_p50_ms_runs"] = [r["admission_p50_ms"] for r in results]
    pairs = zip(runs["labels"], runs["dra"], strict=True)
    ratios = [with_dra["admission_p50_ms"] / alone["admission_p50_ms"] for alone, with_dra in pairs]
    out["p50_ratio_median"] = round(statistics.median(ratios), 3)
    out["p50_ratio_runs"] = [round(r, 3) for r in ratios]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
