"""The cluster's GPUs, from Node objects: GPU Feature Discovery and AMD labels, allocatable GPUs, MIG.

Pure functions over Node dicts (the node watch calls :func:`node_gpus`). A malformed label never
raises: the node is kept with what could be read and a note, or skipped when no GPU can be read.

* NVIDIA (GPU Feature Discovery): ``nvidia.com/gpu.product`` (``-SHARED`` suffix under time-slicing),
  ``nvidia.com/gpu.memory`` (MiB per GPU, nvidia-smi's total), ``nvidia.com/gpu.count``, allocatable
  ``nvidia.com/gpu``; MIG single strategy (the product ends in ``-MIG-<profile>`` and the memory label
  is per MIG device) and mixed strategy (allocatable ``nvidia.com/mig-<profile>`` resources with
  ``nvidia.com/mig-<profile>.memory`` labels).
* AMD (GPU Operator node labeller): ``amd.com/gpu.product-name``, ``amd.com/gpu.vram`` (e.g. ``64G``),
  allocatable ``amd.com/gpu``.
* Without those product labels, the cloud's (:mod:`fitgate.operator.gpus.cloudlabels`): the GKE accelerator,
  Karpenter's / EKS Auto Mode's GPU name, the instance type (AWS, GCP, Azure), Intel's product label; the
  GPUs counted from the allocatable extended resource.

Device memory comes from the GPU catalog by product (what CUDA reports); unknown products fall back
to the memory label minus the ~470 MiB the driver keeps (measured on H100: 81559 MiB by nvidia-smi,
79.19 GiB by CUDA).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fitgate.operator.gpus.cloudlabels import GFD_PRODUCT, GKE_PARTITION, amd_device_product, gpu_from_labels
from fitgate.operator.gpus.dra import DRIVER_RESERVED_BYTES, DraState
from fitgate.operator.gpus.placement import Taint, Toleration, blocking_taint, node_taints
from fitgate.operator.gpus.prospects import NodeTemplate
from fitgate.operator.gpus.sharing import Share, node_share
from fitgate.sizing.gpus import MAX_GPU_BYTES, GpuModel, find_gpu, with_reported_memory
from fitgate.sizing.instances import NAMESAKES
from fitgate.sizing.memo import BoundedMemo
from fitgate.sizing.units import GiB, MiB
from fitgate.workloads.quantity import whole_quantity

#: A MIG device's name as the device plugin writes it (k8s-device-plugin internal/resource/nvml-mig-device.go
#: ``GetName``: the profile with "+" made "."): ``1g.10gb``, a media-extension profile ``1g.10gb.me`` (``+me``),
#: ``.gfx`` / ``.me.all`` (``+gfx``, ``+me.all``), Blackwell's ``-me``, or a compute instance of a larger GPU instance,
#: ``1c.3g.40gb`` (hunt193 F1: these were read as unknown cards, less the driver's reserve, or dropped). Its memory is
#: the ``<n>g.<m>gb`` GPU instance's.
_MIG_CI, _MIG_SUFFIX = r"(?:\d+c\.)?", r"(?:[.-](?:me|gfx)(?:\.all)?)?"
_MIG_NAME = rf"{_MIG_CI}\d+g\.\d+gb{_MIG_SUFFIX}"
#: GPU Feature Discovery's product under MIG's single strategy: the card's, then ``-MIG-<name>``.
_MIG_PRODUCT = re.compile(rf"-MIG-({_MIG_NAME})$")
_MIG_RESOURCE = re.compile(rf"nvidia\.com/mig-({_MIG_NAME})")
_MIG_PROFILE = re.compile(rf"^{_MIG_CI}(\d+)g\.(\d+)gb{_MIG_SUFFIX}$")


@dataclass(frozen=True)
class NodeGPUs:
    """The GPUs of one kind on one node."""

    node: str
    labels: Mapping[str, str]
    product: str
    gpu: GpuModel
    count: int
    vendor: str = "nvidia"
    mig_profile: str | None = None
    notes: tuple[str, ...] = ()
    source: str = "labels"  # labels, dra (ResourceSlices), or labels+dra
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False  # cordoned
    share: Share | None = None  # time-slicing / MPS from the node's labels
    used: int = 0  # GPUs of this kind that running pods or allocated ResourceClaims already hold
    device_resource: str = ""  # cloud labels (operator/gpus/cloudlabels.py): the extended resource that counted them

    @property
    def pool_key(self) -> str:
        """Nodes with the same key form one pool (a shared card is not a whole one).

        Keyed by the catalog's GPU, not the label's spelling: GPU Feature Discovery's ``NVIDIA-H100-80GB-HBM3``
        and a cloud's ``H100-SXM`` (or an instance type) are one pool of one GPU (a MIG slice's and an unknown
        product's GPU is named after the label, so those stay apart as before).
        """
        shared = f"/{self.share.mechanism}x{self.share.replicas}" if self.share else ""
        return f"{self.vendor}/{self.gpu.name}/{self.gpu.memory_bytes}/{self.resource}{shared}"

    @property
    def free(self) -> int:
        """GPUs of this kind no pod or claim holds yet."""
        return max(0, self.count - self.used)

    @property
    def resource(self) -> str:
        """The extended resource a pod asks for to get one of these GPUs."""
        if self.device_resource:
            return self.device_resource
        if self.vendor == "amd":
            return "amd.com/gpu"
        if self.mig_profile and not self.labels.get("nvidia.com/gpu.product", "").endswith(f"-MIG-{self.mig_profile}"):
            return f"nvidia.com/mig-{self.mig_profile}"  # MIG mixed strategy
        return "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuPool:
    """Identical GPUs on one or more nodes."""

    product: str
    gpu: GpuModel
    nodes: tuple[str, ...]
    gpus_per_node: int
    vendor: str = "nvidia"
    mig_profile: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    free_by_node: tuple[tuple[str, int], ...] = ()  # (node, GPUs not yet held by pods or claims)
    share: Share | None = None
    source: str = "labels"
    prospective: bool = False  # no node yet: the GPU a placement or an autoscaler template names (prospects.py)

    @cached_property
    def free_gpus(self) -> int:
        """Free GPUs over the pool's nodes (summed once: the pool is frozen; a large pool has thousands of nodes)."""
        return sum(n for _, n in self.free_by_node)


