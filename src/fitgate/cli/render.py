"""``fitgate plan``'s human-readable output: the plan document (docs/plan-json.md) as a breakdown.

It reads the document :func:`fitgate.report.plan_document` wrote, so that the text shows the figures the
JSON holds, rounded the same way.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fitgate.sizing.engine_args import flag_words
from fitgate.sizing.units import GiB, fmt_gib


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(doc: Any) -> str:
    """``doc`` as JSON that every parser reads (hunt91 O1: JSON.parse refused Python's ``Infinity``).

    An infinite figure (a saturated replica's TTFT, a cost at a vanishing utilisation) is ``null``.
    """
    return json.dumps(_finite(doc), indent=2, allow_nan=False)


def _dp_text(s: dict[str, Any]) -> str:
    """`` x DP 8 (EP 8)`` for the text header, empty for one engine rank."""
    dp, ep = s.get("data_parallel_size", 1), s.get("expert_parallel_size", 1)
    dcp = s.get("decode_context_parallel_size", 1)
    return (f" x DP {dp}" if dp > 1 else "") + (f" (EP {ep})" if ep > 1 else "") + (f", DCP {dcp}" if dcp > 1 else "")


def _bar(n_bytes: int, capacity: int, width: int = 40) -> str:
    filled = max(0, min(width, round(width * n_bytes / capacity))) if capacity else 0
    return "█" * filled + "·" * (width - filled)


#: Suggested changes that are not vLLM flags, as the ``fitgate plan`` flag that makes them (the JSON contract
#: keeps the sizing core's names, docs/plan-json.md).
_CLI_FLAGS = {"workload.concurrentRequests": "--concurrency", "replicas": "--replicas"}


def _flags(changes: dict[str, str]) -> str:
    """The changes as a command line writes them: a switch alone (hunt170 F6: ``--enable-expert-parallel true``)."""
    return " ".join(" ".join(flag_words(_CLI_FLAGS.get(k, k), v)) for k, v in changes.items())


def render_text(doc: dict[str, Any]) -> str:
    """The human-readable breakdown of a plan document."""
    g, kv, s = doc["per_gpu"], doc["kv_cache"], doc["serving"]
    cap = g["capacity_bytes"]
    lines = [
        f"fitgate plan: {doc['model']['name']} on {doc['gpu']['count']} x {doc['gpu']['name']} "
        f"({fmt_gib(cap)} each), vLLM {doc['vllm_version']}",
        f"  TP {s['tensor_parallel_size']} x PP {s['pipeline_parallel_size']}{_dp_text(s)}, "
        f"max_model_len {doc['max_model_len']}, "
        f"dtype {s['dtype']}, kv {s['kv_cache_dtype']}, gpu_memory_utilization {s['gpu_memory_utilization']}, "
        f"max_num_seqs {s['max_num_seqs']}, max_num_batched_tokens {s['max_num_batched_tokens']}",
        "",
        f"verdict: {doc['verdict']}",
    ]
    lines += [f"  - {r['message']}" for r in doc["reasons"]]
    graphs = g["cuda_graph_bytes"] if g["cuda_graphs_in_budget"] else 0
    free = max(
        0,
        g["budget_bytes"]
        - g["weights_bytes"]
        - g["activation_bytes"]
        - g["non_torch_bytes"]
        - graphs
        - g["kv_cache_bytes"],
    )
    lines += ["", "per GPU (GiB)"]
    rows = [
        ("weights" + (" + LoRA" if g.get("lora_bytes") else ""), g["weights_bytes"]),
        ("activation peak", g["activation_bytes"]),
        ("non-torch", g["non_torch_bytes"]),
    ]
    if graphs:
        rows.append(("CUDA graphs", graphs))
    rows += [
        ("KV cache", g["kv_cache_bytes"]),
        ("unused in budget", free),
        ("outside budget", g["outside_budget_bytes"]),
    ]
    for label, value in rows:
        lines.append(f"  {label:17s}{value / GiB:8.2f}  {_bar(value, cap)}")
    where = "inside it (vLLM's estimate)" if graphs else "outside it"
    lines.append(
        f"  {'budget':17s}{g['budget_bytes'] / GiB:8.2f}  of {fmt_gib(cap)}; "
        f"CUDA graphs ~{fmt_gib(g['cuda_graph_bytes'])} are captured {where}"
    )
    lines += [
        "",
        f"KV cache: {kv['bytes_per_token']} B/token per GPU ({'+'.join(kv['kinds'])}), "
        f"block {kv['block_size']} tokens, "
        f"{kv['num_blocks']} blocks in {kv['num_groups']} group(s)",
        f"  GPU KV cache size: {kv['reported_tokens']} tokens; maximum concurrency for {doc['max_model_len']} tokens "
        f"per request: {kv['max_concurrency']:.2f}x",
        f"  longest max_model_len that fits: {doc['max_model_len_that_fits']}",
    ]
    if doc["workload"]:
        w = doc["workload"]
        frac = "-" if w["pool_fraction"] is None else f"{100 * w['pool_fraction']:.0f}%"
        replicas = w.get("replicas") or 1
        who = f"{w['concurrency']}"
        if replicas > 1:  # hunt91 O15: the blocks are one replica's share, not the whole concurrency's
            who = f"{-(-w['concurrency'] // replicas)} per replica ({w['concurrency']} over {replicas} replicas)"
        lines.append(f"  workload {who} x {w['context_tokens']} tokens: {w['kv_blocks']} blocks ({frac} of the pool)")
    lines += _estimated_lines(doc.get("performance"), doc.get("cost"))
    if doc["suggestions"]:
        lines += ["", "changes that would fit (fewest GPUs first, then least given up; Tight ones flagged):"]
        for sug in doc["suggestions"]:
            flags = _flags(sug["changes"])
            flag = "[Tight] " if sug["verdict"] == "Tight" else ""
            gpus = f"{sug['gpus']} GPU(s)"
            if sug["replicas"] > 1:
                gpus = f"{sug['replicas']} x {gpus}"
            lines.append(f"  {flags:34s} {flag}{gpus}: {sug['summary']}")
    lines += [
        "",
        "recommended vLLM args"
        + (f" (with {_flags(doc['recommended_change'])})" if doc["recommended_change"] else "")
        + ":",
    ]
    for arg in doc["engine_args"]:
        lines.append(f"  {' '.join(flag_words(arg['name'], arg['value'])):36s} # {arg['reason']}")
    lines.append("  " + doc["vllm_command"])
    if doc["notes"]:
        lines += ["", *[f"note: {n}" for n in doc["notes"]]]
    return "\n".join(lines)


def _estimated_lines(perf: dict[str, Any] | None, cost: dict[str, Any] | None) -> list[str]:
    if perf is None:
        return []
    shape = (
        f"{perf['input_tokens']} in + {perf['output_tokens']} out"
        if perf.get("input_tokens") is not None
        else f"{perf['context_tokens']} tokens"
    )
    load = f"{perf['request_rate']:g} requests/s" if perf.get("request_rate") else f"{perf['batch']} in flight"
    low, high = perf["decode_tokens_per_s_range"]
    t_low, t_high = perf["tpot_seconds_range"]
    ttft = "unbounded (saturated)" if perf["saturated"] else f"{perf['ttft_seconds']:.2f} s"
    lines = [
        "",
        f"estimated (step model fitted on published vLLM runs, not measured) at {load}, {shape}:",
        f"  decode {perf['decode_tokens_per_s']:.0f} tokens/s (range {low:.0f}-{high:.0f}; bandwidth roofline "
        f"{perf['roofline_decode_tokens_per_s']:.0f}), TPOT {perf['tpot_seconds'] * 1000:.1f} ms "
        f"({t_low * 1000:.1f}-{t_high * 1000:.1f}), time to first token {ttft}, prefill "
        f"{perf['prefill_tokens_per_s']:.0f} tokens/s",
    ]
    if cost is not None:
        line = f"  ${cost['usd_per_hour']:.2f}/h for {cost['gpus']} GPU(s)"
        if cost["usd_per_million_output_tokens"] is not None:
            line += (
                f": ${cost['usd_per_million_output_tokens']:.2f} per 1M output tokens at {cost['utilization']:.0%} "
                "utilisation"
            )
        lines.append(line)
        if cost["breakeven_tokens_per_day"] is not None:
            where = (
                f"cheaper than the API from {cost['cheaper_than_api_at'] / 1e6:.0f}M tokens/day"
                if cost["cheaper_than_api_at"] is not None
                else "never cheaper than the API: one replica cannot produce that much a day"
            )
            line = f"  break-even {cost['breakeven_tokens_per_day'] / 1e6:.0f}M output tokens/day"
            if cost.get("breakeven_requests_per_day") is not None:
                line += f" ({cost['breakeven_requests_per_day']:,.0f} requests/day)"
            lines.append(f"{line}; {where}")
        if cost.get("usd_per_request") is not None and cost.get("usd_per_million_tokens") is not None:
            lines.append(
                f"  ${cost['usd_per_request']:.5f} a request, ${cost['usd_per_million_tokens']:.2f} per 1M input + "
                f"output tokens at the estimated load and {cost['utilization']:.0%} utilisation"
            )
    return lines
