"""KubeAI's ``Model`` (``kubeai.org/v1``): the vLLM pod its controller creates, read on the one path.

substratusai/kubeai ``internal/modelcontroller/engine_vllm.go`` (``vLLMPodForModel``): the server runs
``--model=<ref> --served-model-name=<name>`` plus ``spec.args`` and ``spec.env``. ``spec.url`` ``hf://ORG/NAME``
is the Hub repo, ``pvc://`` a volume mounted at ``/model``, ``s3://`` / ``gs://`` / ``oss://`` a bucket.
``spec.resourceProfile`` ``NAME:COUNT`` names one of the Helm values' profiles (``nvidia-gpu-l4``,
``amd-gpu-mi300x``): COUNT times its per-unit GPU limit (one GPU in KubeAI's chart); its node selector and image
are in the chart's values and not read here (hunt27 G1, hunt52 G4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitgate.workloads.container import _find_vllm, _reading
from fitgate.workloads.podspec import as_dict, as_list
from fitgate.workloads.reading import Reading


def read_kubeai_model(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """The vLLM server of a KubeAI Model (None for another engine or a CPU profile)."""
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
    if resource is None:
        return None  # a CPU or TPU profile: no GPU fitgate sizes
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
    notes = (
        f"KubeAI Model, resourceProfile {profile}: {count} {resource}; the profile's GPU type, node selector and vLLM "
        "image are in KubeAI's Helm values, not read (pass --gpu offline); sized as the newest modelled release",
    )
    return _reading("Model", as_dict(obj.get("metadata")), found, configmaps, notes=notes)
