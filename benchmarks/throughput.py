"""The speed estimate against published vLLM measurements (benchmarks/throughput/points.json, each cited).

Usage:
    python benchmarks/throughput.py            # the table: before (roofline v1) / after (step model), LOGO
    python benchmarks/throughput.py --json     # the same as one JSON document
    python benchmarks/throughput.py --fit      # refit the constants on every point and write
                                               # src/fitgate/sizing/data/performance.json (with the band)
    python benchmarks/throughput.py --free-front-end [--fit]  # the per-request front end fitted too (issue 24)
    python benchmarks/throughput.py --aic      # side by side with NVIDIA aiconfigurator (fitgate[aic]) on the
                                               # points it has a system and a model for
    python benchmarks/throughput.py --held-out SET  # fit without the points whose "added" is SET, print theirs
    python benchmarks/throughput.py --points   # one line per point: its config, measured vs estimated, the
                                               # fitted and leave-one-group-out errors (worst LOGO GPU first)

For each point: plan the model on the GPU at the point's TP, build what one engine step reads and
computes (fitgate.sizing.performance.work) and run the steady state at the point's concurrency, ISL and
OSL (fitgate.sizing.step_time). Compared: per-request decode speed (1 / TPOT; a published decode or
output rate where no TPOT is) and TTFT. Errors are (estimated - measured) / measured of the speed
(positive: too optimistic) and of TTFT. "LOGO" rows estimate each point with constants fitted without
its group (its GPU product, or its model family): the figure a planner gets on hardware or a model the
fit never saw. The fit minimises the sum of |log(estimated / measured)| by Nelder-Mead (pure Python).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fitgate import aic  # the optional backend's adapter: it imports aiconfigurator only when asked
from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ServingConfig, Workload, lookup_gpu, plan
from fitgate.sizing.client_schedule import ClientSchedule, client_schedule, schedule_ttft_seconds
from fitgate.sizing.errors import SizingError
from fitgate.sizing.load import burst_ttft_seconds, steady_state
from fitgate.sizing.performance import FP4_METHODS, INTEGER_METHODS, requests_in_flight, work
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.step_time import Constants, Work, calibration
from fitgate.sizing.versions import resolve_release

HERE = Path(__file__).resolve().parent
POINTS = HERE / "throughput" / "points.json"
#: Published points kept out of every fit (never in points.json): the shipped constants' out-of-sample check.
HOLDOUT = HERE / "throughput" / "holdout.json"
DATA = HERE.parent / "src" / "fitgate" / "sizing" / "data" / "performance.json"
_spec = importlib.util.spec_from_file_location("roofline_v1", HERE / "throughput" / "roofline_v1.py")
assert _spec is not None and _spec.loader is not None
roofline_v1 = importlib.util.module_from_spec(_spec)
sys.modules["roofline_v1"] = roofline_v1  # dataclasses look their module up by name
_spec.loader.exec_module(roofline_v1)

#: Bounds of each constant in the fit (physical: an efficiency is at most 1, a cost is not negative).
BOUNDS = {
    "bw_eff": (0.3, 1.0),
    "mfu": (0.05, 0.9),
    "step_s": (0.0, 0.05),
    "layer_s": (0.0, 1e-3),
    "moe_layer_s": (0.0, 3e-3),
    "tp_layer_s": (0.0, 1e-3),
    # ROCm runs the same Python host code as CUDA and adds to its launches (HIP graphs, hipBLASLt), so its
    # overhead is never below CUDA's: at least 1. (Left to 0.5, a fit without the MI300X points takes it to
    # 0.5 from the one MI355X point, whose step is mostly bytes.)
    "amd_factor": (1.0, 5.0),
    # Not raised to 0.3: before the eager step (step_time.EAGER_STEP) the fit took moe_mfu to ~0.10-0.20, from the
    # decode speeds of prefill-heavy MoE steps (DeepSeek-V3 TP8 c 64-128 with 3200-token prompts, Qwen3-Next c 256);
    # with the quantized MoE prompt steps' excess it lands at ~0.8 (docs/performance-accuracy.md, issue 24).
    "moe_mfu": (0.05, 1.0),
    # Issue 24, the per-request front end (step_time.FRONT_END). Pinned to 0: freed to its physical
    # range, 1-150 ms, the fit takes 20-46 ms, which the tenstorrent A100 points contradict (Qwen3-1.7B,
    # 128-token prompt: 11 ms TTFT in all) while gpustack (H100, ~55 ms) and InferenceX (B200, ~150 ms)
    # need it: the front end is the benchmark client's, not one constant; the figures are in
    # docs/performance.md (after the TTFT round: 51 ms, better in sample, worse leave-one-group-out).
    # Free it with ``--free-front-end``.
    "frontend_s": (0.0, 0.0),
    # Prompt chunks' matmuls (step_time.PREFILL_GEMMS): a GEMM of hundreds to thousands of rows.
    "prefill_mfu": (0.05, 0.9),
    # V0's host cost per step relative to V1's (step_time.ENGINE_ERA): V1 moved it off the critical path,
    # so at least 1; fitted on the V0 points (the dstack DeepSeek and Llama-3.1-405B runs).
    "v0_factor": (1.0, 5.0),
    # ROCm GEMMs against the datasheet peak relative to CUDA's (step_time.AMD_GEMMS): at most 1.
    "amd_mfu": (0.2, 1.0),
    # A step no CUDA graph covers (step_time.EAGER_STEP): the host's floor per layer, and a quantized MoE prompt
    # step's excess per MoE layer; at most a few ms a layer.
    "eager_layer_s": (0.0, 3e-3),
    "eager_moe_layer_s": (0.0, 3e-3),
}
#: The physical range of ``frontend_s`` when freed (``--free-front-end``).
FRONT_END_BOUNDS = (1e-3, 0.15)
NAMES = [f.name for f in fields(Constants)]
#: Weight of a TTFT residual against a decode-speed residual in the fit: decode speed is what the
#: cost and the capacity answers divide by; TTFTs also carry the sources' ramp-up and queueing.
TTFT_WEIGHT = 0.25


@dataclass(frozen=True)
class Point:
    """One published measurement with the work its deployment does per step."""

    raw: dict[str, Any]
    work: Work
    isl: int
    osl: int
    concurrency: int
    max_concurrency: float
    gpu: str
    family: str
    moe: bool
    tp: int
    v1_tpot_s: float
    v1_ttft_s: float
    weights: str  # the weights' format as the step model sees it: "fp4", "fp8", "int" or "16-bit"
    v0_budget: int = 0  # V0 without chunking: the server's token budget, max(max_model_len, 2048) (0: not V0)
    schedule: ClientSchedule | None = None  # the benchmark client's requests through the scheduler (CLIENT_SCHEDULE)


#: ``vllm bench serve``'s ``--num-prompts`` default (vLLM 0.24.0 ``benchmarks/datasets/datasets.py`` L1600-1602,
#: ``DEFAULT_NUM_PROMPTS``; ``serve.py`` L18 "Default 1000"): the run length of a point that does not publish one.
HARNESS_NUM_PROMPTS = 1000


def point_schedule(p: dict[str, Any], w: Work, held: float, v0_budget: int) -> ClientSchedule:
    """The point's benchmark run through the scheduler (client_schedule.CLIENT_SCHEDULE), at its published num_prompts
    (else :data:`HARNESS_NUM_PROMPTS`); the median request is picked by a rough step time (10 ms a step, 20 µs a
    prompt token: only the ranking matters)."""
    c = int(p["concurrency"])
    n = int(p.get("num_prompts") or HARNESS_NUM_PROMPTS)
    return client_schedule(
        c, max(c, n), int(p["input_tokens"]), int(p["output_tokens"]),
        v0_budget if w.prefill_apart else w.max_num_batched_tokens,
        held=max(1, math.floor(held)), async_scheduling=w.async_scheduling, prefill_apart=w.prefill_apart,
        step_weight=(0.01, 2e-5), spread=length_spread(p),
    )  # fmt: skip


def length_spread(p: dict[str, Any]) -> float:
    """How far a point's requests' lengths spread about its ISL / OSL (``spread`` of client_schedule.client_schedule).

    ShareGPT's conversations vary widely (1: uniform from 0 to twice the mean), InferenceX's
    ``--random-range-ratio 0.8`` draws 0.8-1.0 x nominal (0.1 / 0.9 = 0.11 about the mean), fixed random lengths
    (``vllm bench serve``'s default ``--random-range-ratio`` 0) not at all.
    """
    text = f"{p.get('lengths_basis', '')} {p.get('note', '')}"
    if "ShareGPT" in text:
        return 1.0
    if "range-ratio 0.8" in text or "range ratio 0.8" in text or "RANDOM_RANGE_RATIO 0.8" in text:
        return 0.1 / 0.9
    return 0.0


def weight_format(mi: Any, quantization: str | None) -> str:
    """The weights' format of a point: the checkpoint's quantization, else the one the point serves with."""
    q = mi.arch.quantization or RUNTIME_QUANTIZATION.get(quantization or "")
    if q is None:
        return "16-bit"
    if q.method in INTEGER_METHODS:
        return "int"
    if q.method in FP4_METHODS and q.weight_bits <= 4:
        return "fp4"
    return "fp8" if q.weight_bits <= 8 else "16-bit"


def family(model: str) -> str:
    """The model family a point belongs to (the leave-one-group-out unit): the repo name's first word."""
    name = model.rsplit("/", maxsplit=1)[-1]
    return name.split("-")[0].rstrip("0123456789.").lower() or name.lower()


#: The vLLM release current in a month (by release month, approximately), for points that give only a date: what a run
#: that month most likely used. It decides the engine-era terms (step_time.ENGINE_ERA, ASYNC_SCHEDULING).
RELEASE_BY_MONTH = {
    "2025-03": "0.7.3", "2025-04": "0.8.4", "2025-05": "0.8.5", "2025-06": "0.9.1", "2025-07": "0.9.2",
    "2025-08": "0.10.0", "2025-09": "0.10.1",
    "2025-10": "0.11.0", "2025-11": "0.11.0", "2025-12": "0.12.0", "2026-01": "0.13.0", "2026-02": "0.15.1",
    "2026-03": "0.16.0", "2026-04": "0.17.0",
}  # fmt: skip
#: A point that names a year only (``rocm/vllm-dev nightly (2026)``): a release of that year after async
#: scheduling became the default (0.14.0, January 2026).
RELEASE_BY_YEAR = {"2026": "0.15.1"}
#: A V1 point that names neither a release nor a date (blog posts and CI pages of 2024-25, the notes say):
#: planned on 0.11.0, a V1 release before async scheduling was the default.
UNDATED_V1_RELEASE = "0.11.0"


def point_release(p: dict[str, Any]) -> str:
    """The release a point ran: the version its ``vllm`` field names (``0.6.3.post2``, ``0.15.1 (llm-d ...)``),
    else the release of the month or year it names (:data:`RELEASE_BY_MONTH`, :data:`RELEASE_BY_YEAR`), else
    :data:`UNDATED_V1_RELEASE`; a V0 point without either ran 0.7.3, the last release with V0 as its default."""
    text = str(p.get("vllm", ""))
    try:
        if resolve_release(text.split(" ", maxsplit=1)[0]).named:
            return text.split(" ", maxsplit=1)[0]
    except SizingError:
        pass
    month = re.search(r"(20\d\d-\d\d)", text)
    if month and month.group(1) in RELEASE_BY_MONTH:
        return RELEASE_BY_MONTH[month.group(1)]
    year = re.search(r"\((20\d\d)\)", text)
    if year and year.group(1) in RELEASE_BY_YEAR:
        return RELEASE_BY_YEAR[year.group(1)]
    return "0.7.3" if p.get("engine") == "v0" else UNDATED_V1_RELEASE


def load_points(path: Path = POINTS) -> list[Point]:
    """Every point of ``path`` (points.json; holdout.json), planned and turned into step work."""
    out = []
    for p in json.loads(path.read_text())["points"]:
        mi = to_model_input(resolve(p["model"], source="catalog"))
        isl, osl, c = int(p["input_tokens"]), int(p["output_tokens"]), int(p["concurrency"])
        serving = ServingConfig(
            max_model_len=max(4096, isl + osl),
            # the engine era (step_time.ENGINE_ERA, ASYNC_SCHEDULING): each point is planned on its release
            vllm_version=point_release(p),
            engine="V0" if p.get("engine") == "v0" else None,
            tensor_parallel_size=p["tp"],
            dtype=p.get("dtype", "auto"),
            quantization=p.get("quantization"),
            kv_cache_dtype=p.get("kv_cache_dtype", "auto"),
            # the server's step budget and sequence cap where its source states them (else vLLM's defaults)
            max_num_batched_tokens=p.get("max_num_batched_tokens"),
            max_num_seqs=p.get("max_num_seqs"),
        )
        result = plan(mi, lookup_gpu(p["gpu"]), serving, Workload(c, isl + osl))
        context = isl + osl // 2
        w = work(mi, result, context, isl)
        old = roofline_v1.estimate(mi, result, batch=c, context_tokens=context)
        most = float(requests_in_flight(result, isl, osl))  # the pool over ISL + OSL / 2 (performance.py)
        # V0 without chunked prefill batches waiting prompts into one prefill-only step up to
        # max(max_model_len, 2048) tokens (vllm 0.7.3 config.py L1536); the servers ran at the model's own
        # max_model_len unless the point names one (planned above at a shorter one, for the KV pool only)
        v0_budget = max(int(p.get("max_model_len", mi.arch.max_position_embeddings)), 2048) if w.prefill_apart else 0
        out.append(
            Point(
                p,
                w,
                isl,
                osl,
                c,
                most,
                p["gpu"],
                family(p["model"]),
                w.num_experts > 0,
                p["tp"],
                old.batch / old.decode_tokens_per_s,
                old.ttft_seconds,
                weight_format(mi, p.get("quantization")),
                v0_budget,
                point_schedule(p, w, most, v0_budget) if "ttft_ms" in p["measured"] else None,
            )
        )
    return out


def prefill_floor_s(p: Point) -> float:
    """The least time one cold prompt of the point's ISL can take: its FLOPs at the GPU's full peak."""
    attention_peak = p.work.attention_peak_flops or p.work.peak_flops  # step_time.ATTENTION_DTYPE
    return sum(
        p.isl * (s.flops_per_token / p.work.peak_flops + s.prefill_attention_flops / attention_peak)
        for s in p.work.stages
    )


def measured(p: Point) -> tuple[str, float | None, float | None]:
    """(speed metric, measured speed, measured TTFT seconds): 1/TPOT, a decode rate per request, output tok/s,
    or OSL / a batch's end-to-end latency.

    A TTFT below :func:`prefill_floor_s` cannot be a cold prefill (a prefix-cache hit on repeated prompts is
    the likely cause): it is left out (None) of the fit and the table; so is one whose point says why its
    source's TTFT is not the server's (``ttft_excluded``, a reason), and a decode figure whose point says why its
    source's is not the steady state's (``decode_excluded``, a reason): the speed is None then. A point whose TPOT
    its own source contradicts (``tpot_excluded``, a reason) is compared on its output rate.
    """
    m = p.raw["measured"]
    ttft = m["ttft_ms"] / 1000 if "ttft_ms" in m and not p.raw.get("ttft_excluded") else None
    if ttft is not None and ttft < prefill_floor_s(p):
        ttft = None
    if p.raw.get("decode_excluded"):
        return "excluded", None, ttft
    if "tpot_ms" in m and not p.raw.get("tpot_excluded"):  # tpot_excluded: compared on its output rate
        return "decode", 1000 / m["tpot_ms"], ttft
    if "decode_tokens_per_s" in m:
        return "decode", m["decode_tokens_per_s"] / p.concurrency, ttft
    if "batch_latency_ms" in m:  # one batch started together: OSL tokens over its end-to-end latency
        return "batch", p.osl * 1000 / m["batch_latency_ms"], ttft
    return "output", m.get("output_tokens_per_s"), ttft


def predict(p: Point, k: Constants) -> tuple[float, float, float]:
    """(per-request decode tokens/s, mean TTFT seconds, output tokens/s) of the step model at the point's load.

    A benchmark run at ``--max-concurrency C`` with ``num_prompts`` N sends its first C requests at
    once: where the source publishes N, the mean TTFT mixes that burst (share C / N) with the
    steady state (share 1 - C / N); a published median TTFT is the steady state's alone.
    """
    s = steady_state(p.work, p.isl, p.osl, k, concurrency=p.concurrency, max_concurrency=p.max_concurrency)
    ttft = s.ttft_s
    if p.schedule is not None:
        # the client's requests through the scheduler (client_schedule.CLIENT_SCHEDULE): every request of the run, the
        # first C on an idle engine and each later one behind the steps in flight; a median TTFT is the median one's
        median = "median" in p.raw.get("statistic", "") and "ttft_ms a mean" not in p.raw.get("statistic", "")
        ttft = schedule_ttft_seconds(p.work, p.schedule, k, median=median)
    return 1 / s.tpot_s, ttft, s.output_tokens_per_s


def errors(p: Point, k: Constants) -> tuple[float | None, float | None]:
    """(speed error, TTFT error) as (estimated - measured) / measured."""
    metric, speed, ttft = measured(p)
    decode, est_ttft, output = predict(p, k)
    est = decode if metric == "decode" else output
    if metric == "batch":  # the batch's prompts in its first steps, then OSL - 1 decode steps
        burst = burst_ttft_seconds(p.work, p.concurrency, p.isl, k, front_end=False)  # offline: no HTTP
        est = p.osl / (burst + (p.osl - 1) / decode)
    return (est / speed - 1 if speed else None), (est_ttft / ttft - 1 if ttft else None)


def v1_errors(p: Point) -> tuple[float | None, float | None]:
    """The previous estimate's errors (speed: its per-request decode speed; TTFT: one prompt of the context)."""
    metric, speed, ttft = measured(p)
    return (1 / p.v1_tpot_s / speed - 1 if speed and metric in ("decode", "batch") else None), (
        p.v1_ttft_s / ttft - 1 if ttft else None
    )


def loss(points: Sequence[Point], k: Constants) -> float:
    """Sum of |log(estimated / measured)| over the speeds, plus TTFT_WEIGHT x that over the v1-engine TTFTs."""
    total = 0.0
    for p in points:
        e_speed, e_ttft = errors(p, k)
        if e_speed is not None:
            total += abs(math.log(max(1e-6, 1 + e_speed)))
        if e_ttft is not None and p.raw.get("engine") != "v0":  # V0's TTFT is not the v1 scheduler's
            total += TTFT_WEIGHT * abs(math.log(max(1e-6, 1 + e_ttft)))
    return total


def _free() -> list[str]:
    """The constants the search moves: those whose bounds leave room (a pinned one stays at its bound)."""
    return [n for n in NAMES if BOUNDS[n][0] < BOUNDS[n][1]]


def _constants(x: Sequence[float]) -> Constants:
    """Constants from search coordinates: the log of each free constant (a cost of 0 is its floor, 1e-7 s)."""
    values = {n: BOUNDS[n][0] for n in NAMES}
    for name, v in zip(_free(), x, strict=True):
        lo, hi = BOUNDS[name]
        values[name] = min(hi, max(lo, math.exp(v)))
    # A prompt chunk's GEMMs (hundreds to thousands of rows) are never less efficient than a decode
    # step's (one row per running request): prefill_mfu >= mfu (step_time.PREFILL_GEMMS).
    values["prefill_mfu"] = max(values["prefill_mfu"], values["mfu"])
    return Constants(**values)


def _coordinates(k: Constants) -> list[float]:
    return [math.log(max(getattr(k, n), BOUNDS[n][0], 1e-7)) for n in _free()]


#: A second, physically plain start for the search: 80 % of the bandwidth, 40 % MFU, 1 ms per step,
#: 20 µs per layer, 50 µs per MoE or TP layer, AMD overhead 1.5 x, MoE matmuls at half efficiency,
#: prompt chunks' matmuls at 60 % of peak, 30 ms of front end per request, V0's host side 2 x V1's, ROCm
#: GEMMs at 0.7 x CUDA's share of the peak, an eager step's floor of 0.2 ms a layer and a quantized MoE
#: prompt's 0.5 ms a layer.
PLAIN_START = Constants(
    bw_eff=0.8,
    mfu=0.4,
    step_s=1e-3,
    layer_s=2e-5,
    moe_layer_s=5e-5,
    tp_layer_s=5e-5,
    amd_factor=1.5,
    moe_mfu=0.5,
    prefill_mfu=0.6,
    frontend_s=0.03,
    v0_factor=2.0,
    amd_mfu=0.7,
    eager_layer_s=2e-4,
    eager_moe_layer_s=5e-4,
)


def nelder_mead(
    f: Callable[[Sequence[float]], float], x0: Sequence[float], steps: Sequence[float], iters: int
) -> list[float]:
    """Minimise ``f`` from ``x0`` (the textbook simplex: reflect, expand, contract, shrink)."""
    simplex = [list(x0)] + [[x + (steps[i] if i == j else 0.0) for j, x in enumerate(x0)] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = [sum(x[j] for x in simplex[:-1]) / (len(simplex) - 1) for j in range(len(x0))]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, s, strict=True)] for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    return simplex[min(range(len(simplex)), key=values.__getitem__)]


