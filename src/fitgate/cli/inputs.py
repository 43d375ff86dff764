"""Parsed flags as the sizing core's typed inputs: the GPU, the serving settings, the workload, the prices.

Every value is checked here, once, with the flag's name in the error (``SizingError``): the commands only
call the sizing core with what these return. :func:`origin_of` is the resolver's facts as the plan contract's
typed :class:`~fitgate.report.ModelOrigin`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from fitgate.checkpoints import ModelFacts
from fitgate.report import ModelOrigin
from fitgate.sizing import (
    Cost,
    GpuModel,
    GpuPrices,
    Performance,
    Plan,
    ServingConfig,
    SizingError,
    Verdict,
    Workload,
    check_utilization,
    custom_gpu,
    estimate,
    parse_gpu_prices,
    replica_cost,
)
from fitgate.sizing.capacity import load_costs
from fitgate.sizing.cudagraphs import graph_flags
from fitgate.sizing.instances import MAX_GPU_NAME_CHARS, lookup_named_gpu, named_gpu
from fitgate.sizing.multimodal import MODALITIES, parse_limit_mm, parse_limit_mm_image_pixels, parse_max_pixels
from fitgate.sizing.offload import parse_kv_transfer_config
from fitgate.sizing.parallel import parse_eplb_config
from fitgate.sizing.performance import speed_load
from fitgate.sizing.prices import price_table
from fitgate.sizing.serving import MAX_REPLICAS
from fitgate.sizing.speculative import parse_config as parse_speculative_config
from fitgate.sizing.units import GiB, parse_size
from fitgate.workloads.flags import POOLING_TASKS
from fitgate.workloads.flagvalues import merge_dotted


def gpu_of(args: argparse.Namespace) -> GpuModel:
    """``--gpu`` (a catalog GPU, its memory replaced by ``--gpu-memory`` if given), else a ``--gpu-memory`` GPU."""
    if not args.gpu and not args.gpu_memory:
        raise SizingError(
            "--gpu",
            None,
            "a GPU from `fitgate gpus` (e.g. --gpu H100), or --gpu-memory with the device total CUDA reports "
            "(e.g. --gpu-memory 79.19GiB)",
        )
    if args.gpu:
        if args.gpu_memory and named_gpu(args.gpu) is None:  # a GPU fitgate does not know, its memory given
            custom = custom_gpu(parse_size(args.gpu_memory, "--gpu-memory"))
            return dataclasses.replace(custom, name=args.gpu[:MAX_GPU_NAME_CHARS])
        model = lookup_named_gpu(args.gpu, "--gpu")
        if args.gpu_memory:
            return GpuModel(**{**model.__dict__, "memory_bytes": parse_size(args.gpu_memory, "--gpu-memory")})
        return model
    return custom_gpu(parse_size(args.gpu_memory, "--gpu-memory"))


def _graph_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The CUDA-graph flags as ServingConfig fields, read as the workload path reads a container's."""
    level = getattr(args, "optimization_level", None)
    config = getattr(args, "compilation_config", None)
    if level is not None and level.strip() not in ("0", "1", "2", "3"):  # vLLM <= 0.11's -O: --compilation-config
        if level.lstrip().startswith("{"):
            config = level
        else:  # -O.cudagraph_mode=FULL: a dotted key, which replaces a whole JSON as vLLM's parser does
            dotted: dict[str, dict[str, Any]] = {}
            key, _, value = level.strip().partition("=")
            merge_dotted(dotted, "--compilation-config" + key, value)
            config = json.dumps(dotted.get("--compilation-config", {}))
        level = None
    flags = {
        flag: value
        for flag, value in (
            ("--compilation-config", config),
            ("--max-cudagraph-capture-size", getattr(args, "max_cudagraph_capture_size", None)),
            ("--optimization-level", level),
        )
        if value is not None
    }
    sizes = getattr(args, "cudagraph_capture_sizes", None)
    if sizes:
        flags["--cudagraph-capture-sizes"] = ",".join(str(s) for s in sizes)
    graphs = graph_flags({k: str(v) for k, v in flags.items()})
    if graphs.problems:  # the workload path notes them; on the command line they are usage errors
        key, value, want = graphs.problems[0]
        flag = {"cudagraph_mode": "--compilation-config cudagraph_mode"}.get(
            key, "--" + key.lstrip("-").replace("_", "-")
        )
        raise SizingError(flag, value, want)
    return {
        "cudagraph_mode": graphs.mode,
        "cudagraph_capture_sizes": graphs.capture_sizes,
        "max_cudagraph_capture_size": graphs.max_capture_size,
    }


