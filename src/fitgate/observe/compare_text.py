"""A comparison as text: fitgate's figures beside the log's, term by term (``fitgate compare``'s default output).

Read from the typed :class:`~fitgate.observe.compare.Comparison` (the plan, never its document read back); a
log's control characters are escaped (issue 22).
"""

from __future__ import annotations

from fitgate.observe.compare import TERMS, Comparison, observed_document, predicted_terms
from fitgate.observe.logpatterns import printable
from fitgate.sizing.units import fmt_gib


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return fmt_gib(value)
    if unit == "x":
        return f"{value:.2f}x"
    return f"{int(value):,}"


def render_compare_text(c: Comparison) -> str:
    """The human-readable table of a comparison; a log's control characters are escaped (issue 22)."""
    return printable(_render_compare_text(c))


def _outcome_lines(c: Comparison) -> tuple[str, str]:
    """How the run ended, and whether fitgate agrees (a word)."""
    failure = c.log.failure
    outcome = c.log.outcome + ("" if failure is None else f" ({failure.kind}): {failure.message[:160]}")
    return outcome, {True: "agrees", False: "DISAGREES", None: "-"}[c.agrees()]


def _render_compare_text(c: Comparison) -> str:
    if c.predicted is None:
        return _render_refused_text(c)
    report, log = c.predicted, c.log
    p, rs = report.plan, report.plan.serving
    dp = rs.parallel.data_parallel_size
    lines = [
        f"fitgate compare: {p.model} on {report.gpus} x {p.gpu.name} ({fmt_gib(p.gpu.memory_bytes)} each), "
        f"vLLM {rs.vllm_version}",
        f"  TP {rs.tensor_parallel_size} x PP {rs.pipeline_parallel_size}"
        + (f" x DP {dp}" if dp > 1 else "")
        + (" (EP)" if rs.parallel.expert_parallel else "")
        + f", max_model_len {rs.max_model_len}, dtype {rs.dtype}, kv {rs.kv_cache_dtype}, "
        f"gpu_memory_utilization {rs.gpu_memory_utilization}, max_num_seqs {rs.max_num_seqs}, "
        f"max_num_batched_tokens {rs.max_num_batched_tokens}",
        f"  log {c.log_path}: {log.lines_recognised} of {log.lines_read} lines recognised; "
        f"model in log: {log.settings.model or '-'}",
        "",
    ]
    outcome, agrees = _outcome_lines(c)
    lines += [f"observed: {outcome}", f"fitgate:  {p.verdict.value} ({agrees})", ""]
    lines.append(f"  {'per GPU (rank 0)':22s}{'predicted':>14s}{'observed':>14s}{'error':>10s}")
    predicted, observed, errors = predicted_terms(p), observed_document(log), c.errors()
    for term in TERMS:
        err = errors[term.key]
        lines.append(
            f"  {term.label:22s}{_fmt(predicted[term.key], term.unit):>14s}{_fmt(observed[term.key], term.unit):>14s}"
            f"{'-' if err is None else f'{err:+.1f}%':>10s}"
        )
    lines.append("  (- : the log does not print this figure; errors are (predicted - observed) / observed)")
    notes = [*c.notes, *report.notes]
    if notes:
        lines += ["", *[f"note: {n}" for n in notes]]
    return "\n".join(lines)


def _render_refused_text(c: Comparison) -> str:
    outcome, agrees = _outcome_lines(c)
    r = c.refusal
    if r is None:  # neither a plan nor a refusal: nothing fitgate said to set beside the run
        return f"observed: {outcome}"
    log = c.log
    lines = [
        f"fitgate compare: {log.settings.model or '-'} on {r.gpu.name}, TP {r.serving.tensor_parallel_size} x PP "
        f"{r.serving.pipeline_parallel_size}, vLLM {r.serving.vllm_version}",
        f"  log {c.log_path}: {log.lines_recognised} of {log.lines_read} lines recognised",
        "",
        f"observed: {outcome}",
        f"fitgate:  refuses these settings ({agrees}): {r.message}",
    ]
    if c.notes:
        lines += ["", *[f"note: {n}" for n in c.notes]]
    return "\n".join(lines)
