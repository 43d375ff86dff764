"""The vLLM budget and the verdict, on real configs."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, Verdict, Workload, custom_gpu, lookup_gpu, plan, recommend, suggest
from fitgate.sizing.advice import apply_suggestion
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.engine_args import engine_args
from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import MambaSpec
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for, parse_version
from tests.conftest import model

CORPUS = Path(__file__).parents[1] / "corpus"

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
    # One token past it is short by less than the fitted terms' error band: Tight, named, not denied
    # (verdict_rules.ESTIMATE_ERROR_FRACTION); well past it (a 1.20 GiB band is ~9,800 tokens at 128 KiB each) it
    # does not fit.
    over = plan(m, l4, ServingConfig(max_model_len=n + 1))
    assert over.verdict is Verdict.TIGHT and "ShortWithinEstimateError" in codes(over)
    assert "KVCacheTooSmallForMaxModelLen" in codes(plan(m, l4, ServingConfig(max_model_len=n + 16384)))


def test_a_shortfall_within_the_estimate_error_is_tight_and_beyond_it_is_denied() -> None:
    # Llama-3.1-8B at 131072 on an L4 (16 GiB of KV for one request, ~3 GiB left) is short by far more than the band
    # of min(0.69 x (activation + non-torch + graph estimate), 1.20 GiB): denied. At the longest length that fits plus
    # 2,048 tokens it is short by 2,048 x 131,072 B = 0.25 GiB at most, inside the band: Tight with the numbers.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    l4 = lookup_gpu("L4")
    far = plan(m, l4, ServingConfig(max_model_len=131072))
    assert far.verdict is Verdict.DOES_NOT_FIT
    near = plan(m, l4, ServingConfig(max_model_len=far.max_model_len_that_fits + 2048))
    assert near.verdict is Verdict.TIGHT and near.reasons[0].code == "ShortWithinEstimateError"
    assert "short, within the error of fitgate's fitted" in near.reasons[0].message


def test_a_deficit_past_the_extensible_cache_floor_is_judged_whole() -> None:
    # hunt98 F1: vLLM 0.34's extensible cache floors the KV it may take at 0 (extensible.py measure_kv_bytes), and the
    # band check measured one 4,096-token request against that 0: Tight, with weights of 139.45 GiB on a 139.81 GiB
    # H200 (Kimi-K2.7-Code-NVFP4 at TP 4). Judged on the whole deficit (weights + activation + non-torch + graphs over
    # the card), it is far past the band: DoesNotFit. Just past the longest length that fits it stays Tight.
    m = model("nvidia/Kimi-K2.7-Code-NVFP4")
    over = plan(m, lookup_gpu("H200"), ServingConfig(tensor_parallel_size=4, max_model_len=4096))
    assert over.verdict is Verdict.DOES_NOT_FIT, over.reasons
    assert over.ranks[0].kv_short_bytes > 1 * GiB and over.ranks[0].available_kv_bytes == 0
    llama, l4 = model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("L4")
    n = plan(llama, l4, ServingConfig(max_model_len=131072)).max_model_len_that_fits
    near = plan(llama, l4, ServingConfig(max_model_len=n + 2048))
    assert near.verdict is Verdict.TIGHT and near.ranks[0].kv_short_bytes == 0


def test_a_default_max_num_seqs_is_lowered_to_the_step_budget() -> None:
    # hunt98 F3: vLLM lowers a default max_num_seqs to max_num_batched_tokens (engine/arg_utils.py 0.34.0 L3269-3271):
    # an H100's 1,024 default with `--max-num-batched-tokens 512` runs 512, and the engine args say so; a given one stays
    m = model("Qwen/Qwen3-8B")
    given = ServingConfig(max_model_len=8192, max_num_batched_tokens=512)
    low = plan(m, H100, given)
    seqs = {a.name: a.value for a in engine_args(low, given)}.get("--max-num-seqs")
    assert low.serving.max_num_seqs == 512 and str(seqs) == "512"
    assert plan(m, H100, ServingConfig(max_model_len=8192)).serving.max_num_seqs == 1024


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
    v19 = ServingConfig(max_model_len=8192, vllm_version="0.19.0")
    p = plan(model("openai/gpt-oss-20b"), H100, replace(v19, gpu_memory_utilization=0.95))
    assert p.verdict is Verdict.TIGHT and "LowHeadroomOutsideBudget" in codes(p)
    ok = plan(model("openai/gpt-oss-20b"), H100, replace(v19, gpu_memory_utilization=0.9))
    assert ok.verdict is Verdict.FITS


def test_an_eager_engine_low_on_headroom_names_no_cuda_graphs() -> None:
    """hunt128 F4: --enforce-eager captures no graphs, so the headroom reason does not list them among its users."""
    eager = ServingConfig(max_model_len=4096, vllm_version="0.8.5", gpu_memory_utilization=0.97, enforce_eager=True)
    p = plan(model("Qwen/Qwen3-8B"), lookup_gpu("RTX-5090"), eager)
    [reason] = [r for r in p.reasons if r.code == "LowHeadroomOutsideBudget"]
    assert "CUDA graphs" not in reason.message and "the sampler warm-up" in reason.message
    graphs = plan(model("Qwen/Qwen3-8B"), lookup_gpu("RTX-5090"), replace(eager, enforce_eager=False))
    assert any("CUDA graphs captured" in r.message for r in graphs.reasons), graphs.reasons


def test_gmu_one_cannot_start() -> None:
    # up to 0.33 vLLM refuses to start when free memory < total x gmu (v1/worker/utils.py 0.33.0 L716-772)
    p = plan(
        model("meta-llama/Llama-3.1-8B-Instruct"),
        H100,
        ServingConfig(max_model_len=8192, gpu_memory_utilization=1.0, vllm_version="0.33.0"),
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


def test_cuda_graph_budget_by_release() -> None:
    # envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is "0" in 0.19.0 (L1654) and "1" from 0.20.0
    # (L1725): available KV = requested - non_kv - estimate. Same gmu (0.9) and batch on both, so the
    # two budgets differ by exactly the estimate.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    cfg = ServingConfig(max_model_len=8192, gpu_memory_utilization=0.9)
    v19 = plan(m, H100, replace(cfg, vllm_version="0.19.0")).ranks[0]
    v20 = plan(m, H100, replace(cfg, vllm_version="0.20.0")).ranks[0]
    assert v19.available_kv_bytes - v20.available_kv_bytes == v20.profile.cuda_graph_bytes > 0
    # 0.23-0.28 run dense Llama on the V2 model runner, whose profile_cudagraph_memory() returns 0
    # (gpu/model_runner.py 0.24.0 L684-686, 0.27.1 L749-751): nothing deducted. 0.25 dropped Llama from its list but
    # runs every dense model on V2 (config/vllm.py 0.25.0 L557-574: ``any(listed) or not model_config.is_moe``); a MoE
    # model it does not list stays on V1, which deducts. From 0.29 V2 estimates graphs for real (gpu/cudagraph_utils.py
    # 0.29.0 L712-718).
    v24 = plan(m, H100, replace(cfg, vllm_version="0.24.0"))
    v25 = plan(m, H100, replace(cfg, vllm_version="0.25.0"))
    v29 = plan(m, H100, replace(cfg, vllm_version="0.29.0"))
    moe25 = plan(model("Qwen/Qwen3-30B-A3B"), H100, replace(cfg, vllm_version="0.25.0"))
    assert not v24.per_gpu.cuda_graphs_in_budget and not v25.per_gpu.cuda_graphs_in_budget
    assert moe25.per_gpu.cuda_graphs_in_budget and v29.per_gpu.cuda_graphs_in_budget
    for p, graphs in ((v24, 0), (v25, 0), (moe25, moe25.per_gpu.cuda_graph_bytes)):
        g = p.per_gpu
        assert p.ranks[0].non_kv_bytes == g.weights_bytes + g.activation_bytes + g.non_torch_bytes + graphs
    # --enforce-eager captures no graphs: nothing deducted on any release.
    assert not plan(m, H100, replace(cfg, enforce_eager=True)).per_gpu.cuda_graphs_in_budget


def test_default_gpu_memory_utilization_by_release() -> None:
    # config/cache.py: 0.9 up to 0.19.1 (0.19.0 L41), 0.92 from 0.20.0 (L66; 0.33.0 L215).
    # H100: 79.19 GiB x 0.92 = 72.85 GiB requested (ceil), x 0.9 = 71.27 GiB.
    # 0.34: None -> 1.0 with the extensible KV cache (config/cache.py 0.34.0 L495-501), 0.92 without it
    # (L186) -- --kv-cache-memory-bytes turns it off (config/vllm.py 0.34.0 L3203-3207).
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    old = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.19.0"))
    new = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.33.0"))
    assert old.serving.gpu_memory_utilization == 0.9 and new.serving.gpu_memory_utilization == 0.92
    assert new.per_gpu.budget_bytes == math.ceil(H100.memory_bytes * 0.92)
    assert new.serving.vllm_version == "0.33.0"
    v34 = plan(m, H100, ServingConfig(max_model_len=8192))
    assert v34.serving.vllm_version == "0.34.0" and v34.serving.gpu_memory_utilization == 1.0
    off = plan(m, H100, ServingConfig(max_model_len=8192, extensible_kv_cache=False))
    assert off.serving.gpu_memory_utilization == 0.92


def test_kv_cache_memory_bytes_is_the_pool() -> None:
    # --kv-cache-memory-bytes skips profiling and ignores gmu (gpu_worker.py 0.33.0 L656-681): the
    # pool is that number. Llama-3.1-8B, bf16: 32 layers x 2 x 8 heads x 128 x 2 B = 128 KiB a token,
    # one 16-token block = 2 MiB, so 10 GiB hold 10 GiB / 2 MiB = 5120 blocks.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(m, H100, ServingConfig(max_model_len=8192, kv_cache_memory_bytes=10 * GiB))
    assert p.kv.bytes_per_token == 131072 and p.kv.num_blocks == 5120
    assert p.ranks[0].available_kv_bytes == 10 * GiB and not p.per_gpu.cuda_graphs_in_budget
    # 75 GiB of KV next to 15 GiB of weights cannot fit an 79.19 GiB card.
    too_big = plan(m, H100, ServingConfig(max_model_len=8192, kv_cache_memory_bytes=75 * GiB))
    assert too_big.verdict is Verdict.DOES_NOT_FIT and "KVCacheMemoryExceedsGpu" in codes(too_big)


def test_a_stated_kv_size_over_the_card_by_less_than_the_fitted_terms_error_is_tight() -> None:
    # hunt90 F2: vLLM prints the --kv-cache-memory to copy from its own measured terms; fitgate's fitted ones may be
    # larger. Llama-3.1-8B on an H100 (79.19 GiB, 78.78 after the 0.41 GiB CUDA context), vLLM 0.11.0: 14.99 GiB of
    # weights + 1.86 activation + 0.13 non-torch = 16.98 GiB beside the stated pool. 62 GiB: 78.98, 0.20 GiB over,
    # within the band min(0.69 x fitted, 1.20 GiB) + 0.02 -> Tight; 64 GiB: 2.20 over -> DoesNotFit.
    m = model("meta-llama/Llama-3.1-8B-Instruct")

    def at(gib: int) -> Any:
        return plan(m, H100, ServingConfig(max_model_len=8192, kv_cache_memory_bytes=gib * GiB, vllm_version="0.11.0"))

    near, over = at(62), at(64)
    assert near.verdict is Verdict.TIGHT and near.reasons[0].code == "ShortWithinEstimateError"
    assert "0.20 GiB over, within the error" in near.reasons[0].message
    assert over.verdict is Verdict.DOES_NOT_FIT and "KVCacheMemoryExceedsGpu" in codes(over)
    # weights and the stated pool alone over the card: no band covers exact terms
    assert at(70).verdict is Verdict.DOES_NOT_FIT


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
    # gemma-2-9b-it on one L4 (22.06 GiB), vLLM 0.19 (gmu 0.9, graphs outside the budget): 17.22 GiB of
    # weights leave 1.36 GiB of KV for an 8192-token request that needs 2.30 GiB. Each single change
    # only reaches Tight.
    m, l4 = model("google/gemma-2-9b-it"), lookup_gpu("L4")
    serving = ServingConfig(vllm_version="0.19.0")
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
            r"max_model_len: 1000000 is not valid; expected at most the derived max_model_len "
            r"\(max_position_embeddings=131072 .*VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        ),
        (ServingConfig(gpu_memory_utilization=0), r"gpu_memory_utilization: 0 is not valid"),
        (ServingConfig(kv_cache_dtype="int4"), r"kv_cache_dtype: 'int4' is not valid; expected one of auto"),
        (ServingConfig(dtype="int8"), r"dtype: 'int8' is not valid"),
        (ServingConfig(quantization="awq"), r"quantization: 'awq' is not valid"),  # a checkpoint method, no checkpoint
        (ServingConfig(vllm_version="ban ana"), r"vllm_version: 'ban ana' is not valid"),
        (ServingConfig(block_size=24), r"block_size: 24 is not valid"),
        (ServingConfig(pipeline_parallel_size=40), r"pipeline_parallel_size: 40 is not valid"),
    ],
)
def test_bad_settings_name_the_field(serving: ServingConfig, message: str) -> None:
    with pytest.raises(SizingError, match=message):
        plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, serving)


def test_a_neuron_length_block_is_not_modelled_never_invalid() -> None:
    # hunt122 F1: vLLM's Neuron backend takes block_size = max_model_len (Rebellions' serve.sh: --block-size 8192
    # --max-model-len 16384); `plan` exited 2 where `check` said Unknown. A block past 4096 tokens is Unknown.
    from fitgate.sizing.errors import NotModelledError  # noqa: PLC0415

    with pytest.raises(NotModelledError, match=r"block_size: 8192 is taken by vLLM but not sized"):
        plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, ServingConfig(max_model_len=16384, block_size=8192))


def test_bad_workload_names_the_field() -> None:
    with pytest.raises(SizingError, match="concurrency: 0 is not valid"):
        plan(
            model("meta-llama/Llama-3.1-8B-Instruct"),
            H100,
            ServingConfig(max_model_len=8192),
            Workload(0, 100),
        )


def test_tp_communication_memory_by_interconnect() -> None:
    # Buffers made before vLLM's start snapshot (NCCL communicators, custom all-reduce, symmetric
    # memory) are outside the budget on every box; what the profiling pass adds at TP > 1 is NCCL's
    # NVLink SHARP memory on NVSwitch boards (0.19 H100 SXM logs: 2.07 GiB at TP2, +0.04 GiB per two
    # ranks) and, from vLLM 0.29, FlashInfer's all-reduce workspace (Hopper TP2: 64 MiB). PCIe cards
    # add nothing TP-specific: the TP1 figure, 0.25 GiB.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    cfg = ServingConfig(max_model_len=8192, tensor_parallel_size=2)
    sxm_019 = plan(m, H100, replace(cfg, vllm_version="0.19.0")).per_gpu.non_torch_bytes
    sxm_033 = plan(m, H100, cfg).per_gpu.non_torch_bytes
    pcie_033 = plan(m, H100, replace(cfg, interconnect="pcie")).per_gpu.non_torch_bytes
    l40s = plan(m, lookup_gpu("L40S"), cfg).per_gpu.non_torch_bytes
    assert sxm_019 == int(2.07 * GiB)
    assert sxm_033 == int(2.07 * GiB) + 64 * 1024**2
    assert pcie_033 == l40s == int(0.25 * GiB)
    tp8 = plan(model("meta-llama/Llama-3.1-70B-Instruct"), H100, replace(cfg, tensor_parallel_size=8))
    assert tp8.per_gpu.non_torch_bytes == int((2.07 + 0.04 * 6) * GiB) + 1024**2 // 2
    # A product string naming PCIe picks the PCIe board of a product sold both ways.
    assert lookup_gpu("NVIDIA-A100-PCIE-40GB").interconnect == "pcie"
    assert lookup_gpu("NVIDIA-A100-SXM4-80GB").interconnect == "nvlink"


def test_sparse_mla_indexer_cache() -> None:
    # DeepSeek-V3.2 (tests/corpus, real config): 61 MLA layers, kv_lora_rank 512 + rope 64 = 576
    # values x 2 B = 1152 B a token, plus the indexer's fp8 key with one fp32 scale per 128 values:
    # 128 + 128 // 128 x 4 = 132 B -> 61 x (1152 + 132) = 78,324 B a token on every TP rank (the
    # latent is not sharded); FlashMLA-sparse blocks are 64 tokens. With an fp8 cache the latent
    # is stored as fp8_ds_mla: 656 B -> 61 x (656 + 132) = 48,068 B.

    root = CORPUS
    m = to_model_input(load_directory(root / "deepseek-ai__DeepSeek-V3.2"))
    h200 = lookup_gpu("H200")
    bf16 = plan(m, h200, ServingConfig(max_model_len=32768, tensor_parallel_size=8))
    fp8 = plan(m, h200, ServingConfig(max_model_len=32768, tensor_parallel_size=8, kv_cache_dtype="fp8"))
    assert bf16.kv.bytes_per_token == 61 * (1152 + 132) == 78_324
    assert fp8.kv.bytes_per_token == 61 * (656 + 132) == 48_068
    assert bf16.kv.block_size == 64


def test_qwen35_hybrid_gated_deltanet_state() -> None:
    # Qwen3.5-27B (tests/corpus, real config): 64 layers, every 4th full attention (16 layers,
    # 4 KV heads x 256 x 2 (K,V) x 2 B = 4 KiB a token each), the rest Gated DeltaNet whose per-request
    # state is conv (4 - 1) x (2 x 16 x 128 + 48 x 128) = 3 x 10240 values plus recurrent
    # 48 x 128 x 128 values, x 2 B = 61,440 + 1,572,864 = 1,634,304 B per layer at TP1.

    root = CORPUS
    arch = to_model_input(load_directory(root / "Qwen__Qwen3.5-27B")).arch
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    states = [s for s in specs if isinstance(s, MambaSpec)]
    attention = [s for s in specs if not isinstance(s, MambaSpec)]
    assert len(states) == 48 and len(attention) == 16
    assert states[0].state_bytes == (3 * (2 * 16 * 128 + 48 * 128) + 48 * 128 * 128) * 2 == 1_634_304
    assert attention[0].bytes_per_token == 4 * 256 * 2 * 2


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


def test_gemma4_global_layers_and_kv_sharing() -> None:
    # Gemma-4-31B (tests/corpus, real config): 60 layers, five sliding (1024 tokens, 16 KV heads x 256)
    # to one global (4 KV heads x global_head_dim 512, K and V from one projection but both cached):
    # 50 x 16 x 256 x 2 (K,V) x 2 B + 10 x 4 x 512 x 2 x 2 B = 819,200 + 81,920 = 901,120 B a token.
    m = to_model_input(load_directory(CORPUS / "nvidia__Gemma-4-31B-IT-NVFP4"))
    specs = layer_specs(m.arch, range(m.arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert sum(s.bytes_per_token for s in specs) == 50 * 16 * 256 * 2 * 2 + 10 * 4 * 512 * 2 * 2 == 901_120
    # The last num_kv_shared_layers layers read an earlier layer's cache and add none (gemma4.py L403-406):
    # with 20 of 60 shared, the first 40 layers keep a cache: 34 sliding and 6 global by the 5:1 pattern.
    raw = json.loads((CORPUS / "nvidia__Gemma-4-31B-IT-NVFP4" / "config.json").read_text())
    raw["text_config"]["num_kv_shared_layers"] = 20
    shared = parse_config(raw)
    specs = layer_specs(shared, range(shared.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 40
    assert sum(s.bytes_per_token for s in specs) == 34 * 16 * 256 * 2 * 2 + 6 * 4 * 512 * 2 * 2


def test_image_tags_give_the_release() -> None:
    # vllm/vllm-openai:vX.Y.Z is release X.Y.Z; latest and nightly are sized as the newest modelled one.
    assert parse_version("v0.24.1-cu129") == (0, 24, 1)
    assert parse_version("0.19.2rc1.dev212+g8cd174fa3") == (0, 19, 2)
    assert parse_version("latest") == parse_version("nightly-aarch64") == (0, 34, 0)
    assert parse_version("v0.34.0") == (0, 34, 0)


def test_lfm2_short_conv_state() -> None:
    # LFM2.5-VL-1.6B (tests/corpus, real config): conv layers keep the last conv_L_cache - 1 = 2 inputs of
    # conv_dim 2048 per request: 2048 x 2 x 2 B = 8,192 B (short_conv_state_shape, mamba_utils.py L249-258);
    # at TP2 each rank holds half the channels: 4,096 B.
    m = to_model_input(load_directory(CORPUS / "LiquidAI__LFM2.5-VL-1.6B"))
    for tp, expected in ((1, 8192), (2, 4096)):
        specs = layer_specs(m.arch, range(m.arch.num_layers), tp, 2, 2, 16, accounting_for())
        states = [s for s in specs if isinstance(s, MambaSpec)]
        assert states and all(s.state_bytes == expected == 2048 // tp * 2 * 2 for s in states)


def test_sampler_profile_by_runner_and_release() -> None:
    # Llama-3.1-8B on an H100 (max_num_seqs 1024, vocab 128,256). The V2 runner (every model from 0.29)
    # profiles the sampler on bf16 logits only until 0.32: 0.146 GiB + 2 B x 1024 x 128,256; 0.33 adds
    # the full fp32 pipeline pass, sized like the V1 runner (14.35 B a logit, fitted on the 0.19 logs);
    # 0.27 copies the logits to fp32 first: 2 + 4 B. Dense Llama runs on V2 in 0.27 though its list omits it
    # (config/vllm.py 0.27.0 L637-658: ``is_default_v2_architecture or not model_config.is_moe``; hunt125 F2's 0.27.1
    # Qwen3-32B log prints V2's ``model_runner.py:329 Model loading took``); an unlisted MoE model stays on V1.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    base = int(0.146 * GiB)

    def sampler(version: str) -> int:
        return plan(m, H100, ServingConfig(max_model_len=8192, vllm_version=version)).ranks[0].profile.sampler_bytes

    assert sampler("0.30.0") == base + 2 * 1024 * 128256
    assert sampler("0.33.0") == sampler("0.19.0") == base + int(14.35 * 1024 * 128256)
    assert sampler("0.27.0") == base + (2 + 4) * 1024 * 128256  # V2 for dense Llama in 0.27
    moe = model("Qwen/Qwen3-30B-A3B")
    moe27 = plan(moe, H100, ServingConfig(max_model_len=8192, vllm_version="0.27.0")).ranks[0].profile.sampler_bytes
    assert moe27 == base + int(14.35 * 1024 * moe.arch.vocab_size)  # Qwen3MoeForCausalLM is not listed: V1
    # DeepseekV2 ran on V2 from 0.24 (config/vllm.py 0.24.0 L68-77): fp32 copy in 0.27.
    lite = model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    v27 = plan(lite, H100, ServingConfig(max_model_len=8192, vllm_version="0.27.0")).ranks[0].profile.sampler_bytes
    assert v27 == base + (2 + 4) * 1024 * lite.arch.vocab_size


def test_v0_long_context_chunked_budget_follows_the_release() -> None:
    # V0 turns chunked prefill on above 32K tokens (engine/arg_utils.py 0.6.4.post1 L996-1020) with a 512-token
    # budget up to 0.6.4 (config.py 0.6.4.post1 L1114) and 2048 from 0.6.5 (config.py 0.6.5 L1344); 0.5.2 has no
    # such default and profiles one whole max_model_len prompt (config.py max(max_model_len, 2048)).
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    rtx = custom_gpu(int(23.58 * GiB))

    def tokens(version: str, **kw: object) -> int:
        cfg = ServingConfig(max_model_len=45000, vllm_version=version, engine="V0", **kw)  # type: ignore[arg-type]
        return plan(m, rtx, cfg).serving.max_num_batched_tokens

    assert tokens("0.6.4") == 512 and tokens("0.5.5") == 512
    assert tokens("0.6.5") == 2048 and tokens("0.7.3") == 2048
    assert tokens("0.5.2") == 45000
    # LoRA kept chunked prefill off by default, so the profiling pass is the whole 45000-token prompt.
    assert tokens("0.6.4", enable_lora=True) == 45000
    # A stated flag wins over the default, which applies only ``if self.enable_chunked_prefill is None``
    # (arg_utils.py 0.5.3 L748, 0.6.3.post1 L941): --no-enable-chunked-prefill profiles the whole 45000-token
    # prompt, --enable-chunked-prefill the release's budget even at 16K, and with LoRA (hunt121 S1).
    assert tokens("0.6.4", enable_chunked_prefill=False) == 45000
    assert tokens("0.7.3", enable_chunked_prefill=False) == 45000
    assert tokens("0.6.4", enable_lora=True, enable_chunked_prefill=True) == 512
    short = ServingConfig(max_model_len=16384, vllm_version="0.6.5", engine="V0", enable_chunked_prefill=True)
    assert plan(m, rtx, short).serving.max_num_batched_tokens == 2048
    # forward pass of the profile: 512 x 2 B x (6 x 4096 + 2 x 14336) = 54.5 MB (V0 factors, activation.py)
    p = plan(m, rtx, ServingConfig(max_model_len=45000, vllm_version="0.6.4", engine="V0"))
    assert p.ranks[0].profile.forward_bytes == 512 * 2 * (6 * 4096 + 2 * 14336)


def test_public_runs_short_by_less_than_the_estimate_error_are_not_denied() -> None:
    # Runs public sources report as served, which fitgate's fitted terms put a little short of KV memory:
    # - gpt-oss-120b on one A100 80GB at its 131072 default, vLLM 0.11 (vllm-project/recipes
    #   models/openai/gpt-oss-120b.yaml, "A100 (single card)"): 4.38 GiB left for 4.58 GiB, 0.20 short;
    # - Qwen3-32B on one H100 at 32768 tokens, vLLM 0.11.0 (gpustack performance lab qwen3-32b/h100.md): 0.07 short.
    # Each band: min(0.58 x (activation + non-torch [+ graph estimate]), 0.51 GiB) > the shortfall.
    cases = [
        ("openai/gpt-oss-120b", "A100-80GB", ServingConfig(vllm_version="0.11.0")),
        ("Qwen/Qwen3-32B", "H100", ServingConfig(max_model_len=32768, vllm_version="0.11.0")),
    ]
    for name, gpu, serving in cases:
        p = plan(model(name), lookup_gpu(gpu), serving)
        assert p.verdict is Verdict.TIGHT and "ShortWithinEstimateError" in codes(p), name


def test_kv_cache_memory_bytes_is_not_tight_by_construction() -> None:
    # hunt29 F3: with --kv-cache-memory-bytes vLLM skips gpu_memory_utilization and the "budget" is weights +
    # activations + the KV asked for, so "weights and activations take 95% of the budget" fired on every such plan.
    # Qwen3-8B on an H200 with 1 GiB of KV at 4096 tokens: 17.74 GiB of weights and activations on a 139.81 GiB card.
    qwen = model("Qwen/Qwen3-8B")
    p = plan(qwen, lookup_gpu("H200"), ServingConfig(max_model_len=4096, kv_cache_memory_bytes=1 << 30))
    assert p.verdict is Verdict.FITS, p.reasons


def test_a_kernel_choice_on_a_quantized_checkpoint_is_not_called_load_time_quantization() -> None:
    # hunt28 F5 (minor): `--quantization awq_marlin` on an AWQ checkpoint picks a kernel; the recommended args said
    # "weights quantized while loading"
    from fitgate.sizing.engine_args import engine_args  # noqa: PLC0415

    awq = model("Qwen/Qwen3-14B-AWQ")
    serving = ServingConfig(max_model_len=8192, quantization="awq_marlin")
    [arg] = [a for a in engine_args(plan(awq, lookup_gpu("L40S"), serving), serving) if a.name == "--quantization"]
    assert arg.value == "awq_marlin" and "checkpoint's own quantization" in arg.reason
    qwen = model("Qwen/Qwen3-8B")
    serving = ServingConfig(max_model_len=8192, quantization="fp8")
    [arg] = [a for a in engine_args(plan(qwen, lookup_gpu("L40S"), serving), serving) if a.name == "--quantization"]
    assert arg.reason == "weights quantized while loading"


def test_a_unified_memory_gpu_at_the_default_budget_is_tight() -> None:
    # hunt28 F6: on a DGX Spark (GB10) the OS shares the memory; vllm-project/recipes run it at gpu_memory_utilization
    # 0.85 and say the default 0.92 "can't be satisfied and OOMs at startup" (PR #632). fitgate said Fits at 0.92.
    qwen = model("Qwen/Qwen3-8B")
    gb10 = lookup_gpu("GB10")

    def verdict(gmu: float | None, version: str = "0.24.0") -> Verdict:
        return plan(
            qwen, gb10, ServingConfig(max_model_len=32768, gpu_memory_utilization=gmu, vllm_version=version)
        ).verdict

    assert verdict(None) is Verdict.TIGHT and verdict(0.85) is Verdict.FITS
    assert verdict(None, "0.34.0") is Verdict.FITS  # 0.34 sizes the pool from the memory free after warm-up
    assert (
        plan(qwen, lookup_gpu("H100"), ServingConfig(max_model_len=32768, vllm_version="0.24.0")).verdict
        is Verdict.FITS
    )


def test_the_kv_capacity_a_v0_log_prints_is_not_denied_on_the_catalogs_card() -> None:
    # hunt106 F4: OCI's troubleshooting log (oracle-samples/oci-data-science-ai-samples ai-quick-actions/
    # troubleshooting-tips.md, vLLM 0.7 V0, Llama-3.1-8B at 131072 on a 22.07 GiB A10, gmu 0.9) prints 2356 blocks,
    # "the maximum number of tokens that can be stored in KV cache (37696)", and tells its reader to set that. fitgate
    # counts 0.73 GiB of activation (24 B x 256 x 128,256 sampler logits) where the log printed 0.22, the largest
    # over-count of the calibration cases. At 37696 tokens (2356 x 16 x 131,072 B = 4.602 GiB) the plan on the
    # catalog's A10 (22.06 GiB x 0.9 = 19.854 GiB - 14.989 weights - 0.734 - 0.130 = 4.001 GiB) is 0.600 GiB short:
    # past 0.68 x 0.864 = 0.588 (denied before), within 0.69 x 0.864 + 0.02 = 0.616. One block past the log's
    # capacity and on (38400 tokens: 4.688 GiB, 0.687 short) it is denied.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    a10 = lookup_gpu("A10")

    def at(tokens: int) -> Any:
        return plan(m, a10, ServingConfig(max_model_len=tokens, vllm_version="0.7.3"))

    advised = at(37696)
    assert advised.verdict is Verdict.TIGHT and "ShortWithinEstimateError" in codes(advised), codes(advised)
    assert at(38400).verdict is Verdict.DOES_NOT_FIT


def test_kv_bytes_per_token_is_one_gpus_under_pipeline_parallel() -> None:
    # hunt172 F5: the figure summed every stage's layers, so PP 2 printed twice what one GPU holds a token.
    # Llama-3.1-70B: 80 layers x 2 (K, V) x 8 KV heads x 128 dims x 2 B = 327,680 B a token; TP 2 holds 4 heads
    # (163,840 B); TP 2 x PP 2 holds 4 heads of 40 layers on each GPU (81,920 B).
    m = model("meta-llama/Llama-3.1-70B-Instruct")
    tp = plan(m, H100, ServingConfig(max_model_len=8192, tensor_parallel_size=2))
    pp = plan(m, H100, ServingConfig(max_model_len=8192, tensor_parallel_size=2, pipeline_parallel_size=2))
    assert tp.kv.bytes_per_token == 80 * 2 * 4 * 128 * 2 == 163_840
    assert pp.kv.bytes_per_token == 40 * 2 * 4 * 128 * 2 == 81_920
