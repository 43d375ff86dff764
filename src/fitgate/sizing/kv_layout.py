"""From layers to vLLM's KV cache layout: per-GPU specs, layer groups, blocks, tokens, concurrency.

Follows ``vllm/v1/core/kv_cache_utils.py`` (``get_kv_cache_groups``, ``get_num_blocks``,
``_report_kv_cache_config``, ``get_max_concurrency_for_kv_cache_config``) and, for hybrid
attention + Mamba models, ``HybridAttentionMambaModelConfig`` (see shared/reference/vllm-memory.md
sections 5-7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_specs import (
    ChunkedLocalAttentionSpec,
    CompressedMLASpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    ServingShape,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    spec_kind,
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
    mixer: Mamba | LinearAttention | ShortConv, tp: int, state_dtype_bytes: int, num_spec: int = 0
) -> int:
    """Conv plus SSM/recurrent state of one request on one GPU (vLLM MambaStateShapeCalculator).

    ``num_spec``: draft tokens under speculative decoding; the short-conv, gated-delta-net and Mamba2
    conv states keep ``kernel - 1 + num_spec`` columns (mamba_utils.py 0.33.0 L204, L257, L285).
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
        return conv * state_dtype_bytes + recurrent * (mixer.recurrent_dtype_bytes or state_dtype_bytes)
    if mixer.version == 1:
        conv = (mixer.d_inner // tp) * (mixer.d_conv - 1)
        ssm = (mixer.d_inner // tp) * mixer.d_state
        return (conv + ssm) * state_dtype_bytes
    groups = mixer.n_groups if mixer.n_groups % tp == 0 else mixer.n_groups + (tp - mixer.n_groups % tp)
    conv_dim = mixer.d_inner + 2 * groups * mixer.d_state
    conv = (mixer.d_conv - 1 + num_spec) * (conv_dim // tp)
    ssm = (mixer.num_heads // tp) * mixer.head_dim * mixer.d_state
    return (conv + ssm) * state_dtype_bytes


def layer_specs(
    arch: ModelArchitecture,
    layer_indices: Sequence[int],
    tp: int,
    kv_dtype_bytes: int,
    model_dtype_bytes: int,
    block_size: int,
    accounting: VllmAccounting,
    num_spec: int = 0,
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
            specs.append(MambaSpec(_mamba_state_bytes(mixer, tp, model_dtype_bytes, num_spec)))
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


@dataclass(frozen=True)
class KVGroup:
    """Layers that share block ids: one spec, ``num_layers`` real layers (<= group size)."""

    spec: KVCacheSpec
    num_layers: int


@dataclass(frozen=True)
class KVLayout:
    """The KV cache layout vLLM derives for one GPU.

    ``packed``: vLLM 0.33's block-outermost packing of mixed page sizes (DeepSeek V4), where one
    block id spans every layer of a group and ``page_size_bytes`` is the widest group's block.
    """

    groups: tuple[KVGroup, ...]
    group_size: int  # tensors that share each block id (layers per group, padded)
    page_size_bytes: int  # one block of one tensor
    block_size: int  # tokens per block (smallest over groups)
    specs: tuple[KVCacheSpec, ...]  # every layer, for the one-request check
    packed: bool = False

    @property
    def bytes_per_block(self) -> int:
        """Memory one block id takes across the group's tensors."""
        return self.page_size_bytes * self.group_size

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token costs across all attention layers of this GPU (full-length view)."""
        return sum(n * s.bytes_per_token for s, n in self.spec_counts)

    @cached_property
    def spec_counts(self) -> tuple[tuple[KVCacheSpec, int], ...]:
        """Distinct layer specs with how many layers use each (for fast per-request sums)."""
        counts: dict[KVCacheSpec, int] = {}
        for s in self.specs:
            counts[s] = counts.get(s, 0) + 1
        return tuple(counts.items())

    @property
    def kinds(self) -> tuple[str, ...]:
        """Spec kinds present, e.g. ('full', 'sliding_window')."""
        return tuple(sorted({spec_kind(s) for s in self.specs}))


def _unify_page_sizes(specs: list[KVCacheSpec]) -> list[KVCacheSpec]:
    """Give smaller attention pages a proportionally larger block so every page is equal (0.19)."""
    pages = {s.page_size_bytes for s in specs}
    if len(pages) == 1:
        return specs
    biggest = max(pages)
    out: list[KVCacheSpec] = []
    for s in specs:
        if s.page_size_bytes == biggest:
            out.append(s)
        elif isinstance(s, MambaSpec):
            out.append(s.with_page_size(biggest))
        elif biggest % s.page_size_bytes == 0:
            out.append(s.with_block_size(s.block_size * (biggest // s.page_size_bytes)))
        else:
            raise SizingError(
                "kv_cache",
                f"page sizes {sorted(pages)}",
                "layer page sizes that divide each other (vLLM cannot unify them either)",
            )
    return out


def build_layout(specs: list[KVCacheSpec], accounting: VllmAccounting) -> KVLayout:
    """Group the layers of one GPU as ``get_kv_cache_groups`` does.

    One spec type → one group whose size is the number of layers. Several types → pages are made
    equal and layers are split by type into groups of ``min(#layers per type)`` (or the max, when
    max < 1.25 x min), the last group of a type padded.
    """
    if not specs:
        raise SizingError("model", "no attention or state layers on this GPU", "a model with a KV cache")
    if any(isinstance(s, CompressedMLASpec | SlidingWindowMLASpec) for s in specs) and len(set(specs)) > 1:
        return build_packed_layout(specs)
    has_mamba = any(isinstance(s, MambaSpec) for s in specs)
    if has_mamba:
        # Hybrid models: Mamba states are padded up to the attention page (HybridAttentionMambaModelConfig).
        attention_pages = [s.page_size_bytes for s in specs if not isinstance(s, MambaSpec)]
        target = max([*attention_pages, *(s.state_bytes for s in specs if isinstance(s, MambaSpec))])
        specs = [s.with_page_size(target) if isinstance(s, MambaSpec) else s for s in specs]
    by_spec: dict[KVCacheSpec, int] = {}
    for s in specs:
        by_spec[s] = by_spec.get(s, 0) + 1
    if len(by_spec) == 1:
        ((spec, n),) = by_spec.items()
        return KVLayout((KVGroup(spec, n),), n, spec.page_size_bytes, _block_of(spec, specs), tuple(specs))
    # vLLM registers MLAAttentionSpec with FullAttentionSpec as its uniform type base
    # (single_type_kv_cache_manager.py 0.33.0 L2707-2710): MiniMax M3's indexer cache joins the full layers.
    kinds = {"full" if spec_kind(s) == "mla" else spec_kind(s) for s in by_spec}
    if len(kinds) == 1 and not has_mamba:
        # Same type, different shapes: one group with per-layer tensors (UniformTypeKVCacheSpecs).
        page = sum(s.page_size_bytes for s in specs)
        first = specs[0]
        return KVLayout((KVGroup(first, len(specs)),), 1, page, _block_of(first, specs), tuple(specs))
    unified = _unify_page_sizes(specs)
    by_spec = {}
    for s in unified:
        by_spec[s] = by_spec.get(s, 0) + 1
    counts = list(by_spec.values())
    group_size = min(counts)
    if max(counts) < group_size * 1.25:
        group_size = max(counts)
    groups: list[KVGroup] = []
    for spec, n in by_spec.items():
        for start in range(0, n, group_size):
            groups.append(KVGroup(spec, min(group_size, n - start)))
    page = unified[0].page_size_bytes
    block = min(_block_of(g.spec, unified) for g in groups)
    return KVLayout(tuple(groups), group_size, page, block, tuple(specs))


def _bucket_key(spec: KVCacheSpec) -> tuple[str, int, int]:
    """VLLM's ``UniformTypeKVCacheSpecs.is_uniform_type``: same block size, same kind (and window)."""
    window = spec.sliding_window if isinstance(spec, SlidingWindowMLASpec | SlidingWindowSpec) else 0
    kind = "sliding" if window else "full"
    return kind, getattr(spec, "block_size", 0), window


def _approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """The chunk ``d >= lower_bound`` with the least ``sum(round_up(x, d) - x)``, ties to the larger d."""
    best_d, best_pad = lower_bound, -1
    for d in range(lower_bound, max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad < 0 or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


def build_packed_layout(specs: list[KVCacheSpec]) -> KVLayout:
    """Group mixed page sizes as vLLM 0.33 ``_get_packed_kv_cache_groups`` does (kv_cache_planning.py L914-1041).

    Layers are bucketed by kind and block size. A bucket is balanced when each of its page sizes
    has as many layers; balanced buckets are split into groups of the same number of pattern
    repeats, chosen by ``_approximate_gcd`` (L879-911) from at least the largest mixed bucket's
    repeats. A block id spans one group's layers, so the pool's block is the widest group's bytes
    (``_get_kv_cache_bytes_per_block``, L574-605) and ``num_blocks = available // that``.
    """
    buckets: dict[tuple[str, int, int], list[KVCacheSpec]] = {}
    for s in specs:
        buckets.setdefault(_bucket_key(s), []).append(s)
    shaped = []
    for members in buckets.values():
        by_page: dict[int, list[KVCacheSpec]] = {}
        for s in members:
            by_page.setdefault(s.page_size_bytes, []).append(s)
        balanced = len({len(v) for v in by_page.values()}) == 1
        shaped.append((members, by_page, balanced))
    floor = max((len(next(iter(p.values()))) for _, p, bal in shaped if bal and len(p) > 1), default=0)
    repeats = _approximate_gcd([max(len(v) for v in p.values()) for _, p, bal in shaped if bal], floor) if floor else 0

    def is_state(members: list[KVCacheSpec]) -> bool:
        sliding = isinstance(members[0], SlidingWindowMLASpec | SlidingWindowSpec)
        return isinstance(members[0], MambaSpec) or (not repeats and sliding)

    def num_groups(by_page: dict[int, list[KVCacheSpec]], balanced: bool) -> int:
        return cdiv(max(len(v) for v in by_page.values()), repeats) if balanced and repeats else 1

    def widest(by_page: dict[int, list[KVCacheSpec]], n: int) -> int:
        return sum(cdiv(len(v), n) * page for page, v in by_page.items())

    anchor = max(widest(p, len(m) if is_state(m) else num_groups(p, bal)) for m, p, bal in shaped)
    groups: list[KVGroup] = []
    block_bytes = 0
    for members, by_page, balanced in shaped:
        n = num_groups(by_page, balanced)
        if is_state(members):
            n = max(n, cdiv(len(members), max(anchor // members[0].page_size_bytes, 1)))
        for g in range(n):
            # Pattern repeats g, g + n, g + 2n... of each page size (L1029-1039).
            share = {page: v[g::n] for page, v in by_page.items()}
            layers = sum(len(v) for v in share.values())
            if layers:
                groups.append(KVGroup(members[0], layers))
                block_bytes = max(block_bytes, sum(page * len(v) for page, v in share.items()))
    # The cache block size (--block-size) is the largest: the window and state caches use smaller fixed blocks.
    block = max(getattr(g.spec, "block_size", DEFAULT_BLOCK_SIZE) for g in groups)
    return KVLayout(tuple(groups), 1, block_bytes, block, tuple(specs), packed=True)


def _block_of(spec: KVCacheSpec, specs: Sequence[KVCacheSpec]) -> int:
    if isinstance(spec, MambaSpec):
        attention = [s for s in specs if not isinstance(s, MambaSpec)]
        return min((s.block_size for s in attention), default=DEFAULT_BLOCK_SIZE)
    return spec.block_size


def num_blocks(layout: KVLayout, available_bytes: int) -> int:
    """``available // page_size // group_size`` (0 when nothing is available)."""
    if available_bytes <= 0:
        return 0
    return available_bytes // layout.page_size_bytes // layout.group_size


def _packed_pages(layout: KVLayout, shape: ServingShape) -> int:
    """Pages one request takes in a packed layout: each group's (its layers all need as many), summed.

    ``get_max_concurrency_for_kv_cache_config`` (kv_cache_utils.py 0.33.0 L1061-1093).
    """
    return sum(cdiv(g.spec.max_memory_usage_bytes(shape), g.spec.page_size_bytes) for g in layout.groups)


def one_request_bytes(layout: KVLayout, shape: ServingShape) -> int:
    """KV memory one request of ``max_model_len`` tokens needs on this GPU (vLLM's startup check).

    Packed layouts: ``bytes_per_block x`` the request's pages over all groups, checked against the
    budget less the null block (``_max_memory_usage_bytes_from_groups`` and ``check_memory``,
    kv_cache_planning.py 0.33.0 L1253-1285, L1533-1559): one block more here.
    """
    if layout.packed:
        return layout.bytes_per_block * (_packed_pages(layout, shape) + 1)
    return sum(n * s.max_memory_usage_bytes(shape) for s, n in layout.spec_counts)


def blocks_per_request(layout: KVLayout, shape: ServingShape, accounting: VllmAccounting) -> int:
    """Block ids one max-length request takes (the divisor of 'Maximum concurrency')."""
    if layout.packed:
        return _packed_pages(layout, shape)
    if accounting.tokens_report == "blocks":
        return cdiv(shape.max_model_len, layout.block_size)
    if accounting.concurrency_sum_groups:
        if _uniform_type(layout):
            # UniformTypeKVCacheSpecs (sparse MLA + its indexer, MiniMax M3): one group whose page and
            # max_memory_usage_bytes are sums over every layer (kv_cache_interface.py 0.33.0
            # UniformTypeKVCacheSpecs.max_memory_usage_bytes / page_size_bytes), so a request takes
            # cdiv(sum of its layers' bytes, sum of their pages) blocks (kv_cache_utils.py 0.33.0
            # L1061-1093, 0.34.0 L1082-1114), not one layer's bytes over all the pages.
            return cdiv(one_request_bytes(layout, shape), layout.page_size_bytes)
        return sum(cdiv(g.spec.max_memory_usage_bytes(shape), layout.page_size_bytes) for g in layout.groups)
    largest = max(g.num_layers for g in layout.groups)
    per_request = largest * sum(g.spec.max_memory_usage_bytes(shape) for g in layout.groups)
    if len(layout.groups) == 1 and layout.group_size == 1:
        per_request = one_request_bytes(layout, shape)
        return cdiv(per_request, layout.page_size_bytes)
    return cdiv(per_request, layout.page_size_bytes * largest)


def _uniform_type(layout: KVLayout) -> bool:
    """One group of per-layer tensors with different shapes (``UniformTypeKVCacheSpecs``)."""
    return not layout.packed and len(layout.groups) == 1 and layout.group_size == 1 and len(layout.spec_counts) > 1


def max_concurrency(layout: KVLayout, blocks: int, shape: ServingShape, accounting: VllmAccounting) -> float:
    """VLLM's 'Maximum concurrency for N tokens per request: X.XXx'."""
    if accounting.tokens_report == "blocks" and not layout.packed:
        return blocks * layout.block_size / shape.max_model_len
    return blocks / blocks_per_request(layout, shape, accounting)


def reported_tokens(layout: KVLayout, blocks: int, shape: ServingShape, accounting: VllmAccounting) -> int:
    """VLLM's 'GPU KV cache size: N tokens' for this version (packed layouts: concurrency x length)."""
    if layout.packed:
        return int(max_concurrency(layout, blocks, shape, accounting) * shape.max_model_len)
    if accounting.tokens_report == "blocks":
        return blocks * layout.block_size
    if accounting.tokens_report == "groups":
        return blocks // len(layout.groups) * layout.block_size
    return int(max_concurrency(layout, blocks, shape, accounting) * shape.max_model_len)
