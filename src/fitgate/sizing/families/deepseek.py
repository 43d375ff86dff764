"""Multi-head latent attention in the DeepSeek V2/V3 layout (DeepSeek V2/V3/V3.2, Kimi K2, GLM-5).

vllm/model_executor/models/deepseek_v2.py: MLA on every layer, a sparse-attention indexer where
the config sets ``index_topk``, experts after ``first_k_dense_replace``.
"""

from __future__ import annotations

from dataclasses import replace

from fitgate.sizing.config_reader import ConfigReader, mtp_layers
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import dense_mlp, moe_from, moe_layers, routes_to_experts
from fitgate.sizing.model import MLA, Layer

#: ``config.json:architectures[0]`` values read by the mla family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # multi-head latent attention (DeepSeek V2/V3 layout), sparse-attention indexer where configured
    "DeepseekV32ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "KimiK2ForCausalLM",
)


def _family_mla(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    heads = text.int_("num_attention_heads")
    q_lora = text.opt_int("q_lora_rank")
    mla = MLA(
        heads,
        q_lora,
        text.int_("kv_lora_rank"),
        text.int_("qk_nope_head_dim"),
        text.int_("qk_rope_head_dim"),
        text.int_("v_head_dim"),
    )
    if text.has("index_topk") and text.has("index_head_dim"):
        # Sparse attention (DeepSeek V3.2 / GLM-5): vllm/model_executor/models/deepseek_v2.py builds an
        # indexer with its own cache on every layer unless index_topk_freq / index_topk_pattern skip it.
        mla = MLA(
            mla.num_heads,
            mla.q_lora_rank,
            mla.kv_lora_rank,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim,
            index_head_dim=text.int_("index_head_dim"),
        )
    has_experts = routes_to_experts(text)
    moe = moe_from(text, model_type) if has_experts else None
    placement = moe_layers(text, n)
    dense = dense_mlp(text)
    # IndexCache (deepseek_v2.py 0.34.0 L1144-1160): a pattern, where given, decides alone (a layer past its end keeps
    # its indexer); else every freq-th layer from the offset, whose default is 2 (hunt198 F3: it was read as 0)
    freq = text.int_("index_topk_freq", 1)
    pattern = text.data.get("index_topk_pattern")
    offset = text.int_("index_skip_topk_offset", 2, minimum=0)
    layers = []
    for i in range(n):
        layer_mla = mla
        if mla.index_head_dim:
            if isinstance(pattern, list | str):
                skip = i < len(pattern) and pattern[i] == "S"
            else:
                skip = max(i - offset + 1, 0) % freq != 0
            if skip:
                layer_mla = replace(mla, index_head_dim=0)
        layers.append(Layer(layer_mla, moe if moe is not None and placement[i] else dense))
    return layers, {"mtp_layers": mtp_layers(text)}


MLA_FAMILY = Family(
    "mla",
    ARCHITECTURES,
    _family_mla,
    rotary_dim=lambda text: text.int_("qk_rope_head_dim"),  # the rope part of each head only
)
