"""fitgate's CUDA-graph term against every CUDA-graph estimate vLLM printed in the logs we hold.

vLLM prints ``Estimated CUDA graph memory: X GiB total`` from 0.18 (the figure it subtracts from the
KV budget from 0.20) and, when it profiles, ``Profiling CUDA graph memory: PIECEWISE=a (largest=x),
FULL=b (largest=y)``. This reads both case files (``../shared/calibration/cases.jsonl`` and
``benchmarks/calibration/public-2026.jsonl``, the same as benchmarks/accuracy.py), takes every case
with a printed estimate, and compares

* ``new``: :func:`fitgate.sizing.cudagraphs.cuda_graph_estimate_bytes` with the graph counts the log
  prints (else the ones vLLM's config computes from the case's settings), and
* ``old``: the single 0.19-fitted formula (0.35 GiB + 17 MiB/layer, +0.25 GiB MoE) fitgate used
  for every release before.

Only the model's shape is needed (decoder layers on the GPU, MoE or not), so cases that accuracy.py
cannot size (no exact GPU, unknown checkpoint) count here when their architecture's config is in
tests/corpus or shared/calibration/models. Patched vLLM builds are left out as in accuracy.py.

Usage: python benchmarks/cudagraphs.py [--calibration DIR] [--fit]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import cudagraphs
from fitgate.sizing.cudagraphs import GraphCounts, capture_sizes, cuda_graph_estimate_bytes, graph_counts
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import accounting_for

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from accuracy import DEFAULT_CALIBRATION, DEFAULT_EXTRA, EXCLUDED, _facts, run_case  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
#: Printed estimates found after the constants were fitted (public logs, each with its source and the
#: tests/corpus folder of its architecture in ``shape``): reported apart, never fitted.
HELD_OUT = ROOT / "benchmarks" / "calibration" / "cuda-graph-estimates.jsonl"
#: Where a case's model shape comes from when its own checkpoint is not in the repo: a checkpoint
#: of the same architecture and size in tests/corpus (each folder's SOURCE.md cites it).
SHAPES = {
    "RedHatAI/Qwen3.6-35B-A3B-NVFP4": "Qwen__Qwen3.6-35B-A3B",
    "rdtand/Qwen3.6-35B-A3B-PrismaQuant-4.75bit-vllm": "Qwen__Qwen3.6-35B-A3B",
    "google/gemma-4-31b-it": "nvidia__Gemma-4-31B-IT-NVFP4",
    "LiquidAI/LFM2.5-1.2B-Instruct": "LiquidAI__LFM2.5-VL-1.6B",  # its language model is LFM2.5-1.2B
    "GLM-5.2-NVFP4": "nvidia__GLM-5.2-NVFP4",
    "deepseek-ai/DeepSeek-V4-Flash": "deepseek-ai__DeepSeek-V4-Flash",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen__Qwen2.5-7B-Instruct",
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": "meta-llama__Llama-3.3-70B-Instruct",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": "meta-llama__Meta-Llama-3.1-8B",
}
_PROFILING = re.compile(r"Profiling CUDA graph memory: (.*)")
_MODE = re.compile(r"(PIECEWISE|FULL)=(\d+) \(largest=(\d+)\)")


@dataclass
class Point:
    case: str
    release: str
    model: str
    layers: int
    moe: bool
    counts: GraphCounts
    counts_from: str
    printed_gib: float
    actual_gib: float | None


def _shape(case: dict[str, Any], calibration: Path) -> tuple[int, bool] | None:
    repo = str(case["model"]).split(" (")[0]
    if "shape" in case:
        SHAPES[repo] = str(case["shape"])
    for folder in (calibration / "models" / repo.replace("/", "__"), CORPUS / repo.replace("/", "__")):
        if folder.is_dir():
            break
    else:
        if repo not in SHAPES:
            return None
        folder = CORPUS / SHAPES[repo]
    try:
        arch = to_model_input(load_directory(folder, repo)).arch
        return len(arch.layers), arch.is_moe
    except ValueError:  # an architecture fitgate does not size: its config.json still gives the shape
        config = json.loads((folder / "config.json").read_text())
        text = config.get("text_config", config)
        moe = any(k in text for k in ("n_routed_experts", "num_experts", "num_local_experts"))
        return int(text["num_hidden_layers"]), moe


def _counts(case: dict[str, Any], version: str, max_capture: int | None) -> tuple[GraphCounts, str]:
    for line in case.get("raw_lines") or []:
        match = _PROFILING.search(line)
        if match:
            modes = {m: (int(n), int(big)) for m, n, big in _MODE.findall(match.group(1))}
            pw, full = modes.get("PIECEWISE", (0, 0)), modes.get("FULL", (0, 0))
            return GraphCounts(piecewise=pw[0], full=full[0], largest=max(pw[1], full[1])), "log"
    seqs = case.get("max_num_seqs") or 1024
    mbt = case.get("max_num_batched_tokens") or 8192
    sizes = capture_sizes(
        accounting_for(version), max_num_seqs=seqs, max_num_batched_tokens=mbt, model_max_capture_size=max_capture
    )
    return graph_counts(sizes, seqs), "settings"


def collect(calibration: Path, held_out: bool = False) -> tuple[list[Point], list[tuple[str, str]]]:
    """The cases with a printed estimate: the fitting set, or (``held_out``) :data:`HELD_OUT`."""
    if held_out:
        cases = [json.loads(x) for x in HELD_OUT.read_text().splitlines() if x.strip()]
    else:
        cases = [json.loads(x) for x in (calibration / "cases.jsonl").read_text().splitlines() if x.strip()]
        for extra in DEFAULT_EXTRA:
            cases += [json.loads(x) for x in extra.read_text().splitlines() if x.strip()]
    points: list[Point] = []
    left_out: list[tuple[str, str]] = []
    for case in cases:
        measured = case.get("measured") or {}
        printed = measured.get("cuda_graph_estimated_gib")
        if printed is None:
            continue
        excluded = next((why for pattern, why in EXCLUDED.items() if re.search(pattern, case["id"])), "")
        if excluded:
            left_out.append((case["id"], excluded))
            continue
        shape = _shape(case, calibration)
        if shape is None:
            left_out.append((case["id"], "model shape not in the repo"))
            continue
        layers, moe = shape
        pp = case.get("pipeline_parallel_size") or 1
        version = str(case.get("vllm_version") or "0.19.0").split()[0]
        version = re.match(r"^\d+\.\d+\.\d+", version).group(0)  # type: ignore[union-attr]
        gpt_oss = "gpt-oss" in str(case["model"])
        counts, source = _counts(case, version, 1024 if gpt_oss else None)
        points.append(
            Point(
                case["id"],
                ".".join(version.split(".")[:2]),
                str(case["model"]).split(" (")[0],
                layers // pp,
                moe,
                counts,
                source,
                float(printed),
                measured.get("cuda_graph_gib"),
            )
        )
    return points, left_out


def old_bytes(p: Point) -> int:
    per_layer = 17 * MiB * (2 if "gpt-oss" in p.model else 1)
    return int(0.35 * GiB) + p.layers * per_layer + (int(0.25 * GiB) if p.moe else 0)


def new_bytes(p: Point) -> int:
    return cuda_graph_estimate_bytes(p.layers, p.moe, p.counts)


def _fit(points: list[Point]) -> None:
    """Grid search of the three open constants for the least sum of absolute errors (GiB).

    Repeated runs of one model with one graph set (the 0.19 max_model_len sweeps) count once.
    """
    unique = {(p.model, p.layers, p.moe, p.counts, p.printed_gib): p for p in points}.values()
    best: tuple[float, int, int, int] | None = None
    for per_kib, first_mib, moe_mib in itertools.product(range(100, 301, 10), range(0, 801, 10), range(0, 1001, 10)):
        total = 0.0
        for p in unique:
            extra = sum(max(n - 1, 0) for n in (p.counts.piecewise, p.counts.full))
            pred = (moe_mib if p.moe else first_mib) * MiB + extra * max(per_kib * 1024 * p.layers, MiB)
            total += abs(pred / GiB - p.printed_gib)
        if best is None or total < best[0]:
            best = (total, per_kib, first_mib, moe_mib)
    assert best is not None
    print(
        f"fit: per graph-layer {best[1]} KiB, first {best[2]} MiB dense / {best[3]} MiB MoE (sum |err| {best[0]:.2f})"
    )


def peak_with_estimate(calibration: Path) -> None:
    """From 0.27 the "peak activation" vLLM prints is the transient peak plus the estimate.

    ``peak_activation_memory = transient_peak_headroom + cudagraph_memory_estimate_applied``
    (v1/worker/gpu_worker.py 0.27.0 L527-528, 0.28.0 L542-543, 0.33.0 L748-749), so on the sized
    0.27+ cases the printed figure checks fitgate's activation + estimate (old: the 0.19 formula).
    """
    cases = [json.loads(x) for extra in DEFAULT_EXTRA for x in extra.read_text().splitlines() if x.strip()]
    print("\n| case (sized, release >= 0.27) | printed peak activation GiB | fitgate activation + old | + new |")
    print("|---|---|---|---|")
    for case in cases:
        printed = (case.get("measured") or {}).get("activation_peak_gib")
        if printed is None:
            continue
        row = run_case(case, calibration)
        if row.skipped or tuple(int(x) for x in row.release.split(".")) < (0, 27):
            continue
        facts = _facts(case, calibration)
        assert facts is not None  # a sized case has a config
        arch = to_model_input(facts).arch
        activation, graphs = row.predicted["activation_peak_gib"], row.predicted["graph_estimate_gib"]
        shape = Point(case["id"], row.release, "", len(arch.layers), arch.is_moe, GraphCounts(0, 0, 0), "", 0, None)
        old = old_bytes(shape)
        print(
            f"| {case['id'][:64]} | {printed:.2f} | {activation + (old / GiB if graphs else 0):.2f} | "
            f"{activation + graphs:.2f} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)
    parser.add_argument("--fit", action="store_true", help="also grid-search the fitted constants")
    args = parser.parse_args(argv)
    if not (args.calibration / "cases.jsonl").is_file():
        print(f"cudagraphs: {args.calibration / 'cases.jsonl'} not found (pass --calibration DIR)", file=sys.stderr)
        return 2
    points, left_out = collect(args.calibration)
    print("| case | release | layers | MoE | PIECEWISE / FULL graphs (from) | printed GiB | old | new |")
    print("|---|---|---|---|---|---|---|---|")
    for p in points:
        print(
            f"| {p.case[:60]} | {p.release} | {p.layers} | {'yes' if p.moe else 'no'} | "
            f"{p.counts.piecewise} / {p.counts.full} ({p.counts_from}) | {p.printed_gib:.2f} | "
            f"{old_bytes(p) / GiB:.2f} | {new_bytes(p) / GiB:.2f} |"
        )
    for case, why in left_out:
        print(f"| {case[:60]} | left out: {why} |")
    print()
    print("| release | estimates | old median abs err GiB | new median abs err GiB | old max | new max |")
    print("|---|---|---|---|---|---|")
    groups = sorted({p.release for p in points}, key=lambda r: tuple(int(x) for x in r.split(".")))
    recent = [p for p in points if tuple(int(x) for x in p.release.split(".")) >= (0, 20)]
    for name, group in [
        *((r, [p for p in points if p.release == r]) for r in groups),
        (">= 0.20", recent),
        ("all", points),
    ]:
        old = [abs(old_bytes(p) / GiB - p.printed_gib) for p in group]
        new = [abs(new_bytes(p) / GiB - p.printed_gib) for p in group]
        print(
            f"| {name} | {len(group)} | {statistics.median(old):.2f} | {statistics.median(new):.2f} | "
            f"{max(old):.2f} | {max(new):.2f} |"
        )
    print(
        f"\nconstants: per graph-layer {cudagraphs.PER_GRAPH_LAYER_BYTES / 1024:.0f} KiB, first "
        f"{cudagraphs.FIRST_CAPTURE_BYTES / MiB:.0f} MiB dense / {cudagraphs.FIRST_CAPTURE_MOE_BYTES / MiB:.0f} MiB MoE"
    )
    held, _ = collect(args.calibration, held_out=True)
    print("\n| held-out case (never fitted) | release | layers | MoE | PIECEWISE / FULL | printed GiB | old | new |")
    print("|---|---|---|---|---|---|---|---|")
    for p in held:
        print(
            f"| {p.case} | {p.release} | {p.layers} | {'yes' if p.moe else 'no'} | {p.counts.piecewise} / "
            f"{p.counts.full} | {p.printed_gib:.2f} | {old_bytes(p) / GiB:.2f} | {new_bytes(p) / GiB:.2f} |"
        )
    peak_with_estimate(args.calibration)
    if args.fit:
        _fit(points)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
