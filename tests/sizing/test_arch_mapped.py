"""Known-answer tests for architectures vLLM 0.33 builds with a class fitgate already sizes.

Each test reads a real config of ``tests/corpus`` and checks the KV cache and the weights of one
layer against vLLM 0.33.0's model source (vllm/model_executor/models/<file>.py, cited as file and
line), the arithmetic in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import FullAttentionSpec, SlidingWindowSpec
from fitgate.sizing.model import ModelArchitecture, MoE
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import (
    Role,
    WeightInventory,
    classify_tensor,
    inventory_from_architecture,
    weights_per_rank,
)

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _arch(name: str) -> ModelArchitecture:
    return to_model_input(load_directory(CORPUS / name)).arch


def _layer_numel(arch: ModelArchitecture, layer: int) -> int:
    return sum(e.numel for e in inventory_from_architecture(arch).entries if e.layer == layer)


def test_internlm3_is_llama() -> None:
    # internlm/internlm3-8b-instruct: registry.py L143 maps InternLM3ForCausalLM to llama.py's LlamaForCausalLM.
    arch = _arch("internlm__internlm3-8b-instruct")
    # KV cache: 48 full-attention layers (llama.py L212) of 2 KV heads x head_dim 128 (L158-159), bf16:
    # 2 (K, V) x 2 x 128 x 2 B x 48 = 49,152 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 48 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 2 * 128 * 2 * 48 == 49_152
    # One layer: qkv_proj (L165) 4096 x (32 + 2 x 2) x 128 = 18,874,368, o_proj (L175) 32 x 128 x 4096
    # = 16,777,216, gate_up_proj + down_proj (L95, L103) 3 x 4096 x 10240 = 125,829,120, no biases
    # (qkv_bias / bias false, L268-305), input + post-attention RMSNorm (L308-309) 2 x 4096:
    # 161,488,896.
    assert _layer_numel(arch, 0) == 18_874_368 + 16_777_216 + 125_829_120 + 2 * 4096 == 161_488_896
    # Untied lm_head (tie_word_embeddings false): 48 layers + 2 x 128,512 x 4096 + final norm 4096 =
    # 8,804,241,408, the checkpoint index's 35,216,965,632 float32 bytes / 4 (SOURCE.md).
    assert not arch.tie_word_embeddings
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 48 * 161_488_896 + 2 * 128_512 * 4096 + 4096 == 35_216_965_632 // 4
    # Only 2 KV heads: at TP 4 each rank still holds one whole head (QKVParallelLinear replicates them,
    # max(1, 2 // 4)): 4096 x 2 (K, V) x 1 x 128 x 48 layers x 2 B = 100,663,296 B, not a quarter.
    inv = inventory_from_architecture(arch)
    kv_only = WeightInventory(tuple(e for e in inv.entries if e.role is Role.KV_PROJ), "config")
    per_rank = weights_per_rank(arch, kv_only, tp=4, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes
    assert per_rank == 4096 * 2 * 1 * 128 * 48 * 2 == 100_663_296


def test_olmoe_experts_and_full_width_qk_norms() -> None:
    # allenai/OLMoE-1B-7B-0125-Instruct (registry.py L190: olmoe.py's OlmoeForCausalLM).
    arch = _arch("allenai__OLMoE-1B-7B-0125-Instruct")
    # Every layer is a mixture of num_experts 64 x intermediate_size 1024, top num_experts_per_tok 8, no
    # shared expert (olmoe.py L231-237, L89-103).
    moes = [layer.ffn for layer in arch.layers]
    assert all(isinstance(f, MoE) for f in moes) and len(moes) == 16
    assert {(f.num_experts, f.top_k, f.expert_intermediate_size, f.shared_intermediate_size) for f in moes} == {
        (64, 8, 1024, 0)
    }
    # KV cache: 16 layers of 16 KV heads x head_dim 2048 / 16 = 128 (L149), bf16:
    # 2 (K, V) x 16 x 128 x 2 B x 16 = 131,072 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 16 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 16 * 128 * 2 * 16 == 131_072
    # One layer: qkv_proj (L153) 2048 x (16 + 2 x 16) x 128 = 12,582,912, o_proj (L166) 2048^2 = 4,194,304,
    # q_norm + k_norm over all heads (L164-165) (16 + 16) x 128 = 4,096, experts 64 x 3 x 2048 x 1024 =
    # 402,653,184, router (GateLinear, L89) 2048 x 64 = 131,072, input + post-attention norms (L239-240)
    # 2 x 2048. fitgate's router term also counts a 64-entry bias that vLLM's GateLinear (bias=False,
    # layers/fused_moe/router/gate_linear.py L45) does not have: 64 elements a layer.
    layer = 12_582_912 + 4_194_304 + 4_096 + 402_653_184 + 131_072 + 2 * 2048
    assert _layer_numel(arch, 0) == layer + 64 == 419_569_728
    # Untied lm_head (L372): 16 layers + 2 x 50,304 x 2048 + final norm = 6,919,162,880 (the card's 7B).
    assert not arch.tie_word_embeddings
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 16 * (layer + 64) + 2 * 50_304 * 2048 + 2048 == 6_919_162_880
    # Experts are split across TP ranks (FusedMoE), the full-width q/k norms are not.
    inv = inventory_from_architecture(arch)
    norms = WeightInventory(tuple(e for e in inv.entries if e.role is Role.REPLICATED and e.layer == 0), "config")
    assert weights_per_rank(arch, norms, tp=4, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes == norms.stored_bytes


def _command_r() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CORPUS / "CohereForAI__c4ai-command-r-08-2024" / "config.json").read_text())
    return raw


def test_command_r_one_norm_per_layer_and_a_tied_head() -> None:
    # CohereForAI/c4ai-command-r-08-2024: registry.py L87 (commandr.py's CohereForCausalLM, as Cohere2).
    arch = parse_config(_command_r())
    # KV cache: v1 has no sliding window (commandr.py L235-244): 40 full-attention layers of 8 KV heads x
    # 8192 / 64 = 128 (L186-190), bf16: 2 (K, V) x 8 x 128 x 2 B x 40 = 163,840 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 40 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 8 * 128 * 2 * 40 == 163_840
    # One layer: qkv_proj (L208) 8192 x (64 + 2 x 8) x 128 = 83,886,080, o_proj (L217) 8192^2 = 67,108,864,
    # gate_up_proj + down_proj (L146, L153) 3 x 8192 x 24576 = 603,979,776, no biases, and a single
    # input_layernorm of 8192 weights (L309; attention and MLP run in parallel on its output, L319-324):
    # 754,982,912.
    assert _layer_numel(arch, 0) == 83_886_080 + 67_108_864 + 603_979_776 + 8192 == 754_982_912
    # lm_head is dropped and the embedding computes the logits (L417, L464-466): 40 layers + 256,000 x
    # 8192 + final norm = 32,296,476,672 (32.3B), tied even when the config says otherwise.
    total = 40 * 754_982_912 + 256_000 * 8192 + 8192
    assert sum(e.numel for e in inventory_from_architecture(arch).entries) == total == 32_296_476_672
    untied = parse_config({**_command_r(), "tie_word_embeddings": False})
    assert untied.tie_word_embeddings
    assert sum(e.numel for e in inventory_from_architecture(untied).entries) == total


def test_command_r_plus_qk_norms_are_sharded_with_the_heads() -> None:
    # use_qk_norm (Command R+): q_norm of (64 heads, 128) and k_norm of (8 KV heads, 128) LayerNorm weights
    # (commandr.py L257-263), loaded with row_parallel_weight_loader (L83): 8,192 + 1,024 = 9,216 more
    # a layer, split like the heads: at TP 8 a rank holds 8 x 128 of q_norm and 1 x 128 of k_norm.
    arch = parse_config({**_command_r(), "use_qk_norm": True})
    assert _layer_numel(arch, 0) == 754_982_912 + 64 * 128 + 8 * 128
    inv = inventory_from_architecture(arch)
    plain = inventory_from_architecture(parse_config(_command_r()))

    def rank_bytes(a: ModelArchitecture, i: WeightInventory) -> int:
        layer0 = WeightInventory(tuple(e for e in i.entries if e.layer == 0), "config")
        return weights_per_rank(a, layer0, tp=8, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes

    assert rank_bytes(arch, inv) - rank_bytes(parse_config(_command_r()), plain) == (8 * 128 + 1 * 128) * 2


def test_cohere2_windows_see_one_more_token() -> None:
    # Cohere2 (same class): sliding layers get per_layer_sliding_window = sliding_window + 1 (commandr.py
    # L237-244), so vLLM's sliding-window spec, and its pages, are sized for 4,097 tokens.
    types = ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(40)]
    raw = {
        **_command_r(),
        "architectures": ["Cohere2ForCausalLM"],
        "model_type": "cohere2",
        "sliding_window": 4096,
        "layer_types": types,
    }
    arch = parse_config(raw)
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert {s.sliding_window for s in specs if isinstance(s, SlidingWindowSpec)} == {4097}
    assert sum(isinstance(s, SlidingWindowSpec) for s in specs) == 30


def test_internlm2_is_llama_under_other_names() -> None:
    # internlm/internlm2-chat-7b-sft: registry.py L142 (internlm2.py's InternLM2ForCausalLM).
    arch = _arch("internlm__internlm2-chat-7b-sft")
    # KV cache: 32 full-attention layers (internlm2.py L148) of 8 KV heads x head_dim 4096 // 32 = 128
    # (L119), float16 (torch_dtype): 2 (K, V) x 8 x 128 x 2 B x 32 = 131,072 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 32 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 8 * 128 * 2 * 32 == 131_072
    # One layer: wqkv (L126) 4096 x (32 + 2 x 8) x 128 = 25,165,824, wo (L135) 4096^2 = 16,777,216,
    # gate_up_proj (w1, w3) + w2 (L63, L70) 3 x 4096 x 14336 = 176,160,768, all bias=False, attention_norm
    # + ffn_norm (L223-224) 2 x 4096: 218,112,000.
    assert _layer_numel(arch, 0) == 25_165_824 + 16_777_216 + 176_160_768 + 2 * 4096 == 218_112_000
    # output (L348) is its own ParallelLMHead unless tie_word_embeddings (false here, L354):
    # 32 layers + 2 x 92,544 x 4096 + final norm = 7,737,708,544 (the Hub's 7.74B).
    assert not arch.tie_word_embeddings
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 32 * 218_112_000 + 2 * 92_544 * 4096 + 4096 == 7_737_708_544
    # Real checkpoints name the tensors as internlm2.py's load_weights expects; each lands in the role
    # vLLM shards it by (wqkv QKVParallelLinear, wo/w2 RowParallelLinear, w1/w3 column, norms replicated).
    roles = {
        "model.tok_embeddings.weight": (None, Role.EMBED),
        "output.weight": (None, Role.LM_HEAD),
        "model.norm.weight": (None, Role.REPLICATED),
        "model.layers.3.attention.wqkv.weight": (3, Role.COLUMN),
        "model.layers.3.attention.wo.weight": (3, Role.ROW),
        "model.layers.3.feed_forward.w1.weight": (3, Role.COLUMN),
        "model.layers.3.feed_forward.w3.weight": (3, Role.COLUMN),
        "model.layers.3.feed_forward.w2.weight": (3, Role.ROW),
        "model.layers.3.attention_norm.weight": (3, Role.REPLICATED),
        "model.layers.3.ffn_norm.weight": (3, Role.REPLICATED),
    }
    assert {name: classify_tensor(name, 32) for name in roles} == roles


def test_solar_pro_is_llama_with_a_window_on_every_layer() -> None:
    # upstage/solar-pro-preview-instruct: registry.py L213 (solar.py's SolarForCausalLM).
    arch = _arch("upstage__solar-pro-preview-instruct")
    # KV cache: the config's global sliding_window 2047 (no layer_types) becomes CacheConfig.sliding_window
    # (engine/arg_utils.py L2288-2294), which every Attention without a per-layer window takes
    # (layers/attention/attention.py L266-271): 64 sliding layers of 10 KV heads x 5120 / 40 = 128,
    # bf16: 2 (K, V) x 10 x 128 x 2 B x 64 = 327,680 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 64 and all(isinstance(s, SlidingWindowSpec) and s.sliding_window == 2047 for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 10 * 128 * 2 * 64 == 327_680
    # One layer: qkv_proj (solar.py L140) 5120 x (40 + 2 x 10) x 128 = 39,321,600, o_proj (L149) 5120^2 =
    # 26,214,400, gate_up_proj + down_proj (L75, L82) 3 x 5120 x 17920 = 275,251,200, no biases
    # (attention_bias / mlp_bias false), input + post-attention RMSNorm (L221-222) 2 x 5120: 340,797,440.
    # The bskcn skip connections (L312-332) mix hidden states and hold no weights.
    assert _layer_numel(arch, 0) == 39_321_600 + 26_214_400 + 275_251_200 + 2 * 5120 == 340_797_440
    # Untied lm_head (L384): 64 layers + 2 x 32,128 x 5120 + final norm = 22,140,032,000 (the card's 22B).
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 64 * 340_797_440 + 2 * 32_128 * 5120 + 5120 == 22_140_032_000


def test_exaone3_is_llama_under_gpt2_names() -> None:
    # LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct: registry.py L104 (exaone.py's ExaoneForCausalLM). Its config
    # says num_layers, which transformers' ExaoneConfig aliases to num_hidden_layers.
    arch = _arch("LGAI-EXAONE__EXAONE-3.0-7.8B-Instruct")
    # KV cache: 32 full-attention layers of 8 KV heads x 4096 / 32 = 128 (exaone.py L134-136), bf16:
    # 2 (K, V) x 8 x 128 x 2 B x 32 = 131,072 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 32 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 8 * 128 * 2 * 32 == 131_072
    # One layer: qkv_proj (L142) 4096 x (32 + 2 x 8) x 128 = 25,165,824, out_proj (L152) 4096^2 =
    # 16,777,216, gate_up_proj (c_fc_0, c_fc_1) + c_proj (L77, L84) 3 x 4096 x 14336 = 176,160,768, no
    # biases, ln_1 + ln_2 RMSNorm (L264-265) 2 x 4096: 218,112,000.
    assert _layer_numel(arch, 0) == 25_165_824 + 16_777_216 + 176_160_768 + 2 * 4096 == 218_112_000
    # Untied lm_head (L406-413): 32 layers + 2 x 102,400 x 4096 + ln_f = 7,818,448,896 (the name's 7.8B).
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 32 * 218_112_000 + 2 * 102_400 * 4096 + 4096 == 7_818_448_896
    # Its checkpoints' tensor names land in the roles vLLM shards them by.
    roles = {
        "transformer.wte.weight": (None, Role.EMBED),
        "lm_head.weight": (None, Role.LM_HEAD),
        "transformer.ln_f.weight": (None, Role.REPLICATED),
        "transformer.h.5.attn.attention.q_proj.weight": (5, Role.COLUMN),
        "transformer.h.5.attn.attention.k_proj.weight": (5, Role.KV_PROJ),
        "transformer.h.5.attn.attention.v_proj.weight": (5, Role.KV_PROJ),
        "transformer.h.5.attn.attention.out_proj.weight": (5, Role.ROW),
        "transformer.h.5.mlp.c_fc_0.weight": (5, Role.COLUMN),
        "transformer.h.5.mlp.c_fc_1.weight": (5, Role.COLUMN),
        "transformer.h.5.mlp.c_proj.weight": (5, Role.ROW),
        "transformer.h.5.ln_1.weight": (5, Role.REPLICATED),
        "transformer.h.5.ln_2.weight": (5, Role.REPLICATED),
    }
    assert {name: classify_tensor(name, 32) for name in roles} == roles


def test_stablelm2_layer_norms_and_qkv_biases() -> None:
    # stabilityai/stablelm-2-1_6b-chat: registry.py L212 (stablelm.py's StablelmForCausalLM).
    arch = _arch("stabilityai__stablelm-2-1_6b-chat")
    # KV cache: 24 full-attention layers of 32 KV heads x 2048 / 32 = 64 (stablelm.py L120), at 2 B:
    # 2 (K, V) x 32 x 64 x 2 B x 24 = 196,608 B a token. Rotary over a quarter of each head
    # (partial_rotary_factor 0.25): 16 of 64 dims.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 24 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 32 * 64 * 2 * 24 == 196_608
    assert arch.rotary_dim == 16
    # One layer: qkv_proj (L133-138) 2048 x 3 x 2048 = 12,582,912 plus its biases (use_qkv_bias) 3 x 2048,
    # o_proj (L142, no bias) 2048^2 = 4,194,304, gate_up_proj + down_proj (L72, L79) 3 x 2048 x 5632 =
    # 34,603,008, input + post-attention nn.LayerNorm with weight and bias (L191-192) 2 x 2 x 2048:
    # 51,394,560.
    layer = 12_582_912 + 3 * 2048 + 4_194_304 + 34_603_008 + 2 * 2 * 2048
    assert _layer_numel(arch, 0) == layer == 51_394_560
    # Untied lm_head: 24 layers + 2 x 100,352 x 2048 + final LayerNorm (L240) 2 x 2048 = 1,644,515,328.
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 24 * layer + 2 * 100_352 * 2048 + 2 * 2048 == 1_644_515_328
    # Without use_qkv_bias the three biases go.
    raw = json.loads((CORPUS / "stabilityai__stablelm-2-1_6b-chat" / "config.json").read_text())
    plain = parse_config({**raw, "use_qkv_bias": False})
    assert _layer_numel(plain, 0) == layer - 3 * 2048


def _kolibri(**extra: Any) -> dict[str, Any]:
    # Aleph-Alpha/Kolibri-1's shape (hunt85 F1; the defaults of transformers 5.22's Kolibri1Config, which vLLM 0.33+
    # serves with its Transformers backend, registry.py 0.34.0 L794): 50 layers, 48 q / 4 kv heads of 128, 384 experts
    # of 512, top 6, one shared expert of 512, window 513
    return {
        "architectures": ["Kolibri1ForCausalLM"],
        "model_type": "kolibri1",
        "hidden_size": 2560,
        "num_hidden_layers": 50,
        "num_attention_heads": 48,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 128000,
        "num_experts": 384,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "sliding_window": 513,
        "max_position_embeddings": 262144,
        **extra,
    }


def test_kolibri1_windows_four_layers_of_five_as_its_config_class_does() -> None:
    # Kolibri1Config.__post_init__ without layer_types: full where (i + 1) % 5 == 0, else sliding (L99-103): 10 full,
    # 40 sliding layers of 4 kv x 128 x 2 (K, V) x 2 B = 2 KiB a token each; the same with layer_types written out
    computed = parse_config(_kolibri())
    types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(50)]
    written = parse_config(_kolibri(layer_types=types))
    for arch in (computed, written):
        specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
        assert sum(isinstance(s, FullAttentionSpec) and not isinstance(s, SlidingWindowSpec) for s in specs) == 10
        assert {s.sliding_window for s in specs if isinstance(s, SlidingWindowSpec)} == {513}
        assert sum(isinstance(s, SlidingWindowSpec) for s in specs) == 40
        moe = arch.layers[0].ffn
        assert isinstance(moe, MoE) and (moe.num_experts, moe.top_k, moe.expert_intermediate_size) == (384, 6, 512)
        assert moe.shared_intermediate_size == 512


def test_olmo3_without_layer_types_windows_three_layers_of_four() -> None:
    # Olmo3Config.__post_init__ fills layer_types with full attention on every 4th layer (transformers 5.22 L93-96),
    # which vLLM reads (hunt87): 64 layers -> 16 full, 48 sliding; before, all 64 were sized sliding (an under-count)
    raw = json.loads(
        (
            Path(__file__).resolve().parents[2]
            / "src/fitgate/checkpoints/catalog/allenai__Olmo-3.1-32B-Instruct/config.json"
        ).read_text()
    )
    written = parse_config(raw)
    computed = parse_config({k: v for k, v in raw.items() if k != "layer_types"})
    for arch in (written, computed):
        specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
        assert sum(isinstance(s, SlidingWindowSpec) for s in specs) == 48
