"""The vLLM engine args to run a plan with, each with its reason, and the ``vllm serve`` command line."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from fitgate.sizing.dtypes import has_bfloat16
from fitgate.sizing.parallel import DEFAULT_ALL2ALL
from fitgate.sizing.plan import Plan, ServingConfig
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION
from fitgate.sizing.serving import ResolvedServing
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.versions import parse_version


@dataclass(frozen=True)
class EngineArg:
    """A recommended vLLM engine argument with the reason for its value."""

    name: str
    value: str
    reason: str


def engine_args(result: Plan, serving: ServingConfig) -> tuple[EngineArg, ...]:
    """The vLLM engine args for ``result`` (the plan to deploy), each with its reason."""
    rs = result.serving
    kv = result.kv
    g = result.per_gpu
    args = [
        EngineArg(
            "--max-model-len",
            str(rs.max_model_len),
            f"one {rs.max_model_len}-token request needs {fmt_gib(kv.one_request_bytes)} of KV per GPU; the pool holds "
            f"{kv.max_concurrency:.2f} such requests (longest that fits: {result.max_model_len_that_fits})",
        ),
        EngineArg(
            "--gpu-memory-utilization",
            f"{rs.gpu_memory_utilization:g}",
            f"budget {fmt_gib(g.budget_bytes)} of {fmt_gib(g.capacity_bytes)}; "
            + (
                f"vLLM {rs.vllm_version} measures CUDA graphs and warm-up inside it (extensible KV cache)"
                if rs.extensible_kv_cache
                else f"{fmt_gib(g.outside_budget_bytes)} stays outside for CUDA graphs, the CUDA context and sampler "
                "warm-up"
            ),
        ),
        EngineArg(
            "--tensor-parallel-size",
            str(rs.tensor_parallel_size),
            f"{fmt_gib(g.weights_bytes)} of weights per GPU",
        ),
        EngineArg(
            "--kv-cache-dtype",
            rs.kv_cache_dtype,
            f"{rs.kv_dtype_bytes} byte(s) per element: {kv.bytes_per_token} B of KV per token per GPU",
        ),
        EngineArg(
            "--max-num-seqs",
            str(rs.max_num_seqs),
            f"vLLM schedules up to {rs.max_num_seqs} sequences; the KV pool holds {kv.max_concurrency:.2f} at "
            f"{rs.max_model_len} tokens, more concurrent long requests are preempted",
        ),
        EngineArg(
            "--max-num-batched-tokens",
            str(rs.max_num_batched_tokens),
            f"sets the profiling batch: activation peak {fmt_gib(g.activation_bytes)} per GPU",
        ),
    ]
    if rs.pipeline_parallel_size > 1:
        args.append(
            EngineArg(
                "--pipeline-parallel-size",
                str(rs.pipeline_parallel_size),
                f"{len(result.ranks)} stages; the stage with the fewest KV blocks sets the pool",
            )
        )
    if serving.dtype not in ("auto", "", None):
        args.append(EngineArg("--dtype", rs.dtype, "requested model dtype"))
    elif not has_bfloat16(result.gpu.compute_capability):
        args.append(
            EngineArg(
                "--dtype",
                "half" if rs.dtype == "float16" else rs.dtype,
                f"{result.gpu.name} (compute capability {result.gpu.compute_capability}) has no bfloat16: vLLM runs "
                f"the model in {rs.dtype} there, and older releases refuse to start without this flag",
            )
        )
    if rs.quantization:
        why = (
            "weights quantized while loading"
            if rs.quantization in RUNTIME_QUANTIZATION
            else "the checkpoint's own quantization, as given (it picks the kernel, not the bytes)"
        )
        args.append(EngineArg("--quantization", rs.quantization, why))
    if rs.enforce_eager:
        args.append(
            EngineArg("--enforce-eager", "true", "no CUDA graphs: less memory outside the budget, slower decode")
        )
    if rs.block_size_given:
        args.append(EngineArg("--block-size", str(rs.block_size), "requested KV block size"))
    if rs.lora is not None:  # issue 20
        lb = result.per_gpu.lora_bytes
        args.append(EngineArg("--enable-lora", "true", f"LoRA slots take {fmt_gib(lb)} per GPU"))
        args.append(EngineArg("--max-loras", str(rs.lora.max_loras), "adapters served in one batch"))
        args.append(EngineArg("--max-lora-rank", str(rs.lora.max_lora_rank), "every slot is sized for this rank"))
        if rs.lora.fully_sharded:
            args.append(EngineArg("--fully-sharded-loras", "true", "LoRA A/B buffers sharded with TP"))
    if rs.cpu_offload_bytes:
        args.append(
            EngineArg(
                "--cpu-offload-gb",
                f"{rs.cpu_offload_bytes / (1 << 30):g}",
                f"{fmt_gib(result.per_gpu.cpu_offload_bytes)} of weights per GPU in host memory",
            )
        )
    if rs.runner != "generate":
        args.extend(_runner_args(rs))
    args.extend(_parallel_args(rs))
    spec = rs.speculative
    if spec is not None and spec.counted:  # a drafter checkpoint's own keys are the user's: see the plan's note
        given = {"method": spec.method, "num_speculative_tokens": spec.num_tokens}
        why = f"{spec.drafter_layers} MTP layer(s) counted" if spec.drafter_layers else "no drafter memory"
        args.append(EngineArg("--speculative-config", json.dumps(given, separators=(",", ":")), why))
    return tuple(args)


#: The flag that asks each release for a pooling runner (hunt124 F1): ``--runner`` from 0.10.1
#: (engine/arg_utils.py 0.10.1 L473); before it ``--task``, whose pooling value was ``embedding`` in 0.6.4-0.6.5
#: (config.py 0.6.4 L42 ``TaskOption``) and ``embed`` from 0.6.6 (config.py 0.6.6 L55, 0.10.0 L94); before 0.6.4
#: no flag (arg_utils.py 0.6.3.post1 has none): vLLM picks the runner from the architecture.
RUNNER_FLAG_SINCE = (0, 10, 1)
TASK_EMBED_SINCE = (0, 6, 6)
TASK_FLAG_SINCE = (0, 6, 4)


def _runner_args(rs: ResolvedServing) -> list[EngineArg]:
    """The flag that runs ``rs.runner`` on ``rs.vllm_version`` (:data:`RUNNER_FLAG_SINCE`)."""
    why = "sized for this runner (no sampler warm-up, no lm_head)"
    version = parse_version(rs.vllm_version)
    if version >= RUNNER_FLAG_SINCE:
        return [EngineArg("--runner", rs.runner, why)]
    if rs.runner != "pooling" or version < TASK_FLAG_SINCE:
        return []
    return [EngineArg("--task", "embed" if version >= TASK_EMBED_SINCE else "embedding", why)]


def _parallel_args(rs: ResolvedServing) -> list[EngineArg]:
    """The data / expert / decode-context flags the plan was sized with (docs/parallelism.md)."""
    lay, out = rs.parallel, []
    if lay.data_parallel_size > 1:
        out.append(
            EngineArg(
                "--data-parallel-size",
                str(lay.data_parallel_size),
                f"{lay.data_parallel_size} engine ranks of TP {rs.tensor_parallel_size} x PP "
                f"{rs.pipeline_parallel_size}, each with its own KV cache",
            )
        )
    if lay.data_parallel_size_local < lay.data_parallel_size:
        out.append(EngineArg("--data-parallel-size-local", str(lay.data_parallel_size_local), "engine ranks per node"))
    if lay.expert_parallel:
        out.append(EngineArg("--enable-expert-parallel", "true", f"whole experts over {lay.ep_size} GPUs"))
    if lay.eplb:
        out.append(EngineArg("--enable-eplb", "true", "expert-parallel load balancing"))
        if lay.redundant_experts:
            out.append(
                EngineArg(
                    "--eplb-config",
                    json.dumps({"num_redundant_experts": lay.redundant_experts}, separators=(",", ":")),
                    f"{lay.redundant_experts} redundant experts per MoE layer, counted",
                )
            )
    if lay.expert_parallel and lay.all2all_backend != DEFAULT_ALL2ALL:
        out.append(EngineArg("--all2all-backend", lay.all2all_backend, "its buffers are sized in the plan's notes"))
    if lay.decode_context_parallel_size > 1:
        out.append(
            EngineArg(
                "--decode-context-parallel-size",
                str(lay.decode_context_parallel_size),
                "each GPU holds that share of every request's tokens",
            )
        )
    return out


def flag_words(name: str, value: str) -> list[str]:
    """A flag and its value as ``vllm serve`` takes them: a switch (value ``true``) alone, ``--enforce-eager``."""
    return [name] if value == "true" and name.startswith("--") else [name, value]


def vllm_argv(args: tuple[EngineArg, ...]) -> list[str]:
    """The engine args as an argv list for ``vllm serve``."""
    return [word for arg in args for word in flag_words(arg.name, arg.value)]


def vllm_args_text(args: tuple[EngineArg, ...]) -> str:
    """The engine args as one shell-quoted line (``fitgate.io/recommended-args``; JSON values quoted)."""
    return shlex.join(vllm_argv(args))


def vllm_command(model: str, args: tuple[EngineArg, ...], revision: str | None = None) -> list[str]:
    """The whole ``vllm serve`` argv.

    ``model`` is what vLLM must be given to find the checkpoint: a directory's path (a bare name
    would be looked up on the Hub), or a repo id with the revision that was planned.
    """
    argv = ["vllm", "serve", model]
    if revision:
        argv += ["--revision", revision]
    return argv + vllm_argv(args)
