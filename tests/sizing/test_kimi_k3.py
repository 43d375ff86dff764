"""Kimi K3 (KimiK3ForConditionalGeneration): layer pattern, KDA state, hybrid MLA blocks, weights.

Known answers from the real config (tests/corpus/moonshotai__Kimi-K3, its SOURCE.md) and vLLM
0.33.0's vllm/models/kimi_k3/nvidia sources; the arithmetic is in the comments.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fitgate.sizing.architecture import MLA, DenseMLP, LinearAttention, MoE, parse_config
from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layout import build_layout, hybrid_block_size, layer_specs
from fitgate.sizing.kv_specs import MambaSpec, MLAAttentionSpec
from fitgate.sizing.mxfp4 import MARLIN_LAYOUT
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import (
    Role,
    _Builder,
    _expert_padding,
    _kda_params,
    inventory_from_architecture,
    weights_per_rank,
)

CONFIG = Path(__file__).resolve().parents[1] / "corpus" / "moonshotai__Kimi-K3" / "config.json"
V033 = accounting_for("0.33.0")


def _config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CONFIG.read_text())
    return data


def test_layer_pattern_follows_vllm_1_based_kda_layers() -> None:
    # kda_layers are 1-based (is_kda_layer: layer_idx + 1 in kda_layers): 69 KDA layers; the other
    # 24 are MLA, 0-based 3, 7, ..., 91 and 92 (full_attn_layers 4, 8, ..., 92, 93).
    # MoE where i >= first_k_dense_replace (1) and i % moe_layer_freq (1) == 0: all but layer 0.
    arch = parse_config(_config())
    assert arch.num_layers == 93
    mla = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mixer, MLA)]
    kda = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mixer, LinearAttention)]
    assert mla == [*range(3, 92, 4), 92] and len(kda) == 69
    assert isinstance(arch.layers[0].ffn, DenseMLP) and arch.layers[0].ffn.intermediate_size == 33792
    moe = arch.layers[1].ffn
    assert isinstance(moe, MoE) and all(layer.ffn == moe for layer in arch.layers[1:])
    # 896 experts of 3072 in the 3584-wide latent; 2 shared experts x 3072 = 6144 at hidden width
    assert (moe.num_experts, moe.top_k, moe.latent_size, moe.shared_intermediate_size) == (896, 16, 3584, 6144)
    m = arch.layers[3].mixer
    assert isinstance(m, MLA) and m.output_gate and not m.rope
    assert arch.rotary_dim == 0  # NoPE-only MLA: no cos/sin cache


def test_kda_state_is_bf16_conv_plus_fp32_recurrent_sharded_by_tp() -> None:
    # kda_state_shape at TP8: conv (4 - 1) x (3 x 96 x 128 / 8) = 3 x 4608 = 13,824 bf16 = 27,648 B;
    # recurrent (96 / 8) x 128 x 128 = 196,608 fp32 = 786,432 B; state = 814,080 B.
    # MLA latent: (512 + 64) x 2 B = 1152 B a token, not sharded.
    arch = parse_config(_config())
    s = layer_specs(arch, range(arch.num_layers), 8, 2, 2, 16, V033)
    states = [x for x in s if isinstance(x, MambaSpec)]
    latents = [x for x in s if isinstance(x, MLAAttentionSpec)]
    assert len(states) == 69 and len(latents) == 24
    assert states[0].state_bytes == 3 * 4608 * 2 + 12 * 128 * 128 * 4 == 814_080
    assert latents[0].bytes_per_token == 576 * 2 == 1152
    # with one draft token the conv state keeps 4 columns: 4 x 4608 x 2 + 786,432 = 823,296 B
    spec = layer_specs(arch, [0], 8, 2, 2, 16, V033, num_spec=1)[0]
    assert isinstance(spec, MambaSpec) and spec.state_bytes == 823_296


def test_hybrid_mla_block_is_a_multiple_of_128_tokens() -> None:
    # vLLM 0.33 (platforms/interface.py L1083-1105), use_mla: block = 128 x cdiv(814080, 128 x 1152)
    # = 128 x 6 = 768 tokens (16-token alignment would give 16 x 45 = 720); page 768 x 1152 = 884,736 B.
    # 24 MLA + 69 KDA layers: group size min(24, 69) = 24 -> 1 MLA group + cdiv(69, 24) = 3 KDA groups.
    arch = parse_config(_config())
    s = layer_specs(arch, range(arch.num_layers), 8, 2, 2, 16, V033)
    assert hybrid_block_size(s, None) == 16 * 45 == 720
    block = hybrid_block_size(s, None, mla=True)
    assert block == 768
    layout = build_layout(layer_specs(arch, range(arch.num_layers), 8, 2, 2, block, V033), V033)
    assert layout.page_size_bytes == 884_736 and layout.group_size == 24 and len(layout.groups) == 4


def test_kda_layer_weights() -> None:
    # hidden 7168, 96 heads x 128 = 12288, kernel 4:
    #   in_proj_qkvgfab q,k,v,g,beta: 7168 x (4 x 12288 + 96) = 353,009,664 (column)
    #   its f_a shard 7168 x 128 = 917,504 (replicated); f_b_proj 128 x 12288 = 1,572,864 (column)
    #   dt_bias 12288 + conv1d 3 x 12288 x 4 + A_log 96 = 159,840 (column); o_norm 128; o_proj 12288 x 7168
    arch = parse_config(_config())
    m = arch.layers[0].mixer
    assert isinstance(m, LinearAttention) and m.kda
    b = _Builder(arch)
    _kda_params(b, 0, m, arch.hidden_size)
    numel = {role: sum(v[0] for k, v in b.rows.items() if k[1] is role) for role in Role}
    assert numel[Role.COLUMN] == 353_009_664 + 1_572_864 + 159_840
    assert numel[Role.REPLICATED] == 917_504 + 128
    assert numel[Role.ROW] == 88_080_384
    # attention stays bf16 (ignored "re:.*self_attn.*"): 2 bytes an element
    assert sum(v[1] for v in b.rows.values()) == 2 * (353_009_664 + 1_572_864 + 159_840 + 917_504 + 128 + 88_080_384)


def test_only_routed_experts_are_mxfp4() -> None:
    # vLLM rewrites the compressed-tensors mxfp4-pack-quantized config to Mxfp4Config, which quantizes
    # only the routed experts: 4 bits + one uint8 scale per 32 -> 0.5 + 1/32 = 17/32 bytes an element.
    # Routed experts of one layer: 896 x 3 x 3584 x 3072 = 29,595,009,024 elements -> 15,722,348,544 B;
    # the latent projections 2 x 7168 x 3584 = 51,380,224 stay bf16 (102,760,448 B), as do the shared
    # experts, the router and every attention / KDA projection.
    arch = parse_config(_config())
    assert arch.quantization is not None and arch.quantization.method == "mxfp4"
    inv = inventory_from_architecture(arch)
    quantized = [e for e in inv.entries if e.quantized]
    assert {e.role for e in quantized} == {Role.EXPERT}
    experts = [e for e in quantized if e.layer == 5]
    assert [(e.numel, e.stored_bytes) for e in experts] == [(29_595_009_024, 29_595_009_024 * 17 // 32)]
    # layer 5's replicated linear layers: the latent projections plus KDA's f_a shard (7168 x 128 = 917,504)
    latent = [e for e in inv.entries if e.layer == 5 and e.role is Role.REPLICATED and e.linear]
    assert [(e.numel, e.stored_bytes) for e in latent] == [(51_380_224 + 917_504, 2 * (51_380_224 + 917_504))]


def test_experts_padded_to_256_columns_a_rank_without_expert_parallelism() -> None:
    # moe_intermediate_size 3072 (model.py 0.33.0 L418-427): TP8 -> 384 a rank, kept; TP16 -> 192 < 256
    # -> 256 x 16 = 4096 columns: a rank holds 256 / 192 = 4/3 of 1/TP of the experts; TP32: 256 / 96.
    # MXFP4 kernels then round the rank's 256 / 384 columns up to 128 and the 3584-wide latent to
    # 256 (already multiples): no further padding. Without the minimum (a bf16 checkpoint of another
    # model) TP16 would hold exactly 1/16.
    arch = parse_config(_config())
    assert _expert_padding(arch, 8, MARLIN_LAYOUT)[0] == 1.0
    assert _expert_padding(arch, 16, MARLIN_LAYOUT)[0] == _expert_padding(arch, 16, None)[0] == 256 / 192
    assert _expert_padding(arch, 32, None)[0] == 256 / 96
    unpadded = replace(
        arch,
        layers=tuple(
            replace(layer, ffn=replace(layer.ffn, min_intermediate_per_partition=0))
            if isinstance(layer.ffn, MoE)
            else layer
            for layer in arch.layers
        ),
    )
    assert _expert_padding(unpadded, 16, None)[0] == 1.0
    # one TP16 rank: 92 layers x 15,722,348,544 B of experts / 16 x 4/3
    inv = inventory_from_architecture(arch)
    rank16 = weights_per_rank(arch, inv, tp=16, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes
    rest = weights_per_rank(
        arch,
        replace(inv, entries=tuple(e for e in inv.entries if e.role is not Role.EXPERT)),
        tp=16,
        pp=1,
        pp_rank=0,
        dtype="bfloat16",
    ).tensors_bytes
    assert rank16 - rest == pytest.approx(92 * 15_722_348_544 / 16 * 4 / 3, abs=2)


def test_parameters_and_refusals() -> None:
    # 92 MoE layers x 29.6e9 routed expert elements = 2.72e12, plus attention, shared experts,
    # embeddings: 2.78e12, the "2.8T" of huggingface.co/moonshotai/collections (Kimi K3 entry).
    arch = parse_config(_config())
    total = sum(e.numel for e in inventory_from_architecture(arch).entries if e.role is not Role.SKIPPED)
    assert 0.95 <= total / 2.8e12 <= 1.05
    bad = _config()
    bad["text_config"]["linear_attn_config"]["use_full_rank_gate"] = False
    with pytest.raises(SizingError, match="use_full_rank_gate"):
        parse_config(bad)
    bad = _config()
    bad["text_config"]["quantization_config"]["format"] = "nvfp4-pack-quantized"
    with pytest.raises(SizingError, match=r"quantization_config\.format"):
        parse_config(bad)
    bad = _config()
    bad["text_config"]["linear_attn_config"]["kda_layers"] = [0, 1]
    with pytest.raises(SizingError, match="kda_layers"):
        parse_config(bad)
