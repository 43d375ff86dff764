"""Issue 24's structure from vLLM's source: the engine era, prompts in budget-sized chunks, EP's all2all."""

from __future__ import annotations

import dataclasses

import pytest

from fitgate.sizing import ServingConfig, Workload, lookup_gpu, plan
from fitgate.sizing.load import steady_state
from fitgate.sizing.performance import ALL2ALL_RDMA_GBPS, ALLREDUCE_BUS_GBPS, compute_dtype_factors, estimate, work
from fitgate.sizing.step_time import Work, calibration, step_seconds
from tests.conftest import model


def llama_8b_work(vllm_version: str | None = None) -> Work:
    """Llama-3.1-8B on one H100 at max_model_len 8192, a 2048-token prompt, decoded at 3072 tokens."""
    mi = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192, vllm_version=vllm_version), Workload(16, 4096))
    return work(mi, p, 3072, 2048)


def test_a_v0_release_runs_its_prompts_in_their_own_steps() -> None:
    # vLLM 0.6.3 is V0 (before 0.8); at max_model_len 8192 (<= 32K) its chunked prefill is off, so its
    # budget holds a whole prompt (max(8192, 2048) tokens) and the step model keeps prompts apart.
    w = llama_8b_work("0.6.3")
    assert w.v0 and w.prefill_apart
    # At 16 in flight, 2048 in / 1024 out: TPOT = a 16-token decode step + 15 / 1024 prompt-only steps of
    # 2048 tokens (the other requests' prompts during one request's life).
    k = calibration().constants
    s = steady_state(w, 2048, 1024, k, concurrency=16)
    decode = step_seconds(w, 16.0, 0.0, k)[0]
    prompt = step_seconds(w, 0.0, 2048.0, k)[0]
    assert s.tpot_s == pytest.approx(decode + 15 / 1024 * prompt)
    # a V1 release of the same deployment mixes them (and pays V1's host cost)
    w1 = llama_8b_work()
    assert not w1.v0 and not w1.prefill_apart


def test_v0_chunked_prefill_above_32k_mixes_the_prompts() -> None:
    # V0 turns chunked prefill on above 32K tokens of context (budget 2048 < max_model_len): mixed steps.
    mi = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=65536, vllm_version="0.6.3"), Workload(1, 4096))
    w = work(mi, p, 3072, 2048)
    assert w.v0 and not w.prefill_apart


def test_v0_factor_scales_the_host_overhead_only() -> None:
    # One decode token on Llama-3.1-8B (32 layers, TP 1): overhead = step_s + 32 x layer_s, times
    # v0_factor on V0; the bytes and FLOPs terms are the same on both engines.
    w = llama_8b_work("0.6.3")
    k = dataclasses.replace(calibration().constants, v0_factor=1.0)
    k3 = dataclasses.replace(k, v0_factor=3.0)
    overhead = k.step_s + 32 * k.layer_s
    assert step_seconds(w, 1.0, 0.0, k3)[0] - step_seconds(w, 1.0, 0.0, k)[0] == pytest.approx(2 * overhead)
    assert step_seconds(dataclasses.replace(w, v0=False), 1.0, 0.0, k3)[0] == pytest.approx(
        step_seconds(w, 1.0, 0.0, k)[0]
    )


def test_v1_prompts_arrive_in_chunks_of_the_budget_left() -> None:
    # V1, 16 in flight, 2048 in / 1024 out: 15 x 2048 / 1024 = 30 prompt tokens a step on average, which the
    # scheduler gives as whole chunks of min(2048, budget - 16) = 2048 tokens to 30 / 2048 of the steps.
    w = llama_8b_work()
    k = calibration().constants
    share = 30 / 2048
    mixed, mixed_roof = step_seconds(w, 16.0, 2048.0, k)
    decode, decode_roof = step_seconds(w, 16.0, 0.0, k)
    s = steady_state(w, 2048, 1024, k, concurrency=16)
    assert s.tpot_s == pytest.approx(share * mixed + (1 - share) * decode)
    assert s.roofline_decode_tokens_per_s == pytest.approx(16 / (share * mixed_roof + (1 - share) * decode_roof))
    assert s.decode_tokens_per_s <= s.roofline_decode_tokens_per_s


def test_expert_parallel_all2all_bytes_with_data_parallelism() -> None:
    # DeepSeek-V3 (hidden 7168, top 8 of 256 experts, bf16 activations: 14,336 bytes a token) on TP 8:
    # * DP 1 + EP: no all2all kernels (use_all2all_kernels needs DP > 1): 0;
    # * DP 2 + EP, allgather_reducescatter: 2 x (2 - 1) / 2 x 14,336 = 14,336 bytes a token and MoE layer;
    # * DP 2 + EP (EP 16), DeepEP low-latency: 2 x min(8, 16) x 15 / 16^2 x 14,336 = 13,440 bytes;
    # over NVLink (300 GB/s) in one node, RDMA (45 GB/s) when the 2 ranks are on 2 nodes.
    mi = model("deepseek-ai/DeepSeek-V3")
    gpu = lookup_gpu("H200")
    cases = [
        (1, 1, None, 0.0, ALLREDUCE_BUS_GBPS["nvlink"]),
        (2, 2, None, 14336.0, ALLREDUCE_BUS_GBPS["nvlink"]),
        (2, 2, "deepep_low_latency", 13440.0, ALLREDUCE_BUS_GBPS["nvlink"]),
        (2, 1, None, 14336.0, ALL2ALL_RDMA_GBPS),
    ]
    steps = []
    for dp, local, backend, per_token, link in cases:
        serving = ServingConfig(max_model_len=8192, tensor_parallel_size=8, data_parallel_size=dp,
                                data_parallel_size_local=local, enable_expert_parallel=True, all2all_backend=backend)  # fmt: skip
        p = plan(mi, gpu, serving, Workload(64, 4096))
        w = work(mi, p, 3400, 3000)
        assert w.a2a_bytes_per_token == pytest.approx(per_token)
        assert w.a2a_bytes_per_s == pytest.approx(link * 1e9)
        # 58 of DeepSeek-V3's 61 layers are MoE: the step pays 58 x tokens x bytes / link more
        k = calibration().constants
        no_a2a = dataclasses.replace(w, a2a_bytes_per_token=0.0)
        extra = step_seconds(w, 64.0, 0.0, k)[0] - step_seconds(no_a2a, 64.0, 0.0, k)[0]
        assert extra == pytest.approx(58 * 64 * per_token / (link * 1e9))
        steps.append(estimate(mi, p, batch=64, input_tokens=3000, output_tokens=1000).tpot_seconds)
    assert steps[1] < steps[3]  # the same layout: all2all over NVLink, then over RDMA


