"""Run kopf with fitgate's handlers (``fitgate operator``)."""

from __future__ import annotations

import functools
import logging
import random

import kopf

from fitgate.operator.runtime import shutdown
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


class RedactSecrets(logging.Filter):
    """Write ``***`` for each secret (the Hub token) in every log line, whatever logger wrote it (issue 22).

    Under ``--verbose`` the HTTP libraries log requests and answers; a Hub (or a proxy) that echoes the
    token would put it in the operator's log. Installed on the root handlers, it sees every record.
    """

    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if len(s) >= 4)

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace each secret in the formatted message (and a traceback's text) with ``***``."""
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not format: leave it to the handler
            return True
        redacted = message
        for secret in self.secrets:
            redacted = redacted.replace(secret, "***")
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for secret in self.secrets:
                record.exc_text = record.exc_text.replace(secret, "***")
        return True


def redact_logs(secrets: tuple[str, ...]) -> None:
    """Install :class:`RedactSecrets` on every handler of the root logger."""
    guard = RedactSecrets(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(guard)


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
    from fitgate.operator.runtime import handlers  # noqa: PLC0415 - its decorators register the handlers with kopf

    registry = kopf.get_default_registry()
    # What depends on the settings (the start-up handler, the workload webhook's paths) is registered now,
    # from ``settings`` (flags applied), never at import from the environment.
    handlers.register(registry, settings, functools.partial(shutdown.arm, config.shutdown_s))

    kopf.configure(verbose=verbose, log_prefix=True)  # every line about an object starts with [namespace/name]
    logging.getLogger("kopf.objects").addFilter(DenialsAreNotErrors(verbose))
    redact_logs((settings.hub.token,) if settings.hub.token else ())
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
        registry=registry,
        memo=kopf.Memo(),  # operator_startup puts the OperatorMemo in it (fitgate.operator.runtime.memo)
    )
    return 0
