"""The ModelDeployment API (group ``fitgate.io``, version ``v1alpha1``) as pydantic models.

These models are the single source of truth: ``crds/fitgate.io_modeldeployments.yaml`` is generated
from them (``python -m fitgate.operator.crd``) and a test fails when the two drift. The webhook and
``fitgate check`` validate specs with them, so their error messages name the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator
from pydantic_core import PydanticCustomError

from fitgate.sizing.cudagraphs import MAX_CAPTURE_SIZE, MAX_CAPTURE_SIZES
from fitgate.sizing.errors import MAX_ERROR_CHARS, MAX_SHOWN_CHARS, clipped
from fitgate.sizing.hf_config import MAX_HF_OVERRIDES_BYTES, MAX_HF_OVERRIDES_DEPTH, json_depth
from fitgate.sizing.performance import MAX_REQUEST_RATE, MAX_TARGET_MS
from fitgate.workloads.flagvalues import human_int

GROUP = "fitgate.io"
VERSION = "v1alpha1"
KIND = "ModelDeployment"
PLURAL = "modeldeployments"
SINGULAR = "modeldeployment"
SHORT_NAMES = ("mdep",)

MAX_CONTEXT = 1 << 24


#: The most nodes one replica may span (``placement.nodesPerReplica``; ``fitgate check`` bounds an LWS group by it).
MAX_NODES_PER_REPLICA = 64


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ModelRef(_Spec):
    """Which checkpoint to serve."""

    name: str = Field(
        min_length=1,
        max_length=512,
        description="A Hugging Face repo id (org/name), a catalog name, or a directory path (a mounted PVC) "
        "in Hugging Face layout.",
    )
    revision: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="Branch, tag or commit sha of a Hub repo. Default: main. Resolved to a commit sha in status.",
    )
    source: Literal["auto", "hub", "catalog", "path"] = Field(
        default="auto",
        description="Where name is resolved: hub (the Hugging Face Hub), catalog (fitgate's built-in catalog, "
        "for air-gapped clusters), path (a directory), or auto (a path if it looks like one, else the Hub, "
        "falling back to the catalog when the Hub is unreachable). Default: auto.",
    )
    hf_overrides: dict[str, Any] | None = Field(
        default=None,
        alias="hfOverrides",
        description="vLLM's --hf-overrides: keys of config.json replaced before the model is read (e.g. "
        "rope_scaling to turn on YaRN, which raises the longest maxModelLen vLLM accepts). At most 16 KiB of JSON.",
    )

    @field_validator("hf_overrides")
    @classmethod
    def _bounded_overrides(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Bounded in size and depth before anything reads it (hardening: a user's object)."""
        if value is None:
            return None
        text = json.dumps(value, sort_keys=True, default=str)
        if len(text) > MAX_HF_OVERRIDES_BYTES:
            raise PydanticCustomError(
                "hf_overrides",
                "at most {limit} bytes of JSON (got {n})",
                {"limit": MAX_HF_OVERRIDES_BYTES, "n": len(text)},
            )
        if json_depth(value) > MAX_HF_OVERRIDES_DEPTH:
            raise PydanticCustomError("hf_overrides", "nested at most {limit} deep", {"limit": MAX_HF_OVERRIDES_DEPTH})
        return value


class Engine(_Spec):
    """The inference engine and the release whose memory accounting applies."""

    name: Literal["vllm"] = Field(default="vllm", description="The engine. Only vllm is supported. Default: vllm.")
    version: str | None = Field(
        default=None,
        max_length=128,
        # a release, an image tag or a digest; one that names no release (a vendor's tag such as gptoss, RHAIIS 3.2.1,
        # a sha256 digest) is sized as the newest modelled release with a warning, never refused (hunt37 F6)
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*$",
        description="vLLM release (0.34.0) or image tag (v0.34.0-cu130); a release newer than fitgate models, or a "
        "tag or digest that names no vLLM release, is sized as the newest modelled one, with a note. 'unknown' (or a "
        "tag naming no release): a memory misfit that another modelled release's accounting admits is Unknown "
        "(ReleaseUnknown), not DoesNotFit. Default: the newest modelled release (0.34.0).",
    )


class SpeculativeConfig(_Spec):
    """--speculative-config: speculative decoding, as far as it changes memory."""

    method: Literal[
        "mtp",
        "ngram",
        "ngram_gpu",
        "suffix",
        "eagle",
        "eagle3",
        "draft_model",
        "dflash",
        "dspark",
        # a drafter vLLM 0.30-0.32 runs (config/speculative.py 0.32.0 L74-77) or a class of the user's (hunt78 F1)
        "mlp_speculator",
        "medusa",
        "custom_class",
        "extract_hidden_states",
        # vLLM 0.34's MTPModelTypes (config/speculative.py L53-84), which it reads as mtp (hunt37 F4)
        "deepseek_mtp",
        "dots3_note_mtp",
        "mimo_mtp",
        "mimo_v2_mtp",
        "glm4_moe_mtp",
        "glm4_moe_lite_mtp",
        "glm_ocr_mtp",
        "ernie_mtp",
        "nemotron_h_mtp",
        "nemotron3_5_transcribe_mtp",
        "exaone_moe_mtp",
        "exaone4_5_mtp",
        "qwen3_next_mtp",
        "qwen4_exp_mtp",
        "qwen3_5_mtp",
        "longcat_flash_mtp",
        "bailing_hybrid_v3_mtp",
        "minimax_m3_mtp",
        "bailing_hybrid_mtp",
        "kimi_k3_mtp",
        "pangu_ultra_moe_mtp",
        "step3p5_mtp",
        "step5_mtp",
        "hy_v3_mtp",
        "hy_v4_mtp",
        "gemma4_mtp",
        "inkling_mtp",
        "glm5_next_mtp",
    ] = Field(
        description="vLLM's method. mtp (and the *_mtp names vLLM reads as mtp: deepseek_mtp, qwen3_next_mtp, ...): "
        "the checkpoint's own multi-token-prediction layers, counted on the last pipeline stage (weights and KV "
        "cache). ngram, ngram_gpu, suffix, extract_hidden_states: no drafter memory. eagle, eagle3, draft_model, "
        "dflash, dspark, mlp_speculator, medusa, custom_class: a drafter from another checkpoint, not counted (the "
        "status says so)."
    )

    @field_validator("method")
    @classmethod
    def _mtp_names(cls, value: str) -> str:
        """Every ``*_mtp`` name is vLLM's ``mtp`` (a deprecation warning in 0.34)."""
        return "mtp" if value.endswith("_mtp") else value

    num_speculative_tokens: int | None = Field(
        default=None,
        alias="numSpeculativeTokens",
        ge=1,
        le=64,
        description="Draft tokens per step. Default, as vLLM fills it in: mtp the checkpoint's MTP layers, suffix 8, "
        "a drafter checkpoint 1 (its n_predict, which fitgate does not read; its memory is not counted either).",
    )


# --- LoRA, weight offload, KV connectors, multimodal (issue 20; docs/lora-offload-multimodal.md) ---


