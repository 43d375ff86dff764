"""Remove kopf's managed webhook configurations when the operator exits (``--webhook-managed``).

With ``settings.admission.managed`` kopf creates *both* a ValidatingWebhookConfiguration and a
MutatingWebhookConfiguration of that name (the mutating one even when no mutating handler exists, as
for fitgate), fills them while it runs, and on exit only patches them down to their "persistent"
webhooks (none for fitgate): two empty objects were left behind after every out-of-cluster run
(kopf 1.45 ``kopf/_core/engines/admission.py``, ``configuration_manager``).

kopf runs cleanup handlers after its configuration managers have ended, so the operator's cleanup
deletes each of the two once it is empty. A configuration that still has webhooks (another process
manages the same name) is left alone. A ``kill -9`` leaves them, as it leaves kopf's own cleanup undone;
the next start takes the name over again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from fitgate.operator.base import kubeconfig

logger = logging.getLogger("fitgate.managed")

ApiFactory = Callable[[], Any]
KINDS = ("validating", "mutating")


def _admission_api() -> Any:
    """An AdmissionregistrationV1Api from the in-cluster service account, else the kubeconfig."""
    from kubernetes import client  # noqa: PLC0415 - only the operator needs the client

    kubeconfig.load()
    return client.AdmissionregistrationV1Api()


def remove_empty(name: str, api_factory: ApiFactory | None = None, timeout_s: float = 5.0) -> list[str]:
    """Delete the validating and mutating webhook configurations ``name`` that hold no webhook.

    Returns what was deleted (``validating/NAME``...); an absent one is fine, an API error is logged. Each
    call is given ``timeout_s``: the thread it runs in is joined when the process exits.
    """
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    api = (api_factory or _admission_api)()
    removed = []
    for kind in KINDS:
        try:
            current = getattr(api, f"read_{kind}_webhook_configuration")(name, _request_timeout=timeout_s)
            if current.webhooks:
                logger.info("%s webhook configuration %s still has webhooks; left in place", kind, name)
                continue
            getattr(api, f"delete_{kind}_webhook_configuration")(name, _request_timeout=timeout_s)
            removed.append(f"{kind}/{name}")
        except ApiException as exc:
            if exc.status != 404:
                logger.warning("could not remove the %s webhook configuration %s: %s", kind, name, exc.reason)
    return removed


async def remove_empty_async(name: str, timeout_s: float = 10.0, api_factory: ApiFactory | None = None) -> list[str]:
    """:func:`remove_empty` off the event loop, given at most ``timeout_s`` (shutdown is not held up)."""
    try:
        call = asyncio.to_thread(remove_empty, name, api_factory, timeout_s / len(KINDS) / 2)
        return await asyncio.wait_for(call, timeout_s)
    except Exception as exc:  # no credentials, API down: say so, never fail the shutdown
        logger.warning("could not remove the managed webhook configurations %s (%s: %s)", name, type(exc).__name__, exc)
        return []
