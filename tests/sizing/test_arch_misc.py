"""Known-answer tests for architectures fitgate used to refuse, arithmetic in the comments.

Each term comes from vLLM 0.33.0's model source (vllm/model_executor/models/<arch>.py), cited in
the comments as file and line.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.activation import estimate_profile
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import NotModelledError, SizingError, UnknownArchitectureError
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import FullAttentionSpec, MambaSpec, SlidingWindowSpec
from fitgate.sizing.model import DenseMLP, ModelArchitecture, MoE
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import (
    Role,
    WeightInventory,
    classify_tensor,
    inventory_from_architecture,
    weights_per_rank,
)
from tests.conftest import catalog_config, model

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _gemma4_e4b() -> dict[str, Any]:
    """The text model of google/gemma-4-E4B-it (transformers 5.7 config, as unsloth/gemma-4-E4B-it ships it)."""
    return {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 42,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_global_key_value_heads": None,
        "head_dim": 256,
        "global_head_dim": 512,
        "num_kv_shared_layers": 18,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "vocab_size": 262144,
        "use_double_wide_mlp": False,
        "attention_k_eq_v": False,
        "num_experts": None,
        "sliding_window": 512,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
        "dtype": "bfloat16",
        "layer_types": ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(42)],
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
    }


def test_gemma4_e4b_kv_cache_of_the_unshared_layers() -> None:
    # 42 layers, the last 18 read an earlier layer's cache (gemma4.py L403-406): layers 0-23 keep one,
    # full attention at 5, 11, 17, 23 (4 x 2 KV heads x 512) and 20 sliding (2 KV heads x 256):
    # 20 x 2 x 256 x 2 (K,V) x 2 B + 4 x 2 x 512 x 2 x 2 B = 40,960 + 16,384 = 57,344 B a token.
    arch = parse_config(_gemma4_e4b())
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 24
    assert sum(s.bytes_per_token for s in specs) == 20 * 2 * 256 * 2 * 2 + 4 * 2 * 512 * 2 * 2 == 57_344


def test_gemma4_e4b_per_layer_embeddings_are_loaded() -> None:
    arch = parse_config(_gemma4_e4b())
    assert arch.per_layer_embedding is not None and arch.per_layer_embedding.hidden_size == 256
    inv = inventory_from_architecture(arch)
    # embed_tokens_per_layer: VocabParallelEmbedding(262,144, 256 x 42) (gemma4.py L1022-1028):
    # 262,144 x 10,752 = 2,818,572,288 params = 5,637,144,576 B in bf16 (the checkpoint's 5,376 MiB shard).
    table = [e for e in inv.entries if e.role is Role.EMBED_PER_LAYER]
    assert sum(e.numel for e in table) == 262144 * 256 * 42 == 2_818_572_288
    only_table = WeightInventory(tuple(table), "config")
    # vocab-parallel: 262,144 rows (a multiple of 64) split over TP2 -> half a table a GPU.
    for tp in (1, 2):
        w = weights_per_rank(arch, only_table, tp=tp, pp=1, pp_rank=0, dtype="bfloat16")
        assert w.tensors_bytes == 5_637_144_576 // tp
    # Gemma4Model builds the table on every pipeline stage (L1018-1028, no first-rank test): PP2 holds it twice.
    for rank in (0, 1):
        w = weights_per_rank(arch, only_table, tp=1, pp=2, pp_rank=rank, dtype="bfloat16")
        assert w.tensors_bytes == 5_637_144_576
    # per_layer_input_gate (2560 -> 256) + per_layer_projection (256 -> 2560) are ReplicatedLinear
    # (L682-697), post_per_layer_input_norm RMSNorm(2560): 1,313,280 params a layer on every GPU.
    layer0 = WeightInventory(tuple(e for e in inv.entries if e.layer == 0 and e.role is Role.REPLICATED), "config")
    # + the four layer norms (input, post-attention, pre- and post-feedforward, L615-626) and q/k norms
    replicated = 2 * 2560 * 256 + 2560 + 4 * 2560 + 2 * 256
    for tp in (1, 2):
        w = weights_per_rank(arch, layer0, tp=tp, pp=1, pp_rank=0, dtype="bfloat16")
        assert w.tensors_bytes == 2 * replicated


def test_gemma4_kv_shared_layers_drop_their_kv_projections() -> None:
    # KV-shared layers build q_proj only (gemma4.py L409-417) and the weights mapper drops the k_proj /
    # v_proj the checkpoint still ships (L119-124). Layers 24-41: 15 sliding (k, v 2560 x 2 x 256 each) and
    # 3 full (29, 35, 41; 2560 x 2 x 512 each): 15 x 2,621,440 + 3 x 5,242,880 = 55,050,240 params
    # = 110,100,480 B stored and not loaded.
    arch = parse_config(_gemma4_e4b())
    inv = inventory_from_architecture(arch)
    w = weights_per_rank(arch, inv, tp=1, pp=1, pp_rank=0, dtype="bfloat16")
    assert inv.stored_bytes - w.tensors_bytes == (15 * 2 * 2560 * 512 + 3 * 2 * 2560 * 1024) * 2 == 110_100_480


def test_gemma4_per_layer_tensor_names() -> None:
    assert classify_tensor("model.language_model.embed_tokens_per_layer.weight", 42) == (None, Role.EMBED_PER_LAYER)
    assert classify_tensor("model.language_model.per_layer_model_projection.weight", 42) == (None, Role.COLUMN)
    assert classify_tensor("model.language_model.layers.3.per_layer_input_gate.weight", 42) == (3, Role.REPLICATED)
    assert classify_tensor("model.language_model.layers.3.per_layer_projection.weight", 42) == (3, Role.REPLICATED)
    assert classify_tensor("model.audio_tower.layers.3.feed_forward1.ffw_layer_1.weight", 42) == (None, Role.VISION)


def test_gemma4_per_layer_inputs_live_through_the_forward_pass() -> None:
    # per_layer_inputs (tokens x 42 x 256) is built before the first layer and sliced in each
    # (gemma4.py L933-948, L792): 8,192 tokens x 10,752 x 2 B = 176,160,768 B more activation.
    arch = parse_config(_gemma4_e4b())
    without = replace(arch, per_layer_embedding=None)

    def forward(a: Any) -> int:
        p = estimate_profile(a, layers=range(42), last_stage=True, tp=1, pp=1, dtype_bytes=2,
                             max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=True,
                             accounting=accounting_for())  # fmt: skip
        return p.forward_bytes

    assert forward(arch) - forward(without) == 8192 * 42 * 256 * 2 == 176_160_768


def _mimo_v2_flash() -> ModelArchitecture:
    return to_model_input(load_directory(CORPUS / "XiaomiMiMo__MiMo-V2-Flash")).arch


def test_mimo_v2_flash_kv_cache_has_k_192_and_v_128() -> None:
    # tests/corpus real config: hybrid_layer_pattern has 9 global layers (0, 5, 11, ..., 47) and 39 sliding.
    # The DiffKV cache cell is kv_heads x (head_size + head_size_v) x dtype (kv_cache_interface.py L590):
    # global 4 x (192 + 128) x 2 B = 2,560 B, sliding (128-token window) 8 x 320 x 2 B = 5,120 B a token:
    # 9 x 2,560 + 39 x 5,120 = 23,040 + 199,680 = 222,720 B a token at TP1.
    arch = _mimo_v2_flash()
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    full = [s for s in specs if isinstance(s, FullAttentionSpec)]
    sliding = [s for s in specs if isinstance(s, SlidingWindowSpec)]
    assert (len(full), len(sliding)) == (9, 39)
    assert {s.bytes_per_token for s in full} == {4 * (192 + 128) * 2} and {s.sliding_window for s in sliding} == {128}
    assert sum(s.bytes_per_token for s in specs) == 9 * 2560 + 39 * 5120 == 222_720
    # TP8: global layers keep max(1, 4 // 8) = 1 KV head, sliding 8 // 8 = 1: 48 x 640 B = 30,720 B.
    tp8 = layer_specs(arch, range(arch.num_layers), 8, 2, 2, 16, accounting_for())
    assert sum(s.bytes_per_token for s in tp8) == 48 * 1 * 320 * 2 == 30_720


def test_mimo_v2_flash_projections_and_sinks() -> None:
    arch = _mimo_v2_flash()
    inv = inventory_from_architecture(arch)

    def numel(layer: int, role: Role) -> int:
        return sum(e.numel for e in inv.entries if e.layer == layer and e.role is role)

    # Layer 0, global and dense: k 4096 x 4 x 192 + v 4096 x 4 x 128 = 5,242,880 (mimo_v2.py L284-293);
    # q 4096 x 64 x 192 = 50,331,648 plus gate_up 2 x 4096 x 16,384 = 134,217,728;
    # o_proj 64 x 128 x 4096 = 33,554,432 plus down 16,384 x 4096 = 67,108,864 (L295-301).
    assert numel(0, Role.KV_PROJ) == 4096 * 4 * (192 + 128) == 5_242_880
    assert numel(0, Role.COLUMN) == 50_331_648 + 134_217_728
    assert numel(0, Role.ROW) == 33_554_432 + 67_108_864
    # Layer 1, sliding and MoE: 8 KV heads -> 10,485,760; q plus 64 sink logits (L314-316); 256 experts of
    # 3 x 4096 x 2048 = 6,442,450,944 (L172-190).
    assert numel(1, Role.KV_PROJ) == 4096 * 8 * 320 == 10_485_760
    assert numel(1, Role.COLUMN) == 50_331_648 + 64
    assert numel(1, Role.EXPERT) == 256 * 3 * 4096 * 2048 == 6_442_450_944
    # TP8: each rank holds max(1, 4 // 8) = 1 of a global layer's 4 KV heads but 1 of a sliding layer's 8.
    for layer, share in ((0, 4), (1, 8)):
        kv = WeightInventory(tuple(e for e in inv.entries if e.layer == layer and e.role is Role.KV_PROJ), "config")
        stored = kv.stored_bytes
        assert weights_per_rank(arch, kv, tp=8, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes == stored // share
    # The model card's total: 309B parameters (XiaomiMiMo/MiMo-V2-Flash README).
    counted = sum(e.numel for e in inv.entries)
    assert 0.99 <= counted / 309e9 <= 1.01


def _lfm2_8b_a1b() -> dict[str, Any]:
    """LiquidAI/LFM2-8B-A1B's shape (model card: 8.3B parameters, 24 layers, 6 of them attention)."""
    kinds = ["conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv",
             "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention",
             "conv", "conv", "full_attention", "conv", "conv"]  # fmt: skip
    return {
        "architectures": ["Lfm2MoeForCausalLM"],
        "model_type": "lfm2_moe",
        "vocab_size": 65536,
        "hidden_size": 2048,
        "intermediate_size": 7168,
        "moe_intermediate_size": 1792,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 128000,
        "conv_L_cache": 3,
        "num_dense_layers": 2,
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "use_expert_bias": True,
        "tie_word_embeddings": False,  # ignored: vLLM ties lm_head to the embedding (lfm2_moe.py L590)
        "layer_types": kinds,
        "torch_dtype": "bfloat16",
    }


