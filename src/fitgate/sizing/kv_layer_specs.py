"""From a model's layers to vLLM's per-GPU KV cache specs: one frozen spec (:mod:`fitgate.sizing.kv_specs`) per layer.

Which spec each mixer gets (full / sliding-window attention, MLA and its side caches, DeepSeek V4's
compressed caches, Mamba-style state) and the block size hybrids need; how the specs are then grouped
into blocks is :mod:`fitgate.sizing.kv_layout`'s. Follows vLLM's ``get_kv_cache_spec`` of each attention
layer and ``HybridAttentionMambaModelConfig`` (see shared/reference/vllm-memory.md sections 5-7).
"""

from __future__ import annotations

from collections.abc import Sequence

from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.kv_specs import (
    ChunkedLocalAttentionSpec,
    CompressedMLASpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from fitgate.sizing.model import (
    MLA,
    Attention,
    CompressedSparseMLA,
    LinearAttention,
    Mamba,
    ModelArchitecture,
    ShortConv,
)
from fitgate.sizing.units import cdiv
from fitgate.sizing.versions import VllmAccounting

DEFAULT_BLOCK_SIZE = 16
#: The first release that caches DeepSeek's MLA latent (``ModelConfig.use_mla``, config.py 0.7.1 L972; none in
#: 0.7.0): before, every head's K and V.
MLA_CACHE_SINCE = (0, 7, 1)
#: One token of a sparse-MLA fp8 cache (``fp8_ds_mla``): 512 x fp8 + 4 x fp32 scales + 64 x bf16 rope.
FP8_DS_MLA_BYTES = 656
#: DeepSeek V4's ``fp8_ds_mla`` entry: 448 fp8 NoPE + 64 bf16 RoPE values + 8 scale bytes
#: (vllm/models/deepseek_v4/attention.py 0.33.0 L880-882), pages padded to 576 bytes (L877).
DSV4_FP8_DS_MLA_BYTES = 584
DSV4_PAGE_ALIGN_BYTES = 576
#: ``DeepseekV4SWACache`` blocks hold 64 tokens whatever the cache block size (its default,
#: sparse_swa.py 0.33.0 L85; attention.py L349-356 passes no block size).
DSV4_SWA_BLOCK = 64
#: MiniMax M3's indexer cache dtype: ``resolve_indexer_kv_dtype("bf16")`` (nvidia/model.py 0.33.0 L507).
MINIMAX_M3_INDEX_DTYPE_BYTES = 2
#: MiniMax M3's sparse and indexer backends take 128-token pages only (common/sparse_attention.py
#: 0.33.0 L165-167, common/indexer.py L94-95), so vLLM sets the block size to 128 for all layers
#: (platforms/interface.py L700-782: the smallest size every backend accepts).
MINIMAX_M3_BLOCK = 128
#: Hybrid MLA + Mamba/KDA models (Kimi K3): the attention block is a multiple of 128 tokens
#: (platforms/interface.py 0.33.0 L1083-1088).
HYBRID_MLA_BLOCK_ALIGN = 128


def dsv4_layer_specs(m: CompressedSparseMLA, block_size: int) -> list[KVCacheSpec]:
    """The caches one DeepSeek V4 layer registers, in vLLM's registration order.

    The CUDA attention classes vLLM picks by default (FlashMLA, FlashInfer SM120) use the
    ``fp8_ds_mla`` layout and turn ``--kv-cache-dtype auto`` into it (attention.py 0.33.0 L94-123,
    L152; nvidia/model.py L537-567), so every cache below is sized for it:

    * ratio 4: the indexer's key cache, ``index_head_dim + index_head_dim // 128 * 4`` bytes per
      compressed entry (attention.py L1019-1031, ``DeepseekV4IndexerCache`` L911-924), and its
      compressor's fp32 state, ``2 x 2 x index_head_dim`` values per token in 4-token blocks
      with an 8-token window (compressor.py L157-192, L281-286);
    * every layer: the 128-token sliding window, 584 bytes a token in 64-token blocks
      (sparse_swa.py L76-140);
    * ratio 4 or 128: the compressed cache, one 584-byte entry per ``ratio`` tokens in
      ``block_size``-token blocks (attention.py L860-883), and the compressor's fp32 state,
      ``2 x coff x head_dim`` values (coff 2 at ratio 4, else 1) in 4- or 8-token blocks with a
      ``coff x ratio`` window (compressor.py L157-192).
    """
    align = DSV4_PAGE_ALIGN_BYTES
    specs: list[KVCacheSpec] = []
    ratio = m.compress_ratio
    if ratio > 1 and block_size < ratio:
        # hunt118 #1: a page holds block_size // ratio entries (kv_cache_interface.py 0.33.0 L729-740): none below the
        # ratio (--block-size 64 on V4-Pro's 128), a page of 0 bytes; what vLLM makes of that is not read here
        raise NotModelledError(
            "block_size", block_size, f"DeepSeek V4's compressed cache in blocks smaller than its {ratio}-token ratio"
        )
    coff = 2 if ratio == 4 else 1
    state_block = 4 if ratio == 4 else 8
    if ratio == 4:
        index_bytes = m.index_head_dim + m.index_head_dim // 128 * 4
        specs.append(CompressedMLASpec(block_size, ratio, index_bytes, align))
        specs.append(SlidingWindowMLASpec(state_block, 2 * coff * m.index_head_dim * 4, align, coff * ratio))
    specs.append(SlidingWindowMLASpec(DSV4_SWA_BLOCK, DSV4_FP8_DS_MLA_BYTES, align, m.sliding_window))
    if ratio > 1:
        specs.append(CompressedMLASpec(block_size, ratio, DSV4_FP8_DS_MLA_BYTES, align))
        specs.append(SlidingWindowMLASpec(state_block, 2 * coff * m.head_dim * 4, align, coff * ratio))
    return specs


def _mamba_state_bytes(
    mixer: Mamba | LinearAttention | ShortConv, tp: int, state_dtype_bytes: int, num_spec: int = 0, ssm_bytes: int = 0
) -> int:
    """Conv plus SSM/recurrent state of one request on one GPU (vLLM MambaStateShapeCalculator).

    ``num_spec``: draft tokens under speculative decoding; the short-conv, gated-delta-net and Mamba2
    conv states keep ``kernel - 1 + num_spec`` columns (mamba_utils.py 0.33.0 L204, L257, L285).
    ``ssm_bytes``: the recurrent state's element size where vLLM's ``mamba_ssm_cache_dtype`` sets it
    (resolve.mamba_ssm_dtype_bytes; 0: the model dtype's, or KDA's own fp32).
    """
    if isinstance(mixer, ShortConv):
        # short_conv_state_shape (mamba_utils.py 0.33.0 L249-258): (dim / TP) x (kernel - 1)
        return (mixer.dim // tp) * (mixer.kernel - 1 + num_spec) * state_dtype_bytes
    if isinstance(mixer, LinearAttention):
        # gated_delta_net_state_shape / kda_state_shape (mamba_utils.py 0.33.0 L272-319): the same
        # shapes; KDA keeps its recurrent state in fp32 unless --mamba-ssm-cache-dtype says otherwise
        # (kda_state_dtype L133-149), the conv state in the model dtype.
        key_dim = mixer.num_k_heads * mixer.head_k_dim
        value_dim = mixer.num_v_heads * mixer.head_v_dim
        conv = (mixer.conv_kernel - 1 + num_spec) * ((2 * key_dim + value_dim) // tp)
        recurrent = (mixer.num_v_heads // tp) * mixer.head_k_dim * mixer.head_v_dim
        return conv * state_dtype_bytes + recurrent * (ssm_bytes or mixer.recurrent_dtype_bytes or state_dtype_bytes)
    if mixer.version == 1:
        conv = (mixer.d_inner // tp) * (mixer.d_conv - 1)
        ssm = (mixer.d_inner // tp) * mixer.d_state
        return conv * state_dtype_bytes + ssm * (ssm_bytes or state_dtype_bytes)
    groups = mixer.n_groups if mixer.n_groups % tp == 0 else mixer.n_groups + (tp - mixer.n_groups % tp)
    conv_dim = mixer.d_inner + 2 * groups * mixer.d_state
    conv = (mixer.d_conv - 1 + num_spec) * (conv_dim // tp)
    ssm = (mixer.num_heads // tp) * mixer.head_dim * mixer.d_state
    return conv * state_dtype_bytes + ssm * (ssm_bytes or state_dtype_bytes)


def layer_specs(
    arch: ModelArchitecture,
    layer_indices: Sequence[int],
    tp: int,
    kv_dtype_bytes: int,
    model_dtype_bytes: int,
    block_size: int,
    accounting: VllmAccounting,
    num_spec: int = 0,
    ssm_bytes: int = 0,
) -> list[KVCacheSpec]:
    """The KV cache spec of each layer in ``layer_indices`` on one GPU (``num_spec``: draft tokens).

    KV heads per GPU are ``max(1, kv_heads // tp)`` (replicated when TP exceeds them); the MLA
    latent is not sharded. Without the hybrid KV cache manager every attention layer is full.
    """
    specs: list[KVCacheSpec] = []
    for i in layer_indices:
        mixer = arch.layers[i].mixer
        if mixer is None:
            continue
        if isinstance(mixer, Attention):
            if mixer.kv_shared:
                continue  # reads the cache of an earlier layer of its kind (kv_sharing_target_layer_name)
            heads = max(1, mixer.num_kv_heads // tp)
            v = mixer.v_head_dim if mixer.v_head_dim != mixer.head_dim else 0
            if mixer.sliding_window and accounting.hybrid_kv_manager:
                specs.append(
                    SlidingWindowSpec(
                        block_size, heads, mixer.head_dim, kv_dtype_bytes, mixer.sliding_window, head_size_v=v
                    )
                )
            elif mixer.chunk_size and accounting.chunked_local_hybrid:
                specs.append(
                    ChunkedLocalAttentionSpec(
                        block_size, heads, mixer.head_dim, kv_dtype_bytes, mixer.chunk_size, head_size_v=v
                    )
                )
            else:
                specs.append(FullAttentionSpec(block_size, heads, mixer.head_dim, kv_dtype_bytes, head_size_v=v))
            if mixer.index_head_dim:
                # MiniMax M3's indexer side cache: MLAAttentionSpec(num_kv_heads=1, head_size=index
                # dim), key only, bf16 unless --attention-config sets indexer_kv_dtype
                # (minimax_m3/common/indexer.py 0.33.0 L118-153, nvidia/model.py L505-509).
                specs.append(MLAAttentionSpec(block_size, mixer.index_head_dim, MINIMAX_M3_INDEX_DTYPE_BYTES))
        elif isinstance(mixer, MLA) and accounting.version < MLA_CACHE_SINCE:
            # hunt168 S1: before 0.7.1 DeepSeek-V2/V3 attention is plain multi-head (deepseek_v2.py 0.7.0 L265-270:
            # Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads), V padded to qk_head_dim L316-319)
            qk_head = mixer.qk_nope_head_dim + mixer.qk_rope_head_dim
            specs.append(FullAttentionSpec(block_size, max(1, mixer.num_heads // tp), qk_head, kv_dtype_bytes))
        elif isinstance(mixer, MLA):
            head = mixer.kv_lora_rank + mixer.qk_rope_head_dim
            if mixer.index_head_dim and kv_dtype_bytes == 1:
                # Sparse MLA with an fp8 cache stores "fp8_ds_mla" entries: 512 fp8 latent values, 4 fp32
                # scales and 64 bf16 rope values = 656 bytes a token (vllm/v1/kv_cache_interface.py).
                specs.append(MLAAttentionSpec(block_size, FP8_DS_MLA_BYTES, 1))
            else:
                specs.append(MLAAttentionSpec(block_size, head, kv_dtype_bytes, accounting.mla_align_bytes))
            if mixer.index_head_dim:
                # The indexer's own cache: fp8 keys plus one fp32 scale per 128 values, uint8
                # (DeepseekV32IndexerCache: head_dim + head_dim // 128 * 4 -> 132 bytes a token).
                index_bytes = mixer.index_head_dim + mixer.index_head_dim // 128 * 4
                specs.append(MLAAttentionSpec(block_size, index_bytes, 1))
        elif isinstance(mixer, CompressedSparseMLA):
            specs.extend(dsv4_layer_specs(mixer, block_size))
        else:
            specs.append(MambaSpec(_mamba_state_bytes(mixer, tp, model_dtype_bytes, num_spec, ssm_bytes)))
    return specs


def hybrid_block_size(specs: Sequence[KVCacheSpec], block_size: int | None, *, mla: bool = False) -> int:
    """VLLM's attention block size for attention + Mamba hybrids, so one attention page >= one state.

    ``attn_block_size = align * cdiv(mamba_page, align * attention_bytes_per_token)``; a user block
    size is kept only when it is at least that. ``align`` is the backend's kernel block (16), or 128
    when the attention is MLA: vLLM 0.33 makes hybrid MLA/Mamba blocks a multiple of 128 for the
    TRTLLM/FlashInfer MLA decode kernels (platforms/interface.py 0.33.0 L1083-1088, L1098-1105).
    ``mla``: the model is an MLA model to vLLM (``model_config.use_mla``, not an MLA-shaped side cache).
    """
    mamba = [s.state_bytes for s in specs if isinstance(s, MambaSpec)]
    attention = [s.bytes_per_token for s in specs if not isinstance(s, MambaSpec)]
    if not mamba or not attention:
        return block_size or DEFAULT_BLOCK_SIZE
    per_token = max(attention)
    align = HYBRID_MLA_BLOCK_ALIGN if mla else 16
    needed = align * cdiv(max(mamba), align * per_token)
    return needed if block_size is None or block_size < needed else block_size
