"""Kubernetes objects that run vLLM, read into the inputs of a ModelDeployment.

:func:`read_workload` takes one object (a dict as the API server or a YAML file has it) and returns
a :class:`Reading`, or None when the object runs no vLLM server. A reading converts into a raw
ModelDeployment ``spec`` (:meth:`Reading.spec`), so the operator and ``fitgate check`` size it on the
one path ModelDeployments take; the only check made here is the one a ModelDeployment cannot
express: the GPUs the pods ask for must cover TP x PP (:meth:`Reading.gpu_shortfall`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fitgate.sizing.errors import SizingError
from fitgate.sizing.multimodal import parse_limit_mm
from fitgate.sizing.offload import parse_kv_transfer_config
from fitgate.sizing.parallel import ALL2ALL_BACKENDS, parse_eplb_config
from fitgate.sizing.speculative import DRAFT_CHECKPOINT_METHODS, canonical_method
from fitgate.sizing.speculative import SPEC_METHODS as SPECULATIVE_METHODS
from fitgate.sizing.speculative import parse_config as parse_speculative_config
from fitgate.workloads.argv import (
    CommandError,
    EngineCommand,
    config_file_flags,
    container_env,
    find_engine_command,
    human_int,
    long_name,
    parse_engine_argv,
    ray_cluster_size,
)
from fitgate.workloads.bounds import BudgetError, ExpansionBudget, load_yaml
from fitgate.workloads.kinds import KINDS as WORKLOAD_KINDS
from fitgate.workloads.kinds import pod_template_paths
from fitgate.workloads.podspec import (
    as_dict,
    as_list,
    at_path,
    claim_template_of,
    gpu_limit_of,
    hami_share_of,
    image_repo_tag,
    memory_limit_of,
    placement_of,
    release_of_image,
    runai_share_of,
    tolerations_of,
    vllm_image,
)
from fitgate.workloads.reading import Reading, WorkloadError

#: VLLM_* variables that change vLLM 0.33's memory and that fitgate models with their defaults only
#: (a ModelDeployment cannot change them): a different value is named in the verdict's notes.
MEMORY_ENV = {
    # envs.py 0.33.0 L2219: the CUDA-graph estimate deducted from the KV budget (default "1" from 0.20)
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1",
    # envs.py 0.33.0 L1931-1932: chunked local attention keeps its own KV group (default "1" from 0.14)
    "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1",
    # envs.py 0.33.0 L1961: FlashInfer all-reduce workspace on Hopper/Blackwell (modelled in activation.py)
    "VLLM_ALLREDUCE_USE_FLASHINFER": "1",
}

#: Engine flags a ModelDeployment's ``spec.serving`` holds: flag -> (field, kind).
_SERVING_FLAGS: dict[str, tuple[str, str]] = {
    "--max-model-len": ("maxModelLen", "human_int"),
    "--kv-cache-dtype": ("kvCacheDtype", "str"),
    "--dtype": ("dtype", "dtype"),
    "--quantization": ("quantization", "quantization"),
    "--tensor-parallel-size": ("tensorParallelSize", "int"),
    "--pipeline-parallel-size": ("pipelineParallelSize", "int"),
    "--gpu-memory-utilization": ("gpuMemoryUtilization", "float"),
    "--max-num-seqs": ("maxNumSeqs", "int"),
    "--max-num-batched-tokens": ("maxNumBatchedTokens", "human_int"),
    "--enable-prefix-caching": ("enablePrefixCaching", "bool"),
    # data / expert / decode-context parallelism (docs/parallelism.md)
    "--data-parallel-size": ("dataParallelSize", "int"),
    "--data-parallel-size-local": ("dataParallelSizeLocal", "int"),
    "--enable-expert-parallel": ("enableExpertParallel", "bool"),
    "--enable-eplb": ("enableEplb", "bool"),
    "--num-redundant-experts": ("numRedundantExperts", "int"),
    "--decode-context-parallel-size": ("decodeContextParallelSize", "int"),
    # issue 20: CUDA graphs, KV block size, weights offloaded to the host
    "--enforce-eager": ("enforceEager", "bool"),
    "--block-size": ("blockSize", "int"),
    "--cpu-offload-gb": ("cpuOffloadGiB", "float"),
    "--enable-extensible-kv-cache": ("enableExtensibleKvCache", "bool"),  # vLLM 0.34 (config/vllm.py L3180)
}

#: Flags that change memory but that a ModelDeployment does not carry: named in the notes.
_NOT_MODELLED = ("--kv-cache-memory-bytes", "--swap-space", "--offload-group-size", "--enable-tower-connector-lora")

#: vLLM's --dtype spellings (config/model.py) as a ModelDeployment's.
_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32", "float32": "float32"}
#: Runtime quantizations a ModelDeployment takes; others describe a quantized checkpoint, read from its config.
_RUNTIME_QUANTIZATIONS = ("fp8", "bitsandbytes")

#: Where each kind keeps its pod template (dotted path), from the registry (:mod:`fitgate.workloads.kinds`).
POD_TEMPLATE_PATHS: dict[str, str] = pod_template_paths()

#: The annotation (on the workload or its pod template) naming the Hub model a path, storageUri or modelcar holds.
MODEL_ANNOTATION = "fitgate.io/model"
MODEL_ANNOTATION_HINT = (
    f"fitgate cannot read the model there; name what it holds with the annotation {MODEL_ANNOTATION}: "
    "org/name[@revision] (and keep it offline with `fitgate catalog add org/name`)"
)
_ANNOTATED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,95})/([A-Za-z0-9_.-]{1,96})(?:@([A-Za-z0-9_./-]{1,96}))?$")

#: Kinds read by :func:`read_workload` (besides any configured through ``extra_paths``).
KINDS = tuple(k.kind for k in WORKLOAD_KINDS)

# ---------------------------------------------------------------------------------------------
# --config files from ConfigMaps


#: The most bytes of a ``--config`` file fitgate parses (vLLM's own files are a few hundred bytes).
MAX_CONFIG_BYTES = 256 * 1024


def config_ref(path: str, container: dict[str, Any], pod: dict[str, Any]) -> tuple[str, str] | str:
    """(ConfigMap name, key) of the file ``--config PATH`` reads, or why it is not a ConfigMap's file."""
    volumes = {v.get("name"): v for v in (as_dict(x) for x in as_list(pod.get("volumes")))}
    for mount in (as_dict(m) for m in as_list(container.get("volumeMounts"))):
        mount_path = str(mount.get("mountPath", "")).rstrip("/")
        if not mount_path or not (path == mount_path or path.startswith(mount_path + "/")):
            continue
        volume = as_dict(volumes.get(mount.get("name")))
        cm = as_dict(volume.get("configMap"))
        if not cm:
            return f"--config {path}: volume {mount.get('name')} is not a ConfigMap"
        rel = str(mount.get("subPath") or path[len(mount_path) + 1 :])
        key = next(
            (str(i.get("key")) for i in (as_dict(x) for x in as_list(cm.get("items"))) if i.get("path") == rel), rel
        )
        return str(cm.get("name")), key
    return f"--config {path}: not a file of a ConfigMap mounted in container {container.get('name')}"


