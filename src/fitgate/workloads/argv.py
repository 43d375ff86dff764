"""A container's command line as vLLM reads it: find the engine invocation, then its flags.

Pure functions over strings (the expansion of words is :mod:`fitgate.workloads.expansion`): ``sh -c`` scripts split with
:mod:`shlex`, and vLLM 0.33's own spelling rules (``FlexibleArgumentParser``): ``--flag=value`` and
``--flag value``, underscores in a flag's name read as dashes (vllm/utils/argparse_utils.py 0.33.0
L379-394), and the short aliases vLLM registers (vllm/engine/arg_utils.py 0.33.0: ``-q`` L992,
``-pp`` L1170-1173, ``-n`` L1177, ``-r`` L1178, ``-tp`` L1208-1210, ``-dcp`` L1211-1214, ``-dp`` L1240-1242,
``-dpn`` L1243-1246, ``-dpr`` L1253-1255, ``-dpl`` L1258-1260).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.workloads import shellwords
from fitgate.workloads.bounds import ExpansionBudget
from fitgate.workloads.expansion import ASSIGNMENT, expand_k8s
from fitgate.workloads.flagvalues import merge_dotted, with_keys
from fitgate.workloads.shellscript import CommandError, split_script
from fitgate.workloads.vllm_flags import (
    ALIASES,
    NO_MEMORY_FLAGS,
    SHORT_FLAGS,
    SPLIT_SPECULATIVE,
    canonical,
    vllm_flags,
)

#: Flags that take several values (``nargs="+"``): every number after them (arg_utils.py 0.25.0 L1478).
LIST_FLAGS = frozenset({"--cudagraph-capture-sizes"})

#: Flags that take no value (``store_true`` / ``BooleanOptionalAction`` in vLLM 0.33); every
#: ``--no-X`` is one too. Any other flag takes the next word as its value unless it starts with ``-``.
BOOLEAN_FLAGS = frozenset(
    {
        "--enforce-eager",
        "--enable-prefix-caching",
        "--enable-extensible-kv-cache",
        "--enable-chunked-prefill",
        "--trust-remote-code",
        "--enable-lora",
        "--fully-sharded-loras",  # issue 20 (LoRAConfig bool: BooleanOptionalAction)
        "--enable-auto-tool-choice",
        "--disable-log-requests",
        "--disable-log-stats",
        "--enable-log-requests",
        "--disable-custom-all-reduce",
        "--enable-expert-parallel",
        "--enable-eplb",
        "--headless",
        "--async-scheduling",
        "--disable-frontend-multiprocessing",
        "--enable-sleep-mode",
        "--skip-tokenizer-init",
        "--disable-sliding-window",
        "--enable-reasoning",
        "--data-parallel-hybrid-lb",
        "--data-parallel-external-lb",
        "--language-model-only",  # hunt22 G1 (MultiModalConfig bool, config/multimodal.py 0.34.0 L303)
    }
)

#: The long flags fitgate reads. argparse takes any unique prefix of a long option for it (vLLM's
#: FlexibleArgumentParser keeps ``allow_abbrev``: utils/__init__.py 0.9.2 L1422-1431, 0.11.0; ``--tensor_parallel 2``
#: is ``--tensor-parallel-size 2``): a flag that is no exact name but a prefix of exactly one of these is read as it.
#: A prefix vLLM would find ambiguous among flags fitgate does not read is read here anyway (vLLM refuses it).
READ_FLAGS = frozenset(
    {
        "--all2all-backend",
        "--async-scheduling",
        "--backend",
        "--block-size",
        "--compilation-config",
        "--config",
        "--convert",
        "--cpu-offload-gb",
        "--cudagraph-capture-sizes",
        "--data-parallel-external-lb",
        "--data-parallel-hybrid-lb",
        "--data-parallel-rank",
        "--data-parallel-size",
        "--data-parallel-size-local",
        "--data-parallel-start-rank",
        "--decode-context-parallel-size",
        "--device",
        "--disable-custom-all-reduce",
        "--disable-frontend-multiprocessing",
        "--disable-log-requests",
        "--disable-log-stats",
        "--disable-mm-preprocessor-cache",
        "--disable-sliding-window",
        "--dtype",
        "--enable-auto-tool-choice",
        "--enable-chunked-prefill",
        "--enable-eplb",
        "--enable-expert-parallel",
        "--enable-extensible-kv-cache",
        "--enable-log-requests",
        "--enable-lora",
        "--enable-prefix-caching",
        "--enable-reasoning",
        "--enable-sleep-mode",
        "--enable-tower-connector-lora",
        "--enforce-eager",
        "--eplb-config",
        "--fully-sharded-loras",
        "--gpu-memory-utilization",
        "--headless",
        "--hf-overrides",
        "--kv-cache-dtype",
        "--kv-cache-memory-bytes",
        "--kv-offloading-backend",
        "--kv-offloading-size",
        "--kv-transfer-config",
        "--language-model-only",
        "--limit-mm-per-prompt",
        "--lora-dtype",
        "--lora-target-modules",
        "--max-cpu-loras",
        "--max-cudagraph-capture-size",
        "--max-lora-rank",
        "--max-loras",
        "--max-model-len",
        "--max-num-batched-tokens",
        "--max-num-seqs",
        "--mm-encoder-tp-mode",
        "--mm-processor-cache-gb",
        "--model",
        "--model-id",
        "--nnodes",
        "--node-rank",
        "--num-redundant-experts",
        "--offload-group-size",
        "--optimization-level",
        "--performance-mode",
        "--pipeline-parallel-size",
        "--port",
        "--quantization",
        "--revision",
        "--rope-scaling",
        "--rope-theta",
        "--runner",
        "--served-model-name",
        "--skip-tokenizer-init",
        "--speculative-config",
        "--swap-space",
        "--task",
        "--tensor-parallel-size",
        "--trust-remote-code",
    }
)
#: The shortest prefix read as a flag (``--` and four characters): shorter ones are too often other flags.
MIN_PREFIX_CHARS = 6


def unabbreviated(flag: str) -> str:
    """``flag`` as argparse reads it: a unique prefix of a flag fitgate reads becomes that flag."""
    if flag in READ_FLAGS or flag in BOOLEAN_FLAGS or not flag.startswith("--") or len(flag) < MIN_PREFIX_CHARS:
        return flag
    if flag.startswith("--no-"):
        return flag
    found = [f for f in READ_FLAGS if f.startswith(flag)]
    return found[0] if len(found) == 1 else flag


#: The module names of vLLM's OpenAI server run as ``python -m`` (the image's entrypoint before ``vllm serve``).
API_SERVER_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"})

#: NVIDIA Dynamo's vLLM worker (``python3 -m dynamo.vllm``): it builds vLLM's engine from vLLM's own engine arguments
#: beside Dynamo's (ai-dynamo/dynamo components/src/dynamo/vllm/args.py), read as ``vllm serve`` takes them;
#: ai-dynamo/dynamo@2ac51dda recipes/gpt-oss-120b/vllm/disagg-h200-agentic runs it in a plain Pod.
DYNAMO_VLLM_MODULE = "dynamo.vllm"

#: KAITO's vLLM server, a wrapper that takes vLLM's engine flags
#: (kaito-project/kaito@cfad92e8e9bba2f5f1d0537a3583d487a96366bc:pkg/workspace/inference/preset_inferences_test.go:
#: `/bin/sh -c python3 /workspace/vllm/inference_api.py --...`).
KAITO_SERVER = "/vllm/inference_api.py"

_RAY_CLUSTER_SIZE = re.compile(r"--ray[_-]cluster[_-]size[= ](\d{1,9})(?!\d)")


def ray_cluster_size(words: Sequence[str]) -> int | None:
    """The Ray cluster size a container's script starts (vLLM's multi-node-serving.sh, KAITO), if literal."""
    m = _RAY_CLUSTER_SIZE.search(" ".join(words))
    return int(m.group(1)) if m else None


_RAY_START = re.compile(r"(?<![\w-])ray\s+start(?![\w-])")


def starts_ray(words: Sequence[str]) -> bool:
    """Whether a container's script runs ``ray start`` (a Ray head or worker that vLLM's Ray executor uses)."""
    return bool(_RAY_START.search(" ".join(words)))


#: The shells a container's command may run a script with (``sh -c``, ``bash /start.sh``).
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})


@dataclass(frozen=True)
class EngineCommand:
    """The vLLM server invocation found in a container, and its flags by long name.

    ``flags`` maps ``--long-name`` to its value (``"true"`` for a boolean flag, ``"false"`` for
    ``--no-X``); the last occurrence wins, as with argparse. ``model`` is the positional model of
    ``vllm serve`` (``--model`` stays in ``flags``).
    """

    how: str  # "vllm serve" | "python -m vllm.entrypoints.openai.api_server" | "image entrypoint"
    model: str | None
    flags: dict[str, str]
    words: tuple[str, ...] = field(default_factory=tuple)  # the engine's argv after the subcommand
    undecided: tuple[str, ...] = ()  # variables its words use that a script branch fitgate cannot decide set
    unresolved: tuple[str, ...] = ()  # words after the model that hold references fitgate could not expand
    #: Variables the server's process gets from its own command line, beyond the container's env (hunt178 F1):
    #: ``NAME=v vllm serve``, ``env NAME=v vllm serve`` and a script's ``export NAME=v`` before it.
    env: Mapping[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Finding the invocation


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


#: Python's own one-letter options before ``-m`` (``-u`` unbuffered, ``-O``, ``-B``, ``-E``, ``-s``, ``-S``, ``-I``).
_PYTHON_OPTION = re.compile(r"^-[uOBEsSIqv]+$")
#: Modules whose ``serve`` subcommand is ``vllm serve`` (the ``vllm`` console script's entry point).
_CLI_MODULES = frozenset({"vllm.entrypoints.cli.main"})


#: vLLM's OpenAI server run as a script from its source tree (``python3 vllm/entrypoints/openai/api_server.py``).
API_SERVER_SCRIPT = "entrypoints/openai/api_server.py"


def _find_invocation(words: Sequence[str], *, script_server: bool = False) -> tuple[str, list[str]] | None:
    """(how, the engine's argv) of the first vLLM server invocation in ``words``.

    ``script_server``: the image is built on vLLM and takes vLLM's flags, so a Python script named
    ``api_server.py`` is vLLM's server copied into it (OPEA's ``opea/vllm-rocm`` runs
    ``python3 /workspace/api_server.py --model ...``: opea-project/GenAIInfra helm-charts/common/vllm, hunt112).
    """
    for i, word in enumerate(words):
        base = _base(word)
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return "vllm serve", list(words[i + 2 :])
        j = i + 1
        while base.startswith("python") and j < len(words) and _PYTHON_OPTION.match(words[j]):
            j += 1  # hunt89 F6: `python -u -m vllm.entrypoints.openai.api_server` (vLLM's SkyPilot doc)
        module = words[j + 1] if base.startswith("python") and j + 1 < len(words) and words[j] == "-m" else ""
        if module in API_SERVER_MODULES:
            return f"python -m {module}", list(words[j + 2 :])
        if module == DYNAMO_VLLM_MODULE:  # vLLM's engine args plus Dynamo's own, in any pod (hunt114 F2)
            return f"python -m {DYNAMO_VLLM_MODULE}", list(words[j + 2 :])
        if module in _CLI_MODULES and j + 2 < len(words) and words[j + 2] == "serve":
            return "vllm serve", list(words[j + 3 :])  # `python3 -m vllm.entrypoints.cli.main serve` is `vllm serve`
        if base.startswith("python") and i + 1 < len(words) and words[i + 1].endswith(KAITO_SERVER):
            return "KAITO inference_api.py", list(words[i + 2 :])
        script = words[j] if base.startswith("python") and j < len(words) else ""
        if script.endswith(API_SERVER_SCRIPT) or (script_server and _base(script) == "api_server.py"):
            return f"python {script}", list(words[j + 1 :])
    return None


def _hub_download(words: Sequence[str]) -> tuple[str, str] | None:
    """(repo id, local dir) of ``huggingface-cli download REPO ... --local-dir DIR`` (or ``hf download``), else None."""
    for i, word in enumerate(words):
        base = _base(word)
        if base in ("huggingface-cli", "hf") and i + 2 < len(words) and words[i + 1] == "download":
            repo = words[i + 2]
            rest = list(words[i + 3 :])
            for j, flag in enumerate(rest):
                name, eq, value = flag.partition("=")
                if name in ("--local-dir", "--local_dir"):
                    local = value if eq else (rest[j + 1] if j + 1 < len(rest) else "")
                    return (repo, local) if "/" in repo and not repo.startswith("-") and local else None
    return None


def _with_download(engine: EngineCommand, downloads: Mapping[str, str]) -> EngineCommand:
    """The engine with a model directory the same script downloaded named by its Hub repo id (hunt23 G2).

    ``huggingface-cli download deepseek-ai/DeepSeek-V3 --local-dir /models && vllm serve /models``: the directory
    holds that repo's files, so fitgate reads the repo (the ``how`` says so); the flags are left as written.
    """
    if not downloads:
        return engine
    for where in (engine.model, engine.flags.get("--model")):
        repo = downloads.get((where or "").rstrip("/"))
        if repo is not None:
            how = f"{engine.how} ({where} downloaded from {repo} by the same script)"
            if engine.model is not None:
                return replace(engine, how=how, model=repo)
            return replace(engine, how=how, flags={**engine.flags, "--model": repo})
    return engine


#: Programs that run the rest of their words as the command (hunt100 F3: `/usr/bin/env bash -c`, `tini -- sh -c`).
_WRAPPERS = frozenset({"env", "tini", "dumb-init"})


def _unwrapped(words: Sequence[str]) -> tuple[Sequence[str], dict[str, str]]:
    """``words`` without the init or env program in front (its options and ``--``), and ``env``'s ``NAME=value``.

    ``env`` with an option (``-i`` clears the env, ``-u`` unsets, ``-S`` splits) is left as written: what the shell
    would see is not followed (hunt102 F2), so the container reads as before, not on the pod's own env.
    """
    i = 0
    assigned: dict[str, str] = {}
    while i < len(words) and _base(words[i]) in _WRAPPERS:
        env = _base(words[i]) == "env"
        i += 1
        while i < len(words) and (words[i].startswith("-") or (env and ASSIGNMENT.match(words[i]))):
            if env and words[i].startswith("-") and words[i] != "--":
                return words, {}
            if env and ASSIGNMENT.match(words[i]):
                name, _, value = words[i].partition("=")
                assigned[name] = value
            i += 1
    return words[i:], assigned


def _shell_script(words: Sequence[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (also ``bash -ec``, ``/bin/sh -c``), else None."""
    found = _shell_script_and_params(words)
    return found[0] if found else None


