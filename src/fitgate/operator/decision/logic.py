"""What reconcile and admission decide, as plain async functions (no kopf): the handlers only call these.

Both go through :func:`fitgate.operator.decision.evaluate.evaluate`, so the webhook and the status always agree.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.evaluate import Evaluation, evaluate, unknown
from fitgate.operator.decision.parsing import parsed
from fitgate.operator.decision.poolplan import tolerations_of
from fitgate.operator.decision.pricing import prices_for
from fitgate.operator.decision.status import outcome_of, same_outcome, status_of
from fitgate.operator.decision.store import FactsStore, Known
from fitgate.operator.gpus.inventory import Inventory, NodeGPUs
from fitgate.operator.schema.api import ModelDeploymentSpec, SpecError, parse_spec
from fitgate.operator.schema.config import OperatorConfig, UnknownPolicy
from fitgate.sizing import ReasonCode, Verdict, vllm_args_text
from fitgate.sizing.cost import GpuPrices
from fitgate.sizing.memo import BoundedMemo, IdentityMemo, Miss

#: HTTP codes of a denial. Not 422: kubectl reads a 422 as "Invalid" and shows only its
#: ``details.causes``, which an admission webhook cannot send, so ``kubectl edit`` and ``kubectl apply``
#: would print "... is invalid" and drop the numbers and the fix. 400 and 403 show the whole message.
DENIED_INVALID = 400  # the spec cannot be served whatever the GPUs (BadRequest)
DENIED_MISFIT = 403  # the policy refuses a deployment that does not fit (Forbidden)

VERDICT_ANNOTATION = "fitgate.io/verdict"
ARGS_ANNOTATION = "fitgate.io/recommended-args"
#: On an audited workload while no node of its GPU exists (docs/clusters.md): ``NoNodeYet``, removed when one joins.
SCHEDULABLE_ANNOTATION = "fitgate.io/schedulable"


def no_node_yet(ev: Evaluation) -> bool:
    """Whether no node of the placement's GPU exists yet (a fit verdict on the GPU alone, or Unknown for it)."""
    return bool(ev.no_node) or ev.reason is ReasonCode.NO_NODE_YET


@dataclass(frozen=True)
class ReconcileOutcome:
    """What to patch and post after evaluating one ModelDeployment."""

    status: dict[str, Any] | None  # None: nothing changed, no patch
    annotations: dict[str, str]
    event: tuple[str, str, str] | None  # (type, reason, message) when the verdict changed
    evaluation: Evaluation
    retry_in_s: float | None = None  # resolution still pending or transiently failing


@dataclass(frozen=True)
class AdmissionOutcome:
    """The webhook's answer."""

    allowed: bool
    message: str
    warnings: tuple[str, ...] = field(default_factory=tuple)
    result: str = "allowed"  # allowed | warned | denied
    code: int = DENIED_MISFIT  # the HTTP code of a denial


class EvaluationCache:
    """Recent evaluations keyed by (spec, inventory snapshot, checkpoint facts).

    The same spec against the same cluster is answered without planning again (GitOps re-applies,
    dry runs, retries).
    """

    def __init__(self, size: int = 1024) -> None:
        # Bound 1024: evaluations of the current snapshot for the distinct specs reconciled or admitted lately;
        # the per-object memo (_Lasts) answers each ModelDeployment's own resyncs without it.
        self._entries: BoundedMemo[str, tuple[object, object, Evaluation]] = BoundedMemo(size)

    def get(self, key: str, inventory: object, known: object) -> Evaluation | None:
        """The cached evaluation if it was made with these very inventory and facts objects."""
        hit = self._entries.get(key)
        if isinstance(hit, Miss) or hit[0] is not inventory or hit[1] is not known:
            return None
        return hit[2]

    def put(self, key: str, inventory: object, known: object, evaluation: Evaluation) -> None:
        """Remember an evaluation, dropping the least recently used when full."""
        self._entries.put(key, (inventory, known, evaluation))


