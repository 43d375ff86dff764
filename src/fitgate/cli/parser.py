"""The argument parser of every ``fitgate`` subcommand, and the flag types vLLM's own parser has.

Each subcommand's flags are vLLM's spellings where vLLM has the flag (``--max-model-len``, ``-tp``), read as
vLLM reads them (``32k``, ``32K``, ``auto``); a usage error is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import NoReturn

from fitgate import __version__
from fitgate.checkpoints.catalog import CATALOG_PATH_ENV
from fitgate.checkpoints.resolve import SOURCES
from fitgate.cli.exits import EXIT_USAGE
from fitgate.sizing import DEFAULT_VLLM_VERSION
from fitgate.sizing.cost import DEFAULT_UTILIZATION
from fitgate.sizing.dtypes import KV_CACHE_DTYPES
from fitgate.sizing.hf_config import MAX_ROPE_THETA, OVERRIDES_EXPECTED, parse_hf_overrides


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


def _count(text: str) -> int:
    """A count of at least 1 (``--limit``: hunt91 O6, 0 and -5 were taken and the "more" line miscounted)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of at least 1")
    return value


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


def _rope_theta(text: str) -> float:
    """``--rope-theta``: a finite number above 0, at most :data:`~fitgate.sizing.hf_config.MAX_ROPE_THETA`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_ROPE_THETA):
        raise argparse.ArgumentTypeError(f"expected a number above 0, at most {MAX_ROPE_THETA:g}")
    return value


def _hf_overrides(text: str) -> dict[str, object]:
    """``--hf-overrides``: :func:`~fitgate.sizing.hf_config.parse_hf_overrides`, a usage error where it is None."""
    value = parse_hf_overrides(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected {OVERRIDES_EXPECTED}")
    return value


def _optimization_level(text: str) -> str:
    """``-O``: a level ``0``-``3`` (vLLM 0.12+), or the ``--compilation-config`` it aliased up to 0.11.

    A JSON object or ``.key=value`` (``-O.cudagraph_mode=FULL``; engine/arg_utils.py 0.11.0
    ``add_argument("--compilation-config", "-O")``, hunt94 F9), read as that flag.
    """
    if text.strip() in ("0", "1", "2", "3") or text.lstrip().startswith(("{", ".")):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text[:80]!r} (choose from '0', '1', '2', '3'; up to vLLM 0.11 a compilation-config JSON)"
    )


def _max_model_len_or_auto(text: str) -> int | str:
    """``plan --max-model-len``: :func:`_human_int`, or ``auto`` / ``-1`` (the longest that fits, vLLM 0.14+)."""
    if text.strip().lower() in ("auto", "-1"):
        return "auto"
    return _human_int(text)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


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
    g.add_argument(
        "--pp-layer-partition",
        metavar="N,N,...",
        help="VLLM_PP_LAYER_PARTITION: the layers of each pipeline stage (default: vLLM's even split)",
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
        type=_max_model_len_or_auto,
        help="default: the model's max_position_embeddings; auto (or -1): the longest that fits, as vLLM 0.14+; "
        "32k = 32000, 32K = 32768, as in vLLM",
    )
    p.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    p.add_argument(
        "--mamba-ssm-cache-dtype",
        choices=("auto", "float32", "float16", "bfloat16"),
        default=None,
        help="the Mamba / gated-delta-net recurrent state's dtype (default auto: the model's, or what the "
        "config sets for NemotronH and Qwen3.5, as vLLM does)",
    )
    p.add_argument("--dtype", default="auto", help="auto, bfloat16, float16, float32")
    p.add_argument(
        "--quantization",
        "-q",  # vLLM's short form (engine/arg_utils.py 0.34.0 L999; hunt107 F1: taken as not modelled, so denied)
        help="runtime quantization of an unquantized checkpoint: fp8, fp8_per_tensor, fp8_per_block, fp8_per_channel, "
        "mxfp8, mxfp4 (vLLM 0.30+), int8_per_channel_weight_only, nvfp4_per_token, experts_int8, bitsandbytes",
    )
    p.add_argument(
        "--gpu-memory-utilization", type=_float, default=None, help="default: the release's (0.92 from vLLM 0.20)"
    )
    p.add_argument("--max-num-seqs", type=_int)
    p.add_argument("--max-num-batched-tokens", type=_human_int)
    p.add_argument("--block-size", type=_int)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM's flag, taken so a command line plans as written; it does not change the memory plan",
    )
    p.add_argument(
        "--compilation-config",
        "-cc",
        help="vLLM's JSON; its cudagraph_mode, cudagraph_capture_sizes and max_cudagraph_capture_size are sized, e.g. "
        '\'{"cudagraph_mode": "FULL_DECODE_ONLY"}\'',
    )
    p.add_argument("--cudagraph-capture-sizes", type=_int, nargs="+", help="the batch sizes vLLM captures")
    p.add_argument(
        "--allow-long-max-model-len",
        action="store_true",
        help="as VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a --max-model-len past the model's derived length is sized",
    )
    p.add_argument(
        "--rope-scaling",
        type=_hf_overrides,
        help="vLLM up to 0.11: the rope_scaling JSON it merges into --hf-overrides (gone in 0.12)",
    )
    p.add_argument(
        "--rope-theta", type=_rope_theta, help="vLLM up to 0.11: the rope_theta it merges into --hf-overrides"
    )
    p.add_argument(
        "--hf-overrides",
        type=_hf_overrides,
        help='vLLM\'s JSON of config.json keys to replace, e.g. \'{"rope_scaling": {"rope_type": "yarn", '
        '"factor": 4.0, "original_max_position_embeddings": 32768}}\'',
    )
    p.add_argument(
        "--performance-mode",
        choices=("balanced", "interactivity", "throughput"),
        help="vLLM 0.17+: throughput doubles the default batch limits, interactivity captures graphs 1-32",
    )
    p.add_argument(
        "--cudagraph-memory-estimate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1/0 (vLLM 0.18+; default: the release's, on from 0.20)",
    )
    p.add_argument("--max-cudagraph-capture-size", type=_int, help="the largest captured batch (default 2 x seqs)")
    p.add_argument(
        "--optimization-level",
        "-O",
        type=_optimization_level,
        help="vLLM's -O<n>: -O0 captures no CUDA graphs (up to 0.11: the --compilation-config JSON it was an alias of)",
    )
    p.add_argument(
        "--use-v1",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="VLLM_USE_V1=1/0 (vLLM 0.8-0.10): --no-use-v1 sizes the V0 engine; default: unset, V1 except where vLLM "
        "falls back to V0 (a T4 or V100 before 0.10.2, an fp8 KV cache off Hopper)",
    )
    p.add_argument(
        "--flashinfer-sampler",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the V1 sampler on FlashInfer (VLLM_USE_FLASHINFER_SAMPLER with FlashInfer installed) or, with --no-, "
        "PyTorch's sort; default: the release's own with FlashInfer installed, as in vLLM's image (on in 0.8-0.11.0)",
    )
    p.add_argument(
        "--mxfp4-backend",
        choices=("marlin", "triton"),
        default=None,
        help="gpt-oss's MXFP4 MoE backend on Hopper (VLLM_MXFP4_USE_MARLIN, or triton_kernels installed before "
        "vLLM 0.12); default: the one vLLM's image picks (Marlin before 0.12.0, Triton from it)",
    )
    p.add_argument(
        "--runner",
        choices=("auto", "generate", "pooling"),
        default="auto",
        help="vLLM's --runner (pooling: embeddings; auto, vLLM's default: pooling for a checkpoint with a Sentence "
        "Transformers pooling module, modules.json, else generate)",
    )
    p.add_argument("--task", help="vLLM's --task (to 0.10): embed, score, classify or reward serve as --runner pooling")
    p.add_argument("--convert", help="vLLM's --convert (0.10.2+): embed, classify or reward serve as --runner pooling")
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
        "--enable-chunked-prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM's chunked prefill (default on); --no-enable-chunked-prefill makes the step budget at least "
        "--max-model-len unless --max-num-batched-tokens is given",
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
        "--replicas",
        type=_int,
        default=1,
        help="replicas the --concurrency and --request-rate are split over, each holding its share in its own KV "
        "pool (default 1)",
    )
    p.add_argument(
        "--context-tokens",
        type=_human_int,
        help="tokens (prompt + output) of each request, as workload.contextTokens (default: --max-model-len, "
        "else the model's)",
    )
    _economics_flags(p)
    p.add_argument(
        "--speed-backend",
        choices=("fitgate", "aic"),
        default="fitgate",
        help="aic: NVIDIA aiconfigurator's measured-kernel TTFT / TPOT where it has data (pip install "
        "'fitgate[aic]'; needs --input-tokens / --output-tokens), fitgate's step model elsewhere",
    )
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")

    r = sub.add_parser(
        "recommend", help="the cheapest GPU product x TP x PP x KV dtype x quantization that holds a workload"
    )
    r.add_argument("--model", required=True, help="a Hugging Face layout directory, or a repo id org/name[@revision]")
    r.add_argument("--source", choices=SOURCES, default="auto", help="where a repo id is resolved (as for plan)")
    r.add_argument(
        "--concurrency",
        type=_int,
        help="concurrent requests the service must hold, split over the replicas an option needs when one cannot "
        "(required without --request-rate; with it, default 1: the replicas follow from the rate and the targets)",
    )
    r.add_argument(
        "--context-tokens",
        type=_human_int,
        help="tokens (prompt + output) of each request (contextTokens; default --input-tokens + --output-tokens)",
    )
    r.add_argument("--max-model-len", type=_max_model_len, help="default: --context-tokens (32k, 32K as in vLLM)")
    r.add_argument("--gpus", help="GPU products to consider, comma-separated (default: the whole catalog)")
    r.add_argument("--max-gpus", type=_int, default=16, help="most GPUs per replica (default 16)")
    r.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")
    r.add_argument("--limit", type=_count, default=15, help="options shown in text output (JSON lists all)")
    # latency targets (issue 24, docs/performance.md): replicas per option to meet them
    r.add_argument("--ttft-ms", type=_float, help="mean time to first token each replica must stay within")
    r.add_argument("--tpot-ms", type=_float, help="mean time per output token each replica must stay within")
    _economics_flags(r)
    r.add_argument("--output", "-o", choices=("text", "json"), default="text")

    d = sub.add_parser(
        "plan-pd",
        help="disaggregated prefill / decode: prefill and decode replicas for a request rate (docs/disaggregated.md)",
    )
    d.add_argument("--model", required=True, help="a Hugging Face layout directory, or a repo id org/name[@revision]")
    d.add_argument("--source", choices=SOURCES, default="auto", help="where a repo id is resolved (as for plan)")
    d.add_argument("--gpu", help="the GPU of both pools (a GPU from `fitgate gpus`)")
    d.add_argument("--prefill-gpu", help="the prefill pool's GPU (default --gpu)")
    d.add_argument("--decode-gpu", help="the decode pool's GPU (default --gpu)")
    d.add_argument("--prefill-tp", type=_int, default=1, help="tensor-parallel size of a prefill replica (default 1)")
    d.add_argument("--decode-tp", type=_int, default=1, help="tensor-parallel size of a decode replica (default 1)")
    d.add_argument("--request-rate", type=_float, required=True, help="requests/s arriving")
    d.add_argument("--input-tokens", type=_int, required=True, help="prompt tokens per request (ISL)")
    d.add_argument("--output-tokens", type=_int, required=True, help="generated tokens per request (OSL)")
    d.add_argument("--ttft-ms", type=_float, help="mean time to first token the prefill pool must stay within")
    d.add_argument("--tpot-ms", type=_float, help="mean time per output token the decode pool must stay within")
    d.add_argument(
        "--kv-transfer-gbps", type=_float, help="KV-transfer link per GPU, GB/s (default 50: one 400 Gb/s NIC)"
    )
    d.add_argument("--max-model-len", type=_max_model_len, help="default: the model's (32k, 32K as in vLLM)")
    d.add_argument("--kv-cache-dtype", default="auto", help="one of " + ", ".join(KV_CACHE_DTYPES))
    d.add_argument("--quantization", help="runtime quantization of an unquantized checkpoint: fp8")
    d.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")
    d.add_argument("--output", "-o", choices=("text", "json"), default="text")

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
    k.add_argument(
        "--gpus-per-node",
        type=_int,
        default=None,
        help="GPUs per node of that pool (default: the count a node label gives, else 8 or as many as one pod asks "
        "for, whichever is more)",
    )
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
    g.add_argument(
        "--language-model-only", action="store_true", help="vLLM's flag: every modality's limit 0, no vision tower"
    )
    p.add_argument(
        "--skip-mm-profiling", action="store_true", help="vLLM's flag: the encoder is left out of the memory profile"
    )
    g.add_argument("--mm-processor-kwargs", help="vLLM's JSON; max_pixels is read, e.g. '{\"max_pixels\": 1003520}'")
    g.add_argument("--mm-encoder-tp-mode", default="weights", help="weights or data")
    g.add_argument("--mm-processor-cache-gb", type=_float, help="host multimodal processor cache (default 4)")


def _economics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu-hour-price",
        help="USD per GPU-hour: one price for every GPU (2.5), or per product (H100=2.5,L4=0.7) over the dated "
        "list-price table, whose other rows stay",
    )
    p.add_argument(
        "--utilization",
        type=_float,
        default=DEFAULT_UTILIZATION,
        help=f"share of the day at the estimated load; divides the cost per token (default {DEFAULT_UTILIZATION})",
    )
    p.add_argument(
        "--api-price-per-million",
        "--api-output-price-per-million",
        dest="api_price_per_million",
        type=_float,
        help="an API's USD per 1M output tokens, for break-even",
    )
    p.add_argument(
        "--api-input-price-per-million",
        type=_float,
        help="the same API's USD per 1M input tokens (needs --input-tokens / --output-tokens): its price of a "
        "request counts both",
    )
    p.add_argument(
        "--no-list-prices",
        action="store_true",
        help="do not price GPUs from the dated list-price table (only --gpu-hour-price prices them)",
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
    p.add_argument(
        "--quantization",
        help="runtime quantization of an unquantized checkpoint: fp8, fp8_per_tensor, fp8_per_block, fp8_per_channel, "
        "mxfp8, mxfp4 (vLLM 0.30+), int8_per_channel_weight_only, nvfp4_per_token, experts_int8, bitsandbytes",
    )
    p.add_argument("--max-gpus", type=_int, default=8, help="most GPUs per replica (default 8)")
    p.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, help="accounting of this release")
