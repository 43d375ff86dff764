"""Kimi K3: KDA linear attention and NoPE-only MLA, latent experts, attention residuals."""

from __future__ import annotations

from collections.abc import Mapping

from fitgate.sizing.config_reader import MAX_REASONABLE, ConfigReader, mtp_layers
from fitgate.sizing.errors import SizingError
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.model import MLA, DenseMLP, Layer, LinearAttention, MoE, Quantization

#: ``config.json:architectures[0]`` values read by the kimi_k3 family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = (
    # vllm/model_executor/models/registry.py 0.33.0 L488-491 -> vllm/models/kimi_k3 (nvidia/model.py)
    "KimiK3ForConditionalGeneration",
)


def _family_kimi_k3(text: ConfigReader, model_type: str) -> FamilyLayers:
    """Kimi K3 (``KimiK3ForConditionalGeneration``) as vllm/models/kimi_k3/nvidia (0.33.0) builds it.

    Layer ``i`` is KDA when ``i + 1`` is in ``linear_attn_config.kda_layers`` (1-based,
    transformers_utils/configs/kimi_linear.py L157-161), else MLA (model.py L715-770); vLLM does not
    read ``full_attn_layers`` beyond asserting it is set (kimi_linear.py L118-120). A layer is a
    mixture of experts when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``
    (model.py L700-706), else the dense MLP of ``intermediate_size`` (L778-790). Experts are latent
    (``routed_expert_hidden_size``, L383-390, L476-504) with ``num_shared_experts x
    moe_intermediate_size`` shared (L449-466).
    """
    n = text.int_("num_hidden_layers")
    lin = text.data.get("linear_attn_config")
    if not isinstance(lin, Mapping):
        raise SizingError(f"{text.prefix}:linear_attn_config", lin, "a JSON object with kda_layers")
    kda_cfg = ConfigReader(lin, f"{text.prefix}:linear_attn_config")
    if kda_cfg.data.get("use_full_rank_gate") is not True:
        # Without it vLLM builds Kimi-Linear's KimiLinearGatedDeltaNetAttention (model.py L718-734).
        raise SizingError(
            f"{kda_cfg.prefix}:use_full_rank_gate", kda_cfg.data.get("use_full_rank_gate"), "true (Kimi K3's KDA)"
        )
    if text.data.get("mla_use_nope") is not True:
        raise SizingError(f"{text.prefix}:mla_use_nope", text.data.get("mla_use_nope"), "true (NoPE-only MLA)")
    kda_layers = kda_cfg.list_("kda_layers")
    if kda_layers is None or not all(type(v) is int and 1 <= v <= n for v in kda_layers):
        raise SizingError(f"{kda_cfg.prefix}:kda_layers", kda_layers, f"a list of 1-based layer numbers up to {n}")
    if kda_cfg.list_("full_attn_layers") is None:
        raise SizingError(f"{kda_cfg.prefix}:full_attn_layers", None, "a list (vLLM asserts it is set)")
    heads = kda_cfg.int_("num_heads")
    head_dim = kda_cfg.int_("head_dim", limit=4096)
    kda = LinearAttention(
        heads, heads, head_dim, head_dim, kda_cfg.int_("short_conv_kernel_size", 4), kda=True, recurrent_dtype_bytes=4
    )
    mla = MLA(
        text.int_("num_attention_heads"),
        text.opt_int("q_lora_rank"),
        text.int_("kv_lora_rank"),
        text.int_("qk_nope_head_dim"),
        text.int_("qk_rope_head_dim"),
        text.int_("v_head_dim"),
        output_gate=text.bool_("mla_use_output_gate", False),
        rope=False,
    )
    experts = text.int_("num_experts", limit=MAX_REASONABLE["num_experts"])
    expert_size = text.int_("moe_intermediate_size")
    moe = MoE(
        experts,
        text.int_("num_experts_per_token"),
        expert_size,
        shared_intermediate_size=text.int_("num_shared_experts", 0, minimum=0) * expert_size,
        latent_size=text.int_("routed_expert_hidden_size") if text.has("routed_expert_hidden_size") else 0,
        latent_norm=text.bool_("latent_moe_use_norm", True),
        min_intermediate_per_partition=text.int_("min_moe_intermediate_per_partition", 256),
    )
    dense = DenseMLP(text.int_("intermediate_size"))
    first_dense = text.int_("first_k_dense_replace", 0, minimum=0)
    every = text.int_("moe_layer_freq", 1)
    kda_set = set(kda_layers)
    layers = [
        Layer(kda if i + 1 in kda_set else mla, moe if i >= first_dense and i % every == 0 else dense) for i in range(n)
    ]
    return layers, {"mtp_layers": mtp_layers(text)}


def _kimi_k3_quantization(text: ConfigReader, quant: Quantization | None) -> Quantization | None:
    """Kimi K3's compressed-tensors ``mxfp4-pack-quantized`` checkpoint, as vLLM 0.33 serves it.

    ``KimiK3ForConditionalGenerationConfig`` rewrites its ``quant_method`` to ``mxfp4``
    (model_executor/models/config.py 0.33.0 L492-522), so ``Mxfp4Config`` loads it: built without
    the checkpoint's ``ignore`` list (quantization/mxfp4.py L66-68), it keeps every linear layer
    unquantized (L91-105, latent projections included) and quantizes only the routed experts
    (``Mxfp4MoEMethod``: 4-bit values, one uint8 scale per 32, L661-720). Other compressed-tensors
    formats would keep compressed-tensors' per-layer ``ignore`` matching, which fitgate does not
    derive for this model: refused.
    """
    if quant is None or quant.method != "compressed-tensors":
        return quant
    qc = text.data.get("quantization_config")
    fmt = qc.get("format") if isinstance(qc, Mapping) else None
    if fmt != "mxfp4-pack-quantized":
        raise SizingError(
            "config.json:quantization_config.format",
            fmt,
            "mxfp4-pack-quantized (the compressed-tensors layout of Kimi K3 fitgate sizes)",
        )
    return Quantization("mxfp4", 4, 32, 1.0, experts_only=True)


KIMI_K3 = Family(
    "kimi_k3",
    ARCHITECTURES,
    _family_kimi_k3,
    rotary_dim=lambda text: 0,  # NoPE-only MLA: no rotary cos/sin cache (nvidia/mla.py 0.33.0 L145, L164-196)
    quantization=_kimi_k3_quantization,
    attention_residuals=lambda text: text.has("attn_res_block_size"),
)