def overrides_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--hf-overrides`` with ``--rope-scaling`` / ``--rope-theta`` merged after it, as vLLM up to 0.11 does."""
    out = dict(getattr(args, "hf_overrides", None) or {})
    if getattr(args, "rope_scaling", None) is not None:
        out["rope_scaling"] = args.rope_scaling
    if getattr(args, "rope_theta", None) is not None:
        out["rope_theta"] = args.rope_theta
    return out or None


def _runner(args: argparse.Namespace) -> str:
    """``--runner``, or pooling where ``--task`` / ``--convert`` names a pooling task (hunt31 F2), as a workload's."""
    runner = str(getattr(args, "runner", "auto"))
    for flag in ("convert", "task"):
        if str(getattr(args, flag, None) or "").strip().lower() in POOLING_TASKS:
            return "pooling"
    return runner


def serving_of(args: argparse.Namespace) -> ServingConfig:
    """The sizing core's serving settings from the plan flags."""
    spec_text = getattr(args, "speculative_config", None)
    spec_method, spec_tokens = parse_speculative_config(spec_text) if spec_text else (None, None)
    return ServingConfig(
        speculative_method=spec_method,
        speculative_tokens=spec_tokens,
        max_model_len=None if args.max_model_len == "auto" else args.max_model_len,
        max_model_len_auto=args.max_model_len == "auto",
        allow_long_max_model_len=getattr(args, "allow_long_max_model_len", False),
        kv_cache_dtype=args.kv_cache_dtype,
        mamba_ssm_cache_dtype=getattr(args, "mamba_ssm_cache_dtype", None),
        dtype=args.dtype,
        quantization=args.quantization,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        pp_layer_partition=getattr(args, "pp_layer_partition", None),
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_memory_bytes=getattr(args, "kv_cache_memory_bytes", None),
        interconnect=getattr(args, "interconnect", None),
        extensible_kv_cache=getattr(args, "enable_extensible_kv_cache", None),
        runner=_runner(args),
        enable_chunked_prefill=getattr(args, "enable_chunked_prefill", None),
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        enforce_eager=args.enforce_eager,
        **_graph_settings(args),
        cudagraph_memory_estimate=getattr(args, "cudagraph_memory_estimate", None),
        performance_mode=getattr(args, "performance_mode", None),
        flashinfer_sampler=getattr(args, "flashinfer_sampler", None),
        mxfp4_backend=getattr(args, "mxfp4_backend", None),
        vllm_version=args.vllm_version,
        use_v1=getattr(args, "use_v1", None),
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
        "limit_mm_per_prompt": tuple((m, 0) for m in sorted(MODALITIES))
        if args.language_model_only
        else parse_limit_mm(args.limit_mm_per_prompt)
        if args.limit_mm_per_prompt
        else None,
        "mm_max_pixels": parse_max_pixels(args.mm_processor_kwargs) if args.mm_processor_kwargs else None,
        "mm_item_pixels": parse_limit_mm_image_pixels(args.limit_mm_per_prompt) if args.limit_mm_per_prompt else None,
        "mm_encoder_tp_mode": args.mm_encoder_tp_mode,
        "mm_skip_profiling": bool(getattr(args, "skip_mm_profiling", False)),
        "mm_processor_cache_bytes": _gib_flag(args.mm_processor_cache_gb, "--mm-processor-cache-gb"),
    }


