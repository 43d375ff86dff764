"""Hostile inputs and their checks, shared by tests/project/test_fuzz.py (bounded, in CI) and benchmarks/fuzz.py (>= 10,000).

Three targets, each fed through the code a user's input really takes:

* safetensors files: a checkpoint directory with a good ``config.json`` and a generated
  ``model.safetensors`` (valid headers with odd tensors, cut or lying lengths, flipped bytes, raw bytes),
  resolved and turned into a sizing input;
* index files: ``model.safetensors.index.json`` alone beside the config;
* AdmissionReview bodies, POSTed to fitgate's webhook server in front of kopf's admission engine.

Each case ends ``accepted``, ``rejected`` (a one-line error of at most 1,000 characters, or HTTP 4xx with
one log line), or a failure: ``crash`` (any other exception, HTTP 5xx, a traceback in the log),
``multiline`` (a rejection longer than one line) or ``slow`` (over ``SLOW_S``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import strategies as st

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.sizing import SizingError
from tests.conftest import TINY_LLAMA
from tests.webhook_harness import webhook_url

SLOW_S = 5.0
MAX_MESSAGE_CHARS = 1000

CONFIG = TINY_LLAMA

# -- strategies -------------------------------------------------------------------------------

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
_PATTERNS = [
    "model.layers.{i}.self_attn.q_proj.weight",
    "model.layers.{i}.self_attn.k_proj.weight",
    "model.layers.{i}.mlp.experts.{j}.down_proj.weight",
    "model.layers.{i}.mlp.experts.{j}.gate_proj.qweight",
    "model.layers.{i}.input_layernorm.weight",
    "model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight",
    "model.embed_tokens.weight",
    "lm_head.weight",
    "model.vision_tower.blocks.{i}.attn.weight",
    "mtp.layers.{i}.weight",
]
tensor_names = (
    st.builds(
        lambda p, i, j: p.format(i=i, j=j), st.sampled_from(_PATTERNS), st.integers(0, 2**63), st.integers(0, 512)
    )
    | st.text(max_size=24)
    | st.just("__metadata__")
)
dtypes = (
    st.sampled_from(["BF16", "F16", "F32", "F64", "F8_E4M3", "I32", "U8", "I8", "BOOL", "Q4", "", "bf16"]) | json_values
)
shapes = (
    st.lists(st.integers(0, 2**16), max_size=4)
    | st.lists(st.integers(-4, 2**62) | st.booleans() | st.floats() | st.text(max_size=3), max_size=20)
    | json_values
)
entries = (
    st.fixed_dictionaries({"dtype": dtypes, "shape": shapes}, optional={"data_offsets": json_values}) | json_values
)


def _mutate(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for pos, value in flips:
        if out:
            out[pos % len(out)] = value
    return bytes(out)


@st.composite
def safetensors_files(draw: st.DrawFn) -> bytes:
    """The bytes of a ``model.safetensors``: a real header with odd content, or something that only looks like one."""
    header = draw(st.dictionaries(tensor_names, entries, max_size=10))
    body = json.dumps(header).encode()
    mode = draw(st.sampled_from(["exact", "exact", "short", "long", "flip", "raw", "prefix"]))
    if mode == "raw":
        return draw(st.binary(max_size=64))
    if mode == "prefix":
        return struct.pack("<Q", draw(st.integers(0, 2**64 - 1))) + draw(st.binary(max_size=32))
    length = len(body)
    if mode == "short":
        length = draw(st.integers(0, len(body)))
    elif mode == "long":
        length += draw(st.integers(1, 2**40))
    elif mode == "flip":
        body = _mutate(body, draw(st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 255)), max_size=4)))
    return struct.pack("<Q", length) + body + draw(st.binary(max_size=16))


index_files = st.one_of(
    st.builds(
        lambda meta, wmap: json.dumps({"metadata": meta, "weight_map": wmap}).encode(),
        st.fixed_dictionaries({}, optional={"total_size": st.integers(-5, 2**70) | json_values}) | json_values,
        st.dictionaries(
            tensor_names,
            st.sampled_from(["model-00001-of-00002.safetensors", "../x.safetensors", "a/b.safetensors", ""])
            | json_values,
            max_size=6,
        )
        | json_values,
    ),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
)

_REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "1",
        "kind": {"group": "fitgate.io", "version": "v1alpha1", "kind": "ModelDeployment"},
        "resource": {"group": "fitgate.io", "version": "v1alpha1", "resource": "modeldeployments"},
        "operation": "CREATE",
        "userInfo": {"username": "u"},
        "object": {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "x"}},
    },
}


@st.composite
def _mutated_review(draw: st.DrawFn) -> bytes:
    review = json.loads(json.dumps(_REVIEW))
    node = review
    path = draw(
        st.lists(st.sampled_from(["request", "resource", "object", "metadata", "userInfo", "kind"]), max_size=3)
    )
    for key in path:
        child = node.get(key) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            break
        node = child
    key = draw(st.sampled_from([*list(node), "extra"]))
    if draw(st.booleans()):
        node.pop(key, None)
    else:
        node[key] = draw(json_values)
    return json.dumps(review).encode()


review_bodies = st.one_of(
    _mutated_review(),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.integers(1, 3000).map(lambda n: b'{"request": ' + b"[" * n + b"]" * n + b"}"),
    st.integers(1, 200).map(
        lambda n: json.dumps(_REVIEW).encode()[:-1] + b', "x": ' + b'{"a": ' * n + b"1" + b"}" * n + b"}"
    ),
)

# -- checks -----------------------------------------------------------------------------------


def _one_line(message: str) -> str:
    return "rejected" if "\n" not in message and len(message) <= MAX_MESSAGE_CHARS else f"multiline: {message[:200]!r}"


def _timed(fn: Callable[[], str]) -> str:
    start = time.monotonic()
    outcome = fn()
    return "slow" if time.monotonic() - start > SLOW_S else outcome


def _resolve_dir(directory: Path) -> str:
    try:
        to_model_input(resolve(str(directory)))
    except (CheckpointError, SizingError) as exc:
        return _one_line(str(exc))
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {str(exc)[:200]}"
    return "accepted"


def check_safetensors(data: bytes, directory: Path) -> str:
    """Resolve a checkpoint directory whose ``model.safetensors`` is ``data``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(CONFIG))
    (directory / "model.safetensors").write_bytes(data)
    return _timed(lambda: _resolve_dir(directory))


