"""The one narrow parser from a Hugging Face ``config.json`` to a typed model description.

Nothing else in fitgate reads raw config keys. The result, :class:`ModelArchitecture`, lists every
decoder layer with its token mixer (attention of some kind, MLA, Mamba or linear attention) and its
feed-forward block (dense or mixture of experts), plus what the weight and activation models need.

Supported families are those listed in :data:`SUPPORTED_ARCHITECTURES`; anything else is an
:class:`~fitgate.sizing.errors.UnknownArchitectureError` that names the architecture.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fitgate.sizing.dtypes import normalize_model_dtype
from fitgate.sizing.errors import SizingError, UnknownArchitectureError

# --------------------------------------------------------------------------------------------
# Token mixers


@dataclass(frozen=True)
class Attention:
    """Softmax attention (MHA when kv heads == heads, GQA when fewer, MQA when one).

    ``sliding_window`` limits attention to the last N tokens; ``chunk_size`` is Llama 4's chunked
    local attention. At most one of them is set.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    gated_q: bool = False  # Qwen3-Next: q_proj also produces an output gate (2x width)
    sinks: bool = False  # gpt-oss: one learned sink logit per head


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention: one compressed latent (kv_lora_rank + rope dims) per token."""

    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Mamba:
    """A Mamba (v1) or Mamba2 state-space mixer; its cache is a fixed-size state per request."""

    version: int
    d_inner: int  # intermediate width (expand * hidden, or heads * head_dim for Mamba2)
    d_state: int
    d_conv: int
    n_groups: int = 1
    num_heads: int = 0  # Mamba2 only
    head_dim: int = 0  # Mamba2 only
    dt_rank: int = 0  # Mamba1 only


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet linear attention (Qwen3-Next): conv state plus a recurrent matrix state."""

    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int


Mixer = Attention | MLA | Mamba | LinearAttention

# --------------------------------------------------------------------------------------------
# Feed-forward blocks


@dataclass(frozen=True)
class DenseMLP:
    """A dense MLP; ``gated`` MLPs (SwiGLU/GeGLU) have gate and up projections."""

    intermediate_size: int
    gated: bool = True


@dataclass(frozen=True)
class MoE:
    """A mixture-of-experts block. All experts are resident in GPU memory."""

    num_experts: int
    top_k: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0
    gated: bool = True


FeedForward = DenseMLP | MoE


@dataclass(frozen=True)
class Layer:
    """One decoder layer: an optional token mixer and an optional feed-forward block."""

    mixer: Mixer | None
    ffn: FeedForward | None


@dataclass(frozen=True)
class Quantization:
    """What ``quantization_config`` says about how the checkpoint's weights are stored.

    Attributes:
        method: vLLM's name for the method (``fp8``, ``compressed-tensors``, ``awq``, ``gptq``,
            ``mxfp4``, ``nvfp4``/``modelopt_fp4``, ``bitsandbytes``...).
        weight_bits: Bits per stored weight element of quantized linear layers.
        group_size: Elements per scale (0 = per channel / per tensor).
        scale_bytes: Bytes of one scale (plus zero point where stored).
        experts_only: Only expert weights are quantized (gpt-oss MXFP4).
    """

    method: str
    weight_bits: float
    group_size: int = 0
    scale_bytes: float = 0.0
    experts_only: bool = False


@dataclass(frozen=True)
class VisionEncoder:
    """Size of a multimodal model's vision tower, for weights and the encoder's profiling pass."""

    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_params: int


@dataclass(frozen=True)
class ModelArchitecture:
    """A decoder-only language model, as vLLM will build it."""

    architecture: str
    model_type: str
    dtype: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    layers: tuple[Layer, ...]
    max_position_embeddings: int
    rotary_dim: int
    rope_cache_positions: int
    quantization: Quantization | None = None
    vision: VisionEncoder | None = None
    mtp_layers: int = 0
    max_capture_size_override: int | None = None
    norm_has_bias: bool = False
    attention_bias: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def num_layers(self) -> int:
        """Number of decoder layers."""
        return len(self.layers)

    @property
    def derived_max_model_len(self) -> int:
        """The longest context vLLM accepts for this model (``max_position_embeddings`` after RoPE scaling)."""
        return max(self.max_position_embeddings, self.rope_cache_positions)

    @property
    def is_moe(self) -> bool:
        """Whether any layer is a mixture of experts."""
        return any(isinstance(layer.ffn, MoE) for layer in self.layers)

    @property
    def attention_heads(self) -> int:
        """Query heads of the first attention-like layer (for TP divisibility checks)."""
        for layer in self.layers:
            if isinstance(layer.mixer, Attention | MLA):
                return layer.mixer.num_heads
        return 0

    @property
    def kv_heads(self) -> int:
        """KV heads of the first softmax-attention layer (0 for MLA / attention-free models)."""
        for layer in self.layers:
            if isinstance(layer.mixer, Attention):
                return layer.mixer.num_kv_heads
        return 0


# --------------------------------------------------------------------------------------------
# Parsing helpers

