"""The one evaluation shared by the admission webhook, reconcile and ``fitgate check``.

``evaluate(spec, model, gpus)`` plans the deployment on every GPU pool it may land on and returns
the verdict (the best pool's: the deployment fits if some pool it may land on fits), the message with
the numbers and the smallest change that fits, and admission warnings. Its result type is
:mod:`fitgate.operator.decision.evaluation`'s; the status, conditions and messages are rendered by
:mod:`fitgate.operator.decision.status`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from fitgate.checkpoints.facts import ModelFacts, to_model_input
from fitgate.operator.decision.evaluation import Evaluation, notes_of, unknown
from fitgate.operator.decision.poolplan import (
    PoolResult,
    admitted_by_another_release,
    choose,
    placed,
    plan_on_pool,
    prospective_pools,
    select_pools,
    share_of,
    tolerations_of,
)
from fitgate.operator.decision.speed import speed_at_load
from fitgate.operator.decision.status import message_of, no_node_unknown
from fitgate.operator.gpus.cel import SelectorUnsupportedError
from fitgate.operator.gpus.cloudlabels import names_a_gpu
from fitgate.operator.gpus.dra import ClaimError
from fitgate.operator.gpus.inventory import GpuPool, Inventory, NodeGPUs
from fitgate.operator.gpus.placement import Toleration
from fitgate.operator.gpus.sharing import Mechanism, Share
from fitgate.operator.schema.api import ModelDeploymentSpec
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
from fitgate.sizing.advice import search_suggestions
from fitgate.sizing.cost import GpuPrices
from fitgate.sizing.errors import NotModelledError
from fitgate.sizing.memo import BoundedMemo, IdentityMemo
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION, UNKNOWN_RELEASE, first_admitting, resolve_release

__all__ = ["Evaluation", "alternatives_of", "evaluate", "parallel_serving", "serving_config", "unknown", "workload_of"]

#: Alternatives listed in status for a deployment that does not fit.
MAX_ALTERNATIVES = 3


def _short_of_gpus(pool: GpuPool, why: str) -> PoolResult:
    """A pool that cannot host one replica's GPUs at all (no plan on it)."""
    return PoolResult(pool, Verdict.DOES_NOT_FIT, None, ReasonCode.NOT_ENOUGH_GPUS_PER_NODE, f"{pool.product}: {why}")


