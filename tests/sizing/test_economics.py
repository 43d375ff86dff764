"""Performance estimate, cost and the ``recommend`` search: formulas with their arithmetic, and properties."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fitgate.cli import main
from fitgate.sizing import ModelInput, ServingConfig, SizingError, Verdict, Workload, gpu_catalog, lookup_gpu, plan
from fitgate.sizing.capacity import search
from fitgate.sizing.cost import parse_gpu_prices, replica_cost
from fitgate.sizing.performance import (
    active_parameters,
    estimate,
    expert_fraction_touched,
)
from fitgate.sizing.prices import price_table
from fitgate.sizing.step_time import calibration
from tests.conftest import model


@cache
def m(name: str) -> ModelInput:
    return model(name)


# --------------------------------------------------------------------------------------------
# Cost


def test_cost_the_seeds_scenario() -> None:
    # Two GPUs at $2.50/h, 900 tokens/s, 40 % utilisation, API $0.50 per 1M output tokens:
    #   usd_per_hour = 2.5 x 2 = 5.0
    #   per 1M       = 5.0 / (900 x 3600 x 0.4) x 1e6 = 5.0 / 1,296,000 x 1e6 = 3.858
    #                  (the seed prints 1.607, but its own formula gives 120 / 31.104 = 3.858)
    #   break-even   = 5.0 x 24 / 0.5 x 1e6 = 240,000,000 tokens/day (the seed's figure)
    #   one replica makes at most 900 x 86400 = 77.76M tokens/day < 240M: never cheaper -> None
    c = replica_cost(2.5, 2, 900, 0.4, 0.5)
    assert c.usd_per_hour == 5.0
    assert c.usd_per_million_output_tokens == pytest.approx(3.858, abs=1e-3)
    assert c.breakeven_tokens_per_day == pytest.approx(240e6)
    assert c.cheaper_than_api_at is None


def test_cost_breakeven_counts_the_api_input_price_with_the_request_shape() -> None:
    # 1 GPU at $2.50/h, 3000 tokens/s; API $0.60 per 1M output and $0.20 per 1M input tokens; 2000 in / 500 out:
    #   the API's price of a request = (2000 x 0.20 + 500 x 0.60) / 1e6 = $0.0007
    #   per 1M output tokens that is 0.60 + 0.20 x 2000 / 500 = $1.40
    #   break-even = 2.5 x 24 / 1.40 x 1e6 = 42,857,143 output tokens/day = / 500 = 85,714 requests/day
    #   the replica makes 3000 x 86400 = 259.2M output tokens/day >= 42.9M: cheaper from there
    c = replica_cost(2.5, 1, 3000, 0.4, 0.6, api_input_usd_per_million=0.2, request_shape=(2000, 500))
    assert c.breakeven_tokens_per_day == pytest.approx(42_857_143, abs=1)
    assert c.breakeven_requests_per_day == pytest.approx(85_714.3, abs=0.1)
    assert c.cheaper_than_api_at == pytest.approx(42_857_143, abs=1)
    # output price only: the shape turns the seeds' break-even into requests (2.5 x 24 / 0.6 x 1e6 / 500 = 200,000)
    only_out = replica_cost(2.5, 1, 3000, 0.4, 0.6, request_shape=(2000, 500))
    assert only_out.breakeven_requests_per_day == pytest.approx(200_000)
    # an input price needs the output price and the request shape: the error names the flag and what is missing
    with pytest.raises(SizingError, match=r"--api-input-price-per-million.*--input-tokens"):
        replica_cost(2.5, 1, 3000, 0.4, 0.6, api_input_usd_per_million=0.2)
    with pytest.raises(SizingError, match=r"--api-input-price-per-million.*--api-price-per-million"):
        replica_cost(2.5, 1, 3000, 0.4, None, api_input_usd_per_million=0.2, request_shape=(2000, 500))
    with pytest.raises(SizingError, match="--api-input-price-per-million"):
        replica_cost(2.5, 1, 3000, 0.4, 0.6, api_input_usd_per_million=-1.0, request_shape=(2000, 500))


def test_cost_cheaper_than_api_within_reach() -> None:
    # 1 GPU at $1/h, 5000 tokens/s, utilisation 1.0, API $1 per 1M:
    #   per 1M = 1 / (5000 x 3600) x 1e6 = 0.0556; break-even = 1 x 24 / 1 x 1e6 = 24M/day
    #   the replica makes 5000 x 86400 = 432M/day >= 24M: cheaper from 24M tokens/day
    c = replica_cost(1.0, 1, 5000, 1.0, 1.0)
    assert c.usd_per_million_output_tokens == pytest.approx(0.05556, abs=1e-5)
    assert c.cheaper_than_api_at == pytest.approx(24e6)


def test_utilization_divides_the_cost_per_token() -> None:
    # Idle hours are paid: at 40 % a token costs 1 / 0.4 = 2.5 x what it costs at 100 %.
    full = replica_cost(2.0, 1, 1000, 1.0).usd_per_million_output_tokens
    part = replica_cost(2.0, 1, 1000, 0.4).usd_per_million_output_tokens
    assert full is not None and part is not None
    assert part == pytest.approx(2.5 * full)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5])
def test_utilization_out_of_range(bad: float) -> None:
    with pytest.raises(SizingError, match="--utilization"):
        replica_cost(2.0, 1, 1000, bad)


def test_gpu_prices() -> None:
    one = parse_gpu_prices("2.5")
    assert one.of(lookup_gpu("L4")) == 2.5
    per = parse_gpu_prices("H100=2.5, L4=0.7")
    assert per.of(lookup_gpu("H100-SXM")) == 2.5  # an alias names the catalog product
    assert per.of(lookup_gpu("L4")) == 0.7
    assert per.of(lookup_gpu("A10")) is None
    for bad in ("cheap", "H999=1", "H100=-1", "L4=0.7,=2"):
        with pytest.raises(SizingError, match="--gpu-hour-price"):
            parse_gpu_prices(bad)


# --------------------------------------------------------------------------------------------
# Performance


def test_expert_fraction_touched() -> None:
    # 8 experts, top-2: one token touches 2/8 = 0.25; two tokens 1 - (6/8)^2 = 0.4375.
    assert expert_fraction_touched(8, 2, 1) == pytest.approx(0.25)
    assert expert_fraction_touched(8, 2, 2) == pytest.approx(0.4375)
    assert expert_fraction_touched(128, 8, 256) > 0.999
    assert expert_fraction_touched(4, 4, 1) == 1.0


def test_decode_known_answer_llama_8b_h100() -> None:
    # Llama-3.1-8B, 1 x H100-SXM (3350 GB/s, 989 TF bf16), one request of 1024 tokens, no prompt in the steps:
    #   bytes per step = weights on the GPU - rotary cache - embedding table (128256 x 4096 x 2 B, only
    #   one row is gathered; lm_head is separate and read) + KV 1024 tokens x 131072 B = 128 MiB
    #   roofline = 1 / (bytes / 3.35e12)
    #   TPOT = max(step_s, 32 layers x layer_s + bytes / (3.35e12 x bw_eff))   (memory-bound: ~16 GFLOP per
    #          token is ~0.06 ms at any fitted MFU, against ~5 ms of reads; no TP, no MoE terms; fitgate's default
    #          release schedules asynchronously, so the host's step_s overlaps the GPU's part)
    mi = m("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192), Workload(1, 1024))
    e = estimate(mi, p)
    k = calibration().constants
    w = p.ranks[0].weights
    embed = (128256 + 0) * 4096 * 2  # vocab already a multiple of 64
    expected = w.total_bytes - w.rotary_cache_bytes - embed + 1024 * 131072
    assert abs(e.bytes_read_per_step - expected) <= 1
    assert e.roofline_decode_tokens_per_s == pytest.approx(3350e9 / expected)
    tpot = max(k.step_s, 32 * k.layer_s + expected / (3350e9 * k.bw_eff))
    assert e.tpot_seconds == pytest.approx(tpot, rel=1e-6)
    assert e.decode_tokens_per_s == pytest.approx(1 / tpot, rel=1e-6)
    assert 120 < e.decode_tokens_per_s < 200  # ~16 GB per token: 6.5 ms measured on this pair (points.json)
    active = active_parameters(mi)
    assert 7.4e9 < active < 7.6e9


def test_prompts_share_the_decode_steps() -> None:
    # Chunked prefill: at 64 requests in flight, 4096-token prompts with 128-token outputs put
    # 64 x 4096 / 128 = 2048 prompt tokens into an average step; 128-token prompts with 4096-token
    # outputs put 2. The first decodes slower, and both are slower than a pure decode batch.
    mi = m("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192), Workload(64, 4224))
    heavy = estimate(mi, p, batch=64, input_tokens=4096, output_tokens=128)
    light = estimate(mi, p, batch=64, input_tokens=128, output_tokens=4096)
    assert heavy.tpot_seconds > 1.5 * light.tpot_seconds
    assert heavy.ttft_seconds > light.ttft_seconds
    assert heavy.output_tokens_per_s < light.output_tokens_per_s


def test_request_rate_follows_littles_law_and_saturates() -> None:
    # Open loop: requests in flight = rate x (TTFT + (OSL - 1) x TPOT); far beyond capacity the
    # replica is saturated and TTFT is unbounded.
    mi = m("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192), Workload(8, 2048))
    e = estimate(mi, p, input_tokens=1024, output_tokens=256, request_rate=2.0)
    assert not e.saturated
    in_flight = 2.0 * (e.ttft_seconds + 255 * e.tpot_seconds)
    assert e.requests_per_s == pytest.approx(2.0, rel=0.02)
    assert e.batch == round(in_flight) or abs(e.batch - in_flight) < 1.01
    flood = estimate(mi, p, input_tokens=1024, output_tokens=256, request_rate=1e5)
    assert flood.saturated and flood.ttft_seconds == float("inf")


def test_moe_reads_only_the_experts_it_touches() -> None:
    # Mixtral 8x7B (8 experts, top-2): one request touches 1/4 of the expert bytes, 64 requests all of them.
    mi = m("mistralai/Mixtral-8x7B-Instruct-v0.1")
    p = plan(mi, lookup_gpu("H200"), ServingConfig(max_model_len=4096), Workload(64, 1))
    one = estimate(mi, p, batch=1, context_tokens=1)
    many = estimate(mi, p, batch=64, context_tokens=1)
    weights = p.ranks[0].weights.total_bytes
    assert one.bytes_read_per_step < 0.45 * weights
    assert many.bytes_read_per_step > 0.9 * weights


def test_tensor_parallel_adds_an_all_reduce() -> None:
    # Llama-3.1-70B on 4 x H100: each of 80 layers pays tp_layer_s (two all-reduce launches and syncs)
    # on top of the per-layer cost and the reads (the host's step_s overlaps them: async scheduling).
    mi = m("meta-llama/Llama-3.1-70B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192, tensor_parallel_size=4), Workload(8, 4096))
    e = estimate(mi, p)
    k = calibration().constants
    reads = e.bytes_read_per_step / (3350e9 * k.bw_eff)
    assert e.tpot_seconds >= max(k.step_s, 80 * (k.layer_s + k.tp_layer_s) + reads) - 1e-9
    assert e.decode_tokens_per_s < e.roofline_decode_tokens_per_s


MODELS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "google/gemma-2-9b-it",
    "deepseek-ai/DeepSeek-V2-Lite-Chat",
    "ai21labs/AI21-Jamba-1.5-Mini",
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from([g.name for g in gpu_catalog()]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2]),
    st.integers(1, 1024),
    st.integers(1, 8192),
    st.sampled_from(["auto", "fp8"]),
    st.booleans(),
)
def test_decode_never_exceeds_the_bandwidth_roofline(
    name: str, gpu: str, tp: int, pp: int, batch: int, context: int, kv: str, split: bool
) -> None:
    mi = m(name)
    try:
        p = plan(
            mi,
            lookup_gpu(gpu),
            ServingConfig(max_model_len=8192, tensor_parallel_size=tp, pipeline_parallel_size=pp, kv_cache_dtype=kv),
        )
    except SizingError:
        return  # TP not a divisor of the heads, a context beyond the model's
    if split:  # a prompt of half the context, the rest generated: prompts share the steps
        e = estimate(
            mi, p, batch=batch, input_tokens=max(1, context // 2), output_tokens=max(1, context - context // 2)
        )
    else:
        e = estimate(mi, p, batch=batch, context_tokens=context)
    g = p.gpu
    # The roofline: every byte a step reads, at the full datasheet bandwidth, nothing else.
    roofline = e.batch / (e.bytes_read_per_step / (g.memory_bandwidth_gbps * 1e9))
    assert e.roofline_decode_tokens_per_s == pytest.approx(roofline, rel=1e-9)
    assert e.decode_tokens_per_s <= roofline
    assert e.decode_range_tokens_per_s[1] <= roofline * (1 + 1e-9)
    assert e.per_request_tokens_per_s == pytest.approx(1 / e.tpot_seconds)
    assert e.prefill_tokens_per_s > 0 and e.ttft_seconds > 0


# --------------------------------------------------------------------------------------------
# recommend, gpus --fits, catalog list --fits-on


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_recommend_70b_options_each_plan_fits_cheapest_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "recommend", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--concurrency", "16",
        "--context-tokens", "32768", "--gpu-hour-price", "H100=2.5,L4=0.7,L40S=1.1,A100-80GB=1.8,H200=3.6",
        "--no-list-prices", "--output", "json",
    )  # fmt: skip
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    options = doc["options"]
    assert options and doc["reason"] is None
    costs = [(o["usd_per_million_output_tokens"], o["gpus"]) for o in options]
    assert costs == sorted(costs)  # cheapest first, ties: fewer GPUs
    assert {o["gpu"] for o in options} <= {"H100-SXM", "L4", "L40S", "A100-80GB", "H200"}
    for o in options:
        plan_code, plan_out, _ = run(
            capsys, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", o["gpu"],
            "-tp", str(o["tensor_parallel_size"]), "-pp", str(o["pipeline_parallel_size"]),
            "--kv-cache-dtype", o["kv_cache_dtype"], "--max-model-len", "32768",
            *(["--quantization", o["quantization"]] if o["quantization"] else []),
            "--concurrency", "16", "--context-tokens", "32768", "--replicas", str(o["replicas"]), "--output", "json",
        )  # fmt: skip
        planned = json.loads(plan_out)
        assert plan_code == 0 and planned["verdict"] in ("Fits", "Tight"), o
        assert planned["verdict"] == o["verdict"]
        assert planned["performance"]["decode_tokens_per_s"] == o["decode_tokens_per_s"]
        price = {"H100-SXM": 2.5, "L4": 0.7, "L40S": 1.1, "A100-80GB": 1.8, "H200": 3.6}[o["gpu"]]
        assert o["usd_per_hour"] == pytest.approx(price * o["gpus"])
    # A T4 has no fp8 (compute capability 7.5): the search must not offer fp8 weights or KV there.
    found = search(m("meta-llama/Llama-3.1-8B-Instruct"), Workload(1, 4096), [lookup_gpu("T4")])
    assert found.options and all(o.quantization is None and o.kv_cache_dtype == "auto" for o in found.options)


def test_recommend_too_large_is_an_empty_list_with_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "recommend", "--model", "meta-llama/Llama-3.1-405B", "--concurrency", "4",
        "--context-tokens", "8192", "--gpus", "L4", "--max-gpus", "4", "--output", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 1
    assert doc["options"] == []
    assert "at most 4 GPUs" in doc["reason"]


def test_recommend_bad_input_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "1",
        "--context-tokens", "4096", "--gpus", "L4", "--gpu-hour-price", "H100=2", "--no-list-prices",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "--gpu-hour-price" in err and "L4" in err


def test_plan_json_performance_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--max-model-len", "8192",
        "--concurrency", "4", "--context-tokens", "4096", "--gpu-hour-price", "0.7", "--api-price-per-million", "0.5",
        "--output", "json",
    )  # fmt: skip
    doc = json.loads(out)
    perf, cost = doc["performance"], doc["cost"]
    assert set(perf) >= {"decode_tokens_per_s", "per_request_tokens_per_s", "prefill_tokens_per_s", "ttft_seconds",
                         "basis"}  # fmt: skip
    assert perf["basis"].startswith("estimated")
    # $0.70/h, 1 GPU: per 1M = 0.7 / (decode x 3600 x 0.4) x 1e6; break-even = 0.7 x 24 / 0.5 x 1e6 = 33.6M/day
    assert cost["usd_per_hour"] == 0.7
    assert cost["usd_per_million_output_tokens"] == pytest.approx(
        0.7 / (perf["decode_tokens_per_s"] * 3600 * 0.4) * 1e6, rel=1e-3
    )
    assert cost["breakeven_tokens_per_day"] == 33_600_000
    assert code == 0
    # no price given and no list price (the A30 has no cloud row): no cost
    code, out, _ = run(capsys, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A30",
                       "--max-model-len", "8192", "--output", "json")  # fmt: skip
    assert json.loads(out)["cost"] is None


def test_gpus_fits_and_catalog_fits_on(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.33: its default budget is 0.92 of the card (0.34's extensible cache takes all of it, where one H200 holds
    # the 70B at 8192 tokens, Tight)
    code, out, _ = run(capsys, "gpus", "--fits", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192",
                       "--vllm-version", "0.33.0", "--output", "json")  # fmt: skip
    rows = {r["gpu"]: r for r in json.loads(out)["gpus"]}
    assert code == 0
    assert rows["H200"]["gpus"] == 2  # 140 GB of bf16 weights > 0.92 x 139.8 GiB
    assert rows["L4"]["gpus"] == 8
    assert "T4" not in rows  # 8 x 14.7 GiB cannot hold 131 GiB of weights
    code, out, _ = run(capsys, "catalog", "list", "--fits-on", "L4", "--max-model-len", "4096", "--max-gpus", "1",
                       "--output", "json")  # fmt: skip
    names = {r["repo_id"] for r in json.loads(out)["models"]}
    assert "meta-llama/Llama-3.1-8B-Instruct" in names
    assert "meta-llama/Llama-3.1-70B-Instruct" not in names
    assert Verdict.FITS.value in {r["verdict"] for r in json.loads(out)["models"]}


# --------------------------------------------------------------------------------------------
# Operator: status.alternatives for a deployment that does not fit


def test_operator_lists_the_pools_that_would_hold_a_misfit() -> None:
    from fitgate.operator.decision.evaluate import evaluate  # noqa: PLC0415
    from fitgate.operator.decision.status import status_of  # noqa: PLC0415
    from fitgate.operator.schema.api import parse_spec  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import A100_MIG_SINGLE, H100, L4, gpus  # noqa: PLC0415

    spec = parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 32768},
            "workload": {"concurrentRequests": 8, "contextTokens": 32000},
            "placement": {"gpuProduct": "NVIDIA-L4"},
        }
    )
    ev = evaluate(spec, m("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100, L4, A100_MIG_SINGLE))
    assert ev.verdict is Verdict.DOES_NOT_FIT  # placed on the L4 pool, one L4 per node
    # The H100 pool (8 per node) holds it; one L4 per node cannot (TP 2 would need two); a MIG slice has no
    # speed figures and is skipped.
    assert [(pool.product, o.gpus) for pool, o in ev.alternatives] == [("NVIDIA-H100-80GB-HBM3", 1)]
    status = status_of(ev, 1, None)
    alt = status["alternatives"][0]
    assert alt["gpuProduct"] == "NVIDIA-H100-80GB-HBM3" and alt["tensorParallelSize"] == 1
    assert alt["verdict"] in ("Fits", "Tight") and alt["decodeTokensPerSecond"] > 0
    fits = evaluate(spec.model_copy(update={"placement": spec.placement.model_copy(update={"gpu_product": None})}),
                    m("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100, L4))  # fmt: skip
    assert fits.verdict is Verdict.FITS and fits.alternatives == ()
    assert status_of(fits, 1, None)["alternatives"] is None


def test_alternatives_leave_out_nodes_the_pods_would_not_tolerate() -> None:
    from fitgate.operator.decision.evaluate import evaluate  # noqa: PLC0415
    from fitgate.operator.schema.api import parse_spec  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import H100, L4, gpus  # noqa: PLC0415

    tainted = {**H100, "spec": {"taints": [{"key": "team", "value": "research", "effect": "NoSchedule"}]}}
    raw = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
        "serving": {"maxModelLen": 32768},
        "workload": {"concurrentRequests": 8, "contextTokens": 32000},
        "placement": {"gpuProduct": "NVIDIA-L4"},
    }
    llama = m("meta-llama/Llama-3.1-8B-Instruct")
    ev = evaluate(parse_spec(raw), llama, gpus(tainted, L4))
    assert ev.verdict is Verdict.DOES_NOT_FIT and ev.alternatives == ()  # the only H100 node is tainted
    toleration = {"key": "team", "operator": "Equal", "value": "research", "effect": "NoSchedule"}
    tolerant = parse_spec({**raw, "placement": {**raw["placement"], "tolerations": [toleration]}})
    ev = evaluate(tolerant, llama, gpus(tainted, L4))
    assert [pool.product for pool, _ in ev.alternatives] == ["NVIDIA-H100-80GB-HBM3"]


def test_a_per_product_price_overrides_its_row_of_the_list_table(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt91 G4: `--gpu-hour-price H100=2.5 --gpus H100,H200` exited 2 ("a price for H200") though the dated table
    # lists H200; a per-product price now overrides its own row only. G5: --no-list-prices says equal prices.
    code, out, err = run(
        capsys, "recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "8",
        "--context-tokens", "4096", "--gpus", "H100,H200", "--gpu-hour-price", "H100=2.5", "--output", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    by_gpu = {o["gpu"]: o["usd_per_hour"] / o["gpus"] for o in doc["options"]}
    assert by_gpu["H100-SXM"] == pytest.approx(2.5)
    assert by_gpu["H200"] == pytest.approx(price_table().default_prices().of(lookup_gpu("H200")) or 0)
    assert "--gpu-hour-price H100=2.5 over the table" in doc["prices"]
    code, out, _ = run(
        capsys, "recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "8",
        "--context-tokens", "4096", "--gpus", "H100,H200", "--no-list-prices", "--output", "json",
    )  # fmt: skip
    assert code == 0 and "equal prices assumed" in json.loads(out)["prices"]


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3"])
def test_recommend_with_targets_over_the_whole_catalog_takes_at_most_2_s(name: str) -> None:
    # issue 24's must-show (hunt91 O14: no test guarded it): a 70B and a 671B MoE with latency targets over every
    # GPU of the catalog, 5 requests/s of 4000 in / 1000 out within TTFT 3 s, TPOT 60 ms (benchmarks/recommend.py
    # --targets: p50 1.12 s for the 70B on the 2-core dev machine, busy). The fastest of 3 searches (timeit's rule: the
    # others measure the machine's neighbours, not the code), in CPU seconds of this process, which is wall time on an
    # idle machine and, unlike wall time, not doubled by other processes sharing a loaded one (the 70B took 1.3 s
    # idle, 2.0-2.8 s wall at load 15); a virtual machine's stolen cycles still count as CPU time (2.3 s medians on
    # one busy host, 1.25 s there a minute later), so the median failed where the code had not changed. CI's
    # machine then took 2.12 s (the fastest of [6.68, 2.12, 2.26]) where this one took 1.3-1.5 s: the step model's equal
    # pipeline stages are summed once, the open loop's root search reuses its closed loops, and a configuration that
    # misses at 1,024 replicas is told first (0.9-1.1 s here, same answers).
    import time  # noqa: PLC0415

    from fitgate.sizing.capacity import LatencyTargets  # noqa: PLC0415
    from fitgate.sizing.performance import SpeedLoad  # noqa: PLC0415

    m = model(name)
    times = []
    for _ in range(3):
        start = time.process_time()
        found = search(
            m, Workload(16, 32768), gpu_catalog(), max_gpus=16, prices=parse_gpu_prices("2.5"),
            speed_load=SpeedLoad(4000, 1000, 5.0), targets=LatencyTargets(3.0, 0.060),
        )  # fmt: skip
        times.append(time.process_time() - start)
        assert found.options
    assert min(times) <= 2.0, times
