"""vLLM 0.34's extensible KV cache: the pool is measured after warm-up and CUDA-graph capture.

From the 0.34.0 wheel (``pip download --no-deps vllm==0.34.0``; file:line of that wheel):

1. ``determine_available_memory`` still profiles as 0.33 does and returns
   ``requested - non_kv - cudagraph_estimate`` (v1/worker/gpu_worker.py L719-781); the engine turns
   it into ``num_blocks``, which with the extensible cache is only the *reserved capacity*
   (v1/engine/core.py L380-383): address space, not memory.
2. ``initialize_from_config`` seeds ``reserved_headroom_bytes`` with ``peak_activation_memory``
   = ``transient_peak_headroom + cudagraph_memory_estimate`` (gpu_worker.py L771-774, L944-947); the
   estimate is 0 here: the V2 runner's ``profile_cudagraph_memory`` returns 0 when the extensible cache
   is on (v1/worker/gpu/model_runner.py L1121-1125, "measures the capture footprint after warmup").
3. ``compile_or_warm_up_model`` runs the warm-up steps, records their transient peak
   (``record_transient_peak``: max of the seed and ``peak - current`` allocated,
   extensible_kv_cache.py L268-279), captures the CUDA graphs, warms up the sampler and calls
   ``measure_kv_cache_blocks`` (gpu_worker.py L1023-1244), min across ranks.
4. ``measure_kv_cache_bytes`` (extensible_kv_cache.py L592-618)::

       non_kv_used = init_free_memory - free_memory - committed_bytes
       headroom    = free_memory + committed_bytes
       margin      = max(1 GiB (3 GiB ROCm), int(transient_peak_bytes * 0.75))
       available   = min(requested_memory - non_kv_used, headroom - margin)
       available  -= max(transient_peak_bytes, torch_reserve_growth_bytes)

   and ``blocks_within`` (L313-318) keeps the most blocks whose granule-rounded footprint fits
   (each segment rounded up to the commit granule, at least 2 MiB: utils/extensible_tensor.py L28-31).
5. ``finalize_extensible_kv_cache`` takes ``min(measured, capacity)`` (v1/core/kv_cache_planning.py
   L1878-1884) and ``shrink_kv_cache_configs`` re-checks one ``max_model_len`` request against
   ``(num_blocks - 1) x bytes_per_block`` (L1827-1862): the start-up error of 0.33, after warm-up.

In fitgate's terms (``init_free_memory = total - pre_snapshot``, what lives before vLLM's start
snapshot; the resident memory after capture is weights + non-torch + persistent MoE workspace + the
graph pool; the transient peak is the profiled transient: the activation peak less the persistent
MoE workspace; warm-up steps that peak higher, e.g. spec-decode drafts, are not modelled)::

    available = min(requested - resident, total - pre_snapshot - resident - margin) - transient

With the default gpu_memory_utilization of 1.0 the second term binds.
``torch_reserve_growth_bytes`` (allocator fragmentation over the sizing steps) is not modelled (0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fitgate.sizing.units import GiB, MiB

#: ``KV_CACHE_MARGIN_FLOOR_BYTES`` (extensible_kv_cache.py 0.34.0 L64): 1 GiB on CUDA, 3 GiB on ROCm
#: ("ROCr also maps kernel scratch outside the allocator when a kernel first needs it", L59-63).
MARGIN_FLOOR_BYTES = 1 * GiB
ROCM_MARGIN_FLOOR_BYTES = 3 * GiB
#: ``KV_CACHE_MARGIN_FRACTION`` (extensible_kv_cache.py 0.34.0 L65).
MARGIN_FRACTION = 0.75
#: The commit granule: the driver's VMM granularity, floored at 2 MiB (utils/extensible_tensor.py 0.34.0
#: L28-31; CUDA reports 2 MiB on current GPUs).
GRANULE_BYTES = 2 * MiB


@dataclass(frozen=True)
class MeasuredKV:
    """What ``measure_kv_cache_bytes`` keeps for the KV cache on one worker, and why.

    Attributes:
        available_bytes: The bytes the cache may occupy (0 at worst).
        resident_bytes: ``non_kv_used``: everything resident after warm-up and capture.
        transient_bytes: The transient peak kept free in full.
        margin_bytes: ``max(1 GiB (3 GiB on ROCm), 0.75 x transient)``, kept free below the device headroom.
        device_bound: The device headroom (``free - margin``) binds, not the requested budget.
        short_bytes: How far the non-KV memory alone is over what the cache may take (0 when it fits; hunt98 F1).
    """

    available_bytes: int
    resident_bytes: int
    transient_bytes: int
    margin_bytes: int
    device_bound: bool
    short_bytes: int = 0


def measure_kv_bytes(
    *,
    requested_bytes: int,
    init_free_bytes: int,
    resident_bytes: int,
    transient_bytes: int,
    margin_floor_bytes: int = MARGIN_FLOOR_BYTES,
) -> MeasuredKV:
    """``measure_kv_cache_bytes`` (extensible_kv_cache.py 0.34.0 L592-618) on fitgate's terms.

    ``free_memory + committed_bytes`` after warm-up is ``init_free - resident``: the committed KV
    prefix is counted back in, so only what is not KV remains.
    """
    margin = max(margin_floor_bytes, int(transient_bytes * MARGIN_FRACTION))
    by_budget = requested_bytes - resident_bytes
    by_device = init_free_bytes - resident_bytes - margin
    available = min(by_budget, by_device) - transient_bytes
    return MeasuredKV(
        max(available, 0), resident_bytes, transient_bytes, margin, by_device < by_budget, max(0, -available)
    )


def blocks_within(num_bytes: int, segment_strides: Sequence[int], capacity_blocks: int) -> int:
    """``ExtensibleKVCache.blocks_within`` (extensible_kv_cache.py 0.34.0 L313-318).

    The most blocks whose footprint, each segment's ``blocks x stride`` rounded up to the granule,
    fits in ``num_bytes``; never above the reserved capacity.

    vLLM steps down one block at a time from ``num_bytes // per_block``; the footprint never decreases
    with the block count, so the first count that fits from above is the largest that fits, found here
    by bisection over the at most ``len(segments) x granule / per_block + 1`` counts vLLM may step
    through, with equal strides summed once (a plan's 64 equal per-layer segments cost one term, not
    64 per step: issue 23, 25 % of a cold reconcile). Same answer, bit for bit.
    """
    per_block = sum(segment_strides)
    if num_bytes <= 0 or per_block <= 0:
        return 0
    blocks = min(num_bytes // per_block, capacity_blocks)
    strides = _stride_counts(segment_strides)
    if blocks <= 0 or _footprint(blocks, strides) <= num_bytes:
        return max(blocks, 0)
    # Rounding costs less than one granule per segment: ``lo`` blocks always fit (or lo is 0).
    lo = max(0, min(blocks - 1, (num_bytes - len(segment_strides) * GRANULE_BYTES) // per_block))
    if lo > 0 and _footprint(lo, strides) > num_bytes:  # never, by the bound above; vLLM's loop, to be sure
        lo = 0
    hi = blocks  # does not fit
    while hi - lo > 1:  # invariant: lo fits (or is 0), hi does not
        mid = (lo + hi) // 2
        if _footprint(mid, strides) <= num_bytes:
            lo = mid
        else:
            hi = mid
    return lo


def _stride_counts(strides: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Each distinct segment stride with how many segments have it."""
    counts: dict[int, int] = {}
    for stride in strides:
        counts[stride] = counts.get(stride, 0) + 1
    return tuple(counts.items())


def _footprint(blocks: int, strides: Sequence[tuple[int, int]]) -> int:
    """``physical_bytes_for`` (extensible_kv_cache.py 0.34.0 L305-311), equal strides counted once."""
    return sum(count * (-(-blocks * stride // GRANULE_BYTES) * GRANULE_BYTES) for stride, count in strides)
