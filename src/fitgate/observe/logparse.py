"""Read a vLLM start-up log: the settings the engine ran with and the memory figures it printed.

One narrow parser for ``kubectl logs`` output of vLLM 0.6 to 0.33, with or without the process prefix
vLLM adds (``(EngineCore_DP0 pid=243)``, ``(VllmWorker TP0 pid=..)``, ``(Worker_PP1 pid=..)``) or the
one ``kubectl logs --prefix`` adds (``[pod/x/c]``). It reads, where printed:

* settings: the ``non-default args: {...}`` dict (``ast.literal_eval``, never ``eval``), the
  ``Initializing a V1 LLM engine (vX.Y.Z) with config: ...`` line, the ``Defaulting max_num_seqs ...``
  lines, the older ``args: Namespace(...)`` line;
* the GPU total: the worker's memory snapshot, ``Free memory on device (a/b GiB)``, or the V0
  ``total_gpu_memory`` lines;
* the figures: weights, activation peak, non-torch increase, total non-KV, available KV cache, KV
  tokens, GPU blocks, maximum concurrency, CUDA-graph memory (estimated and actual);
* the failure: the KV-cache ``ValueError`` lines, CUDA out of memory, and the generic engine failure.

Figures are kept as printed (GiB with the log's decimals; vLLM's old "GB" lines divide by 2**30 too),
so that a test can compare them exactly with the numbers in the log; ``Observed.bytes`` converts.
Where several ranks print a figure, tensor/pipeline rank 0 wins; where several lines print the same
figure, the more detailed one wins (the profiler's "weights memory" over "Model loading took").

UTF-8 (invalid bytes replaced) or UTF-16 with a byte-order mark (PowerShell 5 redirection). Bounded: lines
longer than :data:`MAX_LINE_BYTES` are skipped unread, reading stops after
:data:`MAX_LOG_BYTES`, and nothing in a log can raise anything but :class:`LogError` from
:func:`read_log`.
"""

from __future__ import annotations

import ast
import codecs
import io
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import BinaryIO

from fitgate.observe.records import Failure, LogError, Observed, RunSettings, StartupLog

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


