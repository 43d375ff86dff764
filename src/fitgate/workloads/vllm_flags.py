"""The flags ``vllm serve`` accepts, from vLLM's own source (``data/vllm_flags.json``, scripts/gen_vllm_flags.py).

One list for the CLI's pasted commands (fitgate.cli.passthrough) and the workloads' container args
(fitgate.workloads.argv): a flag vLLM accepts that fitgate does not read is said and not refused; a word vLLM does not
accept either is a typo.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib import resources

#: vLLM's short aliases and the long flag each stands for (engine/arg_utils.py, the release and line by each).
SHORT_FLAGS = {
    "-q": "--quantization",
    "-pp": "--pipeline-parallel-size",
    "-tp": "--tensor-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpn": "--data-parallel-rank",
    "-dpr": "--data-parallel-start-rank",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",  # arg_utils.py 0.20.0 L946, 0.34.0 L1250-1253
    "-dph": "--data-parallel-hybrid-lb",  # arg_utils.py 0.34.0 L1299-1303: switches, as their fields (hunt93 F3)
    "-dpe": "--data-parallel-external-lb",  # L1304-1308
    "-dpb": "--data-parallel-backend",  # L1292-1298
    "-ep": "--enable-expert-parallel",  # arg_utils.py 0.33.0 L1304-1307
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-cc": "--compilation-config",  # arg_utils.py 0.25.0 L1534
}

#: vLLM 0.34's split spellings of flags fitgate reads (engine/arg_utils.py 0.34.0 L1896-1904: ``-sc``, and the
#: speculative config's keys as flags of their own), as the dotted JSON keys fitgate folds.
ALIASES = {
    "-sc": "--speculative-config",
    "--spec-method": "--speculative-config.method",
    "--spec-model": "--speculative-config.model",
    "--spec-tokens": "--speculative-config.num_speculative_tokens",
    # 0.33's device-neutral name of --gpu-memory-utilization (engine/arg_utils.py 0.33.0 L1390, 0.34.0 L1403-1407;
    # hunt47 F1: a container that spelled it was sized at the default utilization)
    "--device-memory-utilization": "--gpu-memory-utilization",
    # 0.34's short name of --diffusion-config (engine/arg_utils.py 0.34.0 L1909), which fitgate's -dcp would otherwise
    # take by prefix (hunt70 F3: exit 2); spelled out, it is a vLLM flag fitgate takes without reading
    "-dc": "--diffusion-config",
}
#: The split speculative flags: vLLM sets their keys in the --speculative-config JSON given beside them (a key in both
#: is its error), where a dotted --speculative-config.key replaces the JSON (engine/arg_utils.py 0.34.0 L2140-2161).
SPLIT_SPECULATIVE = frozenset({"--spec-method", "--spec-model", "--spec-tokens"})


#: vLLM flags that may change memory but that fitgate does not model: taken, and named as not modelled (hunt31 F2:
#: the recipes' verified commands carry them). ``--disable-hybrid-kv-cache-manager`` gives a hybrid model's sliding /
#: linear layers full-attention pages (fewer tokens than planned); ``--swap-space`` is host memory (V0);
#: ``--cpu-offload-params`` picks which weights ``--cpu-offload-gb`` moves; ``--lora-modules`` names adapters loaded
#: into the ``--max-loras`` slots the plan counts (several values); ``--kv-cache-dtype-skip-layers`` keeps some layers'
#: KV at the model's dtype; the ``--mamba-*`` state dtype / block flags, the MoE and linear kernel backends, and V0's
#: ``--max-seq-len-to-capture`` (hunt32 F2: published commands carry them); ``--num-gpu-blocks-override`` fixes the
#: pool; V0's ``--speculative-model`` (hunt35 F1/F2); ``--mm-ipc-gpu-memory-gb`` takes its GiB from a multimodal
#: model's KV pool (multimodal/gpu_ipc_memory.py 0.34.0 L155-205, hunt70 F6). ``--model-impl transformers`` serves a
#: natively registered model through the Transformers backend, whose layer_types the config class computes (a Qwen2
#: config slides only from max_window_layers on, not every layer as qwen2.py: hunt87 F-A). ``plan`` and ``check``
#: both name them.
NOT_MODELLED_SWITCHES = frozenset(
    {
        "--disable-hybrid-kv-cache-manager",
        "--disable-custom-all-reduce",
        "--disable-sliding-window",
    }
)
NOT_MODELLED_VALUED = frozenset(
    {
        "--swap-space", "--cpu-offload-params", "--offload-group-size", "--kv-cache-dtype-skip-layers",
        "--mamba-cache-dtype", "--mamba-block-size", "--mamba-cache-mode",
        "--moe-backend", "--linear-backend", "--max-seq-len-to-capture", "--num-gpu-blocks-override",
        "--speculative-model", "--num-speculative-tokens", "--max-context-len-to-capture", "--max-paddings",
        "--mm-ipc-gpu-memory-gb", "--model-impl",
    }
)  # fmt: skip
NOT_MODELLED_LISTS = frozenset({"--lora-modules"})
#: Of the flags fitgate takes without modelling, those that can make a misfit fit: 0.34's prefetch weight offload
#: ("Group every N layers together. Offload last offload_num_in_group layers of each group", config/offload.py
#: 0.34.0 L54-60), a fixed pool (--num-gpu-blocks-override), V0's capture limit and a smaller Mamba state dtype. A
#: DoesNotFit with one of them is Unknown (hunt107 F3: prefetch offload of a 70B on an H100 was denied with a note
#: saying it was not modelled); a fit stays a fit. Prefill context parallelism (``-pcp``) adds ranks that hold 1/PCP
#: of every request's KV (config/parallel.py 0.34.0 L636-670) and widen the fused-MoE group to TP x PCP x DP GPUs
#: (flatten_tp_across_dp_and_pcp): fewer expert bytes and more tokens per GPU than the plan without it (hunt127 F2:
#: DeepSeek-V3 at TP 8 x PCP 2 on H100s was denied at TP 8's 80 GiB of weights per GPU). Elastic EP turns 0.34's
#: extensible KV cache off (config/vllm.py 0.34.0 L3213-3216), which fitgate keeps on: at a stated gmu near 1.0 the
#: extensible plan holds less (hunt206 F2).
NOT_MODELLED_MAY_SHRINK = frozenset(
    {
        "--offload-group-size", "--offload-num-in-group", "--offload-backend", "--offload-prefetch-step",
        "--offload-params", "--num-gpu-blocks-override", "--max-seq-len-to-capture", "--mamba-cache-dtype",
        "--prefill-context-parallel-size", "--enable-elastic-ep",
    }
)  # fmt: skip


#: vLLM-Omni (vllm-project/vllm-omni, a vLLM plugin from 0.20) serves diffusion, speech and omni models with
#: ``vllm serve MODEL --omni``: multi-stage pipelines whose stages fitgate does not size (hunt110 F1: recipes'
#: LTX-2.5-Diffusers on H200 / B300, Qwen3-TTS; ``plan`` exited 2 on the flag). Unknown, never a denial or usage error.
OMNI_NOT_SIZED = "vLLM-Omni's multi-stage pipelines (diffusion, speech and omni models) are not sized"


def may_shrink(flags: Iterable[str]) -> list[str]:
    """The flags of ``flags`` (long names, or "--flag value" words) that can make a misfit fit unmodelled."""
    return [f for f in flags if SHORT_FLAGS.get(_name(f), _name(f)) in NOT_MODELLED_MAY_SHRINK]


#: What ``fitgate plan`` writes after a pasted flag it takes without modelling (cli/passthrough.py).
NOT_MODELLED_SUFFIX = " (not modelled)"

#: vLLM rules that a flag fitgate takes without modelling widens, by the sizing field fitgate checks them on: EPLB
#: needs TP x PCP x DP > 1 (config/parallel.py 0.34.0 L609-621: the EP group spans the TP x PCP x DP ranks), where
#: fitgate's layout checks TP x DP > 1 (sizing/parallel.py). Its divisibility rule needs no entry: experts that split
#: evenly over TP x PCP x DP split evenly over TP x DP, so fitgate's check is never the stricter.
RULES_WIDENED_BY = {"enable_eplb": "--prefill-context-parallel-size"}


def rule_widened(field: str, flags: Iterable[str]) -> str | None:
    """The word of ``flags`` that widens vLLM's rule on ``field`` past fitgate's check, or None.

    hunt127 note: ``-pcp 2 -ep --enable-eplb`` at TP 1 x DP 1 is a setting vLLM takes (TP x PCP x DP = 2) that
    fitgate's TP x DP > 1 rule refused. A value of 1 widens nothing; one fitgate cannot read may.
    """
    widener = RULES_WIDENED_BY.get(field)
    for written in flags if widener else ():
        word = written.removesuffix(NOT_MODELLED_SUFFIX)
        name = _name(word)
        if SHORT_FLAGS.get(name, name) == widener and word[len(name) :].strip(" =") != "1":
            return word
    return None


def _name(word: str) -> str:
    return word.split(" ", 1)[0].split("=", 1)[0]


#: NVIDIA Dynamo's vLLM worker (``python -m dynamo.vllm``) and its own flags beside vLLM's engine args, which it
#: parses first and hands the rest to vLLM's parser (ai-dynamo/dynamo components/src/dynamo/vllm/args.py
#: ``parse_args``: ``parser.parse_known_args`` then ``vllm_parser.parse_args(unknown)``; the ``Config`` fields and
#: ``DynamoRuntimeArgGroup`` / ``DynamoVllmArgGroup``); ``--dyn-*`` (``--dyn-reasoning-parser``,
#: ``--dyn-tool-call-parser``) are Dynamo's too. hunt199 F1: a prefill worker's ``--is-prefill-worker`` made every
#: misfit of Dynamo's disaggregated recipes Unknown, as a newer vLLM's flag would.
DYNAMO_WORKER = "dynamo.vllm"
DYNAMO_WORKER_FLAGS = frozenset(
    {
        "--is-prefill-worker", "--is-decode-worker", "--disaggregation-mode", "--endpoint", "--connector",
        "--custom-jinja-template", "--discovery-backend", "--request-plane", "--event-plane", "--store-kv",
        "--enable-local-indexer", "--use-kv-events", "--no-use-kv-events", "--namespace", "--migration-limit",
        "--gms-shadow-mode", "--engine-config-json", "--embedding-worker", "--multimodal-worker",
        "--multimodal-decode-worker", "--multimodal-encode-worker", "--multimodal-processor", "--fpm-trace",
        "--enable-rl", "--benchmark-mode", "--benchmark-prefill-granularity", "--benchmark-prefill-kv-read-granularity",
        "--benchmark-prefill-batch-granularity", "--benchmark-decode-length-granularity",
    }
)  # fmt: skip

#: The KServe huggingface server's own flags, beside the vLLM engine flags it passes on (kserve/kserve@00397f1e
#: python/huggingfaceserver/huggingfaceserver/__main__.py and kserve/model_server.py's parser), as fitgate spells them.
KSERVE_HF_SERVER_FLAGS = frozenset(
    {
        "--model-id", "--model-name", "--model-dir", "--model-revision", "--backend", "--task", "--max-length",
        "--disable-lower-case", "--disable-special-tokens", "--return-token-type-ids", "--return-probabilities",
        "--return-raw-logits", "--tensor-input-names", "--predictor-host", "--http-port", "--grpc-port", "--workers",
        "--max-threads", "--max-asyncio-workers", "--enable-grpc", "--enable-docs-url", "--configure-logging",
        "--log-config-file", "--access-log-format", "--predictor-protocol", "--predictor-use-ssl",
        "--predictor-request-timeout-seconds", "--predictor-request-retries", "--enable-predictor-health-check",
        "--add-special-tokens", "--disable-log-requests", "--disable-postprocess",
    }
)  # fmt: skip


#: Flags of releases before those ``data/vllm_flags.json`` reads (0.4-0.5 V0; 0.8's ``--enable-reasoning``), which
#: ``plan`` takes (cli/passthrough.py): vLLM's, not unknown.
_OLDER_FLAGS = frozenset({"--enable-reasoning", "--engine-use-ray", "--image-input-type", "--max-paddings"})
#: Flags vLLM takes that are never unknown: the older releases' and the ones fitgate takes without modelling.
_NEVER_UNKNOWN = _OLDER_FLAGS | NOT_MODELLED_SWITCHES | NOT_MODELLED_VALUED | NOT_MODELLED_LISTS


def unknown_flags(flags: Iterable[str], how: str = "") -> list[str]:
    """The long flags of ``flags`` (names, or "--flag value" words) that no ``vllm serve`` fitgate has read takes.

    ``how``: the server that reads them (``EngineCommand.how``): a wrapper's own flags are not vLLM's to know.

    On a release newer than fitgate models (or one it cannot tell), such a flag may be the newer release's and change
    memory in ways fitgate cannot know (hunt110 F2): a misfit with one is Unknown. On a release it models it is a
    wrapper's own flag (Dynamo's, KServe's) or a typo vLLM's parser refuses before any memory is used: a note.
    """
    if how.startswith("KAITO"):  # KAITO's inference_api.py has flags of its own beside vLLM's
        return []
    known = vllm_flags()
    out: list[str] = []
    for word in flags:
        name = _name(word)
        if how == "KServe huggingface runtime" and name in KSERVE_HF_SERVER_FLAGS:
            continue
        if DYNAMO_WORKER in how and (name in DYNAMO_WORKER_FLAGS or name.startswith("--dyn-")):
            continue
        base = name.split(".", 1)[0]
        if not name.startswith("--") or base in known or (base.startswith("--no-") and f"--{base[5:]}" in known):
            continue
        if base in _NEVER_UNKNOWN:
            continue
        out.append(name)
    return out


@functools.cache
def vllm_flags() -> dict[str, bool]:
    """Every flag of ``vllm serve`` in the releases the data lists, with whether it takes a value."""
    doc = json.loads(resources.files("fitgate.workloads").joinpath("data/vllm_flags.json").read_text())
    return {str(k): bool(v) for k, v in doc["flags"].items()}


def canonical(name: str) -> str:
    """A flag's name as fitgate reads it.

    vLLM 0.34's aliases above, ``--disable-X`` of an ``--enable-X`` switch as ``--no-enable-X`` and ``--enable-X`` of a
    ``--disable-X`` switch as ``--no-disable-X`` (0.34 pairs them: utils/argparse_utils.py 0.34.0 L120-140). Which of
    the two is the switch is the one with a ``--no-`` twin (the inverse spelling has none: hunt70 F1).
    """
    if name in ALIASES:
        return ALIASES[name]
    for prefix, inverse in (("--disable-", "--enable-"), ("--enable-", "--disable-")):
        rest = name[len(prefix) :]
        if (
            name.startswith(prefix)
            and f"--no-{inverse[2:]}{rest}" in vllm_flags()
            and f"--no-{name[2:]}" not in (vllm_flags())
        ):
            return f"--no-{inverse[2:]}{rest}"
    return name


#: Flags whose value changes no memory: a value fitgate cannot know there (``--host $(hostname -i)``, ``--api-key
#: $(VLLM_API_KEY)`` of a Secret) leaves the command sized (hunt89 F1, F2).
NO_MEMORY_FLAGS = frozenset({
    "--host", "--port", "--api-key", "--served-model-name", "--uvicorn-log-level", "--root-path",
    "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--allowed-origins", "--allowed-methods",
    "--allowed-headers", "--chat-template", "--tool-call-parser", "--reasoning-parser", "--download-dir",
    "--seed", "--middleware", "--log-config-file", "--response-role", "--otlp-traces-endpoint",
    "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-rank", "--data-parallel-start-rank",
    "--master-addr", "--master-port", "--node-rank", "--kv-events-config", "--disable-uvicorn-access-log",
})  # fmt: skip
