"""Every real config.json of the corpus plans, or is refused naming its architecture.

``tests/corpus`` holds real Hugging Face configs of distinct checkpoints, most of them 2025-2026
families, each copied from a public repository that vendors it (``SOURCE.md`` beside each names
repository@commit:path). Their real sizes are not vendored, so the weights are checked against the
parameter count in the checkpoint's name (``Qwen3-30B-A3B`` -> 30B), which the model cards state.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, custom_gpu, plan
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.units import GiB
from fitgate.sizing.weights import Role

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
DIRS = sorted(p for p in CORPUS.iterdir() if (p / "config.json").is_file())

#: Architectures vLLM 0.33 serves that fitgate does not size yet (each refused with its name), and
#: the ones vLLM itself no longer serves. The test fails when one starts to plan or another stops.
REFUSED = {
    "Exaone4_5_ForConditionalGeneration",
    "MiniMaxM3ForCausalLM",  # not in vLLM 0.33's registry nor mapped (it has MiniMaxM3SparseFor*)
    "MllamaForConditionalGeneration",  # vLLM dropped it after 0.10.2
    "Step3p7FlashForCausalLM",  # not in vLLM 0.33's registry (it has Step3p7ForConditionalGeneration)
}

#: Published totals where the name rounds too far, counts active parameters first, or has no count
#: (such a name is checked against its entry here): the model cards' (Meta: Llama 3.2 1B has 1.23B;
#: Qwen: Qwen2.5-VL-7B has 8.29B with its vision tower; AI2: OLMoE-1B-7B has "1B active and 7B total
#: parameters"; Upstage: Solar Pro Preview has "22 billion parameters"; Stability: Stable LM 2 1.6B, whose
#: "1_6b" reads as 6B, is "a 1.6 billion parameter" model), the Hub's (InternLM2-7B:
#: "7.74B params"; Command R 08-2024: 32B) or the checkpoint's own (InternLM3-8B: its
#: model.safetensors.index.json total_size of 35,216,965,632 float32 bytes).
#: All but Meta's and Qwen's are cited in the checkpoint's SOURCE.md. Kimi K3: "2.8T" on the Hub's
#: moonshotai collections page (https://huggingface.co/moonshotai/collections, Kimi K3 entry).
PUBLISHED_PARAMETERS = {
    "CohereForAI__c4ai-command-r-08-2024": 32e9,
    "internlm__internlm2-chat-7b-sft": 7.74e9,
    "upstage__solar-pro-preview-instruct": 22e9,
    "stabilityai__stablelm-2-1_6b-chat": 1.6e9,
    "allenai__OLMoE-1B-7B-0125-Instruct": 7e9,
    "meta-llama__Llama-3.2-1B-Instruct": 1.23e9,
    "Qwen__Qwen2.5-VL-7B-Instruct": 8.29e9,
    "internlm__internlm3-8b-instruct": 35_216_965_632 / 4,
    "moonshotai__Kimi-K3": 2.8e12,
    # "17B" is the active count; Meta's model card: 17B active, 128 experts, 400B total
    # (huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct)
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct": 400e9,
}


def _architecture(path: Path) -> str:
    archs = json.loads((path / "config.json").read_text()).get("architectures") or ["?"]
    return str(archs[0])


def test_corpus_is_large_and_mostly_recent() -> None:
    assert len(DIRS) >= 80
    with_source = [d for d in DIRS if (d / "SOURCE.md").is_file()]
    assert len(with_source) == len(DIRS)


@pytest.mark.parametrize("path", DIRS, ids=lambda p: p.name)
def test_plans_or_names_the_architecture(path: Path) -> None:
    arch = _architecture(path)
    if arch in REFUSED:
        with pytest.raises(UnknownArchitectureError, match=re.escape(arch)):
            to_model_input(load_directory(path))
        return
    try:
        model = to_model_input(load_directory(path))
    except SizingError as exc:  # a real config refused for a key: the defect this test exists for
        pytest.fail(f"{path.name} ({arch}) refused: {exc}")
    # On one card big enough for any of them, vLLM's budget arithmetic must give sane numbers.
    result = plan(model, custom_gpu(16384 * GiB), ServingConfig(max_model_len=4096))
    assert result.per_gpu.weights_bytes > 0
    assert result.kv.bytes_per_token > 0
    assert result.kv.num_blocks > 0


NAMED = [
    d
    for d in DIRS
    if re.search(r"[-_]\d+(\.\d+)?[bB]([-_]|$)", d.name.split("__")[1] + "-") or d.name in PUBLISHED_PARAMETERS
]


@pytest.mark.parametrize("path", NAMED, ids=lambda p: p.name)
def test_parameters_match_the_name(path: Path) -> None:
    if _architecture(path) in REFUSED:
        pytest.skip("refused architecture")
    match = re.search(r"[-_](\d+(?:\.\d+)?)[bB](?:[-_]|$)", path.name.split("__")[1] + "-")
    claimed = PUBLISHED_PARAMETERS.get(path.name) or float(match.group(1) if match else "nan") * 1e9
    # Stored multi-token-prediction layers are left out, as names leave them out (DeepSeek-V3's 671B is
    # without its 14B MTP module, 685B stored; MiMo-7B's MTP layer would make it 7.83B).
    entries = to_model_input(load_directory(path)).inventory.entries
    counted = sum(e.numel for e in entries if e.role is not Role.SKIPPED)
    # Names round (7B is 7.6B for Qwen2.5-7B); an architecture read wrong is off by far more
    # (Nemotron 3's latent experts read as hidden-width experts came out 5-10x too large).
    assert 0.9 <= counted / claimed <= 1.1, f"{counted / 1e9:.2f}B parameters for a {claimed / 1e9:g}B checkpoint"
