"""``fitgate recommend``: every GPU x TP x PP x KV dtype x quantization that holds a workload, cheapest first."""

from __future__ import annotations

import argparse

from fitgate.checkpoints import resolve, to_model_input
from fitgate.cli.exits import EXIT_DOES_NOT_FIT, EXIT_FITS
from fitgate.cli.inputs import list_prices_of, merged_prices, prices_of
from fitgate.cli.render import json_text
from fitgate.report import option_document
from fitgate.sizing import (
    GpuModel,
    GpuPrices,
    Option,
    SizingError,
    Workload,
    check_utilization,
    gpu_catalog,
    search,
)
from fitgate.sizing.capacity import check_targets
from fitgate.sizing.instances import lookup_named_gpu
from fitgate.sizing.performance import speed_load
from fitgate.sizing.prices import price_table
from fitgate.sizing.units import fmt_gib


def _listed_gpus(text: str | None, listed: GpuPrices) -> tuple[list[GpuModel], GpuPrices | None, str]:
    """``--gpus`` (else the catalog) priced from the list table: the listed ones, or all at equal prices.

    Unlisted products are left out when some are listed (their cost cannot be ranked with the rest);
    when none is, equal prices are assumed and the ranking is by GPU-hours.
    """
    named = (
        [lookup_named_gpu(n.strip(), "--gpus") for n in text.split(",") if n.strip()] if text else list(gpu_catalog())
    )
    priced = [g for g in named if listed.of(g) is not None]
    table = price_table()
    if not priced:
        return named, None, "no list price for these GPUs: equal prices assumed (ranked by GPU-hours)"
    left_out = sorted({g.name for g in named if listed.of(g) is None})
    note = f"median on-demand list prices of the major clouds as of {table.as_of} (data/gpu_prices.json)"
    if left_out:
        note += f"; no list price, left out (give --gpu-hour-price to include): {', '.join(left_out)}"
    return priced, listed, note


def _price_basis(prices: GpuPrices | None, flagged: GpuPrices | None) -> dict[str, str]:
    """GPU name -> where its price comes from (hunt91 O11).

    ``--gpu-hour-price`` (``flagged``, parsed once by the caller), else the product's row of the dated table.
    """
    if prices is None:
        return {}
    if prices.default is not None:  # one --gpu-hour-price for every GPU
        return {g.name: "--gpu-hour-price" for g in gpu_catalog()}
    given = dict(flagged.per_gpu) if flagged is not None else {}
    table = price_table()
    return {name: "--gpu-hour-price" if name in given else table.basis(name) for name, _ in prices.per_gpu}


def _gpu_list(text: str | None, prices: GpuPrices | None) -> list[GpuModel]:
    """``--gpus`` (each must be priced when per-product prices are given), else the catalog (the priced ones)."""
    if text:
        gpus = [lookup_named_gpu(name.strip(), "--gpus") for name in text.split(",") if name.strip()]
        for g in gpus:
            if prices is not None and prices.of(g) is None:
                raise SizingError("--gpu-hour-price", None, f"a price for {g.name}, which --gpus names")
        return list(dict.fromkeys(gpus))
    return [g for g in gpu_catalog() if prices is None or prices.of(g) is not None]


def _workload_of(args: argparse.Namespace) -> tuple[int, int]:
    """(concurrency, context tokens): the flags, else what a request rate and the request shape imply.

    With ``--request-rate`` the replicas follow from the rate and the targets, so each option must hold one
    request of ``--input-tokens + --output-tokens`` at least (``--concurrency`` raises that floor).
    """
    shape = args.input_tokens + args.output_tokens if args.input_tokens and args.output_tokens else None
    context = args.context_tokens if args.context_tokens is not None else shape
    if context is None:
        raise SizingError("--context-tokens", None, "tokens per request (or --input-tokens and --output-tokens)")
    concurrency = args.concurrency
    if concurrency is None:
        if args.request_rate is None:
            raise SizingError("--concurrency", None, "concurrent requests (or --request-rate with the request shape)")
        concurrency = 1
    return concurrency, context


