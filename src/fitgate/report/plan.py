"""``fitgate plan --output json``: the plan contract (docs/plan-json.md), schema ``fitgate.io/plan/v1``.

A :class:`PlanReport` is everything a plan document says, typed: the :class:`~fitgate.sizing.Plan`, where the
checkpoint came from (:class:`ModelOrigin`), the suggestions and engine arguments, and the estimates.
:func:`plan_document` is its one serialization; keys and rounding are the contract, so a change here is a
change of ``docs/plan-json.md`` (``tests/project/test_docs.py`` checks the generated examples).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from fitgate.report.estimates import cost_document, performance_document
from fitgate.sizing import Cost, EngineArg, Performance, Plan, Suggestion, vllm_argv, vllm_command
from fitgate.sizing.results import KVSummary

PLAN_SCHEMA = "fitgate.io/plan/v1"


@dataclass(frozen=True)
class ModelOrigin:
    """Where the planned checkpoint was read from: the ``model`` object of the contract.

    Attributes:
        source: ``local``, ``catalog`` or ``hub``.
        revision: The immutable revision (commit sha) the facts were read at, where known.
        weights_basis: How exact the weight bytes are: ``safetensors``, ``total_size``, ``dtype_counts``,
            ``estimated``.
        location: The directory of a ``local`` checkpoint (``vllm serve`` is given it as it was given).
        notes: How the facts were obtained, when that matters (a catalog fallback, a stale reference).
    """

    source: str
    revision: str | None
    weights_basis: str
    location: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanReport:
    """A plan and what was planned beside it: everything :func:`plan_document` prints.

    Attributes:
        origin: Where the checkpoint came from.
        plan: The sizing core's plan.
        suggestions: Changes that would fit (fewest GPUs first).
        engine_args: The recommended vLLM arguments.
        recommended: The suggestion ``engine_args`` were taken from (a misfit's fix), if any.
        revision: The revision the user asked for; ``vllm serve`` gets it so that it loads what was planned.
        performance: The speed estimate of a plan that can start, if made.
        cost: Its price, when the GPU is priced.
    """

    origin: ModelOrigin
    plan: Plan
    suggestions: tuple[Suggestion, ...] = ()
    engine_args: tuple[EngineArg, ...] = ()
    recommended: Suggestion | None = None
    revision: str | None = None
    performance: Performance | None = None
    cost: Cost | None = None

    @property
    def gpus(self) -> int:
        """GPUs of one replica: TP x PP x DP."""
        rs = self.plan.serving
        return rs.tensor_parallel_size * rs.pipeline_parallel_size * rs.parallel.data_parallel_size

    @property
    def notes(self) -> tuple[str, ...]:
        """The checkpoint's notes, then the plan's."""
        return (*self.origin.notes, *self.plan.notes)

    def command(self) -> str:
        """The ``vllm serve`` command line of the recommended arguments (a local checkpoint by its directory)."""
        local = self.origin.source == "local"
        served = self.origin.location if local else self.plan.model
        return shlex.join(vllm_command(served, self.engine_args, None if local else self.revision))


def max_concurrency(kv: KVSummary) -> float:
    """``kv_cache.max_concurrency`` as the contract prints it (4 decimals; ``compare`` sets it beside vLLM's)."""
    return round(kv.max_concurrency, 4)


def plan_document(report: PlanReport) -> dict[str, Any]:
    """The ``--output json`` contract of ``fitgate plan`` (docs/plan-json.md)."""
    result = report.plan
    rs, g, kv = result.serving, result.per_gpu, result.kv
    return {
        "schema": PLAN_SCHEMA,
        "model": {
            "name": result.model,
            "source": report.origin.source,
            "revision": report.origin.revision,
            "weights_basis": report.origin.weights_basis,
        },
        "gpu": {"name": result.gpu.name, "memory_bytes": result.gpu.memory_bytes, "count": report.gpus},
        "vllm_version": rs.vllm_version,
        "verdict": result.verdict.value,
        "reasons": [{"code": r.code.value, "message": r.message} for r in result.reasons],
        "per_gpu": {
            "capacity_bytes": g.capacity_bytes,
            "budget_bytes": g.budget_bytes,
            "weights_bytes": g.weights_bytes,
            "activation_bytes": g.activation_bytes,
            "non_torch_bytes": g.non_torch_bytes,
            "cuda_graph_bytes": g.cuda_graph_bytes,
            "cuda_graphs_in_budget": g.cuda_graphs_in_budget,
            "kv_cache_bytes": g.kv_cache_bytes,
            "headroom_bytes": g.headroom_bytes,
            "outside_budget_bytes": g.outside_budget_bytes,
            # issue 20: LoRA slots (inside weights_bytes) and weights offloaded to the host (outside it)
            "lora_bytes": g.lora_bytes,
            "cpu_offload_bytes": g.cpu_offload_bytes,
        },
        "host_memory": None
        if result.host is None
        else {
            "total_bytes": result.host.total_bytes,
            "weights_offload_bytes": result.host.weights_offload_bytes,
            "kv_offload_bytes": result.host.kv_offload_bytes,
            "kv_transfer_buffer_bytes": result.host.kv_transfer_buffer_bytes,
            "mm_processor_cache_bytes": result.host.mm_processor_cache_bytes,
            "lora_cpu_cache_bytes": result.host.lora_cpu_cache_bytes,
        },
        "kv_cache": {
            "bytes_per_token": kv.bytes_per_token,
            "page_size_bytes": kv.page_size_bytes,
            "block_size": kv.block_size,
            "num_blocks": kv.num_blocks,
            "num_groups": kv.num_groups,
            "kinds": list(kv.kinds),
            "reported_tokens": kv.reported_tokens,
            "max_concurrency": max_concurrency(kv),
            "one_request_bytes": kv.one_request_bytes,
        },
        "max_model_len": rs.max_model_len,
        "max_model_len_that_fits": result.max_model_len_that_fits,
        "serving": _serving_document(result),
        "workload": None
        if result.workload is None
        else {
            "concurrency": result.workload.concurrency,
            "replicas": result.workload.replicas,
            "context_tokens": result.workload.context_tokens,
            "kv_blocks": kv.workload_blocks,
            "pool_fraction": None if kv.workload_fraction is None else round(kv.workload_fraction, 4),
        },
        "ranks": [
            {
                "pp_rank": r.pp_rank,
                "layers": [r.layers.start, r.layers.stop],
                "weights_bytes": r.loaded_weights_bytes,  # with LoRA slots, without offloaded weights
                "activation_bytes": r.profile.activation_bytes,
                "non_torch_bytes": r.profile.non_torch_bytes,
                "cuda_graph_bytes": r.profile.cuda_graph_bytes,
                "available_kv_bytes": r.available_kv_bytes,
                "num_blocks": r.num_blocks,
            }
            for r in result.ranks
        ],
        "engine_args": [{"name": a.name, "value": a.value, "reason": a.reason} for a in report.engine_args],
        "vllm_args": vllm_argv(report.engine_args),
        "vllm_command": report.command(),
        "recommended_change": None if report.recommended is None else dict(report.recommended.changes),
        "suggestions": [
            {
                "changes": dict(s.changes),
                "verdict": s.verdict.value,
                "gpus": s.gpus,
                "replicas": s.replicas,
                "summary": s.summary,
            }
            for s in report.suggestions
        ],
        "performance": performance_document(report.performance),
        "cost": cost_document(report.cost),
        "notes": list(report.notes),
    }


def _serving_document(result: Plan) -> dict[str, Any]:
    """``serving`` of the contract: the settings vLLM resolves (defaults filled in)."""
    rs = result.serving
    return {
        "tensor_parallel_size": rs.tensor_parallel_size,
        "pipeline_parallel_size": rs.pipeline_parallel_size,
        "gpu_memory_utilization": rs.gpu_memory_utilization,
        "dtype": rs.dtype,
        "kv_cache_dtype": rs.kv_cache_dtype,
        "quantization": rs.quantization,
        "max_num_seqs": rs.max_num_seqs,
        "max_num_batched_tokens": rs.max_num_batched_tokens,
        "block_size": result.kv.block_size,
        "enforce_eager": rs.enforce_eager,
        # data / expert / decode-context parallelism (docs/parallelism.md)
        "data_parallel_size": rs.parallel.data_parallel_size,
        "data_parallel_size_local": rs.parallel.data_parallel_size_local,
        "enable_expert_parallel": rs.parallel.expert_parallel,
        "expert_parallel_size": rs.parallel.ep_size,
        "num_redundant_experts": rs.parallel.redundant_experts,
        "all2all_backend": rs.parallel.all2all_backend,
        "decode_context_parallel_size": rs.parallel.decode_context_parallel_size,
        "lora": None
        if rs.lora is None
        else {
            "max_loras": rs.lora.max_loras,
            "max_lora_rank": rs.lora.max_lora_rank,
            "max_cpu_loras": rs.lora.max_cpu_loras,
            "fully_sharded_loras": rs.lora.fully_sharded,
        },
        "cpu_offload_bytes": rs.cpu_offload_bytes,
        "kv_connector": rs.kv_connector,
        "kv_role": rs.kv_role,
        "speculative_config": None
        if rs.speculative is None
        else {
            "method": rs.speculative.method,
            "num_speculative_tokens": rs.speculative.num_tokens,
            "drafter_layers": rs.speculative.drafter_layers,
            "counted": rs.speculative.counted,
        },
    }
