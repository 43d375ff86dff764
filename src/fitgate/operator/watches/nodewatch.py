"""A live view of the cluster's GPU nodes that every replica keeps, whatever kopf peering pauses.

It is the operator's one source of GPU nodes (there is no kopf node index). With kopf peering (the
chart runs 2 replicas), kopf pauses *all* of a standby replica's watches while a peer with a higher
priority is active, yet the webhook Service sends reviews to every replica: a kopf index would leave a
standby answering from an empty or stale inventory ("no node advertises GPUs": a misfit admitted with a
warning). Each replica therefore keeps its own list+watch of Nodes with the Kubernetes client, in a
thread, independent of peering; admission and reconcile read it, and :attr:`NodeWatch.changes` wakes
the deployments a node change may affect.

The list+watch loop is :class:`fitgate.operator.watches.listwatch.ListWatch`'s: re-listed every ``relist_s`` (and
after any error, with backoff), so a missed event heals by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fitgate.operator.base import kubeconfig
from fitgate.operator.gpus.gpuview import DraCache, NodeMeta, build_inventory
from fitgate.operator.gpus.inventory import Inventory, NodeGPUs, node_gpus
from fitgate.operator.gpus.placement import node_taints
from fitgate.operator.watches.listwatch import ListWatch

if TYPE_CHECKING:
    from fitgate.operator.watches.resourcewatch import Sources

logger = logging.getLogger("fitgate.nodewatch")

ApiFactory = Callable[[], Any]


class NodeWatch(ListWatch):
    """Node name -> its GPUs, kept current by a background list+watch; :meth:`inventory` reads it."""

    def __init__(
        self,
        api_factory: ApiFactory | None = None,
        relist_s: float = 300.0,
        page_size: int = 500,
        sources: Sources | None = None,
    ) -> None:
        super().__init__("node", api_factory or kubeconfig.core_v1, relist_s, page_size)
        #: The DRA and pod watches (:mod:`fitgate.operator.watches.resourcewatch`), merged into the inventory.
        self.sources = sources
        self._meta: dict[str, NodeMeta] = {}
        self._dra_cache: DraCache = {}
        self._lock = threading.Lock()
        self._gpus: dict[str, list[NodeGPUs]] = {}
        self._version = 0
        self._inventory: tuple[int, Inventory] | None = None
        self.synced = threading.Event()
        #: Wakes the ModelDeployments waiting for a change in the event loop (fed by :meth:`InventoryChanges.follow`).
        self.changes = InventoryChanges()
        #: Event-loop tasks that live as long as the watch (cancelled by :meth:`stop`).
        self.tasks: list[asyncio.Task[None]] = []

    # -- reading ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped by every change of the node set (and of the DRA and pod watches)."""
        return self._version + (self.sources.version if self.sources else 0)

    def inventory(self) -> Inventory:
        """The current inventory (rebuilt only after a change)."""
        with self._lock:
            version = self.version
            if self._inventory is None or self._inventory[0] != version:
                if self.sources is None:
                    inventory = Inventory(g for gpus in self._gpus.values() for g in gpus)
                else:
                    state = self.sources.state()
                    metas = {n: self._meta[n] for n in state.devices if n in self._meta}
                    inventory = build_inventory(
                        self._gpus, metas, state, self.sources.pod_map(), self._dra_cache, self.sources.node_templates()
                    )
                self._inventory = (version, inventory)
            return self._inventory[1]

    def _keep_meta(self, node: Mapping[str, Any]) -> NodeMeta:
        meta = node.get("metadata") or {}
        taints, cordoned = node_taints(node)
        return NodeMeta({str(k): str(v) for k, v in (meta.get("labels") or {}).items()}, taints, cordoned)

    # -- writing ---------------------------------------------------------------------------

    def replace(self, gpus: Mapping[str, list[NodeGPUs]]) -> None:
        """Set the whole node set (from a complete LIST)."""
        fresh = {k: v for k, v in gpus.items() if v}
        with self._lock:
            if fresh != self._gpus or not self.synced.is_set():
                self._gpus = fresh
                self._version += 1
        self.synced.set()

    def _lister(self, api: Any) -> Callable[..., Any]:
        return api.list_node  # type: ignore[no-any-return]

    def _keep(self, node: Mapping[str, Any]) -> tuple[str, Any]:
        # a node without GPU labels may have DRA devices: its labels and taints are kept with sources
        meta = self._keep_meta(node) if self.sources is not None else None
        return str(node["metadata"]["name"]), (node_gpus(node, logger), meta)

    def _replace_all(self, kept: dict[str, Any]) -> None:
        metas = {name: meta for name, (_, meta) in kept.items() if meta is not None}
        with self._lock:
            if metas != self._meta:
                self._meta = metas
                self._version += 1
        self.replace({name: gpus for name, (gpus, _) in kept.items()})

    def apply(self, event_type: str, node: Mapping[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED, DELETED)."""
        name = str(node["metadata"]["name"])
        gpus = [] if event_type == "DELETED" else node_gpus(node, logger)
        if self.sources is not None:
            meta = None if event_type == "DELETED" else self._keep_meta(node)
            with self._lock:
                if self._meta.get(name) != meta:
                    if meta is None:
                        self._meta.pop(name, None)
                    else:
                        self._meta[name] = meta
                    self._version += 1
        with self._lock:
            if gpus:
                if self._gpus.get(name) == gpus:
                    return
                self._gpus[name] = gpus
            elif self._gpus.pop(name, None) is None:
                return
            self._version += 1

    # -- the thread (ListWatch's) ----------------------------------------------------------

    def start(self) -> None:
        """Start listing and watching nodes, and the DRA and pod watches, each in a daemon thread."""
        super().start()
        if self.sources is not None:
            self.sources.start()

    def stop(self) -> None:
        """Ask the threads to stop and cancel :attr:`tasks`."""
        super().stop()
        if self.sources is not None:
            self.sources.stop()
        for task in self.tasks:
            task.cancel()


class InventoryChanges:
    """Wakes the ModelDeployments waiting in the event loop when this replica's GPU inventory changes.

    One poller task (:meth:`follow`) reads the node watch's version; every deployment's resync waits
    on one condition instead of polling by itself.
    """

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self.version = 0

    async def wait(self, seen: int, timeout_s: float) -> int:
        """The inventory version once it differs from ``seen``, or ``seen`` after ``timeout_s``.

        ``asyncio.timeout`` waits in this task: ``asyncio.wait_for`` ran the condition's wait as a task of its own,
        which on Python 3.11 could outlive a cancellation of this one (CI, 2026-12-05: an operator's exit held
        20 s by resync waits kopf cancelled every second, still in ``Condition.wait_for``).
        """
        async with self._cond:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._cond.wait_for(lambda: self.version != seen)
            return self.version

    async def changed(self, version: int) -> None:
        """Record a new version and wake every waiter."""
        async with self._cond:
            self.version = version
            self._cond.notify_all()

    async def follow(self, nodewatch: NodeWatch, period_s: float = 0.2) -> None:
        """Forward the node watch's changes (it runs in a thread) to the event loop, until cancelled."""
        while True:
            if nodewatch.version != self.version:
                await self.changed(nodewatch.version)
            await asyncio.sleep(period_s)
