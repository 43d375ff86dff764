"""The vLLM start-up log reader against real logs: every printed figure and setting read back exactly.

The answers are the calibration cases' own ``measured`` figures and settings (``shared/calibration``),
recorded independently of this parser. Set FITGATE_CALIBRATION to the calibration directory when the
repository is not checked out beside ``shared/`` (a git worktree).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fitgate.observe import LogError, logparse, parse_lines, read_log
from fitgate.observe.compare import case_status, gpu_of
from fitgate.sizing.units import GiB
from tests.calibration_logs import FIGURES, NOT_A_LOG, printed
from tests.conftest import CALIBRATION


def _load_cases() -> list[dict[str, Any]]:
    for where in (CALIBRATION, Path(os.environ.get("FITGATE_CALIBRATION", "/nonexistent"))):
        cases_file = where / "cases.jsonl"
        if cases_file.is_file():
            return [json.loads(line) for line in cases_file.read_text().splitlines() if line.strip()]
    return []


CASES = _load_cases()
LOG_CASES = [c for c in CASES if c["source_kind"].split()[0] not in NOT_A_LOG]
SETTINGS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "enforce_eager",
)
FAILURE_KIND = {
    "failed_kv_too_small": "kv_too_small",
    "failed_no_kv_memory": "no_kv_memory",
    "failed_after_kv_sizing": "out_of_memory",
}


def _id(case: dict[str, Any]) -> str:
    return str(case["id"])


def expected_model(case: dict[str, Any]) -> str:
    """The model as the log names it: the repo id, or the local path the case notes in parentheses."""
    text = str(case["model"])
    local = re.search(r"\(local path ([^)]+)\)", text)
    return local.group(1) if local else text.split(" (", maxsplit=1)[0]


def test_the_calibration_set_is_here_or_skipped_loudly() -> None:
    if not CASES:
        pytest.skip(f"calibration set not found at {CALIBRATION} (set FITGATE_CALIBRATION)")
    assert len(CASES) >= 55 and len(LOG_CASES) >= 15
    assert sum(c["status"] != "ok" for c in LOG_CASES) >= 3  # failed starts among the real logs


@pytest.mark.parametrize("case", LOG_CASES, ids=_id)
def test_every_printed_figure_is_read_back_exactly(case: dict[str, Any]) -> None:
    log = parse_lines(case["raw_lines"])
    text = "\n".join(case["raw_lines"])
    measured = case["measured"]
    for name in FIGURES:
        want, got = measured.get(name), getattr(log.observed, name)
        if want is not None and printed(want, text):
            assert got == want, f"{name}: read {got}, the log prints {want}"
        if got is not None:
            assert got == want, f"{name}: read {got}, but the case records {want}"
    if str(case["gpu_total_gib_basis"]).startswith("printed in"):
        assert log.observed.gpu_total_gib == case["gpu_total_gib"]
    assert log.lines_recognised >= len(case["raw_lines"]) - 1  # at most a comment or command line unread


@pytest.mark.parametrize("case", LOG_CASES, ids=_id)
def test_settings_are_read_back(case: dict[str, Any]) -> None:
    s = parse_lines(case["raw_lines"]).settings
    for name in SETTINGS:
        got = getattr(s, name)
        if got is not None:
            assert got == case[name], f"{name}: read {got!r}, the case says {case[name]!r}"
    if s.model is not None:
        assert s.model == expected_model(case)
    if s.vllm_version is not None:
        assert s.vllm_version == case["vllm_version"]
    if case["source_kind"] == "committed_full_log":  # a whole log prints every setting
        for name in (*SETTINGS, "model", "vllm_version"):
            if name != "block_size":
                assert getattr(s, name) is not None, name
        assert s.engine == case["vllm_engine"] and s.usage_context == "OPENAI_API_SERVER"


@pytest.mark.parametrize("case", LOG_CASES, ids=_id)
def test_outcome_and_failure(case: dict[str, Any]) -> None:
    log = parse_lines(case["raw_lines"])
    if case["status"] == "ok":
        assert log.failure is None and log.outcome in ("started", "unknown")
    else:
        assert log.outcome == "failed" and log.failure is not None
        assert log.failure.kind == FAILURE_KIND[case["status"]]
        assert log.failure.message in "\n".join(case["raw_lines"])
    if log.outcome != "unknown":
        assert case_status(log) == case["status"]


@pytest.mark.parametrize("case", [c for c in CASES if c not in LOG_CASES], ids=_id)
def test_records_that_are_not_logs_yield_no_wrong_number(case: dict[str, Any]) -> None:
    log = parse_lines(case["raw_lines"])
    if case["source_kind"] == "pr_comment_summary":
        pytest.skip(NOT_A_LOG["pr_comment_summary"])
    for name in FIGURES:
        got = getattr(log.observed, name)
        assert got is None or got == case["measured"][name]
    if case["status"] == "failed_no_kv_memory":  # the summary quotes vLLM's error line
        assert log.failure is not None and log.failure.kind == "no_kv_memory"


# ------------------------------------------------------------------------------------------------
# The same log as kubectl shows it in other ways.

_PROCESS_PREFIX = re.compile(r"^\([^()]*pid=\d+\)\s*")
VARIANTS: dict[str, Callable[[str], str]] = {
    "no-process-prefix": lambda line: _PROCESS_PREFIX.sub("", line),
    "kubectl-prefix": lambda line: f"[pod/vllm-7d9f/vllm] {line}",
    "kubectl-timestamps": lambda line: f"2026-04-22T00:46:03.832158312Z {line}",
    "colour-codes": lambda line: line.replace("INFO", "\x1b[32mINFO\x1b[0m", 1),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("case", LOG_CASES, ids=_id)
def test_prefixed_and_unprefixed_logs_read_the_same(case: dict[str, Any], variant: str) -> None:
    plain = parse_lines(case["raw_lines"])
    other = parse_lines([VARIANTS[variant](line) for line in case["raw_lines"]])
    assert other.settings == plain.settings
    assert other.observed == plain.observed
    assert (other.failure is None) == (plain.failure is None)
    if plain.failure is not None and other.failure is not None:
        assert other.failure.kind == plain.failure.kind


def test_a_file_with_crlf_endings_reads_like_the_lines(tmp_path: Path) -> None:
    case = _fixture_case("llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192")
    path = tmp_path / "vllm.log"
    path.write_bytes("\r\n".join(case["raw_lines"]).encode() + b"\r\n")
    log = read_log(path)
    assert log.observed == parse_lines(case["raw_lines"]).observed
    assert log.settings.model == "meta-llama/Llama-3.1-8B-Instruct" and log.lines_read == len(case["raw_lines"])


def _fixture_case(case_id: str) -> dict[str, Any]:
    fixture = Path(__file__).parents[1] / "fixtures" / "vllm-logs" / "cases.jsonl"
    for line in fixture.read_text().splitlines():
        case: dict[str, Any] = json.loads(line)
        if case["id"] == case_id:
            return case
    raise KeyError(case_id)


def test_rank_zero_wins_over_other_ranks() -> None:
    """A TP1 worker printing first does not replace rank 0's figures (the log reports rank 0)."""
    case = _fixture_case("llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192")
    lines = [ln.replace("(EngineCore pid=243)", "(Worker_TP0 pid=443)") for ln in case["raw_lines"]]
    other = [
        "(Worker_TP1 pid=444) INFO 04-22 00:17:32 [v1/worker/gpu_model_runner.py:4820] Model loading took 9.99 GiB",
        "(Worker_TP1 pid=444) INFO 04-22 00:18:23 [v1/worker/gpu_worker.py:436] Available KV cache memory: 1.11 GiB",
    ]
    log = parse_lines(other + lines)
    assert log.observed.weights_gib == 14.99 and log.observed.kv_available_gib == 58.11
    # alone, a non-zero rank's figure is still a figure
    assert parse_lines(other).observed.weights_gib == 9.99


