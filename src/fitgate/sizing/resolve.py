"""vLLM's serving settings resolved for one model on one GPU: defaults, limits, block size, budgets.

What ``EngineArgs`` / ``VllmConfig`` decide before a worker starts (reference section 9), as fitgate sizes them.
"""

from __future__ import annotations

import dataclasses

from fitgate.sizing import lora as lora_slots
from fitgate.sizing import offload, speculative
from fitgate.sizing.activation import pre_snapshot_bytes
from fitgate.sizing.cudagraphs import CUDAGRAPH_MODES, MAX_CAPTURE_SIZE, MAX_CAPTURE_SIZES, pooling_graph_mode
from fitgate.sizing.dtypes import MODEL_DTYPES, kv_dtype_bytes, served_dtype
from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.kv_layout import (
    MINIMAX_M3_BLOCK,
)
from fitgate.sizing.model import ModelArchitecture
from fitgate.sizing.multimodal import vision_tower_built
from fitgate.sizing.mxfp4 import MXFP4_BACKENDS
from fitgate.sizing.parallel import (
    BATCHED_DP_DEFAULT_TOKENS,
    resolve_layout,
)
from fitgate.sizing.quantization import (
    DEFERRED_ONLINE_SHORTHANDS,
    DEFERRED_ONLINE_SINCE,
    RUNTIME_QUANTIZATION,
    RUNTIME_QUANTIZATION_NOT_SIZED,
)
from fitgate.sizing.runner_choice import runs_v2_runner
from fitgate.sizing.serving import ResolvedServing, ServingConfig
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import VllmAccounting, accounting_for, engine_for, parse_version
from fitgate.sizing.weights import pp_partition

#: ``--kv-cache-memory-bytes`` (``CacheConfig.kv_cache_memory_bytes``) exists from this release on: engine/arg_utils.py
#: 0.10.2 L744-745, config/cache.py L116-122, and v1/worker/gpu_worker.py L235-252 reserves it without profiling; 0.10.1
#: has no such flag (hunt196 F1: gated at 0.11.0, a 0.10.2 Deployment's flag was dropped and the plan denied).
KV_CACHE_MEMORY_SINCE = (0, 10, 2)
#: The first release that turns ``--kv-cache-dtype auto`` into a ModelOpt checkpoint's own KV cache dtype
#: (``resolve_kv_cache_dtype_string``: 0.14.0 ``engine/arg_utils.py`` L1397-1400; absent from 0.13.0).
CHECKPOINT_KV_DTYPE_SINCE = (0, 14, 0)
#: Architectures whose ``--kv-cache-dtype auto`` vLLM turns into fp8 on a compute capability 10.x GPU (the SM10x
#: family: B200, GB200, B300, GB300), from the release given (hunt29 F1): GLM-5.x's ``GlmMoeDsaForCausalLM``,
#: ``models/config.py`` 0.32.0 L43-55 (0.34.0 L163-175) ``cache_config.cache_dtype = "fp8_e4m3"``, logged "Using fp8
#: kv-cache for GlmMoeDsaForCausalLM on SM10x"; absent from 0.31.0.
AUTO_FP8_KV_ON_SM10X = {"GlmMoeDsaForCausalLM": (0, 32, 0)}
#: ``--no-enable-chunked-prefill`` without ``--max-num-batched-tokens``: a prompt runs in one step, so vLLM makes the
#: step budget at least ``max_model_len`` (``engine/arg_utils.py`` 0.34.0 L3227-3236 ``max(model_config.max_model_len,
#: self.max_num_batched_tokens)``, after the throughput doubling; ``SchedulerConfig`` did the same in V0): the
#: activation peak of the profiling pass grows with it (hunt31 F4: the recipes' Qwen3-Next MTP command on 4 x H200).
CHUNKED_PREFILL_OFF = "the step budget is at least max_model_len (vllm 0.34.0 engine/arg_utils.py L3227-3236)"
#: vLLM's ``--runner`` values fitgate sizes (``draft`` is internal to speculative decoding); ``auto`` is vLLM's default.
RUNNERS = ("auto", "generate", "pooling")
#: The first release whose default runner serves a checkpoint with a Sentence Transformers pooling module as a
#: pooling model whatever its architecture ("Some Sentence Transformers models use *ForCausalLM archs",
#: config/__init__.py 0.10.1.1 L895-903, config/model.py 0.34.0 L1303-1311; hunt46 F1).
ST_POOLING_DEFAULT_SINCE = (0, 10, 1)


