"""The JSON contracts of a plan, built in one place from the sizing core's typed results.

``fitgate plan --output json`` (``docs/plan-json.md``), the ``predicted`` object of ``fitgate compare``
(``docs/compare-json.md``) and ``fitgate recommend``'s options are all written here, from a
:class:`PlanReport` (the typed :class:`~fitgate.sizing.Plan` with what was planned beside it). The CLI prints
them; ``fitgate.observe.compare`` reads the typed report, never the document back. This package imports
only the sizing core (an import-linter contract checks it), so that every layer above may share it.
"""

from fitgate.report.estimates import cost_document, option_document, performance_document
from fitgate.report.plan import PLAN_SCHEMA, ModelOrigin, PlanReport, max_concurrency, plan_document

__all__ = [
    "PLAN_SCHEMA",
    "ModelOrigin",
    "PlanReport",
    "cost_document",
    "max_concurrency",
    "option_document",
    "performance_document",
    "plan_document",
]
