"""vLLM flags a pasted ``vllm serve`` command carries that do not change the memory plan (hunt28 F3).

A recipe's command line (``--trust-remote-code --attention-backend flashinfer --async-scheduling
--load-format fastsafetensors``) planned as "unrecognized arguments", exit 2. ``plan``, ``recommend`` and ``plan-pd``
take these flags and say they were not read; any other unknown flag is still an error (a typo such as
``--max-model-length`` must not be dropped silently: it would plan without the setting meant).
"""

from __future__ import annotations

from collections.abc import Sequence

from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.workloads.vllm_flags import (
    NOT_MODELLED_LISTS,
    NOT_MODELLED_SUFFIX,
    NOT_MODELLED_SWITCHES,
    NOT_MODELLED_VALUED,
    OMNI_NOT_SIZED,
    vllm_flags,
)

#: vLLM 0.34 engine / server flags without a value that do not change the per-GPU memory plan (``engine/arg_utils.py``,
#: ``entrypoints/openai/cli_args.py``). Not their ``--no-`` twins, which may (``--no-enable-chunked-prefill`` is read).
IGNORED_SWITCHES = frozenset(
    {
        "--trust-remote-code", "--async-scheduling", "--enable-auto-tool-choice",
        "--disable-log-requests", "--disable-log-stats", "--enable-log-requests", "--enable-log-outputs",
        "--disable-frontend-multiprocessing", "--skip-tokenizer-init",
        "--enable-reasoning", "--enable-sleep-mode", "--disable-uvicorn-access-log", "--enable-prompt-tokens-details",
        "--enable-force-include-usage", "--enable-server-load-tracking", "--headless", "--disable-fastapi-docs",
        "--enable-request-id-headers", "--return-tokens-as-token-ids", "--use-tqdm-on-load",
        "--enable-flashinfer-autotune", "--no-enable-flashinfer-autotune", "--enable-mm-embeds",
        "--disable-cascade-attn", "--data-parallel-hybrid-lb", "--data-parallel-external-lb",
        # vLLM 0.4-0.6 (hunt36 F1: engine/arg_utils.py 0.6.3.post1; vllm#9990 starts with --use-v2-block-manager)
        "--use-v2-block-manager", "--worker-use-ray", "--engine-use-ray", "--multi-step-stream-outputs",
    }
)  # fmt: skip
#: vLLM 0.34 flags with one value that do not change the memory plan (``--load-format gguf`` is the exception, read).
IGNORED_VALUED = frozenset(
    {
        "--attention-backend", "--load-format", "--tool-call-parser", "--reasoning-parser", "--chat-template",
        "--host", "--port", "--api-key", "--tokenizer", "--tokenizer-mode", "--download-dir",
        "--seed", "--uvicorn-log-level", "--api-server-count", "--distributed-executor-backend",
        "--generation-config", "--override-generation-config", "--tokenizer-revision", "--code-revision",
        "--max-log-len", "--allowed-local-media-path", "--chat-template-content-format", "--response-role",
        "--root-path", "--config-format", "--hf-config-path", "--max-logprobs", "--logprobs-mode",
        "--tool-parser-plugin", "--structured-outputs-config", "--guided-decoding-backend", "--kv-events-config",
        "--otlp-traces-endpoint", "--collect-detailed-traces", "--ssl-keyfile", "--ssl-certfile", "--middleware",
        "--shutdown-timeout", "--fingerprint-mode", "--nnodes", "--node-rank", "--stream-interval",
        "--mm-encoder-attn-backend", "--mm-processor-cache-type", "--data-parallel-backend",
        "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank", "--master-addr",
        "--master-port", "--num-scheduler-steps", "--reasoning-parser-plugin", "--media-io-kwargs",
        "--video-pruning-rate", "--tool-server", "--default-chat-template-kwargs", "--scheduling-policy",
        "--safetensors-load-strategy", "--model-loader-extra-config", "--long-prefill-token-threshold",
        "--max-num-partial-prefills", "--max-long-partial-prefills", "--tokenizer-pool-size", "--preemption-mode",
        "--scheduler-delay-factor", "--num-lookahead-slots", "--ngram-prompt-lookup-max", "--ngram-prompt-lookup-min",
        "--speculative-max-model-len", "--speculative-disable-by-batch-size", "--image-input-type",
        "--tokenizer-pool-type",
    }
)  # fmt: skip


#: vLLM flags with several values (``nargs="+"``) that do not change the memory plan.
IGNORED_LISTS = frozenset({"--served-model-name", "--logits-processors", "--ignore-patterns"})


