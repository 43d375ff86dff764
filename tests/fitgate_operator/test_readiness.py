"""/readyz waits for the webhook server: a replica behind the Service must not refuse reviews."""

from __future__ import annotations

import asyncio
import socket

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.runtime import handlers
from tests.fitgate_operator.test_operator import H100, index


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ready_only_once_the_webhook_port_accepts_connections() -> None:
    port = _free_port()
    metrics = Metrics()
    nodewatch = index(H100)  # listed: synced

    async def scenario() -> tuple[bool, bool]:
        waiting = asyncio.create_task(handlers._ready_when_synced(nodewatch, metrics, ("0.0.0.0", port)))
        await asyncio.sleep(0.5)
        before = metrics.ready  # synced, but nothing listens on the webhook port yet
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)
        try:
            await asyncio.wait_for(waiting, 5)
        finally:
            server.close()
        return before, metrics.ready

    assert asyncio.run(scenario()) == (False, True)


def test_without_a_webhook_ready_follows_the_inventory() -> None:
    metrics = Metrics()
    asyncio.run(asyncio.wait_for(handlers._ready_when_synced(index(H100), metrics, None), 5))
    assert metrics.ready
