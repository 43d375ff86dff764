"""``fitgate compare --log FILE``: fitgate's plan of a run set beside what its vLLM start-up log printed."""

from __future__ import annotations

import argparse
import json

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.cli.exits import EXIT_FITS
from fitgate.cli.inputs import origin_of
from fitgate.report import PlanReport
from fitgate.sizing import SizingError, plan, recommend, suggest
from fitgate.sizing.instances import lookup_named_gpu


def cmd_compare(args: argparse.Namespace) -> int:
    """``fitgate compare --log FILE``: predicted against observed, term by term (docs/compare-json.md)."""
    from fitgate.observe import compare, compare_text, read_log  # noqa: PLC0415 - keeps `fitgate plan` light

    log = read_log(args.log)
    named = lookup_named_gpu(args.gpu, "--gpu") if args.gpu else None
    if args.as_case:
        print(json.dumps(compare.case_document(log, args.log, named)))
        return EXIT_FITS
    ref = args.model or log.settings.model
    if not ref:
        raise SizingError("--model", None, "a model to plan (the log names none)")
    gpu, gpu_notes = compare.gpu_of(log, named)
    serving, notes = compare.serving_config(log, args.vllm_version)
    try:
        facts = resolve(ref, source=args.source)
    except CheckpointError as exc:
        if args.model:
            raise
        hint = f"{exc.problem[:240]}; pass --model with its directory or repo id"
        raise CheckpointError("model named in the log", ref, "", transient=exc.transient, problem=hint) from None
    model = to_model_input(facts)
    found = [*gpu_notes, *notes]
    try:
        result = plan(model, gpu, serving)
    except SizingError as exc:  # settings vLLM refuses too (TP 5 of 8 KV heads): compared, not an error
        refused = compare.Refusal(str(exc), gpu, serving)
        c = compare.Comparison(log, args.log, None, refused, tuple(found))
    else:
        suggestions = suggest(model, gpu, serving, None, result)
        _, args_out, chosen = recommend(model, gpu, serving, None, result, suggestions)
        report = PlanReport(origin_of(facts), result, suggestions, args_out, chosen)
        c = compare.Comparison(log, args.log, report, None, tuple(found))
    print(
        json.dumps(compare.compare_document(c), indent=2)
        if args.output == "json"
        else compare_text.render_compare_text(c)
    )
    return EXIT_FITS
