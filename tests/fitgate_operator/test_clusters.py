"""The gate in real clusters: cloud GPU labels, instance types, pools that scale from zero (docs/clusters.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.logic import SCHEDULABLE_ANNOTATION, decide
from fitgate.operator.decision.status import status_of
from fitgate.operator.decision.workloads import WorkloadVerdict
from fitgate.operator.gpus.cloudlabels import gpu_from_labels, names_a_gpu, namesakes
from fitgate.operator.gpus.gpuview import build_inventory
from fitgate.operator.gpus.inventory import Inventory, parse_node, unlabeled_gpus
from fitgate.operator.gpus.placement import Toleration
from fitgate.operator.gpus.prospects import parse_machine_group, parse_nodeclaim, parse_nodepool, prospects
from fitgate.operator.gpus.sharing import Mechanism, Share
from fitgate.operator.observation.audit import audit_action
from fitgate.operator.schema.api import parse_spec
from fitgate.operator.schema.config import OperatorConfig
from fitgate.sizing import ReasonCode, Verdict
from fitgate.sizing.gpus import find_gpu, gpu_catalog
from fitgate.sizing.instances import gke_accelerator, instance_gpus, instance_types, karpenter_gpu
from fitgate.sizing.units import GiB, MiB
from tests.conftest import model

ROOT = Path(__file__).resolve().parents[2]
GPT_OSS = model("openai/gpt-oss-20b")
LLAMA_8B = model("meta-llama/Llama-3.1-8B-Instruct")
LLAMA_70B = model("meta-llama/Llama-3.1-70B-Instruct")
POLICY = OperatorConfig().unknown_policy


def node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {"allocatable": allocatable}}


def inventory(*nodes: dict[str, Any], templates: tuple[Any, ...] = ()) -> Inventory:
    return build_inventory({n["metadata"]["name"]: parse_node(n) for n in nodes}, {}, None, None, None, templates)


# -- label schemes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "gpu", "count", "scheme"),
    [
        # GPU Feature Discovery (k8s-device-plugin docs/gpu-feature-discovery/README.md)
        ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}, "H100-SXM", 8, "gfd"),
        ({"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}, "L40S", None, "gfd"),
        # GKE (cloud.google.com/kubernetes-engine/docs/how-to/gpus); the count from Autopilot's label or the machine
        ({"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, "H100-SXM", None, "gke"),
        (
            {"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-accelerator-count": "2"},
            "L4",
            2,
            "gke",
        ),
        (
            {
                "cloud.google.com/gke-accelerator": "nvidia-a100-80gb",
                "node.kubernetes.io/instance-type": "a2-ultragpu-4g",
            },
            "A100-80GB",
            4,
            "gke",
        ),
        ({"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}, "H200", None, "gke"),
        # hunt148 S4: the RTX Virtual Workstation twins are the same cards; OCI's L40S-NC shape, 4 x L40S
        ({"cloud.google.com/gke-accelerator": "nvidia-tesla-t4-vws"}, "T4", None, "gke"),
        ({"cloud.google.com/gke-accelerator": "nvidia-l4-vws"}, "L4", None, "gke"),
        ({"node.kubernetes.io/instance-type": "BM.GPU.L40S-NC.4"}, "L40S", 4, "instance-type"),
        # hunt189 F2: OCI's -NC twins of the H100 / H200 shapes (sgl-project/ome instance_type_util.go L26-28)
        ({"node.kubernetes.io/instance-type": "BM.GPU.H100-NC.8"}, "H100-SXM", 8, "instance-type"),
        ({"node.kubernetes.io/instance-type": "BM.GPU.H200-NC.8"}, "H200", 8, "instance-type"),
        # Karpenter on AWS (instance-types.md: p5.48xlarge is h100 x 8, 81920 MiB each)
        (
            {
                "karpenter.k8s.aws/instance-gpu-name": "h100",
                "karpenter.k8s.aws/instance-gpu-count": "8",
                "karpenter.k8s.aws/instance-gpu-memory": "81920",
            },
            "H100-SXM",
            8,
            "karpenter",
        ),
        # a100 is two cards: 40960 MiB on p4d, 81920 MiB on p4de
        (
            {"karpenter.k8s.aws/instance-gpu-name": "a100", "karpenter.k8s.aws/instance-gpu-memory": "40960"},
            "A100-40GB",
            None,
            "karpenter",
        ),
        (
            {"karpenter.k8s.aws/instance-gpu-name": "a100", "karpenter.k8s.aws/instance-gpu-memory": "81920"},
            "A100-80GB",
            None,
            "karpenter",
        ),
        ({"eks.amazonaws.com/instance-gpu-name": "l40s"}, "L40S", None, "karpenter"),  # EKS Auto Mode's prefix
        # instance types (sizing/data/cloud_gpus.json)
        ({"node.kubernetes.io/instance-type": "p5.48xlarge"}, "H100-SXM", 8, "instance-type"),
        ({"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}, "H100-SXM", 8, "instance-type"),
        # AMD GPU Operator labeller
        ({"amd.com/gpu.product-name": "Instinct_MI300X"}, "MI300X", None, "amd"),
        # hunt25 F3: what the labeller writes today (sysfs product_name, spaces as '_'; AMD's docs example)
        ({"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}, "MI300X", None, "amd"),
        ({"amd.com/gpu.product-name": "AMD_Instinct_MI325_OAM"}, "MI325X", None, "amd"),
        ({"amd.com/gpu.product-name": "AMD_Instinct_MI355_OAM"}, "MI355X", None, "amd"),
        # hunt25 F4: CoreWeave's gpu.nvidia.com/model (its release notes' selector, llm-d-benchmark's affinity)
        ({"gpu.nvidia.com/model": "H200"}, "H200", None, "gpu-class"),
        ({"gpu.nvidia.com/model": "A100_PCIE_80GB"}, "A100-80GB", None, "gpu-class"),
        # hunt25 F5 / F6: p3's v100 is the 16 GB card; GKE's nvidia-tesla-p100
        (
            {"karpenter.k8s.aws/instance-gpu-name": "v100", "karpenter.k8s.aws/instance-gpu-memory": "16384"},
            "V100-16GB",
            None,
            "karpenter",
        ),
        ({"cloud.google.com/gke-accelerator": "nvidia-tesla-p100"}, "Tesla-P100-16GB", None, "gke"),
        ({"nvidia.com/gpu.product": "NVIDIA-RTX-PRO-5000-72GB-Blackwell"}, "RTX-PRO-5000-72GB", None, "gfd"),
        ({"nvidia.com/gpu.product": "NVIDIA-H800-PCIe"}, "H800", None, "gfd"),
        # hunt50 F8: Alibaba ACK (gpushare-device-plugin's cardNameKey / gpuCountKey; ACK docs' selectors), Volcengine
        # VKE (AIBrix's default affinity key), AKS node auto-provisioning (karpenter-provider-azure's labels table)
        (
            {"aliyun.accelerator/nvidia_name": "NVIDIA-A10", "aliyun.accelerator/nvidia_count": "2"},
            "A10",
            2,
            "cloud-name",
        ),
        ({"aliyun.accelerator/nvidia_name": "Tesla-V100-SXM2-16GB"}, "V100-16GB", None, "cloud-name"),
        ({"machine.cluster.vke.volcengine.com/gpu-name": "NVIDIA-A800-SXM4-80GB"}, "A800", None, "cloud-name"),
        ({"karpenter.azure.com/sku-gpu-name": "T4", "karpenter.azure.com/sku-gpu-count": "1"}, "T4", 1, "cloud-name"),
        # the instance type, where known, says which H100 (ND H100 v5: 80 GB SXM; NC H100 v5 is the 94 GB NVL)
        (
            {
                "karpenter.azure.com/sku-gpu-name": "H100",
                "node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5",
            },
            "H100-SXM",
            8,
            "instance-type",
        ),
        ({"node.kubernetes.io/instance-type": "BM.GPU.H100.8"}, "H100-SXM", 8, "instance-type"),  # OCI (OKE)
        # Grace Blackwell trays of four (hunt80 G3: llm-d's wide-EP guide on OCI GB200, GKE's A4X Max)
        ({"node.kubernetes.io/instance-type": "BM.GPU.GB200.4"}, "GB200", 4, "instance-type"),
        ({"node.kubernetes.io/instance-type": "BM.GPU.GB300.4"}, "GB300", 4, "instance-type"),
        ({"node.kubernetes.io/instance-type": "a4x-maxgpu-4g-metal"}, "GB300", 4, "instance-type"),
        ({"node.kubernetes.io/instance-type": "p6e-gb200.36xlarge"}, "GB200", 4, "instance-type"),
        ({"cloud.google.com/gke-accelerator": "nvidia-gb300"}, "GB300", None, "gke"),
    ],
)
def test_label_schemes_name_the_gpu(labels: dict[str, str], gpu: str, count: int | None, scheme: str) -> None:
    got, note = gpu_from_labels(labels)
    assert got is not None and note is None
    assert (got.gpu.name, got.count, got.scheme) == (gpu, count, scheme)


def test_labels_fitgate_cannot_read_say_so_and_guess_nothing() -> None:
    assert gpu_from_labels({"cloud.google.com/gke-accelerator": "nvidia-tesla-k80"}) == (
        None,
        "cloud.google.com/gke-accelerator=nvidia-tesla-k80 is not in fitgate's table of GKE accelerators",
    )
    # an ambiguous Karpenter name without its memory label is unknown, not the 40 GB or the 80 GB card
    assert gpu_from_labels({"karpenter.k8s.aws/instance-gpu-name": "a100"})[0] is None
    # and so is a cloud's bare name of two sizes (A100 40/80, V100 16/32, AKS's H100 80/94 GB)
    for labels in (
        {"karpenter.azure.com/sku-gpu-name": "A100"},
        {"karpenter.azure.com/sku-gpu-name": "H100"},
        {"aliyun.accelerator/nvidia_name": "Tesla-V100"},
    ):
        got, note = gpu_from_labels(labels)
        assert got is None and note is not None and "or not its memory size" in note
    # hunt25 F5: g6f's fractional L4 (instance-gpu-memory 2861 MiB) is not the whole 22 GiB card
    got, note = gpu_from_labels(
        {"karpenter.k8s.aws/instance-gpu-name": "l4", "karpenter.k8s.aws/instance-gpu-memory": "2861"}
    )
    assert got is None and note is not None and "2861 MiB" in note
    assert gpu_from_labels({"node.kubernetes.io/instance-type": "m7i.large"}) == (None, None)  # no GPU, no note
    got, note = gpu_from_labels({"gpu.intel.com/product": "Max_1550"})
    assert got is None and note == "gpu.intel.com/product=Max_1550 is not in the GPU catalog"
    assert names_a_gpu({"cloud.google.com/gke-accelerator": "nvidia-l4"})
    assert not names_a_gpu({"pool": "a"})


@pytest.mark.parametrize(
    ("instance_type", "gpu", "count"),
    [
        # AWS, from Karpenter's instance-types.md (gpu-name, gpu-count, gpu-memory)
        ("p4d.24xlarge", "A100-40GB", 8),
        ("p4de.24xlarge", "A100-80GB", 8),
        ("p5.4xlarge", "H100-SXM", 1),
        ("p5e.48xlarge", "H200", 8),
        ("p5en.48xlarge", "H200", 8),
        ("p6-b200.48xlarge", "B200", 8),
        ("p6-b300.48xlarge", "B300", 8),
        ("g5.12xlarge", "A10G", 4),
        ("g6.48xlarge", "L4", 8),
        ("g6e.xlarge", "L40S", 1),
        # GCP (cloud.google.com/compute/docs/gpus)
        ("a2-highgpu-8g", "A100-40GB", 8),
        ("a2-megagpu-16g", "A100-40GB", 16),
        ("a3-highgpu-8g", "H100-SXM", 8),
        ("a3-ultragpu-8g", "H200", 8),
        ("a4-highgpu-8g", "B200", 8),
        ("g2-standard-48", "L4", 4),
        # Azure (KAITO's azure_sku_handler.go, learn.microsoft.com)
        ("Standard_NC24ads_A100_v4", "A100-80GB", 1),
        ("Standard_ND96asr_v4", "A100-40GB", 8),
        ("standard_nc40ads_h100_v5", "H100-NVL", 1),  # case as AKS writes it or not: one instance type
        ("Standard_ND96isr_H200_v5", "H200", 8),
        ("Standard_ND96isr_MI300X_v5", "MI300X", 8),
        # hunt111 F4: read as no GPU before (Unknown)
        ("p3.8xlarge", "V100-16GB", 4),
        ("g5g.16xlarge", "T4", 2),
        ("gr6.4xlarge", "L4", 1),
        ("g4-standard-384", "RTX-PRO-6000", 8),
        ("Standard_ND40rs_v2", "V100-32GB", 8),
        ("VM.GPU3.4", "V100-16GB", 4),
        # hunt133 F1: SageMaker HyperPod's EKS nodes carry SageMaker's names, EC2's with an ml. prefix
        ("ml.p5.48xlarge", "H100-SXM", 8),
        ("ml.g5.8xlarge", "A10G", 1),
        ("ml.p6-b300.48xlarge", "B300", 8),
    ],
)
def test_instance_types_map_to_product_and_count(instance_type: str, gpu: str, count: int) -> None:
    found = instance_gpus(instance_type)
    assert found is not None and (found.gpu.name, found.count) == (gpu, count)
    assert instance_gpus("ml.trn1.32xlarge") is None  # a Trainium machine: no GPU of the catalog


def test_every_registry_row_names_a_catalog_gpu_and_a_source() -> None:
    raw = json.loads(resources.files("fitgate.sizing").joinpath("data/cloud_gpus.json").read_text())
    for section in ("instance_types", "gke_accelerators", "karpenter_gpu_names"):
        for row in raw[section]:
            assert find_gpu(row["gpu"]) is not None, row
            assert len(row["source"]) > 20, row
    assert len(instance_types()) == len(raw["instance_types"])  # no instance type listed twice
    assert {c for row in raw["instance_types"] for c in [row["cloud"]]} == {
        "aws",
        "gcp",
        "azure",
        "oci",
        "coreweave",
        "digitalocean",
    }
    assert gke_accelerator("NVIDIA-L4") is not None and karpenter_gpu("nope") is None


@pytest.mark.parametrize(
    ("name", "label_mib", "vendor"),
    [
        ("B300", 275040, "nvidia"),
        ("GB300", 284208, "nvidia"),  # nvidia-smi on OCI BM.GPU.GB300.4 (hunt25 F2; B300's 275040 before)
        ("GH200", 97871, "nvidia"),
        ("H800", 81559, "nvidia"),
        ("A800", 81920, "nvidia"),
        ("L20", 46068, "nvidia"),
        ("A40", 46068, "nvidia"),
        ("A30", 24576, "nvidia"),
        ("GB10", 125061, "nvidia"),  # CUDA total 121.63 GiB in a vLLM 0.25.1 log (hunt55 F2), label estimated
        ("RTX-PRO-5000-72GB", 73415, "nvidia"),
        ("RTX-5080", 16303, "nvidia"),
        ("RTX-4080", 16376, "nvidia"),
        ("MI350X", 294912, "amd"),
    ],
)
def test_catalog_has_the_gpus_of_2026(name: str, label_mib: int, vendor: str) -> None:
    gpu = find_gpu(name)
    assert gpu is not None and gpu.vendor == vendor and gpu.label_memory_mib == label_mib
    # CUDA (ROCm) reports less than the label: the driver keeps 16 MiB (AMD) to ~0.6 GiB (NVIDIA), 1.05 GiB on the
    # GB300 (nvidia-smi's 284208 MiB against PyTorch's "total capacity of 276.50 GiB" in two public runs; hunt80 G1)
    assert 0 < label_mib * 1024**2 - gpu.memory_bytes <= 1.1 * GiB
    assert gpu in gpu_catalog()


# -- nodes labelled by their cloud ---------------------------------------------------------------


def test_a_gke_node_without_gfd_is_read_from_its_accelerator_label() -> None:
    gke = node(
        "gke-h100-0",
        {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "node.kubernetes.io/instance-type": "a3-highgpu-8g"},
        {"nvidia.com/gpu": "8"},
    )
    [g] = parse_node(gke)
    assert (g.product, g.gpu.name, g.count, g.resource) == ("H100-SXM", "H100-SXM", 8, "nvidia.com/gpu")
    assert "read from the gke labels" in g.notes[0]


def test_an_eks_karpenter_node_and_an_aks_node_are_read() -> None:
    eks = node(
        "ip-10-0-0-1",
        {"karpenter.k8s.aws/instance-gpu-name": "l40s", "node.kubernetes.io/instance-type": "g6e.12xlarge"},
        {"nvidia.com/gpu": "4"},
    )
    aks = node("aks-gpu-0", {"node.kubernetes.io/instance-type": "Standard_ND96isr_MI300X_v5"}, {"amd.com/gpu": "8"})
    [e], [a] = parse_node(eks), parse_node(aks)
    assert (e.gpu.name, e.count, e.vendor) == ("L40S", 4, "nvidia")
    assert (a.gpu.name, a.count, a.vendor, a.resource) == ("MI300X", 8, "amd", "amd.com/gpu")


def test_one_gpu_spelled_by_gfd_and_by_a_cloud_label_is_one_pool() -> None:
    # Two 8 x H100 nodes: one labelled by GPU Feature Discovery, one only by GKE. One GPU, one pool of 16 GPUs,
    # named after the catalog (the two spellings differ); an A100 node stays a pool of its own.
    gfd = node(
        "gfd-0",
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
        {"nvidia.com/gpu": "8"},
    )
    gke = node("gke-0", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, {"nvidia.com/gpu": "8"})
    a100 = node("a100-0", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu": "8"})
    pools = {p.product: p for p in inventory(gfd, gke, a100).matching_pools(None, {})}
    assert set(pools) == {"H100-SXM", "NVIDIA-A100-SXM4-80GB"}
    assert (pools["H100-SXM"].nodes, pools["H100-SXM"].free_gpus) == (("gfd-0", "gke-0"), 16)


def test_a_node_whose_gpu_no_label_names_is_reported() -> None:
    bare = node("gpu-9", {"node.kubernetes.io/instance-type": "x9.huge"}, {"nvidia.com/gpu": "8"})
    assert parse_node(bare) == []
    why = unlabeled_gpus(bare)
    assert why is not None and "no cloud label fitgate knows" in why


# -- fit is not availability ---------------------------------------------------------------------


def readme_example() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "examples" / "fits-gpt-oss-l40s.yaml").read_text())["spec"])


def test_the_readme_example_is_admitted_on_an_empty_cluster_with_no_node_yet() -> None:
    spec = parse_spec({**readme_example(), "model": {"name": "openai/gpt-oss-20b", "source": "catalog"}})
    ev = evaluate(spec, GPT_OSS, Inventory(()))
    assert ev.verdict is Verdict.FITS and ev.no_node == "no node with NVIDIA-L40S (placement) yet"
    assert ev.best is not None and ev.best.pool.prospective and ev.best.pool.gpu.name == "L40S"
    outcome = decide(spec, ev, POLICY)
    assert outcome.allowed and outcome.result == "warned"
    assert "reason NoNodeYet" in outcome.warnings[0] and "evaluates again when one joins" in outcome.warnings[0]
    status = status_of(ev, 1, None)
    schedulable = next(c for c in status["conditions"] if c["type"] == "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "NoNodeYet")
    assert status["pools"][0]["nodes"] == 0 and status["pools"][0]["source"] == "placement"
    assert "freeGpus" not in status["pools"][0]  # no node: no free GPUs to count, not zero of them


def test_a_true_misfit_on_a_product_with_no_node_is_still_denied() -> None:
    # Llama-3.1-70B bf16: ~131 GiB of weights on one L4 (22.06 GiB x 0.9 budget): no node needed to know that
    spec = parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}},
        }
    )
    ev = evaluate(spec, LLAMA_70B, Inventory(()))
    assert (ev.verdict, ev.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.WEIGHTS_EXCEED_BUDGET)
    assert ev.no_node and "L4" in ev.message
    outcome = decide(spec, ev, POLICY)
    assert not outcome.allowed and "does not fit" in outcome.message


def test_a_placement_naming_no_gpu_and_no_node_is_unknown_never_does_not_fit() -> None:
    h100 = node("h-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"})
    spec = parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {"nodeSelector": {"pool": "gpu-a"}},
        }
    )
    ev = evaluate(spec, LLAMA_8B, inventory(h100))
    assert (ev.verdict, ev.reason) == (Verdict.UNKNOWN, ReasonCode.NO_NODE_YET)
    assert "nodeSelector pool=gpu-a" in ev.message
    assert decide(spec, ev, POLICY).allowed


def test_a_product_other_than_the_nodes_is_planned_on_that_product() -> None:
    # the cluster has H100 nodes; the spec asks for a B200 no node has yet: fit on B200, no node
    h100 = node("h-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "8"})
    spec = parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {"gpuProduct": "B200"},
        }
    )
    ev = evaluate(spec, LLAMA_8B, inventory(h100))
    assert ev.verdict is Verdict.FITS and ev.best is not None and ev.best.pool.gpu.name == "B200"
    assert ev.no_node == "no node with B200 (placement) yet"


# -- autoscaler templates ------------------------------------------------------------------------

NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "llm"}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["l40s"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            },
        }
    },
}
GPU_TOLERATION = (Toleration("nvidia.com/gpu", "Exists"),)


def test_a_karpenter_nodepool_names_the_product() -> None:
    pool = parse_nodepool(NODEPOOL)
    assert pool is not None
    [p] = prospects(None, {"team": "llm"}, GPU_TOLERATION, [pool])
    assert (p.gpu.gpu.name, p.count, p.source) == ("L40S", None, "NodePool/gpu")
    assert prospects(None, {"karpenter.sh/nodepool": "gpu"}, GPU_TOLERATION, [pool])[0].gpu.gpu.name == "L40S"
    # its taint keeps an untolerating pod off it; a label it cannot carry too
    assert prospects(None, {"team": "llm"}, (), [pool]) == ()
    assert prospects(None, {"team": "web"}, GPU_TOLERATION, [pool]) == ()
    # a GPU it does not offer: not from the NodePool, but the placement still names its GPU
    [h100] = prospects(None, {"karpenter.k8s.aws/instance-gpu-name": "h100"}, GPU_TOLERATION, [pool])
    assert (h100.gpu.gpu.name, h100.source) == ("H100-SXM", "placement")


def test_a_nodepool_that_pins_only_the_instance_family_names_its_gpu() -> None:
    # hunt77 F11: an EKS Auto Mode NodePool whose only GPU requirement is eks.amazonaws.com/instance-family In [g6e]
    # gave no prospect for a placement selecting the pool (every g6e carries an L40S, data/cloud_gpus.json)
    auto = {
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [{"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["g6e"]}]
                }
            }
        },
    }
    pool = parse_nodepool(auto)
    assert pool is not None
    [p] = prospects(None, {"karpenter.sh/nodepool": "gpu"}, (), [pool])
    assert (p.gpu.gpu.name, p.source) == ("L40S", "NodePool/gpu")
    # a family without a GPU names none
    auto["spec"]["template"]["spec"]["requirements"][0]["values"] = ["m5"]
    assert prospects(None, {"karpenter.sh/nodepool": "gpu"}, (), [parse_nodepool(auto)]) == ()


def test_a_nodepool_that_leaves_the_gpu_open_takes_the_one_the_pod_selects() -> None:
    open_pool = parse_nodepool({"metadata": {"name": "default"}, "spec": {"template": {"spec": {"requirements": []}}}})
    assert open_pool is not None
    [p] = prospects(None, {"karpenter.k8s.aws/instance-gpu-name": "h100"}, (), [open_pool])
    assert (p.gpu.gpu.name, p.source) == ("H100-SXM", "NodePool/default")
    [t] = prospects(None, {"node.kubernetes.io/instance-type": "p5e.48xlarge"}, (), [open_pool])
    assert (t.gpu.gpu.name, t.count) == ("H200", 8)


def test_the_nodepool_plans_the_deployment_and_its_verdict_changes_when_a_node_joins() -> None:
    pool = parse_nodepool(NODEPOOL)
    spec = parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {
                "nodeSelector": {"team": "llm"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            },
        }
    )
    ev = evaluate(spec, LLAMA_8B, inventory(templates=(pool,)))
    assert ev.verdict is Verdict.FITS and ev.no_node == "no node with L40S (NodePool/gpu) yet"
    before = status_of(ev, 1, None)
    joined = node(
        "ip-1",
        {
            "team": "llm",
            "karpenter.k8s.aws/instance-gpu-name": "l40s",
            "node.kubernetes.io/instance-type": "g6e.xlarge",
        },
        {"nvidia.com/gpu": "1"},
    )
    after_ev = evaluate(spec, LLAMA_8B, inventory(joined, templates=(pool,)))
    assert after_ev.verdict is Verdict.FITS and not after_ev.no_node
    after = status_of(after_ev, 1, before)
    schedulable = next(c for c in after["conditions"] if c["type"] == "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "NodesMatch")
    assert after["pools"][0]["nodes"] == 1 and after["pools"][0]["source"] == "labels"
    # a deployment that always had nodes keeps its two conditions
    assert [c["type"] for c in status_of(after_ev, 1, None)["conditions"]] == ["Ready", "Fits"]


MACHINE_DEPLOYMENT = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "MachineDeployment",
    "metadata": {
        "name": "h100-pool",
        "namespace": "capi",
        "annotations": {
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
            "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu",
            "capacity.cluster-autoscaler.kubernetes.io/gpu-count": "4",
            "capacity.cluster-autoscaler.kubernetes.io/labels": "pool=h100,nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
            "capacity.cluster-autoscaler.kubernetes.io/taints": "dedicated=gpu:NoSchedule",
        },
    },
}


def test_cluster_autoscaler_scale_from_zero_annotations_size_the_node() -> None:
    group = parse_machine_group(MACHINE_DEPLOYMENT)
    assert group is not None and group.gpu_count == 4
    tolerate = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    base = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
        "serving": {"maxModelLen": 8192},
        "placement": {"nodeSelector": {"pool": "h100"}, "tolerations": tolerate},
    }
    ev = evaluate(parse_spec(base), LLAMA_8B, inventory(templates=(group,)))
    assert ev.verdict is Verdict.FITS and ev.best is not None and ev.best.pool.gpus_per_node == 4
    assert ev.no_node == "no node with NVIDIA-H100-80GB-HBM3 (MachineDeployment/capi/h100-pool) yet"
    # TP 8 on nodes of 4 GPUs: a true misfit, known before any node exists
    tp8 = {**base, "serving": {"maxModelLen": 8192, "tensorParallelSize": 8}}
    ev8 = evaluate(parse_spec(tp8), LLAMA_8B, inventory(templates=(group,)))
    assert (ev8.verdict, ev8.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.NOT_ENOUGH_GPUS_PER_NODE)
    assert "its nodes (MachineDeployment/capi/h100-pool, none yet) have 4" in ev8.message
    assert parse_machine_group({"metadata": {"name": "cpu", "annotations": {}}}) is None


def test_the_audit_marks_a_workload_with_no_node_and_clears_it() -> None:
    spec = parse_spec({**readme_example(), "model": {"name": "openai/gpt-oss-20b", "source": "catalog"}})
    waiting = evaluate(spec, GPT_OSS, Inventory(()))
    reading: Any = None  # audit_action reads only the verdict and the evaluation
    action = audit_action({}, WorkloadVerdict(reading, waiting, "m"))
    assert action.annotations is not None and action.annotations[SCHEDULABLE_ANNOTATION] == "NoNodeYet"
    l40s = node("l-0", {"nvidia.com/gpu.product": "NVIDIA-L40S"}, {"nvidia.com/gpu": "1"})
    placed = evaluate(spec, GPT_OSS, inventory(l40s))
    cleared = audit_action(
        {SCHEDULABLE_ANNOTATION: "NoNodeYet", "fitgate.io/verdict": "Fits"}, WorkloadVerdict(reading, placed, "m")
    )
    assert cleared.annotations is not None and cleared.annotations[SCHEDULABLE_ANNOTATION] is None  # removed


def test_the_operator_inventory_carries_the_templates_of_both_cluster_api_versions_once() -> None:
    from fitgate.operator.watches.nodewatch import NodeWatch  # noqa: PLC0415 - the watch module, only here
    from fitgate.operator.watches.resourcewatch import Sources  # noqa: PLC0415

    sources = Sources(lambda: None, lambda: None)
    nodes = NodeWatch(api_factory=lambda: None, sources=sources)
    group = parse_machine_group(MACHINE_DEPLOYMENT)
    by_watch = {w.name: w for w in sources.templates}
    by_watch["nodepools.karpenter.sh/v1"].replace({"/gpu": parse_nodepool(NODEPOOL)})
    by_watch["machinedeployments.cluster.x-k8s.io/v1beta2"].replace({"capi/h100-pool": group})
    by_watch["machinedeployments.cluster.x-k8s.io/v1beta1"].replace({"capi/h100-pool": group})  # the same object
    nodes.replace({})
    assert [t.source for t in nodes.inventory().templates] == ["MachineDeployment/capi/h100-pool", "NodePool/gpu"]


def test_a_kaito_nodeclaim_names_the_workspace_instance_type() -> None:
    # as kaito-project/kaito pkg/utils/nodeclaim/nodeclaim.go writes one for a Workspace on Standard_NC24ads_A100_v4
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "ws0a1b2c3",
            "labels": {
                "karpenter.sh/nodepool": "kaito",
                "kaito.sh/workspace": "workspace-phi-4",
                "kaito.sh/workspacenamespace": "default",
                "apps": "phi-4",
            },
        },
        "spec": {
            "taints": [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}],
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["kaito"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["Standard_NC24ads_A100_v4"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            ],
        },
    }
    template = parse_nodeclaim(claim)
    assert template is not None
    [p] = prospects(None, {"apps": "phi-4"}, (Toleration("sku", "Equal", "gpu", "NoSchedule"),), [template])
    assert (p.gpu.gpu.name, p.count, p.source) == ("A100-80GB", 1, "NodeClaim/ws0a1b2c3")  # 1 x A100 80GB (KAITO)
    assert parse_nodeclaim({**claim, "status": {"nodeName": "aks-ws0a1b2c3"}}) is None  # its node has joined


def test_fitgate_check_reads_the_gpu_from_a_cloud_label(tmp_path: Path) -> None:
    from fitgate.operator.decision.offline import check_files  # noqa: PLC0415

    def manifest(name: str, model: str, selector: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeSelector": selector,
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:v0.33.0",
                                "command": ["vllm", "serve", model, "--max-model-len", "8192"],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ],
                    }
                }
            },
        }

    docs = [
        manifest("on-gke", "meta-llama/Llama-3.1-8B-Instruct", {"cloud.google.com/gke-accelerator": "nvidia-l4"}),
        manifest("on-eks", "meta-llama/Llama-3.1-70B-Instruct", {"node.kubernetes.io/instance-type": "g6e.xlarge"}),
    ]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    gke, eks = check_files([str(path)])
    assert (gke.gpu, gke.verdict, gke.admitted) == ("L4", "Fits", True)
    # 70B bf16 (~131 GiB) on one g6e.xlarge L40S (44.42 GiB): denied, known from the instance type alone
    assert (eks.gpu, eks.verdict, eks.admitted) == ("L40S", "DoesNotFit", False)

    # hunt111 F5: a required affinity `instance-type In [g6e.xlarge, g6e.2xlarge, g6e.4xlarge]` names one GPU product
    # (each an L40S): offline it is sized on it; values of two products stay a choice (Unknown, no GPU)
    # hunt189 F3: VKE's card names (AIBrix's regression manifests) the same way; a bare A100 names no size (no hint)
    vke = "machine.cluster.vke.volcengine.com/gpu-name"
    for key, values, gpu in (
        ("node.kubernetes.io/instance-type", ["g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge"], "L40S"),
        ("node.kubernetes.io/instance-type", ["g6e.xlarge", "p5.48xlarge"], None),
        (vke, ["Tesla-A100-80G", "NVIDIA-A100-SXM4-80GB"], "A100-80GB"),
        (vke, ["Tesla-A100-80G", "NVIDIA-H20-SXM5-96GB"], None),
        (vke, ["Tesla-A100-80G", "A100"], None),
    ):
        doc = manifest("aff", "meta-llama/Llama-3.1-8B-Instruct", {})
        expr = {"key": key, "operator": "In", "values": values}
        doc["spec"]["template"]["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [expr]}
            ]}}
        }  # fmt: skip
        path.write_text(yaml.safe_dump(doc))
        [r] = check_files([str(path)])
        assert r.gpu == gpu and r.verdict == ("Fits" if gpu else "Unknown"), r
        from fitgate.workloads import read_workload  # noqa: PLC0415

        reading = read_workload(doc)
        assert reading is not None and reading.node_selector == {}  # never a selector the operator would match on


def test_fitgate_check_takes_a_pod_of_16_gpus_to_run_on_a_node_of_16(tmp_path: Path) -> None:
    """hunt90: GKE's a2-megagpu-16g carries 16 A100-40GB, its accelerator label no count; a pod asking for 16 GPUs
    at TP 16 was DoesNotFit offline on a node of 8 nobody stated. Without --gpus-per-node a node holds what one pod
    asks for (at least 8); stated, the size is the user's, and 16 GPUs on a node of 8 stay a misfit."""
    from fitgate.operator.decision.offline import check_files  # noqa: PLC0415

    pod = {
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.11.0",
                "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "16"],
                "resources": {"limits": {"nvidia.com/gpu": "16"}},
            }
        ],
    }
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "a2"},
        "spec": {"template": {"spec": pod}},
    }
    path = tmp_path / "a2.yaml"
    path.write_text(yaml.safe_dump(doc))
    (unstated,) = check_files([str(path)])
    assert (unstated.gpu, unstated.verdict, unstated.admitted) == ("A100-40GB", "Fits", True)
    assert "no node size given: checked on a node of the 16 GPUs one pod asks for" in unstated.message  # hunt92 F1
    (stated,) = check_files([str(path)], gpus_per_node=8)
    assert (stated.verdict, stated.admitted) == ("DoesNotFit", False)
    assert "16 GPUs per replica (TP x PP) but the pool has 1 nodes of 8" in stated.message


