"""What a pod template says about vLLM outside its command line.

The image, GPU limits, DRA claims, tolerations, HAMi / Run:ai shares and the GPU pool its node selection
names. Pure, over plain dicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fitgate.sizing import SizingError
from fitgate.sizing.instances import cloud_name_gpu, gke_accelerator, instance_gpus, karpenter_gpu, named_gpu
from fitgate.sizing.units import parse_size
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION, Release, parse_version, resolve_release
from fitgate.workloads.images import image_family, image_release, split_image
from fitgate.workloads.quantity import parse_quantity, whole_quantity
from fitgate.workloads.reading import WorkloadError

#: Whole GPUs a container asks for. ``nvidia.com/gpu.shared``: the GPU Operator's time-slicing with
#: ``renameByDefault: true`` (a pod sees the whole card, as with ``nvidia.com/gpu`` time-slicing; hunt16 D3).
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "nvidia.com/gpu.shared")


def other_gpu_request(container: dict[str, Any]) -> str | None:
    """A device the container asks for under a name fitgate does not size a workload on, as ``name: count``.

    A MIG slice ``nvidia.com/mig-<profile>``, a renamed or another vendor's resource (hunt16 D2), or any other
    extended resource a device plugin advertises (hunt24 F1: squat's generic-device-plugin ``squat.ai/dri`` hands an
    AMD card to a vLLM pod; Volcano's ``volcano.sh/vgpu-number``, ``aliyun.com/gpu-mem``): the GPU may come that way,
    so it is never "no GPU". Kubernetes' own names (``cpu``, ``memory``, ``hugepages-*``, ``*kubernetes.io/*``) are not
    devices. None without one.
    """
    resources = as_dict(container.get("resources"))
    found = None
    for where in ("limits", "requests"):
        for name, raw in as_dict(resources.get(where)).items():
            key = str(name)
            if key.startswith(("nvidia.com/mig-", "nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/")):
                return f"{key[:80]}: {str(raw)[:20]}"
            domain = key.split("/", 1)[0] if "/" in key else ""
            if found is None and domain and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")):
                found = f"{key[:80]}: {str(raw)[:20]}"
    return found


def at_path(obj: Any, path: str) -> Any:
    """The value at a dotted ``path`` of nested dicts, None where a step is missing or not a dict."""
    for part in path.split(".") if path else ():
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one (hostile or malformed input reads as absent)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def image_repo_tag(image: str) -> tuple[str, str | None]:
    """(repository without registry, tag) of an image reference."""
    repo, tag, _ = split_image(image)
    return repo, tag


def vllm_image(image: str) -> tuple[bool, bool]:
    """(runs vLLM, its entrypoint is the vLLM server) for an image reference."""
    family = image_family(image_repo_tag(image)[0])
    return (True, family[1]) if family is not None else (False, False)


def release_of_image(image: str, env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(vLLM release fitgate sizes, warning) for an image: ``v0.8.5`` -> ``0.8.5``; ``latest`` -> the newest.

    Never refuses: a release the image does not name (an LMCache or llm-d tag, a digest, a custom image)
    and one outside fitgate's accounting table (``v0.34.0``, ``v0.3.7``) give (None, a warning) and are
    sized as the newest modelled release. This is the reader's one call into the table
    (:func:`fitgate.sizing.versions.parse_version`).
    """
    if not image.strip() and not (env or {}).get("VLLM_VERSION"):
        return None, None
    read = image_release(image, env)
    newest = DEFAULT_VLLM_VERSION
    if read.release is None:
        return None, f"vLLM release unknown ({read.reason}): sized as the newest modelled release, {newest}"
    try:
        # known, or newer than fitgate models: sized as the newest, with the release's note as the warning
        release: Release | None = resolve_release(read.release, "image tag")
    except SizingError:
        release = None
    if release is None or not release.named:
        return None, (
            f"vLLM {read.release} ({read.reason}) is not a release fitgate models: "
            f"sized as the newest modelled release, {newest}"
        )
    major, minor, patch = release.given
    return f"{major}.{minor}.{patch}", release.note


#: Names of accelerators fitgate does not size, as Ray's ``accelerator_type`` (ray/util/accelerators/accelerators.py:
#: TPU-V2 .. TPU-V6E, Intel-GAUDI, Intel-GPU-Max-1550, aws-neuron-core, Ascend910B) and KubeAI's resource profiles
#: (its chart's cpu, google-tpu-*, intel-gpu-*; OPEA's gaudi-for-text-generation) name them: hunt152 F1, F2.
NOT_GPU_ACCELERATOR = re.compile(r"^(cpu|google-tpu|tpu|intel|gaudi|habana|aws-neuron|neuron|ascend)", re.IGNORECASE)


def release_before(version: str, since: tuple[int, int, int]) -> bool:
    """Whether a release read from an image is older than ``since`` (an unreadable one is not)."""
    try:
        return parse_version(version) < since
    except SizingError:
        return False


def refused_value(
    container: str, exc: Exception, image: str, env: Mapping[str, str] | None
) -> tuple[str | None, str | None]:
    """(invalid, unknown) for a value of ``container``'s vLLM command refused: Invalid on a vLLM release's image.

    hunt122: GKE's Llama 4 sample runs Vertex Model Garden's pytorch-vllm-serve (no vLLM release in its tag) with
    ``--limit_mm_per_prompt='image=5'``, quotes and all. A build fitgate cannot name may parse what vLLM's own
    parser refuses: not Invalid for that alone (the first rule), Unknown with the reason.
    """
    why = f"container {container}: {exc}" if not str(exc).startswith("container") else str(exc)
    image = image.strip()
    if image and release_of_image(image, env)[0] is None:
        return (
            None,
            f"{why} (for vLLM's own parser; {image[:120]} names no vLLM release fitgate knows, whose parser may "
            "read it)",
        )
    return why, None


def gpu_limit_of(container: dict[str, Any]) -> tuple[str | None, int]:
    """(resource, count) of a container's GPU limit (requests when no limit), (None, 0) without one."""
    resources = as_dict(container.get("resources"))
    for where in ("limits", "requests"):
        values = as_dict(resources.get(where))
        for resource in GPU_RESOURCES:
            if resource in values:
                raw = values[resource]
                count = whole_quantity(raw)  # a quantity, as the API server writes it ("1k" for 1000)
                if count is None:
                    raise WorkloadError(
                        f"container {container.get('name')}: resources.{where}.{resource}: "
                        f"expected a whole number of GPUs (got {raw!r})"
                    )
                return resource, count
    return None, 0


def memory_limit_of(container: dict[str, Any]) -> int | None:
    """The container's memory limit in bytes (issue 20: host memory of offload buffers), None without one.

    A quantity fitgate cannot read is None (the API server has validated it; no verdict depends on it).
    """
    raw = as_dict(as_dict(container.get("resources")).get("limits")).get("memory")
    if raw is None:
        return None
    try:
        return parse_size(str(raw)[:64], "resources.limits.memory")
    except SizingError:
        return None


def claim_template_of(container: dict[str, Any], pod: dict[str, Any]) -> tuple[str, int, tuple[str, ...]] | None:
    """The ResourceClaimTemplate the container's GPUs come from, how many of its claims use it, and the others.

    The first template of the pod claims the container uses (``resources.claims[].name``; all the pod's without
    any), counted over those claims: llm-d's GKE guide gives a TP-4 decode four claims of one GPU + NIC template
    (hunt50 F1). None when the container asks for GPUs by a device-plugin limit: its claims are then other
    devices (a DRANET NIC on GKE A4X, an IMEX channel of a ComputeDomain on GB200; hunt50 F2-F3). The other
    templates it uses, in order, are where its GPUs come from when the first is not a GPU's (a ComputeDomain
    channel listed first; hunt80 G2): the check and the webhook, which see the templates' classes, pick.
    """
    if gpu_limit_of(container)[1]:
        return None
    used = [str(as_dict(c).get("name")) for c in as_list(as_dict(container.get("resources")).get("claims"))[:64]]
    templates = {
        str(claim.get("name")): str(claim["resourceClaimTemplateName"])
        for claim in (as_dict(c) for c in as_list(pod.get("resourceClaims"))[:64])
        if claim.get("resourceClaimTemplateName")
    }
    named = [templates[n] for n in used if n in templates] if used else list(templates.values())
    others = tuple(dict.fromkeys(t for t in named if t != named[0])) if named else ()
    return (named[0], named.count(named[0]), others) if named else None


def named_claim_of(container: dict[str, Any], pod: dict[str, Any]) -> str | None:
    """The first ResourceClaim the container uses by ``resourceClaimName`` (a claim made outside the workload)."""
    used = {str(as_dict(c).get("name")) for c in as_list(as_dict(container.get("resources")).get("claims"))[:64]}
    for claim in (as_dict(c) for c in as_list(pod.get("resourceClaims"))[:64]):
        if claim.get("resourceClaimName") and (not used or str(claim.get("name")) in used):
            return str(claim["resourceClaimName"])
    return None


#: Words of an image repository that name a vLLM build for another accelerator (llm-d's ``llm-d-hpu``,
#: Rebellions' ``rbln-serve``, ``vllm-tpu``, ``vllm-neuron``, Ascend's ``vllm-ascend``, IBM's ``vllm-spyre``).
OTHER_ACCELERATOR_WORDS = frozenset({"hpu", "gaudi", "habana", "rbln", "neuron", "neuronx", "tpu", "xpu", "ascend",
                                     "spyre"})  # fmt: skip
#: Env names those builds' manifests set (Gaudi's HABANA_* / PT_HPU_*, Rebellions' RBLN_*, Neuron's runtime, TPU's).
OTHER_ACCELERATOR_ENV = re.compile(r"(?:HABANA_|PT_HPU_|RBLN_|VLLM_RBLN_|NEURON_RT_|TPU_|ASCEND_)[A-Z0-9_]*")


def other_accelerator(container: dict[str, Any]) -> str | None:
    """What says a container with no GPU limit runs vLLM on another accelerator (its image or env), or None.

    hunt122 F4: llm-d's Gaudi and Rebellions guides give the pod its device through a DRA claim; with the claim's
    template not among the files read, ``check --gpu H100`` sized them as the H100.
    """
    repo, _ = image_repo_tag(str(container.get("image") or ""))
    words = set(re.split(r"[/._-]", repo.lower()))
    named = sorted(words & OTHER_ACCELERATOR_WORDS)
    if named:
        return f"its image {repo[:120]} is a vLLM build for {named[0]}"
    for env in as_list(container.get("env"))[:256]:
        name = str(as_dict(env).get("name") or "")
        if OTHER_ACCELERATOR_ENV.fullmatch(name[:128]):
            return f"its env sets {name[:64]}"
    return None


def unsized_devices(container: dict[str, Any], pod: dict[str, Any], cname: str) -> str | None:
    """Why a container with no GPU limit has devices fitgate does not size, or None where it has none."""
    other = other_gpu_request(container)
    runtime = str(as_dict(pod).get("runtimeClassName") or "")
    claimed = named_claim_of(container, pod)
    if other is not None:  # a MIG slice, a renamed or another device plugin's resource: never "no GPU"
        return f"container {cname} asks for {other}, a device resource fitgate does not size workloads on"
    accelerator = other_accelerator(container)
    if accelerator is not None:
        return f"container {cname} asks for no GPU resource and {accelerator}: an accelerator fitgate does not size"
    if claimed is not None and claim_template_of(container, pod) is None:
        # hunt50 F4: a ResourceClaim made beside the workload (resourceClaimName, perhaps shared by several pods)
        return (
            f"container {cname} gets its devices from ResourceClaim {claimed[:253]} (resourceClaimName): "
            "fitgate sizes DRA GPUs from a ResourceClaimTemplate (resourceClaimTemplateName) only"
        )
    if "nvidia" in runtime.lower():
        # hunt24 F2: under the nvidia runtime a CUDA image (NVIDIA_VISIBLE_DEVICES=all) sees the node's GPUs
        # without any device-plugin resource (k3s-io/k3s#12802): which ones is the node's, not the pod's to say
        return (
            f"container {cname} asks for no GPU resource but runs under runtimeClassName {runtime[:63]}, which "
            "exposes the node's GPUs to it; set nvidia.com/gpu to have it scheduled on and sized for them"
        )
    return None


_HUB_CACHE = re.compile(
    r"(?:^|/)models--(?P<org>[A-Za-z0-9][\w.-]{0,95})--(?P<name>[\w.-]{1,96})(?:/snapshots/(?P<rev>[0-9a-f]{40}))?/?$"
)


def hub_cache_repo(path: str) -> tuple[str, str | None] | None:
    """(repo id, commit) a Hugging Face cache directory names: ``.../models--ORG--NAME[/snapshots/SHA]``.

    hunt52 G2: llmaz passes the model as such a path, and Dynamo's llama-3-70b disaggregated recipe one with the
    commit (huggingface_hub's cache layout: ``models--{org}--{name}``, ``snapshots/{commit}``).
    """
    m = _HUB_CACHE.search(path[:1024]) if "models--" in path else None
    return (f"{m.group('org')}/{m.group('name')}", m.group("rev")) if m else None


def tolerations_of(pod: dict[str, Any]) -> tuple[dict[str, str], ...]:
    """The pod's tolerations, with the fields placement.tolerations keeps."""
    out = []
    for t in (as_dict(t) for t in as_list(pod.get("tolerations"))[:64]):
        out.append({k: str(t[k]) for k in ("key", "operator", "value", "effect") if t.get(k) is not None})
    return tuple(out)


def hami_share_of(container: dict[str, Any]) -> dict[str, int]:
    """HAMi's per-container memory limits as placement.gpuShare fields (the spec checks their range)."""
    limits = as_dict(as_dict(container.get("resources")).get("limits"))
    for resource, key in (
        ("nvidia.com/gpumem", "hamiGpuMemMiB"),
        ("nvidia.com/gpumem-percentage", "hamiGpuMemPercentage"),
    ):
        if resource in limits:
            # a quantity, as HAMi reads it (AsInt64): the API server hands 20000 to the webhook as "20k" (hunt131 F1)
            number = parse_quantity(limits[resource])
            if number is None:
                raise WorkloadError(
                    f"container {container.get('name')}: resources.limits.{resource}: "
                    f"expected a whole number (got {limits[resource]!r})"
                )
            return {key: number}
    return {}


#: Run:ai's multi-device fractions: at most this many devices a pod (a node's GPUs).
MAX_RUNAI_DEVICES = 64


def runai_devices(annotations: Mapping[str, Any]) -> int:
    """The devices a Run:ai fraction spans: ``gpu-fraction-num-devices`` (each with the fraction), else one.

    Raises:
        WorkloadError: a value that is not a whole number from 1 to :data:`MAX_RUNAI_DEVICES`.
    """
    raw = annotations.get("gpu-fraction-num-devices")
    if raw is None:
        return 1
    try:
        devices = int(str(raw).strip())
    except ValueError:
        devices = 0
    if not 1 <= devices <= MAX_RUNAI_DEVICES:
        raise WorkloadError(
            f"annotation gpu-fraction-num-devices: expected a whole number from 1 to {MAX_RUNAI_DEVICES} "
            f"(got {str(raw)[:40]!r})"
        )
    return devices


def runai_share_of(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """Run:ai's pod annotations (``gpu-fraction``, ``gpu-memory`` MiB) as placement.gpuShare fields."""
    if "gpu-fraction" in annotations:
        try:
            return {"runaiGpuFraction": float(str(annotations["gpu-fraction"]).strip())}
        except ValueError:
            raise WorkloadError(
                f"annotation gpu-fraction: expected a fraction such as 0.5 (got {annotations['gpu-fraction']!r})"
            ) from None
    if "gpu-memory" in annotations:
        try:
            return {"runaiGpuMemoryMiB": int(str(annotations["gpu-memory"]).strip())}
        except ValueError:
            raise WorkloadError(
                f"annotation gpu-memory: expected a whole number of MiB (got {annotations['gpu-memory']!r})"
            ) from None
    return {}


def placement_of(pod: dict[str, Any]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(node selector, GPU hints, notes) of the nodes a pod must land on: its nodeSelector and single-valued affinity.

    Required node affinity with one ``nodeSelectorTerm`` whose ``In`` expressions list one value is
    the same as a nodeSelector (GPU Feature Discovery's ``nvidia.com/gpu.product``, AMD's
    ``amd.com/gpu.product-name``...). Several terms or values are a choice fitgate cannot pin down:
    noted, and any GPU pool is considered. The hints are the several-valued ``In`` whose every value names one GPU
    product (:func:`_one_gpu_of`), read as that value: not a selector (the scheduler may take any value, and the
    operator sees the nodes); offline, with no nodes, they name the GPU to size on (``fitgate check``).
    """
    selector = {str(k): str(v) for k, v in as_dict(pod.get("nodeSelector")).items()}
    hints: dict[str, str] = {}
    notes: list[str] = []
    affinity = as_dict(as_dict(pod.get("affinity")).get("nodeAffinity"))
    required = as_dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = as_list(required.get("nodeSelectorTerms"))
    if len(terms) == 1:
        for expr in (as_dict(e) for e in as_list(as_dict(terms[0]).get("matchExpressions"))):
            key, values = str(expr.get("key")), as_list(expr.get("values"))
            if expr.get("operator") == "In" and len(values) == 1:
                selector[key] = str(values[0])
            elif expr.get("operator") == "In" and (same := _one_gpu_of(key, values)) is not None:
                hints[key], product = same
                notes.append(f"node affinity {key} In {values[:8]}: all {product} nodes: offline, sized as {same[0]}")
            elif key.startswith(("nvidia.com/", "amd.com/")):
                notes.append(
                    f"node affinity {key} {expr.get('operator')} {values}: "
                    "evaluated on every GPU pool, the best one counts"
                )
    elif len(terms) > 1:
        notes.append(f"node affinity has {len(terms)} alternative terms: evaluated on every GPU pool")
    return selector, hints, notes


#: Node labels whose values name a GPU product (and, for instance types, how many a node has).
_GPU_VALUE_KEYS = {
    "node.kubernetes.io/instance-type": "instance",
    "beta.kubernetes.io/instance-type": "instance",
    "cloud.google.com/gke-accelerator": "gke",
    "karpenter.k8s.aws/instance-gpu-name": "karpenter",
    "eks.amazonaws.com/instance-gpu-name": "karpenter",
    "nvidia.com/gpu.product": "product",
    "amd.com/gpu.product-name": "product",  # hunt116 F3: AMD_Instinct_MI300X_OAM / _VF, both an MI300X
    # hunt189 F3: clouds' card names (operator.gpus.cloudlabels.NAME_LABELS) read as the cluster reader reads them:
    # AIBrix's VKE manifests pin several of these (Tesla-A100-80G, NVIDIA-H20-SXM5-96GB); a bare A100 / V100 names no
    # size and is no hint
    "machine.cluster.vke.volcengine.com/gpu-name": "cloud-name",
    "aliyun.accelerator/nvidia_name": "cloud-name",
    "karpenter.azure.com/sku-gpu-name": "cloud-name",
}


def _gpu_of_value(key: str, value: str) -> tuple[str, int] | None:
    """(GPU product, GPUs a node has: 0 when the label does not say) that ``key: value`` names, else None."""
    kind = _GPU_VALUE_KEYS.get(key)
    if kind == "instance":
        found = instance_gpus(value)
        return (found.gpu.name, found.count) if found is not None else None
    if kind == "gke":
        gpu = gke_accelerator(value)
    elif kind == "karpenter":
        gpu = karpenter_gpu(value)
    elif kind == "cloud-name":
        gpu = cloud_name_gpu(value)
    else:
        gpu = named_gpu(value) if kind == "product" else None
    return (gpu.name, 0) if gpu is not None else None


def _one_gpu_of(key: str, values: list[Any]) -> tuple[str, str] | None:
    """(the value to read, the GPU product) of a several-valued ``In`` whose every value names one product, else None.

    hunt111 F5: Karpenter / EKS manifests pin ``node.kubernetes.io/instance-type In [g6e.xlarge, g6e.2xlarge,
    g6e.4xlarge]``, each one L40S: a choice of nodes, not of GPUs. The value whose node holds the most GPUs is read,
    so a pod is never sized on fewer GPUs a node than some of its nodes have.
    """
    if key not in _GPU_VALUE_KEYS or not 1 < len(values) <= 64:
        return None
    named = [(str(v), _gpu_of_value(key, str(v))) for v in values]
    products = {g[0] for _, g in named if g is not None}
    if len(products) != 1 or any(g is None for _, g in named):
        return None
    return max(named, key=lambda vg: vg[1][1] if vg[1] is not None else 0)[0], products.pop()


#: Flags only vLLM's server takes: with an image named for vLLM and no ``command``, args holding one are
#: ``vllm serve``'s.
_VLLM_ONLY_FLAGS = frozenset(
    {
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--kv-cache-dtype",
        "--enforce-eager",
        # hunt109 N1: OpenShift AI's vLLM ServingRuntime passes only --port, --model and --served-model-name (its
        # image's entrypoint is vLLM's server); unmerged, its other args were dropped from the InferenceService
        "--served-model-name",
        # hunt112: OPEA's opea/vllm-rocm chart passes vLLM's engine flags to its copy of vLLM's api_server.py
        "--swap-space",
        "--num-scheduler-steps",
        "--distributed-executor-backend",
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
    }
)


def built_on_vllm(container: dict[str, Any]) -> bool:
    """An image fitgate does not know, named for vLLM, whose args are vLLM's flags (hunt23 G3).

    aws-samples/sample-llm-inference-on-eks builds ``vllm-efa-kimi-k3`` on ``vllm/vllm-openai`` and keeps its
    ``vllm serve`` entrypoint; its pods carry the model and vLLM's flags as ``args`` and were skipped.
    """
    repo = image_repo_tag(str(container.get("image") or ""))[0].lower()
    if "vllm" not in repo.rsplit("/", 1)[-1]:
        return False
    words = [str(w).split("=", 1)[0].replace("_", "-") for w in as_list(container.get("args"))[:256]]
    return any(w in _VLLM_ONLY_FLAGS for w in words)


def unfollowed_vllm(pod: dict[str, Any]) -> str | None:
    """Why a pod with no vLLM command fitgate can follow still looks like a vLLM server, or None.

    hunt195 F1: production-stack's pipeline-parallel RayCluster runs ``vllm serve`` from a ConfigMap script its head
    copies and starts in the background (``/bin/bash -c "cp /entrypoint/vllm-entrypoint.sh $HOME/... && ... &"``),
    which fitgate does not follow: it was Skipped as "runs no vLLM server". A container of a vLLM image that holds GPUs
    and runs a command of its own is Unknown instead, naming the command (never a denial, never silently passed).
    """
    for container in (as_dict(c) for c in as_list(pod.get("containers"))[:64]):
        command = as_list(container.get("command"))
        if not command or not vllm_image(str(container.get("image") or ""))[0]:
            continue
        try:
            _, gpus = gpu_limit_of(container)
        except WorkloadError:
            continue
        if gpus <= 0:
            continue
        shown = " ".join(" ".join(str(w).split()) for w in command[:8])
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        name, repo = str(container.get("name"))[:63], image_repo_tag(str(container.get("image")))[0][:120]
        return (
            f"container {name} runs vLLM image {repo} on {gpus} GPU(s) with a command fitgate cannot follow to a "
            f"vLLM server ({shown!r}): not sized"
        )
    return None
