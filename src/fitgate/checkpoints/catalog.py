"""The model catalog: real ``config.json`` files and weight sizes, for air-gapped clusters and offline use.

Each entry is a folder ``<org>__<name>/`` with the model's ``config.json``, ``weights.json`` (stored
bytes, how they are known, and optionally the tensors of the safetensors headers added up per layer and
role: ``tensor_totals``, or the older per-tensor ``tensors`` rows, added up when read) and
``SOURCE.md`` (where every file came from).

Two kinds of catalog are searched, in this order:

* user catalogs: the directories named in ``FITGATE_CATALOG_PATH`` (``os.pathsep``-separated), filled
  with ``fitgate catalog add`` on a machine that can read the checkpoint (a Hub connection or the
  model's directory); an entry there takes precedence over a built-in entry of the same repo id;
* the built-in catalog shipped in this package.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from fitgate.checkpoints.facts import CheckpointError, ModelFacts, TensorTotals, st_max_seq_length, with_hf_quant_config
from fitgate.checkpoints.local import read_json
from fitgate.checkpoints.safetensors import TotalsBuilder
from fitgate.settings import load
from fitgate.sizing.memo import BoundedMemo

_ROOT = "catalog"
#: Environment variable naming user catalog directories.
CATALOG_PATH_ENV = "FITGATE_CATALOG_PATH"
BUILT_IN = "built-in"
_MAX_CONFIG_BYTES = 8 << 20  # as checkpoints.local.MAX_CONFIG_BYTES
_MAX_WEIGHTS_BYTES = 64 << 20


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog model; ``location`` is ``built-in`` or the user catalog directory it is in.

    An entry is a folder ``<org>__<name>/`` with ``config.json`` and ``weights.json``, or (``flat``, the
    layout a ConfigMap mount gives) the files ``<org>__<name>.config.json`` and ``<org>__<name>.weights.json``.
    """

    repo_id: str
    directory: str
    total_size: int | None
    basis: str
    location: str = BUILT_IN
    flat: bool = False  # <directory>.config.json / <directory>.weights.json beside each other (a ConfigMap)


def _builtin_dir() -> Traversable:
    return resources.files("fitgate.checkpoints").joinpath(_ROOT)


def user_catalog_dirs() -> tuple[str, ...]:
    """The user catalog directories named in ``FITGATE_CATALOG_PATH``, in order."""
    return load().catalog_path


def _weights(path: Traversable) -> dict[str, Any]:
    weights = read_json(path, _MAX_WEIGHTS_BYTES)
    where = str(path)
    if not isinstance(weights, dict) or not isinstance(weights.get("repo_id"), str):
        raise CheckpointError(where, weights if not isinstance(weights, dict) else None, "an object with repo_id")
    total = weights.get("total_size")
    if total is not None and (not isinstance(total, int) or isinstance(total, bool) or total <= 0):
        raise CheckpointError(f"{where}:total_size", total, "a positive number of bytes or null")
    return weights


def _tensors(weights: dict[str, Any], where: str) -> TensorTotals | None:
    """The entry's tensors: ``tensor_totals`` (what ``catalog add`` writes) or ``tensors`` rows, added up."""
    if weights.get("tensor_totals") is not None:
        return TensorTotals.from_json(weights["tensor_totals"], f"{where}:tensor_totals")
    rows = weights.get("tensors")
    if rows is None:
        return None
    builder = TotalsBuilder(where)
    if isinstance(rows, list):
        for row in rows:
            if (
                isinstance(row, list)
                and len(row) == 3
                and isinstance(row[0], str)
                and isinstance(row[1], str)
                and isinstance(row[2], list)
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in row[2])
            ):
                builder.add(f"{where}:tensors", row[0], row[1], row[2])
                continue
            raise CheckpointError(f"{where}:tensors", row, "[name, dtype, [dims...]] rows")
    totals = builder.totals()
    if totals is None:
        raise CheckpointError(f"{where}:tensors", rows, "a non-empty list of [name, dtype, [dims...]] rows")
    return totals


FLAT_CONFIG, FLAT_WEIGHTS = ".config.json", ".weights.json"


def _scan(root: Traversable, location: str) -> list[CatalogEntry]:
    out = []
    for item in root.iterdir():
        if item.name.startswith("."):  # staging folders of `catalog add`, a ConfigMap mount's ..data
            continue
        if item.is_dir() and item.joinpath("config.json").is_file():
            weights_file, name, flat = item.joinpath("weights.json"), item.name, False
        elif item.name.endswith(FLAT_WEIGHTS):
            name, flat = item.name[: -len(FLAT_WEIGHTS)], True
            if not root.joinpath(name + FLAT_CONFIG).is_file():
                raise CheckpointError(str(item), name + FLAT_CONFIG, "a config file beside it")
            weights_file = item
        else:
            continue
        weights = _weights(weights_file)
        out.append(
            CatalogEntry(
                repo_id=str(weights["repo_id"]),
                directory=name,
                total_size=weights.get("total_size"),
                basis=str(weights.get("basis", "")),
                location=location,
                flat=flat,
            )
        )
    return out


#: Catalog entries by (user catalog directories, their change stamps). Bound 8: one FITGATE_CATALOG_PATH per
#: process, a new stamp each time a user catalog changes; stale ones leave first.
_ENTRIES: BoundedMemo[tuple[tuple[str, ...], tuple[float, ...]], tuple[CatalogEntry, ...]] = BoundedMemo(8)


def _entries(user_dirs: tuple[str, ...], stamps: tuple[float, ...]) -> tuple[CatalogEntry, ...]:
    """The entries of ``user_dirs``, then the built-in ones; ``stamps`` is in the key only: a change is seen at once."""
    return _ENTRIES.get_or_compute((user_dirs, stamps), lambda: _scan_all(user_dirs))


