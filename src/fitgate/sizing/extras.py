"""The plan's LoRA, weight-offload, KV-connector and multimodal parts: host memory and notes (issue 20).

The arithmetic is in :mod:`fitgate.sizing.lora`, :mod:`fitgate.sizing.offload` and
:mod:`fitgate.sizing.multimodal` (docs/lora-offload-multimodal.md); this module turns a plan's ranks
into the host-memory figures and the sentences the plan shows.
"""

from __future__ import annotations

import dataclasses

from fitgate.sizing import lora as lora_slots
from fitgate.sizing import multimodal, offload
from fitgate.sizing.model import ModelArchitecture
from fitgate.sizing.results import RankPlan
from fitgate.sizing.serving import ResolvedServing
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.versions import parse_version


def host_memory(arch: ModelArchitecture, rs: ResolvedServing, ranks: tuple[RankPlan, ...]) -> offload.HostMemory | None:
    """Host memory one replica's engine holds: offloaded weights, KV offload buffers, caches."""
    tp = rs.tensor_parallel_size
    weights = tp * sum(r.offloaded_bytes for r in ranks)
    kv_offload = (rs.kv_offloading_bytes or 0) if rs.kv_offloading_backend == "native" else 0
    nixl = 0
    if rs.kv_connector in offload.NIXL_CONNECTORS and rs.kv_buffer_device == "cpu":
        nixl = tp * sum(r.num_blocks * r.layout.bytes_per_block for r in ranks)  # a host copy of every rank's KV
    # one copy in the API server and one in the engine core (config/multimodal.py 0.33.0 L357-368)
    mm = 2 * rs.mm_processor_cache_bytes
    cpu_loras = 0
    if rs.lora is not None:
        # every worker keeps up to max_cpu_loras whole (unsharded) adapters in its CPU cache
        # (lora/worker_manager.py 0.33.0 L175-186, model_manager.py L66-77): at most max_lora_rank each
        whole = lora_slots.lora_bytes(
            arch,
            dataclasses.replace(rs.lora, max_loras=1, fully_sharded=False),
            layers=range(arch.num_layers),
            first_stage=True,
            last_stage=True,
            tp=1,
            max_num_batched_tokens=1,
            targets=rs.lora_target_modules,
        )
        cpu_loras = tp * rs.pipeline_parallel_size * rs.lora.max_cpu_loras * whole.total_bytes
    host = offload.HostMemory(weights, kv_offload, nixl, mm, cpu_loras)
    return host if host.total_bytes else None


def _tower_built(arch: ModelArchitecture, rs: ResolvedServing) -> bool:
    """Whether vLLM builds the vision tower (hunt42 F5; multimodal.tower_built): no encoder pass to size without it."""
    return multimodal.tower_built(arch.architecture, parse_version(rs.vllm_version), rs.limit_mm_per_prompt)


def notes(
    arch: ModelArchitecture,
    rs: ResolvedServing,
    ranks: tuple[RankPlan, ...],
    worst: RankPlan,
    host: offload.HostMemory | None,
) -> tuple[str, ...]:
    """What the plan says about LoRA slots, offloaded weights, KV connectors, the encoder and host memory."""
    notes: list[str] = []
    if rs.lora is not None and worst.lora is not None:
        lb = worst.lora
        notes.append(
            f"LoRA: {rs.lora.max_loras} adapter slot(s) of rank {rs.lora.max_lora_rank} take "
            f"{fmt_gib(lb.total_bytes)} per GPU (attention {fmt_gib(lb.attention_bytes)}, MLP {fmt_gib(lb.mlp_bytes)}, "
            f"experts {fmt_gib(lb.experts_bytes)}, embedding {fmt_gib(lb.embedding_bytes)}, LM head "
            f"{fmt_gib(lb.lm_head_bytes)}), counted with the weights; CUDA graphs are captured twice "
            "(without and with adapters)"
        )
        uncounted = sorted({name for r in ranks if r.lora is not None for name in r.lora.uncounted})
        if uncounted:
            notes.append(
                "LoRA slots of " + ", ".join(uncounted) + " layers are not counted (fitgate sizes LoRA on softmax "
                "attention and MLP / MoE layers): the KV pool is overestimated"
            )
        known = {name for names in lora_slots.TARGETS.values() for name in names}
        unknown = sorted(set(rs.lora_target_modules or ()) - known)
        if unknown:
            notes.append("--lora-target-modules " + ", ".join(unknown) + ": not sized by fitgate (no slots counted)")
    if rs.cpu_offload_bytes:
        asked = rs.cpu_offload_bytes
        got = worst.offloaded_bytes
        notes.append(
            f"--cpu-offload-gb: {fmt_gib(got)} of decoder weights per GPU live in pinned host memory"
            + (f" (all of them: {fmt_gib(asked)} was asked)" if got < asked else "")
            + "; vLLM offloads whole parameters, so up to one parameter more may move"
        )
    version = parse_version(rs.vllm_version) if rs.vllm_version else None
    notes.extend(offload.connector_notes(rs.kv_connector, rs.kv_role, arch.windowed_attention, arch.has_state, version))
    if rs.kv_offloading_bytes is not None and rs.kv_offloading_backend == "lmcache":
        notes.append("--kv-offloading-backend lmcache: the KV store lives in a separate LMCache server process")
    enc = ranks[0].encoder
    if enc is not None and enc.items:
        notes.append(
            f"multimodal: the encoder is profiled with {enc.items} {enc.modality} item(s) of {enc.tokens_per_item} "
            f"tokens (budget {enc.budget_tokens}): vision activations of at least {fmt_gib(enc.forward_bytes)}, and "
            f"{fmt_gib(enc.outputs_bytes)} of encoder outputs held through the decoder pass"
        )
    elif arch.vision is not None and rs.mm_skip_profiling:
        notes.append("--skip-mm-profiling: vLLM leaves the encoder out of its profile (not in the KV budget)")
    elif arch.vision is not None and enc is None and _tower_built(arch, rs):
        notes.append(
            f"multimodal: the encoder profiling pass of {arch.architecture} is not sized (fitgate knows the item "
            "sizes of Qwen2/2.5/3-VL, Qwen3.5 / 3.6 and Gemma 3 only): the activation peak can be several GiB higher"
        )
    host_note = offload.host_memory_note(host) if host is not None else None
    if host_note:
        notes.append(host_note)
    return tuple(notes)