_MAX_REASONABLE = {
    "hidden_size": 131072,
    "num_hidden_layers": 1024,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 4096,
    "intermediate_size": 1048576,
    "vocab_size": 16777216,
    "num_experts": 16384,
    "max_position_embeddings": 1 << 30,
}


class _Cfg:
    """Typed access to a config mapping; every error names the config.json key."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "config.json") -> None:
        self.data = data
        self.prefix = prefix

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.data.get(key, default)
        if value is None:
            raise SizingError(f"{self.prefix}:{key}", None, f"an integer >= {minimum}")
        limit = _MAX_REASONABLE.get(key, 1 << 40)
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

    def float_(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SizingError(f"{self.prefix}:{key}", value, "a positive number")
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


#: Architectures (``config.json:architectures[0]``) and the family parser that handles each.
SUPPORTED_ARCHITECTURES: dict[str, str] = {
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
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "granite",
    "granitemoe",
    "phi",
    "granitemoehybrid",
}


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
    if family is None:
        raise UnknownArchitectureError(
            "config.json:architectures",
            arch,
            "a supported architecture: " + ", ".join(sorted(SUPPORTED_ARCHITECTURES)),
        )
    top = _Cfg(config)
    text_data = config.get("text_config")
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
    rotary_dim = int(head_dim * text.float_("partial_rotary_factor", 1.0))
    if family == "mla":
        rotary_dim = text.int_("qk_rope_head_dim")
    max_pos = text.int_("max_position_embeddings", 8192)
    rope_positions = _rope_cache_positions(text, max_pos)
    quant = parse_quantization(config.get("quantization_config") or text.data.get("quantization_config"))
    return ModelArchitecture(
        architecture=arch,
        model_type=model_type,
        dtype=dtype,
        hidden_size=hidden,
        vocab_size=text.int_("vocab_size"),
        tie_word_embeddings=top.bool_(
            "tie_word_embeddings", text.bool_("tie_word_embeddings", model_type in _TIED_BY_DEFAULT)
        ),
        layers=tuple(layers),
        max_position_embeddings=max_pos,
        rotary_dim=rotary_dim,
        rope_cache_positions=rope_positions,
        quantization=quant,
        vision=_parse_vision(config),
        mtp_layers=extras.get("mtp_layers", 0),
        max_capture_size_override=992 if family == "moe" and model_type == "gpt_oss" else None,
        norm_has_bias=family == "phi2",
        attention_bias=bool(text.data.get("attention_bias"))
        or model_type in {"qwen2", "qwen2_moe", "gpt_oss", "phi", "qwen2_5_vl"},
    )


def _rope_cache_positions(text: _Cfg, max_pos: int) -> int:
    """Positions in vLLM's rotary cos/sin cache (a replicated buffer counted with the weights).

    This is also vLLM's derived maximum model length: YaRN scales the original context by its
    factor; linear and dynamic scaling scale max_position_embeddings; Llama 3 / LongRoPE do not.
    """
    scaling = text.data.get("rope_scaling") or text.data.get("rope_parameters") or {}  # transformers 5 renamed it
    if isinstance(scaling, Mapping):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "")
        factor = scaling.get("factor")
        original = scaling.get("original_max_position_embeddings")
        if kind in {"yarn", "deepseek_yarn"} and isinstance(factor, int | float) and isinstance(original, int):
            return int(original * factor)
        if kind in {"dynamic", "linear"} and isinstance(factor, int | float):
            return int(max_pos * factor)
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
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        layers.append(Layer(_attention(text, window=w), _dense(text)))
    return layers, {}


def _family_phi2(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    return [Layer(_attention(text), _dense(text, gated=False)) for _ in range(n)], {}


def _moe_from(text: _Cfg, model_type: str) -> MoE:
    experts = None
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if text.has(key):
            experts = text.int_(key)
            break
    if experts is None:
        raise SizingError(f"{text.prefix}:num_experts", None, "the number of experts (num_local_experts/num_experts)")
    top_k = text.int_("num_experts_per_tok") if text.has("num_experts_per_tok") else text.int_("experts_per_token", 2)
    key = "moe_intermediate_size" if text.has("moe_intermediate_size") else "intermediate_size"
    shared = (
        text.int_("shared_expert_intermediate_size", minimum=0) if text.has("shared_expert_intermediate_size") else 0
    )
    if text.has("n_shared_experts"):
        shared = text.int_("n_shared_experts", minimum=0) * text.int_(key)
    return MoE(experts, top_k, text.int_(key), shared)


def _family_moe(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    n = text.int_("num_hidden_layers")
    sliding = _sliding_pattern(text, model_type, n)
    window = text.data.get("sliding_window")
    moe = _moe_from(text, model_type)
    step = text.int_("decoder_sparse_step", 1)
    dense_only = set(text.list_("mlp_only_layers") or [])
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        att = _attention(text, window=w)
        if model_type == "gpt_oss":
            att = Attention(att.num_heads, att.num_kv_heads, att.head_dim, att.v_head_dim, w, sinks=True)
        is_moe = i not in dense_only and (i + 1) % step == 0
        layers.append(Layer(att, moe if is_moe else _dense(text)))
    return layers, {}


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
    first_dense = text.int_("first_k_dense_replace", 0, minimum=0)
    freq = text.int_("moe_layer_freq", 1)
    has_experts = text.has("n_routed_experts")
    moe = _moe_from(text, model_type) if has_experts else None
    layers = []
    for i in range(n):
        is_moe = moe is not None and i >= first_dense and i % freq == 0
        layers.append(Layer(mla, moe if is_moe and moe is not None else _dense(text)))
    return layers, {"mtp_layers": text.int_("num_nextn_predict_layers", 0, minimum=0)}


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
    moe = _moe_from(text, model_type)
    layers = []
    for i in range(n):
        full = types[i] == "full_attention" if types else (i + 1) % interval == 0
        layers.append(Layer(att if full else linear, moe))
    return layers, {"mtp_layers": text.int_("num_nextn_predict_layers", 0, minimum=0)}


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


def _family_nemotron_h(text: _Cfg, model_type: str) -> tuple[list[Layer], dict[str, int]]:
    pattern = text.str_("hybrid_override_pattern")
    n = text.int_("num_hidden_layers")
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
            layers.append(Layer(None, _moe_from(text, model_type)))
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


_FAMILIES = {
    "llama": _family_llama,
    "phi2": _family_phi2,
    "moe": _family_moe,
    "mla": _family_mla,
    "llama4": _family_llama4,
    "qwen3_next": _family_qwen3_next,
    "nemotron_h": _family_nemotron_h,
    "jamba": _family_jamba,
    "granite_hybrid": _family_granite_hybrid,
}


def _parse_vision(config: Mapping[str, Any]) -> VisionEncoder | None:
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return None
    cfg = _Cfg(vision, "config.json:vision_config")
    hidden = cfg.int_("hidden_size", 1152)
    layers = cfg.int_("num_hidden_layers", cfg.int_("depth", 27) if cfg.has("depth") else 27)
    inter = cfg.int_("intermediate_size", 4 * hidden)
    # A ViT block: 4*h^2 attention + 2*h*i MLP (+ biases/norms, ignored); plus a projector h x text hidden.
    params = layers * (4 * hidden * hidden + 2 * hidden * inter)
    return VisionEncoder(hidden, layers, inter, params)


def parse_quantization(qc: object) -> Quantization | None:
    """Read ``quantization_config`` into a :class:`Quantization` (None for unquantized checkpoints)."""
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise SizingError("config.json:quantization_config", qc, "a JSON object")
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        block = qc.get("weight_block_size")
        group = block[0] * block[1] if isinstance(block, list) and len(block) == 2 else 0
        return Quantization("fp8", 8, group, 4.0)
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        bits, group, kind = 8.0, 0, "int"
        for grp in groups.values() if isinstance(groups, Mapping) else []:
            weights = grp.get("weights") if isinstance(grp, Mapping) else None
            if isinstance(weights, Mapping):
                bits = float(weights.get("num_bits", 8))
                group = int(weights.get("group_size") or 0)
                kind = str(weights.get("type", "int"))
                break
        scale = 2.0 if bits < 8 or kind == "int" else 4.0
        return Quantization("compressed-tensors", bits, group, scale)
    if method in {"awq", "gptq", "awq_marlin", "gptq_marlin"}:
        bits = float(qc.get("bits", qc.get("w_bit", 4)))
        group = int(qc.get("group_size", qc.get("q_group_size", 128)) or 0)
        # fp16 scale per group plus a packed zero point (bits/8 bytes) per group
        return Quantization(method.removesuffix("_marlin"), bits, max(group, 0), 2.0 + bits / 8)
    if method == "mxfp4":
        return Quantization("mxfp4", 4, 32, 1.0, experts_only=True)
    if method in {"modelopt", "modelopt_fp4", "nvfp4"}:
        algo = str(qc.get("quant_algo", "")).upper()
        if "FP8" in algo:
            return Quantization("modelopt", 8, 0, 4.0)
        return Quantization("modelopt_fp4", 4, 16, 1.0)
    if method == "bitsandbytes":
        four_bit = bool(qc.get("load_in_4bit", True))
        return Quantization("bitsandbytes", 4 if four_bit else 8, 64 if four_bit else 0, 4.0)
    if method in {"fbgemm_fp8", "ptpc_fp8"}:
        return Quantization(method, 8, 0, 4.0)
    raise SizingError(
        "config.json:quantization_config.quant_method",
        method or None,
        "one of fp8, compressed-tensors, awq, gptq, mxfp4, modelopt, modelopt_fp4, bitsandbytes, fbgemm_fp8",
    )


#: Runtime ``--quantization`` values fitgate can size, mapped to how weights end up stored.
RUNTIME_QUANTIZATION: dict[str, Quantization] = {
    "fp8": Quantization("fp8", 8, 0, 0.0),  # online fp8: one fp32 scale per tensor (negligible)
    "bitsandbytes": Quantization("bitsandbytes", 4, 64, 4.0),
}