def _per_card(share: Share | None, card_bytes: int) -> int:
    """The one-GPU replicas one card takes: Run:ai / KAI pack fractional pods onto a card (hunt79 F1).

    Their pods ask for no ``nvidia.com/gpu`` (a ``gpu-fraction`` or ``gpu-memory`` annotation: the scheduler packs
    them, two halves to a card), so a replica is not a whole GPU of the pool's free count. HAMi, time-slicing and MPS
    offer their shares as the node's allocatable GPUs, which the count already holds.
    """
    if share is None or share.mechanism is not Mechanism.RUNAI:
        return 1
    part = share.slice_bytes(card_bytes)
    return max(1, card_bytes // part) if part > 0 else 1


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
    return _ALTERNATIVES.get(
        (inventory, model),
        (serving, workload, tolerations),
        lambda: _search_alternatives(model, inventory, serving, workload, tolerations),
    )


#: Alternatives by (inventory, model) identity and (settings, workload, tolerations): thousands of deployments
#: share a few models and settings, and one search plans every pool of the cluster. Bound 4096: entries of
#: older inventory snapshots are never hit again and leave first.
_ALTERNATIVES: IdentityMemo[tuple[tuple[GpuPool, Option], ...]] = IdentityMemo(4096)


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
        option = _POOL_OPTIONS.get(
            (model.arch, model.inventory, pool.gpu),
            (model.name, serving, wl, pool.gpus_per_node),
            functools.partial(_cheapest_on, model, wl, serving, pool),
        )
        if option is not None:
            found.append((pool, option))

    def busy(po: tuple[GpuPool, Option]) -> bool:
        pool, option = po
        return bool(pool.free_by_node) and all(free < option.gpus for _, free in pool.free_by_node)

    found.sort(key=lambda po: (busy(po), po[1].gpu_hours_per_million_output_tokens, po[1].gpus))
    return tuple(found[:MAX_ALTERNATIVES])


def _cheapest_on(model: ModelInput, wl: Workload, serving: ServingConfig, pool: GpuPool) -> Option | None:
    """The fewest GPUs of one node of ``pool`` that hold the deployment (None: none do, or the settings cannot)."""
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
        return None
    return result.options[0] if result.options else None


#: One pool's search by model and GPU identity, settings, workload and GPUs per node: after a node event only the
#: pools it changed are searched again (the whole-cluster memo above is by snapshot). Bound 16384: a few pool
#: kinds for each misfit deployment.
_POOL_OPTIONS: IdentityMemo[Option | None] = IdentityMemo(16384)


def engine_release(version: str | None) -> str | None:
    """``engine.version`` as the sizing core takes it.

    None (the newest modelled release) for a tag or digest that names no vLLM release (hunt37 F6:
    vllm/vllm-openai:gptoss, a sha256 digest), which the evaluation warns about.
    """
    if version is None:
        return None
    try:
        named = resolve_release(version, "spec.engine.version").named
    except SizingError:
        return None
    return version if named else None


def _release_unknown(
    spec: ModelDeploymentSpec,
    model: ModelInput,
    best: PoolResult,
    serving: ServingConfig,
    workload: Workload | None,
    share: Share | None,
) -> PoolResult:
    """``best``, or Unknown where the release is not known and only the newest release's accounting denies it.

    A gate never denies for a release it does not know (hunt82 F2): an image that names no release is sized as the
    newest modelled one, and when that misfits on memory but another modelled release admits it, the misfit is not
    shown. A misfit every release shows stays DoesNotFit.
    """
    version = spec.engine.version
    if best.verdict is not Verdict.DOES_NOT_FIT or best.plan is None or best.plan.verdict is not Verdict.DOES_NOT_FIT:
        return best
    if version is None or engine_release(version) is not None:
        return best
    found = admitted_by_another_release(model, best.pool, serving, workload, share or best.pool.share)
    if found is None:
        return best
    release, other = found
    why = (
        f"the vLLM release is unknown ({'engine.version unknown' if version == UNKNOWN_RELEASE else repr(version)}): "
        f"sized as {DEFAULT_VLLM_VERSION}, the newest modelled, it does not fit, but as vLLM {release} it is "
        f"{other.verdict.value}; name the release (the image tag, or engine.version) to size it exactly"
    )
    return replace(best, verdict=Verdict.UNKNOWN, reason=ReasonCode.RELEASE_UNKNOWN, message=f"{best.message}; {why}")


def _invalid_or_release_unknown(
    spec: ModelDeploymentSpec,
    model: ModelInput,
    pool: GpuPool,
    serving: ServingConfig,
    workload: Workload | None,
    share: Share | None,
    exc: SizingError,
) -> PoolResult:
    """A setting the newest modelled release refuses: Invalid, unless the release is unknown (then Unknown).

    hunt116 F1: Qwen's YaRN command (``--max-model-len 131072`` over 40960 positions) on ``rocm/vllm-dev:nightly_*``
    was Invalid by vLLM 0.33's rule (YaRN no longer raises the limit, vllm#56446), which a build of an earlier main
    does not apply: a refusal only the newest release makes is not one fitgate can show for an unknown release.
    """
    invalid = PoolResult(pool, Verdict.UNKNOWN, None, ReasonCode.INVALID_SETTINGS, f"spec.serving: {exc}")
    version = spec.engine.version
    if version is None or engine_release(version) is not None:  # as _release_unknown: None is the newest, named
        return invalid
    found = first_admitting(
        serving.vllm_version,
        lambda release: plan_on_pool(model, pool, replace(serving, vllm_version=release), workload, share),
        lambda _: True,
    )
    if found is None:
        # hunt132 F1: Vertex Model Garden's Llama 3 notebook serves its pytorch-vllm-serve build (no vLLM release in
        # the tag) with --max-loras 100 beside --max-cpu-loras 8, which every stock release refuses: a build fitgate
        # cannot name may not apply vLLM's rule, so it is not shown Invalid for that alone (the first rule)
        why = (
            f"spec.serving: {exc}; every vLLM release fitgate models refuses it, but the release is unknown and its "
            "build may take it: name the release (the image tag, or engine.version) to check it exactly"
        )
    else:
        why = (
            f"spec.serving: {exc}; but the vLLM release is unknown, and vLLM {found[0]} takes the setting: name the "
            "release (the image tag, or engine.version) to check it exactly"
        )
    return PoolResult(pool, Verdict.UNKNOWN, None, ReasonCode.RELEASE_UNKNOWN, why)


def serving_config(spec: ModelDeploymentSpec) -> ServingConfig:
    """The sizing core's settings from a spec; one instance per value of what they are made from.

    Every evaluation needs them, and each new workload of a deployment (every new spec admitted) built the same
    settings again (9 us, issue 23). Remembered by the spec parts they read (frozen, so hashable unless a
    part holds a mapping: then built every time); the same instance each time also lets the plan memos,
    keyed by it, match by identity first.
    """
    key = (spec.serving, spec.engine.version, spec.placement.data_parallel_size, spec.placement.nodes_per_replica)
    try:
        return _SERVING.get_or_compute(key, lambda: _serving_config(spec))
    except TypeError:  # a part holding a mapping (multimodal limitPerPrompt): not hashable
        return _serving_config(spec)


#: Serving settings by the spec parts they are made from (:func:`serving_config`). Bound 1024: the distinct
#: settings of the deployments evaluated lately (their workloads left out, which most specs differ in).
_SERVING: BoundedMemo[tuple[Any, ...], ServingConfig] = BoundedMemo(1024)


def _serving_config(spec: ModelDeploymentSpec) -> ServingConfig:
    s = spec.serving
    mm = s.multimodal
    return ServingConfig(
        max_model_len=s.max_model_len if isinstance(s.max_model_len, int) else None,
        max_model_len_auto=s.max_model_len == "auto",
        kv_cache_memory_bytes=s.kv_cache_memory_bytes,
        allow_long_max_model_len=s.allow_long_max_model_len,
        performance_mode=s.performance_mode,
        cudagraph_mode=s.cudagraph_mode,
        cudagraph_memory_estimate=s.cudagraph_memory_estimate,
        use_v1=s.use_v1,
        flashinfer_sampler=s.flashinfer_sampler,
        runner=s.runner,
        enable_chunked_prefill=s.enable_chunked_prefill,
        cudagraph_capture_sizes=tuple(s.cudagraph_capture_sizes) if s.cudagraph_capture_sizes else None,
        max_cudagraph_capture_size=s.max_cudagraph_capture_size,
        kv_cache_dtype=s.kv_cache_dtype,
        mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype,
        dtype=s.dtype,
        quantization=s.quantization,
        tensor_parallel_size=s.tensor_parallel_size,
        pipeline_parallel_size=s.pipeline_parallel_size,
        pp_layer_partition=s.pp_layer_partition,
        gpu_memory_utilization=s.gpu_memory_utilization,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        vllm_version=engine_release(spec.engine.version),
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
        mm_max_pixels=mm.max_pixels if mm else None,
        mm_item_pixels=mm.profile_image_pixels if mm else None,
        mm_skip_profiling=mm.skip_profiling if mm else False,
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
    """The declared workload, if any: ``concurrentRequests`` split over ``spec.replicas``."""
    w = spec.workload
    return None if w is None else Workload(w.concurrent_requests, w.context_tokens, spec.replicas)


#: The model as ``--hf-overrides`` (``model.hfOverrides``) changes it, by checkpoint facts and overrides.
_OVERRIDDEN: IdentityMemo[ModelInput] = IdentityMemo(256)


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
    lean: bool = False,
) -> Evaluation:
    """Plan ``spec`` on every pool of ``gpus`` it may land on; see the module docstring.

    ``lean``: admission's evaluation, without what only the status shows and a review never does: a misfit's
    cluster-wide alternatives (a third of a misfit's cost) and the recommended engine args.
    """
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
    if spec.model.hf_overrides and facts is not None:
        overrides = json.dumps(spec.model.hf_overrides, sort_keys=True, default=str)
        try:
            model = _OVERRIDDEN.get(
                (facts,), (overrides,), functools.partial(to_model_input, facts, spec.model.hf_overrides)
            )
        except SizingError as exc:
            return unknown(ReasonCode.CHECKPOINT_INVALID, f"model.hfOverrides: {exc}", facts, inv)
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
                return unknown(ReasonCode.NO_NODE_YET, no_node_unknown(spec), facts, inv)
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
        spread = ""
        if share is not None and share.replicas and need > 1:  # N time-sliced/MPS GPUs may be N shares of one card
            cards = pool.gpus_per_node // share.replicas
            if share.mechanism is not Mechanism.TIME_SLICING or share.one_per_pod or cards < need:
                why = f"{need} GPUs per replica (TP x PP) on {share.mechanism} GPUs, {cards} card(s) per node: " + (
                    "the sharing refuses a pod that asks for more than one (MPS; GKE's time-sharing)"
                    if share.one_per_pod
                    else f"{need} shares would be shares of one card, and tensor parallelism needs distinct GPUs"
                )
                results.append(_short_of_gpus(pool, why))
                continue
            # hunt77: the device plugin hands a pod's time-sliced replicas out over the node's cards, the least
            # used first (k8s-device-plugin internal/rm/allocate.go distributedAlloc), so TP ranks get cards of their
            # own while that many are free, unless the plugin's failRequestsGreaterThanOne refuses the pod
            spread = (
                f"; the device plugin spreads a pod's {need} time-sliced GPUs over the node's {cards} cards while "
                "that many have a share free (a plugin with failRequestsGreaterThanOne refuses the pod)"
            )
        try:
            result = plan_on_pool(model, pool, serving, workload, share)
            if spread:
                verdict = Verdict.TIGHT if result.verdict is Verdict.FITS else result.verdict
                result = replace(result, verdict=verdict, message=result.message + spread)
        except NotModelledError as exc:  # vLLM takes the setting, fitgate cannot size it, on any pool: Unknown
            return unknown(ReasonCode.SETTINGS_NOT_MODELLED, f"spec.serving: {exc}", facts, inv)
        except SizingError as exc:
            results.append(_invalid_or_release_unknown(spec, model, pool, serving, workload, share, exc))
            continue
        # a pool with no node yet is planned per GPU only: its nodes are the autoscaler's to create
        per_card = _per_card(share, pool.gpu.memory_bytes) if need == 1 else 1
        results.append(
            result if pool.prospective else placed(result, spec.replicas, max(need, claimed or 0), nodes, own, per_card)
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
        # admission's (lean) evaluations search without the per-deployment memo: a new spec's workload is new to it,
        # a reviewed one is answered from the evaluation cache, and 8,192 remembered plans a review would keep
        # alive cost a sixth of a review's CPU (issue 23); reconcile's re-evaluations of a deployment use it
        find = search_suggestions if lean else suggest
        suggestions = find(model, best.pool.gpu, serving, workload, best.plan)
    best = _release_unknown(spec, model, best, serving, workload, spec_share)
    args: tuple[EngineArg, ...] = ()
    chosen: Suggestion | None = None
    if best.plan is not None and not lean:  # the same choice as `fitgate plan`: a misfit's args are those of the fix
        _, args, chosen = recommend(model, best.pool.gpu, serving, workload, best.plan, suggestions)
    message = message_of(best, suggestions, len(results))
    warnings: list[str] = []
    if best.verdict is Verdict.TIGHT:
        warnings.append(f"fitgate: verdict Tight on {best.pool.product}: {best.message.split(': ', 1)[-1]}")
    misfits = [r for r in results if r.verdict is Verdict.DOES_NOT_FIT]
    if best.verdict in (Verdict.FITS, Verdict.TIGHT) and misfits:
        names = ", ".join(r.pool.product for r in misfits)
        warnings.append(f"fitgate: it does not fit on {names}; set placement.gpuProduct to keep it off those nodes")
    if best.verdict is Verdict.UNKNOWN:
        warnings.append(f"fitgate: verdict Unknown: {best.message}")
    if spec.engine.version not in (None, UNKNOWN_RELEASE) and engine_release(spec.engine.version) is None:
        warnings.append(
            f"fitgate: engine.version {spec.engine.version[:80]!r} names no vLLM release fitgate knows; sized with the "
            "newest modelled release's accounting"
        )
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
    notes = notes_of(facts, best.plan)
    alternatives: tuple[tuple[GpuPool, Option], ...] = ()
    if with_suggestions and not lean and best.verdict is Verdict.DOES_NOT_FIT:
        alternatives = alternatives_of(model, inventory, spec, workload)
    speed = None
    fits = best.verdict in (Verdict.FITS, Verdict.TIGHT)
    if not lean and fits and best.plan is not None and spec.workload is not None:
        speed = speed_at_load(model, best.plan, spec.workload, spec.replicas)
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
        speed=speed,
    )