_CACHE = EvaluationCache()


@dataclass(frozen=True)
class _Last:
    """One object's last reconcile: what it was computed from and what it wrote."""

    raw_key: str
    generation: int
    spec: ModelDeploymentSpec
    inventory: object
    known: object
    status: Mapping[str, Any]
    outcome: ReconcileOutcome
    inputs: tuple[object, ...] | None = None  # what the evaluation read of the inventory (:func:`inputs_of`)
    written: object = None  # :func:`outcome_of` the status it wrote, what a resync compares the object's with


@dataclass
class ReuseCounts:
    """How reconciles were answered: from the same snapshot, from unchanged pools of a new one, or evaluated."""

    same_snapshot: int = 0
    same_pools: int = 0
    evaluated: int = 0


#: Counts since start (the benchmarks read them; node churn must re-evaluate only what it touched).
REUSE = ReuseCounts()


def inputs_of(spec: ModelDeploymentSpec, nodes: Inventory, ev: Evaluation) -> tuple[object, ...] | None:
    """What evaluating ``spec`` read of ``nodes``, comparable by value with another snapshot's; None: not known.

    A verdict is a function of the spec, the checkpoint facts and the pools it may land on (issue 23):
    the candidate pools of its placement (every field, free GPUs per node included) with their fingerprint
    (which covers cordoned and tainted nodes left out), and for a misfit the pools of the whole cluster
    its alternatives are searched on. A node change elsewhere leaves these equal, and the last evaluation
    stands. Not known (always evaluated on a new snapshot): claim templates (DRA devices and claims),
    ``spec.observe`` (the deployment's own pods), and placements no node matches (prospective pools,
    autoscaler templates, left-out nodes planned as they are).
    """
    p = spec.placement
    if p.resource_claim_template_name or spec.observe is not None or ev.no_node:
        return None
    tolerations = tolerations_of(spec)
    pools, fingerprint = nodes.select(p.gpu_product, p.node_selector, tolerations)
    if not pools:
        return None
    cluster: tuple[object, ...] = ()
    if ev.verdict is Verdict.DOES_NOT_FIT:
        everywhere, everywhere_fingerprint = nodes.select(None, {}, tolerations)
        cluster = (tuple(everywhere), everywhere_fingerprint)
    return (tuple(pools), fingerprint, *cluster)


class LastReconciles:
    """Each live ModelDeployment's last reconcile, keyed by (namespace, name): one entry an object.

    A resync of an unchanged object (same raw spec and generation, the same inventory snapshot, the same
    fresh checkpoint facts, and the status it wrote still in place) is answered from here without parsing,
    planning or rendering, whatever the cluster's size: the shared :class:`EvaluationCache` holds a fixed
    number of recent specs and thrashed when a cluster had more distinct specs than that (issue 23: 5,820
    specs for 1,024 entries, so every 60 s round re-planned them all). Memory is bounded per object: an
    entry is replaced on each reconcile and dropped when the object is deleted (:func:`forget`).
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Last] = {}

    def get(self, owner: tuple[str, str]) -> _Last | None:
        """The object's last reconcile, if any."""
        return self._entries.get(owner)

    def put(self, owner: tuple[str, str], last: _Last) -> None:
        """Remember the object's last reconcile (replaces the previous one)."""
        self._entries[owner] = last

    def forget(self, owner: tuple[str, str]) -> None:
        """Drop a deleted object's entry."""
        self._entries.pop(owner, None)

    def __len__(self) -> int:
        return len(self._entries)


_LAST = LastReconciles()


def forget(namespace: str, name: str) -> None:
    """Forget a deleted ModelDeployment's last reconcile."""
    _LAST.forget((namespace, name))


