"""How long one vLLM engine step takes: pure arithmetic on bytes and FLOPs (a load over steps: :mod:`.load`).

How vLLM runs a step (v1 engine, the releases fitgate sizes):

* The scheduler builds one batch per step from a token budget of ``max_num_batched_tokens``:
  every running request contributes its one decode token first, then waiting prompts fill the rest
  of the budget in chunks (chunked prefill is always on in v1: ``v1/core/sched/scheduler.py``
  0.33.0 L719 ``token_budget = self.max_num_scheduled_tokens``, L793 "First, schedule the RUNNING
  requests", L1049 "Next, schedule the WAITING requests"). So at a steady concurrency ``C`` with
  prompts of ``ISL`` and outputs of ``OSL`` tokens, an average decode step of one request carries
  ``C`` decode tokens plus the other requests' prompts, ``(C - 1) x ISL / OSL`` tokens.
* Decode-only batches run as CUDA graphs captured per batch size (``v1/worker/gpu_model_runner.py``
  0.33.0 L6417 ``capture_model``), which removes most per-kernel launch cost but not the host side
  of a step: scheduling, input preparation, sampling and detokenising output (``v1/engine/core.py``
  0.33.0 L667 ``EngineCore.step``). That is the fixed cost per step; a per-layer cost stands for the
  kernels a layer launches (more for an MoE layer: routing, top-k, the fused-MoE kernel; more under
  tensor parallelism: two all-reduces per layer).

One step of one pipeline stage::

    step = overhead + max(bytes / (bandwidth x bw_eff), compute) + all-reduce bytes / bus [+ all2all bytes / link]
    compute = (decode FLOPs / (peak x mfu [x moe_mfu]) + prompt FLOPs / (peak x prefill_mfu)) [/ amd_mfu]
    (MoE: a prompt chunk's expert FLOPs over every row of the fused-MoE kernel's padded tiles; attention's
    FLOPs at the KV cache dtype's peak, not the weights': ATTENTION_DTYPE)
    overhead = amd_factor? x v0_factor? x (step_s + layers x (layer_s + moe_layer_s [MoE] + tp_layer_s [TP > 1]))
    (async scheduling, V1 0.14+: step = max(the host's step_s, the rest): ASYNC_SCHEDULING)

``bytes`` are the weights the step reads (for MoE: the experts its tokens route to, which grow with the
tokens in the step) plus the running requests' KV cache; ``FLOPs`` are 2 x active parameters per token
plus attention. The constants are fitted (benchmarks/throughput.py ``--fit``) on the published
measurements in benchmarks/throughput/points.json, because vLLM's source leaves them open; they live in
``data/performance.json`` with the error band measured leave-one-group-out.

A served request's time to first token also holds a fixed cost outside the steps, ``frontend_s``
(issue 24), paid once per request; see :data:`FRONT_END`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import NamedTuple


@dataclass(frozen=True)
class Constants:
    """The fitted constants of the step model (``data/performance.json``)."""

    bw_eff: float  # share of the datasheet memory bandwidth a step's reads achieve
    mfu: float  # share of the dense peak FLOP/s (at the weights' dtype) a step's matmuls achieve
    step_s: float  # host-side cost of one engine step (schedule, prepare inputs, sample, output)
    layer_s: float  # per layer and step: the kernels of one decoder layer
    moe_layer_s: float  # per MoE layer and step: routing, top-k and the fused-MoE kernel
    tp_layer_s: float  # per layer and step under tensor parallelism: two all-reduce launches and syncs
    amd_factor: float  # the overhead on ROCm relative to CUDA
    moe_mfu: float  # an MoE model's decode-step matmul efficiency relative to ``mfu`` (beyond padded tiles)
    # Issue 24: prompt tokens run in chunks of up to ``max_num_batched_tokens`` rows per GEMM (see
    # ``PREFILL_GEMMS``), decode tokens in GEMMs of one row per running request: two efficiencies.
    prefill_mfu: float  # share of the dense peak the matmuls of a prompt chunk reach
    # Issue 24, the per-request front end: once per request, before its first step (see ``FRONT_END``).
    frontend_s: float  # HTTP, tokenization, input processing and the engine-core round trip of one request
    # Issue 24, the engine era: V0's host side of a step relative to V1's (see ``ENGINE_ERA``).
    v0_factor: float  # the overhead (step_s and the per-layer costs) on vLLM's V0 engine relative to V1
    # Issue 24: the matmul efficiency on ROCm relative to CUDA, against each GPU's datasheet peak (AMD_GEMMS).
    amd_mfu: float = 1.0
    # Issue 24, the eager step (EAGER_STEP): the least a step no CUDA graph covers takes, per layer, and what one
    # that carries a prompt adds per layer of quantized routed experts.
    eager_layer_s: float = 0.0
    eager_moe_layer_s: float = 0.0


#: Why prompt tokens get a matmul efficiency of their own (``prefill_mfu``), from vLLM 0.33.0: the
#: scheduler hands a waiting prompt up to the whole token budget at once (``v1/core/sched/scheduler.py``
#: L1049 "Next, schedule the WAITING requests", L1346 ``num_new_tokens = min(num_new_tokens,
#: request_token_budget)``), and the model runner flattens every scheduled token of a step into one
#: batch (``v1/worker/gpu_model_runner.py`` L1924 ``_prepare_inputs``, L1937 ``total_num_scheduled_tokens``
#: rows), so each linear layer of a prefill chunk is one GEMM with hundreds to thousands of rows, the shape
#: where cuBLAS / CUTLASS reach most of the tensor cores' peak; a decode step's GEMMs have one row per
#: running request (1-256), read-bound and, where compute shows at all, far from peak. The fit keeps
#: ``prefill_mfu >= mfu``; on the 91 points it lands on that floor (docs/performance.md): the published
#: prefill-heavy decode speeds (V0 DeepSeek-V3, RTX 4090 output rates) pull it down as much as the A100
#: single-prompt TTFTs (55-78 % of peak) pull it up, so the term is in place but not yet separated by data.
PREFILL_GEMMS = "prompt chunks of up to max_num_batched_tokens rows per GEMM (vllm 0.33.0 v1/core/sched)"

#: What a step no CUDA graph covers costs beyond its GPU work (``eager_layer_s``, ``eager_moe_layer_s``; issue 24, the
#: quantized-MoE eager-step round in docs/performance-accuracy.md). A step replays a graph only when a captured size
#: holds its tokens, per data-parallel rank and counting a decode request's draft tokens (v1/cudagraph_dispatcher.py
#: 0.17.0 L268-275; v1/worker/gpu/cudagraph_utils.py 0.34.0 L558-602; ``cudagraphs.graph_token_limits``: 512 tokens
#: by default, 1024 on SM100 from 0.28, a step with a prompt up to 8192 on SM100 from 0.34; V0 replayed decode
#: batches only). Above that the host launches every op of every layer itself (the fused-MoE op sits inside the
#: compiled pieces, not between them: config/compilation.py 0.17.0 L665-679), so the step takes at least
#: ``layers x eager_layer_s``, whatever the GPU's work. A step that also carries a prompt on quantized routed experts
#: pays ``eager_moe_layer_s`` a MoE layer on top: their fused-MoE paths do more per call than bf16 Triton (fp8 / fp4
#: activation quantization, the modular kernel's prepare / finalize, FlashInfer's per-call runner and autotuner
#: lookup: fused_moe/modular_kernel.py 0.17.0 L1035-1160, L1565-1622; flashinfer fused_moe/core.py L1805-1960), and
#: the MLA prefill metadata's device-to-host copy (attention/mla_attention.py 0.17.0 L1674-1683) stops the host
#: running ahead. Evidence: Kimi-K2.5-NVFP4 on 8 x B200 (0.17.0, c 4, 927-token prompts) prints a P99.9
#: inter-token latency of 111.75 ms against a 10.15 ms median: the step that carries a prompt (vllm-project/recipes
#: 7635051 moonshotai/Kimi-K2.5.md); its TTFT at 7,373-token prompts is 50-90 ms above that at 922, so the excess
#: adds to the prompt's work rather than hiding it. Both constants are fitted (``benchmarks/throughput.py --fit``);
#: the MoE one lands at ~1.7 ms a layer, 1.3-2.7 x what counting the whole layer's host ops gives (0.65-1.3 ms) and
#: 3.5-7 x the MoE op's alone, so it stands for the quantized MoE prompt step's whole excess, host and kernels.
EAGER_STEP = "a step above the captured graph sizes: the host's launches, plus a quantized MoE prompt's excess"

#: What ``frontend_s`` stands for: the path of one request through vLLM's OpenAI server to the engine
#: core and of its first token back (0.33.0), none of it an engine step:
#:
#: * the HTTP route (``entrypoints/openai/completion/api_router.py`` L37-52 ``create_completion``) and
#:   the prompt's tokenization (``renderers/online_renderer.py`` L602 ``render_completion``, called from
#:   ``entrypoints/openai/completion/serving.py`` L141);
#: * input processing into an ``EngineCoreRequest`` (``v1/engine/async_llm.py`` L483-500
#:   ``process_inputs``) and its send to the engine-core process over ZMQ (``async_llm.py`` L584,
#:   ``v1/engine/core_client.py`` L1339 ``add_request_async``);
#: * the engine core's input thread decoding it (``v1/engine/core.py`` L1933 ``process_input_sockets``)
#:   and the busy loop picking it up between steps (``core.py`` L1647 ``_process_input_queue``);
#: * the first token's way back: the output thread (``core.py`` L2042 ``process_output_sockets``), the
#:   client's output handler and detokenizer (``async_llm.py`` L876 ``output_handler``), the HTTP stream,
#:   and the benchmark client's own time to send and read.
#:
#: vLLM's source fixes none of these durations (they are Python, IPC and network time), so the constant
#: is left to the fit (``benchmarks/throughput.py --free-front-end``, within 1-150 ms: the fixed TTFT that
#: serving benchmarks show at short prompts, Qwen3-8B on an H100, 233 tokens: 59 ms; Kimi-K2.5 on 8 x B200,
#: 922 tokens: 164 ms, of which the prefill's FLOPs at full peak take ~3 ms). It ships at 0: the points'
#: clients disagree on it by over 10x (tenstorrent's A100 runs: 11 ms of TTFT in all), and fitted it makes
#: the median TTFT error worse (docs/performance.md). Offline runs (``LLM.generate``, vLLM's latency
#: benchmark) have no HTTP server and do not pay it (``front_end=False``).
FRONT_END = "HTTP + tokenization + engine-core round trip (vllm 0.33.0 entrypoints/openai, v1/engine)"

#: Why the engine era is an input (issue 24): the published points mix vLLM's V0 engine (before 0.8; the
#: 2024-25 dstack runs, ROCm 6.2 images) with V1 releases (0.8+; 0.17 on B200 in 2026), and the two run a
#: step differently in two ways the step model can take from the deployment's release:
#:
#: * **Host side of a step.** V0's ``LLMEngine.step`` (``vllm/engine/llm_engine.py``, 0.6-0.7) schedules,
#:   rebuilds the step's input tensors from the sequence groups (``worker/model_runner.py``
#:   ``_prepare_model_input_tensors``), runs the model, samples and processes the outputs in one Python
#:   process, serially with the GPU except for the output processing (``async output processing``, 0.6.0).
#:   V1 (the default from 0.8.0) moves the scheduler and model runner into their own engine-core process
#:   (``v1/engine/core.py`` ``EngineCore.step``, ``v1/engine/core_client.py``), keeps a persistent batch whose
#:   input tensors are updated by difference (``v1/worker/gpu_input_batch.py`` ``InputBatch``) and captures
#:   piecewise CUDA graphs with ``torch.compile`` (``v1/worker/gpu_model_runner.py`` ``capture_model``), and
#:   overlaps tokenization, detokenization and streaming with the steps. vLLM's source does not say by how
#:   much the host cost shrinks, so ``v0_factor`` (V0 overhead / V1 overhead, fitted within 1-5) scales the
#:   fitted ``step_s`` and per-layer costs on V0 releases.
#: * **Prompts in their own steps.** Without chunked prefill, V0's scheduler runs a waiting prompt in a
#:   prefill-only step and the running requests' decodes wait for it (``vllm/core/scheduler.py``
#:   ``Scheduler._schedule_default``: "Don't schedule decodes if prefills are scheduled"). V0 turns chunked
#:   prefill on by default only above 32K tokens of context (``engine/arg_utils.py`` 0.6-0.7, the
#:   ``use_long_context`` default; fitgate's ``resolve`` does the same), and never for MLA models (0.7.x
#:   ``config.py``, logged at L3257 in 0.7.1 and L3329 in 0.7.3: "MLA is enabled; forcing chunked prefill
#:   and prefix caching to be disabled"). So on V0 without chunking a request's decode time is its batch's
#:   decode steps plus the other requests' prompt-only steps, not steps that mix both
#:   (``Work.prefill_apart``).
#: How a steady load's prompts share the decode steps on V1 (vLLM 0.33.0): the scheduler gives a waiting
#: prompt the whole token budget left after the running requests' decode tokens (``v1/core/sched/scheduler.py``
#: L1049, L1346; ``long_prefill_token_threshold`` 0 by default), so the prompts arrive as chunks of up to the
#: budget in a few steps, not as a few prompt tokens in every step. A mean of ``p = (C - 1) x ISL / OSL`` prompt
#: tokens per step is a share ``p / chunk`` of steps that carry a chunk of ``min(ISL, budget - C)`` tokens and
#: the rest none; TPOT is the mean step. The chunk's MoE tile efficiency and experts hit are those of the
#: whole chunk (before issue 24's era refit a chunk was spread evenly, ``p`` tokens a step, which padded a
#: 24-token share of Kimi-K2.5's 8k prompts into 16-row tiles over 384 experts: 16 x the FLOPs).
PROMPT_CHUNKS = "prompts in chunks of the step budget left after the decodes (vllm 0.33.0 v1/core/sched/scheduler.py)"

#: Async scheduling (issue 24): from vLLM 0.14.0 (vllm-project/vllm#27614, the last item of the async
#: scheduling plan, issue #27679) ``async_scheduling`` is on by default (``config/scheduler.py``
#: ``SchedulerConfig.async_scheduling``: "Async scheduling helps to avoid gaps in GPU utilization"), and
#: the engine core schedules step N + 1 and processes step N's output while step N + 1 runs on the GPU
#: (``v1/core/sched/async_scheduler.py`` ``AsyncScheduler``; ``v1/engine/core.py``
#: ``step_with_batch_queue``). So the host part of a step (``step_s``) overlaps the GPU part instead of
#: adding to it: a step takes ``max(step_s, the rest)``. vLLM turns it off with pipeline parallelism (before
#: 0.15) and with speculative methods other than EAGLE / MTP (vllm-project/vllm#31998); fitgate follows.
ASYNC_SCHEDULING = "V1 0.14+: the next step's scheduling overlaps the running step (vllm-project/vllm#27614)"

#: Why ROCm gets a matmul efficiency of its own (issue 24, ``amd_mfu``): ``mfu`` and ``prefill_mfu`` are shares of
#: each GPU's datasheet peak, and AMD's datasheet peaks are further from what its GEMMs reach than NVIDIA's:
#: SemiAnalysis' MI300X / H100 / H200 benchmark (2024-12, part 1) measured BF16 GEMMs at about half of the
#: MI300X's 1,307 TFLOP/s against about three quarters of the H100's 989. vLLM's source leaves the ratio open (its
#: ROCm kernels are hipBLASLt, AITER and Triton ports of the CUDA ones), so it is fitted within 0.2-1 on the
#: MI300X and MI355X points; the fit (~0.45) is below the GEMM ratio (~0.65) because it also carries ROCm's
#: attention and fused-MoE kernels.
AMD_GEMMS = "ROCm matmuls reach a smaller share of the datasheet peak than CUDA's (amd_mfu, fitted)"

#: Why attention has a peak of its own (issue 24): fp8 / fp4 weights speed up the linear layers (their GEMMs run
#: on fp8 / fp4 tensor cores), not attention, whose matmuls (QK^T over the context, PV) run on the query and the KV
#: cache. vLLM's FlashAttention backend takes float16 / bfloat16 queries (``v1/attention/backends/flash_attn.py``,
#: commit 0084b783 (0.10.x): ``FlashAttentionBackend.get_supported_dtypes`` returns ``[torch.float16,
#: torch.bfloat16]``) and runs fp8 attention only when the KV cache is fp8: ``FlashAttentionImpl.forward`` views
#: the cache as ``float8_e4m3fn`` and quantizes the query (``ops.scaled_fp8_quant(query, layer._q_scale)``) under
#: ``if self.kv_cache_dtype.startswith("fp8")``, passing ``q/k/v_descale`` to the kernel. So attention FLOPs count
#: at the bf16 peak, or at the fp8 peak with an fp8 KV cache on a GPU with fp8 tensor cores
#: (``Work.attention_peak_flops``); before, a prompt chunk of an fp8 model ran its attention at 2 x the bf16 peak
#: (4 x for fp4), which made long prompts of fp8 / fp4 models too cheap (MiniMax-M2.5 at 16-32k tokens on H200).
ATTENTION_DTYPE = "attention at the KV cache's dtype: bf16 peak, fp8 only with an fp8 KV cache (flash_attn.py)"

#: Why some models pay more TP all-reduces per layer (issue 24, ``Work.extra_allreduces_per_layer``): ``tp_layer_s`` is
#: the latency of the two all-reduces every decoder layer runs under TP (the row-parallel o_proj and the MLP / MoE
#: output). A model whose norm spans the TP-split heads adds its own: MiniMax-M2's q / k norm is over all heads
#: (``MiniMaxM2Attention`` builds ``MiniMaxText01RMSNormTP(head_dim x total_num_heads)``), so each layer
#: all-reduces the concatenated q and k variances once (``MiniMaxText01RMSNormTP.forward_qk``,
#: ``tensor_model_parallel_all_reduce(qk_var)``): three all-reduces a layer, 1.5 x ``tp_layer_s``. The payload
#: (two floats a token) costs no bandwidth worth counting. No constant (performance.TP_NORM_ALLREDUCES).
TP_NORMS = "norms over TP-split heads all-reduce per layer (vllm models/minimax_m2.py, MiniMaxText01RMSNormTP)"

ENGINE_ERA = "V0 (before 0.8): serial host side, prompts in prefill-only steps; V1: engine-core process, mixed steps"


@dataclass(frozen=True)
class Band:
    """Measured spread of measured / estimated, leave-one-group-out: the 10th and 90th percentiles."""

    low: float
    high: float


@dataclass(frozen=True)
class Calibration:
    """Constants, error bands and the basis they were measured on."""

    constants: Constants
    tpot_band: Band
    ttft_band: Band
    basis: str


@lru_cache(maxsize=1)
def calibration() -> Calibration:
    """The shipped calibration (``data/performance.json``)."""
    raw = json.loads(resources.files("fitgate.sizing").joinpath("data/performance.json").read_text())
    c = raw["constants"]
    constants = Constants(**{f.name: float(c[f.name]) for f in fields(Constants)})
    return Calibration(
        constants,
        Band(float(raw["band"]["tpot"][0]), float(raw["band"]["tpot"][1])),
        Band(float(raw["band"]["ttft"][0]), float(raw["band"]["ttft"][1])),
        str(raw["basis"]),
    )


@dataclass(frozen=True)
class Stage:
    """What one pipeline stage's GPU holds and does, per step (each GPU of a tensor-parallel group alike)."""

    layers: int
    dense_bytes: int  # weights read every step: all but the experts, the embedding table and rotary caches
    expert_bytes: int  # the experts' weights on this GPU (0 for dense models)
    kv_bytes_per_request: int  # the KV cache one request at the decode context holds on this GPU
    flops_per_token: float  # linear layers, on this GPU: 2 x active parameters x layer share / TP
    decode_attention_flops: float  # per decode token at the decode context, on this GPU
    prefill_attention_flops: float  # per prompt token (attending to half the prompt on average), on this GPU
    expert_flops_per_token: float = 0.0  # the routed experts' share of ``flops_per_token`` (0 for dense models)
    moe_layers: int = 0  # the stage's MoE layers (each pays the all2all of expert parallelism with DP > 1)


