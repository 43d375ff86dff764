"""KV cache specs: one small frozen dataclass per attention / cache type, as vLLM's kv_cache_interface.

Each spec is per layer and per GPU (heads already divided by tensor parallelism) and has two
formulas: the bytes of one page (one block of ``block_size`` tokens of this layer) and the most
memory one request of ``max_model_len`` tokens can use in this layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Self

from fitgate.sizing.units import cdiv


@dataclass(frozen=True)
class ServingShape:
    """The serving settings the KV formulas depend on (not the whole engine config)."""

    max_model_len: int
    #: Tokens scheduled but not yet settled: ``max_num_batched_tokens`` per concurrent batch (vLLM's
    #: ``max_in_flight_tokens``, 0.26+; one batch before: ResolvedServing.max_in_flight_tokens).
    max_in_flight_tokens: int
    block_size: int


@dataclass(frozen=True)
class _KVHeadsSpec:
    """K and V per token per KV head: the page arithmetic shared by the softmax-attention specs."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype_bytes: int
    #: V's head size where it differs from K's (MiMo-V2-Flash: 192 / 128); 0 means ``head_size``.
    #: vllm/v1/kv_cache_interface.py (0.33.0) L560-590: a cell is ``(head_size + head_size_v) * dtype``.
    head_size_v: int = field(default=0, kw_only=True)

    @property
    def bytes_per_token(self) -> int:
        """K and V bytes of one token in this layer: ``kv_heads * (head_size + head_size_v) * dtype``."""
        return self.num_kv_heads * (self.head_size + (self.head_size_v or self.head_size)) * self.dtype_bytes

    @property
    def page_size_bytes(self) -> int:
        """One block of this layer: ``block_size * bytes_per_token``."""
        return self.block_size * self.bytes_per_token

    def with_block_size(self, block_size: int) -> Self:
        """The same spec with another block size (page-size unification)."""
        return replace(self, block_size=block_size)


