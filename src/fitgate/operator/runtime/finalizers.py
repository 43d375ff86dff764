"""Deleting the ModelDeployment CRD never leaves it Terminating (issue 22, docs/hardening.md).

kopf puts ``fitgate.io/finalizer`` on every ModelDeployment (the resync timer needs it to stop cleanly).
When the CRD itself is deleted, the API server marks every ModelDeployment deleted and waits for their
finalizers; kopf drops the resource from its watches as the CRD goes, so nothing released them and the CRD
stayed Terminating for good. This module watches the one CRD: once it carries a ``deletionTimestamp``, the
operator removes its own finalizer from every ModelDeployment it can see (other finalizers are left as they
are), and the CRD's deletion completes. Without a running operator, docs/hardening.md gives the one
``kubectl`` loop that does the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import kopf

from fitgate.operator.base import kubeconfig
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.schema.api import GROUP, PLURAL, VERSION

logger = logging.getLogger("fitgate.finalizers")

CRD_NAME = f"{PLURAL}.{GROUP}"
FINALIZER = "fitgate.io/finalizer"
#: Seconds one list or patch may take.
REQUEST_TIMEOUT_S = 10.0


def released(finalizers: Sequence[str] | None) -> list[str] | None:
    """The finalizers without fitgate's, or None when fitgate's is not there (nothing to write)."""
    current = list(finalizers or [])
    return [f for f in current if f != FINALIZER] if FINALIZER in current else None


def release_all(api: Any, namespaces: Sequence[str] = ()) -> int:
    """Remove fitgate's finalizer from every ModelDeployment (of ``namespaces``, or all); returns how many.

    One merge patch per object (``metadata.finalizers`` with fitgate's left out); an object gone meanwhile
    (404) or changed (409) is skipped: its next event comes back here while the CRD is deleting.
    """
    lists = (
        [
            api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _request_timeout=REQUEST_TIMEOUT_S)
            for ns in namespaces
        ]
        if namespaces
        else [api.list_cluster_custom_object(GROUP, VERSION, PLURAL, _request_timeout=REQUEST_TIMEOUT_S)]
    )
    count = 0
    for listed in lists:
        for item in (listed or {}).get("items") or []:
            meta = item.get("metadata") or {}
            rest = released(meta.get("finalizers"))
            if rest is None:
                continue
            body = {"metadata": {"finalizers": rest, "resourceVersion": meta.get("resourceVersion")}}
            try:
                api.patch_namespaced_custom_object(
                    GROUP, VERSION, meta.get("namespace"), PLURAL, meta.get("name"), body,
                    _request_timeout=REQUEST_TIMEOUT_S,
                )  # fmt: skip
                count += 1
            except Exception as exc:  # 404 / 409: gone or changed; another event brings it back
                logger.info("finalizer of %s/%s not released: %s", meta.get("namespace"), meta.get("name"), exc)
    return count


def _is_ours(name: str, **_: Any) -> bool:
    return name == CRD_NAME


@kopf.on.event("apiextensions.k8s.io", "v1", "customresourcedefinitions", when=_is_ours)
async def crd_deleting(*, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """The ModelDeployment CRD is being deleted: release fitgate's finalizer from every ModelDeployment."""
    if not body.get("metadata", {}).get("deletionTimestamp"):
        return
    state = OperatorMemo.find(memo)  # None: start-up has not run yet; then every namespace
    namespaces = state.config.namespaces if state is not None else ()
    try:
        count = await asyncio.to_thread(release_all, kubeconfig.custom_objects(), namespaces)
    except Exception as exc:  # the API server's fault: the CRD's next event (or a restart) tries again
        logger.warning("the ModelDeployment CRD is being deleted; releasing finalizers failed: %s", exc)
        return
    if count:
        logger.info("the ModelDeployment CRD is being deleted: released the finalizer of %d ModelDeployments", count)
