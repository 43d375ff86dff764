"""The Kubernetes verbs: ``fitgate check`` (the admission decision, offline) and ``fitgate operator``.

Both import the operator lazily, inside the command: ``fitgate plan`` never loads kopf.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from fitgate.cli.exits import EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_USAGE
from fitgate.settings import load, unknown_policy


def cmd_check(args: argparse.Namespace) -> int:
    """``fitgate check FILE...``: the admission decision, offline."""
    from fitgate.operator.decision.offline import check_files  # noqa: PLC0415 - keeps `fitgate plan` light

    # a GPU fitgate does not know is each workload's Unknown (offline._unsized_gpu), not a usage error (hunt59 F2)
    results = check_files(args.files, gpu_name=args.gpu, gpus_per_node=args.gpus_per_node)
    if args.output == "json":
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        for r in results:
            print("\n".join(r.lines()))
    if any(r.verdict == "Invalid" for r in results):
        return EXIT_USAGE
    return EXIT_DOES_NOT_FIT if any(r.verdict == "DoesNotFit" for r in results) else EXIT_FITS


def cmd_operator(args: argparse.Namespace) -> int:
    """``fitgate operator``: kopf with fitgate's handlers."""
    settings = load()
    flags = {  # a flag given wins over its FITGATE_* variable
        "webhook_port": args.webhook_port,
        "webhook_host": args.webhook_host,
        "webhook_cert": args.webhook_cert,
        "webhook_key": args.webhook_key,
        "webhook_ca": args.webhook_ca,
        "webhook_managed": args.webhook_managed,
        "metrics_port": args.metrics_port,
        "resync_s": args.resync_seconds,
        "unknown_policy": args.unknown_policy and unknown_policy("--unknown-policy", args.unknown_policy),
        "peering": args.peering,
    }
    config = dataclasses.replace(settings.operator, **{k: v for k, v in flags.items() if v is not None})
    from fitgate.operator.decision.pricing import check_prices  # noqa: PLC0415 - keeps `fitgate plan` light
    from fitgate.operator.runtime.run import run_operator  # noqa: PLC0415 - imports kopf only for this command

    check_prices(config)  # operator.prices names GPUs of the catalog: a bad one stops the start (SettingsError)

    return run_operator(
        dataclasses.replace(settings, operator=config),
        namespaces=tuple(args.namespace),
        liveness=args.liveness,
        verbose=args.verbose,
    )