def test_lfm2_moe_layers_caches_and_parameters() -> None:
    arch = parse_config(_lfm2_8b_a1b())
    assert arch.tie_word_embeddings
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    attention = [s for s in specs if not isinstance(s, MambaSpec)]
    states = [s for s in specs if isinstance(s, MambaSpec)]
    # 6 attention layers of 8 KV heads x 64 (2048 / 32): 6 x 2 x 8 x 64 x 2 B = 12,288 B a token;
    # 18 conv layers keep conv_L_cache - 1 = 2 inputs of hidden_size 2048 (lfm2_moe.py L560-567): 8,192 B.
    assert sum(s.bytes_per_token for s in attention) == 6 * 2 * 8 * 64 * 2 == 12_288
    assert len(states) == 18 and {s.state_bytes for s in states} == {2048 * 2 * 2}
    # Parameters: embedding 65,536 x 2048 = 134,217,728 (tied); attention layer q, o 2048^2, k, v 2048 x 512,
    # q/k norms 2 x 64 = 10,485,888; conv layer in_proj 2048 x 6144 + conv 2048 x 3 + out_proj 2048^2
    # = 16,783,360; layers 0-1 dense 3 x 2048 x 7168 = 44,040,192; layers 2-23 32 experts x 3 x 2048 x 1792
    # = 352,321,536 + router 2048 x 32 + 32 expert biases = 65,568; two norms a layer + the final one.
    inv = inventory_from_architecture(arch)
    expected = (
        134_217_728
        + 6 * 10_485_888
        + 18 * 16_783_360
        + 2 * 44_040_192
        + 22 * (352_321_536 + 65_568)
        + 24 * 2 * 2048
        + 2048
    )
    assert sum(e.numel for e in inv.entries) == expected == 8_339_930_560  # the card's 8.3B


