"""The generic reader of a Hugging Face ``config.json``: typed key access and the keys every family shares.

:class:`ConfigReader` is the only way fitgate reads a raw config key: every error names the
``config.json`` key, the value and the limit. The readers here are the ones vLLM applies whatever the
model family: the derived maximum model length and its RoPE scaling, the rotary cos/sin cache, the
multi-token-prediction layers and the vision tower. What each family builds from its own keys lives in
:mod:`fitgate.sizing.families`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fitgate.sizing.errors import SizingError
from fitgate.sizing.model import VisionEncoder

__all__ = [
    "MAX_POSITIONS",
    "MAX_REASONABLE",
    "ConfigReader",
    "mtp_layers",
    "parse_vision",
    "rope_cache_positions",
    "vllm_max_model_len",
]

#: The longest context fitgate sizes (vLLM's cos/sin cache holds one row per position).
MAX_POSITIONS = 1 << 24

#: The largest value fitgate accepts for these keys (a config beyond them is bad input, not a model).
MAX_REASONABLE = {
    "hidden_size": 131072,
    "num_hidden_layers": 1024,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 4096,
    "intermediate_size": 1048576,
    "vocab_size": 16777216,
    "num_experts": 16384,
    "max_position_embeddings": MAX_POSITIONS,
}


class ConfigReader:
    """Typed access to a config mapping; every error names the config.json key."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "config.json") -> None:
        self.data = data
        self.prefix = prefix

    def has(self, key: str) -> bool:
        """Whether the key is set to something other than null."""
        return self.data.get(key) is not None

    def int_(self, key: str, default: int | None = None, minimum: int = 1, limit: int | None = None) -> int:
        """An integer from ``minimum`` to ``limit`` (default: :data:`MAX_REASONABLE` for the key, else 2**40)."""
        value = self.data.get(key, default)
        if value is None:
            raise SizingError(f"{self.prefix}:{key}", None, f"an integer >= {minimum}")
        limit = limit or MAX_REASONABLE.get(key, 1 << 40)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= limit:
            raise SizingError(f"{self.prefix}:{key}", value, f"an integer from {minimum} to {limit}")
        return value

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        """The integer when the key is set, else None."""
        return self.int_(key, minimum=minimum) if self.has(key) else None

    def bool_(self, key: str, default: bool) -> bool:
        """A JSON boolean; null or missing is ``default``."""
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise SizingError(f"{self.prefix}:{key}", value, "true or false")
        return value

    def float_(self, key: str, default: float, maximum: float = 1e6) -> float:
        """A finite number in (0, ``maximum``]; null or missing is ``default``."""
        value = self.data.get(key, default)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= maximum
        ):
            raise SizingError(f"{self.prefix}:{key}", value, f"a number greater than 0 and at most {maximum:g}")
        return float(value)

    def str_(self, key: str, default: str = "") -> str:
        """The value as a string; null or missing is ``default``."""
        value = self.data.get(key, default)
        return default if value is None else str(value)

    def list_(self, key: str) -> list[Any] | None:
        """A JSON list, or None when the key is not set."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise SizingError(f"{self.prefix}:{key}", value, "a list")
        return value


def mtp_layers(text: ConfigReader) -> int:
    """Multi-token-prediction layers the checkpoint stores (0 without)."""
    # vLLM 0.33.0 config/speculative.py reads n_predict from these (L735-826, L998-1020, L1131-1142)
    for key in ("num_nextn_predict_layers", "num_mtp_modules", "mtp_num_layers", "mtp_num_hidden_layers"):
        if text.has(key):
            return text.int_(key, 0, minimum=0)
    return 0


#: ``derive_max_model_len_and_key`` (transformers_utils/model_arch_config_convertor.py 0.34.0 L375-408): the
#: smallest of these keys; ``model_max_length`` (Command-R / Cohere) wins whenever it is set.
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
#: RoPE types whose ``factor`` does not scale the derived length: max_position_embeddings is already
#: the scaled (YaRN) or original (Llama 3, LongRoPE) context (config/model.py 0.33.0 L2607-2625,
#: 0.34.0 L2651-2669).
_UNSCALED_ROPE_TYPES = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})
_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "linear_attention"})


def _rope_parameter_sets(cfg: ConfigReader) -> list[Mapping[str, Any]]:
    """``iter_rope_parameters`` (transformers_utils/config.py 0.34.0 L723-732): one dict, or one per layer type."""
    raw = cfg.data.get("rope_scaling") or cfg.data.get("rope_parameters")  # as rope_cache_positions reads them
    if not isinstance(raw, Mapping) or not raw:
        return []
    if all(isinstance(v, Mapping) for v in raw.values()) and set(raw) <= _LAYER_TYPES:
        return [v for v in raw.values() if isinstance(v, Mapping) and v]
    return [raw]


def vllm_max_model_len(top: ConfigReader, text: ConfigReader) -> tuple[int, int, str]:
    """(limit, default, key): vLLM's ``_get_and_verify_max_len`` (config/model.py 0.33.0 L2545-2684, 0.34.0 L2589-2728).

    * the derived length is the smallest of :data:`_MAX_LEN_KEYS` in the text config
      (``model_max_length`` overrides);
    * unless the model type contains ``gemma3`` ("Gemma3's max_model_len (128K) is already scaled by
      RoPE scaling"), it is multiplied by the RoPE ``factor`` of every parameter set whose type is not
      in :data:`_UNSCALED_ROPE_TYPES` (a null factor counts as 1.0, a missing one leaves it unchanged);
    * without ``--max-model-len`` the default is that length, except LongRoPE, whose default is
      ``original_max_position_embeddings``;
    * a larger ``--max-model-len`` is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``.

    ``tokenizer_config.json``'s ``model_max_length`` (also a min) is not read by fitgate.
    """
    found = [(text.int_(k, limit=1 << 40), k) for k in _MAX_LEN_KEYS if text.has(k) and isinstance(text.data[k], int)]
    if not found:
        return 0, 0, ""
    derived_int, key = min(found)
    if text.has("model_max_length") and isinstance(text.data["model_max_length"], int):
        derived_int, key = text.int_("model_max_length", limit=1 << 40), "model_max_length"
    derived = float(derived_int)
    model_type = f"{top.str_('model_type')} {text.str_('model_type')}"
    rope_sets = _rope_parameter_sets(top) or _rope_parameter_sets(text)
    if rope_sets and "gemma3" not in model_type:
        factor: float = 1.0
        for rp in rope_sets:
            kind = str(rp.get("rope_type") or rp.get("type") or "default")
            if kind not in _UNSCALED_ROPE_TYPES and "factor" in rp:
                value = rp.get("factor")
                factor = (
                    1.0 if value is None else ConfigReader(rp, f"{text.prefix}:rope_parameters").float_("factor", 1.0)
                )
        derived *= factor
    limit = min(int(derived), MAX_POSITIONS)
    default = limit
    if any(str(rp.get("rope_type") or rp.get("type")) == "longrope" for rp in rope_sets):
        original = text.opt_int("original_max_position_embeddings") or top.opt_int("original_max_position_embeddings")
        default = min(original or limit, limit)
    return limit, default, key


def rope_cache_positions(text: ConfigReader, max_pos: int) -> int:
    """Positions in vLLM's rotary cos/sin cache (a replicated buffer counted with the weights).

    This is also vLLM's derived maximum model length: YaRN scales the original context by its
    factor; linear and dynamic scaling scale max_position_embeddings; Llama 3 / LongRoPE do not.
    """
    key = "rope_scaling" if text.data.get("rope_scaling") else "rope_parameters"  # transformers 5 renamed it
    scaling = text.data.get(key) or {}
    nested = _rope_parameter_sets(text)
    if len(nested) > 1:  # one set per layer type (Gemma 3 through transformers 5): the largest cache
        return max(rope_cache_positions(ConfigReader({**text.data, key: rp}, text.prefix), max_pos) for rp in nested)
    if isinstance(scaling, Mapping):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "")
        if kind not in {"yarn", "deepseek_yarn", "dynamic", "linear"}:
            return max_pos
        rope = ConfigReader(scaling, f"{text.prefix}:{key}")
        factor = rope.float_("factor", 1.0, maximum=1024)
        if kind in {"yarn", "deepseek_yarn"} and rope.has("original_max_position_embeddings"):
            original = rope.int_("original_max_position_embeddings", limit=MAX_POSITIONS)
            return min(int(original * factor), MAX_POSITIONS)
        if kind in {"dynamic", "linear"}:
            return min(int(max_pos * factor), MAX_POSITIONS)
    return max_pos


def parse_vision(config: Mapping[str, Any]) -> VisionEncoder | None:
    """The vision tower's size from ``vision_config`` (weights and profiling), or None for a text model."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return None
    cfg = ConfigReader(vision, "config.json:vision_config")
    if not cfg.has("hidden_size") and cfg.has("vt_hidden_size"):
        # MoonViT (Kimi K2.5 / K3): vt_* keys, aliased by KimiK3VisionConfig
        # (vllm/transformers_utils/configs/kimi_k3.py 0.33.0 L79-83)
        cfg = ConfigReader(
            {
                "hidden_size": vision.get("vt_hidden_size"),
                "num_hidden_layers": vision.get("vt_num_hidden_layers", 27),
                "intermediate_size": vision.get("vt_intermediate_size", 4096),
            },
            cfg.prefix,
        )
    if cfg.has("embed_dim"):
        # Qwen2-VL: the ViT's width is embed_dim, hidden_size the text width its merger projects to; its MLP is
        # embed_dim x mlp_ratio (vllm/model_executor/models/qwen2_vl.py 0.6.1 L449-482: Qwen2VisionTransformer
        # builds every block at embed_dim; hunt13 D1: 3584 made the 7B's tower 4.9B parameters, not 0.63B)
        hidden = cfg.int_("embed_dim")
        ratio = cfg.float_("mlp_ratio", 4.0, maximum=64)
        inter = cfg.int_("intermediate_size", int(hidden * ratio))
    else:
        hidden = cfg.int_("hidden_size", 1152)
        inter = cfg.int_("intermediate_size", 4 * hidden)
    layers = cfg.int_("num_hidden_layers", cfg.int_("depth", 27) if cfg.has("depth") else 27)
    # A ViT block: 4*h^2 attention + 2*h*i MLP (+ biases/norms, ignored); plus a projector h x text hidden.
    # Qwen2.5-VL's block MLP is gated, gate + up + down: 3*h*i (Qwen2_5_VisionMLP, qwen2_5_vl.py 0.34.0 L315-347).
    mlp = 3 if config.get("model_type") == "qwen2_5_vl" else 2
    params = layers * (4 * hidden * hidden + mlp * hidden * inter)
    if cfg.has("spatial_merge_size"):
        # Qwen2/2.5/3-VL's patch merger: an MLP over merge^2 patches, (h m^2)^2 + h m^2 x out (qwen2_vl.py 0.34.0
        # L476-488, qwen2_5_vl.py L576-588, qwen3_vl.py L512-534), one more per Qwen3-VL deepstack layer.
        merged = hidden * cfg.int_("spatial_merge_size", 2, limit=16) ** 2
        text = config.get("text_config")
        out = (
            vision.get("out_hidden_size")  # Qwen2.5/3-VL
            or (vision.get("hidden_size") if cfg.has("embed_dim") else None)  # Qwen2-VL: the text width
            or (text.get("hidden_size") if isinstance(text, Mapping) else config.get("hidden_size"))
        )
        out = out if isinstance(out, int) and not isinstance(out, bool) and 0 < out <= 1 << 20 else hidden
        deepstack = vision.get("deepstack_visual_indexes")
        mergers = 1 + (min(len(deepstack), layers) if isinstance(deepstack, list) else 0)
        params += mergers * (merged * merged + merged * out)
    return VisionEncoder(hidden, layers, inter, params)
