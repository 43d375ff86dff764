"""KubeRay's RayService running vLLM: Ray Serve LLM's ``llm_configs`` and KubeRay's own vLLM sample.

Each model of ``spec.serveConfigV2`` becomes the ``vllm serve`` container its worker group would run, read on the one
path of :mod:`fitgate.workloads.reader` (as :mod:`fitgate.workloads.crds` does for the other CRDs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from fitgate.workloads.bounds import SAFE_LOADER, BudgetError, too_many_digits
from fitgate.workloads.container import _blank, _find_vllm, _finish, _reading, first_of_parts
from fitgate.workloads.flagvalues import config_file_flags
from fitgate.workloads.mounted_scripts import with_mounted_scripts
from fitgate.workloads.podspec import (
    NOT_GPU_ACCELERATOR,
    as_dict,
    as_list,
    at_path,
    gpu_limit_of,
    other_gpu_request,
    unfollowed_vllm,
)
from fitgate.workloads.reading import Reading, WorkloadError
from fitgate.workloads.vllm_flags import vllm_flags

#: The most characters of a RayService's ``serveConfigV2`` fitgate parses.
MAX_SERVE_CONFIG_CHARS = 256 * 1024


def _serve_llm_configs(obj: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The ``llm_configs`` of the Ray Serve LLM applications of a RayService's ``serveConfigV2``.

    ray-project/ray python/ray/serve/llm (``build_openai_app(builder_config)``: ``LLMServingArgs`` with
    ``llm_configs``, each an ``LLMConfig``: ``model_loading_config.model_source`` / ``model_id``,
    ``engine_kwargs`` passed to vLLM's engine args, ``accelerator_type``). Returns (configs, why some were
    not read): an ``llm_configs`` entry that is a file path is read by Ray from the image, not here.
    """
    text = at_path(obj, "spec.serveConfigV2")
    if not isinstance(text, str) or not text.strip():
        return [], None
    if len(text) > MAX_SERVE_CONFIG_CHARS:
        raise BudgetError(f"spec.serveConfigV2: more than {MAX_SERVE_CONFIG_CHARS} characters")  # Unknown: hunt207 F3
    try:  # libyaml's safe loader when built in: a fifth of the time on a serve config (RayService admission)
        loaded = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"spec.serveConfigV2 is not YAML: {exc}".splitlines()[0]) from None
    except ValueError:  # int() past its digit limit (hunt83 F3); Ray's loader refuses it too
        raise WorkloadError(f"spec.serveConfigV2: {too_many_digits()}") from None
    configs: list[dict[str, Any]] = []
    why: str | None = None
    for app in (as_dict(a) for a in as_list(as_dict(loaded).get("applications"))[:32]):
        runtime_env = as_dict(app.get("runtime_env"))
        pin = _vllm_pin(runtime_env.get("pip"))
        pinned = {VLLM_PIN: pin} if pin else {}
        env_vars = as_dict(runtime_env.get("env_vars"))
        if "ray.serve.llm" not in str(app.get("import_path") or ""):
            # hunt27 F1: only an app that shows it runs vLLM (a vllm pin, or vllm in its import path or working dir):
            # GKE's Llama-2-70B sample serves MODEL_ID with transformers and bitsandbytes 4-bit, not vLLM
            where = f"{app.get('import_path') or ''} {runtime_env.get('working_dir') or ''}".lower()
            installs = pin or _installs_vllm(runtime_env.get("pip"))
            if isinstance(env_vars.get("MODEL_ID"), str) and (installs or "vllm" in where):
                # hunt24 G1: KubeRay's vLLM samples (ray-operator/config/samples/vllm/serve.py, the Ray docs' guide)
                # build vLLM's args from these env vars: model, tensor- and pipeline-parallel size
                kwargs = {
                    "tensor_parallel_size": env_vars.get("TENSOR_PARALLELISM", 1),
                    "pipeline_parallel_size": env_vars.get("PIPELINE_PARALLELISM", 1),
                    **_engine_env(env_vars),
                }
                configs.append(
                    {
                        "model_loading_config": {"model_id": env_vars["MODEL_ID"]},
                        "engine_kwargs": kwargs,
                        KUBERAY_SAMPLE: True,
                        **pinned,
                    }
                )
            continue
        args = as_dict(app.get("args"))
        # Ray Serve's data-parallel builder (`ray.serve.llm:build_dp_openai_app`, DPOpenAiServingArgs) takes one
        # `llm_config` (hunt93 F1: skipped as "runs no vLLM server")
        single = [args["llm_config"]] if isinstance(args.get("llm_config"), dict | str) else []
        for entry in [*as_list(args.get("llm_configs"))[:32], *single]:
            if isinstance(entry, dict):
                configs.append({**entry, **pinned})
            else:
                why = f"llm_configs entry {str(entry)[:80]!r} is a file in the image, not read"
    return configs, why


