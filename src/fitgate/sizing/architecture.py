"""The one narrow parser from a Hugging Face ``config.json`` to a typed model description.

Nothing else in fitgate reads raw config keys. The result, :class:`ModelArchitecture`, lists every
decoder layer with its token mixer (attention of some kind, MLA, Mamba or linear attention) and its
feed-forward block (dense or mixture of experts), plus what the weight and activation models need.

The generic keys are read by :mod:`fitgate.sizing.config_reader`; each model family's layers and special
cases by its module in :mod:`fitgate.sizing.families`, found through that package's one registry.
Supported families are those listed in :data:`SUPPORTED_ARCHITECTURES`; anything else is an
:class:`~fitgate.sizing.errors.UnknownArchitectureError` that names the architecture.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from fitgate.sizing.config_reader import (
    MAX_POSITIONS,
    ConfigReader,
    mtp_layers,
    parse_vision,
    rope_cache_positions,
    vllm_max_model_len,
)
from fitgate.sizing.dtypes import CHECKPOINT_STORAGE_DTYPES, normalize_model_dtype
from fitgate.sizing.errors import NotModelledError, SizingError, UnknownArchitectureError
from fitgate.sizing.families import BY_ARCHITECTURE, MODEL_TYPES, ModelTypeTraits
from fitgate.sizing.families.llama import EMBEDDING_ARCHITECTURES
from fitgate.sizing.hf_config import base_model_class, normalize, with_attribute_names
from fitgate.sizing.model import (
    MLA,
    Attention,
    DenseMLP,
    FeedForward,
    Layer,
    LinearAttention,
    Mamba,
    Mixer,
    ModelArchitecture,
    MoE,
    Quantization,
    VisionEncoder,
)
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION, parse_quantization

__all__ = [
    "MAX_POSITIONS",
    "MLA",
    "NOT_SERVED",
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
    "vllm_max_model_len",
]

#: Architectures vLLM 0.33 no longer serves natively (``_PREVIOUSLY_SUPPORTED_MODELS`` in
#: vllm/model_executor/models/registry.py), with the last release that did.
NOT_SERVED: dict[str, str] = {
    "MllamaForConditionalGeneration": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0",
}

#: Architectures (``config.json:architectures[0]``) and the family that reads each, from the registry
#: (:data:`fitgate.sizing.families.FAMILIES`). The families follow vLLM 0.33's model classes
#: (vllm/model_executor/models/registry.py): the same layer pattern keys, the same attention kinds, the
#: same MoE placement rules.
SUPPORTED_ARCHITECTURES: dict[str, str] = {arch: family.name for arch, family in BY_ARCHITECTURE.items()}

_NO_TRAITS = ModelTypeTraits()


def _class_of_model_type(model_type: object) -> str:
    """The class vLLM names for a config without ``architectures``: transformers' base model of its ``model_type``.

    vLLM 0.34.0 ``transformers_utils/config.py`` L984-994 sets ``architectures`` to ``MODEL_MAPPING_NAMES[model_type]``
    (``LlamaModel`` for ``llama``, an embedding model in its registry); a model type transformers does not map needs
    ``hf_overrides`` naming the class (hunt76 F2). Either way the class is fitgate's to look up, or Unknown.
    """
    mapped = base_model_class(model_type)
    if mapped is None:
        exc = UnknownArchitectureError("config.json:architectures", None, "")
        exc.args = (
            f"config.json:architectures: missing, and model_type {str(model_type)[:80]!r} maps to no transformers "
            "model class: vLLM needs --hf-overrides '{\"architectures\": [...]}' naming it, and fitgate cannot tell "
            "which it is (Unknown)",
        )
        raise exc
    return mapped


def _supported_hint(arch: str) -> str:
    """What to expect instead of an unknown architecture: the closest supported names, not all of them."""
    close = difflib.get_close_matches(str(arch), sorted(SUPPORTED_ARCHITECTURES), n=3, cutoff=0.6)
    hint = f"{len(SUPPORTED_ARCHITECTURES)} architectures (docs: Architectures)"
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
    if archs is None or archs == []:
        archs = [_class_of_model_type(config.get("model_type"))]
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SizingError("config.json:architectures", archs, "a list naming the model class")
    arch = archs[0]
    family = BY_ARCHITECTURE.get(arch)
    speculators = config.get("speculators_config")
    if isinstance(speculators, Mapping) and family is None:
        # hunt22 D1: a Speculators drafter (RedHatAI/*-speculator.eagle3): vLLM serves the verifier it names with this
        # checkpoint as its drafter (transformers_utils/config.py maybe_override_with_speculators)
        verifier = speculators.get("verifier")
        name = verifier.get("name_or_path") if isinstance(verifier, Mapping) else None
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            f"a served model: this is a Speculators drafter; vLLM serves its verifier {str(name)[:200]!r} with it. "
            "Plan the verifier with --speculative-config naming this checkpoint (a drafter from another checkpoint "
            "is not counted)",
        )
    if arch in NOT_SERVED:
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            f"the architectures today's vLLM serves; vLLM served {arch} up to {NOT_SERVED[arch]} and dropped it "
            "after, and fitgate does not size it on any release",
        )
    if family is None:
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            _supported_hint(arch),
        )
    config, normalize_notes = normalize(config)
    if family.reads_attribute_names:
        config = with_attribute_names(config)
    top = ConfigReader(config)
    text_data = next(
        (config[k] for k in ("text_config", "language_config", "llm_config") if isinstance(config.get(k), Mapping)),
        None,
    )
    if isinstance(text_data, Mapping):
        text = ConfigReader(
            {**{k: v for k, v in config.items() if k != "text_config"}, **text_data},
            "config.json:text_config",
        )
    else:
        text = top
    model_type = text.str_("model_type", top.str_("model_type"))
    if text.data.get("is_causal") is False:
        # ``--hf-overrides '{"is_causal": false}'`` (gte-Qwen2's model card): vLLM's Llama, Qwen2/3, Gemma 3 and
        # others build encoder-only attention, which keeps no KV cache (models/qwen2.py 0.34.0 L263-270,
        # v1/worker/gpu_model_runner.py get_kv_cache_spec): a plan without a KV pool fitgate does not size
        # (hunt17 G5: it was sized with a causal cache and refused at 131072 tokens on an L4)
        raise NotModelledError(
            f"{text.prefix}:is_causal", False, "encoder-only attention keeps no KV cache; the fit is not checked"
        )
    stated = text.str_("torch_dtype", "") or text.str_("dtype", "") or top.str_("torch_dtype", "") or "bfloat16"
    # hunt204 F2: an FP8 checkpoint's config may state its storage dtype (float8_e4m3fn: RedHatAI's FP8-dynamic Llama 4
    # Scout); vLLM's auto dtype then takes the platform's first (bf16, fp16 below SM80): _resolve_auto_dtype,
    # config/model.py 0.11.0 L1666-1690, 0.34.0 L2467-2508 ("Falling back to"), as fitgate's bfloat16 does
    stated = "bfloat16" if stated.lower() in CHECKPOINT_STORAGE_DTYPES else stated
    dtype = normalize_model_dtype(stated, f"{text.prefix}:torch_dtype")
    layers, extras = family.read_layers(text, model_type)
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
            * ConfigReader(rope_params, f"{text.prefix}:rope_parameters").float_(
                "partial_rotary_factor", 1.0, maximum=1.0
            )
        )
    else:
        rotary_dim = int(head_dim * text.float_("partial_rotary_factor", 1.0, maximum=1.0))
    if explicit_rotary:
        rotary_dim = text.int_("rotary_dim", limit=head_dim)  # MiniMax M2: vLLM reads config.rotary_dim
    if family.rotary_dim is not None:
        rotary_dim = family.rotary_dim(text)
    max_pos = text.int_("max_position_embeddings", 8192)
    rope_positions = rope_cache_positions(text, max_pos)
    max_len_limit, max_len_default, max_len_key = vllm_max_model_len(top, text)
    quant = parse_quantization(config.get("quantization_config") or text.data.get("quantization_config"))
    if family.quantization is not None:
        quant = family.quantization(text, quant)
    traits = MODEL_TYPES.get(model_type, _NO_TRAITS)
    return ModelArchitecture(
        architecture=arch,
        model_type=model_type,
        dtype=dtype,
        hidden_size=hidden,
        vocab_size=text.int_("vocab_size"),
        # some model classes tie lm_head whatever the config says (the family's or the model type's trait)
        tie_word_embeddings=family.always_tied
        or traits.always_tied
        or top.bool_("tie_word_embeddings", text.bool_("tie_word_embeddings", traits.tied_by_default)),
        layers=tuple(layers),
        max_position_embeddings=max_pos,
        rotary_dim=rotary_dim,
        rope_cache_positions=rope_positions,
        max_len_limit=max_len_limit,
        max_len_default=max_len_default,
        max_len_key=max_len_key,
        quantization=quant,
        vision=parse_vision(config),
        mtp_layers=extras.get("mtp_layers", mtp_layers(text)),
        max_capture_size_override=family.max_capture_sizes.get(model_type),
        norm_has_bias=family.norm_has_bias or traits.norm_has_bias,
        attention_bias=bool(text.data.get("attention_bias"))
        or (traits.attention_bias_key is not None and text.bool_(traits.attention_bias_key, False))
        or traits.attention_bias,
        per_layer_embedding=family.per_layer_embedding(text) if family.per_layer_embedding is not None else None,
        attn_res=family.attention_residuals is not None and family.attention_residuals(text),
        mamba_ssm_dtype=_ssm_dtype(text.data, top.data),
        transformers_backend=(
            family.served_by(arch, model_type, any(isinstance(layer.ffn, MoE) for layer in layers))
            if family.served_by is not None
            else None
        ),
        notes=normalize_notes,
        pooling_architecture=arch in EMBEDDING_ARCHITECTURES,
    )


#: The state dtypes vLLM's ``MambaDType`` accepts for ``mamba_ssm_cache_dtype`` (config/cache.py 0.34.0 L310).
MAMBA_SSM_DTYPES = ("auto", "float32", "float16", "bfloat16")


def _ssm_dtype(text: Mapping[str, object], top: Mapping[str, object]) -> str | None:
    """The checkpoint's recurrent-state dtype: ``mamba_ssm_dtype`` (Qwen3.5), ``mamba_ssm_cache_dtype`` (NemotronH)."""
    for data in (text, top):
        for key in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
            value = data.get(key)
            if isinstance(value, str) and value in MAMBA_SSM_DTYPES:
                return value
    return None
