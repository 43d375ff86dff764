"""NVIDIA Nemotron families: Nemotron-H and Llama-Nemotron (DeciLM).

Nemotron-H: Mamba-2 / attention / MLP / MoE layers by pattern. Llama-Nemotron: NAS blocks with
per-layer attention and MLP widths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from fitgate.sizing.config_reader import MAX_REASONABLE, ConfigReader
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.families.base import Family, FamilyLayers
from fitgate.sizing.families.common import attention, moe_from
from fitgate.sizing.model import Attention, DenseMLP, FeedForward, Layer, Mamba, Mixer

#: ``config.json:architectures[0]`` values read by the nemotron_h family (vllm/model_executor/models/registry.py).
NEMOTRON_H_ARCHITECTURES: tuple[str, ...] = ("NemotronHForCausalLM",)

#: ``config.json:architectures[0]`` values read by the decilm family (vllm/model_executor/models/registry.py).
DECILM_ARCHITECTURES: tuple[str, ...] = (
    # Llama-Nemotron (DeciLM / NAS): per-layer attention with its own KV heads or none, per-layer MLP width
    "DeciLMForCausalLM",
)


def _mamba2(text: ConfigReader, prefix: str = "mamba_") -> Mamba:
    def key(*names: str) -> str:
        for name in names:
            if text.has(name):
                return name
        return names[0]

    heads = text.int_(key(f"{prefix}num_heads", f"{prefix}n_heads", "mamba_num_heads"))
    head_dim = text.int_(key(f"{prefix}head_dim", f"{prefix}d_head", "mamba_head_dim"))
    return Mamba(
        version=2,
        d_inner=heads * head_dim,
        d_state=text.int_(key("ssm_state_size", f"{prefix}d_state", "mamba_d_state")),
        d_conv=text.int_(key("conv_kernel", f"{prefix}d_conv", "mamba_d_conv")),
        n_groups=text.int_(key("n_groups", f"{prefix}n_groups", "mamba_n_groups"), 1),
        num_heads=heads,
        head_dim=head_dim,
    )


#: ``layers_block_type`` names (Nemotron 3 configs; transformers 5 writes the second spelling).
_BLOCK_TYPE_CHARS = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}


def _family_nemotron_h(text: ConfigReader, model_type: str) -> FamilyLayers:
    pattern = text.str_("hybrid_override_pattern")
    block_types = text.list_("layers_block_type")
    if not pattern and block_types is not None:
        # Nemotron 3 configs give the per-layer kinds instead of the pattern string (transformers 5).
        unknown = next((t for t in block_types if t not in _BLOCK_TYPE_CHARS), None)
        if unknown is not None:
            raise SizingError(
                f"{text.prefix}:layers_block_type",
                unknown,
                "mamba, attention, mlp or moe (or linear_attention, full_attention)",
            )
        pattern = "".join(_BLOCK_TYPE_CHARS[t] for t in block_types)
    n = text.int_("num_hidden_layers", len(pattern) or None)
    if len(pattern) != n or not re.fullmatch(r"[M*\-E]+", pattern):
        raise SizingError(
            f"{text.prefix}:hybrid_override_pattern",
            pattern or None,
            f"{n} characters of M (mamba), * (attention), - (MLP)",
        )
    mamba = _mamba2(text)
    layers: list[Layer] = []
    for ch in pattern:
        if ch == "M":
            layers.append(Layer(mamba, None))
        elif ch == "*":
            layers.append(Layer(attention(text), None))
        elif ch == "E":
            # relu2 experts: up and down projections only (vllm nemotron_h.py NemotronHMoE)
            moe = moe_from(text, model_type)
            latent = text.int_("moe_latent_size", 0, minimum=0) if text.has("moe_latent_size") else 0
            layers.append(Layer(None, replace(moe, gated=False, latent_size=latent)))
        else:
            layers.append(Layer(None, DenseMLP(text.int_("intermediate_size"), gated=False)))
    return layers, {}


def _family_decilm(text: ConfigReader, model_type: str) -> FamilyLayers:
    """Llama-Nemotron (DeciLM) as vllm/model_executor/models/nemotron_nas.py (0.33.0) builds it.

    ``block_configs[i]`` gives each layer: ``attention.no_op`` (no attention, no cache, no input norm)
    or Llama attention with ``num_attention_heads // attention.n_heads_in_group`` KV heads (L142-160);
    ``ffn.no_op`` or a SwiGLU MLP of ``ffn.intermediate_size`` or, from ``ffn.ffn_mult``,
    ``int(2 x ffn_mult x hidden / 3)`` rounded up to 256 (L52-62, L162-182). vLLM builds no linear
    replacement (``replace_with_linear``), so such a block is refused.
    """
    n = text.int_("num_hidden_layers")
    blocks = text.list_("block_configs")
    if blocks is None or len(blocks) < n:
        raise SizingError(f"{text.prefix}:block_configs", None if blocks is None else len(blocks), f"{n} blocks")
    hidden = text.int_("hidden_size")
    heads = text.int_("num_attention_heads")
    head_dim = text.int_("head_dim") if text.has("head_dim") else hidden // heads
    layers = []
    for i, block in enumerate(blocks[:n]):
        where = f"{text.prefix}:block_configs[{i}]"
        if not isinstance(block, Mapping):
            raise SizingError(where, block, "an object with attention and ffn")
        parts = []
        for part in ("attention", "ffn"):
            value = block.get(part)
            if not isinstance(value, Mapping):
                raise SizingError(f"{where}.{part}", value, "an object")
            cfg = ConfigReader(value, f"{where}.{part}")
            if cfg.bool_("replace_with_linear", False):
                raise UnknownArchitectureError(f"{where}.{part}.replace_with_linear", True, "false (vLLM has none)")
            parts.append(cfg)
        att_cfg, ffn_cfg = parts
        mixer: Mixer | None = None
        if not att_cfg.bool_("no_op", False):
            group = att_cfg.int_("n_heads_in_group", limit=heads)
            if heads % group:
                raise SizingError(f"{att_cfg.prefix}.n_heads_in_group", group, f"a divisor of {heads} heads")
            mixer = Attention(heads, heads // group, head_dim, head_dim)
        ffn: FeedForward | None = None
        if not ffn_cfg.bool_("no_op", False):
            if ffn_cfg.has("ffn_mult"):
                width = int(2 * ffn_cfg.float_("ffn_mult", 1.0, maximum=1024) * hidden / 3)
                width = 256 * -(-width // 256)
            else:
                width = ffn_cfg.int_("intermediate_size", limit=MAX_REASONABLE["intermediate_size"])
            ffn = DenseMLP(width)
        layers.append(Layer(mixer, ffn))
    return layers, {}


NEMOTRON_H = Family("nemotron_h", NEMOTRON_H_ARCHITECTURES, _family_nemotron_h)
DECILM = Family("decilm", DECILM_ARCHITECTURES, _family_decilm)
