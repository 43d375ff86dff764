"""Issue 21: shell arithmetic and LeaderWorkerSet's env, as the platform's shell computes wide-EP ranks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fitgate.workloads import read_workload
from fitgate.workloads.shellmath import ArithmeticUnknownError, arithmetic_spans, evaluate

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"


@pytest.mark.parametrize(
    ("expression", "env", "value"),
    [
        ("LWS_GROUP_SIZE * DP_SIZE_LOCAL", {"LWS_GROUP_SIZE": "2", "DP_SIZE_LOCAL": "8"}, 16),
        (" 0 * 8 ", {}, 0),
        ("(A + 1) * -2", {"A": "3"}, -8),
        ("7 / 2", {}, 3),
        ("-7 / 2", {}, -3),  # bash truncates toward zero
        ("-7 % 3", {}, -1),  # the dividend's sign, as C and bash
        ("N % M", {"N": "17", "M": "5"}, 2),
    ],
)
def test_arithmetic_as_bash_computes_it(expression: str, env: dict[str, str], value: int) -> None:
    assert evaluate(expression, env) == value


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("UNSET * 2", "UNSET is not set"),
        ("A * 2", "A is not set to an integer"),
        ("1 / 0", "division by zero"),
        ("1 << 3", "only + - * / %"),
        ("$(id -u) + 1", "only + - * / %"),
        ("(" * 40 + "1" + ")" * 40, "nested parentheses"),
        ("1" + " + 1" * 100, "more than 256 characters"),
        ("999999999999999999 * 999999999999999999", "beyond"),
        ("(1 + 2", "unclosed"),
    ],
)
def test_what_is_not_evaluated_says_why(expression: str, why: str) -> None:
    with pytest.raises(ArithmeticUnknownError, match=re.escape(why)):
        evaluate(expression, {"A": "x"})


def test_spans_find_nested_parentheses() -> None:
    text = "a=$(( (B + 1) * 2 )); b=$(date)"
    assert [text[s:e] for s, e in arithmetic_spans(text)] == ["$(( (B + 1) * 2 ))"]


def test_llm_d_wide_ep_decode_is_read_with_its_ranks() -> None:
    # llm-d/llm-d@3318b75d guides/wide-ep-lws/manifests/modelserver/base/decode.yaml: size 2, DP_SIZE_LOCAL 8,
    # `--data-parallel-size $((LWS_GROUP_SIZE * DP_SIZE_LOCAL))` = 2 x 8 = 16 ranks over 2 pods of 8 GPUs;
    # START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL )) = 0 on the leader. Before: Unknown.
    reading = read_workload(yaml.safe_load((FIXTURES / "llm-d-wide-ep-decode.yaml").read_text()))
    assert reading is not None and reading.unknown is None and reading.invalid is None
    assert reading.args["--data-parallel-size"] == "16"
    assert reading.args["--data-parallel-start-rank"] == "0"
    assert reading.args["--data-parallel-address"] == "wide-ep-llm-d-decode-0.wide-ep-llm-d-decode.default"
    assert reading.model == "deepseek-ai/DeepSeek-R1-0528"
    assert (reading.pods_per_replica, reading.gpus_per_replica, reading.data_parallel) == (2, 16, 16)


def lws(script: str, size: int = 4, env: list[dict[str, str]] | None = None) -> dict[str, object]:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "command": ["/bin/bash", "-c", script],
        "env": env or [],
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
    }
    return {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {"containers": [container]}}}},
    }


def test_an_unknown_variable_in_arithmetic_stays_unknown_naming_it() -> None:
    reading = read_workload(lws("vllm serve Qwen/Qwen3-8B --data-parallel-size $((NODES * 8))"))
    assert reading is not None and reading.invalid is None
    assert reading.unknown == (
        "--data-parallel-size $((NODES * 8)): shell arithmetic over values fitgate does not know"
    )


def test_assignments_and_defaults_flow_to_later_commands() -> None:
    script = "export DP=$((LWS_GROUP_SIZE * 2)); TP=${TP_SIZE:-4}\nexec vllm serve Qwen/Qwen3-8B -tp $TP -dp $DP"
    reading = read_workload(lws(script, size=3))
    assert reading is not None and reading.unknown is None
    assert reading.args["--tensor-parallel-size"] == "4" and reading.args["--data-parallel-size"] == "6"
