"""The ``fitgate`` command line: ``plan``, ``recommend``, ``compare``, ``check``, ``catalog``, ``gpus``, ``operator``.

Exit codes: 0 the deployment fits (Fits or Tight), 1 it does not fit (DoesNotFit), 2 bad input
(one line on stderr naming the field, the value and what is accepted; never a traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
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
from fitgate.sizing.capacity import check_targets
from fitgate.sizing.cost import DEFAULT_UTILIZATION
from fitgate.sizing.dtypes import KV_CACHE_DTYPES
from fitgate.sizing.multimodal import parse_limit_mm
from fitgate.sizing.offload import parse_kv_transfer_config
from fitgate.sizing.parallel import parse_eplb_config
from fitgate.sizing.performance import speed_load
from fitgate.sizing.prices import price_table
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


#: ``k``/``m``/``g``/``t`` multiply by 1000^n, ``K``/``M``/``G``/``T`` by 1024^n (no decimals with those), as vLLM's
#: ``human_readable_int`` (vllm/utils/argparse_utils.py 0.33.0 L30-74), which vLLM's engine args use for
#: ``--max-model-len`` (with ``auto`` / ``-1``: the model's), ``--max-num-batched-tokens`` and
#: ``--kv-cache-memory-bytes`` (vllm/engine/arg_utils.py 0.33.0 L396-409).
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_HUMAN_MULTIPLIERS = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _human_int(text: str) -> int:
    """An integer as vLLM's ``human_readable_int`` reads it: ``32768``, ``32k`` (32,000), ``32K`` (32,768)."""
    value = text.strip()
    match = _HUMAN_INT.fullmatch(value[:64])
    if match is None:
        return _int(value)
    number, suffix = match.groups()
    if suffix.isupper() and "." in number:  # vLLM: "Decimals are not allowed with binary suffixes"
        raise argparse.ArgumentTypeError(
            f"{text!r}: decimals are not allowed with the binary suffix {suffix} "
            f"(did you mean {number}{suffix.lower()}?)"
        )
    return int(float(number) * _HUMAN_MULTIPLIERS[suffix])


def _max_model_len(text: str) -> int | None:
    """``--max-model-len``: :func:`_human_int`, or ``auto`` / ``-1`` for the model's own length, as in vLLM."""
    if text.strip().lower() in ("auto", "-1"):
        return None
    return _human_int(text)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _dp_text(s: dict[str, Any]) -> str:
    """`` x DP 8 (EP 8)`` for the text header, empty for one engine rank."""
    dp, ep = s.get("data_parallel_size", 1), s.get("expert_parallel_size", 1)
    dcp = s.get("decode_context_parallel_size", 1)
    return (f" x DP {dp}" if dp > 1 else "") + (f" (EP {ep})" if ep > 1 else "") + (f", DCP {dcp}" if dcp > 1 else "")


