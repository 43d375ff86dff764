"""The GPU catalog: device memory as CUDA reports it, GPU Feature Discovery names, speeds.

``data/gpus.json`` is the data; this module only looks entries up. ``memory_bytes`` is the total that
``torch.cuda.mem_get_info()`` reports (H100 80GB: 79.19 GiB, not 80 GB), because that is what vLLM
multiplies by ``gpu_memory_utilization``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from fitgate.sizing.errors import SizingError
from fitgate.sizing.units import GiB


@dataclass(frozen=True)
class GpuModel:
    """One GPU model (or a custom memory size when ``name`` is ``custom``)."""

    name: str
    memory_bytes: int
    vendor: str = "nvidia"
    architecture: str = "unknown"
    compute_capability: str | None = None  # CUDA's, as NVIDIA lists it ("7.5"); None for AMD and custom GPUs
    aliases: tuple[str, ...] = ()
    memory_basis: str = ""
    label_memory_mib: int = 0
    memory_bandwidth_gbps: float = 0.0
    bf16_dense_tflops: float = 0.0
    interconnect: str = "pcie"  # "nvlink": SXM/NVL boards whose GPUs talk over NVLink/NVSwitch
    # --- generation traits (issue 25): data/gpus.json "generations", read by _catalog; none for custom GPUs ---
    #: Its NVLink boards connect through NVSwitch with NVLink SHARP (NCCL's NVLS buffers in the profiling pass).
    nvlink_sharp: bool = False
    #: (TP world size, bytes) of FlashInfer's all-reduce workspace on those boards from vLLM 0.29.
    flashinfer_allreduce_workspace_bytes: tuple[tuple[int, int], ...] = ()
    #: Tokens per KV block of the MLA backend vLLM picks by default on this GPU.
    mla_block_size: int = 16
    #: Its memory is the host's too (GB10): the OS holds part of it, so a budget near the total is not free at start-up.
    unified_memory: bool = False

    @property
    def is_a100(self) -> bool:
        """VLLM gives A100s the small default batch even with 80 GB (its name test is 'a100')."""
        return "a100" in self.name.lower()

    def nvswitch_sharp(self, interconnect: str) -> bool:
        """Whether TP ranks on this board talk through NVSwitch with NVLink SHARP (``interconnect`` as served)."""
        return interconnect == "nvlink" and self.nvlink_sharp

    def flashinfer_allreduce_bytes(self, tp: int) -> int:
        """FlashInfer's all-reduce workspace at ``tp`` ranks (0 where vLLM builds none for this GPU)."""
        return dict(self.flashinfer_allreduce_workspace_bytes).get(tp, 0)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


def _workspace(value: Mapping[str, int]) -> tuple[tuple[int, int], ...]:
    return tuple(sorted((int(tp), int(size)) for tp, size in value.items()))


@lru_cache(maxsize=1)
def _catalog() -> tuple[tuple[GpuModel, ...], dict[str, GpuModel]]:
    raw = json.loads(resources.files("fitgate.sizing").joinpath("data/gpus.json").read_text())
    generations = raw["generations"]

    def trait(g: Mapping[str, Any], key: str, default: Any) -> Any:
        """The GPU's own value, else its generation's, else the default."""
        return g.get(key, generations.get(g["architecture"], {}).get(key, default))

    models = tuple(
        GpuModel(
            name=g["name"],
            memory_bytes=int(g["memory_bytes"]),
            vendor=g["vendor"],
            architecture=g["architecture"],
            compute_capability=g.get("compute_capability"),
            aliases=tuple(g["aliases"]),
            memory_basis=g["memory_basis"],
            label_memory_mib=int(g["label_memory_mib"]),
            memory_bandwidth_gbps=float(g["memory_bandwidth_gbps"]),
            bf16_dense_tflops=float(g["bf16_dense_tflops"]),
            interconnect=str(g.get("interconnect", "pcie")),
            nvlink_sharp=bool(trait(g, "nvlink_sharp", False)),
            flashinfer_allreduce_workspace_bytes=_workspace(trait(g, "flashinfer_allreduce_workspace_bytes", {})),
            mla_block_size=int(trait(g, "mla_block_size", 16)),
            unified_memory=bool(g.get("unified_memory", False)),
        )
        for g in raw["gpus"]
    )
    index: dict[str, GpuModel] = {}
    for model in models:
        for alias in (model.name, *model.aliases):
            index.setdefault(_key(alias), model)
    return models, index


def gpu_catalog() -> tuple[GpuModel, ...]:
    """Every GPU in the catalog."""
    return _catalog()[0]