def _config_flags(
    path: str, container: dict[str, Any], pod: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]
) -> tuple[dict[str, str] | None, str, tuple[str, str] | None, dict[str, str]]:
    """The flags of ``--config PATH`` when PATH is a ConfigMap key mounted in the container.

    Returns (flags, "", (name, key), flag -> its key in the file as written) or (None, why not, (name, key)
    of the ConfigMap when it was not given, {}).
    """
    ref = config_ref(path, container, pod)
    if isinstance(ref, str):
        return None, ref, None, {}
    name, key = ref
    data = configmaps.get(name)
    if data is None:
        return None, f"--config {path}: ConfigMap {name} (key {key}) is not in the manifests read", ref, {}
    if key not in data:
        return None, f"--config {path}: ConfigMap {name} has no key {key}", None, {}
    if len(data[key].encode()) > MAX_CONFIG_BYTES:
        raise WorkloadError(f"--config {path}: ConfigMap {name} key {key} holds more than {MAX_CONFIG_BYTES} bytes")
    try:  # aliases, nodes and depth counted before anything is built (bounds.py, issue 22)
        loaded = load_yaml(data[key])
    except yaml.YAMLError as exc:
        text = " ".join(str(exc).split())[:300]
        raise WorkloadError(f"--config {path}: ConfigMap {name} key {key} is not YAML: {text}") from None
    except BudgetError as exc:
        raise BudgetError(f"--config {path}: ConfigMap {name} key {key}: {exc}") from None
    if not isinstance(loaded, dict):
        raise WorkloadError(f"--config {path}: ConfigMap {name} key {key}: expected a YAML mapping")
    flags = config_file_flags(loaded)
    keys = {long_name(f"--{k}"): str(k) for k in loaded}
    return flags, "", ref, {f: keys[f] for f in flags if f in keys}


