"""A vLLM container's flags and env in ModelDeployment terms: which flags a spec holds, their values, notes.

The serving fields a ModelDeployment carries (``--max-model-len`` -> ``maxModelLen``...), the conversion
and bounds of each value, speculative decoding, data / expert parallelism and the issue 20 flags (LoRA,
KV connectors and offloading, multimodal). No Kubernetes object is read here: :mod:`fitgate.workloads.container`
finds the container and its command line, :mod:`fitgate.workloads.reader` the container in each kind.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from fitgate.sizing.errors import SizingError
from fitgate.sizing.multimodal import MODALITIES, parse_limit_mm, parse_limit_mm_image_pixels, parse_max_pixels
from fitgate.sizing.offload import parse_kv_transfer_config
from fitgate.sizing.parallel import ALL2ALL_BACKENDS, parse_eplb_config
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.speculative import DRAFT_CHECKPOINT_METHODS, IMPLICIT_MTP_UNTIL, canonical_method
from fitgate.sizing.speculative import SPEC_METHODS as SPECULATIVE_METHODS
from fitgate.sizing.speculative import parse_config as parse_speculative_config
from fitgate.workloads.flagvalues import INT_LIMIT, human_int, python_int
from fitgate.workloads.podspec import (
    as_dict,
    as_list,
    gpu_limit_of,
    image_repo_tag,
    release_before,
)
from fitgate.workloads.reading import WorkloadError
from fitgate.workloads.vllm_flags import NOT_MODELLED_LISTS, NOT_MODELLED_SWITCHES, NOT_MODELLED_VALUED

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
    "--mamba-ssm-cache-dtype": ("mambaSsmCacheDtype", "str"),
    "--dtype": ("dtype", "dtype"),
    "--quantization": ("quantization", "quantization"),
    "--tensor-parallel-size": ("tensorParallelSize", "int"),
    "--pipeline-parallel-size": ("pipelineParallelSize", "int"),
    "--gpu-memory-utilization": ("gpuMemoryUtilization", "float"),
    "--max-num-seqs": ("maxNumSeqs", "int"),
    "--max-num-batched-tokens": ("maxNumBatchedTokens", "human_int"),
    "--kv-cache-memory-bytes": ("kvCacheMemoryBytes", "human_int"),  # vLLM 0.10.2+ (sizing.resolve)
    "--enable-prefix-caching": ("enablePrefixCaching", "bool"),
    "--enable-chunked-prefill": ("enableChunkedPrefill", "bool"),  # hunt31 F4 (resolve.CHUNKED_PREFILL_OFF)
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
_NOT_MODELLED = ("--swap-space", "--offload-group-size", "--enable-tower-connector-lora")


def not_modelled_notes(flags: Mapping[str, str]) -> list[str]:
    """The notes for the flags a container sets that fitgate does not size.

    :data:`_NOT_MODELLED`, and those ``plan`` names as not modelled (``vllm_flags.NOT_MODELLED_*``: they may change
    memory; hunt70 F4-F7: ``check`` was silent about them).
    """
    out = [f"{f}: not in a ModelDeployment; sized with vLLM's default" for f in _NOT_MODELLED if f in flags]
    shared = sorted((NOT_MODELLED_SWITCHES | NOT_MODELLED_VALUED | NOT_MODELLED_LISTS) - set(_NOT_MODELLED))
    # a switch turned off (--no-disable-hybrid-kv-cache-manager: vLLM's default) changes nothing (hunt80 O3)
    off = {f for f in NOT_MODELLED_SWITCHES if str(flags.get(f, "")).strip().lower() in ("false", "0", "no")}
    out += [f"{f}: may change memory, not modelled (sized without it)" for f in shared if f in flags and f not in off]
    return out


#: vLLM's --dtype spellings (config/model.py) as a ModelDeployment's.
_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32", "float32": "float32"}
#: Runtime quantizations a ModelDeployment takes; others describe a quantized checkpoint, read from its config.
_RUNTIME_QUANTIZATIONS = tuple(RUNTIME_QUANTIZATION)


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
        n = human_int(value) if kind == "human_int" else python_int(value)
        whole = python_int(value) if n is None else n
        if whole is not None and abs(whole) >= INT_LIMIT:  # 19-32 characters: a whole number, past what is read
            digits = len(str(abs(whole)))
            raise _UnknownValueError(f"{flag}: a number of {digits} digits, past what fitgate reads (18)")
        if n is None:
            raise WorkloadError(f"{flag}: expected a whole number (got {value[:40]!r})")
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


#: ``--task`` (vLLM up to 0.10: config.py 0.9.2 ``_TASK_RUNNER``) and ``--convert`` (0.10.2+: config/model.py
#: ``ConvertOption``) values that serve the model with the pooling runner (hunt17 G3: the webhook sized embedding
#: servers with the lm_head and the sampler's warm-up that vLLM's pooling adapter drops).
POOLING_TASKS = frozenset({"embed", "embedding", "score", "classify", "reward"})


def _runner(flags: dict[str, str], notes: list[str]) -> str | None:
    """``--runner``, or the runner a ``--task`` / ``--convert`` implies; None: vLLM's default (generate, or auto)."""
    runner = flags.get("--runner", "").strip().lower()
    if runner in ("generate", "pooling"):
        return runner
    if runner and runner != "auto":
        notes.append(f"--runner {runner[:20]!r}: not generate or pooling; sized as generate")
    for flag in ("--convert", "--task"):
        if flags.get(flag, "").strip().lower() in POOLING_TASKS:
            return "pooling"
    return None


