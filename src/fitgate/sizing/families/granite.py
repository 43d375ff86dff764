"""Granite 4 hybrids: Mamba-2 and attention layers by layer_types, dense or MoE."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, layer_types
from fitgate.sizing.model import DenseMLP, FeedForward, Layer, Mamba, MoE

#: ``config.json:architectures[0]`` values read by the granite_hybrid family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = ("GraniteMoeHybridForCausalLM",)


def _family_granite_hybrid(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    types = layer_types(text, n) or ["mamba"] * n
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
    return [Layer(attention(text) if t == "attention" else mamba, ffn) for t in types], {}


GRANITE_HYBRID = Family(
    "granite_hybrid",
    ARCHITECTURES,
    _family_granite_hybrid,
    model_types={"granitemoehybrid": ModelTypeTraits(tied_by_default=True)},
)
