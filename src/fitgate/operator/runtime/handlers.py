"""kopf handlers: parse, call :mod:`fitgate.operator.decision.logic`, patch. Nothing else lives here.

kopf decorators return the functions unchanged, so tests call these directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import math
import os
import socket
import ssl
import time
import zlib
from collections.abc import Callable
from typing import Any, cast

import kopf

from fitgate.checkpoints import CheckpointError
from fitgate.checkpoints.catalog import BUILT_IN, catalog_entries
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.base.metrics_auth import MetricsAuth, kubernetes_review
from fitgate.operator.decision.logic import forget, reconcile
from fitgate.operator.decision.poolplan import select_pools
from fitgate.operator.decision.pricing import OperatorPrices, operator_prices
from fitgate.operator.decision.status import status_patch
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.gpus.cel import SelectorUnsupportedError
from fitgate.operator.gpus.dra import ClaimError
from fitgate.operator.gpus.inventory import Inventory
from fitgate.operator.observation.observe import CONDITION_TYPES as OBSERVER_CONDITIONS
from fitgate.operator.observation.observe import Observer, drop_conditions, kubernetes_reader, put_conditions
from fitgate.operator.observation.scrape import ScrapeLimits
from fitgate.operator.runtime import finalizers, workload_handlers
from fitgate.operator.runtime.admission import DECISIONS, answer_fit_review, fit_decision, short
from fitgate.operator.runtime.configmaps import ConfigMaps
from fitgate.operator.runtime.managed import remove_empty_async
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.runtime.shutdown import configure as bound_shutdown
from fitgate.operator.runtime.webhook import GuardedWebhookServer
from fitgate.operator.schema.api import GROUP, PLURAL, VERSION, SpecError, parse_spec
from fitgate.operator.watches.nodewatch import NodeWatch
from fitgate.operator.watches.resourcewatch import Sources
from fitgate.settings import OperatorConfig, Settings
from fitgate.workloads.bounds import configure as configure_budgets

MD = (GROUP, VERSION, PLURAL)
FINALIZER = finalizers.FINALIZER  # released by finalizers.py when the CRD is deleted (issue 22)
REPORTING_COMPONENT = "fitgate"
_TIMER_GAP_S = 1.0  # between two resync waits (each waits for a node change or the resync period)
REEVALUATE_ANNOTATION = "fitgate.io/reevaluate"


async def operator_startup(
    *,
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    logger: kopf.Logger,
    every: Settings,
    arm_shutdown: Callable[[], None] | None = None,
    **_: Any,
) -> None:
    """Configure kopf, start the metrics server and the node watch, and put the :class:`OperatorMemo` in kopf's memo.

    Registered by :func:`register` with ``every``, the settings ``fitgate operator`` read (flags applied).

    * Progress and the last-handled spec are kept in ``fitgate.io/*`` annotations, never in status
      (the structural schema would prune kopf's fields).
    * Only warnings are posted as kopf's own Events; fitgate posts its verdict Events itself. All are
      reported by ``fitgate`` (the "From" column of ``kubectl describe``) and this pod, not by "kopf".
    * The webhook server uses the certificate files the deployment mounts (reloaded when they change),
      and answers malformed AdmissionReview bodies with 400 (:mod:`fitgate.operator.runtime.webhook`).
    * Then the vLLM workload audit, if configured (:func:`workload_handlers.start_audit`).
    """
    config = every.operator
    configure_budgets(every.budgets)  # the parse budgets of user input (issue 22)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="fitgate.io")
    # The resync timer makes kopf put a finalizer on each ModelDeployment (to stop the timer cleanly on
    # deletion); name it after fitgate so users know whose it is.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="fitgate.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = REPORTING_COMPONENT
    settings.posting.reporting_instance = os.environ.get("HOSTNAME") or socket.gethostname()
    settings.execution.max_workers = 8
    # After a kill -9 the standby resumes when the dead replica's keep-alive expires: kopf's default
    # lifetime (60 s) kept statuses unwritten for ~58 s. Keep-alives are then renewed every 1-5 s; not logged.
    settings.peering.lifetime = config.peering_lifetime_s
    settings.peering.stealth = True
    bound_shutdown(settings, config.shutdown_s)  # the exit never outlasts the pod's grace period silently
    if config.webhook_port:
        settings.admission.server = GuardedWebhookServer(
            addr=config.webhook_addr,
            port=config.webhook_port,
            host=config.webhook_host,
            certfile=config.webhook_cert,
            pkeyfile=config.webhook_key,
            cafile=config.webhook_ca,
            # issue 22: with a client CA, only a client holding a certificate it signed (the API server) is served
            verify_mode=ssl.CERT_REQUIRED if config.webhook_client_ca else None,
            verify_cafile=config.webhook_client_ca,
        )
        if config.webhook_managed:
            settings.admission.managed = config.webhook_managed
    metrics = Metrics()
    auth = MetricsAuth(kubernetes_review()) if config.metrics_auth else None  # issue 22
    await metrics.serve(config.metrics_addr, config.metrics_port, auth)
    nodewatch = NodeWatch(sources=Sources())  # nodes, and the DRA objects and GPU pods (resourcewatch.py)
    nodewatch.start()
    state = OperatorMemo(
        settings=every,
        metrics=metrics,
        store=FactsStore(model_roots=config.model_roots, offline=every.hub.offline, settings=every),
        observer=Observer(
            *kubernetes_reader(),
            limits=ScrapeLimits(config.scrape_timeout_s, config.scrape_max_bytes),
            prices=_prices(config, logger),
        ),
        nodewatch=nodewatch,
        configmaps=ConfigMaps() if config.workload_webhook and config.workload_configmaps else None,
        arm_shutdown=arm_shutdown,
    )
    state.attach(memo)
    # before readiness: a hung Hub's first review must find the catalog loaded (see FactsStore.warm)
    await state.store.warm()
    if isinstance(settings.admission.server, GuardedWebhookServer):
        # issue 23: ModelDeployment reviews answered by fitgate's own lean path (kopf's engine alone cost 2x a bare
        # aiohttp webhook); anything it does not recognise still goes to kopf's engine and the handler below
        settings.admission.server.direct["fit"] = functools.partial(answer_fit_review, state)
    # Ready (and so behind the webhook Service) once this replica has listed the nodes itself and its
    # webhook server accepts connections.
    webhook = (config.webhook_addr, config.webhook_port) if config.webhook_port else None
    nodewatch.tasks.append(asyncio.create_task(_ready_when_synced(nodewatch, metrics, webhook)))
    nodewatch.tasks.append(asyncio.create_task(nodewatch.changes.follow(nodewatch)))
    workload_handlers.start_audit(state, logger)
    logger.info("fitgate operator started: webhook port %s, metrics port %s", config.webhook_port, config.metrics_port)
    try:  # a broken user catalog is named once here; each affected ModelDeployment says so too
        users = [e for e in catalog_entries() if e.location != BUILT_IN]
        if every.catalog_path:
            logger.info("user catalog %s: %d entries", os.pathsep.join(every.catalog_path), len(users))
    except CheckpointError as exc:
        logger.error("user catalog not usable: %s", exc)
    # Everything loaded so far (kopf, pydantic schemas, the catalogs) lives as long as the process: move
    # it out of the collector's reach so that full collections, which pause admission answers, stay short.
    gc.collect()
    gc.freeze()


def _prices(config: OperatorConfig, logger: kopf.Logger) -> OperatorPrices:
    """The operator's prices (pricing.py), logged once: which source prices what, and any value ignored."""
    prices = operator_prices(config)
    logger.info(prices.summary())
    for warning in prices.warnings:  # a bad ConfigMap value: said with its key, never a crash loop (hunt91 G6)
        logger.warning(warning)
    return prices


async def _ready_when_synced(nodewatch: NodeWatch, metrics: Metrics, webhook: tuple[str, int] | None = None) -> None:
    """Set ``/readyz`` once the inventory is listed and, with a webhook, once it accepts connections.

    kopf starts its webhook server after the start-up handlers: a replica marked ready before that was sent
    reviews it refused (connection refused, which ``failurePolicy: Fail`` turns into a denied request).
    """
    while not nodewatch.synced.is_set() or (nodewatch.sources is not None and not nodewatch.sources.synced):
        await asyncio.sleep(0.1)
    while webhook is not None and not await _accepts(*webhook):
        await asyncio.sleep(0.1)
    metrics.ready = True


async def _accepts(addr: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``addr:port`` (a wildcard address: on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(addr, addr)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


@kopf.on.cleanup()
async def operator_cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    """Stop the audit, the node watch, the checkpoint resolutions (not waiting for a hung Hub), the metrics server.

    Out of cluster (``--webhook-managed``), also delete the webhook configurations kopf created and emptied
    (:mod:`fitgate.operator.runtime.managed`). From here on the process has ``FITGATE_SHUTDOWN_SECONDS`` to end
    (:mod:`fitgate.operator.runtime.shutdown`; ``arm_shutdown`` is given by ``fitgate operator``, not in tests).
    Nothing to stop when start-up failed before it built the state.
    """
    state = OperatorMemo.find(memo)
    if state is None:
        return
    if state.arm_shutdown is not None:
        state.arm_shutdown()
    for task in state.tasks:
        task.cancel()
    state.store.close()
    state.nodewatch.stop()
    await state.observer.close()
    state.metrics.ready = False
    await state.metrics.close()
    config = state.config
    if config.webhook_port and config.webhook_managed:
        for removed in await remove_empty_async(config.webhook_managed):
            logging.getLogger("fitgate").info("removed the empty webhook configuration %s", removed)


def register(registry: kopf.OperatorRegistry, every: Settings, arm_shutdown: Callable[[], None] | None = None) -> None:
    """Register what depends on the settings, before ``kopf.run`` (called once per process by ``run_operator``).

    The start-up handler, given ``every``, and the vLLM workload webhook's paths when ``every`` asks for them
    (:func:`workload_handlers.register`): decided from the flag-aware settings, not from the environment at
    import, so ``--webhook-managed`` wins over ``FITGATE_WORKLOAD_WEBHOOK=1`` (``fitgate.settings``: flags win).
    The other handlers are registered by their decorators (kopf's default registry) when this module is imported.
    """

    async def startup(**kwargs: Any) -> None:
        await operator_startup(every=every, arm_shutdown=arm_shutdown, **kwargs)

    kopf.on.startup(id="operator_startup", registry=registry)(startup)
    workload_handlers.register(registry, every.operator)


async def _reconcile(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: kopf.Logger,
) -> float | None:
    started = time.perf_counter()
    state = OperatorMemo.of(memo)
    metrics = state.metrics
    outcome = await reconcile(
        raw_spec=spec,
        old_status=dict(status),
        generation=int(body.meta.get("generation") or 0),
        namespace=body.meta.namespace or "",
        name=body.meta.name or "",
        nodes=state.inventory(),
        store=state.store,
        metrics=metrics,
        config=state.config,
    )
    if outcome.status is not None:
        patch.status.update(status_patch(outcome.status, status))
    current = body.meta.annotations
    for key, value in outcome.annotations.items():
        if current.get(key) != value:
            patch.metadata.annotations[key] = value
    generation = int(body.meta.get("generation") or 0)
    if outcome.event is not None and state.events.first(body.meta.uid or "", generation, outcome.event):
        kind, reason, message = outcome.event
        kopf.event(body, type=kind, reason=reason, message=message)
    if outcome.status is not None or outcome.event is not None:  # a decision written: one line says which
        ev = outcome.evaluation
        DECISIONS.info(
            "[%s/%s] verdict %s (%s): %s",
            body.meta.namespace or "",
            body.meta.name or "",
            ev.verdict.value,
            ev.reason,
            short(ev.message, 600),
        )
    for kind, count in state.store.errors.items():
        metrics.resolution_errors.labels(kind).inc(count)
    state.store.errors.clear()
    metrics.reconcile_seconds.observe(time.perf_counter() - started)
    return outcome.retry_in_s


@kopf.on.resume(*MD)
@kopf.on.create(*MD)
@kopf.on.update(*MD, field="spec")
async def modeldeployment_reconcile(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Evaluate a created, changed or resumed ModelDeployment and write its status."""
    retry = await _reconcile(body=body, spec=spec, status=status, patch=patch, memo=memo, logger=logger)
    if retry is not None:
        raise kopf.TemporaryError("checkpoint resolution pending or transiently failing", delay=retry)


@kopf.timer(*MD, interval=_TIMER_GAP_S)
async def modeldeployment_resync(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: kopf.Logger,
    stopped: Any = None,
    **_: Any,
) -> None:
    """Re-evaluate when a node change affects this deployment's GPU pools, and every resync period.

    The timer's call waits (in the event loop, no thread) for an inventory change whose pools for this
    placement differ from those the status was planned on, or for this object's next resync slot
    (:func:`resync_slot`: once every ``FITGATE_RESYNC_SECONDS``, at its own phase of the period). A
    reconcile with something to write returns, and kopf applies the patch and calls it again ``_TIMER_GAP_S``
    later; one with nothing to write (an unchanged object, answered from its last reconcile) waits for the
    next slot in the same call: kopf's round of a timer call (its handler execution, outcome and patch
    bookkeeping) cost several times fitgate's own check, for every object every period (issue 23). ``body``,
    ``spec`` and ``status`` are kopf's live views of the object (updated by its watch events) all along.
    """
    state = OperatorMemo.of(memo)
    resync_s = state.config.resync_s
    namespace = body.meta.namespace or ""
    key = f"{namespace}/{body.meta.name or ''}"
    while True:
        deadline = resync_slot(asyncio.get_running_loop().time(), resync_s, key)
        waiting = asyncio.ensure_future(_until_affected(state.nodewatch, spec, status, deadline, namespace))
        if not await _unless_stopped(waiting, stopped):
            return
        work = _reconcile(body=body, spec=spec, status=status, patch=patch, memo=memo, logger=logger)
        if not await _unless_stopped(asyncio.ensure_future(work), stopped) or patch:
            return


async def _unless_stopped(work: asyncio.Future[Any], stopped: Any) -> bool:
    """Await ``work`` unless the timer is stopped first (then cancel it and return False).

    Deleted, or the operator is exiting: never hold up a finalizer or a shutdown (a reconcile may wait
    for a checkpoint resolution for up to ``FITGATE_RECONCILE_RESOLVE_SECONDS``; kopf leaves timers that
    do not return in time orphaned and cancels them only 5 s later).
    """
    stopping = asyncio.ensure_future(_stopped(stopped))
    try:
        done, _pending = await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when kopf cancels the timer itself
        stopping.cancel()
        if not work.done():
            work.cancel()
    if work not in done:
        return False
    work.result()  # its exception, if any, is kopf's to see
    return True


async def _stopped(stopped: Any) -> None:
    if stopped is None:  # called directly (tests): never stopped
        await asyncio.Event().wait()
    await stopped.wait()


def resync_slot(now: float, period_s: float, key: str) -> float:
    """The first time after ``now`` (event-loop time) at ``key``'s own phase of the resync period.

    Every object resyncs once a period, but at a phase of its own (from a CRC of namespace/name, spread evenly
    over the period) rather than one period after its timer started: an operator (re)started with thousands of
    ModelDeployments started all their timers at once, and every round then woke them in one burst that held
    the event loop while admission reviews waited (issue 23). The wait is never longer than one period.
    """
    phase = zlib.crc32(key.encode()) / 2**32 * period_s
    return phase + (math.floor((now - phase) / period_s) + 1) * period_s


async def _until_affected(
    nodewatch: NodeWatch, spec: kopf.Spec, status: kopf.Status, deadline: float, namespace: str = ""
) -> None:
    """Return after an inventory change that affects this deployment, or at ``deadline`` (event-loop time)."""
    loop = asyncio.get_running_loop()
    seen = nodewatch.changes.version
    while (left := deadline - loop.time()) > 0:
        version = await nodewatch.changes.wait(seen, left)
        if version != seen and _affected(spec, status, nodewatch.inventory(), namespace):
            return
        seen = version


def _affected(spec: kopf.Spec, status: kopf.Status, inventory: Inventory, namespace: str = "") -> bool:
    """Whether the pools this spec may land on are not the ones its status was planned on.

    A ResourceClaimTemplate that cannot be read now (or is read again) counts as a change.
    """
    try:
        parsed = parse_spec(spec)
    except SpecError:
        return False  # nothing to plan whatever the nodes
    try:
        _, fingerprint, _ = select_pools(parsed, inventory, namespace)
    except (ClaimError, SelectorUnsupportedError):
        fingerprint = ""
    return bool(fingerprint != status.get("inventoryHash"))


@kopf.on.field(*MD, field=("metadata", "annotations", REEVALUATE_ANNOTATION))
async def modeldeployment_reevaluate(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Re-evaluate now when the ``fitgate.io/reevaluate`` annotation is set or changed.

    ``kubectl annotate mdep NAME fitgate.io/reevaluate=$(date +%s) --overwrite`` resolves the checkpoint
    again (a new catalog entry, a new Hub revision) and plans against the current GPU nodes.
    """
    with contextlib.suppress(SpecError):
        OperatorMemo.of(memo).store.forget(parse_spec(spec).model)
    await _reconcile(body=body, spec=spec, status=status, patch=patch, memo=memo, logger=logger)


@kopf.on.delete(*MD, optional=True)
def modeldeployment_delete(*, namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    """Forget a deleted deployment's metrics and last evaluation (optional: never blocks deletion with a finalizer)."""
    forget(namespace or "", name or "")
    state = OperatorMemo.of(memo)
    state.metrics.forget(namespace or "", name or "")
    state.observer.forget(namespace or "", name or "")


def _observed(spec: kopf.Spec, status: kopf.Status, **_: Any) -> bool:
    """spec.observe is set, or the observer's status is left over, to be cleared.

    A reconcile racing the removal of spec.observe may write the observer's conditions back from its
    snapshot: the timer runs until they are gone.
    """
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    mine = any(c.get("type") in OBSERVER_CONDITIONS for c in conditions)
    return bool(spec.get("observe") or status.get("observed") or mine)


@kopf.timer(*MD, interval=_TIMER_GAP_S, when=_observed)
async def modeldeployment_observe(
    *, body: kopf.Body, spec: kopf.Spec, status: kopf.Status, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """Read the serving pods (spec.observe) when due: status.observed, PredictionVerified, AtCapacity.

    Its own timer, so admission and reconcile never wait for a pod; each read is bounded
    (:mod:`fitgate.operator.observation.observe`).
    """
    state = OperatorMemo.of(memo)
    observer, metrics = state.observer, state.metrics
    namespace, name = body.meta.namespace or "", body.meta.name or ""
    try:
        parsed = parse_spec(spec)
    except SpecError:
        return
    if parsed.observe is None:  # spec.observe removed: take back what the observer wrote
        observer.forget(namespace, name)
        metrics.observed(namespace, name, None, None, None, None, None, None)
        patch.status["observed"] = None
        patch.fns.append(lambda fresh: drop_conditions(cast(dict[str, Any], fresh)))
        return
    if not observer.due(namespace, name, parsed):
        return
    outcome = await observer.round(namespace, name, parsed, dict(status), int(body.meta.get("generation") or 0))
    patch.status["observed"] = outcome.status["observed"]
    mine = outcome.status["conditions"]
    # Not the whole list (reconcile owns Ready and Fits): replaced by type on the freshest body.
    patch.fns.append(lambda fresh: put_conditions(cast(dict[str, Any], fresh), mine))
    obs = outcome.observation
    tokens = obs.observed_blocks * obs.block_size if obs.observed_blocks and obs.block_size else None
    metrics.observed(
        namespace,
        name,
        obs.observed_blocks,
        tokens,
        obs.blocks_error_ratio,
        obs.at_capacity,
        obs.peak_kv_usage,
        obs.preemptions_per_minute,
    )
    metrics.scrapes.labels("ok").inc(obs.pods)
    metrics.scrapes.labels("error").inc(outcome.status["observed"]["podsFailed"])
    if outcome.event is not None:
        kind, reason, message = outcome.event
        kopf.event(body, type=kind, reason=reason, message=message)


@kopf.on.validate(*MD, id="fit", operations=["CREATE", "UPDATE"])
async def modeldeployment_validate(
    *,
    spec: kopf.Spec,
    dryrun: bool,
    warnings: list[str],
    memo: kopf.Memo,
    old: kopf.Body | None = None,
    namespace: str | None = None,
    name: str | None = None,
    **_: Any,
) -> None:
    """Admission: deny what cannot fit, warn on Tight and Unknown; same evaluation as reconcile.

    Updates that leave the spec alone (annotations, labels) are always admitted: a deployment that
    stopped fitting because a node pool went away must still be annotatable and deletable.
    """
    old_spec = dict(old.get("spec") or {}) if old is not None else None
    outcome = await fit_decision(OperatorMemo.of(memo), spec, old_spec, bool(dryrun), namespace, name)
    if outcome is None:
        return
    warnings.extend(short(w) for w in outcome.warnings)
    if not outcome.allowed:
        raise kopf.AdmissionError(outcome.message, code=outcome.code)
