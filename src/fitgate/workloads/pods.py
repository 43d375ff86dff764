"""Which pods serve a vLLM workload: the label selector of each kind the audit reads (pure).

The workload observer (:mod:`fitgate.operator.observation.workload_observe`) lists these pods and reads their vLLM
``/metrics``. Each kind's selector is the one its controller puts on the pods it creates:

* Deployment, StatefulSet, ReplicaSet, Job: ``spec.selector`` (``matchLabels`` and ``matchExpressions``),
  which the API server requires to match the pod template; a Job without one (as written, before the API
  server defaults it) is read by ``batch.kubernetes.io/job-name=<name>``, the label the Job controller
  puts on its pods (kubernetes/api batch/v1/types.go, ``JobNameLabel = labelPrefix + "job-name"``,
  commit 8b76f66a).
* Pod: the pod itself (no listing).
* LeaderWorkerSet: ``leaderworkerset.sigs.k8s.io/name=<name>`` (``SetNameLabelKey``) and
  ``leaderworkerset.sigs.k8s.io/worker-index=0`` (``WorkerIndexLabelKey``; "0" is the leader), from
  kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go:37,45; the controller selects its
  leaders the same way (pkg/controllers/leaderworkerset_controller.go:543-546, v0.10.0-11-g060ab4d). Only
  the leader runs vLLM's API server in a multi-node group; workers serve no ``/metrics``.
* KServe InferenceService: ``serving.kserve.io/inferenceservice=<name>`` (``InferenceServicePodLabelKey``,
  kserve/kserve pkg/constants/constants.go:61) and ``component=predictor`` (``KServiceComponentLabel``,
  constants.go:405), as the predictor's pods are labelled (pkg/controller/v1beta1/inferenceservice/
  components/predictor.go:512-513, v0.20.0-rc0-104-gaaac4e29).
* KServe LLMInferenceService: the selector of its workload Service, ``GetWorkloadLabelSelector``
  (pkg/controller/v1alpha2/llmisvc/workload.go:166-171): ``app.kubernetes.io/part-of=llminferenceservice``,
  ``app.kubernetes.io/name=<name>``, ``kserve.io/component=workload`` (constants.go:419-441), less the
  prefill pods (``llm-d.ai/role=prefill``, workload_single_node.go:229-230, workload_multi_node.go:300-301):
  the compared prediction is the decode template's. The v1alpha1 controller the audit's API version is
  served by writes the same labels (v0.16.0 pkg/controller/v1alpha1/llmisvc/workload.go:131-136,
  workload_single_node.go:81, workload_multi_node.go:138,247).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fitgate.workloads.kinds import SELECTOR_KINDS

#: Label keys of the projects above (cited in the module docstring).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
KSERVE_ISVC_LABEL = "serving.kserve.io/inferenceservice"
KSERVE_COMPONENT_LABEL = "component"
LLMISVC_PART_OF = ("app.kubernetes.io/part-of", "llminferenceservice")
LLMISVC_NAME_LABEL = "app.kubernetes.io/name"
LLMISVC_COMPONENT = ("kserve.io/component", "workload")
LLMD_ROLE_LABEL = "llm-d.ai/role"
KAITO_WORKSPACE_LABEL = "kaito.sh/workspace"
DISAGG_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
DISAGG_ROLE_LABEL = "disaggregatedset.x-k8s.io/role"

#: A selector longer than this is not sent to the API server (a label selector is a query parameter).
MAX_SELECTOR_CHARS = 4096
_OPERATORS = {"In": "in", "NotIn": "notin"}


class SelectorError(ValueError):
    """A workload whose pods cannot be told apart: the message names the field and why."""


@dataclass(frozen=True)
class PodSelector:
    """The pods of a workload: a label selector in the API server's syntax, or the workload itself (a Pod).

    Attributes:
        labels: ``k=v,k2 in (a,b),!k3`` (``labelSelector`` of a pod list); "" for a Pod.
        pod: The workload's own name when it is a Pod (nothing to list).
    """

    labels: str = ""
    pod: str | None = None


def _expression(expr: Mapping[str, Any], where: str) -> str:
    key = str(expr.get("key") or "")
    op = str(expr.get("operator") or "")
    values = [str(v) for v in expr.get("values") or []]
    if not key:
        raise SelectorError(f"{where}.key is empty")
    if op in _OPERATORS:
        if not values:
            raise SelectorError(f"{where}: operator {op} needs values")
        return f"{key} {_OPERATORS[op]} ({','.join(sorted(values))})"
    if op == "Exists":
        return key
    if op == "DoesNotExist":
        return f"!{key}"
    raise SelectorError(f"{where}.operator {op!r} is not In, NotIn, Exists or DoesNotExist")


def label_selector(selector: Mapping[str, Any] | None, where: str = "spec.selector") -> str:
    """A ``metav1.LabelSelector`` as the text of a ``labelSelector`` query.

    Raises:
        SelectorError: an empty selector (it would select every pod of the namespace), an unknown
            operator, or a selector over :data:`MAX_SELECTOR_CHARS`.
    """
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        parts.append(_expression(expr if isinstance(expr, Mapping) else {}, f"{where}.matchExpressions[{i}]"))
    if not parts:
        raise SelectorError(f"{where} is empty: it would select every pod of the namespace")
    text = ",".join(parts)
    if len(text) > MAX_SELECTOR_CHARS:
        raise SelectorError(f"{where} is {len(text)} characters long; at most {MAX_SELECTOR_CHARS} are read")
    return text


def pod_selector(obj: Mapping[str, Any]) -> PodSelector:
    """The pods that serve ``obj`` (a workload of one of :data:`fitgate.workloads.KINDS`).

    Raises:
        SelectorError: the kind is not one the audit reads, or its selector selects nothing in particular.
    """
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    if not name:
        raise SelectorError(f"{kind or 'object'} has no metadata.name")
    if kind == "Pod":
        return PodSelector(pod=name)
    if kind == "Job" and not spec.get("selector"):
        return PodSelector(f"{JOB_NAME_LABEL}={name}")
    if kind in SELECTOR_KINDS:
        return PodSelector(label_selector(spec.get("selector")))
    if kind == "LeaderWorkerSet":
        return PodSelector(f"{LWS_NAME_LABEL}={name},{LWS_WORKER_INDEX_LABEL}=0")
    if kind == "InferenceService":
        return PodSelector(f"{KSERVE_COMPONENT_LABEL}=predictor,{KSERVE_ISVC_LABEL}={name}")
    if kind == "LLMInferenceService":
        labels = sorted([LLMISVC_PART_OF, (LLMISVC_NAME_LABEL, name), LLMISVC_COMPONENT])
        return PodSelector(",".join(f"{k}={v}" for k, v in labels) + f",{LLMD_ROLE_LABEL}!=prefill")
    if kind == "Workspace":  # kaito-project/kaito api/v1beta1/labels.go L38 (LabelWorkspaceName), @056b8280
        return PodSelector(f"{KAITO_WORKSPACE_LABEL}={name}")
    if kind == "DisaggregatedSet":  # its pods' labels (kubernetes-sigs/lws disaggregatedset, status.roles[].selector)
        return PodSelector(f"{DISAGG_NAME_LABEL}={name},{DISAGG_ROLE_LABEL}=decode")
    if kind == "VLLMRuntime":  # production-stack operator vllmruntime_controller.go L392 (@a6c01db0): app=<name>
        return PodSelector(f"app={name}")
    raise SelectorError(f"kind {kind!r} is not a workload fitgate observes")


def metrics_port(args: Mapping[str, str]) -> int | None:
    """The port of vLLM's ``/metrics`` when the workload's args say it (``--port``), else None (the pod's ports).

    ``vllm serve --port`` is also the port of ``/metrics`` (one API server).
    """
    value = args.get("--port")
    if value is None:
        return None
    try:
        port = int(value)
    except ValueError:
        return None
    return port if 0 < port < 65536 else None
