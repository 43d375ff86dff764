"""On-disk cache of resolved checkpoint facts.

* ``facts/<key>.json``: the facts of one repo at one commit sha, immutable once written.
* ``refs/<key>.json``: which commit a branch or tag pointed to, and when; trusted for ``ref_ttl_s``
  (a commit sha needs no ref).

Writes go to a temporary file in the same directory and are renamed into place, so readers in
other threads or processes see either the old or the new file, never half of one. The cache is
bounded: after a write, the least recently used fact files are removed until the total size is
under ``max_bytes``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitgate.checkpoints.facts import CheckpointError, ModelFacts, TensorTotals, st_max_seq_length
from fitgate.settings import load

DEFAULT_MAX_BYTES = 256 << 20
#: Version of the stored facts; entries of another version are resolved again (version 2: tensor totals).
_FORMAT = 4  # 3: pooling_config (modules.json); 4: st_max_seq_length (sentence_bert_config.json)
DEFAULT_REF_TTL_S = 600.0


def default_cache_dir() -> Path:
    """``$FITGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/fitgate``, else ``~/.cache/fitgate`` (:mod:`fitgate.settings`)."""
    return load().cache_dir


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


@dataclass(frozen=True)
class CachedRef:
    """A branch/tag → commit mapping and its age."""

    sha: str
    age_s: float


class FactsCache:
    """Checkpoint facts keyed by (endpoint, repo, commit sha); branch names with a TTL."""

    def __init__(
        self, root: Path | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES, ref_ttl_s: float = DEFAULT_REF_TTL_S
    ) -> None:
        self.root = root or default_cache_dir()
        self.max_bytes = max_bytes
        self.ref_ttl_s = ref_ttl_s

    # -- refs -------------------------------------------------------------------------------

    def get_ref(self, endpoint: str, repo_id: str, revision: str) -> CachedRef | None:
        """The commit a branch/tag last resolved to (None if never), with its age."""
        data = self._read(self.root / "refs" / f"{_key(endpoint, repo_id, revision)}.json")
        if not isinstance(data, dict) or not isinstance(data.get("sha"), str):
            return None
        return CachedRef(data["sha"], max(0.0, time.time() - float(data.get("at", 0))))

    def put_ref(self, endpoint: str, repo_id: str, revision: str, sha: str) -> None:
        """Remember that ``revision`` points at ``sha`` now."""
        self._write(
            self.root / "refs" / f"{_key(endpoint, repo_id, revision)}.json",
            {"repo": repo_id, "revision": revision, "sha": sha, "at": time.time()},
        )

    # -- facts ------------------------------------------------------------------------------

    def get(self, endpoint: str, repo_id: str, sha: str) -> ModelFacts | None:
        """The facts of ``repo_id`` at commit ``sha``, or None."""
        path = self.root / "facts" / f"{_key(endpoint, repo_id, sha)}.json"
        data = self._read(path)
        if not isinstance(data, dict):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # LRU: a hit makes the entry recent
        if data.get("format") != _FORMAT:
            return None  # written by another version of fitgate: resolve again
        try:
            tensors = TensorTotals.from_json(data["tensors"], str(path)) if data.get("tensors") else None
        except CheckpointError:
            return None
        return ModelFacts(
            ref=str(data["ref"]),
            name=str(data["name"]),
            config=data["config"],
            tensors=tensors,
            total_size=data.get("total_size"),
            dtype_counts=data.get("dtype_counts"),
            source=str(data.get("source", "hub")),
            revision=data.get("revision"),
            origin=str(data.get("origin", "")),
            notes=tuple(data.get("notes", ())),
            pooling_config=data.get("pooling_config") is True,
            st_max_seq_length=st_max_seq_length(data),
        )

    def put(self, endpoint: str, repo_id: str, facts: ModelFacts) -> None:
        """Store facts resolved at an immutable commit."""
        if not facts.revision:
            return
        payload = {
            "format": _FORMAT,
            "ref": facts.ref,
            "name": facts.name,
            "config": facts.config,
            "tensors": facts.tensors.to_json() if facts.tensors else None,
            "total_size": facts.total_size,
            "dtype_counts": dict(facts.dtype_counts) if facts.dtype_counts else None,
            "source": facts.source,
            "revision": facts.revision,
            "origin": facts.origin,
            "notes": list(facts.notes),
            "pooling_config": facts.pooling_config,
            "max_seq_length": facts.st_max_seq_length,
        }
        self._write(self.root / "facts" / f"{_key(endpoint, repo_id, facts.revision)}.json", payload)
        self._evict()

    # -- files ------------------------------------------------------------------------------

    @staticmethod
    def _read(path: Path) -> Any:
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _write(path: Path, payload: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(payload, fh, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _evict(self) -> None:
        folder = self.root / "facts"
        entries = []
        for path in folder.glob("*.json"):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
