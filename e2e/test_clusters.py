"""The gate in real clusters (docs/clusters.md), on the real API server with the real operator.

* Fit is not availability: a deployment whose GPU no node has yet is admitted with a NoNodeYet warning and
  gets its verdict again when a node joins; a true misfit on that GPU is still denied.
* A Karpenter NodePool (its published CRD, trimmed: e2e/crds/SOURCE.md) names the GPU of nodes to come.
* Nodes labelled the way GKE and EKS/Karpenter label them, without GPU Feature Discovery, are sized right.

Every node and NodePool this module adds is removed at its end (the control plane is shared by the session).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, chart_webhooks, webhook_listening
from e2e.test_operator import node_manifest

REPO = Path(__file__).resolve().parents[1]
CRDS = Path(__file__).parent / "crds"
FIXTURES = REPO / "tests" / "fixtures" / "workloads"
VWC = "fitgate-e2e-clusters-workloads"
NODES = ("e2e-clu-l40s", "e2e-clu-gke-l4", "e2e-clu-eks-l40s", "e2e-clu-gke-h100")
NODEPOOL = "e2e-clu-h200"


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    # Karpenter's CRD before the operator starts: its NodePool watch lists them from the start
    kube.kubectl("apply", "--server-side", "-f", str(CRDS / "karpenter.sh_nodepools.yaml"))
    for crd in ("modeldeployments.fitgate.io", "nodepools.karpenter.sh"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    workdir = tmp_path_factory.mktemp("clusters")
    env = {
        "FITGATE_WORKLOAD_WEBHOOK": "1",
        "FITGATE_WORKLOAD_AUDIT_SECONDS": "1",
        "FITGATE_WORKLOAD_ANNOTATE": "1",  # the fitgate.io/schedulable annotation these tests read (opt-in, issue 22)
    }
    op = Operator(kube, workdir, managed=None, extra_env=env)  # the chart's entries: kopf's would repeat names
    op.start()
    kube.wait_for(lambda: webhook_listening(op.webhook_port), timeout=60, what="the webhook server")
    vwc = chart_webhooks(kube, op, workdir)  # the chart's entries, in url mode at this operator
    vwc["metadata"] = {"name": VWC}  # every entry: ModelDeployments and the workloads
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(vwc))
    try:
        yield op
    finally:
        op.stop()
        kube.kubectl("delete", "validatingwebhookconfiguration", VWC, "--ignore-not-found")
        kube.kubectl("delete", "node", *NODES, "--ignore-not-found")
        kube.kubectl("delete", "nodepools.karpenter.sh", NODEPOOL, "--ignore-not-found")


def apply(kube: Kube, namespace: str, obj: dict[str, Any], check: bool = True) -> Any:
    return kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(obj), check=check)


def add_node(kube: Kube, name: str, labels: dict[str, str], allocatable: dict[str, str]) -> None:
    kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))


def deployment(name: str, model: str, selector: dict[str, str], **pod: Any) -> dict[str, Any]:
    """vLLM's own docs Deployment (tests/fixtures/workloads/SOURCE.md) serving ``model`` on ``selector``'s nodes."""
    d = next(x for x in yaml.safe_load_all((FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()) if x)
    d["metadata"] = {"name": name, "labels": {"app": name}}
    d["spec"]["selector"]["matchLabels"] = {"app": name}
    template = d["spec"]["template"]
    template["metadata"]["labels"] = {"app": name}
    template["spec"]["containers"][0]["args"] = [f"vllm serve {model} --max-model-len 8192"]
    template["spec"]["nodeSelector"] = selector
    template["spec"].update(pod)
    return dict(d)


def annotations(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    return dict(kube.get("deployment", name, "-n", namespace)["metadata"].get("annotations") or {})


def mdep_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(kube.get("mdep", name, "-n", namespace).get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}


def test_the_readme_example_is_admitted_with_no_l40s_node_and_planned_again_when_one_joins(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    # no L40S node anywhere in the e2e session: before this change, NoMatchingGPUPool denied the README's example
    result = kube.kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "fits-gpt-oss-l40s.yaml"))
    assert "fitgate: no node with NVIDIA-L40S (placement) yet (reason NoNodeYet)" in result.stderr, result.stderr
    st = kube.wait_for(
        lambda: (s := mdep_status(kube, namespace, "gpt-oss-20b")).get("verdict") == "Fits" and s,
        timeout=45,
        what="the example's status",
    )
    assert conditions(st)["Schedulable"] == ("False", "NoNodeYet")
    assert st["pools"][0]["nodes"] == 0 and st["pools"][0]["source"] == "placement"
    add_node(kube, "e2e-clu-l40s", {"nvidia.com/gpu.product": "NVIDIA-L40S"}, {"nvidia.com/gpu": "1"})
    st = kube.wait_for(
        lambda: (
            conditions(s := mdep_status(kube, namespace, "gpt-oss-20b")).get("Schedulable") == ("True", "NodesMatch")
            and s
        ),
        timeout=30,
        what="Schedulable once the L40S node joined",
    )
    assert st["verdict"] == "Fits" and st["pools"][0]["nodes"] == 1 and st["pools"][0]["source"] == "labels"


def test_a_deployment_on_a_gke_gpu_no_node_has_is_admitted_then_gets_its_verdict_when_one_joins(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    kube.kubectl("label", "namespace", namespace, "fitgate.io/validate=enforce")
    on_l4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    result = apply(kube, namespace, deployment("mistral", "mistralai/Mistral-7B-Instruct-v0.3", on_l4))
    assert "Warning: fitgate: no node with L4 (placement) yet (reason NoNodeYet)" in result.stderr, result.stderr
    got = kube.wait_for(
        lambda: (a := annotations(kube, namespace, "mistral")).get("fitgate.io/schedulable") == "NoNodeYet" and a,
        timeout=30,
        what="the audit's NoNodeYet",
    )
    assert got["fitgate.io/verdict"] == "Fits"
    # a true misfit on that GPU is still denied, node or not: 70B in bf16 on one 24 GB L4
    misfit = apply(kube, namespace, deployment("llama70", "meta-llama/Llama-3.1-70B-Instruct", on_l4), check=False)
    assert misfit.returncode != 0 and "denied the request" in misfit.stderr, misfit.stderr
    # the docs image is :latest, sized as vLLM 0.34.0: 131.45 GiB of bf16 weights per GPU against the whole
    # 22.06 GiB card (gmu 1.0 with the extensible KV cache)
    assert "L4: weights 131.45 GiB" in misfit.stderr and "in 22.06 GiB per GPU" in misfit.stderr
    # GKE labels a g2 node with its accelerator; no GPU Feature Discovery label on it
    add_node(
        kube,
        "e2e-clu-gke-l4",
        {**on_l4, "node.kubernetes.io/instance-type": "g2-standard-8"},
        {"nvidia.com/gpu": "1"},
    )
    kube.wait_for(
        lambda: "fitgate.io/schedulable" not in (a := annotations(kube, namespace, "mistral")) and a,
        timeout=30,
        what="the audit to see the L4 node",
    )
    assert annotations(kube, namespace, "mistral")["fitgate.io/verdict"] == "Fits"


def test_a_karpenter_nodepool_names_the_gpu_of_nodes_to_come(kube: Kube, operator: Operator, namespace: str) -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": NODEPOOL},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h200"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                    # a team's dedicated pool (a GPU taint, nvidia.com/gpu, every GPU pod tolerates: the
                    # ExtendedResourceToleration admission plugin gives it the toleration)
                    "taints": [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}],
                }
            }
        },
    }
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pool))
    kube.kubectl("label", "namespace", namespace, "fitgate.io/validate=enforce")
    selector = {"karpenter.sh/nodepool": NODEPOOL}
    tolerate = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "source": "catalog"},
        "serving": {"maxModelLen": 8192, "tensorParallelSize": 2},
        "placement": {"nodeSelector": selector, "tolerations": tolerate},
    }
    # the operator's NodePool watch sees it within a moment: wait for the planned H200
    mdep = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "on-h200"}}

    def planned() -> Any:
        result = apply(kube, namespace, {**mdep, "spec": spec}, check=False)
        return result.returncode == 0 and "H200 (NodePool/e2e-clu-h200)" in result.stderr and result

    kube.wait_for(planned, timeout=30, what="the NodePool's H200 in the admission warning")
    st = kube.wait_for(
        lambda: (s := mdep_status(kube, namespace, "on-h200")).get("verdict") == "Fits" and s,
        timeout=30,
        what="the deployment planned on the NodePool's H200",
    )
    # 70B bf16 at TP 2: ~65.7 GiB of weights per H200 (139.81 GiB x 0.9 = 125.8 GiB budget)
    assert (st["gpuProduct"], st["tensorParallelSize"]) == ("H200", 2)
    assert st["pools"][0]["source"] == f"NodePool/{NODEPOOL}" and st["pools"][0]["gpuProduct"] == "H200"
    # the 405B base model in bf16 (~378 GiB per GPU at TP 2) on H200s: a misfit known before any node exists
    big = {**spec, "model": {"name": "meta-llama/Llama-3.1-405B", "source": "catalog"}}
    denied = apply(kube, namespace, {**mdep, "metadata": {"name": "too-big"}, "spec": big}, check=False)
    assert denied.returncode != 0 and "does not fit" in denied.stderr, denied.stderr
    # a pod that does not tolerate the NodePool's taint gets nothing from it: Unknown, admitted (never denied)
    intolerant = {**spec, "placement": {"nodeSelector": selector}}
    unknown = apply(kube, namespace, {**mdep, "metadata": {"name": "intolerant"}, "spec": intolerant})
    assert "verdict Unknown" in unknown.stderr, unknown.stderr


def test_gke_and_eks_labelled_node_pools_are_sized_right(kube: Kube, operator: Operator, namespace: str) -> None:
    add_node(
        kube,
        "e2e-clu-eks-l40s",
        {
            "karpenter.k8s.aws/instance-gpu-name": "l40s",
            "karpenter.k8s.aws/instance-gpu-count": "4",
            "karpenter.k8s.aws/instance-gpu-memory": "45776",
            "node.kubernetes.io/instance-type": "g6e.12xlarge",
        },
        {"nvidia.com/gpu": "4"},
    )
    add_node(
        kube,
        "e2e-clu-gke-h100",
        {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "node.kubernetes.io/instance-type": "a3-highgpu-8g"},
        {"nvidia.com/gpu": "8"},
    )
    for name, selector, product, per_node in (
        ("on-eks", {"karpenter.k8s.aws/instance-gpu-name": "l40s"}, "L40S", 4),
        ("on-gke", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, "H100-SXM", 8),
    ):
        spec = {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {"nodeSelector": selector},
        }
        mdep = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": name}}
        result = apply(kube, namespace, {**mdep, "spec": spec})
        assert "NoNodeYet" not in result.stderr, result.stderr
        st = kube.wait_for(
            lambda n=name: (s := mdep_status(kube, namespace, n)).get("verdict") == "Fits" and s,
            timeout=30,
            what=f"{name} planned",
        )
        pool = st["pools"][0]
        assert (pool["gpuProduct"], pool["gpusPerNode"], pool["nodes"], pool["source"]) == (
            product,
            per_node,
            1,
            "labels",
        )
        assert "Schedulable" not in conditions(st)  # it always had a node
