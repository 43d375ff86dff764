"""``resolve(ref)``: one place that turns a model reference into :class:`ModelFacts`.

A reference is a directory in Hugging Face layout (a local path or a mounted PVC), or a Hugging
Face repo id ``org/name[@revision]``. ``source`` chooses where a repo id is looked up:

* ``hub``: the Hugging Face Hub (cached; see :mod:`fitgate.checkpoints.hub`);
* ``catalog``: the built-in catalog only (no network);
* ``path``: the reference must be a directory;
* ``auto`` (default): a directory if the reference is a path; otherwise the Hub, falling back to the
  catalog when the Hub cannot be reached or ``HF_HUB_OFFLINE`` is set. A definitive Hub answer (not
  found, gated) is never papered over by the catalog.

With ``roots`` (the operator: ``FITGATE_MODEL_ROOTS``), a directory must lie under one of those roots,
checked (after resolving links and ``..``) before anything about the path is looked at, so the answer
for a path outside them says nothing about what is there; no roots means no directories at all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fitgate.checkpoints.catalog import find_entry, load_catalog
from fitgate.checkpoints.facts import CheckpointError, ModelFacts
from fitgate.checkpoints.local import load_directory
from fitgate.settings import Settings, load
from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.quantization import is_gguf

if TYPE_CHECKING:
    from fitgate.checkpoints.cache import FactsCache
    from fitgate.checkpoints.hub import HubSource

SOURCES = ("auto", "hub", "catalog", "path")
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


def parse_repo_ref(ref: str, revision: str | None = None) -> tuple[str, str | None]:
    """Split ``org/name@rev`` into (repo id, revision), validating both (no URLs, no path tricks)."""
    text = ref.strip()
    repo_id, _, inline = text.partition("@")
    rev = revision or inline or None
    if not _REPO_RE.match(repo_id) or ".." in repo_id:
        raise CheckpointError("model", ref, "a Hugging Face repo id such as org/name[@revision] or a directory")
    if rev is not None and (not _REVISION_RE.match(rev) or ".." in rev):
        raise CheckpointError("revision", rev, "a branch, tag or commit sha (letters, digits, . _ - /)")
    return repo_id, rev


def _is_path(text: str, probe: bool = True) -> bool:
    return text.startswith((".", "/", "~")) or (probe and Path(text).expanduser().exists())


def confine(text: str, roots: Sequence[str], ref: str) -> Path:
    """``text`` as a real path under one of ``roots``; refused otherwise, the same way whatever is there."""
    named = ", ".join(roots)
    if not roots:
        raise CheckpointError(
            "model",
            ref,
            "",
            problem="directories are not allowed here: no model roots are configured "
            "(FITGATE_MODEL_ROOTS, chart value operator.modelRoots)",
        )
    path = Path(text).expanduser()
    real = Path(os.path.realpath(path)) if path.is_absolute() else None
    for root in roots:
        if real is not None and real.is_relative_to(os.path.realpath(root)):
            return real
    raise CheckpointError(
        "model",
        ref,
        "",
        problem=f"a directory must be an absolute path under {named} "
        "(FITGATE_MODEL_ROOTS, chart value operator.modelRoots)",
    )


def resolve(
    ref: str,
    revision: str | None = None,
    *,
    source: str = "auto",
    hub: HubSource | None = None,
    roots: Sequence[str] | None = None,
    settings: Settings | None = None,
) -> ModelFacts:
    """Turn a model reference into :class:`ModelFacts`; ``roots`` limits directories (see the module docstring).

    ``settings`` (the Hub, the facts cache, the header limits) default to :func:`fitgate.settings.load`'s, read
    when needed; the operator passes the ones it read at start.

    Raises:
        CheckpointError: the reference is malformed, not found, refused, or unreachable with nothing
            cached (``transient`` tells these apart).
    """
    if source not in SOURCES:
        raise CheckpointError("source", source, "one of " + ", ".join(SOURCES))
    text = ref.strip()
    if source == "path" or (source == "auto" and _is_path(text, probe=roots is None)):
        path = Path(text).expanduser() if roots is None else confine(text, roots, ref)
        return load_directory(path, ref, settings.limits if settings else None)
    if is_gguf(text):  # hunt190 F2: `vllm serve unsloth/Qwen3-0.6B-GGUF:IQ1_S` (0.11.2 to 0.23), as a manifest's
        raise NotModelledError("model", text[:200], "a GGUF repo's weights (each tensor's quantization type)")
    repo_id, rev = parse_repo_ref(text, revision)
    if source == "catalog":
        return load_catalog(repo_id, ref)
    if hub is None:
        from fitgate.checkpoints.cache import FactsCache  # noqa: PLC0415
        from fitgate.checkpoints.hub import HubSource  # noqa: PLC0415 - keeps `--source catalog` import-light

        hub = HubSource(settings.hub, FactsCache(settings.cache_dir), settings.limits) if settings else HubSource()
    try:
        return hub.resolve(repo_id, rev, ref)
    except CheckpointError as exc:
        if source == "hub" or not exc.transient or find_entry(repo_id) is None:
            raise
        facts = load_catalog(repo_id, ref)
        why = "HF_HUB_OFFLINE is set" if hub.settings.offline else f"the Hub could not be reached: {exc.problem}"
        note = f"resolved from the built-in catalog ({why})"
        if rev and rev != "main":
            note += f" (the catalog has one version; revision {rev} was not checked)"
        return ModelFacts(**{**facts.__dict__, "notes": (*facts.notes, note)})


def resolve_known(
    ref: str,
    revision: str | None = None,
    *,
    source: str = "auto",
    cache: FactsCache | None = None,
    endpoint: str | None = None,
    settings: Settings | None = None,
) -> ModelFacts | None:
    """What is known of a Hub reference without contacting the Hub, or None.

    The on-disk facts cache (the revision's commit, however old the branch mapping), else, for
    ``auto``, a catalog (user catalogs first, then the built-in one). The operator answers admission
    from these while a Hub resolution is pending or failing transiently, so that a hung Hub does not
    turn a known misfit into an Unknown verdict. Directories and ``catalog`` references never wait on
    the Hub, so they get None; so does a reference that is malformed or known nowhere.
    """
    if source not in ("auto", "hub") or _is_path(ref.strip(), probe=False):
        return None
    try:
        repo_id, rev = parse_repo_ref(ref, revision)
    except CheckpointError:
        return None
    from fitgate.checkpoints.cache import FactsCache  # noqa: PLC0415 - keeps `--source catalog` import-light
    from fitgate.checkpoints.hub import SHA_RE  # noqa: PLC0415

    settings = settings or load()
    cache = cache or FactsCache(settings.cache_dir)
    endpoint = endpoint or settings.hub.endpoint
    wanted = rev or "main"
    sha: str | None = wanted if SHA_RE.match(wanted) else None
    if sha is None:
        pinned = cache.get_ref(endpoint, repo_id, wanted)
        sha = pinned.sha if pinned else None
    cached = cache.get(endpoint, repo_id, sha) if sha else None
    if cached is not None:
        return cached
    if source != "auto":
        return None
    try:  # a broken user catalog is reported by the resolution itself
        facts = load_catalog(repo_id, ref) if find_entry(repo_id) is not None else None
    except CheckpointError:
        return None
    if facts is None:
        return None
    if rev and rev != "main":
        note = f"the catalog has one version; revision {rev} was not checked"
        facts = ModelFacts(**{**facts.__dict__, "notes": (*facts.notes, note)})
    return facts