# ---------------------------------------------------------------------------------------------
# Reading one container


@dataclass
class _Found:
    container: dict[str, Any]
    pod: dict[str, Any]
    engine: EngineCommand
    env: dict[str, str]
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)  # see Reading.origins


_VAR_WORD = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _env_origins(
    command: list[str], args: list[str], env: Mapping[str, str], entrypoint: bool
) -> dict[str, tuple[str, ...]]:
    """Flags whose whole value is one variable of the container's env: flag -> ("env", VAR, as written).

    The command line read again with nothing expanded: ``--max-model-len $(MAXLEN)`` (Kubernetes) or
    ``$MAXLEN`` / ``${MAXLEN}`` (a shell script) keeps its variable.
    """
    try:
        raw = find_engine_command(command, args, {}, image_entrypoint=entrypoint)
    except CommandError:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for flag, value in (raw.flags if raw is not None else {}).items():
        m = _VAR_WORD.fullmatch(value)
        name = m and (m.group(1) or m.group(2) or m.group(3))
        if name and name in env:
            out[flag] = ("env", name, value)
    return out


def _find_vllm(pod: dict[str, Any], platform_env: Mapping[str, str] | None = None) -> _Found | None:
    """The first container of a pod spec that runs a vLLM server (``platform_env``: what LWS injects)."""
    for container in (as_dict(c) for c in as_list(pod.get("containers"))):
        image = str(container.get("image") or "")
        if _flag(container, "--device") == "cpu" or "cpu" in image_repo_tag(image)[0]:
            continue  # vLLM's CPU backend: no GPU to check
        is_vllm, entrypoint = vllm_image(image)
        budget = ExpansionBudget()  # one per container: env, command and args together (issue 22)
        env = container_env(container.get("env"), budget, platform_env)
        try:
            engine = find_engine_command(
                [str(w) for w in as_list(container.get("command"))],
                [str(w) for w in as_list(container.get("args"))],
                env,
                image_entrypoint=is_vllm and entrypoint,
                budget=budget,
            )
        except CommandError as exc:
            raise WorkloadError(f"container {container.get('name')}: {exc}") from None
        if engine is not None:
            command = [str(w) for w in as_list(container.get("command"))]
            args = [str(w) for w in as_list(container.get("args"))]
            origins = _env_origins(command, args, env, is_vllm and entrypoint) if "$" in repr((command, args)) else {}
            return _Found(container, pod, engine, env, origins)
    return None


def _flag(container: dict[str, Any], name: str) -> str | None:
    words = [str(w) for w in as_list(container.get("command")) + as_list(container.get("args"))]
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _convert(flag: str, value: str, kind: str) -> Any:
    if "$((" in value:
        raise _UnknownValueError(f"{flag} {value[:120]}: shell arithmetic over values fitgate does not know")
    if "$(" in value or value.startswith("$"):
        raise _UnknownValueError(f"{flag} {value}: a variable not set in the container's env")
    if kind in ("int", "human_int"):
        if len(value) > 24 and re.fullmatch(r"\s*-?\d+(?:\.\d+)?[kKmMgGtT]?\s*", value):  # hardening (issue 22)
            raise _UnknownValueError(f"{flag}: a number of {len(value)} digits, past what fitgate reads (18)")
        n = human_int(value) if kind == "human_int" else (int(value) if re.fullmatch(r"-?\d{1,18}", value) else None)
        if n is None:
            raise WorkloadError(f"{flag}: expected a whole number (got {value!r})")
        return n
    if kind == "float":
        try:
            number = float(value)
        except ValueError:
            raise WorkloadError(f"{flag}: expected a number (got {value[:40]!r})") from None
        if not math.isfinite(number):  # hardening (issue 22): NaN, inf
            raise _UnknownValueError(f"{flag} {value[:40]}: not a finite number")
        return number
    if kind == "bool":
        return value.lower() not in ("false", "0", "no")
    if kind == "dtype":
        if value == "auto":
            return "auto"
        if value not in _DTYPES:
            raise WorkloadError(f"{flag}: expected one of auto, {', '.join(_DTYPES)} (got {value!r})")
        return _DTYPES[value]
    return value


