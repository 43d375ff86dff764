"""The engine vLLM 0.8-0.10 runs: V1 unless ``VLLM_USE_V1=0`` or the GPU is below compute capability 8.0.

Sources (``pip download --no-deps vllm==X``, vllm/engine/arg_utils.py): ``create_engine_config`` tries V1 when
``VLLM_USE_V1`` is unset or 1 (0.10.0 L1006-1013); ``_is_v1_supported_oracle`` refuses V1 on a CUDA GPU below
compute capability 8.0 and ``_raise_or_fallback`` falls back to V0 when the variable is unset, raises when it is 1
(0.8.0 L1475, 0.8.5 L1350-1356, 0.9.2 L1357-1363, 0.10.0 L1343-1352 and L1681-1690, 0.10.1.1 L1403); 0.10.2 has
no such check. envs.py reads it as ``bool(int(os.getenv("VLLM_USE_V1", "1")))`` (0.8.5 L530-531, 0.10.0 L650-651).
A start-up log in ../shared/calibration/cases.jsonl (``gh-file-t4-llama32-3b-fp16-v082``, vLLM 0.8.2 on a 16 GB
Turing card) prints it: "Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to V0."
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fitgate.cli import main
from fitgate.operator.decision.evaluate import serving_config
from fitgate.operator.schema.api import parse_spec
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.activation import CUDA_CONTEXT_BYTES
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import engine_for
from fitgate.workloads import read_workload
from tests.conftest import model
from tests.workloads.test_workloads_reader import deployment

V100 = lookup_gpu("V100-16GB")


@pytest.mark.parametrize(
    ("version", "use_v1", "capability", "kv", "mla", "engine", "note"),
    [
        ("0.7.3", None, "7.0", None, False, None, None),  # V0 is the only engine sized before 0.8
        ("0.7.3", True, "9.0", None, False, None, "V1 was experimental"),
        ("0.8.0", None, "7.0", None, False, "V0", "falls back to its V0 engine on a compute capability 7.0"),
        ("0.8.5", None, "7.5", None, False, "V0", "falls back"),
        ("0.10.1.1", None, "7.5", None, False, "V0", "falls back"),
        ("0.10.2", None, "7.0", None, False, None, None),  # the check is gone: V1 on Volta / Turing
        ("0.9.2", None, "8.0", None, False, None, None),  # Ampere: V1
        ("0.9.2", None, None, "fp8", False, None, None),  # not CUDA (ROCm): not modelled
        ("0.9.2", False, "9.0", None, False, "V0", "VLLM_USE_V1=0"),
        ("0.9.2", True, "7.5", None, False, "V1", "raises NotImplementedError"),
        ("0.19.1", False, "9.0", None, False, None, "has no V0 engine"),
        # an fp8 KV cache: none on V1 in 0.8.0-0.8.1; FlashAttention 3 (Hopper) from 0.8.2; 10.0 from 0.10.0;
        # MLA models from 0.10.2
        ("0.8.1", None, "9.0", "fp8", False, "V0", "--kv-cache-dtype fp8"),
        ("0.8.5", None, "9.0", "fp8", False, None, None),
        ("0.9.2", None, "8.9", "fp8_e4m3", False, "V0", "--kv-cache-dtype fp8_e4m3 on a compute capability 8.9"),
        ("0.9.2", None, "10.0", "fp8", False, "V0", "fp8"),
        ("0.10.0", None, "10.0", "fp8", False, None, None),
        ("0.10.1.1", None, "8.0", "fp8", True, "V0", "fp8"),
        ("0.10.2", None, "8.0", "fp8", True, None, None),
        ("0.10.2", None, "12.0", "fp8", False, "V0", "fp8"),  # RTX 5090: not 10.0, not Hopper
        ("0.10.2", None, "8.9", "auto", False, None, None),
        ("0.11.0", None, "8.9", "fp8", False, None, None),
    ],
)
def test_engine_for(
    version: str, use_v1: bool | None, capability: str | None, kv: str | None, mla: bool, engine: str | None, note: str
) -> None:
    got, why = engine_for(version, use_v1, capability, kv, mla)
    assert got == engine
    assert (why is None) if note is None else (why is not None and note in why)


@pytest.mark.parametrize(
    ("version", "capability", "engine"),
    [("0.8.0", "9.0", "V0"), ("0.9.1", None, "V0"), ("0.9.2", "9.0", None), ("0.7.3", "9.0", None)],
)
def test_a_pooling_model_runs_v0_before_0_9_2(version: str, capability: str | None, engine: str | None) -> None:
    # arg_utils.py 0.8.0 L1512-1516 ... 0.9.1 L1347-1350: task not "generate" falls back (any platform); 0.9.2 no more
    got, why = engine_for(version, None, capability, runner="pooling")
    assert got == engine and (engine is None or (why is not None and "pooling model" in why))


def test_an_fp8_kv_cache_on_ada_runs_v0_on_0_9() -> None:
    # Llama-3.1-8B, --kv-cache-dtype fp8 on an L40S (8.9) with vLLM 0.9.2: FlashAttention 2 there cannot read fp8,
    # so vLLM runs V0; on an H100 (9.0, FlashAttention 3) it stays V1
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    settings = ServingConfig(max_model_len=8192, kv_cache_dtype="fp8", vllm_version="0.9.2")
    ada = plan(llama, lookup_gpu("L40S"), settings)
    assert ada.serving.engine == "V0" and any(
        "--kv-cache-dtype fp8 on a compute capability 8.9" in n for n in ada.notes
    )
    assert plan(llama, lookup_gpu("H100"), settings).serving.engine == "V1"


def test_production_stack_v100_tp2_is_sized_as_v0_and_fits() -> None:
    # vllm-project/production-stack@545a811b tutorials/assets/values-25-v100-multi-gpu-tp2.yaml ("Validated on:
    # OKD 4.19", vllm/vllm-openai:v0.8.5): Qwen2.5-7B-Instruct, half, TP 2, 8192 tokens, gmu 0.9, --enforce-eager on
    # 2 x V100-SXM2-16GB. Outside the budget: 0.1 x 15.77 GiB = 1.58 GiB. vLLM 0.8.5 runs V0 on compute capability
    # 7.0. (Before hunt12 D1 fitgate held an H100's 1.53 GiB before the snapshot at every TP > 1, and V1's sampler
    # warm-up (0.22 GiB) on top made 1.75 GiB: Tight. A V100 gets no symmetric-memory buffer: 0.63 GiB, so both
    # engines fit: 0.63 + 0.22 = 0.85 < 1.58 GiB.)
    qwen = model("Qwen/Qwen2.5-7B-Instruct")
    settings: dict[str, Any] = {
        "tensor_parallel_size": 2,
        "dtype": "float16",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.9,
        "enforce_eager": True,
        "vllm_version": "0.8.5",
    }
    v0 = plan(qwen, V100, ServingConfig(**settings))
    assert v0.serving.engine == "V0" and v0.verdict.value == "Fits", [r.message for r in v0.reasons]
    assert any("falls back to its V0 engine" in n for n in v0.notes)
    outside = V100.memory_bytes - v0.per_gpu.budget_bytes
    assert CUDA_CONTEXT_BYTES < outside < 1.6 * GiB
    forced = plan(qwen, V100, ServingConfig(**settings, use_v1=True))  # what fitgate answered before
    assert forced.serving.engine == "V1" and forced.verdict.value == "Fits"
    assert any("raises NotImplementedError" in n for n in forced.notes)
    ampere = plan(qwen, lookup_gpu("A100-80GB"), ServingConfig(**settings))
    assert ampere.serving.engine == "V1" and not any("V0" in n for n in ampere.notes)


def test_the_workload_env_and_the_crd_field_select_the_engine() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.9.2",
        "args": ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"],
        "env": [{"name": "VLLM_USE_V1", "value": "0"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    doc = deployment(container)
    r = read_workload(doc)
    assert r is not None and r.invalid is None and r.unknown is None, r
    spec = parse_spec(r.spec())
    assert spec.serving.use_v1 is False and serving_config(spec).use_v1 is False
    container["env"] = [{"name": "VLLM_USE_V1", "value": "yes"}]
    r = read_workload(doc)
    assert r is not None and parse_spec(r.spec()).serving.use_v1 is None
    assert any("VLLM_USE_V1='yes': not 0 or 1" in n for n in r.notes)


def test_cli_no_use_v1(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--max-model-len", "8192", "-o", "json"]
    assert main([*args, "--vllm-version", "0.9.2", "--no-use-v1"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("VLLM_USE_V1=0: vLLM 0.9.2 runs its V0 engine" in n for n in notes)
    assert main([*args, "--vllm-version", "0.9.2"]) == 0
    assert not any("V0" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_the_workload_s_flashinfer_sampler_variable_is_sized() -> None:
    # VLLM_USE_FLASHINFER_SAMPLER=1 on 0.11.1+ (opt-in there) samples without PyTorch's sort: the profiling pass
    # shrinks from the sort's 14.35-37.8 B a logit to FlashInfer's 14 B (versions.py), so the KV pool grows
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.15.1",
        "args": ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"],
        "env": [{"name": "VLLM_USE_FLASHINFER_SAMPLER", "value": "1"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.unknown is None, r
    spec = parse_spec(r.spec())
    assert spec.serving.flashinfer_sampler is True
    h100 = lookup_gpu("H100")
    qwen = model("Qwen/Qwen2.5-7B-Instruct")
    on = plan(qwen, h100, serving_config(spec))
    off = plan(qwen, h100, ServingConfig(max_model_len=8192, vllm_version="0.15.1"))
    assert on.per_gpu.activation_bytes < off.per_gpu.activation_bytes
