"""The operator's state, one typed object: built by the start-up handler, read by every handler.

kopf hands each handler a ``memo`` (a shallow copy per object of the one given to ``kopf.run``). fitgate
keeps exactly one thing in it, an :class:`OperatorMemo` under :data:`KEY`, put there by
:meth:`OperatorMemo.attach` (``operator_startup``) and read back by :meth:`OperatorMemo.of`: nowhere else
reads or writes kopf's memo, so mypy sees every field every handler uses (kopf's own ``Memo`` is typed
``Any`` per key; kopf docs "Operator memo", ``kopf/_cogs/structs/ephemera.py``). Shallow copies share the
one object, so what start-up started (the node watch, the metrics server) is the same for every handler.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.gpus.inventory import Inventory
from fitgate.operator.observation.observe import Observer
from fitgate.operator.runtime.configmaps import ConfigMaps
from fitgate.operator.watches.nodewatch import NodeWatch
from fitgate.settings import OperatorConfig, Settings

#: The one key of kopf's memo fitgate uses.
KEY = "fitgate"


class MemoMissingError(RuntimeError):
    """A handler ran without the state the start-up handler builds (it failed, or was not registered)."""


class EventLedger:
    """The last Event each object got, so that two handlers deciding the same change at once post it once.

    At creation kopf's create handler and the resync timer's first round (its pools differ from the empty status's)
    both reconcile before either's status patch lands; both see no previous verdict and decide the same Event, 23 ms
    apart (note38). Both run on the one event loop, so the check and the record cannot interleave. Bounded: the
    oldest objects are forgotten past :data:`MAX_OBJECTS` (a forgotten object's next Event is posted again).
    """

    MAX_OBJECTS = 10_000

    def __init__(self) -> None:
        self._last: OrderedDict[str, tuple[int, tuple[str, str, str]]] = OrderedDict()

    def first(self, uid: str, generation: int, event: tuple[str, str, str]) -> bool:
        """Whether ``event`` differs from the last one posted for this object and generation (and record it)."""
        if self._last.get(uid) == (generation, event):
            return False
        self._last[uid] = (generation, event)
        self._last.move_to_end(uid)
        while len(self._last) > self.MAX_OBJECTS:
            self._last.popitem(last=False)
        return True


@dataclass(frozen=True)
class OperatorMemo:
    """What the handlers share: the settings and the long-lived objects start-up made.

    Attributes:
        settings: Every setting, flags applied (``fitgate operator``'s flags win over ``FITGATE_*``).
        metrics: The Prometheus metrics and their server.
        store: Checkpoint facts, resolved off the event loop.
        observer: The serving pods' reader (``spec.observe``).
        nodewatch: This replica's own node, DRA and GPU-pod watch: the inventory every decision uses.
        configmaps: The workload webhook's ConfigMap reader (None: ``--config`` files are not read).
        arm_shutdown: Arms the bounded exit (:mod:`fitgate.operator.runtime.shutdown`); None in tests.
        tasks: Background tasks start-up began (the workload audit); cleanup cancels them.
        events: The last Event each object got (:class:`EventLedger`): one decision, one Event.
    """

    settings: Settings
    metrics: Metrics
    store: FactsStore
    observer: Observer
    nodewatch: NodeWatch
    configmaps: ConfigMaps | None = None
    arm_shutdown: Callable[[], None] | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    events: EventLedger = field(default_factory=EventLedger)

    @property
    def config(self) -> OperatorConfig:
        """The operator's part of :attr:`settings`."""
        return self.settings.operator

    def inventory(self) -> Inventory:
        """The GPU inventory admission and reconcile use: this replica's own node watch.

        It is kept current on standby replicas too (kopf peering pauses their kopf watches). Empty until it
        has listed the nodes; the replica is not ready (not behind the webhook Service) before that.
        """
        return self.nodewatch.inventory()

    def attach(self, memo: MutableMapping[str, Any]) -> None:
        """Put this state in kopf's operator-level memo (``operator_startup`` only)."""
        memo[KEY] = self

    @staticmethod
    def find(memo: object) -> OperatorMemo | None:
        """The state in kopf's ``memo``, or None before start-up built it (cleanup after a failed start-up)."""
        state = memo.get(KEY) if isinstance(memo, MutableMapping) else None
        return state if isinstance(state, OperatorMemo) else None

    @staticmethod
    def of(memo: object) -> OperatorMemo:
        """The state in kopf's ``memo``; a handler never runs before start-up, so its absence is a bug."""
        state = OperatorMemo.find(memo)
        if state is None:
            raise MemoMissingError("fitgate's operator state is not in kopf's memo: operator_startup did not run")
        return state
