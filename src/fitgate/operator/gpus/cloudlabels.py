"""Which GPU a set of node labels names, in every scheme clusters carry (pure).

One reader for Node labels, a pod's nodeSelector and an autoscaler template's labels, so a GPU is
the same whichever of them names it:

* NVIDIA GPU Feature Discovery: ``nvidia.com/gpu.product`` (``-SHARED`` suffix dropped), ``nvidia.com/gpu.count``
  (k8s-device-plugin docs/gpu-feature-discovery/README.md);
* AMD GPU Operator node labeller: ``amd.com/gpu.product-name`` (ROCm/gpu-operator docs/device_plugin);
* Intel GPU plugin NFD rules: ``gpu.intel.com/product`` (``Max_1550``) and ``gpu.intel.com/device.count``
  (intel/intel-device-plugins-for-kubernetes cmd/gpu_plugin/labels.md);
* GKE: ``cloud.google.com/gke-accelerator`` (``nvidia-h100-80gb``) and, on Autopilot,
  ``cloud.google.com/gke-accelerator-count`` (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus);
* Karpenter on AWS / EKS Auto Mode: ``karpenter.k8s.aws/instance-gpu-name`` (``h100``), ``-gpu-count``,
  ``-gpu-memory`` (MiB), ``instance-family`` (``g6e``, where the family has one GPU), and the
  ``eks.amazonaws.com/`` twins
  (aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md);
* CoreWeave (and Ori's) GPU class, ``gpu.nvidia.com/class`` (``H100_NVLINK_80GB``, ``A100_PCIE_40GB``, ``L40S``;
  hunt23 G1), and CoreWeave's ``gpu.nvidia.com/model`` (``H200``, ``A100_PCIE_80GB``: its release notes' node
  selector; llm-d-benchmark's ``gpu.nvidia.com/model:H200`` affinity; hunt25 F4), read as a product name;
* clouds' GPU-name labels whose value is the card's name (:data:`NAME_LABELS`; hunt50 F8): Alibaba ACK's
  ``aliyun.accelerator/nvidia_name`` (``NVIDIA-A10``, ``Tesla-V100-SXM2-16GB``: the cardNameKey / gpuCountKey of
  AliyunContainerService/gpushare-device-plugin), Volcengine VKE's ``machine.cluster.vke.volcengine.com/gpu-name``
  (AIBrix's default node-affinity key, vllm-project/aibrix pkg/controller/constants), AKS node auto-provisioning's
  ``karpenter.azure.com/sku-gpu-name`` and ``-sku-gpu-count`` (Azure/karpenter-provider-azure docs: ``A100``,
  ``T4``, ``V100``); a bare name of two sizes (``A100``, ``V100``) is unknown, never a guess;
* the instance type, ``node.kubernetes.io/instance-type`` (``p5.48xlarge``, ``a3-highgpu-8g``,
  ``Standard_ND96isr_H100_v5``): AWS, GCP, Azure and KAITO's gpu-provisioner nodes
  (:mod:`fitgate.sizing.instances`).

The first scheme that names a GPU wins, in that order (the device plugin's own labels before the cloud's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from fitgate.operator.gpus.dra import DRIVER_RESERVED_BYTES
from fitgate.sizing.gpus import GpuModel, find_gpu, with_reported_memory
from fitgate.sizing.instances import (
    AMBIGUOUS_NAMES,
    bare_gpu_name,
    class_gpu,
    gke_accelerator,
    instance_family_gpu,
    instance_gpus,
    karpenter_gpu,
    larger_namesake,
)
from fitgate.sizing.units import MiB

GFD_PRODUCT = "nvidia.com/gpu.product"
AMD_PRODUCT = "amd.com/gpu.product-name"
INTEL_PRODUCT = "gpu.intel.com/product"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_COUNT = "cloud.google.com/gke-accelerator-count"
#: GKE's MIG node pools: the partition size each nvidia.com/gpu of the node is (``1g.5gb``)
GKE_PARTITION = "cloud.google.com/gke-gpu-partition-size"
GPU_CLASS = "gpu.nvidia.com/class"
GPU_MODEL = "gpu.nvidia.com/model"
KARPENTER_PREFIXES = ("karpenter.k8s.aws/", "eks.amazonaws.com/")
#: Bare names of cards of two memory sizes: AKS's ``H100`` is the 80 GB ND H100 v5 or the 94 GB NC H100 v5 (NVL).
_BARE_AMBIGUOUS = frozenset({*AMBIGUOUS_NAMES, "h100"})
#: (label, its GPU-count label or None): clouds' labels whose value names the card.
NAME_LABELS = (
    ("aliyun.accelerator/nvidia_name", "aliyun.accelerator/nvidia_count"),
    ("machine.cluster.vke.volcengine.com/gpu-name", None),
    ("karpenter.azure.com/sku-gpu-name", "karpenter.azure.com/sku-gpu-count"),
    # hunt183 F3/F4: DigitalOcean DOKS (h100, mi300x; docs.digitalocean.com kubernetes GPU node labels) and Nebius
    # mk8s (H100, H200, B200; a node's nebius.com/gpu-name beside nebius.com/resource-preset)
    ("doks.digitalocean.com/gpu-model", None),
    ("nebius.com/gpu-name", None),
)
#: Clouds whose bare ``H100`` is one card (DigitalOcean's and Nebius's H100s are the 80 GB SXM: their GPU Droplet and
#: ``gpu-h100-sxm`` platforms), where AKS's may be the 94 GB NVL.
_ONE_H100 = {"doks.digitalocean.com/gpu-model": "H100-SXM", "nebius.com/gpu-name": "H100-SXM"}
#: The memory labels beside them, in MiB ("23028MiB": HAMi's ACK example, gpushare-device-plugin's gpuMemKey; VKE's
#: twin): an H20 of 141 GB is named as the 96 GB one (hunt175 F2), so the figure decides, as GFD's does.
MEMORY_LABELS = ("aliyun.accelerator/nvidia_mem", "machine.cluster.vke.volcengine.com/gpu-mem", "nvidia.com/gpu.memory")
#: The AMD labeller's ``amd.com/gpu.device-id`` (hex, no revision) of the Instinct cards one device ID names, as
#: libdrm's amdgpu.ids lists them (mesa/libdrm data/amdgpu.ids; AMD's amdgv marketing-name table), in the labeller's
#: product-name form (hunt179 F2: exalsius's rendered pods select ``amd.com/gpu.device-id: 74a1`` alone). IDs
#: whose revisions name different cards (744C: RX 7900 XTX / XT / GRE; 7551: R9700 / R9600D) and cards the catalog
#: lacks (74A0, MI300A) are left out: such a selector stays unknown unless a VRAM label sizes it.
AMD_DEVICE_IDS = {
    "738c": "AMD_Instinct_MI100",
    "740f": "AMD_Instinct_MI210",
    "740c": "AMD_Instinct_MI250X_/_MI250",
    "7408": "AMD_Instinct_MI250X",
    "74a1": "AMD_Instinct_MI300X",
    "74a2": "AMD_Instinct_MI308X",
    "74a5": "AMD_Instinct_MI325X",
    "74a8": "AMD_Instinct_MI308X_HF",
    "74a9": "AMD_Instinct_MI300X_HF",
    "74b5": "AMD_Instinct_MI300X_VF",
    "74b6": "AMD_Instinct_MI308X",
    "74bc": "AMD_Instinct_MI308X_VF",
    "74bd": "AMD_Instinct_MI300X_HF",
    "75a0": "AMD_Instinct_MI350X",
    "75a3": "AMD_Instinct_MI355X",
    "75b0": "AMD_Instinct_MI350X_VF",
    "75b3": "AMD_Instinct_MI355X_VF",
}
AMD_DEVICE_ID = "amd.com/gpu.device-id"


def amd_device_product(labels: Mapping[str, str]) -> str | None:
    """The product name an AMD ``amd.com/gpu.device-id`` label (or its ``beta.`` twin) names, or None."""
    raw = labels.get(AMD_DEVICE_ID) or labels.get(f"beta.{AMD_DEVICE_ID}") or ""
    return AMD_DEVICE_IDS.get(raw.strip().lower().removeprefix("0x")[:8])


#: The instance type, and CoreWeave's own copy of it (``node.coreweave.cloud/type: gd-8xh100ib-i128``: coreweave
#: reference-architecture arena/notebooks/lib/k8s.py; hunt183 F2).
INSTANCE_TYPE_KEYS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "node.coreweave.cloud/type",
)

#: The extended resource each vendor's device plugin advertises (Intel: i915 or xe, the kernel driver's).
VENDOR_RESOURCES = {
    "nvidia": ("nvidia.com/gpu",),
    "amd": ("amd.com/gpu",),
    "intel": ("gpu.intel.com/i915", "gpu.intel.com/xe"),
}

#: Label keys that name a GPU product or the instance that carries it: a nodeSelector on one of them
#: selects a GPU, so no node with it means "no such node yet", never "any GPU".
GPU_KEYS = (
    GFD_PRODUCT,
    AMD_PRODUCT,
    INTEL_PRODUCT,
    GKE_ACCELERATOR,
    GPU_CLASS,
    GPU_MODEL,
    *(key for key, _ in NAME_LABELS),
    *(f"{p}instance-gpu-name" for p in KARPENTER_PREFIXES),
    *INSTANCE_TYPE_KEYS,
)

#: Karpenter's instance-family labels: a GPU where every instance type of the family carries the same one (g6e).
FAMILY_KEYS = tuple(f"{p}instance-family" for p in KARPENTER_PREFIXES)


@dataclass(frozen=True)
class LabelGpu:
    """The GPU some labels name, and how many per node when they say."""

    product: str  # as the pool shows it: GFD/AMD/Intel's own product string, else the catalog name
    gpu: GpuModel
    count: int | None
    vendor: str
    scheme: str  # gfd, amd, intel, gke, karpenter, instance-type

    @property
    def resources(self) -> tuple[str, ...]:
        """The extended resources a pod asks for to get these GPUs."""
        return VENDOR_RESOURCES.get(self.vendor, ("nvidia.com/gpu",))


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or len(text) > 9:
        return None
    return int(text)


def memory_label_mib(labels: Mapping[str, str]) -> int | None:
    """A node's GPU memory in MiB from :data:`MEMORY_LABELS` (a number, or with a ``MiB`` / ``Mi`` unit), or None."""
    for key in MEMORY_LABELS:
        match = re.fullmatch(r"(\d{1,9})\s*(MiB|Mi)?", (labels.get(key) or "").strip())
        if match:
            return int(match.group(1))
    return None


