"""Speed of one plan evaluation (pure sizing, warm model facts), on this machine.

Usage: python benchmarks/speed.py [--n 2000] [--cold 5]
Prints one JSON line: {"plan_ms_p50": ..., "plan_ms_p99": ..., "with_suggestions_ms_p50": ...,
"cold_plan_s": [...]} where cold_plan_s is the wall time of ``fitgate plan`` in a new process
(offline, a catalog model: import, config reading with the defaults table, plan, suggestions, print).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ServingConfig, Workload, lookup_gpu, plan, suggest

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
    args = parser.parse_args()
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
    timings: list[float] = []
    for i in range(args.n):
        model, gpu, serving, workload = prepared[i % len(prepared)]
        start = time.perf_counter()
        plan(model, gpu, serving, workload)
        timings.append((time.perf_counter() - start) * 1000)
    misfit = to_model_input(resolve("meta-llama/Llama-3.1-70B-Instruct", source="catalog"))
    h100 = lookup_gpu("H100")
    serving = ServingConfig(max_model_len=32768)
    with_suggestions: list[float] = []
    for _ in range(50):
        start = time.perf_counter()
        suggest(misfit, h100, serving, None, plan(misfit, h100, serving))
        with_suggestions.append((time.perf_counter() - start) * 1000)
    timings.sort()
    print(
        json.dumps(
            {
                "plan_ms_p50": round(statistics.median(timings), 3),
                "plan_ms_p99": round(timings[int(0.99 * (len(timings) - 1))], 3),
                "with_suggestions_ms_p50": round(statistics.median(with_suggestions), 3),
                "cold_plan_s": cold,
                "n": args.n,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
