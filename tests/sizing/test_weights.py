"""Known-answer weight tests: bytes per GPU after loading, arithmetic in the comments."""

from __future__ import annotations

from typing import get_args

import pytest

from fitgate.operator.schema.api import Serving
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import RUNTIME_QUANTIZATION, parse_config
from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION_NOT_SIZED, excluded_modules, parse_quantization
from fitgate.sizing.weights import (
    Role,
    classify_tensor,
    inventory_from_architecture,
    inventory_from_tensors,
    pp_layer_ranges,
    weights_per_rank,
)
from tests.conftest import catalog_config, model

# Llama-3.1-8B, per layer: q 4096x4096 + k,v 1024x4096 each + o 4096x4096 = 41,943,040
#                          gate, up, down 14336x4096 each = 176,160,768; two norms 8,192 -> 218,112,000 params
LAYER = 218_112_000
EMBED = 128256 * 4096  # 525,336,576 params, embed_tokens and (untied) lm_head each
ROTARY = 131072 * 128 * 2  # vLLM's cos/sin cache: max positions x rotary dim x 2 B = 33,554,432 B
NORMS = 32 * 2 * 4096 + 4096  # replicated across TP ranks


def test_inventory_matches_the_hub_parameter_count() -> None:
    # 32 x 218,112,000 + 2 x 525,336,576 + 4,096 = 8,030,261,248 params = index total 16,060,522,496 B / 2
    inv = inventory_from_architecture(parse_config(catalog_config("meta-llama/Llama-3.1-8B-Instruct")))
    assert inv.stored_bytes == 2 * (32 * LAYER + 2 * EMBED + 4096) == 16_060_522_496


def test_tp1_is_checkpoint_plus_rotary_cache() -> None:
    # 16,060,522,496 + 33,554,432 = 16,094,076,928 B = 14.99 GiB ("Model loading took 14.99 GiB", vLLM 0.19 H100)
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    w = weights_per_rank(m.arch, m.inventory, tp=1, pp=1, pp_rank=0, dtype="bfloat16")
    assert w.total_bytes == 16_060_522_496 + ROTARY
    assert round(w.total_bytes / 2**30, 2) == 14.99


def test_tp2_shards_everything_but_norms_and_rotary() -> None:
    # (16,060,522,496 - 2 x 266,240 norm bytes) / 2 + 532,480 + 33,554,432 = 8,064,081,920 B = 7.51 GiB
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    w = weights_per_rank(m.arch, m.inventory, tp=2, pp=1, pp_rank=0, dtype="bfloat16")
    assert w.total_bytes == (16_060_522_496 - 2 * NORMS) // 2 + 2 * NORMS + ROTARY == 8_064_081_920


def test_pp_puts_embedding_first_and_lm_head_last() -> None:
    # stage 0: 16 layers + embed_tokens = (16 x 218,112,000 + 525,336,576) x 2 B + rotary = 8,063,811,584 B (7.51 GiB)
    # stage 1: 16 layers + final norm + lm_head = stage 0 + 4,096 x 2 B
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    first = weights_per_rank(m.arch, m.inventory, tp=1, pp=2, pp_rank=0, dtype="bfloat16")
    last = weights_per_rank(m.arch, m.inventory, tp=1, pp=2, pp_rank=1, dtype="bfloat16")
    assert first.total_bytes == (16 * LAYER + EMBED) * 2 + ROTARY == 8_063_811_584
    assert last.total_bytes == first.total_bytes + 4096 * 2


@pytest.mark.parametrize(
    ("layers", "pp", "expected"),
    [(32, 2, [16, 16]), (26, 4, [6, 7, 7, 6]), (61, 4, [15, 15, 16, 15]), (5, 5, [1, 1, 1, 1, 1])],
)
def test_pp_partition_matches_get_pp_indices(layers: int, pp: int, expected: list[int]) -> None:
    # vLLM gives the remainder to the stages before the last: range(2, remainder + 2) -> partitions[-i] += 1
    assert [len(r) for r in pp_layer_ranges(layers, pp)] == expected


def test_pp_larger_than_layers_is_an_error() -> None:
    with pytest.raises(SizingError, match="pipeline_parallel_size: 33 is not valid"):
        pp_layer_ranges(32, 33)


