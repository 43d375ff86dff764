"""What to change when a deployment does not fit (the engine args to run with: :mod:`fitgate.sizing.engine_args`).

Every suggestion is checked by planning the changed settings again (pure: nothing is mutated), so a
suggestion is only offered when it really fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.sizing.dtypes import (
    FP8_KV_MIN_COMPUTE_CAPABILITY,
    FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY,
    compute_capability_at_least,
)
from fitgate.sizing.engine_args import EngineArg, engine_args, flag_words
from fitgate.sizing.errors import SizingError
from fitgate.sizing.frozen import evolve
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.lora import LORA_RANKS
from fitgate.sizing.memo import MISS, IdentityMemo, Miss
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.quantization import moe_tp_split_refused
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.serving import MAX_REPLICAS, ResolvedServing
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.verdict_rules import TIGHT_FRACTION, short_within_error
from fitgate.sizing.versions import parse_version

SAFE_MAX_GPU_MEMORY_UTILIZATION = 0.95
TP_CHOICES = (2, 4, 8, 16)
#: ``--enable-expert-parallel`` from 0.8.0 (arg_utils.py L439; not 0.7.3), ``--data-parallel-size`` 0.8.5 (L535).
EXPERT_PARALLEL_FLAGS_SINCE = ((0, 8, 0), (0, 8, 5))
#: The two changes of a workload that its KV pool cannot hold: fewer requests, or the same over more replicas.
CUT_CONCURRENCY = "workload.concurrentRequests"
ADD_REPLICAS = "replicas"


@dataclass(frozen=True)
class Suggestion:
    """One change of settings (one flag or several together), the verdict it gives and what it costs."""

    changes: tuple[tuple[str, str], ...]  # (vLLM flag, value)
    verdict: Verdict
    summary: str
    gpus: int = 1  # GPUs per replica with the change (TP x PP)
    cost: int = 0  # what is given up besides GPUs (see CHANGE_COST)
    replicas: int = 1  # replicas the workload is split over with the change (issue 24)

    @property
    def total_gpus(self) -> int:
        """The GPUs of every replica: what the suggestions are ranked by first."""
        return self.gpus * self.replicas

    @property
    def cuts_workload(self) -> bool:
        """It serves fewer requests than the workload asked for (ranked after every change that serves them)."""
        return any(flag == CUT_CONCURRENCY for flag, _ in self.changes)

    @property
    def flags(self) -> str:
        """The change as vLLM flags, e.g. ``--kv-cache-dtype fp8``; a switch alone (``--enforce-eager``)."""
        return " ".join(" ".join(flag_words(k, v)) for k, v in self.changes)


def _try(model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None) -> Plan | None:
    try:
        return plan(model, gpu, serving, workload)
    except SizingError:
        return None


#: What a change gives up besides GPUs, summed over the changes of a suggestion: nothing (a bigger
#: budget), decode speed (no CUDA graphs), a little precision (fp8 KV cache), longer requests or
#: precision of the weights (fp8), and finally capacity the workload asked for.
CHANGE_COST = {
    "--gpu-memory-utilization": 0,
    "--tensor-parallel-size": 0,  # paid in GPUs
    "--data-parallel-size": 0,  # paid in GPUs
    "--enable-expert-parallel": 0,
    "--enforce-eager": 1,
    "--kv-cache-dtype": 1,
    "--max-model-len": 2,
    "--quantization": 2,
    CUT_CONCURRENCY: 3,
    ADD_REPLICAS: 0,  # paid in GPUs (issue 24: more replicas instead of fewer requests)
    # issue 20: fewer LoRA slots serve fewer adapters in one batch; a lower rank refuses larger adapters
    "--max-loras": 1,
    "--max-lora-rank": 2,
    "--max-num-seqs": 1,  # fewer sequences decoded at once (a hybrid Mamba model's blocks bound them anyway)
    "--max-num-batched-tokens": 1,  # fewer prompt tokens a step: a longer time to first token (hunt180 F1)
}
_GMU_STEP = 0.01
_MIN_GMU = 0.5
_MIN_TIGHT_FIX_GMU = 0.8


@dataclass(frozen=True)
class _Move:
    """One change to try: the flags, the settings it changes and the workload it gives, and why."""

    changes: tuple[tuple[str, str], ...]
    fields: dict[str, Any]  # ServingConfig fields and their new values
    workload: Workload | None  # None: the deployment's own
    why: str
    cost: int = field(init=False)  # what its changes give up (CHANGE_COST)
    tp: int | None = field(init=False)  # the tensor-parallel size it sets, if any
    dp: int | None = field(init=False)  # the data-parallel size it sets, if any

    def __post_init__(self) -> None:
        object.__setattr__(self, "cost", sum(CHANGE_COST.get(flag, 3) for flag, _ in self.changes))
        object.__setattr__(self, "tp", self.fields.get("tensor_parallel_size"))
        object.__setattr__(self, "dp", self.fields.get("data_parallel_size"))


_OUTSIDE = frozenset(
    {
        ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET,
        ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH,
        ReasonCode.OUTSIDE_BUDGET_TOO_SMALL,
    }
)


def _moves(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None, current: Plan
) -> list[list[_Move]]:
    """The changes to try, by kind (each kind holds alternatives; a suggestion takes at most one of a kind)."""
    rs = current.serving
    short_outside = any(r.code in _OUTSIDE for r in current.reasons)
    owners = (model.arch, gpu, serving, rs)
    kinds = list(
        _SETTINGS_MOVES.get(owners, (short_outside,), lambda: _settings_moves(model, gpu, serving, rs, short_outside))
    )
    if any(r.code is ReasonCode.MAX_NUM_SEQS_EXCEEDS_MAMBA_BLOCKS for r in current.reasons) and current.kv.num_blocks:
        # a hybrid Mamba model decodes at most one sequence per KV block under full CUDA graphs (judge._mamba_blocks)
        # the block count itself (Tight when within the fitted terms' band), and the largest power of two below it,
        # clear of the band (hunt130 F2: recipes PR #551 merged 512 for Qwen3.6-27B-FP8 on an H100 at 856 blocks;
        # fitgate proposed a second GPU, as 856 alone was only Tight)
        blocks = current.kv.num_blocks
        counts = sorted({blocks, 1 << (max(1, blocks - 1).bit_length() - 1)} - {0}, reverse=True)
        kinds.append(
            [
                _Move((("--max-num-seqs", str(n)),), {"max_num_seqs": n}, None, f"one Mamba block each, of {blocks}")
                for n in counts
                if n < rs.max_num_seqs
            ]
        )
    if workload is not None and current.kv.workload_blocks and current.kv.num_blocks:
        per_request = current.kv.workload_blocks / workload.per_replica
        most = int(current.kv.num_blocks / per_request)
        if 0 < most < workload.per_replica:
            total = most * workload.replicas
            kinds.append(
                [
                    _Move(
                        ((CUT_CONCURRENCY, str(total)),),
                        {},
                        replace(workload, concurrency=total),
                        f"the pool holds {most} requests of {workload.context_tokens} tokens"
                        + (f" ({total} over {workload.replicas} replicas)" if workload.replicas > 1 else ""),
                    )
                ]
            )
    return kinds


def _spread(workload: Workload | None, result: Plan) -> _Move | None:
    """The workload over the fewest replicas whose pools each hold their share within 90 % (else fill them).

    Computed on the plan it is combined with, as :func:`_shorter` is (issue 24: more replicas instead of fewer
    requests). None when the workload is already within ``result``'s pool or one request does not fit in it.
    """
    kv = result.kv
    if workload is None or not kv.workload_blocks or not kv.num_blocks or kv.workload_blocks <= kv.num_blocks:
        return None
    per_request = kv.workload_blocks / workload.per_replica
    share = int(kv.num_blocks * TIGHT_FRACTION / per_request) or int(kv.num_blocks / per_request)
    if share < 1:
        return None
    n = -(-workload.concurrency // share)
    if not workload.replicas < n <= MAX_REPLICAS:
        return None
    return _Move(
        ((ADD_REPLICAS, str(n)),),
        {},
        replace(workload, replicas=n),
        f"{n} replicas hold {workload.concurrency} requests of {workload.context_tokens} tokens, "
        f"{-(-workload.concurrency // n)} each",
    )


def _settings_moves(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, rs: ResolvedServing, short_outside: bool
) -> tuple[list[_Move], ...]:
    """The kinds of changes of the settings (:func:`_moves` without the workload's): the same for every workload."""
    kinds: list[list[_Move]] = []
    gmus: list[_Move] = []
    if short_outside:
        gmu = round(rs.gpu_memory_utilization - _GMU_STEP, 2)
        while gmu > _MIN_GMU and len(gmus) < 15:
            gmus.append(
                _Move(
                    (("--gpu-memory-utilization", f"{gmu}"),),
                    {"gpu_memory_utilization": gmu},
                    None,
                    f"leave {fmt_gib(int(gpu.memory_bytes * (1 - gmu)))} outside the budget for CUDA graphs "
                    "and warm-up",
                )
            )
            gmu = round(gmu - _GMU_STEP, 2)
        if not rs.enforce_eager:
            kinds.append([_Move((("--enforce-eager", "true"),), {"enforce_eager": True}, None, "no CUDA graphs")])
    else:
        gmu = round(rs.gpu_memory_utilization + _GMU_STEP, 2)
        while gmu <= SAFE_MAX_GPU_MEMORY_UTILIZATION:
            gmus.append(
                _Move(
                    (("--gpu-memory-utilization", f"{gmu}"),),
                    {"gpu_memory_utilization": gmu},
                    None,
                    f"a {fmt_gib(int(gpu.memory_bytes * gmu))} budget",
                )
            )
            gmu = round(gmu + _GMU_STEP, 2)
    kinds.append(gmus)
    kinds.append(
        [
            _Move(
                (("--tensor-parallel-size", str(tp)),),
                {"tensor_parallel_size": tp},
                None,
                f"weights and KV heads split over {tp} GPUs",
            )
            for tp in TP_CHOICES
            if tp > rs.tensor_parallel_size
            and moe_tp_split_refused(model.arch, tp, serving.enable_expert_parallel, parse_version(rs.vllm_version))
            is None
        ]
    )
    if model.arch.is_moe:
        kinds.append(_expert_parallel_moves(serving, rs))
    if (model.arch.windowed_attention or model.arch.compressed_sparse_mla) and rs.max_in_flight_tokens > (
        rs.max_num_batched_tokens
    ):
        # hunt180 F1: from vLLM 0.26 a sliding-window page set holds every in-flight batch per request (two batches
        # of max_num_batched_tokens with async scheduling: resolve.max_in_flight_tokens); a smaller step shrinks it.
        # DeepSeek-V4-Pro at 200000 tokens on H200 DP 8 needs 9.98 GiB a request at 8192, 3.31 GiB at 2048.
        kinds.append(
            [
                _Move(
                    (("--max-num-batched-tokens", str(tokens)),),
                    {"max_num_batched_tokens": tokens},
                    None,
                    f"each request's windowed pages hold {rs.max_in_flight_tokens // rs.max_num_batched_tokens}"
                    f" in-flight batches of {tokens} tokens, not {rs.max_num_batched_tokens}",
                )
                for tokens in SMALL_STEP_TOKENS
                if max(rs.max_num_seqs, 1) <= tokens < rs.max_num_batched_tokens
            ]
        )
    fp8_kv = compute_capability_at_least(gpu.compute_capability, FP8_KV_MIN_COMPUTE_CAPABILITY)
    if rs.kv_dtype_bytes > 1 and fp8_kv:
        kinds.append(
            [
                _Move(
                    (("--kv-cache-dtype", "fp8"),),
                    {"kv_cache_dtype": "fp8"},
                    None,
                    "fp8 KV cache halves bytes per token",
                )
            ]
        )
    fp8_weights = compute_capability_at_least(gpu.compute_capability, FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY)
    if model.arch.quantization is None and rs.quantization is None and fp8_weights:
        kinds.append(
            [
                _Move(
                    (("--quantization", "fp8"),),
                    {"quantization": "fp8"},
                    None,
                    "fp8 weights (or an FP8 / INT4 checkpoint) halve the weight bytes",
                )
            ]
        )
    if rs.lora is not None:  # issue 20: LoRA slots (fitgate.sizing.lora)
        kinds.extend(_lora_moves(serving, rs.lora.max_loras, rs.lora.max_lora_rank))
    return tuple(kinds)


#: :func:`_settings_moves` by the model's, GPU's, settings' and resolved settings' identity and whether the
#: memory outside the budget is short. Bound 4096, as the candidates they make (:data:`_CANDIDATES`): every new
#: workload of a misfit tries the same moves, and building them (their words, a dozen budgets) was a tenth of a
#: search (issue 23). The lists are never changed: :func:`_moves` copies the tuple into its own list.
_SETTINGS_MOVES: IdentityMemo[tuple[list[_Move], ...]] = IdentityMemo(4096)


#: The step budgets (``--max-num-batched-tokens``) a fix may lower to where windowed KV pages hold in-flight batches.
SMALL_STEP_TOKENS = (4096, 2048)


def _lora_moves(serving: ServingConfig, loras: int, rank: int) -> list[list[_Move]]:
    """Fewer ``--max-loras`` (halving) and lower ``--max-lora-rank`` (vLLM's ranks).

    Each slot is ``max_lora_rank`` wide in every target module (fitgate.sizing.lora).
    """
    fewer = []
    n = loras // 2
    while n >= 1:
        fewer.append(
            _Move(
                (("--max-loras", str(n)),),
                {"max_loras": n},
                None,
                f"{n} adapter slot(s) instead of {loras}",
            )
        )
        n //= 2
    lower = [
        _Move(
            (("--max-lora-rank", str(r)),),
            {"max_lora_rank": r},
            None,
            f"slots of rank {r} instead of {rank} (adapters of a higher rank are refused)",
        )
        for r in sorted((r for r in LORA_RANKS if 8 <= r < rank), reverse=True)
    ]
    return [kind for kind in (fewer, lower) if kind]


def _shorter(serving: ServingConfig, workload: Workload | None, result: Plan) -> _Move | None:
    """The longest ``--max-model-len`` (rounded down to 1024) that ``result``'s KV pool holds."""
    fit = result.max_model_len_that_fits
    if not fit or fit >= result.serving.max_model_len:
        return None
    rounded = fit - fit % 1024 if fit >= 2048 else fit
    if workload is not None and workload.context_tokens > rounded:
        return None  # the workload's requests would be refused
    return _Move(
        (("--max-model-len", str(rounded)),),
        {"max_model_len": rounded, "max_model_len_auto": False},
        None,
        f"the longest context that fits is {fit} tokens",
    )


#: Engine-rank counts tried for a MoE model with expert parallelism (docs/parallelism.md).
EP_DP_CHOICES = (2, 4, 8, 16)


def _expert_parallel_moves(serving: ServingConfig, rs: ResolvedServing) -> list[_Move]:
    """For a MoE model: whole experts over the GPUs it has, then over DP x TP GPUs (mildest first).

    vLLM's EP group is TP x DP (fused_moe/config.py 0.33.0 L1105-1114, L1227-1244): more engine
    ranks spread the experts thinner while attention stays TP-sharded in each rank.
    """
    lay, tp = rs.parallel, rs.tensor_parallel_size
    moves: list[_Move] = []
    version = parse_version(rs.vllm_version) if rs.vllm_version else EXPERT_PARALLEL_FLAGS_SINCE[1]
    if version < EXPERT_PARALLEL_FLAGS_SINCE[0]:
        return moves  # hunt170 F4: a flag the release lacks is no fix ("unrecognized arguments")
    if not lay.expert_parallel and tp * lay.data_parallel_size > 1:
        moves.append(
            _Move(
                (("--enable-expert-parallel", "true"),),
                {"enable_expert_parallel": True},
                None,
                f"whole experts over the same {tp * lay.data_parallel_size} GPUs",
            )
        )
    for dp in EP_DP_CHOICES if version >= EXPERT_PARALLEL_FLAGS_SINCE[1] else ():
        if dp <= lay.data_parallel_size or tp * rs.pipeline_parallel_size * dp > 64:
            continue
        moves.append(
            _Move(
                (("--data-parallel-size", str(dp)), ("--enable-expert-parallel", "true")),
                {"data_parallel_size": dp, "enable_expert_parallel": True},
                None,
                f"{dp} engine ranks of TP {tp} with the experts spread over {tp * dp} GPUs",
            )
        )
    return moves


def suggest(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    current: Plan,
    limit: int = 6,
) -> tuple[Suggestion, ...]:
    """:func:`search_suggestions`, memoised per deployment (model, GPU, settings, workload).

    The same deployment evaluated again (a node joined elsewhere in the cluster, a re-applied spec) gets
    its suggestions without re-planning a dozen candidates (issue 23). Keyed by the model's and GPU's
    identity and the settings, workload and limit; a hit also needs the same current plan (by value), so
    the answer is always the one the search would give.
    """
    owners = (model.arch, model.inventory, gpu)
    settings = (model.name, serving, workload, limit)
    hit = _SUGGESTIONS.peek(owners, settings)
    if hit is not None and hit[0] == current:
        return hit[1]
    found = search_suggestions(model, gpu, serving, workload, current, limit)
    _SUGGESTIONS.put(owners, settings, (current, found))
    return found


#: Suggestions by deployment (see :func:`suggest`). Bound 8192: one entry per misfit deployment's best pool.
_SUGGESTIONS: IdentityMemo[tuple[Plan, tuple[Suggestion, ...]]] = IdentityMemo(8192)


def candidate(serving: ServingConfig, moves: tuple[_Move, ...]) -> ServingConfig:
    """``serving`` with ``moves``' fields set (later moves only set their own), one instance per value.

    Every misfit of a deployment (each new workload admitted) tries the same candidates on the same settings
    (:func:`~fitgate.operator.decision.evaluate.serving_config` gives one instance per value): interned by the
    settings' identity and the flags changed, they are the same objects each time, so planning them
    (:func:`fitgate.sizing.plan.plan`) finds its memo by identity without hashing every field (issue 23).
    """
    changes = tuple(m.changes for m in moves if m.fields)  # a move's fields follow from its flags (:func:`_moves`)
    if not changes:
        return serving
    return _CANDIDATES.get((serving,), changes, lambda: _changed(serving, moves))


def _changed(serving: ServingConfig, moves: tuple[_Move, ...]) -> ServingConfig:
    fields = {k: v for m in moves for k, v in m.fields.items() if v != getattr(serving, k)}
    return evolve(serving, **fields) if fields else serving


#: Suggestion candidates by the settings' identity and the fields they change (:func:`candidate`). Bound 4096:
#: a misfit's search tries 10-40 candidates, so the candidates of the ~100-400 distinct misfit settings lately
#: searched (a deployment's workloads share theirs).
_CANDIDATES: IdentityMemo[ServingConfig] = IdentityMemo(4096)


def search_suggestions(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    current: Plan,
    limit: int = 6,
) -> tuple[Suggestion, ...]:
    """Changes that make a DoesNotFit deployment fit (or at least Tight), or a Tight one fit; cheapest first.

    Every candidate is planned again. Single changes come first; when none of a kind reaches Fits,
    it is combined with one change of another kind (TP 4 + fp8 KV, fp8 KV + a shorter context). A
    shorter ``--max-model-len`` is computed on the plan it is combined with. Suggestions are ranked
    by what they cost: fewer GPUs first, then less given up (:data:`CHANGE_COST`), then Fits before
    Tight, then fewer changes. A change that only reaches Tight is offered (and flagged) only when
    the deployment does not fit at all.
    """
    if current.verdict in (Verdict.FITS, Verdict.UNKNOWN):
        return ()
    wanted = {Verdict.FITS} if current.verdict is Verdict.TIGHT else {Verdict.FITS, Verdict.TIGHT}
    found: dict[frozenset[tuple[str, str]], tuple[Suggestion, Plan]] = {}  # by the changes, in any order
    planned: dict[tuple[int, Workload | None], tuple[ServingConfig, Plan | None]] = {}
    fitting: list[Suggestion] = []  # the Fits suggestions of ``found``, in its order (what ``dominated`` reads)

    def dominated(moves: tuple[_Move, ...]) -> bool:
        """A combination that cannot beat a Fits suggestion already found on both GPUs and cost."""
        if not fitting:
            return False
        tp = max(serving.tensor_parallel_size if m.tp is None else m.tp for m in moves)
        dp = max(serving.data_parallel_size if m.dp is None else m.dp for m in moves)
        gpus, cost = tp * dp * rs_pp * replicas, sum(m.cost for m in moves)
        return any(s.total_gpus <= gpus and s.cost <= cost and not s.cuts_workload for s in fitting)

    def attempt(moves: tuple[_Move, ...]) -> Plan | None:
        changes = moves[0].changes if len(moves) == 1 else tuple(c for m in moves for c in m.changes)
        new, wl = candidate(serving, moves), workload
        for m in moves:
            wl = m.workload if m.workload is not None else wl
        key = (id(new), wl)  # ``new`` is interned (:func:`candidate`) and held by ``planned``'s value
        hit = planned.get(key, MISS)  # a plan may be None: the memo module's sentinel marks "not planned yet"
        if isinstance(hit, Miss):
            hit = planned[key] = (new, _try(model, gpu, new, wl))
        result = hit[1]
        if result is None:
            return None
        if result.verdict in wanted and frozenset(changes) not in found and not short_within_error(result):
            rs = result.serving
            gpus = rs.tensor_parallel_size * rs.pipeline_parallel_size * rs.parallel.data_parallel_size
            cost = sum(m.cost for m in moves)
            summary = (
                "; ".join(m.why for m in moves)
                + f": {result.kv.num_blocks} KV blocks, max concurrency {result.kv.max_concurrency:.2f}, "
                f"headroom {fmt_gib(result.per_gpu.headroom_bytes)}"
            )
            if result.verdict is Verdict.TIGHT:
                summary += f" (Tight: {result.reasons[0].message})"
            served = replicas if wl is None else wl.replicas
            found[frozenset(changes)] = (Suggestion(changes, result.verdict, summary, gpus, cost, served), result)
            if result.verdict is Verdict.FITS:
                fitting.append(found[frozenset(changes)][0])
        return result

    rs_pp = current.serving.pipeline_parallel_size
    replicas = 1 if workload is None else workload.replicas
    kinds = _moves(model, gpu, serving, workload, current)
    shorter = _shorter(serving, workload, current)
    if shorter is not None:
        kinds.append([shorter])
    spread = _spread(workload, current)
    if spread is not None:
        kinds.append([spread])
    partial: list[tuple[int, _Move, Plan]] = []  # single changes that did not reach Fits, to combine
    for k, alternatives in enumerate(kinds):
        tried: list[tuple[int, _Move, Plan]] = []
        for move in alternatives:  # alternatives go from the mildest to the strongest
            result = attempt((move,))
            if result is None:
                continue
            if result.verdict is Verdict.FITS:
                break
            tried.append((k, move, result))
            # a Tight sequence count is not the last word: a smaller one may fit (the Mamba block counts, hunt130 F2)
            if (
                result.verdict is Verdict.TIGHT
                and not short_within_error(result)
                and move.fields.keys() != {"max_num_seqs"}
            ):
                break
        if alternatives and alternatives[0].changes[0][0] == "--gpu-memory-utilization":
            tried = tried[-1:]  # one budget to combine with: the first that is Tight, else the boldest
        partial += tried
    for i, (k, move, result) in enumerate(partial):
        for k2, other, _ in partial[i + 1 :]:
            # the current plan's shorter context is not paired: each change gets the one its own pool holds below
            # (hunt182 F3: fp8 KV + the bf16 pool's 4,130,816 tokens was offered where fp8 holds 8,262,096)
            if k2 != k and shorter not in (move, other) and not dominated((move, other)):
                attempt((move, other))
        if move.changes[0][0] != "--max-model-len":
            combined = _shorter(serving, workload, result)  # the context this change's pool holds
            if combined is not None and not dominated((move, combined)):
                attempt((move, combined))
        if move.changes[0][0] not in (ADD_REPLICAS, CUT_CONCURRENCY):
            wider = _spread(workload if move.workload is None else move.workload, result)
            if wider is not None and not dominated((move, wider)):
                attempt((move, wider))  # the replicas this change's pool needs
        if result.verdict is Verdict.TIGHT and any(
            r.code == ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET for r in result.reasons
        ):
            gmu = round(result.serving.gpu_memory_utilization - _GMU_STEP, 2)
            while gmu >= _MIN_TIGHT_FIX_GMU:  # leave room outside the budget for CUDA graphs and warm-up
                lower = _Move(
                    (("--gpu-memory-utilization", f"{gmu}"),),
                    {"gpu_memory_utilization": gmu},
                    None,
                    f"leave {fmt_gib(int(gpu.memory_bytes * (1 - gmu)))} outside the budget",
                )
                if dominated((lower, move)):
                    break
                fixed = attempt((lower, move))
                if fixed is None or fixed.verdict is not Verdict.TIGHT:
                    break
                gmu = round(gmu - _GMU_STEP, 2)
    ranked = sorted(
        (s for s, _ in found.values()),
        key=lambda s: (s.cuts_workload, s.total_gpus, s.cost, s.verdict is not Verdict.FITS, len(s.changes)),
    )
    # drop a suggestion that adds changes to a cheaper one with the same or a better verdict
    kept: list[Suggestion] = []
    for s in ranked:
        if not any(
            set(k.changes) < set(s.changes) and (k.verdict is Verdict.FITS or k.verdict is s.verdict) for k in kept
        ):
            kept.append(s)
    return tuple(kept[:limit])


def apply_suggestion(serving: ServingConfig, suggestion: Suggestion) -> ServingConfig:
    """The serving settings with a suggestion's engine flags applied (workload changes are ignored)."""
    switch: Callable[[str], object] = lambda v: v == "true"  # noqa: E731
    # hunt170 F1: every flag a suggestion sets (--max-num-seqs and MoE's data + expert parallelism were dropped, and
    # the printed args re-planned to the misfit they fixed)
    fields: dict[str, tuple[str, Callable[[str], object]]] = {
        "--gpu-memory-utilization": ("gpu_memory_utilization", float), "--kv-cache-dtype": ("kv_cache_dtype", str),
        "--max-model-len": ("max_model_len", int), "--tensor-parallel-size": ("tensor_parallel_size", int),
        "--quantization": ("quantization", str), "--enforce-eager": ("enforce_eager", switch),
        "--max-loras": ("max_loras", int), "--max-lora-rank": ("max_lora_rank", int),
        "--max-num-seqs": ("max_num_seqs", int), "--data-parallel-size": ("data_parallel_size", int),
        "--enable-expert-parallel": ("enable_expert_parallel", switch),
    }  # fmt: skip
    updates: dict[str, object] = {}
    for flag, value in suggestion.changes:
        if flag in fields:
            name, conv = fields[flag]
            updates[name] = conv(value)
    if "max_model_len" in updates:
        updates["max_model_len_auto"] = False  # a length given replaces ``auto``
    return replace(serving, **updates)  # type: ignore[arg-type]


def recommend(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    current: Plan,
    suggestions: tuple[Suggestion, ...],
) -> tuple[Plan, tuple[EngineArg, ...], Suggestion | None]:
    """The plan to deploy and its engine args.

    The current plan unless it does not fit; then the first engine-flag suggestion that Fits, else the
    first that is Tight.
    """
    if current.verdict is not Verdict.DOES_NOT_FIT:
        return current, engine_args(current, serving), None
    flags_only = [s for s in suggestions if all(flag.startswith("--") for flag, _ in s.changes)]
    # the cheapest that Fits, else the cheapest that is at least Tight
    for suggestion in sorted(flags_only, key=lambda s: s.verdict is not Verdict.FITS):
        new = apply_suggestion(serving, suggestion)
        result = _try(model, gpu, new, workload)
        if result is not None:
            return result, engine_args(result, new), suggestion
    return current, engine_args(current, serving), None
