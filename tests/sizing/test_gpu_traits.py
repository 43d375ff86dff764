"""GPU generation traits: data in gpus.json's "generations", typed on GpuModel, asked by plan and activation.

Issue 25: the NVSwitch / NVLink SHARP boards, FlashInfer's all-reduce workspace and the MLA backend's block
size were name checks ("hopper", "blackwell") in plan.py and activation.py; these tests read gpus.json
themselves and check each catalog GPU carries its generation's traits and that the profiling and KV
numbers follow them.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, plan
from fitgate.sizing.activation import non_torch_bytes
from fitgate.sizing.gpus import custom_gpu, find_gpu, gpu_catalog, lookup_gpu
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import accounting_for

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _raw() -> dict:
    return json.loads(resources.files("fitgate.sizing").joinpath("data/gpus.json").read_text())


def test_every_gpu_carries_its_generations_traits() -> None:
    raw = _raw()
    generations = raw["generations"]
    assert {"hopper", "blackwell"} <= set(generations)
    for entry in raw["gpus"]:
        gpu = lookup_gpu(entry["name"])
        traits = {**generations.get(entry["architecture"], {}), **entry}
        assert gpu.nvlink_sharp is bool(traits.get("nvlink_sharp", False)), gpu.name
        workspace = {int(k): v for k, v in traits.get("flashinfer_allreduce_workspace_bytes", {}).items()}
        assert dict(gpu.flashinfer_allreduce_workspace_bytes) == workspace, gpu.name
        assert gpu.mla_block_size == traits.get("mla_block_size", 16), gpu.name


def test_known_generations() -> None:
    h100, b200, l40s, mi300x = (lookup_gpu(n) for n in ("H100-SXM", "B200", "L40S", "MI300X"))
    assert h100.nvswitch_sharp("nvlink") and not h100.nvswitch_sharp("pcie")
    assert b200.nvswitch_sharp("nvlink") and b200.mla_block_size == 128  # CUTLASS MLA (cutlass_mla.py L75)
    assert not l40s.nvswitch_sharp("nvlink") and l40s.flashinfer_allreduce_bytes(8) == 0
    assert not mi300x.nvlink_sharp and mi300x.mla_block_size == 16
    # config/compilation.py 0.33.0 L168-179: 90 -> 2: 64 MB, 4: 2 MB; 100 -> 4: 32 MB, 8: 1 MB
    assert h100.flashinfer_allreduce_bytes(2) == 64 * MiB and h100.flashinfer_allreduce_bytes(4) == 2 * MiB
    assert b200.flashinfer_allreduce_bytes(4) == 32 * MiB and b200.flashinfer_allreduce_bytes(8) == MiB
    assert b200.flashinfer_allreduce_bytes(3) == 0
    # a custom GPU (--gpu-memory) has no generation: none of the traits
    custom = custom_gpu(80 * GiB)
    assert not custom.nvswitch_sharp("nvlink") and custom.mla_block_size == 16


def test_nvl_boards_have_nvlink_bridges_not_nvswitch() -> None:
    # hunt59 F1: H100 NVL and H200 NVL are PCIe cards joined by 2- or 4-way NVLink bridges, no NVSwitch, so no NVLink
    # SHARP: the 2.07 GiB of NVLS buffers the SXM boards measure is not reserved (non-torch at TP 2 is the TP1 figure)
    v023 = accounting_for("0.23.0")
    for name in ("H100-NVL", "NVIDIA H200 NVL"):
        gpu = find_gpu(name)
        assert gpu is not None and gpu.interconnect == "nvlink" and not gpu.nvswitch_sharp("nvlink"), name
        assert non_torch_bytes(2, 1, v023, gpu, "nvlink") == int(0.25 * GiB)
    h200 = lookup_gpu("H200")
    assert find_gpu("NVIDIA H200 NVL") != h200 and find_gpu("NVIDIA H200 NVL").memory_bytes == h200.memory_bytes  # type: ignore[union-attr]
    assert non_torch_bytes(2, 1, v023, h200, "nvlink") == int(2.07 * GiB)


def test_a_pcie_product_string_keeps_the_generation() -> None:
    pcie = find_gpu("NVIDIA-H100-PCIe")
    assert pcie is not None and pcie.interconnect == "pcie"
    assert pcie.nvlink_sharp and not pcie.nvswitch_sharp(pcie.interconnect)


def test_non_torch_bytes_follow_the_gpu() -> None:
    v033, v028 = accounting_for("0.33.0"), accounting_for("0.28.0")
    b200 = lookup_gpu("B200")
    # NVSwitch at TP4: (2.07 + 0.04 x 2) GiB of NVLS buffers, + 32 MiB FlashInfer workspace from 0.29
    assert non_torch_bytes(4, 1, v033, b200, "nvlink") == int((2.07 + 0.04 * 2) * GiB) + 32 * MiB
    assert non_torch_bytes(4, 1, v028, b200, "nvlink") == int((2.07 + 0.04 * 2) * GiB)
    # the same card over PCIe, an Ada card over NVLink, no GPU at all: the TP1 figure, 0.25 GiB
    for gpu, link in ((b200, "pcie"), (lookup_gpu("L40S"), "nvlink"), (None, "nvlink")):
        assert non_torch_bytes(4, 1, v033, gpu, link) == int(0.25 * GiB)


def test_mla_block_size_comes_from_the_gpu() -> None:
    # DeepSeek V3 (dense MLA, no indexer): 128-token blocks on every Blackwell card, 16 elsewhere
    model = to_model_input(load_directory(CORPUS / "deepseek-ai__DeepSeek-V3"))
    cfg = ServingConfig(max_model_len=4096, tensor_parallel_size=8)
    for gpu in gpu_catalog():
        expected = 128 if gpu.architecture == "blackwell" else 16
        assert plan(model, gpu, cfg).kv.block_size == expected, gpu.name