def test_many_templates_of_one_gpu_are_one_prospect_naming_three() -> None:
    pools = [
        parse_nodepool(
            {
                "metadata": {"name": f"p{i}"},
                "spec": {
                    "template": {
                        "spec": {
                            "requirements": [
                                {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["l40s"]}
                            ]
                        }
                    }
                },
            }
        )
        for i in range(5)
    ]
    [p] = prospects(None, {}, (), [t for t in pools if t is not None])
    assert (p.gpu.gpu.name, p.source) == ("L40S", "NodePool/p0,NodePool/p1,NodePool/p2 and 2 more")


def _gfd_node(product: str, memory_mib: int) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory_mib), "nvidia.com/gpu.count": "8"}
    return {"metadata": {"name": "n0", "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}


def test_a_products_memory_label_wins_over_the_catalog_when_they_disagree() -> None:
    # hunt12 G1: vLLM's GLM-5 recipe serves GLM-5-FP8 on "8xH200 (or H20) GPUs (141GB x 8)": NVIDIA sells the H20
    # with 96 GB and with 141 GB. The catalog's H20 is the 96 GB board (label 97871 MiB); a node whose GFD memory
    # label says 143771 MiB (the H200's) is sized with 143771 - 470 (the driver's share) = 143301 MiB = 139.94 GiB.
    small = parse_node(_gfd_node("NVIDIA-H20", 97871))[0]
    assert small.gpu.name == "H20" and small.gpu.memory_bytes > 94 * GiB and not small.notes
    big = parse_node(_gfd_node("NVIDIA-H20", 143771))[0]
    assert big.gpu.memory_bytes == (143771 - 470) * MiB and big.gpu.bf16_dense_tflops == small.gpu.bf16_dense_tflops
    assert any("the node reports 139.94 GiB (node label)" in n for n in big.notes), big.notes
    # within 3 % (a driver's few MiB) the catalog's figure stays: an H100's label is 81559 MiB
    h100 = parse_node(_gfd_node("NVIDIA-H100-80GB-HBM3", 81559 - 200))[0]
    assert h100.gpu.memory_bytes == parse_node(_gfd_node("NVIDIA-H100-80GB-HBM3", 81559))[0].gpu.memory_bytes
    raw = {
        "model": {"name": "zai-org/GLM-5-FP8", "source": "catalog"},
        "serving": {"tensorParallelSize": 8, "maxModelLen": 32768},
    }
    on_big = evaluate(parse_spec(raw), model("zai-org/GLM-5-FP8"), [big])
    on_small = evaluate(parse_spec(raw), model("zai-org/GLM-5-FP8"), [small])
    assert on_small.verdict is Verdict.DOES_NOT_FIT and on_big.verdict is not Verdict.DOES_NOT_FIT


def test_an_old_drivers_labels_read_the_card_they_name() -> None:
    # hunt77 F7: OpenShift on a g4dn.xlarge, driver 450.80.02: nvidia.com/gpu.product Tesla-T4, gpu.memory 15109 MiB.
    # That driver's nvidia-smi total already leaves its share out (15360 MiB on driver 525); taking 470 MiB off again
    # gave 14639 MiB, 3.01 % under the catalog's 15094 MiB (CUDA's), so the node's smaller figure won.
    catalog_t4 = parse_node(_gfd_node("Tesla-T4", 15360))[0].gpu.memory_bytes
    old = parse_node(_gfd_node("Tesla-T4", 15109))[0]
    assert old.gpu.name == "T4" and old.gpu.memory_bytes == catalog_t4 and not old.notes, old
    # hunt77 F8: NVML's names before R470 had no vendor prefix (A100-SXM4-40GB, NVIDIA's GFD docs of driver 460)
    a100 = parse_node(_gfd_node("A100-SXM4-40GB", 40536))[0]
    assert a100.gpu.name == "A100-40GB" and a100.gpu.memory_bytes == (
        parse_node(_gfd_node("NVIDIA-A100-SXM4-40GB", 40536))[0].gpu.memory_bytes
    )
    # a board that is not the catalog's either way is still the node's (the H20 above)
    assert parse_node(_gfd_node("Tesla-T4", 12000))[0].gpu.memory_bytes == (12000 - 470) * MiB


def test_gkes_mig_and_shared_node_pools_are_read_as_slices_and_shares() -> None:
    # hunt77 F1: a GKE node pool of A100 40GB partitioned 1g.5gb offers 7 nvidia.com/gpu, one per MIG slice
    # (cloud.google.com/gke-gpu-partition-size); each was read as a whole A100 (39.4 GiB), admitting what cannot start
    labels = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
    }
    node = {"metadata": {"name": "g0", "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": "7"}}}
    [g] = parse_node(node)
    # the slice's own size: an A100 40GB's 1g.5gb is 4864 MiB = 4.75 GiB (GFD's mig-1g.5gb.memory label; lgip's 4.75;
    # hunt193 F2), above the nominal 5 x 1000^3 B = 4.66 GiB it was read as, and the rule's 39.39 / 8 - 0.35 = 4.57
    assert (g.mig_profile, g.count, g.gpu.memory_bytes) == ("1g.5gb", 7, 4864 * MiB)
    raw = {"model": {"name": "Qwen/Qwen3-8B", "source": "catalog"}, "serving": {"maxModelLen": 4096}}
    assert evaluate(parse_spec(raw), model("Qwen/Qwen3-8B"), [g]).verdict is Verdict.DOES_NOT_FIT  # 15 GiB of weights
    # hunt79 F3: GKE writes no slice memory; the name's GB alone read an H100's 7g.80gb as 74.5 GiB (79.25 real). Its
    # fraction of the card: 80 GB of 79.19 GiB is the whole card; 3g.40gb is half of it, lgip's 39.50 GiB (hunt193 F2;
    # the rule, half the card less 0.35 x 1/2 x 8/7 GiB, gave 39.39)
    h100 = {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-gpu-partition-size": "7g.80gb",
    }
    node = {"metadata": {"name": "g2", "labels": h100}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    card = parse_node({"metadata": {"name": "g3", "labels": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}},
                       "status": {"allocatable": {"nvidia.com/gpu": "8"}}})[0].gpu.memory_bytes  # fmt: skip
    assert parse_node(node)[0].gpu.memory_bytes == card
    h100["cloud.google.com/gke-gpu-partition-size"] = "3g.40gb"
    assert parse_node(node)[0].gpu.memory_bytes == 40448 * MiB > int(card / 2 - 0.35 * GiB * 0.5 * 8 / 7)
    # hunt81 F1: the H200's 1g.18gb is 16.00 GiB (nvidia-smi mig -lgip; users' "16.0 GiB usable"), not the fraction's
    # 139.81 / 8 - 0.35 = 17.13 nor the name's 18 x 10^9 B = 16.76
    h200 = {
        "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
        "cloud.google.com/gke-gpu-partition-size": "1g.18gb",
    }
    node = {"metadata": {"name": "g4", "labels": h200}, "status": {"allocatable": {"nvidia.com/gpu": "7"}}}
    assert parse_node(node)[0].gpu.memory_bytes == 16 * GiB
    # hunt175 F1: its 3g.71gb is 74,625,056,768 B = 69.50 GiB (Hugging Face ZeroGPU's device total), not four 16 GiB
    # eighths (64 GiB, which denied a Qwen3-30B-A3B at 40960 tokens that holds 8.27 GiB of KV at 69.5)
    h200["cloud.google.com/gke-gpu-partition-size"] = "3g.71gb"
    assert parse_node(node)[0].gpu.memory_bytes == 74_625_056_768
    # no public figure for 2g.35gb: the card's quarter, less the shortfall x (1 - 1/4) x 8/7
    card = parse_node(
        {**node, "metadata": {"name": "g5", "labels": {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}}}
    )
    h200["cloud.google.com/gke-gpu-partition-size"] = "2g.35gb"
    assert parse_node(node)[0].gpu.memory_bytes == int(card[0].gpu.memory_bytes / 4 - 0.35 * GiB * 0.75 * 8 / 7)
    # hunt77 F2: GKE's time-sharing and MPS labels are the node's share, as GFD's are
    shared = {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
        "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
    }
    node = {"metadata": {"name": "g1", "labels": shared}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}
    [g] = parse_node(node)
    # both refuse a pod asking for more than one shared GPU (GKE: "at most 1 nvidia.com/gpu can be requested",
    # hunt81 F2): tensor parallelism there is DoesNotFit, not the device plugin's spread over cards
    assert g.share == Share(Mechanism.TIME_SLICING, fraction=0.25, replicas=4, one_per_pod=True)
    raw = {"model": {"name": "Qwen/Qwen3-8B", "source": "catalog"}, "serving": {"tensorParallelSize": 2}}
    tp2 = evaluate(parse_spec(raw), model("Qwen/Qwen3-8B"), [replace(g, count=16)])
    assert tp2.verdict is Verdict.DOES_NOT_FIT and "refuses a pod that asks for more than one" in tp2.message
    shared["cloud.google.com/gke-gpu-sharing-strategy"] = "mps"
    [g] = parse_node(node)
    assert g.share == Share(Mechanism.MPS, fraction=0.25, replicas=4, one_per_pod=True)