def fit(points: Sequence[Point], start: Constants, iters: int = 600) -> Constants:
    """Constants minimising :func:`loss` on ``points``: the simplex in log coordinates from ``start`` and
    from :data:`PLAIN_START`, each restarted once, the better kept."""
    best: tuple[float, list[float]] | None = None
    for origin in (start, PLAIN_START):
        x = _coordinates(origin)
        for _ in range(2):
            x = nelder_mead(lambda y: loss(points, _constants(y)), x, [0.5] * len(x), iters)
        value = loss(points, _constants(x))
        if best is None or value < best[0]:
            best = (value, x)
    assert best is not None
    return _constants(best[1])


def logo(
    points: Sequence[Point], key: Callable[[Point], str], start: Constants
) -> dict[int, tuple[float | None, float | None]]:
    """Each point's errors with constants fitted on the points outside its group."""
    out: dict[int, tuple[float | None, float | None]] = {}
    for group in sorted({key(p) for p in points}):
        train = [p for p in points if key(p) != group]
        k = fit(train, start, iters=300)
        for i, p in enumerate(points):
            if key(p) == group:
                out[i] = errors(p, k)
    return out


def band(values: list[float]) -> tuple[float, float]:
    """10th and 90th percentile of measured / estimated from (estimated - measured) / measured errors, widened to 1."""
    ratios = sorted(1 / (1 + e) for e in values)
    q = statistics.quantiles(ratios, n=10, method="inclusive")
    # widened to contain 1, so that the range always contains the estimate itself
    return round(min(1.0, q[0]), 3), round(max(1.0, q[-1]), 3)


