"""The one registry of workload kinds fitgate reads: every consumer takes its list from here.

The reader (:func:`fitgate.workloads.read_workload`), the pod selectors of the observer
(:mod:`fitgate.workloads.pods`), the audit's lists (``operator/observation/audit.py`` ``AUDITED``) and its RBAC
(``operator/runtime/rbac.py``), the webhook's registrations (``operator/runtime/workload_handlers.py``
``WORKLOAD_RESOURCES``) and the chart's admission rules (``workloadWebhook.rules`` in values.yaml, checked
against :data:`KINDS` by ``tests/workloads/test_workloads_manifests.py``). Adding a kind is one entry here, its reader,
and the chart rule the test asks for.

CRD groups, versions and plurals, from each project's CRD:

* LeaderWorkerSet: kubernetes-sigs/lws ``leaderworkerset.x-k8s.io/v1``.
* KServe: kserve/kserve config/crd (``serving.kserve.io``: InferenceService v1beta1, LLMInferenceService v1alpha1).
* KAITO: kaito-project/kaito config/crd/bases/kaito.sh_workspaces.yaml and kaito.sh_inferencesets.yaml
  (@056b8280b1a8debf644bc6f4399e913a1f9c7e70): served v1alpha1 and v1beta1, v1beta1 stored.
* NVIDIA Dynamo: ``nvidia.com`` DynamoGraphDeployment v1alpha1 (ai-dynamo/dynamo
  examples/backends/vllm/deploy/disagg.yaml @7893f268) and v1beta1 (deploy/v1beta1/agg.yaml @4d0c5ed6).
* DisaggregatedSet: kubernetes-sigs/lws (``disaggregatedsets.disaggregatedset.x-k8s.io``, v1; v1alpha1 before),
  the prefill/decode recipe of llm-d/llm-d guides/recipes/modelserver/base/single-host/pd-disaggregatedset.
* RayService: ray-project/kuberay ``ray.io/v1`` (``spec.serveConfigV2``, ``spec.rayClusterConfig``); RayCluster
  (``spec.headGroupSpec``, ``spec.workerGroupSpecs``), whose head runs ``vllm serve`` with the Ray executor.
* KubeAI: substratusai/kubeai ``kubeai.org/v1`` Model (``spec.url``, ``spec.engine``, ``spec.args``,
  ``spec.resourceProfile``).
* vLLM production-stack: operator/config/crd/bases/production-stack.vllm.ai_vllmruntimes.yaml
  (vllm-project/production-stack @a6c01db05f65f556235413ba8dbcfb0c01132fff), v1alpha1.
* AIBrix: vllm-project/aibrix ``orchestration.aibrix.ai/v1alpha1`` StormService (api/orchestration/v1alpha1/
  stormservice_types.go @8e237f7b: ``spec.template.spec.roles[]``, each a pod template and ``podGroupSize``) and
  RayClusterFleet (rayclusterfleet_types.go @74df9f96: ``spec.template.spec``, a KubeRay RayClusterSpec).
* Argo Rollouts: argoproj/argo-rollouts ``argoproj.io/v1alpha1`` Rollout (pkg/apis/rollouts/v1alpha1/types.go:
  ``spec.template`` a PodTemplateSpec and ``spec.selector`` as a Deployment's; a Rollout with ``spec.workloadRef``
  instead runs the referenced Deployment's template, which is read where that Deployment is).
* SageMaker HyperPod: aws/sagemaker-hyperpod-cli's inference operator CRD, ``inference.sagemaker.aws.amazon.com``
  InferenceEndpointConfig v1alpha1 (v1 adds ``worker.args``): ``fitgate check`` only
  (:mod:`fitgate.workloads.sagemaker`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadKind:
    """One kind of object that can run a vLLM server.

    Attributes:
        kind: The object's ``kind``.
        group: API group ("" for the core group).
        versions: Served versions the webhook is called for; the first is the one the audit lists.
        plural: The resource name.
        pod_template: Dotted path of the pod spec for kinds read as a pod template; None: its own reader.
        admitted: Whether the webhook and audit handle it (False: ``fitgate check`` only).
        project: Who defines the kind (for messages and docs).
    """

    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    pod_template: str | None = None
    admitted: bool = True
    project: str = "Kubernetes"

    @property
    def version(self) -> str:
        """The version the audit lists."""
        return self.versions[0]


KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("Deployment", "apps", ("v1",), "deployments", "spec.template.spec"),
    WorkloadKind("StatefulSet", "apps", ("v1",), "statefulsets", "spec.template.spec"),
    WorkloadKind("ReplicaSet", "apps", ("v1",), "replicasets", "spec.template.spec"),
    WorkloadKind("Job", "batch", ("v1",), "jobs", "spec.template.spec"),
    WorkloadKind("CronJob", "batch", ("v1",), "cronjobs", "spec.jobTemplate.spec.template.spec", admitted=False),
    WorkloadKind("Pod", "", ("v1",), "pods", "spec"),
    WorkloadKind("LeaderWorkerSet", "leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets", project="LWS"),
    WorkloadKind("InferenceService", "serving.kserve.io", ("v1beta1",), "inferenceservices", project="KServe"),
    WorkloadKind("LLMInferenceService", "serving.kserve.io", ("v1alpha1",), "llminferenceservices", project="KServe"),
    WorkloadKind("Workspace", "kaito.sh", ("v1beta1", "v1alpha1"), "workspaces", project="KAITO"),
    WorkloadKind("InferenceSet", "kaito.sh", ("v1beta1", "v1alpha1"), "inferencesets", project="KAITO"),
    WorkloadKind(
        "DynamoGraphDeployment", "nvidia.com", ("v1alpha1", "v1beta1"), "dynamographdeployments", project="Dynamo"
    ),
    WorkloadKind(
        "DisaggregatedSet", "disaggregatedset.x-k8s.io", ("v1", "v1alpha1"), "disaggregatedsets", project="LWS / llm-d"
    ),
    WorkloadKind("RayService", "ray.io", ("v1",), "rayservices", project="KubeRay (Ray Serve LLM)"),
    WorkloadKind("RayCluster", "ray.io", ("v1",), "rayclusters", project="KubeRay"),
    WorkloadKind("Model", "kubeai.org", ("v1",), "models", project="KubeAI"),
    WorkloadKind(
        "VLLMRuntime", "production-stack.vllm.ai", ("v1alpha1",), "vllmruntimes", project="vLLM production-stack"
    ),
    WorkloadKind("StormService", "orchestration.aibrix.ai", ("v1alpha1",), "stormservices", project="AIBrix"),
    WorkloadKind("RayClusterFleet", "orchestration.aibrix.ai", ("v1alpha1",), "rayclusterfleets", project="AIBrix"),
    WorkloadKind("Rollout", "argoproj.io", ("v1alpha1",), "rollouts", "spec.template.spec", project="Argo Rollouts"),
    # check only: the operator runs the worker as a Deployment, which the webhook checks (least privilege)
    WorkloadKind(
        "InferenceEndpointConfig",
        "inference.sagemaker.aws.amazon.com",
        ("v1", "v1alpha1"),
        "inferenceendpointconfigs",
        admitted=False,
        project="SageMaker HyperPod",
    ),
)

#: Kinds whose ``spec.selector`` selects their pods: the ones read from a pod template at ``spec.template`` (apps/v1's,
#: batch/v1's Job, Argo Rollouts' Rollout).
SELECTOR_KINDS = frozenset(k.kind for k in KINDS if k.pod_template == "spec.template.spec")

#: Kinds ``fitgate check`` reads only to merge into others (a KServe ServingRuntime into its InferenceServices).
MERGED_KINDS = ("ServingRuntime", "ClusterServingRuntime", "ConfigMap", "ResourceClaimTemplate")


def find_kind(kind: str) -> WorkloadKind | None:
    """The registry entry of ``kind``, or None."""
    return next((k for k in KINDS if k.kind == kind), None)


def other_group(obj: object) -> str | None:
    """The API group of an object whose kind fitgate reads in another group, else None (hunt52 G3).

    OME's ``ome.io`` InferenceService is not KServe's; a manifest without ``apiVersion`` is taken as the kind's.
    """
    if not isinstance(obj, dict):
        return None
    entry = find_kind(str(obj.get("kind") or ""))
    version = obj.get("apiVersion")
    if entry is None or not isinstance(version, str) or not version:
        return None
    group = version.rpartition("/")[0]
    return None if group == entry.group else group or "core"


def pod_template_paths() -> dict[str, str]:
    """Kind -> dotted path of its pod spec, for the kinds read as a pod template."""
    return {k.kind: k.pod_template for k in KINDS if k.pod_template is not None}


def admitted_kinds() -> tuple[WorkloadKind, ...]:
    """The kinds the webhook registers for and the audit lists."""
    return tuple(k for k in KINDS if k.admitted)
