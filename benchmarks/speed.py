"""Speed of one plan evaluation (pure sizing, warm model facts), on this machine.

Usage: python benchmarks/speed.py [--n 2000] [--cold 5] [--baseline REF [--rounds 3]]
Prints one JSON line: {"plan_ms_p50": ..., "plan_ms_p99": ..., "plan_new_settings_ms_p50": ...,
"with_suggestions_ms_p50": ..., "cold_plan_s": [...], "results_sha": ...}: plan_ms_* re-plan the four
cases (warm: the plan-level memo answers the settings), plan_new_settings_ms_p50 the same cases each with
a max_model_len never planned before (only the per-model memos answer), cold_plan_s the wall time of
``fitgate plan`` in a new process (offline, a catalog model: import, config reading with the defaults
table, plan, suggestions, print), results_sha a digest of the plans and suggestions (equal: equal results).

With ``--baseline REF`` the same measurement runs ``--rounds`` times alternately on the working tree and on
commit REF (``benchmarks/baseline.py``), and the last line holds both sides' medians, their ratio and
whether the results are identical: on a shared machine only an interleaved comparison means anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.baseline import side_by_side

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ServingConfig, Workload, advice, lookup_gpu, plan, suggest

CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", ServingConfig(max_model_len=32768), Workload(16, 32000)),
    ("openai/gpt-oss-20b", "H100", ServingConfig(max_model_len=8192, tensor_parallel_size=2), None),
    ("deepseek-ai/DeepSeek-V3", "H200", ServingConfig(max_model_len=32768, tensor_parallel_size=8), None),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "H200", ServingConfig(max_model_len=65536, tensor_parallel_size=4), None),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--cold", type=int, default=5, help="new-process fitgate plan runs")
    parser.add_argument("--baseline", help="a commit to measure side by side with the working tree")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds with --baseline")
    args = parser.parse_args()
    if args.baseline:
        return compare(args.baseline, args.rounds, args.n, args.cold)
    fitgate = Path(sys.executable).with_name("fitgate")
    cold: list[float] = []
    for _ in range(args.cold):
        start = time.perf_counter()
        subprocess.run(
            [
                str(fitgate),
                "plan",
                "--model",
                "meta-llama/Llama-3.1-8B-Instruct",
                "--gpu",
                "H100",
                "--max-model-len",
                "32768",
            ],
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            check=False,
        )
        cold.append(round(time.perf_counter() - start, 3))
    prepared = [(to_model_input(resolve(m, source="catalog")), lookup_gpu(g), s, w) for m, g, s, w in CASES]
    digest = hashlib.sha256()
    timings: list[float] = []
    for i in range(args.n):
        model, gpu, serving, workload = prepared[i % len(prepared)]
        start = time.perf_counter()
        result = plan(model, gpu, serving, workload)
        timings.append((time.perf_counter() - start) * 1000)
        if i < len(prepared):
            digest.update(repr(result).encode())
    # every plan with settings never planned before (a new max_model_len): no plan-level memo answers it
    fresh: list[float] = []
    for i in range(min(args.n, 1000)):
        model, gpu, serving, workload = prepared[i % len(prepared)]
        serving = replace(serving, max_model_len=(serving.max_model_len or 8192) - 1 - i)
        start = time.perf_counter()
        plan(model, gpu, serving, workload)
        fresh.append((time.perf_counter() - start) * 1000)
    # the search itself: suggest() remembers its answer per deployment, a new deployment searches
    search = getattr(advice, "search_suggestions", suggest)  # a baseline before the memo has suggest only
    misfit = to_model_input(resolve("meta-llama/Llama-3.1-70B-Instruct", source="catalog"))
    h100 = lookup_gpu("H100")
    serving = ServingConfig(max_model_len=32768)
    with_suggestions: list[float] = []
    for _ in range(50):
        start = time.perf_counter()
        suggestions = search(misfit, h100, serving, None, plan(misfit, h100, serving))
        with_suggestions.append((time.perf_counter() - start) * 1000)
    digest.update(repr(suggestions).encode())
    timings.sort()
    print(
        json.dumps(
            {
                "plan_ms_p50": round(statistics.median(timings), 3),
                "plan_ms_p99": round(timings[int(0.99 * (len(timings) - 1))], 3),
                "plan_new_settings_ms_p50": round(statistics.median(fresh), 3),
                "with_suggestions_ms_p50": round(statistics.median(with_suggestions), 3),
                "cold_plan_s": cold,
                "n": args.n,
                "results_sha": digest.hexdigest()[:16],
            }
        )
    )
    return 0


def compare(ref: str, rounds: int, n: int, cold: int) -> int:
    """Interleaved rounds on the working tree and on ``ref``; prints each round, then the medians."""
    runs = side_by_side([__file__, "--n", str(n), "--cold", str(cold)], ref, rounds)
    summary: dict[str, object] = {"baseline": ref, "rounds": rounds, "n": n}
    for key in ("plan_ms_p50", "plan_ms_p99", "plan_new_settings_ms_p50", "with_suggestions_ms_p50"):
        now = statistics.median(r[key] for r in runs["current"])
        before = statistics.median(r[key] for r in runs["baseline"])
        summary[key] = {"current": now, "baseline": before, "ratio": round(now / before, 2) if before else None}
        print(f"{key}: current {[r[key] for r in runs['current']]} baseline {[r[key] for r in runs['baseline']]}")
    summary["identical_results"] = len({r["results_sha"] for r in runs["current"] + runs["baseline"]}) == 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
