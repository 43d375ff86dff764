"""A stopping operator ends within ``FITGATE_SHUTDOWN_SECONDS``, and says what held it up if anything did.

Nothing bounded the exit before: ``asyncio.run`` (which ``kopf.run`` uses) joins the default executor's
threads with no time limit (CPython 3.11 ``BaseEventLoop.shutdown_default_executor``), kopf's own API calls
may take its 5-minute ``settings.networking.request_timeout``, and aiohttp gives in-flight webhook requests
60 s to finish. One stuck call kept a stopping operator alive until the kubelet's SIGKILL at the end of the
pod's grace period, which says nothing about why.

Two bounds, both counted in whole seconds:

* From the start of fitgate's cleanup (kopf runs it once its watchers, workers and webhook server have
  stopped), :func:`arm` gives the rest of the exit ``seconds``; past that, :mod:`faulthandler` writes every
  thread's stack to stderr (the pod log) and the process exits with status 1.
* kopf's last resort, ``settings.process.ultimate_exiting_timeout`` (SIGKILL, counted from the signal), is
  set to ``seconds`` + :data:`KILL_MARGIN_S` by :func:`configure`, for a hang before the cleanup.

The chart sets the pod's ``terminationGracePeriodSeconds`` to ``seconds`` + 10, so the kubelet never kills
the operator before both have had their turn.
"""

from __future__ import annotations

import faulthandler
import sys
from typing import Any

#: Seconds after ``seconds`` that kopf's SIGKILL waits, so the stack dump, when there is one, comes first.
KILL_MARGIN_S = 5


def configure(kopf_settings: Any, seconds: int) -> None:
    """Bound kopf's whole exit, from the signal on, to ``seconds`` + :data:`KILL_MARGIN_S` (SIGKILL past it)."""
    kopf_settings.process.ultimate_exiting_timeout = float(seconds + KILL_MARGIN_S)


def arm(seconds: int) -> None:
    """From now on, the process has ``seconds`` to end; past that, every thread's stack and exit status 1."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


def disarm() -> None:
    """Cancel :func:`arm` (tests; an operator that is stopping never does)."""
    faulthandler.cancel_dump_traceback_later()