def cmd_recommend(args: argparse.Namespace) -> int:
    """``fitgate recommend``: every configuration that holds the workload, cheapest per 1M output tokens first."""
    facts = resolve(args.model, source=args.source)
    model = to_model_input(facts)
    utilization = check_utilization(args.utilization)
    prices = flagged = prices_of(args)
    gpu_list, price_note = None, None
    if (prices is None or prices.default is None) and (listed := list_prices_of(args)) is not None:
        merged = merged_prices(args) or listed  # per-product --gpu-hour-price overrides its rows (hunt91 G4)
        gpu_list, prices, price_note = _listed_gpus(args.gpus, merged)
        if args.gpu_hour_price and prices is not None:
            price_note += f"; --gpu-hour-price {args.gpu_hour_price} over the table"
    elif prices is None:  # --no-list-prices, and no price given (hunt91 G5)
        price_note = "none given (--no-list-prices): equal prices assumed (ranked by GPU-hours)"
    if args.api_price_per_million is not None and prices is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    longest = args.max_model_len or model.arch.derived_max_model_len
    concurrency, context_tokens = _workload_of(args)
    if context_tokens > longest:
        raise SizingError("--context-tokens", context_tokens, f"at most {longest} (the max_model_len)")
    load = speed_load(args.input_tokens, args.output_tokens, args.request_rate, context_tokens)
    targets = check_targets(args.ttft_ms, args.tpot_ms, load)
    by_replicas = targets is not None or args.request_rate is not None  # a rate sets the replicas (hunt91 G1)
    found = search(
        model,
        Workload(concurrency, context_tokens),
        gpu_list if gpu_list is not None else _gpu_list(args.gpus, prices),
        max_model_len=args.max_model_len,
        max_gpus=args.max_gpus,
        prices=prices,
        utilization=utilization,
        api_usd_per_million=args.api_price_per_million,
        api_input_usd_per_million=args.api_input_price_per_million,
        vllm_version=args.vllm_version,
        speed_load=load,
        targets=targets,
        price_basis=_price_basis(prices, flagged),
    )
    doc = {
        "model": model.name,
        "workload": {"concurrency": concurrency, "context_tokens": context_tokens},
        "max_model_len": args.max_model_len or context_tokens,
        "vllm_version": args.vllm_version,
        "utilization": utilization,
        "ranked_by": (
            ("usd_per_hour_all_replicas" if prices else "gpu_hours_per_hour_all_replicas")
            if by_replicas
            else ("usd_per_million_output_tokens" if prices else "gpu_hours_per_million_output_tokens")
        ),
        "targets": None
        if not by_replicas
        else {"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms, "request_rate": args.request_rate},
        "options": [option_document(o) for o in found.options],
        "prices": price_note,
        "reason": found.reason or None,
        "basis": found.options[0].performance.basis if found.options else None,
    }
    if args.output == "json":
        print(json_text(doc))
        return EXIT_FITS if found.options else EXIT_DOES_NOT_FIT
    shape = f"{concurrency} x {context_tokens} tokens"
    if args.request_rate is not None:
        shape = f"{args.request_rate:g} requests/s of {args.input_tokens} in + {args.output_tokens} out tokens"
    print(
        f"fitgate recommend: {model.name} for {shape} (vLLM {args.vllm_version}), ranked by {doc['ranked_by']} "
        f"at {utilization:.0%} utilisation"
    )
    if price_note:
        print(f"  prices: {price_note}")
    if not found.options:
        print(f"  none: {found.reason}")
        return EXIT_DOES_NOT_FIT
    by_replicas = by_replicas or any(o.replicas > 1 for o in found.options)  # replicas holding the concurrency
    unit = "$/1M out" if prices else "GPU-h/1M"
    print(
        f"  {'GPU':13s} {'PARALLEL':10s} {'KV':5s} {'WEIGHTS':7s} {'VERDICT':8s} {'HEADROOM':>10s} {'TOK/S':>7s} "
        f"{unit:>9s}" + (f" {'REPLICAS':>8s} {'TTFT ms':>8s} {'TPOT ms':>8s}" if by_replicas else "")
    )
    for o in found.options[: max(1, args.limit)]:
        d = option_document(o)
        per = d["usd_per_million_output_tokens"] if prices else d["gpu_hours_per_million_output_tokens"]
        print(
            f"  {o.gpu.name:13s} {_shape(o):10s} {o.kv_cache_dtype:5s} "
            f"{o.quantization or 'as-is':7s} {o.verdict.value:8s} {fmt_gib(o.headroom_bytes):>10s} "
            f"{o.performance.decode_tokens_per_s:7.0f} {per:9.2f}"
            + (
                f" {o.replicas:8d} {o.performance.ttft_seconds * 1000:8.0f} {o.performance.tpot_seconds * 1000:8.1f}"
                if by_replicas
                else ""
            )
        )
    if len(found.options) > args.limit:
        print(f"  ... {len(found.options) - args.limit} more (--limit, or --output json for all)")
    if (line := _first_cost_line(found.options[0])) is not None:
        print(line)
    print(f"  {doc['basis']}")
    return EXIT_FITS


def _first_cost_line(o: Option) -> str | None:
    """The first option's cost per request and per 1M input + output tokens, and its break-even with the API."""
    c = o.cost
    if c is None or c.usd_per_request is None or c.usd_per_million_tokens is None:
        return None
    line = (
        f"  first option: ${c.usd_per_request:.5f} a request, ${c.usd_per_million_tokens:.2f} per 1M input + output "
        f"tokens at {c.utilization:.0%} utilisation"
    )
    if c.breakeven_requests_per_day is not None:
        line += f"; break-even with the API at {c.breakeven_requests_per_day:,.0f} requests/day per replica"
        if c.cheaper_than_api_at is None:
            line += " (more than one replica serves a day: never cheaper)"
    return line


def _shape(o: Option) -> str:
    """``TP8``, ``TP8 PP2``, or ``TP4 DP2 EP`` (hunt91 O3: ``4x2EP`` read like TP x PP)."""
    text = f"TP{o.tensor_parallel_size}"
    if o.pipeline_parallel_size > 1:
        text += f" PP{o.pipeline_parallel_size}"
    if o.expert_parallel:
        text += f" DP{o.data_parallel_size} EP"
    return text
