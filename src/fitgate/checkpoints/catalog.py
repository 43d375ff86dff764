"""The built-in catalog: real ``config.json`` files and weight sizes of popular open models.

For air-gapped clusters and offline use. Each entry lives in ``catalog/<org>__<name>/`` with the
model's ``config.json``, ``weights.json`` (stored bytes and how they are known) and ``SOURCE.md``
(where every file came from).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from fitgate.checkpoints.facts import CheckpointError, ModelFacts

_ROOT = "catalog"


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog model."""

    repo_id: str
    directory: str
    total_size: int | None
    basis: str


def _dir() -> Traversable:
    return resources.files("fitgate.checkpoints").joinpath(_ROOT)


def _read_json(entry: Traversable, name: str) -> Any:
    return json.loads(entry.joinpath(name).read_text())


@lru_cache(maxsize=1)
def catalog_entries() -> tuple[CatalogEntry, ...]:
    """Every catalog entry, sorted by repo id."""
    out = []
    for entry in _dir().iterdir():
        if not entry.is_dir() or not entry.joinpath("config.json").is_file():
            continue
        weights = _read_json(entry, "weights.json")
        out.append(
            CatalogEntry(
                repo_id=str(weights["repo_id"]),
                directory=entry.name,
                total_size=weights.get("total_size"),
                basis=str(weights.get("basis", "")),
            )
        )
    return tuple(sorted(out, key=lambda e: e.repo_id.lower()))


def find_entry(repo_id: str) -> CatalogEntry | None:
    """The entry for a repo id (case-insensitive), or None."""
    wanted = repo_id.lower()
    return next((e for e in catalog_entries() if e.repo_id.lower() == wanted), None)


def load_catalog(repo_id: str, ref: str | None = None) -> ModelFacts:
    """Facts of a catalog model.

    Raises:
        CheckpointError: The repo id is not in the catalog.
    """
    entry = find_entry(repo_id)
    if entry is None:
        names = ", ".join(e.repo_id for e in catalog_entries())
        raise CheckpointError("model", repo_id, f"a local directory or a catalog model ({names})")
    folder = _dir().joinpath(entry.directory)
    weights = _read_json(folder, "weights.json")
    return ModelFacts(
        ref=ref or repo_id,
        name=entry.repo_id,
        config=_read_json(folder, "config.json"),
        total_size=weights.get("total_size"),
        dtype_counts=weights.get("dtype_counts"),
        source="catalog",
        revision=weights.get("revision"),
        origin=f"fitgate catalog ({entry.basis})",
    )
