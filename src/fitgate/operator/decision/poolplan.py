"""Planning on one GPU pool: shared cards, free GPUs for the replicas, the pool chosen among several.

Pure logic between :mod:`fitgate.operator.decision.evaluate` and the inventory: what vLLM's gmu does on a shared
card (:mod:`fitgate.operator.gpus.sharing`), whether every replica finds free GPUs
(:mod:`fitgate.operator.gpus.placement`), the pools a ResourceClaimTemplate's devices form
(:mod:`fitgate.operator.gpus.gpuview`), and the cheapest pool that fits when GPU prices are known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from fitgate.operator.gpus.gpuview import select_claim
from fitgate.operator.gpus.inventory import GpuPool, Inventory
from fitgate.operator.gpus.placement import Toleration, replicas_placed
from fitgate.operator.gpus.prospects import prospects
from fitgate.operator.gpus.sharing import Mechanism, Share, check_share
from fitgate.operator.schema.api import ModelDeploymentSpec
from fitgate.sizing import ModelInput, Plan, ReasonCode, ServingConfig, SizingError, Verdict, Workload, plan
from fitgate.sizing.cost import GpuPrices
from fitgate.sizing.units import MiB, fmt_gib
from fitgate.sizing.versions import first_admitting

#: A pool that might run the deployment (Unknown) ranks before one that certainly cannot (DoesNotFit): with no pool
#: chosen by placement the scheduler may take either (hunt209 F3: an unknown release's Unknown on the H100 pool lost
#: to a one-GPU L4 pool's DoesNotFit, and the webhook denied what the H100 nodes run).
_RANK = {Verdict.FITS: 0, Verdict.TIGHT: 1, Verdict.UNKNOWN: 2, Verdict.DOES_NOT_FIT: 3}


@dataclass(frozen=True)
class PoolResult:
    """The plan on one pool (``plan`` is None when the pool cannot host the deployment at all)."""

    pool: GpuPool
    verdict: Verdict
    plan: Plan | None
    reason: ReasonCode
    message: str
    # Unschedulable only because GPUs are held now (by running pods or allocated claims): the same nodes,
    # idle, would take every replica. Admission warns instead of denying (it clears as they finish).
    in_use: bool = False


#: Kubernetes' ExtendedResourceToleration admission plugin (plugin/pkg/admission/extendedresourcetoleration,
#: enabled by GKE and AKS, whose GPU nodes carry ``nvidia.com/gpu=present:NoSchedule``) gives every pod that
#: requests an extended resource ``{key: <resource>, operator: Exists, effect: NoSchedule}``. The pods of a
#: vLLM deployment request their GPUs, so the template's own tolerations are not all they get: without
#: these, a GKE GPU pool was "not tolerated" and every deployment on it was denied.
IMPLICIT_TOLERATIONS = tuple(
    Toleration(resource, "Exists", "", "NoSchedule")
    for resource in ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")
)


def tolerations_of(spec: ModelDeploymentSpec) -> tuple[Toleration, ...]:
    """The placement's tolerations as :class:`Toleration` values, with those a GPU pod gets implicitly.

    A placement without tolerations of its own (most) gets :data:`IMPLICIT_TOLERATIONS` itself: no four
    values built on each evaluation, and the inventory's pool memo compares its key by identity (issue 23).
    """
    if not spec.placement.tolerations:
        return IMPLICIT_TOLERATIONS
    own = tuple(Toleration(t.key, t.operator, t.value, t.effect) for t in spec.placement.tolerations)
    return own + tuple(t for t in IMPLICIT_TOLERATIONS if t not in own)


def share_of(spec: ModelDeploymentSpec) -> Share | None:
    """The HAMi / Run:ai share the spec's pods get (None: whole GPUs, or the nodes' time-slicing/MPS)."""
    s = spec.placement.gpu_share
    if s is None:
        return None
    if s.hami_gpu_mem_mib is not None:
        return Share(Mechanism.HAMI, memory_bytes=s.hami_gpu_mem_mib * MiB)
    if s.hami_gpu_mem_percentage is not None:
        return Share(Mechanism.HAMI, fraction=s.hami_gpu_mem_percentage / 100)
    if s.runai_gpu_fraction is not None:
        return Share(Mechanism.RUNAI, fraction=s.runai_gpu_fraction)
    if s.runai_gpu_memory_mib is not None:
        return Share(Mechanism.RUNAI, memory_bytes=s.runai_gpu_memory_mib * MiB)
    return None


def select_pools(
    spec: ModelDeploymentSpec, inventory: Inventory, namespace: str
) -> tuple[list[GpuPool], str, int | None]:
    """The pools a spec may land on, their fingerprint and the GPUs its claim template asks for (if any).

    Raises :class:`ClaimError` / :class:`SelectorUnsupportedError` for a claim template that cannot be read.
    """
    p = spec.placement
    if p.resource_claim_template_name:
        pools, inv, count = select_claim(
            inventory, namespace, p.resource_claim_template_name, p.gpu_product, p.node_selector, tolerations_of(spec)
        )
        return pools, inv, count * p.resource_claims_per_pod
    pools, inv = inventory.select(p.gpu_product, p.node_selector, tolerations_of(spec))
    return pools, inv, None


def prospective_pools(spec: ModelDeploymentSpec, inventory: Inventory, need: int) -> tuple[list[GpuPool], str]:
    """Pools of nodes that do not exist yet, for a placement no node matches, and why there is none.

    From the autoscaler templates of the inventory or the placement itself (:mod:`fitgate.operator.gpus.prospects`);
    a pool's GPUs per node are the template's or instance type's, else the ``need`` of one replica (said in
    its notes). Empty: the placement names no GPU fitgate can read.
    """
    p = spec.placement
    found = prospects(p.gpu_product, p.node_selector, tolerations_of(spec), inventory.templates)
    pools = []
    for pr in found:
        count = pr.count
        notes: tuple[str, ...] = ()
        if count is None:
            count = need
            notes = (
                f"{pr.gpu.product}: GPUs per node not known before a node joins; taken as the {need} one replica needs",
            )
        pools.append(
            GpuPool(pr.gpu.product, pr.gpu.gpu, (), count, pr.gpu.vendor, None, notes, (), None, pr.source, True)
        )
    if not pools:
        return [], ""
    names = ", ".join(sorted({f"{pool.product} ({pool.source})" for pool in pools}))
    return pools, f"no node with {names} yet"


def admitted_by_another_release(
    model: ModelInput, pool: GpuPool, serving: ServingConfig, workload: Workload | None, share: Share | None
) -> tuple[str, PoolResult] | None:
    """The newest modelled release whose accounting admits (Fits or Tight) what ``serving``'s denies on ``pool``.

    For an image whose release is unknown (hunt82 F2: ``ghcr.io/llm-d/llm-d-cuda:v0.7.0`` runs vLLM 0.19.1, whose
    budget leaves CUDA graphs out; sized as 0.34.0 a 32k Llama-3.1-70B-FP8 on one H100 was DoesNotFit, as 0.19.1 Tight):
    a misfit only some release shows is not one fitgate can show. None when every release denies it.
    """
    return first_admitting(
        serving.vllm_version,
        lambda release: plan_on_pool(model, pool, replace(serving, vllm_version=release), workload, share),
        lambda other: other.verdict in (Verdict.FITS, Verdict.TIGHT),
    )


def plan_on_pool(
    model: ModelInput, pool: GpuPool, serving: ServingConfig, workload: Workload | None, share: Share | None
) -> PoolResult:
    """Plan on one pool; on a shared card, say what vLLM's gmu does there (:mod:`fitgate.operator.gpus.sharing`).

    Raises :class:`SizingError` for settings the model cannot take.
    """
    if share is None:
        p = plan(model, pool.gpu, serving, workload)
        return PoolResult(pool, p.verdict, p, p.reasons[0].code, f"{pool.product}: {p.reasons[0].message}")
    card = pool.gpu.memory_bytes
    if share.vllm_sees_slice:  # HAMi: CUDA reports the slice as the device total
        slice_gpu = replace(
            pool.gpu, name=f"{pool.gpu.name} ({share.mechanism} slice)", memory_bytes=share.slice_bytes(card)
        )
        p = plan(model, slice_gpu, serving, workload)
        gmu = p.serving.gpu_memory_utilization
        text = check_share(share, card, gmu).message
        return PoolResult(pool, p.verdict, p, p.reasons[0].code, f"{pool.product}: {text}; {p.reasons[0].message}")
    p = plan(model, pool.gpu, serving, workload)
    check = check_share(share, card, p.serving.gpu_memory_utilization)
    if not check.exceeds:
        code = p.reasons[0].code
        return PoolResult(pool, p.verdict, p, code, f"{pool.product}: {check.message}; {p.reasons[0].message}")
    if share.mechanism is Mechanism.RUNAI:
        # hunt58 F1: whether Run:ai's fractions show CUDA the fraction (as HAMi does: then gmu applies to it and the
        # pod runs) or the whole card (KAI without an isolator) is not read from Run:ai's source: planned as the
        # slice, the whole-card limit said, and only a slice that cannot hold the model denied
        slice_gpu = replace(pool.gpu, name=f"{pool.gpu.name} (Run:ai slice)", memory_bytes=check.slice_bytes)
        s = plan(model, slice_gpu, serving, workload)
        verdict = s.verdict if s.verdict is Verdict.DOES_NOT_FIT else Verdict.TIGHT
        why = f"if Run:ai shows CUDA the whole card, {check.overrun}"
        return PoolResult(pool, verdict, s, s.reasons[0].code, f"{pool.product}: {s.reasons[0].message}; {why}")
    if share.mechanism is Mechanism.TIME_SLICING and p.verdict is not Verdict.DOES_NOT_FIT:
        # hunt77 F4: nothing isolates a time-sliced card's memory; vLLM fails only when the card's other pods hold more
        # than 1 - gmu of it, which the pool does not show (AI Infra Lab ran Qwen3-4B-AWQ at gmu 0.55 beside a small
        # embedding server on an RTX 4060 shared two ways, vLLM v0.29.0): Tight with the gmu that keeps to the share
        left = fmt_gib(card - check.requested_bytes)
        why = f"it starts only while the card's other pods hold at most {left} of it"
        return PoolResult(
            pool,
            Verdict.TIGHT,
            p,
            ReasonCode.GPU_MEMORY_UTILIZATION_EXCEEDS_SHARE,
            f"{pool.product}: {check.message}; {why}; {p.reasons[0].message}",
        )
    try:  # what the recommended gmu gives inside the slice
        fixed = plan(model, pool.gpu, replace(serving, gpu_memory_utilization=check.recommended_gmu), workload)
        then = f"with {check.recommended_gmu:.2f}: {fixed.verdict.value}, {fixed.reasons[0].message}"
    except SizingError as exc:
        fixed, then = None, f"with {check.recommended_gmu:.2f} vLLM cannot start ({exc})"
    return PoolResult(
        pool,
        Verdict.DOES_NOT_FIT,
        fixed or p,
        ReasonCode.GPU_MEMORY_UTILIZATION_EXCEEDS_SHARE,
        f"{pool.product}: {check.message}; {then}",
    )


def placed(
    result: PoolResult,
    replicas: int,
    need: int,
    nodes: int,
    own: Mapping[str, Mapping[str, int]],
    per_card: int = 1,
) -> PoolResult:
    """A Fits/Tight result becomes Unschedulable when the pool's free GPUs cannot take every replica.

    GPUs held by the deployment's own pods (spec.observe.selector) count as free for it. ``per_card``: one-GPU
    replicas the scheduler packs onto one card (Run:ai / KAI fractions).
    """
    if result.verdict not in (Verdict.FITS, Verdict.TIGHT):
        return result
    pool = result.pool
    resource = "nvidia.com/gpu" if pool.vendor == "nvidia" else "amd.com/gpu"
    if pool.mig_profile:
        resource = f"nvidia.com/mig-{pool.mig_profile}"
    free = [n + own.get(node, {}).get(resource, 0) for node, n in pool.free_by_node]
    placed = replicas_placed(free, need, nodes) * per_card
    if placed >= replicas:
        return result
    per = f"{need} GPUs on each of {nodes} nodes" if nodes > 1 else f"{need} GPU{'s' if need > 1 else ''} on one node"
    if per_card > 1:
        per = f"a share of a GPU ({per_card} to a card)"
    in_use = replicas_placed([pool.gpus_per_node] * len(free), need, nodes) * per_card >= replicas
    why = " (GPUs held by running pods or allocated claims: it can be placed once they are freed)" if in_use else ""
    return replace(
        result,
        verdict=Verdict.DOES_NOT_FIT,
        reason=ReasonCode.UNSCHEDULABLE,
        message=f"{result.message.split(': ', 1)[0]}: fits per GPU ({result.verdict.value}) but only {placed} of "
        f"{replicas} replicas can be placed: each needs {per}, and the pool's {len(free)} schedulable nodes have "
        f"{sum(free)} free GPUs ({', '.join(str(f) for f in free[:8])}{' ...' if len(free) > 8 else ''} per node)"
        f"{why}",
        in_use=in_use,
    )


def choose(results: list[PoolResult], prices: GpuPrices | None, gpus: int) -> PoolResult:
    """The pool to report.

    The cheapest per hour among the pools that fit when every one of them is priced, else the best
    verdict with the most headroom.
    """

    def headroom(r: PoolResult) -> int:
        return -(r.plan.per_gpu.headroom_bytes if r.plan else -(1 << 62))

    top = min(_RANK[r.verdict] for r in results)
    if prices is not None and top <= _RANK[Verdict.TIGHT]:
        fitting = [r for r in results if _RANK[r.verdict] <= _RANK[Verdict.TIGHT]]
        priced = [(prices.of(r.pool.gpu), r) for r in fitting]
        if all(price is not None for price, _ in priced):
            return min(priced, key=lambda pr: (float(pr[0] or 0) * gpus, _RANK[pr[1].verdict], headroom(pr[1])))[1]
    return min(results, key=lambda r: (_RANK[r.verdict], headroom(r)))