def workload_of(args: argparse.Namespace, serving: ServingConfig, default_len: int) -> Workload | None:
    """``--concurrency`` x ``--context-tokens`` (default: the longest request), None when neither is given."""
    if args.concurrency is None and args.context_tokens is None:
        return None
    if args.concurrency is None:
        raise SizingError("--concurrency", None, "a number of concurrent requests when --context-tokens is given")
    longest = serving.max_model_len or default_len
    if args.context_tokens is not None and args.context_tokens > longest:  # the CRD's CEL rule, as a flag
        limit = f"--max-model-len {longest}" if serving.max_model_len else f"the model's {longest} tokens"
        raise SizingError("--context-tokens", args.context_tokens, f"at most {limit} (vLLM refuses longer requests)")
    replicas = args.replicas
    if not 1 <= replicas <= MAX_REPLICAS:
        raise SizingError("--replicas", replicas, f"between 1 and {MAX_REPLICAS}")
    return Workload(args.concurrency, args.context_tokens or longest, replicas)


def prices_of(args: argparse.Namespace) -> GpuPrices | None:
    """``--gpu-hour-price``: one price, or per GPU product."""
    return parse_gpu_prices(args.gpu_hour_price) if args.gpu_hour_price else None


def list_prices_of(args: argparse.Namespace) -> GpuPrices | None:
    """The dated list-price table (docs/performance.md), or None.

    None with ``--no-list-prices`` or one ``--gpu-hour-price`` for every GPU; per-product ``--gpu-hour-price`` entries
    override only their rows (:func:`merged_prices`, hunt91 G4).
    """
    if getattr(args, "no_list_prices", False):
        return None
    given = prices_of(args)
    if given is not None and given.default is not None:
        return None
    return price_table().default_prices()


def merged_prices(args: argparse.Namespace) -> GpuPrices | None:
    """``--gpu-hour-price`` over the dated list table (None: neither prices anything).

    Its products at its prices, every other listed one at its list price.
    """
    given, listed = prices_of(args), list_prices_of(args)
    return listed if given is None else given.over(listed)


def economics_of(
    args: argparse.Namespace, model: Any, gpu: GpuModel, result: Plan
) -> tuple[Performance | None, Cost | None]:
    """The estimate of a plan that can start, and its cost when ``--gpu-hour-price`` prices its GPU."""
    utilization = check_utilization(args.utilization)
    prices = prices_of(args)
    listed = list_prices_of(args)
    listed_price = listed.of(gpu) if listed is not None else None
    if args.api_price_per_million is not None and prices is None and listed_price is None:
        raise SizingError("--gpu-hour-price", None, "a price per GPU-hour when --api-price-per-million is given")
    if result.verdict is Verdict.DOES_NOT_FIT or not (gpu.memory_bandwidth_gbps and gpu.bf16_dense_tflops):
        return None, None  # nothing to estimate, or a --gpu-memory size without speeds
    # --replicas splits the rate as it splits the concurrency, as the operator's requestRate / replicas (hunt91 O4)
    replicas = max(1, int(getattr(args, "replicas", 1) or 1))
    rate = None if args.request_rate is None else args.request_rate / replicas
    load = speed_load(args.input_tokens, args.output_tokens, rate, result.serving.max_model_len)
    perf = estimate(model, result, load=load)
    price = prices.of(gpu) if prices is not None else None
    basis = "--gpu-hour-price"
    if price is None and listed_price is not None:  # the dated list-price table (issue 24)
        price, basis = listed_price, price_table().basis(gpu.name)
    if prices is not None and price is None:
        raise SizingError("--gpu-hour-price", args.gpu_hour_price, f"a price for {gpu.name} (or one for every GPU)")
    if price is None:
        return perf, None
    gpus = result.serving.tensor_parallel_size * result.serving.pipeline_parallel_size
    return perf, replica_cost(
        price, gpus, perf.decode_tokens_per_s, utilization, args.api_price_per_million,
        price_basis=basis, api_input_usd_per_million=args.api_input_price_per_million, **load_costs(perf),
    )  # fmt: skip


def origin_of(facts: ModelFacts) -> ModelOrigin:
    """Where the checkpoint came from, as the plan contract's ``model`` object says."""
    return ModelOrigin(facts.source, facts.revision, facts.weights_basis, facts.origin, tuple(facts.notes))
