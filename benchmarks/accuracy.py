"""Accuracy of fitgate's plan against vLLM's own startup figures.

Runs every case of ``../shared/calibration/cases.jsonl`` (measured vLLM starts with real model
configs in ``../shared/calibration/models/``) and of ``benchmarks/calibration/public-2026.jsonl``
(public start-up logs of vLLM 0.10-0.29 gathered for the accuracy issue, never used to fit anything;
their models' configs come from ``tests/corpus`` or the built-in catalog) through
``fitgate.sizing.plan`` and prints, per case, overall, by vLLM release and by GPU product, the
relative error of

* weights per GPU ("Model loading took X GiB", rank 0),
* available KV cache memory ("Available KV cache memory", rank 0),
* num_blocks (min over workers) and the reported KV tokens,

and whether the verdict agrees with what happened (started -> Fits/Tight; failed -> DoesNotFit;
failed after KV sizing -> not Fits; failed before KV sizing, for a reason other than memory -> not
DoesNotFit). A last table breaks the same figures down by serving shape
(dense TP, MoE TP, EP/DP, LoRA, VLM, speculative, vLLM >= 0.30, 0.34; issue 20); a shape with no
case says "no public log found".

Usage: python benchmarks/accuracy.py [--calibration DIR] [--extra FILE ...] [--markdown] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitgate.checkpoints.catalog import find_entry, load_catalog
from fitgate.checkpoints.facts import ModelFacts, to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel, gpu_catalog
from fitgate.sizing.plan import Plan, ServingConfig, Verdict, plan
from fitgate.sizing.units import GiB

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CALIBRATION = ROOT.parent / "shared" / "calibration"
DEFAULT_EXTRA = [ROOT / "benchmarks" / "calibration" / "public-2026.jsonl"]
CORPUS = ROOT / "tests" / "corpus"
#: Version assumed for cases whose log does not print one: the V0 logs use the pre-0.6.5 profiler
#: format; the undated V1 logs print the 0.10+ "Actual usage" line and show the pre-0.17 sampler.
UNDATED = {"V0": "0.6.4", "V1": "0.11.0"}
#: Cases that name no exact repository; shared/calibration/README.md points them at these checkpoints.
ALIASES = {
    "Llama2-7B": "meta-llama/Llama-2-7b-hf",
    "Llama2-70B": "meta-llama/Llama-2-70b-hf",
    # public-2026: the source says "32B-AWQ", Qwen3, 64 layers, 18.00 GiB on disk; Qwen/Qwen3-32B-AWQ's
    # shards are 19,325,481,744 B = 18.00 GiB (tests/corpus/Qwen__Qwen3-32B-AWQ/SOURCE.md).
    "Qwen3-32B-AWQ": "Qwen/Qwen3-32B-AWQ",
}
#: Runs of a patched vLLM (what they printed depends on code that is not vLLM's) or whose figures the
#: source attributes to another process: excluded from the accuracy figures with this reason instead
#: of being fitted. Matched on the case id.
EXCLUDED = {
    r"^gh-club3090-": "excluded: club-3090 'Genesis' runtime patches change vLLM's memory profiling",
    r"^gh-file-71492254810-mimo26-": "excluded: day-0 MiMo image with SM120 recipe and DiffKV/split-KV patches",
    r"^gh-file-59915398117-.*aeon": "excluded: AEON community image (vLLM 0.27.1 with 30 overlays)",
    r"^gh-file-68904302597-": "excluded: custom vLLM fork build (0.27.2.dev0+g6e448d0ea)",
    # Not a patched build, but a start whose figures another process set (the source says so).
    r"^gh-file-69451098589-qwen3-32b-awq-rtx5090-vram-race-fail$": (
        "excluded: the previous container was still releasing VRAM during start-up (stated by the source)"
    ),
}


@dataclass
class Row:
    case: str
    model: str
    status: str
    verdict: str
    verdict_ok: bool
    errors: dict[str, float | None]
    predicted: dict[str, float]
    measured: dict[str, float | None]
    skipped: str = ""
    release: str = ""
    gpu: str = ""
    source: str = ""
    shapes: tuple[str, ...] = ()


# --- serving shapes (issue 20): which rows of the per-shape report a case belongs to ----------------
#: The rows of the per-shape report, in order. A case may fall in several (a VLM run on vLLM 0.34 is in
#: "VLM", "vLLM >= 0.30" and "vLLM 0.34"); "dense TP" and "MoE TP" hold only the plain runs (no EP/DP,
#: LoRA, VLM or speculative decoding), so every case is in at least one row.
SHAPES = ("dense TP", "MoE TP", "EP/DP", "LoRA", "VLM", "speculative", "vLLM >= 0.30", "vLLM 0.34")
#: config.json keys that count routed experts (Mixtral/Qwen-MoE, DeepSeek, Llama 4 / gpt-oss spellings).
_EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
#: Model names that are MoE or vision-language where no config.json is at hand (unsized cases only).
_MOE_NAME = re.compile(r"(?i)\bA\d+B\b|-A\d+B|moe|mixtral|deepseek-v[234]|glm-5|gpt-oss|mimo-v2|kimi|qwen3-235b")
_VLM_NAME = re.compile(r"(?i)-vl\b|-vl-|\bvision\b|gemma-?[34]\b|gemma-?[34]-|llama-4|pixtral")


def _config_of(case: dict[str, Any], calibration: Path) -> dict[str, Any] | None:
    try:
        facts = _facts(case, calibration)
    except (OSError, ValueError):
        return None
    return dict(facts.config) if facts is not None else None


def _experts(config: dict[str, Any]) -> int:
    for scope in (config, config.get("text_config") or {}):
        for key in _EXPERT_KEYS:
            value = scope.get(key) if isinstance(scope, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return value
    return 0


def case_shapes(case: dict[str, Any], calibration: Path, release: str) -> tuple[str, ...]:
    """The serving shapes of one case: from its recorded settings, else the flags its raw lines print.

    MoE and vision come from the model's config.json where one is at hand (routed experts; a
    ``vision_config``), else from the model's name (only for cases that are not sized anyway).
    """
    raw = " ".join(case.get("raw_lines") or [])
    dp = case.get("data_parallel_size") or 1
    dp_raw = re.search(r"data_parallel_size['\"]?\s*[:=]\s*(\d+)", raw)
    ep_dp = (
        bool(case.get("enable_expert_parallel"))
        or dp > 1
        or bool(re.search(r"enable_expert_parallel['\"]?\s*[:=]\s*True|--enable-expert-parallel", raw))
        or "Expert parallelism is enabled" in raw
        or (dp_raw is not None and int(dp_raw.group(1)) > 1)
    )
    lora = bool(case.get("enable_lora")) or bool(re.search(r"enable_lora['\"]?\s*[:=]\s*True|--enable-lora", raw))
    config = _config_of(case, calibration)
    name = str(case.get("model") or "")
    if config is not None:
        moe = _experts(config) > 0
        vlm = "vision_config" in config and case.get("runner") != "pooling"
    else:
        moe = bool(_MOE_NAME.search(name))
        # the name, or the log: a ...ForConditionalGeneration architecture, or the encoder cache line
        # vLLM prints only for multimodal models (gpu_model_runner / encoder_runner)
        vlm = bool(_VLM_NAME.search(name.split(" (", maxsplit=1)[0])) or bool(
            re.search(r"Resolved architecture: \w*ForConditionalGeneration|Encoder cache will be initialized", raw)
        )
    spec = bool(case.get("speculative_method"))
    shapes = []
    if not (ep_dp or lora or vlm or spec):
        shapes.append("MoE TP" if moe else "dense TP")
    shapes += [s for s, on in (("EP/DP", ep_dp), ("LoRA", lora), ("VLM", vlm), ("speculative", spec)) if on]
    if re.fullmatch(r"\d+\.\d+", release):
        minor = tuple(int(p) for p in release.split("."))
        if minor >= (0, 30):
            shapes.append("vLLM >= 0.30")
        if minor == (0, 34):
            shapes.append("vLLM 0.34")
    return tuple(shapes)


def shape_breakdown(rows: list[Row]) -> list[tuple[str, int, int, str, str, str]]:
    """Per serving shape: cases, sized, median |err| of weights / available KV, verdicts agreeing.

    A shape with no case keeps its row and says so, rather than disappearing from the report.
    """
    out = []
    for shape in SHAPES:
        group = [r for r in rows if shape in r.shapes]
        if not group:
            out.append((shape, 0, 0, "no public log found", "no public log found", "-"))
            continue
        sized = [r for r in group if not r.skipped]
        cells = []
        for term in ("weights_gib", "kv_available_gib"):
            vals = [abs(r.errors[term]) for r in sized if r.errors.get(term) is not None]  # type: ignore[arg-type]
            cells.append(f"{100 * statistics.median(vals):.2f}% (n={len(vals)})" if vals else "-")
        agree = f"{sum(r.verdict_ok for r in sized)}/{len(sized)}" if sized else "-"
        out.append((shape, len(group), len(sized), cells[0], cells[1], agree))
    return out


def _gpu(case: dict[str, Any]) -> GpuModel:
    text = str(case.get("gpu") or "").lower()
    best: GpuModel | None = None
    best_len = 0
    for model in gpu_catalog():
        for alias in (model.name, *model.aliases):
            a = alias.lower()
            if len(a) > 3 and re.search(rf"(?<![a-z0-9]){re.escape(a)}(?![a-z0-9])", text) and len(a) > best_len:
                best, best_len = model, len(a)
    total = case.get("gpu_total_gib")
    if best is None:
        best = GpuModel(name="unknown", memory_bytes=int((total or 79.19) * GiB))
    if total:
        best = GpuModel(**{**best.__dict__, "memory_bytes": int(total * GiB)})
    if best.name.startswith("A100") and total and total < 60:
        best = GpuModel(**{**best.__dict__, "name": "A100-40GB"})
    if best.name.startswith("A100") and total and total > 60:  # "A100 80GB" reads as the bare a100 alias
        best = GpuModel(**{**best.__dict__, "name": "A100-80GB"})
    return best


def _facts(case: dict[str, Any], calibration: Path) -> ModelFacts | None:
    repo = str(case["model"]).split(" (")[0]
    repo = ALIASES.get(repo, repo)
    folder = calibration / "models" / repo.replace("/", "__")
    if folder.is_dir():
        return load_directory(folder, repo)
    if (CORPUS / repo.replace("/", "__")).is_dir():
        return load_directory(CORPUS / repo.replace("/", "__"), repo)
    if find_entry(repo):
        return load_catalog(repo)
    return None


def _version(case: dict[str, Any]) -> tuple[str, str | None]:
    engine = str(case.get("vllm_engine") or "V1").split()[0]
    version = case.get("vllm_version")
    if version:
        return str(version).split()[0], engine if engine in ("V0", "V1") else None
    return UNDATED.get(engine, "0.11.0"), engine if engine in ("V0", "V1") else None


def _dtype(value: object) -> str:
    text = str(value or "auto").replace("torch.", "")
    return text if text in ("bfloat16", "float16", "float32") else "auto"


def run_case(case: dict[str, Any], calibration: Path) -> Row:
    measured = case["measured"]
    version, engine = _version(case)
    base = Row(case["id"], case["model"], case["status"], "-", False, {}, {}, {})
    minor = re.match(r"^(\d+\.\d+)", version)
    base.release = minor.group(1) if minor else f"release not stated ({engine or 'V1'})"
    base.gpu = _gpu(case).name
    base.shapes = case_shapes(case, calibration, base.release)
    excluded = next((why for pattern, why in EXCLUDED.items() if re.search(pattern, case["id"])), "")
    if excluded:
        base.skipped = excluded
        return base
    text = str(case.get("gpu") or "").lower()
    ambiguous = base.gpu == "unknown" or "not named" in text or "not stated" in text
    if base.gpu.startswith("A100") and not re.search(r"40 ?gb|80 ?gb|40gb|80gb", text):
        ambiguous = True  # 40 GB or 80 GB: the budget differs by 2x
    if case.get("gpu_total_gib") is None and ambiguous:
        base.skipped = "GPU total not printed and the card is not named exactly"
        return base
    try:
        facts = _facts(case, calibration)
    except (OSError, ValueError) as exc:
        facts = None
        base.skipped = f"config unreadable: {exc}"[:80]
    if facts is None:
        base.skipped = base.skipped or "no public config.json for this model"
        return base
    if not re.match(r"^\d+\.\d+(\.\d+)?$", version):
        base.skipped = f"release not known exactly ({version})"
        return base
    serving = ServingConfig(
        max_model_len=case.get("max_model_len"),
        kv_cache_dtype=case.get("kv_cache_dtype") or "auto",
        dtype=_dtype(case.get("dtype")),
        quantization=case.get("runtime_quantization"),
        tensor_parallel_size=case.get("tensor_parallel_size") or 1,
        pipeline_parallel_size=case.get("pipeline_parallel_size") or 1,
        gpu_memory_utilization=case.get("gpu_memory_utilization"),  # null: the release's default
        max_num_seqs=case.get("max_num_seqs"),
        max_num_batched_tokens=case.get("max_num_batched_tokens"),
        block_size=case.get("block_size"),
        enforce_eager=bool(case.get("enforce_eager")),
        # The sampler as the case's install had it (vLLM 0.8-0.11.0 sample with FlashInfer where it is installed):
        # recorded with its basis; an undated run's release and install are unknown, so it is sized on PyTorch's
        # sort, the path every release has (activation._flashinfer_sampler).
        flashinfer_sampler=case.get("flashinfer_sampler", False if not case.get("vllm_version") else None),
        vllm_version=version,
        engine=engine,
        runner=case.get("runner") or "generate",
        # --speculative-config as the log printed it (recorded for the runs that used it)
        speculative_method=case.get("speculative_method"),
        speculative_tokens=case.get("speculative_tokens"),
        # issue 20: the serving shapes of 2026, as the case records them (absent: vLLM's defaults)
        data_parallel_size=case.get("data_parallel_size") or 1,
        enable_expert_parallel=bool(case.get("enable_expert_parallel")),
        enable_lora=bool(case.get("enable_lora")),
        max_loras=case.get("max_loras") if case.get("enable_lora") else None,
        max_lora_rank=case.get("max_lora_rank") if case.get("enable_lora") else None,
    )
    try:
        result: Plan = plan(to_model_input(facts), _gpu(case), serving)
    except SizingError as exc:
        base.skipped = f"not sized: {exc}"[:100]
        return base
    rank0 = result.ranks[0]
    predicted = {
        "weights_gib": rank0.weights.total_bytes / GiB,
        "activation_peak_gib": rank0.profile.activation_bytes / GiB,
        "graph_estimate_gib": rank0.profile.cuda_graph_bytes / GiB if result.per_gpu.cuda_graphs_in_budget else 0.0,
        "non_torch_gib": rank0.profile.non_torch_bytes / GiB,
        "kv_available_gib": rank0.available_kv_bytes / GiB,
        "gpu_blocks": float(result.kv.num_blocks),
        "kv_tokens": float(result.kv.reported_tokens),
        "max_concurrency": result.kv.max_concurrency,
    }
    errors: dict[str, float | None] = {}
    for key, value in predicted.items():
        truth = measured.get(key)
        if truth is None or key in ("activation_peak_gib", "non_torch_gib"):
            continue
        errors[key] = (value - truth) / abs(truth) if truth else None
    started = case["status"] == "ok"
    if started:
        ok = result.verdict in (Verdict.FITS, Verdict.TIGHT)
    elif case["status"] == "failed_after_kv_sizing":
        ok = result.verdict is not Verdict.FITS
    elif case["status"] in ("failed_before_kv_sizing", "failed_non_memory"):
        # the start failed before memory was sized, or after it for a reason that is not memory (``fitgate
        # compare --as-case`` names it in the notes): a denial for memory would be a denial for the wrong reason
        ok = result.verdict is not Verdict.DOES_NOT_FIT
    else:
        ok = result.verdict is Verdict.DOES_NOT_FIT
    row = Row(case["id"], case["model"], case["status"], result.verdict.value, ok, errors, predicted, dict(measured))
    row.release, row.gpu, row.shapes = base.release, base.gpu, base.shapes
    return row


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _fitted_misses(rows: list[Row]) -> list[tuple[float, float]]:
    """(fitted terms, predicted - measured available KV) in GiB of each sized case that printed its available KV."""
    out: list[tuple[float, float]] = []
    for r in rows:
        truth = r.measured.get("kv_available_gib") if not r.skipped else None
        if truth is None or not r.predicted:
            continue
        p = r.predicted
        out.append(
            (p["activation_peak_gib"] + p["graph_estimate_gib"] + p["non_torch_gib"], p["kv_available_gib"] - truth)
        )
    return out


def error_band(rows: list[Row]) -> tuple[list[float], list[float]] | None:
    """How far the fitted terms were off on each sized case: |error of available KV| relative to them, and in GiB."""
    misses = _fitted_misses(rows)
    rel = [abs(miss) / fitted if fitted else 0.0 for fitted, miss in misses]
    return (rel, [abs(miss) for _, miss in misses]) if rel else None


def over_count(rows: list[Row]) -> tuple[float, float] | None:
    """The largest over-count of the fitted terms on a sized case, relative to them and in GiB (two maxima).

    The false-denial side of :func:`error_band`: cases where fitgate predicted less available KV than vLLM printed
    (it counted more activation, non-torch or graph memory than vLLM used). A KV shortfall smaller than that is not
    shown to be real, so it is Tight (verdict_rules.ESTIMATE_ERROR_FRACTION / ESTIMATE_ERROR_CAP_BYTES).
    """
    over = [(-miss / fitted, -miss) for fitted, miss in _fitted_misses(rows) if miss < 0 and fitted > 0]
    return (max(r for r, _ in over), max(g for _, g in over)) if over else None


def summarize(rows: list[Row]) -> dict[str, Any]:
    summary: dict[str, Any] = {"cases": len(rows), "sized": sum(1 for r in rows if not r.skipped)}
    for key in ("weights_gib", "kv_available_gib", "gpu_blocks", "kv_tokens"):
        vals = [abs(r.errors[key]) for r in rows if r.errors.get(key) is not None]  # type: ignore[arg-type]
        summary[key] = {
            "n": len(vals),
            "median_abs_pct": 100 * statistics.median(vals) if vals else None,
            "p90_abs_pct": 100 * _pct(vals, 0.9) if vals else None,
            "max_abs_pct": 100 * max(vals) if vals else None,
        }
    sized = [r for r in rows if not r.skipped]
    summary["verdicts_agree"] = f"{sum(r.verdict_ok for r in sized)}/{len(sized)}"
    return summary


def breakdown(rows: list[Row], attr: str) -> list[tuple[str, int, int, str, str, str]]:
    """Per release (or GPU): cases, sized, median |err| of weights / available KV, verdicts agreeing."""
    out = []

    def order(key: str) -> tuple[int, ...]:
        return tuple(int(p) for p in key.split(".")) if re.fullmatch(r"\d+\.\d+", key) else (999,)

    for key in sorted({getattr(r, attr) for r in rows}, key=lambda k: (order(k), k)):
        group = [r for r in rows if getattr(r, attr) == key]
        sized = [r for r in group if not r.skipped]
        cells = []
        for term in ("weights_gib", "kv_available_gib"):
            vals = [abs(r.errors[term]) for r in sized if r.errors.get(term) is not None]  # type: ignore[arg-type]
            cells.append(f"{100 * statistics.median(vals):.2f}% (n={len(vals)})" if vals else "-")
        agree = f"{sum(r.verdict_ok for r in sized)}/{len(sized)}"
        out.append((key, len(group), len(sized), cells[0], cells[1], agree))
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)
    parser.add_argument(
        "--extra", type=Path, action="append", help="more cases in the same format (default: the public 2026 set)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the per-case table as Markdown")
    parser.add_argument("--json", action="store_true", help="print one JSON line with the summary at the end")
    args = parser.parse_args(argv)
    cases_file = args.calibration / "cases.jsonl"
    if not cases_file.is_file():
        print(f"accuracy: {cases_file} not found (pass --calibration DIR)", file=sys.stderr)
        return 2
    cases = [json.loads(line) for line in cases_file.read_text().splitlines() if line.strip()]
    for extra in args.extra or DEFAULT_EXTRA:
        cases += [json.loads(line) for line in extra.read_text().splitlines() if line.strip()]
    rows = [run_case(c, args.calibration) for c in cases]
    sep = " | " if args.markdown else "  "
    header = ["case", "status", "verdict", "weights", "avail KV", "blocks", "tokens"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(sep.join(header))
    for r in rows:
        cells = [
            r.case[:64],
            r.status,
            (r.verdict + ("" if r.verdict_ok else " (!)")) if not r.skipped else "skipped",
        ]
        if r.skipped:
            cells += [r.skipped, "", "", ""]
        else:
            cells += [_fmt(r.errors.get(k)) for k in ("weights_gib", "kv_available_gib", "gpu_blocks", "kv_tokens")]
        print(("| " + sep.join(cells) + " |") if args.markdown else sep.join(cells))
    summary = summarize(rows)
    print()
    for key in ("weights_gib", "kv_available_gib", "gpu_blocks", "kv_tokens"):
        s = summary[key]
        print(
            f"{key:18s} n={s['n']:3d}  median |err| {s['median_abs_pct']:.2f}%  "
            f"p90 {s['p90_abs_pct']:.2f}%  max {s['max_abs_pct']:.2f}%"
        )
    print(
        f"verdicts agree with the outcome: {summary['verdicts_agree']} (skipped: {summary['cases'] - summary['sized']})"
    )
    for attr, title in (("release", "vLLM release"), ("gpu", "GPU product")):
        print()
        head = [title, "cases", "sized", "weights median abs err", "avail KV median abs err", "verdicts"]
        print(("| " + " | ".join(head) + " |") if args.markdown else "  ".join(head))
        if args.markdown:
            print("|" + "---|" * len(head))
        for line in breakdown(rows, attr):
            cells = [str(c) for c in line]
            print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
    print()
    head = ["serving shape", "cases", "sized", "weights median abs err", "avail KV median abs err", "verdicts"]
    print(("| " + " | ".join(head) + " |") if args.markdown else "  ".join(head))
    if args.markdown:
        print("|" + "---|" * len(head))
    for line in shape_breakdown(rows):
        cells = [str(c) for c in line]
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
    recent = [
        r
        for r in rows
        if not r.skipped and r.release[:1].isdigit() and tuple(map(int, r.release.split("."))) >= (0, 21)
    ]
    kv_recent = [abs(r.errors["kv_available_gib"] or 0) for r in recent if r.errors.get("kv_available_gib") is not None]
    line = f"\nvLLM >= 0.21: {len(recent)} sized cases"
    if kv_recent:
        line += (
            f"; available KV median |err| {100 * statistics.median(kv_recent):.2f}%, "
            f"p90 {100 * _pct(kv_recent, 0.9):.2f}% (n={len(kv_recent)})"
        )
    print(line)
    band = error_band(rows)
    if band:
        rel, gib = band
        print(
            "error of the fitted terms (|predicted - measured available KV| / (activation + non-torch + graph "
            "estimate), both sides): "
            + ", ".join(f"p{q} {_pct(rel, q / 100):.2f}" for q in (50, 80, 85, 90))
            + f"; in GiB p90 {_pct(gib, 0.9):.2f} (n={len(rel)})"
        )
    worst = over_count(rows)
    if worst:
        print(
            "largest over-count of the fitted terms (fitgate's available KV below the log's: the false-denial side; "
            f"verdict_rules.ESTIMATE_ERROR_FRACTION / _CAP_BYTES, rounded up): {worst[0]:.4f} of them, "
            f"{worst[1]:.2f} GiB"
        )
    if args.json:
        summary["shapes"] = {
            shape: {"cases": cases_n, "sized": sized_n, "weights": w, "kv_available": kv, "verdicts": agree}
            for shape, cases_n, sized_n, w, kv, agree in shape_breakdown(rows)
        }
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
