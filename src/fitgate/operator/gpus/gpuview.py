"""One view of each node's GPUs from node labels, ResourceSlices, running pods and allocated claims.

Pure. A node known both by GPU Feature Discovery labels and by ResourceSlices is one node in one pool:
its NVIDIA GPUs are counted from the slices (device by device, the source the scheduler allocates
from), its labels, taints and cordon come from the Node. ``used`` is what running pods hold (per
extended resource) for label-counted GPUs, and what ResourceClaims have allocated for DRA devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from fitgate.operator.gpus.cel import SelectorUnsupportedError
from fitgate.operator.gpus.dra import NVIDIA_DRIVER, ClaimError, Device, DraState, device_gpu
from fitgate.operator.gpus.inventory import GpuPool, Inventory, NodeGPUs, PodGpus
from fitgate.operator.gpus.placement import Taint, Toleration
from fitgate.operator.gpus.prospects import NodeTemplate
from fitgate.operator.gpus.sharing import node_share
from fitgate.sizing.memo import Miss


@dataclass(frozen=True)
class NodeMeta:
    """What a node's scheduling needs besides its GPUs."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


def pod_usage(pods: Iterable[PodGpus]) -> dict[str, dict[str, int]]:
    """GPUs held per node and extended resource."""
    out: dict[str, dict[str, int]] = {}
    for pod in pods:
        per = out.setdefault(pod.node, {})
        for resource, n in pod.resources:
            per[resource] = per.get(resource, 0) + n
    return out


def dra_node_gpus(
    node: str, devices: Iterable[Device], meta: NodeMeta | None, dra: DraState, source: str = "dra"
) -> list[NodeGPUs]:
    """A node's NVIDIA DRA devices grouped by product (count, allocated ones as ``used``)."""
    counts: dict[str, list[Any]] = {}  # key -> [product, gpu, profile, notes, count, used]
    for device in devices:
        if device.driver != NVIDIA_DRIVER:
            continue
        got = device_gpu(device)
        if got is None:
            continue
        product, gpu, profile, notes = got
        key = f"{product}/{gpu.memory_bytes}"
        entry = counts.get(key)
        if entry is None:
            entry = counts[key] = [product, gpu, profile, notes, 0, 0]
        entry[4] += 1
        if dra.allocated and dra.is_allocated(device):
            entry[5] += 1
    if not counts:
        return []
    labels = dict(meta.labels) if meta else {}
    share = node_share(labels)
    return [
        NodeGPUs(
            node,
            labels,
            product,
            gpu,
            count,
            "nvidia",
            profile,
            notes,
            source=source,
            taints=meta.taints if meta else (),
            unschedulable=meta.unschedulable if meta else False,
            share=share,
            used=used,
        )
        for product, gpu, profile, notes, count, used in counts.values()
    ]


#: Per node: (its devices, the devices of it claims hold, its meta, labelled too, its DRA GPUs); a pod event
#: then rebuilds the inventory without grouping 40,000 devices again.
DraCache = dict[str, tuple[tuple[Device, ...], frozenset[str], "NodeMeta | None", bool, list[NodeGPUs]]]


def merge(
    label_gpus: Mapping[str, list[NodeGPUs]],
    metas: Mapping[str, NodeMeta],
    dra: DraState,
    used: Mapping[str, Mapping[str, int]],
    cache: DraCache | None = None,
) -> list[NodeGPUs]:
    """Every node's GPUs, once: DRA devices replace the same node's label-counted NVIDIA GPUs."""
    out: list[NodeGPUs] = []
    held = dra.allocated_by_pool() if dra.allocated else {}
    for node in sorted(set(label_gpus) | set(dra.devices)):
        from_labels = label_gpus.get(node, [])
        devices = dra.devices.get(node, ())
        from_slices: list[NodeGPUs] = []
        if devices:
            both = any(g.vendor == "nvidia" for g in from_labels)
            meta = metas.get(node)
            pools = {d.pool for d in devices}  # the NVIDIA driver names its pool after the node; others may not
            mine = frozenset().union(*(held.get(p, ()) for p in pools)) if held else frozenset()
            hit = cache.get(node) if cache is not None else None
            if hit is not None and hit[0] is devices and hit[1] == mine and hit[2] == meta and hit[3] == both:
                from_slices = hit[4]
            else:
                from_slices = dra_node_gpus(node, devices, meta, dra, "labels+dra" if both else "dra")
                if cache is not None:
                    cache[node] = (devices, mine, meta, both, from_slices)
        if from_slices:
            out.extend(from_slices)
            from_labels = [g for g in from_labels if g.vendor != "nvidia"]
        per = used.get(node, {})
        out.extend(replace(g, used=min(g.count, per.get(g.resource, 0))) if per else g for g in from_labels)
    if cache is not None and len(cache) > len(dra.devices) * 2 + 64:
        for gone in set(cache) - set(dra.devices):
            del cache[gone]
    return out


