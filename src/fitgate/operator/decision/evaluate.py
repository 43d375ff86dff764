"""The one evaluation shared by the admission webhook, reconcile and ``fitgate check``.

``evaluate(spec, model, gpus)`` plans the deployment on every GPU pool it may land on and returns
the verdict (the best pool's: the deployment fits if some pool it may land on fits), the message with
the numbers and the smallest change that fits, admission warnings, and the status to write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fitgate.checkpoints.facts import ModelFacts
from fitgate.operator.decision.poolplan import (
    PoolResult,
    choose,
    placed,
    plan_on_pool,
    prospective_pools,
    select_pools,
    share_of,
    tolerations_of,
)
from fitgate.operator.gpus.cel import SelectorUnsupportedError
from fitgate.operator.gpus.cloudlabels import names_a_gpu
from fitgate.operator.gpus.dra import ClaimError
from fitgate.operator.gpus.inventory import GpuPool, Inventory, NodeGPUs
from fitgate.operator.gpus.placement import Toleration
from fitgate.operator.schema.api import (
    AlternativeStatus,
    Condition,
    EngineArgStatus,
    KVCacheStatus,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
    PerGPU,
    PoolStatus,
    ResolvedModel,
)
from fitgate.sizing import (
    EngineArg,
    ModelInput,
    Option,
    ReasonCode,
    ServingConfig,
    SizingError,
    Suggestion,
    Verdict,
    Workload,
    recommend,
    search,
    suggest,
)
from fitgate.sizing.cost import GpuPrices
from fitgate.sizing.units import GiB, fmt_gib


@dataclass(frozen=True)
class Evaluation:
    """Everything admission and reconcile need."""

    verdict: Verdict
    reason: ReasonCode
    message: str
    warnings: tuple[str, ...]
    pools: tuple[PoolResult, ...] = ()
    best: PoolResult | None = None
    suggestions: tuple[Suggestion, ...] = ()
    engine_args: tuple[EngineArg, ...] = ()
    inventory_hash: str = ""
    facts: ModelFacts | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    recommended_change: Suggestion | None = None  # the suggestion engine_args were taken from (a misfit)
    alternatives: tuple[tuple[GpuPool, Option], ...] = ()  # pools of the cluster that would hold a misfit
    # (reason, note) of a verdict from facts known without the Hub while its resolution is pending or failing
    provisional: tuple[ReasonCode, str] | None = None
    # Clusters (docs/clusters.md): why no node can take it now although the GPU is known (a pool that scales
    # from zero): the verdict is the fit on that GPU, the Schedulable condition False with reason NoNodeYet
    no_node: str = ""


#: Alternatives listed in status for a deployment that does not fit.
MAX_ALTERNATIVES = 3


def _short_of_gpus(pool: GpuPool, why: str) -> PoolResult:
    """A pool that cannot host one replica's GPUs at all (no plan on it)."""
    return PoolResult(pool, Verdict.DOES_NOT_FIT, None, ReasonCode.NOT_ENOUGH_GPUS_PER_NODE, f"{pool.product}: {why}")


def alternatives_of(
    model: ModelInput, inventory: Inventory, spec: ModelDeploymentSpec, workload: Workload | None
) -> tuple[tuple[GpuPool, Option], ...]:
    """The cheapest pools of the whole cluster that would hold ``spec`` (any GPU product or node selector).

    Each with its smallest TP x PP within one node, keeping the spec's KV dtype and quantization; nodes the
    spec's tolerations do not admit and cordoned ones are left out, and so are shared pools (time-slicing,
    MPS, HAMi: a share is not a GPU a TP plan can take). Pools with a node that has the GPUs free now come
    first, then fewest GPU-hours per 1M output tokens (the cluster's prices are not known here).
    """
    serving = serving_config(spec)
    tolerations = tolerations_of(spec)
    key = (id(inventory), id(model), serving, workload, tolerations)
    hit = _ALTERNATIVES.get(key)
    if hit is not None and hit[0] is inventory and hit[1] is model:
        return hit[2]
    if len(_ALTERNATIVES) > 4096:
        _ALTERNATIVES.clear()
    value = _search_alternatives(model, inventory, serving, workload, tolerations)
    _ALTERNATIVES[key] = (inventory, model, value)
    return value