def runner_of(arch: ModelArchitecture, runner: str, version: tuple[int, int, int] | None = None) -> str:
    """The runner vLLM uses: the one given, or for ``auto`` pooling where the checkpoint ships a pooling module."""
    if runner != "auto":
        return runner
    pooling = arch.pooling_architecture or (
        arch.pooling_by_default and (version is None or version >= ST_POOLING_DEFAULT_SINCE)
    )
    return "pooling" if pooling else "generate"


MAX_CONTEXT = 1 << 24


#: GB10 (DGX Spark, cc 12.1) gets the small defaults in every release: from 0.33 by name (arg_utils.py 0.34.0
#: L2999-3024 ``is_gb10``; hunt47 F2); before, NVML's memory query raises on the integrated part (platforms/cuda.py
#: 0.25.0 L764-767, a fallback only from 0.33: 0.34.0 L845-854), so the defaults take ``device_memory = 0``
#: (arg_utils.py 0.11.0 L1594-1599, 0.25.0 L2415-2442; hunt158 S1: a 0.25.1 log's "default max_num_seqs (256)").
GB10_COMPUTE_CAPABILITY = "12.1"


def default_batch(gpu: GpuModel, accounting: VllmAccounting, offline: bool) -> tuple[int, int]:
    """VLLM's default (max_num_batched_tokens, max_num_seqs) for this card (reference section 9)."""
    gb10 = gpu.compute_capability == GB10_COMPUTE_CAPABILITY
    big = gpu.memory_bytes >= 70 * GiB and not (accounting.a100_small_tier and gpu.is_a100) and not gb10
    if accounting.big_gpu_tier_bytes is not None and gpu.memory_bytes >= accounting.big_gpu_tier_bytes:
        return 16384, 1024
    if big:
        return (16384 if offline else 8192), 1024
    return (8192 if offline else 2048), 256


#: V0 turns chunked prefill on by itself above 32K tokens of context from 0.5.3 (``use_long_context``,
#: engine/arg_utils.py 0.5.3.post1; 0.5.4 L747-773; 0.6.4.post1 L996-1020); 0.5.0-0.5.2 have no such default.
V0_AUTO_CHUNKED_SINCE = (0, 5, 3)
#: The token budget V0 gives chunked prefill when none is stated (``SchedulerConfig``): 512, "the values that
#: have the best balance between ITL and TTFT on A100" (config.py 0.5.5 L901, 0.6.0 L977, 0.6.4.post1 L1114),
#: then 2048 from 0.6.5 (config.py 0.6.5 L1344, 0.6.6 L1438, 0.7.3 L1532, 0.8.5 L1978
#: ``_DEFAULT_MAX_NUM_BATCHED_TOKENS``).
V0_CHUNKED_TOKENS = ((0, 6, 5), 512, 2048)


def v0_default_tokens(
    arch: ModelArchitecture, gpu: GpuModel, serving: ServingConfig, accounting: VllmAccounting, max_len: int
) -> int:
    """V0's default ``max_num_batched_tokens``: the chunked-prefill budget, or one whole prompt without chunking.

    The budget applies when the long-context default turns chunking on, else ``max(max_model_len, 2048)``.

    The long-context default (context above 32K) skips what chunked prefill did not support then: a sliding
    window (``model_config.get_sliding_window()``), speculative decoding, LoRA, and from 0.6.0 multimodal models,
    from 0.6.5 pooling runners and ROCm (engine/arg_utils.py 0.6.0 L843-865, 0.6.4.post1 L996-1020, 0.6.5
    L1064-1095, 0.7.3 L1164-1193). Prompt adapters and prefix caching (0.5.3-0.6.0), both off by default, and
    the Mamba-layer exception of 0.5.4-0.6.0 (``has_seqlen_agnostic_layers``) are not modelled. A stated
    ``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill`` wins: the default applies only ``if
    self.enable_chunked_prefill is None`` (arg_utils.py 0.5.3 L748, 0.6.3.post1 L941), and ``SchedulerConfig``
    gives a chunked run the budget, an unchunked one the whole prompt (config.py 0.6.3.post1 L988-1003; hunt121 S1).
    """
    version = accounting.version
    if serving.enable_chunked_prefill is not None:
        chunked = serving.enable_chunked_prefill
    else:
        chunked = max_len > 32768 and version >= V0_AUTO_CHUNKED_SINCE
        chunked = chunked and not (
            arch.windowed_attention or serving.speculative_method or serving.speculative_tokens or serving.enable_lora
        )
        if version >= (0, 6, 0):
            chunked = chunked and arch.vision is None
        if version >= (0, 6, 5):
            chunked = chunked and runner_of(arch, serving.runner, version) != "pooling" and gpu.vendor != "amd"
    if not chunked:
        return max(max_len, 2048)
    since, before, after = V0_CHUNKED_TOKENS
    return after if version >= since else before


