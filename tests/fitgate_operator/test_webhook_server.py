"""Malformed AdmissionReview bodies get HTTP 400 and one log line, never 500 and a traceback."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

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
