"""Shared GPUs: how much of a card one pod may use, and what vLLM's ``--gpu-memory-utilization`` does there.

vLLM sizes its memory from the device total CUDA reports: ``requested_memory = total_memory x
gpu_memory_utilization`` (vllm-project/vllm ``vllm/v1/worker/gpu_worker.py`` ``Worker.init_device``; recent
releases compute it in ``request_memory`` of ``vllm/v1/worker/utils.py``), and refuses to start when the free
memory at start is below that ("Free memory on device ... on startup is less than desired GPU memory
utilization"). What "total" is depends on the sharing mechanism:

* **time-slicing** (k8s-device-plugin ``sharing.timeSlicing``; GPU Feature Discovery labels
  ``nvidia.com/gpu.replicas`` > 1 and ``nvidia.com/gpu.sharing-strategy=time-slicing``, product suffix
  ``-SHARED``): no memory isolation. CUDA reports the whole card, N pods share it, so a pod's fair share
  is card / N; a gmu above 1/N takes memory the other pods need (the later pods fail to start).
* **MPS** (``nvidia.com/gpu.sharing-strategy=mps``): the device plugin's MPS daemon pins each client's
  device memory to card / replicas (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``); CUDA still reports the card
  to the process as the total while its free memory stops at the limit, so a gmu above 1/N asks for more
  than the limit: vLLM's start-up check refuses ("Free memory on device ... is less than desired GPU memory
  utilization"), or, where a release has no such check, its allocation fails with CUDA out of memory (hunt131 F2:
  the plugin's ``perDevicePinnedDeviceMemoryLimits``, a public walkthrough's 1 GB limit with 14930 MB total).
* **HAMi** (``nvidia.com/gpumem`` MiB or ``nvidia.com/gpumem-percentage`` in the pod's limits): HAMi-core
  intercepts ``cuMemGetInfo_v2`` and reports the limit as the device total (Project-HAMi/HAMi-core
  src/cuda/memory.c, ``HOOK_MEMINFO_ENABLE``), so gmu applies to the slice itself.
* **Run:ai** (``gpu-fraction`` / ``gpu-memory`` pod annotations): whether CUDA reports the fraction or the
  whole card is not verified from Run:ai's source; :func:`check_share` says what the whole card would do, and
  the pool plan (operator/decision/poolplan.py) plans the slice and answers Tight, never a denial on that alone.

Pure functions: the verdict names the mechanism, the limit vLLM will hit and the gmu that fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from fitgate.sizing.units import MiB, fmt_gib
from fitgate.workloads.quantity import parse_quantity

#: The most pods that may share one card (larger replica counts are read as this).
MAX_REPLICAS = 256


class Mechanism(StrEnum):
    """How a card is shared."""

    TIME_SLICING = "time-slicing"
    MPS = "MPS"
    HAMI = "HAMi"
    RUNAI = "Run:ai"


@dataclass(frozen=True)
class Share:
    """A pod's part of one card: ``fraction`` of it, or ``memory_bytes`` of it (HAMi/Run:ai MiB limits)."""

    mechanism: Mechanism
    fraction: float | None = None
    memory_bytes: int | None = None
    replicas: int | None = None  # time-slicing / MPS: pods per card
    # the sharing refuses a pod that asks for more than one shared GPU: MPS (the device plugin), GKE's time-sharing
    # ("at most 1 nvidia.com/gpu can be requested", UnexpectedAdmissionError; hunt81 F2)
    one_per_pod: bool = False

    @property
    def vllm_sees_slice(self) -> bool:
        """Whether CUDA reports the slice as the device total to vLLM (HAMi), not the whole card."""
        return self.mechanism is Mechanism.HAMI

    def slice_bytes(self, card_bytes: int) -> int:
        """The memory this pod may use on a card of ``card_bytes``."""
        if self.memory_bytes is not None:
            return min(self.memory_bytes, card_bytes)
        return int(card_bytes * (self.fraction if self.fraction is not None else 1.0))

    def describe(self, card_bytes: int) -> str:
        """The share in words, naming the mechanism."""
        part = fmt_gib(self.slice_bytes(card_bytes))
        if self.replicas:
            return f"{self.mechanism} shares each card among {self.replicas} pods: {part} of {fmt_gib(card_bytes)}"
        return f"{self.mechanism} gives this pod {part} of the {fmt_gib(card_bytes)} card"