def _int(value: object) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _gpu_for(product: str, memory_mib: int | None, vendor: str) -> tuple[GpuModel | None, tuple[str, ...]]:
    known = find_gpu(product)
    total = memory_mib * MiB - (DRIVER_RESERVED_BYTES if vendor == "nvidia" else 16 * MiB) if memory_mib else None
    if known is not None:  # the label read either way: an old driver's leaves the driver's share out (hunt77 F7)
        gpu, note = with_reported_memory(known, total, "node label", memory_mib * MiB if memory_mib else None)
        return gpu, () if note is None else (note,)
    if total is not None and total >= GiB // 2:
        note = f"{product} is not in the GPU catalog: its memory label ({memory_mib} MiB) minus the driver's share"
        return GpuModel(name=product, memory_bytes=total, vendor=vendor, memory_basis="node label"), (note,)
    return None, (f"{product}: unknown GPU without a usable memory label",)


def product_gpu(product: str, labels: Mapping[str, str]) -> tuple[GpuModel | None, tuple[str, ...]]:
    """The GPU a product name and the memory label beside it make, by the node parser's rule (:func:`parse_node`).

    For an offline check, where the nodeSelector is all there is of the node: ``nvidia.com/gpu.memory`` (MiB), or
    ``amd.com/gpu.vram`` for an AMD product. None (with a note) when the product is not in the catalog and no memory
    label says its size.
    """
    if "amd.com/gpu.vram" in labels or labels.get("amd.com/gpu.product-name") == product:
        return _gpu_for(product, _amd_vram_mib(labels.get("amd.com/gpu.vram", "")), "amd")
    memory = _int(labels.get("nvidia.com/gpu.memory"))
    mig = _MIG_PRODUCT.search(product)
    if mig:  # hunt128 F2: MIG single strategy's product (NVIDIA-H100-80GB-HBM3-MIG-1g.10gb), as parse_node reads it
        return _mig_gpu(product, mig.group(1), memory, find_gpu(product[: mig.start()]))
    return _gpu_for(product, memory, "nvidia")


