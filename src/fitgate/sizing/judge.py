"""The verdict on a plan and its reasons, decided in two steps (:func:`prejudge` once, :func:`finish` per workload).

A plan's memory, and so every reason but two, does not depend on its workload: :func:`prejudge` decides and words
them once per settings (:func:`fitgate.sizing.plan.plan` keeps it with the rank plans it memoises), and
:func:`finish` adds what the workload decides (the workload beyond the KV pool, or near it) and the verdict. A
suggestion search plans a dozen candidates for every new workload of a misfit, and the wording of the same reasons
was half of each candidate's plan (issue 23). :func:`judge` is both steps at once, the same reasons in the same
order.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.activation import CUDA_CONTEXT_BYTES
from fitgate.sizing.cudagraphs import FULL_GRAPH_MODES
from fitgate.sizing.kv_specs import MambaSpec
from fitgate.sizing.parallel import EP_INTERNODE_RESIDENT_BYTES
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.results import KVSummary, PerGpu, RankPlan, Reason, Verdict
from fitgate.sizing.serving import ResolvedServing, Workload
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.verdict_rules import (
    ESTIMATE_ERROR_CAP_BYTES,
    ESTIMATE_ERROR_FRACTION,
    ESTIMATE_PRINT_SLACK_BYTES,
    TIGHT_FRACTION,
    OutsideNeed,
)
from fitgate.sizing.versions import parse_version

_KV_SHORT = frozenset({ReasonCode.KV_CACHE_TOO_SMALL_FOR_MAX_MODEL_LEN, ReasonCode.NO_KV_CACHE_MEMORY})


@dataclass(frozen=True)
class Prejudged:
    """What a plan's verdict is before its workload (:func:`prejudge`).

    Attributes:
        hard: The hard reasons no workload changes (the budget against the card, the KV pool against one
            ``max_model_len`` request), LoRA slots named.
        pool_short: ``hard`` holds a reason about the KV pool itself, so the workload is not checked against it.
        within: With ``pool_short``, the Tight reason replacing a shortfall within fitgate's error, else None.
        lora_suffix: What names the LoRA slots at the end of every hard reason ("" without LoRA).
        before: The Tight reasons that come before the workload's (the FlashInfer sampler, weights near the budget).
        near_max_model_len: Tight: one request takes over 90 % of the pool (only when the workload does not).
        after: The Tight reasons after it (memory outside the budget).
    """

    hard: tuple[Reason, ...]
    pool_short: bool
    within: Reason | None
    lora_suffix: str
    before: tuple[Reason, ...]
    near_max_model_len: Reason | None
    after: tuple[Reason, ...]


def _estimate_band(worst: RankPlan, g: PerGpu) -> tuple[int, int]:
    """(fitgate's fitted terms, the error band on them).

    The terms: activation, non-torch and the graph estimate where vLLM deducts it; the band: min(ESTIMATE_ERROR_FRACTION
    x them, ESTIMATE_ERROR_CAP_BYTES) + ESTIMATE_PRINT_SLACK_BYTES (verdict_rules).
    """
    fitted = worst.profile.activation_bytes + worst.profile.non_torch_bytes
    fitted += worst.profile.cuda_graph_bytes if g.cuda_graphs_in_budget else 0
    band = min(int(ESTIMATE_ERROR_FRACTION * fitted), ESTIMATE_ERROR_CAP_BYTES) + ESTIMATE_PRINT_SLACK_BYTES
    return fitted, band


def _within_estimate_error(hard: list[Reason], worst: RankPlan, kv: KVSummary, g: PerGpu) -> Reason | None:
    """The Tight reason replacing a KV shortfall smaller than the error of fitgate's fitted terms, else None.

    Only a shortfall of KV memory (not weights over the budget, a card too small for the stated KV size or an
    unsatisfiable budget): those terms are exact or vLLM's own refusals.
    """
    if not hard or any(r.code not in _KV_SHORT for r in hard) or g.weights_bytes > g.budget_bytes:
        return None
    miss = kv.one_request_bytes - worst.available_kv_bytes + worst.kv_short_bytes  # the whole deficit (hunt98 F1)
    return _tight_within_band(hard[0], miss, "short", worst, g)


def _tight_within_band(denial: Reason, miss_bytes: int, word: str, worst: RankPlan, g: PerGpu) -> Reason | None:
    """``denial`` as Tight when it misses by no more than the fitted terms' band (:func:`_estimate_band`), else None."""
    fitted, margin = _estimate_band(worst, g)
    if miss_bytes > margin:
        return None
    return Reason(
        ReasonCode.SHORT_WITHIN_ESTIMATE_ERROR,
        f"{denial.message}; {fmt_gib(miss_bytes)} {word}, within the error of fitgate's fitted activation, non-torch "
        f"and CUDA-graph terms ({fmt_gib(fitted)} here, +/- {fmt_gib(margin)} on the calibration runs): vLLM may "
        "start or refuse, so it is not denied",
    )


def _stated_kv_within_estimate_error(over: Reason, kv_bytes: int, worst: RankPlan, g: PerGpu) -> Reason | None:
    """The Tight reason replacing a stated KV size over the card by less than fitgate's error, else None (hunt90 F2).

    vLLM prints the ``--kv-cache-memory`` to copy "to fully utilize gpu memory": free memory at start less its
    measured non-KV memory and a redundancy buffer (v1/worker/gpu_worker.py 0.32.0 L995-1031); fitgate's fitted
    activation, non-torch and graph terms and its fixed CUDA context can each be larger than vLLM measured, so a copied
    size over by less than their band is not shown to fail. Weights and the stated size over the card stay DoesNotFit.
    """
    room = g.capacity_bytes - CUDA_CONTEXT_BYTES
    if g.weights_bytes + kv_bytes > room:
        return None
    return _tight_within_band(over, g.budget_bytes - room, "over", worst, g)


def prejudge(
    rs: ResolvedServing,
    worst: RankPlan,
    kv: KVSummary,
    g: PerGpu,
    outside: OutsideNeed | None = None,
    uncounted_bytes: int = 0,
    unified_memory: bool = False,
    pool_request_bytes: int = 0,
) -> Prejudged:
    """The reasons of a plan that its workload leaves alone, from the worst worker's numbers.

    ``kv`` and ``g`` as they are without the workload: its blocks, its fraction and the headroom are not read.
    ``uncounted_bytes``: memory the model's vLLM class takes that fitgate does not size (verdict_rules.UNCOUNTED_BYTES):
    one request that fits only in it is Tight. ``pool_request_bytes``: one request at full length where vLLM's start-up
    check counted sliding-window / chunked layers at their window (verdict_rules.pool_request_bytes): Tight above 90 %
    of the pool, never DoesNotFit (vLLM starts).
    """
    chain: list[Reason] = []
    budget, avail = g.budget_bytes, worst.available_kv_bytes
    kv_stated_near: Reason | None = None
    if rs.kv_cache_memory_bytes is not None and g.capacity_bytes - CUDA_CONTEXT_BYTES < g.budget_bytes:
        over = Reason(
            ReasonCode.KV_CACHE_MEMORY_EXCEEDS_GPU,
            f"kv_cache_memory_bytes {fmt_gib(rs.kv_cache_memory_bytes)} + weights and activations "
            f"{fmt_gib(worst.non_kv_bytes)} = {fmt_gib(budget)} per GPU, more than the "
            f"{fmt_gib(g.capacity_bytes - CUDA_CONTEXT_BYTES)} a {fmt_gib(g.capacity_bytes)} card has "
            "after its CUDA context: vLLM runs out of memory allocating the KV cache",
        )
        kv_stated_near = _stated_kv_within_estimate_error(over, rs.kv_cache_memory_bytes, worst, g)
        if kv_stated_near is None:
            chain.append(over)
    elif (
        g.capacity_bytes - rs.pre_snapshot_bytes < g.budget_bytes
        and rs.free_memory_check
        and not rs.extensible_kv_cache
    ):
        # vLLM refuses free < requested at its start snapshot (v1/worker/utils.py 0.33.0 L716-772; from 0.9.1,
        # versions.FREE_MEMORY_CHECK_SINCE); free is total less what exists before it (CUDA context, NCCL at
        # TP > 1). 0.34's extensible cache skips this check: the budget is only a cap (v1/worker/utils.py 0.34.0
        # L783-797).
        held = rs.pre_snapshot_bytes
        chain.append(
            Reason(
                ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH,
                f"gpu_memory_utilization {rs.gpu_memory_utilization} asks for {fmt_gib(budget)} "
                f"of a {fmt_gib(g.capacity_bytes)} "
                f"card, but the CUDA context{' and NCCL' if rs.tensor_parallel_size > 1 else ''} already "
                f"hold ~{fmt_gib(held)}: vLLM refuses to start",
            )
        )
    pool: Reason | None = None
    if avail <= 0 and rs.extensible_kv_cache:
        pool = Reason(
            ReasonCode.WEIGHTS_EXCEED_BUDGET if g.weights_bytes > budget else ReasonCode.NO_KV_CACHE_MEMORY,
            f"weights {fmt_gib(g.weights_bytes)} + activation {fmt_gib(g.activation_bytes)} + non-torch "
            f"{fmt_gib(g.non_torch_bytes)} + CUDA graphs {fmt_gib(g.cuda_graph_bytes)}, with vLLM "
            f"{rs.vllm_version}'s warm-up reserve and margin, leave no memory for the KV cache in "
            f"{fmt_gib(budget)} per GPU",
        )
    elif avail <= 0:
        pool = Reason(
            ReasonCode.WEIGHTS_EXCEED_BUDGET if g.weights_bytes > budget else ReasonCode.NO_KV_CACHE_MEMORY,
            f"weights {fmt_gib(g.weights_bytes)} + activation {fmt_gib(g.activation_bytes)} + non-torch "
            f"{fmt_gib(g.non_torch_bytes)}"
            + (f" + CUDA graphs {fmt_gib(g.cuda_graph_bytes)}" if g.cuda_graphs_in_budget else "")
            + f" = {fmt_gib(worst.non_kv_bytes)} per GPU exceed the "
            f"{fmt_gib(budget)} budget ({rs.gpu_memory_utilization} x {fmt_gib(g.capacity_bytes)}): "
            "no memory left for the KV cache",
        )
    elif kv.one_request_bytes > avail:
        pool = Reason(
            ReasonCode.KV_CACHE_TOO_SMALL_FOR_MAX_MODEL_LEN,
            f"one {rs.max_model_len}-token request needs {fmt_gib(kv.one_request_bytes)} of KV cache "
            f"per GPU but only "
            f"{fmt_gib(avail)} is left after {fmt_gib(worst.non_kv_bytes)} of weights and activations",
        )
    if pool is not None:
        chain.append(pool)
    suffix = ""
    if g.lora_bytes and rs.lora is not None:  # issue 20: name the LoRA slots in the numbers
        suffix = (
            f" (weights include {fmt_gib(g.lora_bytes)} of LoRA slots: --max-loras {rs.lora.max_loras} x "
            f"--max-lora-rank {rs.lora.max_lora_rank})"
        )
    mamba_hard, mamba_soft = _mamba_blocks(rs, worst, kv, g) if pool is None else (None, None)
    if mamba_hard is not None:
        chain.append(mamba_hard)
    hard = [Reason(r.code, r.message + suffix) for r in chain] if suffix else chain
    within = _within_estimate_error(hard, worst, kv, g) if pool is not None else None
    return Prejudged(
        tuple(hard),
        pool is not None,
        within,
        suffix,
        (
            *((kv_stated_near,) if kv_stated_near else ()),
            *((mamba_soft,) if mamba_soft else ()),
            *_before(rs, worst, kv, g),
        ),
        _near_max_model_len(rs, worst, kv, uncounted_bytes, pool_request_bytes),
        (*_after(rs, g, outside), *_unified(rs, g, unified_memory)),
    )


#: The first release that refuses to start a hybrid Mamba model whose ``max_num_seqs`` exceeds its KV cache blocks
#: under full CUDA graphs (config/compilation.py 0.20.0 L1420-1441, 0.34.0 L1659-1680, vllm-project/vllm#38270):
#: each decode sequence needs one Mamba block ("max_num_seqs (1024) exceeds available Mamba cache blocks (969)",
#: vllm#49064 on an H100 at 0.28; NVIDIA's retail-shopping-assistant#95, Nemotron 120B on 2 x H100).
MAMBA_BLOCKS_CHECK_SINCE = (0, 20, 0)


def _mamba_blocks(
    rs: ResolvedServing, worst: RankPlan, kv: KVSummary, g: PerGpu
) -> tuple[Reason | None, Reason | None]:
    """(DoesNotFit, Tight) for ``max_num_seqs`` above a hybrid Mamba model's KV cache blocks (vLLM 0.20+).

    Not with 0.34's extensible KV cache (its graphs are captured before the pool is measured) nor without full CUDA
    graphs (``--enforce-eager``, PIECEWISE). DoesNotFit only beyond the blocks fitgate's error band could add
    (verdict_rules.ESTIMATE_ERROR_FRACTION, as for a KV shortfall); within it, Tight.
    """
    if (
        parse_version(rs.vllm_version) < MAMBA_BLOCKS_CHECK_SINCE
        or rs.extensible_kv_cache
        or not rs.cuda_graphs
        or rs.cudagraph_mode not in FULL_GRAPH_MODES
        or rs.max_num_seqs <= kv.num_blocks
        or not any(isinstance(s, MambaSpec) for s, _ in worst.layout.spec_counts)
    ):
        return None, None
    _, band = _estimate_band(worst, g)
    most = (max(worst.available_kv_bytes, 0) + band) // max(1, worst.layout.bytes_per_block)
    message = (
        f"max_num_seqs {rs.max_num_seqs} exceeds the {kv.num_blocks} KV cache blocks per GPU, and each decode "
        f"sequence of a hybrid Mamba model holds one: vLLM {rs.vllm_version} refuses to capture its full CUDA graphs "
        f"(--max-num-seqs {kv.num_blocks} or fewer)"
    )
    if rs.draft_tokens:
        # with speculative decoding an attention backend without uniform-batch full graphs (FlashInfer without its
        # TRTLLM kernels: GB10, RTX 5090 / PRO 6000) makes vLLM capture PIECEWISE graphs only, and the check is not
        # run (config/compilation.py 0.20.0 L1372-1385; hunt49 F1: spark-vllm-docker#200, vllm#49547): not denied
        hedge = (
            "; with speculative decoding vLLM may fall back to PIECEWISE graphs, which skip this check, so not denied"
        )
        return None, Reason(ReasonCode.MAX_NUM_SEQS_EXCEEDS_MAMBA_BLOCKS, message + hedge)
    if rs.max_num_seqs > most:
        return Reason(ReasonCode.MAX_NUM_SEQS_EXCEEDS_MAMBA_BLOCKS, message), None
    within = f"{message}; within the error of fitgate's fitted terms ({most} blocks at most), so not denied"
    return None, Reason(ReasonCode.MAX_NUM_SEQS_EXCEEDS_MAMBA_BLOCKS, within)


#: The share of a unified-memory GPU's total that vLLM can expect free at start-up (hunt28 F6): GB10 runs at
#: gpu_memory_utilization 0.85 in vllm-project/recipes, whose PR #632 says the default 0.92 "can't be satisfied and
#: OOMs at startup" (CUDA free ~102 of 121.69 GiB, MiaAI-Lab issue #47); another public run had 112.26 of 119.63 GiB
#: free and started at 0.92 (hunt33 O3): what is free is the host's to decide, so above 0.85 is Tight, never denied.
UNIFIED_FREE_FRACTION = 0.85


def _unified(rs: ResolvedServing, g: PerGpu, unified_memory: bool) -> tuple[Reason, ...]:
    """Tight: a budget above what a unified-memory GPU has free at start-up (the OS holds the rest).

    Not with 0.34's extensible KV cache, which sizes the pool from the memory free after warm-up and does not refuse
    a budget above the free memory (docs/vllm-releases.md section 12).
    """
    if not unified_memory or rs.extensible_kv_cache or rs.kv_cache_memory_bytes is not None:
        return ()
    if g.budget_bytes <= UNIFIED_FREE_FRACTION * g.capacity_bytes + (1 << 20):
        return ()
    return (
        Reason(
            ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET,
            f"the budget is {g.budget_bytes / g.capacity_bytes:.0%} of a memory the OS shares (unified memory): vLLM "
            "refuses a budget above the memory free at start-up, which the OS and other processes decide (a public "
            "DGX Spark run had 112.26 of 119.63 GiB free and started at 0.92; the recipes run at "
            f"{UNIFIED_FREE_FRACTION} and report the default failing)",
        ),
    )


def _before(rs: ResolvedServing, worst: RankPlan, kv: KVSummary, g: PerGpu) -> tuple[Reason, ...]:
    soft: list[Reason] = []
    budget, avail = g.budget_bytes, worst.available_kv_bytes
    extra = worst.profile.without_flashinfer_bytes
    if extra and (avail - extra <= 0 or kv.one_request_bytes > avail - extra):
        # Tight, never DoesNotFit: vLLM 0.8-0.11.0 samples with FlashInfer wherever it is installed (vLLM's image);
        # a pip install without it profiles PyTorch's sort, which vllm#23278 (0.10.1, one H100) ran out on, while
        # gpustack's vLLM 0.10.2 runs of the same model and card started (activation.py ``_flashinfer_sampler``).
        soft.append(
            Reason(
                ReasonCode.SAMPLER_NEEDS_FLASHINFER,
                f"fits with the FlashInfer top-k/top-p sampler that vLLM {rs.vllm_version} uses when FlashInfer is "
                f"installed (vLLM's own image ships it); without it (a pip install without FlashInfer, or "
                f"VLLM_USE_FLASHINFER_SAMPLER=0) the profiling sampler pass takes {fmt_gib(extra)} more and leaves "
                + (
                    "no memory for the KV cache"
                    if avail - extra <= 0
                    else f"{fmt_gib(avail - extra)} for the KV cache, less than one {rs.max_model_len}-token "
                    f"request's {fmt_gib(kv.one_request_bytes)}"
                )
                + ": vLLM would refuse to start",
            )
        )
    # with --kv-cache-memory-bytes the "budget" is weights + activations + the KV asked for, full by construction
    # (hunt29 F3: every such plan was Tight, the MI325X DeepSeek-V4-Flash recipe and 1 GB on an H200 alike)
    if budget > 0 and worst.non_kv_bytes > TIGHT_FRACTION * budget and rs.kv_cache_memory_bytes is None:
        soft.append(
            Reason(
                ReasonCode.WEIGHTS_NEAR_BUDGET,
                f"weights and activations take {fmt_gib(worst.non_kv_bytes)} of the {fmt_gib(budget)} budget "
                f"({worst.non_kv_bytes / budget:.0%})",
            )
        )
    return tuple(soft)


def _near_max_model_len(
    rs: ResolvedServing, worst: RankPlan, kv: KVSummary, uncounted: int = 0, pool_request: int = 0
) -> Reason | None:
    avail = worst.available_kv_bytes
    if avail <= 0:  # no KV at all is a hard reason, not this
        return None
    if pool_request > TIGHT_FRACTION * avail:
        return Reason(
            ReasonCode.MAX_MODEL_LEN_NEAR_KV_CAPACITY,
            f"one {rs.max_model_len}-token request uses {pool_request / avail:.0%} of the KV pool, which holds the "
            "sliding-window / chunked layers at full length (vLLM's start-up check counts their window, so it starts)",
        )
    if kv.one_request_bytes <= TIGHT_FRACTION * avail and uncounted and kv.one_request_bytes > avail - uncounted:
        return Reason(
            ReasonCode.MAX_MODEL_LEN_NEAR_KV_CAPACITY,
            f"one {rs.max_model_len}-token request needs {fmt_gib(kv.one_request_bytes)} of the "
            f"{fmt_gib(avail)} KV pool, but this model's workspaces, which fitgate does not count, took up to "
            f"{fmt_gib(uncounted)} a GPU on public runs: vLLM may find too little",
        )
    if kv.one_request_bytes <= TIGHT_FRACTION * avail:
        return None
    return Reason(
        ReasonCode.MAX_MODEL_LEN_NEAR_KV_CAPACITY,
        f"one {rs.max_model_len}-token request uses {kv.one_request_bytes / avail:.0%} of the KV pool",
    )


def _after(rs: ResolvedServing, g: PerGpu, outside: OutsideNeed | None) -> tuple[Reason, ...]:
    soft: list[Reason] = []
    # Tight, never DoesNotFit: on vLLM 0.19's H100 logs gpt-oss-20b TP2 at gmu 0.95 ran out of memory here and
    # Llama 4 Scout TP4 at gmu 0.95 started, with the same 4.08 GiB floor against 3.96 GiB outside
    # (benchmarks/calibration/public-2026.jsonl): the floor cannot tell a run that starts from one that does not.
    if (
        outside is not None
        and not rs.extensible_kv_cache
        and rs.kv_cache_memory_bytes is None
        and g.outside_budget_bytes < outside.floor_bytes
    ):
        soft.append(
            Reason(
                ReasonCode.OUTSIDE_BUDGET_TOO_SMALL,
                f"only {fmt_gib(g.outside_budget_bytes)} of the card is outside the gpu_memory_utilization budget, "
                f"but the CUDA context and NCCL (~{fmt_gib(outside.pre_snapshot_bytes)}), "
                + (
                    f"the CUDA graphs captured after the KV cache (~{fmt_gib(outside.graphs_bytes)}) "
                    if outside.graphs_bytes
                    else ""
                )
                + f"and the sampler warm-up's logits ({fmt_gib(outside.sampler_floor_bytes)}) need at least "
                f"{fmt_gib(outside.floor_bytes)}: vLLM may run out of memory after sizing the KV cache; lower "
                "--gpu-memory-utilization or --max-num-seqs (Tight, not denied: the graph pool in that figure is "
                "fitted, and a public run has started 0.1 GiB below it)",
            )
        )
    reserve = outside.fitted_bytes if outside is not None else CUDA_CONTEXT_BYTES
    # an EP group across nodes holds its NCCL communicators before vLLM's snapshot (fitgate.sizing.parallel)
    communicators = EP_INTERNODE_RESIDENT_BYTES if rs.parallel.internode else 0
    reserve += communicators
    # 0.34's extensible cache measures graphs and warm-up and keeps a margin itself (fitgate.sizing.extensible)
    unmeasured = not rs.extensible_kv_cache and rs.kv_cache_memory_bytes is None
    if g.outside_budget_bytes < reserve and unmeasured and not soft:  # not when the floor above is already short
        soft.append(
            Reason(
                ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET,
                f"only {fmt_gib(g.outside_budget_bytes)} of the card is outside the gpu_memory_utilization budget; "
                "the CUDA context and NCCL"
                # hunt128 F4: an eager engine (--enforce-eager) captures no graphs, so they are not named
                + (", the CUDA graphs captured after the KV cache" if outside and outside.graphs_bytes else "")
                + (f", a multi-node EP group's communicators (~{fmt_gib(communicators)})" if communicators else "")
                + f" and the sampler warm-up need ~{fmt_gib(reserve)} by fitgate's fitted terms",
            )
        )
    return tuple(soft)


def _requests_text(workload: Workload) -> str:
    """``16 concurrent requests``, or ``16 concurrent requests per replica (64 over 4 replicas)``."""
    text = f"{workload.per_replica} concurrent requests"
    if workload.replicas > 1:
        text += f" per replica ({workload.concurrency} over {workload.replicas} replicas)"
    return text


def finish(
    pre: Prejudged, rs: ResolvedServing, kv: KVSummary, workload: Workload | None
) -> tuple[Verdict, tuple[Reason, ...]]:
    """The verdict and its reasons: ``pre`` and what the workload (``kv``'s workload blocks and fraction) adds."""
    within = pre.within
    if pre.pool_short:  # the pool itself is short: the workload is not checked against it
        if within is None:
            return Verdict.DOES_NOT_FIT, pre.hard
        soft = [within]
    else:
        hard = pre.hard
        if workload is not None and kv.workload_blocks is not None and kv.workload_blocks > kv.num_blocks:
            over = Reason(
                ReasonCode.WORKLOAD_EXCEEDS_KV_CACHE,
                f"{_requests_text(workload)} x {workload.context_tokens} tokens need {kv.workload_blocks} KV "
                f"blocks per GPU; the pool has {kv.num_blocks} (max concurrency {kv.max_concurrency:.2f} at "
                f"{rs.max_model_len} tokens)" + pre.lora_suffix,
            )
            hard = (*hard, over)
        if hard:
            return Verdict.DOES_NOT_FIT, hard
        soft = []
    soft.extend(pre.before)
    if kv.workload_fraction is not None and kv.workload_fraction > TIGHT_FRACTION:
        soft.append(
            Reason(
                ReasonCode.WORKLOAD_NEAR_KV_CAPACITY,
                f"the declared workload uses {kv.workload_fraction:.0%} of the KV pool ({kv.workload_blocks} of "
                f"{kv.num_blocks} blocks)",
            )
        )
    elif pre.near_max_model_len is not None and within is None:
        soft.append(pre.near_max_model_len)
    soft.extend(pre.after)
    if soft:
        return Verdict.TIGHT, tuple(soft)
    msg = f"{kv.num_blocks} KV blocks ({kv.reported_tokens} tokens) per GPU"
    if workload is not None and kv.workload_fraction is not None:
        msg += f"; the workload uses {kv.workload_fraction:.0%} of them"
    return Verdict.FITS, (Reason(ReasonCode.FITS, msg),)


def judge(
    rs: ResolvedServing,
    worst: RankPlan,
    kv: KVSummary,
    g: PerGpu,
    workload: Workload | None,
    outside: OutsideNeed | None = None,
) -> tuple[Verdict, tuple[Reason, ...]]:
    """The verdict and its reasons from the worst worker's numbers and what must fit outside the budget."""
    return finish(prejudge(rs, worst, kv, g, outside), rs, kv, workload)
