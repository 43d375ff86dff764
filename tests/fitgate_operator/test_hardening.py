"""Issue 22: every parse of a workload's user input is bounded, and admission never answers 500.

Each test here failed before its fix (the numbers in the comments are the old behaviour).
"""

from __future__ import annotations

import asyncio
import copy
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from fitgate.operator.decision.offline import check_files
from fitgate.operator.runtime import workload_handlers
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.settings import OperatorConfig, ParseBudgets
from fitgate.workloads import container, read_workload
from fitgate.workloads.bounds import BudgetError, budgets, check_yaml, configure, load_yaml
from tests.fitgate_operator.test_operator import H100, changed, index, memo, on
from tests.workloads.test_workloads_webhook import CHART

IMAGE = "vllm/vllm-openai:v0.11.0"


@pytest.fixture
def small_budgets() -> Iterator[ParseBudgets]:
    """Budgets small enough that the old, unbounded code shows its cost in a test's time."""
    before = budgets()
    small = ParseBudgets(max_expansion_bytes=64 * 1024, max_yaml_nodes=10_000, max_yaml_expanded_bytes=64 * 1024)
    configure(small)
    yield small
    configure(before)


def deployment(args: list[str], env: list[dict[str, str]] | None = None, **pod: Any) -> dict[str, Any]:
    container = {"name": "vllm", "image": IMAGE, "args": args, "env": env or []}
    return {
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [container], **pod}}},
    }


def doubling_env(entries: int) -> list[dict[str, str]]:
    """``A_i=$(A_{i-1})$(A_{i-1})``: 2^entries x 32 bytes once expanded (issue 22's 1.4 KB manifest: 29 entries)."""
    env = [{"name": "A_0", "value": "x" * 32}]
    env += [{"name": f"A_{i}", "value": f"$(A_{i - 1})$(A_{i - 1})"} for i in range(1, entries + 1)]
    return env


def test_env_expansion_bomb_is_unknown_within_budget(small_budgets: ParseBudgets) -> None:
    # 22 entries: 2^22 x 32 B = 128 MiB expanded before the budget (the old code built it: ~1 s, 256 MiB peak)
    obj = deployment(["--model", "Qwen/Qwen3-8B", "--max-model-len", "$(A_22)"], doubling_env(22))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        reading = read_workload(obj)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - started < 0.5
    assert peak < 4 * small_budgets.max_expansion_bytes  # the budget, plus the parts kept while joining
    assert reading is not None and reading.invalid is None
    assert reading.unknown is not None and "FITGATE_MAX_EXPANSION_BYTES" in reading.unknown


def test_shell_expansion_is_counted_too(small_budgets: ParseBudgets) -> None:
    # 4 KiB value referenced 100 times in `sh -c`: 400 KiB > the 64 KiB budget
    script = "vllm serve Qwen/Qwen3-8B " + " ".join(["$BIG"] * 100)
    obj = deployment([], [{"name": "BIG", "value": "y" * 4096}])
    obj["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", script]
    reading = read_workload(obj)
    assert reading is not None and reading.unknown is not None
    assert "$VAR in sh -c" in reading.unknown


def test_expansion_within_budget_still_reads() -> None:
    obj = deployment(["--model", "Qwen/Qwen3-8B", "--max-model-len", "$(LEN)"], [{"name": "LEN", "value": "8192"}])
    reading = read_workload(obj)
    assert reading is not None and reading.unknown is None and reading.serving["maxModelLen"] == 8192