def _amd_vram_mib(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMT])i?B?\s*", text or "", flags=re.IGNORECASE)
    if not match:
        return None
    scale = {"M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2).upper()]
    mib = int(float(match.group(1)) * scale)
    return mib if mib * MiB <= MAX_GPU_BYTES else None  # no card holds more (hunt81 F5: 99999999999G was taken)


def parse_node(node: Mapping[str, Any]) -> list[NodeGPUs]:
    """The GPUs a Node offers (empty for nodes without GPUs or unreadable labels)."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name", "?"))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    status = node.get("status") or {}
    allocatable = {str(k): v for k, v in (status.get("allocatable") or status.get("capacity") or {}).items()}
    found: list[NodeGPUs] = []

    product = labels.get("nvidia.com/gpu.product")
    if product:
        product = re.sub(r"-SHARED$", "", product)
        count = whole_quantity(allocatable.get("nvidia.com/gpu"))
        if not count:  # time-slicing's renameByDefault offers the replicas as nvidia.com/gpu.shared (hunt77 F4)
            count = whole_quantity(allocatable.get("nvidia.com/gpu.shared")) or count
        if count is None:
            count = _int(labels.get("nvidia.com/gpu.count"))
        memory = _int(labels.get("nvidia.com/gpu.memory"))
        notes: tuple[str, ...] = ()
        mig = _MIG_PRODUCT.search(product)
        if mig:  # MIG single strategy: every allocatable GPU is one MIG device
            gpu, notes = _mig_gpu(product, mig.group(1), memory, find_gpu(product[: mig.start()]))
            mig_profile: str | None = mig.group(1)
        else:
            gpu, notes = _gpu_for(product, memory, "nvidia")
            mig_profile = None
        if gpu is not None and count:
            found.append(NodeGPUs(name, labels, product, gpu, count, "nvidia", mig_profile, notes))
        # MIG mixed strategy: nvidia.com/mig-<profile> resources next to (or instead of) whole GPUs
        for resource, value in allocatable.items():
            m = _MIG_RESOURCE.fullmatch(resource)
            n = whole_quantity(value)
            if not m or not n:
                continue
            profile = m.group(1)
            mig_memory = _int(labels.get(f"nvidia.com/mig-{profile}.memory"))
            gpu_mig, mig_notes = _mig_gpu(f"{product}-MIG-{profile}", profile, mig_memory, find_gpu(product))
            if gpu_mig is not None:
                found.append(
                    NodeGPUs(name, labels, f"{product}-MIG-{profile}", gpu_mig, n, "nvidia", profile, mig_notes)
                )

    amd_product = labels.get("amd.com/gpu.product-name") or amd_device_product(labels)
    if (
        not product
        and not amd_product
        and _amd_vram_mib(labels.get("amd.com/gpu.vram", ""))
        and gpu_from_labels(labels)[0] is None
    ):
        # hunt77 F5: the AMD labeller of gpu-operator 1.x and AKS's MI300X VMs write the VRAM and device id but no
        # product name (ROCm/k8s-device-plugin issue 112, ROCm/gpu-operator issue 266): where no cloud label names
        # the card either, it is sized by the VRAM label
        amd_product = f"AMD-GPU-{labels.get('amd.com/gpu.device-id', 'unnamed')[:32]}"
    if amd_product:
        count = whole_quantity(allocatable.get("amd.com/gpu"))
        gpu, notes = _gpu_for(amd_product, _amd_vram_mib(labels.get("amd.com/gpu.vram", "")), "amd")
        if gpu is not None and count:
            found.append(NodeGPUs(name, labels, amd_product, gpu, count, "amd", None, notes))
    if not product and not amd_product:  # no device-plugin product label: the cloud's (GKE, Karpenter, instance type)
        found.extend(_cloud_gpus(name, labels, allocatable))
    taints, cordoned = node_taints(node)
    whole = [g.count for g in found if g.vendor == "nvidia" and not g.mig_profile]
    share = node_share(labels, max(whole, default=None))
    return [
        replace(g, taints=taints, unschedulable=cordoned, share=share if g.vendor == "nvidia" else None) for g in found
    ]


def _cloud_gpus(name: str, labels: Mapping[str, str], allocatable: Mapping[str, Any]) -> list[NodeGPUs]:
    """A node's GPUs named by its cloud's labels (:mod:`~fitgate.operator.gpus.cloudlabels`), by its allocatable."""
    got, _ = gpu_from_labels(labels)
    if got is None:
        return []
    for resource in got.resources:
        count = whole_quantity(allocatable.get(resource))
        if count:
            why = f"{got.product} read from the {got.scheme} labels (no {GFD_PRODUCT} label)"
            partition = labels.get(GKE_PARTITION, "").strip()
            if got.scheme == "gke" and partition:
                # hunt77 F1: GKE's MIG nodes offer one nvidia.com/gpu per slice of the partition size the node pool
                # was created with (cloud.google.com/gke-gpu-partition-size: 1g.5gb; GKE's "Running multi-instance
                # GPUs"): each is a slice, never the whole card
                product = f"{got.product}-MIG-{partition}"
                gpu, notes = _mig_gpu(product, partition, None, got.gpu)
                if gpu is None:
                    return []
                mig = NodeGPUs(name, labels, product, gpu, count, got.vendor, partition, (why, *notes))
                return [replace(mig, device_resource=resource)]
            return [
                NodeGPUs(name, labels, got.product, got.gpu, count, got.vendor, notes=(why,), device_resource=resource)
            ]
    return []


def unlabeled_gpus(node: Mapping[str, Any]) -> str | None:
    """Why a node that offers GPUs gives fitgate none: allocatable GPUs without the product labels."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    for resource, label, source in (
        ("nvidia.com/gpu", "nvidia.com/gpu.product", "GPU Feature Discovery"),
        ("amd.com/gpu", "amd.com/gpu.product-name", "the AMD GPU Operator's labeller"),
        ("gpu.intel.com/i915", "gpu.intel.com/product", "the Intel GPU plugin's NFD rules"),
        ("gpu.intel.com/xe", "gpu.intel.com/product", "the Intel GPU plugin's NFD rules"),
    ):
        count = whole_quantity(allocatable.get(resource))
        if count and not labels.get(label):
            _, note = gpu_from_labels(labels)
            return (
                f"node {meta.get('name', '?')} offers {count} {resource} but has no {label} label "
                f"(is {source} running?) and no cloud label fitgate knows (GKE accelerator, Karpenter GPU name, "
                f"instance type){f': {note}' if note else ''}: fitgate cannot tell which GPU it is and leaves it out"
            )
    return None


