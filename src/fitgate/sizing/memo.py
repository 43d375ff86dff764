"""The bounded memos of fitgate: :class:`IdentityMemo` (by owners' identity) and :class:`BoundedMemo` (by key).

:class:`BoundedMemo` is keyed by a hashable value, least recently used out first. :class:`IdentityMemo`:
plans re-plan the same model under many settings (suggestions, alternatives, recommend); what depends
only on the model and a few of them is computed once. Hashing a whole model costs more than the
arithmetic it would save, so the model's objects enter the key by ``id`` and are kept in the entry:
an ``id`` is never reused while its entry lives, and a hit checks them by identity. Oldest first out;
a lock because the operator evaluates on worker threads.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """At most ``size`` values, each keyed by its owners' identity and hashable settings."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: dict[tuple[Hashable, ...], tuple[tuple[object, ...], V]] = {}
        self._lock = threading.Lock()

    def get(self, owners: tuple[object, ...], settings: tuple[Hashable, ...], compute: Callable[[], V]) -> V:
        """The value for ``owners`` and ``settings``, computed once (unhashable settings: every time)."""
        key = (*map(id, owners), *settings)
        try:
            with self._lock:
                hit = self._entries.get(key)
        except TypeError:  # an unhashable setting
            return compute()
        if hit is not None and _same(hit[0], owners):
            return hit[1]
        value = compute()
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (owners, value)
        return value

    def peek(self, owners: tuple[object, ...], settings: tuple[Hashable, ...]) -> V | None:
        """The value for ``owners`` and ``settings`` if it is held (None when absent or unhashable)."""
        key = (*map(id, owners), *settings)
        try:
            with self._lock:
                hit = self._entries.get(key)
        except TypeError:  # an unhashable setting
            return None
        if hit is not None and _same(hit[0], owners):
            return hit[1]
        return None

    def put(self, owners: tuple[object, ...], settings: tuple[Hashable, ...], value: V) -> None:
        """Remember ``value`` for ``owners`` and ``settings``, replacing what was there (unhashable: nothing)."""
        key = (*map(id, owners), *settings)
        try:
            with self._lock:
                self._entries.pop(key, None)
                if len(self._entries) >= self.size:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[key] = (owners, value)
        except TypeError:  # an unhashable setting
            return

    def __len__(self) -> int:
        return len(self._entries)


def _same(held: tuple[object, ...], owners: tuple[object, ...]) -> bool:
    """Whether an entry's owners are ``owners``, object for object (in C: every plan looks some up)."""
    return len(held) == len(owners) and all(map(operator.is_, held, owners))


K = TypeVar("K", bound=Hashable)


class Miss:
    """What :meth:`BoundedMemo.get` returns for a key it does not hold (a value may itself be None)."""

    __slots__ = ()


MISS = Miss()


class BoundedMemo(Generic[K, V]):
    """At most ``size`` values by a hashable key, the least recently used out first.

    The one bounded cache of the operator, the workload reader's callers and the checkpoint code: each
    user names its bound where it makes one (a comment says why that many). Thread-safe (the operator
    reads and fills some from worker threads); ``get`` counts as a use.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size: {size} is not allowed; expected at least 1")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | Miss:
        """The value for ``key``, or :data:`MISS`."""
        with self._lock:  # two hashes of the key, not three (a tuple key is hashed anew each time)
            value = self._entries.get(key, MISS)
            if value is not MISS:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` for ``key``, dropping the least recently used entry when full."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The value for ``key``, computed (outside the lock) and remembered when absent."""
        hit = self.get(key)
        if not isinstance(hit, Miss):
            return hit
        value = compute()
        self.put(key, value)
        return value

    def pop(self, key: K) -> None:
        """Forget ``key`` (absent: nothing happens)."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
