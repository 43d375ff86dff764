"""Predicted against observed: the settings of a start-up log as a plan, and the figures side by side.

Pure: takes a :class:`~fitgate.observe.logparse.StartupLog` and fitgate's typed plan of its settings (a
:class:`~fitgate.report.PlanReport`) and returns dicts; :mod:`~fitgate.observe.compare_text` writes the text.
The plan is read as the typed result, never as its JSON document read back; the ``predicted`` object is that
document, written by :mod:`fitgate.report`. The CLI resolves the checkpoint and runs the plan in between
(``fitgate compare``, ``docs/compare-json.md``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from fitgate.observe.records import StartupLog
from fitgate.report import PlanReport, max_concurrency, plan_document
from fitgate.sizing import (
    DEFAULT_VLLM_VERSION,
    GpuModel,
    Plan,
    ServingConfig,
    SizingError,
    Verdict,
    custom_gpu,
    gpu_catalog,
)
from fitgate.sizing.dtypes import has_bfloat16
from fitgate.sizing.parallel import ALL2ALL_BACKENDS
from fitgate.sizing.quantization import RUNTIME_QUANTIZATION as SIZED_RUNTIME_QUANTIZATION
from fitgate.sizing.speculative import canonical_method
from fitgate.sizing.units import GiB, fmt_gib
from fitgate.sizing.versions import accounting_for, resolve_release

COMPARE_SCHEMA = "fitgate.io/compare/v1"
#: ``--quantization`` values that quantize an unquantized checkpoint while loading (planned as such; for a
#: checkpoint that is already quantized the plan ignores them, as vLLM does).
RUNTIME_QUANTIZATION = tuple(SIZED_RUNTIME_QUANTIZATION)
_MODEL_DTYPES = ("bfloat16", "float16", "float32")
#: Two GPUs are the same size when their totals agree to the log's precision (two decimals of GiB).
_TOTAL_TOLERANCE_GIB = 0.006


@dataclass(frozen=True)
class Term:
    """One figure compared: its JSON key (in ``observed`` and ``errors``), its label, its unit."""

    key: str
    label: str
    unit: str  # "bytes", "tokens", "blocks" or "x"


TERMS = (
    Term("weights_bytes", "weights", "bytes"),
    Term("activation_bytes", "activation peak", "bytes"),
    Term("non_torch_bytes", "non-torch", "bytes"),
    Term("cuda_graph_bytes", "CUDA graphs", "bytes"),
    Term("kv_available_bytes", "available KV cache", "bytes"),
    Term("kv_tokens", "GPU KV cache tokens", "tokens"),
    Term("num_gpu_blocks", "GPU blocks", "blocks"),
    Term("max_concurrency", "max concurrency", "x"),
)


def _dtype(text: str | None) -> str:
    name = (text or "auto").removeprefix("torch.")
    return name if name in _MODEL_DTYPES else "auto"


def runtime_quantization(log: StartupLog) -> str | None:
    """The ``--quantization`` to plan with: the one given, else a load-time one vLLM reported."""
    s = log.settings
    if s.quantization_arg:
        return s.quantization_arg
    return s.quantization if s.quantization in RUNTIME_QUANTIZATION else None


def serving_config(log: StartupLog, vllm_version: str | None = None) -> tuple[ServingConfig, list[str]]:
    """The ServingConfig of the run a log shows, and notes on what the log did not print."""
    s = log.settings
    notes: list[str] = []
    if log.starts > 1:
        notes.append(f"the log holds {log.starts} start-ups; where a line repeats, the first one was read")
    version = vllm_version or s.vllm_version
    if version is None:
        version = DEFAULT_VLLM_VERSION
        notes.append(f"the log prints no vLLM version; planned with {version} (pass --vllm-version)")
    if s.gpu_memory_utilization is None:
        notes.append("the log prints no gpu_memory_utilization; planned with the release's default")
    if _extensible_release(version):
        notes.append(
            "vLLM 0.34+ sizes the KV cache after warm-up: its 'Available KV cache memory' line is the capacity bound "
            "printed before warm-up (gpu_worker.py 0.34.0 L795-798), the plan's is what vLLM checks after it; "
            "compare the GPU blocks and tokens"
        )
    for name in ("tensor_parallel_size", "pipeline_parallel_size"):
        if getattr(s, name) is None:
            notes.append(f"the log prints no {name}; planned with 1")
    engine = s.engine if s.engine == "V0" and not vllm_version else None
    serving = ServingConfig(
        max_model_len=s.max_model_len,
        kv_cache_dtype=s.kv_cache_dtype or "auto",
        dtype=_dtype(s.dtype),
        quantization=runtime_quantization(log),
        tensor_parallel_size=s.tensor_parallel_size or 1,
        pipeline_parallel_size=s.pipeline_parallel_size or 1,
        gpu_memory_utilization=s.gpu_memory_utilization,  # None: the release's (0.9, 0.92, 1.0 from 0.34)
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        block_size=s.block_size,
        enforce_eager=bool(s.enforce_eager),
        vllm_version=version,
        engine=engine,
        offline=s.usage_context == "LLM_CLASS",
        speculative_method=canonical_method(s.speculative_method),
        speculative_tokens=s.speculative_tokens,
        data_parallel_size=s.data_parallel_size or 1,
        data_parallel_size_local=s.data_parallel_size_local,
        enable_expert_parallel=bool(s.enable_expert_parallel),
        enable_eplb=bool(s.enable_eplb),
        num_redundant_experts=s.num_redundant_experts or 0,
        all2all_backend=s.all2all_backend if s.all2all_backend in ALL2ALL_BACKENDS else None,
        decode_context_parallel_size=s.decode_context_parallel_size or 1,
        # issue 20: LoRA slots, weight offload, KV connector
        enable_lora=bool(s.enable_lora),
        max_loras=s.max_loras if s.enable_lora else None,
        max_lora_rank=s.max_lora_rank if s.enable_lora else None,
        fully_sharded_loras=bool(s.fully_sharded_loras),
        cpu_offload_bytes=int((s.cpu_offload_gb or 0) * GiB),
        kv_connector=s.kv_connector,
    )
    if s.all2all_backend is not None and s.all2all_backend not in ALL2ALL_BACKENDS:
        notes.append(f"all2all backend {s.all2all_backend}: not one fitgate knows; planned with the default")
    return serving, notes


def _extensible_release(version: str) -> bool:
    """Whether the release sizes the KV cache after warm-up by default (0.34+); False for text naming no release."""
    try:
        return resolve_release(version).named and accounting_for(version).extensible_kv_cache
    except SizingError:
        return False


def gpu_of(log: StartupLog, named: GpuModel | None) -> tuple[GpuModel, list[str]]:
    """The GPU to plan on, with the device total the log printed.

    The one named (``--gpu``), else the catalog GPU of that total (a custom GPU of that size when several
    catalog GPUs share it and differ in kind).

    Raises:
        SizingError: no GPU named and the log prints no total.
    """
    total_gib = log.observed.gpu_total_gib
    total = log.observed.bytes("gpu_total_gib")
    if named is not None:
        if total_gib is None or total is None or abs(named.memory_bytes / GiB - total_gib) < _TOTAL_TOLERANCE_GIB:
            return named, []  # the catalog's figure is the same total, to more digits
        note = f"planned with the device total the log printed ({fmt_gib(total)}), not {fmt_gib(named.memory_bytes)}"
        return GpuModel(**{**named.__dict__, "memory_bytes": total}), [note]
    if total is None or total_gib is None:
        raise SizingError("--gpu", None, "a GPU from `fitgate gpus` (the log prints no GPU total)")
    same = [g for g in gpu_catalog() if abs(g.memory_bytes / GiB - total_gib) < _TOTAL_TOLERANCE_GIB]
    if _dtype(log.settings.dtype) == "bfloat16":
        # the log ran in bfloat16, so its GPU has it: not a Pascal / Volta / Turing card of the same total (hunt113)
        same = [g for g in same if has_bfloat16(g.compute_capability)]
    kinds = {(g.architecture, g.is_a100, g.vendor) for g in same}
    if not same or len(kinds) > 1:
        return custom_gpu(total, name=f"{total_gib:.2f}GiB"), [
            f"GPU not named: planned on a {total_gib:.2f} GiB device (pass --gpu for its defaults)"
        ]
    names = "/".join(g.name for g in same)
    gpu = GpuModel(**{**same[0].__dict__, "name": names, "memory_bytes": total})
    return gpu, [f"GPU not named: {names} from the total the log printed ({total_gib:.2f} GiB)"]


def observed_document(log: StartupLog) -> dict[str, Any]:
    """``observed`` of the compare contract: bytes and counts as printed, None where not printed."""
    o = log.observed
    return {
        "weights_bytes": o.bytes("weights_gib"),
        "activation_bytes": o.bytes("activation_peak_gib"),
        "non_torch_bytes": o.bytes("non_torch_gib"),
        "cuda_graph_bytes": o.bytes("cuda_graph_gib"),
        "kv_available_bytes": o.bytes("kv_available_gib"),
        "kv_tokens": o.kv_tokens,
        "num_gpu_blocks": o.gpu_blocks,
        "max_concurrency": o.max_concurrency,
        "gpu_total_bytes": o.bytes("gpu_total_gib"),
        "outcome": log.outcome,
        "failure": None if log.failure is None else {"kind": log.failure.kind, "message": log.failure.message},
        "total_non_kv_bytes": o.bytes("total_non_kv_gib"),
        "cuda_graph_estimated_bytes": o.bytes("cuda_graph_estimated_gib"),
    }


def settings_document(log: StartupLog) -> dict[str, Any]:
    """``settings`` of the compare contract: what the log printed (None where it printed nothing)."""
    s = log.settings
    return {
        "model": s.model,
        "vllm_version": s.vllm_version,
        "tensor_parallel_size": s.tensor_parallel_size,
        "pipeline_parallel_size": s.pipeline_parallel_size,
        "max_model_len": s.max_model_len,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "kv_cache_dtype": s.kv_cache_dtype,
        "max_num_seqs": s.max_num_seqs,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "engine": s.engine,
        "dtype": s.dtype,
        "quantization": s.quantization,
        "block_size": s.block_size,
        "enforce_eager": s.enforce_eager,
        "speculative_method": s.speculative_method,
        "speculative_tokens": s.speculative_tokens,
    }


def predicted_terms(plan: Plan) -> dict[str, int | float]:
    """The plan's figures for the same terms: tensor rank 0 of pipeline stage 0, as the log prints them.

    Each is the figure the plan document prints for it (``ranks[0]``, ``kv_cache``; max concurrency rounded
    as there), so that ``errors`` can be checked against ``predicted``.
    """
    rank0, kv = plan.ranks[0], plan.kv
    return {
        "weights_bytes": rank0.loaded_weights_bytes,
        "activation_bytes": rank0.profile.activation_bytes,
        "non_torch_bytes": rank0.profile.non_torch_bytes,
        "cuda_graph_bytes": rank0.profile.cuda_graph_bytes,
        "kv_available_bytes": rank0.available_kv_bytes,
        "kv_tokens": kv.reported_tokens,
        "num_gpu_blocks": kv.num_blocks,
        "max_concurrency": max_concurrency(kv),
    }


def _error_pct(predicted: float, observed: float | None) -> float | None:
    if observed is None or observed == 0:
        return None
    return round(100 * (predicted - observed) / abs(observed), 2)


def verdict_agrees(verdict: Verdict, log: StartupLog) -> bool | None:
    """Whether the plan's verdict matches what happened (None when the log does not say how it ended).

    Started: Fits or Tight. KV cache too small or none left: DoesNotFit. Out of memory after the KV cache
    was sized (graph capture, sampler warm-up): anything but Fits.
    """
    if log.outcome == "unknown":
        return None
    if log.failure is None:
        return verdict in (Verdict.FITS, Verdict.TIGHT)
    if log.failure.kind in ("kv_too_small", "no_kv_memory"):
        return verdict is Verdict.DOES_NOT_FIT
    if log.failure.kind == "out_of_memory" and log.kv_sized:
        return verdict is not Verdict.FITS
    return None  # not a question of memory (a gated model, a bad setting, a busy GPU)


def log_document(log: StartupLog, log_path: str) -> dict[str, Any]:
    """What was read of the log: the ``log`` object of the compare contract."""
    return {
        "path": log_path,
        "lines_read": log.lines_read,
        "lines_recognised": log.lines_recognised,
        "lines_too_long": log.lines_too_long,
        "bytes_read": log.bytes_read,
        "truncated": log.truncated,
    }


@dataclass(frozen=True)
class Refusal:
    """Settings fitgate refuses to plan (TP 5 of 32 heads): the one-line reason, and what was asked."""

    message: str
    gpu: GpuModel
    serving: ServingConfig


@dataclass(frozen=True)
class Comparison:
    """One run set against fitgate: the log read, and fitgate's plan of its settings (or its refusal).

    Attributes:
        log: The start-up log read.
        log_path: Where it was read from, as given.
        predicted: The plan of the settings the log shows; None when fitgate refuses them.
        refusal: Why fitgate refuses them (``predicted`` is then None).
        notes: What the log did not print and how that was filled in.
    """

    log: StartupLog
    log_path: str
    predicted: PlanReport | None
    refusal: Refusal | None = None
    notes: tuple[str, ...] = ()

    def errors(self) -> dict[str, float | None]:
        """Per term, (predicted - observed) / observed in percent; None where either is not known."""
        if self.predicted is None:
            return {t.key: None for t in TERMS}
        observed = observed_document(self.log)
        predicted = predicted_terms(self.predicted.plan)
        return {t.key: _error_pct(predicted[t.key], observed[t.key]) for t in TERMS}

    def agrees(self) -> bool | None:
        """Whether fitgate's answer (a verdict, or a refusal) matches how the run ended; None: not known."""
        if self.predicted is None:
            return refusal_agrees(self.log)
        return verdict_agrees(self.predicted.plan.verdict, self.log)


