"""A resync of an unchanged ModelDeployment plans nothing (issue 23); any changed input re-plans it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import kopf
import pytest

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision import evaluate as ev
from fitgate.operator.decision import logic
from fitgate.operator.decision.logic import ReconcileOutcome, forget, reconcile
from fitgate.operator.decision.status import status_patch
from fitgate.operator.gpus.inventory import Inventory
from fitgate.operator.runtime import handlers
from fitgate.operator.schema.api import parse_spec
from fitgate.operator.schema.config import OperatorConfig
from tests.fitgate_operator.test_operator import H100, L4, MISFIT, SPEC, FakeStore, gpus


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts real evaluations (the planning work a resync must skip), by model name."""
    calls: list[str] = []
    real, render = logic.evaluate, logic.status_of

    def counting(spec: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(spec.model.name)
        return real(spec, *args, **kwargs)

    def rendering(*args: Any, **kwargs: Any) -> Any:
        calls.append("status")
        return render(*args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", counting)
    monkeypatch.setattr(logic, "status_of", rendering)
    monkeypatch.setattr(logic, "_CACHE", logic.EvaluationCache(size=1))  # the shared cache cannot help
    monkeypatch.setattr(logic, "_LAST", logic.LastReconciles())
    return calls


def run(
    spec: dict[str, Any], status: dict[str, Any] | None, nodes: Inventory, store: FakeStore, name: str = "a"
) -> ReconcileOutcome:
    return asyncio.run(
        reconcile(
            raw_spec=spec,
            old_status=status,
            generation=1,
            namespace="ml",
            name=name,
            nodes=nodes,
            store=store,
            metrics=Metrics(),
            config=OperatorConfig(webhook_port=0, metrics_port=0),
        )
    )


def test_unchanged_objects_are_not_planned_again(evaluations: list[str]) -> None:
    store, nodes = FakeStore(), Inventory(gpus(H100))
    other = {**SPEC, "workload": {"concurrentRequests": 4, "contextTokens": 1000}}
    first = run(SPEC, None, nodes, store)
    second = run(other, None, nodes, store, name="b")
    assert first.status is not None and second.status is not None
    assert len(evaluations) == 4  # two evaluations, two statuses rendered
    # a resync round: same specs, same inventory object, the written status in place
    again = run(SPEC, first.status, nodes, store)
    run(other, second.status, nodes, store, name="b")
    assert len(evaluations) == 4  # the shared cache holds one entry, so only the per-object memo answered
    assert again.status is None and again.event is None
    assert again.evaluation.verdict == first.evaluation.verdict


@pytest.mark.parametrize("change", ["spec", "inventory", "status", "deleted"])
def test_any_change_plans_again(evaluations: list[str], change: str) -> None:
    store, nodes = FakeStore(), Inventory(gpus(H100))
    first = run(SPEC, None, nodes, store)
    assert first.status is not None
    spec, status = SPEC, first.status
    if change == "spec":
        spec = {**SPEC, "serving": {"maxModelLen": 65536}}
    elif change == "inventory":
        nodes = Inventory(gpus(H100, L4))  # a node event replaces the snapshot
    elif change == "status":
        status = {**first.status, "verdict": "DoesNotFit"}  # someone else wrote the status
    else:
        forget("ml", "a")
    outcome = run(spec, status, nodes, store)
    assert evaluations.count("status") == 2  # not answered from the memo: rendered again
    if change == "status":
        assert outcome.status is not None  # the right status is written back


def test_a_slow_evaluation_never_holds_up_a_review_already_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: a new spec's evaluation ran on the event loop, so every review queued behind it. A shape (the
    # spec without its workload) never evaluated goes to the admission lane; SPEC's own shape ran cheaply, so
    # the slow spec has other settings (test_the_shapes_cheap_last_time_... covers a shape seen before).
    store, nodes = FakeStore(), Inventory(gpus(H100))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    slow_spec = {
        **SPEC,
        "serving": {"maxModelLen": 16384},
        "workload": {"concurrentRequests": 3, "contextTokens": 3000},
    }
    real = logic.evaluate
    calls: list[int] = []

    def slow(spec: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(spec.workload.concurrent_requests)
        if spec.workload.concurrent_requests == 3:
            time.sleep(1.0)  # stands for a misfit's suggestions on a busy machine
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", slow)

    async def scenario() -> tuple[float, int]:
        await logic.admit(raw_spec=SPEC, nodes=nodes, store=store, config=config, dryrun=False)  # now cached
        start = time.perf_counter()
        slow_reviews = [
            asyncio.ensure_future(
                logic.admit(raw_spec=slow_spec, nodes=nodes, store=store, config=config, dryrun=False)
            )
            for _ in range(5)
        ]
        await asyncio.sleep(0.1)  # the slow evaluation is under way
        answer = await logic.admit(raw_spec=SPEC, nodes=nodes, store=store, config=config, dryrun=False)
        waited = time.perf_counter() - start
        assert answer.allowed
        outcomes = await asyncio.gather(*slow_reviews)
        assert len({o.message for o in outcomes}) == 1
        return waited, calls.count(3)

    waited, slow_evaluations = asyncio.run(scenario())
    assert (
        waited < 0.6
    )  # from the slow reviews' start; answered while the 1 s evaluation ran (it waited the whole second before)
    assert slow_evaluations == 1  # five concurrent reviews of one new spec: one evaluation


def test_the_shapes_cheap_last_time_are_evaluated_on_the_loop_and_the_rest_in_the_lane(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 23: handing a 0.1 ms evaluation to the lane thread and back cost as much CPU as the evaluation; a
    # shape (spec without workload, same facts, snapshot, namespace) that took < INLINE_BUDGET_S runs on the loop
    store, nodes = FakeStore(), Inventory(gpus(H100))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    real = logic.evaluate
    where: list[tuple[int, bool]] = []
    slow = {5}  # these workloads' evaluations take 60 ms of CPU, over a budget of 50 ms (a busy machine's margin)

    def watched(spec: Any, *args: Any, **kwargs: Any) -> Any:
        n = spec.workload.concurrent_requests
        where.append((n, threading.current_thread() is threading.main_thread()))
        if n in slow:  # CPU spent, not a sleep: the budget is judged by the evaluation's CPU time
            until = time.thread_time() + 0.06
            while time.thread_time() < until:
                pass
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", watched)
    monkeypatch.setattr(logic, "_COSTS", type(logic._COSTS)(16))
    monkeypatch.setattr(logic, "INLINE_BUDGET_S", 0.05)

    def spec(n: int, max_len: int = 32768) -> dict[str, Any]:
        return {
            **SPEC,
            "serving": {"maxModelLen": max_len},
            "workload": {"concurrentRequests": n, "contextTokens": 900},
        }

    async def admit_all(specs: list[dict[str, Any]]) -> list[str]:
        answers = []
        for raw in specs:
            outcome = await logic.admit(raw_spec=raw, nodes=nodes, store=store, config=config, dryrun=False)
            answers.append(outcome.message)
        return answers

    answers = asyncio.run(admit_all([spec(1), spec(2), spec(5), spec(6), spec(7), spec(8, 16384)]))
    assert where == [
        (1, False),  # a shape never seen: the lane
        (2, True),  # the same shape, cheap last time: on the loop
        (5, True),  # cheap last time, so on the loop, but it took 60 ms...
        (6, False),  # ...so the next one of that shape goes to the lane
        (7, True),  # and that one was cheap again
        (8, False),  # other settings: another shape, the lane
    ]
    # the same answers as evaluations made in the lane alone (a budget of 0: never on the loop)
    monkeypatch.setattr(logic, "INLINE_BUDGET_S", 0.0)
    monkeypatch.setattr(logic, "_CACHE", logic.EvaluationCache())
    where.clear()
    assert asyncio.run(admit_all([spec(1), spec(2), spec(5), spec(6), spec(7), spec(8, 16384)])) == answers
    assert not any(on_loop for _, on_loop in where)


def test_a_shape_is_judged_by_its_evaluation_cpu_not_its_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: on a busy machine (or in the lane, waiting for the GIL) a 0.4 ms evaluation took several ms of
    # wall time, and every later review of its shape paid the lane's hand-over; the budget reads CPU time
    store, nodes = FakeStore(), Inventory(gpus(H100))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    real = logic.evaluate
    where: list[tuple[int, bool]] = []

    def preempted(spec: Any, *args: Any, **kwargs: Any) -> Any:
        n = spec.workload.concurrent_requests
        where.append((n, threading.current_thread() is threading.main_thread()))
        if n == 2:
            time.sleep(0.06)  # off the CPU for 60 ms (another process ran), over a budget of 50 ms
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", preempted)
    monkeypatch.setattr(logic, "_COSTS", type(logic._COSTS)(16))
    monkeypatch.setattr(logic, "INLINE_BUDGET_S", 0.05)

    async def admit_all(counts: list[int]) -> None:
        for n in counts:
            raw = {
                **SPEC,
                "serving": {"maxModelLen": 8192},
                "workload": {"concurrentRequests": n, "contextTokens": 900},
            }
            await logic.admit(raw_spec=raw, nodes=nodes, store=store, config=config, dryrun=False)

    asyncio.run(admit_all([1, 2, 3]))
    assert where == [(1, False), (2, True), (3, True)]  # the lane once (a new shape), then the loop throughout


def _untimed(value: Any) -> Any:
    """A status without its lastTransitionTime stamps (the wall clock of the evaluation that wrote them)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _h100_node(name: str) -> dict[str, Any]:
    return {**H100, "metadata": {**H100["metadata"], "name": name}}


@pytest.mark.parametrize(
    ("spec", "joined", "evaluated"),
    [
        # an L4 joins: not a pool an H100 placement may use, so its last evaluation stands (issue 23)
        ({**SPEC, "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}}, L4, False),
        # a second H100 node: the placement's pool changed (its nodes, its free GPUs): evaluated again
        ({**SPEC, "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}}, "h100", True),
        # any GPU: the L4 is a candidate pool now
        (SPEC, L4, True),
        # a misfit's alternatives are searched over the whole cluster: any pool change re-evaluates it
        ({**MISFIT, "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}}, L4, True),
    ],
)
def test_node_churn_re_evaluates_only_the_objects_whose_pools_changed(
    evaluations: list[str], spec: dict[str, Any], joined: Any, evaluated: bool
) -> None:
    store, nodes = FakeStore(), Inventory(gpus(H100))
    first = run(spec, None, nodes, store)
    assert first.status is not None
    before = len(evaluations)
    extra = _h100_node("h100-1") if joined == "h100" else joined
    churned = Inventory(gpus(H100, extra))  # a node event replaces the snapshot
    outcome = run(spec, first.status, churned, store)
    assert (len(evaluations) > before) is evaluated
    # whichever way it was answered, the answer is the one a fresh evaluation of the new snapshot gives
    forget("ml", "a")
    fresh = run(spec, None, churned, store)
    assert outcome.evaluation == fresh.evaluation
    # the two statuses were built a moment apart: their conditions' lastTransitionTime may fall in different seconds
    assert outcome.status is None or _untimed(outcome.status) == _untimed(fresh.status)
    # and the object is now known against the new snapshot: its next resync is answered at once
    counted = len(evaluations)
    assert run(spec, fresh.status, churned, store).status is None and len(evaluations) == counted


def test_admission_leaves_a_misfits_alternatives_to_reconcile(evaluations: list[str]) -> None:
    # issue 23: status shows a misfit's cluster-wide alternatives, admission's answer never does; its own
    # evaluation skips that search (a third of a misfit's cost) and decides exactly as on a full one
    store, nodes = FakeStore(), Inventory(gpus(H100, L4))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    answer = asyncio.run(
        logic.admit(raw_spec=MISFIT, nodes=nodes, store=store, config=config, dryrun=False, namespace="ml")
    )
    assert not answer.allowed and "does not fit" in answer.message
    full = run(MISFIT, None, nodes, store)
    assert full.evaluation.alternatives  # 70B at 32k: TP 2 or more on an H100 node
    assert logic.decide(logic.parse_spec(MISFIT), full.evaluation, config.unknown_policy) == answer
    # a review after the reconcile takes its full evaluation: not evaluated again
    counted = len(evaluations)
    again = asyncio.run(
        logic.admit(raw_spec=MISFIT, nodes=nodes, store=store, config=config, dryrun=False, namespace="ml")
    )
    assert again == answer and len(evaluations) == counted


def test_a_node_elsewhere_re_searches_only_the_pools_it_changed(
    evaluations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a misfit's alternatives are searched pool by pool; after an L4 joins, the H100 pool's search stands
    from fitgate.operator.decision import evaluate as evaluate_module  # noqa: PLC0415 - the memo replaced

    monkeypatch.setattr(evaluate_module, "_POOL_OPTIONS", evaluate_module.IdentityMemo())
    searched: list[str] = []
    real = evaluate_module._cheapest_on

    def counting(model: Any, wl: Any, serving: Any, pool: Any) -> Any:
        searched.append(pool.product)
        return real(model, wl, serving, pool)

    monkeypatch.setattr(evaluate_module, "_cheapest_on", counting)
    store, nodes = FakeStore(), Inventory(gpus(H100))
    first = run(MISFIT, None, nodes, store)
    assert searched == ["NVIDIA-H100-80GB-HBM3"] and first.evaluation.alternatives
    again = run(MISFIT, first.status, Inventory(gpus(H100, L4)), store)
    assert searched == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"]  # only the new pool searched
    forget("ml", "a")
    monkeypatch.setattr(evaluate_module, "_POOL_OPTIONS", evaluate_module.IdentityMemo())
    fresh = run(MISFIT, None, Inventory(gpus(H100, L4)), store)
    assert again.evaluation.alternatives == fresh.evaluation.alternatives


def test_unchanged_objects_are_not_planned_again_through_kopfs_views(evaluations: list[str]) -> None:
    # the handlers pass kopf's read-only views (kopf.Spec is a Mapping, not a dict): json refused them, so the
    # live operator re-planned and re-rendered every object on every resync round
    store, nodes = FakeStore(), Inventory(gpus(H100))
    body = kopf.Body({"metadata": {"name": "a", "namespace": "ml"}, "spec": SPEC, "status": {}})
    assert not isinstance(body.spec, dict)
    first = run(body.spec, dict(body.status), nodes, store)  # type: ignore[arg-type]
    assert first.status is not None and len(evaluations) == 2  # evaluated, status rendered
    written = kopf.Body({"metadata": {"name": "a", "namespace": "ml"}, "spec": SPEC, "status": first.status})
    again = run(written.spec, dict(written.status), nodes, store)  # type: ignore[arg-type]
    assert len(evaluations) == 2 and again.status is None and again.event is None


def stored(value: Any) -> Any:
    """What the API server keeps of a merge patch: its null fields delete, so they are not there."""
    if isinstance(value, dict):
        return {k: stored(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [stored(v) for v in value]
    return value


def test_the_status_read_back_without_its_null_fields_is_the_one_written(evaluations: list[str]) -> None:
    # the API server drops a merge patch's nulls (alternatives: null for a deployment that fits): compared with
    # them, the object's status never matched the one written, and every resync re-planned and patched it
    store, nodes = FakeStore(), Inventory(gpus(H100))
    first = run(SPEC, None, nodes, store)
    assert first.status is not None and first.status != stored(first.status)  # it has null fields
    again = run(SPEC, stored(first.status), nodes, store)
    assert len(evaluations) == 2 and again.status is None


def test_a_status_patch_sends_a_null_only_to_delete_a_field_that_is_there() -> None:
    new = {"verdict": "Fits", "alternatives": None, "resolvedModel": {"name": "m", "revision": None}}
    # nothing there yet: no nulls at all (kopf would find them missing from the object and re-send them)
    assert status_patch(new, None) == {"verdict": "Fits", "resolvedModel": {"name": "m"}}
    assert status_patch(new, {"verdict": "DoesNotFit", "resolvedModel": {"name": "m"}}) == status_patch(new, None)
    # a field that is there is deleted by its null, at any depth
    old = {"alternatives": [{"gpu": "L4"}], "resolvedModel": {"name": "m", "revision": "abc"}}
    assert status_patch(new, old) == new


def test_each_object_resyncs_once_a_period_at_a_phase_of_its_own() -> None:
    # issue 23: timers started together (an operator restarted with thousands of objects) woke together every
    # round; each object now waits for its own slot of the period, never longer than one period
    period = 60.0
    keys = [f"ml/d{i}" for i in range(2000)]
    for now in (0.0, 1234.5, 1e6 + 0.25):
        slots = [handlers.resync_slot(now, period, key) for key in keys]
        assert all(now < s <= now + period for s in slots)
        # the same object's next slot, asked just after this one: exactly one period later
        assert all(
            abs(handlers.resync_slot(s + 1e-3, period, k) - (s + period)) < 1e-6
            for s, k in zip(slots, keys, strict=True)
        )
        # spread over the period: each sixth of it holds a sixth of the objects, within 20 %
        counts = [0] * 6
        for s in slots:
            counts[min(5, int((s - now) / period * 6))] += 1
        assert all(abs(c - len(keys) / 6) < 0.2 * len(keys) / 6 for c in counts), counts


def test_serving_settings_are_made_once_per_value_of_what_they_read() -> None:
    # issue 23: every evaluation built the 43 ServingConfig fields again; now one instance per value of the spec
    # parts they come from (serving, engine version, the placement's data parallelism), the same as built anew
    base = {**SPEC, "serving": {"maxModelLen": 16384, "kvCacheDtype": "fp8"}, "workload": None}
    same_settings = {**base, "workload": {"concurrentRequests": 2, "contextTokens": 500}, "replicas": 3}
    other = [
        {**base, "serving": {"maxModelLen": 8192, "kvCacheDtype": "fp8"}},
        {**base, "engine": {"version": "0.10.1"}},
        {**base, "placement": {"dataParallelSize": 2}},
        {**base, "serving": {**base["serving"], "multimodal": {"limitPerPrompt": {"image": 2}}}},  # not hashable
    ]
    first = ev.serving_config(parse_spec(base))
    assert ev.serving_config(parse_spec(same_settings)) is first
    assert first == ev._serving_config(parse_spec(same_settings))
    for raw in other:
        spec = parse_spec(raw)
        made = ev.serving_config(spec)
        assert made == ev._serving_config(spec) and made != first


def test_reconciles_of_a_shape_cheap_last_time_are_evaluated_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: a cold start hands every evaluation to the reconcile lane and back (a sixth of its CPU); the
    # deployments of one shape (spec without its workload) reconciled after a cheap one are evaluated on the loop,
    # and admission's costs (another lane: no alternatives, no engine args) are not reconcile's
    store, nodes = FakeStore(), Inventory(gpus(H100))
    config = OperatorConfig(webhook_port=0, metrics_port=0)
    real = logic.evaluate
    where: list[tuple[int, bool, bool]] = []

    def watched(spec: Any, *args: Any, **kwargs: Any) -> Any:
        on_loop = threading.current_thread() is threading.main_thread()
        where.append((spec.workload.concurrent_requests, bool(kwargs.get("lean")), on_loop))
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", watched)
    monkeypatch.setattr(logic, "_COSTS", type(logic._COSTS)(16))
    monkeypatch.setattr(logic, "INLINE_BUDGET_S", 0.5)  # generous: this test is about where, not how fast

    def spec(n: int) -> dict[str, Any]:
        return {**SPEC, "workload": {"concurrentRequests": n, "contextTokens": 900}}

    async def scenario() -> None:
        for n, name in ((11, "a"), (12, "b")):
            await reconcile(
                raw_spec=spec(n), old_status=None, generation=1, namespace="ml", name=name, nodes=nodes,
                store=store, metrics=Metrics(), config=config,
            )  # fmt: skip
        await logic.admit(raw_spec=spec(13), nodes=nodes, store=store, config=config, dryrun=False)

    asyncio.run(scenario())
    assert where == [
        (11, False, False),  # reconcile, a shape never reconciled: the lane
        (12, False, True),  # the same shape, cheap last time: on the loop
        (13, True, False),  # admission's first review of it: its own lane, its own cost
    ]


def test_inventory_waits_end_when_cancelled_while_changes_and_timeouts_race() -> None:
    # CI 2026-12-05: an operator's exit held 20 s by resync waits kopf cancelled every second. With the condition's
    # wait run by asyncio.wait_for (a task of its own on Python 3.11), a cancel that met a timeout or a change was
    # lost in 4 of 5 runs of this scenario (one waiter still pending 3 s later); asyncio.timeout waits in the task.
    from fitgate.operator.watches.nodewatch import InventoryChanges  # noqa: PLC0415

    async def scenario() -> int:
        changes = InventoryChanges()

        async def waiter() -> None:
            seen = 0
            while True:  # as a resync timer: wait, look, wait again
                seen = await changes.wait(seen, 0.005)

        async def bump() -> None:
            version = 0
            while True:
                version += 1
                await changes.changed(version)
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(waiter()) for _ in range(300)] + [asyncio.create_task(bump())]
        await asyncio.sleep(0.5)
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=3)
        return len(pending)

    assert [asyncio.run(scenario()) for _ in range(5)] == [0] * 5
