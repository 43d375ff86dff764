"""List+watch of the other inventory sources, on every replica, like the node watch.

* ResourceSlices, DeviceClasses, ResourceClaimTemplates and ResourceClaims (``resource.k8s.io/v1``):
  the GPUs DRA drivers publish, the selectors of their classes, the requests of the claim templates
  ModelDeployments name, and the devices claims already hold.
* Pods: only bound, non-terminal pods that ask for GPUs are kept, and of those only the node, the GPU
  counts and the labels (:class:`fitgate.operator.gpus.inventory.PodGpus`), never the pod object.

Each kind has its own thread (:class:`fitgate.operator.watches.listwatch.ListWatch`). A cluster that does not serve
``resource.k8s.io/v1`` (404), or RBAC that does not grant it (403), is logged once and the watch counts as
synced and empty (the operator works as with node labels alone, and its replica still becomes ready); it
looks again every ``relist_s``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from fitgate.operator.base import kubeconfig
from fitgate.operator.gpus.dra import (
    ClaimError,
    Device,
    DeviceRequest,
    DraState,
    allocated_devices,
    claim_requests,
    class_selectors,
    slice_devices,
)
from fitgate.operator.gpus.inventory import PodGpus
from fitgate.operator.gpus.placement import gpu_resources, holds_gpus
from fitgate.operator.gpus.prospects import NodeTemplate, parse_machine_group, parse_nodeclaim, parse_nodepool
from fitgate.operator.watches.listwatch import ListWatch

logger = logging.getLogger("fitgate.resourcewatch")

DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"
#: (plural, namespaced) of each DRA kind the operator reads.
DRA_KINDS = (
    ("resourceslices", False),
    ("deviceclasses", False),
    ("resourceclaimtemplates", True),
    ("resourceclaims", True),
)
#: The autoscaler templates (nodes that may join: operator/gpus/prospects.py), (group, version, plural); each optional
#: like the DRA kinds. Cluster API serves v1beta2 since 1.11 and v1beta1 before: both are read, one object once.
TEMPLATE_KINDS = (
    ("karpenter.sh", "v1", "nodepools"),
    ("karpenter.sh", "v1", "nodeclaims"),
    ("cluster.x-k8s.io", "v1beta2", "machinedeployments"),
    ("cluster.x-k8s.io", "v1beta1", "machinedeployments"),
)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def parse_slice(obj: Mapping[str, Any]) -> tuple[Device, ...] | None:
    """A ResourceSlice's devices (None: none to keep)."""
    return tuple(slice_devices(obj)) or None


