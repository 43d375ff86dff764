"""What a checkpoint holds, estimated from the architecture when no tensor metadata is known.

The standard layouts vLLM's model classes load: one row per layer and role of the tensors each
token mixer and feed-forward block stores (q/k/v/o, MLA latent projections, Mamba and KDA blocks,
experts, routers, norms), the embeddings and lm_head, the vision tower, and the multi-token-prediction
layers a checkpoint stores but vLLM skips. Quantized formats count packed values plus their scales.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from fitgate.sizing.dtypes import MODEL_DTYPES
from fitgate.sizing.inventory import Role, WeightEntry, WeightInventory, quantized_bytes
from fitgate.sizing.model import (
    MLA,
    Attention,
    CompressedSparseMLA,
    DenseMLP,
    LinearAttention,
    Mamba,
    ModelArchitecture,
    MoE,
    ShortConv,
)

__all__ = ["inventory_from_architecture"]


#: The module names a layer's parts have in Hugging Face checkpoints, under the prefixes their models use, for the
#: quantization config's unquantized-module patterns (``Quantization.excluded``): a part is left unquantized when
#: every one of its names matches a pattern (a pattern naming one projection leaves the part counted quantized: the
#: estimate stays on the low side, never a false denial).
_LAYER_PREFIXES = ("model.layers", "model.language_model.layers", "language_model.model.layers", "model.decoder.layers")
_PART_NAMES = {
    "attn": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"),
    "mlp": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
    "experts": ("mlp.experts.0.gate_proj", "mlp.experts.0.down_proj"),
}
#: Models whose routed experts sit beside the dense MLP, not under it (hunt28 F1): Gemma 4's MoE layers hold ``mlp``
#: (a dense MLP), ``router`` and ``experts`` (vllm/model_executor/models/gemma4.py 0.34.0 L631 ``self.mlp``, L668-675
#: ``FusedMoEFactory(prefix=f"{prefix}.experts")``; transformers' Gemma4TextExperts: fused ``gate_up_proj`` and
#: ``down_proj``), so NVIDIA's NVFP4 export excluding ``layers.N.mlp*`` leaves the experts quantized.
_SIBLING_EXPERTS = {"gemma4": ("experts.gate_up_proj", "experts.down_proj")}
_SIBLING_EXPERTS["gemma4_text"] = _SIBLING_EXPERTS["gemma4"]
_LAYER_IN_PATTERN = re.compile(r"layers\.(\d{1,6})\.")


class _Builder:
    def __init__(self, arch: ModelArchitecture) -> None:
        self.arch = arch
        self.dtype_bytes = MODEL_DTYPES[arch.dtype]
        self.quant = arch.quantization
        self.rows: dict[tuple[int | None, Role, bool, bool], list[int]] = {}
        self.part = ""  # the part of the layer being added: attn, mlp or experts (for Quantization.excluded)
        self._excluded: dict[tuple[int, str], bool] = {}
        self._by_layer: dict[int | None, list[str]] = {}
        for pattern in self.quant.excluded if self.quant is not None else ():
            m = _LAYER_IN_PATTERN.search(pattern)
            self._by_layer.setdefault(int(m.group(1)) if m else None, []).append(pattern)

    def excluded(self, layer: int | None, part: str) -> bool:
        """Whether the quantization config leaves this part of this layer unquantized (``Quantization.excluded``)."""
        if layer is None or part not in _PART_NAMES or not self._by_layer:
            return False
        key = (layer, part)
        hit = self._excluded.get(key)
        if hit is None:
            patterns = self._by_layer.get(layer, []) + self._by_layer.get(None, [])
            names = _PART_NAMES[part]
            if part == "experts":
                names = _SIBLING_EXPERTS.get(self.arch.model_type, names)
            hit = bool(patterns) and any(
                all(any(fnmatchcase(f"{prefix}.{layer}.{name}", p) for p in patterns) for name in names)
                for prefix in _LAYER_PREFIXES
            )
            self._excluded[key] = hit
        return hit

    def add(self, layer: int | None, role: Role, numel: int, linear: bool = False) -> None:
        stored, quantized = self._stored(role, numel, linear, layer)
        key = (layer, role, quantized, linear)
        acc = self.rows.setdefault(key, [0, 0])
        acc[0] += numel
        acc[1] += stored

    def _stored(self, role: Role, numel: int, linear: bool, layer: int | None = None) -> tuple[int, bool]:
        q = self.quant
        if q is None or not linear or (q.experts_only and role is not Role.EXPERT):
            return numel * self.dtype_bytes, False
        if q.excluded and self.excluded(layer, self.part):
            return numel * self.dtype_bytes, False
        if role is Role.EXPERT and q.experts is not None:
            return quantized_bytes(numel, q.experts), True
        return quantized_bytes(numel, q), True

    def inventory(self) -> WeightInventory:
        return WeightInventory(
            tuple(WeightEntry(k[0], k[1], v[0], v[1], k[2], k[3]) for k, v in self.rows.items()),
            "config",
        )


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
        b.part = "attn"
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
            b.part = "experts" if isinstance(layer.ffn, MoE) else "mlp"
            _ffn_params(b, i, layer.ffn, hidden)
        b.part = ""
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
