"""Malformed AdmissionReview bodies get HTTP 400 and one log line, never 500 and a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
import random

import pytest

from fitgate.operator.runtime.webhook import _too_deep
from tests.webhook_harness import post_all, webhook_url

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "1",
        "resource": {"group": "fitgate.io", "version": "v1alpha1", "resource": "modeldeployments"},
        "operation": "CREATE",
        "userInfo": {"username": "u"},
        "object": {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "x"}},
    },
}


def with_request(**changes: object) -> bytes:
    request = {**REVIEW["request"], **changes}  # type: ignore[dict-item]
    return json.dumps({**REVIEW, "request": {k: v for k, v in request.items() if v != "<drop>"}}).encode()


MALFORMED = {
    "null": b"null",
    "array": b"[]",
    "number": b"1",
    "string": b'"review"',
    "invalid UTF-8": b'{"request": "\xff\xfe"}',
    "not JSON": b"{",
    "no request": b'{"kind": "AdmissionReview"}',
    "request not an object": b'{"request": [1]}',
    "resource null": with_request(resource=None),
    "resource without group": with_request(resource={"version": "v1", "resource": "x"}),
    "no userInfo": with_request(userInfo="<drop>"),
    "no object": with_request(object="<drop>"),
    "object a string": with_request(object="x"),
    "1,500 deep": b'{"request": ' + b"[" * 1500 + b"]" * 1500 + b"}",
    "100 deep": b'{"request": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}",
    # Python's int() refuses more than 4300 digits with ValueError, not JSONDecodeError (hunt83 F3: was HTTP 500)
    "a 5000-digit number": b'{"x": ' + b"9" * 5000 + b"}",
    "a 5000-digit generation": with_request(object={"metadata": {"generation": 0}}).replace(
        b'"generation": 0', b'"generation": ' + b"9" * 5000
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_review_gets_400_and_one_log_line(case: str, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[int]:
        async with webhook_url() as url:
            return await post_all(url, [MALFORMED[case]])

    with caplog.at_level(logging.INFO):
        statuses = asyncio.run(scenario())
    assert statuses == [400]
    ours = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(ours) == 1 and ours[0].exc_info is None, [r.getMessage() for r in ours]
    assert "refused a malformed AdmissionReview" in ours[0].getMessage() and "\n" not in ours[0].getMessage()


def test_a_well_formed_review_reaches_kopf(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[int]:
        async with webhook_url() as url:
            return await post_all(url, [json.dumps(REVIEW).encode()])

    assert asyncio.run(scenario()) == [404]  # kopf's own answer: no handler for this resource here
    assert not [r for r in caplog.records if "malformed" in r.getMessage()]


def _deepest(value: object) -> int:
    """The level of the deepest value (the top is 1), recursively: the definition ``_too_deep`` walks level by level."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return 1 + max((_deepest(v) for v in children), default=0)


@pytest.mark.parametrize("limit", [1, 2, 3, 64])
def test_too_deep_is_the_depth_of_the_deepest_value(limit: int) -> None:
    # issue 23: it runs on every review, so it walks only objects and lists; empty ones at the limit count as
    # values at the limit, not below it
    rnd = random.Random(limit)

    def tree(depth: int) -> object:
        r = rnd.random()
        if depth > 70 or r < 0.3:
            return rnd.choice([1, "x", None, 2.5, True])
        if r < 0.6:
            return [tree(depth + 1) for _ in range(rnd.randrange(3))]
        return {str(i): tree(depth + 1) for i in range(rnd.randrange(3))}

    def chain(n: int, leaf: object, kind: str) -> object:
        for _ in range(n - 1):
            leaf = [leaf] if kind == "list" else {"a": leaf}
        return leaf

    cases = [tree(0) for _ in range(2000)]
    cases += [
        chain(n, leaf, kind) for n in range(1, 70) for leaf in (1, [], {}, [1], {"a": 1}) for kind in ("list", "dict")
    ]
    deep = 0
    for case in cases:
        assert _too_deep(case, limit) is (_deepest(case) > limit), json.dumps(case)[:200]
        deep += _deepest(case) > limit
    assert 0 < deep < len(cases)
