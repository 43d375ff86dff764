"""Kubernetes objects that run vLLM, read into the inputs of a ModelDeployment.

:func:`read_workload` takes one object (a dict as the API server or a YAML file has it) and returns
a :class:`Reading`, or None when the object runs no vLLM server. A reading converts into a raw
ModelDeployment ``spec`` (:meth:`Reading.spec`), so the operator and ``fitgate check`` size it on the
one path ModelDeployments take; the only check made here is the one a ModelDeployment cannot
express: the GPUs the pods ask for must cover TP x PP (:meth:`Reading.gpu_shortfall`).

The container of each kind is read by :mod:`fitgate.workloads.container`, its flags interpreted by
:mod:`fitgate.workloads.flags`, and the result is :mod:`fitgate.workloads.reading`'s :class:`Reading`;
their public names are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fitgate.workloads.bounds import BudgetError
from fitgate.workloads.container import (
    _ANNOTATED,
    MAX_CONFIG_BYTES,
    MAX_WHY_CHARS,
    MODEL_ANNOTATION,
    MODEL_ANNOTATION_HINT,
    _blank,
    _find_vllm,
    _finish,
    _reading,
    config_ref,
    read_container,
)
from fitgate.workloads.dualpod import server_pod
from fitgate.workloads.flags import MEMORY_ENV, data_parallel_ranks, runs_on_cpu
from fitgate.workloads.kinds import KINDS as WORKLOAD_KINDS
from fitgate.workloads.kinds import SELECTOR_KINDS, other_group, pod_template_paths
from fitgate.workloads.kserve import (
    _kserve_managed_dra,
    _kserve_model,
    _llm_inference_service,
    llm_inference_workloads,
)
from fitgate.workloads.mounted_scripts import with_mounted_scripts
from fitgate.workloads.podspec import (
    as_dict,
    as_list,
    at_path,
    gpu_limit_of,
    unfollowed_vllm,
)
from fitgate.workloads.reading import Reading, WorkloadError

__all__ = [
    "KINDS",
    "MAX_CONFIG_BYTES",
    "MAX_WHY_CHARS",
    "MEMORY_ENV",
    "MODEL_ANNOTATION",
    "MODEL_ANNOTATION_HINT",
    "POD_TEMPLATE_PATHS",
    "annotated_model",
    "config_ref",
    "configmaps_of",
    "data_parallel_ranks",
    "llm_inference_workloads",
    "lws_env",
    "read_container",
    "read_workload",
    "unreadable",
    "with_model_annotation",
    "with_object_metadata",
]

#: Where each kind keeps its pod template (dotted path), from the registry (:mod:`fitgate.workloads.kinds`).
POD_TEMPLATE_PATHS: dict[str, str] = pod_template_paths()

#: Kinds read by :func:`read_workload` (besides any configured through ``extra_paths``).
KINDS = tuple(k.kind for k in WORKLOAD_KINDS)

# ---------------------------------------------------------------------------------------------
# Kinds


def cpu_backend(obj: Mapping[str, Any]) -> bool:
    """Whether a workload runs vLLM's CPU backend (hunt27 O1: the reason it is skipped, not "no vLLM server")."""
    kind = str(obj.get("kind") or "")
    path = POD_TEMPLATE_PATHS.get(kind) or ("spec.template" if kind == "LLMInferenceService" else None)
    pod = as_dict(at_path(obj, path)) if path else {}
    return any(
        runs_on_cpu(c) and "vllm" in str(c.get("image") or "").lower()
        for c in (as_dict(c) for c in as_list(pod.get("containers")))
    )


#: An unrendered template value: ``${VAR}`` (envsubst, kustomize replacements) or ``{{ ... }}`` (Helm, Go templates).
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\{\{.*\}\}")