def _speculative(value: str, notes: list[str], release: str | None = None) -> dict[str, Any] | None:
    """``--speculative-config JSON`` as a ModelDeployment's ``serving.speculativeConfig``.

    JSON vLLM could not read is an error; a method fitgate does not size (a newer release's) is
    named in the notes and left out, never a denial. Before 0.11 (the image's ``release``) a config with draft
    tokens and neither method nor model makes an MTP checkpoint its own drafter
    (sizing.speculative.IMPLICIT_MTP_UNTIL), as ``plan`` reads it.
    """
    if "$(" in value or value.startswith("$"):
        raise _UnknownValueError(f"--speculative-config {value}: a variable not set in the container's env")
    try:
        method, tokens = parse_speculative_config(value)
    except SizingError as exc:
        raise WorkloadError(str(exc)) from None
    if method is None and tokens is not None and release and release_before(release, IMPLICIT_MTP_UNTIL):
        method = "mtp"
        notes.append("--speculative-config without a method: vLLM before 0.11 makes the MTP checkpoint its own drafter")
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


def env_serving(env: Mapping[str, str]) -> dict[str, Any]:
    """The ModelDeployment serving fields vLLM's environment variables set."""
    out: dict[str, Any] = {}
    if env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").strip().strip("\x04").lower() in ("1", "true"):
        out["allowLongMaxModelLen"] = True  # envs.py: "1"/"true" (vLLM then warns instead of refusing)
    partition = env.get("VLLM_PP_LAYER_PARTITION", "").strip()
    if partition:  # hunt54 F3: the layers per pipeline stage (vllm/distributed/utils.py 0.34.0 L227-238)
        out["ppLayerPartition"] = partition.replace(" ", "")[:320]  # int(" 40") is 40 to vLLM too
    return out


