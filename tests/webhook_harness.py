"""fitgate's webhook server on 127.0.0.1 (plain HTTP) in front of kopf's real admission engine, for tests.

The engine knows no resources here: a well-formed review reaches it and is answered 404 (unknown
resource) by kopf itself, which shows that the guard handed it on.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx2
import kopf
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import admission, indexing
from kopf._core.intents import registries
from kopf._core.reactor import inventory


@asynccontextmanager
async def webhook_url(guarded: bool = True) -> AsyncIterator[str]:
    """The URL of a running webhook server (``guarded=False``: kopf's own server, for comparison)."""
    engine = functools.partial(
        admission.serve_admission_request,
        settings=kopf.OperatorSettings(),
        memories=inventory.ResourceMemories(),
        memobase=ephemera.Memo(),
        registry=registries.OperatorRegistry(),
        insights=references.Insights(),
        indices=indexing.OperatorIndices(indexing.OperatorIndexers()),
    )
    server_type = kopf.WebhookServer
    if guarded:
        from fitgate.operator.runtime.webhook import GuardedWebhookServer  # noqa: PLC0415 - kopf's own server runs without it

        server_type = GuardedWebhookServer
    async with server_type(addr="127.0.0.1", port=0, insecure=True) as server:  # stops the server on exit
        configs = server(engine)
        config = await configs.__anext__()
        try:
            yield f"{config['url']}/fit"
        finally:
            await configs.aclose()


async def post_all(url: str, bodies: Sequence[bytes], timeout_s: float = 10.0) -> list[int]:
    """HTTP status of each body POSTed to ``url``."""
    async with httpx2.AsyncClient(timeout=timeout_s) as client:
        return [
            (await client.post(url, content=b, headers={"Content-Type": "application/json"})).status_code
            for b in bodies
        ]
