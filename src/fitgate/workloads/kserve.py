"""KServe's kinds: InferenceService, LLMInferenceService, and KServe's managed DRA.

An InferenceService is its predictor, a ServingRuntime merged in, the huggingface runtime, multi-node workers; an
LLMInferenceService its decode and prefill workloads.

Read by :mod:`fitgate.workloads.reader`, which dispatches each kind here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fitgate.workloads.argv import EngineCommand, parse_engine_argv
from fitgate.workloads.bounds import check_script
from fitgate.workloads.container import (
    KSERVE_MODEL_MOUNT,
    MODEL_ANNOTATION_HINT,
    _blank,
    _find_vllm,
    _finish,
    _Found,
    _reading,
)
from fitgate.workloads.expansion import container_env
from fitgate.workloads.flags import runs_on_cpu
from fitgate.workloads.podspec import as_dict, as_list, at_path, gpu_limit_of
from fitgate.workloads.reading import Reading, WorkloadError


def _serving_runtime(
    model: dict[str, Any], runtimes: Mapping[str, Mapping[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """The ServingRuntime of a predictor model: ``runtime`` by name, else one that auto-selects its modelFormat."""
    name = str(model.get("runtime") or "")
    if name:
        return (name, dict(runtimes[name])) if name in runtimes else None
    fmt = str(as_dict(model.get("modelFormat")).get("name") or "").lower()
    for rname, spec in runtimes.items():
        for f in (as_dict(x) for x in as_list(as_dict(spec).get("supportedModelFormats"))):
            if str(f.get("name") or "").lower() == fmt and f.get("autoSelect"):
                return rname, dict(spec)
    return None


def hf_uri_model(uri: str) -> str:
    """The Hub reference of KServe's ``hf://`` storage URI: ``hf://org/name:revision`` is ``org/name@revision``.

    kserve/website docs/model-serving/storageuri/hf/hf.md (@05b83a6c L11): ``hf://${REPO}/${MODEL}:${HASH}``, the
    revision after a colon (hunt109 F4: read as a model name with a colon, "not valid").
    """
    ref = uri[len("hf://") :]
    head, slash, last = ref.rpartition("/")
    if ":" in last and "@" not in last:
        name, _, revision = last.partition(":")
        return f"{head}{slash}{name}@{revision}" if name and revision else ref
    return ref


def _kserve_workers(predictor: Mapping[str, Any], head: Mapping[str, Any]) -> dict[str, Any]:
    """What a KServe multi-node predictor's ``workerSpec`` adds to its reading (hunt109 F1), as ``_reading`` kwargs.

    kserve/website docs/model-serving/generative-inference/multi-node/multi-node.md (@05b83a6c L162-176): the
    controller sets ``TENSOR_PARALLEL_SIZE`` / ``PIPELINE_PARALLEL_SIZE`` from ``workerSpec.tensorParallelSize`` /
    ``pipelineParallelSize`` (the multinode runtime passes them to vLLM; kserve/kserve pkg/apis/serving/v1beta1/
    inference_service_validation.go L395 refuses them set by hand), and a replica is TP x PP GPUs over the head
    and its workers, as many pods as the head's GPUs divide them into. Empty without a ``workerSpec``.
    """
    workers = as_dict(predictor.get("workerSpec"))
    if not workers:
        return {}
    flags: dict[str, str] = {}
    origins: dict[str, tuple[str, ...]] = {}
    sizes = {"tensorParallelSize": 1, "pipelineParallelSize": 1}
    for key, flag in (
        ("tensorParallelSize", "--tensor-parallel-size"),
        ("pipelineParallelSize", "--pipeline-parallel-size"),
    ):
        value = workers.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            sizes[key] = value
            flags[flag] = str(value)
            origins[flag] = ("field", f"spec.predictor.workerSpec.{key}")
    gpus = sizes["tensorParallelSize"] * sizes["pipelineParallelSize"]
    _, per_pod = gpu_limit_of(dict(head))
    pods = max(1, -(-gpus // per_pod)) if per_pod else 1
    note = f"KServe multi-node: TP {sizes['tensorParallelSize']} x PP {sizes['pipelineParallelSize']} from workerSpec"
    return {
        "extra_flags": flags,
        "extra_origins": origins,
        "gpus_per_replica": gpus,
        "pods_per_replica": pods,
        "notes": (f"{note}, {gpus} GPUs over {pods} pod(s)",),
    }


def _kserve_runtime_merged(
    obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]], runtimes: Mapping[str, Mapping[str, Any]]
) -> Reading | None:
    """An InferenceService whose ServingRuntime is in the manifest set, merged as KServe merges them.

    kserve/kserve pkg/controller/v1beta1/inferenceservice/utils (``MergeRuntimeContainers``,
    @aaac4e294dae2c7b1aa1886447793f3aa1c30912): the runtime's ``kserve-container`` with the predictor model's
    fields over it, ``args`` appended to the runtime's, ``{{.Name}}`` the InferenceService's name; the
    storage initializer puts ``storageUri`` at ``/mnt/models``.
    """
    meta = as_dict(obj.get("metadata"))
    predictor = as_dict(at_path(obj, "spec.predictor"))
    model = as_dict(predictor.get("model"))
    picked = _serving_runtime(model, runtimes)
    if picked is None:
        return None
    rname, runtime = picked
    containers = [as_dict(c) for c in as_list(runtime.get("containers"))]
    base = next((c for c in containers if c.get("name") == "kserve-container"), containers[0] if containers else {})
    isvc = str(meta.get("name") or "")

    def words(c: dict[str, Any], key: str) -> list[str]:
        return [str(w).replace("{{.Name}}", isvc) for w in as_list(c.get(key))]

    merged = {
        **base,
        **{k: v for k, v in model.items() if k in ("image", "resources", "command") and v},
        "name": "kserve-container",
        "args": words(base, "args") + words(model, "args"),
        "command": words(model, "command") or words(base, "command"),
        "env": as_list(base.get("env")) + as_list(model.get("env")),
    }
    pod = {
        **{k: v for k, v in runtime.items() if k in ("nodeSelector", "tolerations", "affinity", "volumes")},
        **{k: v for k, v in predictor.items() if k not in ("model", "containers")},
        "containers": [merged],
    }
    found = _find_vllm(pod)
    if found is None:
        return None
    uri = str(model.get("storageUri") or "")
    workers = _kserve_workers(predictor, merged)
    notes = (f"ServingRuntime {rname} merged in", *workers.pop("notes", ()))
    reading = _reading("InferenceService", meta, found, configmaps, notes=notes, **workers)
    if uri.startswith("hf://"):
        return _finish(reading, model=hf_uri_model(uri), model_location=None)
    if uri and reading.unknown is None and reading.invalid is None:
        return _finish(reading, unknown=f"storageUri {uri}: {MODEL_ANNOTATION_HINT}", model_location=uri)
    storage = as_dict(model.get("storage"))
    if (reading.model or "").startswith(KSERVE_MODEL_MOUNT) and reading.unknown is None and reading.invalid is None:
        # hunt23 M3: no storageUri (an OpenShift AI `storage: {key, path}` connection): what KServe mounts at
        # /mnt/models is not in the object, as for a Deployment's path inside the container
        where = f"storage {storage.get('key')}:{storage.get('path')}" if storage else "the model's storage"
        return _finish(reading, unknown=f"model {reading.model} is {where} mounted by KServe: {MODEL_ANNOTATION_HINT}")
    return reading


def _kserve_model(
    obj: dict[str, Any],
    configmaps: Mapping[str, Mapping[str, str]],
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> Reading | None:
    """An InferenceService: its predictor's containers, its ServingRuntime merged in, else the huggingface runtime.

    The KServe huggingface runtime (modelFormat huggingface, or vllm) passes its args through to
    vLLM's engine arguments; the model is ``--model_id`` (else ``storageUri`` ``hf://org/name``);
    ``--backend=huggingface`` is not vLLM.
    """
    meta = as_dict(obj.get("metadata"))
    predictor = as_dict(at_path(obj, "spec.predictor"))
    found = _find_vllm(predictor)
    if found is not None:
        return _reading("InferenceService", meta, found, configmaps)
    merged = _kserve_runtime_merged(obj, configmaps, runtimes or {})
    if merged is not None:
        return merged
    model = as_dict(predictor.get("model"))
    fmt = str(as_dict(model.get("modelFormat")).get("name") or "").lower()
    named = str(model.get("runtime") or "")
    if fmt not in ("huggingface", "vllm") and "vllm" in named.lower() and runtimes is not None:
        # hunt23 M2: `fitgate check` of a manifest set that names a vLLM ServingRuntime it does not hold: not "no
        # vLLM server" (the webhook, which reads no ServingRuntime, keeps skipping it: runtimes None)
        why = f"predictor.model.runtime {named[:63]}: no such ServingRuntime at hand, and vLLM's args are in it"
        return _finish(_blank("InferenceService", meta), unknown=why + " (check it together with the runtime's file)")
    if fmt not in ("huggingface", "vllm"):
        return None
    args = [str(a) for a in as_list(model.get("args"))]
    env = container_env(model.get("env"))
    runtime = "KServe vLLM runtime" if fmt == "vllm" else "KServe huggingface runtime"  # hunt24 M1: named as given
    engine = parse_engine_argv(runtime, list(args))
    flags = dict(engine.flags)
    if flags.get("--backend", "vllm") not in ("vllm", "auto"):
        return None
    if "--max-length" in flags:
        # hunt109 F3: the huggingface server's --max_length is its --max_model_len ("dest=max_model_len",
        # kserve/kserve@00397f1e python/huggingfaceserver/huggingfaceserver/__main__.py), from which vLLM's engine
        # arguments are built; with both given, the documented --max_model_len is taken
        length = flags.pop("--max-length")
        flags.setdefault("--max-model-len", length)
    uri = str(model.get("storageUri") or "")
    name = flags.get("--model-id") or flags.get("--model")
    notes: tuple[str, ...] = (f"the {runtime}'s vLLM release is not known; sized as the newest",)
    if name is None and uri.startswith("hf://"):
        name = hf_uri_model(uri)
    container = {**model, "name": "kserve-container", "image": "", "command": [], "args": args}
    pod = {**predictor, "containers": [container]}
    found = _Found(container, pod, EngineCommand(engine.how, None, flags, engine.words), env)
    workers = _kserve_workers(predictor, container)
    notes = (*notes, *workers.pop("notes", ()))
    if name is None and uri:  # pvc://, s3://, oci:// (a modelcar): the location, Unknown until annotated
        return _runtime_args_unread(
            named, _reading("InferenceService", meta, found, configmaps, model=uri, notes=notes, **workers)
        )
    if name is None:
        reading = _reading("InferenceService", meta, found, configmaps, notes=notes, **workers)
        return _finish(reading, unknown=f"no --model_id or storageUri: {MODEL_ANNOTATION_HINT}")
    return _runtime_args_unread(
        named, _reading("InferenceService", meta, found, configmaps, model=name, notes=notes, **workers)
    )


#: KServe's own ClusterServingRuntimes for these formats (kserve/kserve config/runtimes: kserve-huggingfaceserver*,
#: kserve-vllmserver* @1cb62ae8: ``vllm serve ${MODEL} --host 0.0.0.0 --port 8000 $@``), whose args set nothing that
#: moves memory.
KSERVE_BUILTIN_RUNTIMES = frozenset(
    {
        "kserve-huggingfaceserver", "kserve-huggingfaceserver-multinode",
        "kserve-vllmserver", "kserve-vllmserver-multinode",
    }
)  # fmt: skip


def _runtime_args_unread(runtime: str, reading: Reading) -> Reading:
    """``reading``, with its named ServingRuntime's args marked unread where the runtime is not KServe's own.

    hunt136 F1: OpenShift AI's InferenceServices name their ``vllm-cuda-runtime`` (modelFormat vLLM), whose args
    (``--max-model-len=8192``) KServe puts before the predictor's; without that runtime (Red Hat's guides keep it in
    a file of its own, or in a Template) a misfit is one fitgate cannot show: Unknown (workloads.finish), a fit a fit.
    """
    if not runtime or runtime in KSERVE_BUILTIN_RUNTIMES:
        return reading
    return replace(reading, unresolved=(*reading.unresolved, f"ServingRuntime {runtime[:63]}'s args"))


def _llm_inference_service(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A KServe LLMInferenceService's decode workload (``spec.template``); ``fitgate check`` also sizes its prefill.

    See :func:`llm_inference_workloads`. The webhook answers one object with one reading, as for Dynamo's workers;
    the note names the prefill pool, which ``fitgate check`` sizes on its own.
    """
    parts = llm_inference_workloads(obj, configmaps)
    if not parts:
        return None
    first = parts[0]
    if len(parts) > 1:
        note = "also the prefill workload (spec.prefill): `fitgate check` sizes it on its own"
        return _finish(first, notes=(*first.notes, note))
    return first


