"""Text decoders vLLM serves through its Transformers modeling backend (``TransformersForCausalLM`` / ``...MoE...``).

vLLM builds the Hugging Face model on ``meta`` and swaps in its own attention, linears and experts
(vllm/model_executor/models/transformers/base.py 0.34.0, the same in 0.30.0). Its KV specs are a native model's:
one vLLM ``Attention`` per decoder layer (L609-708) with

- ``num_kv_heads``: the first of ``n_head_kv, num_kv_heads, num_key_value_heads, multi_query_group_num,
  num_attention_groups`` the config class sets, else ``num_attention_heads`` (transformers_utils/config.py L57-64,
  model_arch_config_convertor.py L151-156), divided by TP;
- ``head_size``: ``head_dim`` if > 0, else ``hidden_size_per_head``, else ``hidden_size // num_attention_heads``
  (model_arch_config_convertor.py L88-116);
- a window only where ``layer_types[i] == "sliding_attention"`` (base.py L691-693: any other string, chunked
  attention included, is full causal attention), or on every layer when ``layer_types`` is absent or all sliding
  (engine/arg_utils.py L2321-2327, layers/attention/attention.py L281-289); ``sliding_window == 0`` is none
  (config/model.py L835-841).

``layer_types`` is the *instantiated config class's*: several classes compute it in ``__post_init__`` when the file
has none (:data:`COMPUTED_LAYER_TYPES`, proven equal to transformers' classes by tests/sizing/test_arch_backend.py).
A model type whose class fitgate has not read, with a window or a pattern key and no ``layer_types``, is Unknown:
its class may pattern or drop the window either way. The backend keeps no rotary cos/sin cache (HF rotary modules
keep only ``inv_freq``): ``rotary_dim`` 0. What it cannot serve, or serves in a way fitgate does not size, is
Unknown (:func:`_refusal`). hunt87 (report), fix90.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import layer_types, moe_layers
from fitgate.sizing.model import Attention, DenseMLP, Layer, MoE, Quantization, TransformersBackend

#: ``config.json:architectures[0]`` -> the first vLLM release fitgate read that serves it through the backend
#: (``_TRANSFORMERS_SUPPORTED_MODELS`` / ``_TRANSFORMERS_BACKEND_MODELS``, vllm/model_executor/models/registry.py
#: 0.30.0 L711-741 and 0.34.0 L782-861; 0.31.0 still served the 0.32 group natively: arcee.py, llama.py for Cwm,
#: glm.py, gpt_neox.py, jais2.py, mellum.py, seed_oss.py). Releases before 0.30 were not read: Unknown.
SERVED_SINCE: dict[str, tuple[int, int, int]] = {
    "FlexOlmoForCausalLM": (0, 30, 0),
    "GPTBigCodeForCausalLM": (0, 30, 0),
    "NanbeigeForCausalLM": (0, 30, 0),
    "OlmoForCausalLM": (0, 30, 0),
    "Starcoder2ForCausalLM": (0, 30, 0),
    "VaultGemmaForCausalLM": (0, 30, 0),
    "ArceeForCausalLM": (0, 32, 0),
    "CwmForCausalLM": (0, 32, 0),
    "GlmForCausalLM": (0, 32, 0),
    "GPTNeoXForCausalLM": (0, 32, 0),
    "Jais2ForCausalLM": (0, 32, 0),
    "MellumForCausalLM": (0, 32, 0),
    "SeedOssForCausalLM": (0, 32, 0),
    # the backend's own class names as architectures[0] (registry.py 0.30.0 L740-741, 0.34.0 L828-829)
    "TransformersForCausalLM": (0, 30, 0),
    "TransformersMoEForCausalLM": (0, 30, 0),
}

#: The registry entries served by ``TransformersMoEForCausalLM`` (registry.py 0.34.0 L786, L795).
MOE_ARCHITECTURES = frozenset({"FlexOlmoForCausalLM", "MellumForCausalLM", "TransformersMoEForCausalLM"})

#: What a config class computes for ``layer_types`` when config.json omits it, as "is layer i sliding"
#: (transformers 5.22-5.24 ``configuration_<type>.py`` ``__post_init__``); None: the class computes none, so
#: the global window, if any, is every layer's. Only these model types' classes were read.
COMPUTED_LAYER_TYPES: dict[str, Callable[[ConfigReader, int], list[bool]] | None] = {
    "cwm": lambda text, n: [i % 4 != 0 for i in range(n)],  # L97-104: full every 4th layer from 0
    "vaultgemma": lambda text, n: [(i + 1) % 2 == 1 for i in range(n)],  # L91-95: sliding, full, ...
    "mellum": lambda text, n: [False] * n,  # L115-117: all full (its window 1024 is unused)
    "olmo3": lambda text, n: [(i + 1) % 4 != 0 for i in range(n)],  # L93-96: 3 sliding, 1 full
    "kolibri1": lambda text, n: [(i + 1) % 5 != 0 for i in range(n)],  # L99-103: 4 sliding, 1 full
    # Qwen2Config L83-91: sliding from max_window_layers on, where the window survives use_sliding_window
    "qwen2": lambda text, n: [i >= text.int_("max_window_layers", n, minimum=0) for i in range(n)],
    **dict.fromkeys(
        (
            "arcee", "flex_olmo", "glm", "gpt_bigcode", "gpt_neox", "jais2", "olmo", "seed_oss", "starcoder2",
            "llama", "olmo2", "gemma", "stablelm", "phi", "olmoe", "hunyuan_v1_dense", "hunyuan_v1_moe",
        )
    ),
}  # fmt: skip

#: Config classes that drop ``sliding_window`` unless ``use_sliding_window`` (Qwen2Config L84).
_WINDOW_NEEDS_SWITCH = frozenset({"qwen2"})

#: Model types whose config class has no ``base_model_tp_plan`` / ``base_model_pp_plan`` (transformers 5.22-5.24):
#: unnamed linears are replicated under TP (base.py L491-505, L566-572) and the PP split is guessed (L386-440).
NO_TP_PLAN = frozenset({"gpt_bigcode", "stablelm"})
NO_PP_PLAN = frozenset({"gpt_bigcode", "stablelm", "olmoe", "hunyuan_v1_dense", "hunyuan_v1_moe"})

#: Model types whose MLP is two projections, not gate/up/down (ArceeMLP, GPTBigCodeMLP, GPTNeoXMLP, Jais2MLP,
#: Starcoder2MLP, PhiMLP: up/c_fc/dense_h_to_4h/fc1 then down).
UNGATED = frozenset({"arcee", "gpt_bigcode", "gpt_neox", "jais2", "starcoder2", "phi"})

#: Keys that make the layer pattern depend on code fitgate has not read when ``layer_types`` is absent.
_PATTERN_KEYS = ("use_sliding_window", "max_window_layers", "sliding_window_pattern", "attention_chunk_size",
                 "no_rope_layers")  # fmt: skip
#: Keys of layers that do not dispatch through the attention interface (Mamba, linear attention, short conv):
#: vLLM raises (base.py L630-640) or finds the class incompatible (registry.py L1404-1416).
_RECURRENT_KEYS = (
    "layers_block_type", "conv_L_cache", "full_attention_interval", "hybrid_override_pattern", "attn_layer_indices",
    "linear_num_key_heads", "linear_num_value_heads", "linear_attn_config",
)  # fmt: skip
_RECURRENT_PREFIXES = ("mamba_", "ssm_", "linear_attn")
#: The layer kinds the backend builds an ``Attention`` for (chunked: as full causal attention).
_ATTENTION_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention"})
#: vLLM's key orders (transformers_utils/config.py 0.34.0 L57-75; transformers/moe.py L237-251).
_KV_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
_EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "num_experts_per_token", "top_k_experts", "moe_topk", "moe_top_k", "top_k")


def _unknown(key: str, value: object, why: str) -> NotModelledError:
    return NotModelledError(key, value, f"{why} (vLLM's Transformers modeling backend serves it; Unknown)")


def _refusal(text: ConfigReader, n: int) -> None:
    """Raise for what the backend cannot serve or fitgate does not size (hunt87 "Configs the family must refuse")."""
    p = text.prefix
    data: Mapping[str, object] = text.data
    if p.endswith(":text_config") or any(k in data for k in ("vision_config", "audio_config")):
        raise _unknown(f"{p}:vision_config", "set", "a multimodal model: its encoders' profiling is the HF processor's")
    for key in ("is_heterogeneous", "per_layer_config", "block_configs"):
        if data.get(key):
            raise _unknown(f"{p}:{key}", "set", "per-layer geometry (model_arch_config_convertor.py L42-70)")
    if data.get("kv_lora_rank") is not None:
        raise _unknown(
            f"{p}:kv_lora_rank",
            data["kv_lora_rank"],
            "MLA: its cache is the latent or padded full attention, by whether MLAFuser matches (base.py L715-731)",
        )
    if data.get("is_encoder_decoder") or data.get("add_cross_attention") or data.get("cross_attention_layers"):
        raise _unknown(f"{p}:is_encoder_decoder", True, "cross-attention: two modules share a layer (L515-528)")
    for key in data:
        if key in _RECURRENT_KEYS or key.startswith(_RECURRENT_PREFIXES):
            raise _unknown(f"{p}:{key}", "set", "a recurrent or linear-attention layer (base.py L630-640)")
    types = layer_types(text, n)
    for i, kind in enumerate(types or ()):
        if kind not in _ATTENTION_TYPES:
            raise _unknown(f"{p}:layer_types[{i}]", kind, "a layer that is not softmax attention (L630-640)")


def _window(text: ConfigReader, model_type: str) -> int | None:
    """The window vLLM reads from the config class (None: no sliding window at all)."""
    window = text.data.get("sliding_window")
    if model_type in _WINDOW_NEEDS_SWITCH and not text.bool_("use_sliding_window", False):
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None  # 0 is "disabled" (config/model.py L835-841)
    return window


def _sliding(text: ConfigReader, model_type: str, n: int, window: int | None) -> list[bool]:
    """Which layers vLLM gives the window (base.py L691-693; arg_utils.py L2321-2327 for the all-or-none case)."""
    types = layer_types(text, n)
    if types is None and model_type in COMPUTED_LAYER_TYPES:
        compute = COMPUTED_LAYER_TYPES[model_type]
        if compute is not None:
            return [bool(s) and window is not None for s in compute(text, n)]
    elif types is None and (window is not None or any(text.has(k) for k in _PATTERN_KEYS)):
        present = [k for k in ("sliding_window", *_PATTERN_KEYS) if text.has(k)]
        raise _unknown(
            f"{text.prefix}:layer_types",
            None,
            f"which layers slide: the config class of model_type {model_type!r}, which fitgate has not read, may "
            f"compute layer_types or drop the window from {', '.join(present)}",
        )
    if types is None:
        return [window is not None] * n
    return [t == "sliding_attention" and window is not None for t in types]


def _first(text: ConfigReader, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if text.has(k)), None)


def _attention(text: ConfigReader, model_type: str, window: int | None) -> Attention:
    heads = text.int_("num_attention_heads")
    if model_type == "gpt_bigcode":  # GPTBigCodeConfig L82: 1 if multi_query else n_head, whatever the file says
        kv_heads = 1 if text.bool_("multi_query", True) else heads
    else:
        kv_key = _first(text, _KV_KEYS)
        kv_heads = text.int_(kv_key, limit=heads) if kv_key else heads
    head_dim = text.data.get("head_dim")
    if isinstance(head_dim, int) and not isinstance(head_dim, bool) and head_dim > 0:
        size = text.int_("head_dim")
    elif text.has("hidden_size_per_head"):
        size = text.int_("hidden_size_per_head")
    else:
        size = text.int_("hidden_size") // heads
    if size < 1:
        raise SizingError(f"{text.prefix}:head_dim", size, "an integer >= 1")
    return Attention(heads, kv_heads, size, size, sliding_window=window)


def _dense(text: ConfigReader, model_type: str) -> DenseMLP:
    if model_type == "gpt_bigcode":  # GPTBigCodeMLP: n_inner, else 4 x n_embd (modeling_gpt_bigcode.py L242-250)
        width = text.int_("n_inner") if text.has("n_inner") else 4 * text.int_("hidden_size")
        return DenseMLP(width, gated=False)
    return DenseMLP(text.int_("intermediate_size"), gated=model_type not in UNGATED)


def _experts(text: ConfigReader) -> MoE | None:
    """``MoEMixin``'s fields (transformers/moe.py 0.34.0 L237-304); None without experts (``is_moe`` false)."""
    key = _first(text, _EXPERT_KEYS)
    if key is None or text.int_(key, minimum=0) == 0:
        return None
    top_key = _first(text, _TOP_K_KEYS)
    if top_key is None:
        raise _unknown(f"{text.prefix}:num_experts_per_tok", None, "experts with no top-k (moe.py L245-247 asserts)")
    width_key = "moe_intermediate_size" if text.has("moe_intermediate_size") else "intermediate_size"
    if isinstance(text.data.get(width_key), list):
        raise _unknown(f"{text.prefix}:{width_key}", "a list", "expert widths that differ by layer")
    width = text.int_(width_key)
    shared = 0
    if text.has("shared_expert_intermediate_size"):
        shared = text.int_("shared_expert_intermediate_size", minimum=0)
    elif text.has("n_shared_experts"):
        shared = text.int_("n_shared_experts", minimum=0) * width
    return MoE(text.int_(key), text.int_(top_key), width, shared)


