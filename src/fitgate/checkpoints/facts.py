"""What a resolved checkpoint is: its config and what is known about its weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fitgate.sizing.architecture import parse_config
from fitgate.sizing.plan import ModelInput
from fitgate.sizing.weights import (
    bytes_from_dtype_counts,
    inventory_from_architecture,
    inventory_from_tensors,
)


class CheckpointError(ValueError):
    """A checkpoint cannot be read; the message names the file or reference and what is wrong.

    ``transient`` is True for failures that may go away (timeouts, 5xx, an unreachable Hub), so
    callers can retry later; False for definitive ones (not found, access refused, malformed files).
    """

    def __init__(self, field: str, value: object, expected: str, *, transient: bool = False, problem: str = "") -> None:
        self.field = field
        self.value = value
        self.expected = expected
        self.transient = transient
        self.problem = problem or f"{value!r} is not valid; expected {expected}"
        if problem:
            super().__init__(f"{field}: {value!r}: {problem}")
        else:
            super().__init__(f"{field}: {value!r} is not valid; expected {expected}")


@dataclass(frozen=True)
class ModelFacts:
    """The facts about one checkpoint, from whichever source.

    Attributes:
        ref: The reference the user gave.
        name: A display name (the repo id where known).
        config: The decoded ``config.json``.
        tensors: ``(name, dtype, shape)`` of every tensor, from safetensors headers, when read.
        total_size: Stored bytes of all tensors (``model.safetensors.index.json`` metadata).
        dtype_counts: Parameters per safetensors dtype, when that is all that is known.
        source: ``local``, ``catalog`` or ``hub``.
        revision: The immutable revision (commit sha) where known.
        origin: Where the files came from (a path, or the catalog entry's provenance).
        notes: How the facts were obtained when that matters (a catalog fallback, a stale ref).
    """

    ref: str
    name: str
    config: Mapping[str, Any]
    tensors: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None
    total_size: int | None = None
    dtype_counts: Mapping[str, int] | None = None
    source: str = "local"
    revision: str | None = None
    origin: str = ""
    notes: tuple[str, ...] = ()

    @property
    def weights_basis(self) -> str:
        """How exact the weight bytes are: safetensors, total_size, dtype_counts or estimated."""
        if self.tensors:
            return "safetensors"
        if self.total_size:
            return "total_size"
        if self.dtype_counts:
            return "dtype_counts"
        return "estimated"


def with_hf_quant_config(config: dict[str, Any], hf_quant: object, file: str) -> dict[str, Any]:
    """The config with NVIDIA ModelOpt's ``hf_quant_config.json`` as its ``quantization_config``.

    ModelOpt exports (NVFP4 / FP8 checkpoints) keep their quantization in that file; vLLM reads it
    when ``config.json`` has no ``quantization_config`` (and uses ``quant_method: modelopt``), so
    fitgate does the same. A config that already declares its quantization is left as it is.
    """
    if not isinstance(hf_quant, Mapping):
        raise CheckpointError(file, type(hf_quant).__name__, "a JSON object")
    if config.get("quantization_config") is not None:
        return config
    return {**config, "quantization_config": {"quant_method": "modelopt", **hf_quant}}


def to_model_input(facts: ModelFacts) -> ModelInput:
    """Parse the config and build the weight inventory from the best weight facts available."""
    arch = parse_config(facts.config)
    if facts.tensors:
        inventory = inventory_from_tensors(facts.tensors, arch)
    else:
        inventory = inventory_from_architecture(arch)
        if facts.total_size:
            inventory = inventory.scaled_to(facts.total_size)
        elif facts.dtype_counts:
            inventory = inventory.scaled_to(bytes_from_dtype_counts(facts.dtype_counts))
    return ModelInput(facts.name, arch, inventory)


def tensor_list(header: Mapping[str, Any], file: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """``(name, dtype, shape)`` of each tensor in a decoded safetensors header."""
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if (
            not isinstance(info, Mapping)
            or not isinstance(info.get("dtype"), str)
            or not isinstance(info.get("shape"), Sequence)
        ):
            raise CheckpointError(f"{file}:{name}", info, "a tensor entry with dtype and shape")
        out.append((name, info["dtype"], tuple(int(d) for d in info["shape"])))
    return out