def _speculative(value: str, notes: list[str]) -> dict[str, Any] | None:
    """``--speculative-config JSON`` as a ModelDeployment's ``serving.speculativeConfig``.

    JSON vLLM could not read is an error; a method fitgate does not size (``custom_class``, a newer one) is
    named in the notes and left out, never a denial.
    """
    if "$(" in value or value.startswith("$"):
        raise _UnknownValueError(f"--speculative-config {value}: a variable not set in the container's env")
    try:
        method, tokens = parse_speculative_config(value)
    except SizingError as exc:
        raise WorkloadError(str(exc)) from None
    method = canonical_method(method)
    if method not in SPECULATIVE_METHODS:
        notes.append(f"--speculative-config method {method}: not sized by fitgate (its drafter is not counted)")
        return None
    if method in DRAFT_CHECKPOINT_METHODS:
        notes.append(f"--speculative-config method {method}: the drafter is another checkpoint, not counted")
    return {"method": method, **({"numSpeculativeTokens": tokens} if tokens is not None else {})}


#: vLLM PR #33535 (2026-02) removed the VLLM_ALL2ALL_BACKEND variable (deprecated for --all2all-backend by
#: PR #26732, "scheduled for removal in v0.15.0"): releases from this one ignore it.
ALL2ALL_ENV_IGNORED_FROM = (0, 16, 0)


def _expert_parallel(
    flags: Mapping[str, str], env: Mapping[str, str], version: str | None, notes: list[str]
) -> dict[str, Any]:
    """``--eplb-config`` and the all2all backend (flag, else ``VLLM_ALL2ALL_BACKEND`` on older releases).

    A backend vLLM has no name for, or a variable this release ignores, is named in the notes and left
    out (sized with the default), never a denial.
    """
    out: dict[str, Any] = {}
    if "--eplb-config" in flags:
        value = flags["--eplb-config"]
        if "$(" in value or value.startswith("$"):
            raise _UnknownValueError(f"--eplb-config {value}: a variable not set in the container's env")
        try:
            out["numRedundantExperts"] = parse_eplb_config(value)
        except SizingError as exc:
            raise WorkloadError(f"--eplb-config: {exc}") from None
    backend = flags.get("--all2all-backend")
    if backend is None and env.get("VLLM_ALL2ALL_BACKEND"):
        release = tuple(int(x) for x in re.findall(r"\d+", version or "")[:3]) if version else None
        if release is not None and release < ALL2ALL_ENV_IGNORED_FROM:
            backend = env["VLLM_ALL2ALL_BACKEND"]
        else:
            notes.append(
                f"VLLM_ALL2ALL_BACKEND={env['VLLM_ALL2ALL_BACKEND']}: vLLM 0.16 and later ignore it (use "
                "--all2all-backend); sized with the default allgather_reducescatter"
            )
    if backend is not None:
        if "$(" in backend or backend.startswith("$"):
            raise _UnknownValueError(f"--all2all-backend {backend}: a variable not set in the container's env")
        if backend in ALL2ALL_BACKENDS:
            out["all2allBackend"] = backend
        else:
            notes.append(f"all2all backend {backend}: not one fitgate knows; its buffers are not counted")
    return out


