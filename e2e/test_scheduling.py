"""fitgate in a cluster that schedules: the real kube-controller-manager, kube-scheduler and kwok's fake nodes.

The cluster is ``scheduling_cluster`` (e2e/conftest.py, e2e/cluster.py): Deployments become ReplicaSets and
Pods, the scheduler binds the pods to kwok nodes (GPU Feature Discovery, GKE and EKS labels, ``nvidia.com/gpu``
allocatable), kwok marks the nodes Ready and the pods Running. The operator is the real process with the chart's
webhook entries (ModelDeployments and workloads, url mode), as in e2e/test_clusters.py.

* A ModelDeployment and a vLLM Deployment whose GPU no node has yet: admitted (never a DoesNotFit denial),
  then Fits once a node joins, and the pending pod is placed on it by the scheduler (scale from zero).
* A vLLM Deployment: its ReplicaSet and Pods are created by the controllers and admitted by the workload webhook
  without a verdict of their own (checked at the owner), the scheduler places them, the audit annotates the
  Deployment alone.
* Free GPUs: what status.pools says is free is what the scheduler left free, and a replica the scheduler cannot
  place (Pending) is one fitgate says cannot be placed either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import KWOK_NODE_ANNOTATION
from e2e.conftest import Kube
from e2e.operator_process import Operator, chart_webhooks, webhook_listening

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "workloads"
VWC = "fitgate-e2e-scheduling"
H100 = "NVIDIA-H100-80GB-HBM3"
#: GPU Feature Discovery labels of an 8 x H100 SXM node (k8s-device-plugin docs/gpu-feature-discovery/README.md).
GFD_H100 = {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8"}
#: GKE's labels of an a3-highgpu-8g node (8 x H100 80GB): https://cloud.google.com/kubernetes-engine/docs/how-to/gpus
GKE_H100 = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "node.kubernetes.io/instance-type": "a3-highgpu-8g"}
#: EKS: the instance type (p5.48xlarge: 8 x H100) and the GPU label of cluster-autoscaler's AWS provider
#: (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws, ``GPULabel``), which fitgate does not read.
EKS_H100 = {"node.kubernetes.io/instance-type": "p5.48xlarge", "k8s.amazonaws.com/accelerator": "nvidia-h100"}


def kwok_node(name: str, labels: dict[str, str], gpus: int) -> str:
    """A Node kwok manages (its annotation), with ``gpus`` nvidia.com/gpu and room for pods (``pods``: the
    scheduler places nothing on a node without it)."""
    key, value = KWOK_NODE_ANNOTATION
    resources = {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {key: value},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels},
            },
            "status": {"capacity": resources, "allocatable": resources},
        }
    )


def add_node(kube: Kube, name: str, labels: dict[str, str], gpus: int = 8) -> None:
    kube.kubectl("apply", "-f", "-", stdin=kwok_node(name, labels, gpus))
    kube.wait_for(lambda: ready(kube, name), timeout=30, what=f"kwok to report node {name} Ready")


def ready(kube: Kube, node: str) -> bool:
    conditions = kube.get("node", node).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def operator(scheduling_cluster: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    kube = scheduling_cluster
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    workdir = tmp_path_factory.mktemp("scheduling")
    env = {
        "FITGATE_WORKLOAD_WEBHOOK": "1",
        "FITGATE_WORKLOAD_AUDIT_SECONDS": "1",
        "FITGATE_WORKLOAD_ANNOTATE": "1",  # the verdict and schedulable annotations these tests read (opt-in)
    }
    op = Operator(kube, workdir, managed=None, extra_env=env)
    op.start()
    kube.wait_for(lambda: webhook_listening(op.webhook_port), timeout=60, what="the webhook server")
    vwc = chart_webhooks(kube, op, workdir)  # the chart's entries, in url mode at this operator
    vwc["metadata"] = {"name": VWC}  # every entry: ModelDeployments and the workloads (pods and ReplicaSets too)
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(vwc))
    try:
        yield op
    finally:
        op.stop()
        kube.kubectl("delete", "validatingwebhookconfiguration", VWC, "--ignore-not-found")


@pytest.fixture
def ns(scheduling_cluster: Kube) -> Iterator[str]:
    """A namespace in enforce mode; deleted afterwards (the namespace controller runs here: its pods go too)."""
    kube = scheduling_cluster
    name = f"sched-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    kube.kubectl("label", "namespace", name, "fitgate.io/validate=enforce")
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false")


def vllm_deployment(name: str, model: str, selector: dict[str, str], replicas: int, tp: int) -> dict[str, Any]:
    """vLLM's own docs Deployment (tests/fixtures/workloads/SOURCE.md): ``replicas`` pods of ``tp`` GPUs each,
    serving ``model`` with tensor parallelism ``tp`` on ``selector``'s nodes."""
    d = next(x for x in yaml.safe_load_all((FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()) if x)
    d["metadata"] = {"name": name, "labels": {"app": name}}
    d["spec"]["replicas"] = replicas
    d["spec"]["selector"]["matchLabels"] = {"app": name}
    template = d["spec"]["template"]
    template["metadata"]["labels"] = {"app": name}
    container = template["spec"]["containers"][0]
    container["args"] = [f"vllm serve {model} --max-model-len 8192 --tensor-parallel-size {tp}"]
    container["resources"] = {
        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(tp)},
        "limits": {"nvidia.com/gpu": str(tp)},
    }
    template["spec"]["nodeSelector"] = selector
    template["spec"]["terminationGracePeriodSeconds"] = 0
    return dict(d)


