"""The changes :mod:`fitgate.sizing.advice` tries on a deployment that does not fit, by kind, and what each gives up.

Each :class:`Move` is one change of the settings (or the workload); the search in :mod:`~fitgate.sizing.advice` plans
every candidate again and combines the kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.sizing.dtypes import (
    FP8_KV_MIN_COMPUTE_CAPABILITY,
    FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY,
    compute_capability_at_least,
)
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.lora import LORA_RANKS
from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Workload
from fitgate.sizing.quantization import moe_tp_split_refused
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.serving import MAX_REPLICAS, ResolvedServing
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.verdict_rules import TIGHT_FRACTION
from fitgate.sizing.versions import parse_version

SAFE_MAX_GPU_MEMORY_UTILIZATION = 0.95
TP_CHOICES = (2, 4, 8, 16)
#: ``--enable-expert-parallel`` from 0.8.0 (arg_utils.py L439; not 0.7.3), ``--data-parallel-size`` 0.8.5 (L535).
EXPERT_PARALLEL_FLAGS_SINCE = ((0, 8, 0), (0, 8, 5))
#: The two changes of a workload that its KV pool cannot hold: fewer requests, or the same over more replicas.
CUT_CONCURRENCY = "workload.concurrentRequests"
ADD_REPLICAS = "replicas"


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
GMU_STEP = 0.01
_MIN_GMU = 0.5
MIN_TIGHT_FIX_GMU = 0.8


@dataclass(frozen=True)
class Move:
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


def moves_to_try(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None, current: Plan
) -> list[list[Move]]:
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
                Move((("--max-num-seqs", str(n)),), {"max_num_seqs": n}, None, f"one Mamba block each, of {blocks}")
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
                    Move(
                        ((CUT_CONCURRENCY, str(total)),),
                        {},
                        replace(workload, concurrency=total),
                        f"the pool holds {most} requests of {workload.context_tokens} tokens"
                        + (f" ({total} over {workload.replicas} replicas)" if workload.replicas > 1 else ""),
                    )
                ]
            )
    return kinds


def spread_replicas(workload: Workload | None, result: Plan) -> Move | None:
    """The workload over the fewest replicas whose pools each hold their share within 90 % (else fill them).

    Computed on the plan it is combined with, as :func:`shorter_context` is (issue 24: more replicas instead of fewer
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
    return Move(
        ((ADD_REPLICAS, str(n)),),
        {},
        replace(workload, replicas=n),
        f"{n} replicas hold {workload.concurrency} requests of {workload.context_tokens} tokens, "
        f"{-(-workload.concurrency // n)} each",
    )


def _settings_moves(
    model: ModelInput, gpu: GpuModel, serving: ServingConfig, rs: ResolvedServing, short_outside: bool
) -> tuple[list[Move], ...]:
    """The kinds of changes of the settings (:func:`moves_to_try` less the workload's): the same for every workload."""
    kinds: list[list[Move]] = []
    gmus: list[Move] = []
    if short_outside:
        gmu = round(rs.gpu_memory_utilization - GMU_STEP, 2)
        while gmu > _MIN_GMU and len(gmus) < 15:
            gmus.append(
                Move(
                    (("--gpu-memory-utilization", f"{gmu}"),),
                    {"gpu_memory_utilization": gmu},
                    None,
                    f"leave {fmt_gib(int(gpu.memory_bytes * (1 - gmu)))} outside the budget for CUDA graphs "
                    "and warm-up",
                )
            )
            gmu = round(gmu - GMU_STEP, 2)
        if not rs.enforce_eager:
            kinds.append([Move((("--enforce-eager", "true"),), {"enforce_eager": True}, None, "no CUDA graphs")])
    else:
        gmu = round(rs.gpu_memory_utilization + GMU_STEP, 2)
        while gmu <= SAFE_MAX_GPU_MEMORY_UTILIZATION:
            gmus.append(
                Move(
                    (("--gpu-memory-utilization", f"{gmu}"),),
                    {"gpu_memory_utilization": gmu},
                    None,
                    f"a {fmt_gib(int(gpu.memory_bytes * gmu))} budget",
                )
            )
            gmu = round(gmu + GMU_STEP, 2)
    kinds.append(gmus)
    kinds.append(
        [
            Move(
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
                Move(
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
                Move(
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
                Move(
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
#: search (issue 23). The lists are never changed: :func:`moves_to_try` copies the tuple into its own list.
_SETTINGS_MOVES: IdentityMemo[tuple[list[Move], ...]] = IdentityMemo(4096)


#: The step budgets (``--max-num-batched-tokens``) a fix may lower to where windowed KV pages hold in-flight batches.
SMALL_STEP_TOKENS = (4096, 2048)


def _lora_moves(serving: ServingConfig, loras: int, rank: int) -> list[list[Move]]:
    """Fewer ``--max-loras`` (halving) and lower ``--max-lora-rank`` (vLLM's ranks).

    Each slot is ``max_lora_rank`` wide in every target module (fitgate.sizing.lora).
    """
    fewer = []
    n = loras // 2
    while n >= 1:
        fewer.append(
            Move(
                (("--max-loras", str(n)),),
                {"max_loras": n},
                None,
                f"{n} adapter slot(s) instead of {loras}",
            )
        )
        n //= 2
    lower = [
        Move(
            (("--max-lora-rank", str(r)),),
            {"max_lora_rank": r},
            None,
            f"slots of rank {r} instead of {rank} (adapters of a higher rank are refused)",
        )
        for r in sorted((r for r in LORA_RANKS if 8 <= r < rank), reverse=True)
    ]
    return [kind for kind in (fewer, lower) if kind]


def shorter_context(serving: ServingConfig, workload: Workload | None, result: Plan) -> Move | None:
    """The longest ``--max-model-len`` (rounded down to 1024) that ``result``'s KV pool holds."""
    fit = result.max_model_len_that_fits
    if not fit or fit >= result.serving.max_model_len:
        return None
    rounded = fit - fit % 1024 if fit >= 2048 else fit
    if workload is not None and workload.context_tokens > rounded:
        return None  # the workload's requests would be refused
    return Move(
        (("--max-model-len", str(rounded)),),
        {"max_model_len": rounded, "max_model_len_auto": False},
        None,
        f"the longest context that fits is {fit} tokens",
    )


#: Engine-rank counts tried for a MoE model with expert parallelism (docs/parallelism.md).
EP_DP_CHOICES = (2, 4, 8, 16)


def _expert_parallel_moves(serving: ServingConfig, rs: ResolvedServing) -> list[Move]:
    """For a MoE model: whole experts over the GPUs it has, then over DP x TP GPUs (mildest first).

    vLLM's EP group is TP x DP (fused_moe/config.py 0.33.0 L1105-1114, L1227-1244): more engine
    ranks spread the experts thinner while attention stays TP-sharded in each rank.
    """
    lay, tp = rs.parallel, rs.tensor_parallel_size
    moves: list[Move] = []
    version = parse_version(rs.vllm_version) if rs.vllm_version else EXPERT_PARALLEL_FLAGS_SINCE[1]
    if version < EXPERT_PARALLEL_FLAGS_SINCE[0]:
        return moves  # hunt170 F4: a flag the release lacks is no fix ("unrecognized arguments")
    if not lay.expert_parallel and tp * lay.data_parallel_size > 1:
        moves.append(
            Move(
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
            Move(
                (("--data-parallel-size", str(dp)), ("--enable-expert-parallel", "true")),
                {"data_parallel_size": dp, "enable_expert_parallel": True},
                None,
                f"{dp} engine ranks of TP {tp} with the experts spread over {tp * dp} GPUs",
            )
        )
    return moves
