"""Hostile ``config.json`` files and ``fitgate plan`` arguments, and their checks.

Shared by tests/checkpoints/test_fuzz_configs.py (bounded, in CI) and benchmarks/fuzz.py (>= 10,000 cases).

* configs: a real config of the corpus (tests/corpus) with values replaced at random key paths (NaN,
  infinities, strings, nested lists, negative or huge numbers, booleans), keys dropped, or nesting
  deepened, then resolved, parsed and planned the way ``fitgate plan --model DIR`` does;
* CLI args: ``fitgate plan`` in-process with random values for its numeric and enumerated flags.

Each case ends ``accepted`` (and then every number of the plan must make sense: finite, positive
where it must be, within 64 bits, the budget within the card), ``rejected`` (a one-line error naming
a field, at most 1,000 characters; exit status 2 for the CLI), or a failure: ``crash`` (any other
exception or exit status), ``multiline``, ``nonsense`` (a number that makes no sense) or ``slow``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from fitgate import cli
from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.sizing import ServingConfig, SizingError, lookup_gpu, plan
from fitgate.sizing.results import Plan

SLOW_S = 5.0
MAX_MESSAGE_CHARS = 1000
CORPUS = Path(__file__).resolve().parent / "corpus"
#: A few real configs of different families (small ones: the fuzz loop writes each case to disk).
BASES = [
    "meta-llama__Llama-3.1-8B-Instruct",
    "Qwen__Qwen3-30B-A3B-FP8",
    "deepseek-ai__DeepSeek-V3.2",
    "Qwen__Qwen3.5-9B",
    "openai__gpt-oss-20b",
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "google__gemma-4-26B-A4B",
    "Qwen__Qwen2.5-VL-7B-Instruct",
]
_INT64 = 1 << 63

hostile_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, 1e-300, 0.5, -4.0])
    | st.text(max_size=10)
    | st.sampled_from(["2048", "NaN", "fp8", "", "llama"])
)
hostile_values = st.recursive(
    hostile_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((*prefix, key))
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list) and len(value) <= 8:
        for i, item in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(item, (*prefix, i)))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any, drop: bool) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    if drop and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


@st.composite
def hostile_configs(draw: st.DrawFn) -> bytes:
    """A real config with 1-4 values replaced or dropped, serialised (NaN and Infinity allowed)."""
    base = draw(st.sampled_from(BASES))
    config = json.loads((CORPUS / base / "config.json").read_text())
    paths = _paths(config)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        try:
            _set(config, path, draw(hostile_values), draw(st.booleans()))
        except (KeyError, IndexError, TypeError):
            continue
        paths = _paths(config) or paths
    if draw(st.integers(0, 19)) == 0:
        deep: Any = 1
        for _ in range(draw(st.integers(30, 1500))):
            deep = [deep]
        config["rope_scaling"] = deep
    return json.dumps(config, allow_nan=True).encode()


def _one_line(message: str) -> str:
    return "rejected" if "\n" not in message and len(message) <= MAX_MESSAGE_CHARS else f"multiline: {message[:200]!r}"


def _int64(*values: int) -> bool:
    return all(isinstance(v, int) and -_INT64 <= v < _INT64 for v in values)


def nonsense(result: Plan) -> str | None:
    """What in an accepted plan makes no sense, or None."""
    g, kv = result.per_gpu, result.kv
    numbers = (g.capacity_bytes, g.budget_bytes, g.weights_bytes, g.activation_bytes, g.non_torch_bytes)
    if not _int64(*numbers, g.kv_cache_bytes, g.headroom_bytes, kv.num_blocks, kv.bytes_per_token):
        return f"a number beyond 64 bits: {numbers}"
    if g.weights_bytes <= 0 or g.activation_bytes < 0 or g.non_torch_bytes < 0 or g.cuda_graph_bytes < 0:
        return f"weights {g.weights_bytes}, activation {g.activation_bytes}, non-torch {g.non_torch_bytes}"
    if kv.bytes_per_token <= 0 or kv.num_blocks < 0 or kv.page_size_bytes <= 0:
        return f"KV {kv.bytes_per_token} B/token, {kv.num_blocks} blocks, page {kv.page_size_bytes}"
    if g.budget_bytes > g.capacity_bytes or g.kv_cache_bytes > g.budget_bytes:
        return f"budget {g.budget_bytes} / KV {g.kv_cache_bytes} beyond the card's {g.capacity_bytes}"
    if not math.isfinite(kv.max_concurrency) or kv.max_concurrency < 0:
        return f"max concurrency {kv.max_concurrency}"
    if not 0 < result.serving.max_model_len <= 1 << 24:
        return f"max_model_len {result.serving.max_model_len}"
    if result.verdict.value == "Fits" and g.weights_bytes > g.budget_bytes:
        return "Fits with weights beyond the budget"
    return None


def check_config(data: bytes, directory: Path) -> str:
    """Resolve, parse and plan a checkpoint directory whose ``config.json`` is ``data``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_bytes(data)
    start = time.monotonic()
    try:
        model = to_model_input(resolve(str(directory)))
        result = plan(model, lookup_gpu("H200"), ServingConfig(max_model_len=4096, tensor_parallel_size=8))
    except (CheckpointError, SizingError) as exc:
        outcome = _one_line(str(exc))
    except Exception as exc:
        outcome = f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    else:
        problem = nonsense(result)
        outcome = f"nonsense: {problem}" if problem else "accepted"
    return "slow" if time.monotonic() - start > SLOW_S else outcome


