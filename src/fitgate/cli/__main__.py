"""``python -m fitgate.cli``: the ``fitgate`` console script."""

from fitgate.cli.app import main

raise SystemExit(main())