def _parallel_flags(p: argparse.ArgumentParser) -> None:
    """VLLM's data / expert / decode-context parallelism flags (docs/parallelism.md)."""
    g = p.add_argument_group("data and expert parallelism (docs/parallelism.md)")
    g.add_argument("--data-parallel-size", "-dp", type=_int, default=1, help="engine ranks of the deployment")
    g.add_argument("--data-parallel-size-local", "-dpl", type=_int, help="engine ranks per node (default: all)")
    g.add_argument(
        "--enable-expert-parallel", "-ep", action="store_true", help="spread whole experts over TP x DP GPUs"
    )
    g.add_argument("--enable-eplb", action="store_true", help="expert-parallel load balancing")
    g.add_argument("--eplb-config", help="vLLM's --eplb-config JSON, e.g. '{\"num_redundant_experts\": 32}'")
    g.add_argument("--num-redundant-experts", type=_int, help="the older spelling of eplb_config.num_redundant_experts")
    g.add_argument("--all2all-backend", help="vLLM's MoE all2all backend (default: allgather_reducescatter)")
    g.add_argument(
        "--decode-context-parallel-size", "-dcp", type=_int, default=1, help="ranks a request's KV is split over"
    )


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
    _parallel_flags(p)
    p.add_argument(
        "--max-model-len",
        type=_max_model_len,
        help="default (or auto): the model's max_position_embeddings; 32k = 32000, 32K = 32768, as in vLLM",
    )
    p.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    p.add_argument("--dtype", default="auto", help="auto, bfloat16, float16, float32")
    p.add_argument("--quantization", help="runtime quantization of an unquantized checkpoint: fp8, bitsandbytes")
    p.add_argument(
        "--gpu-memory-utilization", type=_float, default=None, help="default: the release's (0.92 from vLLM 0.20)"
    )
    p.add_argument("--max-num-seqs", type=_int)
    p.add_argument("--max-num-batched-tokens", type=_human_int)
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
        type=_human_int,
        help="vLLM's --kv-cache-memory-bytes: the KV pool per GPU in bytes (gpu_memory_utilization is then ignored)",
    )
    p.add_argument(
        "--enable-extensible-kv-cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM 0.34's extensible KV cache, sized after warm-up (default: on from 0.34 unless "
        "--kv-cache-memory-bytes is given; ignored before 0.34)",
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
    _issue20_flags(p)
    p.add_argument("--concurrency", type=_int, help="concurrent requests the service must hold")
    p.add_argument(
        "--context-tokens",
        type=_human_int,
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
        "--context-tokens",
        type=_human_int,
        required=True,
        help="tokens (prompt + output) of each request (contextTokens)",
    )
    r.add_argument("--max-model-len", type=_max_model_len, help="default: --context-tokens (32k, 32K as in vLLM)")
    r.add_argument("--gpus", help="GPU products to consider, comma-separated (default: the whole catalog)")
    r.add_argument("--max-gpus", type=_int, default=16, help="most GPUs per replica (default 16)")
    r.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")
    r.add_argument("--limit", type=_int, default=15, help="options shown in text output (JSON lists all)")
    # latency targets (issue 24, docs/performance.md): replicas per option to meet them
    r.add_argument("--ttft-ms", type=_float, help="mean time to first token each replica must stay within")
    r.add_argument("--tpot-ms", type=_float, help="mean time per output token each replica must stay within")
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


# --- LoRA, weight offload, KV connectors, multimodal (issue 20; docs/lora-offload-multimodal.md) ---


def _issue20_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LoRA, weight offload, KV connectors, multimodal (vLLM's flags of the same names)")
    g.add_argument("--enable-lora", action="store_true", help="reserve GPU slots for LoRA adapters")
    g.add_argument("--max-loras", type=_int, help="adapters in one batch, each with its GPU slot (default 1)")
    g.add_argument("--max-lora-rank", type=_int, help="rank every slot is sized for (default 16)")
    g.add_argument("--max-cpu-loras", type=_int, help="adapters cached in host memory (default --max-loras)")
    g.add_argument("--fully-sharded-loras", action="store_true", help="shard the LoRA A/B buffers with TP too")
    g.add_argument("--lora-dtype", default="auto", help="auto (the model dtype), float16 or bfloat16")
    g.add_argument("--lora-target-modules", nargs="+", help="only these modules get slots (default: every one)")
    g.add_argument("--cpu-offload-gb", type=_float, default=0.0, help="GiB of weights per GPU held in host memory")
    g.add_argument("--kv-offloading-size", type=_float, help="GiB of host KV offload buffer (all TP ranks)")
    g.add_argument("--kv-offloading-backend", default="native", help="native or lmcache")
    g.add_argument("--kv-transfer-config", help='vLLM\'s JSON, e.g. \'{"kv_connector": "NixlConnector", ...}\'')
    g.add_argument("--limit-mm-per-prompt", help='vLLM\'s JSON, e.g. \'{"image": 2, "video": 0}\'')
    g.add_argument("--mm-encoder-tp-mode", default="weights", help="weights or data")
    g.add_argument("--mm-processor-cache-gb", type=_float, help="host multimodal processor cache (default 4)")


def _gib_flag(value: float | None, flag: str) -> int | None:
    if value is None:
        return None
    if not 0 <= value <= 1 << 20:
        raise SizingError(flag, value, "a size in GiB from 0 to 1048576")
    return int(value * GiB)


def _issue20_serving(args: argparse.Namespace) -> dict[str, Any]:
    """The ServingConfig fields of the issue-20 flags (absent on subcommands without them)."""
    if not hasattr(args, "enable_lora"):
        return {}
    connector = role = device = None
    if args.kv_transfer_config:
        connector, role, device = parse_kv_transfer_config(args.kv_transfer_config)
    return {
        "enable_lora": args.enable_lora,
        "max_loras": args.max_loras,
        "max_lora_rank": args.max_lora_rank,
        "max_cpu_loras": args.max_cpu_loras,
        "fully_sharded_loras": args.fully_sharded_loras,
        "lora_dtype": args.lora_dtype,
        "lora_target_modules": tuple(args.lora_target_modules) if args.lora_target_modules else None,
        "cpu_offload_bytes": _gib_flag(args.cpu_offload_gb, "--cpu-offload-gb") or 0,
        "kv_offloading_bytes": _gib_flag(args.kv_offloading_size, "--kv-offloading-size"),
        "kv_offloading_backend": args.kv_offloading_backend,
        "kv_connector": connector,
        "kv_role": role,
        "kv_buffer_device": device,
        "limit_mm_per_prompt": parse_limit_mm(args.limit_mm_per_prompt) if args.limit_mm_per_prompt else None,
        "mm_encoder_tp_mode": args.mm_encoder_tp_mode,
        "mm_processor_cache_bytes": _gib_flag(args.mm_processor_cache_gb, "--mm-processor-cache-gb"),
    }


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
    p.add_argument(
        "--no-list-prices",
        action="store_true",
        help="do not price GPUs from the dated list-price table when --gpu-hour-price is not given",
    )
    # speed estimate (issue 24, docs/performance.md): the request shape and the load
    p.add_argument("--input-tokens", type=_int, help="prompt tokens per request (ISL), with --output-tokens")
    p.add_argument("--output-tokens", type=_int, help="generated tokens per request (OSL), with --input-tokens")
    p.add_argument("--request-rate", type=_float, help="requests/s arriving (open loop) instead of --concurrency")


def _fit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=_int, default=1, help="concurrent requests (default 1)")
    p.add_argument(
        "--context-tokens",
        type=_human_int,
        help="tokens (prompt + output) of each request, as workload.contextTokens (default: --max-model-len, "
        "else the model's)",
    )
    p.add_argument(
        "--max-model-len", type=_max_model_len, help="default: --context-tokens, else the model's (32k, 32K as in vLLM)"
    )
    p.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    p.add_argument("--quantization", help="runtime quantization of an unquantized checkpoint: fp8, bitsandbytes")
    p.add_argument("--max-gpus", type=_int, default=8, help="most GPUs per replica (default 8)")
    p.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")


# --------------------------------------------------------------------------------------------


def _gpu(args: argparse.Namespace) -> GpuModel:
    if not args.gpu and not args.gpu_memory:
        raise SizingError(
            "--gpu",
            None,
            "a GPU from `fitgate gpus` (e.g. --gpu H100), or --gpu-memory with the device total CUDA reports "
            "(e.g. --gpu-memory 79.19GiB)",
        )
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
        extensible_kv_cache=getattr(args, "enable_extensible_kv_cache", None),
        runner=getattr(args, "runner", "generate"),
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        enforce_eager=args.enforce_eager,
        vllm_version=args.vllm_version,
        offline=args.offline_llm,
        **_parallel_serving(args),
        **_issue20_serving(args),
    )