class LoraSpec(_Spec):
    """--enable-lora and its slots: the GPU memory vLLM reserves for adapters."""

    max_loras: int = Field(
        default=1, alias="maxLoras", ge=1, le=1024, description="--max-loras: adapters in one batch. Default: 1."
    )
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = Field(
        default=16, alias="maxLoraRank", description="--max-lora-rank: the rank every slot is sized for. Default: 16."
    )
    max_cpu_loras: int | None = Field(
        default=None,
        alias="maxCpuLoras",
        ge=1,
        le=65536,
        description="--max-cpu-loras: adapters cached in host memory. Default: maxLoras.",
    )
    fully_sharded_loras: bool = Field(
        default=False, alias="fullyShardedLoras", description="--fully-sharded-loras. Default: false."
    )
    lora_dtype: Literal["auto", "float16", "bfloat16"] = Field(
        default="auto", alias="loraDtype", description="--lora-dtype. Default: auto (the model dtype)."
    )
    target_modules: list[str] | None = Field(
        default=None,
        alias="targetModules",
        max_length=64,
        description="--lora-target-modules: only these module suffixes get slots. Default: every linear module.",
    )


class KVTransferSpec(_Spec):
    """--kv-transfer-config, as far as it changes memory (a disaggregated prefill/decode pair, a KV cache store)."""

    connector: str = Field(
        max_length=100,
        pattern=r"^[A-Za-z0-9_]+$",
        description="kv_connector: NixlConnector, LMCacheConnectorV1, OffloadingConnector, MultiConnector, ...",
    )
    role: Literal["kv_producer", "kv_consumer", "kv_both"] | None = Field(
        default=None,
        description="kv_role: kv_producer (the prefill side), kv_consumer (the decode side, whose pool holds the "
        "decode KV), kv_both.",
    )
    buffer_device: Literal["cuda", "cpu"] | None = Field(
        default=None, alias="bufferDevice", description="kv_buffer_device (NIXL: cpu keeps a host copy of the KV)."
    )


class KVOffloadingSpec(_Spec):
    """--kv-offloading-size / --kv-offloading-backend: a host (CPU) tier for the KV cache."""

    size_gib: float = Field(
        alias="sizeGiB", gt=0, le=1 << 20, description="--kv-offloading-size in GiB, all TP ranks together."
    )
    backend: Literal["native", "lmcache"] = Field(default="native", description="--kv-offloading-backend.")


class MultimodalSpec(_Spec):
    """Multimodal settings: what the encoder's profiling pass and the processor cache take."""

    limit_per_prompt: dict[str, int] | None = Field(
        default=None,
        alias="limitPerPrompt",
        max_length=8,
        description="--limit-mm-per-prompt, e.g. {image: 2, video: 0}. Default: the model's maximum.",
    )

    encoder_tp_mode: Literal["weights", "data"] = Field(
        default="weights", alias="encoderTpMode", description="--mm-encoder-tp-mode. Default: weights."
    )
    processor_cache_gib: float | None = Field(
        default=None,
        alias="processorCacheGiB",
        ge=0,
        le=1 << 20,
        description="--mm-processor-cache-gb (host memory, one copy per API server and engine). Default: 4.",
    )
    max_pixels: int | None = Field(
        default=None,
        alias="maxPixels",
        ge=1,
        le=1 << 34,
        description="--mm-processor-kwargs max_pixels (or size.longest_edge): the largest image Qwen2/2.5/3-VL's "
        "processor makes, which the encoder is profiled at. Default: the checkpoint's (16384 tokens).",
    )
    profile_image_pixels: int | None = Field(
        default=None,
        alias="profileImagePixels",
        ge=1,
        le=1 << 34,
        description="--limit-mm-per-prompt's image width x height ({image: {count, width, height}}): the encoder is "
        "profiled with images no larger (as many as at the largest size). Default: the processor's largest image.",
    )
    skip_profiling: bool = Field(
        default=False,
        alias="skipProfiling",
        description="--skip-mm-profiling: vLLM leaves the encoder out of its memory profile (the KV cache is "
        "sized without the encoder's activation). Default: false.",
    )