def _raw_key(raw_spec: Mapping[str, Any]) -> str | None:
    """The raw spec as canonical JSON; None when it is not JSON data (never from the API server): no fast path.

    kopf hands its handlers ``spec`` as a read-only view (``kopf.Spec``, a Mapping but no dict), which ``json``
    refuses: read through it (until this, the live operator never took :class:`LastReconciles`' fast path).
    """
    try:
        return json.dumps(raw_spec, sort_keys=True, separators=(",", ":"), default=_plain)
    except (TypeError, ValueError):
        return None


def _plain(value: object) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON data: {type(value).__name__}")


async def _evaluate(
    spec: ModelDeploymentSpec,
    nodes: Inventory | Iterable[NodeGPUs],
    store: FactsStore,
    timeout_s: float,
    blocking: bool,
    namespace: str = "",
    prices: GpuPrices | None = None,
    lane: str = "admission",
    spec_json: str | None = None,
    shape: str | None = None,
) -> tuple[Evaluation, bool]:
    """Evaluate with whatever the store knows; returns (evaluation, still_resolving_or_transient).

    ``spec_json``: ``spec.model_dump_json()`` when the caller has it, ``shape`` the same without the workload
    (:func:`~fitgate.operator.decision.parsing.parsed`, or the raw spec's JSON without it for reconcile):
    evaluations of a shape that was cheap last time run on the event loop.

    While a Hub resolution is pending or failing transiently, the evaluation uses the facts known without
    the Hub (on-disk cache, catalog) when there are any, and says so in its message and first warning: a
    hung Hub must not let a known misfit through as Unknown.
    """
    known = await store.get(spec.model, timeout_s) if blocking else store.peek(spec.model)
    if known is None and not blocking:
        known = await store.get(spec.model, timeout_s)
    if known is None or (known.model is None and known.transient):
        why = (
            "is still in progress"
            if known is None
            else f"is failing for now ({(known.error or 'the Hub could not be reached')[:300]})"
        )
        fallback = await store.provisional(spec.model, timeout_s)
        if fallback is not None:
            ev, _ = await _evaluate_known(spec, nodes, fallback, namespace, prices, lane, spec_json, shape)
            note = f"provisional verdict from {fallback.provisional}: resolving {spec.model.name} on the Hub {why}"
            first = f"fitgate: {note}"
            pending = ReasonCode.CHECKPOINT_RESOLVING if known is None else ReasonCode.CHECKPOINT_UNAVAILABLE
            ev = replace(ev, message=f"{ev.message} ({note})", warnings=(first, *ev.warnings))
            return replace(ev, provisional=(pending, note)), True
    if known is None:
        return unknown(ReasonCode.CHECKPOINT_RESOLVING, f"resolving {spec.model.name} is still in progress"), True
    return await _evaluate_known(spec, nodes, known, namespace, prices, lane, spec_json, shape)


#: Evaluations run off the event loop, so a new spec's plan and suggestions (10 ms and more for a misfit)
#: never hold up the reviews and handlers behind it; admission and reconcile each have their own lane, so
#: reviews never queue behind a resync or a cold start's reconciles (issue 23). One thread a lane: the
#: work is pure Python, and the GIL lets the event loop in between (every ``sys.getswitchinterval()``, 5 ms).
#: Evaluations of a shape that took under :data:`INLINE_BUDGET_S` last time run on the loop itself.
_LANES = {
    "admission": ThreadPoolExecutor(max_workers=1, thread_name_prefix="fitgate-admission"),
    "reconcile": ThreadPoolExecutor(max_workers=1, thread_name_prefix="fitgate-reconcile"),
}
#: Evaluations under way, by cache key: ten reviews of the same new spec wait on one evaluation.
_INFLIGHT: dict[str, asyncio.Future[tuple[Evaluation, float]]] = {}

