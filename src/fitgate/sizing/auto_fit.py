"""``--max-model-len auto`` (or ``-1``): vLLM lowers the model's length to the longest that fits the KV pool.

From vLLM 0.14.0 ``--max-model-len`` takes ``auto`` / ``-1`` (``human_readable_int_or_auto``,
engine/arg_utils.py 0.14.0 L2121-2135; config/model.py 0.24.0 L192-194: "Automatically choose the maximum model
length that fits in GPU memory"). After profiling, ``get_kv_cache_configs`` calls ``_auto_fit_max_model_len``
where the original length was -1 (v1/core/kv_cache_utils.py 0.14.0 L1508-1509, 0.25.0 L2092-2093) instead of
letting ``_check_enough_kv_cache_memory`` refuse to start: a binary search for the longest length whose one
request fits the smallest worker's KV memory (``_estimate_max_model_len_from_groups``, 0.25.0 L1864-1896), kept
at the model's length where that fits, an error only where not even one token does (L1938-1943).

fitgate plans at the model's length first (vLLM profiles there: the length is lowered after the profile) and,
where one request of it does not fit, again at :func:`~fitgate.sizing.verdict_rules.max_model_len_that_fits`,
the same predicate. A plan where not one token fits stays the DoesNotFit it is. A release before 0.14 rejects the
word at its argument parser: that is said in a note, not a denial (the release may be misread from an image tag).
"""

from __future__ import annotations

from collections.abc import Callable

from fitgate.sizing.frozen import evolve
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.resolve import accounting_of
from fitgate.sizing.results import ModelInput, Plan, Reason, Verdict
from fitgate.sizing.serving import ServingConfig, Workload

#: The first release whose ``--max-model-len`` accepts ``auto`` / ``-1`` (engine/arg_utils.py 0.14.0 L2121-2135;
#: 0.13.0 has no ``human_readable_int_or_auto`` and no ``_auto_fit_max_model_len``).
AUTO_SINCE = (0, 14, 0)

#: The length a plan where not one token fits is judged at (one block of vLLM's default size): auto lowers to it.
SHORTEST_TOKENS = 16

#: A re-plan at the lowered length can move terms that read the length (V0's profiling batch, a multimodal
#: encoder budget): the search is run again on that plan, at most this many times.
_ROUNDS = 3

PlanFn = Callable[[ModelInput, GpuModel, ServingConfig, Workload | None], Plan]


def plan_auto(
    plan_fn: PlanFn, model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None
) -> Plan:
    """The plan vLLM starts with under ``--max-model-len auto``: the model's length, else the longest that fits."""
    fixed = evolve(serving, max_model_len=None, max_model_len_auto=False)
    full = plan_fn(model, gpu, fixed, workload)
    accounting = accounting_of(model.arch, gpu, serving)
    notes: list[str] = []
    if accounting.version < AUTO_SINCE:
        notes.append(
            f"--max-model-len auto: vLLM {accounting.label} does not accept it (from 0.14.0); "
            "sized as a release that does"
        )
    model_len = full.serving.max_model_len
    longest = full.max_model_len_that_fits
    if longest >= model_len:
        return evolve(full, notes=(*full.notes, *notes, f"--max-model-len auto: the model's {model_len} tokens fit"))
    if longest <= 0:
        # hunt118 #2: judged at the model's length, a misfit within the estimate's error band at a short length was
        # denied under auto and Tight with --max-model-len 1024: vLLM would lower the length that far, so the
        # verdict is that of the shortest length (one block), with the band; DoesNotFit only where that is
        shortest = plan_fn(model, gpu, evolve(fixed, max_model_len=min(model_len, SHORTEST_TOKENS)), workload)
        if shortest.verdict is Verdict.DOES_NOT_FIT:
            said = "--max-model-len auto: not one token of KV cache fits, vLLM refuses to start"
            return evolve(full, notes=(*full.notes, *notes, said))
        said = (
            "--max-model-len auto: by fitgate's estimate not one token of KV cache fits, but the shortfall is within "
            f"the estimate's error at {shortest.serving.max_model_len} tokens: vLLM may start at a length it "
            "lowers to, or refuse"
        )
        return evolve(shortest, notes=(*shortest.notes, *notes, said))
    result = full
    for _ in range(_ROUNDS):
        result = plan_fn(model, gpu, evolve(fixed, max_model_len=longest), workload)
        if result.max_model_len_that_fits >= longest or result.max_model_len_that_fits <= 0:
            break
        longest = result.max_model_len_that_fits
    said = (
        f"--max-model-len auto: vLLM lowers max_model_len from the model's {model_len} to {longest} tokens to fit "
        "(v1/core/kv_cache_utils.py _auto_fit_max_model_len)"
    )
    result = evolve(result, notes=(*result.notes, *notes, said))
    if result.verdict is not Verdict.TIGHT:
        return result
    # A lowered length fills the pool by construction, and vLLM picks it from its own measured pool: that is not a
    # risk to start-up, so it alone does not make the plan Tight.
    soft = tuple(r for r in result.reasons if r.code is not ReasonCode.MAX_MODEL_LEN_NEAR_KV_CAPACITY)
    if soft:
        return evolve(result, reasons=soft)
    kv = result.kv
    fits = Reason(
        ReasonCode.FITS,
        f"{kv.num_blocks} KV blocks ({kv.reported_tokens} tokens) per GPU at the {longest}-token max_model_len "
        "vLLM picks",
    )
    return evolve(result, verdict=Verdict.FITS, reasons=(fits,))
