"""The line grammar of vLLM's start-up log: the bounds, the patterns of each release's lines, the key tables.

What vLLM 0.6 to 0.33 print and how each value is read (numbers as printed, Python literals through
``ast.literal_eval``, never ``eval``). :mod:`fitgate.observe.logsteps` applies them one line at a time,
:mod:`fitgate.observe.logparse` assembles the start-up record.
"""

from __future__ import annotations

import math
import re

#: Longest line read (bytes); vLLM's config line is about 3 KiB, a stack-trace line far less.
MAX_LINE_BYTES = 64 * 1024
#: Most bytes read from one log; the start-up lines come first, so this only cuts off serving traffic.
MAX_LOG_BYTES = 64 * 1024 * 1024
#: Longest ``non-default args`` dict handed to ``ast.literal_eval``.
MAX_ARGS_CHARS = 32 * 1024
#: A failure message is cut to this many characters.
MAX_FAILURE_CHARS = 400
#: Recognised lines kept for ``--as-case`` (``raw_lines``).
MAX_KEPT_LINES = 200

# Bounded digits (issue 22): a 4,000-digit number is no reading (int() refuses it, float() makes it inf),
# and a number cut short by the bound must not match at all, hence the look-aheads.
_NUM = r"(-?\d{1,15}(?:\.\d{1,20})?)(?!\d)"
_COUNT = r"(\d{1,3}(?:,\d{3}){1,5}|\d{1,15})(?!\d)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROC = re.compile(r"\(([^()]{1,80}?)\s+pid=\d+\)")
_RANK = re.compile(r"(?:TP|PP|DP|rank=)(\d+)")
_HEADER = re.compile(
    r"\b(?:INFO|DEBUG|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]{0,200}\]\s*|\S{1,200}:\d+\]\s*)?"
)
_EXCEPTION = re.compile(r"\b(?:[A-Za-z_]\w*\.){0,4}[A-Za-z_]\w*(?:Error|Exception): ")


# ------------------------------------------------------------------------------------------------
# Line patterns. Each names the release whose wording it matches; see shared/calibration for examples.

