"""Weight bytes per GPU, as vLLM's 'Model loading took X GiB' reports them.

A :class:`WeightInventory` is a compact list of the checkpoint's tensors, aggregated by decoder
layer and *role* (how tensor parallelism shards it). It is built either from real tensor metadata
(safetensors headers: exact) or from the architecture (estimated), and may be rescaled to a known
stored total (``model.safetensors.index.json`` ``total_size`` or per-dtype parameter counts).

:func:`weights_per_rank` then applies vLLM's loading rules for one (TP, PP) rank: vocab-parallel
embedding and lm_head padded to 64 rows, column/row-parallel linears and experts divided by TP,
replicated norms, routers and MLA latent projections, KV projections replicated when TP exceeds the
KV heads, layers partitioned over pipeline stages like ``get_pp_indices``, runtime ``--dtype`` and
``--quantization fp8`` casts, and the buffers vLLM allocates while loading (the rotary cos/sin cache
and MLA's absorbed ``kv_b_proj`` copies).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from fitgate.sizing.dtypes import MODEL_DTYPES, tensor_dtype_bytes
from fitgate.sizing.errors import SizingError
from fitgate.sizing.model import (
    MLA,
    Attention,
    CompressedSparseMLA,
    DenseMLP,
    LinearAttention,
    Mamba,
    ModelArchitecture,
    MoE,
    Quantization,
    ShortConv,
)
from fitgate.sizing.units import cdiv, round_up

VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE


class Role(StrEnum):
    """How a tensor is placed across tensor-parallel ranks."""

    EMBED = "embed"  # vocab-parallel rows, first pipeline stage
    EMBED_PER_LAYER = "embed_per_layer"  # Gemma 4 E2B/E4B per-layer table: vocab-parallel, every stage
    LM_HEAD = "lm_head"  # vocab-parallel rows, last pipeline stage
    COLUMN = "column"  # output dim split by TP
    ROW = "row"  # input dim split by TP
    KV_PROJ = "kv_proj"  # split by TP, replicated when TP > KV heads
    EXPERT = "expert"  # MoE experts, split by TP (all experts resident)
    REPLICATED = "replicated"  # norms, routers, MLA latent projections
    VISION = "vision"  # multimodal encoder, first stage, split by TP
    SKIPPED = "skipped"  # stored but not loaded (MTP layers, rotary buffers)


@dataclass(frozen=True)
class WeightEntry:
    """Tensors of one layer and role, aggregated.

    Attributes:
        layer: Decoder layer index, or None for embeddings, head, final norm and vision tower.
        role: Placement across ranks.
        numel: Elements (logical parameters; packed 4-bit counts each 4-bit value once).
        stored_bytes: Bytes in the checkpoint.
        quantized: Stored in a quantized format (kept as stored when loading).
        linear: A linear layer's weight, which runtime ``--quantization fp8`` would quantize.
    """

    layer: int | None
    role: Role
    numel: int
    stored_bytes: int
    quantized: bool = False
    linear: bool = False


@dataclass(frozen=True)
class WeightInventory:
    """The checkpoint's tensors, aggregated; ``source`` says how exact it is."""

    entries: tuple[WeightEntry, ...]
    source: str  # "safetensors" (exact per tensor), "total" (scaled to a known total), "config" (estimated)

    @property
    def stored_bytes(self) -> int:
        """Total bytes of the checkpoint's tensors."""
        return sum(e.stored_bytes for e in self.entries)

    @property
    def estimated(self) -> bool:
        """True when no real size of the checkpoint was known."""
        return self.source == "config"

    def scaled_to(self, total_bytes: int, source: str = "total") -> WeightInventory:
        """The same shape of inventory, rescaled so that the stored bytes add up to ``total_bytes``."""
        current = self.stored_bytes
        if total_bytes <= 0 or current <= 0:
            raise SizingError("weights.total_size", total_bytes, "a positive number of bytes")
        ratio = total_bytes / current
        return WeightInventory(
            tuple(
                WeightEntry(
                    e.layer,
                    e.role,
                    round(e.numel * ratio),
                    round(e.stored_bytes * ratio),
                    e.quantized,
                    e.linear,
                )
                for e in self.entries
            ),
            source,
        )


# --------------------------------------------------------------------------------------------
# Inventory from the architecture (no weight metadata)


class _Builder:
    def __init__(self, arch: ModelArchitecture) -> None:
        self.arch = arch
        self.dtype_bytes = MODEL_DTYPES[arch.dtype]
        self.quant = arch.quantization
        self.rows: dict[tuple[int | None, Role, bool, bool], list[int]] = {}

    def add(self, layer: int | None, role: Role, numel: int, linear: bool = False) -> None:
        stored, quantized = self._stored(role, numel, linear)
        key = (layer, role, quantized, linear)
        acc = self.rows.setdefault(key, [0, 0])
        acc[0] += numel
        acc[1] += stored

    def _stored(self, role: Role, numel: int, linear: bool) -> tuple[int, bool]:
        q = self.quant
        if q is None or not linear or (q.experts_only and role is not Role.EXPERT):
            return numel * self.dtype_bytes, False
        if role is Role.EXPERT and q.experts is not None:
            return quantized_bytes(numel, q.experts), True
        return quantized_bytes(numel, q), True

    def inventory(self) -> WeightInventory:
        return WeightInventory(
            tuple(WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3]) for k, v in self.rows.items()),
            "config",
        )