def test_an_amd_node_with_a_vram_label_and_no_product_name_is_sized_by_it() -> None:
    # hunt77 F5: ROCm/k8s-device-plugin issue 112 (an AKS ND MI300X v5 node) and the OpenShift AMD docs show the
    # labeller's amd.com/gpu.vram: 191G and device id, no product name: the node was read as having no GPU (Unknown)
    labels = {"amd.com/gpu.vram": "191G", "amd.com/gpu.device-id": "74ff", "amd.com/gpu.family": "AI"}
    node = {"metadata": {"name": "a0", "labels": labels}, "status": {"allocatable": {"amd.com/gpu": "8"}}}
    [g] = parse_node(node)
    # 191 x 1024 MiB less the 16 MiB the AMD driver keeps = 195568 MiB (74ff: no card of amdgpu.ids)
    assert (g.product, g.vendor, g.count, g.gpu.memory_bytes) == ("AMD-GPU-74ff", "amd", 8, (191 * 1024 - 16) * MiB)
    # hunt179 F2: a device id amdgpu.ids gives one Instinct card names it (74B5: AMD Instinct MI300X VF), read as a
    # product-name label is: the catalog's MI300X (the rounded-down 191G label within its error)
    [g] = parse_node({**node, "metadata": {"name": "a2", "labels": {**labels, "amd.com/gpu.device-id": "74b5"}}})
    mi300x = find_gpu("MI300X")
    assert mi300x is not None
    assert (g.product, g.gpu.name, g.gpu.memory_bytes) == ("AMD_Instinct_MI300X_VF", "MI300X", mi300x.memory_bytes)
    # and without a VRAM label, the catalog's MI300X
    no_vram = {k: v for k, v in labels.items() if k != "amd.com/gpu.vram"} | {"amd.com/gpu.device-id": "74b5"}
    [g] = parse_node({**node, "metadata": {"name": "a3", "labels": no_vram}})
    assert g.gpu.name == "MI300X" and g.count == 8
    # a vram label no card has is not read (hunt81 F5)
    assert (
        parse_node({**node, "metadata": {"name": "a1", "labels": {**labels, "amd.com/gpu.vram": "99999999999G"}}}) == []
    )
    # a cloud label that names the card wins: the catalog's MI300X, with its speeds
    labels["node.kubernetes.io/instance-type"] = "Standard_ND96isr_MI300X_v5"
    [g] = parse_node(node)
    assert g.gpu.name == "MI300X"