def compare_document(c: Comparison) -> dict[str, Any]:
    """The ``--output json`` contract of ``fitgate compare`` (docs/compare-json.md).

    ``predicted`` is the plan contract of :func:`fitgate.report.plan_document`; for settings fitgate refuses
    to plan it is null and ``refused`` holds fitgate's one-line reason.
    """
    doc: dict[str, Any] = {
        "schema": COMPARE_SCHEMA,
        "log": log_document(c.log, c.log_path),
        "settings": settings_document(c.log),
        "observed": observed_document(c.log),
        "predicted": None if c.predicted is None else plan_document(c.predicted),
    }
    if c.predicted is None and c.refusal is not None:
        doc["refused"] = {
            "message": c.refusal.message,
            "gpu": c.refusal.gpu.name,
            "tensor_parallel_size": c.refusal.serving.tensor_parallel_size,
            "pipeline_parallel_size": c.refusal.serving.pipeline_parallel_size,
            "vllm_version": c.refusal.serving.vllm_version,
        }
    return {**doc, "errors": c.errors(), "verdict_agrees": c.agrees(), "notes": list(c.notes)}


def refusal_agrees(log: StartupLog) -> bool | None:
    """Whether fitgate refusing the settings matches what happened: vLLM failed before sizing its KV cache.

    vLLM refuses most of the same settings at start-up (an assertion in its config checks), so a failed
    start agrees. A run that started (or sized its KV cache) disagrees: fitgate refused what ran. None when
    the log does not say how it ended.
    """
    if log.outcome == "unknown":
        return None
    return log.outcome == "failed" and not log.kv_sized


