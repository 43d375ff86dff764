"""The one registry of model families: which family reads each ``config.json:architectures[0]``.

Each family lives in its own module (:mod:`.llama`, :mod:`.moe`, :mod:`.deepseek` ...) and declares a
:class:`~fitgate.sizing.families.base.Family`: the architectures vLLM serves with that layer layout
(vllm/model_executor/models/registry.py 0.33.0), the reader of its layers and what else is its own.
Adding a family is one new module and one line in :data:`FAMILIES`. Family modules import only the
config reader, the shared layer readers, the registry types and the model types (an import-linter
contract checks it); :func:`fitgate.sizing.architecture.parse_config` is the one caller.
"""

from __future__ import annotations

from collections.abc import Mapping

from fitgate.sizing.families import (
    deepseek,
    deepseek_v4,
    gemma,
    granite,
    jamba,
    kimi,
    lfm,
    llama,
    llama4,
    mimo,
    moe,
    nemotron,
    opt,
    phi,
    qwen,
    transformers_backend,
)
from fitgate.sizing.families.base import Family, ModelTypeTraits

__all__ = ["BY_ARCHITECTURE", "FAMILIES", "MODEL_TYPES", "Family", "ModelTypeTraits"]

#: Every family fitgate reads, one line each.
FAMILIES: tuple[Family, ...] = (
    llama.LLAMA,
    phi.PHI2,
    opt.OPT,
    moe.MOE,
    deepseek.MLA_FAMILY,
    kimi.KIMI_K3,
    llama4.LLAMA4,
    qwen.QWEN3_NEXT,
    nemotron.NEMOTRON_H,
    jamba.JAMBA,
    granite.GRANITE_HYBRID,
    gemma.GEMMA4,
    lfm.LFM2,
    mimo.MIMO_V2,
    lfm.LFM2_MOE,
    nemotron.DECILM,
    deepseek_v4.DEEPSEEK_V4,
    transformers_backend.TRANSFORMERS_BACKEND,
)


def _by_architecture(families: tuple[Family, ...]) -> dict[str, Family]:
    table: dict[str, Family] = {}
    for family in families:
        for arch in family.architectures:
            if arch in table:
                raise RuntimeError(f"{arch} is read by both the {table[arch].name} and the {family.name} family")
            table[arch] = family
    return table


def _model_types(families: tuple[Family, ...]) -> dict[str, ModelTypeTraits]:
    table: dict[str, ModelTypeTraits] = {}
    for family in families:
        for model_type, traits in family.model_types.items():
            if table.get(model_type, traits) != traits:
                raise RuntimeError(f"model_type {model_type} has two sets of traits")
            table[model_type] = traits
    return table


#: ``config.json:architectures[0]`` -> the family that reads it.
BY_ARCHITECTURE: Mapping[str, Family] = _by_architecture(FAMILIES)
#: ``model_type`` -> what it decides on its own, whichever family reads the config.
MODEL_TYPES: Mapping[str, ModelTypeTraits] = _model_types(FAMILIES)
