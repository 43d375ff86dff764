"""A checkpoint directory in Hugging Face layout (a local path or a mounted PVC).

Reads ``config.json`` (at most 1 MiB), the header of every ``*.safetensors`` file (never the
tensor data) or else ``model.safetensors.index.json``'s ``total_size``. A directory with only
``config.json`` works too; the weights are then estimated from the architecture.
"""

from __future__ import annotations

import json
import struct
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from fitgate.checkpoints.facts import CheckpointError, ModelFacts, tensor_list, with_hf_quant_config

#: Real configs reach megabytes when they list per-layer quantization (MiniMax-M3-NVFP4: 3.1 MB).
MAX_CONFIG_BYTES = 8 << 20
MAX_INDEX_BYTES = 64 << 20
#: The safetensors format caps the JSON header at 100 MB.
MAX_SAFETENSORS_HEADER_BYTES = 100_000_000


def read_json(path: Path | Traversable, limit: int) -> Any:
    """Decode a JSON file no larger than ``limit`` bytes; errors name the file.

    A real file's size is checked before it is read; a package resource (the built-in catalog) is read,
    then checked.
    """
    try:
        size = path.stat().st_size if isinstance(path, Path) else None
        data = path.read_bytes() if size is None or size <= limit else b""
    except OSError as exc:
        raise CheckpointError(str(path), None, f"a readable file ({exc.strerror or exc})") from exc
    size = len(data) if size is None else size
    if size > limit:
        raise CheckpointError(str(path), f"{size} bytes", f"at most {limit} bytes")
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(str(path), "malformed JSON", f"valid JSON ({exc})") from exc


def parse_safetensors_header(data: bytes, file: str, file_size: int | None = None) -> dict[str, Any]:
    """Decode a safetensors header: 8 bytes little-endian length, then that many bytes of JSON."""
    if len(data) < 8:
        raise CheckpointError(file, f"{len(data)} bytes", "a safetensors file (8-byte header length first)")
    (length,) = struct.unpack("<Q", data[:8])
    if length > MAX_SAFETENSORS_HEADER_BYTES:
        raise CheckpointError(file, f"header length {length}", f"at most {MAX_SAFETENSORS_HEADER_BYTES} bytes")
    if file_size is not None and 8 + length > file_size:
        raise CheckpointError(
            file, f"header length {length}", f"a header within the file's {file_size} bytes (truncated?)"
        )
    if len(data) < 8 + length:
        raise CheckpointError(file, f"{len(data) - 8} header bytes", f"{length} bytes (truncated header)")
    try:
        header = json.loads(data[8 : 8 + length])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(file, "malformed header", f"a JSON header ({exc})") from exc
    if not isinstance(header, dict):
        raise CheckpointError(file, type(header).__name__, "a JSON object header")
    return header


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Read only the header of a local safetensors file."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            raise CheckpointError(str(path), f"{len(prefix)} bytes", "a safetensors file (8-byte header length first)")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_SAFETENSORS_HEADER_BYTES:
            raise CheckpointError(str(path), f"header length {length}", f"at most {MAX_SAFETENSORS_HEADER_BYTES} bytes")
        body = fh.read(length)
    return parse_safetensors_header(prefix + body, str(path), size)


def load_directory(path: Path, ref: str | None = None) -> ModelFacts:
    """Facts of a Hugging Face layout directory."""
    if not path.is_dir():
        raise CheckpointError("model", str(path), "a directory with config.json")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CheckpointError("model", str(path), "a directory that contains config.json")
    config = read_json(config_path, MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise CheckpointError(str(config_path), type(config).__name__, "a JSON object")
    quant_path = path / "hf_quant_config.json"
    if quant_path.is_file():
        config = with_hf_quant_config(config, read_json(quant_path, MAX_CONFIG_BYTES), str(quant_path))
    shards = sorted(path.glob("*.safetensors"))
    tensors: list[tuple[str, str, tuple[int, ...]]] = []
    for shard in shards:
        tensors.extend(tensor_list(read_safetensors_header(shard), str(shard)))
    total = None
    index_path = path / "model.safetensors.index.json"
    if not tensors and index_path.is_file():
        index = read_json(index_path, MAX_INDEX_BYTES)
        meta = index.get("metadata") if isinstance(index, dict) else None
        value = meta.get("total_size") if isinstance(meta, dict) else None
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise CheckpointError(f"{index_path}:metadata.total_size", value, "a positive number of bytes")
        total = int(value)
    return ModelFacts(
        ref=ref or str(path),
        name=path.name.replace("__", "/"),
        config=config,
        tensors=tuple(tensors) or None,
        total_size=total,
        source="local",
        origin=str(path),
    )
