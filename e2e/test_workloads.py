"""vLLM workloads end to end: the real API server, the chart's workload webhook entries, the real operator.

The webhook configuration is the chart's own (``helm template`` in url mode pointing at the operator on
127.0.0.1); the LeaderWorkerSet and KServe CRDs are the published ones (e2e/crds/SOURCE.md). The
workloads are the real manifests of tests/fixtures/workloads (SOURCE.md there): the vLLM production-stack
chart's Deployment (rendered with helm, tests/fixtures/workloads/SOURCE.md), vLLM's LWS example,
KServe's huggingface-runtime example, plus a Pod and a StatefulSet.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, chart_webhooks, webhook_listening
from e2e.test_operator import NODES, node_manifest

REPO = Path(__file__).resolve().parents[1]
CRDS = Path(__file__).parent / "crds"
FIXTURES = REPO / "tests" / "fixtures" / "workloads"
VWC = "fitgate-e2e-workloads"

SECOND_H100 = ("e2e-h100-b", NODES[0][1], NODES[0][2])  # an LWS group of 2 pods needs 2 nodes


def fixture(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d))


def chart_deployment(product: str) -> dict[str, Any]:
    """The production-stack engine Deployment, its required node affinity on ``product``."""
    d = fixture("production-stack-deployment.yaml")
    d["metadata"].pop("namespace", None)
    affinity = d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"][0]["values"] = [product]
    return d


def lws(size: int) -> dict[str, Any]:
    """vLLM's LWS example, serving the 405B base model of the built-in catalog (the example: -Instruct)."""
    obj = fixture("lws-vllm-gpu.yaml")
    text = json.dumps(obj).replace("Llama-3.1-405B-Instruct", "Llama-3.1-405B")
    obj = json.loads(text)
    obj["spec"]["leaderWorkerTemplate"]["size"] = size
    return obj


def apply(kube: Kube, namespace: str, obj: dict[str, Any], check: bool = True) -> Any:
    return kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(obj), check=check)


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    lws_crd = gzip.decompress((CRDS / "leaderworkerset.x-k8s.io_leaderworkersets.yaml.gz").read_bytes()).decode()
    kube.kubectl("create", "-f", "-", stdin=lws_crd, check=False)  # too big for client-side apply
    kube.kubectl("apply", "-f", str(CRDS / "serving.kserve.io_inferenceservices.yaml"))
    kube.kubectl("apply", "-f", str(CRDS / "production-stack.vllm.ai_vllmruntimes.yaml"))
    for crd in (
        "leaderworkersets.leaderworkerset.x-k8s.io",
        "inferenceservices.serving.kserve.io",
        "vllmruntimes.production-stack.vllm.ai",
    ):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    for name, labels, allocatable in [*NODES, SECOND_H100]:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    workdir = tmp_path_factory.mktemp("workloads")
    env = {
        "FITGATE_WORKLOAD_WEBHOOK": "1",
        "FITGATE_WORKLOAD_AUDIT_SECONDS": "1",
        "FITGATE_WORKLOAD_ANNOTATE": "1",  # the verdict annotations these tests read (off by default, issue 22)
        "FITGATE_WORKLOAD_AUDIT_OBJECTS": "1",
        "FITGATE_WORKLOAD_CONFIGMAPS": "1",
    }
    op = Operator(kube, workdir, managed=None, extra_env=env)
    op.start()
    kube.wait_for(lambda: webhook_listening(op.webhook_port), timeout=60, what="the webhook server")
    vwc = chart_webhooks(
        kube, op, workdir, "workloadWebhook.objectOptIn=true"
    )  # the chart's entries, in url mode at this operator
    vwc["metadata"] = {"name": VWC}
    vwc["webhooks"] = [w for w in vwc["webhooks"] if w["name"].startswith("workloads-")]
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(vwc))
    try:
        yield op
    finally:
        op.stop()
        kube.kubectl("delete", "validatingwebhookconfiguration", VWC, "--ignore-not-found")


def labelled(kube: Kube, namespace: str, mode: str) -> str:
    kube.kubectl("label", "namespace", namespace, f"fitgate.io/validate={mode}")
    return namespace


