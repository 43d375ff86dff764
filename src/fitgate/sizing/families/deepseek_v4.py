"""DeepSeek V4: sliding-window MLA on every layer with compressed (1/4 with an indexer, 1/128) caches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fitgate.sizing.config_reader import ConfigReader, mtp_layers
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import moe_from
from fitgate.sizing.model import CompressedSparseMLA, Layer, Quantization

#: ``config.json:architectures[0]`` values read by the deepseek_v4 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # DeepSeek V4: sliding-window MLA on every layer, compressed (1/4 with an indexer, 1/128) caches
    "DeepseekV4ForCausalLM",
)


#: DeepSeek V4 compress ratios vLLM builds (vllm/v1/attention/backends/mla/sparse_swa.py 0.33.0 L60-72
#: accepts 1, 2, 4 and 128; the model file only has caches for 4 and 128: attention.py L302, compressor.py L158).
_DSV4_RATIOS = (1, 4, 128)


def _family_deepseek_v4(text: ConfigReader, model_type: str) -> FamilyLayers:
    """DeepSeek V4 as vllm/models/deepseek_v4 (0.33.0) builds it.

    ``compress_ratios[i]`` (0 = sliding window only, as ``max(1, ...)`` in attention.py L239-242) picks
    each layer's caches; every layer is a mixture of experts (nvidia/model.py L607-613) with
    ``n_shared_experts`` shared experts of ``moe_intermediate_size`` (L320-333).
    """
    n = text.int_("num_hidden_layers")
    ratios = _dsv4_compress_ratios(text, n)
    heads = text.int_("num_attention_heads")
    groups = text.int_("o_groups")
    if heads % groups:
        raise SizingError(f"{text.prefix}:o_groups", groups, f"a divisor of num_attention_heads ({heads})")
    moe = moe_from(text, model_type)
    layers = []
    for i in range(n):
        ratio = max(1, ratios[i]) if isinstance(ratios[i], int) and not isinstance(ratios[i], bool) else -1
        if ratio not in _DSV4_RATIOS:
            raise SizingError(f"{text.prefix}:compress_ratios[{i}]", ratios[i], "0, 4 or 128")
        mixer = CompressedSparseMLA(
            heads,
            text.int_("q_lora_rank"),
            text.int_("head_dim"),
            text.int_("qk_rope_head_dim"),
            text.int_("o_lora_rank"),
            groups,
            ratio,
            text.int_("sliding_window"),
            text.int_("index_n_heads"),
            text.int_("index_head_dim"),
            text.int_("hc_mult", 1),
        )
        layers.append(Layer(mixer, moe))
    return layers, {"mtp_layers": mtp_layers(text)}


def _dsv4_compress_ratios(text: ConfigReader, n: int) -> list[Any]:
    """Per-layer compress ratios: ``compress_rates[layer_types[i]]`` as vLLM reads them (attention.py L239-240).

    transformers' ``DeepseekV4Config`` turns the checkpoint's ``compress_ratios`` into ``layer_types``
    plus ``compress_rates``; a config read as written still has ``compress_ratios`` (the same numbers,
    vllm/transformers_utils/deepseek_v4_utils.py L6-18).
    """
    rates = text.data.get("compress_rates")
    types = text.list_("layer_types")
    if isinstance(rates, Mapping) and types is not None and len(types) >= n:
        return [rates.get(t, 0) for t in types[:n]]
    ratios = text.list_("compress_ratios")
    if ratios is None or len(ratios) < n:
        raise SizingError(f"{text.prefix}:compress_ratios", ratios and f"{len(ratios)} entries", f"{n} entries")
    return ratios


def _deepseek_v4_experts(text: ConfigReader, quant: Quantization | None) -> Quantization | None:
    """DeepSeek V4's experts: ``expert_dtype`` fp4 (the default) is MXFP4, fp8 the linear layers' format.

    vllm/models/deepseek_v4/quant_config.py (0.33.0) L63-115: ``expert_dtype`` missing means ``fp4``,
    served by the MXFP4 MoE method (4-bit values, one UE8M0 byte per 32). ModelOpt NVFP4 experts
    (``moe_quant_algo``) keep 4-bit values with one fp8 scale per 16.
    """
    qc = text.data.get("quantization_config")
    if quant is not None and quant.method == "compressed-tensors" and isinstance(qc, Mapping):
        return _compressed_tensors_by_target(qc, quant)
    if quant is None or quant.method != "fp8":
        return quant
    if isinstance(qc, Mapping) and str(qc.get("moe_quant_algo") or "").upper() == "NVFP4":
        return replace(quant, experts=Quantization("modelopt_fp4", 4, 16, 1.0))
    if text.str_("expert_dtype", "fp4") == "fp8":
        return quant
    return replace(quant, experts=Quantization("mxfp4", 4, 32, 1.0))


def _compressed_tensors_by_target(qc: Mapping[str, Any], quant: Quantization) -> Quantization:
    """Mixed compressed-tensors checkpoints (RedHatAI's DeepSeek V4 NVFP4-FP8): one scheme per target.

    A group whose ``targets`` name the attention projections sets the linear layers' format (fp8
    blocks: one fp32 scale per block); a group naming the ``ffn`` projections sets the experts'
    (4-bit float: NVFP4, one fp8 scale per ``group_size``).
    """
    groups = qc.get("config_groups")
    base, experts = quant, None
    for group in groups.values() if isinstance(groups, Mapping) else ():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        targets = " ".join(str(t) for t in group.get("targets") or [])
        w = ConfigReader(weights, "config.json:quantization_config.config_groups.weights")
        bits = w.int_("num_bits", 8, limit=16)
        if "ffn" in targets and bits == 4:
            experts = Quantization("compressed-tensors", 4, w.int_("group_size", 16), 1.0)
        elif "attn" in targets and bits == 8:
            block = weights.get("block_structure")
            size = 0
            if isinstance(block, list) and len(block) == 2 and all(type(v) is int and v > 0 for v in block):
                size = block[0] * block[1]
            base = Quantization("compressed-tensors", 8, size, 4.0)
    return replace(base, experts=experts) if experts is not None else base


DEEPSEEK_V4 = Family(
    "deepseek_v4",
    ARCHITECTURES,
    _family_deepseek_v4,
    rotary_dim=lambda text: text.int_("qk_rope_head_dim"),
    quantization=_deepseek_v4_experts,
)
