"""Fuzzing, bounded for CI (~30 s): safetensors headers, index files and AdmissionReview bodies.

Zero crashes and zero hangs; every rejection is one line (see tests/fuzzing.py). ``benchmarks/fuzz.py``
runs the same checks over >= 10,000 cases.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitgate.checkpoints.safetensors import ObjectStream
from tests.fuzzing import (
    WebhookTarget,
    check_index,
    check_safetensors,
    index_files,
    review_bodies,
    safetensors_files,
)

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=250,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(data=safetensors_files())
def test_safetensors_headers(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outcome = check_safetensors(data, Path(tmp) / "m")
    assert outcome in ("accepted", "rejected"), outcome


@FUZZ
@given(data=index_files)
def test_index_files(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outcome = check_index(data, Path(tmp) / "m")
    assert outcome in ("accepted", "rejected"), outcome


@settings(FUZZ, max_examples=150)
@given(data=safetensors_files(), cuts=st.lists(st.integers(1, 64), min_size=1, max_size=8))
def test_streamed_json_agrees_with_json_loads(data: bytes, cuts: list[int]) -> None:
    """However the bytes are split, the streaming parser yields what json.loads sees, or refuses what it refuses."""
    body = data[8:]
    try:
        whole = json.loads(body)
    except (ValueError, RecursionError):
        whole = None
    stream = ObjectStream("f")
    got: list[tuple[tuple[str, ...], object]] = []
    refusal = ""
    pos, i = 0, 0
    try:
        while pos < len(body):
            step = cuts[i % len(cuts)]
            got += list(stream.feed(body[pos : pos + step]))
            pos, i = pos + step, i + 1
        got += list(stream.feed(b"", final=True))
    except ValueError as exc:
        refusal = str(exc)
    if refusal:
        assert "\n" not in refusal
        assert not isinstance(whole, dict), f"refused what json.loads accepts: {refusal}"
        return
    assert isinstance(whole, dict)
    streamed = {k[0]: v for k, v in got}
    assert json.dumps(streamed) == json.dumps(whole)  # (NaN != NaN: compare the text)


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookTarget]:
    with WebhookTarget() as target:
        yield target


@settings(FUZZ, max_examples=300)
@given(body=review_bodies)
def test_admission_review_bodies(webhook: WebhookTarget, body: bytes) -> None:
    outcome = webhook.check(body)
    assert outcome in ("accepted", "rejected"), outcome
