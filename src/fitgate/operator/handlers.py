"""kopf handlers: parse, call :mod:`fitgate.operator.logic`, patch. Nothing else lives here.

kopf decorators return the functions unchanged, so tests call these directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import time
from typing import Any

import kopf

from fitgate.checkpoints import CheckpointError
from fitgate.checkpoints.catalog import BUILT_IN, catalog_entries, user_catalog_dirs
from fitgate.checkpoints.hub import HubSettings
from fitgate.operator import workload_handlers  # noqa: F401 - registers the vLLM workload webhook
from fitgate.operator.api import GROUP, PLURAL, VERSION, SpecError, parse_spec
from fitgate.operator.config import OperatorConfig
from fitgate.operator.inventory import Inventory, NodeGPUs, node_gpus
from fitgate.operator.logic import admit, reconcile
from fitgate.operator.metrics import Metrics
from fitgate.operator.nodewatch import InventoryChanges, NodeWatch
from fitgate.operator.store import FactsStore
from fitgate.operator.webhook import GuardedWebhookServer

MD = (GROUP, VERSION, PLURAL)
FINALIZER = "fitgate.io/finalizer"
REPORTING_COMPONENT = "fitgate"
_TIMER_GAP_S = 1.0  # between two resync waits (each waits for a node change or the resync period)
REEVALUATE_ANNOTATION = "fitgate.io/reevaluate"


def _config(memo: Any) -> OperatorConfig:
    config = getattr(memo, "config", None)
    return config if isinstance(config, OperatorConfig) else OperatorConfig.from_env()


@kopf.on.startup()
async def operator_startup(*, settings: kopf.OperatorSettings, memo: Any, logger: kopf.Logger, **_: Any) -> None:
    """Configure kopf and start the metrics server.

    * Progress and the last-handled spec are kept in ``fitgate.io/*`` annotations, never in status
      (the structural schema would prune kopf's fields).
    * Only warnings are posted as kopf's own Events; fitgate posts its verdict Events itself. All are
      reported by ``fitgate`` (the "From" column of ``kubectl describe``) and this pod, not by "kopf".
    * The webhook server uses the certificate files the deployment mounts (reloaded when they change),
      and answers malformed AdmissionReview bodies with 400 (:mod:`fitgate.operator.webhook`).
    """
    config = _config(memo)
    memo.config = config
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
    if config.webhook_port:
        settings.admission.server = GuardedWebhookServer(
            addr=config.webhook_addr,
            port=config.webhook_port,
            host=config.webhook_host,
            certfile=config.webhook_cert,
            pkeyfile=config.webhook_key,
            cafile=config.webhook_ca,
        )
        if config.webhook_managed:
            settings.admission.managed = config.webhook_managed
    metrics = Metrics()
    await metrics.serve(config.metrics_addr, config.metrics_port)
    memo.metrics = metrics
    memo.store = FactsStore(model_roots=config.model_roots, offline=HubSettings.from_env().offline)
    memo.shared = Shared()
    nodewatch = NodeWatch()
    nodewatch.start()
    memo.nodewatch = nodewatch
    # Ready (and so behind the webhook Service) once this replica has listed the nodes itself.
    memo.shared.ready_task = asyncio.create_task(_ready_when_synced(nodewatch, metrics))
    memo.shared.follow_task = asyncio.create_task(memo.shared.changes.follow(nodewatch))
    logger.info("fitgate operator started: webhook port %s, metrics port %s", config.webhook_port, config.metrics_port)
    try:  # a broken user catalog is named once here; each affected ModelDeployment says so too
        users = [e for e in catalog_entries() if e.location != BUILT_IN]
        if user_catalog_dirs():
            logger.info("user catalog %s: %d entries", os.pathsep.join(user_catalog_dirs()), len(users))
    except CheckpointError as exc:
        logger.error("user catalog not usable: %s", exc)
    # Everything loaded so far (kopf, pydantic schemas, the catalogs) lives as long as the process: move
    # it out of the collector's reach so that full collections, which pause admission answers, stay short.
    gc.collect()
    gc.freeze()


async def _ready_when_synced(nodewatch: NodeWatch, metrics: Metrics) -> None:
    while not nodewatch.synced.is_set():
        await asyncio.sleep(0.1)
    metrics.ready = True


@kopf.on.cleanup()
async def operator_cleanup(*, memo: Any, **_: Any) -> None:
    """Stop the node watch, the checkpoint resolutions (without waiting for a hung Hub) and the metrics server."""
    store = getattr(memo, "store", None)
    if isinstance(store, FactsStore):
        store.close()
    shared = getattr(memo, "shared", None)
    if isinstance(shared, Shared) and shared.follow_task is not None:
        shared.follow_task.cancel()
    nodewatch = getattr(memo, "nodewatch", None)
    if isinstance(nodewatch, NodeWatch):
        nodewatch.stop()
    metrics = getattr(memo, "metrics", None)
    if isinstance(metrics, Metrics):
        metrics.ready = False
        await metrics.close()


@kopf.index("", "v1", "nodes")
def gpu_nodes(
    *, name: str, body: kopf.Body, logger: kopf.Logger, memo: Any = None, **_: Any
) -> dict[str, list[NodeGPUs]] | None:
    """Index: node name -> its GPUs. A node whose labels cannot be read is logged and left out."""
    if memo is not None and isinstance(getattr(memo, "shared", None), Shared):
        memo.shared.inventory_version += 1  # any node event may change the inventory
    gpus = node_gpus(body, logger)
    return {name: gpus} if gpus else None


class Shared:
    """State shared by all handler calls.

    kopf gives each object (and each admission review) a shallow copy of the operator's memo, so
    anything mutable must live in one object that the copies share.
    """

    def __init__(self) -> None:
        self.inventory_version = 0
        self.inventory: Inventory | None = None
        self.inventory_stamp: tuple[int, int] | None = None
        self.ready_task: asyncio.Task[None] | None = None
        self.follow_task: asyncio.Task[None] | None = None
        self.changes = InventoryChanges()


def _inventory(index: kopf.Index[str, list[NodeGPUs]] | None, memo: Any) -> Inventory:
    """The GPU inventory the evaluation uses.

    This replica's own node watch once it has listed the nodes (kopf peering pauses the kopf index on
    standby replicas), else kopf's index, rebuilt only after a node event.
    """
    nodewatch = getattr(memo, "nodewatch", None)
    if isinstance(nodewatch, NodeWatch) and nodewatch.synced.is_set():
        return nodewatch.inventory()
    stores = list((index or {}).values())
    shared = getattr(memo, "shared", None)
    if not isinstance(shared, Shared):
        return Inventory(g for store in stores for gpus in store for g in gpus)
    stamp = (shared.inventory_version, len(stores))
    if shared.inventory is not None and shared.inventory_stamp == stamp:
        return shared.inventory
    inventory = Inventory(g for store in stores for gpus in store for g in gpus)
    shared.inventory, shared.inventory_stamp = inventory, stamp
    return inventory


async def _reconcile(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: Any,
    gpu_nodes: kopf.Index[str, list[NodeGPUs]] | None = None,
    logger: kopf.Logger,
) -> float | None:
    started = time.perf_counter()
    metrics: Metrics = memo.metrics
    outcome = await reconcile(
        raw_spec=spec,
        old_status=dict(status),
        generation=int(body.meta.get("generation") or 0),
        namespace=body.meta.namespace or "",
        name=body.meta.name or "",
        nodes=_inventory(gpu_nodes, memo),
        store=memo.store,
        metrics=metrics,
        config=memo.config,
    )
    if outcome.status is not None:
        patch.status.update(outcome.status)
    current = body.meta.annotations
    for key, value in outcome.annotations.items():
        if current.get(key) != value:
            patch.metadata.annotations[key] = value
    if outcome.event is not None:
        kind, reason, message = outcome.event
        kopf.event(body, type=kind, reason=reason, message=message)
        logger.info("verdict %s: %s", reason, message)
    for kind, count in memo.store.errors.items():
        metrics.resolution_errors.labels(kind).inc(count)
    memo.store.errors.clear()
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
    memo: Any,
    gpu_nodes: kopf.Index[str, list[NodeGPUs]] | None = None,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Evaluate a created, changed or resumed ModelDeployment and write its status."""
    retry = await _reconcile(
        body=body, spec=spec, status=status, patch=patch, memo=memo, gpu_nodes=gpu_nodes, logger=logger
    )
    if retry is not None:
        raise kopf.TemporaryError("checkpoint resolution pending or transiently failing", delay=retry)


@kopf.timer(*MD, interval=_TIMER_GAP_S)
async def modeldeployment_resync(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: Any,
    gpu_nodes: kopf.Index[str, list[NodeGPUs]] | None = None,
    logger: kopf.Logger,
    stopped: Any = None,
    **_: Any,
) -> None:
    """Re-evaluate when a node change affects this deployment's GPU pools, and every resync period.

    The timer's call waits (in the event loop, no thread) for an inventory change whose pools for this
    placement differ from those the status was planned on, or for ``FITGATE_RESYNC_SECONDS``; kopf
    applies the patch when it returns and calls it again ``_TIMER_GAP_S`` later.
    """
    shared = getattr(memo, "shared", None)
    if isinstance(shared, Shared):
        waiting = asyncio.ensure_future(_until_affected(shared, spec, status, gpu_nodes, memo))
        if not await _unless_stopped(waiting, stopped):
            return
    work = _reconcile(body=body, spec=spec, status=status, patch=patch, memo=memo, gpu_nodes=gpu_nodes, logger=logger)
    await _unless_stopped(asyncio.ensure_future(work), stopped)


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


async def _until_affected(shared: Shared, spec: kopf.Spec, status: kopf.Status, gpu_nodes: Any, memo: Any) -> None:
    """Return after an inventory change that affects this deployment, or after the resync period."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _config(memo).resync_s
    seen = shared.changes.version
    while (left := deadline - loop.time()) > 0:
        version = await shared.changes.wait(seen, left)
        if version != seen and _affected(spec, status, _inventory(gpu_nodes, memo)):
            return
        seen = version


def _affected(spec: kopf.Spec, status: kopf.Status, inventory: Inventory) -> bool:
    """Whether the pools this spec may land on are not the ones its status was planned on."""
    try:
        placement = parse_spec(spec).placement
    except SpecError:
        return False  # nothing to plan whatever the nodes
    _, fingerprint = inventory.select(placement.gpu_product, placement.node_selector)
    return bool(fingerprint != status.get("inventoryHash"))


@kopf.on.field(*MD, field=("metadata", "annotations", REEVALUATE_ANNOTATION))
async def modeldeployment_reevaluate(
    *,
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: Any,
    gpu_nodes: kopf.Index[str, list[NodeGPUs]] | None = None,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Re-evaluate now when the ``fitgate.io/reevaluate`` annotation is set or changed.

    ``kubectl annotate mdep NAME fitgate.io/reevaluate=$(date +%s) --overwrite`` resolves the checkpoint
    again (a new catalog entry, a new Hub revision) and plans against the current GPU nodes.
    """
    with contextlib.suppress(SpecError):
        memo.store.forget(parse_spec(spec).model)
    await _reconcile(body=body, spec=spec, status=status, patch=patch, memo=memo, gpu_nodes=gpu_nodes, logger=logger)


@kopf.on.delete(*MD, optional=True)
def modeldeployment_delete(*, namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """Forget a deleted deployment's metrics (optional: never blocks deletion with a finalizer)."""
    metrics = getattr(memo, "metrics", None)
    if isinstance(metrics, Metrics):
        metrics.forget(namespace or "", name or "")


@kopf.on.validate(*MD, id="fit", operations=["CREATE", "UPDATE"])
async def modeldeployment_validate(
    *,
    spec: kopf.Spec,
    dryrun: bool,
    warnings: list[str],
    memo: Any,
    gpu_nodes: kopf.Index[str, list[NodeGPUs]] | None = None,
    old: kopf.Body | None = None,
    **_: Any,
) -> None:
    """Admission: deny what cannot fit, warn on Tight and Unknown; same evaluation as reconcile.

    Updates that leave the spec alone (annotations, labels) are always admitted: a deployment that
    stopped fitting because a node pool went away must still be annotatable and deletable.
    """
    started = time.perf_counter()
    metrics: Metrics = memo.metrics
    if old is not None and dict(old.get("spec") or {}) == dict(spec):
        metrics.admission.labels("unchanged").inc()
        return
    outcome = await admit(
        raw_spec=spec, nodes=_inventory(gpu_nodes, memo), store=memo.store, config=memo.config, dryrun=bool(dryrun)
    )
    warnings.extend(_short(w) for w in outcome.warnings)
    metrics.admission.labels(outcome.result).inc()
    metrics.admission_seconds.observe(time.perf_counter() - started)
    if not outcome.allowed:
        raise kopf.AdmissionError(outcome.message, code=outcome.code)


def _short(text: str, limit: int = 1200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
