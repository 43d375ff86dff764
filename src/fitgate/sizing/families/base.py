"""The registry's types: what a model family module declares about the configs it reads.

A family is one layer layout as vLLM's model classes build it (vllm/model_executor/models/registry.py
names the classes). Its module reads the decoder layers from the config (:data:`LayerReader`) and says
what else about the architecture is its own: a rotary size other than ``head_dim``'s, a quantization
rewrite, tied embeddings, extra buffers. What a ``model_type`` alone decides, whichever family reads
the config (a LayerNorm with bias, projection biases, tied embeddings by default), is a
:class:`ModelTypeTraits` entry; the registry (:mod:`fitgate.sizing.families`) unites them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.model import Layer, PerLayerEmbedding, Quantization, TransformersBackend

__all__ = ["Family", "FamilyLayers", "LayerReader", "ModelTypeTraits"]

#: A family's decoder layers and its extras (``mtp_layers`` when the family reads them itself).
FamilyLayers = tuple[list[Layer], dict[str, int]]
#: Reads the text config (and its ``model_type``) into the decoder layers.
LayerReader = Callable[[ConfigReader, str], FamilyLayers]


@dataclass(frozen=True)
class ModelTypeTraits:
    """What a config's ``model_type`` decides on its own, whichever family reads the config.

    Attributes:
        tied_by_default: ``tie_word_embeddings`` defaults to true (transformers' config class default).
        always_tied: vLLM ties lm_head to the embedding whatever the config says.
        norm_has_bias: The decoder's norms are LayerNorms with a bias.
        attention_bias: The q/k/v projections have biases whatever the config says.
        attention_bias_key: A boolean config key that turns those biases on (false by default).
    """

    tied_by_default: bool = False
    always_tied: bool = False
    norm_has_bias: bool = False
    attention_bias: bool = False
    attention_bias_key: str | None = None


@dataclass(frozen=True, eq=False)
class Family:
    """One model family: the architectures vLLM serves with it and how to read their configs.

    Attributes:
        name: The family's name (``llama``, ``moe``, ``mla`` ...), as notes and docs call it.
        architectures: ``config.json:architectures[0]`` values read by this family.
        read_layers: The decoder layers (and extras) from the text config.
        rotary_dim: The rotary size when it is not ``head_dim x partial_rotary_factor`` (MLA: the rope
            part of the head); read after the generic one, which still validates the keys.
        quantization: Rewrites the checkpoint's parsed quantization (per-target formats, experts only).
        always_tied: vLLM ties lm_head to the embedding for every config of the family.
        norm_has_bias: The family's norms are LayerNorms with a bias.
        max_capture_sizes: ``model_type`` -> the largest CUDA-graph capture size the model class sets.
        per_layer_embedding: Reads a per-layer embedding table (Gemma 4 E2B/E4B).
        attention_residuals: Whether the config has attention residual layers (Kimi K3).
        model_types: What each ``model_type`` this family's module knows decides on its own.
        reads_attribute_names: Read the config as its class's attributes: each ``attribute_map`` name
            (GPTBigCode's ``hidden_size`` for ``n_embd``) readable, as vLLM's ``getattr`` reads it.
        served_by: How vLLM's Transformers modeling backend serves the architecture (architecture, model_type,
            whether it has experts); None: a native vLLM class.
    """

    name: str
    architectures: tuple[str, ...]
    read_layers: LayerReader
    rotary_dim: Callable[[ConfigReader], int] | None = None
    quantization: Callable[[ConfigReader, Quantization | None], Quantization | None] | None = None
    always_tied: bool = False
    norm_has_bias: bool = False
    max_capture_sizes: Mapping[str, int] = field(default_factory=dict)
    per_layer_embedding: Callable[[ConfigReader], PerLayerEmbedding | None] | None = None
    attention_residuals: Callable[[ConfigReader], bool] | None = None
    model_types: Mapping[str, ModelTypeTraits] = field(default_factory=dict)
    reads_attribute_names: bool = False
    served_by: Callable[[str, str, bool], TransformersBackend] | None = None