def gpu_from_labels(labels: Mapping[str, str]) -> tuple[LabelGpu | None, str | None]:
    """The GPU ``labels`` name, and a note when a GPU label is there but names nothing fitgate knows."""
    product = labels.get(GFD_PRODUCT)
    if product:
        product = re.sub(r"-SHARED$", "", product)
        gpu = find_gpu(product)
        if gpu is not None and "-MIG-" not in product:
            return LabelGpu(product, gpu, _int(labels.get("nvidia.com/gpu.count")), "nvidia", "gfd"), None
        return None, f"{GFD_PRODUCT}={product} is not in the GPU catalog"
    for key, vendor, count_key in (
        (AMD_PRODUCT, "amd", None),
        (INTEL_PRODUCT, "intel", "gpu.intel.com/device.count"),
    ):
        product = labels.get(key)
        if product:
            gpu = find_gpu(product)
            if gpu is None:
                return None, f"{key}={product} is not in the GPU catalog"
            return LabelGpu(product, gpu, _int(labels.get(count_key)) if count_key else None, vendor, vendor), None
    accel = labels.get(GKE_ACCELERATOR)
    if accel:
        gpu = gke_accelerator(accel)
        if gpu is None:
            return None, f"{GKE_ACCELERATOR}={accel} is not in fitgate's table of GKE accelerators"
        count = _int(labels.get(GKE_COUNT)) or _count_of_instance(labels)
        return LabelGpu(gpu.name, gpu, count, gpu.vendor, "gke"), None
    for key in (GPU_CLASS, GPU_MODEL):
        gpu_class = labels.get(key)
        if gpu_class:
            named = _two_sizes(gpu_class, labels, _count_of_instance(labels), "gpu-class")
            if named is not None:
                return named, None
            gpu = class_gpu(gpu_class)
            if gpu is None:
                return None, f"{key}={gpu_class} is not in the GPU catalog"
            return LabelGpu(gpu.name, gpu, _count_of_instance(labels), gpu.vendor, "gpu-class"), None
    for key, count_key in NAME_LABELS:
        value = labels.get(key)
        if value and _count_of_instance(labels) is None:  # a known instance type (AKS's sku-name) says more
            count = _int(labels.get(count_key)) if count_key else None
            named = _two_sizes(value, labels, count, "cloud-name") if says_memory(labels) else None
            if named is not None:  # a bare A100 / V100 with its memory label: that card (without one: unknown)
                return named, None
            bare = bare_gpu_name(value)
            own = _ONE_H100.get(key) if bare.lower() == "h100" else None
            gpu = find_gpu(own) if own else None if bare.lower() in _BARE_AMBIGUOUS else class_gpu(value)
            if gpu is None:
                return None, f"{key}={value[:64]} names no card of the GPU catalog (or not its memory size)"
            mib = memory_label_mib(labels)
            if mib is not None:
                gpu, _ = with_reported_memory(gpu, mib * MiB - DRIVER_RESERVED_BYTES, f"{key} memory", mib * MiB)
            return LabelGpu(gpu.name, gpu, count or _count_of_instance(labels), gpu.vendor, "cloud-name"), None
    for prefix in KARPENTER_PREFIXES:
        name = labels.get(f"{prefix}instance-gpu-name")
        if name:
            memory = _int(labels.get(f"{prefix}instance-gpu-memory"))
            gpu = karpenter_gpu(name, memory)
            if gpu is None:
                size = f" with instance-gpu-memory={memory} MiB" if memory is not None else ""
                return None, f"{prefix}instance-gpu-name={name}{size} is not in fitgate's table of Karpenter GPU names"
            count = _int(labels.get(f"{prefix}instance-gpu-count")) or _count_of_instance(labels)
            return LabelGpu(gpu.name, gpu, count, gpu.vendor, "karpenter"), None
    for prefix in KARPENTER_PREFIXES:
        family = labels.get(f"{prefix}instance-family")
        gpu = instance_family_gpu(family) if family else None
        if gpu is not None and not any(labels.get(k) for k in INSTANCE_TYPE_KEYS):
            count = _int(labels.get(f"{prefix}instance-gpu-count"))
            return LabelGpu(gpu.name, gpu, count, gpu.vendor, "karpenter"), None
    for key in INSTANCE_TYPE_KEYS:
        itype = labels.get(key)
        if itype:
            found = instance_gpus(itype)
            if found is not None:
                return LabelGpu(found.gpu.name, found.gpu, found.count, found.gpu.vendor, "instance-type"), None
            return None, None  # most instance types have no GPU: nothing to say
    return None, None


