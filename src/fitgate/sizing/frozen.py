"""A frozen dataclass built or with some fields changed, without the generated ``__init__``'s cost (issue 23).

``dataclasses.replace`` builds the new object through ``__init__`` with every field passed again by keyword
(``ServingConfig`` has 40 of them): 5-8 µs each, and the suggestion search and plans made a few dozen per
misfit (a quarter of its evaluation). :func:`evolve` copies the instance's ``__dict__`` and sets the changed
fields: the same object for the plain frozen dataclasses it is used on (no ``__post_init__``, no ``init=False``
field, no ``__slots__``, no ``cached_property`` whose value the copied ``__dict__`` would carry over stale),
which :func:`evolve` checks once per class. :func:`build` makes a new instance of such a class the same way:
``Plan``, whose frozen ``__init__`` sets its 14 fields one ``object.__setattr__`` at a time, is built once for
every candidate of a misfit's suggestion search.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

T = TypeVar("T")

_PLAIN: dict[type, frozenset[str]] = {}
#: Each plain class's field names in field order (:func:`build`).
_NAMES: dict[type, tuple[str, ...]] = {}


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
    return copied(obj, changes)


def copied(obj: T, changes: dict[str, Any]) -> T:
    """:func:`evolve` for a hot path that names its own type's fields: no keyword arguments, no check of the names.

    ``obj``'s class is checked once as :func:`evolve` checks it; a name that is not a field is the caller's bug.
    """
    cls = type(obj)
    if cls not in _PLAIN:
        _fields_of(cls)
    new = object.__new__(cls)
    values = new.__dict__
    values.update(obj.__dict__)
    values.update(changes)
    return new


def build(cls: type[T], **values: Any) -> T:
    """``cls(**values)`` for a plain frozen dataclass, fields by keyword; defaults filled as ``__init__`` fills them."""
    names = _NAMES.get(cls)
    if names is None:
        _fields_of(cls)
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if tuple(values) != names:  # not every field in field order: defaults filled, the order made ``__init__``'s
        values = _filled(cls, values)
    new = object.__new__(cls)
    new.__dict__.update(values)
    return new


def _filled(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    unknown = values.keys() - _fields_of(cls)
    if unknown:
        raise TypeError(f"build: {cls.__name__} has no field {sorted(unknown)[0]!r}")
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            out[f.name] = values[f.name]
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            raise TypeError(f"build: {cls.__name__} needs field {f.name!r}")
    return out
