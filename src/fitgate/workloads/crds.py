"""Readers of the inference CRDs that write the vLLM pod themselves: KAITO, NVIDIA Dynamo, production-stack.

Each turns its object into the pod template its controller would write (the vLLM container's command,
args, image and GPU limit) and reads that on the one path of :mod:`fitgate.workloads.reader`. What the
controller decides from the cluster (KAITO's tensor parallelism from an instance type's GPUs) is not
guessed: the reading is Unknown and says what to set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from fitgate.sizing.instances import instance_gpus
from fitgate.sizing.units import parse_size
from fitgate.workloads.bounds import SAFE_LOADER, BudgetError, too_many_digits
from fitgate.workloads.container import MAX_CONFIG_BYTES, _blank, _find_vllm, _finish, _reading, first_of_parts
from fitgate.workloads.flagvalues import config_file_flags
from fitgate.workloads.kubeai import read_kubeai_model
from fitgate.workloads.podspec import as_dict, as_list, at_path, gpu_limit_of, runai_devices
from fitgate.workloads.rayservice import read_ray_cluster, read_ray_llm, read_ray_service
from fitgate.workloads.reader import (
    _leader_worker_set,
    annotated_model,
    llm_inference_workloads,
    with_model_annotation,
    with_object_metadata,
)
from fitgate.workloads.reading import Reading, WorkloadError
from fitgate.workloads.sagemaker import read_inference_endpoint_config

Reader = Callable[[dict[str, Any], Mapping[str, Mapping[str, str]]], "Reading | None"]

# ---------------------------------------------------------------------------------------------
# KAITO Workspace / InferenceSet

#: KAITO preset name -> (Hub repo id, revision): kaito-project/kaito presets/workspace/models/supported_models.yaml
#: @056b8280b1a8debf644bc6f4399e913a1f9c7e70 (each preset's ``version`` URL).
KAITO_PRESETS: dict[str, tuple[str, str]] = {
    "llama-3.1-8b-instruct": ("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"),
    "llama-3.3-70b-instruct": ("meta-llama/Llama-3.3-70B-Instruct", "6f6073b423013f6a7d4d9f39144961bfbfbc386b"),
    "deepseek-r1-0528": ("deepseek-ai/DeepSeek-R1-0528", "4236a6af538feda4548eca9ab308586007567f52"),
    "deepseek-v3-0324": ("deepseek-ai/DeepSeek-V3-0324", "e9b33add76883f293d6bf61f6bd89b497e80e335"),
    "falcon-7b": ("tiiuae/falcon-7b", "898df1396f35e447d5fe44e0a3ccaaaa69f30d36"),
    "falcon-7b-instruct": ("tiiuae/falcon-7b-instruct", "cf4b3c42ce2fdfe24f753f0f0d179202fea59c99"),
    "falcon-40b": ("tiiuae/falcon-40b", "4a70170c215b36a3cce4b4253f6d0612bb7d4146"),
    "falcon-40b-instruct": ("tiiuae/falcon-40b-instruct", "ecb78d97ac356d098e79f0db222c9ce7c5d9ee5f"),
    "mistral-7b": ("mistralai/Mistral-7B-v0.3", "d8cadc02ac76bd617a919d50b092e59d2d110aff"),
    "mistral-7b-instruct": ("mistralai/Mistral-7B-Instruct-v0.3", "e0bc86c23ce5aae1db576c8cca6f06f1f73af2db"),
    "ministral-3-3b-instruct": ("mistralai/Ministral-3-3B-Instruct-2512", "83e15808ff6a115f18ff8e68123db3ab35035714"),
    "ministral-3-8b-instruct": ("mistralai/Ministral-3-8B-Instruct-2512", "df904c183734f8760042c708d3629a4ed68b103a"),
    "ministral-3-14b-instruct": ("mistralai/Ministral-3-14B-Instruct-2512", "6aa4534f7bb46d16753bd12a08b32810a06b7a14"),
    "mistral-large-3-675b-instruct": (
        "mistralai/Mistral-Large-3-675B-Instruct-2512",
        "7f13ed24ab52a2a1c35bb26a749ef9d891ee98dd",
    ),
    "phi-2": ("microsoft/phi-2", "ef382358ec9e382308935a992d908de099b64c23"),
    "phi-3-mini-4k-instruct": ("microsoft/Phi-3-mini-4k-instruct", "0a67737cc96d2554230f90338b163bc6380a2a85"),
    "phi-3-mini-128k-instruct": ("microsoft/Phi-3-mini-128k-instruct", "072cb7562cb8c4adf682a8e186aaafa49469eb5d"),
    "phi-3-medium-4k-instruct": ("microsoft/Phi-3-medium-4k-instruct", "b64223aaea6fbf273c0c8cd0801d5e732dce8897"),
    "phi-3-medium-128k-instruct": ("microsoft/Phi-3-medium-128k-instruct", "fa7d2aa4f5ea69b2e36b20d050cdae79c9bfbb3f"),
    "phi-3.5-mini-instruct": ("microsoft/Phi-3.5-mini-instruct", "3145e03a9fd4cdd7cd953c34d9bbf7ad606122ca"),
    "phi-4-mini-instruct": ("microsoft/Phi-4-mini-instruct", "c0fb9e74abda11b496b7907a9c6c9009a7a0488f"),
    "phi-4": ("microsoft/phi-4", "187ef0342fff0eb3333be9f00389385e95ef0b61"),
    "qwen2.5-coder-7b-instruct": ("Qwen/Qwen2.5-Coder-7B-Instruct", "c03e6d358207e414f1eca0bb1891e29f1db0e242"),
    "qwen2.5-coder-32b-instruct": ("Qwen/Qwen2.5-Coder-32B-Instruct", "381fc969f78efac66bc87ff7ddeadb7e73c218a7"),
    "deepseek-r1-distill-qwen-14b": (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        "1df8507178afcc1bef68cd8c393f61a886323761",
    ),
    "deepseek-r1-distill-llama-8b": (
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        "6a6f4aa4197940add57724a7707d069478df56b1",
    ),
    "gemma-3-4b-instruct": ("google/gemma-3-4b-it", "093f9f388b31de276ce2de164bdc2081324b9767"),
    "gemma-3-27b-instruct": ("google/gemma-3-27b-it", "005ad3404e59d6023443cb575daa05336842228a"),
    "gpt-oss-20b": ("openai/gpt-oss-20b", "db6852caddef0cf0c1f729034ed700c84eab376e"),
    "gpt-oss-120b": ("openai/gpt-oss-120b", "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"),
}
#: The vLLM of KAITO's base image at that commit: presets/workspace/dependencies/requirements.txt L4
#: ``vllm==0.25.1`` (the source of truth, presets/workspace/models/vllm_version_upgrade.md L14).
KAITO_VLLM = "0.25.1"
#: KAITO's base image at that commit (supported_models.yaml ``base`` tag 0.5.0), named in messages only.
KAITO_IMAGE = "mcr.microsoft.com/aks/kaito/kaito-base:0.5.0"
#: KAITO's key of the inference ConfigMap (charts/kaito/workspace/templates/inference-params.yaml).
KAITO_CONFIG_KEY = "inference_config.yaml"
#: KAITO's controller passes ``--gpu-memory-utilization=0.84`` to every vLLM preset, 0.82 on the "NVIDIA A10" SKUs
#: (pkg/model/interface.go @056b8280 L375-392, ``defaultGPUMemoryUtilization`` / ``gpuMemoryUtilizationByGPUModel``);
#: a value in the inference ConfigMap's vllm block comes later on the command line and wins. (inference_api.py's own
#: free-memory default, at most 0.95, applies only where the flag is absent, which the controller never leaves it.)
KAITO_DEFAULT_GMU = "0.84"
KAITO_GMU_BY_GPU = {"A10": "0.82"}
#: KAITO passes ``--max-model-len=auto`` to every vLLM preset (pkg/workspace/inference/preset_inferences.go
#: @056b8280 L581-590, ``MaxModelLenAuto``; pkg/model/interface.go L414-415): vLLM picks the longest that fits.
KAITO_MAX_MODEL_LEN = "auto"
#: Each preset's checkpoint size as KAITO's catalog gives it (presets/workspace/models/model_catalog.yaml @056b8280
#: ``modelFileSize``), which ``configureParallelism``'s first tier reads (pkg/model/interface.go L525-555, L605-619,
#: L686-698): a model under half of one GPU runs data parallel over the node's GPUs, TP 1.
KAITO_FILE_SIZES = {
    "llama-3.1-8b-instruct": "14.96Gi",
    "llama-3.3-70b-instruct": "131.42Gi",
    "deepseek-r1-0528": "641.30Gi",
    "deepseek-v3-0324": "641.30Gi",
    "mistral-7b": "13.50Gi",
    "mistral-7b-instruct": "13.50Gi",
    "ministral-3-3b-instruct": "4.35Gi",
    "ministral-3-8b-instruct": "9.70Gi",
    "ministral-3-14b-instruct": "14.65Gi",
    "mistral-large-3-675b-instruct": "634.70Gi",
    "phi-3-mini-4k-instruct": "7.12Gi",
    "phi-3-mini-128k-instruct": "7.12Gi",
    "phi-3-medium-4k-instruct": "26.00Gi",
    "phi-3-medium-128k-instruct": "26.00Gi",
    "phi-3.5-mini-instruct": "7.12Gi",
    "phi-4-mini-instruct": "7.15Gi",
    "phi-4": "27.31Gi",
    "qwen2.5-coder-7b-instruct": "14.19Gi",
    "qwen2.5-coder-32b-instruct": "61.03Gi",
    "deepseek-r1-distill-qwen-14b": "27.51Gi",
    "deepseek-r1-distill-llama-8b": "14.96Gi",
    "gemma-3-4b-instruct": "8.01Gi",
    "gemma-3-27b-instruct": "51.10Gi",
    "gpt-oss-20b": "25.63Gi",
    "gpt-oss-120b": "121.54Gi",
}
#: A Hub repo id as a preset name: KAITO accepts any since e42bb0418 ("simplify vLLM inference model support flow").
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")
#: The well-known node label of a node's instance type (kubernetes.io/docs reference/labels).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def _kaito_config(name: str, configmaps: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, str] | None, str | None]:
    """The ``vllm:`` block of a KAITO inference ConfigMap as flags, or (None, why it was not read)."""
    data = configmaps.get(name)
    if data is None:
        return None, f"inference.config: ConfigMap {name} (key {KAITO_CONFIG_KEY}) is not in the manifests read"
    text = data.get(KAITO_CONFIG_KEY)
    if text is None:
        return None, f"inference.config: ConfigMap {name} has no key {KAITO_CONFIG_KEY}"
    if len(text.encode()) > MAX_CONFIG_BYTES:
        # fitgate's bound, not KAITO's or vLLM's: Unknown (hunt207 F3)
        raise BudgetError(f"ConfigMap {name} key {KAITO_CONFIG_KEY} holds more than {MAX_CONFIG_BYTES} bytes")
    try:
        loaded = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"ConfigMap {name} key {KAITO_CONFIG_KEY} is not YAML: {exc}".splitlines()[0]) from None
    except ValueError:  # int() past its digit limit (hunt83 F3)
        raise WorkloadError(f"ConfigMap {name} key {KAITO_CONFIG_KEY}: {too_many_digits()}") from None
    return config_file_flags(as_dict(as_dict(loaded).get("vllm"))), None


def _kaito_spec(
    kind: str, obj: dict[str, Any], root: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]
) -> Reading | None:
    """A Workspace (``resource`` and ``inference`` at the top) or an InferenceSet's ``spec.template``."""
    meta = as_dict(obj.get("metadata"))
    resource = as_dict(root.get("resource"))
    inference = as_dict(root.get("inference"))
    if not inference:
        return None  # a tuning Workspace: no inference server
    instance = str(resource.get("instanceType") or "")
    selector = {str(k): str(v) for k, v in as_dict(as_dict(resource.get("labelSelector")).get("matchLabels")).items()}
    template = as_dict(inference.get("template"))
    if template:  # a custom pod template: read as written
        found = _find_vllm(as_dict(template.get("spec")))
        return _reading(kind, meta, found, configmaps) if found is not None else None
    preset = str(as_dict(inference.get("preset")).get("name") or "")
    if preset in KAITO_PRESETS:
        repo, revision = KAITO_PRESETS[preset]
    elif _HUB_ID.fullmatch(preset):
        repo, revision = preset, ""
    else:
        known = ", ".join(sorted(KAITO_PRESETS)[:8])
        missing = f"inference.preset.name {preset!r}: not a KAITO preset fitgate knows ({known}, ...) nor a Hub repo id"
        return _finish(_blank(kind, meta), unknown=missing)
    node_gpus = instance_gpus(instance) if instance else None
    gmu = KAITO_GMU_BY_GPU.get(node_gpus.gpu.name, KAITO_DEFAULT_GMU) if node_gpus else KAITO_DEFAULT_GMU
    # what KAITO's controller puts on the command line before the ConfigMap's flags, which win
    flags: dict[str, str] = {"--gpu-memory-utilization": gmu, "--max-model-len": KAITO_MAX_MODEL_LEN}
    notes: list[str] = [
        f"KAITO passes --gpu-memory-utilization={gmu} and --max-model-len=auto (vLLM picks the longest that fits) "
        "unless its inference ConfigMap sets them"
    ]
    unknown: str | None = None
    ref: tuple[str, str] | None = None
    given: set[str] = set()
    config = str(inference.get("config") or "")
    if config:
        read, why = _kaito_config(config, configmaps)
        if read is None:
            unknown, ref = why, (config, KAITO_CONFIG_KEY)
        else:
            given = set(read)
            flags.update(read)
    nodes = resource.get("count")
    pods = nodes if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1 else 1
    size = KAITO_FILE_SIZES.get(preset)
    if (
        pods == 1
        and node_gpus is not None
        and node_gpus.count > 1
        and size is not None
        and not given & {"--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size"}
        and parse_size(size) * 2 < node_gpus.gpu.memory_bytes
    ):
        # KAITO's first tier: a checkpoint under half of one GPU runs on every GPU of the node, data parallel
        flags["--data-parallel-size"] = str(node_gpus.count)
        flags["--tensor-parallel-size"] = "1"
        notes.append(
            f"KAITO preset {preset}: {size} under half of one {node_gpus.gpu.name}: KAITO runs "
            f"--data-parallel-size {node_gpus.count} --tensor-parallel-size 1"
        )
    if pods > 1 and "--pipeline-parallel-size" not in flags:
        # KAITO's multi-node rule: pipeline parallelism over the nodes, TP within each (pkg/model/interface.go
        # L543-569 @056b8280); the ConfigMap's vllm block comes after on the command line and wins
        # (presets/workspace/inference/vllm/inference_api.py L140-143), so a value written there is kept.
        flags["--pipeline-parallel-size"] = str(pods)
        notes.append(f"resource.count {pods}: KAITO runs pipeline parallelism over the {pods} nodes")
    if "--tensor-parallel-size" not in flags and node_gpus is not None:
        # KAITO sets --tensor-parallel-size to the GPUs of each node: the instance type's (sizing/data/cloud_gpus.json)
        flags["--tensor-parallel-size"] = str(node_gpus.count)
        notes.append(
            f"resource.instanceType {instance}: {node_gpus.count} x {node_gpus.gpu.name} a node ({node_gpus.source}); "
            f"KAITO runs --tensor-parallel-size {node_gpus.count}"
        )
    tp = (
        int(flags.get("--tensor-parallel-size", "1"))
        if re.fullmatch(r"\d+", flags.get("--tensor-parallel-size", "1"))
        else 1
    )
    pp = (
        int(flags["--pipeline-parallel-size"]) if re.fullmatch(r"\d+", flags.get("--pipeline-parallel-size", "")) else 1
    )
    dp = int(flags["--data-parallel-size"]) if re.fullmatch(r"\d+", flags.get("--data-parallel-size", "")) else 1
    args = [f"{k}={v}" if v != "true" else k for k, v in flags.items()]
    container = {
        "name": "inference",
        "image": KAITO_IMAGE,
        "command": ["vllm", "serve", repo, *(("--revision", revision) if revision else ()), *args],
        "env": [{"name": "VLLM_VERSION", "value": KAITO_VLLM}],
        "resources": {"limits": {"nvidia.com/gpu": str(-(-(dp * tp * pp) // pods))}},
    }
    if instance:
        selector[INSTANCE_TYPE_LABEL] = instance
        notes.append(
            f"resource.instanceType {instance}: the GPU is that of the nodes labelled {INSTANCE_TYPE_LABEL}={instance}"
        )
    pod = {"containers": [container], "nodeSelector": selector}
    found = _find_vllm(pod)
    if found is None:
        return None
    notes.append(f"KAITO's base image runs vLLM {KAITO_VLLM} (kaito @056b8280 requirements.txt); sized for it")
    reading = _reading(
        kind,
        meta,
        found,
        configmaps,
        gpus_per_replica=-(-(dp * tp * pp) // pods) * pods,
        pods_per_replica=pods,
        notes=(f"KAITO preset {preset}", *notes),
    )
    reading = _finish(reading, gpu_resource="nvidia.com/gpu", config_map=ref or reading.config_map)
    if unknown is not None and reading.invalid is None:
        return _finish(reading, unknown=unknown)
    if "--tensor-parallel-size" not in flags and reading.unknown is None and reading.invalid is None:
        why = (
            "KAITO sets --tensor-parallel-size to the GPUs of each node"
            + (f" ({instance})" if instance else "")
            + ", which fitgate does not know here; set tensor-parallel-size in the inference ConfigMap's vllm block"
        )
        return _finish(reading, unknown=why)
    return reading


def read_kaito_workspace(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A KAITO Workspace (kaito.sh): ``resource`` and ``inference`` are top-level fields, not under ``spec``."""
    return _kaito_spec("Workspace", obj, obj, configmaps)


def read_kaito_inference_set(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A KAITO InferenceSet: ``spec.template`` is a Workspace's ``resource`` and ``inference`` (one per replica)."""
    return _kaito_spec("InferenceSet", obj, as_dict(at_path(obj, "spec.template")), configmaps)


# ---------------------------------------------------------------------------------------------
# NVIDIA Dynamo DynamoGraphDeployment


#: The component types Dynamo's operator runs as vLLM workers (hunt16 G11: ``prefill`` / ``decode`` services of
#: disaggregated graphs were skipped; token-labs' api.tokenlabs.run runs them).
DYNAMO_WORKER_TYPES = frozenset({"worker", "prefill", "decode"})


def dynamo_workers(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any], int, str, dict[str, Any]]]:
    """(service name, pod spec, nodes per replica, role, pod annotations) of each vLLM worker of a graph.

    v1alpha1: ``spec.services.<name>`` with ``componentType: worker``, ``extraPodSpec.mainContainer``,
    ``resources.limits.gpu`` and ``extraPodMetadata.annotations``; v1beta1: ``spec.components[]`` with ``type:
    worker`` and ``podTemplate``. Decode workers first (they hold the KV cache of generation), then prefill, then the
    others. The annotations carry Run:ai / KAI's ``gpu-fraction`` (hunt79 F2: NVIDIA's Dynamo guide for KAI).
    """
    out: list[tuple[str, dict[str, Any], int, str, dict[str, Any]]] = []
    spec = as_dict(obj.get("spec"))
    for name, raw in list(as_dict(spec.get("services")).items())[:64]:
        service = as_dict(raw)
        kind = str(service.get("componentType") or "")
        if kind not in DYNAMO_WORKER_TYPES:
            continue
        extra = as_dict(service.get("extraPodSpec"))
        main = as_dict(extra.get("mainContainer"))  # python3 -m dynamo.vllm: argv.DYNAMO_VLLM_MODULE
        gpus = as_dict(as_dict(service.get("resources")).get("limits")).get("gpu")
        if gpus is not None and not as_dict(main.get("resources")):
            main = {**main, "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        main.setdefault("name", "main")
        main = {**main, "env": [*as_list(main.get("env")), *as_list(service.get("envs"))]}
        pod = {**{k: v for k, v in extra.items() if k != "mainContainer"}, "containers": [main]}
        nodes = as_dict(service.get("multinode")).get("nodeCount", 1)
        out.append(
            (
                str(name),
                pod,
                nodes if isinstance(nodes, int) and nodes > 0 else 1,
                str(service.get("subComponentType") or ("" if kind == "worker" else kind)),
                as_dict(as_dict(service.get("extraPodMetadata")).get("annotations")),
            )
        )
    for component in (as_dict(c) for c in as_list(spec.get("components"))[:64]):
        kind = str(component.get("type") or "")
        if kind not in DYNAMO_WORKER_TYPES:
            continue
        pod = as_dict(at_path(component, "podTemplate.spec"))
        nodes = as_dict(component.get("multinode")).get("nodeCount", 1)
        role = str(component.get("subComponentType") or component.get("subType") or ("" if kind == "worker" else kind))
        notes = as_dict(at_path(component, "podTemplate.metadata.annotations"))
        count = nodes if isinstance(nodes, int) and nodes > 0 else 1
        out.append((str(component.get("name") or "?"), pod, count, role, notes))
    order = {"decode": 0, "prefill": 1}
    return sorted(out, key=lambda w: order.get(w[3], 2))


def read_dynamo_workers(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """One reading per vLLM worker of a DynamoGraphDeployment, named ``<graph>/<service>``."""
    meta = as_dict(obj.get("metadata"))
    out: list[Reading] = []
    for name, pod, nodes, role, pod_notes in dynamo_workers(obj):
        found = _find_vllm(pod)
        if found is None:
            continue
        worker_meta = {**meta, "name": f"{meta.get('name') or '?'}/{name}"}
        _, per_pod = gpu_limit_of(found.container)
        if not per_pod and ("gpu-fraction" in pod_notes or "gpu-memory" in pod_notes):
            per_pod = runai_devices(pod_notes)  # a Run:ai / KAI fraction asks for no nvidia.com/gpu (as on any pod)
        notes = (f"Dynamo {role + ' ' if role else ''}worker {name} (python3 -m dynamo.vllm: vLLM's engine args)",)
        reading = _reading(
            "DynamoGraphDeployment",
            worker_meta,
            found,
            configmaps,
            gpus_per_replica=per_pod * nodes,
            pods_per_replica=nodes,
            notes=notes,
            pod_annotations=pod_notes,
        )
        # the graph's fitgate.io/model names what a worker's local path holds, as on any workload
        out.append(with_model_annotation(reading, annotated_model(obj, None)))
    return out


def read_dynamo(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The first vLLM worker of a DynamoGraphDeployment (decode first); ``fitgate check`` reads them all."""
    return first_of_parts(read_dynamo_workers(obj, configmaps), "workers")


# ---------------------------------------------------------------------------------------------
# vLLM production-stack VLLMRuntime


def read_vllm_runtime(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A production-stack VLLMRuntime: the ``vllm serve`` its operator writes.

    vllm-project/production-stack operator/internal/controller/vllmruntime_controller.go
    (@a6c01db05f65f556235413ba8dbcfb0c01132fff) L441-512: ``vllm serve <modelURL>`` with ``--enable-lora``
    (``model.enableLoRA``), ``--[no-]enable-chunked-prefill`` (always written), ``--[no-]enable-prefix-caching``,
    ``--max-model-len``, ``--dtype``, ``--tensor-parallel-size``, ``--max-num-seqs``, ``--gpu_memory_utilization``,
    ``--max_loras`` (``vllmConfig.maxLoras``) and ``extraArgs``, then ``--kv-transfer-config`` LMCache's connector
    with ``lmCacheConfig.enabled`` (L541-564), and env ``VLLM_USE_V1`` 1 or 0 from ``vllmConfig.v1`` (hunt115 F1:
    LoRA slots, chunked prefill off and the V0 switch were not read); the GPU limit is
    ``deploymentConfig.resources.gpu`` of ``gpuType`` (default nvidia.com/gpu); the image is
    ``deploymentConfig.image.registry/name``.
    """
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    model = as_dict(spec.get("model"))
    vllm = as_dict(spec.get("vllmConfig"))
    deploy = as_dict(spec.get("deploymentConfig"))
    args: list[str] = ["--enable-lora"] if model.get("enableLoRA") is True else []
    args.append("--enable-chunked-prefill" if vllm.get("enableChunkedPrefill") else "--no-enable-chunked-prefill")
    args.append("--enable-prefix-caching" if vllm.get("enablePrefixCaching") else "--no-enable-prefix-caching")
    for key, flag in (("maxModelLen", "--max-model-len"), ("dtype", "--dtype")):
        if model.get(key) not in (None, "", 0):
            args += [flag, str(model[key])]
    if vllm.get("tensorParallelSize") not in (None, 0):
        args += ["--tensor-parallel-size", str(vllm["tensorParallelSize"])]
    if model.get("maxNumSeqs") not in (None, "", 0):
        args += ["--max-num-seqs", str(model["maxNumSeqs"])]
    if vllm.get("gpuMemoryUtilization") not in (None, ""):
        args += ["--gpu_memory_utilization", str(vllm["gpuMemoryUtilization"])]
    if vllm.get("maxLoras") not in (None, "", 0):
        args += ["--max_loras", str(vllm["maxLoras"])]
    args += [str(a) for a in as_list(vllm.get("extraArgs"))]
    v1 = vllm.get("v1") is True
    if as_dict(spec.get("lmCacheConfig")).get("enabled") is True:
        connector = "LMCacheConnectorV1" if v1 else "LMCacheConnector"
        args += ["--kv-transfer-config", json.dumps({"kv_connector": connector, "kv_role": "kv_both"})]
    env = [{"name": "VLLM_USE_V1", "value": "1" if v1 else "0"}, *as_list(vllm.get("env"))]
    image = as_dict(deploy.get("image"))
    registry, name = str(image.get("registry") or ""), str(image.get("name") or "")
    resources = as_dict(deploy.get("resources"))
    gpu_type = str(resources.get("gpuType") or "nvidia.com/gpu")
    container = {
        "name": "vllm",
        "image": f"{registry}/{name}" if registry and name else name,
        "command": ["vllm", "serve", str(model.get("modelURL") or "")],
        "args": args,
        "env": env,
        "resources": {"limits": {gpu_type: str(resources.get("gpu") or 0)}} if resources.get("gpu") else {},
    }
    pod: dict[str, Any] = {"containers": [container], "tolerations": as_list(deploy.get("toleration"))}
    terms = as_list(deploy.get("nodeSelectorTerms"))
    if terms:
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    found = _find_vllm(pod)
    if found is None:
        return None
    annotations = as_dict(deploy.get("podAnnotations"))
    return _reading("VLLMRuntime", meta, found, configmaps, pod_annotations=annotations)


# ---------------------------------------------------------------------------------------------
# DisaggregatedSet (kubernetes-sigs/lws; llm-d's prefill/decode recipe)


def read_disaggregated_roles(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """One reading per role of a DisaggregatedSet, decode first, each read as the LeaderWorkerSet it creates.

    ``spec.roles[].spec.leaderWorkerTemplate`` (llm-d/llm-d guides/recipes/modelserver/base/single-host/
    pd-disaggregatedset/base/disaggregatedset.yaml @b266d244): the controller creates one LeaderWorkerSet per role.
    """
    meta = as_dict(obj.get("metadata"))
    roles = [as_dict(r) for r in as_list(at_path(obj, "spec.roles"))[:16]]
    roles.sort(key=lambda r: {"decode": 0, "prefill": 1}.get(str(r.get("name")), 2))
    out: list[Reading] = []
    for role in roles:
        lws = {
            "kind": "LeaderWorkerSet",
            "metadata": {**meta, "name": f"{meta.get('name') or '?'}/{role.get('name') or '?'}"},
            "spec": as_dict(role.get("spec")),
        }
        reading = _leader_worker_set(lws, configmaps)
        if reading is not None:
            out.append(_finish(reading, kind="DisaggregatedSet"))
    return out


def read_disaggregated_set(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The decode role of a DisaggregatedSet (else its first); ``fitgate check`` reads every role."""
    return first_of_parts(read_disaggregated_roles(obj, configmaps), "roles")


# ---------------------------------------------------------------------------------------------
# StormService (vllm-project/aibrix; its prefill/decode roles)


def read_storm_roles(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """One reading per role of an AIBrix StormService, decode first, each a replica of ``podGroupSize`` pods.

    ``spec.template.spec.roles[]`` (vllm-project/aibrix api/orchestration/v1alpha1/stormservice_types.go,
    roleset_types.go @0a53a25f ``RoleSpec``: ``name``, ``replicas``, ``podGroupSize`` "the number of pods to form a
    minimum role instance ... for multi-node inference, set > 1", ``template`` a PodTemplateSpec): read as the
    LeaderWorkerSet of that many pods it amounts to, as a DisaggregatedSet's roles are (hunt104 F3: Skipped before).
    """
    meta = as_dict(obj.get("metadata"))
    roles = [as_dict(r) for r in as_list(at_path(obj, "spec.template.spec.roles"))[:16]]
    roles.sort(key=lambda r: {"decode": 0, "prefill": 1}.get(str(r.get("name")), 2))
    out: list[Reading] = []
    for role in roles:
        size = role.get("podGroupSize", 1)
        lws = {
            "kind": "LeaderWorkerSet",
            "metadata": {**meta, "name": f"{meta.get('name') or '?'}/{role.get('name') or '?'}"},
            "spec": {"leaderWorkerTemplate": {"size": size, "workerTemplate": as_dict(role.get("template"))}},
        }
        reading = _leader_worker_set(lws, configmaps)
        if reading is not None:
            invalid = reading.invalid
            if invalid is not None:  # name the StormService's own field, not the LeaderWorkerSet's
                invalid = invalid.replace("spec.leaderWorkerTemplate.size", f"role {role.get('name')}: podGroupSize")
            out.append(with_object_metadata(obj, _finish(reading, kind="StormService", invalid=invalid), None))
    return out


def read_storm_service(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The decode role of a StormService (else its first); ``fitgate check`` reads every role."""
    return first_of_parts(read_storm_roles(obj, configmaps), "roles")


def read_ray_cluster_fleet(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """An AIBrix RayClusterFleet: ``spec.template.spec`` is a KubeRay RayClusterSpec, one per replica.

    vllm-project/aibrix api/orchestration/v1alpha1/rayclusterfleet_types.go @74df9f96 (``RayClusterTemplateSpec``:
    ``spec rayclusterv1.RayClusterSpec``); its samples run ``vllm serve --distributed-executor-backend ray`` on the
    head, as a RayCluster does (hunt104 F3: Skipped before).
    """
    spec = at_path(obj, "spec.template.spec")
    cluster = {"kind": "RayCluster", "metadata": as_dict(obj.get("metadata")), "spec": spec}
    reading = read_ray_cluster(cluster, configmaps)
    return None if reading is None else _finish(reading, kind="RayClusterFleet")


def read_llm_inference_parts(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """A KServe LLMInferenceService's decode and prefill workloads (hunt104 F1), each read as the webhook reads it."""
    return [with_object_metadata(obj, r, None) for r in llm_inference_workloads(obj, configmaps)]


#: Kinds of several vLLM servers (one per worker or role): kind -> the readings of all of them.
PARTS_READERS: dict[str, Callable[[dict[str, Any], Mapping[str, Mapping[str, str]]], list[Reading]]] = {
    "DynamoGraphDeployment": read_dynamo_workers,
    "DisaggregatedSet": read_disaggregated_roles,
    "RayService": read_ray_llm,
    "LLMInferenceService": read_llm_inference_parts,
    "StormService": read_storm_roles,
}

#: Kind -> reader, for the CRD kinds of :data:`fitgate.workloads.kinds.KINDS` read here.
CRD_READERS: dict[str, Reader] = {
    "Workspace": read_kaito_workspace,
    "InferenceSet": read_kaito_inference_set,
    "DynamoGraphDeployment": read_dynamo,
    "VLLMRuntime": read_vllm_runtime,
    "DisaggregatedSet": read_disaggregated_set,
    "RayService": read_ray_service,
    "RayCluster": read_ray_cluster,
    "Model": read_kubeai_model,
    "StormService": read_storm_service,
    "RayClusterFleet": read_ray_cluster_fleet,
    "InferenceEndpointConfig": read_inference_endpoint_config,
}