def llm_inference_workloads(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """A KServe LLMInferenceService's vLLM servers: the decode workload, then the prefill one (``spec.prefill``).

    ``spec.model.uri`` is shared; each workload has its own ``parallelism``, ``template`` and ``worker``
    (kserve/kserve ``pkg/apis/serving/v1alpha1/llm_inference_service_types.go``: ``LLMInferenceServiceSpec`` embeds
    ``WorkloadSpec`` and holds ``Prefill *WorkloadSpec``, "enables prefill/decode disaggregation"; the P/D samples
    under ``docs/samples/llmisvc`` give the prefill pool its own template, args and parallelism, kserve@aaac4e29).
    A prefill without a template of its own reads the decode template's containers (the controller starts both from
    the same base configuration), with its own parallelism where it states one.
    """
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    uri = str(as_dict(spec.get("model")).get("uri") or "")
    prefill = as_dict(spec.get("prefill"))
    if not prefill:
        reading = _llm_inference_workload(meta, uri, spec, configmaps, ())
        return [] if reading is None else [_with_base_refs(reading, spec)]
    return [_with_base_refs(r, spec) for r in _llm_inference_roles(meta, uri, spec, prefill, configmaps)]


def _with_base_refs(reading: Reading, spec: dict[str, Any]) -> Reading:
    """``reading`` with the configs ``spec.baseRefs`` names as unread words: a misfit without them is Unknown.

    hunt157 S5: ``baseRefs`` lists LLMInferenceServiceConfig objects the controller merges under the spec ("the
    current LLMInferenceService spec taking the highest precedence", LLMInferenceServiceSpec.BaseRefs); fitgate reads
    the spec alone, so args a config holds (``--max-model-len``) could be the ones that make it fit.
    """
    refs = [str(as_dict(r).get("name") or "?")[:63] for r in as_list(spec.get("baseRefs"))[:8]]
    if not refs:
        return reading
    return replace(reading, unresolved=(*reading.unresolved, *(f"LLMInferenceServiceConfig {r}'s spec" for r in refs)))


def _llm_inference_roles(
    meta: dict[str, Any],
    uri: str,
    spec: dict[str, Any],
    prefill: dict[str, Any],
    configmaps: Mapping[str, Mapping[str, str]],
) -> list[Reading]:
    """The decode and prefill workloads of an LLMInferenceService with ``spec.prefill``."""
    out: list[Reading] = []
    name = str(meta.get("name") or "?")
    inherited = {**spec, **{k: v for k, v in prefill.items() if v not in (None, {}, [])}}
    notes = () if prefill.get("template") else ("spec.prefill has no template: the decode template's containers read",)
    for role, part, role_notes in (("", spec, ()), ("/prefill", inherited, notes)):  # decode keeps the object's name
        reading = _llm_inference_workload({**meta, "name": name + role}, uri, part, configmaps, role_notes)
        if reading is not None:
            out.append(reading)
    return out


def _llm_inference_workload(
    meta: dict[str, Any],
    uri: str,
    spec: dict[str, Any],
    configmaps: Mapping[str, Mapping[str, str]],
    notes: tuple[str, ...],
) -> Reading | None:
    """One workload of an LLMInferenceService: ``parallelism``, ``template`` and ``worker`` of ``spec``.

    The controller writes the ``vllm serve`` command; the template's ``main`` container holds the GPU
    limit, its ``args`` and ``VLLM_ADDITIONAL_ARGS`` (engine flags the default configuration appends).
    With a ``worker``, a replica is ``data / dataLocal`` pods (else one per pipeline stage).
    """
    template = as_dict(spec.get("template"))
    par = as_dict(spec.get("parallelism"))
    extra: dict[str, str] = {}
    origins: dict[str, tuple[str, ...]] = {}
    for key, flag in (
        ("tensor", "--tensor-parallel-size"),
        ("pipeline", "--pipeline-parallel-size"),
        ("data", "--data-parallel-size"),
        ("dataLocal", "--data-parallel-size-local"),
    ):
        if isinstance(par.get(key), int) and not isinstance(par.get(key), bool):
            extra[flag] = str(par[key])
            origins[flag] = ("field", f"spec.parallelism.{key}")
    if par.get("expert") is True:  # the controller passes --enable-expert-parallel (docs/parallelism.md)
        extra["--enable-expert-parallel"] = "true"
        origins["--enable-expert-parallel"] = ("field", "spec.parallelism.expert")
    containers = [as_dict(c) for c in as_list(template.get("containers"))]
    main = next((c for c in containers if c.get("name") == "main"), containers[0] if containers else {"name": "main"})
    env = container_env(main.get("env"))
    found = _find_vllm(template)
    if found is None and (runs_on_cpu(main) or main.get("command")):
        # hunt27 F3: KServe's CPU smoke test (image vllm/vllm-openai-cpu) and a template running a command of its own
        # (llm-d's inference simulator, /app/llm-d-inference-sim): no vLLM server on GPUs, as for a Deployment
        return None
    if found is None:  # the controller supplies `vllm serve`; the template holds resources and args
        engine = parse_engine_argv("LLMInferenceService", [str(a) for a in as_list(main.get("args"))])
        found = _Found(main, template, engine, env)
    additional = env.get("VLLM_ADDITIONAL_ARGS", "")
    if additional:
        check_script(additional, f"container {main.get('name')}: env VLLM_ADDITIONAL_ARGS")  # hunt83 F1
        try:
            words = shlex.split(additional)
        except ValueError as exc:
            raise WorkloadError(f"container {main.get('name')}: env VLLM_ADDITIONAL_ARGS: {exc}") from None
        additional_flags = parse_engine_argv("VLLM_ADDITIONAL_ARGS", words).flags
        extra.update(additional_flags)
        origins.update(dict.fromkeys(additional_flags, ("env-args", "VLLM_ADDITIONAL_ARGS")))
    name = hf_uri_model(uri) if uri.startswith("hf://") else None
    pods = 1
    if spec.get("worker"):
        data, local = par.get("data"), par.get("dataLocal")
        if isinstance(data, int) and isinstance(local, int) and local > 0:
            pods = max(1, -(-data // local))
        else:
            pods = max(1, int(par.get("pipeline") or 1))
            notes = (*notes, "multi-node LLMInferenceService: one node per pipeline stage assumed")
    _, per_pod = gpu_limit_of(found.container)
    reading = _reading(
        "LLMInferenceService",
        meta,
        found,
        configmaps,
        model=name or uri or None,  # a non-hf:// uri: its location, Unknown until annotated
        extra_flags=extra,
        extra_origins=origins,
        gpus_per_replica=per_pod * pods,
        pods_per_replica=pods,
        notes=notes,
    )
    if name is None and reading.invalid is None:
        why = f"spec.model.uri {uri or '(none)'}: fitgate reads hf:// models only; {MODEL_ANNOTATION_HINT}"
        return _finish(reading, unknown=why, model=uri or None, model_location=uri or None)
    return reading


#: KServe's managed DRA (serving.kserve.io/exp-dra-device-class, -device-count: pkg/constants/constants.go,
#: kserve@0c5166a2d L144-147): its controller makes the ResourceClaimTemplate and injects the claim after admission.
KSERVE_DRA_CLASS = "serving.kserve.io/exp-dra-device-class"
KSERVE_DRA_COUNT = "serving.kserve.io/exp-dra-device-count"


def _kserve_managed_dra(obj: Mapping[str, Any]) -> str | None:
    """Why a KServe service whose GPUs come from a claim its controller makes later is not sized (hunt16 D1)."""
    annotations = as_dict(as_dict(obj.get("metadata")).get("annotations"))
    device_class = annotations.get(KSERVE_DRA_CLASS)
    if not isinstance(device_class, str) or not device_class:
        return None
    count = str(annotations.get(KSERVE_DRA_COUNT, "1"))[:10]
    return (
        f"KServe managed DRA: {count} device(s) of class {device_class[:63]} by a claim KServe makes after "
        "admission; not sized"
    )


#: OpenShift AI's annotation of a ServingRuntime's own release (odh-dashboard ``getServingRuntimeVersionFromTemplate``):
#: a vLLM runtime's is the vLLM release (``v0.10.1.1`` on ``vllm-cuda-runtime``, hunt136 F3), which its Red Hat image
#: tag (``rhoai-2.20-cuda``) does not name.
RUNTIME_VERSION_ANNOTATION = "opendatahub.io/runtime-version"
_RELEASE = re.compile(r"v?(\d+\.\d+\.\d+)(?:\.\d+)?")


def runtimes_of(objects: list[Any]) -> dict[str, dict[str, Any]]:
    """ServingRuntime / ClusterServingRuntime name -> spec, of a manifest set.

    A runtime annotated with its release (:data:`RUNTIME_VERSION_ANNOTATION`) gives its containers ``VLLM_VERSION``
    where they set none, the variable fitgate reads the release from when an image tag names none (a copy: the
    manifest is not changed; a vLLM runtime's release is vLLM's, another server's is never read as one).
    """
    out: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if isinstance(obj, dict) and obj.get("kind") in ("ServingRuntime", "ClusterServingRuntime"):
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            spec = obj.get("spec")
            if name and isinstance(spec, dict):
                version = str((meta.get("annotations") or {}).get(RUNTIME_VERSION_ANNOTATION) or "")[:40]
                match = _RELEASE.fullmatch(version.strip())
                out[name] = _with_release(spec, match.group(1)) if match else spec
    return out


def _with_release(spec: dict[str, Any], release: str) -> dict[str, Any]:
    """``spec`` whose containers carry ``VLLM_VERSION=release`` where they set no such variable."""

    def tagged(container: dict[str, Any]) -> dict[str, Any]:
        env = as_list(container.get("env"))
        if any(as_dict(e).get("name") == "VLLM_VERSION" for e in env):
            return container
        return {**container, "env": [*env, {"name": "VLLM_VERSION", "value": release}]}

    containers = [tagged(c) if isinstance(c, dict) else c for c in as_list(spec.get("containers"))]
    return {**spec, "containers": containers}
