"""Checkpoint facts for the operator: resolved in worker threads, cached in memory, never blocking admission.

* :meth:`FactsStore.peek` returns what is known now (facts, an error, or nothing) and starts a
  background resolution when nothing is known: the webhook never waits on the Hub.
* :meth:`FactsStore.get` waits for a resolution up to a timeout (reconcile).
* Transient failures (Hub unreachable, 5xx, timeouts) are remembered for ``retry_after_s`` so a
  broken Hub is not hammered; definitive ones (not found, gated) and facts for ``ttl_s``.
* Directories (``source: path``) must lie under ``FITGATE_MODEL_ROOTS``.
* Resolutions that may reach the Hub run on their own thread pool; catalog and path resolutions run
  on another, so a slow Hub (each resolution bounded by ``FITGATE_HUB_DEADLINE``) never delays them.
* Shutdown never waits for a resolution: the pools' threads are daemons (:class:`DaemonPool`), and
  :meth:`FactsStore.close` cancels what is queued (a SIGTERM with hung Hub resolutions used to wait for
  each to reach its deadline, beyond the pod's grace period).
* :meth:`FactsStore.provisional` answers for a Hub reference whose resolution is pending or failing
  transiently from what is known without the Hub (the on-disk facts cache, a catalog), so that admission
  is not left with an Unknown verdict for a model fitgate knows.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from fitgate.checkpoints import CheckpointError, ModelFacts, resolve, to_model_input
from fitgate.checkpoints.catalog import BUILT_IN, catalog_entries
from fitgate.checkpoints.resolve import resolve_known
from fitgate.operator.schema.api import ModelRef
from fitgate.settings import Settings, load
from fitgate.sizing import ModelInput, ReasonCode, SizingError, UnknownArchitectureError


@dataclass(frozen=True)
class Known:
    """What is known about one model reference."""

    facts: ModelFacts | None
    model: ModelInput | None
    error: str | None
    transient: bool
    at: float
    reason: ReasonCode | None = None  # the reason of an error, when more precise than transient/permanent
    provisional: str = ""  # where facts known without the Hub came from (see FactsStore.provisional)


NOT_IN_CATALOG = ReasonCode.CHECKPOINT_NOT_IN_CATALOG
P = ParamSpec("P")
T = TypeVar("T")
_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]

Resolver = Callable[[str, str | None, str], ModelFacts]
#: What is known of a reference without the Hub (None: nothing); see :func:`fitgate.checkpoints.resolve.resolve_known`.
Fallback = Callable[[str, str | None, str], ModelFacts | None]


class DaemonPool(Executor):
    """A thread pool whose threads are daemons, so that the process exits without waiting for them.

    ``ThreadPoolExecutor`` threads are joined when the interpreter exits, so a stopping operator waited
    for every running resolution (up to ``FITGATE_HUB_DEADLINE`` each). Nothing these threads do needs
    finishing: the facts cache is written to a temporary file renamed into place, so an abandoned write
    leaves at most a stray temporary file. Threads start on demand, up to ``workers``.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        # the threads hold the queue, never the pool: a dropped pool stops its threads
        weakref.finalize(self, _stop_threads, self._queue, self._threads)

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queue ``fn(*args, **kwargs)``; start a thread when none is idle and fewer than ``workers`` run."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: cannot schedule new work after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=_work,
                    args=(self._queue, self._idle),
                    name=f"{self._name}_{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; ``cancel_futures`` cancels what has not started; ``wait`` waits for the rest."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            _stop_threads(self._queue, self._threads)
        if wait:
            for thread in list(self._threads):
                thread.join()


def _work(work: queue.SimpleQueue[_Item | None], idle: threading.Semaphore) -> None:
    while (item := work.get()) is not None:
        future, fn, args, kwargs = item
        if future.set_running_or_notify_cancel():
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the waiting coroutine
                future.set_exception(exc)
            else:
                future.set_result(result)
        del item, future, fn, args, kwargs
        idle.release()


def _stop_threads(work: queue.SimpleQueue[_Item | None], threads: list[threading.Thread]) -> None:
    for _ in threads:
        work.put(None)


def _key(ref: ModelRef) -> tuple[str, str, str]:
    return (ref.name, ref.revision or "", ref.source)


def _local(ref: ModelRef) -> bool:
    """Whether ``ref`` is resolved without the Hub (a catalog entry or a directory)."""
    return ref.source in ("catalog", "path") or ref.name.strip().startswith(("/", ".", "~"))


