"""The one registry of model families (fitgate.sizing.families): complete, unambiguous, and what parse_config reads.

Issue 25: each family's reading lives in its own module; these tests fail when a module's Family is missing
from FAMILIES, when two families claim an architecture or a model type, or when a family's or a model type's
special case no longer reaches the parsed architecture.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

import fitgate.sizing.families as families
from fitgate.sizing.architecture import SUPPORTED_ARCHITECTURES, parse_config
from fitgate.sizing.families import FAMILIES, MODEL_TYPES, Family, ModelTypeTraits, _by_architecture, _model_types


def _declared_families() -> list[Family]:
    found = []
    for info in pkgutil.iter_modules(families.__path__):
        module = importlib.import_module(f"{families.__name__}.{info.name}")
        found += [v for v in vars(module).values() if isinstance(v, Family)]
    return found


def test_every_family_a_module_declares_is_registered() -> None:
    declared = _declared_families()
    assert declared, "no Family found in the family modules"
    missing = [f.name for f in declared if f not in FAMILIES]
    assert not missing, f"declared but not in FAMILIES: {missing}"
    assert len({f.name for f in FAMILIES}) == len(FAMILIES), "two families share a name"


def test_supported_architectures_are_the_families_architectures() -> None:
    expected = {arch: f.name for f in FAMILIES for arch in f.architectures}
    assert sum(len(f.architectures) for f in FAMILIES) == len(expected), "an architecture is listed twice"
    assert expected == SUPPORTED_ARCHITECTURES
    assert all(f.architectures for f in FAMILIES)


def _dummy(name: str, archs: tuple[str, ...], traits: dict[str, ModelTypeTraits] | None = None) -> Family:
    return Family(name, archs, lambda text, model_type: ([], {}), model_types=traits or {})


def test_an_architecture_in_two_families_is_refused() -> None:
    with pytest.raises(RuntimeError, match="XForCausalLM is read by both the a and the b family"):
        _by_architecture((_dummy("a", ("XForCausalLM",)), _dummy("b", ("XForCausalLM",))))


def test_a_model_type_with_two_sets_of_traits_is_refused() -> None:
    a = _dummy("a", ("A",), {"x": ModelTypeTraits(tied_by_default=True)})
    b = _dummy("b", ("B",), {"x": ModelTypeTraits(norm_has_bias=True)})
    with pytest.raises(RuntimeError, match="model_type x"):
        _model_types((a, b))
    same = _dummy("c", ("C",), {"x": ModelTypeTraits(tied_by_default=True)})
    assert _model_types((a, same)) == {"x": ModelTypeTraits(tied_by_default=True)}


def _config(arch: str, model_type: str, **extra: Any) -> dict[str, Any]:
    return {
        "architectures": [arch],
        "model_type": model_type,
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
        **extra,
    }


def test_model_type_traits_reach_the_architecture_whatever_the_family() -> None:
    # stablelm (llama.py's table): LayerNorm with bias, q/k/v biases only with use_qkv_bias
    assert parse_config(_config("StableLmForCausalLM", "stablelm")).attention_bias is False
    stablelm = parse_config(_config("StableLmForCausalLM", "stablelm", use_qkv_bias=True))
    assert stablelm.norm_has_bias and stablelm.attention_bias
    # cohere: tied even when the config says otherwise
    assert parse_config(_config("CohereForCausalLM", "cohere", tie_word_embeddings=False)).tie_word_embeddings
    # gemma2 ties by default, an explicit false unties it; llama does not tie by default
    assert parse_config(_config("Gemma2ForCausalLM", "gemma2")).tie_word_embeddings
    assert not parse_config(_config("Gemma2ForCausalLM", "gemma2", tie_word_embeddings=False)).tie_word_embeddings
    assert not parse_config(_config("LlamaForCausalLM", "llama")).tie_word_embeddings
    assert MODEL_TYPES["qwen2"].attention_bias
    assert parse_config(_config("Qwen2ForCausalLM", "qwen2")).attention_bias


def test_family_traits_reach_the_architecture_only_for_that_family() -> None:
    experts = {"num_local_experts": 4, "num_experts_per_tok": 2}
    # moe.py: gpt-oss raises the largest CUDA-graph capture size to 1024; the llama family does not
    assert parse_config(_config("GptOssForCausalLM", "gpt_oss", **experts)).max_capture_size_override == 1024
    assert parse_config(_config("LlamaForCausalLM", "gpt_oss")).max_capture_size_override is None
    # phi.py: LayerNorm with bias for the family, whatever the model type
    assert parse_config(_config("PhiForCausalLM", "llama")).norm_has_bias
    assert not parse_config(_config("LlamaForCausalLM", "llama")).norm_has_bias
