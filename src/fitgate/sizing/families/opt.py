"""OPT (``facebook/opt-*``, vLLM's quickstart model): LayerNorms with bias, biased attention, a ReLU MLP of ``ffn_dim``.

vllm/model_executor/models/opt.py 0.34.0 (registry.py L194): ``OPTDecoderLayer`` holds ``OPTAttention`` (q, k, v and
out projections with ``enable_bias``) and ``fc1`` / ``fc2`` of ``ffn_dim`` (an ungated MLP); the lm_head is tied to
the embedding. Its learned position table (``max_position_embeddings + 2`` rows) and, where ``word_embed_proj_dim``
differs from ``hidden_size`` (opt-350m), ``project_in`` / ``project_out`` are not counted by the config-only estimate
(0.1-0.2 % of the weights); a checkpoint's own tensors are exact.
"""

from __future__ import annotations

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, dense_mlp
from fitgate.sizing.model import Layer

#: ``config.json:architectures[0]`` values read by the opt family (vllm/model_executor/models/registry.py).
ARCHITECTURES: tuple[str, ...] = ("OPTForCausalLM",)


def _family_opt(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    return [Layer(attention(text), dense_mlp(text, "ffn_dim", gated=False)) for _ in range(n)], {}


OPT = Family(
    "opt",
    ARCHITECTURES,
    _family_opt,
    norm_has_bias=True,
    model_types={"opt": ModelTypeTraits(tied_by_default=True, attention_bias=True)},
)
