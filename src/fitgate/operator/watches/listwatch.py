"""One list+watch loop, in a daemon thread, for every kind the operator keeps in memory itself.

Nodes (:mod:`fitgate.operator.watches.nodewatch`) and the DRA objects and GPU pods
(:mod:`fitgate.operator.watches.resourcewatch`) are read the way client-go's reflector reads them: a LIST in pages
(``limit`` / ``continue``; a node object is tens of kB, and thousands must never sit in memory at once),
then a WATCH from the list's resourceVersion with bookmarks. The watch is listed again after ``relist_s``
(its server-side timeout), after an ERROR event (410 Gone: the version is too old) and after any failure,
with a backoff from 1 s to 30 s; the last view is kept meanwhile, so a missed event heals by itself.

A subclass says what to list (:meth:`ListWatch._lister`), how to keep one object (:meth:`ListWatch._keep`)
and a whole list (:meth:`ListWatch._replace_all`) and one event (:meth:`ListWatch.apply`), and what an API
error means for it (:meth:`ListWatch._not_served`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger("fitgate.listwatch")

ApiFactory = Callable[[], Any]

#: Seconds of the first retry after a failure, doubled up to :data:`MAX_BACKOFF_S`.
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


class ListWatch:
    """LIST in pages, WATCH from there, in a daemon thread, until :meth:`stop`."""

    def __init__(
        self,
        name: str,
        api_factory: ApiFactory,
        relist_s: float = 300.0,
        page_size: int = 500,
        list_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self._api_factory = api_factory
        self.relist_s = relist_s
        self.page_size = page_size
        self._list_kwargs = dict(list_kwargs or {})
        #: Failed lists and watches so far (a kind that is not served does not count).
        self.errors = 0
        self._api: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what a subclass says ---------------------------------------------------------------

    def _lister(self, api: Any) -> Callable[..., Any]:
        """The client's list call for this kind (the watch streams the same call)."""
        raise NotImplementedError

    def _keep(self, obj: Mapping[str, Any]) -> tuple[str, Any]:
        """The key and the kept value of one listed object."""
        raise NotImplementedError

    def _replace_all(self, kept: dict[str, Any]) -> None:
        """Take a complete LIST's kept values in place of the current ones."""
        raise NotImplementedError

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED, DELETED)."""
        raise NotImplementedError

    def _listed(self) -> None:
        """A LIST succeeded (the kind is served and granted)."""

    def _not_served(self, exc: Exception) -> bool:
        """Whether ``exc`` means the kind is not there for fitgate (then handled here: no retry backoff)."""
        return False

    # -- the loop --------------------------------------------------------------------------

    def _list(self, api: Any) -> str:
        """LIST every object in pages of ``page_size``; returns the resource version to watch from."""
        kept: dict[str, Any] = {}
        token: str | None = None
        call = self._lister(api)
        while True:
            kwargs: dict[str, Any] = {**self._list_kwargs, "limit": self.page_size, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            page = json.loads(call(**kwargs).data)
            for obj in page.get("items") or []:
                key, value = self._keep(obj)
                kept[key] = value
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                self._replace_all(kept)
                return str(meta["resourceVersion"])

    def start(self) -> None:
        """Start listing and watching in a daemon thread.

        The client is made here, in the caller's thread, when it can be, so that its many long-lived
        objects exist before the operator freezes its start-up objects out of the collector's reach.
        """
        try:
            self._api = self._api_factory()
        except Exception as exc:  # no credentials yet: the thread keeps trying
            logger.warning("%s watch: no Kubernetes client yet (%s: %s)", self.name, type(exc).__name__, exc)
        self._thread = threading.Thread(target=self._run, name=f"fitgate-watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop (it ends at the next event or watch timeout; it never holds up an exit)."""
        self._stop.set()

    def _run(self) -> None:
        from kubernetes import watch  # noqa: PLC0415 - only the operator needs the client

        backoff = FIRST_BACKOFF_S
        while not self._stop.is_set():
            try:
                if self._api is None:
                    self._api = self._api_factory()
                version = self._list(self._api)
                self._listed()
                backoff = FIRST_BACKOFF_S
                stream = watch.Watch().stream(
                    self._lister(self._api),
                    **self._list_kwargs,
                    resource_version=version,
                    timeout_seconds=int(self.relist_s),
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    kind, raw = event.get("type"), event.get("raw_object") or {}
                    if kind == "ERROR":  # e.g. 410 Gone: the resource version is too old; list again
                        logger.info("%s watch: %s; listing again", self.name, raw.get("message", raw))
                        break
                    if kind in {"ADDED", "MODIFIED", "DELETED"}:
                        self.apply(str(kind), raw)
            except Exception as exc:  # network, auth, API errors: keep the last view, retry with backoff
                if self._not_served(exc):
                    continue
                self._api = None  # configure again (credentials may have changed)
                self.errors += 1
                logger.warning("%s watch failed (%s); retrying in %.0f s", self.name, _why(exc), backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)


def _why(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)
    status = getattr(exc, "status", None)
    if isinstance(status, int) and reason:
        return f"HTTP {status} {reason}"
    return f"{type(exc).__name__}: {exc}"
