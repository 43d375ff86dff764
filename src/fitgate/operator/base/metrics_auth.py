"""``/metrics`` behind Kubernetes authentication and authorization (``FITGATE_METRICS_AUTH``, issue 22).

As controller-runtime's ``filters.WithAuthenticationAndAuthorization`` (kubernetes-sigs/controller-runtime
pkg/metrics/filters/filters.go): the scraper's bearer token is checked with a ``TokenReview``, then the
user it names is asked a ``SubjectAccessReview`` for ``get`` on the non-resource URL ``/metrics``. Answers
are remembered for :data:`CACHE_S` seconds (per token), so a scrape every 30 s costs two API calls a
minute at most; ``/healthz`` and ``/readyz`` stay open (the kubelet's probes carry no token).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fitgate.sizing.memo import BoundedMemo, Miss

#: Seconds an answer for one token is kept.
CACHE_S = 60.0
#: Tokens remembered at once (by their SHA-256). Bound 256: Prometheus replicas and a few people's tokens;
#: more only costs a TokenReview again.
CACHE_ENTRIES = 256

#: (authenticated, allowed) for a bearer token.
Review = Callable[[str], Awaitable[tuple[bool, bool]]]


class MetricsAuth:
    """Decides one request to ``/metrics``: 200, 401 (no or a bad token) or 403 (not allowed)."""

    def __init__(self, review: Review, clock: Callable[[], float] = time.monotonic) -> None:
        self.review = review
        self.clock = clock
        self._cache: BoundedMemo[str, tuple[float, int]] = BoundedMemo(CACHE_ENTRIES)

    async def status(self, authorization: str | None) -> int:
        """The HTTP status for a request with this ``Authorization`` header."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401
        key = hashlib.sha256(token.strip().encode()).hexdigest()  # the token itself is never kept
        hit = self._cache.get(key)
        now = self.clock()
        if not isinstance(hit, Miss) and hit[0] > now:
            return hit[1]
        try:
            authenticated, allowed = await self.review(token.strip())
        except Exception:  # the API server's fault: refuse, remember nothing
            return 403
        code = 200 if authenticated and allowed else 401 if not authenticated else 403
        self._cache.put(key, (now + CACHE_S, code))
        return code


def kubernetes_review(request_timeout_s: float = 5.0) -> Review:
    """TokenReview then SubjectAccessReview (get /metrics) with the operator's own credentials."""

    def call(token: str) -> tuple[bool, bool]:
        from kubernetes import client  # noqa: PLC0415 - only the operator needs the client

        from fitgate.operator.base import kubeconfig  # noqa: PLC0415

        kubeconfig.load()
        review: Any = client.AuthenticationV1Api().create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)), _request_timeout=request_timeout_s
        )
        status = review.status
        if not status or not status.authenticated or status.user is None:
            return False, False
        user = status.user
        spec = client.V1SubjectAccessReviewSpec(
            user=user.username,
            groups=user.groups or [],
            uid=user.uid,
            non_resource_attributes=client.V1NonResourceAttributes(path="/metrics", verb="get"),
        )
        access: Any = client.AuthorizationV1Api().create_subject_access_review(
            client.V1SubjectAccessReview(spec=spec), _request_timeout=request_timeout_s
        )
        return True, bool(access.status and access.status.allowed)

    async def review(token: str) -> tuple[bool, bool]:
        return await asyncio.to_thread(call, token)

    return review