def test_the_detailed_line_wins_over_the_summary() -> None:
    """V0 prints weights twice; the profiler's two-decimal figure is the one the case records."""
    case = _fixture_case("gh-oci-aqua-22gib-llama31-8b-131k-v0")
    assert "Loading model weights took 14.9888 GB" in case["raw_lines"][0]
    assert parse_lines(case["raw_lines"]).observed.weights_gib == 14.99
    assert parse_lines(case["raw_lines"][:1]).observed.weights_gib == 14.9888


# hunt113: an RTX 5060 Ti start of vLLM 0.29.0 (Freshair129/Private-Runtime-Platform, EV02
# vllm-startup-success.log), cut to the memory lines; the first capture is the CUDA-graph profiling pass's.
_V029_LINES = [
    "(EngineCore pid=131) INFO 09-20 22:24:01 [gpu_model_runner.py:2920] Model loading took 7.64 GiB and 9.1 seconds",
    "(EngineCore pid=131) INFO 09-20 22:25:04 [model_runner.py:960] Graph capturing finished in 58 secs, took 0.33 GiB",
    "(EngineCore pid=131) INFO 09-20 22:26:13 [model_runner.py:960] Graph capturing finished in 68 secs, took 0.23 GiB",
    "(EngineCore pid=131) INFO 09-20 22:26:13 [gpu_worker.py:797] CUDA graph pool memory: 0.23 GiB (actual), "
    "0.38 GiB (estimated), difference: 0.14 GiB (62.0%).",
    "(EngineCore pid=131) INFO 09-20 22:26:13 [gpu_worker.py:860] Free memory on device (14.8/15.9 GiB) on startup. "
    "Desired GPU memory utilization is (0.7, 11.13 GiB). Actual usage is 8.59 GiB for consumed memory (weights + "
    "non-torch), 1.09 GiB for peak activation, and 0.23 GiB for CUDAGraph memory. Current kv cache memory in use is "
    "1.45 GiB.",
    "(EngineCore pid=131) INFO 09-20 22:26:13 [dtype.py:1] dtype=torch.bfloat16",
]