class FactsStore:
    """In-memory facts per model reference, resolved off the event loop."""

    def __init__(
        self,
        resolver: Resolver | None = None,
        retry_after_s: float = 30.0,
        ttl_s: float = 600.0,
        hub_workers: int = 8,
        local_workers: int = 4,
        model_roots: tuple[str, ...] | None = None,
        *,
        offline: bool = False,
        settings: Settings | None = None,
        fallback: Fallback | None = None,
    ) -> None:
        """A store resolving with ``resolver``.

        ``offline``: the Hub is never contacted (``HF_HUB_OFFLINE``), so a model no catalog has is not a
        transient failure to retry but a permanent one, until a catalog entry is added (seen within ``ttl_s``).
        Hub resolutions run on their own pool, so a hung Hub never holds catalog or path models.
        ``fallback`` finds what is known without the Hub (default: the on-disk facts cache, then a catalog).
        ``settings``: the Hub, cache, limits and model roots to resolve with (the operator passes those it read
        at start; default: :func:`fitgate.settings.load`'s, read now).
        """
        settings = settings or load()
        roots = settings.operator.model_roots if model_roots is None else model_roots
        self._resolver = resolver or (
            lambda name, rev, source: resolve(name, rev, source=source, roots=roots, settings=settings)
        )
        self._hub_pool = DaemonPool(hub_workers, "fitgate-hub")
        self._local_pool = DaemonPool(local_workers, "fitgate-local")
        self._fallback = fallback or (
            lambda name, rev, source: resolve_known(name, rev, source=source, settings=settings)
        )
        self._provisional: dict[tuple[str, str, str], Known | None] = {}
        self._provisional_at: dict[tuple[str, str, str], float] = {}
        self._provisional_lookups: dict[tuple[str, str, str], Future[Known | None]] = {}
        self.offline = offline
        self._known: dict[tuple[str, str, str], Known] = {}
        self._tasks: dict[tuple[str, str, str], asyncio.Task[Known]] = {}
        self.retry_after_s = retry_after_s
        self.ttl_s = ttl_s
        self.errors: dict[str, int] = {}

    def _fresh(self, known: Known | None) -> bool:
        if known is None:
            return False
        age = time.monotonic() - known.at
        if known.error is not None and known.transient:
            return age < self.retry_after_s
        return age < self.ttl_s  # facts, and definitive errors (access may be granted later)

    def fresh(self, ref: ModelRef) -> Known | None:
        """What is known now if it is still fresh; starts nothing (the resync fast path asks this)."""
        known = self._known.get(_key(ref))
        return known if self._fresh(known) else None

    def peek(self, ref: ModelRef) -> Known | None:
        """What is known now; starts a resolution in the background if nothing fresh is."""
        key = _key(ref)
        known = self._known.get(key)
        if not self._fresh(known):
            self._start(ref)
        return known

    async def get(self, ref: ModelRef, timeout_s: float) -> Known | None:
        """Resolve (or reuse) within ``timeout_s``; None if still resolving."""
        key = _key(ref)
        known = self._known.get(key)
        if self._fresh(known):
            return known
        task = self._start(ref)
        if known is None or known.model is None:
            self._provisional_lookup(ref)  # beside the Hub's wait, not after it: both fit the admission budget
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            return known

    def close(self) -> None:
        """Stop resolving, at once: queued resolutions are cancelled, running ones abandoned (daemon threads)."""
        for task in self._tasks.values():
            task.cancel()
        self._hub_pool.shutdown(wait=False, cancel_futures=True)
        self._local_pool.shutdown(wait=False, cancel_futures=True)

    def forget(self, ref: ModelRef) -> None:
        """Drop what is known about ``ref``: the next read resolves it again."""
        self._known.pop(_key(ref), None)
        self._provisional.pop(_key(ref), None)

    async def provisional(self, ref: ModelRef, timeout_s: float) -> Known | None:
        """Facts of a Hub reference known without the Hub (the on-disk cache, a catalog), or None.

        For while its Hub resolution is pending or failing transiently. Looked up on the local pool (never
        behind a stuck Hub) within ``timeout_s``, and remembered for ``retry_after_s``, found or not.
        ``Known.provisional`` says where the facts came from.
        """
        lookup = self._provisional_lookup(ref)
        if lookup is None:  # not a Hub reference (nothing stored), or a fresh answer remembered
            return self._provisional.get(_key(ref))
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(lookup)), timeout_s)
        except TimeoutError:
            return None

    def _provisional_lookup(self, ref: ModelRef) -> Future[Known | None] | None:
        """The lookup :meth:`provisional` awaits, started if none is running or fresh (None: a fresh one is known).

        :meth:`get` starts it beside the Hub's resolution, so a hung Hub's wait and the lookup overlap (CI: a busy
        runner took longer than the admission budget for the lookup started only after the wait).
        """
        if ref.source not in ("auto", "hub") or _local(ref):
            return None
        key = _key(ref)
        if time.monotonic() - self._provisional_at.get(key, -1e9) < self.retry_after_s:
            return None
        lookup = self._provisional_lookups.get(key)
        if lookup is None:  # one lookup a reference; one that outlives a review still lands for the next
            lookup = self._local_pool.submit(self._known_offline, ref)
            self._provisional_lookups[key] = lookup
            lookup.add_done_callback(lambda done: self._provisional_found(key, done))
        return lookup

    def _provisional_found(self, key: tuple[str, str, str], done: Future[Known | None]) -> None:
        # runs in the lookup's thread: plain dict stores only
        self._provisional_lookups.pop(key, None)
        if not done.cancelled() and done.exception() is None:
            self._provisional[key], self._provisional_at[key] = done.result(), time.monotonic()

    async def warm(self, timeout_s: float = 30.0) -> None:
        """Load what a provisional lookup needs (the catalog, the config readers) before the first review.

        The first lookup of a process costs ~0.6 s on an idle core (imports and the catalog's index); on a busy
        node that outlasted the admission timeout, and a hung Hub let a catalog misfit through as Unknown.
        """
        loop = asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(loop.run_in_executor(self._local_pool, self._warm_lookup), timeout_s)

    def _warm_lookup(self) -> None:
        try:
            entry = next((e for e in catalog_entries() if e.location == BUILT_IN), None)
        except CheckpointError:
            return  # a broken user catalog: named at startup, and by each deployment it affects
        if entry is not None:
            self._known_offline(ModelRef.model_validate({"name": entry.repo_id}))

    def _known_offline(self, ref: ModelRef) -> Known | None:
        try:
            facts = self._fallback(ref.name, ref.revision, ref.source)
            if facts is None:
                return None
            model = to_model_input(facts)
        except (CheckpointError, SizingError):
            return None  # the resolution itself will say what is wrong
        if facts.source == "catalog":
            where = facts.origin or "fitgate's catalog"
        else:
            where = f"the on-disk facts cache (commit {facts.revision})"
        return Known(facts, model, None, False, time.monotonic(), provisional=where)

    def _start(self, ref: ModelRef) -> asyncio.Task[Known]:
        key = _key(ref)
        task = self._tasks.get(key)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._resolve(ref))
            self._tasks[key] = task
        return task

    async def _resolve(self, ref: ModelRef) -> Known:
        key = _key(ref)
        try:
            pool = self._local_pool if _local(ref) else self._hub_pool
            facts = await asyncio.get_running_loop().run_in_executor(
                pool, self._resolver, ref.name, ref.revision, ref.source
            )
            model = to_model_input(facts)
            known = Known(facts, model, None, False, time.monotonic())
        except CheckpointError as exc:
            if exc.transient and self.offline and ref.source != "path":
                self.errors["permanent"] = self.errors.get("permanent", 0) + 1
                text = (
                    f"{ref.name} is in no catalog and the Hub is not contacted (HF_HUB_OFFLINE): add it with "
                    "`fitgate catalog add --flat` to the operator's catalog (chart value operator.catalog.volume)"
                )
                known = Known(None, None, text, False, time.monotonic(), NOT_IN_CATALOG)
            else:
                kind = "transient" if exc.transient else "permanent"
                self.errors[kind] = self.errors.get(kind, 0) + 1
                known = Known(None, None, str(exc), exc.transient, time.monotonic())
        except SizingError as exc:
            self.errors["permanent"] = self.errors.get("permanent", 0) + 1
            reason = ReasonCode.ARCHITECTURE_NOT_SIZED if isinstance(exc, UnknownArchitectureError) else None
            known = Known(None, None, str(exc), False, time.monotonic(), reason)
        self._known[key] = known
        return known