def node_gpus(node: Mapping[str, Any], logger: logging.Logger | logging.LoggerAdapter[Any]) -> list[NodeGPUs]:
    """:func:`parse_node`, but a node whose labels cannot be read is logged and counts as no GPUs.

    A node that offers GPUs without the labels that say which GPU they are is logged too (not
    silently ignored): its GPUs cannot be sized.
    """
    try:
        found = parse_node(node)
    except Exception as exc:  # a malformed node must never break an inventory
        logger.warning("ignoring GPUs of node %s: %s", (node.get("metadata") or {}).get("name", "?"), exc)
        return []
    if not found and (why := unlabeled_gpus(node)):
        logger.warning("%s", why)
    return found


#: The parts of a card's memory a MIG profile can hold (NVIDIA's MIG user guide, "Supported MIG Profiles": 1/8, 2/8,
#: 4/8 and 8/8 of the memory on A100 / H100 / H200 / B200, quarters on the A30 and RTX PRO 6000).
MIG_MEMORY_FRACTIONS = (1 / 8, 1 / 4, 1 / 2, 1.0)
#: What a slice holds less than its fraction of the card, at a 1/8 slice (scaled by 1 - fraction): an H100's
#: 1g.10gb is 9.75 GiB of CUDA memory against 79.19 / 8 = 9.90, its 3g.40gb 39.25-39.5 against 39.60 (hunt79 F3).
MIG_SLICE_SHORTFALL_BYTES = int(0.35 * GiB)


