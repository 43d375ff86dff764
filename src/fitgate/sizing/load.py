"""What a steady load or a burst of requests makes of the step model (:mod:`fitgate.sizing.step_time`).

A closed loop of ``C`` requests in flight, an open loop at a request rate (Little's law), and a burst of
prompts arriving at once on an idle replica (V1's chunked budget, V0's prefill-only waves): each a sum of
:func:`~fitgate.sizing.step_time.step_seconds` over the steps the requests live through.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.step_time import Constants, Work, step_seconds


@dataclass(frozen=True)
class SteadyState:
    """One replica under a steady load."""

    concurrency: float  # requests in flight (decoding or waiting for their first token)
    tpot_s: float  # mean time per output token after the first
    ttft_s: float  # mean time to first token
    decode_tokens_per_s: float  # all running requests together
    output_tokens_per_s: float  # as a client counts it: OSL tokens per request over its whole life
    requests_per_s: float
    roofline_decode_tokens_per_s: float
    saturated: bool  # a request rate beyond what the replica holds: TTFT grows without bound


#: The last steady states: the replica search probes one work at a few loads and its estimate asks for the one it kept
#: again (capacity.replicas_needed). Keyed by the work's and the constants' identity.
_STATES: IdentityMemo[SteadyState] = IdentityMemo(256)


def steady_state(
    work: Work,
    input_tokens: int,
    output_tokens: int,
    k: Constants,
    concurrency: float | None = None,
    request_rate: float | None = None,
    max_concurrency: float = math.inf,
) -> SteadyState:
    """The steady state at ``concurrency`` requests in flight (closed loop) or at ``request_rate`` (open loop).

    ``output_tokens`` 0 means a pure decode batch of ``concurrency`` requests (no prompt shares the
    steps). Open loop: Little's law ``C = rate x (TTFT + (OSL - 1) x TPOT)``; a request's life grows
    with ``C``, so ``rate x life(C) - C`` has one root, found by regula falsi (Illinois) between 1 and
    the most requests the replica holds; when even that many cannot absorb the rate, it is saturated.
    """
    settings = (input_tokens, output_tokens, concurrency, request_rate, max_concurrency)
    return _STATES.get(
        (work, k),
        settings,
        lambda: _steady_state(work, input_tokens, output_tokens, k, concurrency, request_rate, max_concurrency),
    )


def _steady_state(
    work: Work,
    input_tokens: int,
    output_tokens: int,
    k: Constants,
    concurrency: float | None,
    request_rate: float | None,
    max_concurrency: float,
) -> SteadyState:
    if request_rate is None:
        wanted = max(1.0, concurrency or 1.0)
        r = _closed_loop(work, min(wanted, max_concurrency), input_tokens, output_tokens, k)
        if wanted <= max_concurrency or output_tokens <= 0:
            return r
        # More requests in flight than the engine holds (its KV pool or max_num_seqs): the rest wait in its
        # queue (the scheduler's waiting loop, v1/core/sched/scheduler.py 0.33.0 L1049, admits a request only
        # when its KV blocks fit); by Little's law each waits (wanted - held) / requests_per_s for a slot.
        wait = (wanted - r.concurrency) / r.requests_per_s
        return dataclasses.replace(r, ttft_s=r.ttft_s + wait)

    seen: dict[float, SteadyState] = {}  # the closed loops the root search ran (it ends on one it ran)

    def at(c: float) -> SteadyState:
        r = seen.get(c)
        if r is None:
            r = seen[c] = _closed_loop(work, c, input_tokens, output_tokens, k)
        return r

    def excess(c: float) -> float:
        r = at(c)
        return request_rate * (r.ttft_s + max(0, output_tokens - 1) * r.tpot_s) - c

    # Not saturated, the replica serves exactly the arrival rate (the root's tolerance, or a lone request finishing
    # before the next arrives, must not read as more or less: replicas x rate >= the target, hunt91 O2).
    low, f_low = 1.0, excess(1.0)
    if f_low <= 0:
        return _serving_rate(at(1.0), request_rate)
    high = min(max_concurrency, MAX_IN_FLIGHT)
    f_high = excess(high)
    if f_high > 0:
        r = at(high)
        return SteadyState(
            r.concurrency, r.tpot_s, math.inf, r.decode_tokens_per_s, r.output_tokens_per_s, r.requests_per_s,
            r.roofline_decode_tokens_per_s, True,
        )  # fmt: skip
    side = 0
    c = high
    for _ in range(60):
        c = high - f_high * (high - low) / (f_high - f_low)
        f = excess(c)
        if abs(f) < 1e-3 * c or high - low < 1e-6 * c:
            break
        if f > 0:
            low, f_low = c, f
            if side == 1:
                f_high /= 2
            side = 1
        else:
            high, f_high = c, f
            if side == -1:
                f_low /= 2
            side = -1
    return _serving_rate(at(c), request_rate)


def _serving_rate(r: SteadyState, request_rate: float) -> SteadyState:
    """``r`` serving exactly ``request_rate`` (dataclasses.replace's field walk costs more than the root search)."""
    return SteadyState(
        r.concurrency, r.tpot_s, r.ttft_s, r.decode_tokens_per_s, r.output_tokens_per_s, request_rate,
        r.roofline_decode_tokens_per_s, r.saturated,
    )  # fmt: skip


#: Upper bound of requests in flight in the open-loop search when the pool sets none.
MAX_IN_FLIGHT = 1e6


def _closed_loop(work: Work, c: float, isl: int, osl: int, k: Constants) -> SteadyState:
    # The prompts of the other C - 1 requests land in this request's decode steps: one prompt of ISL
    # tokens per request life of ~OSL steps each (its own prompt is its TTFT, not its TPOT).
    prefill_per_step = max(0.0, c - 1) * isl / osl if osl > 0 else 0.0
    step, roof = step_seconds(work, c, 0.0, k)
    if prefill_per_step > 0 and work.prefill_apart:
        # V0 without chunked prefill (ENGINE_ERA): the batch's decode steps carry no prompt; each of the
        # other C - 1 prompts of a request's life runs in a prefill-only step that the decodes wait for.
        step += max(0.0, c - 1) / osl * step_seconds(work, 0.0, float(isl), k)[0]
    elif prefill_per_step > 0:
        # V1 (PROMPT_CHUNKS): a waiting prompt takes the budget left after the decodes in one chunk, so a
        # share of the steps carries a chunk of ``chunk`` prompt tokens and the rest carry none; when the
        # prompts need every step's budget, each step carries the prompt tokens of the mean.
        chunk = min(float(isl), max(1.0, work.max_num_batched_tokens - c))
        share = prefill_per_step / chunk
        if share >= 1:
            step, roof = step_seconds(work, c, prefill_per_step, k)
        else:
            mixed, mixed_roof = step_seconds(work, c, chunk, k)
            step, roof = share * mixed + (1 - share) * step, share * mixed_roof + (1 - share) * roof
    decode_rate = c / step
    # Time to first token: the prompt's chunks at the step budget left after the running requests'
    # decode tokens, each a step carrying that chunk; half a step of waiting for the step in flight (and, with
    # async scheduling, the whole step already scheduled behind it: ``v1/engine/core.py`` 0.24.0 L519-580
    # ``step_with_batch_queue`` schedules the next batch before it blocks on the running one, as
    # client_schedule.CLIENT_SCHEDULE counts it); and
    # the other prompts queued ahead of it (M/D/1 mean wait at the prompt arrival rate). V0 without
    # chunking: the whole prompt in one prefill-only step.
    running = 0.0 if work.prefill_apart else max(0.0, c - 1)
    budget = max(1.0, work.max_num_batched_tokens - running)
    chunks = max(1, math.ceil(isl / budget))
    chunk = isl / chunks
    chunk_step, _ = step_seconds(work, running, chunk, k)
    prefill_s = chunks * chunk_step
    in_flight = (1.5 if work.async_scheduling else 0.5) * step
    ttft = k.frontend_s + (in_flight + prefill_s if c > 1 else prefill_s)
    if osl > 0 and c > 1:
        arrival = c / (prefill_s + (osl - 1) * step)
        rho = min(0.98, arrival * prefill_s)
        ttft += prefill_s * rho / (2 * (1 - rho))
    life = ttft + max(0, osl - 1) * step
    requests = c / life if osl > 0 else 0.0
    output_rate = requests * osl if osl > 0 else decode_rate
    return SteadyState(c, step, ttft, decode_rate, output_rate, requests, c / roof, False)


def burst_ttft_seconds(work: Work, burst: float, input_tokens: int, k: Constants, *, front_end: bool = True) -> float:
    """Mean time to first token of ``burst`` prompts that arrive at once on an idle replica.

    The scheduler fills each step's budget with waiting prompts in arrival order, so the ``n``-th
    prompt's first token comes after ``n x ISL`` prompt tokens at the full-budget prefill rate; the
    mean over ``n = 1..burst`` is ``(burst + 1) / 2 x ISL`` tokens. This is how a benchmark's first
    ``--max-concurrency`` requests (sent together) see the replica, and what a traffic burst sees.
    Each request also pays the front end (``k.frontend_s``) unless ``front_end`` is False (an offline
    ``LLM.generate`` batch, which has no HTTP server).
    """
    budget = max(1, work.max_num_batched_tokens)
    full_step, _ = step_seconds(work, 0.0, float(budget), k)
    per_token = full_step / budget
    first_chunk, _ = step_seconds(work, 0.0, float(min(input_tokens, budget)), k)
    engine_s = max(first_chunk, (burst + 1) / 2 * input_tokens * per_token)
    return engine_s + (k.frontend_s if front_end else 0.0)


#: V0's default ``max_num_seqs`` (``engine/arg_utils.py`` 0.7.3 L224: 256 on V0, 1024 on V1).
V0_MAX_NUM_SEQS = 256


def v0_wave_ttft_seconds(work: Work, burst: float, input_tokens: int, k: Constants) -> float:
    """Mean time to first token of ``burst`` prompts arriving at once on V0 without chunked prefill.

    V0's ``Scheduler._schedule_default`` (``vllm/core/scheduler.py`` 0.7.3 L1204: "First, it batches as
    many prefill requests as possible") admits waiting prompts into one prefill-only step while the token
    budget and ``max_num_seqs`` hold them (``_schedule_prefills`` L1017, ``SchedulingBudget.can_schedule``
    L69-75), and runs no decode in that step (L1240); without chunking the budget is
    ``max(max_model_len, 2048)`` (``config.py`` 0.7.3 L1536). So a burst runs as ``ceil(burst / per_step)``
    prefill-only steps of ``per_step`` prompts each, and every prompt of a step gets its first token at
    that step's end: the mean is over the cumulative step ends, weighted by the prompts in each step.
    """
    burst_n = max(1, math.ceil(burst))
    per_step = max(1, min(burst_n, V0_MAX_NUM_SEQS, work.max_num_batched_tokens // max(1, input_tokens)))
    elapsed = total = 0.0
    left = burst_n
    while left > 0:
        n = min(per_step, left)
        elapsed += step_seconds(work, 0.0, float(n * input_tokens), k)[0]
        total += n * elapsed
        left -= n
    return total / burst_n