def test_a_karpenter_instance_family_with_one_gpu_names_it() -> None:
    # hunt16 G7: AWS's EKS GenAI starter kit pins its 15 model templates with karpenter.k8s.aws/instance-family: g6e;
    # every g6e instance type of the registry (data/cloud_gpus.json) carries L40S, every g5 A10G
    got, _ = gpu_from_labels({"karpenter.k8s.aws/instance-family": "g6e"})
    assert got is not None and got.gpu.name == "L40S" and got.count is None
    got, _ = gpu_from_labels({"eks.amazonaws.com/instance-family": "g5"})
    assert got is not None and got.gpu.name == "A10G"
    assert gpu_from_labels({"karpenter.k8s.aws/instance-family": "m5"}) == (None, None)  # no GPU: nothing said
    # an instance type, when given, is more exact (it carries the count)
    got, _ = gpu_from_labels(
        {"karpenter.k8s.aws/instance-family": "g6e", "node.kubernetes.io/instance-type": "g6e.12xlarge"}
    )
    assert got is not None and got.count == 4


@pytest.mark.parametrize(
    ("value", "gpu"),
    [
        ("L40S", "L40S"),  # Ori cloud's nodes (hunt23 G1)
        ("H100_NVLINK_80GB", "H100-SXM"),  # CoreWeave's classes: MODEL[_NVLINK|_PCIE]_MEMORY
        ("A100_PCIE_40GB", "A100-40GB"),
        ("A100_NVLINK_80GB", "A100-80GB"),
        ("RTX_A6000", "RTX-A6000"),
        ("GH200_480GB", "GH200"),
        # 40 or 80 GB not said: the smaller card, with the larger as its namesake (hunt183 F1, the test below)
        ("A100_NVLINK", "A100-40GB"),
        # hunt175 F3: Ori's MODEL[SXM]-GB (docs.ori.co/kubernetes/node-selector): H100SXM-80 the SXM card, H100-80 the
        # PCIe one; the GB must be the card's (within 10 %)
        ("H100SXM-80", "H100-SXM"),
        ("H100-80", "H100-PCIe"),
        ("H200SXM-141", "H200"),
        ("A100SXM-80", "A100-80GB"),
        ("H100SXM-40", None),
    ],
)
def test_the_gpu_class_label_names_the_gpu(value: str, gpu: str | None) -> None:
    got, why = gpu_from_labels({"gpu.nvidia.com/class": value})
    assert (got.gpu.name if got else None) == gpu
    assert (why is None) == (gpu is not None)
    assert names_a_gpu({"gpu.nvidia.com/class": value})