def model_deployment(name: str, model: str, *, tp: int = 1, replicas: int = 1, **placement: Any) -> dict[str, Any]:
    return {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {
            "model": {"name": model},
            "replicas": replicas,
            "serving": {"maxModelLen": 8192, "gpuMemoryUtilization": 0.9, "tensorParallelSize": tp},
            "placement": placement,
        },
    }


def apply(kube: Kube, namespace: str, obj: dict[str, Any]) -> Any:
    return kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(obj))


def pods(kube: Kube, namespace: str, app: str) -> list[dict[str, Any]]:
    return list(kube.get("pods", "-n", namespace, "-l", f"app={app}")["items"])


def mdep_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(kube.get("mdep", name, "-n", namespace).get("status") or {})


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in obj.get("conditions") or []}


def annotations_of(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, str]:
    return dict(kube.get(kind, name, "-n", namespace)["metadata"].get("annotations") or {})


def fitgate_events(kube: Kube, namespace: str) -> list[tuple[str, str, str]]:
    """(kind, name, reason) of every Event fitgate posted in ``namespace``."""
    items = kube.get("events", "-n", namespace)["items"]
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
        for e in items
        if (e.get("source") or {}).get("component") == "fitgate" or e.get("reportingComponent") == "fitgate"
    )


def verdict_of(
    kube: Kube, namespace: str, name: str, verdict: str | None = None, schedulable: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The ModelDeployment's status once it has a verdict (``verdict``, and the Schedulable condition, if given)."""

    def done() -> dict[str, Any] | None:
        st = mdep_status(kube, namespace, name)
        if not st.get("verdict") or (verdict is not None and st["verdict"] != verdict):
            return None
        if schedulable is not None and conditions(st).get("Schedulable") != schedulable:
            return None
        return st

    result: dict[str, Any] = kube.wait_for(done, timeout=45, what=f"{name}'s verdict {verdict or ''}")
    return result


def reviews_decided(op: Operator) -> float:
    """Admission reviews the operator sized and decided (``fitgate_admission_requests_total`` but ``unchanged``:
    an update that changes nothing to size, such as the audit's own annotation patch)."""
    total = 0.0
    for line in op.metrics().splitlines():
        if line.startswith("fitgate_admission_requests_total{") and 'result="unchanged"' not in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def free_gpus_by_scheduler(kube: Kube, nodes: list[str]) -> int:
    """GPUs of ``nodes`` that no bound, unfinished pod requests: what the scheduler has left to place."""
    free = 0
    all_pods = kube.get("pods", "-A")["items"]
    for node in nodes:
        free += int(kube.get("node", node)["status"]["allocatable"]["nvidia.com/gpu"])
        for pod in all_pods:
            if pod["spec"].get("nodeName") != node or pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            for c in pod["spec"]["containers"]:
                free -= int(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
    return free


def test_scale_from_zero_a_deployment_before_any_gpu_node_fits_once_one_joins_and_is_placed_on_it(
    scheduling_cluster: Kube, operator: Operator, ns: str
) -> None:
    kube = scheduling_cluster
    assert kube.get("nodes")["items"] == [], "this test needs a cluster with no node yet (it runs first)"
    gke = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    eks = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    # ModelDeployments on a GKE and on an EKS selector, and a vLLM Deployment on GKE's: no node at all yet
    for name, selector in (("gke-8b", gke), ("eks-8b", eks)):
        result = apply(kube, ns, model_deployment(name, "meta-llama/Llama-3.1-8B-Instruct", nodeSelector=selector))
        assert "denied" not in result.stderr, result.stderr
    result = apply(kube, ns, vllm_deployment("gke-vllm", "meta-llama/Llama-3.1-8B-Instruct", gke, 1, 1))
    assert "denied" not in result.stderr, result.stderr
    before: dict[str, str] = {}
    for name in ("gke-8b", "eks-8b"):
        st = verdict_of(kube, ns, name)
        assert st["verdict"] != "DoesNotFit", st  # no node yet is not a misfit
        before[name] = st["verdict"]
    kube.wait_for(
        lambda: annotations_of(kube, ns, "deployment", "gke-vllm").get("fitgate.io/schedulable") == "NoNodeYet",
        timeout=30,
        what="the Deployment annotated NoNodeYet",
    )
    (pending,) = pods(kube, ns, "gke-vllm")  # the controllers made its pod; nothing can place it
    assert "nodeName" not in pending["spec"]
    assert conditions(pending["status"]).get("PodScheduled", ("", ""))[0] in ("", "False")
    # the nodes join (an autoscaler's, as kwok nodes): each ModelDeployment goes to Fits on its own node
    add_node(kube, "kwok-gke-h100", GKE_H100)
    add_node(kube, "kwok-eks-h100", EKS_H100)
    for name in ("gke-8b", "eks-8b"):
        st = verdict_of(kube, ns, name, "Fits", schedulable=("True", "NodesMatch"))
        assert [p["nodes"] for p in st["pools"]] == [1], st["pools"]
    # the scheduler places the pending pod on the GKE node, and the NoNodeYet annotation goes
    placed = kube.wait_for(
        lambda: [p for p in pods(kube, ns, "gke-vllm") if p["spec"].get("nodeName")],
        timeout=60,
        what="the scheduler to place the pending pod",
    )
    assert [p["spec"]["nodeName"] for p in placed] == ["kwok-gke-h100"]
    kube.wait_for(
        lambda: "fitgate.io/schedulable" not in (a := annotations_of(kube, ns, "deployment", "gke-vllm")) and a,
        timeout=30,
        what="the NoNodeYet annotation removed",
    )
    assert annotations_of(kube, ns, "deployment", "gke-vllm")["fitgate.io/verdict"] == "Fits"
    kube.kubectl("delete", "deployment", "gke-vllm", "-n", ns, "--wait=true", "--timeout=60s")
    kube.wait_for(lambda: pods(kube, ns, "gke-vllm") == [], timeout=60, what="the garbage collector")
    kube.kubectl("delete", "node", "kwok-gke-h100", "kwok-eks-h100")


@pytest.fixture(scope="module")
def h100_nodes(scheduling_cluster: Kube) -> list[str]:
    """Two kwok nodes of 8 H100 each with GPU Feature Discovery labels (one pool of 2 nodes for fitgate)."""
    names = ["kwok-h100-a", "kwok-h100-b"]
    for name in names:
        add_node(scheduling_cluster, name, GFD_H100)
    return names


def test_a_deployment_becomes_a_replicaset_and_pods_placed_by_the_scheduler_and_the_owner_alone_is_audited(
    scheduling_cluster: Kube, operator: Operator, h100_nodes: list[str], ns: str
) -> None:
    kube = scheduling_cluster
    d = vllm_deployment("llama-70b", "meta-llama/Llama-3.1-70B-Instruct", {"nvidia.com/gpu.product": H100}, 2, 8)
    decided = reviews_decided(operator)
    apply(kube, ns, d)  # enforce: admitted, so it fits
    placed = kube.wait_for(
        lambda: (ps := pods(kube, ns, "llama-70b")) and all(p["status"].get("phase") == "Running" for p in ps) and ps,
        timeout=60,
        what="2 pods Running",
    )
    assert sorted(p["spec"]["nodeName"] for p in placed) == h100_nodes  # 8 GPUs each: one pod per node
    (rs,) = kube.get("replicasets", "-n", ns, "-l", "app=llama-70b")["items"]
    assert [(r["kind"], r["name"]) for r in rs["metadata"]["ownerReferences"]] == [("Deployment", "llama-70b")]
    for pod in placed:
        assert [(r["kind"], r["name"]) for r in pod["metadata"]["ownerReferences"]] == [
            ("ReplicaSet", rs["metadata"]["name"])
        ]
        assert "fitgate.io/verdict" not in (pod["metadata"].get("annotations") or {})  # checked at the owner
    kube.wait_for(
        lambda: annotations_of(kube, ns, "deployment", "llama-70b").get("fitgate.io/verdict") == "Fits",
        timeout=30,
        what="the audit's verdict on the Deployment",
    )
    kube.wait_for(
        lambda: ("Deployment", "llama-70b", "Fits") in fitgate_events(kube, ns),
        timeout=30,
        what="the audit's Event on the Deployment",
    )
    # none on the ReplicaSet or its Pods: the audit and the webhook leave controller-owned objects to their owner
    assert {kind for kind, _, _ in fitgate_events(kube, ns)} == {"Deployment"}
    # the chart's rules send the ReplicaSet's and the Pods' CREATEs to the webhook too, which admits them unread:
    # only the Deployment's review was sized and decided
    log = operator.log.read_text()
    for name in [rs["metadata"]["name"], *(p["metadata"]["name"] for p in placed)]:
        assert f"[{ns}/{name}] Webhook 'workloads-enforce' succeeded" in log, name
    assert reviews_decided(operator) - decided == 1
    kube.kubectl("delete", "deployment", "llama-70b", "-n", ns, "--wait=true", "--timeout=60s")
    kube.wait_for(lambda: pods(kube, ns, "llama-70b") == [], timeout=60, what="the garbage collector")


def test_free_gpus_are_what_the_scheduler_left_and_a_pending_replica_is_one_fitgate_cannot_place(
    scheduling_cluster: Kube, operator: Operator, h100_nodes: list[str], ns: str
) -> None:
    kube = scheduling_cluster
    assert free_gpus_by_scheduler(kube, h100_nodes) == 16  # 2 nodes x 8, nothing placed yet
    # 3 replicas of 8 GPUs on 2 nodes of 8; admitted: a workload's verdict is per replica (docs/workload-webhook.md)
    d = vllm_deployment("llama-70b", "meta-llama/Llama-3.1-70B-Instruct", {"nvidia.com/gpu.product": H100}, 3, 8)
    apply(kube, ns, d)

    def two_placed_one_pending() -> list[dict[str, Any]] | None:
        ps = pods(kube, ns, "llama-70b")
        bound = [p for p in ps if p["spec"].get("nodeName")]
        unschedulable = [p for p in ps if conditions(p["status"]).get("PodScheduled") == ("False", "Unschedulable")]
        return ps if len(ps) == 3 and len(bound) == 2 and len(unschedulable) == 1 else None

    placed = kube.wait_for(two_placed_one_pending, timeout=60, what="2 pods placed, the third Unschedulable")
    (pending,) = [p for p in placed if not p["spec"].get("nodeName")]
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in message, message
    # 16 - 2 pods x 8 GPUs = 0 left, by the API's own accounting of what the scheduler bound
    assert free_gpus_by_scheduler(kube, h100_nodes) == 0
    # fitgate on one more 8-GPU replica of the same model on the same pool: no free GPU there either
    apply(kube, ns, model_deployment("one-more", "meta-llama/Llama-3.1-70B-Instruct", tp=8, gpuProduct=H100))
    st = verdict_of(kube, ns, "one-more")
    (pool,) = st["pools"]
    assert (pool["gpuProduct"], pool["nodes"], pool["gpusPerNode"]) == (H100, 2, 8)
    assert pool["freeGpus"] == free_gpus_by_scheduler(kube, h100_nodes) == 0
    assert (st["verdict"], st["reason"]) == ("DoesNotFit", "Unschedulable"), st["message"]
    assert "only 0 of 1 replicas can be placed" in st["message"], st["message"]
    # the Deployment scaled to 1: the pending pod and one placed pod go, 8 GPUs are free and it fits
    kube.kubectl("scale", "deployment", "llama-70b", "-n", ns, "--replicas=1")
    kube.wait_for(
        lambda: len(pods(kube, ns, "llama-70b")) == 1 and free_gpus_by_scheduler(kube, h100_nodes) == 8,
        timeout=60,
        what="the Deployment scaled to 1 (8 GPUs freed)",
    )
    st = verdict_of(kube, ns, "one-more", "Fits")  # once 8 GPUs are free
    assert st["pools"][0]["freeGpus"] == free_gpus_by_scheduler(kube, h100_nodes) == 8
    kube.kubectl("delete", "deployment", "llama-70b", "-n", ns, "--wait=true", "--timeout=60s")
