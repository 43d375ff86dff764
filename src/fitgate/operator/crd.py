"""``python -m fitgate.operator.crd [--helm]``: print the ModelDeployment CRD (as the chart's template).

A thin entry point kept at this path because users and the README run it; the generator is
:mod:`fitgate.operator.schema.crd`.
"""

from __future__ import annotations

from fitgate.operator.schema.crd import main, render, render_helm

__all__ = ["main", "render", "render_helm"]

if __name__ == "__main__":
    raise SystemExit(main())
