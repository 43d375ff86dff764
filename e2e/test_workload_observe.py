"""Observed vs predicted for an audited vLLM Deployment, end to end: the real API server, the real
`fitgate operator` with the audit and FITGATE_WORKLOAD_OBSERVE on, and the Deployment's pod whose vLLM
/metrics is a loopback server speaking vLLM 0.33's exposition (tests/vllm_metrics_server.py).

As in e2e/test_observe.py, no pod runs here (no scheduler, no kubelet, no controller-manager): the
Deployment's pod is created by hand, owned by a ReplicaSet as the Deployment controller's pods are (so
the audit checks it at its owner, not itself), bound to a fake node, and its status written through the
status subresource (phase Running, podIP 127.0.0.1), as a kubelet would.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.vllm_metrics_server import VllmMetrics

from e2e.cluster import free_port
from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator
from e2e.test_operator import NODES, node_manifest

OBSERVED = "fitgate.io/observed"


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    for name, labels, allocatable in NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    env = {
        "FITGATE_WORKLOAD_AUDIT_SECONDS": "1",
        "FITGATE_WORKLOAD_ANNOTATE": "1",  # the verdict annotations these tests read (off by default, issue 22)
        "FITGATE_WORKLOAD_OBSERVE": "1",
        "FITGATE_SCRAPE_TIMEOUT_SECONDS": "2",
    }
    op = Operator(kube, tmp_path_factory.mktemp("workload-observe"), extra_env=env)
    op.start()
    try:
        yield op
    finally:
        op.stop()


def deployment(port: int) -> dict[str, Any]:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--port", str(port)],
        "ports": [{"name": "http", "containerPort": port}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama"},
        "spec": {
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "containers": [container],
                },
            },
        },
    }


def serving_pod(kube: Kube, namespace: str, template: dict[str, Any]) -> None:
    """The Deployment's pod as its ReplicaSet would create it, Running at 127.0.0.1."""
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "llama-5d8f7c9b4",
        "uid": str(uuid.uuid4()),
        "controller": True,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-5d8f7c9b4-x2x9q",
            "labels": template["metadata"]["labels"],
            "ownerReferences": [owner],
        },
        "spec": {**template["spec"], "nodeName": "e2e-h100"},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    running = {"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}}
    kube.kubectl(
        "patch",
        "pod",
        pod["metadata"]["name"],
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(running),
    )


def observed(kube: Kube, namespace: str) -> dict[str, Any]:
    meta = kube.get("deployment", "llama", "-n", namespace)["metadata"]
    return dict(json.loads((meta.get("annotations") or {}).get(OBSERVED) or "{}"))


def scrapes_ok(operator: Operator) -> float:
    for line in operator.metrics().splitlines():
        if line.startswith('fitgate_observe_scrapes_total{result="ok"}'):
            return float(line.split()[-1])
    return 0.0


def drift_events(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    events = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=llama")["items"]
    return [e for e in events if e["reason"] == "PredictionDrift"]


def test_an_audited_deployment_is_observed_annotated_and_drift_posted_once(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    kube.kubectl("label", "namespace", namespace, "fitgate.io/validate=enforce")
    port = free_port()
    obj = deployment(port)
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(obj))
    serving_pod(kube, namespace, obj["spec"]["template"])
    labels = f'{{kind="Deployment",name="llama",namespace="{namespace}"}}'
    # 1. vLLM allocated 1000 blocks: far off any prediction of an 8B model on an H100
    with VllmMetrics(num_gpu_blocks=1000, port=port):
        got = kube.wait_for(
            lambda: (o := observed(kube, namespace)).get("pods") == 1 and o, timeout=60, what="fitgate.io/observed"
        )
        predicted = got["predictedBlocks"]
        assert predicted > 10_000
        assert got["observedBlocks"] == 1000
        assert got["blocksErrorRatio"] == round((1000 - predicted) / predicted, 4)
        assert got["atCapacity"] is False and got["podsFailed"] == 0
        (event,) = kube.wait_for(lambda: drift_events(kube, namespace), timeout=30, what="the PredictionDrift Event")
        assert event["type"] == "Warning" and event["source"]["component"] == "fitgate"
        assert event["message"].startswith(f"vLLM allocated 1000 KV blocks, fitgate predicted {predicted} (")
        text = kube.wait_for(
            lambda: f"fitgate_workload_observed_kv_blocks{labels} 1000.0" in (t := operator.metrics()) and t,
            timeout=15,
            what="the workload series",
        )
        assert f"fitgate_workload_at_capacity{labels} 0.0" in text
        assert f"fitgate_workload_prediction_error_ratio{labels} -0.9" in text  # -0.9x: 1000 of > 10000
        # a few more audit passes (1 s apart): still drifted, no second Event
        kube.wait_for(lambda: "tokensPerSecond" in observed(kube, namespace), timeout=30, what="rates over two passes")
        assert len(drift_events(kube, namespace)) == 1
    # 2. the pod restarts and allocates what fitgate predicted, its KV cache full
    with VllmMetrics(num_gpu_blocks=predicted, port=port) as server:
        server.set(kv_usage=0.97, running=12, waiting=3)
        got = kube.wait_for(
            lambda: (o := observed(kube, namespace)).get("observedBlocks") == predicted and o.get("atCapacity") and o,
            timeout=60,
            what="the observation within tolerance",
        )
        assert got["blocksErrorRatio"] == 0.0 and got["peakKvUsage"] == 0.97
        kube.wait_for(
            lambda: f"fitgate_workload_at_capacity{labels} 1.0" in operator.metrics(), timeout=15, what="at capacity"
        )
        assert len(drift_events(kube, namespace)) == 1
        # traffic moves only the rates: not written for 5 minutes (every annotation change bumps a
        # Deployment's generation: the API server's Deployment strategy), however many passes run
        generation = kube.get("deployment", "llama", "-n", namespace)["metadata"]["generation"]
        start = scrapes_ok(operator)
        for tokens in (5000, 7000, 9000):
            server.set(prompt_tokens=tokens, generation_tokens=tokens // 4, requests=10)
            kube.wait_for(lambda n=start: scrapes_ok(operator) >= n + 2, timeout=15, what="two more passes")
            start = scrapes_ok(operator)
        live = kube.get("deployment", "llama", "-n", namespace)
        assert live["metadata"]["generation"] == generation
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == obj["spec"]["template"]["spec"]["containers"][0]["args"]  # annotations only
    assert live["metadata"]["annotations"]["fitgate.io/verdict"] == "Fits"
    pod = kube.get("pod", "llama-5d8f7c9b4-x2x9q", "-n", namespace)
    assert OBSERVED not in (pod["metadata"].get("annotations") or {})  # checked at its owner, not itself
    # 3. the Deployment goes: its series go
    kube.kubectl("delete", "deployment", "llama", "-n", namespace)
    kube.wait_for(
        lambda: "fitgate_workload_observed_kv_blocks{" + labels[1:] not in operator.metrics(),
        timeout=15,
        what="the series removed",
    )