def regime(p: Point) -> list[str]:
    """The rows a point counts in."""
    c = p.concurrency
    band_name = "c=1" if c == 1 else "c 2-16" if c <= 16 else "c 17-128" if c <= 128 else "c > 128"
    rows = [f"gpu {p.gpu}", "MoE" if p.moe else "dense", "TP 1" if p.tp == 1 else "TP > 1", band_name, "all"]
    rows.append(f"weights {p.weights}")
    if p.raw.get("expert_parallel"):  # EP with DP 1 costs what TP does (no all2all kernels): this row shows it
        rows.append("EP (DP 1)")
    rows.append("engine V0" if p.work.v0 else "engine V1")  # the engine era (step_time.ENGINE_ERA)
    rows.append("AMD GPUs" if p.work.amd else "NVIDIA GPUs")
    return rows


def median_abs(values: list[float | None]) -> float | None:
    """Median |error| of the values present."""
    xs = [abs(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


def side_by_side_aic(points: Sequence[Point], k: Constants) -> int:
    """Median |error| of aiconfigurator and of fitgate's step model on the points aiconfigurator answers.

    Only the points with a per-request decode speed (``tpot_ms`` or ``decode_tokens_per_s``) or a TTFT count:
    aiconfigurator answers TPOT and TTFT of its aggregated (in-flight batching) model at the point's TP, ISL,
    OSL and concurrency, with vLLM's kernel tables.
    """
    if not aic.available():
        print("aiconfigurator is not installed (pip install 'fitgate[aic]')", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, list[float | None]]] = {}
    skipped: dict[str, int] = {}
    by_gpu = logo(points, lambda p: p.gpu, k)  # fitgate out of sample: constants fitted without the GPU
    for i, p in enumerate(points):
        metric, speed, ttft = measured(p)
        e = aic.estimate(p.raw["model"], lookup_gpu(p.gpu), p.tp, p.isl, p.osl, p.concurrency, moe=p.moe,
                         expert_parallel=bool(p.raw.get("expert_parallel")))  # fmt: skip
        if not e.answered or e.tpot_seconds is None or e.ttft_seconds is None:
            skipped[e.reason.split(":")[0]] = skipped.get(e.reason.split(":")[0], 0) + 1
            continue
        ours_speed, ours_ttft = errors(p, k)
        aic_speed = (1 / e.tpot_seconds / speed - 1) if speed and metric == "decode" else None
        aic_ttft = (e.ttft_seconds / ttft - 1) if ttft else None
        logo_speed, logo_ttft = by_gpu[i]
        if metric != "decode":
            ours_speed = logo_speed = None
        for r in regime(p):
            row = rows.setdefault(r, {c: [] for c in ("aic_speed", "aic_ttft", "fit_speed", "fit_ttft", "logo_speed",
                                                       "logo_ttft")})  # fmt: skip
            row["aic_speed"].append(aic_speed)
            row["aic_ttft"].append(aic_ttft)
            row["fit_speed"].append(ours_speed)
            row["fit_ttft"].append(ours_ttft if aic_ttft is not None else None)
            row["logo_speed"].append(logo_speed)
            row["logo_ttft"].append(logo_ttft if aic_ttft is not None else None)
    print(f"aiconfigurator answered {len(rows.get('all', {}).get('aic_speed', []))} of {len(points)} points "
          f"(n below: those with a decode speed compared); not: {skipped}")  # fmt: skip
    print("median |error| of per-request decode speed (TTFT in brackets), on the points both answer:")
    print(f"{'regime':18s} {'n':>3s}  {'aiconfigurator':>16s}  {'fitgate fitted':>16s}  {'fitgate LOGO gpu':>16s}")

    def cell(xs: list[float | None]) -> str:
        m = median_abs(xs)
        return "     -" if m is None else f"{m:6.0%}"

    for r, row in sorted(rows.items()):
        n = sum(1 for a, o in zip(row["aic_speed"], row["fit_speed"], strict=True) if a is not None or o is not None)
        print(f"{r:18s} {n:3d}  {cell(row['aic_speed'])} ({cell(row['aic_ttft']).strip():>5s})  "
              f"{cell(row['fit_speed'])} ({cell(row['fit_ttft']).strip():>5s})  "
              f"{cell(row['logo_speed'])} ({cell(row['logo_ttft']).strip():>5s})")  # fmt: skip
    return 0


def source_name(p: Point) -> str:
    """A point's source in a few words: the repository or the site it cites."""
    url = str(p.raw["source"])
    gh = re.search(r"github\.com/([^/]+/[^/#?]+)", url)
    if gh:
        return gh.group(1)
    site = re.search(r"https?://([^/]+)", url)
    return site.group(1) if site else url[:30]


def dump_points(
    points: Sequence[Point],
    k: Constants,
    by_gpu: dict[int, tuple[float | None, float | None]],
    by_family: dict[int, tuple[float | None, float | None]],
) -> None:
    """One line per point: config, measured vs estimated decode speed and TTFT, fitted and LOGO errors."""

    def pct(v: float | None) -> str:
        return "    -" if v is None else f"{v:+5.0%}"

    print(f"{'#':>3s} {'gpu':9s} {'model':28s} {'tp':>2s} {'ep':2s} {'w':5s} {'eng':3s} {'c':>4s} {'isl/osl':>11s} "
          f"{'metric':6s} {'meas':>7s} {'est':>7s} {'fit':>5s} {'gpu':>5s} {'fam':>5s}  "
          f"{'ttft':>7s} {'est':>7s} {'fit':>5s} {'gpu':>5s} {'fam':>5s}  source")  # fmt: skip
    order = sorted(range(len(points)), key=lambda i: -abs(by_gpu[i][0] or 0.0))
    for i in order:
        p = points[i]
        metric, speed, ttft = measured(p)
        e_speed, e_ttft = errors(p, k)
        est_speed = speed * (1 + e_speed) if speed and e_speed is not None else None
        est_ttft = ttft * (1 + e_ttft) if ttft and e_ttft is not None else None
        ep = "EP" if p.raw.get("expert_parallel") else ""
        model = str(p.raw["model"]).rsplit("/", maxsplit=1)[-1][:28]
        speed_cells = f"{speed or 0:7.1f} {est_speed or 0:7.1f}" if speed else f"{'-':>7s} {'-':>7s}"
        ttft_cells = f"{ttft * 1000:7.0f} {est_ttft * 1000 if est_ttft else 0:7.0f}" if ttft else f"{'-':>7s} {'-':>7s}"
        print(f"{i:3d} {p.gpu:9s} {model:28s} {p.tp:2d} {ep:2s} {p.weights:5s} {'v0' if p.work.v0 else 'v1':3s} "
              f"{p.concurrency:4d} {f'{p.isl}/{p.osl}':>11s} {metric:6s} {speed_cells} {pct(e_speed)} "
              f"{pct(by_gpu[i][0])} {pct(by_family[i][0])}  {ttft_cells} {pct(e_ttft)} {pct(by_gpu[i][1])} "
              f"{pct(by_family[i][1])}  {source_name(p)} {p.raw.get('statistic', '')}")  # fmt: skip


def held_out(points: Sequence[Point], name: str) -> int:
    """Median |error| on the points added as ``name`` with constants fitted on the others only (a true hold-out)."""
    train = [p for p in points if p.raw.get("added") != name]
    test = [p for p in points if p.raw.get("added") == name]
    if not test:
        print(f"no point has added={name!r}", file=sys.stderr)
        return 2
    k = fit(train, calibration().constants)
    print(f"fitted on {len(train)} points, held out {len(test)} ({name}); constants: "
          + ", ".join(f"{n}={getattr(k, n):.3g}" for n in NAMES))  # fmt: skip
    print(f"{'regime':18s} {'n':>3s}  {'held out':>13s}")
    for r, t in regime_medians(test, k).items():
        cells = [("     -" if v is None else f"{v:6.0%}") for v in (t["speed"], t["ttft"])]
        print(f"{r:18s} {t['n']:3d}  {cells[0]} ({cells[1].strip():>5s})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fit", action="store_true", help="refit and write src/fitgate/sizing/data/performance.json")
    parser.add_argument(
        "--free-front-end", action="store_true", help="fit the per-request front end within 1-150 ms (issue 24)"
    )
    parser.add_argument("--aic", action="store_true", help="compare with aiconfigurator on the points it covers")
    parser.add_argument(
        "--held-out", metavar="SET", help="fit without the points whose 'added' is SET and print their errors only"
    )
    parser.add_argument(
        "--points", action="store_true", help="one line per point (measured, estimated, fitted and LOGO errors)"
    )
    args = parser.parse_args(argv)
    if args.aic:
        return side_by_side_aic(load_points(), calibration().constants)
    if args.held_out:
        return held_out(load_points(), args.held_out)
    if args.free_front_end:
        BOUNDS["frontend_s"] = FRONT_END_BOUNDS
    points = load_points()
    start = calibration().constants
    k = fit(points, start) if args.fit else start
    by_gpu = logo(points, lambda p: p.gpu, k)
    by_family = logo(points, lambda p: p.family, k)
    if args.points:
        dump_points(points, k, by_gpu, by_family)
    rows: dict[str, dict[str, list[float | None]]] = {}
    for i, p in enumerate(points):
        cols = {"v1": v1_errors(p), "fit": errors(p, k), "logo_gpu": by_gpu[i], "logo_family": by_family[i]}
        for r in regime(p):
            row = rows.setdefault(r, {})
            for name, (speed, ttft) in cols.items():
                row.setdefault(f"{name}_speed", []).append(speed)
                row.setdefault(f"{name}_ttft", []).append(ttft)
            if cols["fit"][0] is not None:  # n: the points whose decode speed is compared
                row.setdefault("n", []).append(1.0)
    table = {
        r: {"n": 0, **{c: (len(v) if c == "n" else median_abs(v)) for c, v in cols.items()}}
        for r, cols in sorted(rows.items())
    }
    tpot_band = band([e for e, _ in by_gpu.values() if e is not None])
    ttft_band = band([e for _, e in by_gpu.values() if e is not None])
    if args.fit:
        gpus = sorted({p.gpu for p in points})
        doc = {
            "_comment": "Constants of the step model (fitgate.sizing.step_time), fitted by benchmarks/throughput.py "
            "--fit on benchmarks/throughput/points.json; band: measured / estimated (TPOT, TTFT), 10th and 90th "
            "percentile over the points, each estimated with constants fitted without its GPU product.",
            "constants": {n: float(f"{getattr(k, n):.4g}") for n in NAMES},
            "band": {"tpot": list(tpot_band), "ttft": list(ttft_band)},
            "basis": f"fitted on {len(points)} published points ({', '.join(gpus)}); range = 10th-90th percentile of "
            "measured / estimated, leave-one-GPU-out (benchmarks/throughput.py)",
        }
        DATA.write_text(json.dumps(doc, indent=1) + "\n")
    holdout = holdout_table(k)
    if args.json:
        print(json.dumps({"constants": {n: getattr(k, n) for n in NAMES}, "tpot_band": tpot_band,
                          "ttft_band": ttft_band, "regimes": table, "held_out": holdout}, indent=1))  # fmt: skip
        return 0

    def pct(v: float | int | None) -> str:
        return "     -" if v is None else f"{v:6.0%}"

    print(f"{len(points)} points; constants: " + ", ".join(f"{n}={getattr(k, n):.3g}" for n in NAMES))
    print(f"band (measured/estimated, LOGO by GPU, p10-p90): TPOT {tpot_band}, TTFT {ttft_band}")
    print("median |error| of per-request decode speed (TTFT in brackets):")
    print(f"{'regime':18s} {'n':>3s}  {'before':>13s}  {'fitted':>13s}  {'LOGO gpu':>13s}  {'LOGO family':>13s}")
    for r, t in table.items():
        cells = "  ".join(
            f"{pct(t[f'{c}_speed'])} ({pct(t[f'{c}_ttft']).strip():>5s})"
            for c in ("v1", "fit", "logo_gpu", "logo_family")
        )
        print(f"{r:18s} {t['n']:3d}  {cells}")
    n_held = max((t["n"] for t in holdout.values()), default=0)
    print(f"held out ({HOLDOUT.relative_to(HERE.parent)}: {n_held} points no fit has seen, at these constants):")
    for r, t in holdout.items():
        print(f"{r:18s} {t['n']:3d}  {pct(t['speed'])} ({pct(t['ttft']).strip():>5s})")
    return 0


def holdout_table(k: Constants) -> dict[str, dict[str, Any]]:
    """Median |error| by regime on holdout.json's points at the constants ``k`` (fitted without them)."""
    return regime_medians(load_points(HOLDOUT), k)


def regime_medians(points: Sequence[Point], k: Constants) -> dict[str, dict[str, Any]]:
    """By regime: the points whose decode speed is compared (n), the median |error| of decode speed and of TTFT."""
    rows: dict[str, list[tuple[float | None, float | None]]] = {}
    for p in points:
        for r in regime(p):
            rows.setdefault(r, []).append(errors(p, k))
    return {
        r: {
            "n": sum(1 for e, _ in errs if e is not None),
            "speed": median_abs([e for e, _ in errs]),
            "ttft": median_abs([t for _, t in errs]),
        }
        for r, errs in sorted(rows.items())
    }


if __name__ == "__main__":
    sys.exit(main())