@dataclass(frozen=True)
class Work:
    """A replica as the step model sees it."""

    stages: tuple[Stage, ...]
    tp: int
    num_experts: int  # 0: dense
    top_k: int
    activation_bytes_per_token: int  # hidden x activation dtype: one all-reduce payload per token
    bandwidth_bytes_per_s: float
    peak_flops: float  # at the compute dtype of the weights other than the routed experts
    bus_bytes_per_s: float  # achieved all-reduce bus bandwidth
    amd: bool
    max_num_batched_tokens: int
    v0: bool = False  # vLLM's V0 engine (before 0.8): the host side of a step costs v0_factor x V1's
    expert_peak_flops: float = 0.0  # at the routed experts' compute dtype (0: as peak_flops)
    async_scheduling: bool = False  # V1 0.14+: the host side of a step overlaps the GPU's (ASYNC_SCHEDULING)
    # Expert parallelism with DP > 1 (performance.ALL2ALL): bytes one GPU moves per token of the step and MoE
    # layer (dispatch + combine), over the link the EP group uses (NVLink in a node, RDMA across nodes).
    a2a_bytes_per_token: float = 0.0
    a2a_bytes_per_s: float = 1.0
    prefill_apart: bool = False  # V0 without chunked prefill: prompts run in prefill-only steps (ENGINE_ERA)
    # The attention matmuls (QK^T, PV) at the KV cache / activation dtype's peak, not the weights' (ATTENTION_DTYPE);
    # 0: as peak_flops (the step model before issue 24's attention-dtype round).
    attention_peak_flops: float = 0.0
    # All-reduces a decoder layer runs under TP beyond the two of o_proj and the MLP / MoE (TP_NORMS): their
    # latency is paid like those two (tp_layer_s / 2 each); their payload (a few floats per token) is not.
    extra_allreduces_per_layer: int = 0
    # The most tokens a decode-only step / a step that carries prompt tokens may hold and still replay a CUDA graph
    # (EAGER_STEP, cudagraphs.graph_token_limits); above it the step runs eagerly. The defaults: always a graph.
    graph_decode_tokens: int = 1 << 30
    graph_prompt_tokens: int = 1 << 30
    quantized_experts: bool = False  # the routed experts run a quantized fused-MoE kernel (EAGER_STEP)
    decode_query_len: int = 1  # tokens a decode step runs per request (1 + draft tokens): the graphs count tokens
    dp_ranks: int = 1  # data-parallel ranks: each captures and dispatches its own graphs for its share of the step


