"""The entry point: parse, run the subcommand, and turn every error into one line and an exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from fitgate.checkpoints import CheckpointError
from fitgate.cli.catalog import cmd_catalog, cmd_gpus
from fitgate.cli.cluster import cmd_check, cmd_operator
from fitgate.cli.compare import cmd_compare
from fitgate.cli.exits import EXIT_CLOSED_PIPE, EXIT_INTERNAL, EXIT_USAGE
from fitgate.cli.parser import build_parser
from fitgate.cli.plan import cmd_plan
from fitgate.cli.plan_pd import cmd_plan_pd
from fitgate.cli.recommend import cmd_recommend
from fitgate.settings import SettingsError, load
from fitgate.sizing import SizingError
from fitgate.workloads.bounds import configure as configure_budgets


def _debug() -> bool:
    try:
        return load().debug
    except SettingsError:
        return False


def _closed_pipe() -> int:
    """The reader of stdout went away: stop quietly, as Unix tools do (no message: nobody reads it).

    stdout is pointed at /dev/null so that the interpreter's last flush at exit does not fail again
    (the Python documentation's recipe, "Note on SIGPIPE" in the signal module).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout with no file behind it (io.UnsupportedOperation is both)
        pass
    return EXIT_CLOSED_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fitgate`` console script."""
    args = build_parser().parse_args(argv)
    handlers = {
        "plan": cmd_plan,
        "plan-pd": cmd_plan_pd,
        "recommend": cmd_recommend,
        "compare": cmd_compare,
        "catalog": cmd_catalog,
        "gpus": cmd_gpus,
        "check": cmd_check,
        "operator": cmd_operator,
    }
    try:
        configure_budgets(load().budgets)  # a bad FITGATE_*/HF_* value stops any command at once, in one line
        code = handlers[args.command](args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen below
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except (SizingError, CheckpointError, SettingsError) as exc:
        print(f"fitgate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug: say so in one line unless debugging
        if _debug():
            raise
        print(
            f"fitgate: internal error: {type(exc).__name__}: {exc} (set FITGATE_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