def test_vllm_pp_layer_partition_sets_each_stages_layers() -> None:
    # hunt54 F3: VLLM_PP_LAYER_PARTITION (vllm/distributed/utils.py 0.34.0 L227-238), e.g. LLMPQ's "24,40"
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    l4 = lookup_gpu("L4")
    even = plan(m, l4, ServingConfig(pipeline_parallel_size=2, max_model_len=8192, vllm_version="0.19.0"))
    heavy = plan(
        m,
        l4,
        ServingConfig(pipeline_parallel_size=2, pp_layer_partition="24,8", max_model_len=8192, vllm_version="0.19.0"),
    )
    # stage 0 of 24 layers: 24 x 218,112,000 + embed 525,336,576 = 5,760,024,576 params, 11,520,049,152 B bf16 (+ norms,
    # rotary); the even split's 16 layers: 4,015,128,576 params. The plan is the heaviest stage's.
    assert [len(r) for r in pp_layer_ranges(32, 2, (24, 8))] == [24, 8]
    assert heavy.ranks[0].weights.total_bytes - even.ranks[0].weights.total_bytes == 8 * LAYER * 2
    assert [len(r.layers) for r in heavy.ranks] == [24, 8]
    for bad, why in (("24,40", "summing to the model's 32 layers"), ("32", "2 counts"), ("a,b", "comma-separated")):
        with pytest.raises(SizingError, match=why):
            plan(m, l4, ServingConfig(pipeline_parallel_size=2, pp_layer_partition=bad, vllm_version="0.19.0"))


def test_runtime_fp8_quantizes_linear_layers_only() -> None:
    # linear weights 32 x 218,103,808 = 6,979,321,856 params -> 1 B each (one fp32 scale per tensor);
    # embed_tokens, lm_head (2 x 525,336,576 x 2 B) and norms stay bf16, plus the rotary cache:
    # 6,979,321,856 + 2,101,346,304 + 532,480 + 33,554,432 = 9,114,755,072 B = 8.49 GiB (vLLM 0.19 printed 8.49)
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    w = weights_per_rank(
        m.arch,
        m.inventory,
        tp=1,
        pp=1,
        pp_rank=0,
        dtype="bfloat16",
        runtime_quantization=RUNTIME_QUANTIZATION["fp8"],
    )
    linear = 32 * (LAYER - 8192)
    assert w.total_bytes == linear + 2 * EMBED * 2 + NORMS * 2 + ROTARY == 9_114_755_072
    assert round(w.total_bytes / 2**30, 2) == 8.49


def test_float32_doubles_float_weights() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    bf16 = weights_per_rank(m.arch, m.inventory, tp=1, pp=1, pp_rank=0, dtype="bfloat16")
    fp32 = weights_per_rank(m.arch, m.inventory, tp=1, pp=1, pp_rank=0, dtype="float32")
    assert fp32.total_bytes == 2 * bf16.total_bytes


def test_mla_latent_projection_is_replicated() -> None:
    # DeepSeek-V2-Lite: kv_a_proj_with_mqa (2048 x 576) is a ReplicatedLinear: every TP rank holds all of it,
    # so TP2 keeps more than half of TP1's bytes.
    m = model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    tp1 = weights_per_rank(m.arch, m.inventory, tp=1, pp=1, pp_rank=0, dtype="bfloat16")
    tp2 = weights_per_rank(m.arch, m.inventory, tp=2, pp=1, pp_rank=0, dtype="bfloat16")
    replicated = sum(e.stored_bytes for e in m.inventory.entries if e.role is Role.REPLICATED)
    assert replicated > 27 * 2048 * 576 * 2
    assert tp2.tensors_bytes == pytest.approx((tp1.tensors_bytes - replicated) / 2 + replicated, rel=1e-6)
    # MLA backends also keep W_UK/W_UV copies of kv_b_proj: 27 x 512 x 16 heads x (128 + 128) x 2 B
    assert tp1.mla_absorbed_bytes == 27 * 512 * 16 * 256 * 2


