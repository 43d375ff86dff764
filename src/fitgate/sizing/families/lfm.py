"""LFM2 and LFM2-MoE: gated short convolutions with a few full-attention layers."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, dense_mlp, layer_types
from fitgate.sizing.model import DenseMLP, Layer, MoE, ShortConv

#: ``config.json:architectures[0]`` values read by the lfm2 family (vllm/model_executor/models/registry.py).
LFM2_ARCHITECTURES: tuple[str, ...] = (
    # LFM2: gated short convolutions with a few full-attention layers
    "Lfm2ForCausalLM",
    "Lfm2VlForConditionalGeneration",
)

#: ``config.json:architectures[0]`` values read by the lfm2_moe family (vllm/model_executor/models/registry.py).
LFM2_MOE_ARCHITECTURES: tuple[str, ...] = ("Lfm2MoeForCausalLM",)


def _family_lfm2(text: ConfigReader, model_type: str) -> FamilyLayers:
    """LFM2 as vllm/model_executor/models/lfm2.py (0.33.0) builds it.

    ``layer_types[i] == "full_attention"`` is GQA attention, ``"conv"`` a short convolution of width
    ``conv_dim`` and kernel ``conv_L_cache`` (L435, L298-300, L573-576). The MLP width is adjusted as
    the model does it (L229-232): ``int(2 x intermediate_size / 3)`` when ``block_auto_adjust_ff_dim``,
    times ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``.
    """
    n = text.int_("num_hidden_layers")
    types = layer_types(text, n)
    if types is None:
        raise SizingError(f"{text.prefix}:layer_types", None, f"{n} entries of conv / full_attention")
    inter = text.int_("intermediate_size")
    if text.bool_("block_auto_adjust_ff_dim", False):
        inter = int(2 * inter / 3)
        inter = int(text.float_("block_ffn_dim_multiplier", 1.0, maximum=64) * inter)
        multiple = text.int_("block_multiple_of", 256)
        inter = multiple * -(-inter // multiple)
    conv = ShortConv(text.int_("conv_dim", text.int_("hidden_size")), text.int_("conv_L_cache", 3))
    return [Layer(attention(text) if t == "full_attention" else conv, DenseMLP(inter)) for t in types], {}


def _family_lfm2_moe(text: ConfigReader, model_type: str) -> FamilyLayers:
    """LFM2-MoE as vllm/model_executor/models/lfm2_moe.py (0.33.0) builds it.

    ``layer_types[i] == "full_attention"`` is GQA attention with q/k norms (L433-437, L212-243),
    ``"conv"`` a short convolution of width ``hidden_size`` and kernel ``conv_L_cache`` (L343-350,
    state L560-567). The first ``num_dense_layers`` layers have a dense ``intermediate_size`` MLP
    (L295-301, L353-359, no width adjustment), the rest ``num_experts`` experts of
    ``moe_intermediate_size``, ``num_experts_per_tok`` routed, no shared expert (L128-150).
    """
    n = text.int_("num_hidden_layers")
    types = layer_types(text, n)
    if types is None:
        raise SizingError(f"{text.prefix}:layer_types", None, f"{n} entries of conv / full_attention")
    dense_layers = text.int_("num_dense_layers", 0, minimum=0, limit=n)
    dense = dense_mlp(text)
    moe = MoE(text.int_("num_experts"), text.int_("num_experts_per_tok"), text.int_("moe_intermediate_size"))
    conv = ShortConv(text.int_("hidden_size"), text.int_("conv_L_cache", 3))
    return [
        Layer(attention(text) if t == "full_attention" else conv, dense if i < dense_layers else moe)
        for i, t in enumerate(types)
    ], {}


LFM2 = Family(
    "lfm2",
    LFM2_ARCHITECTURES,
    _family_lfm2,
    model_types={"lfm2": ModelTypeTraits(tied_by_default=True)},
)
LFM2_MOE = Family(
    "lfm2_moe",
    LFM2_MOE_ARCHITECTURES,
    _family_lfm2_moe,
    always_tied=True,  # Lfm2MoeForCausalLM ties lm_head whatever the config says (lfm2_moe.py 0.33.0 L590)
    model_types={"lfm2_moe": ModelTypeTraits(tied_by_default=True)},
)
