"""What a resolved checkpoint is: its config and what is known about its weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.hf_config import apply_hf_overrides
from fitgate.sizing.plan import ModelInput
from fitgate.sizing.weights import (
    Role,
    WeightEntry,
    WeightInventory,
    bytes_from_dtype_counts,
    inventory_from_architecture,
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
        if value is None and field.startswith("-") and not problem:  # a command-line flag not given
            super().__init__(f"{field} is required: {expected}")
        elif value is None:  # a file or a reference that cannot be read: no value to show
            super().__init__(f"{field}: {problem or 'expected ' + expected}")
        elif problem:
            super().__init__(f"{field}: {value!r}: {problem}")
        else:
            super().__init__(f"{field}: {value!r} is not valid; expected {expected}")


_ROLES = {str(r): r for r in Role}
_MAX_ROW_INT = 1 << 62
_ROW_FORM = "[layer|null, role, numel, stored_bytes, quantized, linear] rows"


@dataclass(frozen=True)
class TensorTotals:
    """A checkpoint's tensors added up per (layer as numbered, role, quantized, linear), never listed.

    Built while the safetensors headers are read (:mod:`fitgate.checkpoints.safetensors`), before the
    config is parsed: :meth:`inventory` then moves the rows of layers beyond the config's layers (MTP
    layers) to ``skipped``, as sizing does for a tensor list.

    Attributes:
        rows: One entry per (layer, role, quantized, linear), numel and stored bytes summed.
        tensor_count: Tensors read.
        dtype_numel: Elements per safetensors dtype, sorted by dtype.
    """

    rows: tuple[WeightEntry, ...]
    tensor_count: int
    dtype_numel: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(
        cls, rows: Mapping[tuple[int | None, Role, bool, bool], list[int]], count: int, dtypes: Mapping[str, int]
    ) -> TensorTotals:
        """Totals from ``{(layer, role, quantized, linear): [numel, stored_bytes]}``."""
        entries = tuple(
            WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3])
            for k, v in sorted(rows.items(), key=lambda kv: (-1 if kv[0][0] is None else kv[0][0], kv[0][1:]))
        )
        return cls(entries, count, tuple(sorted(dtypes.items())))

    @property
    def stored_bytes(self) -> int:
        """Bytes of all tensors as stored."""
        return sum(e.stored_bytes for e in self.rows)

    def inventory(self, num_layers: int) -> WeightInventory:
        """The sizing core's inventory for a model of ``num_layers`` decoder layers."""
        merged: dict[tuple[int | None, Role, bool, bool], list[int]] = {}
        for e in self.rows:
            key = (e.layer, e.role, e.quantized, e.linear)
            if e.layer is not None and e.layer >= num_layers:
                # Skipped as sizing skips such a tensor; only the MLA latent projections (replicated) stay linear.
                key = (None, Role.SKIPPED, e.quantized, e.linear and e.role is Role.REPLICATED)
            acc = merged.setdefault(key, [0, 0])
            acc[0] += e.numel
            acc[1] += e.stored_bytes
        return WeightInventory(
            tuple(WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3]) for k, v in merged.items()), "safetensors"
        )

    def to_json(self) -> dict[str, Any]:
        """The form stored in the facts cache and in a catalog's weights.json."""
        return {
            "tensor_count": self.tensor_count,
            "dtype_numel": dict(self.dtype_numel),
            "rows": [[e.layer, str(e.role), e.numel, e.stored_bytes, e.quantized, e.linear] for e in self.rows],
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> TensorTotals:
        """Read :meth:`to_json`'s form back; errors name ``where``."""
        if not isinstance(data, Mapping):
            raise CheckpointError(where, type(data).__name__, "an object with tensor_count and rows")
        count, rows, dtypes = data.get("tensor_count"), data.get("rows"), data.get("dtype_numel") or {}
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise CheckpointError(f"{where}.tensor_count", count, "a positive integer")
        if not isinstance(rows, list) or not rows or not isinstance(dtypes, Mapping):
            raise CheckpointError(f"{where}.rows", type(rows).__name__, "a non-empty list of rows")
        out = []
        for row in rows:
            if type(row) is not list or len(row) != 6:
                raise CheckpointError(f"{where}.rows", str(row)[:120], _ROW_FORM)
            layer, role, numel, stored, quantized, linear = row
            if not (
                (layer is None or (type(layer) is int and 0 <= layer < _MAX_ROW_INT))
                and role in _ROLES
                and type(numel) is int
                and type(stored) is int
                and 0 <= numel < _MAX_ROW_INT
                and 0 <= stored < _MAX_ROW_INT
                and type(quantized) is bool
                and type(linear) is bool
            ):
                raise CheckpointError(f"{where}.rows", str(row)[:120], _ROW_FORM)
            out.append(WeightEntry(layer, _ROLES[role], numel, stored, quantized, linear))
        return cls(tuple(out), count, tuple(sorted((str(k), int(v)) for k, v in dtypes.items())))


@dataclass(frozen=True)
class ModelFacts:
    """The facts about one checkpoint, from whichever source.

    Attributes:
        ref: The reference the user gave.
        name: A display name (the repo id where known).
        config: The decoded ``config.json``.
        tensors: The tensors of the safetensors headers added up (never a tensor list), when read.
        total_size: Stored bytes of all tensors (``model.safetensors.index.json`` metadata).
        dtype_counts: Parameters per safetensors dtype, when that is all that is known.
        source: ``local``, ``catalog`` or ``hub``.
        revision: The immutable revision (commit sha) where known.
        origin: Where the files came from (a path, or the catalog entry's provenance).
        notes: How the facts were obtained when that matters (a catalog fallback, a stale ref).
        pooling_config: The checkpoint ships a Sentence Transformers pooling module (``modules.json``): vLLM's
            default runner serves it as a pooling model (:func:`st_pooling`).
        st_max_seq_length: ``max_seq_length`` of its Sentence Transformers config (``sentence_bert_config.json``
            and its kin, :data:`ST_CONFIG_FILES`): vLLM's derived ``max_model_len`` (:func:`st_max_seq_length`).
    """

    ref: str
    name: str
    config: Mapping[str, Any]
    tensors: TensorTotals | None = None
    total_size: int | None = None
    dtype_counts: Mapping[str, int] | None = None
    source: str = "local"
    revision: str | None = None
    origin: str = ""
    notes: tuple[str, ...] = ()
    pooling_config: bool = False
    st_max_seq_length: int | None = None

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


#: The Sentence Transformers module types vLLM reads as a pooling module (transformers_utils/config.py 0.34.0 L97-100).
ST_POOLING_MODULE_TYPES = frozenset(
    {"sentence_transformers.models.Pooling", "sentence_transformers.sentence_transformer.modules.pooling.Pooling"}
)


#: Mistral's native checkpoint format: ``params.json`` and ``consolidated*.safetensors``, no config.json.
MISTRAL_PARAMS = "params.json"


def mistral_native(ref: str) -> NotModelledError:
    """The Unknown answer for a checkpoint in Mistral's native format (no config.json; hunt180 F2).

    vLLM reads ``params.json`` through its Mistral config parser (``config_format`` auto picks it for a repository of
    ``consolidated*.safetensors``: transformers_utils/config.py 0.28.0 L687-716, repo_utils.py L210-222), so such a
    checkpoint runs (vllm-project/recipes serves mistralai/Mistral-Small-4-119B-2603-NVFP4, which has no
    config.json); fitgate does not read params.json, and says so rather than refusing the model.
    """
    exc = NotModelledError("model", ref[:200], "a Mistral-format checkpoint (params.json, no config.json)")
    exc.args = (
        f"model: {ref[:200]} is in Mistral's native format (params.json, no config.json), which vLLM reads and "
        "fitgate does not size yet (Unknown)",
    )
    return exc


def st_pooling(modules: Any) -> bool:
    """Whether a ``modules.json`` lists a pooling module.

    vLLM's ``get_pooling_config`` then finds a pooling config, and ``_get_default_runner_type`` serves even a
    ``*ForCausalLM`` checkpoint as a pooling model ("Some Sentence Transformers models use *ForCausalLM archs",
    config/model.py 0.34.0 L1303-1311; from 0.10.1: hunt46 F1).
    """
    return isinstance(modules, list) and any(
        isinstance(m, Mapping) and m.get("type") in ST_POOLING_MODULE_TYPES for m in modules[:64]
    )


#: The Sentence Transformers configs vLLM reads, in its order (transformers_utils/config.py 0.6.4 L374-382, 0.34.0
#: L1170-1178: ``get_sentence_transformer_tokenizer_config``).
ST_CONFIG_FILES = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)
#: The longest ``max_seq_length`` fitgate takes from such a config (beyond, it is not a length: ignored).
MAX_ST_SEQ_LENGTH = 1 << 24