def find_gpu(name: str) -> GpuModel | None:
    """The catalog entry for a name or alias (case and punctuation ignored), or None.

    GPU Feature Discovery's ``-SHARED`` suffix (time-slicing) is ignored. NVML's names before the R470 drivers had no
    vendor prefix (``A100-SXM4-40GB``, ``GeForce-RTX-3090`` where newer drivers say ``NVIDIA-A100-SXM4-40GB``): a
    name the catalog lacks is tried with it (hunt77 F8), and with the ``Tesla`` of the V100 / T4 generation's names.
    """
    cleaned = re.sub(r"-SHARED$", "", name.strip(), flags=re.IGNORECASE)
    by_key = _catalog()[1]
    model = by_key.get(_key(cleaned))
    if model is None and not cleaned.lower().startswith("nvidia"):
        model = by_key.get(_key(f"NVIDIA-{cleaned}"))
    if model is None and not cleaned.lower().startswith(("tesla", "nvidia")):
        model = by_key.get(_key(f"Tesla-{cleaned}"))  # hunt104 N4: `V100-SXM2-16GB`, NVML's `Tesla V100-...` less Tesla
    if model is None and cleaned.lower().startswith("nvidia") and _key(cleaned[6:]):
        model = by_key.get(_key(cleaned[6:]))  # hunt101 F8: `NVIDIA H100 SXM5 80GB`, a write-up's name with the vendor
    if model is not None and "pcie" in cleaned.lower() and model.interconnect != "pcie":
        # One catalog entry serves both boards of a product (A100-80GB SXM4 and PCIe): the
        # product string says which one this is.
        model = replace(model, interconnect="pcie")
    return model


def lookup_gpu(name: str, field: str = "gpu") -> GpuModel:
    """Like :func:`find_gpu` but an unknown name is a :class:`SizingError` listing the choices."""
    model = find_gpu(name)
    if model is None:
        names = ", ".join(m.name for m in gpu_catalog())
        raise SizingError(field, name, f"a GPU from the catalog ({names}) or --gpu-memory SIZE")
    return model


#: The largest device memory fitgate accepts (today's largest accelerators hold under 0.5 TiB).
MAX_GPU_BYTES = 16 * 1024 * GiB


#: How far a node's memory figure may be from the catalog's before the node's is used (nvidia-smi totals of one
#: product differ by a few MiB between drivers; a 96 GB and a 141 GB board of one name differ by a third).
MEMORY_LABEL_TOLERANCE = 0.03


def with_reported_memory(
    known: GpuModel, total_bytes: int | None, source: str, raw_bytes: int | None = None
) -> tuple[GpuModel, str | None]:
    """``known`` with the memory its node reports when that is not the catalog's (and a note saying so).

    ``total_bytes``: the node's figure less the driver's share (what CUDA reports), None when it gives none. A product
    name can cover boards of different memory (NVIDIA's H20 of 96 GB and of 141 GB): the node's figure is the truth,
    the catalog keeps the speeds. ``raw_bytes``: the figure before the driver's share was taken off; where that is the
    catalog's card, so is the node's (before the R5xx drivers nvidia-smi's total already left the share out: a T4 on
    driver 450 labels 15109 MiB, CUDA 15094 MiB; hunt77 F7).
    """
    if not total_bytes or total_bytes < GiB // 2:
        return known, None
    tolerance = MEMORY_LABEL_TOLERANCE * known.memory_bytes
    if abs(total_bytes - known.memory_bytes) <= tolerance or (
        raw_bytes is not None and abs(raw_bytes - known.memory_bytes) <= tolerance
    ):
        return known, None
    note = (
        f"{known.name}: the node reports {total_bytes / GiB:.2f} GiB ({source}), the catalog "
        f"{known.memory_bytes / GiB:.2f} GiB: sized with the node's"
    )
    return replace(known, memory_bytes=total_bytes, memory_basis=source), note


def custom_gpu(memory_bytes: int, name: str = "custom") -> GpuModel:
    """A GPU known only by its memory (``--gpu-memory``), e.g. a MIG slice."""
    if not GiB // 2 <= memory_bytes <= MAX_GPU_BYTES:
        hint = f" (a number without a unit is bytes: {memory_bytes}GiB?)" if memory_bytes < GiB // 2 else ""
        raise SizingError("gpu_memory", memory_bytes, f"from 0.5 GiB to 16 TiB of device memory{hint}")
    return GpuModel(name=name, memory_bytes=memory_bytes, memory_basis="given")
