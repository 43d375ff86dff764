"""Run kopf with fitgate's handlers (``fitgate operator``)."""

from __future__ import annotations

import functools
import logging
import random

import kopf

from fitgate.operator import shutdown
from fitgate.settings import Settings, load


class DenialsAreNotErrors(logging.Filter):
    """kopf logs every admission denial at ERROR ("Webhook 'fit' failed permanently: fitgate: ...").

    A denial is the webhook doing its job (counted in ``fitgate_admission_requests_total{result="denied"}``),
    not an operator error that should page someone: it is logged at INFO when verbose, else not at all.
    """

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        """Drop (or, verbose, downgrade to INFO) kopf's ERROR line for a fitgate admission denial."""
        message = str(record.msg)
        if record.levelno >= logging.ERROR and "failed permanently: fitgate: " in message:
            if not self.verbose:
                return False
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def run_operator(
    settings: Settings | None = None,
    namespaces: tuple[str, ...] = (),
    liveness: str | None = None,
    verbose: bool = False,
) -> int:
    """Block running the operator until it is stopped (SIGTERM/SIGINT); ``settings`` default: :func:`load`."""
    settings = settings or load()
    config = settings.operator
    namespaces = namespaces or config.namespaces
    from fitgate.operator import handlers  # noqa: F401, PLC0415 - registers the handlers with kopf

    kopf.configure(verbose=verbose, log_prefix=True)  # every line about an object starts with [namespace/name]
    logging.getLogger("kopf.objects").addFilter(DenialsAreNotErrors(verbose))
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
        memo=kopf.Memo(
            settings=settings, config=config, arm_shutdown=functools.partial(shutdown.arm, config.shutdown_s)
        ),
    )
    return 0
