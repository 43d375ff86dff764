"""``fitgate catalog list|add`` and ``fitgate gpus``: the model and GPU catalogs, and what fits on what."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.checkpoints.catalog import BUILT_IN, CATALOG_PATH_ENV, catalog_entries, find_builtin, user_catalog_dirs
from fitgate.checkpoints.catalog_add import add_to_catalog
from fitgate.checkpoints.resolve import parse_repo_ref
from fitgate.cli.exits import EXIT_DOES_NOT_FIT, EXIT_FITS
from fitgate.sizing import GpuModel, Option, SizingError, Workload, fewest_gpus, gpu_catalog, search
from fitgate.sizing.instances import lookup_named_gpu
from fitgate.sizing.units import fmt_gib


def cmd_catalog(args: argparse.Namespace) -> int:
    """``fitgate catalog list|add``."""
    if args.action == "add":
        return _catalog_add(args)
    if args.fits_on:
        return _fits_on(args)
    entries = catalog_entries()
    if args.output == "json":
        print(
            json.dumps(
                [
                    {"repo_id": e.repo_id, "total_size": e.total_size, "basis": e.basis, "location": e.location}
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    print(f"{'MODEL':44s} {'WEIGHTS':>10s}  BASIS")
    for e in entries:
        size = fmt_gib(e.total_size) if e.total_size else "estimated"
        where = "" if e.location == BUILT_IN else f" [{e.location}]"
        print(f"{e.repo_id:44s} {size:>10s}  {e.basis}{where}")
    return 0


def _catalog_add(args: argparse.Namespace) -> int:
    """``fitgate catalog add MODEL``: resolve MODEL (headers only) and store it as a user catalog entry."""
    into = args.into or next(iter(user_catalog_dirs()), None)
    if not into:
        raise CheckpointError(
            "--into", None, f"the user catalog directory to write the entry to (or set {CATALOG_PATH_ENV})"
        )
    facts = resolve(args.model, args.revision, source=args.source)
    if facts.source == "catalog" and args.source != "catalog":
        raise CheckpointError(
            "model", args.model, "a checkpoint read from the Hub or a directory (this one came from the catalog)"
        )
    config_bytes = None
    if facts.source == "local":
        config_bytes = (Path(facts.origin) / "config.json").read_bytes()
        repo_id = args.repo_id
        if not repo_id:
            raise CheckpointError(
                "--repo-id",
                None,
                f"the Hugging Face repo id {args.model} holds (org/name): a directory does not say which checkpoint "
                "it is, and the entry answers to that id",
            )
    else:
        repo_id = args.repo_id or facts.name
    repo_id, _ = parse_repo_ref(repo_id)
    built_in = find_builtin(repo_id)
    target, total = add_to_catalog(
        facts, repo_id, Path(into), config_bytes=config_bytes, force=args.force, flat=args.flat
    )
    if built_in is not None:
        print(f"note: this entry takes precedence over the built-in one ({built_in.basis})", file=sys.stderr)
    print(f"added {repo_id} to {target} ({fmt_gib(total) if total else 'weights estimated'})")
    if str(Path(into).expanduser()) not in {str(Path(d).expanduser()) for d in user_catalog_dirs()}:
        print(f"note: set {CATALOG_PATH_ENV}={into} for fitgate to use it", file=sys.stderr)
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    """``fitgate gpus`` (``--fits MODEL``: only those that run it)."""
    if args.fits:
        return _fits_gpus(args)
    models = gpu_catalog()
    if args.output == "json":
        print(json.dumps([m.__dict__ for m in models], indent=2))
        return 0
    print(f"{'GPU':14s} {'MEMORY':>11s} {'BW GB/s':>8s} {'BF16 TF':>8s}  ALIASES")
    for m in models:
        print(
            f"{m.name:14s} {fmt_gib(m.memory_bytes):>11s} {m.memory_bandwidth_gbps:8.0f} {m.bf16_dense_tflops:8.0f}  "
            + ", ".join(m.aliases[:3])
        )
    return 0


def _fits_gpus(args: argparse.Namespace) -> int:
    """``fitgate gpus --fits MODEL``: the GPUs that run it, each with the fewest GPUs needed."""
    model = to_model_input(resolve(args.fits, source=args.source))
    best, reason = _fit_search(args, model, gpu_catalog())
    w = _fit_workload(args, model)
    rows: list[dict[str, Any]] = [
        {
            "gpu": o.gpu.name,
            "gpus": o.gpus,
            "tensor_parallel_size": o.tensor_parallel_size,
            "pipeline_parallel_size": o.pipeline_parallel_size,
            "verdict": o.verdict.value,
            "headroom_bytes": o.headroom_bytes,
            "decode_tokens_per_s": round(o.performance.decode_tokens_per_s, 1),
        }
        for o in best.values()
    ]
    if args.output == "json":
        print(
            json.dumps(
                {"model": model.name, "concurrency": w.concurrency, "context_tokens": w.context_tokens, "gpus": rows},
                indent=2,
            )
        )
    else:
        print(f"{model.name} at {w.concurrency} x {w.context_tokens} tokens, at most {args.max_gpus} GPUs:")
        print(f"  {'GPU':14s} {'COUNT':>5s} {'TPxPP':>6s} {'VERDICT':8s} {'HEADROOM':>10s} {'EST TOK/S':>9s}")
        for r in rows:
            print(
                f"  {r['gpu']:14s} {r['gpus']:5d} {r['tensor_parallel_size']}x{r['pipeline_parallel_size']:<4d} "
                f"{r['verdict']:8s} {fmt_gib(r['headroom_bytes']):>10s} {r['decode_tokens_per_s']:9.0f}"
            )
        if not rows:
            print(f"  none: {reason}")
    return EXIT_FITS if rows else EXIT_DOES_NOT_FIT


def _fit_workload(args: argparse.Namespace, model: Any) -> Workload:
    context = args.context_tokens or args.max_model_len or model.arch.derived_max_model_len
    return Workload(args.concurrency, context)


def _fit_search(args: argparse.Namespace, model: Any, gpus: Sequence[GpuModel]) -> tuple[dict[str, Option], str]:
    """Per GPU product the fewest GPUs that hold the workload, and why none does when none does."""
    found = search(
        model,
        _fit_workload(args, model),
        gpus,
        max_model_len=args.max_model_len,
        max_gpus=args.max_gpus,
        vllm_version=args.vllm_version,
        kv_cache_dtypes=(args.kv_cache_dtype,),
        quantizations=(args.quantization,),
        fewest_gpus_only=True,
    )
    return fewest_gpus(found.options), found.reason


#: A reason in ``catalog list --fits-on``'s "not listed" lines is cut to this many characters (JSON has it whole).
_MAX_REASON_CHARS = 160


def _fits_on(args: argparse.Namespace) -> int:
    """``fitgate catalog list --fits-on GPU``: the catalog models that GPU runs, with how many of them."""
    gpu = lookup_named_gpu(args.fits_on, "--fits-on")
    rows = []
    left_out: list[dict[str, str]] = []  # every catalog model not listed, with why
    for e in catalog_entries():
        try:
            model = to_model_input(resolve(e.repo_id, source="catalog"))
            found, reason = _fit_search(args, model, [gpu])
        except (SizingError, CheckpointError) as exc:  # e.g. --max-model-len longer than this model's context
            left_out.append({"repo_id": e.repo_id, "reason": str(exc)})
            continue
        best = found.get(gpu.name)
        if best is None:
            why = (reason.partition("; ")[2] or reason).removeprefix("the largest tried: ")  # the largest set's misfit
            if why == "its weights alone exceed every set":
                stored = fmt_gib(model.inventory.stored_bytes)
                why = f"its weights alone ({stored} as stored) exceed {args.max_gpus} x {gpu.name}"
            left_out.append({"repo_id": e.repo_id, "reason": why})
        else:
            w = _fit_workload(args, model)
            rows.append(
                {
                    "repo_id": e.repo_id,
                    "gpus": best.gpus,
                    "tensor_parallel_size": best.tensor_parallel_size,
                    "pipeline_parallel_size": best.pipeline_parallel_size,
                    "verdict": best.verdict.value,
                    "context_tokens": w.context_tokens,
                    "decode_tokens_per_s": round(best.performance.decode_tokens_per_s, 1),
                }
            )
    if args.output == "json":
        doc = {"gpu": gpu.name, "concurrency": args.concurrency, "models": rows, "not_listed": left_out}
        print(json.dumps(doc, indent=2))
    else:
        print(f"models that run on {gpu.name} (at most {args.max_gpus}), {args.concurrency} concurrent request(s):")
        print(f"  {'MODEL':44s} {'COUNT':>5s} {'TPxPP':>6s} {'VERDICT':8s} {'CONTEXT':>8s}")
        for r in rows:
            tp_pp = f"{r['tensor_parallel_size']}x{r['pipeline_parallel_size']}"
            print(f"  {r['repo_id']:44s} {r['gpus']:5d} {tp_pp:>6s} {r['verdict']:8s} {r['context_tokens']:8d}")
        if left_out:
            print(f"not listed ({len(left_out)} of {len(rows) + len(left_out)}):")
            for d in left_out:
                print(f"  {d['repo_id']:44s} {d['reason'][:_MAX_REASON_CHARS]}")
    return EXIT_FITS if rows else EXIT_DOES_NOT_FIT
