"""vLLM's KV cache layout from per-layer specs: layer groups, blocks, tokens, concurrency.

Follows ``vllm/v1/core/kv_cache_utils.py`` (``get_kv_cache_groups``, ``get_num_blocks``,
``_report_kv_cache_config``, ``get_max_concurrency_for_kv_cache_config``) and, for hybrid
attention + Mamba models, ``HybridAttentionMambaModelConfig`` (see shared/reference/vllm-memory.md
sections 5-7). The specs come from :mod:`fitgate.sizing.kv_layer_specs` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layer_specs import (
    DEFAULT_BLOCK_SIZE,
    DSV4_FP8_DS_MLA_BYTES,
    DSV4_PAGE_ALIGN_BYTES,
    DSV4_SWA_BLOCK,
    FP8_DS_MLA_BYTES,
    HYBRID_MLA_BLOCK_ALIGN,
    MINIMAX_M3_BLOCK,
    MINIMAX_M3_INDEX_DTYPE_BYTES,
    dsv4_layer_specs,
    hybrid_block_size,
    layer_specs,
)
from fitgate.sizing.kv_specs import (
    CompressedMLASpec,
    KVCacheSpec,
    MambaSpec,
    ServingShape,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    spec_kind,
)
from fitgate.sizing.units import cdiv
from fitgate.sizing.versions import VllmAccounting

#: Re-exported from :mod:`fitgate.sizing.kv_layer_specs`: the names importers of this module used before the split.
__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DSV4_FP8_DS_MLA_BYTES",
    "DSV4_PAGE_ALIGN_BYTES",
    "DSV4_SWA_BLOCK",
    "FP8_DS_MLA_BYTES",
    "HYBRID_MLA_BLOCK_ALIGN",
    "MINIMAX_M3_BLOCK",
    "MINIMAX_M3_INDEX_DTYPE_BYTES",
    "KVGroup",
    "KVLayout",
    "blocks_per_request",
    "build_layout",
    "build_packed_layout",
    "dsv4_layer_specs",
    "hybrid_block_size",
    "layer_specs",
    "max_concurrency",
    "num_blocks",
    "one_request_bytes",
    "reported_tokens",
]


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

    @cached_property
    def layer_page_sizes(self) -> tuple[int, ...]:
        """Each layer's page in bytes, in layer order (summed once: the layout is frozen)."""
        return tuple(s.page_size_bytes for s in self.specs)

    @cached_property
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
