"""What a plan says: the verdict, its reasons and the per-GPU numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from fitgate.sizing.activation import ProfileEstimate
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.kv_layout import KVLayout
from fitgate.sizing.lora import LoraBytes
from fitgate.sizing.model import ModelArchitecture
from fitgate.sizing.multimodal import EncoderProfile
from fitgate.sizing.offload import HostMemory
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.serving import ResolvedServing, Workload
from fitgate.sizing.weights import RankWeights, WeightInventory


class Verdict(StrEnum):
    """Whether a deployment fits its GPUs."""

    FITS = "Fits"
    TIGHT = "Tight"
    DOES_NOT_FIT = "DoesNotFit"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Reason:
    """One finding behind a verdict: a code of :class:`ReasonCode` and a sentence with the numbers."""

    code: ReasonCode
    message: str


@dataclass(frozen=True)
class ModelInput:
    """A model as the sizing core needs it: architecture plus weight inventory."""

    name: str
    arch: ModelArchitecture
    inventory: WeightInventory


@dataclass(frozen=True)
class RankPlan:
    """The budget of one worker (tensor rank 0 of pipeline stage ``pp_rank``)."""

    pp_rank: int
    layers: range
    weights: RankWeights
    profile: ProfileEstimate
    requested_bytes: int
    non_kv_bytes: int
    available_kv_bytes: int
    layout: KVLayout
    num_blocks: int
    # --- LoRA and weight offload (issue 20): included in ``non_kv_bytes`` ---
    lora: LoraBytes | None = None  # adapter slots on this GPU (``--enable-lora``)
    offloaded_bytes: int = 0  # weights ``--cpu-offload-gb`` keeps in host memory instead
    encoder: EncoderProfile | None = None  # a vision-language model's encoder profile (first stage)
    # hunt98 F1: with the extensible cache (0.34) ``available_kv_bytes`` is floored at 0; how far below it the non-KV
    # memory went, so a shortfall is judged on the whole deficit, not on one request against 0
    kv_short_bytes: int = 0
    # hunt203 F1: vLLM 0.9-0.13 check one request against each layer's own spec (sliding-window, chunked) before
    # unifying them into full attention: that layout, where it differs from ``layout`` (request_check_bytes)
    check_layout: KVLayout | None = None

    @property
    def loaded_weights_bytes(self) -> int:
        """What vLLM's "Model loading took" counts: the weights on the GPU plus LoRA slots (issue 20)."""
        return self.weights.total_bytes - self.offloaded_bytes + (self.lora.total_bytes if self.lora else 0)


@dataclass(frozen=True)
class PerGpu:
    """The per-GPU breakdown shown to users (the rank with the fewest KV blocks)."""

    capacity_bytes: int
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_cache_bytes: int
    headroom_bytes: int
    outside_budget_bytes: int
    cuda_graphs_in_budget: bool = False  # vLLM deducted its CUDA-graph estimate from the KV budget
    # --- LoRA and weight offload (issue 20): weights_bytes is what vLLM's "Model loading took" counts ---
    lora_bytes: int = 0  # adapter slots, included in weights_bytes
    cpu_offload_bytes: int = 0  # weights held in host memory, excluded from weights_bytes


@dataclass(frozen=True)
class KVSummary:
    """The KV pool as vLLM reports it."""

    bytes_per_token: int
    page_size_bytes: int
    block_size: int
    num_blocks: int
    num_groups: int
    kinds: tuple[str, ...]
    reported_tokens: int
    max_concurrency: float
    one_request_bytes: int
    workload_blocks: int | None
    workload_fraction: float | None


@dataclass(frozen=True)
class Plan:
    """The result of sizing one deployment on one GPU model."""

    model: str
    gpu: GpuModel
    serving: ResolvedServing
    workload: Workload | None
    verdict: Verdict
    reasons: tuple[Reason, ...]
    per_gpu: PerGpu
    kv: KVSummary
    ranks: tuple[RankPlan, ...]
    binding_rank: int
    weights_estimated: bool
    max_model_len_that_fits: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    host: HostMemory | None = None  # host memory of one replica's engine (issue 20), None when nothing is pinned