def test_lfm2_moe_plans(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_lfm2_8b_a1b()))
    model = to_model_input(load_directory(tmp_path))
    result = plan(model, lookup_gpu("H100"), ServingConfig(max_model_len=8192))
    # bf16 weights: 8,339,930,560 x 2 B = 15.53 GiB plus the rotary cache, on one H100
    assert result.per_gpu.weights_bytes > 8_339_930_560 * 2
    assert result.kv.num_blocks > 0


def test_llama_nemotron_super_per_layer_blocks() -> None:
    # tests/corpus real config (nvidia/Llama-3_3-Nemotron-Super-49B-v1): of 80 blocks, 49 keep attention with
    # 64 // n_heads_in_group 8 = 8 KV heads of 128, 31 have none (nemotron_nas.py L142-160):
    # 49 x 2 x 8 x 128 x 2 B = 200,704 B a token.
    arch = to_model_input(load_directory(CORPUS / "nvidia__Llama-3_3-Nemotron-Super-49B-v1")).arch
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 49 and sum(s.bytes_per_token for s in specs) == 49 * 2 * 8 * 128 * 2 == 200_704
    # MLP widths from ffn_mult (L52-62): int(2 x mult x 8192 / 3) rounded up to 256: 5.25 -> 28,672,
    # 1.3125 -> 7,168, 1.0 -> 5,461 -> 5,632, 0.5 -> 2,730 -> 2,816, 2.625 -> 14,336, 3.28125 -> 17,920.
    widths = sorted(layer.ffn.intermediate_size for layer in arch.layers if isinstance(layer.ffn, DenseMLP))
    assert sum(widths) == 49 * 28672 + 10 * 7168 + 8 * 5632 + 6 * 14336 + 6 * 2816 + 17920 == 1_642_496
    # Parameters: embedding + lm_head 2 x 128,256 x 8192 = 2,101,346,304; attention 49 x (2 x 8192^2 +
    # 2 x 8192 x 1024) = 7,398,752,256; MLPs 3 x 8192 x 1,642,496 = 40,365,981,696; norms (49 input +
    # 80 post-attention + 1 final) x 8192 = 1,064,960: 49,867,145,216 (the card's 49B).
    inv = inventory_from_architecture(arch)
    assert sum(e.numel for e in inv.entries) == 2_101_346_304 + 7_398_752_256 + 40_365_981_696 + 1_064_960


