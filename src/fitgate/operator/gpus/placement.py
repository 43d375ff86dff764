"""Where a deployment's pods can really go: cordons, taints and tolerations, GPUs already taken, replicas.

Pure functions. Toleration semantics are Kubernetes' (k8s.io/api core/v1 ``Toleration.ToleratesTaint``,
kubernetes/pkg/apis/core/v1/helper): an empty key with ``Exists`` tolerates every taint; an empty
effect matches every effect; ``Equal`` (the default operator) compares the values. Only ``NoSchedule``
and ``NoExecute`` taints keep a pod off a node (``PreferNoSchedule`` is a preference). A cordoned node
(``spec.unschedulable``) carries the ``node.kubernetes.io/unschedulable:NoSchedule`` taint and is left
out unless that taint is tolerated. The taints the node lifecycle controller sets from node conditions
(not-ready, unreachable, pressure) are ignored: see :data:`CONDITION_TAINTS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fitgate.workloads.quantity import whole_quantity

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
#: Taints the node lifecycle controller sets from node conditions (k8s.io/api core/v1 well_known_taints.go).
#: They come and go with a node's health (a reboot, a kubelet restart): a verdict that followed them would deny
#: and admit the same deployment minutes apart, so they do not take a node out of the candidates.
CONDITION_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
    }
)
_BLOCKING = ("NoSchedule", "NoExecute")
#: Taints read from one node at most.
MAX_TAINTS = 64


@dataclass(frozen=True)
class Taint:
    """A node taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if not self.key:  # an empty key is only valid with Exists
            return False
        return self.value == taint.value


def node_taints(node: Mapping[str, Any]) -> tuple[tuple[Taint, ...], bool]:
    """A Node's taints and whether it is cordoned (``spec.unschedulable``)."""
    spec = node.get("spec") or {}
    taints = []
    for raw in (spec.get("taints") or [])[:MAX_TAINTS]:
        if isinstance(raw, Mapping) and raw.get("key"):
            taints.append(Taint(str(raw["key"]), str(raw.get("value") or ""), str(raw.get("effect") or "")))
    return tuple(taints), bool(spec.get("unschedulable"))


def blocking_taint(taints: Iterable[Taint], unschedulable: bool, tolerations: Sequence[Toleration]) -> str | None:
    """Why a pod with ``tolerations`` cannot be scheduled on the node (None: it can)."""
    every = list(taints)
    if unschedulable and not any(t.key == UNSCHEDULABLE_TAINT for t in every):
        every.append(Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule"))
    for taint in every:
        if taint.key in CONDITION_TAINTS:
            continue
        if taint.effect in _BLOCKING and not any(t.tolerates(taint) for t in tolerations):
            if taint.key == UNSCHEDULABLE_TAINT:
                return "cordoned"
            return f"taint {taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect} not tolerated"
    return None


def pod_gpu_requests(pod: Mapping[str, Any], resources: Iterable[str]) -> dict[str, int]:
    """GPUs a pod asks for, per extended resource: the containers' sum, or the largest init container's."""
    wanted = tuple(resources)
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, int]:
        res = container.get("resources") or {}
        amounts = {**(res.get("requests") or {}), **(res.get("limits") or {})}  # extended resources: limits win
        out = {}
        for name in wanted:
            n = whole_quantity(amounts.get(name, 0)) or 0  # a quantity: the API server writes 1000 as "1k"
            if n > 0:
                out[name] = n
        return out

    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


def is_gpu_resource(name: str) -> bool:
    """Extended resources that are whole GPUs or MIG devices."""
    return name in ("nvidia.com/gpu", "amd.com/gpu") or name.startswith("nvidia.com/mig-")


def gpu_resources(pod: Mapping[str, Any]) -> dict[str, int]:
    """Every GPU or MIG resource a pod asks for."""
    names: set[str] = set()
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = c.get("resources") or {} if isinstance(c, Mapping) else {}
        for part in ("requests", "limits"):
            names.update(k for k in (res.get(part) or {}) if is_gpu_resource(str(k)))
    return pod_gpu_requests(pod, sorted(names)) if names else {}


def holds_gpus(pod: Mapping[str, Any]) -> bool:
    """A pod bound to a node and not finished (Succeeded/Failed pods release their devices)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def replicas_placed(free_per_node: Iterable[int], gpus_per_replica: int, nodes_per_replica: int = 1) -> int:
    """How many replicas fit in the free GPUs: each takes ``gpus_per_replica`` GPUs on each of its nodes."""
    slots = sorted((f // gpus_per_replica for f in free_per_node if f >= gpus_per_replica), reverse=True)
    if nodes_per_replica <= 1:
        return sum(slots)
    # a multi-node replica takes one slot on each of nodes_per_replica distinct nodes
    placed = 0
    while len([s for s in slots if s > 0]) >= nodes_per_replica:
        slots.sort(reverse=True)
        for i in range(nodes_per_replica):
            slots[i] -= 1
        placed += 1
    return placed
