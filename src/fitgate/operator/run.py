"""Run kopf with fitgate's handlers (``fitgate operator``)."""

from __future__ import annotations

import logging
import random

import kopf

from fitgate.operator.config import OperatorConfig


def run_operator(namespaces: tuple[str, ...] = (), liveness: str | None = None, verbose: bool = False) -> int:
    """Block running the operator until it is stopped (SIGTERM/SIGINT)."""
    config = OperatorConfig.from_env()
    namespaces = namespaces or config.namespaces
    from fitgate.operator import handlers  # noqa: F401, PLC0415 - registers the handlers with kopf

    kopf.configure(verbose=verbose)
    if not verbose:  # one access-log line per admission review is noise at production rates
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)  # per-handler success lines
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=config.peering is None,
        peering_name=config.peering,
        priority=random.randint(0, 32767) if config.peering else None,
        liveness_endpoint=liveness,
        memo=kopf.Memo(config=config),
    )
    return 0
