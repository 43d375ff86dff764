"""Hostile workloads, logs and exposition texts (issue 22), shared by tests/workloads/test_fuzz_workloads.py (bounded) and
benchmarks/fuzz.py (thousands of cases, and the bombs measured).

Targets, each fed through the path a user's input really takes:

* workloads: the real fixtures of tests/fixtures/workloads with a random subtree replaced by a hostile
  value (huge or non-finite numbers, ``$(VAR)`` references, nested junk, wrong types), read by
  :func:`fitgate.workloads.read_workload` (``accepted``: a reading or None; ``rejected``: a reading whose
  ``invalid`` / ``unknown`` is one line);
* workload admission: the same objects through the workload webhook's handler (``validate_workload``) in
  *warn* mode: a 500 / ``code: 500`` or any exception but an AdmissionError is a crash, and a denial in a
  warn namespace is ``nonsense``;
* logs: generated vLLM-like lines with hostile numbers, escape sequences and repeated prefixes, parsed by
  :func:`fitgate.observe.parse_lines`;
* exposition: generated ``/metrics`` texts with NaN, negative, huge or malformed samples, parsed by
  :func:`fitgate.observe.metrics.parse_scrape` (``rejected``: a one-line MetricsError).

Bombs (:data:`BOMBS`) are single cases each far past a budget: the env-expansion bomb, the YAML alias bomb,
quadratic-pattern log lines, a deep ``--config`` and a padded misfit.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
import yaml
from hypothesis import strategies as st

from fitgate.observe import parse_lines
from fitgate.observe.metrics import MetricsError, parse_scrape
from fitgate.workloads import read_workload

SLOW_S = 5.0
MAX_MESSAGE_CHARS = 1000
FIXTURES = Path(__file__).parent / "fixtures" / "workloads"


def _fixtures() -> list[dict[str, Any]]:
    out = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") not in (None, "ConfigMap", "Service"):
                out.append(doc)
    return out


WORKLOADS = _fixtures()

hostile_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16),
    st.sampled_from(
        [
            "9" * 5000,
            "nan",
            "inf",
            "-1",
            "$(A)",
            "$((1/0))",
            "$((X*Y))",
            "${A:-",
            "'unclosed",
            "1e999",
            "32k" * 3,
            "\x1b[2J",
            "vllm serve " + "x " * 500,
            "--max-model-len",
        ]
    ),
)
hostile_values = st.recursive(
    hostile_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def hostile_workloads(draw: st.DrawFn) -> dict[str, Any]:
    """A real workload with one to three subtrees replaced by hostile values."""
    obj = copy.deepcopy(draw(st.sampled_from(WORKLOADS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        path = draw(st.sampled_from(paths))
        parent: Any = obj
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(hostile_values)
    return obj


def _one_line(message: str | None) -> bool:
    return message is not None and "\n" not in message and len(message) <= MAX_MESSAGE_CHARS


def check_workload(obj: Any) -> str:
    """read_workload: a reading, None, or a reading with a one-line invalid/unknown; never an exception."""
    start = time.monotonic()
    try:
        reading = read_workload(obj)
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    if time.monotonic() - start > SLOW_S:
        return "slow"
    if reading is None:
        return "accepted"
    why = reading.invalid or reading.unknown
    if why is None:
        return "accepted"
    return "rejected" if _one_line(why) else f"multiline: {why[:200]!r}"


def check_workload_admission(obj: Any, memo: kopf.Memo) -> str:
    """validate_workload in a *warn* namespace: admitted (with or without warnings), never denied, never 500."""
    from fitgate.operator.runtime import workload_handlers  # noqa: PLC0415 - the operator only for this target

    warnings: list[str] = []
    start = time.monotonic()
    body = obj if isinstance(obj, dict) else {"kind": "Deployment", "spec": obj}
    try:
        asyncio.run(
            workload_handlers.validate_workload(
                "warn", body=kopf.Body(body), old=None, dryrun=False, warnings=warnings, memo=memo
            )
        )
    except kopf.AdmissionError as exc:
        if exc.code == 500:
            return f"crash: code 500: {str(exc)[:200]}"
        return f"nonsense: denied in a warn namespace: {str(exc)[:200]}"
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    if time.monotonic() - start > SLOW_S:
        return "slow"
    if any("\n" in w or len(w) > 1200 for w in warnings):  # the handler cuts a warning to 1,200 characters
        return f"multiline: {warnings!r}"[:300]
    return "rejected" if warnings else "accepted"


# -- logs ------------------------------------------------------------------------------------------

_LOG_PREFIXES = [
    "non-default args: {",
    "args: Namespace(",
    "memory snapshot:",
    "Model loading took ",
    "GPU KV cache size: ",
    "num_gpu_blocks is: ",
    "Initializing a V1 LLM engine (v0.11.0) with config: ",
    "gpu_memory_utilization=",
    "Traceback (most recent call last)",
    "ValueError: ",
    "CUDA out of memory",
    "To serve at least one request with the model's max seq len (",
]
log_lines = st.builds(
    lambda head, prefix, n, tail: f"{head}{prefix * n}{tail}",
    st.sampled_from(["", "INFO 05-01 10:00:00 [x.py:1] ", "(EngineCore_DP0 pid=1) ERROR 05-01 10:00:00 [y.py:2] "]),
    st.sampled_from(_LOG_PREFIXES),
    st.integers(1, 200),
    st.one_of(st.text(max_size=40), st.sampled_from(["9" * 5000, "nan GiB", "1e999 GiB", "\x1b]0;x\x07", "}", ")"])),
)
hostile_logs = st.lists(log_lines, min_size=1, max_size=20)


def check_log(lines: list[str]) -> str:
    """parse_lines: any lines in, a StartupLog out, its numbers finite, no control character in a failure."""
    start = time.monotonic()
    try:
        log = parse_lines(lines)
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    if time.monotonic() - start > SLOW_S:
        return "slow"
    for value in (*vars(log.observed).values(), *vars(log.settings).values()):
        if isinstance(value, float) and not math.isfinite(value):
            return f"nonsense: a non-finite number {value!r}"
    if log.failure is not None and any(ord(c) < 32 and c not in "\t" for c in log.failure.message):
        return "nonsense: a control character in the failure message"
    return "accepted"


# -- exposition ------------------------------------------------------------------------------------

_FAMILIES = [
    'vllm:cache_config_info{{engine="0",block_size="16",num_gpu_blocks="{v}"}} 1.0',
    'vllm:generation_tokens_total{{engine="0"}} {v}',
    'vllm:prompt_tokens_total{{engine="0"}} {v}',
    'vllm:kv_cache_usage_perc{{engine="0"}} {v}',
    'vllm:num_requests_running{{engine="0"}} {v}',
    'vllm:num_preemptions_total{{engine="0"}} {v}',
]
exposition_values = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "-901120", "9" * 4000, "1e308", "0.5", "12", "None", "x", ""]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
)
expositions = st.lists(
    st.builds(lambda f, v: f.format(v=v), st.sampled_from(_FAMILIES), exposition_values), min_size=1, max_size=8
).map(lambda lines: "\n".join(lines) + "\n")


def check_exposition(text: str) -> str:
    """parse_scrape: a Scrape of finite, non-negative numbers, or a one-line MetricsError."""
    try:
        scrape = parse_scrape(text, 0.0)
    except MetricsError as exc:
        return "rejected" if _one_line(str(exc)) else f"multiline: {str(exc)[:200]!r}"
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    numbers = [*(v for v in vars(scrape.counters).values() if v is not None)]
    numbers += [v for v in (scrape.kv_usage, scrape.running, scrape.waiting, scrape.num_gpu_blocks) if v is not None]
    if any(not math.isfinite(v) or v < 0 for v in numbers):
        return f"nonsense: {numbers!r}"[:200]
    return "accepted"


# -- bombs -----------------------------------------------------------------------------------------


def env_bomb(entries: int = 29) -> dict[str, Any]:
    """issue 22's Deployment: ``A_i=$(A_{i-1})$(A_{i-1})``, 1.4 KB, 2^29 x 32 B expanded."""
    obj = copy.deepcopy(next(w for w in WORKLOADS if w.get("kind") == "Deployment"))
    container = obj["spec"]["template"]["spec"]["containers"][0]
    env = [{"name": "A_0", "value": "x" * 32}]
    env += [{"name": f"A_{i}", "value": f"$(A_{i - 1})$(A_{i - 1})"} for i in range(1, entries + 1)]
    container["env"] = env + list(container.get("env") or [])
    container["args"] = [*(container.get("args") or []), "--served-model-name", f"$(A_{entries})"]
    return obj


