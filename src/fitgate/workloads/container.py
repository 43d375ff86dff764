"""Reading the container of a pod that runs vLLM into a :class:`Reading`: its command line, ``--config``, env.

Finds the vLLM container (:func:`_find_vllm`), merges its ``--config`` file from a ConfigMap under the
command line (vLLM's order), and builds the :class:`Reading` from the flags (:mod:`fitgate.workloads.flags`),
the image's release, the GPU limit and the placement. Which container of which object is
:mod:`fitgate.workloads.reader`'s.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fitgate.sizing.cudagraphs import graph_flags
from fitgate.sizing.hf_config import MAX_ROPE_THETA, OVERRIDES_EXPECTED, parse_hf_overrides
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION_NOT_SIZED, is_gguf
from fitgate.sizing.resolve import KV_CACHE_MEMORY_SINCE, PERFORMANCE_MODES
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION, falls_back_to_v0
from fitgate.workloads.argv import (
    EngineCommand,
    find_engine_command,
    long_name,
    ray_cluster_size,
    starts_ray,
    unabbreviated,
)
from fitgate.workloads.bounds import BudgetError, ExpansionBudget, load_yaml
from fitgate.workloads.expansion import (
    ALLOW_LONG_ENV,
    ALLOW_LONG_FROM_REFERENCE,
    configmap_refs,
    container_env,
    missing_configmap,
)
from fitgate.workloads.flags import (
    _RUNTIME_QUANTIZATIONS,
    _SERVING_FLAGS,
    MEMORY_ENV,
    _convert,
    _expert_parallel,
    _issue20_serving,
    _runner,
    _speculative,
    _UnknownValueError,
    data_parallel_ranks,
    env_serving,
    not_modelled_notes,
    pods_of_one_engine,
    runs_on_cpu,
)
from fitgate.workloads.flagvalues import config_file_flags, reads_false_switches
from fitgate.workloads.podspec import (
    as_dict,
    as_list,
    built_on_vllm,
    claim_template_of,
    gpu_limit_of,
    hami_share_of,
    hub_cache_repo,
    memory_limit_of,
    placement_of,
    refused_value,
    release_before,
    release_of_image,
    runai_devices,
    runai_share_of,
    tolerations_of,
    unsized_devices,
    vllm_image,
)
from fitgate.workloads.reading import Reading, WorkloadError
from fitgate.workloads.shellscript import CommandError
from fitgate.workloads.shellwords import undecided_reason
from fitgate.workloads.vllm_flags import OMNI_NOT_SIZED, unknown_flags

#: The annotation (on the workload or its pod template) naming the Hub model a path, storageUri or modelcar holds.
MODEL_ANNOTATION = "fitgate.io/model"


#: Where KServe mounts a storageUri's model in the serving container.
KSERVE_MODEL_MOUNT = "/mnt/models"
MODEL_ANNOTATION_HINT = (
    f"fitgate cannot read the model there; name what it holds with the annotation {MODEL_ANNOTATION}: "
    "org/name[@revision] (and keep it offline with `fitgate catalog add org/name`)"
)
_ANNOTATED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,95})/([A-Za-z0-9_.-]{1,96})(?:@([A-Za-z0-9_./-]{1,96}))?$")

# ---------------------------------------------------------------------------------------------
# --config files from ConfigMaps


#: The most bytes of a ``--config`` file fitgate parses (vLLM's own files are a few hundred bytes).
#: The variable that says whether vLLM (0.18+) deducts its CUDA-graph estimate from the KV budget: sized.
GRAPH_ESTIMATE_ENV = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
FLASHINFER_SAMPLER_ENV = "VLLM_USE_FLASHINFER_SAMPLER"  # the sampler's profiling pass (sizing.activation)
USE_V1_ENV = "VLLM_USE_V1"  # vLLM 0.8-0.10: "0" runs V0 (sizing.versions.engine_for)
ATTENTION_BACKEND_ENV = "VLLM_ATTENTION_BACKEND"  # vLLM 0.8-0.10: a V0-only backend runs V0 (falls_back_to_v0)
MAX_CONFIG_BYTES = 256 * 1024
#: ``--rope-scaling`` / ``--rope-theta`` exist up to 0.11.0 (engine/arg_utils.py 0.11.0 L371-372; none in 0.11.1,
#: 0.11.2 or 0.12.0: hunt197 F4).
ROPE_FLAGS_UNTIL = (0, 11, 1)


def _hf_overrides(text: str | None, notes: list[str]) -> dict[str, Any] | None:
    """``--hf-overrides JSON`` (a ModelDeployment's ``model.hfOverrides``); what cannot be read is noted, not sized."""
    if text is None or not text.strip():
        return None
    value = parse_hf_overrides(text)
    if value is None:
        notes.append(
            f"--hf-overrides {text[:80]!r}: not a JSON object fitgate reads ({OVERRIDES_EXPECTED}); the "
            "model's own config is sized"
        )
    return value


def _float_or_none(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _rope_overrides(flags: Mapping[str, str], notes: list[str]) -> dict[str, Any]:
    """``--rope-scaling JSON`` / ``--rope-theta X`` (vLLM up to 0.11) as the config keys they override.

    vLLM merges them into ``hf_overrides`` after ``--hf-overrides`` (config.py 0.10.0 L501-513, config/model.py
    0.11.0 L398-410; arg_utils.py 0.7.2 L539-543); 0.12 dropped both flags.
    """
    out: dict[str, Any] = {}
    text = flags.get("--rope-scaling")
    if text is not None and text.strip():
        value = parse_hf_overrides(text)
        if value is None:
            notes.append(f"--rope-scaling {text[:80]!r}: not a JSON object fitgate reads ({OVERRIDES_EXPECTED})")
        else:
            out["rope_scaling"] = value
    theta = flags.get("--rope-theta")
    if theta is not None and theta.strip():
        base = _float_or_none(theta)
        if base is not None and 0 < base <= MAX_ROPE_THETA:
            out["rope_theta"] = base
        else:
            limit = f"not a number above 0, at most {MAX_ROPE_THETA:g}"
            notes.append(f"--rope-theta {theta[:40]!r}: {limit}; the model's own is sized")
    return out


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
    path: str, found: _Found, configmaps: Mapping[str, Mapping[str, str]]
) -> tuple[dict[str, str] | None, str, tuple[str, str] | None, dict[str, str]]:
    """The flags of ``--config PATH``, a mounted ConfigMap key, as the invocation and its release read them.

    (flags, "", (name, key), flag -> its key as written) or (None, why not, (name, key) of a ConfigMap not given, {}).
    """
    ref = config_ref(path, found.container, found.pod)
    if isinstance(ref, str):
        return None, ref, None, {}
    name, key = ref
    data = configmaps.get(name)
    if data is None:
        return None, f"--config {path}: ConfigMap {name} (key {key}) is not in the manifests read", ref, {}
    if key not in data:
        return None, f"--config {path}: ConfigMap {name} has no key {key}", None, {}
    if len(data[key].encode()) > MAX_CONFIG_BYTES:
        # past fitgate's bound, not vLLM's (load_config_file has none; a ConfigMap holds 1 MiB): Unknown (hunt207 F3)
        raise BudgetError(f"--config {path}: ConfigMap {name} key {key} holds more than {MAX_CONFIG_BYTES} bytes")
    try:  # aliases, nodes and depth counted before anything is built (bounds.py, issue 22)
        loaded = load_yaml(data[key])
    except yaml.YAMLError as exc:
        text = " ".join(str(exc).split())[:300]
        raise WorkloadError(f"--config {path}: ConfigMap {name} key {key} is not YAML: {text}") from None
    except BudgetError as exc:
        raise BudgetError(f"--config {path}: ConfigMap {name} key {key}: {exc}") from None
    if not isinstance(loaded, dict):
        raise WorkloadError(f"--config {path}: ConfigMap {name} key {key}: expected a YAML mapping")
    release = release_of_image(str(found.container.get("image") or ""), found.env)[0]  # a named release, or None
    flags = config_file_flags(loaded, falses=reads_false_switches(found.engine.how, release), resolve=unabbreviated)
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
    platform_env: dict[str, str] = field(default_factory=dict)  # what the platform injects (LWS_*)


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
    except (CommandError, BudgetError):  # the script unexpanded past MAX_SCRIPT_BYTES: no origins, as unreadable
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
        if runs_on_cpu(container):
            continue  # vLLM's CPU backend: no GPU to check
        found = _engine_of(container, pod, platform_env, None)
        if found is not None:
            return found
    return None


def _engine_of(
    container: dict[str, Any],
    pod: dict[str, Any],
    platform_env: Mapping[str, str] | None,
    configmaps: Mapping[str, Mapping[str, str]] | None,
) -> _Found | None:
    """``container``'s vLLM command with its env (ConfigMap values read from ``configmaps``), or None."""
    is_vllm, entrypoint = vllm_image(str(container.get("image") or ""))
    if not is_vllm and not as_list(container.get("command")) and built_on_vllm(container):
        is_vllm = entrypoint = True
    budget = ExpansionBudget()  # one per container: env, command and args together (issue 22)
    env = container_env(
        container.get("env"), budget, platform_env, env_from=container.get("envFrom"), configmaps=configmaps
    )
    command = [str(w) for w in as_list(container.get("command"))]
    args = [str(w) for w in as_list(container.get("args"))]
    try:
        engine = find_engine_command(
            command, args, env, image_entrypoint=is_vllm and entrypoint, budget=budget,
            script_server=is_vllm or built_on_vllm(container),
        )  # fmt: skip
    except CommandError as exc:
        raise WorkloadError(f"container {container.get('name')}: {exc}") from None
    except BudgetError as exc:
        raise BudgetError(f"container {container.get('name')}: {exc}") from None
    if engine is None:
        return None
    origins = _env_origins(command, args, env, is_vllm and entrypoint) if "$" in repr((command, args)) else {}
    # the server's process env: the container's, plus what its command line sets (`VAR=1 vllm serve`, hunt178 F1)
    process_env = {**env, **engine.env} if engine.env else env
    return _Found(container, pod, engine, process_env, origins, dict(platform_env or {}))


def _with_configmaps(found: _Found, configmaps: Mapping[str, Mapping[str, str]]) -> _Found:
    """``found`` read again with the ConfigMaps its env names, where ``configmaps`` holds them."""
    if not any(name in configmaps for name, _ in configmap_refs(found.container)):
        return found
    again = _engine_of(found.container, found.pod, found.platform_env, configmaps)
    return found if again is None else again


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
        from_file, why, ref, keys = _config_flags(config, found, configmaps)
        if from_file is None:
            unknown = why
        else:
            for flag in from_file.keys() - flags.keys():
                origins[flag] = ("config", *(ref or ("?", "?")), keys.get(flag, flag[2:]))
            flags = {**from_file, **flags}  # vLLM: command line > config file > defaults
    for name, default in MEMORY_ENV.items():
        if name == GRAPH_ESTIMATE_ENV and found.env.get(name, "").strip() in ("0", "1"):
            continue  # sized (serving.cudagraphMemoryEstimate)
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
        found = _with_configmaps(found, configmaps)
        if found.engine.undecided:  # hunt75 D1-D4: a value set in a script branch fitgate cannot decide
            raise _UnknownValueError(undecided_reason(found.engine.undecided[0]))
        flags, unknown, more, ref, origins = read_container(found, configmaps)
        origins = {**{f: o for f, o in (extra_origins or {}).items() if f not in flags}, **origins}
        flags = {**(extra_flags or {}), **flags}
        for flag in [f for f, v in flags.items() if str(v).strip() in ("", "None") and f != "--model"]:
            # vLLM reads "" and "None" of an optional flag as unset (engine/arg_utils.py 0.34.0 L173-178
            # optional_type): a script's ``--flag=${VAR-}`` with VAR unset, a Helm template's empty value, is the
            # default (hunt107 F5: --kv-offloading-size None, --kv-transfer-config '' were Invalid)
            more.append(f"{flag} {str(flags.pop(flag)).strip()!r}: unset, vLLM's default")
        version, version_note = release_of_image(str(container.get("image") or ""), found.env)
        resource, per_pod = gpu_limit_of(container)
        selector, gpu_hints, placement_notes = placement_of(found.pod)
        hami = hami_share_of(container) or runai_share_of(pod_annotations or {})
        if not per_pod and any(k.startswith("runai") for k in hami):
            # hunt50 F5: a Run:ai / KAI-scheduler fraction is asked for by the annotation alone, with no
            # nvidia.com/gpu limit (KAI's gpu-sharing examples): one GPU, of which the pod gets its share; Run:ai's
            # gpu-fraction-num-devices gives the pod that many devices, each with the fraction (hunt81 F3)
            resource, per_pod = "nvidia.com/gpu", runai_devices(pod_annotations or {})
            each = "one GPU" if per_pod == 1 else f"each of {per_pod} GPUs (gpu-fraction-num-devices)"
            more.append(f"Run:ai / KAI GPU fraction without an nvidia.com/gpu limit: a share of {each}")
        serving: dict[str, Any] = {}
        for flag, (fld, conv) in _SERVING_FLAGS.items():
            if flag not in flags:
                continue
            value = flags[flag]
            if conv == "quantization":
                if value in _RUNTIME_QUANTIZATIONS:
                    serving[fld] = value
                elif value in RUNTIME_QUANTIZATION_NOT_SIZED:
                    unknown = unknown or f"--quantization {value}: a load-time quantization fitgate does not size"
                else:
                    more.append(f"--quantization {value}: read from the checkpoint's own config")
                continue
            if (
                flag == "--kv-cache-memory-bytes"
                and version is not None
                and release_before(version, KV_CACHE_MEMORY_SINCE)
            ):
                more.append(f"--kv-cache-memory-bytes: vLLM {version} has no such flag (from 0.10.2); not sized")
                continue
            if flag == "--max-model-len" and value.strip().lower() in ("-1", "auto"):
                serving[fld] = "auto"  # vLLM 0.14+ lowers it to the longest that fits (fitgate.sizing.auto_fit)
                continue
            serving[fld] = _convert(flag, value, conv)
        runner = _runner(flags, more)
        if runner is not None:
            serving["runner"] = runner
        if "--speculative-config" in flags:
            speculative = _speculative(flags["--speculative-config"], more, version)
            if speculative is not None:
                serving["speculativeConfig"] = speculative
        serving.update(env_serving(found.env))
        if found.env.get(ALLOW_LONG_ENV) == ALLOW_LONG_FROM_REFERENCE:
            more.append(f"{ALLOW_LONG_ENV} comes from a reference fitgate does not read: read as set (hunt209 F1)")
        sampler = found.env.get(FLASHINFER_SAMPLER_ENV, "").strip()
        if sampler in ("0", "1"):
            serving["flashinferSampler"] = sampler == "1"  # envs.py 0.10.2 L482-484: bool(int(...)), unset None
        elif sampler:
            more.append(f"{FLASHINFER_SAMPLER_ENV}={sampler[:20]!r}: not 0 or 1; sized as unset")
        use_v1 = found.env.get(USE_V1_ENV, "").strip()
        if use_v1 in ("0", "1"):
            serving["useV1"] = use_v1 == "1"  # envs.py 0.10.0 L650-651: bool(int(...))
        elif use_v1:
            more.append(f"{USE_V1_ENV}={use_v1[:20]!r}: not 0 or 1; sized as unset")
        backend = found.env.get(ATTENTION_BACKEND_ENV, "").strip()
        if backend and "useV1" not in serving and version is not None and falls_back_to_v0(version, backend):
            serving["useV1"] = False
            more.append(f"{ATTENTION_BACKEND_ENV}={backend[:40]}: not a V1 backend, vLLM {version} falls back to V0")
        estimate = found.env.get(GRAPH_ESTIMATE_ENV, "").strip()
        if estimate in ("0", "1"):
            serving["cudagraphMemoryEstimate"] = estimate == "1"
        performance = flags.get("--performance-mode", "").strip()
        if performance in PERFORMANCE_MODES:
            serving["performanceMode"] = performance
        elif performance:
            more.append(f"--performance-mode {performance[:40]!r}: not one fitgate knows; sized as balanced")
        graphs = graph_flags(flags)
        more.extend(graphs.notes)
        if graphs.mode is not None:
            serving["cudagraphMode"] = graphs.mode
        if graphs.capture_sizes is not None:
            serving["cudagraphCaptureSizes"] = list(graphs.capture_sizes)
        if graphs.max_capture_size is not None:
            serving["maxCudagraphCaptureSize"] = graphs.max_capture_size
        overrides = _hf_overrides(flags.get("--hf-overrides"), more)
        rope = _rope_overrides(flags, more)
        if rope:
            overrides = {**(overrides or {}), **rope}
            if version is not None and not release_before(version, ROPE_FLAGS_UNTIL):
                more.append(f"--rope-scaling / --rope-theta: vLLM {version} has no such flags (gone in 0.11.1)")
        serving.update(_expert_parallel(flags, found.env, version, more))
        serving.update(_issue20_serving(flags, more))
        name = model or flags.get("--model") or found.engine.model
        if name is not None and "$(" in name:
            raise _UnknownValueError(f"model {name}: a variable not set in the container's env")
        more.extend(not_modelled_notes(flags))
        strange = unknown_flags(flags, found.engine.how)
        if strange:  # hunt110 F2: a newer release's flag, a plugin's or a typo: said, and never a denial (may_shrink)
            more.append(
                f"{', '.join(f[:60] for f in strange[:5])}: not a flag of any vLLM release fitgate has read (up to "
                f"{DEFAULT_VLLM_VERSION}): not read, and a misfit with it is Unknown"
            )
        own = str(flags.get("--model") or found.engine.model or "")
        if unknown is None and (
            is_gguf(own) or flags.get("--load-format", "").strip() == "gguf" or flags.get("--quantization") == "gguf"
        ):
            # hunt28 F2: a GGUF file's weights carry their own per-tensor quantization types; an annotation naming the
            # base model would size it unquantized (Qwen3-8B Q4_K_M: 15.27 GiB, not ~4.7), a denial on a small card
            unknown = (
                f"model {own[:200] or name}: GGUF weights (each tensor's quantization type is in the file, which "
                "fitgate does not read) are not sized; naming the base model would size it unquantized"
            )
        if unknown is None and flags.get("--omni", "false") != "false":
            unknown = f"--omni: {OMNI_NOT_SIZED}"
        cached = hub_cache_repo(name or "")
        if cached is not None and unknown is None:
            more.append(f"model {name[:200] if name else ''}: the Hugging Face cache of {cached[0]}")
            name, flags = cached[0], {**flags, **({"--revision": cached[1]} if cached[1] else {})}
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
        elif (
            name is not None
            and name.startswith("/")
            and not name.startswith(KSERVE_MODEL_MOUNT)  # KServe's reader names the storageUri mounted there
            and unknown is None
            and not os.path.isdir(name[:4096])
        ):
            # a path inside the container (a PVC or GCS FUSE mount; hunt16 M1): not invalid, not readable here
            unknown = f"model {name[:200]} is a path inside the container: {MODEL_ANNOTATION_HINT}"
        if name is None and unknown is None:
            name = "Qwen/Qwen3-0.6B"  # vllm/config/model.py 0.33.0 L155: the model of a bare `vllm serve`
            more.append("no model given: vLLM serves its default, Qwen/Qwen3-0.6B")
        words = [str(w) for w in as_list(container.get("command")) + as_list(container.get("args"))]
        ray = ray_cluster_size(words)
        if kind == "StatefulSet" and ray and ray > 1 and gpus_per_replica is None:
            # one replica is the whole Ray cluster: the StatefulSet's pods (KAITO's multi-node inference)
            pods_per_replica, gpus_per_replica = ray, per_pod * ray
        dp = data_parallel_ranks(flags, pods_per_replica)
        if gpus_per_replica is None:
            need = int(serving.get("tensorParallelSize", 1)) * int(serving.get("pipelineParallelSize", 1)) * dp
            spread = pods_of_one_engine(flags, starts_ray(words), need, per_pod)
            if spread is not None:
                pods_per_replica, gpus_per_replica = spread[0], per_pod * spread[0]
                more.append(spread[1])
                dp = data_parallel_ranks(flags, pods_per_replica)
    except (_UnknownValueError, BudgetError) as exc:
        missing = missing_configmap(found.container, configmaps) if "variable not set" in str(exc) else None
        if missing is None:
            return _finish(base, unknown=str(exc))
        name, key = missing
        why = f"{exc}; the env reads ConfigMap {name} (key {key}), which fitgate has not read"
        return _finish(base, unknown=why, config_map=missing)
    except WorkloadError as exc:
        invalid, unknown_why = refused_value(cname, exc, str(container.get("image") or ""), found.env)
        return _finish(base, invalid=invalid, unknown=unknown_why)
    if resource is None and unknown is None:
        unknown = unsized_devices(container, found.pod, cname)
        if unknown is not None:  # hunt82 F5: a TPU / Gaudi / Neuron pod is not sized at all, as any release
            version_note = None
    all_notes = (*notes, *more, *placement_notes, *((version_note,) if version_note else ()))
    claim = claim_template_of(container, found.pod)
    return _finish(
        Reading(
            kind=base.kind,
            namespace=base.namespace,
            name=base.name,
            container=cname,
            how=found.engine.how,
            model=name,
            revision=flags.get("--revision"),
            hf_overrides=overrides,
            serving=serving,
            vllm_version=version,
            gpu_resource=resource
            or ("amd.com/gpu" if "rocm" in str(container.get("image") or "").lower() else "nvidia.com/gpu"),
            gpus_per_replica=per_pod if gpus_per_replica is None else gpus_per_replica,
            pods_per_replica=pods_per_replica,
            data_parallel=dp,  # 0: a pod that runs the API server only (--data-parallel-size-local 0)
            node_selector=selector,
            affinity_gpu=gpu_hints,
            claim_template=claim[0] if claim else None,
            claim_copies=claim[1] if claim else 1,
            claim_alternatives=claim[2] if claim else (),
            tolerations=tolerations_of(found.pod),
            gpu_share=hami,
            unknown=unknown,
            notes=all_notes,
            unresolved=found.engine.unresolved,
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


def _blank(kind: str, meta: Mapping[str, Any]) -> Reading:
    """The reading of an object named by ``meta`` and nothing else (for an Unknown or Invalid said of it whole)."""
    return Reading(kind, str(meta.get("namespace") or "default"), str(meta.get("name") or "?"), "-", "-", None)


def first_of_parts(parts: list[Reading], noun: str) -> Reading | None:
    """The first reading of an object that runs several vLLM servers, noting the others (``fitgate check`` sizes each).

    The webhook answers one object with one reading (Dynamo's workers, a DisaggregatedSet's roles, a RayService's
    models); ``noun`` names the parts in the note.
    """
    if not parts:
        return None
    first = parts[0]
    if len(parts) > 1:
        others = ", ".join(r.name.rsplit("/", 1)[-1] for r in parts[1:])
        return _finish(first, notes=(*first.notes, f"also {noun} {others}: `fitgate check` sizes each"))
    return first
