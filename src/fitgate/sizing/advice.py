"""What to change when a deployment does not fit (the engine args to run with: :mod:`fitgate.sizing.engine_args`).

Every suggestion is checked by planning the changed settings again (pure: nothing is mutated), so a
suggestion is only offered when it really fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from fitgate.sizing.advice_moves import (
    ADD_REPLICAS,
    CUT_CONCURRENCY,
    GMU_STEP,
    MIN_TIGHT_FIX_GMU,
    Move,
    moves_to_try,
    shorter_context,
    spread_replicas,
)
from fitgate.sizing.engine_args import EngineArg, engine_args, flag_words
from fitgate.sizing.errors import SizingError
from fitgate.sizing.frozen import evolve
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.memo import MISS, IdentityMemo, Miss
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.verdict_rules import short_within_error


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


def candidate(serving: ServingConfig, moves: tuple[Move, ...]) -> ServingConfig:
    """``serving`` with ``moves``' fields set (later moves only set their own), one instance per value.

    Every misfit of a deployment (each new workload admitted) tries the same candidates on the same settings
    (:func:`~fitgate.operator.decision.evaluate.serving_config` gives one instance per value): interned by the
    settings' identity and the flags changed, they are the same objects each time, so planning them
    (:func:`fitgate.sizing.plan.plan`) finds its memo by identity without hashing every field (issue 23).
    """
    changes = tuple(m.changes for m in moves if m.fields)  # its fields follow from its flags (moves_to_try)
    if not changes:
        return serving
    return _CANDIDATES.get((serving,), changes, lambda: _changed(serving, moves))


def _changed(serving: ServingConfig, moves: tuple[Move, ...]) -> ServingConfig:
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

    def dominated(moves: tuple[Move, ...]) -> bool:
        """A combination that cannot beat a Fits suggestion already found on both GPUs and cost."""
        if not fitting:
            return False
        tp = max(serving.tensor_parallel_size if m.tp is None else m.tp for m in moves)
        dp = max(serving.data_parallel_size if m.dp is None else m.dp for m in moves)
        gpus, cost = tp * dp * rs_pp * replicas, sum(m.cost for m in moves)
        return any(s.total_gpus <= gpus and s.cost <= cost and not s.cuts_workload for s in fitting)

    def attempt(moves: tuple[Move, ...]) -> Plan | None:
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
    kinds = moves_to_try(model, gpu, serving, workload, current)
    shorter = shorter_context(serving, workload, current)
    if shorter is not None:
        kinds.append([shorter])
    spread = spread_replicas(workload, current)
    if spread is not None:
        kinds.append([spread])
    partial: list[tuple[int, Move, Plan]] = []  # single changes that did not reach Fits, to combine
    for k, alternatives in enumerate(kinds):
        tried: list[tuple[int, Move, Plan]] = []
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
            combined = shorter_context(serving, workload, result)  # the context this change's pool holds
            if combined is not None and not dominated((move, combined)):
                attempt((move, combined))
        if move.changes[0][0] not in (ADD_REPLICAS, CUT_CONCURRENCY):
            wider = spread_replicas(workload if move.workload is None else move.workload, result)
            if wider is not None and not dominated((move, wider)):
                attempt((move, wider))  # the replicas this change's pool needs
        if result.verdict is Verdict.TIGHT and any(
            r.code == ReasonCode.LOW_HEADROOM_OUTSIDE_BUDGET for r in result.reasons
        ):
            gmu = round(result.serving.gpu_memory_utilization - GMU_STEP, 2)
            while gmu >= MIN_TIGHT_FIX_GMU:  # leave room outside the budget for CUDA graphs and warm-up
                lower = Move(
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
                gmu = round(gmu - GMU_STEP, 2)
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
