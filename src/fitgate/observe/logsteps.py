"""One step per kind of start-up line (per release's wording): what it reads from a line into the record.

Each step matches its patterns (:mod:`fitgate.observe.logpatterns`) on a line and puts what it found into a
:class:`LineSink` (:mod:`fitgate.observe.logparse`'s reader) with a priority: the more detailed source wins.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Protocol

from fitgate.observe.logpatterns import (
    _ACTIVATION,
    _ACTUAL_CONSUMED,
    _ACTUAL_USAGE,
    _ANY_FAILURE,
    _ARG,
    _ARG_ITEM,
    _ARGS_DICT_PREFIX,
    _ARGS_NAMESPACE_PREFIX,
    _BLOCKS,
    _CG_CAPTURED,
    _CG_ESTIMATED,
    _CG_POOL,
    _CHUNKED,
    _CONCURRENCY,
    _CONFIG,
    _CONFIG_KEYS,
    _DEFAULTING,
    _DESIRED_GMU,
    _DETAIL,
    _ENGINE,
    _EXCEPTION_LINE,
    _EXTENDED_BLOCKS,
    _FAILURES,
    _FALLBACK,
    _FREE_ON_DEVICE,
    _GENERIC_FAILURE,
    _GMU_VALUE,
    _HEADER,
    _KEY_VALUE,
    _KV_AVAILABLE,
    _KV_CACHE_SIZE,
    _KV_TOKENS,
    _LOADING,
    _NON_TORCH,
    _NON_TORCH_FWD,
    _PROC,
    _REST_FOR_KV,
    _SERVE,
    _SERVE_BOOLEANS,
    _SERVE_FLAGS,
    _SERVER_VERSION,
    _SETTING_KEYS,
    _SNAPSHOT,
    _SUMMARY,
    _TORCH_PEAK,
    _TOTAL_GPU_MEMORY,
    _TOTAL_NON_KV,
    _TOTAL_TIMES_GMU,
    _TRACEBACK,
    _WEIGHTS_MEMORY,
    _WEIGHTS_TAKE,
    MAX_ARGS_CHARS,
    _count,
    _literal,
    _num,
    _typed,
)


class LineSink(Protocol):
    """What the steps write into: the reader that assembles one log (:mod:`fitgate.observe.logparse`)."""

    starts: int
    in_traceback: bool

    def put(self, name: str, value: object, priority: int) -> None:
        """Keep ``value`` for ``name`` unless a better source (rank 0, higher ``priority``) gave one."""

    def fail(self, kind: str, line: str, at: int) -> None:
        """Record the failure printed on ``line`` from character ``at``."""

    def value(self, name: str) -> object | None:
        """The value kept for ``name`` so far (None: none yet)."""


def _settings_from(reader: LineSink, items: Iterable[tuple[str, object]], priority: int, keys: dict[str, str]) -> None:
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


def _step_args(r: LineSink, line: str) -> None:
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


def _step_serve(r: LineSink, line: str) -> None:
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


def _step_engine(r: LineSink, line: str) -> None:
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


def _step_defaults(r: LineSink, line: str) -> None:
    if "Defaulting " in line:
        match = _DEFAULTING.search(line)
        if match:
            r.put(match.group(1), int(match.group(2)), _DETAIL)
            r.put("usage_context", match.group(3), _DETAIL)
    if "Chunked prefill" in line:
        match = _CHUNKED.search(line)
        if match:
            r.put("max_num_batched_tokens", int(match.group(1)), _SUMMARY)


def _step_gpu_total(r: LineSink, line: str) -> None:
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
        match = _ACTUAL_CONSUMED.search(line)
        if match:
            r.put("activation_peak_gib", _num(match.group(2)), _FALLBACK)
            r.put("cuda_graph_gib", _num(match.group(3)), _FALLBACK)
            weights, consumed = r.value("weights_gib"), _num(match.group(1))
            if isinstance(weights, float) and consumed is not None:
                r.put("non_torch_gib", round(max(0.0, consumed - weights), 2), _FALLBACK)
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


def _step_profile(r: LineSink, line: str) -> None:
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


def _step_kv(r: LineSink, line: str) -> None:
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


def _step_cuda_graphs(r: LineSink, line: str) -> None:
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
        # the pool after the real capture, over the "Graph capturing finished ... took" of the profiling pass (0.21+
        # captures once to measure, then again: the first "took" line is the measuring one, hunt113)
        r.put("cuda_graph_gib", _num(match.group(1)), _CONFIG)
        r.put("cuda_graph_estimated_gib", _num(match.group(2)), _SUMMARY)


def _step_failure(r: LineSink, line: str) -> None:
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


_STEPS: tuple[Callable[[LineSink, str], None], ...] = (
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