def quantized_bytes(numel: int, q: Quantization) -> int:
    """Bytes of ``numel`` weights stored with ``q``: packed values plus scales (and zero points)."""
    values = numel * q.weight_bits / 8
    scales = (numel / q.group_size if q.group_size else numel / 4096) * q.scale_bytes
    return int(values + scales)


def _attention_params(b: _Builder, i: int, m: Attention, hidden: int) -> None:
    q_out = m.num_heads * m.head_dim * (2 if m.gated_q else 1)
    # K is kv_heads x head_dim, V kv_heads x v_head_dim (QKVParallelLinear ``v_head_size``, MiMo-V2 192 / 128)
    kv_out = m.num_kv_heads * m.head_dim + (0 if m.k_eq_v else m.num_kv_heads * m.v_head_dim)
    b.add(i, Role.COLUMN, hidden * q_out, linear=True)
    b.add(i, Role.KV_PROJ, hidden * kv_out, linear=True)
    b.add(i, Role.ROW, m.num_heads * m.v_head_dim * hidden, linear=True)
    if b.arch.attention_bias:
        b.add(i, Role.COLUMN, q_out + kv_out)
    if m.sinks:
        b.add(i, Role.COLUMN, m.num_heads)
    if m.index_head_dim:
        # MiniMax M3 sparse layers: MinimaxM3QKVParallelLinearWithIndexer (layers/linear.py 0.33.0
        # L1365-1450) adds index_q, one index head per KV head and sharded like K/V, and index_k,
        # a single head replicated on every rank; plus index_q_norm / index_k_norm
        # (minimax_m3/nvidia/model.py L480-485).
        b.add(i, Role.KV_PROJ, hidden * m.num_kv_heads * m.index_head_dim, linear=True)
        b.add(i, Role.REPLICATED, hidden * m.index_head_dim, linear=True)
        b.add(i, Role.REPLICATED, 2 * m.index_head_dim)
    if b.arch.model_type in {
        "qwen3",
        "qwen3_moe",
        "qwen3_next",
        "gemma3",
        "gemma3_text",
        "gemma4_text",
        "lfm2",
        "lfm2_moe",
        "minimax_m3",
        "minimax_m3_vl",
    }:
        b.add(i, Role.REPLICATED, 2 * m.head_dim)  # q_norm, k_norm
    elif m.sharded_qk_norms:
        b.add(i, Role.COLUMN, m.num_heads * m.head_dim)  # q_norm (heads, head_dim)
        b.add(i, Role.KV_PROJ, m.num_kv_heads * m.head_dim)  # k_norm (kv_heads, head_dim)
    elif b.arch.model_type == "olmoe":
        # olmoe.py (0.33.0) L164-165: q_norm / k_norm span all heads, RMSNorm(heads x head_dim) and
        # RMSNorm(kv_heads x head_dim), unsharded (q and k are all-gathered first, L193-195).
        b.add(i, Role.REPLICATED, (m.num_heads + m.num_kv_heads) * m.head_dim)


def _mla_params(b: _Builder, i: int, m: MLA, hidden: int) -> None:
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        b.add(i, Role.REPLICATED, hidden * m.q_lora_rank, linear=True)  # q_a_proj
        b.add(i, Role.REPLICATED, m.q_lora_rank)  # q_a_layernorm
        b.add(i, Role.COLUMN, m.q_lora_rank * m.num_heads * qk_head, linear=True)  # q_b_proj
    else:
        b.add(i, Role.COLUMN, hidden * m.num_heads * qk_head, linear=True)  # q_proj
    b.add(i, Role.REPLICATED, hidden * (m.kv_lora_rank + m.qk_rope_head_dim), linear=True)  # kv_a_proj_with_mqa
    b.add(i, Role.REPLICATED, m.kv_lora_rank)  # kv_a_layernorm
    b.add(i, Role.COLUMN, m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim), linear=True)
    b.add(i, Role.ROW, m.num_heads * m.v_head_dim * hidden, linear=True)
    if m.output_gate:
        # Kimi K3: the gate shard of fused_qkv_a_g_proj (or g_proj), column-parallel (mla.py 0.33.0 L217-238, L277-285)
        b.add(i, Role.COLUMN, hidden * m.num_heads * m.v_head_dim, linear=True)


