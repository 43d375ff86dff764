"""The ``fitgate`` command line: ``plan``, ``recommend``, ``compare``, ``check``, ``catalog``, ``gpus``, ``operator``.

Exit codes: 0 the deployment fits (Fits or Tight), 1 it does not fit (DoesNotFit), 2 bad input
(one line on stderr naming the field, the value and what is accepted; never a traceback).

The rooms: :mod:`~fitgate.cli.parser` (every subcommand's flags), :mod:`~fitgate.cli.inputs` (flags as the
sizing core's typed inputs), one module per verb group (:mod:`~fitgate.cli.plan`,
:mod:`~fitgate.cli.recommend`, :mod:`~fitgate.cli.compare`, :mod:`~fitgate.cli.catalog`,
:mod:`~fitgate.cli.cluster`), :mod:`~fitgate.cli.render` (the plan as text) and :mod:`~fitgate.cli.app`
(:func:`main`). The JSON contracts are not built here: :mod:`fitgate.report` writes them from the typed plan.
"""

from fitgate.cli.app import main
from fitgate.cli.exits import EXIT_CLOSED_PIPE, EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_USAGE
from fitgate.cli.parser import build_parser

__all__ = ["EXIT_CLOSED_PIPE", "EXIT_DOES_NOT_FIT", "EXIT_FITS", "EXIT_USAGE", "build_parser", "main"]
