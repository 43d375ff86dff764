"""MiMo-V2-Flash: sliding (with sinks) and global layers of different head counts, K 192 / V 128."""

from __future__ import annotations

from fitgate.sizing.config_reader import MAX_POSITIONS, ConfigReader
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import attention, dense_mlp, moe_from, moe_layers
from fitgate.sizing.model import Attention, Layer

#: ``config.json:architectures[0]`` values read by the mimo_v2 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # MiMo-V2-Flash: sliding (with sinks) and global layers of different head counts, K 192 / V 128
    "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM",
)


def _family_mimo_v2(text: ConfigReader, model_type: str) -> FamilyLayers:
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
    full = attention(text)
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
    moe = moe_from(text, model_type)
    placement = moe_layers(text, n) if isinstance(text.data.get("moe_layer_freq"), list) else [False] * n
    dense = dense_mlp(text)
    return [Layer(swa if pattern[i] == 1 else full, moe if placement[i] else dense) for i in range(n)], {}


MIMO_V2 = Family("mimo_v2", ARCHITECTURES, _family_mimo_v2)