def annotations(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, str]:
    return dict(kube.get(kind, name, "-n", namespace)["metadata"].get("annotations") or {})


def events(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return list(kube.get("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"])


def reasons(kube: Kube, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in events(kube, namespace, name)]


def wait_annotated(kube: Kube, namespace: str, kind: str, name: str, verdict: str) -> dict[str, str]:
    return kube.wait_for(
        lambda: (a := annotations(kube, namespace, kind, name)).get("fitgate.io/verdict") == verdict and a,
        timeout=30,
        what=f"{kind} {name} annotated {verdict}",
    )


def test_enforce_denies_the_production_stack_deployment_on_l4_with_numbers_and_fix(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    result = apply(kube, ns, chart_deployment("NVIDIA-L4"), check=False)
    assert result.returncode != 0
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in result.stderr, result.stderr
    assert "smallest fix: change `--kv-cache-dtype auto` to `--kv-cache-dtype fp8`" in result.stderr
    assert kube.kubectl("get", "deployment", "-n", ns, "-o", "name").stdout.strip() == ""


def test_enforce_admits_a_fit_and_the_audit_annotates_it_and_posts_an_event(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    fits = chart_deployment("NVIDIA-H100-80GB-HBM3")
    result = apply(kube, ns, fits)
    assert "Warning" not in result.stderr, result.stderr
    name = fits["metadata"]["name"]
    got = wait_annotated(kube, ns, "deployment", name, "Fits")
    assert "--max-model-len" in got["fitgate.io/recommended-args"]
    spec = kube.get("deployment", name, "-n", ns)["spec"]["template"]["spec"]["containers"][0]
    assert spec["command"] == fits["spec"]["template"]["spec"]["containers"][0]["command"]  # never mutated
    kube.wait_for(lambda: reasons(kube, ns, name), timeout=15, what="the audit's Event")  # posted after the write
    assert [(e["reason"], e["source"]["component"]) for e in events(kube, ns, name)] == [("Fits", "fitgate")]
    metric = f'fitgate_workload_verdict{{kind="Deployment",name="{name}",namespace="{ns}",verdict="Fits"}} 1.0'
    kube.wait_for(lambda: metric in operator.metrics(), timeout=15, what="the workload metric")
    # a replicas-only change is admitted without sizing again
    kube.kubectl("scale", "deployment", name, "-n", ns, "--replicas=3")
    assert 'fitgate_admission_requests_total{result="unchanged"}' in operator.metrics()


def test_lws_example_fits_on_two_nodes_and_a_group_of_one_is_denied(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    apply(kube, ns, lws(2))
    wait_annotated(kube, ns, "leaderworkerset", "vllm", "Fits")
    short = lws(1)
    short["metadata"]["name"] = "vllm-short"
    result = apply(kube, ns, short, check=False)
    assert result.returncode != 0
    assert "vLLM needs 16 GPUs (TP 8 x PP 2) but container vllm-leader asks for 8 nvidia.com/gpu" in result.stderr


def test_kserve_inference_service_misfit_is_denied(kube: Kube, operator: Operator, namespace: str) -> None:
    ns = labelled(kube, namespace, "enforce")
    isvc = fixture("kserve-huggingface-llama3.yaml")
    model = isvc["spec"]["predictor"]["model"]
    model["args"] = ["--model_name=llama3", "--model_id=meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=131072"]
    isvc["spec"]["predictor"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    result = apply(kube, ns, isvc, check=False)
    assert result.returncode != 0 and "InferenceService" in result.stderr and "131072-token request" in result.stderr
    model["args"][-1] = "--max-model-len=8192"
    apply(kube, ns, isvc)
    wait_annotated(kube, ns, "inferenceservice", "huggingface-llama3", "Fits")


def test_a_pod_with_too_few_gpus_is_denied_and_a_statefulset_that_fits_admitted(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "-tp", "2"],
    }
    one = {**container, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm"}, "spec": {"containers": [one]}}
    result = apply(kube, ns, pod, check=False)
    assert result.returncode != 0 and "set nvidia.com/gpu: 2" in result.stderr, result.stderr
    # no GPU resource at all: the node's default runtime may expose its GPUs (hunt27 F2), so Unknown, admitted with
    # a warning under the default policy, never denied as "no GPU"
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": {"containers": [container]}}
    result = apply(kube, ns, bare, check=False)
    assert result.returncode == 0 and "asks for no nvidia.com/gpu" in result.stderr, result.stderr
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "vllm"},
        "spec": {
            "serviceName": "vllm",
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {
                "metadata": {"labels": {"app": "vllm"}},
                "spec": {"containers": [{**container, "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            },
        },
    }
    apply(kube, ns, sts)
    wait_annotated(kube, ns, "statefulset", "vllm", "Fits")


def test_warn_namespace_admits_a_misfit_with_a_warning(kube: Kube, operator: Operator, namespace: str) -> None:
    ns = labelled(kube, namespace, "warn")
    result = apply(kube, ns, chart_deployment("NVIDIA-L4"))
    assert "Warning: fitgate: Deployment" in result.stderr and "smallest fix" in result.stderr, result.stderr
    wait_annotated(kube, ns, "deployment", "vllm-llama3-deployment-vllm", "DoesNotFit")


def test_a_non_vllm_gpu_deployment_is_untouched(kube: Kube, operator: Operator, namespace: str) -> None:
    ns = labelled(kube, namespace, "enforce")
    train = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "selector": {"matchLabels": {"app": "train"}},
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {
                    "containers": [
                        {
                            "name": "train",
                            "image": "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
                            "command": ["torchrun", "train.py"],
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ]
                },
            },
        },
    }
    result = apply(kube, ns, train)
    assert "Warning" not in result.stderr
    apply(kube, ns, chart_deployment("NVIDIA-H100-80GB-HBM3"))  # audited in the same pass
    wait_annotated(kube, ns, "deployment", "vllm-llama3-deployment-vllm", "Fits")
    assert not any(k.startswith("fitgate.io/") for k in annotations(kube, ns, "deployment", "train"))


def test_an_annotated_object_in_an_unlabelled_namespace_is_checked_and_audited(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = namespace  # no fitgate.io/validate label
    plain = chart_deployment("NVIDIA-L4")
    result = apply(kube, ns, plain)  # not opted in: admitted, never annotated
    assert "Warning" not in result.stderr, result.stderr
    enforced = chart_deployment("NVIDIA-L4")
    enforced["metadata"]["name"] = "enforced"
    enforced["metadata"]["annotations"] = {"fitgate.io/validate": "enforce"}
    result = apply(kube, ns, enforced, check=False)
    assert result.returncode != 0 and "one 131072-token request needs 16.00 GiB" in result.stderr, result.stderr
    warned = chart_deployment("NVIDIA-L4")
    warned["metadata"]["name"] = "warned"
    warned["metadata"]["annotations"] = {"fitgate.io/validate": "warn"}
    result = apply(kube, ns, warned)
    assert "Warning: fitgate: Deployment" in result.stderr, result.stderr
    wait_annotated(kube, ns, "deployment", "warned", "DoesNotFit")  # the audit found it by its annotation
    kube.wait_for(lambda: reasons(kube, ns, "warned"), timeout=15, what="the audit's Event")  # after the write
    assert reasons(kube, ns, "warned") == ["DoesNotFit"]
    assert not any(k.startswith("fitgate.io/") for k in annotations(kube, ns, "deployment", plain["metadata"]["name"]))
    # a namespace labelled off: an object may still opt in by its annotation
    kube.kubectl("label", "namespace", ns, "fitgate.io/validate=off")
    enforced["metadata"]["name"] = "enforced-off"
    assert apply(kube, ns, enforced, check=False).returncode != 0


def config_deployment(name: str) -> dict[str, Any]:
    """A Deployment whose engine settings come from ``--config`` in the ConfigMap ``vllm-config`` (vLLM's own
    `vllm serve --config config.yaml`, docs/configuration/serve_args.md)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.19.0",
                            "args": ["--config", "/etc/vllm/config.yaml"],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                    "volumes": [{"name": "cfg", "configMap": {"name": "vllm-config"}}],
                },
            },
        },
    }


def test_a_config_file_is_read_from_its_configmap_in_the_cluster(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    result = apply(kube, ns, config_deployment("early"))  # no ConfigMap yet: Unknown, admitted (policy Warn)
    assert "ConfigMap vllm-config (key config.yaml) in " + ns + ": not found" in result.stderr, result.stderr
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vllm-config"}}
    config["data"] = {"config.yaml": "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\n"}
    apply(kube, ns, config)
    result = apply(kube, ns, config_deployment("late"), check=False)
    assert result.returncode != 0, result.stderr
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in result.stderr, result.stderr
    wait_annotated(kube, ns, "deployment", "early", "DoesNotFit")  # the audit reads it too


def test_env_values_are_read_from_configmaps_in_the_cluster(kube: Kube, operator: Operator, namespace: str) -> None:
    # the model from an envFrom ConfigMap, the length from another's key: the webhook gets both from the API server
    ns = labelled(kube, namespace, "enforce")
    doc = config_deployment("env")
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "$(MODEL)", "--max-model-len", "$(LEN)"]
    container["envFrom"] = [{"configMapRef": {"name": "models"}}]
    container["env"] = [{"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "lengths", "key": "long"}}}]
    del container["volumeMounts"], doc["spec"]["template"]["spec"]["volumes"]
    models = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "models"}}
    apply(kube, ns, {**models, "data": {"MODEL": "meta-llama/Llama-3.1-8B-Instruct"}})
    result = apply(kube, ns, doc)  # "lengths" is not there yet: Unknown, admitted with a warning naming it
    assert "ConfigMap lengths (key long) in " + ns + ": not found" in result.stderr, result.stderr
    lengths = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lengths"}}
    apply(kube, ns, {**lengths, "data": {"long": "131072"}})
    doc["metadata"]["name"] = "env-late"
    result = apply(kube, ns, doc, check=False)
    assert result.returncode != 0, result.stderr
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in result.stderr, result.stderr


def test_webhook_down_applies_still_succeed(kube: Kube, operator: Operator, namespace: str) -> None:
    ns = labelled(kube, namespace, "enforce")
    operator.stop()
    try:
        apply(kube, ns, chart_deployment("NVIDIA-L4"))  # failurePolicy Ignore: a misfit goes through
    finally:
        operator.start()


def test_a_deployment_getting_its_gpus_from_a_dra_claim_template(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    """The pod template's resourceClaims name a ResourceClaimTemplate: its devices are the pool (issue 15)."""
    driver = REPO / "tests" / "fixtures" / "dra" / "nvidia-dra-driver.yaml"  # the NVIDIA DRA driver's shape, cited
    objects = list(yaml.safe_load_all(driver.read_text()))
    for obj in objects:
        kube.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    try:
        _dra_claim_deployments(kube, namespace)
    finally:  # the control plane is shared: leave no devices in the H100 and A100 pools of other tests
        for obj in objects:
            kube.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", "--wait=false")


def _dra_claim_deployments(kube: Kube, namespace: str) -> None:
    ns = labelled(kube, namespace, "enforce")
    for name, device_class in (("mig-1g", "mig.nvidia.com"), ("h100", "gpu.nvidia.com")):
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}
            },
        }
        apply(kube, ns, template)

    def deployment(name: str, template: str) -> dict[str, Any]:
        container = {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.19.0",
            "args": ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"],
            "resources": {"claims": [{"name": "gpu"}]},
        }
        pod = {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
            },
        }

    denied = apply(kube, ns, deployment("on-mig", "mig-1g"), check=False)
    assert denied.returncode != 0
    assert "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb" in denied.stderr, denied.stderr  # 8B bf16 on a 9.5 GiB MIG device
    apply(kube, ns, deployment("on-h100", "h100"))
    wait_annotated(kube, ns, "deployment", "on-h100", "Fits")


#: Two H200 nodes (GPU Feature Discovery labels) for the expert-parallel workloads (docs/parallelism.md).
H200_NODES = [
    (
        f"e2e-h200-{i}",
        {
            "nvidia.com/gpu.product": "NVIDIA-H200",
            "nvidia.com/gpu.memory": "143771",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.family": "hopper",
        },
        {"nvidia.com/gpu": "8"},
    )
    for i in ("a", "b")
]


def _vllm_container(command: list[str]) -> dict[str, Any]:
    return {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.33.0",
        "command": command,
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
    }


def test_expert_parallel_deployments_are_admitted(kube: Kube, operator: Operator, namespace: str) -> None:
    """DeepSeek-V3 as vLLM's recipe (8xH200, DP8 + EP) and llm-d's wide-EP guide (DP16 + EP on 2 x 8 H200) run it.

    vllm-project/recipes DeepSeek/DeepSeek-V3.md L66-76; llm-d guides/wide-ep-lws (LeaderWorkerSet of 2 pods,
    ``--data-parallel-size 16 --data-parallel-size-local 8``; literal numbers here).
    """
    for name, labels, allocatable in H200_NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    ns = labelled(kube, namespace, "enforce")
    selector = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    serve = ["vllm", "serve", "deepseek-ai/DeepSeek-V3"]
    dp8 = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dsv3-dp8-ep"},
        "spec": {
            "selector": {"matchLabels": {"app": "dsv3"}},
            "template": {
                "metadata": {"labels": {"app": "dsv3"}},
                "spec": {
                    "nodeSelector": selector,
                    "containers": [_vllm_container([*serve, "--data-parallel-size", "8", "--enable-expert-parallel"])],
                },
            },
        },
    }
    apply(kube, ns, dp8)
    wait_annotated(kube, ns, "deployment", "dsv3-dp8-ep", "Fits")
    wide = ["-dp", "16", "-dpl", "8", "-ep", "--all2all-backend", "deepep_low_latency"]
    leader = {"nodeSelector": selector, "containers": [_vllm_container([*serve, *wide])]}
    worker = {
        "nodeSelector": selector,
        "containers": [_vllm_container([*serve, *wide, "--data-parallel-start-rank", "8", "--headless"])],
    }
    lws_ep = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "dsv3-wide-ep"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": leader},
                "workerTemplate": {"spec": worker},
            },
        },
    }
    apply(kube, ns, lws_ep)
    wait_annotated(kube, ns, "leaderworkerset", "dsv3-wide-ep", "Fits")
    # and the false denial it replaces: the same Deployment at 4 GPUs is still refused, with the DP count
    short = copy.deepcopy(dp8)
    short["metadata"]["name"] = "dsv3-dp8-short"
    short["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    result = apply(kube, ns, short, check=False)
    assert result.returncode != 0
    assert "vLLM needs 8 GPUs (TP 1 x PP 1 x DP 8)" in result.stderr


def lora_deployment(name: str, lora: list[str]) -> dict[str, Any]:
    """Llama-3.1-8B on an L4 at 16384 tokens, with ``lora`` flags (issue 20: docs/lora-offload-multimodal.md)."""
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.33.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16384", *lora],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}, "containers": [container]},
            },
        },
    }