def test_kv_projection_replicated_when_tp_exceeds_kv_heads() -> None:
    # 8 KV heads at TP16: each rank keeps 1 whole head of k_proj/v_proj (1/8), not 1/16.
    m = model("meta-llama/Llama-3.1-70B-Instruct")
    kv_proj = sum(e.numel for e in m.inventory.entries if e.role is Role.KV_PROJ)
    tp8 = weights_per_rank(m.arch, m.inventory, tp=8, pp=1, pp_rank=0, dtype="bfloat16")
    tp16 = weights_per_rank(m.arch, m.inventory, tp=16, pp=1, pp_rank=0, dtype="bfloat16")
    assert tp8.tensors_bytes - tp16.tensors_bytes < (tp8.tensors_bytes - kv_proj * 2 / 8) / 2 + 1


def test_moe_experts_all_resident() -> None:
    # Qwen3-30B-A3B activates 3B parameters but all 128 experts are loaded: 56.88 GiB at TP1 (vLLM 0.19)
    m = model("Qwen/Qwen3-30B-A3B")
    w = weights_per_rank(m.arch, m.inventory, tp=1, pp=1, pp_rank=0, dtype="bfloat16")
    assert round(w.total_bytes / 2**30, 2) == 56.88


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("model.embed_tokens.weight", Role.EMBED),
        ("lm_head.weight", Role.LM_HEAD),
        ("model.layers.3.self_attn.k_proj.weight", Role.KV_PROJ),
        ("model.layers.3.self_attn.o_proj.weight", Role.ROW),
        ("model.layers.3.mlp.gate_up_proj.weight", Role.COLUMN),
        ("model.layers.3.mlp.experts.7.down_proj.weight", Role.EXPERT),
        ("model.layers.3.mlp.shared_experts.down_proj.weight", Role.ROW),
        ("model.layers.3.mlp.gate.weight", Role.REPLICATED),
        ("model.layers.3.self_attn.kv_a_proj_with_mqa.weight", Role.REPLICATED),
        ("model.layers.3.input_layernorm.weight", Role.REPLICATED),
        ("model.layers.61.mlp.experts.0.up_proj.weight", Role.SKIPPED),
        ("model.layers.0.self_attn.rotary_emb.inv_freq", Role.SKIPPED),
        ("vision_tower.blocks.0.attn.qkv.weight", Role.VISION),
    ],
)
def test_tensor_names_map_to_roles(name: str, role: Role) -> None:
    assert classify_tensor(name, num_layers=61)[1] is role


def test_a_stored_lm_head_of_a_tied_model_is_not_loaded() -> None:
    # Llama-3.2-1B ties lm_head to embed_tokens; a checkpoint that stores lm_head.weight anyway
    # (128256 x 2048 bf16 = 525,336,576 B) loads to the same bytes: vLLM skips it.
    arch = parse_config(catalog_config("meta-llama/Llama-3.2-1B-Instruct"))
    assert arch.tie_word_embeddings
    base = [("model.embed_tokens.weight", "BF16", (128256, 2048)), ("model.norm.weight", "BF16", (2048,))]
    stored = [*base, ("lm_head.weight", "BF16", (128256, 2048))]
    plain = weights_per_rank(
        arch, inventory_from_tensors(base, arch.num_layers), tp=1, pp=1, pp_rank=0, dtype="bfloat16"
    )
    extra = weights_per_rank(
        arch, inventory_from_tensors(stored, arch.num_layers), tp=1, pp=1, pp_rank=0, dtype="bfloat16"
    )
    assert extra.total_bytes == plain.total_bytes