def _dsv4_params(b: _Builder, i: int, m: CompressedSparseMLA, hidden: int) -> None:
    """DeepSeek V4 attention, compressors, indexer and hyper-connections (vllm/models/deepseek_v4 0.33.0).

    attention.py L252-286: ``fused_wqa_wkv`` (replicated, hidden -> q_lora + head_dim), ``q_norm``,
    ``kv_norm``, ``wq_b`` (column), ``wo_a`` (column, heads x head_dim / groups -> groups x o_lora),
    ``wo_b`` (row), one sink per head (L248). compressor.py L262-281: ``ape`` (ratio x coff x dim),
    unquantized replicated ``fused_wkv_wgate`` (hidden -> 2 x coff x dim), ``norm``; ``coff`` is 2 at
    ratio 4. The ratio-4 indexer (attention.py L302-323, L989-1004): replicated ``wq_b``
    (q_lora -> heads x index_head_dim), unquantized ``weights_proj`` and its own compressor.
    nvidia/model.py L617-665: ``hc_attn_fn`` / ``hc_ffn_fn`` ((2 + hc) x hc by hc x hidden) with
    their bases and scales.
    """
    b.add(i, Role.REPLICATED, hidden * (m.q_lora_rank + m.head_dim), linear=True)
    b.add(i, Role.REPLICATED, m.q_lora_rank + m.head_dim)
    b.add(i, Role.COLUMN, m.q_lora_rank * m.num_heads * m.head_dim, linear=True)
    b.add(i, Role.COLUMN, m.num_heads * m.head_dim * m.o_lora_rank, linear=True)  # wo_a: (H*D/G) x (G*o_lora)
    b.add(i, Role.ROW, m.o_groups * m.o_lora_rank * hidden, linear=True)
    b.add(i, Role.COLUMN, m.num_heads)

    def compressor(dim: int) -> None:
        coff = 2 if m.compress_ratio == 4 else 1
        b.add(i, Role.REPLICATED, m.compress_ratio * coff * dim + hidden * 2 * coff * dim + dim)

    if m.compress_ratio > 1:
        compressor(m.head_dim)
    if m.compress_ratio == 4:
        b.add(i, Role.REPLICATED, m.q_lora_rank * m.index_n_heads * m.index_head_dim, linear=True)
        b.add(i, Role.REPLICATED, hidden * m.index_n_heads)
        compressor(m.index_head_dim)
    mix = (2 + m.hc_mult) * m.hc_mult
    b.add(i, Role.REPLICATED, 2 * (mix * m.hc_mult * hidden + mix + 3))


def _mamba_params(b: _Builder, i: int, m: Mamba, hidden: int) -> None:
    if m.version == 1:
        b.add(i, Role.COLUMN, hidden * 2 * m.d_inner, linear=True)
        b.add(i, Role.COLUMN, m.d_inner * m.d_conv + m.d_inner * (m.dt_rank + 2 * m.d_state))
        b.add(i, Role.COLUMN, m.dt_rank * m.d_inner + m.d_inner * m.d_state + 2 * m.d_inner)
    else:
        conv_dim = m.d_inner + 2 * m.n_groups * m.d_state
        b.add(i, Role.COLUMN, hidden * (m.d_inner + conv_dim + m.num_heads), linear=True)
        b.add(i, Role.COLUMN, conv_dim * m.d_conv + 3 * m.num_heads + m.d_inner)
    b.add(i, Role.ROW, m.d_inner * hidden, linear=True)


def _kda_params(b: _Builder, i: int, m: LinearAttention, hidden: int) -> None:
    """Kimi K3's KDA layer (vllm/models/kimi_k3/nvidia/kda.py 0.33.0 ``KimiK3DeltaAttention`` L593-883).

    ``in_proj_qkvgfab`` (L634-662): q, k, v, g of ``heads x head_dim`` each and beta (``heads``)
    split by TP, ``f_a`` (``head_dim``) replicated on every rank (``replicated_shard_id=4``); its
    16-element row padding per rank (L640-652) is left out. ``f_b_proj`` (L664-670, column,
    ``head_dim -> heads x head_dim``); ``dt_bias`` (L671-673), the packed q/k/v ``conv1d`` (L678-685)
    and ``A_log`` (L814-816), all fp32 in vLLM but counted here at the model dtype; ``o_norm``
    (L860, ``head_dim``); ``o_proj`` (L878-884, row).
    """
    proj = m.num_v_heads * m.head_v_dim
    b.add(i, Role.COLUMN, hidden * (4 * proj + m.num_v_heads), linear=True)
    b.add(i, Role.REPLICATED, hidden * m.head_v_dim, linear=True)
    b.add(i, Role.COLUMN, m.head_v_dim * proj, linear=True)
    b.add(i, Role.COLUMN, proj + 3 * proj * m.conv_kernel + m.num_v_heads)
    b.add(i, Role.REPLICATED, m.head_v_dim)
    b.add(i, Role.ROW, proj * hidden, linear=True)


