"""Which pods serve each workload kind (fitgate.workloads.pods), on the real manifests of tests/fixtures/workloads."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.workloads import read_workload
from fitgate.workloads.pods import PodSelector, SelectorError, label_selector, metrics_port, pod_selector

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"


def fixture(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d))


def test_deployment_selects_by_its_match_labels() -> None:
    # the production-stack chart's engine Deployment: its nine matchLabels, sorted by key
    got = pod_selector(fixture("production-stack-deployment.yaml"))
    assert got == PodSelector(
        "app.kubernetes.io/component=serving-engine,app.kubernetes.io/instance=vllm,"
        "app.kubernetes.io/managed-by=helm,app.kubernetes.io/name=llama3,app.kubernetes.io/part-of=vllm-stack,"
        "environment=test,helm-release-name=vllm,model=llama3,release=test"
    )


@pytest.mark.parametrize("kind", ["StatefulSet", "ReplicaSet", "Job", "Rollout"])
def test_controllers_with_match_expressions(kind: str) -> None:
    obj = {
        "kind": kind,
        "metadata": {"name": "vllm"},
        "spec": {
            "selector": {
                "matchLabels": {"app": "vllm"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["serve", "canary"]},
                    {"key": "role", "operator": "NotIn", "values": ["prefill"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "debug", "operator": "DoesNotExist"},
                ],
            }
        },
    }
    assert pod_selector(obj).labels == "app=vllm,tier in (canary,serve),role notin (prefill),gpu,!debug"


def test_a_job_as_written_selects_by_the_job_name_label() -> None:
    job = {"kind": "Job", "metadata": {"name": "bench"}, "spec": {"template": {}}}
    assert pod_selector(job) == PodSelector("batch.kubernetes.io/job-name=bench")


def test_a_pod_is_its_own_pod() -> None:
    assert pod_selector({"kind": "Pod", "metadata": {"name": "vllm-0"}}) == PodSelector(pod="vllm-0")


def test_lws_selects_its_leaders() -> None:
    # vLLM's LWS example: the leader alone runs the API server (its Service selects the leaders too)
    got = pod_selector(fixture("lws-vllm-gpu.yaml"))
    assert got.labels == "leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/worker-index=0"


def test_kserve_inference_service_selects_its_predictor_pods() -> None:
    got = pod_selector(fixture("kserve-huggingface-llama3.yaml"))
    assert got.labels == "component=predictor,serving.kserve.io/inferenceservice=huggingface-llama3"


def test_llm_inference_service_selects_its_decode_workload_pods() -> None:
    got = pod_selector(fixture("llmisvc-qwen2-7b-gpu.yaml"))
    assert got.labels == (
        "app.kubernetes.io/name=qwen2-7b-instruct-single-no-scheduler,app.kubernetes.io/part-of=llminferenceservice,"
        "kserve.io/component=workload,llm-d.ai/role!=prefill"
    )


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}, "spec.selector is empty"),
        (
            {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {}}}},
            "it would select every pod of the namespace",
        ),
        (
            {
                "kind": "StatefulSet",
                "metadata": {"name": "s"},
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            },
            r"spec.selector.matchExpressions\[0\].operator 'Near' is not In, NotIn, Exists or DoesNotExist",
        ),
        (
            {
                "kind": "ReplicaSet",
                "metadata": {"name": "r"},
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}},
            },
            r"spec.selector.matchExpressions\[0\]: operator In needs values",
        ),
        ({"kind": "CronJob", "metadata": {"name": "c"}}, "kind 'CronJob' is not a workload fitgate observes"),
        ({"kind": "Deployment", "metadata": {}}, "Deployment has no metadata.name"),
    ],
)
def test_selectors_that_select_nothing_in_particular_are_refused_in_one_line(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError, match=message) as info:
        pod_selector(obj)
    assert "\n" not in str(info.value)


def test_an_oversized_selector_is_refused() -> None:
    labels = {f"k{i}": "v" * 60 for i in range(100)}  # 100 x ~64 chars > 4096
    with pytest.raises(SelectorError, match="at most 4096 are read"):
        label_selector({"matchLabels": labels})


def test_metrics_port_from_the_workloads_args() -> None:
    reading = read_workload(fixture("lws-vllm-gpu.yaml"))
    assert reading is not None and metrics_port(reading.args) == 8080  # --port 8080 in the leader's command
    reading = read_workload(fixture("production-stack-deployment.yaml"))
    assert reading is not None and metrics_port(reading.args) == 8000
    assert metrics_port({}) is None  # the pod's container ports decide (operator/observation/observe.py)
    assert metrics_port({"--port": "$(PORT)"}) is None and metrics_port({"--port": "70000"}) is None


@pytest.mark.parametrize(
    ("kind", "labels"),
    [
        # kaito-project/kaito api/v1beta1/labels.go L38: LabelWorkspaceName = "kaito.sh/workspace"
        ("Workspace", "kaito.sh/workspace=ws"),
        # production-stack vllmruntime_controller.go L392: labels {"app": <name>}
        ("VLLMRuntime", "app=ws"),
        # kubernetes-sigs/lws DisaggregatedSet: disaggregatedset.x-k8s.io/name and /role on its pods (decode serves)
        ("DisaggregatedSet", "disaggregatedset.x-k8s.io/name=ws,disaggregatedset.x-k8s.io/role=decode"),
    ],
)
def test_crd_kinds_select_the_pods_their_controllers_label(kind: str, labels: str) -> None:
    assert pod_selector({"kind": kind, "metadata": {"name": "ws"}}) == PodSelector(labels)


def test_a_kind_whose_pod_labels_fitgate_does_not_know_is_refused() -> None:
    with pytest.raises(SelectorError, match="DynamoGraphDeployment"):
        pod_selector({"kind": "DynamoGraphDeployment", "metadata": {"name": "g"}})