class ShareError(ValueError):
    """A share request that cannot be read (the message names the field, the value and the limit)."""


def _positive_int(value: object) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def node_share(labels: Mapping[str, str], advertised: int | None = None) -> Share | None:
    """Time-slicing or MPS from GPU Feature Discovery's labels (None: every pod gets whole cards).

    ``advertised``: the GPUs the node's allocatable offers. Where the labels say the cards are shared but give no
    replica count above 1 (GFD left ``nvidia.com/gpu.replicas`` at 1 with ``-SHARED`` products,
    NVIDIA/gpu-feature-discovery issue 76), the replicas are what it offers per card (``nvidia.com/gpu.count``).
    """
    replicas = _positive_int(labels.get("nvidia.com/gpu.replicas"))
    strategy = labels.get("nvidia.com/gpu.sharing-strategy", "").lower()
    gke = labels.get("cloud.google.com/gke-gpu-sharing-strategy", "").lower() in ("time-sharing", "mps")
    if gke:
        # hunt77 F2: GKE's GPU sharing writes its own labels (GKE "Share GPUs with multiple workloads using
        # time-sharing" / "... using NVIDIA MPS"): the strategy and the clients each card takes; both refuse a pod
        # that asks for more than one shared GPU (hunt81 F2)
        mps = labels.get("cloud.google.com/gke-gpu-sharing-strategy", "").lower() == "mps"
        strategy = strategy or ("mps" if mps else "time-slicing")
        replicas = replicas or _positive_int(labels.get("cloud.google.com/gke-max-shared-clients-per-gpu"))
    shared = labels.get("nvidia.com/gpu.product", "").endswith("-SHARED")
    cards = _positive_int(labels.get("nvidia.com/gpu.count"))
    if (shared or strategy in ("mps", "time-slicing")) and (replicas or 1) == 1 and advertised and cards:
        replicas = max(1, advertised // cards)
    n = min(replicas or 1, MAX_REPLICAS)
    if strategy == "mps" or (labels.get("nvidia.com/mps.capable") == "true" and replicas and replicas > 1):
        return Share(Mechanism.MPS, fraction=1 / n, replicas=n, one_per_pod=True) if n > 1 else None
    if (replicas and replicas > 1) or shared or strategy == "time-slicing":
        return Share(Mechanism.TIME_SLICING, fraction=1 / n, replicas=n, one_per_pod=gke) if n > 1 else None
    return None


def pod_share(limits: Mapping[str, object], annotations: Mapping[str, str]) -> Share | None:
    """HAMi (``nvidia.com/gpumem`` MiB, ``nvidia.com/gpumem-percentage``) or Run:ai (``gpu-fraction``, ``gpu-memory``).

    Raises :class:`ShareError` for a value out of range.
    """
    gpumem = limits.get("nvidia.com/gpumem")
    if gpumem is not None:
        mib = parse_quantity(gpumem)  # a quantity: "20k" as the API server writes 20000 (hunt131 F1)
        mib = mib if mib is not None and mib > 0 else None
        if mib is None or mib > 16 * 1024 * 1024:
            raise ShareError(f"nvidia.com/gpumem: {gpumem!r} is not a MiB count from 1 to 16777216")
        return Share(Mechanism.HAMI, memory_bytes=mib * MiB)
    percentage = limits.get("nvidia.com/gpumem-percentage")
    if percentage is not None:
        pct = parse_quantity(percentage)
        pct = pct if pct is not None and pct > 0 else None
        if pct is None or pct > 100:
            raise ShareError(f"nvidia.com/gpumem-percentage: {percentage!r} is not a percentage from 1 to 100")
        return Share(Mechanism.HAMI, fraction=pct / 100)
    fraction = annotations.get("gpu-fraction")
    if fraction is not None:
        try:
            value = float(fraction)
        except ValueError:
            value = math.nan
        if not 0 < value <= 1:
            raise ShareError(f"gpu-fraction: {fraction!r} is not a fraction in (0, 1]")
        return Share(Mechanism.RUNAI, fraction=value)
    memory = annotations.get("gpu-memory")
    if memory is not None:
        mib = _positive_int(memory)
        if mib is None or mib > 16 * 1024 * 1024:
            raise ShareError(f"gpu-memory: {memory!r} is not a MiB count from 1 to 16777216")
        return Share(Mechanism.RUNAI, memory_bytes=mib * MiB)
    return None


def gmu_for_slice(slice_bytes: int, card_bytes: int) -> float:
    """The largest gpu-memory-utilization (2 decimals, rounded down) whose request stays in the slice."""
    return math.floor(slice_bytes * 100 / card_bytes + 1e-6) / 100  # 1e-6: a quarter of an odd byte count is 0.25


@dataclass(frozen=True)
class ShareCheck:
    """What vLLM will do with ``gmu`` on a shared card."""

    exceeds: bool  # vLLM asks for more than the pod's share
    requested_bytes: int  # gmu x what CUDA reports
    slice_bytes: int
    recommended_gmu: float
    message: str
    #: Where vLLM's request exceeds the share: what the whole-card request hits and the gmu that stays within it
    overrun: str = ""


def check_share(share: Share, card_bytes: int, gmu: float) -> ShareCheck:
    """Compare vLLM's request (``total x gmu``) with the pod's share and say which limit it hits."""
    slice_bytes = share.slice_bytes(card_bytes)
    if share.vllm_sees_slice:  # HAMi: CUDA reports the slice as the device total
        requested = int(slice_bytes * gmu)
        return ShareCheck(
            False,
            requested,
            slice_bytes,
            gmu,
            f"{share.describe(card_bytes)}; HAMi reports {fmt_gib(slice_bytes)} to CUDA as the device total, so "
            f"vLLM's --gpu-memory-utilization {gmu:g} applies to the slice: it requests {fmt_gib(requested)}",
        )
    requested = int(card_bytes * gmu)
    recommended = gmu_for_slice(slice_bytes, card_bytes)
    if requested <= slice_bytes:
        return ShareCheck(
            False,
            requested,
            slice_bytes,
            gmu,
            f"{share.describe(card_bytes)}; vLLM requests {gmu:g} x {fmt_gib(card_bytes)} = {fmt_gib(requested)}, "
            "within this pod's share",
        )
    if share.mechanism is Mechanism.MPS:
        limit = (
            f"the MPS client's pinned device memory limit ({fmt_gib(slice_bytes)}): CUDA's free memory stops "
            "there, so vLLM's start-up check refuses (or its allocation fails with CUDA out of memory)"
        )
    elif share.mechanism is Mechanism.RUNAI:
        limit = f"the Run:ai fraction ({fmt_gib(slice_bytes)}): the pod is stopped or its allocation fails"
    else:
        limit = (
            "the memory the other pods on the card hold: the later pods fail at start with 'Free memory on "
            "device ... is less than desired GPU memory utilization'"
        )
    overrun = (
        f"vLLM applies --gpu-memory-utilization {gmu:g} to the whole card "
        f"(requested_memory = total x gmu = {fmt_gib(requested)}) and hits {limit}; "
        f"set spec.serving.gpuMemoryUtilization: {recommended:.2f} [vLLM --gpu-memory-utilization {recommended:.2f}]"
    )
    return ShareCheck(
        True, requested, slice_bytes, recommended, f"{share.describe(card_bytes)}, but {overrun}", overrun
    )
