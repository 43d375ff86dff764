"""``fitgate compare --log``: the CLI, offline, on real vLLM start-up logs (tests/fixtures/vllm-logs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitgate.cli import main
from fitgate.sizing.units import GiB

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm-logs" / "cases.jsonl"
CASES = {c["id"]: c for c in (json.loads(line) for line in FIXTURES.read_text().splitlines())}
LLAMA = "llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192"
GPT_OSS_OOM = "llmd-v0190-openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192-FAILED"
V0_TOO_SMALL = "gh-oci-aqua-22gib-llama31-8b-131k-v0"
ISSUE_SETTINGS = {
    "model",
    "vllm_version",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
}
ISSUE_OBSERVED = {
    "weights_bytes",
    "activation_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "kv_available_bytes",
    "kv_tokens",
    "num_gpu_blocks",
    "max_concurrency",
    "gpu_total_bytes",
    "outcome",
    "failure",
}


def write_log(tmp_path: Path, case_id: str) -> Path:
    path = tmp_path / f"{case_id}.log"
    path.write_text("\n".join(CASES[case_id]["raw_lines"]) + "\n")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def compare_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv, "--output", "json")
    assert code == 0 and err == ""
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_json_contract_on_a_real_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[LLAMA]
    doc = compare_json(capsys, "--log", str(write_log(tmp_path, LLAMA)))
    assert doc["schema"] == "fitgate.io/compare/v1"
    assert set(doc["settings"]) >= ISSUE_SETTINGS and set(doc["observed"]) >= ISSUE_OBSERVED
    s, o, m = doc["settings"], doc["observed"], case["measured"]
    assert s == s | {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "vllm_version": "0.19.0",
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.95,
        "kv_cache_dtype": "auto",
        "max_num_seqs": 1024,
        "max_num_batched_tokens": 8192,
    }
    # observed = the printed GiB in bytes; counts as printed
    assert o["weights_bytes"] == round(m["weights_gib"] * GiB) == round(14.99 * GiB)
    assert o["activation_bytes"] == round(m["activation_peak_gib"] * GiB)
    assert o["non_torch_bytes"] == round(m["non_torch_gib"] * GiB)
    assert o["cuda_graph_bytes"] == round(m["cuda_graph_gib"] * GiB)
    assert o["kv_available_bytes"] == round(m["kv_available_gib"] * GiB)
    assert (o["kv_tokens"], o["num_gpu_blocks"], o["max_concurrency"]) == (
        m["kv_tokens"],
        m["gpu_blocks"],
        m["max_concurrency"],
    )
    assert o["gpu_total_bytes"] == round(79.19 * GiB)
    assert (o["outcome"], o["failure"]) == ("started", None)
    # predicted is the plan document, planned with the log's settings on the log's device total
    p = doc["predicted"]
    assert p["schema"] == "fitgate.io/plan/v1" and p["gpu"]["memory_bytes"] == round(79.19 * GiB)
    assert p["serving"]["gpu_memory_utilization"] == 0.95 and p["max_model_len"] == 8192
    assert (p["serving"]["max_num_seqs"], p["serving"]["max_num_batched_tokens"]) == (1024, 8192)
    # errors: percent per term, (predicted - observed) / observed
    rank0 = p["ranks"][0]
    assert doc["errors"]["weights_bytes"] == round(
        100 * (rank0["weights_bytes"] - o["weights_bytes"]) / o["weights_bytes"], 2
    )
    assert doc["errors"]["num_gpu_blocks"] == round(
        100 * (p["kv_cache"]["num_blocks"] - o["num_gpu_blocks"]) / o["num_gpu_blocks"], 2
    )
    assert set(doc["errors"]) == ISSUE_OBSERVED - {"gpu_total_bytes", "outcome", "failure"}
    assert all(abs(doc["errors"][k]) < 1 for k in ("weights_bytes", "kv_available_bytes", "num_gpu_blocks"))
    assert doc["verdict_agrees"] is True


def test_predicted_is_what_plan_prints_for_the_same_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --gpu H100 the catalog's total (79.19 GiB to the byte) is the one the log printed, so it is kept."""
    doc = compare_json(capsys, "--log", str(write_log(tmp_path, LLAMA)), "--gpu", "H100")
    code = main(
        [
            "plan",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "H100",
            "--max-model-len",
            "8192",
            "--gpu-memory-utilization",
            "0.95",
            "--max-num-seqs",
            "1024",
            "--max-num-batched-tokens",
            "8192",
            "--dtype",
            "bfloat16",
            "--vllm-version",
            "0.19.0",
            "--output",
            "json",
        ]
    )
    plan_doc = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("per_gpu", "kv_cache", "ranks", "serving", "verdict", "gpu"):
        assert doc["predicted"][key] == plan_doc[key], key


def test_text_output_is_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--log", str(write_log(tmp_path, LLAMA)))
    assert code == 0 and err == ""
    assert "vLLM 0.19.0" in out and "observed: started" in out and "(agrees)" in out
    rows = {line.split("  ")[1].strip(): line for line in out.splitlines() if line.startswith("  ") and "GiB" in line}
    assert "14.99 GiB" in rows["weights"] and "58.11 GiB" in rows["available KV cache"]
    assert "476,016" in out and "29,751" in out and "58.09x" in out