class _Reader:
    """Accumulates one log, line by line, keeping the best source of every value."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[tuple[bool, int], object]] = {}
        self.failure: Failure | None = None
        self.generic_failure: Failure | None = None
        self.lines = 0
        self.recognised = 0
        self.too_long = 0
        self.binary = 0
        self.kept: list[str] = []
        self._rank0 = True
        self._hit = False
        self.in_traceback = False
        self.starts = 0
        self.error_failure: Failure | None = None
        self.printed = 0  # lines of vLLM's own start-up output (see StartupLog.vllm_lines)

    def put(self, name: str, value: object, priority: int) -> None:
        if value is None:
            return
        self._hit = True
        rank = (self._rank0, priority)
        old = self.values.get(name)
        if old is None or rank > old[0]:
            self.values[name] = (rank, value)

    def feed(self, raw: str) -> None:
        self.lines += 1
        if len(raw) > MAX_LINE_BYTES:
            self.too_long += 1
            return
        if "\x00" in raw:
            self.binary += 1
            return
        if not _TRIGGER.search(raw):  # serving traffic: most lines of a long log
            return
        line = _ANSI.sub("", raw) if "\x1b" in raw else raw
        self._rank0 = _is_rank0(line)
        hit = False
        for step in _STEPS:
            self._hit = False
            step(self, line)
            if self._hit and (step not in _QUOTED_STEPS or _printed_by_vllm(line)):
                self.printed += 1
            hit = hit or self._hit
        self._hit = hit
        if self._hit:
            self.recognised += 1
            if len(self.kept) < MAX_KEPT_LINES:
                self.kept.append(line)

    def fail(self, kind: str, line: str, at: int) -> None:
        self._hit = True
        header = _HEADER.search(line, 0, at + 1)
        start = header.end() if header else 0
        exc = _EXCEPTION.search(line, start, at + 80)
        if exc and exc.start() <= at:
            start = exc.start()
        message = printable(line[start:].strip())[:MAX_FAILURE_CHARS]
        failure = Failure(kind, message)
        if kind == "engine_failed":
            self.generic_failure = self.generic_failure or failure
        elif kind == "error":
            self.error_failure = self.error_failure or failure
        elif self.failure is None:
            self.failure = failure

    def result(self, bytes_read: int, truncated: bool) -> StartupLog:
        got = {name: value for name, (_, value) in self.values.items()}
        settings = RunSettings(**{f.name: got.get(f.name) for f in fields(RunSettings)})  # type: ignore[arg-type]
        observed = Observed(**{f.name: got.get(f.name) for f in fields(Observed)})  # type: ignore[arg-type]
        return StartupLog(
            settings=settings,
            observed=observed,
            failure=self.failure or self.error_failure or self.generic_failure,
            lines_read=self.lines,
            lines_recognised=self.recognised,
            lines_too_long=self.too_long,
            lines_binary=self.binary,
            bytes_read=bytes_read,
            truncated=truncated,
            raw_lines=tuple(self.kept),
            starts=self.starts,
            vllm_lines=self.printed,
        )


def _settings_from(reader: _Reader, items: Iterable[tuple[str, object]], priority: int, keys: dict[str, str]) -> None:
    for key, value in items:
        name = keys.get(key)
        if name is None:
            continue
        typed = _typed(value, _SETTING_KEYS[name])
        if name == "quantization" and priority == _ARG:
            reader.put("quantization_arg", typed, priority)
            continue
        reader.put(name, typed, priority)


_ARG_NAMES = {k: k for k in _SETTING_KEYS} | {"model_tag": "model"}


#: The engine's resolved speculative config in its config line (vllm/config/vllm.py ``__str__`` 0.33.0:
#: ``speculative_config=SpeculativeConfig(method='mtp', model='...', num_spec_tokens=2)``).
_SPEC_CONFIG = re.compile(
    r"speculative_config=SpeculativeConfig\(method='([a-z0-9_]{1,40})'.{0,2048}?num_spec_tokens=(\d{1,4})"
)


def _speculative_items(value: object) -> list[tuple[str, object]]:
    """``speculative_config`` of the non-default args (a dict, or its JSON text) as two settings."""
    if isinstance(value, str):
        try:
            value = json.loads(value[:MAX_ARGS_CHARS])
        except (ValueError, RecursionError):
            return []
    if not isinstance(value, dict):
        return []
    method = value.get("method")
    if method is None and value.get("model") is not None:
        method = "ngram" if value.get("model") in ("ngram", "[ngram]") else "draft_model"
    return [("speculative_method", method), ("speculative_tokens", value.get("num_speculative_tokens"))]


_KV_CONNECTOR = re.compile(r"kv_connector['\"]?\s*[:=]\s*['\"]([A-Za-z0-9_]{1,100})['\"]")


def _kv_transfer_items(value: object) -> list[tuple[str, object]]:
    """``kv_transfer_config`` of the non-default args (a dict, JSON text or a repr) as its connector (issue 20)."""
    if isinstance(value, dict):
        return [("kv_connector", value.get("kv_connector"))]
    match = _KV_CONNECTOR.search(str(value)[:MAX_ARGS_CHARS])
    return [("kv_connector", match.group(1))] if match else []


def _args_dict(line: str) -> str | None:
    """The ``{...}`` of ``non-default args: {...}`` that ends the line (trailing blanks aside), in linear time."""
    at = line.find(_ARGS_DICT_PREFIX)
    if at < 0:
        return None
    end = line.rstrip()
    start = at + len(_ARGS_DICT_PREFIX) - 1
    return end[start:] if end.endswith("}") and len(end) > start else None


def _args_namespace(line: str) -> str | None:
    """The inside of ``args: Namespace(...)`` that ends the line, in linear time."""
    match = _ARGS_NAMESPACE_PREFIX.search(line)
    if match is None:
        return None
    end = line.rstrip()
    return end[match.end() : -1] if end.endswith(")") and len(end) > match.end() else None


def _step_args(r: _Reader, line: str) -> None:
    if "args: " not in line:
        return
    text = _args_dict(line)
    if text is not None:
        r.starts += 1
        parsed: object = None
        if len(text) <= MAX_ARGS_CHARS:
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                parsed = None
        if isinstance(parsed, dict):
            items: list[tuple[str, object]] = [(str(k), v) for k, v in parsed.items()]
        else:  # a value vLLM printed as a repr (an enum, a config object): read the plain keys one by one
            items = [(m.group(1), _literal(m.group(2).strip())) for m in _ARG_ITEM.finditer(text[:MAX_ARGS_CHARS])]
        # 'model' beats the positional 'model_tag' when both are printed (they are equal in practice)
        items.sort(key=lambda kv: kv[0] == "model_tag")
        items += [kv for key, value in list(items) if key == "speculative_config" for kv in _speculative_items(value)]
        items += [
            ("num_redundant_experts", value.get("num_redundant_experts"))
            for key, value in list(items)
            if key == "eplb_config" and isinstance(value, dict)
        ]
        items += [kv for key, value in list(items) if key == "kv_transfer_config" for kv in _kv_transfer_items(value)]
        _settings_from(r, items, _ARG, _ARG_NAMES)
        return
    inner = _args_namespace(line)
    if inner is not None:
        r.starts += 1
        pairs = [(m.group(1), _literal(m.group(2))) for m in _KEY_VALUE.finditer(inner)]
        _settings_from(r, pairs, _ARG, _ARG_NAMES)


def _step_serve(r: _Reader, line: str) -> None:
    if "vllm serve " not in line:
        return
    match = _SERVE.search(line)
    if not match:
        return
    try:
        words = shlex.split(match.group(1)[:4096])
    except ValueError:  # unbalanced quotes
        words = match.group(1)[:4096].split()
    if not words or words[0].startswith("-"):
        return
    items: list[tuple[str, object]] = [("model", words[0])]
    rest = iter(words[1:])
    for word in rest:
        flag, eq, inline = word.partition("=")
        if flag in _SERVE_BOOLEANS:
            items.append((_SERVE_BOOLEANS[flag], True))
            continue
        if flag in ("--enable-expert-parallel", "-ep", "--enable-eplb"):
            items.append(("enable_eplb" if flag == "--enable-eplb" else "enable_expert_parallel", True))
            continue
        name = _SERVE_FLAGS.get(flag)
        if name is None:
            continue
        text = inline if eq else next(rest, "")
        items.append((name, _literal(text) if _SETTING_KEYS[name] is not str else text))
    _settings_from(r, items, _ARG, _ARG_NAMES)


def _step_engine(r: _Reader, line: str) -> None:
    if "LLM engine" in line:
        match = _ENGINE.search(line)
        if match:
            version = match.group(2)
            r.put("vllm_version", version, _CONFIG)
            engine = match.group(1)
            if engine is None:
                engine = "V0"  # "Initializing an LLM engine": before the V1 engine existed
            r.put("engine", engine, _CONFIG)
            pairs = [(m.group(1), _literal(m.group(2))) for m in _KEY_VALUE.finditer(match.group(3))]
            spec = _SPEC_CONFIG.search(match.group(3))
            if spec:
                pairs += [("speculative_method", spec.group(1)), ("speculative_tokens", int(spec.group(2)))]
            _settings_from(r, pairs, _CONFIG, _CONFIG_KEYS)
    if "version" in line:
        match = _SERVER_VERSION.search(line)
        if match:
            r.put("vllm_version", match.group(1), _SUMMARY)


def _step_defaults(r: _Reader, line: str) -> None:
    if "Defaulting " in line:
        match = _DEFAULTING.search(line)
        if match:
            r.put(match.group(1), int(match.group(2)), _DETAIL)
            r.put("usage_context", match.group(3), _DETAIL)
    if "Chunked prefill" in line:
        match = _CHUNKED.search(line)
        if match:
            r.put("max_num_batched_tokens", int(match.group(1)), _SUMMARY)


def _step_gpu_total(r: _Reader, line: str) -> None:
    if "memory snapshot" in line:
        at = line.find("memory snapshot:")
        match = _SNAPSHOT.search(line, at + 16) if at >= 0 else None
        if match:
            r.put("gpu_total_gib", _num(match.group(1)), _DETAIL)
        return  # the snapshot's non_torch_memory is the CUDA context, not the profiling increase
    if "Free memory on device" in line:
        match = _FREE_ON_DEVICE.search(line)
        if match:
            r.put("gpu_total_gib", _num(match.group(2)), _SUMMARY)
        match = _DESIRED_GMU.search(line)
        if match:
            r.put("gpu_memory_utilization", _num(match.group(1)), _SUMMARY)
        match = _ACTUAL_USAGE.search(line)
        if match:
            for name, text in zip(
                ("weights_gib", "activation_peak_gib", "non_torch_gib", "cuda_graph_gib"), match.groups(), strict=True
            ):
                r.put(name, _num(text), _FALLBACK)
    if "total_gpu_memory" in line:
        match = _TOTAL_TIMES_GMU.search(line)
        if match:
            r.put("gpu_total_gib", _num(match.group(1)), _DETAIL)
            r.put("gpu_memory_utilization", _num(match.group(2)), _SUMMARY)
        else:
            match = _TOTAL_GPU_MEMORY.search(line)
            if match:
                r.put("gpu_total_gib", _num(match.group(1)), _DETAIL)
    if "gpu_memory_utilization" in line and "args" not in line:
        match = _GMU_VALUE.search(line)
        if match:
            r.put("gpu_memory_utilization", _num(match.group(1) or match.group(2)), _SUMMARY)


def _step_profile(r: _Reader, line: str) -> None:
    if " took " in line:
        match = _LOADING.search(line)
        if match:
            r.put("weights_gib", _num(match.group(1)), _SUMMARY)
    if ("memory" not in line and "Memory" not in line and "weights take" not in line) or "memory snapshot" in line:
        return
    for pattern, name in (
        (_TOTAL_NON_KV, "total_non_kv_gib"),
        (_TORCH_PEAK, "activation_peak_gib"),
        (_NON_TORCH_FWD, "non_torch_gib"),
        (_WEIGHTS_MEMORY, "weights_gib"),
        (_WEIGHTS_TAKE, "weights_gib"),
        (_NON_TORCH, "non_torch_gib"),
        (_ACTIVATION, "activation_peak_gib"),
    ):
        match = pattern.search(line)
        if match:
            r.put(name, _num(match.group(1)), _DETAIL)


def _step_kv(r: _Reader, line: str) -> None:
    if "KV cache memory" in line or "KV Cache is" in line or "kv_cache" in line:
        for pattern in (_KV_AVAILABLE, _REST_FOR_KV, _KV_CACHE_SIZE):
            match = pattern.search(line)
            if match:
                r.put("kv_available_gib", _num(match.group(1)), _DETAIL)
                break
    if "KV cache size" in line:
        match = _KV_TOKENS.search(line)
        if match:
            r.put("kv_tokens", _count(match.group(1)), _DETAIL)
    if "blocks" in line:
        match = _BLOCKS.search(line) or _EXTENDED_BLOCKS.search(line)
        if match:
            r.put("gpu_blocks", _count(match.group(1)), _DETAIL)
    if "Maximum concurrency" in line:
        match = _CONCURRENCY.search(line)
        if match:
            r.put("max_concurrency", _num(match.group(2)), _DETAIL)
            r.put("max_model_len", _count(match.group(1)), _FALLBACK)


def _step_cuda_graphs(r: _Reader, line: str) -> None:
    if "raph" not in line:
        return
    match = _CG_ESTIMATED.search(line)
    if match:
        r.put("cuda_graph_estimated_gib", _num(match.group(1)), _DETAIL)
    match = _CG_CAPTURED.search(line)
    if match:
        r.put("cuda_graph_gib", _num(match.group(1)), _DETAIL)
    match = _CG_POOL.search(line)
    if match:
        r.put("cuda_graph_gib", _num(match.group(1)), _SUMMARY)
        r.put("cuda_graph_estimated_gib", _num(match.group(2)), _SUMMARY)


def _step_failure(r: _Reader, line: str) -> None:
    if _TRACEBACK in line:
        r.in_traceback = True
    elif r.in_traceback:
        match = _EXCEPTION_LINE.search(line)
        if match:
            r.in_traceback = False
            if not _ANY_FAILURE.search(line):
                r.fail("error", line, match.start(1))
                return
    if not _ANY_FAILURE.search(line):
        return
    for kind, pattern in _FAILURES:
        match = pattern.search(line)
        if match:
            r.fail(kind, line, match.start())
            return
    match = _GENERIC_FAILURE.search(line)
    if match:
        r.fail("engine_failed", line, match.start())


_STEPS: tuple[Callable[[_Reader, str], None], ...] = (
    _step_args,
    _step_serve,
    _step_engine,
    _step_defaults,
    _step_gpu_total,
    _step_profile,
    _step_kv,
    _step_cuda_graphs,
    _step_failure,
)


#: Steps whose text a person also writes: a pasted ``vllm serve`` command line, a failure message quoted in
#: prose or a table (a README, an issue). Their lines count as vLLM's own output only when they carry what
#: vLLM's logger puts before a line (:func:`_printed_by_vllm`).
_QUOTED_STEPS = (_step_serve, _step_failure)


def _printed_by_vllm(line: str) -> bool:
    """Whether a line has a form vLLM prints and prose does not.

    Its logger header (``ERROR 05-06 12:00:00 [core.py:123]``), a process prefix (``(EngineCore_DP0
    pid=123)``), or an exception name at its start, as a traceback ends.
    """
    return bool(_HEADER.search(line) or _PROC.search(line) or _EXCEPTION_START.match(line))


#: ``ValueError: ...`` / ``torch.OutOfMemoryError: ...`` at the start of a line (after optional ``[pod/x/c]``).
_EXCEPTION_START = re.compile(r"\s*(?:\[[^\]]{0,200}\]\s*)?(?:[A-Za-z_]\w*\.){0,4}[A-Za-z_]\w*(?:Error|Exception): ")


def parse_lines(lines: Iterable[str]) -> StartupLog:
    """Read log lines (without their newline) already in memory; over-long lines are skipped.

    Never raises on content: a log with no vLLM line gives a :class:`StartupLog` with
    ``lines_recognised == 0``.
    """
    reader = _Reader()
    size = 0
    truncated = False
    for line in lines:
        if size >= MAX_LOG_BYTES:
            truncated = True
            break
        size += len(line) + 1
        reader.feed(line.rstrip("\r\n"))
    return reader.result(size, truncated)


def _read_stream(stream: BinaryIO, reader: _Reader) -> tuple[int, bool]:
    """Feed ``reader`` from a binary stream, one bounded line at a time; returns (bytes read, truncated)."""
    total = 0
    while total < MAX_LOG_BYTES:
        chunk = stream.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return total, False
        total += len(chunk)
        if len(chunk) > MAX_LINE_BYTES:  # skip the rest of this line without keeping it
            reader.lines += 1
            reader.too_long += 1
            while not chunk.endswith(b"\n") and total < MAX_LOG_BYTES:
                chunk = stream.readline(MAX_LINE_BYTES)
                if not chunk:
                    return total, False
                total += len(chunk)
            continue
        reader.feed(chunk.decode("utf-8", errors="replace").rstrip("\r\n"))
    return total, stream.read(1) != b""


def _read_utf16(stream: BinaryIO, reader: _Reader) -> tuple[int, bool]:
    """Like :func:`_read_stream` for a UTF-16 file (Windows PowerShell 5 writes ``kubectl logs > f`` so)."""
    text = io.TextIOWrapper(stream, encoding="utf-16", errors="replace", newline="")
    try:
        return _read_text(text, reader)
    finally:
        text.detach()  # the caller closes the file


def _read_text(text: io.TextIOWrapper, reader: _Reader) -> tuple[int, bool]:
    limit = MAX_LINE_BYTES // 2
    total = 0
    while total < MAX_LOG_BYTES:
        line = text.readline(limit + 1)
        if not line:
            return total, False
        total += 2 * len(line)
        if len(line) > limit:
            reader.lines += 1
            reader.too_long += 1
            while not line.endswith("\n") and total < MAX_LOG_BYTES:
                line = text.readline(limit)
                if not line:
                    return total, False
                total += 2 * len(line)
            continue
        reader.feed(line.rstrip("\r\n"))
    return total, text.read(1) != ""


def read_log(path: str | Path) -> StartupLog:
    """Read a vLLM start-up log file (``-`` is not accepted: give a file).

    Raises:
        LogError: the file cannot be opened, or has no line vLLM prints at start-up (binary data, an
            empty file, a file of over-long lines, some other program's log).
    """
    where = str(path)
    reader = _Reader()
    try:
        with Path(path).open("rb") as stream:
            utf16 = stream.read(2) in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
            stream.seek(0)
            size, truncated = (_read_utf16 if utf16 else _read_stream)(stream, reader)
    except IsADirectoryError:
        raise LogError("--log", where, "a log file (this is a directory)") from None
    except OSError as exc:
        raise LogError("--log", where, "a readable log file", exc.strerror or type(exc).__name__) from None
    log = reader.result(size, truncated)
    if not log.is_vllm:
        detail = f"no vLLM start-up line in {log.lines_read} lines ({log.bytes_read} bytes)"
        if log.lines_binary:
            detail += f"; {log.lines_binary} lines of binary data"
        if log.lines_too_long:
            detail += f"; {log.lines_too_long} lines over {MAX_LINE_BYTES} bytes skipped"
        raise LogError("--log", where, "a vLLM start-up log (`kubectl logs POD`)", detail)
    return log
