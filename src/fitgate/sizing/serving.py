"""The vLLM engine settings that change memory, as given and after vLLM's defaults are applied."""

from __future__ import annotations

from dataclasses import dataclass, field

from fitgate.sizing.parallel import ParallelLayout
from fitgate.sizing.speculative import Speculative


@dataclass(frozen=True)
class ServingConfig:
    """The vLLM engine settings that change memory (``None``: vLLM's default)."""

    max_model_len: int | None = None
    # ``--max-model-len auto`` (or ``-1``): from vLLM 0.14 the engine lowers the model's length to the longest whose
    # one request fits the KV pool (fitgate.sizing.auto_fit); ``max_model_len`` is then None.
    max_model_len_auto: bool = False
    # ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``: vLLM accepts a max_model_len past the model's derived one (a warning)
    allow_long_max_model_len: bool = False
    kv_cache_dtype: str = "auto"
    # ``--mamba-ssm-cache-dtype``: the Mamba / gated-delta-net recurrent state's dtype (None or auto: the model's,
    # or what the architecture's config sets: resolve.mamba_ssm_dtype_bytes)
    mamba_ssm_cache_dtype: str | None = None
    dtype: str = "auto"
    quantization: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # ``VLLM_PP_LAYER_PARTITION`` ("24,40"): the layers of each pipeline stage; None: vLLM's even split
    pp_layer_partition: str | None = None
    gpu_memory_utilization: float | None = None  # None: the release's default (0.9, 0.92 from 0.20)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    enforce_eager: bool = False
    # CUDA graphs as vLLM's compilation config sets them (fitgate.sizing.cudagraphs): ``cudagraph_mode`` (NONE,
    # PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE; None: the release's default), the capture sizes
    # (``--cudagraph-capture-sizes``) and their ceiling (``--max-cudagraph-capture-size``); None: vLLM's defaults.
    cudagraph_mode: str | None = None
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    max_cudagraph_capture_size: int | None = None
    # ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` (0.18+): whether the CUDA-graph estimate is deducted from the KV
    # budget; None: the release's default ("0" in 0.18-0.19, "1" from 0.20).
    cudagraph_memory_estimate: bool | None = None
    # ``--performance-mode`` (0.17+): balanced (None), throughput (default batch limits doubled) or interactivity
    # (every CUDA-graph size from 1 to 32 captured).
    performance_mode: str | None = None
    # The V1 sampler on FlashInfer's top-k/top-p kernels (``VLLM_USE_FLASHINFER_SAMPLER``; FlashInfer installed, as
    # in vLLM's image) or PyTorch's sort; None: the release's default with FlashInfer installed (activation.py).
    flashinfer_sampler: bool | None = None
    # gpt-oss's MXFP4 MoE backend (``marlin`` or ``triton``; fitgate.sizing.mxfp4); None: the one vLLM's image picks.
    mxfp4_backend: str | None = None
    vllm_version: str | None = None
    engine: str | None = None  # ``V0`` / ``V1`` as a start-up log shows it; None: the one vLLM picks (use_v1, GPU)
    # ``VLLM_USE_V1`` (vLLM 0.8-0.10): False runs V0, True V1 even where vLLM would fall back (it then raises);
    # None: unset, V1 unless the GPU is below compute capability 8.0 before 0.10.2 (versions.engine_for).
    use_v1: bool | None = None
    offline: bool = False  # the LLM class (bigger default batch) instead of ``vllm serve``
    kv_cache_memory_bytes: int | None = None  # ``--kv-cache-memory-bytes``: the KV pool per GPU, no profiling
    interconnect: str | None = None  # ``nvlink`` or ``pcie``; None: the GPU catalog's
    # ``--runner``: ``generate``, ``pooling`` (embedding / reward models) or ``auto``, vLLM's default: pooling for a
    # checkpoint with a Sentence Transformers pooling module, else generate (resolve.runner_of)
    runner: str = "auto"
    # ``--[no-]enable-chunked-prefill``: False makes the step budget at least max_model_len
    # (resolve.CHUNKED_PREFILL_OFF)
    enable_chunked_prefill: bool | None = None
    # ``--speculative-config``: its method (``mtp``, ``ngram``, ``eagle3`` ...) and num_speculative_tokens
    speculative_method: str | None = None
    speculative_tokens: int | None = None
    # vLLM 0.34 extensible KV cache (docs/vllm-releases.md section 12): ``--[no-]enable-extensible-kv-cache``;
    # None: the release's default (on from 0.34 unless --kv-cache-memory-bytes is given).
    extensible_kv_cache: bool | None = None
    # --- data / expert / decode-context parallelism (fitgate.sizing.parallel, docs/parallelism.md) ---
    data_parallel_size: int = 1  # --data-parallel-size: engine ranks of the whole deployment
    data_parallel_size_local: int | None = None  # --data-parallel-size-local: ranks per node (None: all)
    enable_expert_parallel: bool = False  # --enable-expert-parallel: experts spread over TP x DP GPUs
    enable_eplb: bool = False  # --enable-eplb
    num_redundant_experts: int = 0  # --eplb-config num_redundant_experts (or --num-redundant-experts)
    all2all_backend: str | None = None  # --all2all-backend / VLLM_ALL2ALL_BACKEND; None: allgather_reducescatter
    decode_context_parallel_size: int = 1  # --decode-context-parallel-size (-dcp)
    # --- LoRA, weight offload, KV connectors, multimodal encoder (issue 20; docs/lora-offload-multimodal.md) ---
    enable_lora: bool = False  # ``--enable-lora``
    max_loras: int | None = None  # ``--max-loras`` (vLLM's default 1)
    max_lora_rank: int | None = None  # ``--max-lora-rank`` (vLLM's default 16)
    max_cpu_loras: int | None = None  # ``--max-cpu-loras`` (host memory only; default max_loras)
    fully_sharded_loras: bool = False  # ``--fully-sharded-loras``
    lora_dtype: str = "auto"  # ``--lora-dtype``: auto (the model dtype), float16, bfloat16
    lora_target_modules: tuple[str, ...] | None = None  # ``--lora-target-modules``; None: every module
    cpu_offload_bytes: int = 0  # ``--cpu-offload-gb`` x 2**30: weights held in host memory per GPU
    kv_offloading_bytes: int | None = None  # ``--kv-offloading-size`` x 2**30 (host memory, all TP ranks)
    kv_offloading_backend: str = "native"  # ``--kv-offloading-backend``: native or lmcache
    kv_connector: str | None = None  # ``--kv-transfer-config`` kv_connector (NixlConnector, ...)
    kv_role: str | None = None  # ``--kv-transfer-config`` kv_role: kv_producer, kv_consumer, kv_both
    kv_buffer_device: str | None = None  # ``--kv-transfer-config`` kv_buffer_device (NIXL: cuda or cpu)
    #: ``--limit-mm-per-prompt`` as (modality, count) pairs; None: vLLM's default (the model's maximum)
    limit_mm_per_prompt: tuple[tuple[str, int], ...] | None = None
    mm_max_pixels: int | None = None  # ``--mm-processor-kwargs`` ``max_pixels`` (multimodal.parse_max_pixels)
    mm_item_pixels: int | None = None  # the profiled image's width x height (multimodal.parse_limit_mm_image_pixels)
    mm_encoder_tp_mode: str = "weights"  # ``--mm-encoder-tp-mode``: weights or data
    mm_skip_profiling: bool = False  # ``--skip-mm-profiling``: no encoder pass in the profile (hunt63 F1)
    mm_processor_cache_bytes: int | None = None  # ``--mm-processor-cache-gb`` x 2**30 (host; default 4 GiB)

    # A ServingConfig keys the plan memos (``plan._ranks``, the suggestion search's candidates): each plan
    # hashes one and compares it with the memo's, field by field. The generated methods build a tuple of every
    # field for each in Python; these compare and hash the same values in C (issue 23: 2 of a warm plan's
    # 12 us). The instance's ``__dict__`` holds exactly its fields, in field order (``__init__`` and
    # ``frozen.evolve``, which copies a ``__dict__``, both keep it), so the results are the generated ones.
    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))


