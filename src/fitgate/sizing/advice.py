"""What to change when a deployment does not fit, and the vLLM engine args to run with.

Every suggestion is checked by planning the changed settings again (pure: nothing is mutated), so a
suggestion is only offered when it really fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.units import fmt_gib

SAFE_MAX_GPU_MEMORY_UTILIZATION = 0.95
TP_CHOICES = (2, 4, 8, 16)


@dataclass(frozen=True)
class Suggestion:
    """One change of settings, the verdict it gives and why."""

    changes: tuple[tuple[str, str], ...]  # (vLLM flag, value)
    verdict: Verdict
    summary: str

    @property
    def flags(self) -> str:
        """The change as vLLM flags, e.g. ``--kv-cache-dtype fp8``."""
        return " ".join(f"{k} {v}" for k, v in self.changes)


@dataclass(frozen=True)
class EngineArg:
    """A recommended vLLM engine argument with the reason for its value."""

    name: str
    value: str
    reason: str


def _try(model: ModelInput, gpu: GpuModel, serving: ServingConfig, workload: Workload | None) -> Plan | None:
    try:
        return plan(model, gpu, serving, workload)
    except SizingError:
        return None


def suggest(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    current: Plan,
    limit: int = 5,
) -> tuple[Suggestion, ...]:
    """The smallest single changes that make a DoesNotFit or Tight deployment fit, least disruptive first."""
    if current.verdict in (Verdict.FITS, Verdict.UNKNOWN):
        return ()
    rs = current.serving
    out: list[Suggestion] = []

    def consider(
        changes: tuple[tuple[str, str], ...], new: ServingConfig, why: str, wl: Workload | None = workload
    ) -> bool:
        result = _try(model, gpu, new, wl)
        if result is None or result.verdict is not Verdict.FITS:
            return False
        out.append(
            Suggestion(
                changes,
                result.verdict,
                f"{why}: {result.kv.num_blocks} KV blocks, max concurrency "
                f"{result.kv.max_concurrency:.2f}, headroom {fmt_gib(result.per_gpu.headroom_bytes)}",
            )
        )
        return True

    codes = {r.code for r in current.reasons}
    if "LowHeadroomOutsideBudget" in codes or "GpuMemoryUtilizationTooHigh" in codes:
        for step in range(1, 16):
            gmu = round(rs.gpu_memory_utilization - 0.01 * step, 2)
            if gmu <= 0.5:
                break
            if consider(
                (("--gpu-memory-utilization", f"{gmu}"),),
                replace(serving, gpu_memory_utilization=gmu),
                f"leave {fmt_gib(gpu.memory_bytes * (1 - gmu))} outside the budget for CUDA graphs and warm-up",
            ):
                break
        if not rs.enforce_eager:
            consider(
                (("--enforce-eager", "true"),),
                replace(serving, enforce_eager=True),
                "no CUDA graphs to capture",
            )
    else:
        step_gmu = round(rs.gpu_memory_utilization + 0.01, 2)
        while step_gmu <= SAFE_MAX_GPU_MEMORY_UTILIZATION:
            if consider(
                (("--gpu-memory-utilization", f"{step_gmu}"),),
                replace(serving, gpu_memory_utilization=step_gmu),
                f"a {fmt_gib(gpu.memory_bytes * step_gmu)} budget",
            ):
                break
            step_gmu = round(step_gmu + 0.01, 2)
    if rs.kv_dtype_bytes > 1:
        consider(
            (("--kv-cache-dtype", "fp8"),),
            replace(serving, kv_cache_dtype="fp8"),
            "fp8 KV cache halves bytes per token",
        )
    if current.max_model_len_that_fits and current.max_model_len_that_fits < rs.max_model_len:
        fit = current.max_model_len_that_fits
        rounded = fit - fit % 1024 if fit >= 2048 else fit
        consider(
            (("--max-model-len", str(rounded)),),
            replace(serving, max_model_len=rounded),
            f"the longest context that fits is {fit} tokens",
        )
    for tp in TP_CHOICES:
        if tp <= rs.tensor_parallel_size:
            continue
        if consider(
            (("--tensor-parallel-size", str(tp)),),
            replace(serving, tensor_parallel_size=tp),
            f"weights and KV heads split over {tp} GPUs",
        ):
            break
    if model.arch.quantization is None and rs.quantization is None:
        consider(
            (("--quantization", "fp8"),),
            replace(serving, quantization="fp8"),
            "fp8 weights (or an FP8 / INT4 checkpoint) halve the weight bytes",
        )
    if workload is not None and current.kv.workload_blocks and current.kv.num_blocks:
        per_request = current.kv.workload_blocks / workload.concurrency
        most = int(current.kv.num_blocks / per_request)
        if 0 < most < workload.concurrency:
            consider(
                (("workload.concurrentRequests", str(most)),),
                serving,
                f"the pool holds {most} requests of {workload.context_tokens} tokens",
                Workload(most, workload.context_tokens),
            )
    return tuple(out[:limit])


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
            f"budget {fmt_gib(g.budget_bytes)} of {fmt_gib(g.capacity_bytes)}; {fmt_gib(g.outside_budget_bytes)} stays "
            "outside for CUDA graphs, the CUDA context and sampler warm-up",
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
    if rs.quantization:
        args.append(EngineArg("--quantization", rs.quantization, "weights quantized while loading"))
    if rs.enforce_eager:
        args.append(
            EngineArg("--enforce-eager", "true", "no CUDA graphs: less memory outside the budget, slower decode")
        )
    if rs.block_size_given:
        args.append(EngineArg("--block-size", str(rs.block_size), "requested KV block size"))
    return tuple(args)


def vllm_argv(args: tuple[EngineArg, ...]) -> list[str]:
    """The engine args as an argv list for ``vllm serve``."""
    argv: list[str] = []
    for arg in args:
        if arg.value == "true":
            argv.append(arg.name)
        else:
            argv += [arg.name, arg.value]
    return argv


def vllm_command(model: str, args: tuple[EngineArg, ...], revision: str | None = None) -> list[str]:
    """The whole ``vllm serve`` argv.

    ``model`` is what vLLM must be given to find the checkpoint: a directory's path (a bare name
    would be looked up on the Hub), or a repo id with the revision that was planned.
    """
    argv = ["vllm", "serve", model]
    if revision:
        argv += ["--revision", revision]
    return argv + vllm_argv(args)


def apply_suggestion(serving: ServingConfig, suggestion: Suggestion) -> ServingConfig:
    """The serving settings with a suggestion's engine flags applied (workload changes are ignored)."""
    fields: dict[str, tuple[str, Callable[[str], object]]] = {
        "--gpu-memory-utilization": ("gpu_memory_utilization", float),
        "--kv-cache-dtype": ("kv_cache_dtype", str),
        "--max-model-len": ("max_model_len", int),
        "--tensor-parallel-size": ("tensor_parallel_size", int),
        "--quantization": ("quantization", str),
        "--enforce-eager": ("enforce_eager", lambda v: v == "true"),
    }
    updates: dict[str, object] = {}
    for flag, value in suggestion.changes:
        if flag in fields:
            name, conv = fields[flag]
            updates[name] = conv(value)
    return replace(serving, **updates)  # type: ignore[arg-type]


def recommend(
    model: ModelInput,
    gpu: GpuModel,
    serving: ServingConfig,
    workload: Workload | None,
    current: Plan,
    suggestions: tuple[Suggestion, ...],
) -> tuple[Plan, tuple[EngineArg, ...], Suggestion | None]:
    """The plan to deploy and its engine args: the current one, or the first engine-flag suggestion that fits."""
    if current.verdict is not Verdict.DOES_NOT_FIT:
        return current, engine_args(current, serving), None
    for suggestion in suggestions:
        if all(flag.startswith("--") for flag, _ in suggestion.changes):
            new = apply_suggestion(serving, suggestion)
            result = _try(model, gpu, new, workload)
            if result is not None:
                return result, engine_args(result, new), suggestion
    return current, engine_args(current, serving), None