#: Alternatives by (inventory, model, settings, workload, tolerations), checked by identity: thousands of
#: deployments share a few models and settings, and one search plans every pool of the cluster.
_ALTERNATIVES: dict[
    tuple[int, int, ServingConfig, Workload | None, tuple[Toleration, ...]],
    tuple[Inventory, ModelInput, tuple[tuple[GpuPool, Option], ...]],
] = {}


def _search_alternatives(
    model: ModelInput,
    inventory: Inventory,
    serving: ServingConfig,
    workload: Workload | None,
    tolerations: tuple[Toleration, ...] = (),
) -> tuple[tuple[GpuPool, Option], ...]:
    pools, _ = inventory.select(None, {}, tolerations)
    pools = [p for p in pools if p.share is None]
    wl = workload or Workload(1, serving.max_model_len or model.arch.derived_max_model_len)
    found: list[tuple[GpuPool, Option]] = []
    for pool in pools:
        try:
            result = search(
                model,
                wl,
                [pool.gpu],
                max_model_len=serving.max_model_len,
                max_gpus=min(pool.gpus_per_node, 64),
                vllm_version=serving.vllm_version,
                kv_cache_dtypes=(serving.kv_cache_dtype,),
                quantizations=(serving.quantization,),
                fewest_gpus_only=True,
                expert_parallel=False,  # an alternative's status has no data-parallel field
            )
        except SizingError:
            continue
        if result.options:
            found.append((pool, result.options[0]))

    def busy(po: tuple[GpuPool, Option]) -> bool:
        pool, option = po
        return bool(pool.free_by_node) and all(free < option.gpus for _, free in pool.free_by_node)

    found.sort(key=lambda po: (busy(po), po[1].gpu_hours_per_million_output_tokens, po[1].gpus))
    return tuple(found[:MAX_ALTERNATIVES])


def serving_config(spec: ModelDeploymentSpec) -> ServingConfig:
    """The sizing core's settings from a spec."""
    s = spec.serving
    mm = s.multimodal
    return ServingConfig(
        max_model_len=s.max_model_len,
        kv_cache_dtype=s.kv_cache_dtype,
        dtype=s.dtype,
        quantization=s.quantization,
        tensor_parallel_size=s.tensor_parallel_size,
        pipeline_parallel_size=s.pipeline_parallel_size,
        gpu_memory_utilization=s.gpu_memory_utilization,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        vllm_version=spec.engine.version,
        extensible_kv_cache=s.enable_extensible_kv_cache,
        speculative_method=s.speculative_config.method if s.speculative_config else None,
        speculative_tokens=s.speculative_config.num_speculative_tokens if s.speculative_config else None,
        **parallel_serving(spec),
        # --- issue 20: CUDA graphs, block size, LoRA, weight offload, KV connectors, multimodal ---
        enforce_eager=s.enforce_eager,
        block_size=s.block_size,
        enable_lora=s.lora is not None,
        max_loras=s.lora.max_loras if s.lora else None,
        max_lora_rank=s.lora.max_lora_rank if s.lora else None,
        max_cpu_loras=s.lora.max_cpu_loras if s.lora else None,
        fully_sharded_loras=bool(s.lora and s.lora.fully_sharded_loras),
        lora_dtype=s.lora.lora_dtype if s.lora else "auto",
        lora_target_modules=tuple(s.lora.target_modules) if s.lora and s.lora.target_modules else None,
        cpu_offload_bytes=int(s.cpu_offload_gib * GiB),
        kv_offloading_bytes=int(s.kv_offloading.size_gib * GiB) if s.kv_offloading else None,
        kv_offloading_backend=s.kv_offloading.backend if s.kv_offloading else "native",
        kv_connector=s.kv_transfer.connector if s.kv_transfer else None,
        kv_role=s.kv_transfer.role if s.kv_transfer else None,
        kv_buffer_device=s.kv_transfer.buffer_device if s.kv_transfer else None,
        limit_mm_per_prompt=tuple(sorted(mm.limit_per_prompt.items())) if mm and mm.limit_per_prompt else None,
        mm_encoder_tp_mode=mm.encoder_tp_mode if mm else "weights",
        mm_processor_cache_bytes=int(mm.processor_cache_gib * GiB)
        if mm and mm.processor_cache_gib is not None
        else None,
    )