def _family_transformers(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    _refusal(text, n)
    window = _window(text, model_type)
    sliding = _sliding(text, model_type, n, window)
    moe = _experts(text)
    placement = moe_layers(text, n) if moe is not None else [False] * n
    dense = _dense(text, model_type) if not all(placement) else None
    layers = []
    for i in range(n):
        ffn = moe if placement[i] else dense
        assert ffn is not None  # dense is read whenever a layer has no experts
        layers.append(Layer(_attention(text, model_type, window if sliding[i] else None), ffn))
    return layers, {"mtp_layers": 0}  # MTP layers' weights are skipped on load (base.py L548-563)


def _no_mxfp4(text: ConfigReader, quant: Quantization | None) -> Quantization | None:
    if quant is not None and quant.method in ("mxfp4", "gpt_oss_mxfp4"):
        raise _unknown("quantization_config.quant_method", quant.method, "MXFP4 (base.py L164-171 raises)")
    return quant


def served_by(architecture: str, model_type: str, moe: bool) -> TransformersBackend:
    """How the backend serves ``architecture`` (its class choice: MoE or not, by the registry's name)."""
    if architecture == "TransformersForCausalLM" and moe:
        raise _unknown("config.json:architectures", architecture, "experts under the dense backend class")
    if architecture in MOE_ARCHITECTURES and not moe:
        raise _unknown("config.json:num_experts", None, f"{architecture} without experts")
    known = model_type in COMPUTED_LAYER_TYPES  # a class fitgate read; a remote-code one's plans are unknown
    return TransformersBackend(
        since=SERVED_SINCE[architecture],
        tp_plan=known and model_type not in NO_TP_PLAN,
        pp_plan=known and model_type not in NO_PP_PLAN,
    )


TRANSFORMERS_BACKEND = Family(
    "transformers",
    tuple(SERVED_SINCE),
    _family_transformers,
    rotary_dim=lambda text: 0,  # HF rotary modules cache no cos/sin (hunt87 section 6)
    quantization=_no_mxfp4,
    reads_attribute_names=True,
    served_by=served_by,
    model_types={
        # GPTBigCode: LayerNorms with bias, c_attn / c_proj with bias (modeling_gpt_bigcode.py)
        "gpt_bigcode": ModelTypeTraits(norm_has_bias=True, attention_bias=True),
        # GPT-NeoX: LayerNorms with bias; query_key_value with attention_bias (default true)
        "gpt_neox": ModelTypeTraits(norm_has_bias=True),
        # Starcoder2: nn.LayerNorm (L212-213), q/k/v/o with use_bias (L153-156)
        "starcoder2": ModelTypeTraits(norm_has_bias=True, attention_bias_key="use_bias"),
        # Jais2: nn.LayerNorm (modeling_jais2.py L205-206)
        "jais2": ModelTypeTraits(norm_has_bias=True),
    },
)