def yaml_bomb_workload(levels: int = 9) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """A Deployment whose ``--config`` file is a 518-byte billion-laughs YAML in its ConfigMap."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    obj = {
        "kind": "Deployment",
        "metadata": {"name": "yaml-bomb", "namespace": "ns"},
        "spec": {
            "template": {
                "spec": {
                    "volumes": [{"name": "cfg", "configMap": {"name": "cm"}}],
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.11.0",
                            "args": ["--model", "Qwen/Qwen3-8B", "--config", "/cfg/c.yaml"],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}],
                        }
                    ],
                }
            }
        },
    }
    return obj, {"cm": {"c.yaml": "\n".join(lines) + "\n"}}


def quadratic_log(line_bytes: int = 64 * 1024 - 200, lines: int = 64) -> list[str]:
    """Lines of the three prefixes whose old patterns were quadratic in the line's length."""
    out = []
    for prefix in ("memory snapshot:", "args: Namespace(", "non-default args: {"):
        line = "INFO 01-01 00:00:00 [x.py:1] " + (prefix * (line_bytes // len(prefix)))[:line_bytes] + " x"
        out += [line] * (lines // 3 + 1)
    return out[:lines]


BOMBS: dict[str, Callable[[], Any]] = {
    "env-expansion": lambda: read_workload(env_bomb()),
    "yaml-aliases": lambda: read_workload(*yaml_bomb_workload()),
    "quadratic-log-4MiB": lambda: parse_lines(quadratic_log()),
    "exposition-4000-digits": lambda: check_exposition(
        'vllm:cache_config_info{engine="0",num_gpu_blocks="' + "9" * 4000 + '"} 1.0\n'
    ),
}
