"""The one narrow parser from a Hugging Face ``config.json`` to a typed model description.

Nothing else in fitgate reads raw config keys. The result, :class:`ModelArchitecture`, lists every
decoder layer with its token mixer (attention of some kind, MLA, Mamba or linear attention) and its
feed-forward block (dense or mixture of experts), plus what the weight and activation models need.

Supported families are those listed in :data:`SUPPORTED_ARCHITECTURES`; anything else is an
:class:`~fitgate.sizing.errors.UnknownArchitectureError` that names the architecture.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fitgate.sizing.dtypes import normalize_model_dtype
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.hf_config import normalize
from fitgate.sizing.model import (
    MLA,
    Attention,
    CompressedSparseMLA,
    DenseMLP,
    FeedForward,
    Layer,
    LinearAttention,
    Mamba,
    Mixer,
    ModelArchitecture,
    MoE,
    PerLayerEmbedding,
    Quantization,
    ShortConv,
    VisionEncoder,
)
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION, parse_quantization

__all__ = [
    "MLA",
    "RUNTIME_QUANTIZATION",
    "SUPPORTED_ARCHITECTURES",
    "Attention",
    "DenseMLP",
    "FeedForward",
    "Layer",
    "LinearAttention",
    "Mamba",
    "Mixer",
    "MoE",
    "ModelArchitecture",
    "Quantization",
    "VisionEncoder",
    "parse_config",
    "parse_quantization",
]

# --------------------------------------------------------------------------------------------
# Parsing helpers

#: The longest context fitgate sizes (vLLM's cos/sin cache holds one row per position).
MAX_POSITIONS = 1 << 24

_MAX_REASONABLE = {
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


class _Cfg:
    """Typed access to a config mapping; every error names the config.json key."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "config.json") -> None:
        self.data = data
        self.prefix = prefix

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, key: str, default: int | None = None, minimum: int = 1, limit: int | None = None) -> int:
        value = self.data.get(key, default)
        if value is None:
            raise SizingError(f"{self.prefix}:{key}", None, f"an integer >= {minimum}")
        limit = limit or _MAX_REASONABLE.get(key, 1 << 40)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= limit:
            raise SizingError(f"{self.prefix}:{key}", value, f"an integer from {minimum} to {limit}")
        return value

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        return self.int_(key, minimum=minimum) if self.has(key) else None

    def bool_(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise SizingError(f"{self.prefix}:{key}", value, "true or false")
        return value

    def float_(self, key: str, default: float, maximum: float = 1e6) -> float:
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
        value = self.data.get(key, default)
        return default if value is None else str(value)

    def list_(self, key: str) -> list[Any] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise SizingError(f"{self.prefix}:{key}", value, "a list")
        return value


#: Architectures vLLM 0.33 no longer serves natively (``_PREVIOUSLY_SUPPORTED_MODELS`` in
#: vllm/model_executor/models/registry.py), with the last release that did.
NOT_SERVED: dict[str, str] = {
    "MllamaForConditionalGeneration": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0",
}

#: Architectures (``config.json:architectures[0]``) and the family parser that handles each. The
#: families follow vLLM 0.33's model classes (vllm/model_executor/models/registry.py): the same
#: layer pattern keys, the same attention kinds, the same MoE placement rules.
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    # dense decoders, sliding windows from layer_types or the global window
    "Ministral3ForCausalLM": "llama",
    "MiMoForCausalLM": "llama",
    "Olmo2ForCausalLM": "llama",
    "Olmo3ForCausalLM": "llama",
    "Exaone4ForCausalLM": "llama",
    "SmolLM3ForCausalLM": "llama",
    "Ernie4_5ForCausalLM": "llama",
    "Cohere2ForCausalLM": "llama",
    # Command R / R+: the same vLLM class as Cohere2 (registry.py L87-88), without sliding windows
    # (commandr.py L235-244), one LayerNorm per layer (L309), q/k norms with use_qk_norm (L257-263)
    "CohereForCausalLM": "llama",
    "Glm4ForCausalLM": "llama",
    "HunYuanDenseV1ForCausalLM": "llama",
    "Qwen2VLForConditionalGeneration": "llama",
    "Qwen3VLForConditionalGeneration": "llama",
    "LlavaForConditionalGeneration": "llama",
    "LlavaNextForConditionalGeneration": "llama",
    "LlavaOnevisionForConditionalGeneration": "llama",
    "Idefics3ForConditionalGeneration": "llama",
    "InternVLForConditionalGeneration": "llama",
    "Gemma3nForConditionalGeneration": "llama",
    # InternLM3: vLLM 0.33 builds it with LlamaForCausalLM (registry.py L143); transformers' config
    # renames qkv_bias -> attention_bias and bias -> mlp_bias, which llama.py reads (L268-305)
    "InternLM3ForCausalLM": "llama",
    # InternLM2: internlm2.py (0.33.0) builds the Llama layout under other names (wqkv, wo, w1/w3/w2,
    # attention_norm / ffn_norm, tok_embeddings / output): no biases whatever the config (L66-138),
    # head_dim = hidden_size // num_attention_heads (L119), lm_head tied only by tie_word_embeddings (L354)
    "InternLM2ForCausalLM": "llama",
    # Solar Pro: solar.py (0.33.0) is llama.py's layout (L75-152, L221-224) plus weightless skip
    # connections (bskcn, L312-332); its global sliding_window reaches every layer through
    # CacheConfig.sliding_window (engine/arg_utils.py L2288-2294, attention.py L266-271)
    "SolarForCausalLM": "llama",
    # EXAONE 3.0 / 3.5: exaone.py (0.33.0) is llama.py's layout under GPT-2 names (transformer.h, attn.attention
    # q/k/v/out_proj, mlp.c_fc_0/c_fc_1/c_proj, ln_1/ln_2, wte, ln_f; L77-155, L264-265); transformers'
    # ExaoneConfig renames num_layers and layer_norm_epsilon
    "ExaoneForCausalLM": "llama",
    # StableLM (2): stablelm.py (0.33.0) is llama.py's layout with nn.LayerNorm (weight and bias, L191-192,
    # L240), q/k/v biases when use_qkv_bias (L125-138) and a partial rotary; it builds no qk_layernorm
    "StableLmForCausalLM": "llama",
    # mixtures of experts with softmax attention
    "MiniMaxM2ForCausalLM": "moe",
    "PhiMoEForCausalLM": "moe",
    "Glm4MoeForCausalLM": "moe",
    "Ernie4_5_MoeForCausalLM": "moe",
    "HunYuanMoEV1ForCausalLM": "moe",
    "Qwen3VLMoeForConditionalGeneration": "moe",
    "Step3p5ForCausalLM": "moe",
    # OLMoE: every layer num_experts x intermediate_size experts, top num_experts_per_tok, no shared
    # expert, full-width q/k norms (vllm/model_executor/models/olmoe.py 0.33.0 L153-165, L229-240)
    "OlmoeForCausalLM": "moe",
    # MiniMax M3: block-sparse attention (128-token pages) with a key-only indexer cache on the
    # layers sparse_attention_freq marks (vllm/models/minimax_m3 0.33.0)
    "MiniMaxM3SparseForCausalLM": "moe",
    "MiniMaxM3SparseForConditionalGeneration": "moe",
    # multi-head latent attention (DeepSeek V2/V3 layout), sparse-attention indexer where configured
    "DeepseekV32ForCausalLM": "mla",
    "GlmMoeDsaForCausalLM": "mla",
    "Glm4MoeLiteForCausalLM": "mla",
    "KimiK25ForConditionalGeneration": "mla",
    "KimiVLForConditionalGeneration": "mla",
    # vllm/model_executor/models/registry.py 0.33.0 L488-491 -> vllm/models/kimi_k3 (nvidia/model.py)
    "KimiK3ForConditionalGeneration": "kimi_k3",
    # DeepSeek V4: sliding-window MLA on every layer, compressed (1/4 with an indexer, 1/128) caches
    "DeepseekV4ForCausalLM": "deepseek_v4",
    # Gemma 4: sliding / global layers of different head sizes, KV-shared tail, dense + MoE blocks
    "Gemma4ForCausalLM": "gemma4",
    # MiMo-V2-Flash: sliding (with sinks) and global layers of different head counts, K 192 / V 128
    "MiMoV2FlashForCausalLM": "mimo_v2",
    "MiMoV2ForCausalLM": "mimo_v2",
    # LFM2: gated short convolutions with a few full-attention layers
    "Lfm2ForCausalLM": "lfm2",
    "Lfm2VlForConditionalGeneration": "lfm2",
    "Lfm2MoeForCausalLM": "lfm2_moe",
    # Llama-Nemotron (DeciLM / NAS): per-layer attention with its own KV heads or none, per-layer MLP width
    "DeciLMForCausalLM": "decilm",
    "Gemma4ForConditionalGeneration": "gemma4",
    # Gated DeltaNet hybrids (Qwen3-Next layout), dense or MoE
    "Qwen3_5ForCausalLM": "qwen3_next",
    "Qwen3_5MoeForCausalLM": "qwen3_next",
    "Qwen3_5ForConditionalGeneration": "qwen3_next",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_next",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "llama",
    "Qwen3ForCausalLM": "llama",
    "Qwen2_5_VLForConditionalGeneration": "llama",
    "GraniteForCausalLM": "llama",
    "Phi3ForCausalLM": "llama",
    "GemmaForCausalLM": "llama",
    "Gemma2ForCausalLM": "llama",
    "Gemma3ForCausalLM": "llama",
    "Gemma3ForConditionalGeneration": "llama",
    "PhiForCausalLM": "phi2",
    "MixtralForCausalLM": "moe",
    "Qwen2MoeForCausalLM": "moe",
    "Qwen3MoeForCausalLM": "moe",
    "GraniteMoeForCausalLM": "moe",
    "GptOssForCausalLM": "moe",
    "Mistral3ForConditionalGeneration": "llama",
    "DeepseekV2ForCausalLM": "mla",
    "DeepseekV3ForCausalLM": "mla",
    "KimiK2ForCausalLM": "mla",
    "Llama4ForCausalLM": "llama4",
    "Llama4ForConditionalGeneration": "llama4",
    "Qwen3NextForCausalLM": "qwen3_next",
    "NemotronHForCausalLM": "nemotron_h",
    "JambaForCausalLM": "jamba",
    "GraniteMoeHybridForCausalLM": "granite_hybrid",
}

