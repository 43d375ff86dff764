"""KubeAI's ``Model`` (``kubeai.org/v1``): the vLLM pod its controller creates, read on the one path.

substratusai/kubeai ``internal/modelcontroller/engine_vllm.go`` (``vLLMPodForModel``): the server runs
``--model=<ref> --served-model-name=<name>`` plus ``spec.args`` and ``spec.env``. ``spec.url`` ``hf://ORG/NAME``
is the Hub repo, ``pvc://`` a volume mounted at ``/model``, ``s3://`` / ``gs://`` / ``oss://`` a bucket.
``spec.resourceProfile`` ``NAME:COUNT`` names one of the Helm values' profiles (``nvidia-gpu-l4``,
``amd-gpu-mi300x``): COUNT times its per-unit GPU limit (one GPU in KubeAI's chart); its node selector and image
are in the chart's values and not read here (hunt27 G1, hunt52 G4); offline the card the profile's name names is
the GPU (hunt151 S1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.instances import larger_namesake, named_gpu
from fitgate.workloads.container import _find_vllm, _reading
from fitgate.workloads.podspec import NOT_GPU_ACCELERATOR, as_dict, as_list
from fitgate.workloads.reading import Reading


def off_gpu_profile(obj: Mapping[str, Any]) -> str | None:
    """Why a KubeAI vLLM Model is not sized: its profile names no NVIDIA or AMD GPU (a CPU, TPU, Gaudi, Intel one).

    hunt195 F5: ``fitgate check`` said "runs no vLLM server" of KubeAI's own ``llama-3.1-8b-instruct-tpu``.
    """
    spec = as_dict(obj.get("spec"))
    if str(obj.get("kind") or "") != "Model" or str(spec.get("engine") or "") != "VLLM":
        return None
    name = str(spec.get("resourceProfile") or "")[:253].partition(":")[0]
    if ("gpu" in name and not NOT_GPU_ACCELERATOR.search(name)) or name.startswith("amd-"):
        return None
    return f"a KubeAI vLLM Model on resource profile {name or '(none)'}: an accelerator fitgate does not size (no GPU)"


def read_kubeai_model(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The vLLM server of a KubeAI Model (None for another engine or a profile of no NVIDIA or AMD GPU)."""
    spec = as_dict(obj.get("spec"))
    if str(spec.get("engine") or "") != "VLLM":
        return None
    url = str(spec.get("url") or "")[:1024]
    scheme, _, rest = url.partition("://")
    model = {"hf": rest, "pvc": "/model"}.get(scheme, url)
    profile = str(spec.get("resourceProfile") or "")[:253]
    name, _, count_text = profile.partition(":")
    count = int(count_text) if count_text.isdigit() and 0 < int(count_text) <= 64 else 1
    resource = "amd.com/gpu" if name.startswith("amd-") else "nvidia.com/gpu" if "gpu" in name else None
    if resource is None or NOT_GPU_ACCELERATOR.search(name):
        # a CPU, TPU, Gaudi or Intel profile (hunt152 F2: intel-gpu-max-1550 holds "gpu" and is no NVIDIA card): vLLM
        # on nothing fitgate sizes, skipped as a CPU image's pod is (outside the gate, whatever the Unknown policy)
        return None
    env = [{"name": str(k), "value": str(v)} for k, v in list(as_dict(spec.get("env")).items())[:128]]
    args = [str(a) for a in as_list(spec.get("args"))[:256]]
    container = {
        "name": "server",
        "image": "",
        "command": ["vllm", "serve", model, f"--served-model-name={as_dict(obj.get('metadata')).get('name') or ''}"],
        "args": args,
        "env": env,
        "resources": {"limits": {resource: str(count)}},
    }
    found = _find_vllm({"containers": [container]})
    if found is None:
        return None
    gpu = _profile_gpu(name)
    named = f" (offline sized as the {gpu.name} its name names)" if gpu is not None else " (pass --gpu offline)"
    notes = (
        f"KubeAI Model, resourceProfile {profile}: {count} {resource}; the profile's node selector and vLLM image "
        f"are in KubeAI's Helm values, not read{named}; sized as the newest modelled release",
    )
    reading = _reading("Model", as_dict(obj.get("metadata")), found, configmaps, notes=notes)
    if gpu is None:
        return reading
    label = "amd.com/gpu.product-name" if resource == "amd.com/gpu" else "nvidia.com/gpu.product"
    return replace(reading, affinity_gpu={**reading.affinity_gpu, label: gpu.name})


def _profile_gpu(name: str) -> GpuModel | None:
    """The GPU a KubeAI profile's name names (``nvidia-gpu-h100``, ``amd-gpu-mi300x``, ``nvidia-gpu-a100-80gb``).

    hunt151 S1: KubeAI's chart and its users name each profile for its card (the chart's values: nvidia-gpu-l4,
    nvidia-gpu-h100, nvidia-gpu-a100-80gb, nvidia-gpu-gh200, amd-gpu-mi300x), whose node selector is in the Helm
    values fitgate does not see; offline, with no nodes, the name is the GPU to size on (a hint, as a several-valued
    affinity's: the operator sizes the nodes). A bare name of two cards (``a100``) is the larger (never deny on the
    smaller what the larger runs); a name of no card, None.
    """
    rest = name.removeprefix("nvidia-gpu-").removeprefix("amd-gpu-")
    if rest == name or not rest:
        return None
    return larger_namesake(rest) or named_gpu(rest)