# "non-default args: {...}" and "args: Namespace(...)" run to the end of the line. Read with str.find and
# rstrip, in linear time: the patterns `non-default args: (\{.*\})\s*$` / `\bargs: Namespace\((.*)\)\s*$`
# were quadratic in the line's length (each occurrence of the prefix scanned to the end again; 64 KiB
# lines of it took seconds each, issue 22).
_ARGS_DICT_PREFIX = "non-default args: {"
_ARGS_NAMESPACE_PREFIX = re.compile(r"\bargs: Namespace\(")
# A pasted command line: "$ vllm serve MODEL --max-model-len 8192 -tp 2"
_SERVE = re.compile(r"(?:^|[\s$>])vllm serve (\S.*)$")
_SERVE_FLAGS = {
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--block-size": "block_size",
    "--dtype": "dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    # data / expert / decode-context parallelism (docs/parallelism.md); -ep is a switch, read below
    "--data-parallel-size": "data_parallel_size",
    "-dp": "data_parallel_size",
    "--data-parallel-size-local": "data_parallel_size_local",
    "-dpl": "data_parallel_size_local",
    "--all2all-backend": "all2all_backend",
    "--decode-context-parallel-size": "decode_context_parallel_size",
    "-dcp": "decode_context_parallel_size",
    # issue 20: LoRA slots and weight offload
    "--max-loras": "max_loras",
    "--max-lora-rank": "max_lora_rank",
    "--cpu-offload-gb": "cpu_offload_gb",
}
#: Flags of a pasted command line that take no value (issue 20 adds the LoRA ones).
_SERVE_BOOLEANS = {
    "--enforce-eager": "enforce_eager",
    "--enable-lora": "enable_lora",
    "--fully-sharded-loras": "fully_sharded_loras",
}
_ENGINE = re.compile(r"Initializing an? (?:(V[01]) )?LLM engine \(v?([0-9][^)\s]{0,40})\) with config: (.*)$")
_SERVER_VERSION = re.compile(r"vLLM API server version:? v?(\d+\.\d+[\w.+-]{0,40})")
_DEFAULTING = re.compile(r"Defaulting (max_num_batched_tokens|max_num_seqs) to (\d{1,15}) for (\w{1,40}) usage context")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d{1,15})(?!\d)")
# 0.10+ (DEBUG): worker init memory snapshot: ..., total_memory=79.19GiB, ...
# (found after the first "memory snapshot:" with str.find: `memory snapshot:.*?\btotal_memory=` was quadratic)
_SNAPSHOT = re.compile(r"\btotal_memory=" + _NUM + r"\s*GiB")
# 0.10+: Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95, 75.23 GiB).
_FREE_ON_DEVICE = re.compile(r"Free memory on device \(" + _NUM + r"/" + _NUM + r"\s*GiB\)")
_DESIRED_GMU = re.compile(r"Desired GPU memory utilization is \(" + _NUM + r",")
_ACTUAL_USAGE = re.compile(
    r"Actual usage is " + _NUM + r" GiB for weight, " + _NUM + r" GiB for peak activation, " + _NUM
    + r" GiB for non-torch memory, and " + _NUM + r" GiB for CUDAGraph memory"
)  # fmt: skip
# 0.28-0.31: "Actual usage is 8.59 GiB for consumed memory (weights + non-torch), 1.09 GiB for peak activation, and
# 0.23 GiB for CUDAGraph memory." (the weights are "Model loading took"'s figure: non-torch is the difference)
_ACTUAL_CONSUMED = re.compile(
    r"Actual usage is " + _NUM + r" GiB for consumed memory \(weights \+ non-torch\), " + _NUM
    + r" GiB for peak activation, and " + _NUM + r" GiB for CUDAGraph memory"
)  # fmt: skip
# V1 "Model loading took 29.43 GiB memory"; V0 "Loading model weights took 14.9888 GB" (GB = GiB there)
_LOADING = re.compile(r"(?:Model loading|Loading model weights) took " + _NUM + r"\s*Gi?B")
# 0.11+ (DEBUG): Memory profiling takes N seconds. Total non KV cache memory: ...; torch peak memory increase: ...
_TOTAL_NON_KV = re.compile(r"Total non KV cache memory: " + _NUM + r"\s*GiB")
_TORCH_PEAK = re.compile(r"torch peak memory increase: " + _NUM + r"\s*GiB")
_NON_TORCH_FWD = re.compile(r"non-torch forward increase memory: " + _NUM + r"\s*GiB")
_WEIGHTS_MEMORY = re.compile(r"weights memory: " + _NUM + r"\s*GiB")
# V0 0.6.5-0.10 / V1 0.8-0.10: "... total_gpu_memory (22.06GiB) x gpu_memory_utilization (0.90) = 19.85GiB"
# and "model weights take 2.88GiB; non_torch_memory takes 0.05GiB; PyTorch activation peak memory takes
# 1.40GiB; the rest of the memory reserved for KV Cache is 15.52GiB." (also the one-value-per-line form of
# vLLM PR #10511 and the key=value "Memory profiling results:" line of <= 0.6.4).
_TOTAL_TIMES_GMU = re.compile(
    r"total_gpu_memory \(" + _NUM + r"\s*GiB\) x (?:gpu_memory_utilization \()?" + _NUM
)  # fmt: skip
_TOTAL_GPU_MEMORY = re.compile(r"total_gpu_memory(?:=|\s+)" + _NUM + r"\s*GiB")
_GMU_VALUE = re.compile(r"(?:^|[\s\]])gpu_memory_utilization(?:=|\s+)" + _NUM + r"\s*$|gpu_memory_utilization=" + _NUM)
_WEIGHTS_TAKE = re.compile(r"model weights take\s+" + _NUM + r"\s*GiB")
_NON_TORCH = re.compile(r"non_torch_memory(?:\s+takes\s+|\s+|=)" + _NUM + r"\s*GiB")
_ACTIVATION = re.compile(r"PyTorch activation peak memory(?:\s+takes)?\s+" + _NUM + r"\s*GiB")
_REST_FOR_KV = re.compile(r"the rest (?:of the memory )?reserved for KV Cache is\s+" + _NUM + r"\s*GiB")
_KV_AVAILABLE = re.compile(r"(?:Available KV cache memory:|available_kv_cache_memory)\s+" + _NUM + r"\s*GiB")
_KV_CACHE_SIZE = re.compile(r"\bkv_cache_size=" + _NUM + r"\s*GiB")
# "%s KV cache size: %s tokens" and "# %s blocks: %d" name the device: GPU / cuda on CUDA, others elsewhere
_DEVICES = r"(?:GPU|gpu|CUDA|cuda|ROCm|rocm|XPU|xpu|HPU|hpu|TPU|tpu|NPU|npu)"
_KV_TOKENS = re.compile(r"(?<![A-Za-z])" + _DEVICES + r" KV cache size: " + _COUNT + r" tokens")
_BLOCKS = re.compile(r"(?:num_gpu_blocks is:|(?<![A-Za-z])" + _DEVICES + r" blocks:)\s*" + _COUNT)
#: vLLM 0.34's extensible KV cache: "Extended KV cache to %d blocks (%.2f GiB)." (extensible_kv_cache.py 0.34.0
#: L795-799), the final block count after warm-up.
_EXTENDED_BLOCKS = re.compile(r"Extended KV cache to " + _COUNT + r" blocks")
_CONCURRENCY = re.compile(r"Maximum concurrency for " + _COUNT + r" tokens per request: " + _NUM + r"x")
_CG_ESTIMATED = re.compile(r"Estimated CUDA graph memory: " + _NUM + r"\s*GiB")
_CG_CAPTURED = re.compile(r"Graph capturing finished in \d+(?:\.\d+)? secs?, took " + _NUM + r"\s*GiB")
_CG_POOL = re.compile(r"CUDA graph pool memory: " + _NUM + r"\s*GiB \(actual\), " + _NUM + r"\s*GiB \(estimated\)")