_TIED_BY_DEFAULT = {
    "lfm2",
    "lfm2_moe",
    "gemma4",
    "gemma4_text",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "granite",
    "granitemoe",
    "phi",
    "granitemoehybrid",
}


def _supported_hint(arch: str) -> str:
    """What to expect instead of an unknown architecture: the closest supported names, not all of them."""
    close = difflib.get_close_matches(str(arch), sorted(SUPPORTED_ARCHITECTURES), n=3, cutoff=0.6)
    hint = f"one of the {len(SUPPORTED_ARCHITECTURES)} architectures fitgate sizes (README: Architectures)"
    return hint + (f", e.g. {', '.join(close)}" if close else "")


def parse_config(config: Mapping[str, Any]) -> ModelArchitecture:
    """Turn a Hugging Face ``config.json`` (already decoded) into a :class:`ModelArchitecture`.

    Multimodal configs with a nested ``text_config`` are read from the text model, keeping the
    vision tower's size for weights and profiling.

    Raises:
        UnknownArchitectureError: ``architectures`` names a model family fitgate cannot size.
        SizingError: A key the family needs is missing, of the wrong type or out of range.
    """
    if not isinstance(config, Mapping):
        raise SizingError("config.json", type(config).__name__, "a JSON object")
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SizingError("config.json:architectures", archs, "a list naming the model class")
    arch = archs[0]
    family = SUPPORTED_ARCHITECTURES.get(arch)
    if arch in NOT_SERVED:
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            f"an architecture vLLM 0.33 serves (vLLM dropped {arch} after {NOT_SERVED[arch]})",
        )
    if family is None:
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            _supported_hint(arch),
        )
    config, normalize_notes = normalize(config)
    top = _Cfg(config)
    text_data = next(
        (config[k] for k in ("text_config", "language_config", "llm_config") if isinstance(config.get(k), Mapping)),
        None,
    )
    if isinstance(text_data, Mapping):
        text = _Cfg(
            {**{k: v for k, v in config.items() if k != "text_config"}, **text_data},
            "config.json:text_config",
        )
    else:
        text = top
    model_type = text.str_("model_type", top.str_("model_type"))
    dtype = normalize_model_dtype(
        text.str_("torch_dtype", "") or text.str_("dtype", "") or top.str_("torch_dtype", "") or "bfloat16",
        f"{text.prefix}:torch_dtype",
    )
    builder = _FAMILIES[family]
    layers, extras = builder(text, model_type)
    hidden = text.int_("hidden_size")
    heads = text.int_("num_attention_heads", 1) if text.has("num_attention_heads") else 1
    head_dim = text.int_("head_dim") if text.has("head_dim") else max(1, hidden // heads)
    rope_params = text.data.get("rope_parameters")
    explicit_rotary = text.has("rotary_dim")
    if (
        not text.has("partial_rotary_factor")
        and isinstance(rope_params, Mapping)
        and "partial_rotary_factor" in rope_params
    ):
        rotary_dim = int(
            head_dim
            * _Cfg(rope_params, f"{text.prefix}:rope_parameters").float_("partial_rotary_factor", 1.0, maximum=1.0)
        )
    else:
        rotary_dim = int(head_dim * text.float_("partial_rotary_factor", 1.0, maximum=1.0))
    if explicit_rotary:
        rotary_dim = text.int_("rotary_dim", limit=head_dim)  # MiniMax M2: vLLM reads config.rotary_dim
    if family in {"mla", "deepseek_v4"}:
        rotary_dim = text.int_("qk_rope_head_dim")
    max_pos = text.int_("max_position_embeddings", 8192)
    rope_positions = _rope_cache_positions(text, max_pos)
    max_len_limit, max_len_default, max_len_key = vllm_max_model_len(top, text)
    quant = parse_quantization(config.get("quantization_config") or text.data.get("quantization_config"))
    if family == "deepseek_v4":
        quant = _deepseek_v4_experts(text, quant)
    if family == "kimi_k3":
        quant = _kimi_k3_quantization(text, quant)
        rotary_dim = 0  # NoPE-only MLA: no rotary cos/sin cache (nvidia/mla.py 0.33.0 L145, L164-196)
    return ModelArchitecture(
        architecture=arch,
        model_type=model_type,
        dtype=dtype,
        hidden_size=hidden,
        vocab_size=text.int_("vocab_size"),
        # Lfm2MoeForCausalLM ties lm_head to the embedding whatever the config says (lfm2_moe.py 0.33.0 L590),
        # and so does CohereForCausalLM (Command R, Cohere2): it drops lm_head (commandr.py L417, L464-466).
        tie_word_embeddings=family == "lfm2_moe"
        or model_type in {"cohere", "cohere2"}
        or top.bool_("tie_word_embeddings", text.bool_("tie_word_embeddings", model_type in _TIED_BY_DEFAULT)),
        layers=tuple(layers),
        max_position_embeddings=max_pos,
        rotary_dim=rotary_dim,
        rope_cache_positions=rope_positions,
        max_len_limit=max_len_limit,
        max_len_default=max_len_default,
        max_len_key=max_len_key,
        quantization=quant,
        vision=_parse_vision(config),
        mtp_layers=extras.get("mtp_layers", _mtp_layers(text)),
        # GptOssForCausalLMConfig raises max_cudagraph_capture_size to 1024 (models/config.py 0.19.0 L120-133,
        # 0.33.0 L559): 83 capture sizes instead of 51.
        max_capture_size_override=1024 if family == "moe" and model_type == "gpt_oss" else None,
        norm_has_bias=family == "phi2" or model_type == "stablelm",
        attention_bias=bool(text.data.get("attention_bias"))
        or (model_type == "stablelm" and text.bool_("use_qkv_bias", False))
        or model_type in {"qwen2", "qwen2_moe", "gpt_oss", "phi", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl_text"},
        per_layer_embedding=_per_layer_embedding(text) if family == "gemma4" else None,
        attn_res=family == "kimi_k3" and text.has("attn_res_block_size"),
        notes=normalize_notes,
    )


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


def _rope_parameter_sets(cfg: _Cfg) -> list[Mapping[str, Any]]:
    """``iter_rope_parameters`` (transformers_utils/config.py 0.34.0 L723-732): one dict, or one per layer type."""
    raw = cfg.data.get("rope_scaling") or cfg.data.get("rope_parameters")  # as _rope_cache_positions reads them
    if not isinstance(raw, Mapping) or not raw:
        return []
    if all(isinstance(v, Mapping) for v in raw.values()) and set(raw) <= _LAYER_TYPES:
        return [v for v in raw.values() if isinstance(v, Mapping) and v]
    return [raw]


def vllm_max_model_len(top: _Cfg, text: _Cfg) -> tuple[int, int, str]:
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
                factor = 1.0 if value is None else _Cfg(rp, f"{text.prefix}:rope_parameters").float_("factor", 1.0)
        derived *= factor
    limit = min(int(derived), MAX_POSITIONS)
    default = limit
    if any(str(rp.get("rope_type") or rp.get("type")) == "longrope" for rp in rope_sets):
        original = text.opt_int("original_max_position_embeddings") or top.opt_int("original_max_position_embeddings")
        default = min(original or limit, limit)
    return limit, default, key


def _rope_cache_positions(text: _Cfg, max_pos: int) -> int:
    """Positions in vLLM's rotary cos/sin cache (a replicated buffer counted with the weights).

    This is also vLLM's derived maximum model length: YaRN scales the original context by its
    factor; linear and dynamic scaling scale max_position_embeddings; Llama 3 / LongRoPE do not.
    """
    key = "rope_scaling" if text.data.get("rope_scaling") else "rope_parameters"  # transformers 5 renamed it
    scaling = text.data.get(key) or {}
    nested = _rope_parameter_sets(text)
    if len(nested) > 1:  # one set per layer type (Gemma 3 through transformers 5): the largest cache
        return max(_rope_cache_positions(_Cfg({**text.data, key: rp}, text.prefix), max_pos) for rp in nested)
    if isinstance(scaling, Mapping):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "")
        if kind not in {"yarn", "deepseek_yarn", "dynamic", "linear"}:
            return max_pos
        rope = _Cfg(scaling, f"{text.prefix}:{key}")
        factor = rope.float_("factor", 1.0, maximum=1024)
        if kind in {"yarn", "deepseek_yarn"} and rope.has("original_max_position_embeddings"):
            original = rope.int_("original_max_position_embeddings", limit=MAX_POSITIONS)
            return min(int(original * factor), MAX_POSITIONS)
        if kind in {"dynamic", "linear"}:
            return min(int(max_pos * factor), MAX_POSITIONS)
    return max_pos


def _attention(text: _Cfg, window: int | None = None, chunk: int | None = None) -> Attention:
    hidden = text.int_("hidden_size")
    heads = text.int_("num_attention_heads")
    kv_heads = text.int_("num_key_value_heads", heads) if text.has("num_key_value_heads") else heads
    if kv_heads > heads or heads % kv_heads:
        raise SizingError(f"{text.prefix}:num_key_value_heads", kv_heads, f"a divisor of num_attention_heads ({heads})")
    head_dim = text.int_("head_dim") if text.has("head_dim") else hidden // heads
    if head_dim < 1:
        raise SizingError(f"{text.prefix}:head_dim", head_dim, "an integer >= 1")
    return Attention(heads, kv_heads, head_dim, head_dim, sliding_window=window, chunk_size=chunk)


def _layer_types(text: _Cfg, n: int) -> list[str] | None:
    types = text.list_("layer_types")
    if types is None:
        return None
    if len(types) < n:
        raise SizingError(f"{text.prefix}:layer_types", f"{len(types)} entries", f"{n} entries (num_hidden_layers)")
    return [str(t) for t in types[:n]]


def _sliding_pattern(text: _Cfg, model_type: str, n: int) -> list[bool]:
    """Which layers use a sliding window, following vLLM's per-family rules."""
    window = text.data.get("sliding_window")
    types = _layer_types(text, n)
    if types is not None:
        return [t == "sliding_attention" for t in types]
    if not isinstance(window, int) or window <= 0:
        return [False] * n
    if model_type in {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_5_vl"}:
        if not text.bool_("use_sliding_window", False):
            return [False] * n
        first = text.int_("max_window_layers", n, minimum=0)
        return [i >= first for i in range(n)]
    if model_type == "gemma2":
        return [i % 2 == 0 for i in range(n)]
    if model_type in {"gemma3", "gemma3_text"}:
        pattern = text.int_("sliding_window_pattern", 6)
        return [(i + 1) % pattern != 0 for i in range(n)]
    return [True] * n  # Mistral v0.1-style: every layer slides


def _dense(text: _Cfg, key: str = "intermediate_size", gated: bool = True) -> DenseMLP:
    return DenseMLP(text.int_(key), gated)


def _family_llama(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    sliding = _sliding_pattern(text, model_type, n)
    window = text.data.get("sliding_window")
    if model_type == "cohere2" and isinstance(window, int):
        window += 1  # commandr.py (0.33.0) L237-244: Cohere's window sees sliding_window + 1 tokens
    qk_norms = model_type == "cohere" and text.bool_("use_qk_norm", False)  # Command R+ (L207, L257-263)
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        att = _attention(text, window=w)
        layers.append(Layer(replace(att, sharded_qk_norms=True) if qk_norms else att, _dense(text)))
    return layers, {}


def _family_phi2(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    return [Layer(_attention(text), _dense(text, gated=False)) for _ in range(n)], {}


_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def _has_experts(text: _Cfg) -> bool:
    return any(text.has(k) and text.data.get(k) not in (0, 1) for k in _EXPERT_KEYS)


def _moe_from(text: _Cfg, model_type: str) -> MoE:
    experts = None
    for key in _EXPERT_KEYS:
        if text.has(key):
            experts = text.int_(key)
            break
    if experts is None:
        raise SizingError(f"{text.prefix}:num_experts", None, "the number of experts (num_local_experts/num_experts)")
    top_k_key = next((k for k in ("num_experts_per_tok", "experts_per_token", "moe_k") if text.has(k)), "")
    top_k = text.int_(top_k_key) if top_k_key else 2
    key = "moe_intermediate_size" if text.has("moe_intermediate_size") else "intermediate_size"
    expert = text.int_(key)
    shared = 0
    for shared_key in ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size", "share_expert_dim"):
        if text.has(shared_key):
            shared = text.int_(shared_key, minimum=0)
            break
    if not shared and text.has("shared_intermediate_size") and model_type != "granitemoehybrid":
        shared = text.int_("shared_intermediate_size", minimum=0)
    if not shared and text.has("n_shared_experts"):
        shared = text.int_("n_shared_experts", minimum=0) * expert
    return MoE(experts, top_k, expert, shared)


def _moe_layers(text: _Cfg, n: int) -> list[bool]:
    """Which layers hold experts, by the family's key (vLLM reads the same ones).

    ``mlp_only_layers`` / ``decoder_sparse_step`` (Qwen MoE), ``first_k_dense_replace`` and an
    integer ``moe_layer_freq`` (DeepSeek, GLM, Step), a per-layer ``moe_layer_freq`` list (MiniMax M3,
    MiMo-V2), ``mlp_layer_types`` ("dense"/"sparse"); otherwise every layer.
    """
    freq = text.data.get("moe_layer_freq")
    if isinstance(freq, list):
        if len(freq) < n:
            raise SizingError(f"{text.prefix}:moe_layer_freq", f"{len(freq)} entries", f"{n} entries")
        return [bool(v) for v in freq[:n]]
    kinds = text.list_("mlp_layer_types")
    if kinds is not None and len(kinds) >= n:
        return [str(k) in {"sparse", "moe"} for k in kinds[:n]]
    dense_only = {v for v in (text.list_("mlp_only_layers") or []) if isinstance(v, int) and not isinstance(v, bool)}
    step = text.int_("decoder_sparse_step", 1)
    first_dense = text.int_("first_k_dense_replace", 0, minimum=0)
    every = text.int_("moe_layer_freq", 1) if isinstance(freq, int) else 1
    return [i not in dense_only and (i + 1) % step == 0 and i >= first_dense and i % every == 0 for i in range(n)]


def _dense_ffn(text: _Cfg) -> DenseMLP:
    key = "dense_intermediate_size" if text.has("dense_intermediate_size") else "intermediate_size"
    return DenseMLP(text.int_(key))


def _family_moe(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    sliding = _sliding_pattern(text, model_type, n)
    window = text.data.get("sliding_window")
    moe = _moe_from(text, model_type)
    placement = _moe_layers(text, n)
    dense = _dense_ffn(text)
    indexed = _minimax_m3_sparse_layers(text, n)
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        att = _attention(text, window=w)
        if model_type == "gpt_oss":
            att = Attention(att.num_heads, att.num_kv_heads, att.head_dim, att.v_head_dim, w, sinks=True)
        if indexed[i]:
            att = replace(att, index_head_dim=indexed[i])
        layers.append(Layer(att, moe if placement[i] else dense))
    return layers, {"mtp_layers": _mtp_layers(text)}


def _minimax_m3_sparse_layers(text: _Cfg, n: int) -> list[int]:
    """MiniMax M3: the index head size of each layer that runs the sparse branch (0: dense attention).

    ``_sparse_attention_layer_ids`` (vllm/models/minimax_m3/nvidia/model.py 0.33.0 L99-107): the
    layers whose ``sparse_attention_config.sparse_attention_freq`` entry is non-zero; none without
    the key. Their index head size is ``sparse_index_dim`` (L441).
    """
    cfg = text.data.get("sparse_attention_config")
    if not isinstance(cfg, Mapping) or cfg.get("sparse_attention_freq") is None:
        return [0] * n
    sparse = _Cfg(cfg, f"{text.prefix}:sparse_attention_config")
    freq = sparse.list_("sparse_attention_freq") or []
    if len(freq) < n:
        raise SizingError(f"{sparse.prefix}:sparse_attention_freq", f"{len(freq)} entries", f"{n} entries")
    dim = sparse.int_("sparse_index_dim")
    return [dim if f != 0 else 0 for f in freq[:n]]


def _mtp_layers(text: _Cfg) -> int:
    # vLLM 0.33.0 config/speculative.py reads n_predict from these (L735-826, L998-1020, L1131-1142)
    for key in ("num_nextn_predict_layers", "num_mtp_modules", "mtp_num_layers", "mtp_num_hidden_layers"):
        if text.has(key):
            return text.int_(key, 0, minimum=0)
    return 0


def _family_mla(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    heads = text.int_("num_attention_heads")
    q_lora = text.opt_int("q_lora_rank")
    mla = MLA(
        heads,
        q_lora,
        text.int_("kv_lora_rank"),
        text.int_("qk_nope_head_dim"),
        text.int_("qk_rope_head_dim"),
        text.int_("v_head_dim"),
    )
    if text.has("index_topk") and text.has("index_head_dim"):
        # Sparse attention (DeepSeek V3.2 / GLM-5): vllm/model_executor/models/deepseek_v2.py builds an
        # indexer with its own cache on every layer unless index_topk_freq / index_topk_pattern skip it.
        mla = MLA(
            mla.num_heads,
            mla.q_lora_rank,
            mla.kv_lora_rank,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim,
            index_head_dim=text.int_("index_head_dim"),
        )
    has_experts = _has_experts(text)
    moe = _moe_from(text, model_type) if has_experts else None
    placement = _moe_layers(text, n)
    dense = _dense(text)
    freq = text.int_("index_topk_freq", 1)
    pattern = text.data.get("index_topk_pattern")
    offset = text.int_("index_skip_topk_offset", 0, minimum=0)
    layers = []
    for i in range(n):
        layer_mla = mla
        if mla.index_head_dim:
            skip = max(i - offset + 1, 0) % freq != 0 or (
                isinstance(pattern, list | str) and i < len(pattern) and pattern[i] == "S"
            )
            if skip:
                layer_mla = replace(mla, index_head_dim=0)
        layers.append(Layer(layer_mla, moe if moe is not None and placement[i] else dense))
    return layers, {"mtp_layers": _mtp_layers(text)}


#: DeepSeek V4 compress ratios vLLM builds (vllm/v1/attention/backends/mla/sparse_swa.py 0.33.0 L60-72
#: accepts 1, 2, 4 and 128; the model file only has caches for 4 and 128: attention.py L302, compressor.py L158).
_DSV4_RATIOS = (1, 4, 128)


def _family_deepseek_v4(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """DeepSeek V4 as vllm/models/deepseek_v4 (0.33.0) builds it.

    ``compress_ratios[i]`` (0 = sliding window only, as ``max(1, ...)`` in attention.py L239-242) picks
    each layer's caches; every layer is a mixture of experts (nvidia/model.py L607-613) with
    ``n_shared_experts`` shared experts of ``moe_intermediate_size`` (L320-333).
    """
    n = text.int_("num_hidden_layers")
    ratios = _dsv4_compress_ratios(text, n)
    heads = text.int_("num_attention_heads")
    groups = text.int_("o_groups")
    if heads % groups:
        raise SizingError(f"{text.prefix}:o_groups", groups, f"a divisor of num_attention_heads ({heads})")
    moe = _moe_from(text, model_type)
    layers = []
    for i in range(n):
        ratio = max(1, ratios[i]) if isinstance(ratios[i], int) and not isinstance(ratios[i], bool) else -1
        if ratio not in _DSV4_RATIOS:
            raise SizingError(f"{text.prefix}:compress_ratios[{i}]", ratios[i], "0, 4 or 128")
        mixer = CompressedSparseMLA(
            heads,
            text.int_("q_lora_rank"),
            text.int_("head_dim"),
            text.int_("qk_rope_head_dim"),
            text.int_("o_lora_rank"),
            groups,
            ratio,
            text.int_("sliding_window"),
            text.int_("index_n_heads"),
            text.int_("index_head_dim"),
            text.int_("hc_mult", 1),
        )
        layers.append(Layer(mixer, moe))
    return layers, {"mtp_layers": _mtp_layers(text)}


def _dsv4_compress_ratios(text: _Cfg, n: int) -> list[Any]:
    """Per-layer compress ratios: ``compress_rates[layer_types[i]]`` as vLLM reads them (attention.py L239-240).

    transformers' ``DeepseekV4Config`` turns the checkpoint's ``compress_ratios`` into ``layer_types``
    plus ``compress_rates``; a config read as written still has ``compress_ratios`` (the same numbers,
    vllm/transformers_utils/deepseek_v4_utils.py L6-18).
    """
    rates = text.data.get("compress_rates")
    types = text.list_("layer_types")
    if isinstance(rates, Mapping) and types is not None and len(types) >= n:
        return [rates.get(t, 0) for t in types[:n]]
    ratios = text.list_("compress_ratios")
    if ratios is None or len(ratios) < n:
        raise SizingError(f"{text.prefix}:compress_ratios", ratios and f"{len(ratios)} entries", f"{n} entries")
    return ratios


def _deepseek_v4_experts(text: _Cfg, quant: Quantization | None) -> Quantization | None:
    """DeepSeek V4's experts: ``expert_dtype`` fp4 (the default) is MXFP4, fp8 the linear layers' format.

    vllm/models/deepseek_v4/quant_config.py (0.33.0) L63-115: ``expert_dtype`` missing means ``fp4``,
    served by the MXFP4 MoE method (4-bit values, one UE8M0 byte per 32). ModelOpt NVFP4 experts
    (``moe_quant_algo``) keep 4-bit values with one fp8 scale per 16.
    """
    qc = text.data.get("quantization_config")
    if quant is not None and quant.method == "compressed-tensors" and isinstance(qc, Mapping):
        return _compressed_tensors_by_target(qc, quant)
    if quant is None or quant.method != "fp8":
        return quant
    if isinstance(qc, Mapping) and str(qc.get("moe_quant_algo") or "").upper() == "NVFP4":
        return replace(quant, experts=Quantization("modelopt_fp4", 4, 16, 1.0))
    if text.str_("expert_dtype", "fp4") == "fp8":
        return quant
    return replace(quant, experts=Quantization("mxfp4", 4, 32, 1.0))


def _compressed_tensors_by_target(qc: Mapping[str, Any], quant: Quantization) -> Quantization:
    """Mixed compressed-tensors checkpoints (RedHatAI's DeepSeek V4 NVFP4-FP8): one scheme per target.

    A group whose ``targets`` name the attention projections sets the linear layers' format (fp8
    blocks: one fp32 scale per block); a group naming the ``ffn`` projections sets the experts'
    (4-bit float: NVFP4, one fp8 scale per ``group_size``).
    """
    groups = qc.get("config_groups")
    base, experts = quant, None
    for group in groups.values() if isinstance(groups, Mapping) else ():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        targets = " ".join(str(t) for t in group.get("targets") or [])
        w = _Cfg(weights, "config.json:quantization_config.config_groups.weights")
        bits = w.int_("num_bits", 8, limit=16)
        if "ffn" in targets and bits == 4:
            experts = Quantization("compressed-tensors", 4, w.int_("group_size", 16), 1.0)
        elif "attn" in targets and bits == 8:
            block = weights.get("block_structure")
            size = 0
            if isinstance(block, list) and len(block) == 2 and all(type(v) is int and v > 0 for v in block):
                size = block[0] * block[1]
            base = Quantization("compressed-tensors", 8, size, 4.0)
    return replace(base, experts=experts) if experts is not None else base


def _family_llama4(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    chunk = text.opt_int("attention_chunk_size")
    no_rope = text.list_("no_rope_layers")
    step = text.int_("interleave_moe_layer_step", 1)
    moe = MoE(
        text.int_("num_local_experts"),
        text.int_("num_experts_per_tok", 1),
        text.int_("intermediate_size"),
        shared_intermediate_size=text.int_("intermediate_size"),
    )
    dense = DenseMLP(text.int_("intermediate_size_mlp")) if text.has("intermediate_size_mlp") else _dense(text)
    layers = []
    for i in range(n):
        # no_rope_layers[i] == 1 means the layer uses RoPE and chunked local attention;
        # every 4th layer (NoPE) attends globally.
        uses_rope = bool(no_rope[i]) if no_rope is not None and i < len(no_rope) else (i + 1) % 4 != 0
        att = _attention(text, chunk=chunk if uses_rope and chunk else None)
        layers.append(Layer(att, moe if (i + 1) % step == 0 else dense))
    return layers, {}


def _family_qwen3_next(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    types = _layer_types(text, n)
    interval = text.int_("full_attention_interval", 4)
    linear = LinearAttention(
        text.int_("linear_num_key_heads"),
        text.int_("linear_num_value_heads"),
        text.int_("linear_key_head_dim"),
        text.int_("linear_value_head_dim"),
        text.int_("linear_conv_kernel_dim", 4),
    )
    att = _attention(text)
    att = Attention(att.num_heads, att.num_kv_heads, att.head_dim, att.v_head_dim, gated_q=True)
    ffn: FeedForward = _moe_from(text, model_type) if _has_experts(text) else _dense(text)
    layers = []
    for i in range(n):
        full = types[i] == "full_attention" if types else (i + 1) % interval == 0
        layers.append(Layer(att if full else linear, ffn))
    return layers, {"mtp_layers": _mtp_layers(text)}


def _family_kimi_k3(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """Kimi K3 (``KimiK3ForConditionalGeneration``) as vllm/models/kimi_k3/nvidia (0.33.0) builds it.

    Layer ``i`` is KDA when ``i + 1`` is in ``linear_attn_config.kda_layers`` (1-based,
    transformers_utils/configs/kimi_linear.py L157-161), else MLA (model.py L715-770); vLLM does not
    read ``full_attn_layers`` beyond asserting it is set (kimi_linear.py L118-120). A layer is a
    mixture of experts when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``
    (model.py L700-706), else the dense MLP of ``intermediate_size`` (L778-790). Experts are latent
    (``routed_expert_hidden_size``, L383-390, L476-504) with ``num_shared_experts x
    moe_intermediate_size`` shared (L449-466).
    """
    n = text.int_("num_hidden_layers")
    lin = text.data.get("linear_attn_config")
    if not isinstance(lin, Mapping):
        raise SizingError(f"{text.prefix}:linear_attn_config", lin, "a JSON object with kda_layers")
    kda_cfg = _Cfg(lin, f"{text.prefix}:linear_attn_config")
    if kda_cfg.data.get("use_full_rank_gate") is not True:
        # Without it vLLM builds Kimi-Linear's KimiLinearGatedDeltaNetAttention (model.py L718-734).
        raise SizingError(
            f"{kda_cfg.prefix}:use_full_rank_gate", kda_cfg.data.get("use_full_rank_gate"), "true (Kimi K3's KDA)"
        )
    if text.data.get("mla_use_nope") is not True:
        raise SizingError(f"{text.prefix}:mla_use_nope", text.data.get("mla_use_nope"), "true (NoPE-only MLA)")
    kda_layers = kda_cfg.list_("kda_layers")
    if kda_layers is None or not all(type(v) is int and 1 <= v <= n for v in kda_layers):
        raise SizingError(f"{kda_cfg.prefix}:kda_layers", kda_layers, f"a list of 1-based layer numbers up to {n}")
    if kda_cfg.list_("full_attn_layers") is None:
        raise SizingError(f"{kda_cfg.prefix}:full_attn_layers", None, "a list (vLLM asserts it is set)")
    heads = kda_cfg.int_("num_heads")
    head_dim = kda_cfg.int_("head_dim", limit=4096)
    kda = LinearAttention(
        heads, heads, head_dim, head_dim, kda_cfg.int_("short_conv_kernel_size", 4), kda=True, recurrent_dtype_bytes=4
    )
    mla = MLA(
        text.int_("num_attention_heads"),
        text.opt_int("q_lora_rank"),
        text.int_("kv_lora_rank"),
        text.int_("qk_nope_head_dim"),
        text.int_("qk_rope_head_dim"),
        text.int_("v_head_dim"),
        output_gate=text.bool_("mla_use_output_gate", False),
        rope=False,
    )
    experts = text.int_("num_experts", limit=_MAX_REASONABLE["num_experts"])
    expert_size = text.int_("moe_intermediate_size")
    moe = MoE(
        experts,
        text.int_("num_experts_per_token"),
        expert_size,
        shared_intermediate_size=text.int_("num_shared_experts", 0, minimum=0) * expert_size,
        latent_size=text.int_("routed_expert_hidden_size") if text.has("routed_expert_hidden_size") else 0,
        latent_norm=text.bool_("latent_moe_use_norm", True),
        min_intermediate_per_partition=text.int_("min_moe_intermediate_per_partition", 256),
    )
    dense = DenseMLP(text.int_("intermediate_size"))
    first_dense = text.int_("first_k_dense_replace", 0, minimum=0)
    every = text.int_("moe_layer_freq", 1)
    kda_set = set(kda_layers)
    layers = [
        Layer(kda if i + 1 in kda_set else mla, moe if i >= first_dense and i % every == 0 else dense) for i in range(n)
    ]
    return layers, {"mtp_layers": _mtp_layers(text)}


def _kimi_k3_quantization(text: _Cfg, quant: Quantization | None) -> Quantization | None:
    """Kimi K3's compressed-tensors ``mxfp4-pack-quantized`` checkpoint, as vLLM 0.33 serves it.

    ``KimiK3ForConditionalGenerationConfig`` rewrites its ``quant_method`` to ``mxfp4``
    (model_executor/models/config.py 0.33.0 L492-522), so ``Mxfp4Config`` loads it: built without
    the checkpoint's ``ignore`` list (quantization/mxfp4.py L66-68), it keeps every linear layer
    unquantized (L91-105, latent projections included) and quantizes only the routed experts
    (``Mxfp4MoEMethod``: 4-bit values, one uint8 scale per 32, L661-720). Other compressed-tensors
    formats would keep compressed-tensors' per-layer ``ignore`` matching, which fitgate does not
    derive for this model: refused.
    """
    if quant is None or quant.method != "compressed-tensors":
        return quant
    qc = text.data.get("quantization_config")
    fmt = qc.get("format") if isinstance(qc, Mapping) else None
    if fmt != "mxfp4-pack-quantized":
        raise SizingError(
            "config.json:quantization_config.format",
            fmt,
            "mxfp4-pack-quantized (the compressed-tensors layout of Kimi K3 fitgate sizes)",
        )
    return Quantization("mxfp4", 4, 32, 1.0, experts_only=True)


def _mamba2(text: _Cfg, prefix: str = "mamba_") -> Mamba:
    def key(*names: str) -> str:
        for name in names:
            if text.has(name):
                return name
        return names[0]

    heads = text.int_(key(f"{prefix}num_heads", f"{prefix}n_heads", "mamba_num_heads"))
    head_dim = text.int_(key(f"{prefix}head_dim", f"{prefix}d_head", "mamba_head_dim"))
    return Mamba(
        version=2,
        d_inner=heads * head_dim,
        d_state=text.int_(key("ssm_state_size", f"{prefix}d_state", "mamba_d_state")),
        d_conv=text.int_(key("conv_kernel", f"{prefix}d_conv", "mamba_d_conv")),
        n_groups=text.int_(key("n_groups", f"{prefix}n_groups", "mamba_n_groups"), 1),
        num_heads=heads,
        head_dim=head_dim,
    )


#: ``layers_block_type`` names (Nemotron 3 configs; transformers 5 writes the second spelling).
_BLOCK_TYPE_CHARS = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}


def _family_nemotron_h(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    pattern = text.str_("hybrid_override_pattern")
    block_types = text.list_("layers_block_type")
    if not pattern and block_types is not None:
        # Nemotron 3 configs give the per-layer kinds instead of the pattern string (transformers 5).
        unknown = next((t for t in block_types if t not in _BLOCK_TYPE_CHARS), None)
        if unknown is not None:
            raise SizingError(
                f"{text.prefix}:layers_block_type",
                unknown,
                "mamba, attention, mlp or moe (or linear_attention, full_attention)",
            )
        pattern = "".join(_BLOCK_TYPE_CHARS[t] for t in block_types)
    n = text.int_("num_hidden_layers", len(pattern) or None)
    if len(pattern) != n or not re.fullmatch(r"[M*\-E]+", pattern):
        raise SizingError(
            f"{text.prefix}:hybrid_override_pattern",
            pattern or None,
            f"{n} characters of M (mamba), * (attention), - (MLP)",
        )
    mamba = _mamba2(text)
    layers: list[Layer] = []
    for ch in pattern:
        if ch == "M":
            layers.append(Layer(mamba, None))
        elif ch == "*":
            layers.append(Layer(_attention(text), None))
        elif ch == "E":
            # relu2 experts: up and down projections only (vllm nemotron_h.py NemotronHMoE)
            moe = _moe_from(text, model_type)
            latent = text.int_("moe_latent_size", 0, minimum=0) if text.has("moe_latent_size") else 0
            layers.append(Layer(None, replace(moe, gated=False, latent_size=latent)))
        else:
            layers.append(Layer(None, DenseMLP(text.int_("intermediate_size"), gated=False)))
    return layers, {}


def _family_jamba(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    hidden = text.int_("hidden_size")
    period, offset = text.int_("attn_layer_period", 8), text.int_("attn_layer_offset", 4, minimum=0)
    e_period, e_offset = text.int_("expert_layer_period", 2), text.int_("expert_layer_offset", 1, minimum=0)
    d_inner = text.int_("mamba_expand", 2) * hidden
    mamba = Mamba(
        version=1,
        d_inner=d_inner,
        d_state=text.int_("mamba_d_state", 16),
        d_conv=text.int_("mamba_d_conv", 4),
        dt_rank=text.int_("mamba_dt_rank", -(-hidden // 16)),
    )
    moe = _moe_from(text, model_type)
    layers = []
    for i in range(n):
        mixer: Mixer = _attention(text) if i % period == offset else mamba
        layers.append(Layer(mixer, moe if i % e_period == e_offset else _dense(text)))
    return layers, {}


def _family_granite_hybrid(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    types = _layer_types(text, n) or ["mamba"] * n
    expand = text.int_("mamba_expand", 2)
    heads = text.int_("mamba_n_heads")
    mamba = Mamba(
        version=2,
        d_inner=expand * text.int_("hidden_size"),
        d_state=text.int_("mamba_d_state"),
        d_conv=text.int_("mamba_d_conv", 4),
        n_groups=text.int_("mamba_n_groups", 1),
        num_heads=heads,
        head_dim=text.int_("mamba_d_head") if text.has("mamba_d_head") else expand * text.int_("hidden_size") // heads,
    )
    experts = text.int_("num_local_experts", 0, minimum=0)
    ffn: FeedForward
    if experts:
        ffn = MoE(
            experts,
            text.int_("num_experts_per_tok"),
            text.int_("intermediate_size"),
            text.int_("shared_intermediate_size", 0, minimum=0),
        )
    else:
        ffn = DenseMLP(
            text.int_("shared_intermediate_size")
            if text.has("shared_intermediate_size")
            else text.int_("intermediate_size")
        )
    return [Layer(_attention(text) if t == "attention" else mamba, ffn) for t in types], {}


def _family_gemma4(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """Gemma 4 as vllm/model_executor/models/gemma4.py (0.33.0) builds it.

    ``layer_types`` picks sliding (``head_dim``, ``num_key_value_heads``, ``sliding_window``) or
    global attention (``global_head_dim``, ``num_global_key_value_heads``; K and V from one projection
    when ``attention_k_eq_v``) per layer (L449-451, L576-581); the last ``num_kv_shared_layers`` layers
    read an earlier layer's cache (L403-406, L476-492); every layer has the dense MLP, doubled on
    KV-shared layers with ``use_double_wide_mlp`` (L596-606), plus an expert block when
    ``num_experts`` is set (L630-648: ``top_k_experts``, ``moe_intermediate_size``).
    """
    n = text.int_("num_hidden_layers")
    types = _layer_types(text, n)
    if types is None:
        raise SizingError(f"{text.prefix}:layer_types", None, f"{n} entries of sliding_attention / full_attention")
    heads = text.int_("num_attention_heads")
    window = text.int_("sliding_window")
    local_dim = text.int_("head_dim")
    global_dim = text.int_("global_head_dim", local_dim)
    local_kv = text.int_("num_key_value_heads", heads)
    k_eq_v = text.bool_("attention_k_eq_v", False)
    global_kv = text.int_("num_global_key_value_heads", local_kv) if k_eq_v else local_kv
    shared = text.int_("num_kv_shared_layers", 0, minimum=0)
    first_shared = n - shared
    inter = text.int_("intermediate_size")
    double = text.bool_("use_double_wide_mlp", False)
    experts = text.data.get("num_experts")
    # transformers 5.24 turns global_head_dim / num_global_key_value_heads into per-layer overrides
    # (``per_layer_config``, keyed by the zero-padded layer index), which vLLM reads (L576-581).
    per_layer = text.data.get("per_layer_config")
    overrides = per_layer if isinstance(per_layer, Mapping) else {}
    layers = []
    for i in range(n):
        sliding = types[i] == "sliding_attention"
        kv, dim = (local_kv, local_dim) if sliding else (global_kv, global_dim)
        override = overrides.get(f"{i:02d}", overrides.get(str(i)))
        if isinstance(override, Mapping):
            layer_cfg = _Cfg(override, f"{text.prefix}:per_layer_config.{i:02d}")
            dim = layer_cfg.int_("head_dim", dim, limit=4096)
            kv = layer_cfg.int_("num_key_value_heads", kv, limit=4096)
        att = Attention(
            heads,
            kv,
            dim,
            dim,
            sliding_window=window if sliding else None,
            k_eq_v=k_eq_v and not sliding,
            kv_shared=shared > 0 and i >= first_shared,
        )
        width = inter * (2 if double and shared > 0 and i >= first_shared else 1)
        ffn: FeedForward = DenseMLP(width)
        if experts is not None:
            expert_key = "moe_intermediate_size" if text.has("moe_intermediate_size") else "expert_intermediate_size"
            ffn = MoE(text.int_("num_experts"), text.int_("top_k_experts"), text.int_(expert_key), width)
        layers.append(Layer(att, ffn))
    return layers, {}


def _per_layer_embedding(text: _Cfg) -> PerLayerEmbedding | None:
    """Gemma 4 E2B/E4B per-layer embeddings, or None (26B / 31B).

    gemma4.py (0.33.0) L999-1005 reads ``hidden_size_per_layer_input`` (0 or absent: none) and
    ``vocab_size_per_layer_input`` (default ``vocab_size``).
    """
    width = text.int_("hidden_size_per_layer_input", 0, minimum=0) if text.has("hidden_size_per_layer_input") else 0
    if not width:
        return None
    vocab = text.int_("vocab_size_per_layer_input", text.int_("vocab_size"), limit=_MAX_REASONABLE["vocab_size"])
    return PerLayerEmbedding(width, vocab)


def _family_mimo_v2(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """MiMo-V2-Flash as vllm/model_executor/models/mimo_v2.py (0.33.0) builds it.

    ``hybrid_layer_pattern[i] == 1`` is a sliding-window layer (L499-500) with its own heads
    (``swa_num_attention_heads``, ``swa_num_key_value_heads``, ``swa_head_dim``, ``swa_v_head_dim``),
    window ``sliding_window_size`` and, with ``add_swa_attention_sink_bias``, one sink per head
    (L409-427, L314-316); 0 is global attention (``num_attention_heads``, ``num_key_value_heads``,
    ``head_dim``, ``v_head_dim``, no sinks: L431-447). K and V head sizes differ, so both the
    projections (QKVParallelLinear ``v_head_size``, L284-293; o_proj ``heads x v_head_dim``, L295-301)
    and the cache cell (``head_size + head_size_v``, L346-359) use each. A layer is MoE where the
    ``moe_layer_freq`` list says so (L491-497: ``n_routed_experts``, ``num_experts_per_tok``,
    ``moe_intermediate_size``, no shared expert), else a dense ``intermediate_size`` MLP.
    """
    n = text.int_("num_hidden_layers")
    pattern = text.list_("hybrid_layer_pattern")
    if pattern is None or len(pattern) < n or any(v not in (0, 1) or isinstance(v, bool) for v in pattern[:n]):
        raise SizingError(f"{text.prefix}:hybrid_layer_pattern", pattern, f"{n} entries of 0 (global) or 1 (sliding)")
    head_dim = text.int_("head_dim")
    full = _attention(text)
    full = Attention(full.num_heads, full.num_kv_heads, head_dim, text.int_("v_head_dim", head_dim, limit=4096))
    swa_heads = text.int_("swa_num_attention_heads", limit=4096)
    swa_kv = text.int_("swa_num_key_value_heads", limit=4096)
    if swa_kv > swa_heads or swa_heads % swa_kv:
        raise SizingError(
            f"{text.prefix}:swa_num_key_value_heads", swa_kv, f"a divisor of swa_num_attention_heads ({swa_heads})"
        )
    swa_dim = text.int_("swa_head_dim", limit=4096)
    swa = Attention(
        swa_heads,
        swa_kv,
        swa_dim,
        text.int_("swa_v_head_dim", swa_dim, limit=4096),
        sliding_window=text.int_("sliding_window_size", limit=MAX_POSITIONS),
        sinks=text.bool_("add_swa_attention_sink_bias", False),
    )
    moe = _moe_from(text, model_type)
    placement = _moe_layers(text, n) if isinstance(text.data.get("moe_layer_freq"), list) else [False] * n
    dense = _dense(text)
    return [Layer(swa if pattern[i] == 1 else full, moe if placement[i] else dense) for i in range(n)], {}


def _family_lfm2(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """LFM2 as vllm/model_executor/models/lfm2.py (0.33.0) builds it.

    ``layer_types[i] == "full_attention"`` is GQA attention, ``"conv"`` a short convolution of width
    ``conv_dim`` and kernel ``conv_L_cache`` (L435, L298-300, L573-576). The MLP width is adjusted as
    the model does it (L229-232): ``int(2 x intermediate_size / 3)`` when ``block_auto_adjust_ff_dim``,
    times ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``.
    """
    n = text.int_("num_hidden_layers")
    types = _layer_types(text, n)
    if types is None:
        raise SizingError(f"{text.prefix}:layer_types", None, f"{n} entries of conv / full_attention")
    inter = text.int_("intermediate_size")
    if text.bool_("block_auto_adjust_ff_dim", False):
        inter = int(2 * inter / 3)
        inter = int(text.float_("block_ffn_dim_multiplier", 1.0, maximum=64) * inter)
        multiple = text.int_("block_multiple_of", 256)
        inter = multiple * -(-inter // multiple)
    conv = ShortConv(text.int_("conv_dim", text.int_("hidden_size")), text.int_("conv_L_cache", 3))
    return [Layer(_attention(text) if t == "full_attention" else conv, DenseMLP(inter)) for t in types], {}


def _family_lfm2_moe(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """LFM2-MoE as vllm/model_executor/models/lfm2_moe.py (0.33.0) builds it.

    ``layer_types[i] == "full_attention"`` is GQA attention with q/k norms (L433-437, L212-243),
    ``"conv"`` a short convolution of width ``hidden_size`` and kernel ``conv_L_cache`` (L343-350,
    state L560-567). The first ``num_dense_layers`` layers have a dense ``intermediate_size`` MLP
    (L295-301, L353-359, no width adjustment), the rest ``num_experts`` experts of
    ``moe_intermediate_size``, ``num_experts_per_tok`` routed, no shared expert (L128-150).
    """
    n = text.int_("num_hidden_layers")
    types = _layer_types(text, n)
    if types is None:
        raise SizingError(f"{text.prefix}:layer_types", None, f"{n} entries of conv / full_attention")
    dense_layers = text.int_("num_dense_layers", 0, minimum=0, limit=n)
    dense = _dense(text)
    moe = MoE(text.int_("num_experts"), text.int_("num_experts_per_tok"), text.int_("moe_intermediate_size"))
    conv = ShortConv(text.int_("hidden_size"), text.int_("conv_L_cache", 3))
    return [
        Layer(_attention(text) if t == "full_attention" else conv, dense if i < dense_layers else moe)
        for i, t in enumerate(types)
    ], {}


def _family_decilm(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    """Llama-Nemotron (DeciLM) as vllm/model_executor/models/nemotron_nas.py (0.33.0) builds it.

    ``block_configs[i]`` gives each layer: ``attention.no_op`` (no attention, no cache, no input norm)
    or Llama attention with ``num_attention_heads // attention.n_heads_in_group`` KV heads (L142-160);
    ``ffn.no_op`` or a SwiGLU MLP of ``ffn.intermediate_size`` or, from ``ffn.ffn_mult``,
    ``int(2 x ffn_mult x hidden / 3)`` rounded up to 256 (L52-62, L162-182). vLLM builds no linear
    replacement (``replace_with_linear``), so such a block is refused.
    """
    n = text.int_("num_hidden_layers")
    blocks = text.list_("block_configs")
    if blocks is None or len(blocks) < n:
        raise SizingError(f"{text.prefix}:block_configs", None if blocks is None else len(blocks), f"{n} blocks")
    hidden = text.int_("hidden_size")
    heads = text.int_("num_attention_heads")
    head_dim = text.int_("head_dim") if text.has("head_dim") else hidden // heads
    layers = []
    for i, block in enumerate(blocks[:n]):
        where = f"{text.prefix}:block_configs[{i}]"
        if not isinstance(block, Mapping):
            raise SizingError(where, block, "an object with attention and ffn")
        parts = []
        for part in ("attention", "ffn"):
            value = block.get(part)
            if not isinstance(value, Mapping):
                raise SizingError(f"{where}.{part}", value, "an object")
            cfg = _Cfg(value, f"{where}.{part}")
            if cfg.bool_("replace_with_linear", False):
                raise UnknownArchitectureError(f"{where}.{part}.replace_with_linear", True, "false (vLLM has none)")
            parts.append(cfg)
        att_cfg, ffn_cfg = parts
        mixer: Mixer | None = None
        if not att_cfg.bool_("no_op", False):
            group = att_cfg.int_("n_heads_in_group", limit=heads)
            if heads % group:
                raise SizingError(f"{att_cfg.prefix}.n_heads_in_group", group, f"a divisor of {heads} heads")
            mixer = Attention(heads, heads // group, head_dim, head_dim)
        ffn: FeedForward | None = None
        if not ffn_cfg.bool_("no_op", False):
            if ffn_cfg.has("ffn_mult"):
                width = int(2 * ffn_cfg.float_("ffn_mult", 1.0, maximum=1024) * hidden / 3)
                width = 256 * -(-width // 256)
            else:
                width = ffn_cfg.int_("intermediate_size", limit=_MAX_REASONABLE["intermediate_size"])
            ffn = DenseMLP(width)
        layers.append(Layer(mixer, ffn))
    return layers, {}


_FAMILIES = {
    "llama": _family_llama,
    "phi2": _family_phi2,
    "moe": _family_moe,
    "mla": _family_mla,
    "kimi_k3": _family_kimi_k3,
    "llama4": _family_llama4,
    "qwen3_next": _family_qwen3_next,
    "nemotron_h": _family_nemotron_h,
    "jamba": _family_jamba,
    "granite_hybrid": _family_granite_hybrid,
    "gemma4": _family_gemma4,
    "lfm2": _family_lfm2,
    "mimo_v2": _family_mimo_v2,
    "lfm2_moe": _family_lfm2_moe,
    "decilm": _family_decilm,
    "deepseek_v4": _family_deepseek_v4,
}


def _parse_vision(config: Mapping[str, Any]) -> VisionEncoder | None:
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return None
    cfg = _Cfg(vision, "config.json:vision_config")
    if not cfg.has("hidden_size") and cfg.has("vt_hidden_size"):
        # MoonViT (Kimi K2.5 / K3): vt_* keys, aliased by KimiK3VisionConfig
        # (vllm/transformers_utils/configs/kimi_k3.py 0.33.0 L79-83)
        cfg = _Cfg(
            {
                "hidden_size": vision.get("vt_hidden_size"),
                "num_hidden_layers": vision.get("vt_num_hidden_layers", 27),
                "intermediate_size": vision.get("vt_intermediate_size", 4096),
            },
            cfg.prefix,
        )
    hidden = cfg.int_("hidden_size", 1152)
    layers = cfg.int_("num_hidden_layers", cfg.int_("depth", 27) if cfg.has("depth") else 27)
    inter = cfg.int_("intermediate_size", 4 * hidden)
    # A ViT block: 4*h^2 attention + 2*h*i MLP (+ biases/norms, ignored); plus a projector h x text hidden.
    params = layers * (4 * hidden * hidden + 2 * hidden * inter)
    return VisionEncoder(hidden, layers, inter, params)