#: An evaluation whose shape (the spec without its workload, with the same checkpoint facts, inventory snapshot,
#: namespace and lane) took less than this much CPU (:func:`_timed`) last time runs on the event loop: a new
#: workload of a model whose plans are memoised costs 0.05-0.3 ms (fits, tight, a misfit with its suggestions;
#: 0.6 ms at p99), and handing that to the lane and back cost ~0.1 ms of CPU a review (a thread wake-up, the
#: loop's self-pipe, GIL hand-overs; issue 23), and as much again a reconcile (a sixth of a cold start's CPU).
#: The loop loses nothing it had: a lane thread holds the GIL for up to the switch interval (5 ms) while it plans,
#: so an evaluation shorter than that held the loop up as long either way. A shape never seen, or slow last time
#: (a new model, new settings, a new snapshot's pools), goes to the lane.
INLINE_BUDGET_S = 0.001
#: The last evaluation's CPU time by (inventory, facts) identity and (namespace, shape, lane). Bound 4096: the
#: shapes admitted and reconciled lately (a shape is shared by every workload of a deployment).
_COSTS: IdentityMemo[float] = IdentityMemo(4096)


def _timed(fn: Callable[[], Evaluation]) -> tuple[Evaluation, float]:
    """``fn()`` and the CPU time its thread spent on it.

    CPU, not wall time: on a busy machine (or in the lane, waiting for the GIL while the loop serves other
    reviews) a 0.4 ms evaluation took several ms of wall time, so its shape was judged slow and every later
    review of it paid the lane's hand-over (14 % of new reviews at concurrency 10, issue 23).
    """
    started = time.thread_time()
    evaluation = fn()
    return evaluation, time.thread_time() - started


async def _evaluate_known(
    spec: ModelDeploymentSpec,
    nodes: Inventory | Iterable[NodeGPUs],
    known: Known,
    namespace: str = "",
    prices: GpuPrices | None = None,
    lane: str = "admission",
    spec_json: str | None = None,
    shape: str | None = None,
) -> tuple[Evaluation, bool]:
    if known.model is None:
        reason = known.reason or (
            ReasonCode.CHECKPOINT_UNAVAILABLE if known.transient else ReasonCode.CHECKPOINT_INVALID
        )
        return unknown(reason, known.error or "the checkpoint could not be resolved"), known.transient
    inventory = nodes if isinstance(nodes, Inventory) else Inventory(nodes)
    key = f"{namespace}/{prices}/{spec_json if spec_json is not None else spec.model_dump_json()}"
    cached = _CACHE.get(key, inventory, known)
    # Admission never shows a misfit's alternatives or the recommended args (status does): its own evaluations
    # leave them out (evaluate's ``lean``) and it takes reconcile's full ones too. Reconcile takes only full ones.
    lean = lane == "admission"
    if cached is None and lean:
        cached = _CACHE.get(_LEAN + key, inventory, known)
    if cached is not None:
        return cached, False
    if lean:
        key = _LEAN + key
    work = functools.partial(
        evaluate, spec, known.model, inventory, facts=known.facts, namespace=namespace, prices=prices, lean=lean
    )
    owners, shaped = (inventory, known), (namespace, shape, lane)
    last = _COSTS.peek(owners, shaped) if shape is not None else None
    if last is not None and last < INLINE_BUDGET_S:  # cheap last time: on the loop, no hand-over
        evaluation, took = _timed(work)
        _COSTS.put(owners, shaped, took)
        _CACHE.put(key, inventory, known, evaluation)
        return evaluation, False
    flight = f"{id(inventory)}/{id(known)}/{key}"
    running = _INFLIGHT.get(flight)
    if running is None:
        running = asyncio.ensure_future(
            asyncio.get_running_loop().run_in_executor(_LANES[lane], functools.partial(_timed, work))
        )
        _INFLIGHT[flight] = running
        running.add_done_callback(lambda _: _INFLIGHT.pop(flight, None))
    evaluation, took = await asyncio.shield(running)  # a cancelled review leaves the evaluation to the others
    if shape is not None:
        _COSTS.put(owners, shaped, took)
    _CACHE.put(key, inventory, known, evaluation)
    return evaluation, False


#: The cache key prefix of admission's evaluations, made without a misfit's alternatives or the recommended args.
_LEAN = "lean:"