def _linear_attention_params(b: _Builder, i: int, m: LinearAttention, hidden: int) -> None:
    if m.kda:
        _kda_params(b, i, m, hidden)
        return
    key_dim, value_dim = m.num_k_heads * m.head_k_dim, m.num_v_heads * m.head_v_dim
    b.add(i, Role.COLUMN, hidden * (2 * key_dim + 2 * value_dim + 2 * m.num_v_heads), linear=True)
    b.add(i, Role.COLUMN, (2 * key_dim + value_dim) * m.conv_kernel + 2 * m.num_v_heads)
    b.add(i, Role.REPLICATED, m.head_v_dim)
    b.add(i, Role.ROW, value_dim * hidden, linear=True)


def _ffn_params(b: _Builder, i: int, ffn: DenseMLP | MoE, hidden: int) -> None:
    if isinstance(ffn, DenseMLP):
        mats = 3 if ffn.gated else 2
        b.add(i, Role.COLUMN, hidden * ffn.intermediate_size * (mats - 1), linear=True)
        b.add(i, Role.ROW, ffn.intermediate_size * hidden, linear=True)
        if not ffn.gated:
            b.add(i, Role.COLUMN, ffn.intermediate_size + hidden)  # fc1/fc2 biases
        return
    mats = 3 if ffn.gated else 2
    width = ffn.latent_size or hidden
    b.add(i, Role.EXPERT, ffn.num_experts * mats * width * ffn.expert_intermediate_size, linear=True)
    if ffn.latent_size:
        # fc1/fc2 latent projections (Kimi K3: routed_expert_down_proj / up_proj, model.py 0.33.0 L476-504)
        b.add(i, Role.REPLICATED, 2 * hidden * ffn.latent_size, linear=True)
        if ffn.latent_norm:
            b.add(i, Role.REPLICATED, ffn.latent_size)  # routed_expert_norm
    if b.arch.model_type == "gpt_oss":
        b.add(i, Role.EXPERT, ffn.num_experts * (2 * ffn.expert_intermediate_size + hidden))  # biases
    b.add(i, Role.REPLICATED, hidden * ffn.num_experts + ffn.num_experts)  # router
    if ffn.shared_intermediate_size:
        b.add(i, Role.COLUMN, (mats - 1) * hidden * ffn.shared_intermediate_size, linear=True)
        b.add(i, Role.ROW, ffn.shared_intermediate_size * hidden, linear=True)


def inventory_from_architecture(arch: ModelArchitecture) -> WeightInventory:
    """Estimate the checkpoint's tensors from the architecture alone (standard layouts)."""
    b = _Builder(arch)
    hidden = arch.hidden_size
    norms_per_layer = 4 if arch.model_type in {"gemma2", "gemma3", "gemma3_text", "gemma4_text"} else 2
    if arch.model_type in {"cohere", "cohere2"}:
        norms_per_layer = 1  # parallel attention + MLP after one input_layernorm (commandr.py 0.33.0 L309)
    for i, layer in enumerate(arch.layers):
        m = layer.mixer
        if isinstance(m, Attention):
            _attention_params(b, i, m, hidden)
        elif isinstance(m, MLA):
            _mla_params(b, i, m, hidden)
        elif isinstance(m, CompressedSparseMLA):
            _dsv4_params(b, i, m, hidden)
        elif isinstance(m, Mamba):
            _mamba_params(b, i, m, hidden)
        elif isinstance(m, LinearAttention):
            _linear_attention_params(b, i, m, hidden)
        elif isinstance(m, ShortConv):
            # lfm2.py ShortConv: in_proj hidden -> 3 x dim (B, C, x), depthwise conv1d, out_proj dim -> hidden
            b.add(i, Role.COLUMN, hidden * 3 * m.dim, linear=True)
            b.add(i, Role.COLUMN, m.dim * m.kernel)
            b.add(i, Role.ROW, m.dim * hidden, linear=True)
        if layer.ffn is not None:
            _ffn_params(b, i, layer.ffn, hidden)
        parts = (m is not None) + (layer.ffn is not None)
        norm_numel = hidden * (norms_per_layer if parts == 2 else 1)
        b.add(i, Role.REPLICATED, norm_numel * (2 if arch.norm_has_bias else 1))
        if arch.attn_res:
            # Kimi K3 attention residuals: self_attention_res_norm, mlp_res_norm and two hidden -> 1
            # ReplicatedLinear without quantization (model.py 0.33.0 L796-821)
            b.add(i, Role.REPLICATED, 4 * hidden)
        if arch.per_layer_embedding is not None:
            # gemma4.py (0.33.0) L682-703: per_layer_input_gate (hidden -> PLE) and per_layer_projection
            # (PLE -> hidden) are ReplicatedLinear; post_per_layer_input_norm is RMSNorm(hidden).
            ple = arch.per_layer_embedding.hidden_size
            b.add(i, Role.REPLICATED, 2 * hidden * ple, linear=True)
            b.add(i, Role.REPLICATED, hidden)
    b.add(None, Role.EMBED, arch.vocab_size * hidden)
    if arch.per_layer_embedding is not None:
        # gemma4.py (0.33.0) L1022-1052: embed_tokens_per_layer (VocabParallelEmbedding of
        # vocab_size_per_layer_input x PLE * layers), per_layer_model_projection (ColumnParallelLinear
        # hidden -> PLE * layers) and per_layer_projection_norm (RMSNorm(PLE)).
        ple, total = arch.per_layer_embedding.hidden_size, arch.per_layer_embedding.hidden_size * arch.num_layers
        b.add(None, Role.EMBED_PER_LAYER, arch.per_layer_embedding.vocab_size * total)
        b.add(None, Role.COLUMN, hidden * total, linear=True)
        b.add(None, Role.REPLICATED, ple)
    if not arch.tie_word_embeddings:
        b.add(None, Role.LM_HEAD, arch.vocab_size * hidden)
    b.add(None, Role.REPLICATED, hidden * (2 if arch.norm_has_bias else 1))  # final norm (LayerNorm: + bias)
    if arch.attn_res:
        b.add(None, Role.REPLICATED, 2 * hidden)  # output_attn_res_norm / _proj (model.py 0.33.0 L1003-1015)
    if arch.vision is not None:
        b.add(None, Role.VISION, arch.vision.num_params + arch.vision.hidden_size * hidden)
    if arch.mtp_layers:
        # Multi-token-prediction layers are stored but vLLM does not load them without speculative decoding.
        last = arch.layers[-1]
        per_layer = _Builder(arch)
        if isinstance(last.mixer, MLA):
            _mla_params(per_layer, 0, last.mixer, hidden)
        elif isinstance(last.mixer, CompressedSparseMLA):
            _dsv4_params(per_layer, 0, last.mixer, hidden)
        elif isinstance(last.mixer, Attention):
            _attention_params(per_layer, 0, last.mixer, hidden)
        if last.ffn is not None:
            _ffn_params(per_layer, 0, last.ffn, hidden)
        numel = sum(v[0] for v in per_layer.rows.values()) + 2 * hidden * hidden
        stored = sum(v[1] for v in per_layer.rows.values()) + 2 * hidden * hidden * b.dtype_bytes
        acc = b.rows.setdefault((None, Role.SKIPPED, False, False), [0, 0])
        acc[0] += numel * arch.mtp_layers
        acc[1] += stored * arch.mtp_layers
    return b.inventory()


