"""Mixtures of experts with softmax attention (Mixtral, Qwen MoE, gpt-oss, MiniMax M2/M3, GLM-4.5 ...).

Expert placement follows the family keys :func:`~fitgate.sizing.families.common.moe_layers` reads;
gpt-oss adds attention sinks, MiniMax M3 an indexer cache on its sparse layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from fitgate.sizing.config_reader import ConfigReader, mtp_layers
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, dense_ffn, moe_from, moe_layers, sliding_pattern
from fitgate.sizing.model import Attention, Layer, MoE

#: ``config.json:architectures[0]`` values read by the moe family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # mixtures of experts with softmax attention
    "MiniMaxM2ForCausalLM",
    "PhiMoEForCausalLM",
    "Glm4MoeForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "HunYuanMoEV1ForCausalLM",
    "Qwen3VLMoeForConditionalGeneration",
    "Step3p5ForCausalLM",
    # OLMoE: every layer num_experts x intermediate_size experts, top num_experts_per_tok, no shared
    # expert, full-width q/k norms (vllm/model_executor/models/olmoe.py 0.33.0 L153-165, L229-240)
    "OlmoeForCausalLM",
    # MiniMax M3: block-sparse attention (128-token pages) with a key-only indexer cache on the
    # layers sparse_attention_freq marks (vllm/models/minimax_m3 0.33.0)
    "MiniMaxM3SparseForCausalLM",
    "MiniMaxM3SparseForConditionalGeneration",
    "MixtralForCausalLM",
    # DeepSeek-MoE (v1, 16B): softmax attention, n_routed_experts of moe_intermediate_size, n_shared_experts,
    # dense below first_k_dense_replace (vllm/model_executor/models/registry.py 0.34.0 L92: deepseek_v2.py's
    # DeepseekForCausalLM; AMD's MI300X validated-models list serves it)
    "DeepseekForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "GraniteMoeForCausalLM",
    "GptOssForCausalLM",
    # Kolibri-1 (Aleph Alpha, 2026-10): served through vLLM's Transformers backend from 0.33
    # (model_executor/models/registry.py 0.34.0 L794: TransformersMoEForCausalLM), whose KV specs are those of
    # layer_types, sliding_attention with the config's window, every other layer full (transformers/base.py 0.34.0
    # L609-708); experts as Qwen2-MoE's: num_experts of moe_intermediate_size, top num_experts_per_tok, one shared
    # expert of shared_expert_intermediate_size (transformers 5.22 configuration_kolibri1.py). hunt85 F1, hunt87.
    "Kolibri1ForCausalLM",
)


def _family_moe(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    sliding = sliding_pattern(text, model_type, n)
    window = text.data.get("sliding_window")
    per_layer = _hunyuan_moe(text, n) if model_type == "hunyuan" else None
    moe = per_layer[0] if per_layer else moe_from(text, model_type)
    placement = moe_layers(text, n)
    # a model with experts on every layer may name no dense width (Kolibri-1: no intermediate_size)
    dense = dense_ffn(text) if not all(placement) or text.has("intermediate_size") else None
    indexed = _minimax_m3_sparse_layers(text, n)
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        att = attention(text, window=w)
        if model_type == "gpt_oss":
            att = Attention(att.num_heads, att.num_kv_heads, att.head_dim, att.v_head_dim, w, sinks=True)
        if indexed[i]:
            att = replace(att, index_head_dim=indexed[i])
        expert_block = per_layer[i] if per_layer else moe
        ffn = expert_block if placement[i] else dense
        assert ffn is not None  # dense is read whenever a layer has no experts
        layers.append(Layer(att, ffn))
    return layers, {"mtp_layers": mtp_layers(text)}


def _hunyuan_moe(text: ConfigReader, n: int) -> list[MoE]:
    """Hunyuan-A13B's experts per layer.

    ``moe_topk``, ``moe_intermediate_size`` and ``num_shared_expert`` are each
    a number or a list of one per layer (vllm/model_executor/models/hunyuan_v1.py 0.19.0 L383-433); the shared
    expert is ``intermediate_size x num_shared_expert`` wide when ``use_mixed_mlp_moe`` (hunt15 E1: the published
    config's lists were refused).
    """

    def at(key: str, i: int, default: int) -> int:
        value = text.data.get(key, default)
        if isinstance(value, list):
            if len(value) < n:
                raise SizingError(f"{text.prefix}:{key}", f"{len(value)} entries", f"{n}, one a layer")
            value = value[i]
        return ConfigReader({key: value}, text.prefix).int_(key, minimum=0)

    experts = text.int_("num_experts")
    inter = text.int_("intermediate_size")
    mixed = text.data.get("use_mixed_mlp_moe")
    return [
        MoE(
            experts,
            at("moe_topk", i, 2),
            at("moe_intermediate_size", i, inter) or inter,
            inter * at("num_shared_expert", i, 0) if mixed else 0,
        )
        for i in range(n)
    ]


def _minimax_m3_sparse_layers(text: ConfigReader, n: int) -> list[int]:
    """MiniMax M3: the index head size of each layer that runs the sparse branch (0: dense attention).

    ``_sparse_attention_layer_ids`` (vllm/models/minimax_m3/nvidia/model.py 0.33.0 L99-107): the
    layers whose ``sparse_attention_config.sparse_attention_freq`` entry is non-zero; none without
    the key. Their index head size is ``sparse_index_dim`` (L441).
    """
    cfg = text.data.get("sparse_attention_config")
    if not isinstance(cfg, Mapping) or cfg.get("sparse_attention_freq") is None:
        return [0] * n
    sparse = ConfigReader(cfg, f"{text.prefix}:sparse_attention_config")
    freq = sparse.list_("sparse_attention_freq") or []
    if len(freq) < n:
        raise SizingError(f"{sparse.prefix}:sparse_attention_freq", f"{len(freq)} entries", f"{n} entries")
    dim = sparse.int_("sparse_index_dim")
    return [dim if f != 0 else 0 for f in freq[:n]]


MOE = Family(
    "moe",
    ARCHITECTURES,
    _family_moe,
    # GptOssForCausalLMConfig raises max_cudagraph_capture_size to 1024 (models/config.py 0.19.0 L120-133,
    # 0.33.0 L559): 83 capture sizes instead of 51.
    max_capture_sizes={"gpt_oss": 1024},
    model_types={
        "qwen2_moe": ModelTypeTraits(attention_bias=True),
        "gpt_oss": ModelTypeTraits(attention_bias=True),
        "granitemoe": ModelTypeTraits(tied_by_default=True),
    },
)