#: CoreWeave's GPU memory label, whole GiB (``gpu.nvidia.com/vram: "80"``; its docs: "GPU VRAM in Gigabytes").
GPU_VRAM_GIB = "gpu.nvidia.com/vram"


def _two_sizes(value: str, labels: Mapping[str, str], count: int | None, scheme: str) -> LabelGpu | None:
    """A bare name of a card sold in two memory sizes (``A100``, ``V100``), or None for any other name.

    A memory label beside it (:data:`MEMORY_LABELS` in MiB, CoreWeave's :data:`GPU_VRAM_GIB`) picks the size nearest;
    without one the smaller card is named with the bare name as its product, so :func:`namesakes` (and the offline
    check) try the larger too: hunt183 F1, CoreWeave's ``gpu.nvidia.com/model: A100`` beside ``gpu.nvidia.com/vram:
    "80"`` was read as the 40 GB card and a 32B model that fits an 80 GB one was denied.
    """
    bare = bare_gpu_name(value)
    # CoreWeave's classic classes name the link, not the size: A100_NVLINK, Tesla_V100_NVLINK (its table says 40 and
    # 16 GB; read as either card, so never denied on the smaller where the larger would serve)
    linkless = re.sub(r"[-_ ](NVLINK|PCIE|SXM\d?)$", "", bare, flags=re.IGNORECASE)
    cards = [card for name in AMBIGUOUS_NAMES.get(linkless.lower(), ()) if (card := find_gpu(name)) is not None]
    if len(cards) != 2:
        return None
    mib = _memory_mib(labels)
    if mib is None:
        return LabelGpu(linkless, cards[0], count, cards[0].vendor, scheme)
    card = min(cards, key=lambda c: abs(c.memory_bytes - mib * MiB))
    return LabelGpu(card.name, card, count, card.vendor, scheme)