def test_the_0_28_usage_line_and_the_graph_pool_are_read() -> None:
    """0.28-0.31's "consumed memory (weights + non-torch)" gives activation, graphs and non-torch (8.59 - 7.64 =
    0.95 GiB); the pool's "(actual)" figure wins over the profiling pass's earlier "took 0.33 GiB"."""
    o = parse_lines(_V029_LINES[:5]).observed
    assert (o.weights_gib, o.activation_peak_gib, o.non_torch_gib) == (7.64, 1.09, 0.95)
    assert o.cuda_graph_gib == 0.23 and o.cuda_graph_estimated_gib == 0.38 and o.gpu_total_gib == 15.9
    # without the pool line, the usage line's 0.23 still loses to a capture line, the detailed figure
    assert parse_lines(_V029_LINES[:3] + _V029_LINES[4:5]).observed.cuda_graph_gib == 0.33


def test_a_bfloat16_log_is_never_guessed_onto_a_gpu_without_bfloat16() -> None:
    """15.9 GiB is a Tesla P100's CUDA total (compute capability 6.0, no bfloat16); a log that ran in bfloat16 was
    not on one, so compare plans on a 15.9 GiB device rather than refusing bfloat16 (hunt113 F1)."""
    lines = [*_V029_LINES[:5], "(APIServer pid=1) INFO 09-20 22:20:00 [utils.py:1] non-default args: "
             "{'model': '/models', 'dtype': 'bfloat16'}"]  # fmt: skip
    log = parse_lines(lines)
    assert log.settings.dtype == "bfloat16"
    gpu, _ = gpu_of(log, None)
    assert gpu.name == "15.90GiB" and gpu.compute_capability is None and abs(gpu.memory_bytes - 15.9 * GiB) < 2
    # the same total and no dtype printed: the catalog's 15.90 GiB GPU, as before
    assert "P100" in gpu_of(parse_lines(_V029_LINES[:5]), None)[0].name


def test_non_default_args_are_read_without_eval() -> None:
    """The dict is parsed with ast.literal_eval; a call inside it is never run, only skipped over."""
    line = (
        "(APIServer pid=1) INFO 04-22 00:46:03 [entrypoints/utils.py:233] non-default args: {'model': 'org/m', "
        "'max_model_len': 4096, 'compilation_config': __import__('os').system('false'), 'tensor_parallel_size': 2}"
    )
    s = parse_lines([line]).settings
    assert (s.model, s.max_model_len, s.tensor_parallel_size) == ("org/m", 4096, 2)


def test_old_namespace_args_and_a_pasted_command_line() -> None:
    s = parse_lines(
        [
            "INFO 01-02 03:04:05 api_server.py:585] args: Namespace(host=None, port=8000, model='Qwen/Qwen2.5-7B', "
            "tensor_parallel_size=2, max_model_len=8192, gpu_memory_utilization=0.85, kv_cache_dtype='fp8')"
        ]
    ).settings
    assert (s.model, s.tensor_parallel_size, s.max_model_len) == ("Qwen/Qwen2.5-7B", 2, 8192)
    assert (s.gpu_memory_utilization, s.kv_cache_dtype) == (0.85, "fp8")
    s = parse_lines(["$ vllm serve org/m --max-model-len=2048 -tp 4 --enforce-eager --max-num-seqs 8"]).settings
    assert (s.model, s.max_model_len, s.tensor_parallel_size, s.enforce_eager, s.max_num_seqs) == (
        "org/m",
        2048,
        4,
        True,
        8,
    )


