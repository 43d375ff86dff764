"""A stopping operator never waits for a hung Hub: resolutions are abandoned, timers return at once.

The e2e twin (e2e/test_availability.py) measures the whole process on a real API server.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import CancelledError

import kopf
import pytest

from fitgate.checkpoints import ModelFacts
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.store import DaemonPool, FactsStore
from fitgate.operator.runtime import handlers
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.schema.config import OperatorConfig
from fitgate.settings import Settings
from tests.fitgate_operator.test_operator import H100, Stopped, index, memo, start_resync

HUNG_EXIT = textwrap.dedent(
    """
    import asyncio, threading, time
    from fitgate.operator.schema.api import ModelRef
    from fitgate.operator.decision.store import FactsStore

    def hung(name, rev, source):
        threading.Event().wait(60)  # a Hub resolution that has not reached its deadline yet

    async def main():
        store = FactsStore(resolver=hung, hub_workers=2)
        for i in range(6):  # 2 running, 4 queued
            store.peek(ModelRef(name=f"acme/hung-{i}", source="hub"))
        await asyncio.sleep(0.3)
        store.close()

    asyncio.run(main())
    print("exiting", flush=True)
    """
)


def test_the_process_exits_without_waiting_for_hung_resolutions() -> None:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", HUNG_EXIT], check=False, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert result.returncode == 0 and "exiting" in result.stdout, result.stderr
    assert took < 10, f"the interpreter waited {took:.0f}s for resolution threads at exit"


STUCK_EXIT = textwrap.dedent(
    """
    import threading
    from fitgate.operator.runtime import shutdown

    def stuck_in_an_api_call():
        threading.Event().wait(60)  # a non-daemon thread: the interpreter joins it at exit

    threading.Thread(target=stuck_in_an_api_call, name="stuck").start()
    shutdown.arm(1)
    print("exiting", flush=True)
    """
)


def test_a_stuck_exit_ends_with_every_stack_after_the_shutdown_seconds() -> None:
    """``shutdown.arm(1)``: 1 s later faulthandler writes each thread's stack to stderr and exits with 1."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", STUCK_EXIT], check=False, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 1 and "exiting" in result.stdout, result.stderr
    assert "Timeout (0:00:01)!" in result.stderr and "stuck_in_an_api_call" in result.stderr, result.stderr
    assert took < 30, f"the stuck exit took {took:.0f}s"


def test_cleanup_arms_the_exit_bound_when_the_operator_gives_one() -> None:
    armed: list[bool] = []
    asyncio.run(handlers.operator_cleanup(memo=memo(arm_shutdown=lambda: armed.append(True))))
    assert armed == [True]


@pytest.mark.parametrize(("value", "ok"), [("20", True), ("1", True), ("600", True), ("0", False), ("2.5", False)])
def test_shutdown_seconds_setting(monkeypatch: pytest.MonkeyPatch, value: str, ok: bool) -> None:
    monkeypatch.setenv("FITGATE_SHUTDOWN_SECONDS", value)
    if ok:
        assert OperatorConfig.from_env().shutdown_s == int(value)
        return
    with pytest.raises(ValueError, match=rf"FITGATE_SHUTDOWN_SECONDS: '{value}' is not valid; expected whole"):
        OperatorConfig.from_env()


def test_close_cancels_queued_work_and_refuses_more() -> None:
    release = threading.Event()
    pool = DaemonPool(1, "test")
    running = pool.submit(release.wait, 30)
    queued = pool.submit(time.sleep, 0)
    pool.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled() and not running.done()
    with pytest.raises(RuntimeError, match="cannot schedule new work after shutdown"):
        pool.submit(time.sleep, 0)
    release.set()
    assert running.result(5) is True
    with pytest.raises(CancelledError):
        queued.result(0)