@dataclass(frozen=True)
class FullAttentionSpec(_KVHeadsSpec):
    """Full (global) attention: MHA, GQA or MQA."""

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """One request of max_model_len tokens: ``cdiv(max_model_len, block_size)`` pages."""
        return cdiv(shape.max_model_len, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class SlidingWindowSpec(_KVHeadsSpec):
    """Sliding-window attention: a request never needs more than the window plus one batch."""

    sliding_window: int

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """``(cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block) + 1)`` pages."""
        tokens = min(self.sliding_window - 1 + shape.max_in_flight_tokens, shape.max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(_KVHeadsSpec):
    """Llama 4 chunked local attention: at most one chunk plus one batch of tokens."""

    attention_chunk_size: int

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """``cdiv(min(chunk + max_in_flight_tokens, max_model_len), block)`` pages."""
        tokens = min(self.attention_chunk_size + shape.max_in_flight_tokens, shape.max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class MLAAttentionSpec:
    """DeepSeek MLA: one latent vector (kv_lora_rank + rope dims) per token, no K/V pair, not TP-sharded."""

    block_size: int
    head_size: int
    dtype_bytes: int
    align_bytes: int = 1  # vLLM V0 0.7.x padded each entry to a multiple of 256 bytes

    @property
    def bytes_per_token(self) -> int:
        """Latent bytes of one token in this layer (``head_size * dtype``, no factor 2)."""
        raw = self.head_size * self.dtype_bytes
        return cdiv(raw, self.align_bytes) * self.align_bytes

    @property
    def page_size_bytes(self) -> int:
        """One block of this layer."""
        return self.block_size * self.bytes_per_token

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """Like full attention: ``cdiv(max_model_len, block_size)`` pages."""
        return cdiv(shape.max_model_len, self.block_size) * self.page_size_bytes

    def with_block_size(self, block_size: int) -> MLAAttentionSpec:
        """The same spec with another block size."""
        return replace(self, block_size=block_size)


def _aligned(raw_bytes: int, align_bytes: int) -> int:
    """``round_up(raw, alignment)``: vLLM's ``_apply_alignment_padding`` (kv_cache_interface.py 0.33.0 L719-725)."""
    return cdiv(raw_bytes, align_bytes) * align_bytes


@dataclass(frozen=True)
class CompressedMLASpec:
    """DeepSeek V4's compressed caches: one ``state_bytes`` entry per ``tokens_per_state`` tokens.

    vLLM's ``MLAAttentionSpec`` with ``tokens_per_state > 1`` (kv_cache_interface.py 0.33.0 L552-616,
    L729-740): a page holds ``block_size // tokens_per_state`` entries, padded up to ``align_bytes``;
    a request needs ``cdiv(max_model_len, block_size)`` pages, as full attention (L643-648).
    """

    block_size: int
    tokens_per_state: int
    state_bytes: int
    align_bytes: int

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token costs over a long sequence (``state_bytes / tokens_per_state``, rounded up)."""
        return cdiv(self.state_bytes, self.tokens_per_state)

    @property
    def page_size_bytes(self) -> int:
        """``round_up(block_size // tokens_per_state * state_bytes, align_bytes)``."""
        return _aligned(self.block_size // self.tokens_per_state * self.state_bytes, self.align_bytes)

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """``cdiv(max_model_len, block_size)`` pages."""
        return cdiv(shape.max_model_len, self.block_size) * self.page_size_bytes

    def with_block_size(self, block_size: int) -> CompressedMLASpec:
        """The same spec with another block size."""
        return replace(self, block_size=block_size)


@dataclass(frozen=True)
class SlidingWindowMLASpec:
    """DeepSeek V4's windowed caches: the last ``sliding_window`` tokens, one entry each.

    vLLM's ``SlidingWindowMLASpec`` (kv_cache_interface.py 0.33.0 L1007-1026): the attention window
    (``DeepseekV4SWACache``, 64-token blocks) and the compressors' running state
    (``CompressorStateCache``, 4- or 8-token blocks). Pages are padded up to ``align_bytes``; a request
    holds ``cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block) + 1`` pages (L918-955).
    """

    block_size: int
    state_bytes: int
    align_bytes: int
    sliding_window: int

    @property
    def bytes_per_token(self) -> int:
        """Bytes of one token's entry."""
        return self.state_bytes

    @property
    def page_size_bytes(self) -> int:
        """``round_up(block_size * state_bytes, align_bytes)``."""
        return _aligned(self.block_size * self.state_bytes, self.align_bytes)

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """The window plus one batch of tokens, one extra page for a window that starts mid-block."""
        tokens = min(self.sliding_window - 1 + shape.max_in_flight_tokens, shape.max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes

    def with_block_size(self, block_size: int) -> SlidingWindowMLASpec:
        """The same spec with another block size."""
        return replace(self, block_size=block_size)


@dataclass(frozen=True)
class MambaSpec:
    """Mamba / linear-attention state: a fixed number of bytes per request, whatever its length.

    ``state_bytes`` is the sum over the layer's state tensors (conv state and SSM / recurrent
    state) for one request on one GPU. ``page_size_bytes`` may be padded up to the attention
    page size in hybrid models.
    """

    state_bytes: int
    padded_page_bytes: int = 0

    @property
    def bytes_per_token(self) -> int:
        """State does not grow with tokens."""
        return 0

    @property
    def page_size_bytes(self) -> int:
        """One state, padded when vLLM unified the page size with attention layers."""
        return max(self.state_bytes, self.padded_page_bytes)

    def max_memory_usage_bytes(self, shape: ServingShape) -> int:
        """One page per request, independent of length."""
        return self.page_size_bytes

    def with_page_size(self, page_bytes: int) -> MambaSpec:
        """The same state padded to ``page_bytes``."""
        return replace(self, padded_page_bytes=page_bytes)


AttentionLikeSpec = (
    FullAttentionSpec
    | SlidingWindowSpec
    | ChunkedLocalAttentionSpec
    | MLAAttentionSpec
    | CompressedMLASpec
    | SlidingWindowMLASpec
)
KVCacheSpec = AttentionLikeSpec | MambaSpec


def spec_kind(spec: KVCacheSpec) -> str:
    """A short stable name of the spec type, used for grouping and display."""
    return {
        FullAttentionSpec: "full",
        SlidingWindowSpec: "sliding_window",
        ChunkedLocalAttentionSpec: "chunked_local",
        MLAAttentionSpec: "mla",
        CompressedMLASpec: "compressed_mla",
        SlidingWindowMLASpec: "sliding_window_mla",
        MambaSpec: "mamba",
    }[type(spec)]