def check_index(data: bytes, directory: Path) -> str:
    """Resolve a checkpoint directory with only ``config.json`` and ``model.safetensors.index.json`` = ``data``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(CONFIG))
    (directory / "model.safetensors.index.json").write_bytes(data)
    return _timed(lambda: _resolve_dir(directory))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class WebhookTarget:
    """fitgate's webhook server on a thread of its own, and a client for it; use as a context manager."""

    def __init__(self, guarded: bool = True) -> None:
        self.guarded = guarded
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._log = _Records()
        self.client = httpx2.Client(timeout=SLOW_S)

    def _run(self) -> None:
        async def serve() -> None:
            self._stop = asyncio.Event()
            async with webhook_url(self.guarded) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(serve())

    def __enter__(self) -> WebhookTarget:
        logging.getLogger().addHandler(self._log)
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()
        logging.getLogger().removeHandler(self._log)

    def check(self, body: bytes) -> str:
        """POST one review body: 5xx or a traceback is a crash; 4xx must come with at most one warning line."""
        self._log.records.clear()
        start = time.monotonic()
        try:
            status = self.client.post(self.url, content=body, headers={"Content-Type": "application/json"}).status_code
        except httpx2.TimeoutException:
            return "slow"
        if time.monotonic() - start > SLOW_S:
            return "slow"
        records = list(self._log.records)
        if status >= 500 or any(r.exc_info for r in records):
            return f"crash: HTTP {status}: {[r.getMessage()[:120] for r in records]}"
        warnings = [r for r in records if r.levelno >= logging.WARNING]
        if len(warnings) > 1 or any("\n" in r.getMessage() for r in warnings):
            return f"multiline: {[r.getMessage()[:120] for r in warnings]}"
        return "accepted" if status < 300 else "rejected"
