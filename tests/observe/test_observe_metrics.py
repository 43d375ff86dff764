"""vLLM's /metrics read back: the exposition vLLM 0.33 serves (tests/vllm_metrics_server.py), the window
arithmetic, and the bounded scrape (hang, garbage, 10 MB, redirect) against a real loopback server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import pytest

from fitgate.observe.metrics import (
    Counters,
    MetricsError,
    Scrape,
    increase,
    observe,
    parse_scrape,
    pod_window,
    window_cost_usd,
)
from fitgate.operator.observation.scrape import ScrapeError, ScrapeLimits, fetch_metrics
from tests.vllm_metrics_server import VllmMetrics


@pytest.fixture(scope="module")
def vllm() -> Iterator[VllmMetrics]:
    with VllmMetrics(num_gpu_blocks=27_713, block_size=16, gpu_memory_utilization=0.9, cache_dtype="fp8") as server:
        yield server


def test_fixture_text_is_vllms_multiprocess_exposition(vllm: VllmMetrics) -> None:
    text = vllm.text()
    # prometheus_client's multiprocess collector: counters with _total, no _created samples, sorted labels.
    assert "# TYPE vllm:num_preemptions_total counter" in text
    assert "_created" not in text
    assert 'vllm:cache_config_info{_block_size_resolved="True",block_size="16",cache_dtype="fp8"' in text
    assert 'num_gpu_blocks="27713"' in text and 'engine="0"' in text
    assert 'finished_reason="repetition"' in text


def test_parse_scrape_reads_every_family(vllm: VllmMetrics) -> None:
    before = parse_scrape(vllm.text(), 0.0)
    vllm.set(running=7, waiting=2, kv_usage=0.42, preemptions=3, queries=1000, hits=250, requests=4)
    vllm.set(prompt_tokens=5000, generation_tokens=1200)
    s = parse_scrape(vllm.text(), 10.0)
    assert (s.num_gpu_blocks, s.block_size, s.engines) == (27_713, 16, 1)
    assert dict(s.cache_config)["gpu_memory_utilization"] == "0.9"
    assert dict(s.cache_config)["cache_dtype"] == "fp8"
    assert s.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert (s.running, s.waiting, s.kv_usage) == (7.0, 2.0, 0.42)
    assert before.counters.preemptions is not None
    c, b = s.counters, before.counters
    assert c.preemptions - b.preemptions == 3  # type: ignore[operator]
    assert c.prefix_queries - b.prefix_queries == 1000  # type: ignore[operator]
    assert c.prefix_hits - b.prefix_hits == 250  # type: ignore[operator]
    assert c.requests - b.requests == 4  # type: ignore[operator]  # summed over the 5 finished_reason series
    assert c.prompt_tokens - b.prompt_tokens == 5000  # type: ignore[operator]
    assert c.generation_tokens - b.generation_tokens == 1200  # type: ignore[operator]


def test_two_engines_sum_counters_and_take_the_smaller_pool() -> None:
    with VllmMetrics(num_gpu_blocks=1000, engines=2) as server:
        server.set(engine=1, running=3, kv_usage=0.97, requests=5)
        server.set(engine=0, running=1, kv_usage=0.10, requests=2)
        s = parse_scrape(server.text(), 0.0)
    assert s.engines == 2 and s.num_gpu_blocks == 1000
    assert s.running == 4 and s.kv_usage == 0.97 and s.counters.requests == 7


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world",
        'vllm:num_requests_running{model_name="x" 1 2 3\n',
        "# TYPE http_requests_total counter\nhttp_requests_total 3\n",  # parses, but not vLLM
    ],
)
def test_not_vllm_metrics_is_one_line_error(text: str) -> None:
    with pytest.raises(MetricsError) as info:
        parse_scrape(text, 0.0)
    assert "\n" not in str(info.value) and "/metrics" in str(info.value)


def test_increase_handles_counter_resets() -> None:
    # 10 -> 15 (+5), restart -> 3 (+3), -> 9 (+6): 14
    assert increase([10.0, 15.0, 3.0, 9.0]) == 14.0
    assert increase([10.0]) is None
    assert increase([None, 4.0, None, 6.0]) == 2.0


def _scrape(at: float, **counters: float) -> Scrape:
    return Scrape(at_s=at, counters=Counters(**counters), num_gpu_blocks=980, block_size=16, kv_usage=0.5)


def test_observe_window_arithmetic() -> None:
    a = pod_window(
        [
            _scrape(
                0, preemptions=0, prefix_queries=0, prefix_hits=0, prompt_tokens=0, generation_tokens=0, requests=0
            ),
            _scrape(
                120,
                preemptions=4,
                prefix_queries=800,
                prefix_hits=200,
                prompt_tokens=24000,
                generation_tokens=6000,
                requests=40,
            ),
        ]
    )
    b = pod_window(
        [
            _scrape(
                0, preemptions=0, prefix_queries=0, prefix_hits=0, prompt_tokens=0, generation_tokens=0, requests=0
            ),
            _scrape(
                60,
                preemptions=0,
                prefix_queries=200,
                prefix_hits=200,
                prompt_tokens=0,
                generation_tokens=600,
                requests=0,
            ),
        ]
    )
    o = observe([a, b], predicted_blocks=1000, gpus_per_pod=2, usd_per_gpu_hour=3.0)
    assert o.observed_blocks == 980
    assert o.blocks_error_ratio == pytest.approx(-0.02)  # (980 - 1000) / 1000
    assert o.verified is True  # |-2 %| <= 2 %
    assert o.preemptions_per_minute == pytest.approx(2.0)  # 4 in 120 s + 0 in 60 s
    assert o.prefix_cache_hit_rate == pytest.approx(0.4)  # (200 + 200) / (800 + 200)
    # (24000 + 6000) / 120 s = 250/s, + 600 / 60 s = 10/s
    assert o.tokens_per_second == pytest.approx(260.0)
    assert o.output_tokens_per_second == pytest.approx(60.0)  # 6000 / 120 + 600 / 60
    # cost: 3 USD x 2 GPUs x (120 + 60) s / 3600 = 0.30 USD for 40 requests (the idle pod's hour counts)
    assert o.usd_per_request == pytest.approx(0.30 / 40)
    assert o.at_capacity is True  # preemptions in the window
    assert window_cost_usd(600, 2, 2.5) == pytest.approx(2.5 * 2 * 600 / 3600)


def test_observe_drift_and_capacity_by_kv_usage() -> None:
    w = pod_window([Scrape(0, Counters(preemptions=5.0), 900, 16, kv_usage=0.96)])
    o = observe([w], predicted_blocks=1000)
    assert o.blocks_error_ratio == pytest.approx(-0.1) and o.verified is False
    assert o.at_capacity is True  # KV usage 96 % >= 95 %
    assert o.preemptions_per_minute is None and o.usd_per_request is None
    calm = observe([pod_window([Scrape(0, Counters(), 1000, 16, kv_usage=0.5)])], predicted_blocks=None)
    assert calm.at_capacity is False and calm.verified is None


# --------------------------------------------------------------------------------------------
# The bounded scrape, against the real fixture server


async def _fetch(url: str, limits: ScrapeLimits) -> str:
    async with aiohttp.ClientSession() as session:
        return await fetch_metrics(session, url, limits)


def test_scrape_reads_the_gzipped_page(vllm: VllmMetrics) -> None:
    text = asyncio.run(_fetch(f"{vllm.url}/metrics", ScrapeLimits()))
    assert parse_scrape(text, 0.0).num_gpu_blocks == 27_713


@pytest.mark.parametrize(
    ("mode", "limits", "message"),
    [
        ("hang", ScrapeLimits(timeout_s=0.5), "no complete answer within 0.5 s"),
        ("huge", ScrapeLimits(timeout_s=5, max_bytes=1024 * 1024), "exceeds the limit of 1048576"),
        ("redirect", ScrapeLimits(), "HTTP 302 (redirect to 'http://169.254.169.254/metrics' not followed)"),
    ],
)
def test_scrape_faults_fail_fast(mode: str, limits: ScrapeLimits, message: str) -> None:
    with VllmMetrics() as server:
        server.mode(mode)
        started = time.monotonic()
        with pytest.raises(ScrapeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            asyncio.run(_fetch(f"{server.url}/metrics", limits))
        assert time.monotonic() - started < limits.timeout_s + 1.0


def test_scrape_garbage_is_a_metrics_error() -> None:
    with VllmMetrics() as server:
        server.mode("garbage")
        with pytest.raises(ScrapeError, match="not UTF-8"):
            asyncio.run(_fetch(f"{server.url}/metrics", ScrapeLimits()))


def test_scrape_refused_connection_is_an_error() -> None:
    with VllmMetrics() as server:
        url = f"{server.url}/metrics"
    with pytest.raises(ScrapeError, match=r"GET http://127\.0\.0\.1"):
        asyncio.run(_fetch(url, ScrapeLimits(timeout_s=2)))