@dataclass(frozen=True)
class LoraSlots:
    """``--enable-lora`` after vLLM's defaults: GPU slots for ``max_loras`` adapters of ``max_lora_rank``."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    fully_sharded: bool
    dtype_bytes: int
    #: vLLM builds LoRA slots for fused-MoE experts (from 0.11.1; lora.EXPERT_LORA_SINCE).
    experts: bool = True
    #: The release, for the terms that changed by release (lora.EMBEDDING_LORA_SINCE, lora.graph_cases).
    release: tuple[int, int, int] = (0, 34, 0)


#: The most replicas a workload is split over (a ModelDeployment's ``spec.replicas``, ``fitgate plan --replicas``).
MAX_REPLICAS = 10_000


@dataclass(frozen=True)
class Workload:
    """The peak a service must hold: this many concurrent requests of this many tokens each.

    ``concurrency`` is the service's, split evenly over ``replicas`` (a load balancer in front of them): each
    replica's KV pool must hold :attr:`per_replica` of them (issue 24: a suggestion may add replicas instead
    of cutting the concurrency).
    """

    concurrency: int
    context_tokens: int
    replicas: int = 1

    @property
    def per_replica(self) -> int:
        """The requests one replica holds at the peak: ``ceil(concurrency / replicas)``."""
        return -(-self.concurrency // self.replicas)


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
    #: ``kv_cache_dtype`` is the checkpoint's own (vLLM's ``auto`` resolved from a ModelOpt config), not the user's.
    kv_cache_dtype_from_checkpoint: bool = False
    #: ``kv_cache_dtype`` is what vLLM makes of ``auto`` for this architecture on this GPU
    #: (resolve.AUTO_FP8_KV_ON_SM10X).
    kv_cache_dtype_by_architecture: bool = False
    interconnect: str = "nvlink"
    runner: str = "generate"
    speculative: Speculative | None = None
    pp_layer_partition: tuple[int, ...] | None = None  # VLLM_PP_LAYER_PARTITION, checked against the layers
    parallel: ParallelLayout = field(default_factory=ParallelLayout)  # data / expert / decode-context parallelism
    # --- LoRA, weight offload, KV connectors, multimodal encoder (issue 20) ---
    lora: LoraSlots | None = None
    lora_target_modules: tuple[str, ...] | None = None
    cpu_offload_bytes: int = 0
    kv_offloading_bytes: int | None = None
    kv_offloading_backend: str = "native"
    kv_connector: str | None = None
    kv_role: str | None = None
    kv_buffer_device: str | None = None
    limit_mm_per_prompt: tuple[tuple[str, int], ...] | None = None
    mm_max_pixels: int | None = None  # ``--mm-processor-kwargs`` ``max_pixels`` (multimodal.parse_max_pixels)
    mm_item_pixels: int | None = None  # the profiled image's width x height (multimodal.parse_limit_mm_image_pixels)
    mm_encoder_tp_mode: str = "weights"
    mm_skip_profiling: bool = False
    mm_processor_cache_bytes: int = 0
    # vLLM 0.34 extensible KV cache: the pool is measured after warm-up (fitgate.sizing.extensible).
    extensible_kv_cache: bool = False
    # why a KV connector turned the extensible KV cache off where no flag decided (offload.extensible_kv_cache_off)
    extensible_off_by: str | None = None
    flashinfer_sampler: bool | None = None  # ServingConfig.flashinfer_sampler
    mxfp4_backend: str | None = None  # ServingConfig.mxfp4_backend
    engine: str = "V1"  # the release's engine: ``V1`` (0.8+) or ``V0`` (the step model's host costs differ)
    engine_note: str | None = None  # why the engine is not the release's default (versions.engine_for)
    v2_runner: bool = False  # vLLM measures the model with its V2 GPU model runner (resolve.runs_v2_runner)
    free_memory_check: bool = True  # VllmAccounting.free_memory_check: vLLM refuses free < total x gmu at start
    # device memory in use before vLLM's start-up snapshot on one worker (activation.pre_snapshot_bytes: TP, GPU);
    # the default is activation.CUDA_CONTEXT_BYTES, which this types module may not import (import-linter layers)
    pre_snapshot_bytes: int = int(0.41 * 1024**3)
    cudagraph_mode: str = "FULL_AND_PIECEWISE"  # ServingConfig.cudagraph_mode after the default
    cudagraph_capture_sizes: tuple[int, ...] | None = None  # ServingConfig.cudagraph_capture_sizes
    max_cudagraph_capture_size: int | None = None  # ServingConfig.max_cudagraph_capture_size
    cudagraph_memory_estimate: bool | None = None  # ServingConfig.cudagraph_memory_estimate
    performance_mode: str = "balanced"  # ServingConfig.performance_mode, on releases that have it
    #: Tokens scheduled but not yet settled, which a sliding-window or chunked-local layer's blocks must also hold per
    #: request (vLLM's ``VllmConfig.max_in_flight_tokens``, 0.26+: one ``max_num_batched_tokens`` per concurrent
    #: batch; before 0.26 one batch). 0: ``max_num_batched_tokens`` (resolve.max_in_flight_tokens).
    max_in_flight_tokens: int = 0
    #: Bytes per element of the Mamba / linear-attention recurrent (SSM) state; 0: the model dtype's
    #: (resolve.mamba_ssm_dtype_bytes).
    mamba_ssm_dtype_bytes: int = 0

    @property
    def in_flight_tokens(self) -> int:
        """:attr:`max_in_flight_tokens`, ``max_num_batched_tokens`` where unset (a hand-built instance)."""
        return self.max_in_flight_tokens or self.max_num_batched_tokens

    @property
    def cuda_graphs(self) -> bool:
        """Whether vLLM captures CUDA graphs at all (not under ``--enforce-eager`` or ``cudagraph_mode`` NONE)."""
        return not self.enforce_eager and self.cudagraph_mode != "NONE"

    @property
    def draft_tokens(self) -> int:
        """Draft tokens per decode step (0 without speculative decoding)."""
        return self.speculative.num_tokens if self.speculative else 0

    @property
    def decode_query_len(self) -> int:
        """Tokens one decode step verifies per request (1 + draft tokens with speculative decoding)."""
        return 1 + self.draft_tokens
