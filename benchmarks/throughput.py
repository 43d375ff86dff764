"""The decode estimate against published vLLM measurements (benchmarks/throughput/points.json, each cited).

Usage: python benchmarks/throughput.py [--json]
For each point: plan the model on the GPU at the point's concurrency and context, estimate decode
tokens/s (fitgate.sizing.performance) and compare with the measured rate (tpot_ms -> concurrency x 1000
/ tpot_ms; output_tokens_per_s and decode_tokens_per_s as published). Prints one line per point and
the median absolute error; --json prints one JSON document instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ServingConfig, Workload, lookup_gpu, plan
from fitgate.sizing.performance import estimate

POINTS = Path(__file__).with_name("throughput") / "points.json"


def measured_decode(point: dict[str, Any]) -> float:
    """The measured decode rate of a point, in tokens/s over the whole batch."""
    if point["metric"] == "tpot_ms":
        return float(point["concurrency"]) * 1000.0 / float(point["value"])
    return float(point["value"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    points = json.loads(POINTS.read_text())["points"]
    rows = []
    for p in points:
        model = to_model_input(resolve(p["model"], source="catalog"))
        serving = ServingConfig(
            max_model_len=max(4096, p["context_tokens"]),
            tensor_parallel_size=p["tp"],
            dtype=p.get("dtype", "auto"),
        )
        result = plan(model, lookup_gpu(p["gpu"]), serving, Workload(p["concurrency"], p["context_tokens"]))
        est = estimate(model, result).decode_tokens_per_s
        meas = measured_decode(p)
        rows.append(
            {
                "gpu": p["gpu"],
                "model": p["model"],
                "concurrency": p["concurrency"],
                "metric": p["metric"],
                "measured_tokens_per_s": round(meas, 1),
                "estimated_tokens_per_s": round(est, 1),
                "error": round((est - meas) / meas, 4),
                "source": p["source"],
            }
        )
    errors = [abs(r["error"]) for r in rows]
    summary = {
        "points": len(rows),
        "gpus": sorted({r["gpu"] for r in rows}),
        "median_abs_error": round(statistics.median(errors), 4),
        "median_signed_error": round(statistics.median(r["error"] for r in rows), 4),
    }
    if args.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=2))
        return 0
    print(f"{'GPU':10s} {'MODEL':36s} {'CONC':>4s} {'METRIC':20s} {'MEASURED':>9s} {'ESTIMATE':>9s} {'ERROR':>7s}")
    for r in rows:
        print(
            f"{r['gpu']:10s} {r['model']:36s} {r['concurrency']:4d} {r['metric']:20s} "
            f"{r['measured_tokens_per_s']:9.1f} {r['estimated_tokens_per_s']:9.1f} {r['error']:+7.1%}"
        )
    print(
        f"{summary['points']} points on {len(summary['gpus'])} GPUs: median |error| "
        f"{summary['median_abs_error']:.1%}, median signed error {summary['median_signed_error']:+.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