def expert_fraction_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected share of a layer's experts that ``tokens`` tokens routing to ``top_k`` each touch.

    A token picks ``top_k`` distinct experts of ``num_experts``; a given expert escapes one token with
    probability ``1 - top_k / num_experts`` and all ``tokens`` tokens with that to the ``tokens``.
    """
    if num_experts <= 0 or top_k >= num_experts:
        return 1.0
    return 1.0 - float((1.0 - top_k / num_experts) ** max(1.0, tokens))


def moe_block_m(tokens: float) -> int:
    """The row tile (``BLOCK_SIZE_M``) of vLLM's fused-MoE kernel for a step of ``tokens`` tokens.

    vLLM 0.33.0 ``model_executor/layers/fused_moe/fused_moe.py`` L1298 ``get_default_config`` (the bf16 /
    fp8 per-tensor defaults, L1376-1383): 16 rows up to 32 tokens, 32 up to 96, 64 up to 512, else 128.
    """
    if tokens <= 32:
        return 16
    if tokens <= 96:
        return 32
    if tokens <= 512:
        return 64
    return 128


def moe_tile_efficiency(num_experts: int, top_k: int, tokens: float) -> float:
    """Share of the fused-MoE kernel's row tiles that carry a token (1 for dense models).

    vLLM sorts a step's ``tokens x top_k`` routed rows by expert and pads each expert's rows to a
    multiple of ``BLOCK_SIZE_M`` (``fused_moe/fused_moe.py`` L1593 calls ``moe_align_block_size`` with
    ``config["BLOCK_SIZE_M"]``; ``fused_moe/moe_align_block_size.py`` L55:
    "Aligns the token distribution across experts to be compatible with block size"); every padded
    tile is computed. With the touched experts sharing the rows evenly, the useful share is
    ``rows / (touched x ceil(rows / touched / block_m) x block_m)``: a decode step of 32 tokens over 256
    experts, top 8 (DeepSeek-V3), touches 164 experts with ~1.6 rows each in 16-row tiles: ~10 %; a
    2048-token prompt chunk over 128 experts, top 8 (Qwen3-30B-A3B), 128 rows each in 128-row tiles: 100 %.
    """
    if num_experts <= 0 or tokens <= 0:
        return 1.0
    rows = tokens * top_k
    touched = num_experts * expert_fraction_touched(num_experts, top_k, tokens)
    block = moe_block_m(tokens)
    padded = touched * math.ceil(rows / touched / block - 1e-9) * block
    return min(1.0, rows / padded)


def step_seconds(work: Work, decode_tokens: float, prefill_tokens: float, k: Constants) -> tuple[float, float]:
    """One step carrying ``decode_tokens`` running requests and ``prefill_tokens`` prompt tokens.

    Returns (seconds, bandwidth-roofline seconds): the roofline reads the same bytes at the full
    datasheet bandwidth with no overhead and no compute bound, so it is never more than the step.
    Each stage's step is affine in the step's tokens but for the MoE terms (touched experts, padded
    tiles), so its coefficients (:func:`_stage_terms`) are computed once per work and constants.
    """
    tokens = decode_tokens + prefill_tokens
    experts = work.num_experts
    touched = expert_fraction_touched(experts, work.top_k, tokens) if experts else 0.0
    tile = moe_tile_efficiency(experts, work.top_k, tokens) if experts else 1.0
    # EAGER_STEP: no captured graph holds the step (per DP rank, a decode request with its draft tokens)
    rank_tokens = (decode_tokens * work.decode_query_len + prefill_tokens) / work.dp_ranks
    eager = rank_tokens > (work.graph_prompt_tokens if prefill_tokens > 0 else work.graph_decode_tokens)
    overlap = work.async_scheduling
    total = read_all = 0.0
    prompt = prefill_tokens > 0
    # each stage's coefficients unpacked (named in _Terms): the search's innermost loop
    for n, (dense_b, expert_b, kv_b, s_per_byte, decode_s, prefill_s, expert_s, link_s, layers_s, host_s, eager_s,
            eager_moe_s) in _stage_terms(work, k):  # fmt: skip
        read = dense_b + expert_b * touched + decode_tokens * kv_b
        compute_s = decode_tokens * decode_s + prefill_tokens * (prefill_s + expert_s / tile)
        memory_s = read * s_per_byte
        gpu_s = layers_s + (memory_s if memory_s > compute_s else compute_s) + tokens * link_s
        if eager:
            # EAGER_STEP: the quantized-MoE part only where a prompt is in the step (what the logs show)
            gpu_s = (gpu_s if gpu_s > eager_s else eager_s) + (eager_moe_s if prompt else 0.0)
        # async scheduling: the next step is scheduled (and the last one's output processed) while the GPU runs
        total += n * ((host_s if host_s > gpu_s else gpu_s) if overlap else host_s + gpu_s)
        read_all += n * read
    return total, read_all / work.bandwidth_bytes_per_s


class _Terms(NamedTuple):
    """One stage's step as coefficients of its tokens (seconds per token or byte, bytes, fixed seconds).

    A tuple, in this order, because :func:`step_seconds` unpacks it.
    """

    dense_bytes: float
    expert_bytes: float  # read in the share of experts the step's tokens touch
    kv_bytes: float  # per decoding request
    s_per_byte: float  # at the achieved bandwidth
    decode_s: float  # compute seconds per decode token, efficiency included
    prefill_s: float  # per prompt token, but for the routed experts
    prefill_expert_s: float  # per prompt token's routed experts at full tiles (divided by the tile efficiency)
    link_s_per_token: float  # TP all-reduces and EP all2all
    layers_s: float  # per-layer launch overheads of the stage
    host_s: float  # the stage's share of the host side of a step
    eager_s: float  # the stage's floor when the step runs eagerly
    eager_moe_s: float  # and its quantized fused-MoE part when a prompt is in the step


_LAST_TERMS: tuple[Work, Constants, tuple[tuple[int, _Terms], ...]] | None = None


def _stage_terms(work: Work, k: Constants) -> tuple[tuple[int, _Terms], ...]:
    """The coefficients of every stage of ``work`` under ``k``, equal stages once with their count.

    A pipeline's middle stages hold the same layers (most of a PP 16 step's 16 stages are one), and a step is
    their sum. The last pair's kept: a search asks in bursts.
    """
    global _LAST_TERMS  # noqa: PLW0603 - one tuple, swapped whole: safe on the operator's worker threads
    last = _LAST_TERMS
    if last is not None and last[0] is work and last[1] is k:
        return last[2]
    counts = Counter(_terms(work, s, k) for s in work.stages)
    terms = tuple((n, t) for t, n in counts.items())
    _LAST_TERMS = (work, k, terms)
    return terms


def _terms(work: Work, s: Stage, k: Constants) -> _Terms:
    # A prompt chunk's expert FLOPs count every padded tile row (moe_tile_efficiency): its GEMMs are
    # compute-bound. A decode token's do not: its few rows per expert ride on the expert weights' read
    # (the memory term), and the fused-MoE tile size jumps with the step's tokens (16 -> 32 rows at 33),
    # which would make TPOT jump with the batch; moe_mfu stands for what remains.
    # the routed experts' matmuls at their own dtype's peak (compute_dtype_factors), the rest at the dense one
    dense = s.flops_per_token - s.expert_flops_per_token
    expert_peak = work.expert_peak_flops or work.peak_flops
    attention_peak = work.attention_peak_flops or work.peak_flops  # ATTENTION_DTYPE
    amd = k.amd_mfu if work.amd else 1.0
    decode_eff = k.mfu * (k.moe_mfu if work.num_experts else 1.0) * amd
    prefill_eff = k.prefill_mfu * amd
    tp_layer = k.tp_layer_s * (1 + work.extra_allreduces_per_layer / 2) if work.tp > 1 else 0.0
    per_layer = k.layer_s + (k.moe_layer_s if work.num_experts else 0.0) + tp_layer
    host = (k.amd_factor if work.amd else 1.0) * (k.v0_factor if work.v0 else 1.0)
    allreduce = 0.0
    if work.tp > 1:
        payload = work.activation_bytes_per_token * 2 * (work.tp - 1) / work.tp
        allreduce = 2 * s.layers * payload / work.bus_bytes_per_s
    return _Terms(
        dense_bytes=s.dense_bytes,
        expert_bytes=s.expert_bytes,
        kv_bytes=s.kv_bytes_per_request,
        s_per_byte=1 / (work.bandwidth_bytes_per_s * k.bw_eff),
        decode_s=(
            dense / work.peak_flops + s.decode_attention_flops / attention_peak + s.expert_flops_per_token / expert_peak
        )
        / decode_eff,
        prefill_s=(dense / work.peak_flops + s.prefill_attention_flops / attention_peak) / prefill_eff,
        prefill_expert_s=s.expert_flops_per_token / expert_peak / prefill_eff,
        link_s_per_token=allreduce + s.moe_layers * work.a2a_bytes_per_token / work.a2a_bytes_per_s,
        layers_s=s.layers * per_layer * host,
        host_s=k.step_s / len(work.stages) * host,
        eager_s=s.layers * k.eager_layer_s * host,
        eager_moe_s=s.moe_layers * k.eager_moe_layer_s * host if work.quantized_experts else 0.0,
    )
