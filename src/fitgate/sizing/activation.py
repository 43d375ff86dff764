"""The profiling pass: activation peak, non-torch memory and the CUDA-graph estimate.

vLLM measures these with one dummy forward pass of ``max_num_batched_tokens`` tokens and one
sampler pass over ``min(max_num_seqs, max_num_batched_tokens)`` requests (reference section 3).
fitgate models them with a few terms, fitted on the vLLM 0.19.0 H100 logs in shared/calibration
(benchmarks/accuracy.py prints the residuals):

* sampler pass (last pipeline stage only): ``0.146 GiB + b x num_seqs x vocab`` where ``b`` is
  14.35 bytes per logit from 0.17 on and 37.8 before (fp32 logits, probabilities, sort buffers);
* dense forward pass: ``max_num_batched_tokens x dtype x (7 x hidden + 3 x intermediate / TP)``,
  plus ``num_layers x hidden_size_per_layer_input`` for Gemma 4's per-layer inputs (from source);
* fused-MoE workspace, which persists across the two passes:
  ``max_num_batched_tokens x top_k x dtype x (max(2 x I/TP, hidden) + I/TP)`` (not for MXFP4
  experts, which use other kernels);
* peak = max(forward, sampler) + MoE workspace.

A pooling runner (``--runner pooling``: embedding and reward models) warms up its pooler instead
of the sampler (``profile_run``: ``if self.is_pooling_model: output = self._dummy_pooler_run(...)
else: output = self._dummy_sampler_run(...)``, v1/worker/gpu_model_runner.py 0.10.2 L3034, 0.19.0
L5787, 0.28.0 L6643, 0.33.0 L6137; the V2 runner likewise, gpu/model_runner.py 0.33.0 L1041-1047).
The pooler only reads the hidden states the forward pass already holds (one row per request, or
every token's row, ``max_num_batched_tokens x hidden``), so the profiled peak is the forward pass.

Non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) is a per-version
constant that grows with tensor parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.cudagraphs import (
    V2_GRAPHS_SINCE,
    GraphCounts,
    capture_sizes,
    cuda_graph_estimate_bytes,
    graph_counts,
)
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.memo import IdentityMemo
from fitgate.sizing.model import DenseMLP, ModelArchitecture, MoE
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import FLASHINFER_SAMPLER_BYTES_PER_LOGIT, VllmAccounting

FORWARD_HIDDEN_FACTOR = 7
FORWARD_INTERMEDIATE_FACTOR = 3
V0_FORWARD_HIDDEN_FACTOR = 6  # fitted on the vLLM V0 RTX 3090 20k/29k pair
V0_FORWARD_INTERMEDIATE_FACTOR = 2


@dataclass(frozen=True)
class ProfileEstimate:
    """What the profiling pass adds on one GPU."""

    activation_bytes: int
    sampler_bytes: int
    forward_bytes: int
    moe_workspace_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    #: How much larger the activation peak would be on PyTorch's sort sampler where fitgate assumed FlashInfer's
    #: (the release's default with FlashInfer installed, nothing stated; :func:`_flashinfer_sampler`).
    without_flashinfer_bytes: int = 0
    #: Persistent runner state vLLM counts in its non-KV memory (:func:`v2_sampler_state_bytes`): derived, not fitted,
    #: so outside the fitted terms' error band; shown with the non-torch memory.
    runner_state_bytes: int = 0


def _dense_intermediate(arch: ModelArchitecture, layers: range) -> int:
    """The widest dense (or shared-expert) MLP of ``layers``, once per model and layer range."""
    return _WIDEST.get((arch,), (layers.start, layers.stop, layers.step), lambda: _widest_mlp(arch, layers))


#: Widest MLP by model identity and layer range: every plan, suggestion and alternative asked it again.
_WIDEST: IdentityMemo[int] = IdentityMemo()


def _widest_mlp(arch: ModelArchitecture, layers: range) -> int:
    widest = 0
    for i in layers:
        ffn = arch.layers[i].ffn
        if isinstance(ffn, DenseMLP):
            widest = max(widest, ffn.intermediate_size)
        elif isinstance(ffn, MoE):
            widest = max(widest, ffn.shared_intermediate_size)
    return widest


def _flashinfer_sampler(v2_runner: bool, accounting: VllmAccounting, gpu: GpuModel | None, stated: bool | None) -> bool:
    """Whether the profiling sampler pass runs on FlashInfer's top-k/top-p kernels instead of PyTorch's sort.

    Only the V1 runner's ``TopKTopPSampler`` on CUDA has the FlashInfer path (``current_platform.is_cuda()``,
    topk_topp_sampler.py 0.10.2 L40-42); ``stated``: ``VLLM_USE_FLASHINFER_SAMPLER`` with FlashInfer installed;
    None: the release's default in vLLM's own image, which installs FlashInfer (versions.FLASHINFER_SAMPLER_DEFAULT:
    on in 0.8 to 0.11.0, opt-in after). Assuming it there is the smaller of the two peaks, so a start that a pip
    install without FlashInfer would refuse is Tight (verdict_rules), never denied for it.
    """
    if accounting.engine != "V1" or v2_runner:
        return False
    if gpu is not None and gpu.vendor == "amd":
        return False
    return accounting.flashinfer_sampler_default if stated is None else stated


def estimate_profile(
    arch: ModelArchitecture,
    *,
    layers: range,
    last_stage: bool,
    tp: int,
    pp: int,
    dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool,
    accounting: VllmAccounting,
    gpu: GpuModel | None = None,
    interconnect: str = "pcie",
    pooling: bool = False,
    decode_query_len: int = 1,
    moe_tp: int | None = None,
    all2all_bytes: int = 0,
    graph_cases: int = 1,  # LoRA: graphs are captured without and with adapters (fitgate.sizing.lora)
    flashinfer_sampler: bool | None = None,  # ServingConfig.flashinfer_sampler; None: the release's default
    cudagraph_mode: str = "FULL_AND_PIECEWISE",  # the compilation config's (cudagraphs.py)
    given_sizes: tuple[int, ...] | None = None,  # --cudagraph-capture-sizes
    given_max: int | None = None,  # --max-cudagraph-capture-size
    interactivity: bool = False,  # --performance-mode interactivity
    v2_runner: bool = False,  # ResolvedServing.v2_runner: the V2 GPU model runner's sampler pass
    extensible: bool = False,  # ResolvedServing.extensible_kv_cache (0.34)
) -> ProfileEstimate:
    """Activation peak, non-torch increase and CUDA-graph memory of one GPU.

    ``gpu`` and ``interconnect`` (what connects its TP ranks): the board's generation traits from the
    GPU catalog (NVSwitch, all-reduce workspace, compute capability); None sizes a GPU without any.
    ``moe_tp``: GPUs each expert is TP-sharded over (1 with expert parallelism, TP x DP without;
    :mod:`fitgate.sizing.parallel`), default ``tp``. ``all2all_bytes``: the all2all backend's buffers,
    allocated after the start snapshot, so part of the non-torch increase.
    """
    hidden = arch.hidden_size
    inter = _dense_intermediate(arch, layers) // tp
    if accounting.engine == "V0":
        per_token = V0_FORWARD_HIDDEN_FACTOR * hidden + V0_FORWARD_INTERMEDIATE_FACTOR * inter
    else:
        per_token = FORWARD_HIDDEN_FACTOR * hidden + FORWARD_INTERMEDIATE_FACTOR * inter
    if arch.per_layer_embedding is not None:
        # Gemma 4 E2B/E4B: the per-layer inputs (tokens x num_layers x hidden_size_per_layer_input) stay
        # alive through every decoder layer (gemma4.py 0.33.0 L933-948, sliced per layer at L792), and
        # pipeline stages receive them as an intermediate tensor (L1168-1195).
        per_token += arch.num_layers * arch.per_layer_embedding.hidden_size
    forward = max_num_batched_tokens * dtype_bytes * per_token
    sampler = sort_sampler = 0
    if last_stage and not pooling:
        seqs = min(max_num_seqs, max_num_batched_tokens)
        per_logit = accounting.sampler_bytes_per_logit_for(v2_runner, dtype_bytes)
        if _flashinfer_sampler(v2_runner, accounting, gpu, flashinfer_sampler):
            per_logits = (per_logit, min(per_logit, FLASHINFER_SAMPLER_BYTES_PER_LOGIT))
        else:
            per_logits = (per_logit, per_logit)
        sort_sampler, sampler = (accounting.sampler_base_bytes + int(b * seqs * arch.vocab_size) for b in per_logits)
    workspace = 0
    mxfp4 = arch.quantization is not None and arch.quantization.method == "mxfp4"
    moe = next((arch.layers[i].ffn for i in layers if isinstance(arch.layers[i].ffn, MoE)), None)
    if isinstance(moe, MoE) and not mxfp4 and accounting.engine == "V1":
        n = moe.expert_intermediate_size // (moe_tp or tp)
        # w13's width N is 2n gated, n not (Nemotron 3's relu^2 experts); the experts' input width K is the latent
        # size of a latent MoE, else hidden (fused_moe/experts/triton_moe.py 0.34.0 L278-293 ``workspace_shapes``;
        # hunt15 O1: the hidden width and a gate over-counted Nemotron 3 Ultra by 1.6-6.9 GiB)
        width = 2 * n if moe.gated else n
        k = moe.latent_size or hidden
        rows = min(max_num_batched_tokens, fused_moe_chunk_tokens(accounting.version))
        workspace = rows * moe.top_k * dtype_bytes * (max(width, k) + n)
    activation = max(forward, sampler) + workspace
    # Assumed, not stated: what the activation would grow by on PyTorch's sort (no FlashInfer in the image).
    assumed = flashinfer_sampler is None and sort_sampler > sampler
    return ProfileEstimate(
        activation_bytes=activation,
        without_flashinfer_bytes=max(forward, sort_sampler) + workspace - activation if assumed else 0,
        sampler_bytes=sampler,
        forward_bytes=forward,
        moe_workspace_bytes=workspace,
        non_torch_bytes=non_torch_bytes(tp, pp, accounting, gpu, interconnect) + all2all_bytes,
        runner_state_bytes=v2_sampler_state_bytes(
            arch.vocab_size, max_num_seqs, accounting, v2_runner and last_stage and not pooling, extensible
        ),
        cuda_graph_bytes=0
        if enforce_eager
        else cuda_graph_bytes(
            arch,
            len(layers),
            accounting,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            compute_capability=gpu.compute_capability if gpu is not None else None,
            decode_query_len=decode_query_len,
            graph_cases=graph_cases,
            cudagraph_mode=cudagraph_mode,
            given_sizes=given_sizes,
            given_max=given_max,
            interactivity=interactivity,
        ),
    )


#: The first release whose non-KV memory is everything consumed since the start snapshot (``total_consumed``, from
#: ``mem_get_info``: utils/mem_utils.py 0.27.0 L326, 0.34.0 L336); before, weights + the profile's torch peak increase
#: + non-torch growth (0.26.0 L311-313), which leaves out tensors a runner allocates between loading and profiling.
TOTAL_CONSUMED_SINCE = (0, 27, 0)


#: ``VLLM_FUSED_MOE_CHUNK_SIZE``'s default by release: the fused-MoE kernel runs a step's tokens in chunks of at most
#: this many and sizes its workspace on one chunk. 32768 up to 0.11.x (envs.py 0.8.5 L456-457, 0.10.0 L560-561,
#: 0.11.1 L778-780; fused_moe.py 0.10.0 L1391-1392 ``M = min(num_tokens, CHUNK_SIZE)``), 16384 in 0.12-0.17 (envs.py
#: 0.12.0 L789-791, 0.14.0 L821-823; modular_kernel.py 0.17.0 L1035-1050 ``_chunk_info``); 0.18.0 removed it and
#: sizes the workspace on every token (modular_kernel.py 0.18.0 L1189-1193 ``M_full, M_full``). hunt182 F2: a
#: Qwen3-Next TP 4 plan at max_num_batched_tokens 262144 (``--no-enable-chunked-prefill``) counted 10.6 GiB of
#: workspace where 0.17 allocates 0.66.
FUSED_MOE_CHUNKS = (((0, 12, 0), 32768), ((0, 18, 0), 16384))


def fused_moe_chunk_tokens(version: tuple[int, int, int]) -> int:
    """The most tokens the fused-MoE workspace holds in ``version`` (a very large number: not chunked)."""
    for before, chunk in FUSED_MOE_CHUNKS:
        if version < before:
            return chunk
    return 1 << 62


def v2_sampler_state_bytes(
    vocab_size: int, max_num_seqs: int, accounting: VllmAccounting, applies: bool, extensible: bool = False
) -> int:
    """The V2 runner's persistent penalty state on the last pipeline stage, where vLLM counts it (0.27+).

    ``load_model`` builds the ``Sampler`` after the weights are measured (gpu/model_runner.py 0.27.1 L329 then
    L351-360; 0.34.0 L486-513), and its ``PenaltiesState`` allocates ``output_bin_counts``, int32 [max_num_reqs x
    vocab] ("can be very large, taking up GBs of GPU memory"), and ``prompt_bin_mask``, int32 [max_num_reqs x
    cdiv(vocab, 32)] (gpu/sample/penalties.py 0.27.1 L32-42, 0.34.0 L42-50). From 0.27 vLLM's non-KV memory
    includes them (:data:`TOTAL_CONSUMED_SINCE`). Qwen3 at 1,024 sequences: 1024 x 151,936 x 4 B = 0.58 GiB.
    Not yet counted with 0.34's extensible cache (``extensible``), which holds them resident too, so those plans
    over-state the pool by them (0.5-1 GiB at 1,024 sequences of a 128k-262k vocabulary: fails open); counting them
    there moves the default release's figures everywhere, left for a change of its own. 0.34 with it off sizes as
    0.33 does.
    """
    if not applies or extensible or accounting.version < TOTAL_CONSUMED_SINCE:
        return 0
    return max_num_seqs * 4 * (vocab_size + -(-vocab_size // 32))


def non_torch_bytes(
    tp: int, pp: int, accounting: VllmAccounting, gpu: GpuModel | None = None, interconnect: str = "pcie"
) -> int:
    """Growth of non-torch memory during profiling, by what the box allocates after the start snapshot.

    From vLLM's source (docs/vllm-releases.md section 5): NCCL communicators (warmed up), custom
    all-reduce IPC buffers and torch symmetric memory are created in
    ``init_worker_distributed_environment``, *before* the snapshot, so they sit outside the budget on
    every box. What grows during the profiling pass is cuBLAS / attention workspaces (the TP1
    figure: 0.25 GiB on 0.18+, 0.13 GiB before, fitted on the calibration logs) plus, on NVSwitch
    boards (``gpu.nvswitch_sharp(interconnect)``: SXM / NVL boards of the generations gpus.json marks
    ``nvlink_sharp``, Hopper and Blackwell), NCCL's NVLink SHARP buffers, allocated on the first
    collectives of the profiling forward: the 0.19 H100 SXM logs measured 2.07 GiB at TP2 and ~0.04 GiB
    more per two ranks (fitted on 8 TP2/TP4 runs), 0.55 GiB at TP2 before 0.18. PCIe cards and NVLink bridges without
    NVSwitch add nothing TP-specific after the snapshot (8 x L40S TP8 on 0.10.2 measured 0.18 GiB,
    like TP1), and from 0.29 FlashInfer's all-reduce workspace joins on those boards
    (``gpu.flashinfer_allreduce_bytes``: flashinfer_all_reduce.py 0.33.0 L142-250, created lazily in the
    profiling pass since VLLM_ALLREDUCE_USE_FLASHINFER became "1", envs.py 0.29.0 L1864-1865). Pipeline
    stages without tensor parallelism measured 0.07 GiB.
    """
    recent = accounting.version >= (0, 18, 0) and accounting.engine == "V1"
    base = int(0.25 * GiB) if recent else int(0.13 * GiB)
    if tp > 1:
        nvswitch = gpu is not None and gpu.nvswitch_sharp(interconnect)
        total = (int((2.07 + 0.04 * (tp - 2)) * GiB) if recent else int(0.55 * GiB)) if nvswitch else base
        if gpu is not None and nvswitch and accounting.version >= (0, 29, 0):
            total += gpu.flashinfer_allreduce_bytes(tp)
        return total
    if pp > 1:
        return int(0.07 * GiB)
    return base


def cuda_graph_bytes(
    arch: ModelArchitecture,
    num_layers: int,
    accounting: VllmAccounting,
    *,
    max_num_seqs: int = 256,
    max_num_batched_tokens: int = 8192,
    compute_capability: str | None = None,
    decode_query_len: int = 1,
    graph_cases: int = 1,
    cudagraph_mode: str = "FULL_AND_PIECEWISE",
    given_sizes: tuple[int, ...] | None = None,
    given_max: int | None = None,
    interactivity: bool = False,
) -> int:
    """CUDA-graph memory of one GPU: vLLM's estimate where it is in the budget, else the capture itself.

    From 0.20 vLLM subtracts its own estimate (``profile_cudagraph_memory``) from the KV budget, so
    that is what fitgate predicts there, with the source's structure: fitted first-capture pool plus
    a fitted cost per extra graph and layer, times the graphs vLLM captures for these settings
    (cudagraphs.py). Before 0.20 the graphs are captured after KV sizing and what matters is the
    pool they really take (0.5-1.8 GiB in the 0.19 H100 logs): ~0.35 GiB plus ~17 MiB per layer
    captured, doubled per layer for models that raise the largest capture size (gpt-oss), plus
    0.25 GiB for MoE models (fitted on those logs' "Graph capturing finished ... took").
    ``graph_cases``: every size is captured that many times (2 with LoRA: without adapters and with
    ``max_loras + 1``, v1/cudagraph_dispatcher.py 0.33.0 L110-128, L179-230). ``cudagraph_mode``,
    ``given_sizes``, ``given_max``: the compilation config's (cudagraphs.py); mode NONE captures nothing.
    """
    if cudagraph_mode == "NONE":
        return 0
    if accounting.cudagraph_in_budget:
        sizes = capture_sizes(
            accounting,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            model_max_capture_size=arch.max_capture_size_override,
            compute_capability=compute_capability,
            decode_query_len=decode_query_len,
            given_sizes=given_sizes,
            given_max=given_max,
            interactivity=interactivity,
        )
        counts = graph_counts(sizes, max_num_seqs, decode_query_len, cudagraph_mode)
        if graph_cases > 1:
            counts = GraphCounts(counts.piecewise * graph_cases, counts.full * graph_cases, counts.largest)
        return cuda_graph_estimate_bytes(num_layers, arch.is_moe, counts, v2=accounting.version >= V2_GRAPHS_SINCE)
    per_layer = 17 * MiB * (2 if arch.max_capture_size_override else 1)
    moe = int(0.25 * GiB) if arch.is_moe else 0
    return int(0.35 * GiB) + num_layers * per_layer * graph_cases + moe


#: CUDA context, cuBLAS and NCCL communicators that exist before vLLM's start-up snapshot and stay
#: outside its budget (so the card must have this much free besides ``total x gmu``), at TP 1: the smallest
#: total - free a start-up log shows, 0.41 GiB (an A100 80GB at vLLM 0.31: "Free memory on device (78.84/79.25
#: GiB) on startup", hunt41; the 0.19 H100 logs show 0.51, an RTX 5090 Laptop passed gmu 0.98 on 22.36 GiB at
#: 0.29, so at most 0.45: hunt44 F4). As with TP > 1 below, the smallest is used: a start check that held 0.5 GiB
#: denied starts that passed.
CUDA_CONTEXT_BYTES = int(0.41 * GiB)
#: The TP-1 figure of the 0.19 H100 logs (79.19 - 78.68 GiB, 25 runs): what a start typically holds, counted where a
#: plan is warned (Tight), never where it is denied (verdict_rules.OutsideNeed.context_excess_bytes).
CUDA_CONTEXT_TYPICAL_BYTES = int(0.51 * GiB)
#: The same with tensor parallelism: NCCL communicators (warmed up), custom all-reduce IPC buffers and
#: torch symmetric memory are created in ``init_worker_distributed_environment`` before the snapshot
#: (gpu_worker.py 0.33.0 L504 vs L541-542, 0.34.0 L504-510 vs L549). Measured as total - free at the
#: snapshot in the 0.19.0 H100 SXM logs of shared/calibration: 0.51 GiB at TP1 (79.19 - 78.68, 25
#: runs), 1.53 GiB at TP2 and 1.55 GiB at TP4 (77.66 / 77.64, 6 runs), 2.01 GiB in 3 TP2 runs
#: (77.18). The smallest TP>1 figure is used: less outside the budget is never a false denial.
TP_PRE_SNAPSHOT_BYTES = int(1.53 * GiB)
#: The compute capabilities vLLM gives a torch symmetric-memory all-reduce buffer (``SymmMemCommunicator``: only
#: those in ``SYMM_MEM_ALL_REDUCE_MAX_SIZES``, device_communicators/all_reduce_utils.py 0.34.0 L58-83 and
#: symm_mem.py L58-76: 9.0, 10.0, 10.3, 10.7; earlier releases a subset). The H100 figure above holds it.
SYMM_MEM_CAPABILITIES = frozenset({"9.0", "10.0", "10.3", "10.7"})
#: TP > 1 on a GPU without symmetric memory (and, on GeForce boards, without the P2P that vLLM's custom
#: all-reduce needs: custom_all_reduce.py 0.34.0 ``_can_p2p``): the NCCL communicators and the CUDA context.
#: Measured as total - free in the start-up check's message: 0.63 GiB on 8 x RTX 3090 at TP 4 (23.56 - 22.93,
#: github.com/wtdcode/vllm-backport/issues/34), 1.13 / 0.90 GiB on 2 x RTX 5090 at TP 2 (31.4 - 30.27 / 30.5,
#: github.com/noonghunna/club-3090/issues/1087). The smallest is used, as above (hunt12 D1: 1.53 GiB denied
#: 2 x RTX 3090 at gmu 0.94 that their 1.41 GiB outside the budget holds).
TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES = int(0.63 * GiB)


def pre_snapshot_bytes(tp: int, compute_capability: str | None) -> int:
    """Device memory in use before vLLM's start-up snapshot on one worker (see TP_PRE_SNAPSHOT_BYTES).

    ``compute_capability`` None (AMD, a GPU given by its memory): no symmetric memory, the smaller figure.
    """
    if tp <= 1:
        return CUDA_CONTEXT_BYTES
    if compute_capability in SYMM_MEM_CAPABILITIES:
        return TP_PRE_SNAPSHOT_BYTES
    return TP_PRE_SNAPSHOT_NO_SYMM_MEM_BYTES
