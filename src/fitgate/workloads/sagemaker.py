"""SageMaker HyperPod's ``InferenceEndpointConfig``: the vLLM worker its inference operator runs, read on the one path.

aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/
inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml`` (@0139e198): ``spec.instanceType`` (``ml.*``),
``spec.replicas`` and ``spec.worker`` (``image``, ``environmentVariables``, ``resources``, a container's); the v1
API adds ``worker.args`` (aws-samples/sagemaker-genai-hosting-examples ``SageMakerHyperpod/kimi-k3/kimi-k3.yaml``
@80ee5ebf: ``vllm/vllm-openai`` with the ``vllm serve`` flags in ``worker.args``; hunt133 F1) and
``modelSourceConfig.huggingFaceModel.modelId``. The operator runs the worker as a Deployment whose pods select the
instance type (HyperPod's nodes carry SageMaker's ``ml.`` name in ``node.kubernetes.io/instance-type``), which the
workload webhook checks in the cluster as it checks any Deployment; ``fitgate check`` reads the config before it is
applied. A worker whose image and args run no vLLM server (an LMI image configured by ``OPTION_*`` variables) is not
read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitgate.workloads.container import _find_vllm, _reading
from fitgate.workloads.podspec import as_dict, as_list
from fitgate.workloads.reading import Reading

#: The node label HyperPod's nodes name their instance type in (``ml.p5.48xlarge``).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def read_inference_endpoint_config(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The vLLM worker of an InferenceEndpointConfig (None when its worker runs no vLLM server)."""
    spec = as_dict(obj.get("spec"))
    worker = as_dict(spec.get("worker"))
    container: dict[str, Any] = {
        "name": "worker",
        "image": str(worker.get("image") or "")[:512],
        "args": [str(a) for a in as_list(worker.get("args"))[:256]],
        "env": [as_dict(e) for e in as_list(worker.get("environmentVariables"))[:128]],
        "resources": as_dict(worker.get("resources")),
    }
    if worker.get("command"):
        container["command"] = [str(c) for c in as_list(worker.get("command"))[:256]]
    instance = str(spec.get("instanceType") or "")[:64]
    pod: dict[str, Any] = {
        "containers": [container],
        **({"nodeSelector": {INSTANCE_TYPE_LABEL: instance}} if instance else {}),
    }
    found = _find_vllm(pod)
    if found is None:
        return None
    hub = str(as_dict(as_dict(spec.get("modelSourceConfig")).get("huggingFaceModel")).get("modelId") or "")[:200]
    named = found.engine.flags.get("--model") or found.engine.model
    # the operator puts the model source at the worker's mount (default /opt/ml/model): a Hub model is that id
    mount = str(as_dict(worker.get("modelVolumeMount")).get("mountPath") or "/opt/ml/model").rstrip("/")
    named = None if named and named.rstrip("/") == mount else named
    notes = (
        f"SageMaker HyperPod InferenceEndpointConfig on {instance or 'no instance type'}: its inference operator runs "
        "this worker as a Deployment, which the workload webhook checks in the cluster",
    )
    return _reading(
        "InferenceEndpointConfig",
        as_dict(obj.get("metadata")),
        found,
        configmaps,
        model=None if named else hub or None,
        notes=notes,
    )
