"""Jamba: Mamba-1 layers with periodic attention and periodic experts."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import attention, dense_mlp, moe_from
from fitgate.sizing.model import Layer, Mamba, Mixer

#: ``config.json:architectures[0]`` values read by the jamba family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = ("JambaForCausalLM",)


def _family_jamba(text: ConfigReader, model_type: str) -> FamilyLayers:
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
    moe = moe_from(text, model_type)
    layers = []
    for i in range(n):
        mixer: Mixer = attention(text) if i % period == offset else mamba
        layers.append(Layer(mixer, moe if i % e_period == e_offset else dense_mlp(text)))
    return layers, {}


JAMBA = Family("jamba", ARCHITECTURES, _family_jamba)