def test_a_failed_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = compare_json(capsys, "--log", str(write_log(tmp_path, GPT_OSS_OOM)))
    o = doc["observed"]
    assert o["outcome"] == "failed" and o["failure"]["kind"] == "out_of_memory"
    assert o["failure"]["message"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert o["num_gpu_blocks"] is None and o["kv_tokens"] == 1277184 and doc["errors"]["num_gpu_blocks"] is None
    # after KV sizing, any verdict but Fits agrees with an out-of-memory start
    assert doc["verdict_agrees"] == (doc["predicted"]["verdict"] != "Fits")
    code, out, _ = run(capsys, "--log", str(write_log(tmp_path, GPT_OSS_OOM)))
    assert code == 0 and "observed: failed (out_of_memory): torch.OutOfMemoryError" in out


def test_model_override_and_a_log_that_names_no_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = str(write_log(tmp_path, V0_TOO_SMALL))
    code, out, err = run(capsys, "--log", log)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "--model" in err
    doc = compare_json(
        capsys, "--log", log, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A10", "--vllm-version", "0.6.4"
    )
    assert doc["predicted"]["model"]["name"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert doc["predicted"]["gpu"]["memory_bytes"] == round(22.07 * GiB)  # the total the log printed
    assert doc["observed"]["failure"]["kind"] == "kv_too_small" and doc["settings"]["max_model_len"] == 131072
    assert doc["predicted"]["verdict"] == "DoesNotFit" and doc["verdict_agrees"] is True


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_as_case_prints_the_calibration_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case_id: str
) -> None:
    case = CASES[case_id]
    code, out, err = run(capsys, "--log", str(write_log(tmp_path, case_id)), "--as-case", "--gpu", "H100")
    assert code == 0 and err == "" and out.count("\n") == 1
    row = json.loads(out)
    assert list(row) == list(case)  # the same fields, in the same order
    assert row["status"] == case["status"]
    # the recognised lines, in order (a line with no figure, such as "Memory profiling takes 0.71 seconds", is left out)
    assert [line for line in case["raw_lines"] if line in row["raw_lines"]] == row["raw_lines"]
    assert len(row["raw_lines"]) >= len(case["raw_lines"]) - 1
    for key, value in row["measured"].items():
        assert value is None or value == case["measured"][key], key
    assert {k for k, v in row["measured"].items() if v is not None} == {
        k for k, v in case["measured"].items() if v is not None and k in row["measured"]
    }
    for key in ("tensor_parallel_size", "max_model_len", "gpu_memory_utilization", "gpu_total_gib"):
        assert row[key] is None or row[key] == case[key], key
    assert row["gpu"] == "H100-SXM (given with --gpu)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 100, "--log: "),
        (b"z" * (1 << 20), "lines over 65536 bytes skipped"),
        (b"", "no vLLM start-up line"),
    ],
    ids=["binary", "huge-line", "empty"],
)
def test_garbage_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(content)
    for extra in ((), ("--as-case",)):
        code, out, err = run(capsys, "--log", str(path), *extra)
        assert (code, out) == (2, "") and err.count("\n") == 1 and message in err
        assert "Traceback" not in err


def test_missing_log_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--log", str(tmp_path / "nope.log"))
    assert code == 2 and err.startswith("fitgate: error: --log: ") and err.count("\n") == 1


def test_an_unresolvable_model_in_the_log_asks_for_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [ln.replace("meta-llama/Llama-3.1-8B-Instruct", "/opt/models/llama") for ln in CASES[LLAMA]["raw_lines"]]
    path = tmp_path / "local.log"
    path.write_text("\n".join(lines))
    code, out, err = run(capsys, "--log", str(path))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "model named in the log: '/opt/models/llama'" in err and "pass --model" in err


def test_two_start_ups_in_one_log_are_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "twice.log"
    path.write_text("\n".join(CASES[LLAMA]["raw_lines"] * 2))
    doc = compare_json(capsys, "--log", str(path))
    assert any("2 start-ups" in note for note in doc["notes"])
    assert doc["observed"]["weights_bytes"] == round(14.99 * GiB)


def test_as_case_names_the_gpu_from_the_printed_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--log", str(write_log(tmp_path, V0_TOO_SMALL)), "--as-case")
    row = json.loads(out)
    assert code == 0 and row["gpu_total_gib"] == 22.07 and row["status"] == "failed_kv_too_small"
    assert row["gpu"] == "22.07GiB (not named; from the device total the log printed)"  # no catalog GPU is 22.07
    code, out, _ = run(capsys, "--log", str(write_log(tmp_path, LLAMA)), "--as-case")
    # 79.19 GiB: the H100 SXM, and the H800 (the same 80 GB HBM3, docs/clusters.md); the PCIe card within rounding
    assert json.loads(out)["gpu"].startswith("H100-PCIe/H100-SXM/H800 (not named")