class Serving(_Spec):
    """vLLM engine settings that change memory; unset fields take vLLM's defaults."""

    max_model_len: (
        Annotated[int, Field(ge=-1, le=MAX_CONTEXT)]
        | Annotated[str, Field(pattern=r"^(auto|-1|[0-9]{1,12}(\.[0-9]{1,6})?[kKmMgG]?)$")]
        | None
    ) = Field(
        default=None,
        alias="maxModelLen",
        description="--max-model-len: the longest request in tokens (a number, or vLLM's sizes: 128k = 128,000, "
        "128K = 131,072, 1m), or auto / -1: the longest whose one request fits the KV cache, as vLLM 0.14+ picks "
        "it. Default: the model's context length.",
    )

    @field_validator("max_model_len", mode="wrap")
    @classmethod
    def _one_error_for_max_model_len(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """VLLM's spellings (hunt37 F3: ``human_readable_int``, -1 for auto), and one message naming the forms."""
        try:
            checked = handler(value)
        except ValidationError:
            checked = None
        if isinstance(checked, str) and checked != "auto":
            checked = human_int(checked)
        if checked == -1:
            return "auto"
        if checked == "auto" or (isinstance(checked, int) and 1 <= checked <= MAX_CONTEXT):
            return checked
        if value is None:
            return None
        raise PydanticCustomError(
            "max_model_len", "a number of tokens from 1 to {limit} (or 128k, 128K), or auto", {"limit": MAX_CONTEXT}
        )

    allow_long_max_model_len: bool = Field(
        default=False,
        alias="allowLongMaxModelLen",
        description="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM accepts a maxModelLen past the model's derived length "
        "(with a warning). Default: false.",
    )
    kv_cache_memory_bytes: int | None = Field(
        default=None,
        alias="kvCacheMemoryBytes",
        ge=1,
        le=1 << 50,
        description="--kv-cache-memory-bytes: the KV pool per GPU in bytes; vLLM (0.10.2+) then skips profiling and "
        "ignores gpuMemoryUtilization. Default: sized from gpuMemoryUtilization.",
    )
    cudagraph_memory_estimate: bool | None = Field(
        default=None,
        alias="cudagraphMemoryEstimate",
        description="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (vLLM 0.18+): whether vLLM deducts its CUDA-graph "
        "estimate from the KV budget. Default: the release's (on from 0.20).",
    )
    use_v1: bool | None = Field(
        default=None,
        alias="useV1",
        description="VLLM_USE_V1 (vLLM 0.8-0.10): false sizes the V0 engine. Default: unset, V1 except where vLLM "
        "falls back to V0 (a T4 or V100 before 0.10.2, an fp8 KV cache off Hopper).",
    )
    flashinfer_sampler: bool | None = Field(
        default=None,
        alias="flashinferSampler",
        description="VLLM_USE_FLASHINFER_SAMPLER with FlashInfer installed (as in vLLM's image): true samples with "
        "FlashInfer's top-k/top-p kernels, false with PyTorch's sort (a larger profiling pass). Default: the "
        "release's (on in 0.8-0.11.0, opt-in from 0.11.1).",
    )
    runner: Literal["auto", "generate", "pooling"] = Field(
        default="auto",
        description="--runner: pooling serves an embedding, reranker or reward model (no lm_head, no sampler); a "
        "workload's --task embed|score|classify|reward or --convert embed|classify|reward reads as pooling. "
        "Default: auto, vLLM's: pooling for a checkpoint that ships a Sentence Transformers pooling module "
        "(modules.json), else generate.",
    )
    performance_mode: Literal["balanced", "interactivity", "throughput"] | None = Field(
        default=None,
        alias="performanceMode",
        description="--performance-mode (vLLM 0.17+): throughput doubles the default maxNumSeqs and "
        "maxNumBatchedTokens, interactivity captures every CUDA-graph size up to 32. Default: balanced.",
    )
    cudagraph_mode: Literal["FULL_AND_PIECEWISE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "NONE"] | None = Field(
        default=None,
        alias="cudagraphMode",
        description="--compilation-config cudagraph_mode: which CUDA graphs vLLM captures (NONE as --enforce-eager). "
        "Default: the release's (FULL_AND_PIECEWISE).",
    )
    cudagraph_capture_sizes: list[Annotated[int, Field(ge=1, le=MAX_CAPTURE_SIZE)]] | None = Field(
        default=None,
        alias="cudagraphCaptureSizes",
        min_length=1,
        max_length=MAX_CAPTURE_SIZES,
        description="--cudagraph-capture-sizes: the batch sizes vLLM captures. Default: vLLM's list.",
    )
    max_cudagraph_capture_size: int | None = Field(
        default=None,
        alias="maxCudagraphCaptureSize",
        ge=1,
        le=MAX_CAPTURE_SIZE,
        description="--max-cudagraph-capture-size: the largest captured batch. Default: 2 x maxNumSeqs, at most 512.",
    )
    kv_cache_dtype: Literal[
        "auto",
        "bfloat16",
        "float16",
        "fp8",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_inc",
        "fp8_ds_mla",
        "int8_per_token_head",
        "fp8_per_token_head",
        "int4_per_token_head",
        "nvfp4",
        "nvfp4_4over6",
        "nvfp4_ds_mla",
        "turboquant_k8v4",
        "turboquant_4bit_nc",
        "turboquant_k3v4_nc",
        "turboquant_3bit_nc",
        "octave_k3v4",
        "octave_k3v3",
        "octave_k3v3_compact",
        "ultraquant_4bit",
    ] = Field(
        default="auto",
        alias="kvCacheDtype",
        description="--kv-cache-dtype: auto stores the KV cache in the model dtype; fp8 halves it. The values "
        "vLLM 0.34 accepts; the packed sub-byte ones (int4_per_token_head, nvfp4*, turboquant_*, octave_*, "
        "ultraquant_4bit) are not sized: the verdict is Unknown. Default: auto.",
    )
    mamba_ssm_cache_dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto",
        alias="mambaSsmCacheDtype",
        description="--mamba-ssm-cache-dtype: the Mamba / gated-delta-net recurrent state's dtype. auto: the "
        "model's, or what config.json sets for NemotronH and Qwen3.5 (float32), as vLLM does. Default: auto.",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32", "half", "float"] = Field(
        default="auto",
        description="--dtype of the weights and activations (half is float16, float is float32, as in vLLM). "
        "Default: auto (the checkpoint's).",
    )

    @field_validator("dtype")
    @classmethod
    def _dtype_spelling(cls, value: str) -> str:
        """The spellings ``half`` and ``float`` vLLM takes (config/model.py 0.34.0 L106; hunt37 F2: T4 / V100)."""
        return {"half": "float16", "float": "float32"}.get(value, value)

    quantization: (
        Literal[
            "fp8",
            "bitsandbytes",
            "experts_int8",
            "fp8_per_tensor",
            "fp8_per_block",
            "fp8_per_channel",
            "mxfp8",
            "mxfp4",
            "int8_per_channel_weight_only",
            "nvfp4_per_token",
            "ptpc_fp8",
            "online",
            "lut_b_moe",
            "mxfp4_hadamard32",
            "torchao",
            "humming",
            "gguf",
            "deepspeedfp",
            "tpu_int8",
            "neuron_quant",
            "rtn",  # hunt208 F1: round-to-nearest at load time (vLLM 0.10.1-0.14+), Unknown
            # a pre-quantized checkpoint's own method, which vLLM takes to pick the kernel (model cards pass
            # --quantization awq / modelopt_fp4; vLLM 0.34 QuantizationMethods): the checkpoint decides the bytes
            # (hunt37 F1); on an unquantized checkpoint vLLM refuses them, and so does fitgate
            "awq",
            "auto_awq",
            "awq_marlin",
            "gptq",
            "auto_gptq",
            "gptq_marlin",
            "gptq_bitblas",
            "marlin",
            "compressed-tensors",
            "modelopt",
            "modelopt_fp4",
            "modelopt_mxfp8",
            "modelopt_mixed",
            "fbgemm_fp8",
            "w4afp8",
            "moe_wna16",
            "quark",
            "inc",
            "auto-round",
            "gpt_oss_mxfp4",
            "deepseek_v4_fp8",
            "bitblas",
            "hqq",
            "qqq",
            "aqlm",
        ]
        | None
    ) = Field(
        default=None,
        description="--quantization applied while loading an unquantized checkpoint: vLLM's online methods and "
        "shorthands (fp8, fp8_per_tensor, fp8_per_block, fp8_per_channel, mxfp8, mxfp4 (from vLLM 0.30), "
        "int8_per_channel_weight_only, nvfp4_per_token, experts_int8, bitsandbytes, ROCm's ptpc_fp8) are sized; "
        "online, lut_b_moe, mxfp4_hadamard32, torchao, humming, gguf, deepspeedfp, tpu_int8 and neuron_quant are not "
        "(the verdict is Unknown); a quantized checkpoint's own method (awq, gptq, modelopt_fp4, compressed-tensors "
        "...) is taken, the checkpoint's config deciding the bytes. "
        "Default: none (a quantized checkpoint is detected from its config).",
    )
    tensor_parallel_size: int = Field(
        default=1,
        alias="tensorParallelSize",
        ge=1,
        le=64,
        description="--tensor-parallel-size: GPUs each layer is split over. Default: 1.",
    )
    pipeline_parallel_size: int = Field(
        default=1,
        alias="pipelineParallelSize",
        ge=1,
        le=64,
        description="--pipeline-parallel-size: stages the layers are split into. Default: 1.",
    )
    pp_layer_partition: str | None = Field(
        default=None,
        alias="ppLayerPartition",
        max_length=320,
        pattern=r"^[0-9]{1,4}(,[0-9]{1,4}){0,63}$",
        description="VLLM_PP_LAYER_PARTITION: the layers of each pipeline stage (24,40), one count per stage "
        "summing to the model's layers, as vLLM requires. Default: vLLM's even split.",
    )
    gpu_memory_utilization: float | None = Field(
        default=None,
        alias="gpuMemoryUtilization",
        gt=0,
        le=1,
        description="--gpu-memory-utilization: the fraction of each GPU's total memory vLLM may use. Default: the "
        "release's (0.92 from vLLM 0.20, 0.9 before).",
    )
    max_num_seqs: int | None = Field(
        default=None,
        alias="maxNumSeqs",
        ge=1,
        le=65536,
        description="--max-num-seqs. Default: vLLM's (1024 on >= 70 GiB GPUs other than A100, else 256).",
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        alias="maxNumBatchedTokens",
        ge=1,
        le=MAX_CONTEXT,
        description="--max-num-batched-tokens; sets the activation peak. Default: vLLM's (8192 or 2048 by GPU).",
    )
    enable_prefix_caching: bool = Field(
        default=True,
        alias="enablePrefixCaching",
        description="--enable-prefix-caching. Does not change the memory plan. Default: true.",
    )
    enable_chunked_prefill: bool | None = Field(
        default=None,
        alias="enableChunkedPrefill",
        description="--[no-]enable-chunked-prefill. false without maxNumBatchedTokens makes vLLM's step budget at "
        "least maxModelLen (a larger activation peak). Default: vLLM's (on).",
    )
    # vLLM 0.34 extensible KV cache (docs/vllm-releases.md section 12)
    enable_extensible_kv_cache: bool | None = Field(
        default=None,
        alias="enableExtensibleKvCache",
        description="--[no-]enable-extensible-kv-cache (vLLM 0.34+): the KV cache is sized after warm-up and "
        "gpuMemoryUtilization defaults to 1.0. Ignored before 0.34. Default: vLLM's (on, unless "
        "--kv-cache-memory-bytes).",
    )
    speculative_config: SpeculativeConfig | None = Field(
        default=None,
        alias="speculativeConfig",
        description="--speculative-config. Default: none (no speculative decoding).",
    )
    # --- data / expert / decode-context parallelism (fitgate.sizing.parallel, docs/parallelism.md) ---
    data_parallel_size: int | None = Field(
        default=None,
        alias="dataParallelSize",
        ge=1,
        le=1024,
        description="--data-parallel-size as vLLM is given it: the engine ranks of the whole deployment, which the "
        "expert-parallel group spans (TP x DP GPUs). Differs from placement.dataParallelSize (the ranks one replica's "
        "pods hold) only when pods run a share of the ranks each (--data-parallel-rank). Default: "
        "placement.dataParallelSize.",
    )
    data_parallel_size_local: int | None = Field(
        default=None,
        alias="dataParallelSizeLocal",
        ge=0,
        le=1024,
        description="--data-parallel-size-local: engine ranks per node; fewer than dataParallelSize puts the "
        "expert-parallel group on several nodes (DeepEP then adds RDMA buffers). Default: placement.dataParallelSize "
        "/ placement.nodesPerReplica.",
    )
    enable_expert_parallel: bool = Field(
        default=False,
        alias="enableExpertParallel",
        description="--enable-expert-parallel: each GPU of the TP x DP group holds whole experts (their share, the "
        "remainder on the first ranks) instead of a TP slice of every expert. Default: false.",
    )
    enable_eplb: bool = Field(
        default=False, alias="enableEplb", description="--enable-eplb (needs enableExpertParallel). Default: false."
    )
    num_redundant_experts: int = Field(
        default=0,
        alias="numRedundantExperts",
        ge=0,
        le=65536,
        description="--eplb-config num_redundant_experts: extra expert copies per MoE layer spread over the EP "
        "group (needs enableEplb). Default: 0.",
    )
    all2all_backend: (
        Literal[
            "allgather_reducescatter",
            "deepep_high_throughput",
            "deepep_low_latency",
            "deepep_v2",
            "mori",
            "mori_high_throughput",
            "mori_low_latency",
            "moonep",
            "nixl_ep",
            "flashinfer_all2allv",
            "flashinfer_nvlink_two_sided",
            "flashinfer_nvlink_one_sided",
            "naive",
            "pplx",
        ]
        | None
    ) = Field(
        default=None,
        alias="all2allBackend",
        description="--all2all-backend (or VLLM_ALL2ALL_BACKEND): DeepEP's buffers are counted per GPU; other "
        "backends' are named in the status. Default: allgather_reducescatter.",
    )
    decode_context_parallel_size: int = Field(
        default=1,
        alias="decodeContextParallelSize",
        ge=1,
        le=64,
        description="--decode-context-parallel-size: each GPU holds that share of every request's KV cache "
        "(a divisor of tensorParallelSize). Default: 1.",
    )
    # --- issue 20: CUDA graphs, block size, LoRA, weight offload, KV connectors, multimodal ---
    enforce_eager: bool = Field(
        default=False,
        alias="enforceEager",
        description="--enforce-eager: no CUDA graphs (their estimate leaves the budget). Default: false.",
    )
    block_size: int | None = Field(
        default=None,
        alias="blockSize",
        ge=1,
        le=4096,
        description="--block-size: tokens per KV block (1, 8 or a multiple of 16). Default: the backend's (16).",
    )
    lora: LoraSpec | None = Field(default=None, description="--enable-lora and its slots. Default: no LoRA.")
    cpu_offload_gib: float = Field(
        default=0,
        alias="cpuOffloadGiB",
        ge=0,
        le=1 << 20,
        description="--cpu-offload-gb: GiB of weights per GPU held in host memory. Default: 0.",
    )
    kv_transfer: KVTransferSpec | None = Field(
        default=None, alias="kvTransfer", description="--kv-transfer-config. Default: none."
    )
    kv_offloading: KVOffloadingSpec | None = Field(
        default=None, alias="kvOffloading", description="--kv-offloading-size / -backend. Default: none."
    )
    multimodal: MultimodalSpec | None = Field(
        default=None, description="Multimodal encoder settings. Default: the model's (ignored for text models)."
    )


