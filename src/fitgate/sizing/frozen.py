"""A frozen dataclass with some fields changed, without ``dataclasses.replace``'s cost (issue 23).

``dataclasses.replace`` builds the new object through ``__init__`` with every field passed again by keyword
(``ServingConfig`` has 40 of them): 5-8 µs each, and the suggestion search and plans made a few dozen per
misfit (a quarter of its evaluation). :func:`evolve` copies the instance's ``__dict__`` and sets the changed
fields: the same object for the plain frozen dataclasses it is used on (no ``__post_init__``, no ``init=False``
field, no ``__slots__``, no ``cached_property`` whose value the copied ``__dict__`` would carry over stale),
which :func:`evolve` checks once per class.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

T = TypeVar("T")

_PLAIN: dict[type, frozenset[str]] = {}


def _fields_of(cls: type) -> frozenset[str]:
    names = _PLAIN.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        cached = any(isinstance(v, functools.cached_property) for k in cls.__mro__ for v in vars(k).values())
        if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or cached or not all(f.init for f in fields):
            raise TypeError(f"evolve: {cls.__name__} is not a plain dataclass (use dataclasses.replace)")
        names = _PLAIN[cls] = frozenset(f.name for f in fields)
    return names


def evolve(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for a plain frozen dataclass instance."""
    cls = type(obj)
    if not changes.keys() <= _fields_of(cls):
        raise TypeError(f"evolve: {cls.__name__} has no field {sorted(changes.keys() - _fields_of(cls))[0]!r}")
    new = object.__new__(cls)
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new
