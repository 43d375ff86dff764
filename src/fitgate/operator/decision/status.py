"""Rendering an :class:`Evaluation`: its message, its conditions and the ModelDeployment ``status`` to write.

The evaluation itself is :mod:`fitgate.operator.decision.evaluate`'s; nothing here plans or reads the cluster.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from fitgate.operator.decision.evaluation import Evaluation
from fitgate.operator.decision.poolplan import PoolResult
from fitgate.operator.decision.speed import SpeedAtLoad
from fitgate.operator.schema.api import (
    AlternativeStatus,
    Condition,
    EngineArgStatus,
    KVCacheStatus,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
    PerformanceStatus,
    PerGPU,
    PoolStatus,
    ResolvedModel,
)
from fitgate.sizing import ReasonCode, Suggestion, Verdict
from fitgate.sizing.units import GiB, fmt_gib

# --------------------------------------------------------------------------------------------
# Messages


def no_node_unknown(spec: ModelDeploymentSpec) -> str:
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
    "replicas": "spec.replicas",  # issue 24: the workload over more replicas
    # issue 20: LoRA slots
    "--max-loras": "spec.serving.lora.maxLoras",
    "--max-lora-rank": "spec.serving.lora.maxLoraRank",
    "--enforce-eager": "spec.serving.enforceEager",
}


def edit_text(suggestion: Suggestion) -> str:
    """A suggestion as the spec fields to edit, then the vLLM flags: ``spec.serving.tensorParallelSize: 4 (...)``."""
    fields = [f"{SPEC_FIELDS.get(flag, flag)}: {value}" for flag, value in suggestion.changes]
    flags = [f"{flag} {value}" for flag, value in suggestion.changes if flag.startswith("--")]
    return ", ".join(fields) + (f" [vLLM {' '.join(flags)}]" if flags else "")


def _gpus_text(s: Suggestion) -> str:
    """``1 GPU``, ``4 GPUs``, ``6 GPUs: 3 replicas x 2``."""
    text = f"{s.total_gpus} GPU{'s' if s.total_gpus > 1 else ''}"
    return text + (f": {s.replicas} replicas x {s.gpus}" if s.replicas > 1 else "")


def message_of(best: PoolResult, suggestions: tuple[Suggestion, ...], pools: int) -> str:
    """The verdict message: the best pool's, its per-GPU numbers, the smallest change that fits, the pools."""
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
        text += f"; smallest change that fits: {edit_text(fits)} ({_gpus_text(fits)})"
    if suggestions and suggestions[0] is not fits:
        text += f"; cheaper but Tight: {edit_text(suggestions[0])}"
    if pools > 1:
        text += f" (best of {pools} GPU pools)"
    return text


def performance_text(p: PerformanceStatus, ttft_target_ms: float | None, tpot_target_ms: float | None) -> str:
    """``status.performance`` in one line, for ``fitgate check`` (the targets are the spec's workload)."""
    ttft = "unbounded (saturated)" if p.ttft_ms < 0 else f"{p.ttft_ms:g} ms [{_band(p.ttft_range_ms)}]"
    text = (
        f"per replica of {p.replicas}: TTFT {ttft}, TPOT {p.tpot_ms:g} ms [{_band(p.tpot_range_ms)}], "
        f"{p.requests_per_second:g} requests/s, {p.output_tokens_per_second:g} output tokens/s at concurrency "
        f"{p.concurrency:g}"
    )
    if p.saturated:
        text += "; saturated: the request rate is more than the replicas serve"
    if p.meets_targets is None:  # no targets: with a rate, the replicas that absorb it (hunt95 F9)
        absorb = p.replicas_for_targets
        return text if absorb is None else text + f"; {absorb} replica{'s' if absorb != 1 else ''} absorb the rate"
    targets = [f"{name} <= {ms:g} ms" for name, ms in (("TTFT", ttft_target_ms), ("TPOT", tpot_target_ms)) if ms]
    at = f"{p.replicas} replica{'s' if p.replicas != 1 else ''}"
    text += f"; targets {', '.join(targets)}: {'met' if p.meets_targets else 'not met'} at {at}"
    if p.replicas_for_targets is None:
        return text + ", by no replica count up to 1024 (replicasForTargets absent)"
    return text + f", replicasForTargets {p.replicas_for_targets}"


def _band(values: list[float]) -> str:
    return "-".join("unbounded" if v < 0 else f"{v:g}" for v in values)


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


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1) if math.isfinite(seconds) else -1.0


def performance_of(speed: SpeedAtLoad | None) -> PerformanceStatus | None:
    """``status.performance`` from the evaluation's estimate at the workload's load (-1 ms: unbounded).

    ``fitgate check`` shows the same object (hunt91 G8).
    """
    if speed is None:
        return None
    p = speed.performance
    return PerformanceStatus(
        ttftMs=_ms(p.ttft_seconds),
        ttftRangeMs=[_ms(v) for v in p.ttft_range_seconds],
        tpotMs=_ms(p.tpot_seconds),
        tpotRangeMs=[_ms(v) for v in p.tpot_range_seconds],
        concurrency=round(float(p.batch), 2),
        requestsPerSecond=round(p.requests_per_s, 3),
        outputTokensPerSecond=round(p.output_tokens_per_s, 1),
        saturated=p.saturated,
        replicas=speed.replicas,
        meetsTargets=speed.meets_targets,
        replicasForTargets=speed.replicas_for_targets,
        basis=p.basis[:1000],
    )


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
        notes=list(ev.notes) or None,
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
        status.performance = performance_of(ev.speed)
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
    return bool(outcome_of(old_status) == outcome_of(new_status))


def outcome_of(status: Mapping[str, Any], nulls: bool = False) -> Any:
    """What :func:`same_outcome` compares: ``status`` without timestamps, the observer's part and null fields.

    Null fields are what the API server stores of a merge patch's nulls: nothing (issue 23: compared with
    them, the status read back never matched the one written, and every resync patched it again). ``nulls``:
    keep them (a status read back from the API server has none: the same answer, without walking it again).
    """
    out = {k: v for k, v in status.items() if k not in {"conditions", "observed"}}  # observed: the observer's
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []
    ]
    return out if nulls else _no_nulls(out)


def _no_nulls(value: Any) -> Any:
    """``value`` without the null fields of its objects: what the API server keeps of a merge patch."""
    if isinstance(value, Mapping):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def status_patch(new_status: Mapping[str, Any], old_status: Mapping[str, Any] | None) -> dict[str, Any]:
    """``new_status`` as a merge patch on ``old_status``: a null only where it deletes a field that is there.

    A null in a merge patch deletes the field, and the API server stores nothing for it; kopf checks a patch
    against the object it gets back and keeps what does not match, and a timer re-sends what it kept on every
    call: a status written with ``alternatives: null`` (a deployment that fits) was patched again on each resync
    of every object, for ever (issue 23).
    """
    out: dict[str, Any] = {}
    for key, value in new_status.items():
        old = old_status.get(key) if old_status is not None else None
        if value is None and old is None:
            continue
        out[key] = (
            status_patch(value, old if isinstance(old, Mapping) else None) if isinstance(value, Mapping) else value
        )
    return out
