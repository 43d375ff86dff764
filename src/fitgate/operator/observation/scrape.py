"""A bounded HTTP GET of a vLLM pod's ``/metrics``: it answers in ``timeout_s`` or fails, never hangs.

Bounds: one deadline for connect + headers + body (``asyncio.timeout`` around all of it, so a server
that trickles bytes cannot stretch it), at most ``max_bytes`` of body after decompression (a gzip bomb
or a 10 MB page stops at the limit), no redirects (a 3xx is an error: a pod must not send the
operator to another host), plain HTTP to the pod IP only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

#: vLLM's page is ~30-60 KB per engine (more with LoRA adapters and many histograms); 4 MiB is ample.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT_S = 5.0
_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # the text format, as Prometheus asks for it


class ScrapeError(Exception):
    """A scrape that failed: the message says why in one line (timeout, status, size, not text)."""


@dataclass(frozen=True)
class ScrapeLimits:
    """How long and how much one scrape may take."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES


async def fetch_metrics(session: aiohttp.ClientSession, url: str, limits: ScrapeLimits) -> str:
    """The body of ``GET url`` as text, within ``limits``.

    Raises:
        ScrapeError: timeout, connection error, a non-200 status (redirects included), a body over
            ``limits.max_bytes``, or bytes that are not UTF-8.
    """
    try:
        async with asyncio.timeout(limits.timeout_s):
            async with session.get(
                url,
                allow_redirects=False,
                headers={"Accept": _ACCEPT},
                timeout=aiohttp.ClientTimeout(total=limits.timeout_s),
            ) as response:
                if response.status != 200:
                    where = response.headers.get("Location")
                    shown = f" (redirect to {where[:100]!r} not followed)" if where else ""
                    raise ScrapeError(f"GET {url}: HTTP {response.status}{shown}")
                declared = response.content_length
                if declared is not None and declared > limits.max_bytes:
                    raise ScrapeError(f"GET {url}: body of {declared} bytes exceeds the limit of {limits.max_bytes}")
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > limits.max_bytes:
                        raise ScrapeError(f"GET {url}: body exceeds the limit of {limits.max_bytes} bytes")
    except TimeoutError:
        raise ScrapeError(f"GET {url}: no complete answer within {limits.timeout_s:g} s") from None
    except aiohttp.ClientError as exc:
        raise ScrapeError(f"GET {url}: {type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError:
        raise ScrapeError(f"GET {url}: the body is not UTF-8 text") from None