def test_v0_33_one_line_report_and_v1_kv_error() -> None:
    """0.33 prints tokens and concurrency on one line; V1's KV-too-small ValueError (vllm-memory.md section 8)."""
    log = parse_lines(
        [
            "(EngineCore_DP0 pid=212) INFO 01-01 00:00:00 [kv_cache_utils.py:1201] GPU KV cache size: 471,744 tokens, "
            "Maximum concurrency for 131,072 tokens per request: 3.60x",
            "(EngineCore_DP0 pid=212) ERROR 01-01 00:00:01 [core.py:708] ValueError: To serve at least one request "
            "with the models's max seq len (262144), (32.00 GiB KV cache is needed, which is larger than the "
            "available KV cache memory (28.80 GiB). Based on the available memory, the estimated maximum model "
            "length is 235904. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.",
        ]
    )
    assert (log.observed.kv_tokens, log.observed.max_concurrency, log.settings.max_model_len) == (471744, 3.6, 131072)
    assert log.failure is not None and log.failure.kind == "kv_too_small"
    assert log.failure.message.startswith("ValueError: To serve at least one request")
    assert len(log.failure.message) <= logparse.MAX_FAILURE_CHARS


# ------------------------------------------------------------------------------------------------
# Bounded, and never a traceback.


def test_over_long_lines_are_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    with path.open("wb") as out:
        out.write(b"x" * (3 * logparse.MAX_LINE_BYTES) + b"\n")
        out.write(b"INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 12.5 GiB\n")
    log = read_log(path)
    assert (log.lines_read, log.lines_too_long, log.observed.kv_available_gib) == (2, 1, 12.5)


def test_reading_stops_at_the_byte_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logparse, "MAX_LOG_BYTES", 4096)
    path = tmp_path / "long.log"
    kv = "INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 12.5 GiB\n"
    tokens = "INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens\n"
    path.write_text(kv + "serving traffic\n" * 1000 + tokens)
    log = read_log(path)
    assert log.truncated and log.bytes_read <= 4096 + 16
    assert log.observed.kv_available_gib == 12.5 and log.observed.kv_tokens is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 64, "no vLLM start-up line"),
        (b"", "no vLLM start-up line in 0 lines"),
        (b"y" * (2 * 64 * 1024), "1 lines over 65536 bytes skipped"),
        (b"\x00\x01" * 1000 + b"\nAvailable KV cache memory: 3 GiB\x00\n", "lines of binary data"),
        ("Grüße, not a vLLM log at all\n".encode("latin-1"), "no vLLM start-up line in 1 lines"),
        (b"\xff\xfe" + bytes(range(256)) * 9 + b"\x00", "no vLLM start-up line"),
        (b"\xff\xfe" + "z".encode("utf-16-le") * (40 * 1024), "1 lines over 65536 bytes skipped"),
    ],
    ids=["binary", "empty", "one-huge-line", "nul-bytes", "latin-1-text", "utf-16-garbage", "utf-16-huge-line"],
)
def test_garbage_is_a_log_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(content)
    with pytest.raises(LogError, match=re.escape(message)) as exc:
        read_log(path)
    assert "\n" not in str(exc.value) and str(exc.value).startswith("--log: ")


def test_deeply_nested_args_fall_back_to_plain_keys() -> None:
    line = "non-default args: {'max_model_len': 1024, 'x': " + "[" * 30000 + "]" * 30000 + "}"
    assert parse_lines([line]).settings.max_model_len == 1024


def test_missing_file_and_directory_are_log_errors(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="a readable log file"):
        read_log(tmp_path / "absent.log")
    with pytest.raises(LogError, match="this is a directory"):
        read_log(tmp_path)


# ------------------------------------------------------------------------------------------------
# Whole real logs (tests/fixtures/vllm-logs/*.log.gz): hundreds of other lines, tracebacks, warnings.

FULL_LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"