def billion_laughs(levels: int) -> str:
    """The classic YAML alias bomb: 9^levels "lol" scalars from ~60 bytes per level."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_is_refused_before_it_is_built(small_budgets: ParseBudgets) -> None:
    text = billion_laughs(9)  # 9^9 = 387 M nodes from 518 bytes; str() of them took 45 s and 2.2 GB
    assert len(text) < 600
    started = time.perf_counter()
    with pytest.raises(BudgetError, match="FITGATE_MAX_YAML_NODES"):
        check_yaml(text)
    assert time.perf_counter() - started < 0.5


def test_yaml_depth_and_long_integers_are_budget_errors() -> None:
    with pytest.raises(BudgetError, match="FITGATE_MAX_YAML_DEPTH"):
        load_yaml("[" * 5000 + "]" * 5000)  # the composer recurses: RecursionError (a 500) before
    with pytest.raises(BudgetError, match="cannot build"):
        load_yaml("max_model_len: " + "9" * 5000)  # int() of 5,000 digits: ValueError, not a YAMLError
    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}


def test_config_file_alias_bomb_makes_the_workload_unknown(small_budgets: ParseBudgets) -> None:
    obj = deployment(
        ["--model", "Qwen/Qwen3-8B", "--config", "/cfg/c.yaml"],
        volumes=[{"name": "cfg", "configMap": {"name": "cm"}}],
    )
    obj["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/cfg"}]
    started = time.perf_counter()
    reading = read_workload(obj, {"cm": {"c.yaml": billion_laughs(9)}})
    assert time.perf_counter() - started < 1.0
    assert reading is not None and reading.invalid is None
    assert reading.unknown is not None and "ConfigMap cm key c.yaml" in reading.unknown


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--max-model-len", "9" * 5000], "5000 digits"),  # int(): "Exceeds the limit (4300 digits)"
        (["--max-model-len", "9" * 400 + "k"], "digits"),  # float * 1000 = inf, int(inf): OverflowError
        (["--gpu-memory-utilization", "nan"], "not a finite number"),
        (["--gpu-memory-utilization", "1e999"], "not a finite number"),
    ],
)
def test_numbers_past_what_fitgate_reads_are_unknown(args: list[str], why: str) -> None:
    reading = read_workload(deployment(["--model", "Qwen/Qwen3-8B", *args]))
    assert reading is not None and reading.invalid is None
    assert reading.unknown is not None and why in reading.unknown


def test_ray_cluster_size_of_many_digits_is_ignored() -> None:
    obj = {
        "kind": "StatefulSet",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "v", "image": IMAGE, "args": ["--model", "m"]}]}}},
    }
    obj["spec"]["template"]["spec"]["containers"][0]["command"] = ["ray", "--ray_cluster_size=" + "9" * 5000]
    reading = read_workload(obj)
    assert reading is None or reading.invalid is None


def test_the_reader_turns_any_exception_into_one_unknown_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise ZeroDivisionError("x\ny")

    monkeypatch.setattr(container, "gpu_limit_of", boom)  # where the reader calls it (workloads/container.py)
    reading = read_workload(deployment(["--model", "Qwen/Qwen3-8B"]))
    assert reading is not None and reading.unknown == "fitgate could not read this object (ZeroDivisionError: x y)"


def review(obj: dict[str, Any], mode: str, m: kopf.Memo) -> list[str]:
    warnings: list[str] = []
    asyncio.run(
        workload_handlers.validate_workload(
            mode, body=kopf.Body(obj), old=None, dryrun=False, warnings=warnings, memo=on(m, index(H100))
        )
    )
    return warnings


def test_an_exception_in_admission_is_unknown_through_the_policy_never_a_500(monkeypatch: pytest.MonkeyPatch) -> None:
    async def boom(*_: Any, **__: Any) -> None:
        raise KeyError("kaputt")

    monkeypatch.setattr(workload_handlers, "evaluate_workload", boom)
    m = memo()
    warnings = review(copy.deepcopy(CHART), "warn", m)  # before: kopf answered allowed: false, code 500
    assert len(warnings) == 1 and "fitgate could not evaluate this object (KeyError: 'kaputt')" in warnings[0]
    warnings = review(copy.deepcopy(CHART), "enforce", m)  # Unknown policy Warn: admitted with the warning
    assert "KeyError" in warnings[0]
    m = changed(m, config=OperatorConfig(webhook_port=0, metrics_port=0, unknown_policy="Deny"))
    with pytest.raises(kopf.AdmissionError) as exc:
        review(copy.deepcopy(CHART), "enforce", m)
    assert exc.value.code != 500 and "KeyError" in str(exc.value)
    # each one counted for the FitgateWorkloadAdmissionErrors alert: two admitted (warn, enforce + Warn), one denied
    errors = OperatorMemo.of(m).metrics.registry.get_sample_value
    kind = CHART["kind"]
    assert errors("fitgate_workload_admission_errors_total", {"kind": kind, "allowed": "false"}) == 1.0
    assert errors("fitgate_workload_admission_errors_total", {"kind": kind, "allowed": "true"}) == 2.0


def test_a_bomb_in_admission_is_unknown_at_once(small_budgets: ParseBudgets) -> None:
    obj = copy.deepcopy(CHART)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["env"] = doubling_env(24) + list(container.get("env") or [])
    container["command"] = [*container["command"], "--served-model-name", "$(A_24)"]
    started = time.perf_counter()
    warnings = review(obj, "warn", memo())
    assert time.perf_counter() - started < 1.0
    assert warnings and "FITGATE_MAX_EXPANSION_BYTES" in warnings[0]


def test_fitgate_check_refuses_an_alias_bomb_in_one_line(tmp_path: Any) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs(9))  # the old safe_load_all + reading took minutes and gigabytes
    started = time.perf_counter()
    (result,) = check_files([str(bomb)], gpu_name="H100")
    assert time.perf_counter() - started < 1.0
    assert result.verdict == "Invalid" and "FITGATE_MAX_YAML" in result.message and "\n" not in result.message
