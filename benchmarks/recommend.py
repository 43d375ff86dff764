"""Speed of ``fitgate recommend``'s search (pure sizing, warm model facts), on this machine.

Usage: python benchmarks/recommend.py [--n 5] [--targets] [--model deepseek-ai/DeepSeek-V3]
Prints one JSON line: {"model": ..., "gpus": ..., "plans": ..., "options": ..., "search_s_p50": ...,
"search_s_max": ...}: Llama-3.1-70B at 16 x 32768 tokens over the whole GPU catalog, up to 16 GPUs per
replica, every KV dtype and quantization vLLM runs on each GPU. The target is <= 2 s. ``--model
deepseek-ai/DeepSeek-V3``: a 671B MoE, whose search also tries DP x TP shapes with expert parallelism.
``--targets`` adds latency targets (5 requests/s of 4000 in / 1000 out within TTFT 3 s, TPOT 60 ms:
replicas per option, docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import Workload, gpu_catalog
from fitgate.sizing.capacity import LatencyTargets, search
from fitgate.sizing.cost import parse_gpu_prices
from fitgate.sizing.performance import SpeedLoad

MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--model", default=MODEL, help="a catalog model")
    parser.add_argument("--targets", action="store_true", help="with latency targets and a request rate")
    args = parser.parse_args()
    model = to_model_input(resolve(args.model, source="catalog"))
    extra = {}
    if args.targets:
        extra = {"speed_load": SpeedLoad(4000, 1000, 5.0), "targets": LatencyTargets(3.0, 0.060)}
    gpus = gpu_catalog()
    times: list[float] = []
    found = None
    for _ in range(args.n):
        start = time.perf_counter()
        found = search(model, Workload(16, 32768), gpus, max_gpus=16, prices=parse_gpu_prices("2.5"), **extra)
        times.append(time.perf_counter() - start)
    assert found is not None
    print(
        json.dumps(
            {
                "model": args.model,
                "targets": args.targets,
                "gpus": len(gpus),
                "plans": found.planned,
                "options": len(found.options),
                "search_s_p50": round(statistics.median(times), 3),
                "search_s_max": round(max(times), 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