def st_max_seq_length(encoder: Any) -> int | None:
    """``max_seq_length`` of a Sentence Transformers config, which vLLM takes as the model's derived length.

    vLLM's ``_get_and_verify_max_len`` sets ``derived_max_model_len = encoder_config["max_seq_length"]`` from 0.6.4
    (config.py 0.6.4 L1959-1960, 0.8.5 L3074-3075; config/model.py 0.34.0 L2680-2681): the default length and the
    longest one accepted (gte-Qwen2-7B-instruct: 32768 of its 131072 positions). None when absent or not a length.
    """
    if not isinstance(encoder, Mapping):
        return None
    value = encoder.get("max_seq_length")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ST_SEQ_LENGTH:
        return None
    return value


def to_model_input(facts: ModelFacts, hf_overrides: Mapping[str, Any] | None = None) -> ModelInput:
    """Parse the config and build the weight inventory from the best weight facts available.

    ``hf_overrides``: vLLM's ``--hf-overrides`` (:func:`apply_hf_overrides`).
    """
    if hf_overrides:
        facts = dataclasses.replace(facts, config=apply_hf_overrides(facts.config, hf_overrides))
    arch = parse_config(facts.config)
    if facts.pooling_config:
        arch = dataclasses.replace(arch, pooling_by_default=True)
    if facts.st_max_seq_length:
        arch = dataclasses.replace(arch, st_max_seq_length=facts.st_max_seq_length)
    if facts.tensors:
        inventory = facts.tensors.inventory(arch.num_layers)
    else:
        inventory = inventory_from_architecture(arch)
        if facts.total_size:
            inventory = inventory.scaled_to(facts.total_size, numel_ratio=_float32_shards(inventory, facts.total_size))
        elif facts.dtype_counts:
            inventory = inventory.scaled_to(
                bytes_from_dtype_counts(facts.dtype_counts), numel_ratio=_counted_numel(inventory, facts.dtype_counts)
            )
    return ModelInput(facts.name, arch, inventory)