def _parallel_serving(args: argparse.Namespace) -> dict[str, Any]:
    """ServingConfig's data / expert / decode-context fields from the plan flags."""
    redundant = getattr(args, "num_redundant_experts", None)
    if getattr(args, "eplb_config", None):
        redundant = parse_eplb_config(args.eplb_config)
    return {
        "data_parallel_size": getattr(args, "data_parallel_size", 1),
        "data_parallel_size_local": getattr(args, "data_parallel_size_local", None),
        "enable_expert_parallel": getattr(args, "enable_expert_parallel", False),
        "enable_eplb": getattr(args, "enable_eplb", False),
        "num_redundant_experts": redundant or 0,
        "all2all_backend": getattr(args, "all2all_backend", None),
        "decode_context_parallel_size": getattr(args, "decode_context_parallel_size", 1),
    }


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
            "count": rs.tensor_parallel_size * rs.pipeline_parallel_size * rs.parallel.data_parallel_size,
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
            # issue 20: LoRA slots (inside weights_bytes) and weights offloaded to the host (outside it)
            "lora_bytes": g.lora_bytes,
            "cpu_offload_bytes": g.cpu_offload_bytes,
        },
        "host_memory": None
        if result.host is None
        else {
            "total_bytes": result.host.total_bytes,
            "weights_offload_bytes": result.host.weights_offload_bytes,
            "kv_offload_bytes": result.host.kv_offload_bytes,
            "kv_transfer_buffer_bytes": result.host.kv_transfer_buffer_bytes,
            "mm_processor_cache_bytes": result.host.mm_processor_cache_bytes,
            "lora_cpu_cache_bytes": result.host.lora_cpu_cache_bytes,
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
            # data / expert / decode-context parallelism (docs/parallelism.md)
            "data_parallel_size": rs.parallel.data_parallel_size,
            "data_parallel_size_local": rs.parallel.data_parallel_size_local,
            "enable_expert_parallel": rs.parallel.expert_parallel,
            "expert_parallel_size": rs.parallel.ep_size,
            "num_redundant_experts": rs.parallel.redundant_experts,
            "all2all_backend": rs.parallel.all2all_backend,
            "decode_context_parallel_size": rs.parallel.decode_context_parallel_size,
            "lora": None
            if rs.lora is None
            else {
                "max_loras": rs.lora.max_loras,
                "max_lora_rank": rs.lora.max_lora_rank,
                "max_cpu_loras": rs.lora.max_cpu_loras,
                "fully_sharded_loras": rs.lora.fully_sharded,
            },
            "cpu_offload_bytes": rs.cpu_offload_bytes,
            "kv_connector": rs.kv_connector,
            "kv_role": rs.kv_role,
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
                "weights_bytes": r.loaded_weights_bytes,  # with LoRA slots, without offloaded weights
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
        # speed estimate (issue 24): the load, TPOT and output rate, and the measured error band
        "input_tokens": perf.input_tokens,
        "output_tokens": perf.output_tokens,
        "request_rate": perf.request_rate,
        "saturated": perf.saturated,
        "tpot_seconds": round(perf.tpot_seconds, 5),
        "output_tokens_per_s": round(perf.output_tokens_per_s, 1),
        "requests_per_s": round(perf.requests_per_s, 3),
        "decode_tokens_per_s_range": [round(v, 1) for v in perf.decode_range_tokens_per_s],
        "tpot_seconds_range": [round(v, 5) for v in perf.tpot_range_seconds],
        "ttft_seconds_range": [round(v, 4) for v in perf.ttft_range_seconds] if not perf.saturated else None,
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
        # speed estimate (issue 24): per request and per 1M input + output tokens; where the price is from
        "usd_per_request": r(cost.usd_per_request, 6),
        "usd_per_million_tokens": r(cost.usd_per_million_tokens, 4),
        "price_basis": cost.price_basis or None,
    }


