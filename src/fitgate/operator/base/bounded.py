"""User-controlled parsing off the event loop, with a deadline (issue 22, docs/hardening.md).

The event loop answers every admission review; a workload read (its env, command line, ``--config``
file) or a pod log parsed on it would make every other review wait. :func:`read_workload_bounded` runs
the reader in a small pool of its own (never the default pool the Kubernetes calls use) and answers
Unknown once :attr:`~fitgate.settings.ParseBudgets.read_deadline_s` has passed; the reader's own budgets
(:mod:`fitgate.workloads.bounds`) keep the thread left behind short and small.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fitgate.workloads import Reading, read_workload
from fitgate.workloads.bounds import budgets
from fitgate.workloads.reader import unreadable

T = TypeVar("T")

#: Threads that parse user input; a read past its deadline keeps one until its budgets stop it.
PARSE_WORKERS = 4
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=PARSE_WORKERS, thread_name_prefix="fitgate-parse")


#: Named in every deadline message (and how a reader of the message tells a deadline from a budget).
DEADLINE_SETTING = "FITGATE_READ_DEADLINE_SECONDS"


class DeadlineError(TimeoutError):
    """A parse took longer than its deadline."""


async def off_loop(fn: Callable[..., T], *args: Any, deadline_s: float | None = None) -> T:
    """``fn(*args)`` in the parse pool; :class:`DeadlineError` after ``deadline_s`` (default: the budget's)."""
    limit = budgets().read_deadline_s if deadline_s is None else deadline_s
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(_POOL, fn, *args)
    try:
        return await asyncio.wait_for(asyncio.shield(future), limit)
    except TimeoutError:
        raise DeadlineError(f"took more than {limit:g} s ({DEADLINE_SETTING})") from None


async def read_workload_bounded(
    obj: Mapping[str, Any],
    configmaps: Mapping[str, Mapping[str, str]] | None = None,
    extra_paths: Mapping[str, str] | None = None,
) -> Reading | None:
    """:func:`fitgate.workloads.read_workload` in the parse pool; Unknown when it passes its deadline."""
    try:
        return await off_loop(read_workload, dict(obj), configmaps, extra_paths)
    except DeadlineError as exc:
        return unreadable(dict(obj), f"reading the workload {exc}")
