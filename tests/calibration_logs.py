"""What a calibration case's log prints: shared by tests/observe/test_logparse.py and benchmarks/compare_logs.py."""

from __future__ import annotations

import re

#: Records that are not one vLLM log, and why their figures are not expected to be read.
NOT_A_LOG = {
    "pr_comment_summary": "two runs side by side ('Current main' and 'This PR'), not one log",
    "summary_table_of_real_logs": "a Markdown table summarising logs",
    "parsed_json_of_real_log": "JSON parsed from a log, not the log",
}
#: The ``measured`` figures of a calibration case that a log can print.
FIGURES = (
    "weights_gib",
    "non_torch_gib",
    "activation_peak_gib",
    "total_non_kv_gib",
    "kv_available_gib",
    "kv_tokens",
    "gpu_blocks",
    "max_concurrency",
    "cuda_graph_gib",
    "cuda_graph_estimated_gib",
)


def printed(value: float, text: str) -> bool:
    """Whether ``value`` appears in ``text`` as a log prints it (0.9 as 0.90, 1505552 as 1,505,552)."""
    if isinstance(value, int) and not isinstance(value, bool):
        forms = [str(value), f"{value:,}"]
        return any(re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d]|,\d)", text) for f in forms)
    return re.search(rf"(?<![\d.]){re.escape(str(value))}0*(?!\d)", text) is not None
