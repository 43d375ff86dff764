"""What a vLLM start-up log says: the types :mod:`fitgate.observe.logparse` fills in.

Kept apart from the parser so that readers of a parsed log (the compare report, the operator) need
none of its patterns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from fitgate.sizing.errors import SizingError

_GIB = 1024**3


class LogError(SizingError):
    """The file cannot be read as a vLLM start-up log (missing, unreadable, binary, or no vLLM lines)."""


@dataclass(frozen=True)
class RunSettings:
    """The engine settings a log shows (None: not printed).

    Attributes:
        model: The model as vLLM was given it (repo id or path).
        vllm_version: The release the engine printed (``0.19.0``).
        engine: ``V1`` or ``V0``.
        dtype: The model dtype as printed (``torch.bfloat16``, or ``bfloat16`` from the args).
        quantization: The quantization vLLM reported for the run (config line).
        quantization_arg: The ``--quantization`` the user gave (non-default args).
        usage_context: ``OPENAI_API_SERVER`` (``vllm serve``) or ``LLM_CLASS`` (offline ``LLM``).
        speculative_method, speculative_tokens: ``--speculative-config`` (its method, as given or as the engine
            resolved it, and ``num_speculative_tokens``).
    """

    model: str | None = None
    vllm_version: str | None = None
    engine: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    enforce_eager: bool | None = None
    dtype: str | None = None
    quantization: str | None = None
    quantization_arg: str | None = None
    usage_context: str | None = None
    speculative_method: str | None = None
    speculative_tokens: int | None = None
    # data / expert / decode-context parallelism (docs/parallelism.md)
    data_parallel_size: int | None = None
    data_parallel_size_local: int | None = None
    enable_expert_parallel: bool | None = None
    enable_eplb: bool | None = None
    all2all_backend: str | None = None
    decode_context_parallel_size: int | None = None
    num_redundant_experts: int | None = None
    # issue 20: LoRA slots, weight offload, KV connector (non-default args / a pasted command line)
    enable_lora: bool | None = None
    max_loras: int | None = None
    max_lora_rank: int | None = None
    fully_sharded_loras: bool | None = None
    cpu_offload_gb: float | None = None
    kv_connector: str | None = None


@dataclass(frozen=True)
class Observed:
    """The memory figures a log printed, as printed (GiB floats, counts as ints; None: not printed).

    The names are those of ``measured`` in the calibration cases (``shared/calibration/README.md``).
    """

    weights_gib: float | None = None
    activation_peak_gib: float | None = None
    non_torch_gib: float | None = None
    total_non_kv_gib: float | None = None
    kv_available_gib: float | None = None
    kv_tokens: int | None = None
    gpu_blocks: int | None = None
    max_concurrency: float | None = None
    cuda_graph_gib: float | None = None
    cuda_graph_estimated_gib: float | None = None
    gpu_total_gib: float | None = None

    def bytes(self, name: str) -> int | None:
        """A ``*_gib`` figure in bytes (rounded to the byte), or None when not printed."""
        value = getattr(self, name)
        return None if value is None else round(value * _GIB)


@dataclass(frozen=True)
class Failure:
    """Why the engine did not start.

    Attributes:
        kind: ``kv_too_small`` (one max_model_len request does not fit the KV cache), ``no_kv_memory``
            (nothing left for the KV cache), ``insufficient_free_memory`` (less free memory at start-up
            than gpu_memory_utilization asks for), ``out_of_memory`` (CUDA OOM), ``error`` (another
            exception ended a traceback: a gated model, a bad setting) or ``engine_failed`` (only vLLM's
            generic "Engine core initialization failed" was seen).
        message: The error line from the exception name on, cut to 400 (``logparse.MAX_FAILURE_CHARS``).
    """

    kind: str
    message: str


@dataclass(frozen=True)
class StartupLog:
    """What one log says about one engine start."""

    settings: RunSettings
    observed: Observed
    failure: Failure | None
    lines_read: int
    lines_recognised: int
    lines_too_long: int
    lines_binary: int
    bytes_read: int
    truncated: bool
    raw_lines: tuple[str, ...]
    starts: int = 0  # "non-default args" / "args: Namespace" lines: one per `vllm serve` start
    #: Recognised lines in vLLM's own start-up output: not a pasted ``vllm serve`` command, not a failure
    #: message quoted without vLLM's log header (a README, an issue thread).
    vllm_lines: int = 0

    @property
    def kv_sized(self) -> bool:
        """Whether the log shows the KV cache sized (available memory, tokens or blocks printed)."""
        o = self.observed
        return any(v is not None for v in (o.kv_available_gib, o.kv_tokens, o.gpu_blocks, o.max_concurrency))

    @property
    def is_vllm(self) -> bool:
        """Whether any line is one vLLM prints at start-up (a Python traceback alone is not).

        A pasted ``vllm serve`` command line or a failure message quoted in prose (a README) is not: a
        file of those holds no start-up to compare with.
        """
        printed = any(getattr(self.settings, f.name) is not None for f in fields(RunSettings)) or any(
            getattr(self.observed, f.name) is not None for f in fields(Observed)
        )
        return self.vllm_lines > 0 and (printed or (self.failure is not None and self.failure.kind != "error"))

    @property
    def outcome(self) -> str:
        """``failed`` (a failure line), ``started`` (KV cache sized, no failure line) or ``unknown``."""
        if self.failure is not None:
            return "failed"
        return "started" if self.kv_sized else "unknown"