def test_auto_round_and_quark_checkpoints_are_sized_not_refused() -> None:
    # Public runs serve both (club-3090's AutoRound INT4 Qwen checkpoints; the recipes' amd/gpt-oss-120b-w-mxfp4-a-fp8
    # on MI355X); vLLM reads auto-round as "inc" and quark as QuarkConfig. AutoRound int4, group 128: 4 bits plus a
    # 2 B fp16 scale and a 0.5 B packed zero point per 128 weights, as GPTQ.
    auto = parse_quantization({"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True})
    assert auto is not None and (auto.method, auto.weight_bits, auto.group_size, auto.scale_bytes) == (
        "gptq",
        4,
        128,
        2.5,
    )
    mx = parse_quantization(
        {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4", "group_size": 32}}}
    )
    assert mx is not None and (mx.weight_bits, mx.group_size, mx.scale_bytes) == (4, 32, 1.0)
    fp8 = parse_quantization({"quant_method": "quark", "global_quant_config": {"weight": [{"dtype": "fp8_e4m3"}]}})
    assert fp8 is not None and fp8.weight_bits == 8
    # hunt204 F3: OCP MX FP6 (vLLM 0.12+, ocp_mx_utils.py 0.34.0 L36-75): 6 bits and an e8m0 scale byte per 32
    fp6 = parse_quantization(
        {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp6_e3m2", "group_size": 32}}}
    )
    assert fp6 is not None and (fp6.weight_bits, fp6.group_size, fp6.scale_bytes) == (6, 32, 1.0)
    # hunt204 F4: W4A8's [fp8 per tensor, int4 per channel] list stores int4 weights (quark.py 0.34.0 L440-470)
    w4a8 = [
        {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
        {"dtype": "int4", "qscheme": "per_channel", "group_size": -1},
    ]
    q = parse_quantization({"quant_method": "quark", "global_quant_config": {"weight": w4a8}})
    assert q is not None and (q.weight_bits, q.group_size) == (4, 0)
    # a Quark dtype fitgate does not size is Unknown, never a refusal
    with pytest.raises(NotModelledError, match=r"global_quant_config\.weight\.dtype"):
        parse_quantization({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "nf3"}}})


def test_compressed_tensors_group_size_minus_one_is_channel_wise_not_refused() -> None:
    # hunt204 F1: llm-compressor writes "group_size": -1 for per-tensor / per-channel schemes (vllm#38195, a Qwen3.5 FP8
    # served on vLLM 0.17.1); compressed-tensors reads it as channel-wise (quant_args.py 0.10.2 L243-254)
    weights = {"num_bits": 8, "type": "float", "strategy": "tensor", "group_size": -1, "dynamic": False}
    q = parse_quantization(
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": weights, "targets": ["Linear"]}},
        }
    )
    assert q is not None and (q.weight_bits, q.group_size) == (8, 0)


def test_a_checkpoint_stating_its_fp8_storage_dtype_is_served_in_bf16_not_refused() -> None:
    # hunt204 F2: "torch_dtype": "float8_e4m3fn" (RedHatAI's FP8-dynamic Llama 4 Scout config); vLLM's auto dtype falls
    # back to the platform's first (config/model.py 0.34.0 L2467-2508): bf16 here
    cfg = {**catalog_config("meta-llama/Llama-3.1-8B-Instruct"), "torch_dtype": "float8_e4m3fn"}
    assert parse_config(cfg).dtype == "bfloat16"
    with pytest.raises(SizingError, match="torch_dtype"):
        parse_config({**cfg, "torch_dtype": "banana"})


def test_modules_a_quantization_config_leaves_unquantized() -> None:
    # hunt15 O2: nvidia/Gemma-4-31B-IT-NVFP4's hf_quant_config.json excludes every layer's self_attn (and lm_head,
    # the vision embedding) from NVFP4; the config-only estimate counted attention at 4 bits: 18.87 GiB where a public
    # log printed 31.18 GiB. Globs are matched as ModelOpt does (fnmatch); compressed-tensors' "re:" patterns only
    # when ".*" is their one wildcard (a prefix match, as re.match), never compiled as a regex.
    qc = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}, "targets": ["Linear"]}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:model\\.layers\\.(0|1)\\.mlp.*", "model.layers.3.mlp*"],
    }
    assert excluded_modules(qc) == ("lm_head", "*self_attn*", "model.layers.3.mlp*")
    config = {**catalog_config("meta-llama/Llama-3.1-8B-Instruct"), "quantization_config": qc}
    arch = parse_config(config)
    inv = inventory_from_architecture(arch)
    attention = [e for e in inv.entries if e.role is Role.KV_PROJ]
    mlp = {e.layer: e.quantized for e in inv.entries if e.role is Role.ROW and e.layer in (2, 3)}
    assert attention and not any(e.quantized for e in attention)  # every layer's self_attn: bf16
    # layer 3's MLP excluded by its glob (and its o_proj row entry, attention, too); layer 2's MLP stays 4-bit
    assert mlp == {2: True, 3: False}