def _bar(n_bytes: int, capacity: int, width: int = 40) -> str:
    filled = max(0, min(width, round(width * n_bytes / capacity))) if capacity else 0
    return "█" * filled + "·" * (width - filled)


#: Suggested changes that are not vLLM flags, as the ``fitgate plan`` flag that makes them (the JSON contract
#: keeps the sizing core's names, docs/plan-json.md).
_CLI_FLAGS = {"workload.concurrentRequests": "--concurrency"}


def _flags(changes: dict[str, str]) -> str:
    return " ".join(f"{_CLI_FLAGS.get(k, k)} {v}" for k, v in changes.items())


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
            lines.append(f"  break-even {cost['breakeven_tokens_per_day'] / 1e6:.0f}M output tokens/day; {where}")
    return lines


def _prices(args: argparse.Namespace) -> GpuPrices | None:
    return parse_gpu_prices(args.gpu_hour_price) if args.gpu_hour_price else None


def _list_prices(args: argparse.Namespace) -> GpuPrices | None:
    """The dated list-price table (docs/performance.md) when no ``--gpu-hour-price`` overrides it."""
    if args.gpu_hour_price or getattr(args, "no_list_prices", False):
        return None
    return price_table().default_prices()


def _load_costs(perf: Performance) -> dict[str, float]:
    """The per-request and per-token inputs of :func:`replica_cost` when the request shape is known."""
    if perf.input_tokens is None or perf.output_tokens is None or perf.requests_per_s <= 0:
        return {}
    return {
        "requests_per_s": perf.requests_per_s,
        "tokens_per_s": perf.requests_per_s * (perf.input_tokens + perf.output_tokens),
    }