def _memory_mib(labels: Mapping[str, str]) -> int | None:
    """A memory label's MiB: :func:`memory_label_mib`, else CoreWeave's :data:`GPU_VRAM_GIB` (whole GiB)."""
    mib = memory_label_mib(labels)
    gib = _int(labels.get(GPU_VRAM_GIB))
    return mib if mib is not None or gib is None else gib * 1024


def _count_of_instance(labels: Mapping[str, str]) -> int | None:
    for key in INSTANCE_TYPE_KEYS:
        found = instance_gpus(labels.get(key) or "")
        if found is not None:
            return found.count
    return None


def names_a_gpu(selector: Mapping[str, str]) -> bool:
    """Whether a nodeSelector selects by a GPU label (product, accelerator, GPU name or instance type)."""
    return any(key in selector for key in GPU_KEYS)


def namesakes(got: LabelGpu, labels: Mapping[str, str]) -> tuple[LabelGpu, ...]:
    """``got``, and the larger card of its name where no memory label says which (a pool with no node yet).

    NVIDIA's H20 ships with 96 GB and 141 GB and nvidia-smi names both "NVIDIA H20" (GH200: 96 / 144 GB); a node
    labels its memory, a selector or an autoscaler template may not. Both are then the pool's prospects, as
    ``--gpu H20`` plans both (hunt175 F2: a DeepSeek-V3.2 TP 8 that ran on 141 GB H20s was denied on the 96 GB).
    """
    larger = larger_namesake(got.gpu.name) or larger_namesake(bare_gpu_name(got.product))
    card = find_gpu(got.gpu.name)
    if larger is None or card is None or got.gpu.memory_bytes != card.memory_bytes or says_memory(labels):
        return (got,)
    return got, replace(got, product=larger.name, gpu=larger)


def says_memory(labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` say which board a name shared by two is: a memory label, or a GPU name with its GB in it."""
    if _memory_mib(labels) is not None:
        return True
    return any(re.search(r"\d{2,3}\s*G", labels.get(key) or "", re.IGNORECASE) for key in GPU_KEYS)