def _full_log(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.decompress((FULL_LOGS / f"{name}.gz").read_bytes()))
    return path


@pytest.mark.parametrize(
    ("name", "case_id"),
    [
        (
            "deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192.log",
            "llmd-v0190-deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192",
        ),
        (
            "meta-llama-llama-3-1-8b---h100-80gb--tp1pp2dp1--8192.log",
            "llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp2dp1--8192",
        ),
        (
            "openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192.FAILED.log",
            "llmd-v0190-openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192-FAILED",
        ),
    ],
)
def test_whole_logs_read_like_their_calibration_case(tmp_path: Path, name: str, case_id: str) -> None:
    case = _fixture_case(case_id)
    log = read_log(_full_log(tmp_path, name))
    assert log.lines_read > 300  # a whole log, not the case's 16 lines
    for figure in FIGURES:
        assert getattr(log.observed, figure) == case["measured"].get(figure), figure
    assert log.observed.gpu_total_gib == case["gpu_total_gib"]
    for setting in SETTINGS:
        assert getattr(log.settings, setting) == case[setting], setting
    assert (log.settings.model, log.settings.vllm_version) == (case["model"], case["vllm_version"])
    assert case_status(log) == case["status"]


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        (
            "codellama-codellama-34b---h100-80gb--tp2pp1dp1--8192.FAILED.log",
            "insufficient_free_memory",
            "ValueError: Free memory on device cuda:1 (60.87/79.19 GiB) on startup is less than desired GPU memory",
        ),
        (
            "google-gemma-2-9b-it--h100-80gb--tp1pp1dp1--8192.FAILED.log",
            "error",
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/google/",
        ),
        (
            "qwen-qwen3-14b--h100-80gb--tp5pp1dp1--8192.FAILED.log",
            "error",
            "AssertionError: 151936 is not divisible by 5",
        ),
    ],
)
def test_whole_failed_logs_name_the_root_cause(tmp_path: Path, name: str, kind: str, message: str) -> None:
    log = read_log(_full_log(tmp_path, name))
    assert log.outcome == "failed" and log.failure is not None
    assert (log.failure.kind, log.failure.message[: len(message)]) == (kind, message)
    assert case_status(log) == "failed_before_kv_sizing" and not log.kv_sized
    assert log.settings.max_model_len == 8192 and log.settings.gpu_memory_utilization == 0.95


def test_a_python_traceback_alone_is_not_a_vllm_log(tmp_path: Path) -> None:
    path = tmp_path / "other.log"
    path.write_text('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyError: 1\n')
    with pytest.raises(LogError, match="no vLLM start-up line"):
        read_log(path)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-8-sig"])
def test_a_log_saved_by_windows_powershell_reads_the_same(tmp_path: Path, encoding: str) -> None:
    """PowerShell 5's `kubectl logs pod > f` writes UTF-16 with a byte-order mark."""
    case = _fixture_case("llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192")
    path = tmp_path / "vllm.log"
    text = "\r\n".join(case["raw_lines"]) + "\r\n"
    path.write_bytes(("\ufeff" + text).encode(encoding) if encoding == "utf-16-be" else text.encode(encoding))
    log = read_log(path)
    assert log.observed == parse_lines(case["raw_lines"]).observed
    assert log.settings == parse_lines(case["raw_lines"]).settings and log.lines_binary == 0


# ------------------------------------------------------------------------------------------------
# Any input: no exception but LogError, whatever the bytes (hypothesis).

_REAL = _fixture_case("llmd-v0190-openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192-FAILED")["raw_lines"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=300),
            st.sampled_from(_REAL).flatmap(
                lambda line: st.tuples(st.integers(0, len(line)), st.integers(0, len(line)), st.text(max_size=20)).map(
                    lambda cut: line[: cut[0]] + cut[2] + line[cut[1] :]
                )
            ),
        ),
        max_size=30,
    )
)
def test_mangled_real_lines_never_raise(lines: list[str]) -> None:
    log = parse_lines(lines)
    assert log.outcome in ("started", "failed", "unknown")
    assert log.lines_read == len(lines)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=4096))
def test_any_bytes_are_a_log_or_a_log_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "any.log"
    path.write_bytes(data)
    message = ""
    try:
        log = read_log(path)
    except LogError as exc:
        message = str(exc)
    if message:
        assert "\n" not in message and message.startswith("--log: ")
    else:
        assert log.is_vllm