#: The key under which a serve application's ``runtime_env.pip`` pin of vLLM rides along with its configs.
VLLM_PIN = "_fitgate_vllm_pin"
#: The key marking a config read from KubeRay's vLLM sample's env vars (not Ray Serve LLM's ``llm_configs``).
KUBERAY_SAMPLE = "_fitgate_kuberay_sample"


def _engine_env(env_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The app's env vars named as vLLM's engine args (``MAX_MODEL_LEN``, ``GPU_MEMORY_UTILIZATION``).

    hunt52 F1: ai-on-eks's DeepSeek RayService (blueprints/inference/vllm-ray-gpu-deepseek) runs its own serve script,
    which passes ``MAX_MODEL_LEN: "8192"``, ``MAX_NUM_SEQS``, ``GPU_MEMORY_UTILIZATION`` and ``TENSOR_PARALLEL_SIZE``
    to ``AsyncEngineArgs``; sized without them, the model's 131,072 tokens were denied on the A10G it ran on. A
    variable named exactly as an engine arg of ``vllm serve`` is taken as that arg (the script is not read).
    """
    accepted = vllm_flags()
    out: dict[str, Any] = {}
    for key, value in list(env_vars.items())[:128]:
        name = str(key).lower()
        if "--" + name.replace("_", "-") in accepted and isinstance(value, str | int | float) and name != "model":
            out[name] = value
    return out


def _vllm_pin(pip: object) -> str | None:
    """``vllm==X`` of a Ray ``runtime_env.pip`` list (the release the serve application installs), else None."""
    packages = as_dict(pip).get("packages") if isinstance(pip, dict) else pip
    for entry in as_list(packages)[:64]:
        m = re.fullmatch(r"\s*vllm\s*==\s*([0-9][0-9A-Za-z.+-]{0,30})\s*", str(entry))
        if m:
            return m.group(1)
    return None


def _installs_vllm(pip: object) -> bool:
    """Whether a Ray ``runtime_env.pip`` list installs vLLM at all (``vllm``, ``vllm>=0.6``, ``vllm[audio]``).

    hunt111 F3: GKE's gemma-2b-it RayService (kubernetes-engine-samples ai-ml/gke-ray/rayserve/llm) lists a bare
    ``vllm``: its serve app builds vLLM's engine from ``MODEL_ID``, at a release the manifest does not name.
    """
    packages = as_dict(pip).get("packages") if isinstance(pip, dict) else pip
    return any(re.match(r"\s*vllm\s*(?:$|[\[<>=!~;@ ])", str(e)) for e in as_list(packages)[:64])


def read_ray_llm(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> list[Reading]:
    """One reading per Ray Serve LLM model of a RayService: its ``engine_kwargs`` as vLLM flags.

    The GPUs are the worker group's (``spec.rayClusterConfig.workerGroupSpecs[]`` with a GPU limit): Ray
    places a replica's TP x PP workers on as many worker pods as it takes.
    """
    meta = as_dict(obj.get("metadata"))
    configs, why = _serve_llm_configs(obj)
    groups = [as_dict(g) for g in as_list(at_path(obj, "spec.rayClusterConfig.workerGroupSpecs"))[:16]]
    templates = [as_dict(at_path(group, "template.spec")) for group in groups]
    worker: dict[str, Any] = next(
        (p for p in templates if any(gpu_limit_of(as_dict(c))[1] for c in as_list(p.get("containers")))),
        # hunt25 F1: no GPU limit, but a TPU (GKE's google.com/tpu samples), a MIG slice or another device plugin's
        # resource: that group is the worker, and its device makes the reading Unknown, never "no GPU"
        next((p for p in templates if any(other_gpu_request(as_dict(c)) for c in as_list(p.get("containers")))), {}),
    )
    containers = [as_dict(c) for c in as_list(worker.get("containers"))]
    base = next(
        (c for c in containers if gpu_limit_of(c)[1]),
        next((c for c in containers if other_gpu_request(c)), containers[0] if containers else {}),
    )
    resource, per_pod = gpu_limit_of(base) if base else (None, 0)
    out: list[Reading] = []
    for i, config in enumerate(configs):
        loading = as_dict(config.get("model_loading_config"))
        source = loading.get("model_source")
        if isinstance(source, dict):  # {bucket_uri: s3://... | gs://...}: a location, named with the annotation
            source = source.get("bucket_uri")
        model = str(source or loading.get("model_id") or "")
        flags = config_file_flags(as_dict(config.get("engine_kwargs")), falses=True)  # kwargs: False is False
        if "--quantization" in flags:  # kwargs skip argparse's choices; ModelConfig lowercases it (config/model.py
            flags["--quantization"] = flags["--quantization"].lower()  # 0.34.0 L1074-1078; hunt207: FP8 sized bf16)
        tp = int(flags.get("--tensor-parallel-size", "1")) if flags.get("--tensor-parallel-size", "1").isdigit() else 1
        pp = (
            int(flags.get("--pipeline-parallel-size", "1"))
            if flags.get("--pipeline-parallel-size", "1").isdigit()
            else 1
        )
        ray_dp = flags.get("--data-parallel-size", "1")
        # Ray Serve LLM's data parallelism: each Serve replica is one DP rank of TP x PP GPUs (its DPServer sets
        # data_parallel_rank), Ray placing the ranks over the worker pods: the DP group spans as many pods as its
        # dp x TP x PP GPUs fill (hunt93 F1: 16 ranks were counted against one 8-GPU pod; hunt95 F5: a rank of TP 8
        # over pods of 4 was DoesNotFit)
        group = tp * pp * (int(ray_dp) if ray_dp.isdigit() and "--data-parallel-rank" not in flags else 1)
        pods = max(1, -(-group // per_pod)) if per_pod else 1
        args = [f"{k}={v}" if v != "true" else k for k, v in flags.items()]
        pin = config.get(VLLM_PIN)
        env = [*as_list(base.get("env")), *([{"name": "VLLM_VERSION", "value": pin}] if pin else [])]
        container = {
            **base,
            "name": base.get("name") or "ray-worker",
            "command": ["vllm", "serve", model, *args],
            "args": [],
            "env": env,
        }
        pod = {**worker, "containers": [container]}
        found = _find_vllm(pod)
        if found is None or NOT_GPU_ACCELERATOR.search(str(config.get("accelerator_type") or "")[:64]):
            # hunt152 F1: Ray places a TPU / Gaudi / Neuron / Ascend config on that accelerator's nodes, not on the GPU
            # worker group beside it: nothing fitgate gates (skipped, as a CPU image's pod is)
            continue
        name = str(loading.get("model_id") or i)
        notes = [
            f"KubeRay vLLM sample: model {name}, parallelism from TENSOR_PARALLELISM / PIPELINE_PARALLELISM"
            if config.get(KUBERAY_SAMPLE)
            else f"Ray Serve LLM model {name} (engine_kwargs as vLLM's engine args)"
        ]
        if ray_dp.isdigit() and int(ray_dp) > 1:
            notes.append(f"Ray Serve data parallel: {ray_dp} ranks, each a Serve replica of {tp * pp} GPU(s)")
        if pin:
            notes.append(f"vLLM {pin} from the application's runtime_env pip")
        if config.get("accelerator_type"):
            notes.append(f"accelerator_type {config['accelerator_type']}: Ray's label, the GPU is the worker group's")
        if why:
            notes.append(why)
        reading = _reading(
            "RayService",
            {**meta, "name": f"{meta.get('name') or '?'}/{name}"},
            found,
            configmaps,
            gpus_per_replica=max(per_pod * pods, tp * pp) if resource else 0,
            pods_per_replica=pods,
            notes=tuple(notes),
        )
        out.append(reading)
    if not out and why:
        # hunt109 F5: Ray's documented "Standalone Config" lists llm_configs as files in the image: it runs vLLM,
        # but what it serves is not in the object, so it is Unknown (never "runs no vLLM server")
        why = f"Ray Serve LLM: {why}; fitgate cannot size what it does not see"
        out.append(_finish(_blank("RayService", meta), unknown=why))
    return out


def read_ray_service(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The first Ray Serve LLM model of a RayService; ``fitgate check`` reads every one."""
    return first_of_parts(read_ray_llm(obj, configmaps), "models")


def read_ray_cluster(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A KubeRay RayCluster whose head runs ``vllm serve`` over the cluster's GPUs (hunt54 F2).

    vLLM's Ray executor places TP x PP workers on the head's and the worker groups' GPUs (vLLM's multi-node docs,
    production-stack's pipeline-parallel chart: ``helm/templates/ray-cluster.yaml``). The engine is sized on the
    GPU nodes: the head's pod when the head holds GPUs and no worker group does, else the first worker group with a
    GPU limit, whose pods run the head's command line. The GPUs are the head's plus each group's pods times the most
    replicas it may have (``maxReplicas`` with the in-tree autoscaler, else ``replicas``).
    """
    meta = as_dict(obj.get("metadata"))
    head = with_mounted_scripts(as_dict(at_path(obj, "spec.headGroupSpec.template.spec")), configmaps)
    found = _find_vllm(head)
    if found is None:
        # hunt195 F1: production-stack's pipeline-parallel head copies its ConfigMap script and starts it in the
        # background; a vLLM image on GPUs with a command fitgate cannot follow is Unknown, not "no vLLM server"
        why = unfollowed_vllm(head)
        return _finish(_blank("RayCluster", meta), unknown=f"head: {why}") if why else None
    autoscaling = bool(at_path(obj, "spec.enableInTreeAutoscaling"))
    head_gpus = gpu_limit_of(found.container)[1]
    total, pods, worker = head_gpus, 1, None
    for group in (as_dict(g) for g in as_list(at_path(obj, "spec.workerGroupSpecs"))[:16]):
        spec = as_dict(at_path(group, "template.spec"))
        gpu = next((as_dict(c) for c in as_list(spec.get("containers")) if gpu_limit_of(as_dict(c))[1]), None)
        if gpu is None:
            continue
        count = max(_count(group.get("replicas")), _count(group.get("maxReplicas")) if autoscaling else 0)
        total, pods = total + gpu_limit_of(gpu)[1] * count, pods + count
        if worker is None and count:
            container = {**gpu, **{k: v for k, v in found.container.items() if k != "resources"}}
            worker = {**spec, "containers": [container]}
    if worker is not None and not head_gpus:
        found = _find_vllm(worker) or found
    return _reading(
        "RayCluster",
        meta,
        found,
        configmaps,
        gpus_per_replica=total,
        pods_per_replica=pods if worker is not None else 1,
        notes=(f"KubeRay RayCluster: the head's vLLM over {total} GPUs of {pods} pods",),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1024 else 0
