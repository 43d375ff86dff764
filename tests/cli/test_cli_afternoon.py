"""A new user's first afternoon with the CLI (issue 25): each surprise they met, as a test.

Pipes closed early, a file that is not a vLLM log, suggestions in CLI terms, vLLM's ``32k`` integers,
a run vLLM refused, and the catalog models ``--fits-on`` leaves out.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fitgate.checkpoints.catalog import catalog_entries
from fitgate.cli import EXIT_CLOSED_PIPE, main

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "tests" / "fixtures" / "vllm-logs"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- `fitgate catalog list | head -2`: the reader goes away -------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["catalog", "list"],
        ["gpus"],
        ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100"],
    ],
)
def test_a_closed_pipe_ends_quietly_as_unix_tools_do(argv: list[str]) -> None:
    """The reader of stdout is gone before the first write (``| head -0``): no message, SIGPIPE's status."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to write_end now fails with EPIPE (Python ignores SIGPIPE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fitgate.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (EXIT_CLOSED_PIPE, "")  # before: "internal error: BrokenPipeError", 70


# --- `fitgate compare --log README.md`: not a vLLM start-up -------------------------------------------


def _prose_files() -> list[Path]:
    """README, CONTRIBUTING and the docs pages, but those that show ``fitgate plan``'s own output.

    That output prints vLLM's summary lines as vLLM does (``GPU KV cache size: N tokens``), so a page
    quoting it whole reads as a log excerpt with figures, which ``compare`` then plans.
    """
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p for p in pages if not p.exists() or "GPU KV cache size:" not in p.read_text()]


QUOTED = """\
# Notes from a design review

```text
$ vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.92
```

| DoesNotFit | no KV memory: vLLM's "No available memory for the cache blocks" |
a failed start shows its root cause (KV cache too small, CUDA out of memory, ...)
"""


def test_a_file_of_pasted_commands_and_quoted_errors_is_not_a_vllm_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text(QUOTED)
    code, out, err = run(capsys, "compare", "--log", str(notes), "--gpu", "H100")
    # before: exit 0 and "observed: failed (no_kv_memory) ... fitgate: DoesNotFit (agrees)"
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "expected a vLLM start-up log" in err and "no vLLM start-up line" in err


@pytest.mark.parametrize("path", _prose_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_the_projects_own_documents_are_not_vllm_logs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They quote vLLM's lines, commands and failures in prose: none is a start-up to compare."""
    if not path.exists():
        pytest.skip(f"{path.name} not in this tree")
    code, _, err = run(capsys, "compare", "--log", str(path), "--gpu", "H100")
    assert code == 2 and "no vLLM start-up line" in err


def test_a_real_failed_start_with_a_header_is_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same failure message, printed by vLLM's logger, is a log: the stricter reading keeps real ones."""
    log = tmp_path / "oom.log"
    log.write_text(
        "INFO 05-06 12:00:00 [api_server.py:1] vLLM API server version 0.19.0\n"
        "ERROR 05-06 12:01:00 [core.py:700] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine.\n"
    )
    code, out, err = run(capsys, "compare", "--log", str(log), "--as-case")
    assert code == 0 and err == "" and json.loads(out)["status"] == "failed_no_kv_memory"


# --- suggestions in CLI terms ----------------------------------------------------------------------------


def test_suggestions_name_cli_flags_not_crd_fields(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-8B on an H100 at 16 x 32000 tokens with vLLM 0.33: 16 x 2000 blocks of 16 tokens > the
    # 28,045-block pool (the V2 runner's penalty state, 1024 x 128,256 x 4 B, counted; its graphs at half the V1 cost,
    # hunt184 F1), so one suggestion is to serve fewer requests (14 x 2000 = 28,000 blocks)
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "32768"]
    argv += ["--vllm-version", "0.33.0"]
    code, out, _ = run(capsys, *argv, "--concurrency", "16", "--context-tokens", "32000")
    assert code == 1
    suggestions = out.split("changes that would fit", 1)[1].split("recommended vLLM args", 1)[0]
    assert "--concurrency 14 " in suggestions
    assert "workload." not in out and "concurrentRequests" not in out
    # the JSON contract keeps the sizing core's name (docs/plan-json.md)
    code, out, _ = run(capsys, *argv, "--concurrency", "16", "--context-tokens", "32000", "--output", "json")
    assert any("workload.concurrentRequests" in s["changes"] for s in json.loads(out)["suggestions"])


# --- `--max-model-len 32k`, as vLLM reads it -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "text", "key", "value"),
    [
        ("--max-model-len", "32k", "max_model_len", 32_000),  # k: x 1000 (vllm/utils/argparse_utils.py L45)
        ("--max-model-len", "32K", "max_model_len", 32_768),  # K: x 1024 (L51)
        ("--max-model-len", "25.6k", "max_model_len", 25_600),  # decimals with decimal suffixes (L60)
        ("--max-model-len", "auto", "max_model_len", 131_072),  # vLLM's auto: the model's 131072 positions
        ("--max-model-len", "-1", "max_model_len", 131_072),
        ("--max-num-batched-tokens", "8K", "max_num_batched_tokens", 8_192),
    ],
)
def test_integers_are_read_as_vllm_reads_them(
    capsys: pytest.CaptureFixture[str], flag: str, text: str, key: str, value: int
) -> None:
    code, out, err = run(
        capsys, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", flag, text, "-o", "json"
    )
    assert code in (0, 1) and err == ""
    doc = json.loads(out)
    assert (doc[key] if key == "max_model_len" else doc["serving"][key]) == value