class WorkloadSpec(_Spec):
    """The peak the service must hold, checked against the KV cache pool."""

    concurrent_requests: int = Field(
        alias="concurrentRequests",
        ge=1,
        le=1 << 20,
        description="Requests in flight at the same time over all replicas: each replica's KV pool must hold "
        "ceil(concurrentRequests / replicas) of them.",
    )
    context_tokens: int = Field(
        alias="contextTokens", ge=1, le=MAX_CONTEXT, description="Tokens (prompt + output) of each request."
    )
    # issue 24: the load and latency targets the speed estimate is checked against (status.performance)
    input_tokens: int | None = Field(
        default=None,
        alias="inputTokens",
        ge=1,
        le=MAX_CONTEXT,
        description="Prompt tokens of each request (a benchmark's ISL); with outputTokens, status.performance "
        "estimates TTFT and TPOT at this load.",
    )
    output_tokens: int | None = Field(
        default=None, alias="outputTokens", ge=1, le=MAX_CONTEXT, description="Generated tokens of each request (OSL)."
    )
    request_rate: float | None = Field(
        default=None,
        alias="requestRate",
        gt=0,
        le=MAX_REQUEST_RATE,
        allow_inf_nan=False,
        description="Requests per second arriving at all replicas (open loop); one replica's concurrency follows "
        "from Little's law. Default: concurrentRequests in flight.",
    )
    ttft_ms: float | None = Field(
        default=None,
        alias="ttftMs",
        gt=0,
        le=MAX_TARGET_MS,
        allow_inf_nan=False,
        description="Target mean time to first token in ms: status.performance says whether one replica meets it "
        "and how many replicas would.",
    )
    tpot_ms: float | None = Field(
        default=None,
        alias="tpotMs",
        gt=0,
        le=MAX_TARGET_MS,
        allow_inf_nan=False,
        description="Target mean time per output token in ms.",
    )


