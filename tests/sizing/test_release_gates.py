"""Refusals vLLM added in a release, applied from that release only (hunt10, 2026-12-05).

Sources (``pip download --no-deps vllm==X``): ``_FLOAT16_NOT_SUPPORTED_MODELS`` first in 0.9.1 config.py L3121-3126
(none in 0.8.5 config.py L2885-2960 or 0.9.0), gemma3_text from 0.10.2 (config/__init__.py L2615-2622), plamo2 gone
from 0.27.0 (config/model.py 0.27.0 L2105); the free-memory start check first in 0.9.1 v1/worker/gpu_worker.py
L136-150 (0.8.5 L195-213 and 0.9.0 size ``total x gmu - peak`` without it). The case: BentoVLLM's gemma2-9b-instruct
service (config.yaml@107bec6a: one L4, dtype half, max_model_len 2048, gpu_memory_utilization 1.0) on vllm==0.8.2.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.schema.api import parse_spec
from fitgate.sizing import ReasonCode, ServingConfig, SizingError, Verdict, lookup_gpu, plan
from fitgate.sizing.activation import (
    CUDA_CONTEXT_BYTES,
    TP_PRE_SNAPSHOT_BYTES,
    TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES,
    pre_snapshot_bytes,
)
from fitgate.sizing.dtypes import float16_refused
from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.quantization import parse_quantization
from tests.conftest import model
from tests.fitgate_operator.test_operator import H100, gpus

L4 = lookup_gpu("L4")


@pytest.mark.parametrize(
    ("model_type", "version", "refused"),
    [
        ("gemma2", (0, 9, 0), False),
        ("gemma2", (0, 9, 1), True),
        ("gemma3_text", (0, 10, 1), False),
        ("gemma3_text", (0, 10, 2), True),
        ("plamo2", (0, 26, 0), True),
        ("plamo2", (0, 27, 0), False),
        ("glm4", (0, 34, 0), True),
        ("llama", (0, 34, 0), False),
    ],
)
def test_float16_refused_by_release(model_type: str, version: tuple[int, int, int], refused: bool) -> None:
    assert float16_refused(model_type, version) is refused


def test_bentovllm_gemma2_on_an_l4_at_0_8_2_is_planned_not_refused() -> None:
    gemma = model("google/gemma-2-9b-it")
    settings = {"dtype": "half", "max_model_len": 2048, "gpu_memory_utilization": 1.0}
    old = plan(gemma, L4, ServingConfig(**settings, vllm_version="0.8.2"))
    # float16 is accepted before 0.9.1, and no start check compares free memory with total x gmu: the whole
    # 22.06 GiB is the budget and nothing stays outside it for the CUDA context, so Tight (the outside rule), never
    # DoesNotFit for it
    assert old.serving.dtype == "float16" and old.verdict is Verdict.TIGHT, [r.message for r in old.reasons]
    assert ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH not in {r.code for r in old.reasons}
    with pytest.raises(SizingError, match="vLLM refuses float16 for gemma2"):
        plan(gemma, L4, ServingConfig(**settings, vllm_version="0.9.1"))


@pytest.mark.parametrize(("version", "refused"), [("0.8.5", False), ("0.9.0", False), ("0.9.1", True)])
def test_the_free_memory_start_check_from_0_9_1(version: str, refused: bool) -> None:
    # gmu 1.0 asks for all 22.06 GiB of an L4 while the CUDA context already holds ~0.5 GiB: 0.9.1+ refuses
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(llama, L4, ServingConfig(max_model_len=8192, gpu_memory_utilization=1.0, vllm_version=version))
    codes = {r.code for r in p.reasons}
    assert (ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH in codes) is refused
    assert (p.verdict is Verdict.DOES_NOT_FIT) is refused


def test_tp_memory_held_before_the_snapshot_follows_symmetric_memory() -> None:
    # vLLM allocates a symmetric-memory all-reduce buffer only on 9.0 / 10.x (all_reduce_utils.py 0.34.0 L58-83)
    assert pre_snapshot_bytes(2, "9.0") == pre_snapshot_bytes(8, "10.0") == TP_PRE_SNAPSHOT_BYTES
    assert pre_snapshot_bytes(2, "8.6") == pre_snapshot_bytes(4, "12.0") == TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES
    assert pre_snapshot_bytes(2, None) == TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES
    assert pre_snapshot_bytes(1, "9.0") == pre_snapshot_bytes(1, "8.6") == CUDA_CONTEXT_BYTES
    assert CUDA_CONTEXT_BYTES < TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES < TP_PRE_SNAPSHOT_BYTES


@pytest.mark.parametrize("gpu", ["RTX-3090", "RTX-4090"])
def test_tp2_on_24gb_geforce_cards_at_gmu_0_94_starts(gpu: str) -> None:
    # hunt12 D1: a published Devstral config "tested on 2x RTX 3090" (TP 2, gmu 0.94, fp8 KV). Outside the budget:
    # 23.58 GiB x 0.06 = 1.41 GiB. vLLM refuses only when what is held before its snapshot is more: 1.53 GiB (an
    # H100's NCCL + symmetric memory) denied it; a 3090 at TP 4 held 0.63 GiB (vllm-backport#34), so it starts.
    card = lookup_gpu(gpu)
    serving = ServingConfig(
        tensor_parallel_size=2,
        kv_cache_dtype="fp8",
        max_model_len=32768,
        gpu_memory_utilization=0.94,
        vllm_version="0.13.0",
    )
    p = plan(model("Qwen/Qwen3-8B"), card, serving)
    assert p.verdict is not Verdict.DOES_NOT_FIT, p.reasons
    assert all(r.code is not ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH for r in p.reasons)
    # an H100 pair keeps the measured 1.53 GiB: gmu 0.985 leaves 79.19 x 0.015 = 1.19 GiB outside, and is refused
    h100 = plan(
        model("Qwen/Qwen3-8B"),
        lookup_gpu("H100"),
        replace(serving, gpu_memory_utilization=0.985),
    )
    assert any(r.code is ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH for r in h100.reasons)


def test_kv_cache_dtypes_of_recent_releases_are_sized_or_unknown_never_refused() -> None:
    # hunt14 D2: vLLM 0.22+ takes int8_per_token_head (club-3090's 2 x RTX 3090 runs on stock v0.22.0) and the packed
    # TurboQuant / NVFP4 caches (vllm/config/cache.py 0.34.0 L44-66); fitgate refused them as Invalid.
    qwen = model("Qwen/Qwen3-8B")
    bf16 = plan(qwen, L4, ServingConfig(max_model_len=8192))
    int8 = plan(qwen, L4, ServingConfig(max_model_len=8192, kv_cache_dtype="int8_per_token_head"))
    # one byte an element instead of two: 36 layers x 2 x 8 heads x 128 x 1 B = 73,728 B a token (the scales left out)
    assert int8.kv.bytes_per_token * 2 == bf16.kv.bytes_per_token == 147456
    assert any("scale per token and KV head" in n for n in int8.notes)
    f16 = plan(qwen, L4, ServingConfig(max_model_len=8192, kv_cache_dtype="float16"))
    assert f16.kv.bytes_per_token == bf16.kv.bytes_per_token
    # hunt32 F3: a packed sub-byte cache stores less a token than bf16, so the bf16 plan bounds it: where that fits,
    # the packed one does (the bf16 plan's verdict, with a note); where it does not, the fit is not shown: Unknown
    packed = plan(qwen, L4, ServingConfig(max_model_len=8192, kv_cache_dtype="turboquant_4bit_nc"))
    assert packed.verdict is bf16.verdict and packed.serving.kv_cache_dtype == "turboquant_4bit_nc"
    assert any("packed sub-byte pages are not sized" in n for n in packed.notes)
    with pytest.raises(NotModelledError, match="taken by vLLM but not sized"):
        plan(qwen, L4, ServingConfig(max_model_len=40960, kv_cache_dtype="turboquant_4bit_nc"))
    raw = {
        "model": {"name": "Qwen/Qwen3-8B", "source": "catalog"},
        "serving": {"maxModelLen": 40960, "kvCacheDtype": "turboquant_4bit_nc", "gpuMemoryUtilization": 0.25},
    }
    ev = evaluate(parse_spec(raw), qwen, gpus(H100))
    assert ev.verdict is Verdict.UNKNOWN and ev.reason is ReasonCode.SETTINGS_NOT_MODELLED, ev.message


def test_modelopt_checkpoint_kv_cache_dtype_is_what_auto_becomes_from_0_14() -> None:
    # hunt18 D1: vLLM 0.14+ resolves --kv-cache-dtype auto from a ModelOpt checkpoint's kv_cache_quant_algo /
    # kv_cache_scheme (utils/torch_utils.py 0.34.0 L463-535); nvidia/Gemma-4-31B-IT-NVFP4 says FP8, so vLLM keeps one
    # byte an element. fitgate sized it at two and refused 131072 tokens on an L40S (12.36 GiB of KV, 8.20 GiB left).
    gemma = model("nvidia/Gemma-4-31B-IT-NVFP4")
    assert gemma.arch.quantization is not None and gemma.arch.quantization.kv_cache_dtype == "fp8_e4m3"
    serving = ServingConfig(max_model_len=131072, vllm_version="0.21.0")
    now = plan(gemma, lookup_gpu("L40S"), serving)
    assert now.serving.kv_cache_dtype == "fp8_e4m3" and now.serving.kv_dtype_bytes == 1
    assert now.verdict is not Verdict.DOES_NOT_FIT, now.reasons
    assert any("kv_cache_quant_algo" in n for n in now.notes)
    # the user's explicit dtype wins, and 0.13 kept auto at the model's dtype: twice the bytes a token
    bf16 = plan(gemma, lookup_gpu("L40S"), replace(serving, kv_cache_dtype="bfloat16"))
    old = plan(gemma, lookup_gpu("L40S"), replace(serving, vllm_version="0.13.0"))
    assert bf16.kv.bytes_per_token == old.kv.bytes_per_token == 2 * now.kv.bytes_per_token
    assert not bf16.serving.kv_cache_dtype_from_checkpoint and bf16.verdict is Verdict.DOES_NOT_FIT


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, "fp8_e4m3"),
        ({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "fp8"}},
         "fp8_e4m3"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4",
          "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}, "fp8_e4m3"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 4, "type": "float"}},
         "nvfp4"),
        # a dynamic 8-bit scheme or an unknown name: vLLM falls back to auto
        ({"quant_method": "modelopt", "quant_algo": "FP8",
          "kv_cache_scheme": {"dynamic": True, "num_bits": 8, "type": "float"}}, None),
        ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "int8"}, None),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, None),
    ],
)  # fmt: skip
def test_modelopt_kv_cache_dtype_follows_vllms_reading(config: dict[str, object], expected: str | None) -> None:
    q = parse_quantization(config)
    assert q is not None and q.kv_cache_dtype == expected


def test_glm5_kv_cache_is_fp8_by_default_on_sm10x_from_0_32() -> None:
    # hunt29 F1: from 0.32.0 vLLM turns GlmMoeDsaForCausalLM's `auto` KV cache into fp8_e4m3 on compute capability 10.x
    # (models/config.py 0.32.0 L43-55); fitgate sized bf16 and denied GLM-5.2-FP8 at its 1M context on 8 x B200 (the
    # recipes' verified "FP8 on 8xB200 (full 1M context)"). MLA latent 512 + rope 64 = 576 elements a token and layer:
    # 2 bytes in bf16, 1 in fp8, so the per-token KV halves; on an H100 (9.0) and on 0.31 `auto` stays bf16.
    glm = model("zai-org/GLM-5.2-FP8")

    def kv(gpu: str, version: str) -> tuple[str, int]:
        p = plan(
            glm, lookup_gpu(gpu), ServingConfig(max_model_len=131072, tensor_parallel_size=8, vllm_version=version)
        )
        return p.serving.kv_cache_dtype, p.kv.bytes_per_token

    assert kv("B200", "0.32.0")[0] == kv("GB300", "0.34.0")[0] == "fp8_e4m3"
    assert kv("B200", "0.31.0")[0] == kv("H200", "0.34.0")[0] == "auto"
    fp8, bf16 = kv("B200", "0.32.0")[1], kv("B200", "0.31.0")[1]
    assert 0.45 < fp8 / bf16 < 0.55, (fp8, bf16)  # the latent at one byte, not two (the indexer cache aside)
    full = plan(glm, lookup_gpu("B200"), ServingConfig(tensor_parallel_size=8, vllm_version="0.32.0"))
    assert full.verdict.value in ("Fits", "Tight") and any("auto is fp8_e4m3" in n for n in full.notes)


def test_gb10_keeps_the_small_batch_defaults_in_every_release() -> None:
    # vLLM 0.33 keeps GB10 (DGX Spark, cc 12.1) on the small tier whatever its 118 GiB (engine/arg_utils.py 0.34.0
    # L2999-3024 is_gb10): 2048 batched tokens and 256 sequences for `vllm serve` (hunt47 F2). Before, NVML's memory
    # query raises on the integrated part and the defaults take device_memory 0: the small tier too (hunt158 S1: a
    # 0.25.1 GB10 failure log names "the default max_num_seqs (256)"; fitgate had assumed the >= 70 GiB tier, 1024).
    from fitgate.sizing.resolve import accounting_of, default_batch  # noqa: PLC0415

    m = model("Qwen/Qwen3-8B")
    gb10 = lookup_gpu("GB10")
    for version, expected in (("0.25.0", (2048, 256)), ("0.32.0", (2048, 256)), ("0.34.0", (2048, 256))):
        acc = accounting_of(m.arch, gb10, ServingConfig(vllm_version=version))
        assert default_batch(gb10, acc, offline=False) == expected, version
    h200 = lookup_gpu("H200")  # a discrete card of >= 70 GiB keeps the large tier before 0.28's >= 160 GiB one
    assert default_batch(h200, accounting_of(m.arch, h200, ServingConfig(vllm_version="0.25.0")), False) == (8192, 1024)


def test_v1_batch_defaults_by_release_chunking_a100s_and_the_cap() -> None:
    # hunt161 F1: before 0.11.1 V1's defaults set enable_chunked_prefill = True whatever was asked (engine/arg_utils.py
    # 0.10.2 L1619-1623, 0.11.0 L1547-1548; "if ... is None" from 0.11.1 L1955): --no-enable-chunked-prefill left the
    # 2048-token budget (L40S, a < 70 GiB card), where fitgate profiled one 131072-token prompt and denied Llama-3.1-8B.
    # F2: "a100" not in device_name keeps the A100-80GB on 256 / 2048 from 0.9.0 (0.9.2 L1629), not 0.10.0.
    from fitgate.sizing.resolve import accounting_of, default_batch  # noqa: PLC0415

    m = model("meta-llama/Llama-3.1-8B-Instruct")
    l40s = lookup_gpu("L40S")

    def tokens(version: str) -> int:
        serving = ServingConfig(vllm_version=version, enable_chunked_prefill=False)
        return plan(m, l40s, serving).serving.max_num_batched_tokens

    assert (tokens("0.10.2"), tokens("0.11.0"), tokens("0.11.1"), tokens("0.34.0")) == (2048, 2048, 131072, 131072)
    a100 = lookup_gpu("A100-80GB")
    batch = {v: default_batch(a100, accounting_of(m.arch, a100, ServingConfig(vllm_version=v)), False) for v in
             ("0.8.5", "0.9.2", "0.10.2")}  # fmt: skip
    assert batch == {"0.8.5": (8192, 1024), "0.9.2": (2048, 256), "0.10.2": (2048, 256)}
    # F5: from 0.11.1 a default budget is capped at max_num_seqs x max_model_len (arg_utils.py 0.11.1 L2023-2026):
    # one 2048-token sequence on an H100 profiles 1 x 2048 = 2048 tokens, not the tier's 8192 (0.11.0 keeps 8192)
    h100 = lookup_gpu("H100")
    one = {
        v: plan(m, h100, ServingConfig(vllm_version=v, max_num_seqs=1, max_model_len=2048))
        for v in ("0.11.0", "0.34.0")
    }
    assert {v: p.serving.max_num_batched_tokens for v, p in one.items()} == {"0.11.0": 8192, "0.34.0": 2048}


def test_device_memory_utilization_is_the_gpu_memory_utilization() -> None:
    # vLLM 0.33's device-neutral spelling (engine/arg_utils.py 0.34.0 L1403-1407); a container that used it was sized
    # at the default 0.92 and denied what its 0.98 runs (hunt47 F1)
    from fitgate.workloads.argv import parse_engine_argv  # noqa: PLC0415

    cmd = parse_engine_argv("vllm serve", ["Qwen/Qwen3-32B", "--device-memory-utilization", "0.98"])
    assert cmd.flags["--gpu-memory-utilization"] == "0.98"


def test_the_typical_cuda_context_is_warned_the_smallest_is_the_denials_floor() -> None:
    # vllm#33155: gpt-oss-120b on one H100 at 0.14.1, gmu 0.97, 5,120 tokens, 1 sequence, -O3 ran out of memory after
    # sizing its KV cache (hunt48 F2; -O3 is the default graph mode). 0.03 x 79.19 = 2.38 GiB outside the budget: above the floor (the 0.41 GiB
    # context the smallest log shows, graphs, the sampler's floor: not denied), below the fitted need with the typical
    # 0.51 GiB context (~2.46 GiB): Tight, as before the floor was lowered.
    m = model("openai/gpt-oss-120b")
    serving = ServingConfig(gpu_memory_utilization=0.97, max_model_len=5120, max_num_seqs=1, vllm_version="0.14.1")
    p = plan(m, lookup_gpu("H100-SXM"), serving)
    assert p.verdict is Verdict.TIGHT and "LowHeadroomOutsideBudget" in {r.code for r in p.reasons}, p.reasons


def test_deepseek_attention_caches_every_head_before_mla_in_0_7_1() -> None:
    # hunt168 S1: vLLM 0.7.0's DeepSeek-V2 attention is Attention(num_local_heads, qk_head_dim, num_kv_heads=
    # num_local_heads), V padded to qk_head_dim (models/deepseek_v2.py 0.7.0 L265-270, L316-319); the MLA latent cache
    # comes with ModelConfig.use_mla in 0.7.1. DeepSeek-V2-Lite at TP 2 in fp16: 27 layers x 2 (K, V) x 8 heads
    # x (128 + 64) x 2 B = 165,888 B a token per GPU before (vllm#6156 on 2 x L40 refused 163840 tokens with room for
    # 63,040), the latent after. fitgate had applied the latent to every release.
    m = model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    l40 = lookup_gpu("L40")

    def per_token(version: str) -> int:
        return plan(
            m, l40, ServingConfig(vllm_version=version, tensor_parallel_size=2, dtype="float16")
        ).kv.bytes_per_token

    assert per_token("0.7.0") == per_token("0.5.1") == 27 * 2 * 8 * (128 + 64) * 2 == 165_888
    assert per_token("0.7.1") < 40_000  # 27 x (512 + 64) x 2 B, the latent (aligned on V0 0.7.x), not split over TP