async def reconcile(
    *,
    raw_spec: Mapping[str, Any],
    old_status: Mapping[str, Any] | None,
    generation: int,
    namespace: str,
    name: str,
    nodes: Inventory | Iterable[NodeGPUs],
    store: FactsStore,
    metrics: Metrics,
    config: OperatorConfig,
) -> ReconcileOutcome:
    """Evaluate a ModelDeployment and say what to write; idempotent (no patch when nothing changed).

    An unchanged object is answered from its last reconcile (:class:`LastReconciles`): a resync round of
    an unchanged cluster plans nothing.
    """
    owner = (namespace, name)
    raw_key = _raw_key(raw_spec)
    last = _LAST.get(owner)
    if (
        last is not None
        and raw_key is not None
        and last.raw_key == raw_key
        and last.generation == generation
        and isinstance(nodes, Inventory)
        and last.known is store.fresh(last.spec.model)
        and old_status is not None
        and (outcome_of(old_status, nulls=True) == last.written or outcome_of(old_status) == last.written)
    ):
        if last.inventory is nodes:
            REUSE.same_snapshot += 1
            return replace(last.outcome, status=None, event=None)
        if last.inputs is not None and inputs_of(last.spec, nodes, last.outcome.evaluation) == last.inputs:
            # a new snapshot, but not of the pools this object may use: the last evaluation stands
            REUSE.same_pools += 1
            _LAST.put(owner, replace(last, inventory=nodes))
            return replace(last.outcome, status=None, event=None)
    REUSE.evaluated += 1
    retry: float | None = None
    spec: ModelDeploymentSpec | None = None
    try:
        spec = parse_spec(raw_spec)
    except SpecError as exc:
        ev = unknown(ReasonCode.INVALID_SPEC, str(exc))
    else:
        ev, pending = await _evaluate(
            spec,
            nodes,
            store,
            config.reconcile_resolve_s,
            True,
            namespace,
            prices_for(spec, config),
            lane="reconcile",
            shape=_raw_key({k: v for k, v in raw_spec.items() if k != "workload"}),
        )
        if pending:
            retry = min(max(config.resync_s, 5.0), 60.0)
    new_status = status_of(ev, generation, old_status)
    changed = not same_outcome(old_status, new_status)
    plan = ev.best.plan if ev.best else None
    annotations = {
        VERDICT_ANNOTATION: ev.verdict.value,
        ARGS_ANNOTATION: vllm_args_text(ev.engine_args) if ev.engine_args else "",
    }
    previous = (old_status or {}).get("verdict")
    event = None
    if previous != ev.verdict.value:
        kind = "Normal" if ev.verdict is Verdict.FITS else "Warning"
        event = (kind, ev.verdict.value, ev.message[:1000])
    required = None
    if plan is not None:
        g = plan.per_gpu
        required = (
            g.weights_bytes
            + g.activation_bytes
            + g.non_torch_bytes
            + max(0, g.kv_cache_bytes - max(0, g.headroom_bytes))
        )
    metrics.observe(
        namespace,
        name,
        ev.verdict.value,
        required,
        plan.per_gpu.headroom_bytes if plan else None,
        plan.kv.reported_tokens if plan else None,
    )
    outcome = ReconcileOutcome(new_status if changed else None, annotations, event, ev, retry)
    known = store.fresh(spec.model) if spec is not None else None
    if (
        spec is not None
        and raw_key is not None
        and retry is None
        and known is not None
        and isinstance(nodes, Inventory)
    ):
        inputs = inputs_of(spec, nodes, ev)
        written = outcome_of(new_status)
        _LAST.put(owner, _Last(raw_key, generation, spec, nodes, known, new_status, outcome, inputs, written))
    else:
        _LAST.forget(owner)
    return outcome