#: The longest KV block fitgate sizes; longer ones are Neuron's whole-context blocks (not a GPU's).
MAX_BLOCK_SIZE = 4096


def checked_int(value: int | None, name: str, low: int, high: int) -> int | None:
    """``value`` if it is None or an integer in ``[low, high]``; else a SizingError naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SizingError(name, value, f"an integer from {low} to {high}")
    return value


def _engine(arch: ModelArchitecture, gpu: GpuModel, serving: ServingConfig) -> tuple[str | None, str | None]:
    """The engine vLLM runs (None: the release's own) and why (``versions.engine_for``)."""
    if serving.engine:
        return serving.engine, None
    cc = gpu.compute_capability
    runner = runner_of(arch, serving.runner)
    return engine_for(serving.vllm_version, serving.use_v1, cc, serving.kv_cache_dtype, arch.uses_mla, runner)


def accounting_of(arch: ModelArchitecture, gpu: GpuModel, serving: ServingConfig) -> VllmAccounting:
    """The accounting of ``serving``'s release with the engine vLLM runs there (``versions.engine_for``)."""
    return accounting_for(serving.vllm_version, _engine(arch, gpu, serving)[0])


def _check_transformers_backend(arch: ModelArchitecture, accounting: VllmAccounting, tp: int, pp: int) -> None:
    """Unknown where vLLM's Transformers modeling backend serves the model in a way fitgate does not size.

    Before the release that moved the architecture onto the backend vLLM builds it with a native class fitgate did
    not read; a class without ``base_model_tp_plan`` replicates what it cannot shard under TP, and one without
    ``base_model_pp_plan`` guesses its PP split (transformers/base.py 0.34.0 L386-440, L491-505, L566-572).
    """
    backend = arch.transformers_backend
    if backend is None:
        return
    if accounting.version < backend.since:
        since = ".".join(map(str, backend.since))
        raise NotModelledError(
            "vllm_version",
            accounting.label,
            f"{arch.architecture} as vLLM serves it before {since} (a native class; fitgate sizes it through the "
            f"Transformers modeling backend, which serves it from {since})",
        )
    for flag, size, planned, plan_key in (
        ("tensor_parallel_size", tp, backend.tp_plan, "base_model_tp_plan"),
        ("pipeline_parallel_size", pp, backend.pp_plan, "base_model_pp_plan"),
    ):
        if size > 1 and not planned:
            raise NotModelledError(
                flag,
                size,
                f"model_type {arch.model_type!r} through vLLM's Transformers modeling backend without a {plan_key} "
                "(or from remote code): the backend replicates or guesses what the plan would split",
            )


def resolve_serving(
    arch: ModelArchitecture, gpu: GpuModel, serving: ServingConfig, accounting: VllmAccounting
) -> ResolvedServing:
    """Validate the settings and fill in vLLM's defaults; errors name the flag, value and range."""
    tp = checked_int(serving.tensor_parallel_size, "tensor_parallel_size", 1, 64) or 1
    pp = checked_int(serving.pipeline_parallel_size, "pipeline_parallel_size", 1, 64) or 1
    if tp * pp > 64:
        raise SizingError("tensor_parallel_size x pipeline_parallel_size", tp * pp, "at most 64 GPUs")
    heads = arch.attention_heads
    if heads and heads % tp:
        raise SizingError(
            "tensor_parallel_size",
            tp,
            f"a divisor of the model's {heads} attention heads",
            "vLLM shards heads evenly",
        )
    kv = arch.kv_heads
    if kv and kv % tp and tp % kv:
        raise SizingError("tensor_parallel_size", tp, f"a divisor or multiple of the model's {kv} KV heads")
    if pp > arch.num_layers:
        raise SizingError("pipeline_parallel_size", pp, f"at most the model's {arch.num_layers} layers")
    _check_transformers_backend(arch, accounting, tp, pp)
    extensible, extensible_off_by = offload.extensible_kv_cache(serving, accounting, gpu)
    gmu = serving.gpu_memory_utilization
    if gmu is None:
        # 0.34: 1.0 with the extensible KV cache (config/cache.py 0.34.0 L495-501), else 0.92
        gmu = 1.0 if extensible else accounting.default_gpu_memory_utilization
    if isinstance(gmu, bool) or not isinstance(gmu, int | float) or not 0 < gmu <= 1:
        raise SizingError("gpu_memory_utilization", gmu, "a fraction greater than 0 and at most 1")
    model_max = arch.max_model_len_limit(accounting.version)
    max_len = checked_int(serving.max_model_len, "max_model_len", 1, MAX_CONTEXT) or arch.default_max_model_len(
        accounting.version
    )
    if max_len > model_max and not serving.allow_long_max_model_len:
        # vLLM's own refusal (config/model.py 0.34.0 L2700-2727): honoured only with the env override
        key = arch.max_len_key or "max_position_embeddings"
        raise SizingError(
            "max_model_len",
            max_len,
            f"at most the derived max_model_len ({key}={model_max} with RoPE scaling as vLLM "
            f"{accounting.label} applies it); vLLM refuses more unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (fitgate plan: "
            "--allow-long-max-model-len; a ModelDeployment: serving.allowLongMaxModelLen)",
        )
    dtype = served_dtype(serving.dtype, arch.dtype, arch.model_type, gpu.compute_capability, accounting.version)
    kv_cache_dtype = serving.kv_cache_dtype
    if kv_cache_dtype == "auto" and arch.quantization and accounting.version >= CHECKPOINT_KV_DTYPE_SINCE:
        kv_cache_dtype = arch.quantization.kv_cache_dtype or "auto"  # the checkpoint's (modelopt_kv_cache_dtype)
    auto_fp8_since = AUTO_FP8_KV_ON_SM10X.get(arch.architecture)
    by_architecture = (
        kv_cache_dtype == "auto"
        and auto_fp8_since is not None
        and accounting.version >= auto_fp8_since
        and (gpu.compute_capability or "").partition(".")[0] == "10"
    )
    if by_architecture:
        kv_cache_dtype = "fp8_e4m3"
    kv_bytes = kv_dtype_bytes(kv_cache_dtype, dtype)
    if arch.compressed_sparse_mla:
        # DeepSeek V4's default CUDA backends store fp8_ds_mla entries: "auto" becomes fp8, anything
        # else but fp8 is an error (vllm/models/deepseek_v4/attention.py 0.33.0 L107-123).
        if serving.kv_cache_dtype != "auto" and not serving.kv_cache_dtype.startswith("fp8"):
            raise SizingError(
                "kv_cache_dtype", serving.kv_cache_dtype, "auto or fp8 (DeepSeek V4 stores fp8_ds_mla entries)"
            )
        kv_bytes = 1
    quant = serving.quantization
    if quant in RUNTIME_QUANTIZATION_NOT_SIZED and arch.quantization is None:
        raise NotModelledError("quantization", quant, "how this load-time quantization stores the weights")
    if quant in DEFERRED_ONLINE_SHORTHANDS and arch.quantization is None and accounting.version < DEFERRED_ONLINE_SINCE:
        since = ".".join(map(str, DEFERRED_ONLINE_SINCE))
        raise NotModelledError(
            "quantization", quant, f"the checkpoint method on an unquantized checkpoint before vLLM {since}"
        )
    if quant is not None and quant not in RUNTIME_QUANTIZATION and (arch.quantization is None):
        raise SizingError(
            "quantization",
            quant,
            "one of " + ", ".join(RUNTIME_QUANTIZATION) + " for an unquantized checkpoint",
        )
    default_tokens, default_seqs = default_batch(gpu, accounting, serving.offline)
    seqs = checked_int(serving.max_num_seqs, "max_num_seqs", 1, 65536) or default_seqs
    if accounting.engine == "V0":
        default_tokens = v0_default_tokens(arch, gpu, serving, accounting, max_len)
        seqs = serving.max_num_seqs or 256
    layout = resolve_layout(
        arch,
        tp=tp,
        pp=pp,
        data_parallel_size=serving.data_parallel_size,
        data_parallel_size_local=serving.data_parallel_size_local,
        enable_expert_parallel=serving.enable_expert_parallel,
        enable_eplb=serving.enable_eplb,
        num_redundant_experts=serving.num_redundant_experts,
        all2all_backend=serving.all2all_backend,
        decode_context_parallel_size=serving.decode_context_parallel_size,
    )
    if layout.batched_dp_moe and accounting.engine == "V1":
        default_tokens = BATCHED_DP_DEFAULT_TOKENS  # DeepEP low-latency / nixl_ep (arg_utils.py 0.33.0 L3166-3170)
    mode = _performance_mode(serving.performance_mode, accounting)
    if mode == "throughput":
        # the defaults (whichever applied) doubled where not given (engine/arg_utils.py 0.17.0 L2128-2133,
        # 0.25.0 L2622-2627)
        default_tokens *= 2
        seqs = seqs if serving.max_num_seqs is not None else seqs * 2
    tokens = checked_int(serving.max_num_batched_tokens, "max_num_batched_tokens", 1, MAX_CONTEXT) or default_tokens
    if serving.runner not in RUNNERS:
        raise SizingError("runner", serving.runner, "auto, generate or pooling (vLLM's --runner)")
    runner = runner_of(arch, serving.runner, accounting.version)
    taken = accounting.engine == "V1" and (accounting.chunked_off_taken or runner == "pooling")
    if serving.enable_chunked_prefill is False and serving.max_num_batched_tokens is None and taken:
        tokens = max(max_len, tokens)  # V1's CHUNKED_PREFILL_OFF (hunt31 F4)
    if serving.max_num_batched_tokens is None and accounting.chunked_off_taken and accounting.engine == "V1":
        tokens = min(tokens, seqs * max_len)  # a default budget no larger than the batch can hold (hunt161 F5)
    if serving.max_num_seqs is None and accounting.engine == "V1":
        # a default max_num_seqs lowered to the batch (arg_utils.py 0.11.0 L1676-1679, 0.34.0 L3269-3271; hunt98 F3)
        seqs = min(seqs, tokens)
    kv_memory = checked_int(serving.kv_cache_memory_bytes, "kv_cache_memory_bytes", 1, gpu.memory_bytes)
    if kv_memory is not None and accounting.version < KV_CACHE_MEMORY_SINCE:
        since = ".".join(map(str, KV_CACHE_MEMORY_SINCE))
        raise SizingError("kv_cache_memory_bytes", kv_memory, f"vLLM {since} or later (--kv-cache-memory-bytes)")
    interconnect = serving.interconnect or gpu.interconnect
    if interconnect not in ("nvlink", "pcie"):
        raise SizingError("interconnect", interconnect, "nvlink or pcie")
    if isinstance(serving.block_size, int) and serving.block_size > MAX_BLOCK_SIZE:
        # hunt122 F1: vLLM's Neuron backend takes block_size = max_model_len (Rebellions' serve.sh: --block-size
        # 8192 --max-model-len 16384); a page that long is no GPU attention backend's: Unknown, never exit 2
        raise NotModelledError("block_size", serving.block_size, f"blocks of at most {MAX_BLOCK_SIZE} tokens on a GPU")
    block = checked_int(serving.block_size, "block_size", 1, MAX_BLOCK_SIZE)
    if block is not None and block % 16 and block not in (1, 8):
        raise SizingError("block_size", block, "1, 8 or a multiple of 16 (vLLM's CUDA block sizes)")
    if block is not None and block % MINIMAX_M3_BLOCK and _block_sparse(arch):
        raise SizingError("block_size", block, "a multiple of 128 (MiniMax M3's 128-token sparse pages)")
    if runner == "pooling" and (serving.speculative_method or serving.speculative_tokens):
        raise SizingError("speculative_config", serving.speculative_method, "none with --runner pooling")
    # --- LoRA, weight offload, KV connectors (issue 20) ---
    lora = lora_slots.resolve_lora(
        enable=serving.enable_lora,
        max_loras=serving.max_loras,
        max_lora_rank=serving.max_lora_rank,
        max_cpu_loras=serving.max_cpu_loras,
        fully_sharded=serving.fully_sharded_loras,
        lora_dtype=serving.lora_dtype,
        model_dtype_bytes=MODEL_DTYPES[dtype],
        tp=tp,
        version=accounting.version,
    )
    offload_bytes = serving.cpu_offload_bytes
    if isinstance(offload_bytes, bool) or not isinstance(offload_bytes, int) or not 0 <= offload_bytes <= 1 << 50:
        raise SizingError("cpu_offload_gb", offload_bytes, "a size from 0 to 1 PiB")
    offload.check_kv_transfer(
        serving.kv_connector,
        serving.kv_role,
        serving.kv_offloading_backend,
        serving.kv_offloading_bytes,
        serving.kv_buffer_device,
    )
    mm_cache = 4 * GiB if serving.mm_processor_cache_bytes is None else serving.mm_processor_cache_bytes
    if isinstance(mm_cache, bool) or not isinstance(mm_cache, int) or not 0 <= mm_cache <= 1 << 50:
        raise SizingError("mm_processor_cache_gb", mm_cache, "a size from 0 to 1 PiB")
    if serving.mxfp4_backend is not None and serving.mxfp4_backend not in MXFP4_BACKENDS:
        raise SizingError("mxfp4_backend", serving.mxfp4_backend, " or ".join(MXFP4_BACKENDS))
    if serving.mm_encoder_tp_mode not in ("weights", "data"):
        raise SizingError("mm_encoder_tp_mode", serving.mm_encoder_tp_mode, "weights or data")
    graph_mode = pooling_graph_mode(_cudagraph_mode(serving.cudagraph_mode), serving.cudagraph_mode, runner, accounting)
    graph_sizes = serving.cudagraph_capture_sizes
    if graph_sizes is not None:
        if not 1 <= len(graph_sizes) <= MAX_CAPTURE_SIZES:
            raise SizingError("cudagraph_capture_sizes", graph_sizes, f"1 to {MAX_CAPTURE_SIZES} batch sizes")
        for size in graph_sizes:
            checked_int(size, "cudagraph_capture_sizes", 1, MAX_CAPTURE_SIZE)
    graph_max = checked_int(serving.max_cudagraph_capture_size, "max_cudagraph_capture_size", 1, MAX_CAPTURE_SIZE)
    spec = speculative.resolve(arch, serving.speculative_method, serving.speculative_tokens, accounting.version)
    rs = ResolvedServing(
        max_model_len=max_len,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        block_size=block or default_block_size(arch, gpu),
        block_size_given=block is not None,
        dtype=dtype,
        kv_cache_dtype=kv_cache_dtype,
        kv_cache_dtype_from_checkpoint=kv_cache_dtype != serving.kv_cache_dtype and not by_architecture,
        kv_cache_dtype_by_architecture=by_architecture,
        kv_dtype_bytes=kv_bytes,
        quantization=quant,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        pp_layer_partition=pp_partition(serving.pp_layer_partition, arch.num_layers, pp),
        gpu_memory_utilization=float(gmu),
        enforce_eager=serving.enforce_eager,
        cudagraph_mode=graph_mode,
        cudagraph_capture_sizes=graph_sizes,
        max_cudagraph_capture_size=graph_max,
        cudagraph_memory_estimate=serving.cudagraph_memory_estimate,
        performance_mode=mode,
        flashinfer_sampler=serving.flashinfer_sampler,
        mxfp4_backend=serving.mxfp4_backend,
        vllm_version=accounting.label,
        engine=accounting.engine,
        engine_note=_engine(arch, gpu, serving)[1],
        v2_runner=runs_v2_runner(arch, accounting, runner, spec.method if spec else None),
        free_memory_check=accounting.free_memory_check,
        pre_snapshot_bytes=pre_snapshot_bytes(tp, gpu.compute_capability),
        kv_cache_memory_bytes=kv_memory,
        interconnect=interconnect,
        runner=runner,
        speculative=spec,
        parallel=layout,
        lora=lora,
        cpu_offload_bytes=offload_bytes,
        kv_offloading_bytes=serving.kv_offloading_bytes,
        kv_offloading_backend=serving.kv_offloading_backend,
        kv_connector=offload.effective_connector(
            serving.kv_connector, serving.kv_offloading_bytes, serving.kv_offloading_backend
        ),
        kv_role="kv_both" if serving.kv_offloading_bytes is not None else serving.kv_role,
        kv_buffer_device=serving.kv_buffer_device,
        limit_mm_per_prompt=serving.limit_mm_per_prompt,
        mm_max_pixels=serving.mm_max_pixels,
        mm_item_pixels=serving.mm_item_pixels,
        mm_encoder_tp_mode=serving.mm_encoder_tp_mode,
        mm_skip_profiling=bool(serving.mm_skip_profiling),
        # no processor cache where the model takes no image or video (every limit 0, --language-model-only): vLLM
        # processes no multimodal input then (hunt42 F5)
        mm_processor_cache_bytes=mm_cache
        if arch.vision is not None and vision_tower_built(serving.limit_mm_per_prompt)
        else 0,
        lora_target_modules=serving.lora_target_modules,
        extensible_kv_cache=extensible,
        extensible_off_by=extensible_off_by,
    )
    return dataclasses.replace(
        rs,
        max_in_flight_tokens=max_in_flight_tokens(arch, rs, accounting),
        mamba_ssm_dtype_bytes=mamba_ssm_dtype_bytes(arch, serving.mamba_ssm_cache_dtype, accounting),
    )


#: The first release with async scheduling on by default (step_time.ASYNC_SCHEDULING).
ASYNC_SCHEDULING_SINCE = (0, 14, 0)
#: Speculative methods async scheduling works with (vllm-project/vllm#31998); others turn it off.
ASYNC_SPECULATIVE_METHODS = frozenset({"eagle", "eagle3", "mtp"})


def async_scheduling(rs: ResolvedServing) -> bool:
    """Whether the release schedules the next step while the GPU runs this one (step_time.ASYNC_SCHEDULING)."""
    if rs.engine != "V1" or parse_version(rs.vllm_version) < ASYNC_SCHEDULING_SINCE:
        return False
    if rs.pipeline_parallel_size > 1 and parse_version(rs.vllm_version) < (0, 15, 0):
        return False
    if rs.runner == "pooling":  # "disable by default for pooling model" (config/vllm.py 0.34.0 L1611-1621)
        return False
    return rs.speculative is None or rs.speculative.method in ASYNC_SPECULATIVE_METHODS


#: The first release whose sliding-window and chunked-local KV specs hold every in-flight batch per request.
IN_FLIGHT_BATCHES_SINCE = (0, 26, 0)


def max_in_flight_tokens(arch: ModelArchitecture, rs: ResolvedServing, accounting: VllmAccounting) -> int:
    """The tokens a recycling KV spec reserves beyond its window: vLLM's ``VllmConfig.max_in_flight_tokens``.

    From 0.26 a sliding-window or chunked-local layer frees out-of-window blocks only once a step's tokens are
    processed, so each request holds ``max_concurrent_batches x max_num_batched_tokens`` beyond the window
    (v1/kv_cache_interface.py 0.26.0 L567-598 ``max_admission_blocks_per_request``, config/vllm.py 0.26.0 L512-533):
    with async scheduling ``pp + 1`` batches on the V2 model runner and 2 on the V1 runner at PP 1 (the V1 runner
    does not overlap with PP: ``pp``), else ``pp`` (0.34.0 L560-575: ``pp + 1`` with async, every model on V2).
    Before 0.26 one batch: ``max_num_batched_tokens``.
    """
    if accounting.version < IN_FLIGHT_BATCHES_SINCE or rs.engine != "V1":
        return rs.max_num_batched_tokens
    pp = rs.pipeline_parallel_size
    batches = pp
    if async_scheduling(rs):
        v2 = accounting.version >= (0, 34, 0) or rs.v2_runner
        batches = pp + 1 if v2 else (2 if pp <= 1 else pp)
    return batches * rs.max_num_batched_tokens


def _block_sparse(arch: ModelArchitecture) -> bool:
    """MiniMax M3: softmax attention layers with an indexer cache (block-sparse, 128-token pages)."""
    return arch.attention_indexed


def default_block_size(arch: ModelArchitecture, gpu: GpuModel) -> int:
    """16 on CUDA and ROCm; MLA the GPU's MLA backend block (gpus.json: CUTLASS MLA's 128 on Blackwell); sparse MLA 64.

    vllm/platforms/cuda.py: FlashMLA-sparse (DeepSeek V3.2, GLM-5) and FlashMLA use 64-token blocks,
    CUTLASS MLA on Blackwell 128.
    """
    if arch.compressed_sparse_mla:
        # DeepSeek V4: DeepseekSparseSWABackend.get_preferred_block_size() returns 256
        # (vllm/v1/attention/backends/mla/sparse_swa.py 0.33.0 L164-166).
        return 256
    if _block_sparse(arch):
        return MINIMAX_M3_BLOCK
    if arch.mla_indexed:
        return 64
    if arch.uses_mla:
        return gpu.mla_block_size
    return 16


def _cudagraph_mode(mode: str | None) -> str:
    """The compilation config's ``cudagraph_mode`` (None: FULL_AND_PIECEWISE, the default since 0.11)."""
    if mode is None:
        return CUDAGRAPH_MODES[0]
    name = str(mode).strip().upper()
    if name not in CUDAGRAPH_MODES:
        raise SizingError("cudagraph_mode", mode, "one of " + ", ".join(CUDAGRAPH_MODES))
    return name


#: ``--performance-mode`` values (config/vllm.py 0.17.0 L79 ``PerformanceMode``) and the first release with it.
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")
PERFORMANCE_MODE_SINCE = (0, 17, 0)


def _performance_mode(mode: str | None, accounting: VllmAccounting) -> str:
    """``--performance-mode`` as the release applies it: balanced before 0.17 (and in V0), else as given."""
    if mode is None or accounting.engine != "V1" or accounting.version < PERFORMANCE_MODE_SINCE:
        return "balanced"
    if mode not in PERFORMANCE_MODES:
        raise SizingError("performance_mode", mode, "one of " + ", ".join(PERFORMANCE_MODES))
    return mode


def graphs_in_budget(arch: ModelArchitecture, rs: ResolvedServing, accounting: VllmAccounting) -> bool:
    """Whether vLLM deducts its CUDA-graph estimate from the KV budget for this run.

    Not with ``--kv-cache-memory-bytes`` (no profiling: gpu_worker.py 0.33.0 L656-681), not under
    ``--enforce-eager``, not on a V2-runner model of 0.22-0.28 (its estimate is a stub returning 0).
    """
    if rs.extensible_kv_cache:
        return rs.cuda_graphs  # measured after capture (gpu_worker.py 0.34.0 L1098-1101, L1226-1240)
    estimate = accounting.cudagraph_in_budget
    if rs.cudagraph_memory_estimate is not None and accounting.engine == "V1" and accounting.version >= (0, 18, 0):
        # the variable exists from 0.18 (envs.py 0.18.0 L1636, "0"; "1" from 0.20.0 L1725)
        estimate = rs.cudagraph_memory_estimate
    return (
        estimate
        and rs.cuda_graphs
        and rs.kv_cache_memory_bytes is None
        and not accounting.v2_runner_without_cudagraph_estimate(rs.v2_runner)
    )


#: Architectures whose vLLM config class sets ``mamba_ssm_cache_dtype`` from config.json when it is ``auto``
#: (model_executor/models/config.py ``MODELS_CONFIG_MAP``): NemotronH's ``NemotronHForCausalLMConfig`` (0.15.1 L565-582:
#: the config's ``mamba_ssm_cache_dtype``, else float16; 0.20.0+ else float32, ``DEFAULT_MAMBA_SSM_CACHE_DTYPE``,
#: 0.34.0 L1143-1197 with its VL, Omni and Transcribe variants) and Qwen3.5's
#: ``Qwen3_5ForConditionalGenerationConfig`` (0.17.0 L625-645, 0.34.0 L1293-1320: the config's ``mamba_ssm_dtype``).
#: Their state dtype calculators take it for the recurrent state (mamba2_state_dtype / gated_delta_net_state_dtype,
#: layers/mamba/mamba_utils.py 0.34.0 L82-134; the conv state stays at ``mamba_cache_dtype``, the model's).
NEMOTRON_H_ARCHITECTURES = frozenset(
    {
        "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2",
        "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
        "Nemotron3_5TranscribeForConditionalGeneration",
    }
)  # fmt: skip
QWEN3_5_ARCHITECTURES = frozenset(
    {
        "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
    }
)  # fmt: skip
NEMOTRON_H_SSM_DTYPE_SINCE = (0, 15, 1)
NEMOTRON_H_FLOAT32_DEFAULT_SINCE = (0, 20, 0)
QWEN3_5_SSM_DTYPE_SINCE = (0, 17, 0)
_STATE_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def mamba_ssm_dtype_bytes(arch: ModelArchitecture, given: str | None, accounting: VllmAccounting) -> int:
    """Bytes per element of the recurrent (SSM) state vLLM allocates; 0: the model dtype's (``auto``).

    ``--mamba-ssm-cache-dtype`` wins; at ``auto`` the architecture's config class decides (see above), from the
    first release read that has it (earlier ones are sized at the model dtype: fewer bytes, never a denial).
    """
    if given is not None and given != "auto":
        if given not in _STATE_DTYPE_BYTES:
            raise SizingError("mamba_ssm_cache_dtype", given, "one of auto, " + ", ".join(_STATE_DTYPE_BYTES))
        return _STATE_DTYPE_BYTES[given]
    v = accounting.version
    name: str | None = None
    if arch.architecture in NEMOTRON_H_ARCHITECTURES and v >= NEMOTRON_H_SSM_DTYPE_SINCE:
        name = arch.mamba_ssm_dtype or ("float32" if v >= NEMOTRON_H_FLOAT32_DEFAULT_SINCE else "float16")
    elif arch.architecture in QWEN3_5_ARCHITECTURES and v >= QWEN3_5_SSM_DTYPE_SINCE:
        name = arch.mamba_ssm_dtype
    return _STATE_DTYPE_BYTES.get(name or "", 0)
