"""What a checkpoint holds: its tensors by layer and role, their dtypes and quantized formats.

A :class:`WeightInventory` is a compact list of the checkpoint's tensors, aggregated by decoder
layer and *role* (how tensor parallelism shards it). It is read here from real tensor metadata
(safetensors headers: exact, :func:`inventory_from_tensors`), estimated from the architecture by
:mod:`fitgate.sizing.inventory_estimate`, and may be rescaled to a known stored total
(``model.safetensors.index.json`` ``total_size`` or per-dtype parameter counts). What one GPU loads
of it is :mod:`fitgate.sizing.weights`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from fitgate.sizing.dtypes import tensor_dtype_bytes
from fitgate.sizing.errors import SizingError
from fitgate.sizing.model import Quantization

__all__ = [
    "Role",
    "WeightEntry",
    "WeightInventory",
    "bytes_from_dtype_counts",
    "classify_tensor",
    "inventory_from_tensors",
    "quantized_bytes",
]


class Role(StrEnum):
    """How a tensor is placed across tensor-parallel ranks."""

    EMBED = "embed"  # vocab-parallel rows, first pipeline stage
    EMBED_PER_LAYER = "embed_per_layer"  # Gemma 4 E2B/E4B per-layer table: vocab-parallel, every stage
    LM_HEAD = "lm_head"  # vocab-parallel rows, last pipeline stage
    COLUMN = "column"  # output dim split by TP
    ROW = "row"  # input dim split by TP
    KV_PROJ = "kv_proj"  # split by TP, replicated when TP > KV heads
    EXPERT = "expert"  # MoE experts, split by TP (all experts resident)
    REPLICATED = "replicated"  # norms, routers, MLA latent projections
    VISION = "vision"  # multimodal encoder, first stage, split by TP
    SKIPPED = "skipped"  # stored but not loaded (MTP layers, rotary buffers)


@dataclass(frozen=True)
class WeightEntry:
    """Tensors of one layer and role, aggregated.

    Attributes:
        layer: Decoder layer index, or None for embeddings, head, final norm and vision tower.
        role: Placement across ranks.
        numel: Elements (logical parameters; packed 4-bit counts each 4-bit value once).
        stored_bytes: Bytes in the checkpoint.
        quantized: Stored in a quantized format (kept as stored when loading).
        linear: A linear layer's weight, which runtime ``--quantization fp8`` would quantize.
    """

    layer: int | None
    role: Role
    numel: int
    stored_bytes: int
    quantized: bool = False
    linear: bool = False


@dataclass(frozen=True)
class WeightInventory:
    """The checkpoint's tensors, aggregated; ``source`` says how exact it is."""

    entries: tuple[WeightEntry, ...]
    source: str  # "safetensors" (exact per tensor), "total" (scaled to a known total), "config" (estimated)

    @cached_property
    def stored_bytes(self) -> int:
        """Total bytes of the checkpoint's tensors (summed once: the inventory is frozen)."""
        return sum(e.stored_bytes for e in self.entries)

    @property
    def estimated(self) -> bool:
        """True when no real size of the checkpoint was known."""
        return self.source == "config"

    def scaled_to(self, total_bytes: int, source: str = "total", numel_ratio: float | None = None) -> WeightInventory:
        """The same shape of inventory, rescaled so that the stored bytes add up to ``total_bytes``.

        ``numel_ratio``: how much the parameter counts change, where that is not the bytes' ratio (shards stored in a
        wider dtype than the model's hold the same parameters in more bytes: vLLM loads them in the model's dtype).
        """
        current = self.stored_bytes
        if total_bytes <= 0 or current <= 0:
            raise SizingError("weights.total_size", total_bytes, "a positive number of bytes")
        ratio = total_bytes / current
        numel = ratio if numel_ratio is None else numel_ratio
        return WeightInventory(
            tuple(
                WeightEntry(
                    e.layer,
                    e.role,
                    round(e.numel * numel),
                    round(e.stored_bytes * ratio),
                    e.quantized,
                    e.linear,
                )
                for e in self.entries
            ),
            source,
        )


def quantized_bytes(numel: int, q: Quantization) -> int:
    """Bytes of ``numel`` weights stored with ``q``: packed values plus scales (and zero points)."""
    values = numel * q.weight_bits / 8
    scales = (numel / q.group_size if q.group_size else numel / 4096) * q.scale_bytes
    return int(values + scales)


# --------------------------------------------------------------------------------------------
# Inventory from real tensor metadata (safetensors headers)

_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_QUANT_SUFFIXES = (
    "qweight",
    "qzeros",
    "scales",
    "g_idx",
    "weight_scale",
    "weight_scale_inv",
    "weight_packed",
    "weight_zero_point",
    "weight_shape",
    "input_scale",
    "weight_global_scale",
    "_blocks",
    "_scales",
)


