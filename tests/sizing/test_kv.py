"""Known-answer KV cache tests: one per attention kind, the arithmetic in the comments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.kv_layout import (
    KVGroup,
    KVLayout,
    build_layout,
    hybrid_block_size,
    layer_specs,
    num_blocks,
    one_request_bytes,
    reported_tokens,
)
from fitgate.sizing.kv_specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    ServingShape,
    SlidingWindowSpec,
)
from fitgate.sizing.model import MLA, Layer, LinearAttention, ModelArchitecture
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for
from tests.conftest import catalog_config, model

V019 = accounting_for("0.19.0")


def specs(repo: str, tp: int = 1, kv_bytes: int = 2, block: int = 16, version: str = "0.19.0"):
    arch = parse_config(catalog_config(repo))
    return arch, layer_specs(arch, range(arch.num_layers), tp, kv_bytes, 2, block, accounting_for(version))


def test_gqa_8b_is_128_kib_per_token_and_16_gib_at_128k() -> None:
    # 32 layers x 2 (K,V) x 8 kv heads x 128 head dim x 2 B = 131072 B = 128 KiB/token
    # 131072 B x 131072 tokens = 16 GiB for one 128k-token request
    _, s = specs("meta-llama/Llama-3.1-8B-Instruct")
    assert sum(x.bytes_per_token for x in s) == 128 * 1024
    layout = build_layout(s, V019)
    assert one_request_bytes(layout, ServingShape(131072, 8192, 16)) == 16 * GiB


def test_seed_70b_example() -> None:
    # 80 layers x 2 x 8 kv heads x 128 x 2 B = 327680 B/token.
    # One 32768-token request: 327680 x 32768 = 10,737,418,240 B = 10.7 GB (the seed's "10.7 GB").
    # The seed's 16 concurrent requests need 16 x that = 171.8 GB: KV, not weights, is what breaks the box.
    _, s = specs("meta-llama/Llama-3.1-70B-Instruct")
    per_token = sum(x.bytes_per_token for x in s)
    assert per_token == 327680
    one = one_request_bytes(build_layout(s, V019), ServingShape(32768, 8192, 16))
    assert one == 10_737_418_240
    assert 16 * one == 171_798_691_840


def test_full_attention_page() -> None:
    # page = 2 x block 16 x 8 heads x 128 x 2 B = 65536 B; 8192 tokens -> cdiv(8192, 16) = 512 pages
    spec = FullAttentionSpec(16, 8, 128, 2)
    assert spec.page_size_bytes == 65536
    assert spec.max_memory_usage_bytes(ServingShape(8192, 8192, 16)) == 512 * 65536
    assert spec.max_memory_usage_bytes(ServingShape(8193, 8192, 16)) == 513 * 65536


def test_sliding_window_caps_one_request() -> None:
    # window 4096, batch 2048: min(4096 - 1 + 2048, 32768) = 6143 tokens -> cdiv(6143, 16) + 1 = 385 pages
    spec = SlidingWindowSpec(16, 8, 256, 2, 4096)
    assert spec.max_memory_usage_bytes(ServingShape(32768, 2048, 16)) == 385 * spec.page_size_bytes
    # ... and only saves memory when window + batch < max_model_len: min(4095 + 8192, 8192) = 8192 -> 513 pages
    assert spec.max_memory_usage_bytes(ServingShape(8192, 8192, 16)) == 513 * spec.page_size_bytes


def test_chunked_local_attention() -> None:
    # chunk 8192 + batch 8192 = 16384 tokens (< 131072) -> 1024 pages of 16 x 2 x 8 x 128 x 2 = 65536 B = 64 MiB
    spec = ChunkedLocalAttentionSpec(16, 8, 128, 2, 8192)
    assert spec.max_memory_usage_bytes(ServingShape(131072, 8192, 16)) == 64 * 1024 * 1024


def test_mla_latent_is_not_sharded_by_tp() -> None:
    # DeepSeek-V3: 61 layers x (512 + 64) x 2 B = 70272 B/token, no K/V factor 2, the same at TP 1 and TP 8
    _, tp1 = specs("deepseek-ai/DeepSeek-V3", tp=1)
    _, tp8 = specs("deepseek-ai/DeepSeek-V3", tp=8)
    assert all(isinstance(x, MLAAttentionSpec) for x in tp1)
    assert sum(x.bytes_per_token for x in tp1) == sum(x.bytes_per_token for x in tp8) == 61 * 576 * 2


def test_v0_pads_mla_entries_to_256_bytes() -> None:
    # vLLM 0.7 V0: 576 x 2 B = 1152 B rounded up to 1280 B -> 61 x 1280 = 78080 B/token (+11 %)
    _, s = specs("deepseek-ai/DeepSeek-V3", version="0.7.3")
    assert sum(x.bytes_per_token for x in s) == 78080


def test_tp_splits_kv_heads_then_replicates() -> None:
    # 8 kv heads: TP2 -> 4 heads/GPU = 65536 B/token; TP8 -> 1 head; TP16 -> still 1 head (replicated):
    # 32 x 2 x 1 x 128 x 2 = 16384 B/token at both TP8 and TP16
    _, tp2 = specs("meta-llama/Llama-3.1-8B-Instruct", tp=2)
    _, tp8 = specs("meta-llama/Llama-3.1-8B-Instruct", tp=8)
    _, tp16 = specs("meta-llama/Llama-3.1-8B-Instruct", tp=16)
    assert sum(x.bytes_per_token for x in tp2) == 65536
    assert sum(x.bytes_per_token for x in tp8) == sum(x.bytes_per_token for x in tp16) == 16384


def test_fp8_kv_halves_bytes_and_doubles_tokens_not_pool() -> None:
    # 131072 -> 65536 B/token; the pool in GiB is unchanged, the token count doubles (measured:
    # 476,016 -> 952,032 tokens at 58.11 GiB on H100, vLLM 0.19)
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    h100 = lookup_gpu("H100")
    auto = plan(m, h100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.33.0"))
    fp8 = plan(
        m,
        h100,
        ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, kv_cache_dtype="fp8", vllm_version="0.33.0"),
    )
    assert fp8.kv.bytes_per_token * 2 == auto.kv.bytes_per_token == 131072
    assert fp8.ranks[0].available_kv_bytes == auto.ranks[0].available_kv_bytes
    # twice the blocks, or one more when the pool holds an odd number of fp8 blocks (16 tokens)
    assert 0 <= fp8.kv.reported_tokens - 2 * auto.kv.reported_tokens <= fp8.kv.block_size


def test_hybrid_sliding_groups_gpt_oss_tp2() -> None:
    # 12 sliding + 12 full layers, 8 kv heads / TP2 = 4, head 64:
    # page = 16 x 2 x 4 x 64 x 2 B = 16384 B; group size min(12, 12) = 12 -> 2 groups.
    # vLLM 0.19 printed 59.32 GiB available: 63,694,364,999 B // 16384 // 12 = 323,966 blocks (it printed
    # 323,972 from the unrounded figure); tokens = blocks // 2 groups x 16.
    _, s = specs("openai/gpt-oss-20b", tp=2)
    layout = build_layout(s, V019)
    assert layout.page_size_bytes == 16384 and layout.group_size == 12 and len(layout.groups) == 2
    blocks = num_blocks(layout, int(59.32 * GiB))
    assert blocks == int(59.32 * GiB) // 16384 // 12 == 323966


def test_hybrid_mamba_page_unification_qwen3_next() -> None:
    # Gated DeltaNet state per request per layer at TP1:
    #   conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 24576; recurrent 32 x 128 x 128 = 524288
    #   (24576 + 524288) x 2 B = 1,097,728 B
    # attention: 2 kv heads x 256 x 2 (K,V) x 2 B = 2048 B/token
    # attention block = 16 x cdiv(1097728, 16 x 2048) = 16 x 34 = 544 tokens; page = 544 x 2048 = 1,114,112 B
    arch, s = specs("Qwen/Qwen3-Next-80B-A3B-Thinking")
    states = [x for x in s if isinstance(x, MambaSpec)]
    assert states[0].state_bytes == 1_097_728
    block = hybrid_block_size(s, None)
    assert block == 544
    s = layer_specs(arch, range(arch.num_layers), 1, 2, 2, block, V019)
    layout = build_layout(s, V019)
    # 12 attention layers, 36 state layers: group size 12 -> 1 attention + 3 state groups, all pages equal
    assert layout.page_size_bytes == 544 * 2048 == 1_114_112
    assert layout.group_size == 12 and len(layout.groups) == 4
    # fp8 KV at TP4 (1 kv head per GPU, state / 4): state = (3 x 8192 / 4 + 8 x 128 x 128) x 2 B = 274,432 B;
    # bf16: 1024 B/token -> block 16 x cdiv(274432, 16384) = 272, page 278,528 B;
    # fp8:   512 B/token -> block 16 x cdiv(274432, 8192) = 544, page 278,528 B (same bytes per page).
    # An 8192-token request takes cdiv(8192, 272) + 3 state groups = 34 pages in bf16 and
    # cdiv(8192, 544) + 3 = 19 pages in fp8: fp8 buys 34 / 19 = 1.79x concurrency, not 2x.
    m = model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    h200 = lookup_gpu("H200")
    bf16 = plan(m, h200, ServingConfig(max_model_len=8192, tensor_parallel_size=4, gpu_memory_utilization=0.95))
    fp8 = plan(
        m,
        h200,
        ServingConfig(max_model_len=8192, tensor_parallel_size=4, gpu_memory_utilization=0.95, kv_cache_dtype="fp8"),
    )
    assert (bf16.kv.block_size, fp8.kv.block_size) == (272, 544)
    assert bf16.kv.page_size_bytes == fp8.kv.page_size_bytes == 278528
    gain = fp8.kv.max_concurrency / bf16.kv.max_concurrency
    assert gain == pytest.approx(34 / 19, rel=1e-3)


def test_unequal_attention_pages_are_unified() -> None:
    # Two layer types with pages 65536 and 32768 B: the smaller gets block 32 so both pages are 65536 B.
    s = [FullAttentionSpec(16, 8, 128, 2)] * 4 + [SlidingWindowSpec(16, 4, 128, 2, 1024)] * 4
    layout = build_layout(list(s), V019)
    assert layout.page_size_bytes == 65536
    assert {g.spec.block_size for g in layout.groups} == {16, 32}
    assert layout.block_size == 16


def test_without_hybrid_manager_sliding_costs_full() -> None:
    # vLLM 0.8: no hybrid allocator, Gemma-2's sliding layers are sized as full attention.
    _, s = specs("google/gemma-2-9b-it", version="0.8.5")
    assert all(isinstance(x, FullAttentionSpec) for x in s)


@pytest.mark.parametrize(("version", "expected"), [("0.19.0", 130304), ("0.8.5", 48867 * 16)])
def test_reported_tokens_by_version(version: str, expected: int) -> None:
    # vLLM 0.19 reports blocks // groups x block: Gemma-3-12B-like 6 groups, 48,867 blocks -> 48867 // 6 x 16 = 130,304
    spec = FullAttentionSpec(16, 8, 256, 2)
    layout = KVLayout(tuple(KVGroup(spec, 8) for _ in range(6)), 8, spec.page_size_bytes, 16, (spec,) * 48)
    assert reported_tokens(layout, 48867, ServingShape(8192, 8192, 16), accounting_for(version)) == expected


def test_kda_state_keeps_an_fp32_recurrent_matrix() -> None:
    # Kimi Delta Attention (kda_state_shape / kda_state_dtype, mamba_utils.py 0.33.0 L133-149, L296-319),
    # 96 heads x 128, kernel 4, TP8: conv 3 x (3 x 12288 / 8) = 13,824 x 2 B = 27,648 B (model dtype);
    # recurrent 12 x 128 x 128 = 196,608 x 4 B = 786,432 B -> 814,080 B. The same shapes as a gated
    # DeltaNet in the model dtype would be (13,824 + 196,608) x 2 = 420,864 B.
    kda = LinearAttention(96, 96, 128, 128, 4, kda=True, recurrent_dtype_bytes=4)
    mla = MLA(96, 1536, 512, 128, 64, 128)
    arch = ModelArchitecture(
        "KimiK3ForConditionalGeneration",
        "kimi_linear",
        "bfloat16",
        7168,
        163840,
        False,
        (Layer(kda, None), Layer(mla, None)),
        1048576,
        0,
        1048576,
    )
    s = layer_specs(arch, range(2), 8, 2, 2, 16, V019)
    assert isinstance(s[0], MambaSpec) and s[0].state_bytes == 814_080
    gdn = layer_specs(
        replace(arch, layers=(Layer(LinearAttention(96, 96, 128, 128, 4), None),)),
        range(1),
        8,
        2,
        2,
        16,
        V019,
    )[0]
    assert isinstance(gdn, MambaSpec) and gdn.state_bytes == 420_864
    # An MLA hybrid's block is a multiple of 128 tokens (platforms/interface.py 0.33.0 L1083-1105):
    # 128 x cdiv(814080, 128 x 1152) = 768; other hybrids keep 16 x cdiv(814080, 16 x 1152) = 720.
    assert hybrid_block_size(s, None, mla=True) == 768
    assert hybrid_block_size(s, None) == 720


@pytest.mark.parametrize(
    ("version", "pp", "in_flight"),
    [
        # before 0.26 one batch: max_num_batched_tokens
        ("0.25.0", 1, 8192),
        # 0.26-0.33, async scheduling (0.14+), the V1 model runner at PP 1: 2 batches (config/vllm.py 0.26.0 L512-533)
        ("0.26.0", 1, 2 * 8192),
        # the V1 runner does not overlap batches with PP: pp batches
        ("0.26.0", 2, 2 * 8192),
        # 0.34: every model on the V2 runner, pp + 1 batches with async scheduling (0.34.0 L560-575)
        ("0.34.0", 1, 2 * 8192),
        ("0.34.0", 2, 3 * 8192),
    ],
)
def test_in_flight_tokens_follow_the_release(version: str, pp: int, in_flight: int) -> None:
    from fitgate.sizing.resolve import accounting_of, resolve_serving  # noqa: PLC0415

    m = model("openai/gpt-oss-20b")
    h100 = lookup_gpu("H100-SXM")
    serving = ServingConfig(
        max_model_len=32768, max_num_batched_tokens=8192, pipeline_parallel_size=pp, vllm_version=version
    )
    rs = resolve_serving(m.arch, h100, serving, accounting_of(m.arch, h100, serving))
    assert rs.in_flight_tokens == in_flight


def test_sliding_window_holds_every_in_flight_batch_from_0_26() -> None:
    # vLLM 0.26 frees a sliding-window layer's out-of-window blocks once a step's tokens are processed, so a request
    # holds window - 1 + max_in_flight_tokens (kv_cache_interface.py 0.26.0 L567-598). A 1024-token window at
    # 32768 tokens and 8192 batched: 0.25 holds min(1023 + 8192, 32768) = 9215 tokens -> cdiv(9215, 16) + 1 = 577
    # pages per sliding layer; 0.26 (async, 2 batches) min(1023 + 16384, 32768) = 17407 -> 1088 + 1 = 1089 pages.
    spec = SlidingWindowSpec(16, 8, 128, 2, 1024)
    assert spec.max_memory_usage_bytes(ServingShape(32768, 8192, 16)) == 577 * spec.page_size_bytes
    assert spec.max_memory_usage_bytes(ServingShape(32768, 16384, 16)) == 1089 * spec.page_size_bytes
    # through the plan (gpt-oss-20b: 12 of its 24 layers slide over 128 tokens): the sliding layers' share of one
    # request grows from cdiv(127 + 8192, 16) + 1 = 521 to cdiv(127 + 16384, 16) + 1 = 1033 pages
    m = model("openai/gpt-oss-20b")
    h100 = lookup_gpu("H100-SXM")
    old, new = (
        plan(m, h100, ServingConfig(max_model_len=32768, max_num_batched_tokens=8192, vllm_version=v))
        for v in ("0.25.0", "0.26.0")
    )
    assert new.kv.one_request_bytes > old.kv.one_request_bytes
    assert new.kv.max_concurrency < old.kv.max_concurrency


def test_qwen3_5_recurrent_state_is_float32_from_0_17_as_its_config_says() -> None:
    # Qwen3.5-27B's gated-delta-net layer: 16 key and 48 value heads of 128, conv kernel 4. Its config.json says
    # mamba_ssm_dtype float32, which vLLM 0.17+ makes the recurrent state's dtype (Qwen3_5ForConditionalGeneration
    # Config, model_executor/models/config.py 0.17.0 L625-645; gated_delta_net_state_dtype). Per request:
    #   conv      (4 - 1) x (2 x 16 x 128 + 48 x 128) = 30,720 x 2 B (the model's bf16) = 61,440 B
    #   recurrent 48 x 128 x 128 = 786,432 x 2 B = 1,572,864 B (bf16) or x 4 B = 3,145,728 B (fp32)
    # so 1,634,304 B before 0.17 and 3,207,168 B from 0.17; the hybrid attention block that holds one state grows from
    # 16 x cdiv(1,634,304, 16 x 4,096) = 400 to 16 x cdiv(3,207,168, 65,536) = 784 tokens (4 KV heads x 256 x 2 x 2 B).
    from fitgate.sizing.kv_specs import MambaSpec  # noqa: PLC0415

    m = model("Qwen/Qwen3.5-27B")
    h100 = lookup_gpu("H100-SXM")

    def state_and_block(**kw: object) -> tuple[int, int]:
        p = plan(m, h100, ServingConfig(max_model_len=32768, **kw))  # type: ignore[arg-type]
        [state] = {s.state_bytes for s, _ in p.ranks[0].layout.spec_counts if isinstance(s, MambaSpec)}
        return state, p.kv.block_size

    assert state_and_block(vllm_version="0.16.0") == (1_634_304, 400)
    assert state_and_block(vllm_version="0.17.0") == (3_207_168, 784)
    # --mamba-ssm-cache-dtype wins over the config
    assert state_and_block(vllm_version="0.17.0", mamba_ssm_cache_dtype="bfloat16") == (1_634_304, 400)


def test_nemotron_h_recurrent_state_follows_its_config_and_the_release_default() -> None:
    # NemotronH: the config's mamba_ssm_cache_dtype (Nemotron 3 checkpoints say float32), else float16 before 0.20 and
    # float32 from 0.20 (NemotronHForCausalLMConfig, models/config.py 0.15.1 L565-582, 0.34.0 L1143-1166)
    from fitgate.sizing.resolve import accounting_of, mamba_ssm_dtype_bytes  # noqa: PLC0415

    m = model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    h100 = lookup_gpu("H100-SXM")
    assert m.arch.mamba_ssm_dtype == "float32"
    for version, expected in (("0.11.0", 0), ("0.15.1", 4), ("0.34.0", 4)):
        acc = accounting_of(m.arch, h100, ServingConfig(vllm_version=version))
        assert mamba_ssm_dtype_bytes(m.arch, None, acc) == expected, version
    bare = replace(m.arch, mamba_ssm_dtype=None)  # a NemotronH config without the key
    for version, expected in (("0.19.0", 2), ("0.20.0", 4)):
        assert mamba_ssm_dtype_bytes(bare, None, accounting_of(bare, h100, ServingConfig(vllm_version=version))) == (
            expected
        )


def test_max_num_seqs_above_a_hybrid_models_blocks_is_refused_from_0_20() -> None:
    # vLLM 0.20+ refuses to capture full CUDA graphs for a hybrid Mamba model whose max_num_seqs exceeds its KV cache
    # blocks: each decode sequence holds one Mamba block (config/compilation.py 0.20.0 L1420-1441; vllm#49064: "max_num_
    # seqs (1024) exceeds available Mamba cache blocks (969)" on an H100 at 0.28, KAITO#2319 "(1024) ... (614)" on an
    # H100 at 0.25.1). Qwen3.5-27B on one H100 at 132,000 tokens and gmu 0.9 has ~314 blocks of 784 tokens against the
    # 1024 sequences a >= 70 GiB GPU defaults to: far beyond the fitted terms' error band, so DoesNotFit, with
    # --max-num-seqs at the blocks as the fix.
    m = model("Qwen/Qwen3.5-27B")
    h100 = lookup_gpu("H100-SXM")
    base = {"max_model_len": 132000, "gpu_memory_utilization": 0.9}
    p = plan(m, h100, ServingConfig(vllm_version="0.28.0", **base))  # type: ignore[arg-type]
    assert p.verdict.value == "DoesNotFit" and p.serving.max_num_seqs == 1024 > p.kv.num_blocks
    assert [r.code for r in p.reasons] == ["MaxNumSeqsExceedsMambaBlocks"], p.reasons
    from fitgate.sizing import suggest  # noqa: PLC0415

    fixes = suggest(m, h100, ServingConfig(vllm_version="0.28.0", **base), None, p)  # type: ignore[arg-type]
    assert any(s.changes == (("--max-num-seqs", str(p.kv.num_blocks)),) for s in fixes), fixes
    ok = plan(m, h100, ServingConfig(vllm_version="0.28.0", max_num_seqs=256, **base))  # type: ignore[arg-type]
    assert "MaxNumSeqsExceedsMambaBlocks" not in {r.code for r in ok.reasons} and ok.verdict.value != "DoesNotFit"
    # not before 0.20, not without full CUDA graphs, not with 0.34's extensible cache (graphs before the pool)
    for other in (
        ServingConfig(vllm_version="0.19.0", **base),  # type: ignore[arg-type]
        ServingConfig(vllm_version="0.28.0", enforce_eager=True, **base),  # type: ignore[arg-type]
        ServingConfig(vllm_version="0.28.0", cudagraph_mode="PIECEWISE", **base),  # type: ignore[arg-type]
        ServingConfig(vllm_version="0.34.0", **base),  # type: ignore[arg-type]
    ):
        assert "MaxNumSeqsExceedsMambaBlocks" not in {r.code for r in plan(m, h100, other).reasons}, other


def test_a_tight_mamba_block_count_is_not_the_last_fix_offered() -> None:
    """hunt130 F2: where --max-num-seqs at the block count is only Tight, a smaller count is offered before more GPUs.

    Qwen3.5-27B in fp8 on one H100 at gmu 0.95 on 0.28 (vLLM refused such a Qwen3.6-27B-FP8 at 856 blocks, recipes PR
    #551, which merged --max-num-seqs 512): 1024 sequences exceed its ~867 blocks; at 867 the 3.96 GiB outside the budget
    is short for the graphs and the sampler warm-up of 867 sequences (Tight); 512, the largest power of two below the
    blocks, fits on the one GPU.
    """
    from fitgate.sizing import suggest  # noqa: PLC0415

    m = model("Qwen/Qwen3.5-27B")
    h100 = lookup_gpu("H100-SXM")
    serving = ServingConfig(vllm_version="0.28.0", gpu_memory_utilization=0.95, quantization="fp8")
    p = plan(m, h100, serving)
    assert p.verdict.value == "DoesNotFit" and 512 < p.kv.num_blocks < 1024, (p.verdict, p.kv.num_blocks)
    fixes = suggest(m, h100, serving, None, p)
    assert fixes[0].changes == (("--max-num-seqs", "512"),) and fixes[0].verdict.value == "Fits", fixes[:2]
    assert fixes[0].total_gpus == 1


def test_the_mamba_blocks_check_is_not_a_denial_with_speculative_decoding() -> None:
    # With speculative decoding vLLM falls back to PIECEWISE graphs on attention backends without uniform-batch full
    # graphs (config/compilation.py 0.20.0 L1372-1385; FlashInfer without TRTLLM on GB10 / RTX 5090: hunt49 F1,
    # spark-vllm-docker#200), and then never runs the Mamba-blocks check: Tight with the numbers, not DoesNotFit.
    m = model("Qwen/Qwen3.5-27B")
    serving = ServingConfig(
        max_model_len=132000, gpu_memory_utilization=0.9, vllm_version="0.28.0",
        speculative_method="mtp", speculative_tokens=1,
    )  # fmt: skip
    p = plan(m, lookup_gpu("H100-SXM"), serving)
    assert p.serving.max_num_seqs > p.kv.num_blocks
    assert p.verdict.value == "Tight" and "MaxNumSeqsExceedsMambaBlocks" in {r.code for r in p.reasons}


def test_reported_tokens_derived_from_020_1_for_hybrid_models() -> None:
    # hunt84 F1 (club-3090#91, Qwen3.6-27B on 2 x RTX 3090, vLLM 0.20.1 logged 619,479 tokens): 0.20.1 already
    # reports int(max concurrency x max_model_len) (kv_cache_utils.py 0.20.1 L1699-1706), 0.20.0 blocks // groups x
    # block (0.20.0 L1694-1698). A Mamba group's page holds a whole request, so the two differ ~4x on Qwen3.5.
    m = model("Qwen/Qwen3.5-27B")
    gpu = lookup_gpu("H100")  # bf16 weights, 27 B: the 3090s ran an int4 build
    cfg = ServingConfig(max_model_len=262144, tensor_parallel_size=2, kv_cache_dtype="fp8", max_num_seqs=2)
    old = plan(m, gpu, replace(cfg, vllm_version="0.20.0")).kv
    new = plan(m, gpu, replace(cfg, vllm_version="0.20.1")).kv
    assert old.num_blocks == new.num_blocks > 0
    assert old.reported_tokens == old.num_blocks // old.num_groups * old.block_size
    assert new.reported_tokens == int(new.max_concurrency * 262144) > 2 * old.reported_tokens


def test_a_sliding_window_workload_holds_a_steps_batch_once_not_per_request() -> None:
    """hunt203 F2: 256 requests of 8,192 tokens of gpt-oss-20b on one H100 (0.11.0) were denied: each sliding layer's
    share was counted with a whole max_num_batched_tokens batch beyond its window, per request."""
    from fitgate.sizing import Workload  # noqa: PLC0415

    h100 = lookup_gpu("H100")
    m = model("openai/gpt-oss-20b")
    p = plan(m, h100, ServingConfig(max_model_len=131072, vllm_version="0.11.0"), Workload(256, 8192))
    # per request: the full-attention group 8192 / 16 = 512 blocks, the sliding group cdiv(128 - 1 + 1, 16) + 1 = 9;
    # once: the batch beyond the window, cdiv(min(127 + 8192, 8192), 16) + 1 - 9 = 513 - 9 = 504: 256 x 521 + 504
    assert p.kv.workload_blocks == 256 * 521 + 504 and p.verdict.value != "DoesNotFit"
    # full attention alone holds no in-flight term: N x cdiv(ctx, block), as before
    llama = plan(model("meta-llama/Llama-3.1-8B-Instruct"), h100, ServingConfig(max_model_len=8192), Workload(64, 8192))
    assert llama.kv.workload_blocks == 64 * 8192 // 16