def build_inventory(
    label_gpus: Mapping[str, list[NodeGPUs]],
    metas: Mapping[str, NodeMeta],
    dra: DraState | None = None,
    pods: Mapping[tuple[str, str], PodGpus] | None = None,
    cache: DraCache | None = None,
    templates: Iterable[NodeTemplate] = (),
) -> Inventory:
    """The inventory admission and reconcile read (``templates``: the nodes autoscalers may add)."""
    state = dra or DraState()
    pod_map = pods or {}
    return Inventory(merge(label_gpus, metas, state, pod_usage(pod_map.values()), cache), state, pod_map, templates)


def select_claim(
    inventory: Inventory,
    namespace: str,
    template: str,
    gpu_product: str | None,
    node_selector: Mapping[str, str],
    tolerations: tuple[Toleration, ...],
) -> tuple[list[GpuPool], str, int]:
    """Pools of the devices a ResourceClaimTemplate's GPU request may get, their fingerprint and the count asked.

    Raises :class:`ClaimError` or :class:`SelectorUnsupportedError` (an Unknown verdict naming why).
    """
    key = (namespace, template, (gpu_product or "", tuple(sorted(node_selector.items())), tolerations))
    hit = inventory.claim_cache.get(key)
    if isinstance(hit, Miss):
        try:
            hit = _select_claim(inventory, namespace, template, gpu_product, node_selector, tolerations)
        except (ClaimError, SelectorUnsupportedError) as exc:
            hit = exc
        inventory.claim_cache.put(key, hit)
    if isinstance(hit, Exception):
        raise hit.with_traceback(None)  # the same answer for the same snapshot, without piling up tracebacks
    return cast(tuple[list[GpuPool], str, int], hit)


def _select_claim(
    inventory: Inventory,
    namespace: str,
    template: str,
    gpu_product: str | None,
    node_selector: Mapping[str, str],
    tolerations: tuple[Toleration, ...],
) -> tuple[list[GpuPool], str, int]:
    dra = inventory.dra
    request, matching = dra.first_available(dra.gpu_request(namespace, template))
    if not matching:
        return [], "", request.count
    by_node: dict[str, list[NodeGPUs]] = {}
    for g in inventory.gpus:
        if g.node in matching and "dra" in g.source:
            by_node.setdefault(g.node, []).append(g)
    gpus: list[NodeGPUs] = []
    for node, devs in matching.items():
        merged = by_node.get(node, [])
        if merged and len(devs) == len(dra.devices.get(node, ())):
            gpus.extend(merged)  # every device of the node passes: its merged GPUs, not grouped again
            continue
        first = merged[0] if merged else None
        meta = NodeMeta(first.labels, first.taints, first.unschedulable) if first else None
        gpus.extend(dra_node_gpus(node, devs, meta, dra, first.source if first else "dra"))
    sub = Inventory(gpus, dra, inventory.pods)
    pools, fingerprint = sub.select(gpu_product, node_selector, tolerations)
    # allocationMode: All gives the pod every matching device of its node: the most any node has
    return pools, fingerprint, max(len(d) for d in matching.values()) if request.all_devices else request.count


__all__ = ["ClaimError", "NodeMeta", "SelectorUnsupportedError", "build_inventory", "merge", "select_claim"]
