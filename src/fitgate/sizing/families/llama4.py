"""Llama 4: chunked local attention on RoPE layers, global NoPE layers, interleaved experts."""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import attention, dense_mlp
from fitgate.sizing.model import DenseMLP, Layer, MoE

#: ``config.json:architectures[0]`` values read by the llama4 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    "Llama4ForCausalLM",
    "Llama4ForConditionalGeneration",
)


def _family_llama4(text: ConfigReader, model_type: str) -> FamilyLayers:
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
    dense = DenseMLP(text.int_("intermediate_size_mlp")) if text.has("intermediate_size_mlp") else dense_mlp(text)
    layers = []
    for i in range(n):
        # no_rope_layers[i] == 1 means the layer uses RoPE and chunked local attention;
        # every 4th layer (NoPE) attends globally.
        uses_rope = bool(no_rope[i]) if no_rope is not None and i < len(no_rope) else (i + 1) % 4 != 0
        att = attention(text, chunk=chunk if uses_rope and chunk else None)
        layers.append(Layer(att, moe if (i + 1) % step == 0 else dense))
    return layers, {}


LLAMA4 = Family("llama4", ARCHITECTURES, _family_llama4)
