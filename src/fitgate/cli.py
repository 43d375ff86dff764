"""The ``fitgate`` command line: ``plan``, ``recommend``, ``compare``, ``check``, ``catalog``, ``gpus``, ``operator``.

Exit codes: 0 the deployment fits (Fits or Tight), 1 it does not fit (DoesNotFit), 2 bad input
(one line on stderr naming the field, the value and what is accepted; never a traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from fitgate import __version__
from fitgate.checkpoints import CheckpointError, ModelFacts, resolve, to_model_input
from fitgate.checkpoints.catalog import (
    BUILT_IN,
    CATALOG_PATH_ENV,
    catalog_entries,
    find_builtin,
    user_catalog_dirs,
)
from fitgate.checkpoints.catalog_add import add_to_catalog
from fitgate.checkpoints.resolve import SOURCES, parse_repo_ref
from fitgate.settings import SettingsError, load, unknown_policy
from fitgate.sizing import (
    DEFAULT_VLLM_VERSION,
    Cost,
    EngineArg,
    GpuModel,
    GpuPrices,
    Option,
    Performance,
    Plan,
    ServingConfig,
    SizingError,
    Suggestion,
    Verdict,
    Workload,
    check_utilization,
    custom_gpu,
    estimate,
    fewest_gpus,
    gpu_catalog,
    lookup_gpu,
    parse_gpu_prices,
    plan,
    recommend,
    replica_cost,
    search,
    suggest,
    vllm_argv,
    vllm_command,
)
from fitgate.sizing.cost import DEFAULT_UTILIZATION
from fitgate.sizing.dtypes import KV_CACHE_DTYPES
from fitgate.sizing.speculative import parse_config as parse_speculative_config
from fitgate.sizing.units import GiB, fmt_gib, parse_size
from fitgate.workloads.bounds import configure as configure_budgets

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_USAGE = 0, 1, 2
PLAN_SCHEMA = "fitgate.io/plan/v1"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"fitgate: error: {message} (see {self.prog} --help)\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="fitgate", description="Plan vLLM's per-GPU memory before deploying.")
    parser.add_argument("--version", action="version", version=f"fitgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plan", help="size one model on one GPU model, as vLLM will")
    p.add_argument("--model", required=True, help="a Hugging Face layout directory, or a repo id org/name[@revision]")
    p.add_argument("--revision", help="branch, tag or commit of a repo id")
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="where a repo id is resolved: auto (Hub, else the built-in catalog), hub, catalog, path",
    )
    gpu = p.add_argument_group("GPU (one of --gpu or --gpu-memory is required)")
    gpu.add_argument("--gpu", help="a GPU from `fitgate gpus` (e.g. H100, NVIDIA-H100-80GB-HBM3, L4)")
    gpu.add_argument("--gpu-memory", help="device memory as CUDA reports it, e.g. 79.19GiB, 81559MiB, 80GB")
    p.add_argument("--tensor-parallel-size", "-tp", type=_int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=_int, default=1)
    p.add_argument("--max-model-len", type=_int, help="default: the model's max_position_embeddings")
    p.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    p.add_argument("--dtype", default="auto", help="auto, bfloat16, float16, float32")
    p.add_argument("--quantization", help="runtime quantization of an unquantized checkpoint: fp8, bitsandbytes")
    p.add_argument(
        "--gpu-memory-utilization", type=_float, default=None, help="default: the release's (0.92 from vLLM 0.20)"
    )
    p.add_argument("--max-num-seqs", type=_int)
    p.add_argument("--max-num-batched-tokens", type=_int)
    p.add_argument("--block-size", type=_int)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument(
        "--runner", choices=("generate", "pooling"), default="generate", help="vLLM's --runner (pooling: embeddings)"
    )
    p.add_argument(
        "--speculative-config",
        help='vLLM\'s --speculative-config JSON, e.g. \'{"method": "mtp", "num_speculative_tokens": 1}\' '
        "(MTP layers of the checkpoint are counted; a drafter from another checkpoint is not)",
    )
    p.add_argument(
        "--kv-cache-memory-bytes",
        type=_int,
        help="vLLM's --kv-cache-memory-bytes: the KV pool per GPU in bytes (gpu_memory_utilization is then ignored)",
    )
    p.add_argument(
        "--interconnect",
        choices=("nvlink", "pcie"),
        help="what links the GPUs of a replica (default: the GPU catalog's: nvlink for SXM/NVL boards)",
    )
    p.add_argument(
        "--vllm-version",
        default=DEFAULT_VLLM_VERSION,
        help=f"accounting of this release (default {DEFAULT_VLLM_VERSION})",
    )
    p.add_argument(
        "--offline-llm",
        action="store_true",
        help="size the offline LLM class (bigger default batch) instead of `vllm serve`",
    )
    p.add_argument("--concurrency", type=_int, help="concurrent requests the service must hold")
    p.add_argument(
        "--context-tokens",
        type=_int,
        help="tokens (prompt + output) of each request, as workload.contextTokens (default: --max-model-len, "
        "else the model's)",
    )
    _economics_flags(p)
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")

    r = sub.add_parser(
        "recommend", help="the cheapest GPU product x TP x PP x KV dtype x quantization that holds a workload"
    )
    r.add_argument("--model", required=True, help="a Hugging Face layout directory, or a repo id org/name[@revision]")
    r.add_argument("--source", choices=SOURCES, default="auto", help="where a repo id is resolved (as for plan)")
    r.add_argument("--concurrency", type=_int, required=True, help="concurrent requests the service must hold")
    r.add_argument(
        "--context-tokens", type=_int, required=True, help="tokens (prompt + output) of each request (contextTokens)"
    )
    r.add_argument("--max-model-len", type=_int, help="default: --context-tokens")
    r.add_argument("--gpus", help="GPU products to consider, comma-separated (default: the whole catalog)")
    r.add_argument("--max-gpus", type=_int, default=16, help="most GPUs per replica (default 16)")
    r.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")
    r.add_argument("--limit", type=_int, default=15, help="options shown in text output (JSON lists all)")
    _economics_flags(r)
    r.add_argument("--output", "-o", choices=("text", "json"), default="text")

    cmp = sub.add_parser("compare", help="set fitgate's plan beside what a vLLM start-up log printed")
    cmp.add_argument("--log", required=True, help="the log file (`kubectl logs POD > FILE`), prefixes and all")
    cmp.add_argument("--model", help="where to resolve the checkpoint from (default: the model the log names)")
    cmp.add_argument("--source", choices=SOURCES, default="auto", help="where a repo id is resolved (as for plan)")
    cmp.add_argument("--gpu", help="the GPU it ran on (default: the catalog GPU of the total the log prints)")
    cmp.add_argument("--vllm-version", help="plan with this release's accounting (default: the one the log prints)")
    cmp.add_argument("--output", "-o", choices=("text", "json"), default="text")
    cmp.add_argument(
        "--as-case",
        action="store_true",
        help="print the run as one calibration case (one JSON line, as in the calibration cases.jsonl); plans nothing",
    )

    c = sub.add_parser("catalog", help="the model catalog (built-in, plus FITGATE_CATALOG_PATH directories)")
    csub = c.add_subparsers(dest="action", required=True, parser_class=_Parser)
    cl = csub.add_parser("list", help="list the catalog's models and how their weight bytes are known")
    cl.add_argument("--fits-on", metavar="GPU", help="only the models this GPU runs, with the fewest GPUs needed")
    _fit_flags(cl)
    cl.add_argument("--output", "-o", choices=("text", "json"), default="text")
    ca = csub.add_parser(
        "add",
        help="store a checkpoint's config.json and safetensors headers as a catalog entry, for offline use",
    )
    ca.add_argument("model", help="a Hugging Face layout directory, or a repo id org/name[@revision]")
    ca.add_argument("--repo-id", help="the repo id the entry answers to (default: the repo id given as MODEL)")
    ca.add_argument("--revision", help="branch, tag or commit of a repo id")
    ca.add_argument("--source", choices=SOURCES, default="auto", help="where MODEL is resolved (as for plan)")
    ca.add_argument(
        "--into",
        help=f"the user catalog directory to write to (default: the first directory in {CATALOG_PATH_ENV})",
    )
    ca.add_argument("--force", action="store_true", help="replace an existing entry of the same repo id")
    ca.add_argument(
        "--flat",
        action="store_true",
        help="write <org>__<name>.config.json/.weights.json files side by side, ready for "
        "`kubectl create configmap NAME --from-file=DIR`",
    )

    k = sub.add_parser(
        "check", help="evaluate ModelDeployments and vLLM workloads offline (CI, GitOps); exit 1 on DoesNotFit"
    )
    k.add_argument(
        "files",
        nargs="+",
        help="YAML files ('-' for stdin): ModelDeployments and vLLM Deployments, StatefulSets, ReplicaSets, Jobs, "
        "Pods, LeaderWorkerSets, KServe InferenceServices / LLMInferenceServices (multi-document, kind: List, "
        "helm template output)",
    )
    k.add_argument("--gpu", help="evaluate on this GPU (default: each manifest's placement.gpuProduct)")
    k.add_argument("--gpus-per-node", type=_int, default=8, help="GPUs per node of that pool (default 8)")
    k.add_argument("--output", "-o", choices=("text", "json"), default="text")

    o = sub.add_parser("operator", help="run the Kubernetes operator and admission webhook (kopf)")
    o.add_argument("--namespace", "-n", action="append", default=[], help="watch only these namespaces (repeatable)")
    o.add_argument("--peering", help="kopf peering name for several replicas (default: standalone)")
    o.add_argument("--webhook-port", type=_int, help="admission webhook port; 0 disables (env FITGATE_WEBHOOK_PORT)")
    o.add_argument("--webhook-host", help="host/IP the API server reaches the webhook at (managed configuration)")
    o.add_argument("--webhook-cert", help="serving certificate file (env FITGATE_WEBHOOK_CERT)")
    o.add_argument("--webhook-key", help="serving key file (env FITGATE_WEBHOOK_KEY)")
    o.add_argument("--webhook-ca", help="CA bundle file for a managed configuration (env FITGATE_WEBHOOK_CA)")
    o.add_argument("--webhook-managed", help="name of a ValidatingWebhookConfiguration kopf keeps up to date")
    o.add_argument("--metrics-port", type=_int, help="/metrics, /healthz, /readyz port (env FITGATE_METRICS_PORT)")
    o.add_argument("--resync-seconds", type=_float, help="re-evaluation period (env FITGATE_RESYNC_SECONDS)")
    o.add_argument(
        "--unknown-policy",
        choices=("Allow", "Warn", "Deny", "Reject"),
        help="admission on Unknown verdicts where policy.onUnknown is unset (Reject: the older name of Deny)",
    )
    o.add_argument("--liveness", help="kopf liveness endpoint, e.g. http://0.0.0.0:8081/healthz")
    o.add_argument("--verbose", action="store_true")

    g = sub.add_parser("gpus", help="the GPU catalog")
    g.add_argument("--fits", metavar="MODEL", help="only the GPUs that run MODEL, with how many of them")
    g.add_argument("--source", choices=SOURCES, default="auto", help="where MODEL is resolved (as for plan)")
    _fit_flags(g)
    g.add_argument("--output", "-o", choices=("text", "json"), default="text")
    return parser


def _economics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu-hour-price",
        help="USD per GPU-hour: one price (2.5) or per product (H100=2.5,L4=0.7); no default (no catalog prices)",
    )
    p.add_argument(
        "--utilization",
        type=_float,
        default=DEFAULT_UTILIZATION,
        help=f"share of the day at the estimated load; divides the cost per token (default {DEFAULT_UTILIZATION})",
    )
    p.add_argument("--api-price-per-million", type=_float, help="an API's USD per 1M output tokens, for break-even")


def _fit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=_int, default=1, help="concurrent requests (default 1)")
    p.add_argument(
        "--context-tokens",
        type=_int,
        help="tokens (prompt + output) of each request, as workload.contextTokens (default: --max-model-len, "
        "else the model's)",
    )
    p.add_argument("--max-model-len", type=_int, help="default: --context-tokens, else the model's")
    p.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    p.add_argument("--quantization", help="runtime quantization of an unquantized checkpoint: fp8, bitsandbytes")
    p.add_argument("--max-gpus", type=_int, default=8, help="most GPUs per replica (default 8)")
    p.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")


# --------------------------------------------------------------------------------------------


def _gpu(args: argparse.Namespace) -> GpuModel:
    if not args.gpu and not args.gpu_memory:
        raise SizingError("--gpu", None, "a GPU name (see `fitgate gpus`) or --gpu-memory SIZE")
    if args.gpu:
        model = lookup_gpu(args.gpu, "--gpu")
        if args.gpu_memory:
            return GpuModel(**{**model.__dict__, "memory_bytes": parse_size(args.gpu_memory, "--gpu-memory")})
        return model
    return custom_gpu(parse_size(args.gpu_memory, "--gpu-memory"))


def _serving(args: argparse.Namespace) -> ServingConfig:
    spec_text = getattr(args, "speculative_config", None)
    spec_method, spec_tokens = parse_speculative_config(spec_text) if spec_text else (None, None)
    return ServingConfig(
        speculative_method=spec_method,
        speculative_tokens=spec_tokens,
        max_model_len=args.max_model_len,
        kv_cache_dtype=args.kv_cache_dtype,
        dtype=args.dtype,
        quantization=args.quantization,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_memory_bytes=getattr(args, "kv_cache_memory_bytes", None),
        interconnect=getattr(args, "interconnect", None),
        runner=getattr(args, "runner", "generate"),
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        enforce_eager=args.enforce_eager,
        vllm_version=args.vllm_version,
        offline=args.offline_llm,
    )


def _workload(args: argparse.Namespace, serving: ServingConfig, default_len: int) -> Workload | None:
    if args.concurrency is None and args.context_tokens is None:
        return None
    if args.concurrency is None:
        raise SizingError("--concurrency", None, "a number of concurrent requests when --context-tokens is given")
    longest = serving.max_model_len or default_len
    if args.context_tokens is not None and args.context_tokens > longest:  # the CRD's CEL rule, as a flag
        limit = f"--max-model-len {longest}" if serving.max_model_len else f"the model's {longest} tokens"
        raise SizingError("--context-tokens", args.context_tokens, f"at most {limit} (vLLM refuses longer requests)")
    return Workload(args.concurrency, args.context_tokens or longest)


def plan_document(
    facts: ModelFacts,
    result: Plan,
    suggestions: tuple[Suggestion, ...],
    args_out: tuple[EngineArg, ...],
    from_suggestion: Suggestion | None,
    revision: str | None = None,
    performance: Performance | None = None,
    cost: Cost | None = None,
) -> dict[str, Any]:
    """The ``--output json`` contract (docs/plan-json.md); schema ``fitgate.io/plan/v1``.

    ``revision`` is the one the user asked for; ``vllm serve`` gets it so that it loads what was planned.
    """
    rs, g, kv = result.serving, result.per_gpu, result.kv
    served = facts.origin if facts.source == "local" else result.model
    return {
        "schema": PLAN_SCHEMA,
        "model": {
            "name": result.model,
            "source": facts.source,
            "revision": facts.revision,
            "weights_basis": facts.weights_basis,
        },
        "gpu": {
            "name": result.gpu.name,
            "memory_bytes": result.gpu.memory_bytes,
            "count": rs.tensor_parallel_size * rs.pipeline_parallel_size,
        },
        "vllm_version": rs.vllm_version,
        "verdict": result.verdict.value,
        "reasons": [{"code": r.code, "message": r.message} for r in result.reasons],
        "per_gpu": {
            "capacity_bytes": g.capacity_bytes,
            "budget_bytes": g.budget_bytes,
            "weights_bytes": g.weights_bytes,
            "activation_bytes": g.activation_bytes,
            "non_torch_bytes": g.non_torch_bytes,
            "cuda_graph_bytes": g.cuda_graph_bytes,
            "cuda_graphs_in_budget": g.cuda_graphs_in_budget,
            "kv_cache_bytes": g.kv_cache_bytes,
            "headroom_bytes": g.headroom_bytes,
            "outside_budget_bytes": g.outside_budget_bytes,
        },
        "kv_cache": {
            "bytes_per_token": kv.bytes_per_token,
            "page_size_bytes": kv.page_size_bytes,
            "block_size": kv.block_size,
            "num_blocks": kv.num_blocks,
            "num_groups": kv.num_groups,
            "kinds": list(kv.kinds),
            "reported_tokens": kv.reported_tokens,
            "max_concurrency": round(kv.max_concurrency, 4),
            "one_request_bytes": kv.one_request_bytes,
        },
        "max_model_len": rs.max_model_len,
        "max_model_len_that_fits": result.max_model_len_that_fits,
        "serving": {
            "tensor_parallel_size": rs.tensor_parallel_size,
            "pipeline_parallel_size": rs.pipeline_parallel_size,
            "gpu_memory_utilization": rs.gpu_memory_utilization,
            "dtype": rs.dtype,
            "kv_cache_dtype": rs.kv_cache_dtype,
            "quantization": rs.quantization,
            "max_num_seqs": rs.max_num_seqs,
            "max_num_batched_tokens": rs.max_num_batched_tokens,
            "block_size": kv.block_size,
            "enforce_eager": rs.enforce_eager,
            "speculative_config": None
            if rs.speculative is None
            else {
                "method": rs.speculative.method,
                "num_speculative_tokens": rs.speculative.num_tokens,
                "drafter_layers": rs.speculative.drafter_layers,
                "counted": rs.speculative.counted,
            },
        },
        "workload": None
        if result.workload is None
        else {
            "concurrency": result.workload.concurrency,
            "context_tokens": result.workload.context_tokens,
            "kv_blocks": kv.workload_blocks,
            "pool_fraction": None if kv.workload_fraction is None else round(kv.workload_fraction, 4),
        },
        "ranks": [
            {
                "pp_rank": r.pp_rank,
                "layers": [r.layers.start, r.layers.stop],
                "weights_bytes": r.weights.total_bytes,
                "activation_bytes": r.profile.activation_bytes,
                "non_torch_bytes": r.profile.non_torch_bytes,
                "cuda_graph_bytes": r.profile.cuda_graph_bytes,
                "available_kv_bytes": r.available_kv_bytes,
                "num_blocks": r.num_blocks,
            }
            for r in result.ranks
        ],
        "engine_args": [{"name": a.name, "value": a.value, "reason": a.reason} for a in args_out],
        "vllm_args": vllm_argv(args_out),
        "vllm_command": shlex.join(vllm_command(served, args_out, None if facts.source == "local" else revision)),
        "recommended_change": None if from_suggestion is None else dict(from_suggestion.changes),
        "suggestions": [
            {"changes": dict(s.changes), "verdict": s.verdict.value, "gpus": s.gpus, "summary": s.summary}
            for s in suggestions
        ],
        "performance": performance_document(performance),
        "cost": cost_document(cost),
        "notes": [*facts.notes, *result.notes],
    }


def performance_document(perf: Performance | None) -> dict[str, Any] | None:
    """``performance`` of the plan contract (docs/plan-json.md): estimates, labelled by ``basis``."""
    if perf is None:
        return None
    return {
        "decode_tokens_per_s": round(perf.decode_tokens_per_s, 1),
        "per_request_tokens_per_s": round(perf.per_request_tokens_per_s, 2),
        "prefill_tokens_per_s": round(perf.prefill_tokens_per_s, 1),
        "ttft_seconds": round(perf.ttft_seconds, 4),
        "batch": perf.batch,
        "context_tokens": perf.context_tokens,
        "roofline_decode_tokens_per_s": round(perf.roofline_decode_tokens_per_s, 1),
        "bytes_read_per_step": perf.bytes_read_per_step,
        "basis": perf.basis,
    }


def cost_document(cost: Cost | None) -> dict[str, Any] | None:
    """``cost`` of the plan contract (docs/plan-json.md); None without ``--gpu-hour-price``."""
    if cost is None:
        return None

    def r(x: float | None, n: int) -> float | None:
        return None if x is None else round(x, n)

    return {
        "gpus": cost.gpus,
        "usd_per_hour": r(cost.usd_per_hour, 4),
        "usd_per_million_output_tokens": r(cost.usd_per_million_output_tokens, 4),
        "breakeven_tokens_per_day": r(cost.breakeven_tokens_per_day, 0),
        "cheaper_than_api_at": r(cost.cheaper_than_api_at, 0),
        "utilization": cost.utilization,
    }


def _bar(n_bytes: int, capacity: int, width: int = 40) -> str:
    filled = max(0, min(width, round(width * n_bytes / capacity))) if capacity else 0
    return "█" * filled + "·" * (width - filled)


def _flags(changes: dict[str, str]) -> str:
    return " ".join(f"{k} {v}" for k, v in changes.items())


def render_text(doc: dict[str, Any]) -> str:
    """The human-readable breakdown of a plan document."""
    g, kv, s = doc["per_gpu"], doc["kv_cache"], doc["serving"]
    cap = g["capacity_bytes"]
    lines = [
        f"fitgate plan: {doc['model']['name']} on {doc['gpu']['count']} x {doc['gpu']['name']} "
        f"({fmt_gib(cap)} each), vLLM {doc['vllm_version']}",
        f"  TP {s['tensor_parallel_size']} x PP {s['pipeline_parallel_size']}, max_model_len {doc['max_model_len']}, "
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
        ("weights", g["weights_bytes"]),
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
        lines.append(
            f"  workload {w['concurrency']} x {w['context_tokens']} tokens: "
            f"{w['kv_blocks']} blocks ({frac} of the pool)"
        )
    lines += _estimated_lines(doc.get("performance"), doc.get("cost"))
    if doc["suggestions"]:
        lines += ["", "changes that would fit (fewest GPUs first, then least given up; Tight ones flagged):"]
        for sug in doc["suggestions"]:
            flags = _flags(sug["changes"])
            flag = "[Tight] " if sug["verdict"] == "Tight" else ""
            lines.append(f"  {flags:34s} {flag}{sug['gpus']} GPU(s): {sug['summary']}")
    lines += [
        "",
        "recommended vLLM args"
        + (f" (with {_flags(doc['recommended_change'])})" if doc["recommended_change"] else "")
        + ":",
    ]
    for arg in doc["engine_args"]:
        lines.append(f"  {arg['name'] + ' ' + arg['value']:36s} # {arg['reason']}")
    lines.append("  " + doc["vllm_command"])
    if doc["notes"]:
        lines += ["", *[f"note: {n}" for n in doc["notes"]]]
    return "\n".join(lines)


def _estimated_lines(perf: dict[str, Any] | None, cost: dict[str, Any] | None) -> list[str]:
    if perf is None:
        return []
    lines = [
        "",
        f"estimated (roofline, not measured) at {perf['batch']} x {perf['context_tokens']} tokens:",
        f"  decode {perf['decode_tokens_per_s']:.0f} tokens/s ({perf['per_request_tokens_per_s']:.1f} per request; "
        f"bandwidth roofline {perf['roofline_decode_tokens_per_s']:.0f}), prefill {perf['prefill_tokens_per_s']:.0f} "
        f"tokens/s, time to first token {perf['ttft_seconds']:.2f} s",
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
            lines.append(f"  break-even {cost['breakeven_tokens_per_day'] / 1e6:.0f}M output tokens/day; {where}")
    return lines


def _prices(args: argparse.Namespace) -> GpuPrices | None:
    return parse_gpu_prices(args.gpu_hour_price) if args.gpu_hour_price else None


def _economics(
    args: argparse.Namespace, model: Any, gpu: GpuModel, result: Plan
) -> tuple[Performance | None, Cost | None]:
    """The estimate of a plan that can start, and its cost when ``--gpu-hour-price`` prices its GPU."""
    utilization = check_utilization(args.utilization)
    prices = _prices(args)
    if args.api_price_per_million is not None and prices is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    if result.verdict is Verdict.DOES_NOT_FIT or not (gpu.memory_bandwidth_gbps and gpu.bf16_dense_tflops):
        return None, None  # nothing to estimate, or a --gpu-memory size without speeds
    perf = estimate(model, result)
    price = prices.of(gpu) if prices is not None else None
    if prices is not None and price is None:
        raise SizingError("--gpu-hour-price", args.gpu_hour_price, f"a price for {gpu.name} (or one for every GPU)")
    if price is None:
        return perf, None
    gpus = result.serving.tensor_parallel_size * result.serving.pipeline_parallel_size
    return perf, replica_cost(price, gpus, perf.decode_tokens_per_s, utilization, args.api_price_per_million)


def cmd_plan(args: argparse.Namespace) -> int:
    """``fitgate plan``."""
    facts = resolve(args.model, args.revision, source=args.source)
    model = to_model_input(facts)
    gpu = _gpu(args)
    serving = _serving(args)
    workload = _workload(args, serving, model.arch.derived_max_model_len)
    result = plan(model, gpu, serving, workload)
    suggestions = suggest(model, gpu, serving, workload, result)
    _, args_out, chosen = recommend(model, gpu, serving, workload, result, suggestions)
    revision = args.revision or (args.model.partition("@")[2] if facts.source != "local" else "") or None
    perf, cost = _economics(args, model, gpu, result)
    doc = plan_document(facts, result, suggestions, args_out, chosen, revision, perf, cost)
    print(json.dumps(doc, indent=2) if args.output == "json" else render_text(doc))
    return EXIT_DOES_NOT_FIT if result.verdict is Verdict.DOES_NOT_FIT else EXIT_FITS


def option_document(o: Option) -> dict[str, Any]:
    """One ``recommend`` option (docs/plan-json.md, ``fitgate recommend``)."""
    c = o.cost
    return {
        "gpu": o.gpu.name,
        "tensor_parallel_size": o.tensor_parallel_size,
        "pipeline_parallel_size": o.pipeline_parallel_size,
        "kv_cache_dtype": o.kv_cache_dtype,
        "quantization": o.quantization,
        "gpus": o.gpus,
        "verdict": o.verdict.value,
        "headroom_bytes": o.headroom_bytes,
        "usd_per_hour": None if c is None else round(c.usd_per_hour, 4),
        "usd_per_million_output_tokens": None
        if c is None or c.usd_per_million_output_tokens is None
        else round(c.usd_per_million_output_tokens, 4),
        "gpu_hours_per_million_output_tokens": round(o.gpu_hours_per_million_output_tokens, 4),
        "decode_tokens_per_s": round(o.performance.decode_tokens_per_s, 1),
        "per_request_tokens_per_s": round(o.performance.per_request_tokens_per_s, 2),
        "ttft_seconds": round(o.performance.ttft_seconds, 4),
        "cost": cost_document(c),
    }


def _gpu_list(text: str | None, prices: GpuPrices | None) -> list[GpuModel]:
    """``--gpus`` (each must be priced when per-product prices are given), else the catalog (the priced ones)."""
    if text:
        gpus = [lookup_gpu(name.strip(), "--gpus") for name in text.split(",") if name.strip()]
        for g in gpus:
            if prices is not None and prices.of(g) is None:
                raise SizingError("--gpu-hour-price", None, f"a price for {g.name}, which --gpus names")
        return list(dict.fromkeys(gpus))
    return [g for g in gpu_catalog() if prices is None or prices.of(g) is not None]


def cmd_recommend(args: argparse.Namespace) -> int:
    """``fitgate recommend``: every configuration that holds the workload, cheapest per 1M output tokens first."""
    facts = resolve(args.model, source=args.source)
    model = to_model_input(facts)
    utilization = check_utilization(args.utilization)
    prices = _prices(args)
    if args.api_price_per_million is not None and prices is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    longest = args.max_model_len or model.arch.derived_max_model_len
    if args.context_tokens > longest:
        raise SizingError("--context-tokens", args.context_tokens, f"at most {longest} (the max_model_len)")
    found = search(
        model,
        Workload(args.concurrency, args.context_tokens),
        _gpu_list(args.gpus, prices),
        max_model_len=args.max_model_len,
        max_gpus=args.max_gpus,
        prices=prices,
        utilization=utilization,
        api_usd_per_million=args.api_price_per_million,
        vllm_version=args.vllm_version,
    )
    doc = {
        "model": model.name,
        "workload": {"concurrency": args.concurrency, "context_tokens": args.context_tokens},
        "max_model_len": args.max_model_len or args.context_tokens,
        "vllm_version": args.vllm_version,
        "utilization": utilization,
        "ranked_by": "usd_per_million_output_tokens" if prices else "gpu_hours_per_million_output_tokens",
        "options": [option_document(o) for o in found.options],
        "reason": found.reason or None,
        "basis": found.options[0].performance.basis if found.options else None,
    }
    if args.output == "json":
        print(json.dumps(doc, indent=2))
        return EXIT_FITS if found.options else EXIT_DOES_NOT_FIT
    print(
        f"fitgate recommend: {model.name} for {args.concurrency} x {args.context_tokens} tokens "
        f"(vLLM {args.vllm_version}), ranked by {doc['ranked_by']} at {utilization:.0%} utilisation"
    )
    if not found.options:
        print(f"  none: {found.reason}")
        return EXIT_DOES_NOT_FIT
    unit = "$/1M out" if prices else "GPU-h/1M"
    print(
        f"  {'GPU':13s} {'TPxPP':>6s} {'KV':5s} {'WEIGHTS':7s} {'VERDICT':8s} {'HEADROOM':>10s} {'TOK/S':>7s} "
        f"{unit:>9s}"
    )
    for o in found.options[: max(1, args.limit)]:
        d = option_document(o)
        per = d["usd_per_million_output_tokens"] if prices else d["gpu_hours_per_million_output_tokens"]
        print(
            f"  {o.gpu.name:13s} {f'{o.tensor_parallel_size}x{o.pipeline_parallel_size}':>6s} {o.kv_cache_dtype:5s} "
            f"{o.quantization or 'as-is':7s} {o.verdict.value:8s} {fmt_gib(o.headroom_bytes):>10s} "
            f"{o.performance.decode_tokens_per_s:7.0f} {per:9.2f}"
        )
    if len(found.options) > args.limit:
        print(f"  ... {len(found.options) - args.limit} more (--limit, or --output json for all)")
    print(f"  {doc['basis']}")
    return EXIT_FITS


def _fit_workload(args: argparse.Namespace, model: Any) -> Workload:
    context = args.context_tokens or args.max_model_len or model.arch.derived_max_model_len
    return Workload(args.concurrency, context)


def _fit_search(args: argparse.Namespace, model: Any, gpus: Sequence[GpuModel]) -> dict[str, Option]:
    found = search(
        model,
        _fit_workload(args, model),
        gpus,
        max_model_len=args.max_model_len,
        max_gpus=args.max_gpus,
        vllm_version=args.vllm_version,
        kv_cache_dtypes=(args.kv_cache_dtype,),
        quantizations=(args.quantization,),
        fewest_gpus_only=True,
    )
    return fewest_gpus(found.options)


def _fits_gpus(args: argparse.Namespace) -> int:
    """``fitgate gpus --fits MODEL``: the GPUs that run it, each with the fewest GPUs needed."""
    model = to_model_input(resolve(args.fits, source=args.source))
    best = _fit_search(args, model, gpu_catalog())
    w = _fit_workload(args, model)
    rows: list[dict[str, Any]] = [
        {
            "gpu": o.gpu.name,
            "gpus": o.gpus,
            "tensor_parallel_size": o.tensor_parallel_size,
            "pipeline_parallel_size": o.pipeline_parallel_size,
            "verdict": o.verdict.value,
            "headroom_bytes": o.headroom_bytes,
            "decode_tokens_per_s": round(o.performance.decode_tokens_per_s, 1),
        }
        for o in best.values()
    ]
    if args.output == "json":
        print(
            json.dumps(
                {"model": model.name, "concurrency": w.concurrency, "context_tokens": w.context_tokens, "gpus": rows},
                indent=2,
            )
        )
    else:
        print(f"{model.name} at {w.concurrency} x {w.context_tokens} tokens, at most {args.max_gpus} GPUs:")
        print(f"  {'GPU':14s} {'COUNT':>5s} {'TPxPP':>6s} {'VERDICT':8s} {'HEADROOM':>10s} {'EST TOK/S':>9s}")
        for r in rows:
            print(
                f"  {r['gpu']:14s} {r['gpus']:5d} {r['tensor_parallel_size']}x{r['pipeline_parallel_size']:<4d} "
                f"{r['verdict']:8s} {fmt_gib(r['headroom_bytes']):>10s} {r['decode_tokens_per_s']:9.0f}"
            )
        if not rows:
            print("  none")
    return EXIT_FITS if rows else EXIT_DOES_NOT_FIT


def _fits_on(args: argparse.Namespace) -> int:
    """``fitgate catalog list --fits-on GPU``: the catalog models that GPU runs, with how many of them."""
    gpu = lookup_gpu(args.fits_on, "--fits-on")
    rows = []
    for e in catalog_entries():
        model = to_model_input(resolve(e.repo_id, source="catalog"))
        try:
            best = _fit_search(args, model, [gpu]).get(gpu.name)
        except SizingError:
            continue  # e.g. --max-model-len longer than this model's context
        if best is not None:
            w = _fit_workload(args, model)
            rows.append(
                {
                    "repo_id": e.repo_id,
                    "gpus": best.gpus,
                    "tensor_parallel_size": best.tensor_parallel_size,
                    "pipeline_parallel_size": best.pipeline_parallel_size,
                    "verdict": best.verdict.value,
                    "context_tokens": w.context_tokens,
                    "decode_tokens_per_s": round(best.performance.decode_tokens_per_s, 1),
                }
            )
    if args.output == "json":
        print(json.dumps({"gpu": gpu.name, "concurrency": args.concurrency, "models": rows}, indent=2))
    else:
        print(f"models that run on {gpu.name} (at most {args.max_gpus}), {args.concurrency} concurrent request(s):")
        print(f"  {'MODEL':44s} {'COUNT':>5s} {'TPxPP':>6s} {'VERDICT':8s} {'CONTEXT':>8s}")
        for r in rows:
            tp_pp = f"{r['tensor_parallel_size']}x{r['pipeline_parallel_size']}"
            print(f"  {r['repo_id']:44s} {r['gpus']:5d} {tp_pp:>6s} {r['verdict']:8s} {r['context_tokens']:8d}")
    return EXIT_FITS if rows else EXIT_DOES_NOT_FIT


def cmd_compare(args: argparse.Namespace) -> int:
    """``fitgate compare --log FILE``: predicted against observed, term by term (docs/compare-json.md)."""
    from fitgate.observe import compare, read_log  # noqa: PLC0415 - keeps `fitgate plan` light

    log = read_log(args.log)
    named = lookup_gpu(args.gpu, "--gpu") if args.gpu else None
    if args.as_case:
        print(json.dumps(compare.case_document(log, args.log, named)))
        return EXIT_FITS
    ref = args.model or log.settings.model
    if not ref:
        raise SizingError("--model", None, "a model to plan (the log names none)")
    gpu, gpu_notes = compare.gpu_of(log, named)
    serving, notes = compare.serving_config(log, args.vllm_version)
    try:
        facts = resolve(ref, source=args.source)
    except CheckpointError as exc:
        if args.model:
            raise
        hint = f"{exc.problem[:240]}; pass --model with its directory or repo id"
        raise CheckpointError("model named in the log", ref, "", transient=exc.transient, problem=hint) from None
    model = to_model_input(facts)
    result = plan(model, gpu, serving)
    suggestions = suggest(model, gpu, serving, None, result)
    _, args_out, chosen = recommend(model, gpu, serving, None, result, suggestions)
    plan_doc = plan_document(facts, result, suggestions, args_out, chosen)
    doc = compare.compare_document(log, args.log, plan_doc, [*gpu_notes, *notes])
    print(json.dumps(doc, indent=2) if args.output == "json" else compare.render_compare_text(doc))
    return EXIT_FITS


def cmd_catalog(args: argparse.Namespace) -> int:
    """``fitgate catalog list|add``."""
    if args.action == "add":
        return _catalog_add(args)
    if args.fits_on:
        return _fits_on(args)
    entries = catalog_entries()
    if args.output == "json":
        print(
            json.dumps(
                [
                    {"repo_id": e.repo_id, "total_size": e.total_size, "basis": e.basis, "location": e.location}
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    print(f"{'MODEL':44s} {'WEIGHTS':>10s}  BASIS")
    for e in entries:
        size = fmt_gib(e.total_size) if e.total_size else "estimated"
        where = "" if e.location == BUILT_IN else f" [{e.location}]"
        print(f"{e.repo_id:44s} {size:>10s}  {e.basis}{where}")
    return 0


def _catalog_add(args: argparse.Namespace) -> int:
    """``fitgate catalog add MODEL``: resolve MODEL (headers only) and store it as a user catalog entry."""
    into = args.into or next(iter(user_catalog_dirs()), None)
    if not into:
        raise CheckpointError("--into", None, f"a user catalog directory (or set {CATALOG_PATH_ENV})")
    facts = resolve(args.model, args.revision, source=args.source)
    if facts.source == "catalog" and args.source != "catalog":
        raise CheckpointError(
            "model", args.model, "a checkpoint read from the Hub or a directory (this one came from the catalog)"
        )
    config_bytes = None
    if facts.source == "local":
        config_bytes = (Path(facts.origin) / "config.json").read_bytes()
        repo_id = args.repo_id
        if not repo_id:
            raise CheckpointError("--repo-id", None, "the Hugging Face repo id this directory holds (org/name)")
    else:
        repo_id = args.repo_id or facts.name
    repo_id, _ = parse_repo_ref(repo_id)
    built_in = find_builtin(repo_id)
    target, total = add_to_catalog(
        facts, repo_id, Path(into), config_bytes=config_bytes, force=args.force, flat=args.flat
    )
    if built_in is not None:
        print(f"note: this entry takes precedence over the built-in one ({built_in.basis})", file=sys.stderr)
    print(f"added {repo_id} to {target} ({fmt_gib(total) if total else 'weights estimated'})")
    if str(Path(into).expanduser()) not in {str(Path(d).expanduser()) for d in user_catalog_dirs()}:
        print(f"note: set {CATALOG_PATH_ENV}={into} for fitgate to use it", file=sys.stderr)
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    """``fitgate gpus`` (``--fits MODEL``: only those that run it)."""
    if args.fits:
        return _fits_gpus(args)
    models = gpu_catalog()
    if args.output == "json":
        print(json.dumps([m.__dict__ for m in models], indent=2))
        return 0
    print(f"{'GPU':14s} {'MEMORY':>11s} {'BW GB/s':>8s} {'BF16 TF':>8s}  ALIASES")
    for m in models:
        print(
            f"{m.name:14s} {fmt_gib(m.memory_bytes):>11s} {m.memory_bandwidth_gbps:8.0f} {m.bf16_dense_tflops:8.0f}  "
            + ", ".join(m.aliases[:3])
        )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``fitgate check FILE...``: the admission decision, offline."""
    from fitgate.operator.offline import check_files  # noqa: PLC0415 - keeps `fitgate plan` light

    results = check_files(args.files, gpu_name=args.gpu, gpus_per_node=args.gpus_per_node)
    if args.output == "json":
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        for r in results:
            print(r.line())
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
    if config.gpu_hour_prices:  # names GPUs of the catalog: checked here, before the operator starts
        try:
            parse_gpu_prices(config.gpu_hour_prices)
        except SizingError as exc:
            raise SettingsError(
                "FITGATE_GPU_HOUR_PRICES", config.gpu_hour_prices, f"one price or GPU=USD items ({exc})"
            ) from None
    from fitgate.operator.run import run_operator  # noqa: PLC0415 - imports kopf only for this command

    return run_operator(
        dataclasses.replace(settings, operator=config),
        namespaces=tuple(args.namespace),
        liveness=args.liveness,
        verbose=args.verbose,
    )


def _debug() -> bool:
    try:
        return load().debug
    except SettingsError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fitgate`` console script."""
    args = build_parser().parse_args(argv)
    handlers = {
        "plan": cmd_plan,
        "recommend": cmd_recommend,
        "compare": cmd_compare,
        "catalog": cmd_catalog,
        "gpus": cmd_gpus,
        "check": cmd_check,
        "operator": cmd_operator,
    }
    try:
        configure_budgets(load().budgets)  # a bad FITGATE_*/HF_* value stops any command at once, in one line
        return handlers[args.command](args)
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
        return 70


if __name__ == "__main__":
    raise SystemExit(main())