#: Slices whose CUDA memory a public figure shows away from the fraction rule below, by card and fraction: the H200's
#: 1g.18gb is 16.00 GiB (an lgip line in a public parser, and two users' "16.0 GiB usable" / "visible 16 GiB" on H200
#: MIG 1g.18gb; hunt81 F1), not 139.81 / 8 - 0.35 = 17.13; its 3g.71gb / 4g.71gb half is 74,625,056,768 B = 69.50 GiB
#: (Hugging Face ``spaces`` ZeroGPU, spaces/zero/config.py ``ZEROGPU_CUDA_TOTAL_MEMORY`` for "NVIDIA H200 MIG
#: 3g.71gb"; hunt175 F1: four 16 GiB eighths, 64 GiB, denied what ran), the rule's 69.71 within 0.21. The H100 SXM's
#: eighth, quarter and half are 9.75 / 19.62 / 39.50 GiB (``nvidia-smi mig -lgip`` of a 132-SM H100 in jbarrow.ai's
#: field notes on MIG, 2026-06-11: 1g.10gb, 1g.10gb+me, 1g.20gb / 2g.20gb, 3g.40gb / 4g.40gb; the device plugin's
#: memory labels 9984 / 20096 / 40448 MiB), and the A100 40GB's 4.75 / 9.75 / 19.62 GiB (GPU Feature Discovery's
#: ``nvidia.com/mig-1g.5gb.memory=4864`` and ``mig-2g.10gb.memory=9984`` on an A100-PCIE-40GB and an A100-SXM4-40GB
#: in public node listings; the 3g.20gb's 19.62 in NVIDIA's MIG user guide's lgip example), 0.11-0.20 GiB above the
#: rule (hunt193 F2: a slice short by that much can deny at the line). Others: the rule.
MIG_MEASURED_BYTES = {
    ("H200", 1 / 8): 16 * GiB,
    ("H200", 1 / 2): 74_625_056_768,
    ("H100-SXM", 1 / 8): 9984 * MiB,
    ("H100-SXM", 1 / 4): 20096 * MiB,
    ("H100-SXM", 1 / 2): 40448 * MiB,
    ("A100-40GB", 1 / 8): 4864 * MiB,
    ("A100-40GB", 1 / 4): 9984 * MiB,
    ("A100-40GB", 1 / 2): 20096 * MiB,
}


def mig_slice_bytes(profile: str, card: GpuModel | None) -> int | None:
    """The device memory of a MIG profile without a memory label: its fraction of the card (or a measured figure).

    The name's GB (``1g.10gb``) read as 10^9 bytes is below every slice's real size (9.75 GiB), and far below the
    whole-card profiles (an H100's 7g.80gb was read as 74.5 GiB, 79.25 real: hunt79 F3); the card's memory times the
    profile's fraction of it (its GB against the card's, to the nearest of :data:`MIG_MEMORY_FRACTIONS`) is within a
    quarter GiB on the A100 and H100 and the H200's half, 1.1 GiB above on its 1g.18gb (:data:`MIG_MEASURED_BYTES`).
    None for an unreadable profile.
    """
    match = _MIG_PROFILE.match(profile)
    if not match:
        return None
    nominal = int(match.group(2))
    named = nominal * 1000**3
    if card is None or nominal <= 0:
        return named
    share = nominal * GiB / card.memory_bytes
    fraction = min(MIG_MEMORY_FRACTIONS, key=lambda f: abs(math.log(share / f)))
    measured = MIG_MEASURED_BYTES.get((card.name, fraction))
    if measured is not None:
        return measured
    return max(named, int(card.memory_bytes * fraction - MIG_SLICE_SHORTFALL_BYTES * (1 - fraction) * 8 / 7))


