"""A running workload's own pods hold GPUs that are free for it (found by e2e/test_scheduling.py).

Before, the workload audit counted a Deployment's own bound pods as holding its pool's GPUs: two 8-GPU
pods on two 8-GPU nodes made the Deployment that runs them "DoesNotFit (Unschedulable): only 0 of 1
replicas can be placed". The reading now carries the labels its pods carry (``spec.selector.matchLabels``,
a LeaderWorkerSet's set-name label), and the free-GPU check counts those pods' GPUs back as free for it,
as it does for a ModelDeployment's ``spec.observe.selector``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from fitgate.operator.decision.workloads import evaluate_reading
from fitgate.operator.gpus.gpuview import build_inventory
from fitgate.operator.gpus.inventory import Inventory, PodGpus, parse_node
from fitgate.sizing import ReasonCode, Verdict
from fitgate.workloads import Reading, read_workload
from fitgate.workloads.reader import LWS_NAME_LABEL, pod_selector
from tests.conftest import model

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def deployment(name: str, selector: dict[str, Any]) -> dict[str, Any]:
    """vLLM's docs Deployment serving Llama-3.1-70B with TP 8 on 8 GPUs, its selector ``selector``."""
    d = copy.deepcopy(next(x for x in yaml.safe_load_all((FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()) if x))
    d["metadata"] = {"name": name, "namespace": "ns"}
    d["spec"]["selector"] = selector
    d["spec"]["template"]["metadata"]["labels"] = dict(selector.get("matchLabels") or {"app": name})
    container = d["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [f"vllm serve {LLAMA_70B} --max-model-len 8192 --tensor-parallel-size 8"]
    container["resources"] = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    return dict(d)


def two_full_nodes(pod_labels: dict[str, str]) -> Inventory:
    """Two 8-GPU H100 nodes, each wholly held by one bound pod carrying ``pod_labels`` in namespace ns."""
    nodes = {
        name: parse_node(
            {"metadata": {"name": name, "labels": H100}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
        )
        for name in ("h-a", "h-b")
    }
    labels = tuple(sorted({**pod_labels, "pod-template-hash": "5647ffd484"}.items()))
    pods = {("ns", f"p-{n}"): PodGpus(n, (("nvidia.com/gpu", 8),), labels) for n in nodes}
    return build_inventory(nodes, {}, None, pods)


def read(obj: dict[str, Any]) -> Reading:
    reading = read_workload(obj)
    assert reading is not None
    return reading


def test_a_deployment_whose_own_pods_hold_every_gpu_of_its_pool_still_fits() -> None:
    reading = read(deployment("llama-70b", {"matchLabels": {"app": "llama-70b"}}))
    assert reading.pod_selector == {"app": "llama-70b"}
    verdict = evaluate_reading(reading, model(LLAMA_70B), two_full_nodes({"app": "llama-70b"}))
    assert verdict.evaluation.verdict is Verdict.FITS, verdict.message


def test_another_workloads_pods_holding_every_gpu_still_leave_no_room() -> None:
    reading = read(deployment("llama-70b", {"matchLabels": {"app": "llama-70b"}}))
    verdict = evaluate_reading(reading, model(LLAMA_70B), two_full_nodes({"app": "someone-else"}))
    assert (verdict.evaluation.verdict, verdict.evaluation.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.UNSCHEDULABLE)
    # 2 nodes x 8 GPUs, all 16 held by the other pods: 0 free, so 0 of the 1 replica of 8 GPUs is placed
    assert "only 0 of 1 replicas can be placed" in verdict.message, verdict.message


def test_the_selector_a_reading_carries_per_kind() -> None:
    assert pod_selector({"spec": {"selector": {"matchLabels": {"app": "x"}}}}, "StatefulSet") == {"app": "x"}
    assert pod_selector({"metadata": {"name": "lws-a"}}, "LeaderWorkerSet") == {LWS_NAME_LABEL: "lws-a"}
    assert pod_selector({"metadata": {"labels": {"app": "x"}}}, "Pod") == {}  # a bare Pod: no selector of its own
    assert pod_selector({"spec": {"selector": {"matchLabels": {"app": 3}}}}, "Deployment") == {}  # not a label
    only_expressions = {"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}}
    assert pod_selector(only_expressions, "Deployment") == {}


def test_two_deployments_of_the_same_template_but_selector_are_two_readings() -> None:
    a = read(deployment("a", {"matchLabels": {"app": "a"}}))
    b = read(deployment("b", {"matchLabels": {"app": "b"}}))
    assert a.fingerprint != b.fingerprint  # the spec each amounts to differs by its own pods' labels
    assert a.spec()["observe"] == {"selector": {"app": "a"}}