def parallel_serving(spec: ModelDeploymentSpec) -> dict[str, Any]:
    """ServingConfig's data / expert / decode-context fields (docs/parallelism.md).

    vLLM's --data-parallel-size is the deployment's (spec.serving.dataParallelSize), else the replica's
    ranks (placement.dataParallelSize); ranks per node default to those over placement.nodesPerReplica.
    """
    s, p = spec.serving, spec.placement
    dp = s.data_parallel_size or p.data_parallel_size
    local = s.data_parallel_size_local
    if local is None and p.nodes_per_replica > 1 and dp > 1:
        local = max(1, p.data_parallel_size // p.nodes_per_replica)
    return {
        "data_parallel_size": dp,
        "data_parallel_size_local": None if local is None else min(local, dp),
        "enable_expert_parallel": s.enable_expert_parallel,
        "enable_eplb": s.enable_eplb,
        "num_redundant_experts": s.num_redundant_experts,
        "all2all_backend": s.all2all_backend,
        "decode_context_parallel_size": s.decode_context_parallel_size,
    }


def workload_of(spec: ModelDeploymentSpec) -> Workload | None:
    """The declared workload, if any."""
    w = spec.workload
    return None if w is None else Workload(w.concurrent_requests, w.context_tokens)


def unknown(reason: ReasonCode, message: str, facts: ModelFacts | None = None, inv: str = "") -> Evaluation:
    """An Unknown verdict with its reason (missing inputs)."""
    return Evaluation(
        Verdict.UNKNOWN, reason, message, (f"fitgate: verdict Unknown: {message}",), inventory_hash=inv, facts=facts
    )


def evaluate(
    spec: ModelDeploymentSpec,
    model: ModelInput | None,
    gpus: Inventory | Iterable[NodeGPUs],
    *,
    facts: ModelFacts | None = None,
    model_error: str | None = None,
    with_suggestions: bool = True,
    namespace: str = "",
    prices: GpuPrices | None = None,
) -> Evaluation:
    """Plan ``spec`` on every pool of ``gpus`` it may land on; see the module docstring."""
    inventory = gpus if isinstance(gpus, Inventory) else Inventory(gpus)
    try:
        pools, inv, claimed = select_pools(spec, inventory, namespace)
    except ClaimError as exc:
        return unknown(ReasonCode.RESOURCE_CLAIM_UNKNOWN, str(exc), facts)
    except SelectorUnsupportedError as exc:
        return unknown(ReasonCode.DEVICE_SELECTOR_UNKNOWN, str(exc), facts)
    if model is None:
        return unknown(
            ReasonCode.CHECKPOINT_UNAVAILABLE, model_error or "the checkpoint has not been resolved yet", facts, inv
        )
    nodes = spec.placement.nodes_per_replica
    dp = spec.placement.data_parallel_size
    gpus_per_replica = spec.serving.tensor_parallel_size * spec.serving.pipeline_parallel_size * dp
    need = -(-gpus_per_replica // nodes)  # GPUs per node
    no_node = ""
    if not pools and not spec.placement.resource_claim_template_name:
        # Fit is not availability: no node matches (yet), but the GPU may be known (docs/clusters.md)
        tolerations = tolerations_of(spec)
        if not inventory.left_out(spec.placement.gpu_product, spec.placement.node_selector, tolerations):
            pools, no_node = prospective_pools(spec, inventory, need)
            if not pools and (inventory or inventory.templates or names_a_gpu(spec.placement.node_selector)):
                return unknown(ReasonCode.NO_NODE_YET, _no_node_unknown(spec), facts, inv)
    if not inventory and not no_node:
        return unknown(
            ReasonCode.NO_GPU_INVENTORY,
            "no node advertises GPUs (GPU Feature Discovery or AMD labels, allocatable nvidia.com/gpu or amd.com/gpu, "
            "or NVIDIA DRA ResourceSlices)",
            facts,
            inv,
        )
    serving = serving_config(spec)
    workload = workload_of(spec)
    if claimed is not None and claimed < gpus_per_replica:
        msg = (
            f"ResourceClaimTemplate {spec.placement.resource_claim_template_name} asks for {claimed} GPU"
            f"{'s' if claimed > 1 else ''} per pod but tensorParallelSize x pipelineParallelSize"
            f"{' x dataParallelSize' if dp > 1 else ''} is "
            f"{gpus_per_replica}: set the request's count to {gpus_per_replica}"
        )
        return Evaluation(
            Verdict.DOES_NOT_FIT, ReasonCode.GPU_LIMIT_BELOW_PARALLELISM, msg, (), inventory_hash=inv, facts=facts
        )
    if not pools:
        where = spec.placement.gpu_product or "any GPU"
        if spec.placement.resource_claim_template_name:
            where = f"the devices ResourceClaimTemplate {spec.placement.resource_claim_template_name} selects"
        if spec.placement.node_selector:
            labels = ",".join(f"{k}={v}" for k, v in sorted(spec.placement.node_selector.items()))
            where += f" with nodeSelector {labels}"
        msg = f"no GPU node matches the placement ({where})"
        left_out = inventory.left_out(spec.placement.gpu_product, spec.placement.node_selector, tolerations_of(spec))
        if left_out:
            names = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
            msg += f"; not candidates: {names}"
        if left_out and not spec.placement.resource_claim_template_name:
            # Fit is not availability: cordoned or tainted nodes of the placement are planned on as they are, and
            # the pods wait (a cordon is lifted, a toleration is added by a policy): a gate denies what cannot fit
            pools = inventory.matching_pools(spec.placement.gpu_product, spec.placement.node_selector)
            no_node = f"no node of the placement is schedulable now ({names})"
        if not pools:
            return Evaluation(
                Verdict.DOES_NOT_FIT, ReasonCode.NO_MATCHING_GPU_POOL, msg, (), inventory_hash=inv, facts=facts
            )
    own = inventory.own_usage(namespace, spec.observe.selector) if spec.observe else {}
    spec_share = share_of(spec)
    results: list[PoolResult] = []
    for pool in pools:
        if pool.gpus_per_node < need or (len(pool.nodes) < nodes and not pool.prospective):
            what = "TP x PP x DP" if dp > 1 else "TP x PP"
            per = f"{need} GPUs per node x {nodes} nodes" if nodes > 1 else f"{need} GPUs per replica ({what})"
            has = f"the pool has {len(pool.nodes)} nodes of {pool.gpus_per_node}"
            if pool.prospective:
                has = f"its nodes ({pool.source}, none yet) have {pool.gpus_per_node}"
            results.append(_short_of_gpus(pool, f"{per} but {has}"))
            continue
        share = spec_share or pool.share
        if share is not None and share.replicas and need > 1:  # N time-sliced/MPS GPUs may be N shares of one card
            why = (
                f"{need} GPUs per replica (TP x PP) on {share.mechanism} GPUs: the device plugin may hand out {need} "
                "shares of one card (its failRequestsGreaterThanOne refuses such pods); tensor parallelism needs "
                "whole GPUs"
            )
            results.append(_short_of_gpus(pool, why))
            continue
        try:
            result = plan_on_pool(model, pool, serving, workload, share)
        except SizingError as exc:
            results.append(PoolResult(pool, Verdict.UNKNOWN, None, ReasonCode.INVALID_SETTINGS, f"spec.serving: {exc}"))
            continue
        # a pool with no node yet is planned per GPU only: its nodes are the autoscaler's to create
        results.append(
            result if pool.prospective else placed(result, spec.replicas, max(need, claimed or 0), nodes, own)
        )
    invalid = next((r for r in results if r.reason is ReasonCode.INVALID_SETTINGS), None)
    if invalid is not None:  # a setting the model cannot take, whatever the GPU
        return Evaluation(
            Verdict.UNKNOWN,
            ReasonCode.INVALID_SETTINGS,
            invalid.message,
            (f"fitgate: invalid settings: {invalid.message}",),
            tuple(results),
            None,
            inventory_hash=inv,
            facts=facts,
        )
    best = choose(results, prices, gpus_per_replica)
    suggestions: tuple[Suggestion, ...] = ()
    if with_suggestions and best.plan is not None and best.verdict is Verdict.DOES_NOT_FIT:
        suggestions = suggest(model, best.pool.gpu, serving, workload, best.plan)
    args: tuple[EngineArg, ...] = ()
    chosen: Suggestion | None = None
    if best.plan is not None:  # the same choice as `fitgate plan`: a misfit's args are those of the fix
        _, args, chosen = recommend(model, best.pool.gpu, serving, workload, best.plan, suggestions)
    message = _message(best, suggestions, len(results))
    warnings: list[str] = []
    if best.verdict is Verdict.TIGHT:
        warnings.append(f"fitgate: verdict Tight on {best.pool.product}: {best.message.split(': ', 1)[-1]}")
    misfits = [r for r in results if r.verdict is Verdict.DOES_NOT_FIT]
    if best.verdict in (Verdict.FITS, Verdict.TIGHT) and misfits:
        names = ", ".join(r.pool.product for r in misfits)
        warnings.append(f"fitgate: it does not fit on {names}; set placement.gpuProduct to keep it off those nodes")
    if best.verdict is Verdict.UNKNOWN:
        warnings.append(f"fitgate: verdict Unknown: {best.message}")
    if no_node and best.verdict in (Verdict.FITS, Verdict.TIGHT):
        message += f"; {no_node}: the verdict is the fit on that GPU, the pods wait for a node"
        warnings.insert(
            0,
            f"fitgate: {no_node} (reason {ReasonCode.NO_NODE_YET.value}): verdict {best.verdict.value} on the GPU "
            "alone; the pods wait for a node (an autoscaler's, or one you add), and fitgate evaluates again when one "
            "joins",
        )
    elif no_node:  # a misfit on the GPU itself: no node is needed to know it
        message += f"; {no_node}, and none would take it"
    notes = tuple(facts.notes) if facts else ()
    alternatives: tuple[tuple[GpuPool, Option], ...] = ()
    if with_suggestions and best.verdict is Verdict.DOES_NOT_FIT:
        alternatives = alternatives_of(model, inventory, spec, workload)
    return Evaluation(
        best.verdict,
        best.reason,
        message,
        tuple(warnings),
        tuple(results),
        best,
        suggestions,
        args,
        inv,
        facts,
        notes,
        chosen,
        alternatives,
        no_node=no_node,
    )


def _no_node_unknown(spec: ModelDeploymentSpec) -> str:
    """Why a placement that matches no node and names no GPU fitgate can read is Unknown."""
    p = spec.placement
    where = f"gpuProduct {p.gpu_product}" if p.gpu_product else "any GPU"
    if p.node_selector:
        where += " with nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(p.node_selector.items()))
    return (
        f"no node matches the placement ({where}) and neither it nor an autoscaler template (Karpenter NodePool, "
        "cluster-autoscaler node group) names a GPU fitgate knows: the fit cannot be checked before a node joins"
    )


#: The spec field each suggested change is made in (a vLLM flag, or the workload).
SPEC_FIELDS = {
    "--tensor-parallel-size": "spec.serving.tensorParallelSize",
    "--pipeline-parallel-size": "spec.serving.pipelineParallelSize",
    "--kv-cache-dtype": "spec.serving.kvCacheDtype",
    "--max-model-len": "spec.serving.maxModelLen",
    "--gpu-memory-utilization": "spec.serving.gpuMemoryUtilization",
    "--quantization": "spec.serving.quantization",
    "--dtype": "spec.serving.dtype",
    "workload.concurrentRequests": "spec.workload.concurrentRequests",
    # issue 20: LoRA slots
    "--max-loras": "spec.serving.lora.maxLoras",
    "--max-lora-rank": "spec.serving.lora.maxLoraRank",
    "--enforce-eager": "spec.serving.enforceEager",
}


def _edit(suggestion: Suggestion) -> str:
    """A suggestion as the spec fields to edit, then the vLLM flags: ``spec.serving.tensorParallelSize: 4 (...)``."""
    fields = [f"{SPEC_FIELDS.get(flag, flag)}: {value}" for flag, value in suggestion.changes]
    flags = [f"{flag} {value}" for flag, value in suggestion.changes if flag.startswith("--")]
    return ", ".join(fields) + (f" [vLLM {' '.join(flags)}]" if flags else "")


def _message(best: PoolResult, suggestions: tuple[Suggestion, ...], pools: int) -> str:
    text = best.message
    if best.plan is not None:
        g, kv = best.plan.per_gpu, best.plan.kv
        text += (
            f" [per GPU: weights {fmt_gib(g.weights_bytes)}, activation {fmt_gib(g.activation_bytes)}, "
            f"KV pool {fmt_gib(g.kv_cache_bytes)} of a {fmt_gib(g.budget_bytes)} budget; "
            f"max concurrency {kv.max_concurrency:.2f}]"
        )
    fits = next((s for s in suggestions if s.verdict is Verdict.FITS), None)
    if fits is not None:
        text += f"; smallest change that fits: {_edit(fits)} ({fits.gpus} GPU{'s' if fits.gpus > 1 else ''})"
    if suggestions and suggestions[0] is not fits:
        text += f"; cheaper but Tight: {_edit(suggestions[0])}"
    if pools > 1:
        text += f" (best of {pools} GPU pools)"
    return text


# --------------------------------------------------------------------------------------------
# Status


def _gib_text(n: int) -> str:
    return f"{n / GiB:.1f}Gi"


#: Reasons that keep a deployment from being evaluated only for now (Ready is Unknown, not False).
_PENDING = {ReasonCode.CHECKPOINT_RESOLVING, ReasonCode.CHECKPOINT_UNAVAILABLE}


def condition(
    old: Iterable[Mapping[str, Any]] | None,
    ctype: str,
    status: str,
    reason: ReasonCode,
    message: str,
    generation: int,
    now: str,
) -> Condition:
    """A condition (KEP-1623); ``lastTransitionTime`` only moves when ``status`` changes (no flapping)."""
    previous = next((c for c in old or () if c.get("type") == ctype), None)
    since = previous.get("lastTransitionTime") if previous and previous.get("status") == status else None
    return Condition(
        type=ctype,
        status=status,  # type: ignore[arg-type]
        reason=reason.value,
        message=message[:32000],
        lastTransitionTime=since or now,
        observedGeneration=generation,
    )


def conditions_of(
    ev: Evaluation, generation: int, old: Iterable[Mapping[str, Any]] | None, now: str
) -> list[Condition]:
    """``Ready``: evaluated against the current spec and GPU nodes; ``Fits``: the verdict (Tight: reason Tight)."""
    if ev.verdict is Verdict.UNKNOWN:
        ready = condition(
            old, "Ready", "Unknown" if ev.reason in _PENDING else "False", ev.reason, ev.message, generation, now
        )
    elif ev.provisional is not None:  # planned, but on facts the Hub has not confirmed yet
        reason, note = ev.provisional
        ready = condition(old, "Ready", "Unknown", reason, note, generation, now)
    else:
        text = f"planned against the cluster's GPUs (inventory {ev.inventory_hash or '-'})"
        ready = condition(old, "Ready", "True", ReasonCode.EVALUATED, text, generation, now)
    fits_status, fits_reason = {
        Verdict.FITS: ("True", ReasonCode.FITS),
        Verdict.TIGHT: ("True", ReasonCode.TIGHT),
        Verdict.DOES_NOT_FIT: ("False", ev.reason),
    }.get(ev.verdict, ("Unknown", ev.reason))
    message = ev.message if ev.verdict is not Verdict.TIGHT else f"{ev.reason}: {ev.message}"
    out = [ready, condition(old, "Fits", fits_status, fits_reason, message, generation, now)]
    schedulable = schedulable_condition(ev, generation, old, now)
    return out if schedulable is None else [*out, schedulable]


def schedulable_condition(
    ev: Evaluation, generation: int, old: Iterable[Mapping[str, Any]] | None, now: str
) -> Condition | None:
    """``Schedulable``: False with reason NoNodeYet while no node of the placement's GPU exists (docs/clusters.md).

    Written only once a deployment has been without a node: then True (reason NodesMatch) when one joins, so
    the change shows; a deployment that always had nodes keeps the two conditions it always had.
    """
    if ev.no_node or ev.reason is ReasonCode.NO_NODE_YET:
        text = ev.no_node or ev.message
        return condition(old, "Schedulable", "False", ReasonCode.NO_NODE_YET, text, generation, now)
    if not any(c.get("type") == "Schedulable" for c in old or ()):
        return None
    if ev.best is not None and not ev.best.pool.prospective:
        nodes = len(ev.best.pool.nodes)
        text = f"{nodes} node{'s' if nodes != 1 else ''} of {ev.best.pool.product} match the placement"
        return condition(old, "Schedulable", "True", ReasonCode.NODES_MATCH, text, generation, now)
    return condition(old, "Schedulable", "Unknown", ev.reason, ev.message, generation, now)


def status_of(ev: Evaluation, generation: int, old_status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``status`` to write for an evaluation: :class:`ModelDeploymentStatus` dumped by alias.

    Every field is present; ``None`` removes a value an earlier status had (a merge patch).
    """
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = ModelDeploymentStatus(
        observedGeneration=generation,
        verdict=ev.verdict.value,
        reason=ev.reason.value,
        message=ev.message[:32000],
        inventoryHash=ev.inventory_hash,
        conditions=conditions_of(ev, generation, (old_status or {}).get("conditions"), now)
        + kept_conditions(old_status),
        pools=[
            PoolStatus(
                gpuProduct=r.pool.product,
                nodes=len(r.pool.nodes),
                gpusPerNode=r.pool.gpus_per_node,
                verdict=r.verdict.value,
                headroomBytes=r.plan.per_gpu.headroom_bytes if r.plan else None,
                freeGpus=None if r.pool.prospective else r.pool.free_gpus,  # no node yet: nothing to count
                sharing=str(r.pool.share.mechanism) if r.pool.share else None,
                source=r.pool.source,
                reason=r.reason.value,
            )
            for r in ev.pools
        ],
        alternatives=[
            AlternativeStatus(
                gpuProduct=pool.product,
                gpus=o.gpus,
                tensorParallelSize=o.tensor_parallel_size,
                pipelineParallelSize=o.pipeline_parallel_size,
                verdict="Fits" if o.verdict is Verdict.FITS else "Tight",
                headroomBytes=o.headroom_bytes,
                decodeTokensPerSecond=round(o.performance.decode_tokens_per_s, 1),
                gpuHoursPerMillionOutputTokens=round(o.gpu_hours_per_million_output_tokens, 3),
            )
            for pool, o in ev.alternatives
        ]
        or None,
        resolvedModel=None
        if ev.facts is None
        else ResolvedModel(revision=ev.facts.revision, source=ev.facts.source, weightsBasis=ev.facts.weights_basis),
    )
    best = ev.best
    if best is not None and best.plan is not None:
        p = best.plan
        g = p.per_gpu
        status.gpu_product = best.pool.product
        status.tensor_parallel_size = p.serving.tensor_parallel_size
        status.headroom = _gib_text(g.headroom_bytes)
        status.per_gpu = PerGPU(
            capacityBytes=g.capacity_bytes,
            budgetBytes=g.budget_bytes,
            weightsBytes=g.weights_bytes,
            kvCacheBytes=g.kv_cache_bytes,
            activationBytes=g.activation_bytes,
            nonTorchBytes=g.non_torch_bytes,
            cudaGraphBytes=g.cuda_graph_bytes if g.cuda_graphs_in_budget else 0,
            headroomBytes=g.headroom_bytes,
        )
        status.kv_cache = KVCacheStatus(
            bytesPerToken=p.kv.bytes_per_token,
            capacityTokens=p.kv.reported_tokens,
            maxConcurrency=round(p.kv.max_concurrency, 2),
            numGpuBlocks=p.kv.num_blocks,
            blockSize=p.kv.block_size,
        )
        status.max_concurrency = f"{p.kv.max_concurrency:.2f}"
        status.recommended_max_model_len = p.max_model_len_that_fits
        status.engine_args = [EngineArgStatus(name=a.name, value=a.value, reason=a.reason) for a in ev.engine_args]
    out = status.model_dump(by_alias=True, mode="json", exclude={"observed"})  # the observer's (observation/observe.py)
    # a null inside a list item is dropped by the API server: leave it out, or every resync would patch again
    out["pools"] = [{k: v for k, v in pool.items() if v is not None} for pool in out.get("pools") or []]
    return out


def kept_conditions(old_status: Mapping[str, Any] | None) -> list[Condition]:
    """The conditions another writer owns (the observer's PredictionVerified, AtCapacity), kept as they were."""
    return [
        Condition.model_validate(c)
        for c in (old_status or {}).get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") not in {"Ready", "Fits", "Schedulable"}
    ]


def same_outcome(old_status: Mapping[str, Any] | None, new_status: Mapping[str, Any]) -> bool:
    """Whether writing ``new_status`` would change anything but timestamps (to avoid needless patches)."""
    if not old_status:
        return False

    def strip(s: Mapping[str, Any]) -> Any:
        out = {k: v for k, v in s.items() if k not in {"conditions", "observed"}}  # observed: the observer's
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in s.get("conditions") or []
        ]
        return out

    return bool(strip(old_status) == strip(new_status))
