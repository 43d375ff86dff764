"""The vLLM engine settings that change memory, as given and after vLLM's defaults are applied."""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.speculative import Speculative


@dataclass(frozen=True)
class ServingConfig:
    """The vLLM engine settings that change memory (``None``: vLLM's default)."""

    max_model_len: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float | None = None  # None: the release's default (0.9, 0.92 from 0.20)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    enforce_eager: bool = False
    vllm_version: str | None = None
    engine: str | None = None
    offline: bool = False  # the LLM class (bigger default batch) instead of ``vllm serve``
    kv_cache_memory_bytes: int | None = None  # ``--kv-cache-memory-bytes``: the KV pool per GPU, no profiling
    interconnect: str | None = None  # ``nvlink`` or ``pcie``; None: the GPU catalog's
    runner: str = "generate"  # ``--runner``: ``generate`` or ``pooling`` (embedding / reward models)
    # ``--speculative-config``: its method (``mtp``, ``ngram``, ``eagle3`` ...) and num_speculative_tokens
    speculative_method: str | None = None
    speculative_tokens: int | None = None
    # vLLM 0.34 extensible KV cache (docs/vllm-releases.md section 12): ``--[no-]enable-extensible-kv-cache``;
    # None: the release's default (on from 0.34 unless --kv-cache-memory-bytes is given).
    extensible_kv_cache: bool | None = None


@dataclass(frozen=True)
class Workload:
    """The peak a service must hold: this many concurrent requests of this many tokens each."""

    concurrency: int
    context_tokens: int


@dataclass(frozen=True)
class ResolvedServing:
    """Serving settings after vLLM's defaults are applied."""

    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int
    block_size_given: bool
    dtype: str
    kv_cache_dtype: str
    kv_dtype_bytes: int
    quantization: str | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpu_memory_utilization: float
    enforce_eager: bool
    vllm_version: str
    kv_cache_memory_bytes: int | None = None
    interconnect: str = "nvlink"
    runner: str = "generate"
    speculative: Speculative | None = None
    # vLLM 0.34 extensible KV cache: the pool is measured after warm-up (fitgate.sizing.extensible).
    extensible_kv_cache: bool = False

    @property
    def draft_tokens(self) -> int:
        """Draft tokens per decode step (0 without speculative decoding)."""
        return self.speculative.num_tokens if self.speculative else 0

    @property
    def decode_query_len(self) -> int:
        """Tokens one decode step verifies per request (1 + draft tokens with speculative decoding)."""
        return 1 + self.draft_tokens