def _mig_gpu(
    product: str, profile: str, memory_mib: int | None, card: GpuModel | None = None
) -> tuple[GpuModel | None, tuple[str, ...]]:
    """A MIG slice as a GPU: its memory label if present, else :func:`mig_slice_bytes` of ``card``."""
    total = memory_mib * MiB if memory_mib else mig_slice_bytes(profile, card)
    if total is None:
        return None, (f"{product}: unreadable MIG profile {profile!r}",)
    return GpuModel(name=product, memory_bytes=total, memory_basis="MIG profile"), ()


def group_pools(gpus: Iterable[NodeGPUs]) -> list[GpuPool]:
    """Pools of identical GPUs; ``gpus_per_node`` is the smallest count in the pool."""
    by_key: dict[str, list[NodeGPUs]] = {}
    for g in gpus:
        by_key.setdefault(g.pool_key, []).append(g)
    pools = []
    for members in by_key.values():
        first = members[0]
        notes = tuple(sorted({n for m in members for n in m.notes}))
        spellings = {m.product for m in members}
        pools.append(
            GpuPool(
                first.product if len(spellings) == 1 else first.gpu.name,
                first.gpu,
                tuple(sorted(m.node for m in members)),
                min(m.count for m in members),
                first.vendor,
                first.mig_profile,
                notes,
                tuple(sorted((m.node, m.free) for m in members)),
                first.share,
                "+".join(sorted({p for m in members for p in m.source.split("+")}, key=("labels", "dra").index)),
            )
        )
    return sorted(pools, key=lambda p: (-p.gpu.memory_bytes, p.product))


def matches_placement(g: NodeGPUs, gpu_product: str | None, node_selector: Mapping[str, str]) -> bool:
    """Whether a node's GPUs satisfy a ModelDeployment's placement."""
    if any(g.labels.get(k) != v for k, v in node_selector.items()):
        return False
    if not gpu_product:
        return True
    if gpu_product.lower() == g.product.lower():
        return True
    if g.mig_profile is not None:
        return False
    # a bare A100 / V100 / H20 / GH200 names both cards of the product (instances.NAMESAKES): either node serves it
    pair = NAMESAKES.get(gpu_product.strip().lower())
    if pair is not None:
        return g.gpu.name in pair
    wanted = find_gpu(gpu_product)
    return wanted is not None and wanted.name == g.gpu.name


@dataclass(frozen=True)
class PodGpus:
    """The GPUs one running pod holds (kept for GPU-requesting, non-terminal, bound pods only)."""

    node: str
    resources: tuple[tuple[str, int], ...]
    labels: tuple[tuple[str, str], ...] = ()


SelectKey = tuple[str, tuple[tuple[str, str], ...], tuple[Toleration, ...]]