def test_experts_int8_stores_only_the_experts_in_one_byte() -> None:
    # hunt19 F1: vLLM's experts_int8 keeps every linear layer but the experts in the model's dtype and quantizes the
    # experts to int8 with an fp32 scale per output row (quantization/experts_int8.py 0.6.3 L60-96, 0.34.0
    # online/int8.py L63-108). Mixtral-8x7B: 32 layers x 8 experts x 3 x 4096 x 14336 = 45.1e9 expert weights, so
    # the experts go from ~84 GiB in bf16 to ~42 GiB, the rest (attention, embeddings: ~1.6e9, ~3 GiB) unchanged.
    mixtral = model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    bf16 = plan(mixtral, lookup_gpu("H100"), ServingConfig(max_model_len=8192, tensor_parallel_size=4))
    int8 = plan(
        mixtral,
        lookup_gpu("H100"),
        ServingConfig(max_model_len=8192, tensor_parallel_size=4, quantization="experts_int8"),
    )
    expert_bytes = 32 * 8 * 3 * 4096 * 14336
    saved = bf16.per_gpu.weights_bytes - int8.per_gpu.weights_bytes
    # half of the experts' bf16 bytes per GPU, less the scales (one fp32 per 4096 weights here)
    assert abs(saved - expert_bytes / 4 * (1 - 4 / 4096)) < 0.01 * saved
    assert RUNTIME_QUANTIZATION["experts_int8"].experts_only


def test_online_shorthands_are_sized_as_the_format_they_name() -> None:
    # hunt26 F1: vLLM 0.26+ takes online shorthands (config/quantization.py 0.34.0 _ONLINE_SHORTHANDS), and 0.31+ logs
    # "--quantization fp8 is deprecated for online quantization; use --quantization fp8_per_tensor" (weight_utils.py
    # 0.31.0 L341-349). fitgate refused them (exit 2). Qwen3-8B: 36 layers x (4096 x (4096 + 2 x 1024 + 4096) + 3 x 4096
    # x 12288) = 6.95e9 linear weights; the embedding and lm_head (2 x 151936 x 4096 = 1.24e9) stay bf16.
    qwen = model("Qwen/Qwen3-8B")
    gpu = lookup_gpu("H100")

    def weights(q: str | None, version: str = "0.34.0") -> int:
        return plan(
            qwen, gpu, ServingConfig(max_model_len=8192, quantization=q, vllm_version=version)
        ).per_gpu.weights_bytes

    linear = 36 * (4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 12288)
    bf16 = weights(None)
    # fp8_per_tensor is online fp8: one byte a linear weight, the same bytes as --quantization fp8
    assert weights("fp8_per_tensor") == weights("fp8")
    assert abs((bf16 - weights("fp8_per_tensor")) - linear) < 0.01 * linear
    # per channel: an fp32 scale per output row, counted as 4 bytes per 4096 weights (0.1 %)
    assert weights("fp8_per_tensor") < weights("fp8_per_channel") < weights("fp8_per_tensor") * 1.002
    # mxfp4 from 0.30 (a deferred shorthand): 4 bits + one e8m0 byte per 32 = 0.53125 bytes a linear weight
    assert abs((bf16 - weights("mxfp4", "0.30.0")) - linear * (2 - 0.53125)) < 0.01 * linear
    # mxfp8: 1 + 1/32 bytes
    assert abs((bf16 - weights("mxfp8", "0.30.0")) - linear * (2 - 1.03125)) < 0.01 * linear
    # the MoE-only shorthands leave a dense model's linear layers in bf16
    assert weights("nvfp4_per_token") == weights("int8_per_channel_weight_only") == bf16
    # hunt30 F1: ROCm's ptpc_fp8 (vLLM 0.7.3-0.18) stores what fp8_per_channel does: fp8 and an fp32 scale a row
    assert weights("ptpc_fp8", "0.11.0") == weights("fp8_per_channel", "0.11.0")