def pods_of_one_engine(flags: Mapping[str, str], ray: bool, need: int, per_pod: int) -> tuple[int, str] | None:
    """How many pods of ``per_pod`` GPUs one engine of ``need`` GPUs spans when its workers leave the pod, and why.

    A pod asks for one node's GPUs; the engine's workers span nodes (hunt54 F1) with the Ray executor
    (``--distributed-executor-backend ray``, or a script that runs ``ray start``: vllm/config/parallel.py 0.34.0
    picks Ray when the world size exceeds the node's GPUs and a Ray cluster is up) or with ``--nnodes N``
    (the multiprocessing executor across N nodes, each pod one ``--node-rank``) with fewer data-parallel ranks than
    nodes, so that one rank's TP x PP spans nodes (arg_utils.py 0.33.0 L2441-2446). The other pods belong to the
    same Ray cluster or node group, whichever workload starts them. None when the engine stays in its pod.
    """
    if per_pod <= 0 or need <= per_pod:
        return None
    pods = -(-need // per_pod)
    backend = flags.get("--distributed-executor-backend", "").strip()
    if backend == "ray" or (ray and backend in ("", "ray")):
        how = "the Ray executor places them on the Ray cluster's GPUs"
    else:
        try:
            nnodes, ranks = int(flags.get("--nnodes", "1")), int(flags.get("--data-parallel-size", "1"))
        except ValueError:
            return None
        if nnodes <= ranks or per_pod * nnodes < need:  # ranks >= nodes: each node holds whole ranks (its own share)
            return None
        pods, how = nnodes, f"--nnodes {nnodes} runs them on {nnodes} nodes"
    note = (
        f"vLLM's {need} workers span pods ({how}): sized as {pods} pods of {per_pod} GPUs each, the pods beyond "
        "this one joining from the same or another workload"
    )
    return pods, note


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
            image_pixels = parse_limit_mm_image_pixels(text)
        except SizingError as exc:
            raise WorkloadError(f"--limit-mm-per-prompt: {exc}") from None
        if image_pixels is not None:
            mm["profileImagePixels"] = image_pixels
        if not text.lstrip().startswith("{"):
            notes.append("--limit-mm-per-prompt key=value: vLLM before 0.10 reads it; 0.10+ takes JSON only")
    kwargs = _json_flag(flags, "--mm-processor-kwargs")
    if kwargs is not None:
        try:
            pixels = parse_max_pixels(kwargs)
        except SizingError as exc:  # vLLM's processor decides what it takes: not read, the default size profiled
            pixels = None
            notes.append(f"--mm-processor-kwargs not read ({exc}); images profiled at the processor's largest")
        if pixels is not None:
            mm["maxPixels"] = pixels
    if flags.get("--language-model-only", "false") not in ("false", "0", "no"):
        # every modality's limit 0 (config/multimodal.py 0.34.0 L303-305, L699-706): no encoder pass, no tower
        mm["limitPerPrompt"] = dict.fromkeys(MODALITIES, 0)
    if flags.get("--skip-mm-profiling", "false") not in ("false", "0", "no"):
        mm["skipProfiling"] = True
    if "--mm-encoder-tp-mode" in flags:
        mm["encoderTpMode"] = flags["--mm-encoder-tp-mode"]
    if "--mm-processor-cache-gb" in flags:
        mm["processorCacheGiB"] = _convert("--mm-processor-cache-gb", flags["--mm-processor-cache-gb"], "float")
    if "--disable-mm-preprocessor-cache" in flags:
        notes.append("--disable-mm-preprocessor-cache: removed before vLLM 0.33 (use --mm-processor-cache-gb 0)")
    if mm:
        serving["multimodal"] = mm
    return serving


def runs_on_cpu(container: dict[str, Any]) -> bool:
    """VLLM's CPU backend (``--device cpu``, or an image such as ``vllm/vllm-openai-cpu``): no GPU to check.

    hunt82 F4: CPU builds also say so in the tag alone (``substratusai/vllm:v0.6.4.post1-cpu``, KubeAI's CPU image;
    ``quay.io/modh/vllm:rhoai-2.19-cpu``): a ``cpu`` word of the tag counts when the container asks for no GPU.
    """
    if _flag(container, "--device") == "cpu":
        return True
    repo, tag = image_repo_tag(str(container.get("image") or ""))
    if "cpu" in repo:
        return True
    if tag is None or "cpu" not in re.split(r"[-_.]", tag.lower()):
        return False
    if as_dict(container.get("resources")).get("claims"):  # hunt86 F3: devices from a DRA claim
        return False
    try:
        return gpu_limit_of(container)[1] == 0
    except WorkloadError:
        return False