def test_the_pool_runs_work_on_at_most_its_workers() -> None:
    pool = DaemonPool(3, "test")
    seen: set[str] = set()

    def work(i: int) -> int:
        seen.add(threading.current_thread().name)
        time.sleep(0.01)
        return i * i

    futures = [pool.submit(work, i) for i in range(30)]
    assert [f.result(5) for f in futures] == [i * i for i in range(30)]
    assert 1 <= len(seen) <= 3 and all(t.startswith("test_") for t in seen)
    assert all(t.daemon for t in threading.enumerate() if t.name in seen)
    pool.shutdown()


def test_a_resync_waiting_on_a_hung_hub_returns_when_kopf_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf leaves a timer that does not return orphaned, and cancels it only 5 s later, at exit."""
    monkeypatch.setattr(kopf, "event", lambda *a, **kw: None)
    release = threading.Event()

    def hung(name: str, rev: str | None, source: str) -> ModelFacts:
        release.wait(30)
        raise AssertionError("released at the end of the test")

    config = OperatorConfig(webhook_port=0, metrics_port=0, resync_s=0.05, reconcile_resolve_s=20)
    m = memo(config, store=FactsStore(resolver=hung), metrics=Metrics(), nodewatch=index(H100))
    spec = {"model": {"name": "acme/hung", "source": "hub"}}
    body = kopf.Body({"metadata": {"name": "x", "namespace": "ml"}, "spec": spec, "status": {}})

    async def scenario() -> tuple[kopf.Patch, float]:
        stopped = Stopped()
        patch = kopf.Patch()
        resync = start_resync(body, m, stopped, patch)
        await asyncio.sleep(0.5)  # past the resync wait: reconciling, waiting on the Hub
        started = time.monotonic()
        stopped.event.set()
        await asyncio.wait_for(resync, 10)
        return patch, time.monotonic() - started

    try:
        patch, took = asyncio.run(scenario())
    finally:
        release.set()
    assert took < 1 and not patch


def test_operator_cleanup_closes_the_store() -> None:
    store = FactsStore(resolver=lambda *a: ModelFacts(ref="x", name="x", config={}))
    asyncio.run(handlers.operator_cleanup(memo=memo(store=store)))
    with pytest.raises(RuntimeError, match="after shutdown"):
        store._hub_pool.submit(time.sleep, 0)


@pytest.mark.parametrize(("value", "ok"), [("10", True), ("2", True), ("1", False), ("ten", False), ("9999", False)])
def test_peering_lifetime_setting(monkeypatch: pytest.MonkeyPatch, value: str, ok: bool) -> None:
    monkeypatch.setenv("FITGATE_PEERING_LIFETIME_SECONDS", value)
    if ok:
        assert OperatorConfig.from_env().peering_lifetime_s == int(value)
        return
    with pytest.raises(ValueError, match=rf"FITGATE_PEERING_LIFETIME_SECONDS: '{value}' is not valid; expected whole"):
        OperatorConfig.from_env()


def test_startup_shortens_the_peering_lifetime() -> None:
    """kopf's default lifetime (60 s) kept statuses unwritten for ~58 s after a kill -9 of the active replica."""
    settings = kopf.OperatorSettings()
    assert settings.peering.lifetime == 60
    config = OperatorConfig(
        webhook_port=0, metrics_port=0, metrics_addr="127.0.0.1", peering_lifetime_s=10, shutdown_s=7
    )
    m = kopf.Memo()

    async def scenario() -> None:
        await handlers.operator_startup(
            settings=settings, memo=m, logger=logging.getLogger("t"), every=Settings(operator=config)
        )
        assert OperatorMemo.of(m).config is config  # the one state every handler reads
        await handlers.operator_cleanup(memo=m)

    try:
        asyncio.run(scenario())
    finally:
        gc.unfreeze()  # startup freezes what it loaded out of the collector's reach
    assert settings.peering.lifetime == 10 and settings.peering.stealth
    # kopf's last-resort SIGKILL (default 600 s after the signal) comes 5 s after fitgate's own bound
    assert settings.process.ultimate_exiting_timeout == 7 + 5
