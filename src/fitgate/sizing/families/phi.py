"""Phi-2: parallel attention and an ungated MLP with biases, LayerNorms with bias (vLLM phi.py)."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, dense_mlp
from fitgate.sizing.model import Layer

#: ``config.json:architectures[0]`` values read by the phi2 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = ("PhiForCausalLM",)


def _family_phi2(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    return [Layer(attention(text), dense_mlp(text, gated=False)) for _ in range(n)], {}


PHI2 = Family(
    "phi2",
    ARCHITECTURES,
    _family_phi2,
    norm_has_bias=True,
    model_types={"phi": ModelTypeTraits(tied_by_default=True, attention_bias=True)},
)
