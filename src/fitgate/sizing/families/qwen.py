"""Gated DeltaNet hybrids in the Qwen3-Next layout (Qwen3-Next, Qwen3.5), dense or MoE."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader, mtp_layers
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import attention, dense_mlp, layer_types, moe_from, routes_to_experts
from fitgate.sizing.model import Attention, FeedForward, Layer, LinearAttention

#: ``config.json:architectures[0]`` values read by the qwen3_next family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # Gated DeltaNet hybrids (Qwen3-Next layout), dense or MoE
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3NextForCausalLM",
)


def _family_qwen3_next(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    types = layer_types(text, n)
    interval = text.int_("full_attention_interval", 4)
    linear = LinearAttention(
        text.int_("linear_num_key_heads"),
        text.int_("linear_num_value_heads"),
        text.int_("linear_key_head_dim"),
        text.int_("linear_value_head_dim"),
        text.int_("linear_conv_kernel_dim", 4),
    )
    att = attention(text)
    att = Attention(att.num_heads, att.num_kv_heads, att.head_dim, att.v_head_dim, gated_q=True)
    ffn: FeedForward = moe_from(text, model_type) if routes_to_experts(text) else dense_mlp(text)
    layers = []
    for i in range(n):
        full = types[i] == "full_attention" if types else (i + 1) % interval == 0
        layers.append(Layer(att if full else linear, ffn))
    return layers, {"mtp_layers": mtp_layers(text)}


QWEN3_NEXT = Family("qwen3_next", ARCHITECTURES, _family_qwen3_next)