def test_deferred_shorthand_before_0_30_and_unsized_shorthands_are_unknown() -> None:
    # Before 0.30 `--quantization mxfp4` picks the checkpoint method (layers/quantization/__init__.py 0.29.0
    # L164-175), whose behaviour on an unquantized checkpoint fitgate does not size: Unknown, never a refusal.
    qwen = model("Qwen/Qwen3-8B")
    # hunt208 F1: rtn (round-to-nearest while loading, vLLM 0.10.1+) was read as the checkpoint's own: bf16, denied
    for q, version in (
        ("mxfp4", "0.29.0"), ("mxfp8", "0.27.0"), ("lut_b_moe", "0.34.0"), ("online", "0.34.0"), ("rtn", "0.10.1"),
    ):  # fmt: skip
        with pytest.raises(NotModelledError):
            plan(qwen, lookup_gpu("H100"), ServingConfig(max_model_len=8192, quantization=q, vllm_version=version))


def test_the_crd_takes_every_load_time_method_vllm_takes() -> None:
    # a ModelDeployment's spec.serving.quantization enum is the sized methods and the ones answered Unknown
    field = Serving.model_fields["quantization"].annotation
    literal = next(a for a in get_args(field) if get_args(a))
    assert set(get_args(literal)) >= set(RUNTIME_QUANTIZATION) | RUNTIME_QUANTIZATION_NOT_SIZED


def test_gemma4_experts_beside_the_mlp_stay_quantized_when_the_mlp_is_excluded() -> None:
    # hunt28 F1: nvidia/Gemma-4-26B-A4B-NVFP4 excludes model.language_model.layers.N.mlp* (the dense MLP); Gemma 4's
    # routed experts are layers.N.experts, beside it (gemma4.py 0.34.0 L668-675), so they are NVFP4. fitgate matched
    # the pattern against mlp.experts and sized every expert in bf16 (47.90 GiB): a verified RTX 5090 run denied.
    # Experts: 30 layers x 128 x 3 x 2816 x 704 = 22.84e9 weights; bf16 2 bytes, NVFP4 0.5 + 1/16 = 0.5625 bytes.
    nvfp4 = model("nvidia/Gemma-4-26B-A4B-NVFP4")
    bf16 = model("google/gemma-4-26B-A4B")
    serving = ServingConfig(
        max_model_len=32768, kv_cache_dtype="fp8", gpu_memory_utilization=0.9, max_num_seqs=4,
        max_num_batched_tokens=4096, vllm_version="0.24.0",
    )  # fmt: skip
    quantized = plan(nvfp4, lookup_gpu("RTX-5090"), serving)
    full = plan(bf16, lookup_gpu("RTX-5090"), serving)
    experts = 30 * 128 * 3 * 2816 * 704
    saved = full.per_gpu.weights_bytes - quantized.per_gpu.weights_bytes
    assert saved >= experts * (2 - 0.5625) * 0.97, saved / 2**30
    assert quantized.verdict.value in ("Fits", "Tight")


def test_modelopt_mxfp8_is_sized_and_an_unknown_algorithm_is_unknown_not_refused() -> None:
    # hunt190 F1: tencent/Hy4-preview-FP8 ships {"quant_method": "modelopt", "quantization": {"quant_algo": "MXFP8"}},
    # which vLLM 0.17+ loads (modelopt.py 0.17.0 L96-110, 0.34.0 L150-167: e4m3 weights, one e8m0 scale per 32);
    # fitgate refused it as a usage error. 8 bits plus 1 B per 32 weights: 8 + 8 / 32 = 8.25 bits a weight.
    mx = parse_quantization({"quant_method": "modelopt", "quantization": {"quant_algo": "MXFP8"}})
    assert mx is not None and (mx.method, mx.weight_bits, mx.group_size, mx.scale_bytes) == (
        "modelopt_mxfp8",
        8,
        32,
        1.0,
    )
    flat = parse_quantization({"quant_method": "modelopt", "quant_algo": "mxfp8"})
    assert flat == mx
    # an algorithm fitgate does not size is Unknown (NotModelledError), never a usage error
    with pytest.raises(NotModelledError, match=r"quant_algo: 'W4A16_AWQ'"):
        parse_quantization({"quant_method": "modelopt", "quantization": {"quant_algo": "W4A16_AWQ"}})
