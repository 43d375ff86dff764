"""A benchmark client's requests through vLLM's scheduler (client_schedule.CLIENT_SCHEDULE): TTFT the way it is measured."""

from __future__ import annotations

import dataclasses

import pytest

from fitgate.sizing import ServingConfig, Workload, lookup_gpu, plan
from fitgate.sizing.client_schedule import client_schedule, schedule_ttft_seconds
from fitgate.sizing.load import v0_wave_ttft_seconds
from fitgate.sizing.performance import work
from fitgate.sizing.step_time import Work, calibration, step_seconds
from tests.conftest import model


def llama_8b_h100(prompt: int = 1024) -> Work:
    mi = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(mi, lookup_gpu("H100"), ServingConfig(max_model_len=8192), Workload(8, 4096))
    return work(mi, p, prompt + 64, prompt)


def test_fixed_lengths_keep_the_client_in_waves() -> None:
    # vllm bench serve at --max-concurrency 4, 40 prompts of 922 in / 922 out (fixed lengths), budget 8192: the first
    # 4 arrive together on an idle engine and their 4 x 922 = 3688 prompt tokens fit one step; all 4 decode in
    # lockstep, end in the same step, and the client's semaphore sends the next 4 together to an idle engine again.
    # So every request waits for exactly one step of 0 decode and 3688 prompt tokens, and pays the front end.
    s = client_schedule(4, 40, 922, 922, 8192)
    assert s.window == ((0, 3688, 1.0),)
    assert s.in_flight == ()
    assert s.idle == 1.0
    w, k = llama_8b_h100(922), calibration().constants
    k = dataclasses.replace(k, frontend_s=0.03)
    assert schedule_ttft_seconds(w, s, k) == pytest.approx(0.03 + step_seconds(w, 0.0, 3688.0, k)[0])


def test_a_small_run_by_hand() -> None:
    # C = 2, 4 requests of 100 in / 3 out, a budget of 150 tokens, no async scheduling. Step by step:
    #   step 0: r0, r1 arrive on an idle engine; r0 takes 100 prompt tokens, r1 the other 50     -> (0 decode, 150)
    #           r0's prompt ends: its first token (1 of 3)
    #   step 1: r0 decodes (1 token), r1 its last 50 prompt tokens                                -> (1, 50)
    #   step 2: r0, r1 decode: r0 ends (3 of 3); the client sends r2, which reaches the engine during
    #           step 3 and can be scheduled from step 4 (two steps after the one that ended r0)    -> (2, 0)
    #   step 3: r1 decodes and ends; r2 waits for this step in flight; r3 is sent                 -> (1, 0)
    #   step 4: r2's 100 prompt tokens; r3 waits for this step in flight                          -> (0, 100)
    #   step 5: r2 decodes, r3's 100 prompt tokens                                                -> (1, 100)
    # Windows (the steps from the first one a request can be in to the one ending its prompt): r0 step 0, r1 steps
    # 0-1, r2 step 4, r3 step 5; in flight: r2 step 3, r3 step 4; r0 and r1 found the engine idle.
    s = client_schedule(2, 4, 100, 3, 150)
    assert {(d, p): w for d, p, w in s.window} == {(0, 150): 0.5, (1, 50): 0.25, (0, 100): 0.25, (1, 100): 0.25}
    assert {(d, p): w for d, p, w in s.in_flight} == {(1, 0): 0.25, (0, 100): 0.25}
    assert s.idle == 0.5
    # Mean TTFT = the windows' steps + half the requests x the front end + the other half x max(front end, the
    # mean of their steps in flight): a front end shorter than the step in flight is hidden behind it.
    w, k0 = llama_8b_h100(100), calibration().constants

    def t(d: int, p: int) -> float:
        return step_seconds(w, float(d), float(p), k0)[0]

    windows = (2 * t(0, 150) + t(1, 50) + t(0, 100) + t(1, 100)) / 4
    in_flight = (t(1, 0) + t(0, 100)) / 2
    short = dataclasses.replace(k0, frontend_s=in_flight / 10)
    assert schedule_ttft_seconds(w, s, short) == pytest.approx(windows + 0.5 * short.frontend_s + 0.5 * in_flight)
    long = dataclasses.replace(k0, frontend_s=in_flight * 3)
    assert schedule_ttft_seconds(w, s, long) == pytest.approx(windows + long.frontend_s)