_NUMBERS = st.one_of(
    st.integers(-5, 70).map(str),
    st.sampled_from(["0", "-1", "1e400", "nan", "inf", "99999999999999999999", "0x10", "", " 8", "1.5", "2**8"]),
    st.text(max_size=6),
)
_FLAGS = {
    "--tensor-parallel-size": _NUMBERS,
    "--pipeline-parallel-size": _NUMBERS,
    "--max-model-len": _NUMBERS,
    "--gpu-memory-utilization": _NUMBERS | st.sampled_from(["0.9", "1.0", "1.01", "0.0001"]),
    "--max-num-seqs": _NUMBERS,
    "--max-num-batched-tokens": _NUMBERS,
    "--block-size": _NUMBERS,
    "--kv-cache-memory-bytes": _NUMBERS,
    "--concurrency": _NUMBERS,
    "--context-tokens": _NUMBERS,
    "--kv-cache-dtype": st.sampled_from(["auto", "fp8", "fp8_e5m2", "int4", "", "bf16"]),
    "--dtype": st.sampled_from(["auto", "half", "bfloat16", "float32", "int3"]),
    "--quantization": st.sampled_from(["fp8", "awq", "bitsandbytes", "nope"]),
    "--vllm-version": st.sampled_from(["0.33.0", "0.19.0", "v0.24.1-cu129", "latest", "0.34.0", "1.0", "x"]),
    "--gpu-memory": st.sampled_from(["80GB", "79.19GiB", "99999999999999999999TiB", "-1GiB", "0", "1e400GiB", "abc"]),
    "--interconnect": st.sampled_from(["nvlink", "pcie", "ib"]),
}


@st.composite
def plan_argvs(draw: st.DrawFn) -> list[str]:
    """``fitgate plan`` arguments for a catalog model with 1-4 hostile flags."""
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--source", "catalog"]
    flags = draw(st.lists(st.sampled_from(sorted(_FLAGS)), min_size=1, max_size=4, unique=True))
    if "--gpu-memory" not in flags:
        argv += ["--gpu", "H100"]
    for flag in flags:
        argv += [flag, draw(_FLAGS[flag])]
    return argv


def check_argv(argv: list[str]) -> str:
    """Run ``fitgate plan`` in-process: exit 0/1 accepted, 2 with one stderr line rejected, else a crash."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([*argv, "--output", "json"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except Exception as exc:
            return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    elapsed = time.monotonic() - start
    message = err.getvalue().strip()
    if code in (0, 1):
        doc = json.loads(out.getvalue())
        g = doc["per_gpu"]
        if g["weights_bytes"] <= 0 or g["budget_bytes"] > g["capacity_bytes"] or not _int64(*g.values()):
            return f"nonsense: {g}"
        outcome = "accepted"
    elif code == 2:
        lines = [line for line in message.splitlines() if line.strip()]
        usage = [line for line in lines if not line.startswith("usage:")]
        outcome = (
            "rejected" if len(usage) == 1 and len(usage[0]) <= MAX_MESSAGE_CHARS else f"multiline: {message[:200]!r}"
        )
    else:
        outcome = f"crash: exit {code}: {message[:200]}"
    return "slow" if elapsed > SLOW_S else outcome
