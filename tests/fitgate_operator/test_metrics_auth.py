"""Issue 22: /metrics behind TokenReview + SubjectAccessReview (FITGATE_METRICS_AUTH), a fake reviewer."""

from __future__ import annotations

import asyncio
import socket

import httpx2

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.base.metrics_auth import CACHE_S, MetricsAuth
from fitgate.settings import OperatorConfig


class Reviewer:
    """prom-token: authenticated and allowed; other-token: authenticated, not allowed; anything else: neither."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, token: str) -> tuple[bool, bool]:
        self.calls += 1
        return token in ("prom-token", "other-token"), token == "prom-token"


def test_statuses_and_the_cache() -> None:
    now = [0.0]
    reviewer = Reviewer()
    auth = MetricsAuth(reviewer, clock=lambda: now[0])

    async def run() -> list[int]:
        return [
            await auth.status(None),
            await auth.status("Basic abc"),
            await auth.status("Bearer bogus"),
            await auth.status("Bearer other-token"),
            await auth.status("Bearer prom-token"),
            await auth.status("Bearer prom-token"),
        ]

    assert asyncio.run(run()) == [401, 401, 401, 403, 200, 200]
    assert reviewer.calls == 3  # the repeated token was answered from the cache
    now[0] += CACHE_S + 1
    assert asyncio.run(auth.status("Bearer prom-token")) == 200 and reviewer.calls == 4


def test_a_failing_review_refuses() -> None:
    async def broken(token: str) -> tuple[bool, bool]:
        raise RuntimeError("API server down")

    assert asyncio.run(MetricsAuth(broken).status("Bearer prom-token")) == 403


def test_the_server_guards_metrics_only() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def run() -> list[int]:
        metrics = Metrics()
        await metrics.serve("127.0.0.1", port, MetricsAuth(Reviewer()))
        try:
            async with httpx2.AsyncClient(timeout=10) as client:
                base = f"http://127.0.0.1:{port}"
                return [
                    (await client.get(f"{base}/metrics")).status_code,
                    (await client.get(f"{base}/metrics", headers={"Authorization": "Bearer other-token"})).status_code,
                    (await client.get(f"{base}/metrics", headers={"Authorization": "Bearer prom-token"})).status_code,
                    (await client.get(f"{base}/healthz")).status_code,
                ]
        finally:
            await metrics.close()

    assert asyncio.run(run()) == [401, 403, 200, 200]


def test_the_setting() -> None:
    assert OperatorConfig.from_env({"FITGATE_METRICS_AUTH": "1"}).metrics_auth
    assert not OperatorConfig.from_env({}).metrics_auth
