"""``--hf-overrides`` and ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``: lengths vLLM accepts past the config's own.

The case (ai-dynamo/dynamo@2ac51dda recipes/qwen3-32b/vllm/disagg-kv-router/deploy.yaml): Qwen3-32B at TP 2 with
``--hf-overrides`` turning on YaRN x 4 and ``--max-model-len 131072``. vLLM applies the overrides to the config
before deriving the longest length (config/model.py 0.25.0 L461-476, L517-531, L566-567; transformers_utils/config.py
L760-762): 32768 x 4 = 131072 is accepted. fitgate refused it as Invalid (40960 from the config alone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fitgate.checkpoints import resolve, to_model_input
from fitgate.operator.decision.offline import check_files
from fitgate.sizing import ServingConfig, Verdict, lookup_gpu, plan
from fitgate.sizing.errors import SizingError
from fitgate.sizing.hf_config import apply_hf_overrides

YARN = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}


def test_overrides_apply_as_vllm_applies_them() -> None:
    config = {"hidden_size": 8, "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "text_config": {"a": 1, "b": 2}}
    merged = apply_hf_overrides(config, {"hidden_size": 16, "rope_scaling": {"factor": 3.0}, "text_config": {"b": 5}})
    assert merged["hidden_size"] == 16
    assert merged["rope_scaling"] == {"factor": 3.0}  # a plain dict value is replaced whole
    assert merged["text_config"] == {"a": 1, "b": 5}  # a nested sub-config is updated key by key
    assert config["hidden_size"] == 8  # the facts' config is not changed


def test_yarn_override_raises_the_longest_length() -> None:
    facts = resolve("Qwen/Qwen3-32B", source="catalog")
    h100 = lookup_gpu("H100")
    serving = ServingConfig(tensor_parallel_size=2, max_model_len=131072, vllm_version="0.24.0")
    with pytest.raises(SizingError, match="40960"):  # 131072 > the config's 40960: refused without the override
        plan(to_model_input(facts), h100, serving)
    result = plan(to_model_input(facts, YARN), h100, serving)
    assert result.verdict is Verdict.FITS and result.serving.max_model_len == 131072
    # the env override: past the derived length, sized as given
    allowed = plan(to_model_input(facts), h100, ServingConfig(**{**serving.__dict__, "allow_long_max_model_len": True}))
    assert allowed.serving.max_model_len == 131072


def _deployment(tmp_path: Path, args: list[str], env: list[dict[str, str]] | None = None) -> str:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.24.0",
        "args": ["Qwen/Qwen3-32B", "--tensor-parallel-size", "2", "--max-model-len", "131072", *args],
        "env": env or [],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "q", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    f = tmp_path / "d.yaml"
    f.write_text(json.dumps(doc))
    (result,) = check_files([str(f)], gpu_name="H100")
    return f"{result.verdict}: {result.message}"


def test_a_workload_with_the_override_is_sized_not_refused(tmp_path: Path) -> None:
    assert _deployment(tmp_path, []).startswith("Invalid")  # vLLM refuses it too
    assert _deployment(tmp_path, ["--hf-overrides", json.dumps(YARN)]).startswith("Fits")
    env = [{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "1"}]
    assert _deployment(tmp_path, [], env).startswith("Fits")
    # JSON fitgate cannot read is said, and the model's own config sized (so the length is refused as without it)
    line = _deployment(tmp_path, ["--hf-overrides", "{rope"])
    assert "--hf-overrides" in line and "not a JSON object" in line, line


@pytest.mark.parametrize(
    ("command", "script", "fits"),
    [
        # hunt178 F1: Qwen's model cards give `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ...`; a pod that writes it
        # in its shell command sets the variable for vLLM's process as surely as `env:` does, so the length is allowed
        (["sh", "-c"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve {args}", True),
        (["sh", "-c"], "CUDA_VISIBLE_DEVICES=0 VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve {args}", True),
        (["sh", "-c"], "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; vllm serve {args}", True),
        (["bash", "-c"], "declare -x VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve {args}", True),
        (["sh", "-c"], "env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve {args}", True),
        (["env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "vllm", "serve"], "{args}", True),
        # a shell variable that is not exported does not reach the process: refused, as vLLM refuses it
        (["sh", "-c"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; vllm serve {args}", False),
        # the assignment of another command does not either
        (["sh", "-c"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 true; vllm serve {args}", False),
    ],
)
def test_the_process_env_set_on_the_command_line_is_read(
    tmp_path: Path, command: list[str], script: str, fits: bool
) -> None:
    args = "Qwen/Qwen3-32B --tensor-parallel-size 2 --max-model-len 131072"
    text = script.format(args=args)
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.24.0",
        "command": command if command[0] == "env" else [*command, text],
        "args": text.split() if command[0] == "env" else [],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "q"}}
    doc["spec"] = {"template": {"spec": {"containers": [container]}}}
    f = tmp_path / "d.yaml"
    f.write_text(json.dumps(doc))
    (result,) = check_files([str(f)], gpu_name="H100")
    assert result.verdict == ("Fits" if fits else "Invalid"), result.line()


def test_a_model_deployment_takes_hf_overrides(tmp_path: Path) -> None:
    spec = {
        "model": {"name": "Qwen/Qwen3-32B", "hfOverrides": YARN},
        "engine": {"name": "vllm", "version": "0.24.0"},
        "serving": {"maxModelLen": 131072, "tensorParallelSize": 2},
        "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
    }
    doc = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "q"}, "spec": spec}
    f = tmp_path / "md.yaml"
    f.write_text(json.dumps(doc))
    (result,) = check_files([str(f)])
    assert result.verdict == "Fits", result.line()