def _scan_all(user_dirs: tuple[str, ...]) -> tuple[CatalogEntry, ...]:
    seen: dict[str, CatalogEntry] = {}
    for d in user_dirs:
        path = Path(d).expanduser()
        if not path.is_dir():
            raise CheckpointError(CATALOG_PATH_ENV, d, "directories of catalog entries (see `fitgate catalog add`)")
        for e in _scan(path, str(path)):
            seen.setdefault(e.repo_id.lower(), e)
    for e in _scan(_builtin_dir(), BUILT_IN):
        seen.setdefault(e.repo_id.lower(), e)
    return tuple(sorted(seen.values(), key=lambda e: e.repo_id.lower()))


def _stamp(d: str) -> float:
    """A change stamp of a user catalog: the newest mtime of the directory and its entries' weights.json."""
    root = Path(d).expanduser()
    try:
        newest = root.stat().st_mtime
        for entry in os.scandir(root):
            if entry.name.endswith(FLAT_WEIGHTS):
                newest = max(newest, entry.stat().st_mtime)
                continue
            weights = Path(entry.path) / "weights.json"
            if entry.is_dir() and weights.is_file():
                newest = max(newest, weights.stat().st_mtime, Path(entry.path).stat().st_mtime)
    except OSError:
        return -1.0
    return newest


def catalog_entries() -> tuple[CatalogEntry, ...]:
    """Every catalog entry (user catalogs first, then built-in; one per repo id), sorted by repo id.

    Raises:
        CheckpointError: a ``FITGATE_CATALOG_PATH`` directory is missing, or an entry's weights.json is malformed.
    """
    dirs = user_catalog_dirs()
    return _entries(dirs, tuple(_stamp(d) for d in dirs))


def find_entry(repo_id: str) -> CatalogEntry | None:
    """The entry for a repo id (case-insensitive), or None."""
    wanted = repo_id.lower()
    return next((e for e in catalog_entries() if e.repo_id.lower() == wanted), None)


def find_builtin(repo_id: str) -> CatalogEntry | None:
    """The built-in entry for a repo id (case-insensitive), whatever the user catalogs hold."""
    wanted = repo_id.lower()
    return next((e for e in _entries((), ()) if e.location == BUILT_IN and e.repo_id.lower() == wanted), None)


def _files(entry: CatalogEntry) -> tuple[Traversable, Traversable, Traversable | None]:
    """An entry's config.json, weights.json and, in a folder entry, where a ModelOpt hf_quant_config.json would be."""
    root: Traversable = _builtin_dir() if entry.location == BUILT_IN else Path(entry.location)
    if entry.flat:
        return root.joinpath(entry.directory + FLAT_CONFIG), root.joinpath(entry.directory + FLAT_WEIGHTS), None
    folder = root.joinpath(entry.directory)
    return folder.joinpath("config.json"), folder.joinpath("weights.json"), folder.joinpath("hf_quant_config.json")


def load_catalog(repo_id: str, ref: str | None = None) -> ModelFacts:
    """Facts of a catalog model.

    Raises:
        CheckpointError: The repo id is not in the catalog, or its files are malformed.
    """
    entry = find_entry(repo_id)
    if entry is None:
        raise CheckpointError("model", repo_id, not_in_catalog(repo_id))
    config_file, weights_file, quant_file = _files(entry)
    weights = _weights(weights_file)
    config = read_json(config_file, _MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise CheckpointError(str(config_file), type(config).__name__, "a JSON object")
    # ModelOpt exports (NVIDIA's FP8 / NVFP4 checkpoints) keep their quantization in hf_quant_config.json beside
    # config.json, as a local directory does (checkpoints.local): without it they were sized as 16-bit models.
    if quant_file is not None and quant_file.is_file():
        config = with_hf_quant_config(config, read_json(quant_file, _MAX_CONFIG_BYTES), str(quant_file))
    where = "" if entry.location == BUILT_IN else f" in {entry.location}"
    return ModelFacts(
        ref=ref or repo_id,
        name=entry.repo_id,
        config=config,
        tensors=_tensors(weights, str(weights_file)),
        total_size=weights.get("total_size"),
        dtype_counts=weights.get("dtype_counts"),
        source="catalog",
        revision=weights.get("revision"),
        origin=f"fitgate catalog{where} ({entry.basis})",
        pooling_config=weights.get("pooling_config") is True,
        st_max_seq_length=st_max_seq_length(weights),
    )


def not_in_catalog(repo_id: str) -> str:
    """What to do about a model the catalog lacks: the closest names (difflib) and the ``catalog add`` command."""
    names = {e.repo_id.lower(): e.repo_id for e in catalog_entries()}
    tails = {k.rsplit("/", 1)[-1]: k for k in names}
    by_tail = difflib.get_close_matches(repo_id.rsplit("/", 1)[-1].lower(), list(tails), n=2, cutoff=0.75)
    close = [tails[t] for t in by_tail] + difflib.get_close_matches(repo_id.lower(), list(names), n=2, cutoff=0.75)
    hint = f"did you mean {' or '.join(names[c] for c in dict.fromkeys(close))}? " if close else ""
    return (
        f"a model of the catalog (not in it; {hint}add it with `fitgate catalog add {repo_id} --into DIR` where "
        f"the Hub or the model's directory can be read, and set {CATALOG_PATH_ENV}=DIR)"
    )


def entry_dirname(repo_id: str) -> str:
    """The folder name of a repo id's entry: ``org/name`` -> ``org__name``."""
    return repo_id.replace("/", "__")