class Inventory:
    """A snapshot of the cluster's GPUs with pools cached per placement.

    Evaluating thousands of deployments against thousands of nodes groups the nodes once per
    distinct placement instead of once per deployment. ``dra`` is what the DRA watch read (claim
    templates are planned from it); ``pods`` the GPU pods by (namespace, name), so that a deployment's
    own pods can be counted back as free when its replicas are checked.
    """

    def __init__(
        self,
        gpus: Iterable[NodeGPUs],
        dra: DraState | None = None,
        pods: Mapping[tuple[str, str], PodGpus] | None = None,
        templates: Iterable[NodeTemplate] = (),
    ) -> None:
        self.gpus = tuple(gpus)
        self.dra = dra or DraState()
        self.pods = pods or {}
        #: Karpenter NodePools and cluster-autoscaler node groups: the nodes that may join (prospects.py)
        self.templates = tuple(templates)
        #: Placements' candidate pools in this snapshot. Bound 4096: one entry per distinct (GPU product,
        #: node selector, tolerations) the deployments ask for; a snapshot lives until the next node change.
        self._cache: BoundedMemo[SelectKey, tuple[list[GpuPool], str, tuple[str, ...]]] = BoundedMemo(4096)
        #: select_claim's answers (:mod:`fitgate.operator.gpus.gpuview`): matching 40,000 devices once per snapshot.
        #: Bound 4096: one entry per (namespace, ResourceClaimTemplate, placement) asked about in this snapshot.
        self.claim_cache: BoundedMemo[tuple[str, str, SelectKey], Any] = BoundedMemo(4096)

    def __bool__(self) -> bool:
        return bool(self.gpus)

    def select(
        self, gpu_product: str | None, node_selector: Mapping[str, str], tolerations: tuple[Toleration, ...] = ()
    ) -> tuple[list[GpuPool], str]:
        """Pools matching a placement (cordoned and untolerated tainted nodes left out) and their fingerprint."""
        pools, fingerprint, _ = self._select(gpu_product, node_selector, tolerations)
        return pools, fingerprint

    def left_out(
        self, gpu_product: str | None, node_selector: Mapping[str, str], tolerations: tuple[Toleration, ...] = ()
    ) -> tuple[str, ...]:
        """The matching nodes that are not placement candidates, each with why (cordoned, a taint)."""
        return self._select(gpu_product, node_selector, tolerations)[2]

    def matching_pools(self, gpu_product: str | None, node_selector: Mapping[str, str]) -> list[GpuPool]:
        """Pools of every node matching a placement, cordoned and tainted ones included."""
        return group_pools(g for g in self.gpus if matches_placement(g, gpu_product, node_selector))

    def _select(
        self, gpu_product: str | None, node_selector: Mapping[str, str], tolerations: tuple[Toleration, ...]
    ) -> tuple[list[GpuPool], str, tuple[str, ...]]:
        key = (gpu_product or "", tuple(sorted(node_selector.items())), tolerations)

        def candidates() -> tuple[list[GpuPool], str, tuple[str, ...]]:
            matching = [g for g in self.gpus if matches_placement(g, gpu_product, node_selector)]
            return _candidates(matching, tolerations)

        return self._cache.get_or_compute(key, candidates)

    def own_usage(self, namespace: str, selector: Mapping[str, str]) -> dict[str, dict[str, int]]:
        """GPUs per node and resource held by the pods of ``namespace`` that carry every ``selector`` label."""
        out: dict[str, dict[str, int]] = {}
        if not selector:
            return out
        wanted = set(selector.items())
        for (ns, _), pod in self.pods.items():
            if ns == namespace and wanted <= set(pod.labels):
                per = out.setdefault(pod.node, {})
                for resource, n in pod.resources:
                    per[resource] = per.get(resource, 0) + n
        return out


def _candidates(
    matching: list[NodeGPUs], tolerations: tuple[Toleration, ...]
) -> tuple[list[GpuPool], str, tuple[str, ...]]:
    eligible, left_out = [], []
    for g in matching:
        why = blocking_taint(g.taints, g.unschedulable, tolerations)
        if why is None:
            eligible.append(g)
        else:
            left_out.append(f"{g.node} ({why})")
    # the fingerprint covers the left-out nodes too: uncordoning one changes the verdict
    return group_pools(eligible), inventory_hash(matching), tuple(sorted(set(left_out)))


def inventory_hash(gpus: Iterable[NodeGPUs]) -> str:
    """A short fingerprint of the inventory, to notice node changes."""
    rows = sorted(
        (g.node, g.product, g.gpu.memory_bytes, g.count, g.used, g.unschedulable, _taint_text(g.taints), g.pool_key)
        for g in gpus
    )
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def _taint_text(taints: Iterable[Taint]) -> str:
    return ",".join(f"{t.key}={t.value}:{t.effect}" for t in taints)