# --------------------------------------------------------------------------------------------
# Inventory from real tensor metadata (safetensors headers)

_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_QUANT_SUFFIXES = (
    "qweight",
    "qzeros",
    "scales",
    "g_idx",
    "weight_scale",
    "weight_scale_inv",
    "weight_packed",
    "weight_zero_point",
    "weight_shape",
    "input_scale",
    "weight_global_scale",
    "_blocks",
    "_scales",
)


def classify_tensor(name: str, num_layers: int) -> tuple[int | None, Role]:
    """(layer, role) of a Hugging Face tensor name, by the standard module names."""
    lowered = name.lower()
    if "rotary_emb.inv_freq" in lowered or lowered.startswith("mtp.") or ".mtp." in lowered:
        return None, Role.SKIPPED
    if re.search(
        r"(^|\.)(vision_tower|vision_model|visual|vit|image_newline|multi_modal_projector|mm_projector|vision_encoder"
        r"|audio_tower|embed_audio)\b",
        lowered,
    ):
        return None, Role.VISION
    match = _LAYER_RE.search(lowered)
    layer = int(match.group(1)) if match else None
    if layer is not None and layer >= num_layers:
        return None, Role.SKIPPED  # e.g. DeepSeek-V3's MTP layer 61
    if layer is None:
        if "embed_tokens_per_layer" in lowered:
            return None, Role.EMBED_PER_LAYER  # Gemma 4 E2B/E4B (gemma4.py 0.33.0 L1022-1028)
        if "per_layer_model_projection" in lowered:
            return None, Role.COLUMN  # ColumnParallelLinear (gemma4.py 0.33.0 L1039-1047)
        if any(k in lowered for k in ("embed_tokens", "wte.", "word_embeddings", "tok_embeddings", "embedding.weight")):
            return None, Role.EMBED
        if lowered.startswith("lm_head") or lowered.startswith("output.") or ".lm_head." in lowered:
            return None, Role.LM_HEAD
        return None, Role.REPLICATED
    if "norm" in lowered or ".ln_" in lowered or "layernorm" in lowered:
        return layer, Role.REPLICATED
    if any(k in lowered for k in ("kv_a_proj_with_mqa", "q_a_proj", ".routed_expert_", "_res_proj.")):
        return layer, Role.REPLICATED
    if ".per_layer_input_gate." in lowered or ".per_layer_projection." in lowered:
        return layer, Role.REPLICATED  # Gemma 4 PLE: ReplicatedLinear (gemma4.py 0.33.0 L682-697)
    if ".experts." in lowered and "shared_expert" not in lowered:
        return layer, Role.EXPERT
    if re.search(r"\.(gate|router)\.(weight|bias|e_score_correction_bias)$", lowered) or "mlp.router" in lowered:
        return layer, Role.REPLICATED
    if re.search(r"\.(k_proj|v_proj)\.", lowered):
        return layer, Role.KV_PROJ
    if re.search(r"\.(o_proj|down_proj|out_proj|dense|fc2|w2|c_proj|wo)\.", lowered):
        return layer, Role.ROW
    return layer, Role.COLUMN


