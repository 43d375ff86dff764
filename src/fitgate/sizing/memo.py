"""A bounded memo keyed by settings and by the identity of the objects a value was computed from.

Plans re-plan the same model under many settings (suggestions, alternatives, recommend); what depends
only on the model and a few of them is computed once. Hashing a whole model costs more than the
arithmetic it would save, so the model's objects enter the key by ``id`` and are kept in the entry:
an ``id`` is never reused while its entry lives, and a hit checks them by identity. Oldest first out;
a lock because the operator evaluates on worker threads.
"""

from __future__ import annotations

import threading
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
        key = (*(id(o) for o in owners), *settings)
        try:
            with self._lock:
                hit = self._entries.get(key)
        except TypeError:  # an unhashable setting
            return compute()
        if hit is not None and all(a is b for a, b in zip(hit[0], owners, strict=True)):
            return hit[1]
        value = compute()
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (owners, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