def parse_class(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """A DeviceClass's selectors."""
    return class_selectors(obj)


def parse_template(obj: Mapping[str, Any]) -> tuple[DeviceRequest, ...] | str:
    """A claim template's requests, or why they cannot be read."""
    try:
        return claim_requests(obj)
    except ClaimError as exc:
        return str(exc)


def parse_claim(obj: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...] | None:
    """The devices a ResourceClaim's allocation holds (None: not allocated)."""
    return tuple(allocated_devices(obj)) or None


def parse_pod(obj: Mapping[str, Any]) -> PodGpus | None:
    """A bound, non-terminal pod's GPUs (None: it holds none)."""
    if not holds_gpus(obj):
        return None
    resources = gpu_resources(obj)
    if not resources:
        return None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return PodGpus(
        str(obj["spec"]["nodeName"]),
        tuple(sorted(resources.items())),
        tuple(sorted((str(k), str(v)) for k, v in list(labels.items())[:64])),
    )


class ResourceWatch(ListWatch):
    """Key -> parsed value for one kind, kept current by a list+watch thread (:mod:`~.listwatch`).

    A kind the cluster does not serve (404) or RBAC does not grant (403) is synced and empty, and looked
    for again every ``relist_s``: the operator works from node labels as before.
    """

    def __init__(
        self,
        name: str,
        lister: Callable[[Any], Callable[..., Any]],
        parse: Callable[[Mapping[str, Any]], Any],
        api_factory: Callable[[], Any],
        relist_s: float = 300.0,
        page_size: int = 500,
        list_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, api_factory, relist_s, page_size, list_kwargs)
        self._list_call = lister
        self._parse = parse
        self._lock = threading.Lock()
        self.items: dict[str, Any] = {}
        self.version = 0
        self.synced = threading.Event()
        self.served = True

    def snapshot(self) -> dict[str, Any]:
        """A copy of the current items."""
        with self._lock:
            return dict(self.items)

    def replace(self, items: Mapping[str, Any]) -> None:
        """Set every item (from a complete LIST)."""
        fresh = {k: v for k, v in items.items() if v is not None}
        with self._lock:
            if fresh != self.items:
                self.items = fresh
                self.version += 1
        self.synced.set()

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """Apply one watch event."""
        key = _key(obj)
        value = None if event_type == "DELETED" else self._parse(obj)
        with self._lock:
            if value is None:
                if self.items.pop(key, None) is None:
                    return
            elif self.items.get(key) == value:
                return
            else:
                self.items[key] = value
            self.version += 1

    def _lister(self, api: Any) -> Callable[..., Any]:
        return self._list_call(api)

    def _keep(self, obj: Mapping[str, Any]) -> tuple[str, Any]:
        return _key(obj), self._parse(obj)

    def _replace_all(self, kept: dict[str, Any]) -> None:
        self.replace(kept)

    def _listed(self) -> None:
        self.served = True

    def _not_served(self, exc: Exception) -> bool:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - only the operator needs the client

        if not isinstance(exc, ApiException) or exc.status not in (403, 404):
            return False
        if self.served:
            why = "not served by this cluster" if exc.status == 404 else "not granted to fitgate (RBAC)"
            logger.info("%s: %s (%s); fitgate reads GPUs from node labels", self.name, why, exc.reason)
        self.served = False
        self.replace({})
        self._stop.wait(self.relist_s)
        return True


class Sources:
    """The DRA and pod watches, read together into a :class:`DraState` and a pod map."""

    def __init__(
        self,
        custom_factory: Callable[[], Any] | None = None,
        core_factory: Callable[[], Any] | None = None,
        relist_s: float = 300.0,
    ) -> None:
        custom = custom_factory or kubeconfig.custom_objects
        core = core_factory or kubeconfig.core_v1

        def lister(plural: str) -> Callable[[Any], Callable[..., Any]]:
            def of(api: Any) -> Callable[..., Any]:
                def call(**kwargs: Any) -> Any:
                    return api.list_cluster_custom_object(DRA_GROUP, DRA_VERSION, plural, **kwargs)

                return call

            return of

        parsers: dict[str, Callable[[Mapping[str, Any]], Any]] = {
            "resourceslices": parse_slice,
            "deviceclasses": parse_class,
            "resourceclaimtemplates": parse_template,
            "resourceclaims": parse_claim,
        }
        self.dra = {
            plural: ResourceWatch(plural, lister(plural), parsers[plural], custom, relist_s) for plural, _ in DRA_KINDS
        }
        self.pods = ResourceWatch(
            "pods",
            lambda api: api.list_pod_for_all_namespaces,
            parse_pod,
            core,
            relist_s,
            # bound and not finished: the API server filters, the operator never sees other pods
            list_kwargs={"field_selector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"},
        )
        self._state: tuple[int, DraState] | None = None

        def template_lister(group: str, version: str, plural: str) -> Callable[[Any], Callable[..., Any]]:
            def of(api: Any) -> Callable[..., Any]:
                def call(**kwargs: Any) -> Any:
                    return api.list_cluster_custom_object(group, version, plural, **kwargs)

                return call

            return of

        parse_template_of = {
            "nodepools": parse_nodepool,
            "nodeclaims": parse_nodeclaim,
            "machinedeployments": parse_machine_group,
        }
        #: Karpenter NodePools and cluster-autoscaler node groups (operator/gpus/prospects.py)
        self.templates = [
            ResourceWatch(
                f"{plural}.{group}/{version}",
                template_lister(group, version, plural),
                parse_template_of[plural],
                custom,
                relist_s,
            )
            for group, version, plural in TEMPLATE_KINDS
        ]

    @property
    def watches(self) -> list[ResourceWatch]:
        """Every watch."""
        return [*self.dra.values(), self.pods, *self.templates]

    def node_templates(self) -> tuple[NodeTemplate, ...]:
        """The autoscaler templates, one per object (Cluster API's two versions of one object are one)."""
        merged: dict[tuple[str, str], NodeTemplate] = {}
        for watch in self.templates:
            for key, template in watch.snapshot().items():
                merged.setdefault((template.kind, key), template)
        return tuple(merged[k] for k in sorted(merged))

    @property
    def version(self) -> int:
        """Changes with any watch's items."""
        return sum(w.version for w in self.watches)

    @property
    def synced(self) -> bool:
        """Every watch has listed once (or found its API not served)."""
        return all(w.synced.is_set() for w in self.watches)

    def start(self) -> None:
        """Start every watch."""
        for w in self.watches:
            w.start()

    def stop(self) -> None:
        """Stop every watch."""
        for w in self.watches:
            w.stop()

    def state(self) -> DraState:
        """The DRA objects as one :class:`DraState`."""
        version = sum(w.version for w in self.dra.values())
        if self._state is not None and self._state[0] == version:
            return self._state[1]
        devices: dict[str, tuple[Device, ...]] = {}
        for devs in self.dra["resourceslices"].snapshot().values():
            for d in devs:
                devices[d.node] = (*devices.get(d.node, ()), d)
        allocated = frozenset(a for held in self.dra["resourceclaims"].snapshot().values() for a in held)
        classes = {k.split("/", 1)[1]: v for k, v in self.dra["deviceclasses"].snapshot().items()}
        templates = {
            (k.split("/", 1)[0], k.split("/", 1)[1]): v
            for k, v in self.dra["resourceclaimtemplates"].snapshot().items()
        }
        state = DraState(devices, allocated, classes, templates)
        self._state = (version, state)
        return state

    def pod_map(self) -> dict[tuple[str, str], PodGpus]:
        """GPU pods by (namespace, name)."""
        return {(k.split("/", 1)[0], k.split("/", 1)[1]): v for k, v in self.pods.snapshot().items()}
