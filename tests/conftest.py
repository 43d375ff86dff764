"""Shared fixtures: real model configs from the built-in catalog (each with its SOURCE.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ModelInput

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "src" / "fitgate" / "checkpoints" / "catalog"
CALIBRATION = REPO.parent / "shared" / "calibration"

#: A small model of the Gemma 3 text architecture (5 sliding-window layers per full-attention layer), for
#: user-catalog tests that write a whole checkpoint directory with the safetensors library.
GEMMA3_TINY: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "vocab_size": 512,
    "max_position_embeddings": 8192,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
}


def configmap_mount(files: dict[str, bytes], where: Path) -> Path:
    """A directory laid out as the kubelet projects a ConfigMap: real files in a hidden, timestamped
    folder, ``..data`` pointing at it, and one symlink per key through ``..data``."""
    where.mkdir()
    stamp = where / "..2026_12_02_12_00_00.000000001"
    stamp.mkdir()
    for key, data in files.items():
        (stamp / key).write_bytes(data)
    (where / "..data").symlink_to(stamp.name)
    for key in files:
        (where / key).symlink_to(f"..data/{key}")
    return where


def catalog_config(repo_id: str) -> dict[str, Any]:
    """The real config.json of a catalog model (source recorded in its SOURCE.md)."""
    data: dict[str, Any] = json.loads((CATALOG / repo_id.replace("/", "__") / "config.json").read_text())
    return data


def model(repo_id: str) -> ModelInput:
    """A catalog model as the sizing core sees it."""
    return to_model_input(resolve(repo_id, source="catalog"))


@pytest.fixture(autouse=True)
def _no_hub_no_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Unit tests never reach the real Hub or the user's cache; Hub tests use the loopback server."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FITGATE_CACHE_DIR", str(tmp_path_factory.mktemp("fitgate-cache")))
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture(scope="session")
def calibration_cases() -> list[dict[str, Any]]:
    cases_file = CALIBRATION / "cases.jsonl"
    if not cases_file.is_file():
        pytest.skip(f"calibration set not found at {CALIBRATION} (it sits beside the repository)")
    return [json.loads(line) for line in cases_file.read_text().splitlines() if line.strip()]


#: A two-layer Llama config: the smallest real-format checkpoint the tests build around.
TINY_LLAMA: dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}