def passthrough(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """(vLLM flags taken and not read, the words left unknown) of the words argparse did not recognise.

    Beyond the flags named above, any flag vLLM's own parser accepts (:func:`vllm_flags`, by its name up to a ``.``:
    ``--quantization-config.moe.activation``) is taken as not modelled, with its value where it takes one: the plan
    says it was not read, never refuses it (hunt40 F1: vLLM 0.34's CI passes ``--worker-extension-cls``,
    ``--disable-flashinfer-autotune``). A word vLLM does not know either is left unknown (a typo).
    """
    taken: list[str] = []
    unknown: list[str] = []
    words = list(extra)
    if "--omni" in words or any(w.startswith("--omni=") and w[7:].lower() != "false" for w in words):
        raise NotModelledError("omni", True, OMNI_NOT_SIZED)  # its pipeline flags (--model-class-name ...) with it
    device = _device(words)
    if device is not None and device.lower() not in GPU_DEVICES:
        # hunt122: `--device cpu` (vLLM's CPU backend, 0.6-0.9 docs) was sized on the --gpu named: DoesNotFit on an L4
        raise NotModelledError(
            "device", device, "it sizes GPU memory; vLLM's CPU, Neuron, TPU and XPU backends are not"
        )
    known = vllm_flags()
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        name, eq, value = word.partition("=")
        if name in IGNORED_SWITCHES and not eq:
            taken.append(name)
            continue
        if name in NOT_MODELLED_SWITCHES and not eq:
            taken.append(f"{name} (not modelled)")
            continue
        if name.startswith("--no-") and f"--{name[5:]}" in NOT_MODELLED_SWITCHES and not eq:
            taken.append(name)  # the switch off is vLLM's default: nothing changes (hunt80 O3)
            continue
        if name in NOT_MODELLED_LISTS or name in IGNORED_LISTS:
            values = [value] if eq else []
            while not eq and i < len(words) and not words[i].startswith("--"):
                values.append(words[i])
                i += 1
            mark = NOT_MODELLED_SUFFIX if name in NOT_MODELLED_LISTS else ""
            taken.append(f"{name} {' '.join(values)[:60]}{mark}".replace("  ", " "))
            continue
        if name in NOT_MODELLED_VALUED or name in IGNORED_VALUED:
            if not eq:  # the value is the next word, as argparse takes it
                if i >= len(words) or words[i].startswith("--"):
                    raise SizingError(name, None, "a value (vLLM's flag takes one)")
                value = words[i]
                i += 1
            if name == "--load-format" and value.strip().lower() == "gguf":
                raise NotModelledError("load_format", value, "a GGUF file's weights (each tensor's quantization type)")
            taken.append(f"{name} {value[:60]}" + (NOT_MODELLED_SUFFIX if name in NOT_MODELLED_VALUED else ""))
            continue
        base = name.split(".", 1)[0]
        if base in known:
            following = words[i] if not eq and i < len(words) else None
            # a valued flag takes the next word; a switch only an explicit true / false
            if following is not None and (
                not following.startswith("-") if known[base] else following.lower() in ("true", "false")
            ):
                value = following
                i += 1
            taken.append(f"{name} {value[:60]}".rstrip() + NOT_MODELLED_SUFFIX)
            continue
        unknown.append(word)
    return taken, unknown


#: ``--device`` values that run on the GPU fitgate sizes (engine/arg_utils.py 0.6.3.post1 L29-37 ``DEVICE_OPTIONS``:
#: auto, cuda, neuron, cpu, openvino, tpu, xpu; 0.10.1 has no ``--device``: the platform decides).
GPU_DEVICES = frozenset({"auto", "cuda", "gpu", "rocm"})


def _device(words: Sequence[str]) -> str | None:
    """The value of ``--device`` among ``words`` (the last one given), or None."""
    found = None
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name == "--device":
            found = value if eq else (words[i + 1] if i + 1 < len(words) else "")
    return found


def note(taken: Sequence[str]) -> str:
    """The note a plan carries for the flags taken and not read."""
    plain = [t for t in taken if not t.endswith(NOT_MODELLED_SUFFIX)]
    unmodelled = [t.removesuffix(NOT_MODELLED_SUFFIX) for t in taken if t.endswith(NOT_MODELLED_SUFFIX)]
    parts = []
    if plain:
        parts.append("not read (they do not change the memory plan): " + ", ".join(plain))
    if unmodelled:
        parts.append(
            "taken but not modelled (they may change memory; the plan is without them): " + ", ".join(unmodelled)
        )
    return "; ".join(parts)