def _economics(
    args: argparse.Namespace, model: Any, gpu: GpuModel, result: Plan
) -> tuple[Performance | None, Cost | None]:
    """The estimate of a plan that can start, and its cost when ``--gpu-hour-price`` prices its GPU."""
    utilization = check_utilization(args.utilization)
    prices = _prices(args)
    listed = _list_prices(args)
    listed_price = listed.of(gpu) if listed is not None else None
    if args.api_price_per_million is not None and prices is None and listed_price is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    if result.verdict is Verdict.DOES_NOT_FIT or not (gpu.memory_bandwidth_gbps and gpu.bf16_dense_tflops):
        return None, None  # nothing to estimate, or a --gpu-memory size without speeds
    load = speed_load(args.input_tokens, args.output_tokens, args.request_rate, result.serving.max_model_len)
    perf = estimate(model, result, load=load)
    price = prices.of(gpu) if prices is not None else None
    if prices is not None and price is None:
        raise SizingError("--gpu-hour-price", args.gpu_hour_price, f"a price for {gpu.name} (or one for every GPU)")
    basis = "--gpu-hour-price"
    if price is None and listed_price is not None:  # the dated list-price table (issue 24)
        price, basis = listed_price, price_table().basis(gpu.name)
    if price is None:
        return perf, None
    gpus = result.serving.tensor_parallel_size * result.serving.pipeline_parallel_size
    return perf, replica_cost(
        price, gpus, perf.decode_tokens_per_s, utilization, args.api_price_per_million,
        price_basis=basis, **_load_costs(perf),
    )  # fmt: skip


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
        "data_parallel_size": o.data_parallel_size,  # > 1: with --enable-expert-parallel (docs/parallelism.md)
        "enable_expert_parallel": o.expert_parallel,
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
        # latency targets (issue 24): replicas, and one replica's TPOT at its share of the load
        "replicas": o.replicas,
        "total_gpus": o.total_gpus,
        "usd_per_hour_all_replicas": None if c is None else round(c.usd_per_hour * o.replicas, 4),
        "tpot_seconds": round(o.performance.tpot_seconds, 5),
    }


