"""Layer readers several families share: attention heads, sliding windows, dense MLPs, experts.

vLLM's model classes read the same keys for these across families (llama.py, qwen2_moe.py,
deepseek_v2.py ...); a family module calls them instead of reading the keys again.
"""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.errors import SizingError
from fitgate.sizing.model import Attention, DenseMLP, MoE

__all__ = [
    "EXPERT_KEYS",
    "attention",
    "dense_ffn",
    "dense_mlp",
    "layer_types",
    "moe_from",
    "moe_layers",
    "routes_to_experts",
    "sliding_pattern",
]


def attention(text: ConfigReader, window: int | None = None, chunk: int | None = None) -> Attention:
    """Softmax attention from the head keys; ``window`` / ``chunk`` for sliding or chunked-local layers."""
    hidden = text.int_("hidden_size")
    heads = text.int_("num_attention_heads")
    kv_heads = text.int_("num_key_value_heads", heads) if text.has("num_key_value_heads") else heads
    if kv_heads > heads or heads % kv_heads:
        raise SizingError(f"{text.prefix}:num_key_value_heads", kv_heads, f"a divisor of num_attention_heads ({heads})")
    head_dim = text.int_("head_dim") if text.has("head_dim") else hidden // heads
    if head_dim < 1:
        raise SizingError(f"{text.prefix}:head_dim", head_dim, "an integer >= 1")
    return Attention(heads, kv_heads, head_dim, head_dim, sliding_window=window, chunk_size=chunk)


def layer_types(text: ConfigReader, n: int) -> list[str] | None:
    """The first ``n`` entries of ``layer_types``, or None without the key."""
    types = text.list_("layer_types")
    if types is None:
        return None
    if len(types) < n:
        raise SizingError(f"{text.prefix}:layer_types", f"{len(types)} entries", f"{n} entries (num_hidden_layers)")
    return [str(t) for t in types[:n]]


#: The configs whose ``sliding_window`` transformers drops unless ``use_sliding_window`` is true (5.x
#: ``configuration_qwen2.py`` L83, ``qwen2_moe`` L112 (to 0), ``qwen3_moe`` L110, ``qwen2_vl`` L107
#: (``Qwen2VLTextConfig``), ``qwen2_5_vl`` L130 (``Qwen2_5_VLTextConfig``), ``qwen2_5_omni`` L194 / L372 (its
#: text and talker configs): ``self.sliding_window = self.sliding_window if self.use_sliding_window else None``),
#: so vLLM, which reads ``hf_text_config.sliding_window`` (config/model.py 0.34.0 L1645-1647), keeps full attention
#: on every layer. The VLMs' text configs carry their own model_type (hunt72 F1: Qwen2.5-VL's Hub config, window
#: 32768 with ``use_sliding_window`` false, was sized as sliding on every layer: a false admit at 128K on an L4).
USE_SLIDING_WINDOW_TYPES = frozenset({
    "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text",
    "qwen2_5_omni_text", "qwen2_5_omni_talker",
})  # fmt: skip


def sliding_pattern(text: ConfigReader, model_type: str, n: int) -> list[bool]:
    """Which layers use a sliding window, following vLLM's per-family rules."""
    window = text.data.get("sliding_window")
    if model_type in USE_SLIDING_WINDOW_TYPES and isinstance(window, int) and window > 0:
        # vLLM gives every layer of these models the one global window (cache_config.sliding_window, the text config's
        # when transformers keeps it: model_executor/models/qwen2.py 0.34.0 L247-255 "Every layer gets the global
        # sliding window", layers/attention/attention.py L281-289; a per-layer mix is refused), whatever layer_types
        # or max_window_layers say (hunt73 F3: layers at or past max_window_layers were the only ones sliding here)
        return [text.bool_("use_sliding_window", False)] * n
    types = layer_types(text, n)
    if types is not None:
        return [t == "sliding_attention" for t in types]
    if not isinstance(window, int) or window <= 0:
        return [False] * n
    if model_type == "gemma2":
        return [i % 2 == 0 for i in range(n)]
    if model_type in {"gemma3", "gemma3_text"}:
        pattern = text.int_("sliding_window_pattern", 6)
        return [(i + 1) % pattern != 0 for i in range(n)]
    if model_type == "kolibri1":  # Kolibri1Config.__post_init__: full every 5th layer (transformers 5.22 L99-103)
        return [(i + 1) % 5 != 0 for i in range(n)]
    if model_type == "olmo3":  # Olmo3Config.__post_init__: full every 4th layer (transformers 5.22 L93-96; hunt87)
        return [(i + 1) % 4 != 0 for i in range(n)]
    return [True] * n  # Mistral v0.1-style: every layer slides


def dense_mlp(text: ConfigReader, key: str = "intermediate_size", gated: bool = True) -> DenseMLP:
    """A dense MLP of width ``key`` (gated: gate, up and down projections)."""
    return DenseMLP(text.int_(key), gated)


#: The keys that give the number of routed experts, in the order vLLM's families read them.
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def routes_to_experts(text: ConfigReader) -> bool:
    """Whether the config routes tokens to more than one expert."""
    return any(text.has(k) and text.data.get(k) not in (0, 1) for k in EXPERT_KEYS)


def moe_from(text: ConfigReader, model_type: str) -> MoE:
    """The experts: count, top-k, expert width and the shared experts' width, by the keys the families use."""
    experts = None
    for key in EXPERT_KEYS:
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


def moe_layers(text: ConfigReader, n: int) -> list[bool]:
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


def dense_ffn(text: ConfigReader) -> DenseMLP:
    """The dense MLP of a MoE model's dense layers (``dense_intermediate_size`` where it is set)."""
    key = "dense_intermediate_size" if text.has("dense_intermediate_size") else "intermediate_size"
    return DenseMLP(text.int_(key))
