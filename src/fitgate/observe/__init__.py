"""What vLLM actually did: its start-up log read back, and set against fitgate's plan.

``logparse`` is a pure, bounded reader of vLLM start-up logs (no Kubernetes, no network); ``compare``
plans the settings a log ran with and lines the prediction up against the printed figures.
"""

from fitgate.observe.logparse import parse_lines, read_log
from fitgate.observe.records import Failure, LogError, Observed, RunSettings, StartupLog

__all__ = ["Failure", "LogError", "Observed", "RunSettings", "StartupLog", "parse_lines", "read_log"]
