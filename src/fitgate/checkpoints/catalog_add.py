"""``fitgate catalog add``: write a resolved checkpoint into a user catalog directory.

On a machine that can read the checkpoint (a Hub connection, or the model's directory) this stores
what sizing needs (``config.json`` and the safetensors headers' tensors added up per layer and role, never
weight data) as a catalog entry. Copy or mount that directory where the Hub cannot be reached and
name it in ``FITGATE_CATALOG_PATH``; the operator and the CLI then resolve the repo id offline with
the same result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from fitgate.checkpoints.catalog import FLAT_WEIGHTS, entry_dirname
from fitgate.checkpoints.facts import CheckpointError, ModelFacts, to_model_input


def _basis(facts: ModelFacts, stored_bytes: int) -> str:
    if facts.tensors:
        return f"safetensors headers ({facts.tensors.tensor_count} tensors, {stored_bytes} bytes)"
    if facts.total_size:
        return "total_size of model.safetensors.index.json"
    return "estimated from config.json (no safetensors headers or index were found)"


def _weights_json(fields: dict[str, object], facts: ModelFacts) -> str:
    """weights.json: the fields indented, then the tensor totals, one ``[layer, role, ...]`` row per line."""
    head = json.dumps(fields, indent=1)
    if not facts.tensors:
        return head + "\n"
    totals = facts.tensors.to_json()
    rows = ",\n   ".join(json.dumps(row, separators=(",", ":")) for row in totals.pop("rows"))
    inner = json.dumps(totals, separators=(", ", ": "))[:-1]
    return head[:-2] + f',\n "tensor_totals": {inner}, "rows": [\n   {rows}\n ]}}\n}}\n'


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def add_to_catalog(
    facts: ModelFacts,
    repo_id: str,
    into: Path,
    *,
    config_bytes: bytes | None = None,
    force: bool = False,
    flat: bool = False,
) -> tuple[Path, int | None]:
    """Write ``facts`` as the catalog entry of ``repo_id`` under ``into``; return the entry and its stored bytes.

    ``config_bytes`` is the original ``config.json`` when it was read from a file (kept byte for
    byte); otherwise the decoded config is written as JSON. ``flat`` writes ``<org>__<name>.config.json``,
    ``.weights.json`` and ``.SOURCE.md`` side by side instead of a folder (``kubectl create configmap
    --from-file=DIR`` takes such a directory as it is); the path returned is then the weights file. The
    stored bytes are None when they are only estimated from the config.

    Raises:
        CheckpointError: the config is not one fitgate can size, or the entry exists and ``force`` is off.
        SizingError: the architecture or a tensor is not understood (from the sizing core).
    """
    model = to_model_input(facts)  # refuse what could not be planned later
    stored = model.inventory.stored_bytes if facts.tensors else (facts.total_size or 0)
    into = into.expanduser()
    into.mkdir(parents=True, exist_ok=True)
    target = into / (entry_dirname(repo_id) + (FLAT_WEIGHTS if flat else ""))
    other = into / (entry_dirname(repo_id) + ("" if flat else FLAT_WEIGHTS))
    if other.exists():
        raise CheckpointError("catalog entry", str(other), "one layout per repo id in a catalog (remove it first)")
    if target.exists() and not force:
        raise CheckpointError(
            "catalog entry", str(target), "a repo id not yet in this catalog (pass --force to replace the entry)"
        )
    config_data = config_bytes if config_bytes is not None else (json.dumps(facts.config, indent=2) + "\n").encode()
    basis = _basis(facts, stored)
    weights: dict[str, object] = {
        "repo_id": repo_id,
        "revision": facts.revision,
        "total_size": stored or None,
        "basis": basis,
        "source": facts.origin or facts.ref,
    }
    if facts.pooling_config:  # modules.json lists a Sentence Transformers pooling module: vLLM serves it pooling
        weights["pooling_config"] = True
    if facts.st_max_seq_length:  # its sentence_bert_config.json's length: vLLM's derived max_model_len
        weights["max_seq_length"] = facts.st_max_seq_length
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    source = "\n".join(
        (
            f"# {repo_id}",
            "",
            f"Added by `fitgate catalog add` on {now}.",
            "",
            f"- Resolved from: {facts.source} `{facts.origin or facts.ref}`"
            + (f" at revision `{facts.revision}`" if facts.revision else ""),
            f"- config.json: sha256 `{hashlib.sha256(config_data).hexdigest()}`, {len(config_data)} bytes"
            + (", copied byte for byte" if config_bytes is not None else ", re-serialised from the decoded JSON"),
            f"- weights.json: {basis}",
            "",
        )
    )
    files = {
        "config.json": config_data,
        "weights.json": _weights_json(weights, facts).encode(),
        "SOURCE.md": source.encode(),
    }
    if flat:
        stem = entry_dirname(repo_id)
        for name, data in files.items():  # weights last: an entry is visible once its weights file is
            if name != "weights.json":
                _write_atomic(into / f"{stem}.{name}", data)
        _write_atomic(target, files["weights.json"])
        return target, stored or None
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=into))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        os.chmod(staging, 0o755)
        if target.exists():
            old = into / f".{target.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target, stored or None
