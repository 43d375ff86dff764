"""``--speed-backend aic``: NVIDIA aiconfigurator where installed and it has data, a clear error where not installed."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from typing import Any

import pytest

from fitgate import aic
from fitgate.cli import main

PLAN = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--source", "catalog", "--gpu", "H100",
        "--max-model-len", "8192", "--concurrency", "8", "--input-tokens", "1000", "--output-tokens", "200",
        "--speed-backend", "aic"]  # fmt: skip


def _fake_aiconfigurator(monkeypatch: pytest.MonkeyPatch, estimate: Any) -> list[dict[str, Any]]:
    """Install a stand-in ``aiconfigurator.cli.api`` whose ``cli_estimate`` is ``estimate``; returns its calls."""
    calls: list[dict[str, Any]] = []

    def cli_estimate(model_path: str, system_name: str, **kwargs: Any) -> Any:
        calls.append({"model_path": model_path, "system_name": system_name, **kwargs})
        return estimate(model_path, system_name, **kwargs)

    for name in ("aiconfigurator", "aiconfigurator.cli", "aiconfigurator.cli.api"):
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules["aiconfigurator.cli.api"].cli_estimate = cli_estimate  # type: ignore[attr-defined]
    # the stand-in's version, whether or not the real package (with its own metadata) is installed too
    monkeypatch.setattr(aic, "_version", lambda: "stand-in")
    return calls


def test_not_installed_is_one_line_naming_the_flag_and_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)  # import of it fails, as when not installed
    monkeypatch.setattr(aic, "available", lambda: False)
    assert main(PLAN) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--speed-backend" in err and "fitgate[aic]" in err


def test_answered_says_which_backend_and_keeps_fitgates_figures_beside(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_aiconfigurator(monkeypatch, lambda *a, **k: types.SimpleNamespace(ttft=66.0, tpot=7.25))
    assert main([*PLAN, "--output", "json"]) == 0
    perf = json.loads(capsys.readouterr().out)["performance"]
    sb = perf["speed_backend"]
    assert sb["answered_by"] == "aiconfigurator" and sb["system"] == "h100_sxm"
    assert sb["ttft_seconds"] == pytest.approx(0.066) and sb["tpot_seconds"] == pytest.approx(0.00725)
    # fitgate's own estimate stays in the usual fields (with its band) and beside aiconfigurator's
    assert sb["fitgate_tpot_seconds"] == perf["tpot_seconds"] != sb["tpot_seconds"]
    # asked for vLLM's tables, at the plan's shape, under the name aiconfigurator ships the config as
    assert calls == [{"model_path": "meta-llama/Meta-Llama-3.1-8B", "system_name": "h100_sxm", "mode": "agg",
                      "backend_name": "vllm", "isl": 1000, "osl": 200, "batch_size": 8, "tp_size": 1}]  # fmt: skip
    assert main(PLAN) == 0
    assert "speed backend: aiconfigurator stand-in (vllm kernel tables, h100_sxm): TTFT 66 ms, TPOT 7.2 ms" in (
        capsys.readouterr().out
    )


def test_no_data_falls_back_to_fitgate_and_says_why(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_data(*a: Any, **k: Any) -> Any:
        raise KeyError("no vllm gemm table for h100_sxm")

    _fake_aiconfigurator(monkeypatch, no_data)
    assert main([*PLAN, "--output", "json"]) == 0
    sb = json.loads(capsys.readouterr().out)["performance"]["speed_backend"]
    assert sb["answered_by"] == "fitgate" and "KeyError" in sb["reason"] and sb["tpot_seconds"] is None
    # a GPU aiconfigurator has no system for is not even asked
    argv = [*PLAN, "--output", "json"]
    argv[argv.index("H100")] = "MI300X"
    assert main(argv) == 0
    sb = json.loads(capsys.readouterr().out)["performance"]["speed_backend"]
    assert sb["answered_by"] == "fitgate" and sb["reason"] == "no system for MI300X"


def test_needs_the_request_shape(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_aiconfigurator(monkeypatch, lambda *a, **k: types.SimpleNamespace(ttft=1.0, tpot=1.0))
    argv = [a for a in PLAN if a not in ("--input-tokens", "1000", "--output-tokens", "200")]
    assert main(argv) == 2
    assert "--input-tokens" in capsys.readouterr().err


def test_moe_experts_are_sharded_as_vllm_shards_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiconfigurator needs moe_tp_size or moe_ep_size for an MoE model: vLLM shards experts by TP unless
    # --enable-expert-parallel puts whole experts on each GPU (moe_ep_size = TP); a dense model gets neither.
    calls = _fake_aiconfigurator(monkeypatch, lambda *a, **k: types.SimpleNamespace(ttft=50.0, tpot=5.0))
    argv = [*PLAN, "--output", "json"]
    argv[argv.index("meta-llama/Llama-3.1-8B-Instruct")] = "Qwen/Qwen3-30B-A3B"
    argv[argv.index("--max-model-len")] = "-tp"
    argv[argv.index("8192")] = "2"
    assert main([*argv, "--max-model-len", "8192"]) == 0
    assert main([*argv, "--max-model-len", "8192", "--enable-expert-parallel"]) == 0
    capsys.readouterr()
    assert [(c["tp_size"], c["moe_tp_size"], c["moe_ep_size"]) for c in calls] == [(2, 2, 1), (2, 1, 2)]
    _fake_aiconfigurator(monkeypatch, lambda *a, **k: types.SimpleNamespace(ttft=50.0, tpot=5.0))
    assert "moe_tp_size" not in _dense_call(capsys, monkeypatch)


def _dense_call(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    calls = _fake_aiconfigurator(monkeypatch, lambda *a, **k: types.SimpleNamespace(ttft=50.0, tpot=5.0))
    assert main([*PLAN, "--output", "json"]) == 0
    capsys.readouterr()
    return calls[0]