def test_enforce_denies_lora_slots_over_the_budget_and_admits_the_same_without_lora(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    # 8 slots of rank 64 on Llama-3.1-8B: 2 x 1,477,705,728 B = 2.75 GiB of LoRA buffers per GPU
    # (tests/sizing/test_lora_offload.py shows the arithmetic), leaving 0.48 GiB of KV for a 2 GiB request
    ns = labelled(kube, namespace, "enforce")
    lora = lora_deployment("llama-lora", ["--enable-lora", "--max-loras", "8", "--max-lora-rank", "64"])
    result = apply(kube, ns, lora, check=False)
    assert result.returncode != 0
    assert "one 16384-token request needs 2.00 GiB of KV cache per GPU" in result.stderr, result.stderr
    assert "weights include 2.75 GiB of LoRA slots: --max-loras 8 x --max-lora-rank 64" in result.stderr
    assert "smallest fix: change `--max-loras 8` to `--max-loras" in result.stderr
    assert kube.kubectl("get", "deployment", "-n", ns, "-o", "name").stdout.strip() == ""
    plain = lora_deployment("llama-plain", [])
    result = apply(kube, ns, plain)
    assert "Warning" not in result.stderr, result.stderr
    wait_annotated(kube, ns, "deployment", "llama-plain", "Fits")


@pytest.mark.parametrize(
    ("image", "why"),
    [
        (
            "lmcache/vllm-openai:v0.3.7",
            "names an LMCache release or build, not the vLLM inside",
        ),  # production-stack docs
        (
            "vllm/vllm-openai:v0.99.0",
            "vLLM 0.99.0 is newer than the newest release fitgate models",
        ),  # newer than the table (0.34.0, the newest release, is modelled)
    ],
)
def test_an_image_whose_release_fitgate_does_not_model_is_admitted_with_a_release_warning(
    kube: Kube, operator: Operator, namespace: str, image: str, why: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    fits = chart_deployment("NVIDIA-H100-80GB-HBM3")
    fits["spec"]["template"]["spec"]["containers"][0]["image"] = image
    result = apply(kube, ns, fits)  # admitted: never Invalid for the release alone
    assert result.returncode == 0, result.stderr
    assert f"Warning: fitgate: Deployment {ns}/{fits['metadata']['name']}" in result.stderr, result.stderr
    sized = ("sized as the newest modelled release", "sized with 0.34.0's accounting")
    assert why in result.stderr and any(text in result.stderr for text in sized), result.stderr
    wait_annotated(kube, ns, "deployment", fits["metadata"]["name"], "Fits")


def test_a_pvc_path_model_is_sized_as_the_model_its_annotation_names(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    ns = labelled(kube, namespace, "enforce")
    d = chart_deployment("NVIDIA-L4")  # 131072 tokens of Llama-3.1-8B do not fit an L4: sized, so denied
    template = d["spec"]["template"]
    container = template["spec"]["containers"][0]
    container["command"] = [
        w.replace("meta-llama/Llama-3.1-8B-Instruct", "/models/Meta-Llama-3.1-8B-Instruct")
        for w in container["command"]
    ]
    assert "/models/Meta-Llama-3.1-8B-Instruct" in container["command"]
    template["spec"].setdefault("volumes", []).append(
        {"name": "models", "persistentVolumeClaim": {"claimName": "models"}}
    )
    container.setdefault("volumeMounts", []).append({"name": "models", "mountPath": "/models", "readOnly": True})
    template["metadata"].setdefault("annotations", {})["fitgate.io/model"] = "meta-llama/Llama-3.1-8B-Instruct"
    result = apply(kube, ns, d, check=False)
    assert result.returncode != 0, result.stderr
    assert "meta-llama/Llama-3.1-8B-Instruct" in result.stderr and "131072-token request" in result.stderr
    assert "/models/Meta-Llama-3.1-8B-Instruct holds meta-llama/Llama-3.1-8B-Instruct" in result.stderr


def vllm_runtime(product: str, max_model_len: int) -> dict[str, Any]:
    """production-stack's VLLMRuntime sample (tests/fixtures/manifests), pinned to ``product`` nodes."""
    obj = copy.deepcopy(
        yaml.safe_load((REPO / "tests/fixtures/manifests/production-stack-vllmruntime.yaml").read_text())
    )
    obj["spec"]["model"]["maxModelLen"] = max_model_len
    obj["spec"]["deploymentConfig"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}]}
    ]
    return obj


def test_a_production_stack_vllm_runtime_goes_through_the_charts_rules(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    # a kind of the registry the chart's rules send to the webhook: a misfit denied with numbers, a fit admitted
    ns = labelled(kube, namespace, "enforce")
    # the operator writes --no-enable-chunked-prefill (vllmConfig.enableChunkedPrefill false), so vLLM profiles one
    # whole 131072-token prompt: with 15.33 GiB of weights (and 4 LoRA slots) no KV memory is left on an L4's 17.65 GiB
    result = apply(kube, ns, vllm_runtime("NVIDIA-L4", 131072), check=False)
    assert result.returncode != 0 and "VLLMRuntime" in result.stderr, result.stderr
    assert "no memory for the KV cache" in result.stderr and "meta-llama/Llama-3.1-8B-Instruct" in result.stderr
    fits = apply(kube, ns, vllm_runtime("NVIDIA-H100-80GB-HBM3", 4096))
    assert "LMCache release" in fits.stderr, fits.stderr  # lmcache/vllm-openai:2025-05-27-v1: release unknown, said
    wait_annotated(kube, ns, "vllmruntime", "vllmruntime-sample", "Fits")