def inventory_from_tensors(tensors: Iterable[tuple[str, str, Sequence[int]]], num_layers: int) -> WeightInventory:
    """Aggregate real tensors ``(name, dtype, shape)`` from safetensors headers into an inventory.

    ``num_layers`` is the model's decoder depth: tensors of deeper layers (MTP heads) are skipped.
    """
    rows: dict[tuple[int | None, Role, bool, bool], list[int]] = {}
    for name, dtype, shape in tensors:
        numel = 1
        for dim in shape:
            if not isinstance(dim, int) or dim < 0:
                raise SizingError(f"safetensors:{name}.shape", list(shape), "a list of non-negative integers")
            numel *= dim
        elem = tensor_dtype_bytes(dtype, f"safetensors:{name}.dtype")
        layer, role = classify_tensor(name, num_layers)
        lowered = name.lower()
        quantized = lowered.endswith(_QUANT_SUFFIXES) or dtype.upper() in {
            "I32",
            "U8",
            "I8",
            "F8_E4M3",
            "F8_E5M2",
            "U32",
        }
        linear = (
            not quantized and lowered.endswith(".weight") and role in {Role.COLUMN, Role.ROW, Role.KV_PROJ, Role.EXPERT}
        ) or any(k in lowered for k in ("kv_a_proj_with_mqa.weight", "q_a_proj.weight", "per_layer_input_gate.weight"))
        linear = linear or (not quantized and "per_layer_projection.weight" in lowered and layer is not None)
        key = (layer, role, quantized, linear)
        acc = rows.setdefault(key, [0, 0])
        acc[0] += numel
        acc[1] += int(numel * elem)
    if not rows:
        raise SizingError("safetensors", "no tensors", "at least one tensor in the checkpoint headers")
    return WeightInventory(
        tuple(WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3]) for k, v in rows.items()), "safetensors"
    )


def bytes_from_dtype_counts(counts: Mapping[str, int]) -> int:
    """Stored bytes from per-dtype parameter counts (the Hub's ``safetensors.parameters``)."""
    total = 0
    for dtype, count in counts.items():
        if not isinstance(count, int) or count < 0:
            raise SizingError(f"safetensors.parameters.{dtype}", count, "a non-negative integer")
        total += int(count * tensor_dtype_bytes(dtype, f"safetensors.parameters.{dtype}"))
    return total


# --------------------------------------------------------------------------------------------
# Per-rank loaded bytes


