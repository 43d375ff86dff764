"""The profiling pass: activation peak, non-torch memory and the CUDA-graph estimate.

vLLM measures these with one dummy forward pass of ``max_num_batched_tokens`` tokens and one
sampler pass over ``min(max_num_seqs, max_num_batched_tokens)`` requests (reference section 3).
fitgate models them with a few terms, fitted on the vLLM 0.19.0 H100 logs in shared/calibration
(benchmarks/accuracy.py prints the residuals):

* sampler pass (last pipeline stage only): ``0.146 GiB + b x num_seqs x vocab`` where ``b`` is
  14.35 bytes per logit from 0.17 on and 37.8 before (fp32 logits, probabilities, sort buffers);
* dense forward pass: ``max_num_batched_tokens x dtype x (7 x hidden + 3 x intermediate / TP)``;
* fused-MoE workspace, which persists across the two passes:
  ``max_num_batched_tokens x top_k x dtype x (max(2 x I/TP, hidden) + I/TP)`` (not for MXFP4
  experts, which use other kernels);
* peak = max(forward, sampler) + MoE workspace.

Non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) is a per-version
constant that grows with tensor parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.model import DenseMLP, ModelArchitecture, MoE
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import VllmAccounting

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


def _dense_intermediate(arch: ModelArchitecture, layers: range) -> int:
    widest = 0
    for i in layers:
        ffn = arch.layers[i].ffn
        if isinstance(ffn, DenseMLP):
            widest = max(widest, ffn.intermediate_size)
        elif isinstance(ffn, MoE):
            widest = max(widest, ffn.shared_intermediate_size)
    return widest


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
) -> ProfileEstimate:
    """Activation peak, non-torch increase and CUDA-graph memory of one GPU."""
    hidden = arch.hidden_size
    inter = _dense_intermediate(arch, layers) // tp
    if accounting.engine == "V0":
        per_token = V0_FORWARD_HIDDEN_FACTOR * hidden + V0_FORWARD_INTERMEDIATE_FACTOR * inter
    else:
        per_token = FORWARD_HIDDEN_FACTOR * hidden + FORWARD_INTERMEDIATE_FACTOR * inter
    forward = max_num_batched_tokens * dtype_bytes * per_token
    sampler = 0
    if last_stage:
        seqs = min(max_num_seqs, max_num_batched_tokens)
        sampler = accounting.sampler_base_bytes + int(accounting.sampler_bytes_per_logit * seqs * arch.vocab_size)
    workspace = 0
    mxfp4 = arch.quantization is not None and arch.quantization.method == "mxfp4"
    moe = next((arch.layers[i].ffn for i in layers if isinstance(arch.layers[i].ffn, MoE)), None)
    if isinstance(moe, MoE) and not mxfp4 and accounting.engine == "V1":
        n = moe.expert_intermediate_size // tp
        workspace = max_num_batched_tokens * moe.top_k * dtype_bytes * (max(2 * n, hidden) + n)
    activation = max(forward, sampler) + workspace
    return ProfileEstimate(
        activation_bytes=activation,
        sampler_bytes=sampler,
        forward_bytes=forward,
        moe_workspace_bytes=workspace,
        non_torch_bytes=non_torch_bytes(tp, pp, accounting),
        cuda_graph_bytes=0 if enforce_eager else cuda_graph_bytes(arch, len(layers), accounting),
    )


def non_torch_bytes(tp: int, pp: int, accounting: VllmAccounting) -> int:
    """Growth of non-torch memory during profiling (0.19 H100: 0.25 GiB at TP1, ~2.1 GiB at TP2-4).

    Pipeline stages without tensor parallelism measured 0.07 GiB; releases before 0.18 measured
    0.13 GiB at TP1 and 0.55 GiB at TP2.
    """
    recent = accounting.version >= (0, 18, 0) and accounting.engine == "V1"
    if tp > 1:
        return int((2.07 + 0.04 * (tp - 2)) * GiB) if recent else int(0.55 * GiB)
    if pp > 1:
        return int(0.07 * GiB)
    return int(0.25 * GiB) if recent else int(0.13 * GiB)


def cuda_graph_bytes(arch: ModelArchitecture, num_layers: int, accounting: VllmAccounting) -> int:
    """Memory CUDA-graph capture takes (0.5-1.8 GiB in the 0.19 H100 logs).

    ~0.35 GiB plus ~17 MiB per layer captured, doubled per layer for models that raise the largest
    capture size (gpt-oss: 992), plus 0.25 GiB for MoE models.
    """
    per_layer = 17 * MiB * (2 if arch.max_capture_size_override else 1)
    moe = int(0.25 * GiB) if arch.is_moe else 0
    return int(0.35 * GiB) + num_layers * per_layer + moe


#: CUDA context, cuBLAS and NCCL communicators that exist before vLLM's start-up snapshot and stay
#: outside its budget (so the card must have this much free besides ``total x gmu``).
CUDA_CONTEXT_BYTES = int(0.5 * GiB)