def test_async_scheduling_overlaps_the_host_side_from_0_14() -> None:
    # vLLM 0.14.0 turned async scheduling on (vllm-project/vllm#27614): the host's step_s overlaps the GPU's
    # part, so one decode token on Llama-3.1-8B takes max(step_s, 32 x layer_s + bytes / bandwidth) instead
    # of their sum; 0.13.0 still adds them.
    before, after = llama_8b_work("0.13.0"), llama_8b_work("0.14.0")
    assert not before.async_scheduling and after.async_scheduling
    k = calibration().constants
    gpu = step_seconds(before, 1.0, 0.0, k)[0] - k.step_s
    assert step_seconds(after, 1.0, 0.0, k)[0] == pytest.approx(max(k.step_s, gpu))
    # a host slower than the GPU part sets the step on its own
    slow_host = dataclasses.replace(k, step_s=1.0)
    assert step_seconds(after, 1.0, 0.0, slow_host)[0] == pytest.approx(1.0)


def test_requests_beyond_the_pool_wait_for_a_slot() -> None:
    # A client keeping 48 requests in flight against an engine that holds 32: the 16 others wait in the
    # engine's queue; by Little's law each waits 16 / (the 32 requests' rate) for a slot, on top of its TTFT.
    w = llama_8b_work()
    k = calibration().constants
    held = steady_state(w, 2048, 1024, k, concurrency=32)
    over = steady_state(w, 2048, 1024, k, concurrency=48, max_concurrency=32)
    assert over.concurrency == held.concurrency == 32 and over.tpot_s == held.tpot_s
    assert over.ttft_s == pytest.approx(held.ttft_s + 16 / held.requests_per_s)


@pytest.mark.parametrize(
    ("name", "gpu", "tp", "expected"),
    [
        # gpt-oss MXFP4 quantizes only its experts: attention and dense layers at bf16 (1); the experts on fp4
        # tensor cores on a B200 (4), weight-only into bf16 matmuls on an H100 (Marlin / Triton: 1, not fp8's 2)
        ("openai/gpt-oss-120b", "B200", 1, (1.0, 4.0)),
        ("openai/gpt-oss-120b", "H100", 1, (1.0, 1.0)),
        # DeepSeek-V3's fp8 checkpoint, W8A8 on Hopper's fp8 tensor cores: 2 for both parts
        ("deepseek-ai/DeepSeek-V3", "H200", 8, (2.0, 2.0)),
        # a bf16 model: 1
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, (1.0, 1.0)),
    ],
)
def test_compute_dtype_by_part_and_gpu(name: str, gpu: str, tp: int, expected: tuple[float, float]) -> None:
    mi = model(name)
    p = plan(mi, lookup_gpu(gpu), ServingConfig(max_model_len=8192, tensor_parallel_size=tp), Workload(1, 4096))
    assert compute_dtype_factors(mi, p) == expected
    w = work(mi, p, 3072, 2048)
    peak = lookup_gpu(gpu).bf16_dense_tflops * 1e12
    assert (w.peak_flops, w.expert_peak_flops) == pytest.approx((peak * expected[0], peak * expected[1]))


def test_rocm_matmuls_run_at_amd_mfu_of_cudas_share() -> None:
    # Llama-3.1-8B on one MI300X, a 2048-token prompt-only step (compute-bound: 2048 x ~16 GFLOP at 1,307 TF):
    # the compute part is divided by amd_mfu; halving amd_mfu doubles it, the bytes and overheads stay.
    mi = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("MI300X"), ServingConfig(max_model_len=8192), Workload(1, 4096))
    w = work(mi, p, 3072, 2048)
    assert w.amd
    k = dataclasses.replace(calibration().constants, amd_mfu=1.0, step_s=0.0)
    s = w.stages[0]
    compute = 2048 * (s.flops_per_token + s.prefill_attention_flops) / (w.peak_flops * k.prefill_mfu)
    overhead = 32 * k.layer_s * k.amd_factor
    assert step_seconds(w, 0.0, 2048.0, k)[0] == pytest.approx(overhead + compute)
    assert step_seconds(w, 0.0, 2048.0, dataclasses.replace(k, amd_mfu=0.5))[0] == pytest.approx(overhead + 2 * compute)