def _listed_gpus(text: str | None, listed: GpuPrices) -> tuple[list[GpuModel], GpuPrices | None, str]:
    """``--gpus`` (else the catalog) priced from the list table: the listed ones, or all at equal prices.

    Unlisted products are left out when some are listed (their cost cannot be ranked with the rest);
    when none is, equal prices are assumed and the ranking is by GPU-hours.
    """
    named = [lookup_gpu(n.strip(), "--gpus") for n in text.split(",") if n.strip()] if text else list(gpu_catalog())
    priced = [g for g in named if listed.of(g) is not None]
    table = price_table()
    if not priced:
        return named, None, "no list price for these GPUs: equal prices assumed (ranked by GPU-hours)"
    left_out = sorted({g.name for g in named if listed.of(g) is None})
    note = f"median on-demand list prices of the major clouds as of {table.as_of} (data/gpu_prices.json)"
    if left_out:
        note += f"; no list price, left out (give --gpu-hour-price to include): {', '.join(left_out)}"
    return priced, listed, note


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
    gpu_list, price_note = None, None
    if prices is None and (listed := _list_prices(args)) is not None:
        gpu_list, prices, price_note = _listed_gpus(args.gpus, listed)
    if args.api_price_per_million is not None and prices is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    longest = args.max_model_len or model.arch.derived_max_model_len
    if args.context_tokens > longest:
        raise SizingError("--context-tokens", args.context_tokens, f"at most {longest} (the max_model_len)")
    load = speed_load(args.input_tokens, args.output_tokens, args.request_rate, args.context_tokens)
    targets = check_targets(args.ttft_ms, args.tpot_ms, load)
    found = search(
        model,
        Workload(args.concurrency, args.context_tokens),
        gpu_list if gpu_list is not None else _gpu_list(args.gpus, prices),
        max_model_len=args.max_model_len,
        max_gpus=args.max_gpus,
        prices=prices,
        utilization=utilization,
        api_usd_per_million=args.api_price_per_million,
        vllm_version=args.vllm_version,
        speed_load=load,
        targets=targets,
    )
    doc = {
        "model": model.name,
        "workload": {"concurrency": args.concurrency, "context_tokens": args.context_tokens},
        "max_model_len": args.max_model_len or args.context_tokens,
        "vllm_version": args.vllm_version,
        "utilization": utilization,
        "ranked_by": (
            ("usd_per_hour_all_replicas" if prices else "gpu_hours_per_hour_all_replicas")
            if targets
            else ("usd_per_million_output_tokens" if prices else "gpu_hours_per_million_output_tokens")
        ),
        "targets": None
        if targets is None
        else {"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms, "request_rate": args.request_rate},
        "options": [option_document(o) for o in found.options],
        "prices": price_note,
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
    if price_note:
        print(f"  prices: {price_note}")
    if not found.options:
        print(f"  none: {found.reason}")
        return EXIT_DOES_NOT_FIT
    unit = "$/1M out" if prices else "GPU-h/1M"
    print(
        f"  {'GPU':13s} {'TPxPP':>6s} {'KV':5s} {'WEIGHTS':7s} {'VERDICT':8s} {'HEADROOM':>10s} {'TOK/S':>7s} "
        f"{unit:>9s}" + (f" {'REPLICAS':>8s} {'TTFT ms':>8s} {'TPOT ms':>8s}" if targets else "")
    )
    for o in found.options[: max(1, args.limit)]:
        d = option_document(o)
        per = d["usd_per_million_output_tokens"] if prices else d["gpu_hours_per_million_output_tokens"]
        print(
            f"  {o.gpu.name:13s} {_shape(o):>6s} {o.kv_cache_dtype:5s} "
            f"{o.quantization or 'as-is':7s} {o.verdict.value:8s} {fmt_gib(o.headroom_bytes):>10s} "
            f"{o.performance.decode_tokens_per_s:7.0f} {per:9.2f}"
            + (
                f" {o.replicas:8d} {o.performance.ttft_seconds * 1000:8.0f} {o.performance.tpot_seconds * 1000:8.1f}"
                if targets
                else ""
            )
        )
    if len(found.options) > args.limit:
        print(f"  ... {len(found.options) - args.limit} more (--limit, or --output json for all)")
    print(f"  {doc['basis']}")
    return EXIT_FITS


def _shape(o: Option) -> str:
    """``8x1`` (TP x PP), or ``1x8EP`` (TP x DP with expert parallelism)."""
    if o.expert_parallel:
        return f"{o.tensor_parallel_size}x{o.data_parallel_size}EP"
    return f"{o.tensor_parallel_size}x{o.pipeline_parallel_size}"


def _fit_workload(args: argparse.Namespace, model: Any) -> Workload:
    context = args.context_tokens or args.max_model_len or model.arch.derived_max_model_len
    return Workload(args.concurrency, context)


def _fit_search(args: argparse.Namespace, model: Any, gpus: Sequence[GpuModel]) -> tuple[dict[str, Option], str]:
    """Per GPU product the fewest GPUs that hold the workload, and why none does when none does."""
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
    return fewest_gpus(found.options), found.reason


def _fits_gpus(args: argparse.Namespace) -> int:
    """``fitgate gpus --fits MODEL``: the GPUs that run it, each with the fewest GPUs needed."""
    model = to_model_input(resolve(args.fits, source=args.source))
    best, reason = _fit_search(args, model, gpu_catalog())
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
            print(f"  none: {reason}")
    return EXIT_FITS if rows else EXIT_DOES_NOT_FIT


#: A reason in ``catalog list --fits-on``'s "not listed" lines is cut to this many characters (JSON has it whole).
_MAX_REASON_CHARS = 160


def _fits_on(args: argparse.Namespace) -> int:
    """``fitgate catalog list --fits-on GPU``: the catalog models that GPU runs, with how many of them."""
    gpu = lookup_gpu(args.fits_on, "--fits-on")
    rows = []
    left_out: list[dict[str, str]] = []  # every catalog model not listed, with why
    for e in catalog_entries():
        try:
            model = to_model_input(resolve(e.repo_id, source="catalog"))
            found, reason = _fit_search(args, model, [gpu])
        except (SizingError, CheckpointError) as exc:  # e.g. --max-model-len longer than this model's context
            left_out.append({"repo_id": e.repo_id, "reason": str(exc)})
            continue
        best = found.get(gpu.name)
        if best is None:
            why = (reason.partition("; ")[2] or reason).removeprefix("the largest tried: ")  # the largest set's misfit
            if why == "its weights alone exceed every set":
                stored = fmt_gib(model.inventory.stored_bytes)
                why = f"its weights alone ({stored} as stored) exceed {args.max_gpus} x {gpu.name}"
            left_out.append({"repo_id": e.repo_id, "reason": why})
        else:
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
        doc = {"gpu": gpu.name, "concurrency": args.concurrency, "models": rows, "not_listed": left_out}
        print(json.dumps(doc, indent=2))
    else:
        print(f"models that run on {gpu.name} (at most {args.max_gpus}), {args.concurrency} concurrent request(s):")
        print(f"  {'MODEL':44s} {'COUNT':>5s} {'TPxPP':>6s} {'VERDICT':8s} {'CONTEXT':>8s}")
        for r in rows:
            tp_pp = f"{r['tensor_parallel_size']}x{r['pipeline_parallel_size']}"
            print(f"  {r['repo_id']:44s} {r['gpus']:5d} {tp_pp:>6s} {r['verdict']:8s} {r['context_tokens']:8d}")
        if left_out:
            print(f"not listed ({len(left_out)} of {len(rows) + len(left_out)}):")
            for d in left_out:
                print(f"  {d['repo_id']:44s} {d['reason'][:_MAX_REASON_CHARS]}")
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
    try:
        result = plan(model, gpu, serving)
    except SizingError as exc:  # settings vLLM refuses too (TP 5 of 8 KV heads): compared, not an error
        doc = compare.refused_document(log, args.log, gpu, serving, str(exc), [*gpu_notes, *notes])
        print(json.dumps(doc, indent=2) if args.output == "json" else compare.render_compare_text(doc))
        return EXIT_FITS
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
        raise CheckpointError(
            "--into", None, f"the user catalog directory to write the entry to (or set {CATALOG_PATH_ENV})"
        )
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
            raise CheckpointError(
                "--repo-id",
                None,
                f"the Hugging Face repo id {args.model} holds (org/name): a directory does not say which checkpoint "
                "it is, and the entry answers to that id",
            )
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
    from fitgate.operator.decision.offline import check_files  # noqa: PLC0415 - keeps `fitgate plan` light

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
    from fitgate.operator.runtime.run import run_operator  # noqa: PLC0415 - imports kopf only for this command

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


#: The exit status of a command whose reader went away (``fitgate catalog list | head -2``): what a shell
#: reports for a Unix tool ended by SIGPIPE, 128 + 13.
EXIT_CLOSED_PIPE = 141


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
        return 70


if __name__ == "__main__":
    raise SystemExit(main())