def _leader_worker_set(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A LeaderWorkerSet: one replica is ``size`` pods (a leader and size-1 workers); TP x PP may span them."""
    meta = as_dict(obj.get("metadata"))
    lwt = as_dict(at_path(obj, "spec.leaderWorkerTemplate"))
    size_raw = lwt.get("size", 1)
    if isinstance(size_raw, str) and _PLACEHOLDER.search(size_raw):
        # hunt74 O1: a kustomize / envsubst / Helm base file (llm-d's `size: ${DECODE_SIZE}`) before it is rendered
        why = f"spec.leaderWorkerTemplate.size {size_raw[:80]!r}: a template placeholder; check the rendered manifest"
        return _finish(_blank("LeaderWorkerSet", meta), unknown=why)
    if not isinstance(size_raw, int) or size_raw < 1:
        return _finish(
            _blank("LeaderWorkerSet", meta),
            invalid=f"spec.leaderWorkerTemplate.size: expected a whole number >= 1 (got {size_raw!r})",
        )
    worker = as_dict(at_path(lwt, "workerTemplate.spec"))
    leader = as_dict(at_path(lwt, "leaderTemplate.spec")) or worker
    lws = lws_env(meta, size_raw)
    try:
        found = _find_vllm(leader, lws) or _find_vllm(worker, {**lws, "LWS_WORKER_INDEX": "1"})
    except WorkloadError as exc:
        return _finish(
            _blank("LeaderWorkerSet", meta),
            invalid=str(exc),
        )
    if found is None:
        return None
    try:
        _, leader_gpus = gpu_limit_of(found.container if found.pod is leader else _first(leader))
        _, worker_gpus = gpu_limit_of(_first(worker) if worker else found.container)
    except WorkloadError as exc:
        return _finish(_reading("LeaderWorkerSet", meta, found, configmaps), invalid=str(exc))
    total = leader_gpus + (size_raw - 1) * worker_gpus
    return _reading("LeaderWorkerSet", meta, found, configmaps, gpus_per_replica=total, pods_per_replica=size_raw)


def lws_env(meta: Mapping[str, Any], size: int) -> dict[str, str]:
    """The env LeaderWorkerSet injects in every pod of a group, as the leader (worker index 0) sees it.

    kubernetes-sigs/lws@da1267b252e17fe795cbc41249a43eb9d52cbca5:
    site/content/en/docs/reference/labels-annotations-and-environment-variables.md: ``LWS_LEADER_ADDRESS``
    (the leader via the headless service: ``<name>-0.<name>.<namespace>``), ``LWS_GROUP_SIZE`` (pods per
    group) and ``LWS_WORKER_INDEX`` (the pod's index in its group). A pod's memory does not depend on its
    index (only its ranks' numbers do), so the leader's is read (issue 21).
    """
    name, namespace = str(meta.get("name") or "lws")[:253], str(meta.get("namespace") or "default")[:63]
    return {
        "LWS_LEADER_ADDRESS": f"{name}-0.{name}.{namespace}",
        "LWS_GROUP_SIZE": str(size),
        "LWS_WORKER_INDEX": "0",
    }


def _first(pod: dict[str, Any]) -> dict[str, Any]:
    """The container of a pod spec that holds its GPUs (the first with a GPU limit, else the first)."""
    containers = [as_dict(c) for c in as_list(pod.get("containers"))]
    for c in containers:
        if gpu_limit_of(c)[0] is not None:
            return c
    return containers[0] if containers else {}


def annotated_model(obj: Mapping[str, Any], pod_path: str | None) -> tuple[str, str | None] | str | None:
    """``fitgate.io/model`` of the object, else of its pod template: (repo id, revision), a why-not, or None."""
    annotations = as_dict(as_dict(obj.get("metadata")).get("annotations"))
    if MODEL_ANNOTATION not in annotations and pod_path and pod_path != "spec":
        template_meta = as_dict(at_path(obj, pod_path.rsplit(".", 1)[0] + ".metadata"))
        annotations = as_dict(template_meta.get("annotations"))
    if MODEL_ANNOTATION not in annotations:
        return None
    value = str(annotations[MODEL_ANNOTATION]).strip()
    m = _ANNOTATED.match(value)
    if m is None:
        return f"annotation {MODEL_ANNOTATION}: expected org/name[@revision] (got {value[:120]!r})"
    return f"{m.group(1)}/{m.group(2)}", m.group(3)


def with_model_annotation(reading: Reading, annotated: tuple[str, str | None] | str | None) -> Reading:
    """The reading with the model the annotation names in place of a path / URI / unreadable storageUri."""
    if annotated is None:
        return reading
    if isinstance(annotated, str):  # a malformed annotation: sized as written, the annotation ignored and said so
        return _finish(reading, notes=(*reading.notes, f"{annotated}; ignored"))
    name, revision = annotated
    if reading.model == name and any(MODEL_ANNOTATION in n for n in reading.notes):
        return reading  # applied already (a reader of several servers applies it to each)
    where = reading.model_location or reading.model
    if reading.model_location is None and reading.model is not None and reading.model != name:
        note = f"annotation {MODEL_ANNOTATION}: {name} differs from the model the command names ({reading.model})"
        return _finish(reading, notes=(*reading.notes, note + "; sized as the command names it"))
    unknown = reading.unknown if reading.unknown is None or MODEL_ANNOTATION not in reading.unknown else None
    note = f"{where or 'the model'} holds {name} (annotation {MODEL_ANNOTATION})"
    hint = f"annotate {MODEL_ANNOTATION}"  # the container reader's hint, answered now (hunt93 F5)
    return _finish(
        reading,
        model=name,
        revision=revision or reading.revision,
        unknown=unknown,
        notes=(*(n for n in reading.notes if hint not in n), note),
    )


def read_workload(
    obj: Any,
    configmaps: Mapping[str, Mapping[str, str]] | None = None,
    extra_paths: Mapping[str, str] | None = None,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> Reading | None:
    """The vLLM reading of a Kubernetes object, or None when it runs no vLLM server.

    Args:
        obj: The object as a dict (``kind``, ``metadata``, ``spec``).
        configmaps: ConfigMap name -> data of the same namespace or manifest set, for ``--config`` files.
        extra_paths: Kind -> dotted path of the pod spec, for other CRDs that embed a pod template
            (``{"RayService": "spec.rayClusterConfig.headGroupSpec.template.spec"}``).
        runtimes: KServe ServingRuntime name -> its ``spec``, merged into the InferenceServices that use it.

    Never raises on bad input: a reading with ``invalid`` says what is wrong, one with ``unknown`` what
    fitgate could not read (a parse budget passed, or a value it cannot handle: never a denial on its own).
    The annotation ``fitgate.io/model`` names the model a path or storage URI holds (:func:`with_model_annotation`).
    """
    try:
        return _read_workload(obj, configmaps, extra_paths, runtimes)
    except BudgetError as exc:
        return unreadable(obj, str(exc))
    except Exception as exc:  # hardening (issue 22): one line, never an exception out of the reader
        return unreadable(obj, f"fitgate could not read this object ({type(exc).__name__}: {str(exc)[:160]})")


def unreadable(obj: Any, why: str) -> Reading | None:
    """The Unknown reading of an object the reader could not finish."""
    if not isinstance(obj, dict):
        return None
    meta = as_dict(obj.get("metadata"))
    return _finish(_blank(str(obj.get("kind") or "?")[:63], meta), unknown=" ".join(why.split())[:500])


def _read_workload(
    obj: Any,
    configmaps: Mapping[str, Mapping[str, str]] | None = None,
    extra_paths: Mapping[str, str] | None = None,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> Reading | None:
    if not isinstance(obj, dict):
        return None
    kind = str(obj.get("kind") or "")
    if other_group(obj) is not None:
        return None
    path = {**POD_TEMPLATE_PATHS, **(extra_paths or {})}.get(kind)
    reading = _read_kind(obj, kind, path, configmaps or {}, runtimes)
    if reading is None:
        return None
    selector = pod_selector(obj, kind)
    if selector:
        reading = _finish(reading, pod_selector=selector)
    return with_object_metadata(obj, reading, path)


def with_object_metadata(obj: dict[str, Any], reading: Reading, path: str | None) -> Reading:
    """``reading`` with what the object's annotations say: KServe's managed DRA, the model a path holds."""
    managed = _kserve_managed_dra(obj)
    if managed and not reading.gpus_per_replica and reading.unknown is None and reading.invalid is None:
        reading = _finish(reading, unknown=managed)
    return with_model_annotation(reading, annotated_model(obj, path))


#: The label the LeaderWorkerSet controller puts on every pod of a set (kubernetes-sigs/lws api/leaderworkerset/v1
#: ``SetNameLabelKey``).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


def pod_selector(obj: dict[str, Any], kind: str) -> dict[str, str]:
    """Labels every pod of ``obj`` carries (empty: none known).

    ``spec.selector.matchLabels`` of the apps/batch kinds (its matchExpressions are not evaluated: pods with these
    labels that they would exclude are counted as its own too), the set-name label of a LeaderWorkerSet. Label
    values that are not strings, or more than 64 pairs, give none.
    """
    if kind == "LeaderWorkerSet":
        name = as_dict(obj.get("metadata")).get("name")
        return {LWS_NAME_LABEL: name} if isinstance(name, str) and name else {}
    if kind not in SELECTOR_KINDS:
        return {}
    labels = as_dict(as_dict(at_path(obj, "spec.selector")).get("matchLabels"))
    if len(labels) > 64 or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return {}
    return {str(k): str(v) for k, v in labels.items()}


def _read_kind(
    obj: dict[str, Any],
    kind: str,
    path: str | None,
    cms: Mapping[str, Mapping[str, str]],
    runtimes: Mapping[str, Mapping[str, Any]] | None,
) -> Reading | None:
    from fitgate.workloads.crds import CRD_READERS  # noqa: PLC0415 - crds builds on this module

    meta = as_dict(obj.get("metadata"))
    try:
        if kind == "LeaderWorkerSet":
            return _leader_worker_set(obj, cms)
        if kind == "InferenceService":
            return _kserve_model(obj, cms, runtimes)
        if kind == "LLMInferenceService":
            return _llm_inference_service(obj, cms)
        if path is None and kind in CRD_READERS:  # a configured extra path (extra_paths) comes first
            return CRD_READERS[kind](obj, cms)
        if path is None:
            return None
        pod = with_mounted_scripts(as_dict(at_path(obj, path)), cms)  # a ConfigMap script as the command
        found = _find_vllm(pod)
        if found is None:  # llm-d's dual-pod requester: the vLLM server is in its pod's server-patch (hunt195 F4)
            template_meta = meta if path == "spec" else as_dict(at_path(obj, path.rsplit(".", 1)[0] + ".metadata"))
            served = server_pod(pod, as_dict(template_meta.get("annotations")))
            if isinstance(served, str):
                return _finish(_blank(kind, meta), unknown=f"llm-d dual-pod: {served}")
            if served is not None:
                pod = served
                found = _find_vllm(with_mounted_scripts(served, cms))
    except WorkloadError as exc:
        return _finish(_blank(kind, meta), invalid=str(exc))
    if found is None:
        why = unfollowed_vllm(pod)  # a vLLM image on GPUs running a command fitgate cannot follow (hunt195 F1)
        return _finish(_blank(kind, meta), unknown=why) if why else None
    # the pod's own annotations (Run:ai's gpu-fraction): a Pod's metadata, else its template's
    pod_meta = meta if path == "spec" else as_dict(at_path(obj, path.rsplit(".", 1)[0] + ".metadata"))
    return _reading(kind, meta, found, cms, pod_annotations=as_dict(pod_meta.get("annotations")))


def configmaps_of(objects: list[Any]) -> dict[str, dict[str, str]]:
    """ConfigMap name -> data for the ConfigMaps among ``objects`` (a manifest set)."""
    out: dict[str, dict[str, str]] = {}
    for obj in objects:
        if isinstance(obj, dict) and obj.get("kind") == "ConfigMap" and str(obj.get("apiVersion", "")) == "v1":
            name = str(as_dict(obj.get("metadata")).get("name") or "")
            out[name] = {str(k): str(v) for k, v in as_dict(obj.get("data")).items()}
    return out