@pytest.mark.parametrize(
    ("text", "says"),
    [("1.5K", "decimals are not allowed with the binary suffix K"), ("32kb", "'32kb' is not an integer")],
)
def test_integers_vllm_refuses_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", text]
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(argv)
    out, err = capsys.readouterr()
    assert (exc.value.code, out) == (2, "") and says in err and err.count("\n") == 1


# --- `fitgate compare` on a run vLLM refused ------------------------------------------------------------------


def test_compare_on_settings_vllm_refused_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3-14B at TP 5 (tests/fixtures/vllm-logs/SOURCE.md): vLLM asserts 151936 % 5; fitgate refuses TP 5 too."""
    log = tmp_path / "tp5.log"
    log.write_bytes(gzip.decompress((LOGS / "qwen-qwen3-14b--h100-80gb--tp5pp1dp1--8192.FAILED.log.gz").read_bytes()))
    code, out, err = run(capsys, "compare", "--log", str(log), "--gpu", "H100")
    assert code == 0 and err == ""  # before: exit 2, "tensor_parallel_size: 5 is not valid"
    assert "observed: failed (error): AssertionError: 151936 is not divisible by 5" in out
    assert "fitgate:  refuses these settings (agrees): tensor_parallel_size: 5 is not valid" in out
    code, out, _ = run(capsys, "compare", "--log", str(log), "--gpu", "H100", "--output", "json")
    doc = json.loads(out)
    assert doc["predicted"] is None and doc["verdict_agrees"] is True
    assert doc["refused"]["tensor_parallel_size"] == 5 and "8 KV heads" in doc["refused"]["message"]


# --- `catalog list --fits-on`: every model is listed or said why not ------------------------------------------


def test_fits_on_says_why_each_left_out_model_is_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "catalog", "list", "--fits-on", "L4", "--max-gpus", "1", "--output", "json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    listed = {m["repo_id"] for m in doc["models"]}
    left_out = {m["repo_id"]: m["reason"] for m in doc["not_listed"]}
    assert listed | set(left_out) == {e.repo_id for e in catalog_entries()} and not listed & set(left_out)
    # a 70B model: 131 GiB of bf16 weights against one 22 GiB L4
    assert "exceed 1 x L4" in left_out["meta-llama/Llama-3.1-70B-Instruct"]
    # Llama-3.1-8B fits by weights but not one 131072-token request (16 GiB of KV) in what is left
    assert "131072-token request" in left_out["meta-llama/Llama-3.1-8B-Instruct"]
    code, out, _ = run(capsys, "catalog", "list", "--fits-on", "L4", "--max-gpus", "1")
    assert f"not listed ({len(left_out)} of {len(listed) + len(left_out)}):" in out
