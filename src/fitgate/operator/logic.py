"""What reconcile and admission decide, as plain async functions (no kopf): the handlers only call these.

Both go through :func:`fitgate.operator.evaluate.evaluate`, so the webhook and the status always agree.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.operator.api import ModelDeploymentSpec, SpecError, parse_spec
from fitgate.operator.config import OperatorConfig, UnknownPolicy
from fitgate.operator.evaluate import Evaluation, evaluate, same_outcome, status_of, unknown
from fitgate.operator.inventory import Inventory, NodeGPUs
from fitgate.operator.metrics import Metrics
from fitgate.operator.store import FactsStore, Known
from fitgate.sizing import ReasonCode, SizingError, Verdict, vllm_args_text
from fitgate.sizing.cost import GpuPrices, parse_gpu_prices

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
        self.size = size
        self._entries: dict[str, tuple[object, object, Evaluation]] = {}

    def get(self, key: str, inventory: object, known: object) -> Evaluation | None:
        """The cached evaluation if it was made with these very inventory and facts objects."""
        hit = self._entries.get(key)
        if hit is None or hit[0] is not inventory or hit[1] is not known:
            return None
        return hit[2]

    def put(self, key: str, inventory: object, known: object, evaluation: Evaluation) -> None:
        """Remember an evaluation, dropping the oldest when full."""
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (inventory, known, evaluation)


_CACHE = EvaluationCache()


def prices_for(spec: ModelDeploymentSpec, config: OperatorConfig | None) -> GpuPrices | None:
    """The GPU prices that choose among pools: the spec's own price, else the operator's (FITGATE_GPU_HOUR_PRICES)."""
    if spec.economics is not None and spec.economics.gpu_hour_price_usd is not None:
        return GpuPrices(spec.economics.gpu_hour_price_usd)
    text = config.gpu_hour_prices if config is not None else ""
    if not text:
        return None
    try:
        return _parsed_prices(text)
    except SizingError:  # checked at start-up (cli.py); never fail an evaluation on it
        return None


@functools.lru_cache(maxsize=4)
def _parsed_prices(text: str) -> GpuPrices:
    return parse_gpu_prices(text)


async def _evaluate(
    spec: ModelDeploymentSpec,
    nodes: Inventory | Iterable[NodeGPUs],
    store: FactsStore,
    timeout_s: float,
    blocking: bool,
    namespace: str = "",
    prices: GpuPrices | None = None,
) -> tuple[Evaluation, bool]:
    """Evaluate with whatever the store knows; returns (evaluation, still_resolving_or_transient).

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
            ev, _ = _evaluate_known(spec, nodes, fallback, namespace, prices)
            note = f"provisional verdict from {fallback.provisional}: resolving {spec.model.name} on the Hub {why}"
            first = f"fitgate: {note}"
            pending = ReasonCode.CHECKPOINT_RESOLVING if known is None else ReasonCode.CHECKPOINT_UNAVAILABLE
            ev = replace(ev, message=f"{ev.message} ({note})", warnings=(first, *ev.warnings))
            return replace(ev, provisional=(pending, note)), True
    if known is None:
        return unknown(ReasonCode.CHECKPOINT_RESOLVING, f"resolving {spec.model.name} is still in progress"), True
    return _evaluate_known(spec, nodes, known, namespace, prices)


def _evaluate_known(
    spec: ModelDeploymentSpec,
    nodes: Inventory | Iterable[NodeGPUs],
    known: Known,
    namespace: str = "",
    prices: GpuPrices | None = None,
) -> tuple[Evaluation, bool]:
    if known.model is None:
        reason = ReasonCode(known.reason) if known.reason else None
        reason = reason or (ReasonCode.CHECKPOINT_UNAVAILABLE if known.transient else ReasonCode.CHECKPOINT_INVALID)
        return unknown(reason, known.error or "the checkpoint could not be resolved"), known.transient
    inventory = nodes if isinstance(nodes, Inventory) else Inventory(nodes)
    key = f"{namespace}/{prices}/{spec.model_dump_json()}"
    cached = _CACHE.get(key, inventory, known)
    if cached is None:
        cached = evaluate(spec, known.model, inventory, facts=known.facts, namespace=namespace, prices=prices)
        _CACHE.put(key, inventory, known, cached)
    return cached, False


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
    """Evaluate a ModelDeployment and say what to write; idempotent (no patch when nothing changed)."""
    retry: float | None = None
    try:
        spec = parse_spec(raw_spec)
    except SpecError as exc:
        ev = unknown(ReasonCode.INVALID_SPEC, str(exc))
    else:
        ev, pending = await _evaluate(
            spec, nodes, store, config.reconcile_resolve_s, True, namespace, prices_for(spec, config)
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
    return ReconcileOutcome(new_status if changed else None, annotations, event, ev, retry)


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
        spec = parse_spec(raw_spec)
    except SpecError as exc:
        return AdmissionOutcome(False, f"fitgate: invalid ModelDeployment: {exc}", result="denied", code=DENIED_INVALID)
    ev, _ = await _evaluate(spec, nodes, store, config.admission_resolve_s, False, namespace, prices_for(spec, config))
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
        if spec.policy.on_misfit != "Warn" and not held:  # Deny, or Reject (its older name)
            return AdmissionOutcome(False, text, tuple(warnings), "denied")
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