# Failures, most specific first (shared/reference/vllm-memory.md section 8).
_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kv_too_small", re.compile(r"To serve at least one request with the models?'s max seq len \(\d+\)")),
    ("kv_too_small", re.compile(r"The models?'s max seq len \(\d+\) is larger than the maximum number of tokens")),
    ("no_kv_memory", re.compile(r"No available memory for the cache blocks")),
    ("insufficient_free_memory", re.compile(r"Free memory on device .{0,80}? is less than desired GPU memory")),
    ("out_of_memory", re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory")),
)
_GENERIC_FAILURE = re.compile(r"Engine core initialization failed|Engine process failed to start|EngineDeadError")
# The last line of a Python traceback: the exception, right after the prefix or log header, not indented.
_TRACEBACK = "Traceback (most recent call last)"
_EXCEPTION_LINE = re.compile(r"(?:^|[)\]Z] )((?:[A-Za-z_]\w*\.){0,4}[A-Za-z_]\w*(?:Error|Exception)): ")
_ANY_FAILURE = re.compile("|".join([*(p.pattern for _, p in _FAILURES), _GENERIC_FAILURE.pattern]))

#: Words one of which every line a step reads contains; other lines are not looked at further.
_TRIGGERS = (
    "args: ",
    "vllm serve ",
    "LLM engine",
    "version",
    "Defaulting ",
    "Chunked prefill",
    "emory",
    "took",
    "weights take",
    "KV cache size",
    "kv_cache_size",
    "blocks",
    "Maximum concurrency",
    "raph",
    "max seq len",
    "OutOfMemoryError",
    "Engine core initialization failed",
    "Engine process failed to start",
    "EngineDeadError",
    "Traceback",
    "Error: ",
    "Exception: ",
)
_TRIGGER = re.compile("|".join(re.escape(word) for word in _TRIGGERS))

_SETTING_KEYS = {
    "model": str,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "max_model_len": int,
    "gpu_memory_utilization": float,
    "kv_cache_dtype": str,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "block_size": int,
    "enforce_eager": bool,
    "dtype": str,
    "quantization": str,
    "speculative_method": str,
    "speculative_tokens": int,
    "data_parallel_size": int,
    "data_parallel_size_local": int,
    "enable_expert_parallel": bool,
    "enable_eplb": bool,
    "all2all_backend": str,
    "decode_context_parallel_size": int,
    "num_redundant_experts": int,
    # issue 20: LoRA slots, weight offload, KV connector
    "enable_lora": bool,
    "max_loras": int,
    "max_lora_rank": int,
    "fully_sharded_loras": bool,
    "cpu_offload_gb": float,
    "kv_connector": str,
}
_CONFIG_KEYS = {
    "model": "model",
    "dtype": "dtype",
    "max_seq_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "quantization": "quantization",
    "enforce_eager": "enforce_eager",
    "kv_cache_dtype": "kv_cache_dtype",
    "speculative_method": "speculative_method",
    "speculative_tokens": "speculative_tokens",
    # vllm/config/vllm.py 0.33.0 L2823-2826: the config line prints data_parallel_size and
    # decode_context_parallel_size (not enable_expert_parallel: that is in the non-default args)
    "data_parallel_size": "data_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
}
_KEY_VALUE = re.compile(r"(?:^|[\s,(])([a-z_]{1,40})=('(?:[^'\\]|\\.){0,4096}'|[^,)\s]{0,200})")
_ARG_ITEM = re.compile(r"'([a-z_]{1,40})': ('(?:[^'\\]|\\.){0,4096}'|[^,}]{0,200})")

# Priorities: a higher one replaces a lower one; at equal priority the first line wins.
_ARG, _CONFIG, _DETAIL, _SUMMARY, _FALLBACK = 4, 3, 2, 1, 0


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters written as hex escapes (backslash, x, two digits).

    A log's escape sequences never reach a terminal, a status or an Event raw (issue 22); newlines and tabs
    are kept.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def _num(text: str) -> float:
    return float(text)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def _literal(text: str) -> object:
    """A value as printed in a ``key=value`` list: quoted string, None, True/False, int, float, else text."""
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    if text in ("None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _typed(value: object, kind: type) -> object | None:
    """``value`` as ``kind`` (int, float, bool or str), or None when it is something else."""
    if value is None:
        return None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 31 else None
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        number = float(value) if ok else None  # type: ignore[arg-type]
        return number if number is not None and math.isfinite(number) else None  # no NaN or inf (issue 22)
    return value if isinstance(value, str) and len(value) <= 512 else None


def _is_rank0(line: str) -> bool:
    """False for lines a non-zero tensor/pipeline/data-parallel rank printed (its process prefix says so)."""
    match = _PROC.search(line[:200])
    if not match:
        return True
    proc = match.group(1)
    if proc.startswith("VllmWorkerProcess"):  # V0: the driver (rank 0) prints without a prefix
        return False
    return all(int(n) == 0 for n in _RANK.findall(proc))
