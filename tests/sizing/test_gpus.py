import logging

import pytest

from fitgate.operator.gpus.inventory import node_gpus
from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import custom_gpu, find_gpu, gpu_catalog, lookup_gpu
from fitgate.sizing.units import GiB

REQUIRED = [
    "A10",
    "A10G",
    "A100-40GB",
    "A100-80GB",
    "H100-PCIe",
    "H100-SXM",
    "H100-NVL",
    "H20",
    "H200",
    "B200",
    "GB200",
    "L4",
    "L40",
    "L40S",
    "T4",
    "V100-16GB",
    "V100-32GB",
    "RTX-3090",
    "RTX-4090",
    "RTX-5090",
    "RTX-A6000",
    "RTX-6000-Ada",
    "RTX-PRO-6000",
    "MI210",
    "MI250",
    "MI300X",
    "MI325X",
    "MI355X",
]


def test_catalog_has_every_common_gpu() -> None:
    names = {g.name for g in gpu_catalog()}
    assert set(REQUIRED) <= names


def test_catalog_entries_are_sane() -> None:
    seen: dict[str, str] = {}
    for g in gpu_catalog():
        # CUDA reports less than the marketing size and less than nvidia-smi's total (GFD's label).
        assert 10 * GiB < g.memory_bytes < g.label_memory_mib * 1024**2 + 1
        assert g.memory_bandwidth_gbps > 0 and g.bf16_dense_tflops > 0
        for alias in (g.name, *g.aliases):
            key = alias.lower()
            assert seen.setdefault(key, g.name) == g.name, f"alias {alias} used twice"


@pytest.mark.parametrize(
    ("label", "name", "gib"),
    [
        # GPU Feature Discovery nvidia.com/gpu.product strings; totals as vLLM logs print them.
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM", 79.19),
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB", 79.15),
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB", 39.39),
        ("NVIDIA-H200", "H200", 139.81),
        ("NVIDIA-L40S", "L40S", 44.42),
        ("NVIDIA-L4", "L4", 22.06),
        ("Tesla-T4", "T4", 14.74),
        ("NVIDIA-GeForce-RTX-3090", "RTX-3090", 23.58),
        ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-SXM", 79.19),
    ],
)
def test_gfd_product_strings_resolve(label: str, name: str, gib: float) -> None:
    gpu = find_gpu(label)
    assert gpu is not None and gpu.name == name
    assert round(gpu.memory_bytes / GiB, 2) == gib


def test_unknown_gpu_lists_the_choices() -> None:
    with pytest.raises(SizingError, match=r"--gpu: 'B400' is not valid; expected a GPU from the catalog \(A10"):
        lookup_gpu("B400", "--gpu")


def test_custom_gpu_needs_real_memory() -> None:
    assert custom_gpu(20 * GiB).memory_bytes == 20 * GiB
    with pytest.raises(SizingError, match="gpu_memory"):
        custom_gpu(1024)


def test_every_nvidia_gpu_has_its_compute_capability() -> None:
    # values of NVIDIA's CUDA GPUs page (developer.nvidia.com/cuda-gpus); AMD GPUs have none
    for gpu in gpu_catalog():
        if gpu.vendor == "nvidia":
            assert gpu.compute_capability is not None, gpu.name
            major, minor = gpu.compute_capability.split(".")
            assert 7 <= int(major) <= 12 and minor.isdigit(), gpu
        else:
            assert gpu.compute_capability is None
    assert {
        g.name: g.compute_capability for g in gpu_catalog() if g.name in ("T4", "V100-16GB", "A100-80GB", "L4")
    } == {
        "T4": "7.5",
        "V100-16GB": "7.0",
        "A100-80GB": "8.0",
        "L4": "8.9",
    }


def test_a_gpu_node_without_product_labels_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    node = {
        "metadata": {"name": "gpu-7", "labels": {"kubernetes.io/hostname": "gpu-7"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}},
    }
    with caplog.at_level(logging.WARNING):
        assert node_gpus(node, logging.getLogger("test")) == []
    assert "node gpu-7 offers 8 nvidia.com/gpu but has no nvidia.com/gpu.product label" in caplog.text
