"""Properties that must hold for any settings (hypothesis)."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from fitgate.sizing import ModelInput, ReasonCode, ServingConfig, Verdict, Workload, lookup_gpu, plan
from fitgate.sizing.verdict_rules import ESTIMATE_ERROR_CAP_BYTES, ESTIMATE_ERROR_FRACTION
from fitgate.sizing.weights import weights_per_rank
from tests.conftest import model

MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-8B",
    "google/gemma-2-9b-it",
    "openai/gpt-oss-20b",
    "deepseek-ai/DeepSeek-V2-Lite-Chat",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "Qwen/Qwen3-Next-80B-A3B-Thinking",
]
GPUS = ["L4", "L40S", "A100-80GB", "H100", "H200", "MI300X"]


@cache
def m(name: str) -> ModelInput:
    return model(name)


def tps(name: str) -> list[int]:
    arch = m(name).arch
    return [
        tp
        for tp in (1, 2, 4, 8)
        if arch.attention_heads % tp == 0
        and (arch.kv_heads % tp == 0 or tp % arch.kv_heads == 0 if arch.kv_heads else True)
    ]


shapes = st.fixed_dictionaries(
    {
        "name": st.sampled_from(MODELS),
        "gpu": st.sampled_from(GPUS),
        "tp_index": st.integers(0, 3),
        "gmu": st.floats(0.5, 0.97),
        "kv": st.sampled_from(["auto", "fp8"]),
        "len": st.integers(256, 32768),
    }
)


def serving(s: dict, **over: object) -> ServingConfig:
    options = tps(s["name"])
    tp = options[s["tp_index"] % len(options)]
    length = min(s["len"], m(s["name"]).arch.derived_max_model_len)
    base = {
        "max_model_len": length,
        "tensor_parallel_size": tp,
        "gpu_memory_utilization": round(s["gmu"], 3),
        "kv_cache_dtype": s["kv"],
    }
    base.update(over)
    return ServingConfig(**base)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_never_negative(s: dict) -> None:
    p = plan(m(s["name"]), lookup_gpu(s["gpu"]), serving(s))
    g = p.per_gpu
    for value in (
        g.weights_bytes,
        g.activation_bytes,
        g.non_torch_bytes,
        g.cuda_graph_bytes,
        g.kv_cache_bytes,
        p.kv.num_blocks,
        p.kv.reported_tokens,
        p.kv.bytes_per_token,
        p.max_model_len_that_fits,
    ):
        assert value >= 0
    assert p.kv.max_concurrency >= 0


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 4096))
def test_kv_need_is_monotonic_in_length(s: dict, extra: int) -> None:
    gpu = lookup_gpu(s["gpu"])
    longer = min(s["len"] + extra, m(s["name"]).arch.derived_max_model_len)
    a = plan(m(s["name"]), gpu, serving(s))
    b = plan(m(s["name"]), gpu, serving(s, max_model_len=longer))
    assert b.kv.one_request_bytes >= a.kv.one_request_bytes


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(1, 64), st.integers(1, 64))
def test_kv_need_is_monotonic_in_concurrency(s: dict, n: int, more: int) -> None:
    gpu = lookup_gpu(s["gpu"])
    a = plan(m(s["name"]), gpu, serving(s), Workload(n, 1000))
    b = plan(m(s["name"]), gpu, serving(s), Workload(n + more, 1000))
    assert (b.kv.workload_blocks or 0) >= (a.kv.workload_blocks or 0)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4]))
def test_doubling_tp_never_raises_weights_per_gpu(name: str, tp: int) -> None:
    mi = m(name)
    if tp * 2 not in tps(name) or tp not in tps(name):
        return
    one = weights_per_rank(mi.arch, mi.inventory, tp=tp, pp=1, pp_rank=0, dtype=mi.arch.dtype)
    two = weights_per_rank(mi.arch, mi.inventory, tp=2 * tp, pp=1, pp_rank=0, dtype=mi.arch.dtype)
    assert two.total_bytes <= one.total_bytes


@settings(max_examples=80, deadline=None)
@given(shapes, st.integers(1, 256))
def test_verdict_agrees_with_the_numbers(s: dict, concurrency: int) -> None:
    p = plan(m(s["name"]), lookup_gpu(s["gpu"]), serving(s), Workload(concurrency, 2000))
    worst = p.ranks[p.binding_rank]
    broken = (
        worst.available_kv_bytes <= 0
        or p.kv.one_request_bytes > worst.available_kv_bytes
        or (p.kv.workload_blocks or 0) > p.kv.num_blocks
        or p.per_gpu.budget_bytes > p.per_gpu.capacity_bytes - 512 * 1024**2
    )
    if any(r.code == ReasonCode.SHORT_WITHIN_ESTIMATE_ERROR for r in p.reasons):
        # a KV shortfall within the fitted terms' error band (verdict_rules): Tight, never DoesNotFit
        prof = worst.profile
        fitted = prof.activation_bytes + prof.non_torch_bytes
        fitted += prof.cuda_graph_bytes if p.per_gpu.cuda_graphs_in_budget else 0
        short = p.kv.one_request_bytes - worst.available_kv_bytes
        band = min(int(ESTIMATE_ERROR_FRACTION * fitted), ESTIMATE_ERROR_CAP_BYTES)
        assert broken and p.verdict is Verdict.TIGHT and 0 < short <= band
    else:
        assert (p.verdict is Verdict.DOES_NOT_FIT) == broken
    if p.verdict is Verdict.FITS:
        assert p.per_gpu.headroom_bytes >= 0 and (p.kv.workload_fraction or 0) <= 0.9