def test_decilm_linear_replacement_is_refused() -> None:
    raw = json.loads((CORPUS / "nvidia__Llama-3_3-Nemotron-Super-49B-v1" / "config.json").read_text())
    raw["block_configs"][3]["attention"]["replace_with_linear"] = True
    with pytest.raises(UnknownArchitectureError, match=r"block_configs\[3\]\.attention\.replace_with_linear"):
        parse_config(raw)


def test_gemma4_builds_its_embedding_on_every_pipeline_stage() -> None:
    # gemma4.py 0.33.0 L1007-1012: Gemma4Model.embed_tokens is a VocabParallelEmbedding on every PP rank
    # (no PPMissingLayer), and the tied lm_head is that rank's own embedding (L1447-1454):
    # 262,144 x 2,816 x 2 B = 1,476,395,008 B on each of the 4 stages, not on the first alone.
    m = to_model_input(load_directory(CORPUS / "google__gemma-4-26B-A4B"))
    result = plan(
        m, lookup_gpu("H100"), ServingConfig(vllm_version="0.33.0", max_model_len=8192, pipeline_parallel_size=4)
    )
    assert [r.weights.embedding_bytes for r in result.ranks] == [262_144 * 2_816 * 2] * 4


def test_hunyuan_a13b_per_layer_expert_lists() -> None:
    # hunt15 E1: tencent/Hunyuan-A13B-Instruct's config.json gives moe_topk, moe_intermediate_size and
    # num_shared_expert as 32-entry lists; vLLM reads a number or a list (hunyuan_v1.py 0.19.0 L383-433). The shared
    # expert is intermediate_size x num_shared_expert = 3072 x 1 wide (use_mixed_mlp_moe).
    n = 32
    config = {
        "architectures": ["HunYuanMoEV1ForCausalLM"],
        "model_type": "hunyuan",
        "hidden_size": 4096,
        "intermediate_size": 3072,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "attention_head_dim": 128,
        "num_hidden_layers": n,
        "num_experts": 64,
        "moe_topk": [8] * n,
        "moe_intermediate_size": [3072] * n,
        "num_shared_expert": [1] * n,
        "use_mixed_mlp_moe": True,
        "use_qk_norm": True,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
        "vocab_size": 128167,
        "torch_dtype": "bfloat16",
    }
    arch = parse_config(config)
    moe = arch.layers[0].ffn
    assert isinstance(moe, MoE) and (moe.num_experts, moe.top_k, moe.expert_intermediate_size) == (64, 8, 3072)
    assert moe.shared_intermediate_size == 3072
    config["moe_topk"] = [8] * (n - 1)  # one short: named
    with pytest.raises(SizingError, match="moe_topk: '31 entries' is not valid; expected 32, one a layer"):
        parse_config(config)