class TolerationSpec(_Spec):
    """A toleration, as in a Pod's spec.tolerations (NoSchedule/NoExecute taints it tolerates)."""

    key: str = Field(default="", max_length=317, description="The taint key; empty with Exists: every taint.")
    operator: Literal["Equal", "Exists"] = Field(default="Equal", description="Equal (the default) or Exists.")
    value: str = Field(default="", max_length=253, description="The taint value (Equal).")
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="", description="The taint effect; empty: every effect."
    )


class GpuShare(_Spec):
    """A fraction of a GPU per pod, as HAMi or Run:ai grant it (at most one field)."""

    hami_gpu_mem_mib: int | None = Field(
        default=None,
        alias="hamiGpuMemMiB",
        ge=1,
        le=16 * 1024 * 1024,
        description="HAMi: the pod's nvidia.com/gpumem limit, MiB of the card.",
    )
    hami_gpu_mem_percentage: int | None = Field(
        default=None,
        alias="hamiGpuMemPercentage",
        ge=1,
        le=100,
        description="HAMi: the pod's nvidia.com/gpumem-percentage limit.",
    )
    runai_gpu_fraction: float | None = Field(
        default=None, alias="runaiGpuFraction", gt=0, le=1, description="Run:ai: the pod's gpu-fraction annotation."
    )
    runai_gpu_memory_mib: int | None = Field(
        default=None,
        alias="runaiGpuMemoryMiB",
        ge=1,
        le=16 * 1024 * 1024,
        description="Run:ai: the pod's gpu-memory annotation (MiB).",
    )


class Placement(_Spec):
    """Which GPU nodes the deployment may land on."""

    gpu_product: str | None = Field(
        default=None,
        alias="gpuProduct",
        max_length=128,
        description="A GPU Feature Discovery product (nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3), an "
        "AMD product name or a catalog GPU name. Default: any GPU node.",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        alias="nodeSelector",
        description="Node labels the nodes must carry, as in a Pod's nodeSelector. Default: none.",
    )
    nodes_per_replica: int = Field(
        default=1,
        alias="nodesPerReplica",
        ge=1,
        le=MAX_NODES_PER_REPLICA,
        description="Nodes one replica spans (multi-node serving, e.g. a LeaderWorkerSet group): each node "
        "holds tensorParallelSize x pipelineParallelSize x dataParallelSize / nodesPerReplica GPUs. Default: 1.",
    )
    data_parallel_size: int = Field(
        default=1,
        alias="dataParallelSize",
        ge=1,
        le=1024,
        description="--data-parallel-size: engine ranks in one replica, each of tensorParallelSize x "
        "pipelineParallelSize GPUs with the same memory plan, so one replica needs that many times the GPUs "
        "(on nodesPerReplica nodes). Default: 1.",
    )
    resource_claim_template_name: str | None = Field(
        default=None,
        alias="resourceClaimTemplateName",
        max_length=253,
        description="A ResourceClaimTemplate (resource.k8s.io, same namespace) the pods get their GPUs from: "
        "its GPU request's DeviceClass and CEL selectors choose the devices of the ResourceSlices, its count is "
        "the GPUs per replica. Default: GPUs from node labels and allocatable resources.",
    )
    resource_claims_per_pod: int = Field(
        default=1,
        alias="resourceClaimsPerPod",
        ge=1,
        le=64,
        description="How many of a pod's claims use resourceClaimTemplateName, each getting its GPU request's "
        "devices (llm-d's one GPU + NIC claim per rank: four claims of a one-GPU template for TP 4). Default: 1.",
    )
    tolerations: list[TolerationSpec] = Field(
        default_factory=list,
        max_length=64,
        description="The pods' tolerations: nodes with NoSchedule/NoExecute taints not tolerated, and cordoned "
        "nodes, are not placement candidates. Default: none.",
    )
    gpu_share: GpuShare | None = Field(
        default=None,
        alias="gpuShare",
        description="The part of a GPU each pod gets from HAMi or Run:ai (time-slicing and MPS are read from "
        "the nodes' labels). Default: whole GPUs.",
    )


class Policy(_Spec):
    """What the admission webhook does with a misfit, and when it cannot tell."""

    on_misfit: Literal["Deny", "Reject", "Warn"] = Field(
        default="Deny",
        alias="onMisfit",
        description="Deny refuses a DoesNotFit deployment at apply time (Reject, its older name, is read as "
        "Deny); Warn admits it with a warning. Default: Deny.",
    )
    on_unknown: Literal["Allow", "Warn", "Deny"] | None = Field(
        default=None,
        alias="onUnknown",
        description="What admission does with an Unknown verdict (the checkpoint not resolved yet and in no "
        "catalog or cache, or no GPU inventory): Allow admits it, Warn admits it with a warning (it may not "
        "fit), Deny refuses it (applies are blocked while the Hub is unreachable). Default: the operator's "
        "(chart value operator.unknownPolicy, Warn).",
    )


class Observe(_Spec):
    """Which pods serve this deployment, so that the operator reads what vLLM actually did."""

    selector: dict[str, str] = Field(
        min_length=1,
        description="Labels of the pods that serve this deployment (matchLabels, in the deployment's namespace). "
        "Their vLLM /metrics are read; a pod that failed to start has its last log lines read.",
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="The port of vLLM's /metrics. Default: the container port named metrics or http, else the "
        "first container port, else 8000 (vllm serve's).",
    )
    interval_seconds: int = Field(
        default=30,
        alias="intervalSeconds",
        ge=1,
        le=3600,
        description="Seconds between two reads of each pod. Default: 30.",
    )


class Economics(_Spec):
    """What the cluster pays for its GPUs, for the cost fields of status.observed."""

    gpu_hour_price_usd: float | None = Field(
        default=None,
        alias="gpuHourPriceUsd",
        ge=0.001,
        le=1000,
        description="USD per GPU-hour of this deployment's GPUs (0.001 to 1000, as the CLI's --gpu-hour-price). "
        "Default: the operator's price for the GPU product (chart values operator.prices, then "
        "operator.pricesConfigMap, then the dated list-price table unless operator.listPrices is false), else no "
        "cost figures.",
    )