def test_async_scheduling_adds_the_step_already_scheduled() -> None:
    # With async scheduling (V1 0.14+) the engine core schedules the next batch before blocking on the running one
    # (v1/engine/core.py step_with_batch_queue), so a request sent when another ends waits for two steps in flight,
    # not one. C = 4 at a budget that runs the prompts in separate steps, 64 requests: the mean steps in flight
    # of the requests that found the engine busy grow by about one step.
    sync = client_schedule(4, 64, 500, 50, 520)
    both = client_schedule(4, 64, 500, 50, 520, async_scheduling=True)

    def steps(entries: tuple[tuple[int, int, float], ...], idle: float) -> float:
        return sum(x for _, _, x in entries) / (1 - idle)

    assert sync.idle < 0.5 and both.idle < 0.5
    assert steps(both.in_flight, both.idle) == pytest.approx(steps(sync.in_flight, sync.idle) + 1, abs=0.25)


def test_v0_waves_match_the_v0_wave_formula() -> None:
    # V0 without chunking (prefill_apart): a wave of 10 prompts of 3000 tokens at a budget of 8192 runs as 5
    # prefill-only steps of 2 prompts (6000 tokens): the n-th pair waits n steps, mean (1 + ... + 5) / 5 = 3 steps,
    # as load.v0_wave_ttft_seconds gives, plus the front end (the wave arrives on an idle engine).
    s = client_schedule(10, 10, 3000, 100, 8192, prefill_apart=True)
    assert s.window == ((0, 6000, 3.0),)
    w = dataclasses.replace(llama_8b_h100(3000), max_num_batched_tokens=8192, prefill_apart=True, v0=True)
    k = dataclasses.replace(calibration().constants, frontend_s=0.02)
    assert schedule_ttft_seconds(w, s, k) == pytest.approx(v0_wave_ttft_seconds(w, 10, 3000, k) + 0.02)


def test_spread_lengths_break_the_waves() -> None:
    # InferenceX's --random-range-ratio 0.8 (lengths 0.8-1.0 x nominal, +-11 % about the mean): the 4 requests of a
    # wave end at different steps, so after the first wave most requests arrive at a busy engine one at a time.
    fixed = client_schedule(4, 40, 922, 922, 8192)
    spread = client_schedule(4, 40, 922, 922, 8192, spread=0.1 / 0.9)
    assert fixed.idle == 1.0
    assert spread.idle < 0.5
    # each request still waits at least for the step carrying its own prompt
    assert sum(x for _, _, x in spread.window) >= 1.0


@pytest.mark.parametrize(("c", "n", "isl", "osl"), [(1, 4, 128, 64), (4, 40, 922, 922), (16, 64, 2048, 128)])
def test_ttft_is_never_below_the_prompts_compute_roofline(c: int, n: int, isl: int, osl: int) -> None:
    # Whatever the schedule, a request's TTFT holds at least the step that runs its own prompt, whose compute is at
    # least the prompt's FLOPs at the GPU's full peak (the linear layers and the attention, each at its dtype's peak).
    w, k = llama_8b_h100(isl), calibration().constants
    floor = sum(
        isl * (s.flops_per_token / w.peak_flops + s.prefill_attention_flops / (w.attention_peak_flops or w.peak_flops))
        for s in w.stages
    )
    s = client_schedule(c, n, isl, osl, w.max_num_batched_tokens)
    assert schedule_ttft_seconds(w, s, k) >= floor
    assert schedule_ttft_seconds(w, s, k, median=True) >= floor