def test_an_h20_is_sized_by_its_memory_label_and_is_either_board_without_one() -> None:
    # hunt175 F2: ACK labels every GPU node with aliyun.accelerator/nvidia_mem beside nvidia_name (HAMi's docs:
    # nvidia_mem=23028MiB on an A10); nvidia-smi names the 96 GB and the 141 GB H20 alike, so the figure decides:
    # 143771 MiB less the driver's 470 MiB. A pool with no node yet (a bare selector) may be either board.
    labels = {"aliyun.accelerator/nvidia_name": "NVIDIA-H20", "aliyun.accelerator/nvidia_mem": "143771MiB"}
    got, _ = gpu_from_labels(labels)
    assert got is not None and got.gpu.memory_bytes == (143771 - 470) * MiB
    node = {"metadata": {"name": "ack1", "labels": {**labels, "aliyun.accelerator/nvidia_count": "8"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}  # fmt: skip
    assert parse_node(node)[0].gpu.memory_bytes == (143771 - 470) * MiB
    found = prospects(None, {"nvidia.com/gpu.product": "NVIDIA-H20"}, (), [])
    assert sorted(p.gpu.gpu.name for p in found) == ["H20", "H20-141GB"]
    labelled = prospects(None, {"nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.memory": "97871"}, (), [])
    assert [p.gpu.gpu.name for p in labelled] == ["H20"]
    assert [p.gpu.gpu.name for p in prospects(None, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, (), [])] == [
        "H100-SXM"
    ]


@pytest.mark.parametrize(
    ("value", "gpu"),
    [
        # hunt173 F2: vllm-project/aibrix test/regression/v0.2.1 and v0.3.0 select VKE nodes by these names
        ("Tesla-A100-80G", "A100-80GB"),
        ("NVIDIA-H20-SXM5-96GB", "H20"),
        ("Tesla-A100-SXM4-80GB", "A100-80GB"),
        ("Tesla-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-H20-SXM5-141GB", "H20-141GB"),
        ("Tesla-V100", None),  # 16 or 32 GB: not said
    ],
)
def test_ack_and_vke_names_with_their_memory_name_the_card(value: str, gpu: str | None) -> None:
    labels = {"machine.cluster.vke.volcengine.com/gpu-name": value}
    got, _ = gpu_from_labels(labels)
    assert (got.gpu.name if got else None) == gpu
    if got is not None:  # a name that says its GB is one board: no second prospect for a pool with no node yet
        assert [p.gpu.gpu.name for p in prospects(None, labels, (), [])] == [gpu]


def test_a_bare_a100_class_is_either_card_unless_a_memory_label_says_which() -> None:
    # hunt183 F1: CoreWeave's gpu.nvidia.com/model / class carry bare names (llm-d's WVA notes: model=H200; Kueue
    # flavours model=A100) and its memory in gpu.nvidia.com/vram, whole GiB. A bare A100 was read as the 40 GB card
    # whatever the vram label said, and a 32B model that an 80 GB A100 holds was denied.
    got, _ = gpu_from_labels({"gpu.nvidia.com/model": "A100", "gpu.nvidia.com/vram": "80"})
    assert got is not None and got.gpu.name == "A100-80GB"
    got, _ = gpu_from_labels({"gpu.nvidia.com/class": "V100", "nvidia.com/gpu.memory": "16384"})
    assert got is not None and got.gpu.name == "V100-16GB"
    # no memory label: the smaller card, named by the bare name, and the larger as a second prospect
    labels = {"gpu.nvidia.com/model": "A100"}
    got, _ = gpu_from_labels(labels)
    assert got is not None and (got.product, got.gpu.name) == ("A100", "A100-40GB")
    assert [g.gpu.name for g in namesakes(got, labels)] == ["A100-40GB", "A100-80GB"]
    # CoreWeave's classic A100_NVLINK / Tesla_V100_NVLINK name the link, not the size: the same two cards
    got, _ = gpu_from_labels({"gpu.nvidia.com/class": "Tesla_V100_NVLINK"})
    assert got is not None and got.product == "V100" and got.gpu.name == "V100-16GB"
    # a sized name is one card, as before
    got, _ = gpu_from_labels({"gpu.nvidia.com/class": "A100_PCIE_80GB"})
    assert got is not None and got.gpu.name == "A100-80GB"
    # ACK's bare A100 with its memory label is the card of that size (it was Unknown)
    got, _ = gpu_from_labels({"aliyun.accelerator/nvidia_name": "A100", "aliyun.accelerator/nvidia_mem": "81920MiB"})
    assert got is not None and got.gpu.name == "A100-80GB"


@pytest.mark.parametrize(
    ("labels", "gpu", "count"),
    [
        # hunt183 F2: CoreWeave CKS instance types (kubernetes/autoscaler coreweave_instance_types.go) and its
        # node.coreweave.cloud/type twin; F3 DigitalOcean; F5 OCI shapes
        ({"node.kubernetes.io/instance-type": "gd-8xh100ib-i128"}, "H100-SXM", 8),
        ({"node.coreweave.cloud/type": "gd-8xh200ib-i128"}, "H200", 8),
        ({"node.kubernetes.io/instance-type": "rtxp6000-8x"}, "RTX-PRO-6000", 8),
        ({"node.kubernetes.io/instance-type": "gpu-mi300x8-1536gb"}, "MI300X", 8),
        ({"node.kubernetes.io/instance-type": "gpu-h100x1-80gb"}, "H100-SXM", 1),
        ({"node.kubernetes.io/instance-type": "BM.GPU.B4.8"}, "A100-40GB", 8),
        ({"node.kubernetes.io/instance-type": "BM.GPU.MI355X.8"}, "MI355X", 8),
        # F3 / F4: DOKS's and Nebius's GPU-name labels; their bare H100 is the 80 GB SXM card
        ({"doks.digitalocean.com/gpu-model": "h100"}, "H100-SXM", None),
        ({"doks.digitalocean.com/gpu-model": "mi300x"}, "MI300X", None),
        ({"nebius.com/gpu-name": "H200"}, "H200", None),
        ({"nebius.com/gpu-name": "H100"}, "H100-SXM", None),
    ],
)
def test_more_clouds_name_their_gpus(labels: dict[str, str], gpu: str, count: int | None) -> None:
    got, _ = gpu_from_labels(labels)
    assert got is not None and (got.gpu.name, got.count) == (gpu, count)
    # AKS's bare H100 stays unknown: the 80 GB ND or the 94 GB NC H100 v5
    assert gpu_from_labels({"karpenter.azure.com/sku-gpu-name": "H100"})[0] is None