@dataclass(frozen=True)
class SpecRule:
    """A cross-field rule of the spec, written once: CEL for the API server, Python for the rest.

    The webhook, reconcile and ``fitgate check`` run the Python twin, so CI rejects exactly what
    ``kubectl apply`` rejects.
    """

    rule: str  # CEL, in the CRD's x-kubernetes-validations
    message: str
    field_path: str
    holds: Callable[[ModelDeploymentSpec], bool]
    got: Callable[[ModelDeploymentSpec], str]

    def crd(self) -> dict[str, Any]:
        """The rule as the CRD carries it."""
        return {"rule": self.rule, "message": self.message, "fieldPath": self.field_path}


SPEC_RULES: tuple[SpecRule, ...] = (
    SpecRule(
        "!has(self.serving) || (has(self.serving.tensorParallelSize) ? self.serving.tensorParallelSize : 1) * "
        "(has(self.serving.pipelineParallelSize) ? self.serving.pipelineParallelSize : 1) <= 64",
        "tensorParallelSize x pipelineParallelSize must be at most 64 GPUs",
        ".serving",
        lambda s: s.serving.tensor_parallel_size * s.serving.pipeline_parallel_size <= 64,
        lambda s: f"{s.serving.tensor_parallel_size} x {s.serving.pipeline_parallel_size}",
    ),
    SpecRule(
        "!has(self.workload) || !has(self.serving) || !has(self.serving.maxModelLen) || "
        "type(self.serving.maxModelLen) == string || self.workload.contextTokens <= self.serving.maxModelLen",
        "workload.contextTokens cannot exceed serving.maxModelLen",
        ".workload.contextTokens",
        lambda s: (
            s.workload is None
            or not isinstance(s.serving.max_model_len, int)
            or s.workload.context_tokens <= s.serving.max_model_len
        ),
        lambda s: f"{s.workload.context_tokens if s.workload else None} > maxModelLen {s.serving.max_model_len}",
    ),
    SpecRule(
        "!has(self.placement) || !has(self.placement.gpuShare) || "
        + " + ".join(
            f"(has(self.placement.gpuShare.{f}) ? 1 : 0)"
            for f in ("hamiGpuMemMiB", "hamiGpuMemPercentage", "runaiGpuFraction", "runaiGpuMemoryMiB")
        )
        + " <= 1",
        "placement.gpuShare takes one of hamiGpuMemMiB, hamiGpuMemPercentage, runaiGpuFraction, runaiGpuMemoryMiB",
        ".placement.gpuShare",
        lambda s: s.placement.gpu_share is None or len(s.placement.gpu_share.model_fields_set) <= 1,
        lambda s: ", ".join(sorted(s.placement.gpu_share.model_fields_set)) if s.placement.gpu_share else "",
    ),
    SpecRule(
        "!has(self.workload) || (has(self.workload.inputTokens) == has(self.workload.outputTokens) && "
        "(!has(self.workload.inputTokens) || "
        "self.workload.inputTokens + self.workload.outputTokens <= self.workload.contextTokens))",
        "workload.inputTokens and workload.outputTokens go together, and their sum cannot exceed contextTokens",
        ".workload",
        lambda s: (
            s.workload is None
            or (s.workload.input_tokens is None and s.workload.output_tokens is None)
            or (
                s.workload.input_tokens is not None
                and s.workload.output_tokens is not None
                and s.workload.input_tokens + s.workload.output_tokens <= s.workload.context_tokens
            )
        ),
        lambda s: (
            f"inputTokens {s.workload.input_tokens}, outputTokens {s.workload.output_tokens}" if s.workload else ""
        ),
    ),
    SpecRule(
        "!has(self.workload) || has(self.workload.inputTokens) || "
        "!(has(self.workload.requestRate) || has(self.workload.ttftMs) || has(self.workload.tpotMs))",
        "workload.requestRate, ttftMs and tpotMs need inputTokens and outputTokens (the load they are estimated at)",
        ".workload",
        lambda s: (
            s.workload is None
            or s.workload.input_tokens is not None
            or (s.workload.request_rate is None and s.workload.ttft_ms is None and s.workload.tpot_ms is None)
        ),
        lambda s: (
            ", ".join(
                f"{k} {v:g}"
                for k, v in (
                    ("requestRate", s.workload.request_rate),
                    ("ttftMs", s.workload.ttft_ms),
                    ("tpotMs", s.workload.tpot_ms),
                )
                if v is not None
            )
            + " without inputTokens"
            if s.workload
            else ""
        ),
    ),
)


_CRD_RULES: list[Any] = [r.crd() for r in SPEC_RULES]


class ModelDeploymentSpec(_Spec):
    """A model served with vLLM: checkpoint, engine settings, expected workload and GPU placement."""

    model: ModelRef = Field(description="The checkpoint to serve.")
    engine: Engine = Field(default_factory=Engine, description="The inference engine.")
    serving: Serving = Field(default_factory=Serving, description="vLLM engine settings.")
    workload: WorkloadSpec | None = Field(default=None, description="The peak load the deployment must hold.")
    placement: Placement = Field(default_factory=Placement, description="Which GPU nodes it may land on.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=10000,
        description="Replicas that must be placed at once on free GPUs (a verdict of Unschedulable when they "
        "cannot). Default: 1.",
    )
    policy: Policy = Field(
        default_factory=Policy, description="What admission does with a misfit, and when it cannot tell."
    )
    observe: Observe | None = Field(
        default=None, description="The pods serving it, to compare what vLLM did with the prediction."
    )
    economics: Economics | None = Field(default=None, description="GPU prices for the measured cost figures.")

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        frozen=True,
        json_schema_extra={"x-kubernetes-validations": _CRD_RULES},
    )


# --------------------------------------------------------------------------------------------
# Status


