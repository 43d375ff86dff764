"""``fitgate plan`` offline (built-in catalog only) on the most-deployed open models of 2025-26.

The list and its sources ("most deployed": OpenRouter token-volume rankings as analysed at
https://tomtunguz.com/the-thriving-ecosystem-of-open-models/ and
https://shortsingh.com/article/chinese-and-open-weight-ai-models-dominate-developer-usage-on-openrouter-data-sh,
the families KAITO ships presets for, kaito-project/kaito presets/workspace/models/supported_models.yaml) are
in docs/workloads.md. Each is planned on 8 x H200 (TP 8), HF_HUB_OFFLINE set: the checkpoint must come
from the catalog, and the plan must give a verdict (a DoesNotFit is a result, not a failure).
"""

from __future__ import annotations

import json

import pytest

from fitgate.checkpoints.catalog import find_builtin, not_in_catalog
from fitgate.cli import main

MOST_DEPLOYED = (
    "deepseek-ai/DeepSeek-V4-Flash",
    "deepseek-ai/DeepSeek-V4-Pro",
    "deepseek-ai/DeepSeek-V3.2",
    "deepseek-ai/DeepSeek-V3.1",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
    "openai/gpt-oss-120b",
    "openai/gpt-oss-20b",
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2.5",
    "moonshotai/Kimi-K2.6",
    "MiniMaxAI/MiniMax-M2.5",
    "MiniMaxAI/MiniMax-M2.7",
    "zai-org/GLM-5",
    "zai-org/GLM-5.1",
    "XiaomiMiMo/MiMo-V2-Flash",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-Coder-480B-A35B-Instruct",
    "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.5-122B-A10B",
    "Qwen/Qwen3.5-35B-A3B",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen2.5-72B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "google/gemma-4-26B-A4B",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
)


def test_thirty_models() -> None:
    assert len(set(MOST_DEPLOYED)) == 30


@pytest.mark.parametrize("model", MOST_DEPLOYED)
def test_plans_offline_from_the_catalog(
    model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert find_builtin(model) is not None, model
    code = main(["plan", "--model", model, "--gpu", "H200", "-tp", "8", "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1), doc
    assert doc["model"]["source"] == "catalog" and doc["verdict"] in ("Fits", "Tight", "DoesNotFit"), doc


def test_a_miss_suggests_the_closest_entry_and_catalog_add() -> None:
    text = not_in_catalog("mistralai/Mistral-7B-Instruct-v0.1")
    assert "did you mean mistralai/Mistral-7B-Instruct-v0.3 or mistralai/Mistral-7B-Instruct-v0.2" in text
    assert "`fitgate catalog add mistralai/Mistral-7B-Instruct-v0.1 --into DIR`" in text


def test_a_qwen2_5_instruct_entry_keeps_the_hub_s_32k_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt71 F1: a university cluster serves `vllm serve Qwen/Qwen2.5-32B-Instruct --tensor_parallel_size 2
    # --dtype=half` on 48 GB cards. The catalog's config (a tt-metal copy) said max_position_embeddings 131072, so the
    # default max_model_len needed 131072 x 64 layers x 8 KV heads x 128 x 2 (K, V) x 2 B / 2 GPUs = 16 GiB of KV per
    # GPU against ~8.7 GiB left: DoesNotFit. Qwen's instruct configs hold 32768 (SOURCE.md), which vLLM takes as the
    # default max_model_len: 4 GiB a request, and the plan fits.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main([
        "plan", "--model", "Qwen/Qwen2.5-32B-Instruct", "--gpu", "L40S", "-tp", "2", "--dtype", "float16",
        "--vllm-version", "0.8.5", "--output", "json",
    ])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "Fits", doc["reasons"]
    assert doc["max_model_len"] == 32768
