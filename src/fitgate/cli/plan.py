"""``fitgate plan``: size one model on one GPU model, as vLLM will (exit 1 on DoesNotFit)."""

from __future__ import annotations

import argparse
import json

from fitgate.checkpoints import resolve, to_model_input
from fitgate.cli.exits import EXIT_DOES_NOT_FIT, EXIT_FITS
from fitgate.cli.inputs import economics_of, gpu_of, origin_of, serving_of, workload_of
from fitgate.cli.render import render_text
from fitgate.report import PlanReport, plan_document
from fitgate.sizing import Verdict, plan, recommend, suggest


def cmd_plan(args: argparse.Namespace) -> int:
    """``fitgate plan``."""
    facts = resolve(args.model, args.revision, source=args.source)
    model = to_model_input(facts)
    gpu = gpu_of(args)
    serving = serving_of(args)
    workload = workload_of(args, serving, model.arch.derived_max_model_len)
    result = plan(model, gpu, serving, workload)
    suggestions = suggest(model, gpu, serving, workload, result)
    _, args_out, chosen = recommend(model, gpu, serving, workload, result, suggestions)
    revision = args.revision or (args.model.partition("@")[2] if facts.source != "local" else "") or None
    perf, cost = economics_of(args, model, gpu, result)
    report = PlanReport(origin_of(facts), result, suggestions, args_out, chosen, revision, perf, cost)
    doc = plan_document(report)
    print(json.dumps(doc, indent=2) if args.output == "json" else render_text(doc))
    return EXIT_DOES_NOT_FIT if result.verdict is Verdict.DOES_NOT_FIT else EXIT_FITS