def data_parallel_ranks(flags: Mapping[str, str], pods: int) -> int:
    """The data-parallel ranks of one replica: those of its one pod, or of all its ``pods``.

    vLLM 0.33 (vllm/engine/arg_utils.py 0.33.0 L2399-2535, ``create_engine_config``): a process runs
    ``--data-parallel-size-local`` ranks; without it, 1 with an external load balancer
    (``--data-parallel-rank`` or ``--data-parallel-external-lb``), world size / ``--nnodes`` / (TP x PP)
    on one of several nodes, else all ``--data-parallel-size`` ranks. Each rank holds TP x PP GPUs, so
    one pod needs TP x PP x its local ranks. A replica of several pods (a LeaderWorkerSet group) holds
    ``--data-parallel-size`` ranks in all (its pods' local ranks when only those are given).
    ``--data-parallel-size-local 0`` is a pod that runs the API server and no rank: it needs no GPU.
    """

    def number(flag: str, default: int, least: int = 0) -> int:
        if flag not in flags:
            return default
        n: int = _convert(flag, flags[flag], "int")
        if n < least:  # vLLM refuses it too: never read as some other number
            raise WorkloadError(f"{flag}: expected a whole number >= {least} (got {flags[flag]!r})")
        return n

    total = number("--data-parallel-size", 1, least=1)
    if pods > 1:
        if "--data-parallel-size" in flags or "--data-parallel-size-local" not in flags:
            return total
        return number("--data-parallel-size-local", 1) * pods
    if "--data-parallel-size-local" in flags:
        return number("--data-parallel-size-local", 1)
    external = "--data-parallel-rank" in flags or flags.get("--data-parallel-external-lb", "false") != "false"
    if external:
        return 1
    nnodes = number("--nnodes", 1)
    if nnodes > 1:  # the ranks of this node: world size / nnodes / (TP x PP), at least 1
        return max(total // nnodes, 1)
    return total


class _UnknownValueError(Exception):
    """A value fitgate cannot know (an unexpanded variable)."""


# --- LoRA, KV connectors, KV offloading, multimodal (issue 20; docs/lora-offload-multimodal.md) ---


_LORA_INT_FLAGS = (("--max-loras", "maxLoras"), ("--max-lora-rank", "maxLoraRank"), ("--max-cpu-loras", "maxCpuLoras"))


def _json_flag(flags: Mapping[str, str], flag: str) -> str | None:
    value = flags.get(flag)
    if value is not None and ("$(" in value or value.startswith("$")):
        raise _UnknownValueError(f"{flag} {value}: a variable not set in the container's env")
    return value


def _issue20_serving(flags: Mapping[str, str], notes: list[str]) -> dict[str, Any]:
    """``spec.serving`` fields of the LoRA, KV-transfer, KV-offloading and multimodal flags.

    A value vLLM itself would refuse is a WorkloadError; a setting fitgate does not size is a note.
    """
    serving: dict[str, Any] = {}
    if flags.get("--enable-lora", "false") not in ("false", "0", "no"):
        lora: dict[str, Any] = {}
        for flag, fld in (
            ("--max-loras", "maxLoras"),
            ("--max-lora-rank", "maxLoraRank"),
            ("--max-cpu-loras", "maxCpuLoras"),
        ):
            if flag in flags:
                lora[fld] = _convert(flag, flags[flag], "int")
        if flags.get("--fully-sharded-loras", "false") not in ("false", "0", "no"):
            lora["fullyShardedLoras"] = True
        if "--lora-dtype" in flags:
            lora["loraDtype"] = flags["--lora-dtype"]
        if "--lora-target-modules" in flags:
            # nargs="+": the argv reader keeps the first word; fewer targets count fewer slots (never more)
            lora["targetModules"] = [flags["--lora-target-modules"]]
            notes.append("--lora-target-modules: only its first module is read; slots of the others are not counted")
        serving["lora"] = lora
    text = _json_flag(flags, "--kv-transfer-config")
    if text is not None:
        try:
            connector, role, device = parse_kv_transfer_config(text)
        except SizingError as exc:
            raise WorkloadError(f"--kv-transfer-config: {exc}") from None
        if connector is None:
            notes.append("--kv-transfer-config without kv_connector: not sized")
        else:
            transfer: dict[str, Any] = {"connector": connector}
            if role is not None:
                transfer["role"] = role
            if device in ("cuda", "cpu"):
                transfer["bufferDevice"] = device
            serving["kvTransfer"] = transfer
    if "--kv-offloading-size" in flags:
        offloading: dict[str, Any] = {
            "sizeGiB": _convert("--kv-offloading-size", flags["--kv-offloading-size"], "float")
        }
        if "--kv-offloading-backend" in flags:
            offloading["backend"] = flags["--kv-offloading-backend"]
        serving["kvOffloading"] = offloading
    mm: dict[str, Any] = {}
    text = _json_flag(flags, "--limit-mm-per-prompt")
    if text is not None:
        try:
            mm["limitPerPrompt"] = dict(parse_limit_mm(text))
        except SizingError as exc:
            raise WorkloadError(f"--limit-mm-per-prompt: {exc}") from None
    if "--mm-encoder-tp-mode" in flags:
        mm["encoderTpMode"] = flags["--mm-encoder-tp-mode"]
    if "--mm-processor-cache-gb" in flags:
        mm["processorCacheGiB"] = _convert("--mm-processor-cache-gb", flags["--mm-processor-cache-gb"], "float")
    if "--disable-mm-preprocessor-cache" in flags:
        notes.append("--disable-mm-preprocessor-cache: removed before vLLM 0.33 (use --mm-processor-cache-gb 0)")
    if mm:
        serving["multimodal"] = mm
    return serving


def read_container(
    found: _Found, configmaps: Mapping[str, Mapping[str, str]]
) -> tuple[dict[str, str], str | None, list[str], tuple[str, str] | None, dict[str, tuple[str, ...]]]:
    """The engine flags of a container (``--config`` merged under the command line), unknown, notes.

    Then the (ConfigMap, key) its ``--config`` file comes from, if any, and where each flag's value was
    written when not on the command line as a literal (:attr:`Reading.origins`).
    """
    flags = dict(found.engine.flags)
    notes: list[str] = []
    unknown: str | None = None
    ref: tuple[str, str] | None = None
    config = flags.pop("--config", None)
    origins = dict(found.origins)
    if config is not None:
        from_file, why, ref, keys = _config_flags(config, found.container, found.pod, configmaps)
        if from_file is None:
            unknown = why
        else:
            for flag in from_file.keys() - flags.keys():
                origins[flag] = ("config", *(ref or ("?", "?")), keys.get(flag, flag[2:]))
            flags = {**from_file, **flags}  # vLLM: command line > config file > defaults
    for name, default in MEMORY_ENV.items():
        if name in found.env and found.env[name] != default:
            notes.append(f"{name}={found.env[name]}: fitgate sizes vLLM with its default ({default})")
    return flags, unknown, notes, ref, origins


def _reading(
    kind: str,
    meta: dict[str, Any],
    found: _Found,
    configmaps: Mapping[str, Mapping[str, str]],
    *,
    model: str | None = None,
    extra_flags: Mapping[str, str] | None = None,
    extra_origins: Mapping[str, tuple[str, ...]] | None = None,
    gpus_per_replica: int | None = None,
    pods_per_replica: int = 1,
    notes: tuple[str, ...] = (),
    pod_annotations: Mapping[str, Any] | None = None,
) -> Reading:
    container = found.container
    cname = str(container.get("name") or "?")
    base = Reading(
        kind=kind,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or "?"),
        container=cname,
        how=found.engine.how,
        model=model or found.engine.flags.get("--model") or found.engine.model,  # named even when unreadable
    )
    try:
        flags, unknown, more, ref, origins = read_container(found, configmaps)
        origins = {**{f: o for f, o in (extra_origins or {}).items() if f not in flags}, **origins}
        flags = {**(extra_flags or {}), **flags}
        version, version_note = release_of_image(str(container.get("image") or ""), found.env)
        resource, per_pod = gpu_limit_of(container)
        selector, placement_notes = placement_of(found.pod)
        hami = hami_share_of(container) or runai_share_of(pod_annotations or {})
        serving: dict[str, Any] = {}
        for flag, (fld, conv) in _SERVING_FLAGS.items():
            if flag not in flags:
                continue
            value = flags[flag]
            if conv == "quantization":
                if value in _RUNTIME_QUANTIZATIONS:
                    serving[fld] = value
                else:
                    more.append(f"--quantization {value}: read from the checkpoint's own config")
                continue
            if flag == "--max-model-len" and value in ("-1", "auto"):
                more.append("--max-model-len auto: sized at the model's full context (vLLM would lower it to fit)")
                continue
            serving[fld] = _convert(flag, value, conv)
        if "--speculative-config" in flags:
            speculative = _speculative(flags["--speculative-config"], more)
            if speculative is not None:
                serving["speculativeConfig"] = speculative
        serving.update(_expert_parallel(flags, found.env, version, more))
        serving.update(_issue20_serving(flags, more))
        name = model or flags.get("--model") or found.engine.model
        if name is not None and "$(" in name:
            raise _UnknownValueError(f"model {name}: a variable not set in the container's env")
        more.extend(f"{f}: not in a ModelDeployment; sized with vLLM's default" for f in _NOT_MODELLED if f in flags)
        location = name if name is not None and ("://" in name or name.startswith("/")) else None
        served = flags.get("--served-model-name", "").split(" ")[0]
        if location is not None and _ANNOTATED.match(served):  # a hint only: a served name is whatever one chose
            more.append(
                f"model {location} is served as {served}: if it holds that, annotate {MODEL_ANNOTATION}: {served}"
            )
        if (
            name is not None and "://" in name and unknown is None
        ):  # s3://, gs://, pvc://: not a directory fitgate reads
            unknown = f"model {name}: {MODEL_ANNOTATION_HINT}"
        if name is None and unknown is None:
            name = "Qwen/Qwen3-0.6B"  # vllm/config/model.py 0.33.0 L155: the model of a bare `vllm serve`
            more.append("no model given: vLLM serves its default, Qwen/Qwen3-0.6B")
        ray = ray_cluster_size([str(w) for w in as_list(container.get("command")) + as_list(container.get("args"))])
        if kind == "StatefulSet" and ray and ray > 1 and gpus_per_replica is None:
            # one replica is the whole Ray cluster: the StatefulSet's pods (KAITO's multi-node inference)
            pods_per_replica, gpus_per_replica = ray, per_pod * ray
        dp = data_parallel_ranks(flags, pods_per_replica)
    except (_UnknownValueError, BudgetError) as exc:
        return _finish(base, unknown=str(exc))
    except WorkloadError as exc:
        return _finish(base, invalid=f"container {cname}: {exc}" if not str(exc).startswith("container") else str(exc))
    all_notes = (*notes, *more, *placement_notes, *((version_note,) if version_note else ()))
    return _finish(
        Reading(
            kind=base.kind,
            namespace=base.namespace,
            name=base.name,
            container=cname,
            how=found.engine.how,
            model=name,
            revision=flags.get("--revision"),
            serving=serving,
            vllm_version=version,
            gpu_resource=resource or "nvidia.com/gpu",
            gpus_per_replica=per_pod if gpus_per_replica is None else gpus_per_replica,
            pods_per_replica=pods_per_replica,
            data_parallel=dp,  # 0: a pod that runs the API server only (--data-parallel-size-local 0)
            node_selector=selector,
            claim_template=claim_template_of(container, found.pod),
            tolerations=tolerations_of(found.pod),
            gpu_share=hami,
            unknown=unknown,
            notes=all_notes,
            warnings=(version_note,) if version_note else (),
            model_location=location,
            args=flags,
            config_map=ref,
            origins=origins,
            memory_limit_bytes=memory_limit_of(container),
        )
    )