def case_status(log: StartupLog) -> str:
    """The calibration ``status`` of a run (shared/calibration/README.md).

    Plus two this tool adds: ``failed_before_kv_sizing`` (the failure came before the KV cache was sized)
    and ``unknown`` (the log ends before the KV cache was sized, with no failure).
    """
    if log.failure is None:
        return "ok" if log.kv_sized else "unknown"
    if log.failure.kind == "kv_too_small":
        return "failed_kv_too_small"
    if log.failure.kind == "no_kv_memory":
        return "failed_no_kv_memory"
    return "failed_after_kv_sizing" if log.kv_sized else "failed_before_kv_sizing"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "model"


def case_document(log: StartupLog, log_path: str, named: GpuModel | None) -> dict[str, Any]:
    """The run as one calibration case, in the format of ``shared/calibration/cases.jsonl``."""
    s, o = log.settings, log.observed
    if named is not None:
        gpu = f"{named.name} (given with --gpu)"
    elif o.gpu_total_gib is not None:
        gpu = f"{gpu_of(log, None)[0].name} (not named; from the device total the log printed)"
    else:
        gpu = "not stated (pass --gpu)"
    digest = hashlib.sha256("\n".join(log.raw_lines).encode()).hexdigest()
    engine = s.engine or (None if s.vllm_version is None else "V1")
    notes = [
        "Read by `fitgate compare --as-case` from a start-up log; figures and settings as printed (null: not printed).",
    ]
    if log.failure is not None:
        notes.append(f"Failure ({log.failure.kind}): {log.failure.message}")
    return {
        "id": f"user-{_slug(s.model or 'unknown')}-{digest[:12]}",
        "source": f"vLLM start-up log {log_path} (sha256 of the recognised lines {digest})",
        "source_kind": "user_log",
        "vllm_version": s.vllm_version,
        "vllm_engine": engine,
        "model": s.model,
        "gpu": gpu,
        "gpu_total_gib": o.gpu_total_gib,
        "gpu_total_gib_basis": "printed in log" if o.gpu_total_gib is not None else "not printed",
        "tensor_parallel_size": s.tensor_parallel_size,
        "pipeline_parallel_size": s.pipeline_parallel_size,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "max_model_len": s.max_model_len,
        "kv_cache_dtype": s.kv_cache_dtype,
        "dtype": s.dtype,
        "quantization": s.quantization or s.quantization_arg,
        "block_size": s.block_size,
        "enforce_eager": s.enforce_eager,
        "max_num_seqs": s.max_num_seqs,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        # only where the run used --speculative-config (as in benchmarks/calibration/public-2026.jsonl)
        **(
            {
                "speculative_method": canonical_method(s.speculative_method),
                "speculative_tokens": s.speculative_tokens,
            }
            if s.speculative_method
            else {}
        ),
        # serving shapes of 2026 (issue 20), only where the run used them (as in public-2026.jsonl), so that
        # benchmarks/accuracy.py sizes the case with the same data / expert parallelism and LoRA slots
        **({"data_parallel_size": s.data_parallel_size} if (s.data_parallel_size or 1) > 1 else {}),
        **({"enable_expert_parallel": True} if s.enable_expert_parallel else {}),
        **({"enable_lora": True, "max_loras": s.max_loras, "max_lora_rank": s.max_lora_rank} if s.enable_lora else {}),
        "status": case_status(log),
        "measured": {
            "weights_gib": o.weights_gib,
            "non_torch_gib": o.non_torch_gib,
            "activation_peak_gib": o.activation_peak_gib,
            "kv_available_gib": o.kv_available_gib,
            "kv_tokens": o.kv_tokens,
            "gpu_blocks": o.gpu_blocks,
            "max_concurrency": o.max_concurrency,
            "cuda_graph_gib": o.cuda_graph_gib,
            "cuda_graph_estimated_gib": o.cuda_graph_estimated_gib,
            "total_non_kv_gib": o.total_non_kv_gib,
        },
        "raw_lines": list(log.raw_lines),
        "notes": " ".join(notes),
        "runtime_quantization": runtime_quantization(log),
    }
