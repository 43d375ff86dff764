"""TTFT the way a serving benchmark measures it: its client's requests through vLLM's scheduler (issue 24).

See :data:`CLIENT_SCHEDULE`; the step times come from :func:`fitgate.sizing.step_time.step_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.load import V0_MAX_NUM_SEQS
from fitgate.sizing.step_time import Constants, Work, step_seconds

#: How a serving benchmark's TTFT arises (issue 24, ``client_schedule``): the client and the scheduler, not a steady
#: state. ``vllm bench serve`` (vLLM 0.24.0 ``vllm/benchmarks/serve.py``; ``benchmarks/benchmark_serving.py`` in the
#: releases before ``vllm bench``) first runs one test prompt to completion (L819 "Starting initial single prompt test
#: run"), then with ``--request-rate inf`` creates a task for every one of its ``num_prompts`` requests at once, each
#: waiting on an ``asyncio.Semaphore(max_concurrency)`` (L957-966 ``limited_request_func``): the first C requests
#: reach an idle engine together and every later one is sent the moment an earlier one ends. TTFT is timed from the
#: request's send (``lib/endpoint_request_func.py`` L197 ``st = time.perf_counter()``) to the first streamed chunk
#: with a choice (L231-236), and the reported figure is the mean over the requests (or the median, where published).
#: On the server, the engine core adds requests between steps (``v1/engine/core.py`` L1259 ``run_busy_loop``: the
#: input queue is polled, then one step runs), so a request sent when another one ends waits for the step already
#: launched (and, with async scheduling, the one already scheduled behind it: ``step_with_batch_queue`` L519-580
#: schedules the next batch before blocking on the running one), then for the prompts ahead of it in FCFS order:
#: each step's budget of ``max_num_batched_tokens`` goes to the running requests first (``v1/core/sched/scheduler.py``
#: 0.24.0 L408 ``token_budget``, L430 "First, schedule the RUNNING requests": a decode token each, a partly
#: prefilled prompt its next chunk, L470 ``min(num_new_tokens, token_budget)``), then to waiting prompts (L625 "Next,
#: schedule the WAITING requests", L811) while fewer than ``max_num_seqs`` run (L630). V0 without chunked prefill
#: runs the waiting prompts the budget holds in one prefill-only step (see ``v0_wave_ttft_seconds``). Which steps a
#: request waits through depends on token counts only, so the schedule is computed once per load, and its TTFT is
#: the sum of those steps' times at any constants (``schedule_ttft_seconds``). The front end (``frontend_s``, the
#: HTTP and engine-core round trip) shows only where the engine was idle when the request came (the first C, and
#: every request at C = 1); behind a busy engine it overlaps the step in flight: TTFT = max(front end, steps in
#: flight) + the steps that carry the prompts ahead and its own.
CLIENT_SCHEDULE = "vllm bench serve: semaphore of C, N requests, FCFS token budget per step (vllm 0.24.0 serve.py)"


@dataclass(frozen=True)
class ClientSchedule:
    """Which steps a benchmark's requests wait through before their first token (``CLIENT_SCHEDULE``).

    Each entry is (decode tokens, prompt tokens, weight): the step's composition and how many request-steps of
    waiting it carries, over the requests (so a mean TTFT is the weighted sum of step times). ``window``: the
    steps from the one the request could first be scheduled in to the one that ends its prompt; ``in_flight``:
    the steps already launched or scheduled when it arrived (busy engine); ``idle``: the share of requests that
    arrived on an idle engine. ``median_*``: the same for the median request alone.
    """

    window: tuple[tuple[int, int, float], ...]
    in_flight: tuple[tuple[int, int, float], ...]
    idle: float
    median_window: tuple[tuple[int, int, float], ...] = ()
    median_in_flight: tuple[tuple[int, int, float], ...] = ()
    median_idle: bool = True


def client_schedule(
    concurrency: int,
    num_prompts: int,
    isl: int,
    osl: int,
    budget: int,
    *,
    held: int | None = None,
    async_scheduling: bool = False,
    prefill_apart: bool = False,
    step_weight: tuple[float, float] = (1.0, 0.0),
    spread: float = 0.0,
) -> ClientSchedule:
    """The steps each of ``num_prompts`` requests of ``isl`` / ``osl`` tokens waits through at ``--max-concurrency``.

    Simulated in steps (``CLIENT_SCHEDULE``): at most ``held`` requests run at once (the KV pool, ``max_num_seqs``);
    a request sent when another ends can be scheduled two steps after that one's last (three with async
    scheduling); ``prefill_apart`` (V0 without chunking): a step runs either the waiting prompts ``budget`` holds
    (whole, up to 256 a step: ``V0_MAX_NUM_SEQS``) or every running request's decode. ``step_weight`` (seconds per
    step and per prompt token, any rough pair) only ranks the requests to pick the median one.
    """
    c = max(1, concurrency)
    n = max(c, num_prompts)
    cap = max(1, min(c, held or c))
    if prefill_apart:
        cap = min(cap, V0_MAX_NUM_SEQS)
    delay = 3 if async_scheduling else 2
    # u_i = frac(i x golden ratio) in [0, 1), mapped to [-1, 1): every stretch of requests samples the range evenly
    scale = [1.0 + spread * (2.0 * ((i * 0.6180339887498949) % 1.0) - 1.0) for i in range(n)]
    prompt_left = [max(1, round(isl * f)) for f in scale]
    out_left = [max(1, round(osl * f)) for f in scale]
    eligible = [0] * n
    idle = [False] * n
    windows: list[dict[tuple[int, int], int]] = [{} for _ in range(n)]
    flights: list[dict[tuple[int, int], int]] = [{} for _ in range(n)]
    running: list[int] = []
    waiting: list[int] = list(range(c))  # sent, no first token yet, not running
    for r in range(c):
        idle[r] = True
    sent = c
    done = 0
    step = 0

    def add(store: dict[tuple[int, int], int], key: tuple[int, int], times: int) -> None:
        store[key] = store.get(key, 0) + times

    while done < n:
        ready = [r for r in waiting if eligible[r] <= step]
        prefilling = [r for r in running if prompt_left[r] > 0]
        if not running and not ready:
            if not waiting:
                break  # cannot happen: a sent request is waiting or running until done
            for r in waiting:  # the engine idles until the next request arrives: it starts at once
                eligible[r], idle[r] = step, True
                flights[r].clear()
            continue
        decode = prefill = 0
        scheduled: list[tuple[int, int]] = []
        if prefill_apart and ready and len(running) < cap:
            room = budget
            for r in ready:
                if len(running) + len(scheduled) >= cap or prompt_left[r] > room:
                    break
                scheduled.append((r, prompt_left[r]))
                room -= prompt_left[r]
            if not scheduled:  # a prompt longer than the budget still runs alone
                scheduled.append((ready[0], prompt_left[ready[0]]))
            prefill = sum(t for _, t in scheduled)
        else:
            room = budget
            for r in running:
                if room <= 0:
                    break
                take = min(prompt_left[r], room) if prompt_left[r] > 0 else 1
                scheduled.append((r, take))
                room -= take
                if prompt_left[r] > 0:
                    prefill += take
                else:
                    decode += 1
            if not prefill_apart:
                admitted = len(running)
                for r in ready:
                    if room <= 0 or admitted >= cap:
                        break
                    take = min(prompt_left[r], room)
                    scheduled.append((r, take))
                    room -= take
                    prefill += take
                    admitted += 1
        key = (decode, prefill)
        for r in waiting:
            add(windows[r] if eligible[r] <= step else flights[r], key, 1)
        for r in prefilling:
            add(windows[r], key, 1)
        # Nothing waits and no prompt runs: decode-only steps until the next request ends, in one go.
        jump = 1
        if not waiting and not prefilling and not any(prompt_left[r] > 0 for r, _ in scheduled):
            jump = max(1, min(out_left[r] for r in running))
        elif not prefill and not prefill_apart and all(eligible[r] <= step for r in waiting) and len(running) >= cap:
            jump = max(1, min(out_left[r] for r in running))  # a full engine: the queue waits for a finish
            for r in waiting:
                add(windows[r], key, jump - 1)
        for r, take in scheduled:
            if r not in running:
                waiting.remove(r)
                running.append(r)
            if prompt_left[r] > 0:
                prompt_left[r] -= take
                if prompt_left[r] == 0:
                    out_left[r] -= 1  # the step that ends the prompt samples the first token
            else:
                out_left[r] -= jump
        step += jump
        for r in [r for r in running if out_left[r] <= 0]:
            running.remove(r)
            done += 1
            if sent < n:  # the client's semaphore lets the next request go
                eligible[sent] = step - 1 + delay
                waiting.append(sent)
                sent += 1
    inv = 1.0 / n

    def merged(stores: list[dict[tuple[int, int], int]]) -> tuple[tuple[int, int, float], ...]:
        total: dict[tuple[int, int], int] = {}
        for s in stores:
            for key, times in s.items():
                add(total, key, times)
        return tuple((d, p, times * inv) for (d, p), times in sorted(total.items()))

    per_step, per_token = step_weight

    def rough(r: int) -> float:
        return sum(t * (per_step + p * per_token) for (_, p), t in (windows[r] | flights[r]).items())

    median = sorted(range(n), key=rough)[n // 2]
    return ClientSchedule(
        merged(windows),
        merged(flights),
        sum(idle) * inv,
        tuple((d, p, float(t)) for (d, p), t in sorted(windows[median].items())),
        tuple((d, p, float(t)) for (d, p), t in sorted(flights[median].items())),
        idle[median],
    )


def schedule_ttft_seconds(work: Work, schedule: ClientSchedule, k: Constants, *, median: bool = False) -> float:
    """Mean (or the median request's) TTFT of a :class:`ClientSchedule` at constants ``k``.

    Its steps' times, plus the front end on an idle engine and max(front end, the steps in flight) behind a busy
    one (``CLIENT_SCHEDULE``).
    """
    times: dict[tuple[int, int], float] = {}

    def total(entries: tuple[tuple[int, int, float], ...]) -> float:
        out = 0.0
        for d, p, weight in entries:
            t = times.get((d, p))
            if t is None:
                t = times[(d, p)] = step_seconds(work, float(d), float(p), k)[0]
            out += weight * t
        return out

    if median:
        flight = total(schedule.median_in_flight)
        front = k.frontend_s if schedule.median_idle else max(k.frontend_s, flight)
        return total(schedule.median_window) + front
    busy = 1.0 - schedule.idle
    flight = total(schedule.in_flight) / busy if busy > 1e-12 else 0.0
    return total(schedule.window) + schedule.idle * k.frontend_s + busy * max(k.frontend_s, flight)