def test_latent_non_gated_moe_workspace() -> None:
    # hunt15 O1: vLLM's Triton MoE workspaces are M x topk x (max(n, K) + max(N, K)) with N = w13's width (2n gated,
    # n for Nemotron 3's relu^2 experts) and K the experts' input width (the latent size of a latent MoE;
    # fused_moe/experts/triton_moe.py 0.34.0 L278-293). fitgate keeps its lower bound max(N, K) + n. Nemotron 3 Ultra
    # at TP 8: n = 5120 / 8 = 640, K = 2048, not gated: 8192 tokens x 22 x 2 B x (2048 + 640) = 968,884,224 B
    # (before, with the hidden 8192 and a gate: x (8192 + 640), 3.2 GB).
    ultra = model("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    p = plan(ultra, lookup_gpu("H100"), ServingConfig(tensor_parallel_size=8, pipeline_parallel_size=2))
    assert {r.profile.moe_workspace_bytes for r in p.ranks} == {8192 * 22 * 2 * (2048 + 640)} == {968_884_224}


@pytest.mark.parametrize(("version", "rows"), [("0.11.0", 32768), ("0.17.0", 16384), ("0.18.0", 65536)])
def test_moe_workspace_holds_one_chunk_of_tokens_where_the_release_chunks(version: str, rows: int) -> None:
    # hunt182 F2: VLLM_FUSED_MOE_CHUNK_SIZE's default, 32768 up to 0.11 and 16384 in 0.12-0.17 (envs.py 0.11.1
    # L778-780, 0.12.0 L789-791; fused_moe.py M = min(num_tokens, CHUNK_SIZE)); 0.18.0 sizes the workspace on every
    # token (modular_kernel.py 0.18.0 L1189-1193). Qwen3-30B-A3B at TP 1 and 65536 batched tokens: top-k 8, n 768,
    # K 2048, gated (2n = 1536): rows x 8 x 2 B x (max(1536, 2048) + 768) = rows x 45,056 B
    qwen = model("Qwen/Qwen3-30B-A3B")
    p = plan(
        qwen,
        lookup_gpu("H200"),
        ServingConfig(vllm_version=version, max_num_batched_tokens=65536, max_model_len=32768),
    )
    assert p.ranks[0].profile.moe_workspace_bytes == rows * 8 * 2 * (2048 + 768)


def test_encoder_only_attention_is_not_sized_never_refused() -> None:
    # hunt17 G5: gte-Qwen2-7B-instruct's card serves it with --hf-overrides '{"is_causal": false}': vLLM then builds
    # encoder-only attention with no KV cache (models/qwen2.py 0.34.0 L263-270); fitgate sized a causal cache and
    # refused 131072 tokens on an L4. It cannot size a plan without a KV pool: NotModelledError, an Unknown.
    config = {**catalog_config("Qwen/Qwen2.5-7B-Instruct"), "is_causal": False}
    with pytest.raises(NotModelledError, match="is_causal: False is taken by vLLM but not sized"):
        parse_config(config)
    from fitgate.checkpoints import resolve  # noqa: PLC0415
    from fitgate.operator.decision.evaluate import evaluate  # noqa: PLC0415 - the operator's view of the same
    from fitgate.operator.schema.api import parse_spec  # noqa: PLC0415
    from fitgate.sizing import Verdict  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import L4, gpus  # noqa: PLC0415

    raw = {
        "model": {"name": "Qwen/Qwen2.5-7B-Instruct", "source": "catalog", "hfOverrides": {"is_causal": False}},
        "serving": {"maxModelLen": 32768, "runner": "pooling"},
    }
    facts = resolve("Qwen/Qwen2.5-7B-Instruct", source="catalog")
    ev = evaluate(parse_spec(raw), model("Qwen/Qwen2.5-7B-Instruct"), gpus(L4), facts=facts)
    assert ev.verdict is Verdict.UNKNOWN and "encoder-only attention" in ev.message


# deepseek-ai/deepseek-moe-16b-chat config.json (its published keys; AMD's MI300X validated-models list serves it)
DEEPSEEK_MOE_16B: dict[str, Any] = {
    "architectures": ["DeepseekForCausalLM"],
    "model_type": "deepseek",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "vocab_size": 102400,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_deepseek_moe_v1_is_sized_as_softmax_attention_with_shared_experts(tmp_path: Path) -> None:
    # hunt21 E1: vLLM serves DeepseekForCausalLM (registry.py 0.34.0 L92); fitgate refused the architecture.
    arch = parse_config(DEEPSEEK_MOE_16B)
    dense, moe = arch.layers[0].ffn, arch.layers[1].ffn
    assert isinstance(dense, DenseMLP) and dense.intermediate_size == 10944  # first_k_dense_replace 1
    assert isinstance(moe, MoE) and (moe.num_experts, moe.top_k, moe.expert_intermediate_size) == (64, 6, 1408)
    assert moe.shared_intermediate_size == 2 * 1408
    # 16.4e9 parameters: attention 28 x 4 x 2048^2 = 0.47e9; layer 0 3 x 2048 x 10944 = 0.067e9; 27 layers of
    # (64 + 2) x 3 x 2048 x 1408 = 15.4e9; embeddings and lm_head 2 x 102400 x 2048 = 0.42e9
    params = 28 * 4 * 2048**2 + 3 * 2048 * 10944 + 27 * 66 * 3 * 2048 * 1408 + 2 * 102400 * 2048
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_MOE_16B))
    estimated = to_model_input(load_directory(tmp_path)).inventory
    assert sum(e.numel for e in estimated.entries) == pytest.approx(params, rel=0.01)  # norms and routers aside


