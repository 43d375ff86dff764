import logging

import pytest

from fitgate.operator.gpus.inventory import node_gpus
from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import custom_gpu, find_gpu, gpu_catalog, lookup_gpu, with_reported_memory
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
        # CUDA reports less than the marketing size and less than nvidia-smi's total (GFD's label); the
        # smallest catalogued card is the 8 GB RTX 3070 Ti (8192 MiB label; hunt59).
        assert 7 * GiB < g.memory_bytes < g.label_memory_mib * 1024**2 + 1
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
        # the board names write-ups and benchmark tables use (a user's --gpu), each once Unknown
        ("H100 SXM5", "H100-SXM", 79.19),
        ("H200 SXM", "H200", 139.81),
        ("RTX PRO 6000 Blackwell", "RTX-PRO-6000", 94.97),
        ("RTX PRO 6000 Blackwell Max-Q", "RTX-PRO-6000", 94.97),
        ("MI300X OAM", "MI300X", 191.98),
        ("NVIDIA H100 SXM5 80GB", "H100-SXM", 79.19),
        ("NVIDIA H200 SXM", "H200", 139.81),
        # NVML's `Tesla V100-SXM2-16GB` less its Tesla, as production-stack's values comment names the card (hunt104 N4)
        ("V100-SXM2-16GB", "V100-16GB", 15.77),
        ("V100-PCIE-32GB", "V100-32GB", 31.75),
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
            # Pascal (Tesla P40 6.1, P100 6.0) runs vLLM forks; nothing older is catalogued.
            assert 6 <= int(major) <= 12 and minor.isdigit(), gpu
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


@pytest.mark.parametrize(
    ("product", "name", "label_mib", "least_gib", "most_gib", "least_tflops", "most_tflops"),
    [
        # Product strings as nvidia-smi / rocminfo print them in public outputs (GFD's label is the
        # same string with dashes, the AMD labeller's with underscores; lookup ignores punctuation).
        # CUDA's total sits below nvidia-smi's by at most ~0.6 GiB; figures from each datasheet.
        ("NVIDIA RTX A5000", "RTX-A5000", 24564, 23.3, 24.0, 100, 120),
        ("NVIDIA-RTX-A4500", "RTX-A4500", 20470, 19.3, 20.0, 85, 100),
        ("NVIDIA RTX A4000", "RTX-A4000", 16376, 15.3, 16.0, 70, 80),
        ("NVIDIA-A2", "A2", 15356, 14.4, 15.0, 15, 20),
        # cuMemGetInfo measured 12,488,343,552 B = 11.63 GiB
        ("NVIDIA-GeForce-RTX-3060", "RTX-3060", 12288, 11.6, 11.7, 20, 30),
        ("NVIDIA GeForce RTX 3080", "RTX-3080", 10240, 9.3, 10.0, 55, 65),
        ("NVIDIA-GeForce-RTX-3090-Ti", "RTX-3090-Ti", 24564, 23.3, 24.0, 75, 85),
        ("NVIDIA GeForce RTX 4060 Ti", "RTX-4060-Ti-16GB", 16380, 15.3, 16.0, 40, 50),
        ("NVIDIA-GeForce-RTX-4070-Ti", "RTX-4070-Ti", 12282, 11.3, 12.0, 75, 85),
        ("NVIDIA GeForce RTX 5060 Ti", "RTX-5060-Ti-16GB", 16311, 15.3, 16.0, 40, 55),
        ("NVIDIA-GeForce-RTX-5070-Ti", "RTX-5070-Ti", 16303, 15.3, 16.0, 80, 95),
        ("NVIDIA RTX PRO 5000 Blackwell", "RTX-PRO-5000", 48935, 46.7, 47.8, 250, 300),
        # same nvidia-smi total as the other RTX PRO 6000 editions: 97887 MiB
        ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", "RTX-PRO-6000", 97887, 94.5, 95.6, 400, 600),
        ("Tesla-P40", "Tesla-P40", 22919, 22.3, 22.4, 10, 13),
        ("Tesla P100-PCIE-16GB", "Tesla-P100-16GB", 16280, 15.8, 15.9, 15, 20),
        # same nvidia-smi total as the H200 SXM: 143771 MiB
        ("NVIDIA-H200-NVL", "H200-NVL", 143771, 139.8, 139.9, 800, 900),  # no NVSwitch (hunt59 F1)
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB", 146831, 142.3, 143.4, 900, 1000),
        ("AMD_Radeon_RX_7900_XTX", "RX-7900-XTX", 24576, 23.9, 24.0, 110, 130),
        ("AMD Radeon PRO W7900", "Radeon-PRO-W7900", 49152, 47.9, 48.0, 110, 130),
        ("AMD_Instinct_MI100", "MI100", 32768, 31.9, 32.0, 85, 100),
        # HIP totalGlobalMem 34342961152 B = 32 GiB - 16 MiB
        ("AMD Instinct MI50/MI60", "MI50-MI60", 32768, 31.9, 32.0, 20, 30),
        # hunt65: the MI308X (192 GB as the MI300X; compute estimated), and the PCI-id name of the MI250X / MI250
        ("AMD_Instinct_MI308X_OAM", "MI308X", 196608, 191.9, 192.0, 300, 400),
        ("AMD Instinct MI250X / MI250", "MI250", 65536, 63.9, 64.0, 150, 200),
    ],
)
def test_added_gpus_resolve_by_their_product_string(
    product: str, name: str, label_mib: int, least_gib: float, most_gib: float, least_tflops: float, most_tflops: float
) -> None:
    gpu = find_gpu(product)
    assert gpu is not None and gpu.name == name
    assert gpu.label_memory_mib == label_mib
    assert least_gib <= gpu.memory_bytes / GiB <= most_gib
    assert least_tflops <= gpu.bf16_dense_tflops <= most_tflops


def test_one_product_string_with_two_memory_sizes_is_sized_by_the_node() -> None:
    # The 8 GB RTX 4060 Ti reports the 16 GB card's product string; its node's label (8188 MiB) is over 3 % off
    # the catalog's 16380 MiB, so the node's figure is used.
    gpu = find_gpu("NVIDIA-GeForce-RTX-4060-Ti")
    assert gpu is not None
    sized, note = with_reported_memory(gpu, 8188 * 1024**2 - 600 * 1024**2, "nvidia.com/gpu.memory")
    assert sized.memory_bytes == (8188 - 600) * 1024**2 and note is not None