class _Status(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class PerGPU(_Status):
    """The per-GPU memory plan on the best-fitting pool, in bytes."""

    capacity_bytes: int = Field(alias="capacityBytes", description="Device memory as CUDA reports it.")
    budget_bytes: int = Field(
        alias="budgetBytes",
        description="capacity x gpuMemoryUtilization (or weights + activation + non-torch + kvCacheMemoryBytes).",
    )
    weights_bytes: int = Field(alias="weightsBytes", description="Weights on one GPU after loading.")
    kv_cache_bytes: int = Field(alias="kvCacheBytes", description="The KV cache pool vLLM allocates.")
    activation_bytes: int = Field(alias="activationBytes", description="Peak of the profiling forward pass.")
    non_torch_bytes: int = Field(
        alias="nonTorchBytes",
        description="Non-torch memory the profiling pass adds (NCCL NVLS buffers, cuBLAS workspaces): "
        "'non-torch' in fitgate plan and in vLLM's log.",
    )
    cuda_graph_bytes: int = Field(
        default=0,
        alias="cudaGraphBytes",
        description="vLLM's CUDA-graph estimate, deducted from the budget from vLLM 0.20 (0 with enforceEager).",
    )
    headroom_bytes: int = Field(
        alias="headroomBytes",
        description="KV memory left after the workload (or one maxModelLen request); negative when it does not fit.",
    )


class KVCacheStatus(_Status):
    """The KV cache pool."""

    bytes_per_token: int = Field(alias="bytesPerToken", description="KV bytes of one token on one GPU.")
    capacity_tokens: int = Field(alias="capacityTokens", description="vLLM's 'GPU KV cache size' in tokens.")
    num_gpu_blocks: int | None = Field(
        default=None, alias="numGpuBlocks", description="num_gpu_blocks vLLM will allocate (cache_config_info)."
    )
    block_size: int | None = Field(default=None, alias="blockSize", description="Tokens per KV block.")
    max_concurrency: float = Field(alias="maxConcurrency", description="Requests of maxModelLen tokens the pool holds.")


class EngineArgStatus(_Status):
    """A recommended vLLM engine argument."""

    name: str = Field(description="The flag, e.g. --max-model-len.")
    value: str = Field(description="Its value.")
    reason: str = Field(description="Why this value.")


class PoolStatus(_Status):
    """The verdict on one pool of identical GPU nodes."""

    gpu_product: str = Field(alias="gpuProduct", description="The pool's GPU product (or MIG profile).")
    nodes: int = Field(description="Nodes in the pool.")
    gpus_per_node: int = Field(alias="gpusPerNode", description="Allocatable GPUs per node.")
    verdict: Literal["Fits", "Tight", "DoesNotFit", "Unknown"] = Field(description="The verdict on this pool.")
    headroom_bytes: int | None = Field(default=None, alias="headroomBytes", description="Headroom per GPU.")
    free_gpus: int | None = Field(
        default=None,
        alias="freeGpus",
        description="GPUs of the pool's schedulable nodes that no running pod or allocated ResourceClaim holds.",
    )
    sharing: str | None = Field(
        default=None, description="How the pool's cards are shared (time-slicing, MPS, HAMi, Run:ai), if they are."
    )
    source: str | None = Field(
        default=None,
        description="Where the GPUs were read: labels, dra or labels+dra; for a pool with no node yet (0 nodes) what "
        "names its GPU: placement, NodePool/<name> (Karpenter) or MachineDeployment/<namespace>/<name> "
        "(cluster-autoscaler).",
    )
    reason: str | None = Field(default=None, description="The reason of the verdict on this pool.")


class AlternativeStatus(_Status):
    """A pool of this cluster that would hold a deployment that does not fit, with its estimated speed."""

    gpu_product: str = Field(alias="gpuProduct", description="The pool's GPU product.")
    gpus: int = Field(description="GPUs per replica (tensorParallelSize x pipelineParallelSize).")
    tensor_parallel_size: int = Field(alias="tensorParallelSize", description="The tensor parallelism to set.")
    pipeline_parallel_size: int = Field(alias="pipelineParallelSize", description="The pipeline parallelism to set.")
    verdict: Literal["Fits", "Tight"] = Field(description="The verdict there.")
    headroom_bytes: int = Field(alias="headroomBytes", description="Headroom per GPU there.")
    decode_tokens_per_second: float = Field(
        alias="decodeTokensPerSecond", description="Estimated decode tokens/s of one replica (a roofline estimate)."
    )
    gpu_hours_per_million_output_tokens: float = Field(
        alias="gpuHoursPerMillionOutputTokens",
        description="GPU-hours per 1M output tokens at 40 % utilisation: what the alternatives are ranked by.",
    )


class PerformanceStatus(_Status):
    """One replica's estimated speed at the workload's inputTokens / outputTokens, and its latency targets."""

    ttft_ms: float = Field(
        alias="ttftMs", description="Estimated mean time to first token (ms) at the load; -1: unbounded (saturated)."
    )
    ttft_range_ms: list[float] = Field(
        alias="ttftRangeMs", description="The TTFT band [low, high]: the 10th-90th percentile of measured / estimated."
    )
    tpot_ms: float = Field(alias="tpotMs", description="Estimated mean time per output token (ms).")
    tpot_range_ms: list[float] = Field(alias="tpotRangeMs", description="The TPOT band [low, high], as ttftRangeMs.")
    concurrency: float = Field(description="Requests in flight on one replica (Little's law under a requestRate).")
    requests_per_second: float = Field(
        alias="requestsPerSecond", description="Requests one replica completes per second at that concurrency."
    )
    output_tokens_per_second: float = Field(
        alias="outputTokensPerSecond", description="Output tokens one replica returns per second, as a client counts."
    )
    saturated: bool = Field(description="The requestRate is more than the replicas can serve: TTFT grows unbounded.")
    replicas: int = Field(description="The replicas the load is split over (spec.replicas).")
    meets_targets: bool | None = Field(
        default=None, alias="meetsTargets", description="Whether that estimate meets workload.ttftMs / tpotMs."
    )
    replicas_for_targets: int | None = Field(
        default=None,
        alias="replicasForTargets",
        description="The fewest replicas whose estimate meets the targets; with a requestRate and no targets, the "
        "fewest that absorb it (not saturated). None up to 1024: absent.",
    )
    basis: str = Field(description="What the estimate rests on (fitted on published vLLM runs, not measured).")


class Condition(_Status):
    """A Kubernetes condition."""

    type: str = Field(
        description="Ready (evaluated against the current spec and GPU nodes), Fits (the verdict: True for "
        "Fits and, with reason Tight, for Tight) or Schedulable (False with reason NoNodeYet while no node of the "
        "placement's GPU exists, e.g. a pool that scales from zero)."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="One CamelCase word (Evaluated, Fits, Tight, WeightsExceedBudget, ...).")
    message: str = Field(description="A sentence with the numbers.")
    last_transition_time: str = Field(alias="lastTransitionTime", description="When status last changed.")
    observed_generation: int = Field(alias="observedGeneration", description="The generation it reflects.")


class ResolvedModel(_Status):
    """What the checkpoint reference resolved to."""

    revision: str | None = Field(default=None, description="The commit sha, when known.")
    source: str = Field(description="hub, catalog or path.")
    weights_basis: str = Field(alias="weightsBasis", description="safetensors, total_size, dtype_counts or estimated.")


class ObservedStatus(_Status):
    """What the pods serving the deployment report (spec.observe), over the last window of scrapes."""

    pods: int = Field(description="Pods read successfully in the window.")
    pods_failed: int = Field(
        default=0, alias="podsFailed", description="Pods whose read failed or that failed to start."
    )
    observed_blocks: int | None = Field(
        default=None, alias="observedBlocks", description="vLLM's num_gpu_blocks (the smallest of the pods)."
    )
    predicted_blocks: int | None = Field(
        default=None, alias="predictedBlocks", description="fitgate's num_gpu_blocks (status.kvCache.numGpuBlocks)."
    )
    blocks_error_ratio: float | None = Field(
        default=None,
        alias="blocksErrorRatio",
        description="(observed - predicted) / predicted; negative: vLLM got fewer blocks than predicted.",
    )
    peak_kv_usage: float | None = Field(
        default=None, alias="peakKvUsage", description="Highest vllm:kv_cache_usage_perc of any pod (1 = full)."
    )
    preemptions_per_minute: float | None = Field(
        default=None, alias="preemptionsPerMinute", description="Preemptions of all pods per minute."
    )
    prefix_cache_hit_rate: float | None = Field(
        default=None, alias="prefixCacheHitRate", description="Prefix-cache hits / queries, in tokens."
    )
    tokens_per_second: float | None = Field(
        default=None, alias="tokensPerSecond", description="Measured prompt + generation tokens/s, all pods."
    )
    output_tokens_per_second: float | None = Field(
        default=None, alias="outputTokensPerSecond", description="Measured generation tokens/s, all pods."
    )
    requests_completed: float | None = Field(
        default=None, alias="requestsCompleted", description="vllm:request_success increase in the window."
    )
    running_requests: float | None = Field(
        default=None, alias="runningRequests", description="Requests running now, all pods."
    )
    waiting_requests: float | None = Field(
        default=None, alias="waitingRequests", description="Requests waiting now, all pods."
    )
    usd_per_request: float | None = Field(
        default=None,
        alias="usdPerRequest",
        description="The window's GPU cost (price x GPUs x pods x window, idle time included) / requests completed.",
    )
    gpu_hour_price_usd: float | None = Field(
        default=None, alias="gpuHourPriceUsd", description="The price per GPU-hour usdPerRequest used."
    )
    price_basis: str | None = Field(
        default=None,
        alias="priceBasis",
        max_length=500,
        description="Where gpuHourPriceUsd came from: spec.economics, the chart's operator.prices, its "
        "operator.pricesConfigMap, or the dated list-price table (its clouds and date).",
    )
    window_seconds: float | None = Field(
        default=None, alias="windowSeconds", description="The window the rates are over."
    )
    failure: str | None = Field(
        default=None, description="The start-up failure read from a failed pod's log (kind: message), if any."
    )
    errors: list[str] | None = Field(default=None, description="Why some pods could not be read (at most 5).")
    last_scrape_time: str | None = Field(default=None, alias="lastScrapeTime", description="When pods were last read.")


class ModelDeploymentStatus(_Status):
    """What fitgate found."""

    observed_generation: int | None = Field(
        default=None, alias="observedGeneration", description="The generation this status reflects."
    )
    verdict: Literal["Fits", "Tight", "DoesNotFit", "Unknown"] | None = Field(
        default=None, description="Fits, Tight, DoesNotFit or Unknown."
    )
    reason: str | None = Field(default=None, description="CamelCase reason of the verdict.")
    message: str | None = Field(default=None, description="The verdict with its numbers.")
    gpu_product: str | None = Field(default=None, alias="gpuProduct", description="The best-fitting GPU pool.")
    headroom: str | None = Field(
        default=None,
        description="perGPU.headroomBytes in GiB, for kubectl get: KV memory left after the workload (or one "
        "maxModelLen request); negative: short by that much, it does not fit.",
    )
    max_concurrency: str | None = Field(
        default=None,
        alias="maxConcurrency",
        description="kvCache.maxConcurrency with two decimals, for kubectl get (MAX-CONC).",
    )
    tensor_parallel_size: int | None = Field(
        default=None, alias="tensorParallelSize", description="The tensor parallelism evaluated (spec or default)."
    )
    per_gpu: PerGPU | None = Field(default=None, alias="perGPU", description="Per-GPU memory plan.")
    kv_cache: KVCacheStatus | None = Field(default=None, alias="kvCache", description="The KV cache pool.")
    recommended_max_model_len: int | None = Field(
        default=None, alias="recommendedMaxModelLen", description="The longest maxModelLen that fits."
    )
    engine_args: list[EngineArgStatus] | None = Field(
        default=None, alias="engineArgs", description="Recommended vLLM engine args."
    )
    pools: list[PoolStatus] | None = Field(default=None, description="Verdict per GPU pool.")
    notes: list[str] | None = Field(
        default=None,
        description="What the plan on the best pool and the checkpoint's resolution say a reader should know, as "
        "fitgate plan prints them: what fitgate does not count and where a figure is only a bound (at most 16, "
        "each at most 1000 characters).",
    )
    performance: PerformanceStatus | None = Field(
        default=None,
        description="With workload.inputTokens and outputTokens: one replica's estimated TTFT, TPOT and rate at "
        "that load on the best pool, and whether it meets workload.ttftMs / tpotMs (issue 24).",
    )
    alternatives: list[AlternativeStatus] | None = Field(
        default=None,
        description="When it does not fit: the cheapest pools of this cluster (any placement) that would hold it "
        "with the spec's KV dtype and quantization, at most three, fewest GPU-hours per 1M output tokens first.",
    )
    resolved_model: ResolvedModel | None = Field(
        default=None, alias="resolvedModel", description="The resolved checkpoint."
    )
    inventory_hash: str | None = Field(
        default=None, alias="inventoryHash", description="Fingerprint of the GPU inventory evaluated."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready and Fits conditions (KEP-1623, with observedGeneration); with spec.observe also "
        "PredictionVerified and AtCapacity.",
    )
    observed: ObservedStatus | None = Field(
        default=None, description="What the serving pods report (spec.observe), against the prediction."
    )


def parse_spec(spec: Any) -> ModelDeploymentSpec:
    """Validate a raw ``spec`` against the schema and the CRD's CEL rules, as the API server does.

    Raises:
        SpecError: naming every bad field.
    """
    if spec is not None and not isinstance(spec, Mapping):  # hunt83 F7: dict([1, 2]) was a TypeError (exit 70 in check)
        got = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        raise SpecError(f"spec: expected an object (got {got.get(type(spec), type(spec).__name__)})")
    try:
        parsed = ModelDeploymentSpec.model_validate(dict(spec or {}))
    except ValidationError as exc:
        raise SpecError(exc) from None
    broken = [
        f"spec{r.field_path}: {r.message} (got {r.got(parsed)[:MAX_SHOWN_CHARS]})"
        for r in SPEC_RULES
        if not r.holds(parsed)
    ]
    if broken:
        raise SpecError("; ".join(broken)[:MAX_ERROR_CHARS])
    return parsed


class SpecError(ValueError):
    """An invalid ModelDeployment spec; the message lists ``spec.<path>: problem (got value)``."""

    def __init__(self, exc: ValidationError | str) -> None:
        if isinstance(exc, str):
            super().__init__(exc)
            return
        parts = []
        for err in exc.errors():
            path = ".".join(str(p) for p in err["loc"])[:200]
            value = err.get("input")
            shown = "" if isinstance(value, dict | list) else f" (got {clipped(value)})"
            parts.append(f"spec.{path}: {err['msg'][:300]}{shown}")
        text = "; ".join(parts)
        super().__init__(text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "...")
