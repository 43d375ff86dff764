"""Issue 22: numbers read from /metrics and logs are validated where read; log patterns run in linear time;
one bad pod is one line in status.observed.errors, never a stopped round."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from typing import Any

import pytest

from fitgate.cli import main
from fitgate.observe.logparse import parse_lines
from fitgate.observe.metrics import MetricsError, increase, parse_scrape
from fitgate.operator.observation import observe as observe_module
from fitgate.operator.observation.observe import Observer, no_log, targets
from fitgate.operator.runtime.run import RedactSecrets
from fitgate.operator.schema.api import ModelDeploymentStatus
from tests.fitgate_operator.test_observe_operator import STATUS, pod, spec

# vLLM 0.33's families (vllm/v1/metrics/loggers.py), one engine
GOOD = """# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="31000"} 1.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
"""

LINE = 64 * 1024 - 200  # under logparse.MAX_LINE_BYTES: every pattern runs on it


@pytest.mark.parametrize("prefix", ["memory snapshot:", "args: Namespace(", "non-default args: {"])
def test_quadratic_log_lines_parse_in_linear_time(prefix: str) -> None:
    # 64 lines of 64 KiB (4 MiB): the old patterns took ~11 s (memory snapshot), ~5 s (Namespace) and
    # ~0.6 s (non-default args) per line on this machine: 10 minutes for these 4 MiB, hours for 64 MiB.
    line = "INFO 01-01 00:00:00 [x.py:1] " + (prefix * (LINE // len(prefix)))[:LINE] + " x"
    started = time.perf_counter()
    log = parse_lines([line] * 64)
    assert time.perf_counter() - started < 10.0
    assert log.lines_read == 64


def test_the_linear_readers_still_read_what_the_patterns_read() -> None:
    log = parse_lines(
        [
            "INFO 05-01 10:00:00 [utils.py:253] non-default args: {'model': 'Qwen/Qwen3-8B', 'max_model_len': 8192}  ",
            "DEBUG 05-01 10:00:01 [gpu_worker.py:1] worker init memory snapshot: torch_peak=0.0GiB, "
            "total_memory=79.19GiB, free_memory=78.6GiB",
        ]
    )
    assert log.settings.model == "Qwen/Qwen3-8B" and log.settings.max_model_len == 8192
    assert log.observed.gpu_total_gib == 79.19


def test_numbers_of_thousands_of_digits_are_no_reading() -> None:
    # int() of 4,000+ digits raised ValueError ("Exceeds the limit"): `fitgate compare` exited 70
    digits = "9" * 5000
    log = parse_lines(
        [
            f"INFO 05-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: {digits} tokens",
            f"INFO 05-01 10:00:00 [gpu_model_runner.py:1] Model loading took {digits}.5 GiB memory",
            f"INFO 05-01 10:00:00 [x.py:1] num_gpu_blocks is: {digits}",
            f"INFO 05-01 10:00:00 [x.py:1] Defaulting max_num_seqs to {digits} for OPENAI_API_SERVER usage context",
        ]
    )
    assert log.observed.kv_tokens is None and log.observed.gpu_blocks is None
    assert log.observed.weights_gib is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('vllm:generation_tokens_total{engine="0"} NaN', "a finite number"),
        ('vllm:generation_tokens_total{engine="0"} -901120', "a finite number"),
        ('vllm:kv_cache_usage_perc{engine="0"} +Inf', "a finite number"),
        ('vllm:kv_cache_usage_perc{engine="0"} 7.5', "from 0 to 1"),
        ('vllm:cache_config_info{engine="1",num_gpu_blocks="' + "9" * 4000 + '"} 1.0', "a whole number from 1"),
    ],
)
def test_hostile_samples_are_one_line_errors(line: str, why: str) -> None:
    with pytest.raises(MetricsError, match=why) as exc:
        parse_scrape(GOOD + line + "\n", 0.0)
    assert len(str(exc.value)) < 300 and "\n" not in str(exc.value)


def test_a_body_is_never_echoed_into_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        parse_scrape("vllm:cache_config_info{x=\x1b[31msecret-token-abc} 1\n", 0.0)
    assert "secret" not in str(exc.value) and "\x1b" not in str(exc.value)


def test_counter_increase_is_never_negative_with_valid_samples() -> None:
    assert increase([100.0, 50.0, 70.0]) == 50.0 + 20.0  # a reset at 50: 50 new, then 20


def test_hostnetwork_pods_and_hostile_ports_are_never_fetched() -> None:
    host = pod("h", 10250)
    host["spec"]["hostNetwork"] = True  # its podIP is the node's: 10250 is the kubelet
    odd = pod("o", 1)
    odd["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": "10250; rm"}]
    got = {t.pod: t for t in targets([host, odd], None)}
    assert got["h"].url is None and got["h"].skipped is not None
    assert got["o"].url == "http://127.0.0.1:8000/metrics"  # not a port: vLLM's default


def test_a_pod_serving_nan_is_one_error_and_status_observed_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = {
        "http://10.0.0.1:8000/metrics": GOOD,
        "http://10.0.0.2:8000/metrics": GOOD.replace("100.0", "NaN"),
        "http://10.0.0.3:8000/metrics": GOOD.replace('"31000"', '"' + "9" * 4000 + '"'),
    }

    async def fetch(session: Any, url: str, limits: Any) -> str:
        return bodies[url]

    async def boom(*_: Any) -> None:
        raise RuntimeError("a bug in one pod's path")

    monkeypatch.setattr(observe_module, "fetch_metrics", fetch)
    pods = [pod(f"p{i}", 8000, ip=f"10.0.0.{i}") for i in (1, 2, 3)]
    outcome = _observe_round(pods)  # before: NaN ended the round (and the timer) with no status written
    observed = outcome.status["observed"]
    ModelDeploymentStatus.model_validate({"observed": observed})
    assert observed["pods"] == 1 and observed["podsFailed"] == 2
    assert len(observed["errors"]) == 2 and all("\n" not in e for e in observed["errors"])
    assert any("p2" in e and "a finite number" in e for e in observed["errors"])
    monkeypatch.setattr(observe_module.Observer, "_read_one", boom)
    outcome = _observe_round(pods)  # any exception of one pod's path: a line, not a stopped round
    assert outcome.status["observed"]["podsFailed"] == 3


def test_compare_escapes_the_logs_control_characters_and_survives_long_digits(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "vllm.log"
    digits = "9" * 5000
    log.write_text(
        "INFO 05-01 10:00:00 [utils.py:253] non-default args: {'model': 'Qwen/Qwen3-8B'}\n"
        f"INFO 05-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: {digits} tokens\n"
        "ERROR 05-01 10:00:00 [core.py:1] ValueError: To serve at least one request with the model's max seq "
        "len (99999) \x1b]0;pwned\x07 \x1b[2J\n"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["compare", "--log", str(log), "--gpu", "H100"]) == 0  # before: exit 70 (int() of 5,000 digits)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07" in out  # shown, escaped


def test_the_hub_token_is_redacted_from_every_log_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets(("hf_secretTOKEN123",)))
    log = logging.getLogger("urllib3.connectionpool.test")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("send: %r", b"Authorization: Bearer hf_secretTOKEN123")  # the library's own %-args
        try:
            raise RuntimeError("the Hub echoed hf_secretTOKEN123")
        except RuntimeError:
            log.exception("request failed")
    finally:
        log.removeHandler(handler)
    assert "hf_secretTOKEN123" not in stream.getvalue() and "Bearer ***" in stream.getvalue()


def test_a_failure_message_is_one_line_whatever_the_caller_hands_in() -> None:
    # found by tests/workloads/test_fuzz_workloads.py (2026-12-05): a "line" holding a newline kept it in the
    # failure message, which a status condition or an Event then shows as two lines
    log = parse_lines(["ERROR torch.OutOfMemoryError: CUDA out of memory\n0 GiB \x1b[2J"])
    assert log.failure is not None and log.failure.kind == "out_of_memory"
    assert not any(ord(c) < 32 for c in log.failure.message)
    assert "memory\\x0a0 GiB \\x1b[2J" in log.failure.message


ESCAPED = 'vllm:num_requests_running{engine="1",model_name="' + '\\"' * (2 << 20) + '"} 3\n'  # one 4 MiB line
LABELS = "vllm:num_requests_running{" + ",".join(f'l{i}="v"' for i in range(65)) + "} 3\n"  # 65 labels, 0.6 KB


@pytest.mark.parametrize("line", [ESCAPED, LABELS], ids=["4 MiB of escapes", "65 labels"])
def test_a_long_or_many_labelled_line_is_skipped_and_counted(line: str) -> None:
    # hunt83 F2: the reference parser is quadratic in a line's escapes and labels; the 4 MiB line took 72 s (1 MiB:
    # 3.8 s on the development machine); now skipped before it runs, and the rest of the page is still read
    started = time.perf_counter()
    scrape = parse_scrape(GOOD + line, 0.0)
    assert time.perf_counter() - started < 0.5
    assert scrape.skipped_lines == 1 and scrape.num_gpu_blocks == 31000 and scrape.running is None


def test_the_lines_parsed_are_bounded_in_all_and_the_rest_counted() -> None:
    # 40,000 short series lines (2.1 MB): all were parsed (4 MiB of them: 0.65 s of a parse thread). MAX_KEPT_CHARS
    # keeps 1048576 characters: GOOD's 6 lines take 315 (newlines counted), each series line 54 (53 and a newline):
    # (1048576 - 315) // 54 = 19412 lines read, each running 1; the other 40000 - 19412 = 20588 are counted
    line = 'vllm:num_requests_running{engine="0",pod="%07d"} 1\n'
    started = time.perf_counter()
    scrape = parse_scrape(GOOD + "".join(line % i for i in range(40_000)), 0.0)
    assert time.perf_counter() - started < 1.0
    assert scrape.running == 19412 and scrape.skipped_lines == 20588


def test_a_data_parallel_servers_cache_line_is_read_past_72_engines() -> None:
    # hunt88 F1: one API server lists every engine, cache_config_info last (vLLM 0.34 loggers.py L1114-1136, ~1.2 KB a
    # line: ~25 labels); 256 engines with a 100-character model name are ~390 KB of these families, and 256 KiB
    # dropped the cache lines past ~130 engines: num_gpu_blocks came from the engines read, or was None
    name = "m" * 100
    body = [f'vllm:num_requests_running{{engine="{e}",model_name="{name}"}} 1' for e in range(256)]
    body += [
        f'vllm:num_requests_waiting_by_reason{{engine="{e}",model_name="{name}",reason="x"}} 0' for e in range(256)
    ]
    labels = ",".join(f'label_{i}="{"v" * 30}"' for i in range(22))
    for e in range(256):
        body.append(f'vllm:cache_config_info{{block_size="16",{labels},engine="{e}",num_gpu_blocks="{31000 - e}"}} 1')
    scrape = parse_scrape("\n".join(body) + "\n", 0.0)
    assert scrape.engines == 256 and scrape.num_gpu_blocks == 31000 - 255 and scrape.skipped_lines == 0


def test_a_pods_skipped_lines_are_one_error_line_and_its_figures_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fetch(session: Any, url: str, limits: Any) -> str:
        return GOOD + LABELS

    monkeypatch.setattr(observe_module, "fetch_metrics", fetch)

    observed = _observe_round([pod("p1", 8000, ip="10.0.0.1")]).status["observed"]
    assert observed["pods"] == 1 and observed["podsFailed"] == 0
    assert observed["errors"] == [
        "p1: 1 /metrics lines not read (longer than 4096 characters, more than 64 labels, "
        "or past 1048576 characters of vllm: lines)"
    ]


def _observe_round(pods: list[dict[str, Any]]) -> Any:
    """One observer round over ``pods`` (the fetch is the test's monkeypatch)."""

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        return pods

    async def run() -> Any:
        observer = Observer(list_pods, no_log)
        try:
            return await observer.round("ns", "m", spec(), STATUS, 1)
        finally:
            await observer.close()

    return asyncio.run(run())