#: An invalid / unknown message is one line of at most this many characters (a hostile value is not echoed whole).
MAX_WHY_CHARS = 500


def _finish(reading: Reading, **changes: Any) -> Reading:
    values = {**reading.__dict__, **changes}
    for key in ("invalid", "unknown"):  # hardening (issue 22): one line, bounded
        if isinstance(values.get(key), str):
            why = " ".join(str(values[key]).split())
            values[key] = why if len(why) <= MAX_WHY_CHARS else why[: MAX_WHY_CHARS - 3] + "..."
    values["fingerprint"] = ""
    text = json.dumps({k: v for k, v in values.items() if k not in ("namespace", "name")}, sort_keys=True, default=str)
    values["fingerprint"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Reading(**values)


# ---------------------------------------------------------------------------------------------
# Kinds


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
    reading = _reading("InferenceService", meta, found, configmaps, notes=(f"ServingRuntime {rname} merged in",))
    if uri.startswith("hf://"):
        return _finish(reading, model=uri[len("hf://") :], model_location=None)
    if uri and reading.unknown is None and reading.invalid is None:
        return _finish(reading, unknown=f"storageUri {uri}: {MODEL_ANNOTATION_HINT}", model_location=uri)
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
    if fmt not in ("huggingface", "vllm"):
        return None
    args = [str(a) for a in as_list(model.get("args"))]
    env = container_env(model.get("env"))
    engine = parse_engine_argv("KServe huggingface runtime", list(args))
    flags = engine.flags
    if flags.get("--backend", "vllm") not in ("vllm", "auto"):
        return None
    uri = str(model.get("storageUri") or "")
    name = flags.get("--model-id") or flags.get("--model")
    notes: tuple[str, ...] = ("the KServe huggingface runtime's vLLM release is not known; sized as the newest",)
    if name is None and uri.startswith("hf://"):
        name = uri[len("hf://") :]
    container = {**model, "name": "kserve-container", "image": "", "command": [], "args": args}
    pod = {**predictor, "containers": [container]}
    found = _Found(container, pod, EngineCommand(engine.how, None, flags, engine.words), env)
    if name is None and uri:  # pvc://, s3://, oci:// (a modelcar): the location, Unknown until annotated
        return _reading("InferenceService", meta, found, configmaps, model=uri, notes=notes)
    if name is None:
        reading = _reading("InferenceService", meta, found, configmaps, notes=notes)
        return _finish(reading, unknown=f"no --model_id or storageUri: {MODEL_ANNOTATION_HINT}")
    return _reading("InferenceService", meta, found, configmaps, model=name, notes=notes)


def _llm_inference_service(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A KServe LLMInferenceService: ``spec.model.uri``, ``spec.parallelism``, ``spec.template`` and ``spec.worker``.

    The controller writes the ``vllm serve`` command; the template's ``main`` container holds the GPU
    limit, its ``args`` and ``VLLM_ADDITIONAL_ARGS`` (engine flags the default configuration appends).
    With a ``worker``, a replica is ``data / dataLocal`` pods (else one per pipeline stage).
    """
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    template = as_dict(spec.get("template"))
    uri = str(as_dict(spec.get("model")).get("uri") or "")
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
    if found is None:  # the controller supplies `vllm serve`; the template holds resources and args
        engine = parse_engine_argv("LLMInferenceService", [str(a) for a in as_list(main.get("args"))])
        found = _Found(main, template, engine, env)
    additional = env.get("VLLM_ADDITIONAL_ARGS", "")
    if additional:
        try:
            words = shlex.split(additional)
        except ValueError as exc:
            raise WorkloadError(f"container {main.get('name')}: env VLLM_ADDITIONAL_ARGS: {exc}") from None
        additional_flags = parse_engine_argv("VLLM_ADDITIONAL_ARGS", words).flags
        extra.update(additional_flags)
        origins.update(dict.fromkeys(additional_flags, ("env-args", "VLLM_ADDITIONAL_ARGS")))
    name = uri[len("hf://") :] if uri.startswith("hf://") else None
    pods = 1
    notes: tuple[str, ...] = ()
    if spec.get("worker"):
        data, local = par.get("data"), par.get("dataLocal")
        if isinstance(data, int) and isinstance(local, int) and local > 0:
            pods = max(1, -(-data // local))
        else:
            pods = max(1, int(par.get("pipeline") or 1))
            notes = ("multi-node LLMInferenceService: one node per pipeline stage assumed",)
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


def _leader_worker_set(obj: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> Reading | None:
    """A LeaderWorkerSet: one replica is ``size`` pods (a leader and size-1 workers); TP x PP may span them."""
    meta = as_dict(obj.get("metadata"))
    lwt = as_dict(at_path(obj, "spec.leaderWorkerTemplate"))
    size_raw = lwt.get("size", 1)
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


def _blank(kind: str, meta: dict[str, Any]) -> Reading:
    return Reading(kind, str(meta.get("namespace") or "default"), str(meta.get("name") or "?"), "-", "-", None)


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
    where = reading.model_location or reading.model
    if reading.model_location is None and reading.model is not None and reading.model != name:
        note = f"annotation {MODEL_ANNOTATION}: {name} differs from the model the command names ({reading.model})"
        return _finish(reading, notes=(*reading.notes, note + "; sized as the command names it"))
    unknown = reading.unknown if reading.unknown is None or MODEL_ANNOTATION not in reading.unknown else None
    note = f"{where or 'the model'} holds {name} (annotation {MODEL_ANNOTATION})"
    return _finish(
        reading,
        model=name,
        revision=revision or reading.revision,
        unknown=unknown,
        notes=(*reading.notes, note),
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
    path = {**POD_TEMPLATE_PATHS, **(extra_paths or {})}.get(kind)
    reading = _read_kind(obj, kind, path, configmaps or {}, runtimes or {})
    if reading is None:
        return None
    return with_model_annotation(reading, annotated_model(obj, path))


def _read_kind(
    obj: dict[str, Any],
    kind: str,
    path: str | None,
    cms: Mapping[str, Mapping[str, str]],
    runtimes: Mapping[str, Mapping[str, Any]],
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
        pod = as_dict(at_path(obj, path))
        found = _find_vllm(pod)
    except WorkloadError as exc:
        return _finish(_blank(kind, meta), invalid=str(exc))
    if found is None:
        return None
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
