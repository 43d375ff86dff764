"""Gemma 4 and 3n: sliding / global layers of different head sizes, a KV-shared tail, dense + MoE blocks.

Per-layer embeddings on E2B/E4B. Gemma 1-3 read as the llama family.
"""

from __future__ import annotations

from collections.abc import Mapping

from fitgate.sizing.config_reader import MAX_REASONABLE, ConfigReader
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import layer_types
from fitgate.sizing.model import Attention, DenseMLP, FeedForward, Layer, MoE, PerLayerEmbedding

#: ``config.json:architectures[0]`` values read by the gemma4 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # Gemma 4: sliding / global layers of different head sizes, KV-shared tail, dense + MoE blocks
    "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration",
    # Gemma 3n: the same layout (vllm/model_executor/models/gemma3n.py 0.34.0: layer_types L349-351, the last
    # num_kv_shared_layers read an earlier layer's cache with only a q_proj L311-330, L355-399, per-layer
    # embeddings) with an MLP width per layer (``intermediate_size`` a list, L474); AltUp and LAuReL weights (a few
    # MiB a layer) are left to the checkpoint's own total
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
)


def _family_gemma4(text: ConfigReader, model_type: str) -> FamilyLayers:
    """Gemma 4 as vllm/model_executor/models/gemma4.py (0.33.0) builds it.

    ``layer_types`` picks sliding (``head_dim``, ``num_key_value_heads``, ``sliding_window``) or
    global attention (``global_head_dim``, ``num_global_key_value_heads``; K and V from one projection
    when ``attention_k_eq_v``) per layer (L449-451, L576-581); the last ``num_kv_shared_layers`` layers
    read an earlier layer's cache (L403-406, L476-492); every layer has the dense MLP, doubled on
    KV-shared layers with ``use_double_wide_mlp`` (L596-606), plus an expert block when
    ``num_experts`` is set (L630-648: ``top_k_experts``, ``moe_intermediate_size``).
    """
    n = text.int_("num_hidden_layers")
    types = layer_types(text, n)
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
    inter = _widths(text, n)
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
            layer_cfg = ConfigReader(override, f"{text.prefix}:per_layer_config.{i:02d}")
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
        width = inter[i] * (2 if double and shared > 0 and i >= first_shared else 1)
        ffn: FeedForward = DenseMLP(width)
        if experts is not None:
            expert_key = "moe_intermediate_size" if text.has("moe_intermediate_size") else "expert_intermediate_size"
            ffn = MoE(text.int_("num_experts"), text.int_("top_k_experts"), text.int_(expert_key), width)
        layers.append(Layer(att, ffn))
    return layers, {}


def _widths(text: ConfigReader, n: int) -> list[int]:
    """``intermediate_size`` per layer: one integer (Gemma 4) or a list of ``n`` (Gemma 3n)."""
    value = text.data.get("intermediate_size")
    if isinstance(value, list):
        if len(value) != n:
            raise SizingError(f"{text.prefix}:intermediate_size", f"{len(value)} entries", f"{n}, one a layer")
        per = ConfigReader({str(i): v for i, v in enumerate(value)}, f"{text.prefix}:intermediate_size")
        return [per.int_(str(i), limit=MAX_REASONABLE["intermediate_size"]) for i in range(n)]
    return [text.int_("intermediate_size")] * n


def _per_layer_embedding(text: ConfigReader) -> PerLayerEmbedding | None:
    """Gemma 4 E2B/E4B per-layer embeddings, or None (26B / 31B).

    gemma4.py (0.33.0) L999-1005 reads ``hidden_size_per_layer_input`` (0 or absent: none) and
    ``vocab_size_per_layer_input`` (default ``vocab_size``).
    """
    width = text.int_("hidden_size_per_layer_input", 0, minimum=0) if text.has("hidden_size_per_layer_input") else 0
    if not width:
        return None
    vocab = text.int_("vocab_size_per_layer_input", text.int_("vocab_size"), limit=MAX_REASONABLE["vocab_size"])
    return PerLayerEmbedding(width, vocab)


GEMMA4 = Family(
    "gemma4",
    ARCHITECTURES,
    _family_gemma4,
    per_layer_embedding=_per_layer_embedding,
    model_types={
        "gemma4": ModelTypeTraits(tied_by_default=True),
        "gemma3n": ModelTypeTraits(tied_by_default=True),
        "gemma3n_text": ModelTypeTraits(tied_by_default=True),
        "gemma4_text": ModelTypeTraits(tied_by_default=True),
    },
)