def _layer_kv_factor(arch: ModelArchitecture, layer: int | None, tp: int, default: float) -> float:
    """Share of a layer's K/V projections one rank holds: its own KV heads (MiMo-V2: 4 global, 8 sliding)."""
    mixer = arch.layers[layer].mixer if layer is not None and layer < arch.num_layers else None
    if isinstance(mixer, Attention) and mixer.num_kv_heads:
        return max(1, mixer.num_kv_heads // tp) / mixer.num_kv_heads
    return default


def _kv_shared(arch: ModelArchitecture, layer: int) -> bool:
    mixer = arch.layers[layer].mixer if layer < arch.num_layers else None
    return isinstance(mixer, Attention) and mixer.kv_shared


def pp_layer_ranges(num_layers: int, pp: int) -> list[range]:
    """VLLM's ``get_pp_indices``: equal shares, the remainder to the stages before the last."""
    if pp < 1 or pp > num_layers:
        raise SizingError("pipeline_parallel_size", pp, f"an integer from 1 to num_hidden_layers ({num_layers})")
    per = num_layers // pp
    parts = [per] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    out, start = [], 0
    for n in parts:
        out.append(range(start, start + n))
        start += n
    return out


@dataclass(frozen=True)
class RankWeights:
    """Bytes one GPU holds after loading."""

    total_bytes: int
    tensors_bytes: int
    rotary_cache_bytes: int
    mla_absorbed_bytes: int
    embedding_bytes: int


#: Gemma 4's per-layer table is in none of these: Gemma4Model builds it on every pipeline stage
#: (gemma4.py 0.33.0 L1018-1028, no ``is_first_rank`` test).
_FIRST_STAGE_ROLES = frozenset({Role.EMBED, Role.VISION})
#: Models whose vLLM class builds the token embedding on every pipeline stage (no ``PPMissingLayer``):
#: Gemma 4 (gemma4.py 0.33.0 L1007-1012; its lm_head is tied to that stage's own embedding, L1447-1454).
_EMBED_ON_EVERY_STAGE = frozenset({"gemma4", "gemma4_text"})
_LAST_STAGE_ROLES = frozenset({Role.LM_HEAD, Role.REPLICATED})
_VOCAB_ROLES = frozenset({Role.EMBED, Role.LM_HEAD})
_TP_SPLIT_ROLES = frozenset({Role.COLUMN, Role.ROW, Role.VISION})


def _expert_padding(arch: ModelArchitecture, tp: int, mxfp4: bool) -> float:
    """How much larger one rank's experts are than ``1 / TP`` of the checkpoint's.

    ``tp`` is the MoE layers' TP (1 under expert parallelism, TP x DP without; fitgate.sizing.parallel).
    Kimi K3 without expert parallelism pads ``moe_intermediate_size`` to
    ``min_intermediate_per_partition x TP`` when ``moe_intermediate_size // TP`` is below it
    (vllm/models/kimi_k3/nvidia/model.py 0.33.0 L418-427; with EP its TP is 1: no padding). ``mxfp4``:
    vLLM's MXFP4 kernels then pad the rank's intermediate to 128 and the expert width to 256
    (Hopper triton; fused_moe/oracle/mxfp4.py 0.33.0 L837-873 for the other backends: 128 / 128-256).
    """
    moe = next((layer.ffn for layer in arch.layers if isinstance(layer.ffn, MoE)), None)
    if moe is None:
        return 1.0
    inter = moe.expert_intermediate_size // tp
    local = inter
    if tp > 1 and moe.min_intermediate_per_partition and local < moe.min_intermediate_per_partition:
        local = moe.min_intermediate_per_partition
    width = moe.latent_size or arch.hidden_size
    padded_width = width
    if mxfp4:
        local, padded_width = round_up(local, 128), round_up(width, 256)
    return (local * padded_width) / (inter * width)


def weights_per_rank(
    arch: ModelArchitecture,
    inventory: WeightInventory,
    *,
    tp: int,
    pp: int,
    pp_rank: int,
    dtype: str,
    runtime_quantization: Quantization | None = None,
    pooling: bool = False,
    drafter_layers: tuple[int, ...] = (),
    moe_tp: int | None = None,
    ep_size: int = 1,
    redundant_experts: int = 0,
    shared_experts_replicated: bool = False,
) -> RankWeights:
    """Bytes of weights one GPU (tensor rank 0 of pipeline stage ``pp_rank``) holds after loading.

    ``pooling``: vLLM's pooling adapter builds the model without its ``ParallelLMHead`` (replaced by
    ``StageMissingLayer``, model_executor/models/adapters.py 0.28.0 L145-152) and does not load a
    stored ``lm_head.weight``.

    ``drafter_layers``: an MTP drafter on this (the last) stage, one model layer index per drafter layer,
    each sized as that layer plus its ``eh_proj`` (unquantized ``2 x hidden -> hidden``) and three RMSNorms;
    with pipeline parallelism it loads its own embedding (:mod:`fitgate.sizing.speculative`).

    Expert and data parallelism (:mod:`fitgate.sizing.parallel`): ``moe_tp`` is the TP the experts are
    sharded over (default ``tp``; TP x DP without EP, 1 with it); ``ep_size`` > 1 gives this GPU whole
    experts, the fullest rank's ``ceil((E + redundant_experts) / ep_size)`` of each MoE layer's ``E``;
    ``shared_experts_replicated`` (sequence-parallel MoE) keeps the shared experts whole on every GPU.
    """
    dtype_bytes = MODEL_DTYPES[dtype]
    stages = pp_layer_ranges(arch.num_layers, pp)
    layers = stages[pp_rank]
    first, last = pp_rank == 0, pp_rank == pp - 1
    kv = arch.kv_heads
    kv_factor = (max(1, kv // tp) / kv) if kv else 1 / tp
    vocab_factor = cdiv(round_up(arch.vocab_size, VOCAB_PADDING), tp) / arch.vocab_size
    mtp = moe_tp or tp
    expert_padding = _expert_padding(arch, mtp, mxfp4=False)
    mxfp4 = _expert_padding(arch, mtp, mxfp4=bool(arch.quantization and arch.quantization.method == "mxfp4"))
    ple = arch.per_layer_embedding
    ple_factor = cdiv(round_up(ple.vocab_size, VOCAB_PADDING), tp) / ple.vocab_size if ple else 1.0
    total = 0.0
    embedding = 0.0
    for e in inventory.entries:
        role = e.role
        if role is Role.SKIPPED or (role is Role.LM_HEAD and (arch.tie_word_embeddings or pooling)):
            # A tied model's lm_head is its embedding: vLLM skips a stored lm_head.weight while loading
            # (``if self.config.tie_word_embeddings and "lm_head.weight" in name: continue``).
            continue
        if role is Role.KV_PROJ and e.layer is not None and _kv_shared(arch, e.layer):
            # Gemma 4 KV-shared layers build q_proj only; their stored k_proj / v_proj are dropped
            # (gemma4.py 0.33.0 L409-417, weights mapper L119-124).
            continue
        copies = 1
        if e.layer is None:
            every_stage = role is Role.EMBED and arch.model_type in _EMBED_ON_EVERY_STAGE
            if (role in _FIRST_STAGE_ROLES and not first and not every_stage) or (
                role in _LAST_STAGE_ROLES and not last
            ):
                continue
        else:
            copies = (e.layer in layers) + drafter_layers.count(e.layer)
            if not copies:
                continue
        if e.quantized:
            size = float(e.stored_bytes)
        elif runtime_quantization is not None and e.linear and role is not Role.EMBED:
            size = float(quantized_bytes(e.numel, runtime_quantization))
        else:
            size = float(e.numel * dtype_bytes)
        if role in _VOCAB_ROLES:
            size *= vocab_factor
            embedding += size
        elif role is Role.EMBED_PER_LAYER:
            size *= ple_factor
        elif role in _TP_SPLIT_ROLES:
            size /= tp
        elif role is Role.EXPERT:
            size = size * _expert_share(arch, e.layer, mtp, ep_size, redundant_experts)
            size *= mxfp4 if e.quantized else expert_padding
        elif role is Role.KV_PROJ:
            size *= _layer_kv_factor(arch, e.layer, tp, kv_factor)
        total += size * copies
    # One copy of the token embedding on this rank, for the stages that build another one.
    embed_copy = sum(e.numel for e in inventory.entries if e.role is Role.EMBED) * dtype_bytes * vocab_factor
    # The last stage builds its own lm_head from the tied embedding (Gemma 4: that stage's own embedding is it).
    tied_head = arch.tie_word_embeddings and not pooling and arch.model_type not in _EMBED_ON_EVERY_STAGE
    # An MTP drafter has no embedding to share on the last stage (llm_base_proposer.py 0.33.0 L1424, L1505-1509).
    copies_of_embed = (tied_head + bool(drafter_layers)) if pp > 1 and last and not first else 0
    total += copies_of_embed * embed_copy
    embedding += copies_of_embed * embed_copy
    if drafter_layers:
        hidden = arch.hidden_size
        total += len(drafter_layers) * (2 * hidden * hidden + 3 * hidden) * dtype_bytes
    rotary = arch.rope_cache_positions * arch.rotary_dim * dtype_bytes
    absorbed = 0
    for i in (*layers, *drafter_layers):
        m = arch.layers[i].mixer
        if isinstance(m, MLA):
            # MLA backends keep W_UK / W_UV copies of kv_b_proj, dequantized, next to it.
            absorbed += m.kv_lora_rank * (m.num_heads // tp) * (m.qk_nope_head_dim + m.v_head_dim) * dtype_bytes
    if shared_experts_replicated and tp > 1:
        total += (1 - 1 / tp) * _shared_expert_bytes(arch, layers, dtype_bytes, runtime_quantization)
    tensors = int(total)
    return RankWeights(tensors + rotary + absorbed, tensors, rotary, absorbed, int(embedding))


def _expert_share(arch: ModelArchitecture, layer: int | None, moe_tp: int, ep_size: int, redundant: int) -> float:
    """The part of a layer's stored experts one GPU holds.

    Without EP: ``1 / moe_tp`` of every expert. With EP: whole experts, ``ceil((E + redundant) / ep)``
    of the layer's ``E`` on the fullest rank (``determine_expert_map``, expert_map_manager.py 0.33.0
    L71-74; redundant experts are copies of stored ones, fused_moe/layer.py L76-89).
    """
    if ep_size <= 1:
        return 1 / moe_tp
    ffn = arch.layers[layer].ffn if layer is not None and layer < arch.num_layers else None
    moe = ffn if isinstance(ffn, MoE) else next((x.ffn for x in arch.layers if isinstance(x.ffn, MoE)), None)
    if moe is None or not moe.num_experts:
        return 1 / ep_size
    return cdiv(moe.num_experts + redundant, ep_size) / moe.num_experts


def _shared_expert_bytes(
    arch: ModelArchitecture, layers: range, dtype_bytes: int, runtime_quantization: Quantization | None
) -> float:
    """Shared-expert bytes of these layers, from the architecture (gate, up and down projections).

    Estimated: the inventory does not tell shared experts from other column / row linears.
    """
    numel = 0
    for i in layers:
        ffn = arch.layers[i].ffn
        if isinstance(ffn, MoE) and ffn.shared_intermediate_size:
            numel += (3 if ffn.gated else 2) * arch.hidden_size * ffn.shared_intermediate_size
    q = runtime_quantization or arch.quantization
    if q is not None and not q.experts_only:
        return float(quantized_bytes(numel, q))
    return float(numel * dtype_bytes)
