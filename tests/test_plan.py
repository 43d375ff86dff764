"""The vLLM budget and the verdict, on real configs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fitgate.sizing import ServingConfig, Verdict, Workload, custom_gpu, lookup_gpu, plan, recommend, suggest
from fitgate.sizing.advice import apply_suggestion, engine_args
from fitgate.sizing.errors import SizingError
from fitgate.sizing.units import GiB
from tests.conftest import model

H100 = lookup_gpu("NVIDIA-H100-80GB-HBM3")


def codes(p: Any) -> set[str]:
    return {r.code for r in p.reasons}


def test_requested_is_total_times_gmu_rounded_up_from_019() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    new = plan(m, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95))
    old = plan(m, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.18.0"))
    assert new.per_gpu.budget_bytes == math.ceil(H100.memory_bytes * 0.95)
    assert old.per_gpu.budget_bytes == int(H100.memory_bytes * 0.95)


def test_llama_8b_h100_matches_the_vllm_019_log(calibration_cases: list[dict[str, Any]]) -> None:
    # llm-d v0.19.0 H100 log: weights 14.99, activation 1.89, non-torch 0.25, available 58.11 GiB,
    # 29,751 blocks, 476,016 tokens, 58.11x at 8192 tokens.
    case = next(
        c for c in calibration_cases if c["id"] == "llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192"
    )
    truth = case["measured"]
    p = plan(
        model("meta-llama/Llama-3.1-8B-Instruct"),
        H100,
        ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.19.0"),
    )
    r = p.ranks[0]
    assert r.weights.total_bytes / GiB == pytest.approx(truth["weights_gib"], rel=0.005)
    assert r.available_kv_bytes / GiB == pytest.approx(truth["kv_available_gib"], rel=0.01)
    assert p.kv.num_blocks == pytest.approx(truth["gpu_blocks"], rel=0.01)
    # tokens = blocks x 16; concurrency = blocks / cdiv(8192, 16)
    assert p.kv.reported_tokens == p.kv.num_blocks * 16
    assert p.kv.max_concurrency == pytest.approx(p.kv.num_blocks / 512)
    assert p.verdict is Verdict.FITS


def test_weights_over_budget_does_not_fit() -> None:
    # 70B bf16 = 131 GiB of weights on one 79 GiB card
    p = plan(model("meta-llama/Llama-3.1-70B-Instruct"), H100, ServingConfig(max_model_len=8192))
    assert p.verdict is Verdict.DOES_NOT_FIT and codes(p) == {"WeightsExceedBudget"}
    assert p.kv.num_blocks == 0 and p.per_gpu.headroom_bytes < 0


def test_kv_cannot_hold_one_max_len_request_does_not_fit() -> None:
    # Llama-3.1-8B at 131072 tokens on an L4-class 22 GiB card: 16 GiB of KV needed, ~3 GiB left
    p = plan(model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("L4"), ServingConfig(max_model_len=131072))
    assert p.verdict is Verdict.DOES_NOT_FIT and codes(p) == {"KVCacheTooSmallForMaxModelLen"}
    assert 0 < p.max_model_len_that_fits < 131072


def test_max_model_len_that_fits_is_the_boundary() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    l4 = lookup_gpu("L4")
    n = plan(m, l4, ServingConfig(max_model_len=131072)).max_model_len_that_fits
    assert plan(m, l4, ServingConfig(max_model_len=n)).verdict is not Verdict.DOES_NOT_FIT
    assert "KVCacheTooSmallForMaxModelLen" in codes(plan(m, l4, ServingConfig(max_model_len=n + 1)))


def test_declared_workload_beyond_the_pool_does_not_fit() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    fits = plan(m, H100, ServingConfig(max_model_len=32768), Workload(8, 32768))
    assert fits.verdict is Verdict.FITS
    too_many = int(fits.kv.max_concurrency) + 1
    p = plan(m, H100, ServingConfig(max_model_len=32768), Workload(too_many, 32768))
    assert p.verdict is Verdict.DOES_NOT_FIT and codes(p) == {"WorkloadExceedsKVCache"}


def test_workload_in_the_top_ten_percent_is_tight() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    base = plan(m, H100, ServingConfig(max_model_len=32768))
    n = int(base.kv.max_concurrency)  # uses > 90 % of the pool when max_concurrency isn't near a whole number
    p = plan(m, H100, ServingConfig(max_model_len=32768), Workload(n, 32768))
    assert p.kv.workload_fraction is not None
    if p.kv.workload_fraction > 0.9:
        assert p.verdict is Verdict.TIGHT and "WorkloadNearKVCapacity" in codes(p)
    else:
        assert p.verdict is Verdict.FITS


def test_gpt_oss_at_095_is_not_fits() -> None:
    # vLLM 0.19 on H100 sized the KV cache for gpt-oss-20b at gmu 0.95 and then ran out of memory
    # warming up the sampler: 3.96 GiB outside the budget cannot hold graphs + context + sampler.
    p = plan(model("openai/gpt-oss-20b"), H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.95))
    assert p.verdict is Verdict.TIGHT and "LowHeadroomOutsideBudget" in codes(p)
    ok = plan(model("openai/gpt-oss-20b"), H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.9))
    assert ok.verdict is Verdict.FITS


def test_gmu_one_cannot_start() -> None:
    p = plan(
        model("meta-llama/Llama-3.1-8B-Instruct"),
        H100,
        ServingConfig(max_model_len=8192, gpu_memory_utilization=1.0),
    )
    assert p.verdict is Verdict.DOES_NOT_FIT and "GpuMemoryUtilizationTooHigh" in codes(p)


def test_pipeline_blocks_are_the_minimum_over_stages() -> None:
    # the last stage holds lm_head and runs the sampler, so it has fewer blocks than stage 0
    p = plan(
        model("meta-llama/Llama-3.1-8B-Instruct"),
        H100,
        ServingConfig(max_model_len=8192, pipeline_parallel_size=2),
    )
    assert p.kv.num_blocks == min(r.num_blocks for r in p.ranks) == p.ranks[1].num_blocks < p.ranks[0].num_blocks
    assert p.binding_rank == 1


def test_cuda_graphs_enter_the_budget_from_021() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    v19 = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.19.0"))
    v21 = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.21.0"))
    r19, r21 = v19.ranks[0], v21.ranks[0]
    assert r19.available_kv_bytes - r21.available_kv_bytes == r21.profile.cuda_graph_bytes > 0


def test_v0_profiles_a_max_model_len_batch() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    rtx = custom_gpu(int(23.58 * GiB))
    short = plan(m, rtx, ServingConfig(max_model_len=20000, vllm_version="0.6.4", engine="V0"))
    long = plan(m, rtx, ServingConfig(max_model_len=29000, vllm_version="0.6.4", engine="V0"))
    assert short.serving.max_num_batched_tokens == 20000 and long.serving.max_num_batched_tokens == 29000
    assert long.ranks[0].profile.activation_bytes > short.ranks[0].profile.activation_bytes


def test_defaults_follow_the_gpu_tier() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    assert plan(m, H100, ServingConfig(max_model_len=8192)).serving.max_num_seqs == 1024
    a100 = plan(m, lookup_gpu("A100-80GB"), ServingConfig(max_model_len=8192)).serving
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)  # vLLM's "a100" exception


def test_suggestions_really_fit() -> None:
    m = model("meta-llama/Llama-3.1-70B-Instruct")
    serving = ServingConfig(max_model_len=32768)
    p = plan(m, H100, serving)
    found = suggest(m, H100, serving, None, p)
    assert found, "a 70B model on H100s must have a way to fit"
    for s in found:  # each verdict is a real plan of the changed settings
        assert plan(m, H100, apply_suggestion(serving, s)).verdict is s.verdict
    assert any(s.verdict is Verdict.FITS for s in found)
    assert [s.gpus for s in found] == sorted(s.gpus for s in found)  # fewer GPUs first


def test_when_no_single_change_fits_tight_and_combined_fixes_are_offered() -> None:
    # gemma-2-9b-it on one L4 (22.06 GiB): 17.22 GiB of weights leave 1.36 GiB of KV for an 8192-token
    # request that needs 2.30 GiB. Each single change only reaches Tight.
    m, l4 = model("google/gemma-2-9b-it"), lookup_gpu("L4")
    serving = ServingConfig()
    p = plan(m, l4, serving)
    assert p.verdict is Verdict.DOES_NOT_FIT
    found = suggest(m, l4, serving, None, p)
    by_flags = {s.flags: s for s in found}
    for flags in ("--kv-cache-dtype fp8", "--max-model-len 4096", "--quantization fp8"):
        assert by_flags[flags].verdict is Verdict.TIGHT  # offered, and flagged
    fits = [s for s in found if s.verdict is Verdict.FITS]
    assert fits and all(len(s.changes) == 2 for s in fits)  # only a combination reaches Fits
    for s in found:
        assert plan(m, l4, apply_suggestion(serving, s)).verdict is s.verdict
    # ranked by cost: GPUs, then what is given up (a bigger budget before fp8 KV before fp8 weights)
    keys = [(s.gpus, s.cost) for s in found]
    assert keys == sorted(keys) and found[0].gpus == 1
    assert found.index(by_flags["--kv-cache-dtype fp8"]) < found.index(by_flags["--quantization fp8"])
    # the recommended args take the cheapest that Fits, not a Tight one
    _, _, chosen = recommend(m, l4, serving, None, p, found)
    assert chosen is fits[0]


def test_fp8_kv_is_suggested_when_kv_is_short() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    serving = ServingConfig(max_model_len=131072)
    p = plan(m, lookup_gpu("L40S"), serving, Workload(3, 100000))
    flags = {f for s in suggest(m, lookup_gpu("L40S"), serving, Workload(3, 100000), p) for f, _ in s.changes}
    assert p.verdict is Verdict.DOES_NOT_FIT and "--kv-cache-dtype" in flags


@pytest.mark.parametrize(
    ("serving", "message"),
    [
        (
            ServingConfig(tensor_parallel_size=3),
            r"tensor_parallel_size: 3 is not valid; expected a divisor of the model's 32 attention heads",
        ),
        (
            ServingConfig(tensor_parallel_size=0),
            r"tensor_parallel_size: 0 is not valid; expected an integer from 1 to 64",
        ),
        (ServingConfig(max_model_len=-5), r"max_model_len: -5 is not valid"),
        (
            ServingConfig(max_model_len=10**6),
            r"max_model_len: 1000000 is not valid; expected at most the model's 131072",
        ),
        (ServingConfig(gpu_memory_utilization=0), r"gpu_memory_utilization: 0 is not valid"),
        (ServingConfig(kv_cache_dtype="int4"), r"kv_cache_dtype: 'int4' is not valid; expected one of auto"),
        (ServingConfig(dtype="int8"), r"dtype: 'int8' is not valid"),
        (ServingConfig(quantization="gguf"), r"quantization: 'gguf' is not valid"),
        (ServingConfig(vllm_version="banana"), r"vllm_version: 'banana' is not valid"),
        (ServingConfig(block_size=24), r"block_size: 24 is not valid"),
        (ServingConfig(pipeline_parallel_size=40), r"pipeline_parallel_size: 40 is not valid"),
    ],
)
def test_bad_settings_name_the_field(serving: ServingConfig, message: str) -> None:
    with pytest.raises(SizingError, match=message):
        plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, serving)


def test_bad_workload_names_the_field() -> None:
    with pytest.raises(SizingError, match="concurrency: 0 is not valid"):
        plan(
            model("meta-llama/Llama-3.1-8B-Instruct"),
            H100,
            ServingConfig(max_model_len=8192),
            Workload(0, 100),
        )


# -- dtype on GPUs without bfloat16 (compute capability < 8.0) -------------------------------------


def test_a_bfloat16_model_runs_in_float16_on_a_t4_and_the_command_says_so() -> None:
    m, t4 = model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("Tesla-T4")
    assert t4.compute_capability == "7.5" and H100.compute_capability == "9.0"
    p = plan(m, t4, ServingConfig(max_model_len=4096))
    assert p.serving.dtype == "float16"
    args = {a.name: a for a in engine_args(p, ServingConfig(max_model_len=4096))}
    assert args["--dtype"].value == "half" and "no bfloat16" in args["--dtype"].reason
    # on an H100 nothing changes: the checkpoint's bfloat16, no --dtype flag
    h100 = plan(m, H100, ServingConfig(max_model_len=4096))
    assert h100.serving.dtype == "bfloat16" and "--dtype" not in {a.name for a in engine_args(h100, ServingConfig())}
    # fp8 weights need compute capability 8.0: never suggested on a T4
    flags = {f for s in suggest(m, t4, ServingConfig(max_model_len=4096), None, p) for f, _ in s.changes}
    assert "--quantization" not in flags


def test_a_model_vllm_refuses_in_float16_runs_in_float32_without_bfloat16() -> None:
    # Gemma 2 is never run in float16 by vLLM: on a V100 it falls back to float32, twice the weight bytes
    m = model("google/gemma-2-9b-it")
    v100 = plan(m, lookup_gpu("V100-32GB"), ServingConfig(max_model_len=4096))
    a100 = plan(m, lookup_gpu("A100-80GB"), ServingConfig(max_model_len=4096))
    assert (v100.serving.dtype, a100.serving.dtype) == ("float32", "bfloat16")
    assert abs(v100.per_gpu.weights_bytes - 2 * a100.per_gpu.weights_bytes) < 0.01 * v100.per_gpu.weights_bytes


@pytest.mark.parametrize(
    ("name", "gpu", "dtype", "message"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "T4", "bfloat16", "compute capability 7.5 has no bfloat16"),
        ("google/gemma-2-9b-it", "H100", "float16", "vLLM refuses float16 for gemma2"),
    ],
)
def test_a_dtype_vllm_cannot_run_is_refused(name: str, gpu: str, dtype: str, message: str) -> None:
    with pytest.raises(SizingError, match=rf"dtype: '{dtype}' is not valid.*{message}"):
        plan(model(name), lookup_gpu(gpu), ServingConfig(max_model_len=4096, dtype=dtype))