#: The Hub's ``safetensors.parameters`` keys of floating tensors (a packed integer count is not a parameter count).
_FLOAT_COUNTS = frozenset({"F16", "BF16", "F32", "F64"})


def _counted_numel(estimate: WeightInventory, counts: Mapping[str, int]) -> float | None:
    """The parameters' scale from the Hub's per-dtype counts of an unquantized checkpoint, None for packed data.

    Float32 tensors are as many parameters as 16-bit ones, in twice the bytes (:func:`_float32_shards`).
    """
    if any(e.quantized for e in estimate.entries) or not set(counts) <= _FLOAT_COUNTS:
        return None
    estimated = sum(e.numel for e in estimate.entries)
    counted = sum(n for n in counts.values() if isinstance(n, int))
    return counted / estimated if estimated and counted else None


#: How far an index's ``total_size`` may be from twice the config's 16-bit estimate and still be read as float32
#: shards (the estimate from config.json is within ~8 % of real checkpoints: hunt76, ~30 indexes).
FLOAT32_SHARDS_TOLERANCE = 0.1


def _float32_shards(estimate: WeightInventory, total_size: int) -> float | None:
    """The parameters' scale when an unquantized checkpoint's shards are float32 under a 16-bit config, else None.

    vLLM loads every tensor into the model's dtype, the config's ``torch_dtype`` (``config/model.py`` 0.34.0
    L2511-2560 ``_get_and_verify_dtype``; ``default_weight_loader`` copies a float32 tensor into the bfloat16 param,
    ``model_loader/weight_utils.py`` L1588-1602). An index whose ``total_size`` is twice the 16-bit estimate holds
    the same parameters in 4 bytes each (hunt76 F1: MBZUAI's AIN, a Qwen2-VL-7B fine-tune, bfloat16 in config.json,
    33.2 GB of float32 shards: 15.4 GiB on the GPU, not 30.9).
    """
    if any(e.quantized for e in estimate.entries) or not estimate.stored_bytes:
        return None
    estimated_numel = sum(e.numel for e in estimate.entries)
    if estimate.stored_bytes != 2 * estimated_numel:  # a float32 config's estimate is already 4 bytes a parameter
        return None
    ratio = total_size / estimate.stored_bytes
    return ratio / 2 if abs(ratio - 2) <= 2 * FLOAT32_SHARDS_TOLERANCE else None
