"""How clouds and autoscalers name GPUs: instance types, GKE accelerators, Karpenter GPU names.

``data/cloud_gpus.json`` is the one registry (a cited source per row); this module only looks it up.
Every answer is a GPU catalog entry (:mod:`fitgate.sizing.gpus`), so a GKE node labelled
``nvidia-h100-80gb``, a ``p5.48xlarge`` and a GFD ``NVIDIA-H100-80GB-HBM3`` are the same H100.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from fitgate.sizing.errors import UnknownGpuError
from fitgate.sizing.gpus import GpuModel, find_gpu
from fitgate.sizing.units import GiB


@dataclass(frozen=True)
class InstanceGpus:
    """The GPUs of one cloud instance type."""

    instance_type: str
    cloud: str
    gpu: GpuModel
    count: int
    source: str


@dataclass(frozen=True)
class _Registry:
    instances: dict[str, InstanceGpus]
    gke: dict[str, GpuModel]
    karpenter: dict[str, tuple[tuple[int, GpuModel], ...]]


def _gpu(name: str) -> GpuModel:
    gpu = find_gpu(name)
    if gpu is None:  # a data error: the registry names a GPU the catalog lacks (tests/sizing/test_gpus.py)
        raise KeyError(f"cloud_gpus.json names {name!r}, which is not in gpus.json")
    return gpu


@lru_cache(maxsize=1)
def _registry() -> _Registry:
    raw = json.loads(resources.files("fitgate.sizing").joinpath("data/cloud_gpus.json").read_text())
    instances = {
        row["name"].lower(): InstanceGpus(row["name"], row["cloud"], _gpu(row["gpu"]), int(row["count"]), row["source"])
        for row in raw["instance_types"]
    }
    gke = {row["value"].lower(): _gpu(row["gpu"]) for row in raw["gke_accelerators"]}
    karpenter: dict[str, list[tuple[int, GpuModel]]] = {}
    for row in raw["karpenter_gpu_names"]:
        karpenter.setdefault(row["name"].lower(), []).append((int(row["memory_mib"]), _gpu(row["gpu"])))
    return _Registry(instances, gke, {k: tuple(sorted(v, key=lambda mg: mg[0])) for k, v in karpenter.items()})


def instance_gpus(instance_type: str) -> InstanceGpus | None:
    """The GPUs of an instance type (``p5.48xlarge``, ``a3-highgpu-8g``, ``Standard_ND96isr_H100_v5``), or None.

    SageMaker's names are EC2's with an ``ml.`` prefix, and SageMaker HyperPod's EKS nodes carry them in
    ``node.kubernetes.io/instance-type`` (``ml.p5.48xlarge``; AWS's HyperPod docs: "the instance type in a
    nodeSelector takes the ml. prefix"; hunt133 F1): the same machine as the EC2 type.
    """
    key = instance_type.strip().lower()
    found = _registry().instances.get(key)
    if found is None and key.startswith("ml."):
        found = _registry().instances.get(key[3:])
    return found


def instance_types() -> tuple[InstanceGpus, ...]:
    """Every instance type of the registry."""
    return tuple(_registry().instances.values())


def instance_family_gpu(family: str) -> GpuModel | None:
    """The GPU of an AWS instance family (``g6e``: ``karpenter.k8s.aws/instance-family``).

    The one GPU every instance type of the family in the registry has; None otherwise (hunt16 G7: AWS's EKS
    starter kit pins ``g6e``).
    """
    prefix = family.strip().lower() + "."
    gpus = {
        i.gpu for i in _registry().instances.values() if i.cloud == "aws" and i.instance_type.lower().startswith(prefix)
    }
    return next(iter(gpus)) if len(gpus) == 1 else None


def gke_accelerator(value: str) -> GpuModel | None:
    """The GPU of a ``cloud.google.com/gke-accelerator`` value (``nvidia-h100-80gb``), or None."""
    return _registry().gke.get(value.strip().lower())


def karpenter_gpu(name: str, memory_mib: int | None = None) -> GpuModel | None:
    """The GPU of a ``karpenter.k8s.aws/instance-gpu-name`` (``h100``) and, where it is ambiguous, its memory label.

    ``a100`` is the 40 GB or the 80 GB card: the ``instance-gpu-memory`` label (MiB) says which; without it an
    ambiguous name is None (unknown, never a guess); with it, a size no row of the name has is None too.
    """
    rows = _registry().karpenter.get(name.strip().lower())
    if not rows:
        return None
    if memory_mib is not None:
        # hunt25 F5: a memory label no row of the name has (3 % apart) is another card or a fraction of one (g6f's
        # ``l4`` at 2861-11444 MiB): unknown, never the whole card
        mib, gpu = min(rows, key=lambda mg: abs(mg[0] - memory_mib))
        return gpu if abs(mib - memory_mib) <= 0.03 * mib else None
    if len({gpu.name for _, gpu in rows}) == 1:
        return rows[0][1]
    return None


#: The longest GPU name the launcher and cloud spellings are tried on (the longest real one is ~40 characters).
MAX_GPU_NAME_CHARS = 128
_COUNT_SUFFIX = re.compile(r"^(?P<name>.+?):(?P<count>\d{1,3})$")
_G_SUFFIX = re.compile(r"^(?P<head>.*\d)G$", re.IGNORECASE)


def named_gpu(name: str) -> GpuModel | None:
    """The GPU a launcher's or a cloud's name for it means, or None (hunt42 F3).

    Beyond the catalog's names (:func:`find_gpu`): SkyPilot's ``H100:2`` (the count dropped), Ray's ``A100-80G``, a GKE
    accelerator label (``nvidia-h100-80gb``, ``nvidia-tesla-t4``) and Vertex AI's spelling of it
    (``NVIDIA_TESLA_A100``), and an instance or machine type (``p5.48xlarge``, ``a3-highgpu-8g``): the tables the
    cluster reader uses for node labels (data/cloud_gpus.json).
    """
    text = name.strip()
    if len(text) > MAX_GPU_NAME_CHARS:  # bounded before the patterns run (a long run of dashes is quadratic)
        return None
    m = _COUNT_SUFFIX.match(text)
    if m:
        text = m.group("name")
    g = _G_SUFFIX.match(text)
    candidates = (text, f"{g.group('head')}GB" if g else None, text.lower().replace("_", "-"))
    for candidate in candidates:
        if candidate is None:
            continue
        found = find_gpu(candidate) or gke_accelerator(candidate)
        if found is not None:
            return found
    instance = instance_gpus(text)
    if instance is not None:
        return instance.gpu
    return _with_stated_memory(text)


_MEMORY_TOKEN = re.compile(r"[-_ ]*(?P<size>\d{1,3})\s*G(?:B|iB)?(?:[-_ ]*(?:HBM\dE?|GDDR\dX?))?$", re.IGNORECASE)


def _with_stated_memory(name: str) -> GpuModel | None:
    """A catalog card named with its memory size (``H20 96GB``, ``H800-80GB``, ``L20-48GB``: hunt43 F1), or None.

    The size must be the catalog card's (within 10 % of its GiB, as boards print GB or GiB): ``RTX 4090 48GB`` (a
    modded board) or ``A800 40GB`` (a card the catalog does not hold) is not the catalog's card and stays unknown.
    """
    m = _MEMORY_TOKEN.search(name)
    if m is None or m.start() == 0:
        return None
    base = name[: m.start()]
    found = find_gpu(base) or gke_accelerator(base)
    if found is None:
        return None
    stated = int(m.group("size"))
    return found if abs(found.memory_bytes / GiB - stated) <= 0.1 * stated else None


#: Bare names two catalog cards answer to (hunt42 F4): the catalog reads them as the first, the smaller; Baseten's
#: ``accelerator: A100`` recipes only load on the 80 GB card, SkyPilot's ``A100`` is the 40 GB one.
AMBIGUOUS_NAMES = {"a100": ("A100-40GB", "A100-80GB"), "v100": ("V100-16GB", "V100-32GB")}
#: Bare names a write-up uses for either memory size of a product (read as the first; a plan the first denies is
#: the second's): the H20 ships with 96 GB and 141 GB (vllm-project/recipes' DeepSeek-V3.2 ran its defaults on
#: "8xH20", which 96 GB cannot hold), the GH200 with 96 GB and 144 GB. Node labels carry the memory, so the cluster's
#: own names stay exact (cloudlabels reads AMBIGUOUS_NAMES only).
NAMESAKES = {**AMBIGUOUS_NAMES, "h20": ("H20", "H20-141GB"), "gh200": ("GH200", "GH200-144GB")}


def bare_gpu_name(name: str) -> str:
    """A GPU name without its vendor words (``NVIDIA-H20``, ``Tesla-V100``: ``H20``, ``V100``), at most 64 chars."""
    return re.sub(r"^((nvidia|tesla)[- _])+", "", name.strip()[:64], flags=re.IGNORECASE)


def larger_namesake(name: str) -> GpuModel | None:
    """The larger card a bare ambiguous name (``A100``, ``V100``, ``H20``, ``GH200``) may also mean, else None."""
    pair = NAMESAKES.get(name.strip().lower())
    return find_gpu(pair[1]) if pair else None


def lookup_named_gpu(name: str, field: str = "gpu") -> GpuModel:
    """:func:`named_gpu`; an unknown name an :class:`UnknownGpuError` (a verdict command's Unknown, hunt59 F2)."""
    found = named_gpu(name)
    if found is None:
        raise UnknownGpuError(
            field,
            name[:MAX_GPU_NAME_CHARS],
            "`fitgate gpus` lists the catalog; pass --gpu-memory with the total CUDA reports to size another GPU",
        )
    return found


#: Ori's ``gpu.nvidia.com/class``: model, form factor (none: PCIe) and GB (docs.ori.co/kubernetes/node-selector).
_ORI_CLASS = re.compile(r"([A-Za-z]+\d+[A-Za-z]?)(SXM|PCIe|NVL)?-(\d{2,3})", re.IGNORECASE)
#: nvidia-smi-like names with the memory at the end, as ACK / VKE nodes carry them (AIBrix's regression manifests:
#: ``Tesla-A100-80G``, ``NVIDIA-H20-SXM5-96GB``): vendor, model, form factor (SXMn: the SXM card), GB.
_SIZED_NAME = re.compile(
    r"(?:nvidia|tesla)[-_ ]([A-Za-z]+\d+[A-Za-z]?)(?:[-_ ](SXM|PCIe|NVL)\d?)?[-_ ](\d{2,3})GB?", re.IGNORECASE
)


def class_gpu(value: str) -> GpuModel | None:
    """The GPU a ``gpu.nvidia.com/class`` value names, or None when it names no size.

    The product itself (``L40S``, ``RTX_A6000``, ``GH200_480GB``), or CoreWeave's ``MODEL[_NVLINK|_PCIE]_MEMORY``
    (``H100_NVLINK_80GB``, ``A100_PCIE_40GB``: the memory is the model's at that size; the link is not sized here), or
    Ori's ``MODEL[SXM]-GB`` (``H100SXM-80``; without a form factor the PCIe card).
    """
    text = value.strip()[:64]
    for candidate in (text, text.replace("_", "-"), "NVIDIA-" + text.replace("_", "-")):
        gpu = find_gpu(candidate)
        if gpu is not None:
            return gpu
    # hunt175 F3: Ori's H100SXM-80, H100-80 (PCIe), H200SXM-141; hunt173 F2: ACK / VKE's Tesla-A100-80G
    sized = _ORI_CLASS.fullmatch(text) or _SIZED_NAME.fullmatch(text)
    if sized is not None:
        model, form, size = sized.group(1), sized.group(2), int(sized.group(3))
        for candidate in (f"{model}-{form}" if form else f"{model}-PCIe", model, f"{model}-{size}GB"):
            gpu = find_gpu(candidate)
            if gpu is not None and abs(gpu.memory_bytes / GiB - size) <= 0.1 * size:
                return gpu
        return None
    parts = text.split("_")
    memory = next((p for p in parts[1:] if p.upper().endswith("GB")), None)
    if memory is None:
        return None  # A100_NVLINK: 40 or 80 GB, not said
    link = "-PCIe" if "PCIE" in (p.upper() for p in parts) else ""
    for candidate in (f"{parts[0]}{link}-{memory}", f"{parts[0]}-{memory}", f"{parts[0]} {memory}"):
        gpu = find_gpu(candidate)
        if gpu is not None:
            return gpu
    return None


def cloud_name_gpu(value: str) -> GpuModel | None:
    """The card a cloud's name label gives (:func:`class_gpu`), None for a bare name of two sizes.

    ``Tesla-A100-80G`` is the 80 GB card; ``A100``, ``Tesla-V100``, ``NVIDIA-H20`` or ``H100`` (AKS's may be the 94 GB
    NVL) name no size without a memory label, and sizing on the smaller would deny what the larger holds.
    """
    bare = bare_gpu_name(value).lower()
    return None if bare in NAMESAKES or bare == "h100" else class_gpu(value)