# facebook/opt-125m config.json as published (vLLM's quickstart model; the LWS and production-stack tutorials serve it)
OPT_125M: dict[str, Any] = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "activation_function": "relu",
    "ffn_dim": 3072,
    "hidden_size": 768,
    "max_position_embeddings": 2048,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "torch_dtype": "float16",
    "vocab_size": 50272,
    "word_embed_proj_dim": 768,
}


def test_opt_is_sized_with_its_ungated_ffn_dim_mlp_and_tied_head(tmp_path: Path) -> None:
    # hunt24 G3: OPTForCausalLM (vllm opt.py, registry.py 0.34.0 L194) was an unknown architecture
    arch = parse_config(OPT_125M)
    mlp = arch.layers[0].ffn
    assert isinstance(mlp, DenseMLP) and (mlp.intermediate_size, mlp.gated) == (3072, False)
    assert arch.tie_word_embeddings and arch.max_position_embeddings == 2048
    # 12 x (4 x 768^2 + 2 x 768 x 3072) + 50272 x 768 (tied) = 84.9e6 + 38.6e6 = 123.5e6 (the learned position table,
    # 2050 x 768 = 1.6e6, left out): the checkpoint's 125e6 within 1.5 %
    (tmp_path / "config.json").write_text(json.dumps(OPT_125M))
    estimated = to_model_input(load_directory(tmp_path)).inventory
    stored = sum(e.numel for e in estimated.entries if e.role.value != "lm_head")
    assert stored == pytest.approx(125.2e6, rel=0.015)