def _shell_script_and_params(words: Sequence[str]) -> tuple[str, list[str], dict[str, str]] | None:
    """(script, positional parameters, an ``env`` wrapper's variables) of ``sh -c SCRIPT [NAME [ARG ...]]``, or None.

    POSIX ``sh -c``: the words after the script are ``$0`` and then ``$1`` ... (``"$@"``); hunt23 G4's GLM-5.2 pod runs
    ``bash -c '... exec vllm serve "$@"' vllm zai-org/GLM-5.2-FP8 --tensor-parallel-size=8 ...``.
    """
    words, assigned = _unwrapped(words)
    if not words or _base(words[0]) not in SHELLS:
        return None
    for i, word in enumerate(words[1:], 1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            at = i + 2 if i + 1 < len(words) and words[i + 1] == "--" else i + 1  # `bash -c -- SCRIPT` (hunt60 F2)
            return (words[at], list(words[at + 2 :]), assigned) if at < len(words) else None
    return None


_POSITIONAL = re.compile(r"\$\{?([1-9])\}?")


def _with_params(words: list[str], params: list[str]) -> list[str]:
    """A simple command's words with ``"$@"`` / ``$*`` spliced in and ``$1``-``$9`` replaced by the parameters."""
    out: list[str] = []
    for word in words:
        if word in ("$@", "${@}", "$*", "${*}"):
            out.extend(params)
            continue
        m = _POSITIONAL.fullmatch(word)
        out.append(params[int(m.group(1)) - 1] if m and int(m.group(1)) <= len(params) else word)
    return out


def find_engine_command(
    command: Sequence[str],
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    image_entrypoint: bool,
    budget: ExpansionBudget | None = None,
    script_server: bool = False,
) -> EngineCommand | None:
    """The vLLM invocation of a container, or None when it runs no vLLM server.

    ``command`` and ``args`` are expanded the Kubernetes way first. With no ``command`` and
    ``image_entrypoint`` (a vLLM image), ``args`` are the arguments of the image's ``vllm serve``;
    ``script_server``: see :func:`_find_invocation`.

    Raises:
        CommandError: a shell script that cannot be split into words.
        BudgetError: expansion past ``budget``.
    """
    cmd = [expand_k8s(str(w), env, budget) for w in command]
    arg = [expand_k8s(str(w), env, budget) for w in args]
    words = cmd + arg
    shell = _shell_script_and_params(words)
    if shell is not None:
        script, params, assigned = shell
        downloads: dict[str, str] = {}
        env = {**env, **assigned}  # `env MAX_LEN=16384 sh -c ...`: the script sees env's (hunt102 F2)
        exported = dict(assigned)  # what the script's commands inherit beyond the container's env
        for command_words in split_script(script, env, budget):
            simple = _with_params(command_words, params) if params else command_words
            if simple and simple[0] == "export":  # split_script's record of `export NAME=v`
                exported.update(_assignments(simple[1:]))
                continue
            downloaded = _hub_download(simple)
            if downloaded is not None:
                downloads[downloaded[1].rstrip("/")] = downloaded[0]
            found = _find_invocation(simple, script_server=script_server)
            if found is not None:
                engine = parse_engine_argv(found[0], [shellwords.plain(w) for w in found[1]])
                names = _deciding(found[1])
                engine = replace(engine, env={**exported, **_prefix_env(simple)})
                return _with_download(replace(engine, undecided=names) if names else engine, downloads)
        return None
    found = _find_invocation(words, script_server=script_server)
    if found is not None:
        return replace(parse_engine_argv(found[0], found[1]), env=_prefix_env(words))
    if not cmd and image_entrypoint:
        if arg and arg[0] == "serve":  # an image whose entrypoint is `vllm` alone
            arg = arg[1:]
        return parse_engine_argv("image entrypoint", arg)
    return None


def _assignments(words: Iterable[str]) -> dict[str, str]:
    """The ``NAME=value`` words among ``words``, as a mapping (quoting marks dropped)."""
    return _prefix_env(words, leading_only=False)


def _prefix_env(words: Iterable[str], *, leading_only: bool = True) -> dict[str, str]:
    """The assignments in front of the server's program: ``A=1 B=2 vllm serve``, ``env A=1 vllm serve``.

    The words before the invocation :func:`_find_invocation` finds, as long as each is an assignment or a wrapper
    program (:data:`_WRAPPERS`) and its options; anything else in front (``cd /app &&`` is split off already) ends it
    (``leading_only`` False: every assignment among ``words``).
    """
    out: dict[str, str] = {}
    for word in words:
        plain = shellwords.plain(word)
        if ASSIGNMENT.match(plain):
            name, _, value = plain.partition("=")
            out[name] = value
        elif not leading_only or _base(plain) in _WRAPPERS or plain.startswith("-"):
            continue
        else:
            break
    return out


def _deciding(words: Sequence[str]) -> tuple[str, ...]:
    """The undecided values among ``words`` that decide the sizing (not those of :data:`NO_MEMORY_FLAGS`)."""
    names: list[str] = []
    for i, word in enumerate(words):
        found = shellwords.undecided_names(word)
        if not found:
            continue
        flag = word.split("=", 1)[0] if word.startswith("--") and "=" in word else (words[i - 1] if i else "")
        if flag.startswith("-") and long_name(flag) in NO_MEMORY_FLAGS:
            continue
        names += found
    return tuple(names)


# ---------------------------------------------------------------------------------------------
# Flags


def long_name(flag: str) -> str:
    """The canonical spelling of a flag for vLLM: short aliases resolved, underscores read as dashes.

    0.34's ``--disable-X`` and split speculative flags as fitgate reads them (vllm_flags.canonical).
    """
    if flag in SHORT_FLAGS:
        return SHORT_FLAGS[flag]
    if flag in ALIASES:
        return ALIASES[flag]
    short, dot, rest = flag.partition(".")
    if dot and (SHORT_FLAGS.get(short) or ALIASES.get(short, ".")).count(".") == 0:  # -cc.x, -sc.x (hunt94 F4)
        return (SHORT_FLAGS.get(short) or ALIASES[short]) + "." + rest
    if flag.startswith("--"):
        head, dot, tail = flag[2:].partition(".")
        return canonical("--" + head.replace("_", "-")) + dot + tail
    return flag


def _takes_value(flag: str) -> bool:
    if flag in BOOLEAN_FLAGS or flag.startswith("--no-"):
        return False
    return vllm_flags().get(flag, True)  # a switch of vLLM's never swallows the next word (the model)


def parse_engine_argv(how: str, words: Sequence[str]) -> EngineCommand:
    """Flags by long name and the positional model (the first bare word) of an engine argv."""
    flags: dict[str, str] = {}
    dotted: dict[str, dict[str, Any]] = {}  # --json-flag.key value, by flag
    spec_split: dict[str, dict[str, Any]] = {}  # --spec-method / --spec-model / --spec-tokens
    model: str | None = None
    unresolved: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            continue
        if not word.startswith("-") or _is_number(word):
            if model is None:
                model = word
            elif "$" in word and word not in ("$@", "$*", "${@}", "${*}"):  # hunt89 F4: `$EXTRA_ARGS` of a Secret,
                unresolved.append(word)  # `"${ARGS[@]}"`: flags fitgate cannot read (no `sh -c` words: "$@" is none)
            continue
        if word.startswith("-O") and not word.startswith("-O.") and word != "-O":
            # -O3, -O=3: the optimization level (FlexibleArgumentParser, utils/argparse_utils.py 0.25.0 L322-333)
            flags["--optimization-level"] = word[3:] if word[2:3] == "=" else word[2:]
            continue
        if word == "-O" and i < len(words) and (words[i] in ("0", "1", "2", "3") or words[i].lstrip().startswith("{")):
            flags["--optimization-level" if words[i][:1].isdigit() else "--compilation-config"] = words[i]  # <= 0.11:
            i += 1  # `-O '{json}'` and `-O.key=value` were --compilation-config (arg_utils.py 0.11.0; hunt94 F9)
            continue
        word = "--compilation-config" + word[2:] if word.startswith("-O.") else word
        if len(word) > 2 and word[:2] in SHORT_FLAGS and word[2] not in "=." and word not in SHORT_FLAGS:
            # -qfp8, -n2: argparse gives a one-letter option its value attached (hunt107 F2: the word was dropped)
            word = f"{word[:2]}={word[2:]}"
        name, eq, value = word.partition("=")
        if any(c.isspace() for c in name) and name.startswith("--"):
            # hunt55 F1: a YAML item `- --tensor-parallel-size 2 # on 2 GPUs` is one argv word; argparse takes a word
            # with a space for a positional (argparse _parse_optional), so vLLM exits "unrecognized arguments"
            flag, *rest = name.split()
            fix = (
                f"write {flag}={' '.join(rest)[:40]} or the flag and its value as two items"
                if rest
                else f"write {flag}"
            )
            raise CommandError(
                f"argument {word[:80]!r} is one word holding a space, which vLLM's parser refuses (unrecognized "
                f"arguments): {fix}"
            )
        split = name.replace("_", "-") in SPLIT_SPECULATIVE  # --spec-tokens 3: into --speculative-config's JSON
        name = long_name(name)
        if "." in name and name.startswith("-"):  # --speculative-config.method mtp
            if not eq:
                value = words[i] if i < len(words) else ""
                i += 1
            merge_dotted(spec_split if split else dotted, name, value)
            continue
        name = unabbreviated(name)
        if eq:
            flags[name] = value
        elif not _takes_value(name):
            if name.startswith("--no-"):
                flags["--" + name[5:]] = "false"
            else:
                flags[name] = "true"
        elif name in LIST_FLAGS:
            values = []
            while i < len(words) and _is_number(words[i]):
                values.append(words[i])
                i += 1
            flags[name] = ",".join(values) if values else "true"
        elif i < len(words) and (not words[i].startswith("-") or _is_number(words[i])):
            flags[name] = words[i]
            i += 1
        else:
            flags[name] = "true"
    for head, tree in dotted.items():  # appended after every other flag, as vLLM does: they win
        flags[unabbreviated(long_name(head))] = json.dumps(tree)
    for head, tree in spec_split.items():  # the split flags land in the JSON (engine/arg_utils.py 0.34.0 L2140-2154)
        flags[head] = with_keys(flags.get(head), tree)
    return EngineCommand(how, model, flags, tuple(words), unresolved=tuple(unresolved))


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