def classify_tensor(name: str, num_layers: int) -> tuple[int | None, Role]:
    """(layer, role) of a Hugging Face tensor name, by the standard module names."""
    lowered = name.lower()
    if "rotary_emb.inv_freq" in lowered or lowered.startswith("mtp.") or ".mtp." in lowered:
        return None, Role.SKIPPED
    if re.search(
        r"(^|\.)(vision_tower|vision_model|visual|vit|image_newline|multi_modal_projector|mm_projector|vision_encoder"
        r"|audio_tower|embed_audio)\b",
        lowered,
    ):
        return None, Role.VISION
    match = _LAYER_RE.search(lowered)
    layer = int(match.group(1)) if match else None
    if layer is not None and layer >= num_layers:
        return None, Role.SKIPPED  # e.g. DeepSeek-V3's MTP layer 61
    if layer is None:
        if "embed_tokens_per_layer" in lowered:
            return None, Role.EMBED_PER_LAYER  # Gemma 4 E2B/E4B (gemma4.py 0.33.0 L1022-1028)
        if "per_layer_model_projection" in lowered:
            return None, Role.COLUMN  # ColumnParallelLinear (gemma4.py 0.33.0 L1039-1047)
        if any(k in lowered for k in ("embed_tokens", "wte.", "word_embeddings", "tok_embeddings", "embedding.weight")):
            return None, Role.EMBED
        if lowered.startswith("lm_head") or lowered.startswith("output.") or ".lm_head." in lowered:
            return None, Role.LM_HEAD
        return None, Role.REPLICATED
    if "norm" in lowered or ".ln_" in lowered or "layernorm" in lowered:
        return layer, Role.REPLICATED
    if any(k in lowered for k in ("kv_a_proj_with_mqa", "q_a_proj", ".routed_expert_", "_res_proj.")):
        return layer, Role.REPLICATED
    if ".per_layer_input_gate." in lowered or ".per_layer_projection." in lowered:
        return layer, Role.REPLICATED  # Gemma 4 PLE: ReplicatedLinear (gemma4.py 0.33.0 L682-697)
    if ".experts." in lowered and "shared_expert" not in lowered:
        return layer, Role.EXPERT
    if re.search(r"\.(gate|router)\.(weight|bias|e_score_correction_bias)$", lowered) or "mlp.router" in lowered:
        return layer, Role.REPLICATED
    if re.search(r"\.(k_proj|v_proj)\.", lowered):
        return layer, Role.KV_PROJ
    if re.search(r"\.(o_proj|down_proj|out_proj|dense|fc2|w2|c_proj|wo)\.", lowered):
        return layer, Role.ROW
    return layer, Role.COLUMN


def inventory_from_tensors(tensors: Iterable[tuple[str, str, Sequence[int]]], num_layers: int) -> WeightInventory:
    """Aggregate real tensors ``(name, dtype, shape)`` from safetensors headers into an inventory.

    ``num_layers`` is the model's decoder depth: tensors of deeper layers (MTP heads) are skipped.
    """
    rows: dict[tuple[int | None, Role, bool, bool], list[int]] = {}
    for name, dtype, shape in tensors:
        numel = 1
        for dim in shape:
            if not isinstance(dim, int) or dim < 0:
                raise SizingError(f"safetensors:{name}.shape", list(shape), "a list of non-negative integers")
            numel *= dim
        elem = tensor_dtype_bytes(dtype, f"safetensors:{name}.dtype")
        layer, role = classify_tensor(name, num_layers)
        lowered = name.lower()
        quantized = lowered.endswith(_QUANT_SUFFIXES) or dtype.upper() in {
            "I32",
            "U8",
            "I8",
            "F8_E4M3",
            "F8_E5M2",
            "U32",
        }
        linear = (
            not quantized and lowered.endswith(".weight") and role in {Role.COLUMN, Role.ROW, Role.KV_PROJ, Role.EXPERT}
        ) or any(k in lowered for k in ("kv_a_proj_with_mqa.weight", "q_a_proj.weight", "per_layer_input_gate.weight"))
        linear = linear or (not quantized and "per_layer_projection.weight" in lowered and layer is not None)
        key = (layer, role, quantized, linear)
        acc = rows.setdefault(key, [0, 0])
        acc[0] += numel
        acc[1] += int(numel * elem)
    if not rows:
        raise SizingError("safetensors", "no tensors", "at least one tensor in the checkpoint headers")
    return WeightInventory(
        tuple(WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3]) for k, v in rows.items()), "safetensors"
    )


def bytes_from_dtype_counts(counts: Mapping[str, int]) -> int:
    """Stored bytes from per-dtype parameter counts (the Hub's ``safetensors.parameters``)."""
    total = 0
    for dtype, count in counts.items():
        if not isinstance(count, int) or count < 0:
            raise SizingError(f"safetensors.parameters.{dtype}", count, "a non-negative integer")
        total += int(count * tensor_dtype_bytes(dtype, f"safetensors.parameters.{dtype}"))
    return total