async def admit(
    *,
    raw_spec: Mapping[str, Any],
    nodes: Inventory | Iterable[NodeGPUs],
    store: FactsStore,
    config: OperatorConfig,
    dryrun: bool,
    namespace: str = "",
) -> AdmissionOutcome:
    """The admission decision on a raw spec: parse, evaluate with what the store knows, :func:`decide`."""
    try:
        spec, text, shape = parsed(raw_spec)
    except SpecError as exc:
        return AdmissionOutcome(False, f"fitgate: invalid ModelDeployment: {exc}", result="denied", code=DENIED_INVALID)
    prices = prices_for(spec, config)
    ev, _ = await _evaluate(
        spec, nodes, store, config.admission_resolve_s, False, namespace, prices, spec_json=text, shape=shape
    )
    return decide(spec, ev, config.unknown_policy, dryrun=dryrun)


def decide(
    spec: ModelDeploymentSpec, ev: Evaluation, unknown_policy: UnknownPolicy, *, dryrun: bool = False
) -> AdmissionOutcome:
    """Admit or deny an evaluated spec; the webhook and ``fitgate check`` both decide here.

    DoesNotFit is denied when policy.onMisfit is Deny or Reject (else admitted with a warning), except an
    Unschedulable that only GPUs held now by other pods cause (warned: the pods would wait); settings the
    model cannot take are denied as invalid; Unknown follows the spec's policy.onUnknown, else
    ``unknown_policy`` (the operator's default); Tight is warned. A provisional verdict (facts known
    without the Hub while it is slow) is decided like any other: its first warning says where it came from.
    """
    warnings = list(ev.warnings)
    if dryrun:
        warnings.insert(0, f"fitgate (dry run): verdict {ev.verdict.value}: {ev.message}")
    if ev.verdict is Verdict.DOES_NOT_FIT:
        text = f"fitgate: {spec.model.name} does not fit: {ev.message}"
        # GPUs held now by other pods: a rollout waits for them as the scheduler would, so it is warned, not denied
        held = ev.best is not None and ev.best.in_use
        # Only the declared workload is beyond the KV pool: the engine starts and serves it, the requests the pool
        # cannot hold wait for blocks (V1's scheduler stops admitting waiting requests when ``allocate_slots``
        # returns None and preempts running ones for a decode's block: v1/core/sched/scheduler.py 0.11.0 L255-292,
        # L471-483). Slower than declared, not a failed start: warned, never denied.
        queued = ev.reason is ReasonCode.WORKLOAD_EXCEEDS_KV_CACHE
        if spec.policy.on_misfit != "Warn" and not held and not queued:  # Deny, or Reject (its older name)
            return AdmissionOutcome(False, text, tuple(warnings), "denied")
        if queued:
            text += (
                "; vLLM starts and serves it, the requests the KV pool cannot hold wait for blocks or are "
                "preempted (warned, not denied: the deployment runs, slower than the declared workload needs)"
            )
        return AdmissionOutcome(True, text, (text, *warnings), "warned")
    if ev.verdict is Verdict.UNKNOWN:
        if ev.reason is ReasonCode.INVALID_SETTINGS:  # a setting the model cannot take (TP not dividing its heads...)
            text = f"fitgate: invalid ModelDeployment: {ev.message}"
            return AdmissionOutcome(False, text, tuple(warnings), "denied", DENIED_INVALID)
        policy = spec.policy.on_unknown or unknown_policy
        if policy == "Deny":
            text = f"fitgate: cannot verify the fit ({ev.message}) and policy.onUnknown is Deny"
            return AdmissionOutcome(False, text, tuple(warnings), "denied")
        if policy == "Allow":
            return AdmissionOutcome(True, ev.message, (), "allowed")
        return AdmissionOutcome(True, ev.message, tuple(warnings), "warned")
    warned = ev.verdict is Verdict.TIGHT or bool(ev.no_node)  # no node of its GPU yet: admitted with the warning
    return AdmissionOutcome(True, ev.message, tuple(warnings), "warned" if warned else "allowed")
