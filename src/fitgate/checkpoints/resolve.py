"""``resolve(ref)``: a local directory, or a Hugging Face repo id served from the built-in catalog."""

from __future__ import annotations

import re
from pathlib import Path

from fitgate.checkpoints.catalog import load_catalog
from fitgate.checkpoints.facts import CheckpointError, ModelFacts
from fitgate.checkpoints.local import load_directory

_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}(@[A-Za-z0-9._/-]{1,200})?$")


def resolve(ref: str, revision: str | None = None) -> ModelFacts:
    """Turn a model reference into :class:`ModelFacts`.

    ``ref`` is a directory in Hugging Face layout, or ``org/name[@revision]``. Repo ids resolve
    from the built-in catalog (the Hub resolver plugs in here).

    Raises:
        CheckpointError: Not a directory and not a known repo id, or the files are malformed.
    """
    text = ref.strip()
    path = Path(text).expanduser()
    if path.exists() or text.startswith((".", "/", "~")):
        return load_directory(path, ref)
    if not _REPO_RE.match(text):
        raise CheckpointError(
            "model", ref, "a directory in Hugging Face layout or a repo id such as org/name[@revision]"
        )
    repo_id = text.split("@", 1)[0]
    return load_catalog(repo_id, ref)
