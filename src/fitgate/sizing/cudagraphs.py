"""vLLM's CUDA-graph memory estimate, the figure it subtracts from the KV budget from 0.20.

What vLLM does (read in every wheel from 0.18.0 to 0.33.0; ``profile_cudagraph_memory`` is byte-identical
in 0.18.0-0.21.0, v1/worker/gpu_model_runner.py 0.18.0 L5593, 0.19.0 L5862, 0.20.0 L5949-6048, 0.21.0
L6049-6148; later releases add encoder graphs (opt-in, 0.23.0 L6376-6523), breakable wrappers (0.22.0
L6265) and ROCm's capture stream (0.26.0 L6576-6743), same arithmetic up to 0.33.0 L6268-6415):

* It allocates a minimal KV cache, then for each CUDA-graph mode (PIECEWISE, then FULL; sizes largest
  first, cudagraph_dispatcher.py 0.20.0 L325-349) captures only the two largest batch sizes and
  reads ``torch.cuda.mem_get_info`` around each: ``first`` (the pool's first allocations) and
  ``per_graph = max(second, 1 MiB)``. The estimate is
  ``max(first over modes) + sum over modes of (graphs in the mode - 1) x per_graph``
  (0.20.0 L5996-6041, 0.33.0 L6356-6408). PIECEWISE and FULL share one pool, hence the max.
* From 0.29 every model runs on the V2 model runner (versions.py), whose estimate captures every
  PIECEWISE graph for real and extrapolates only FULL graphs from two samples the same way
  (v1/worker/gpu/cudagraph_utils.py 0.29.0 L718-800, 0.33.0 L922-1019; ``_MIN_PER_GRAPH_BYTES`` 1 MiB).
  No log of 0.29+ in hand prints the estimate, so fitgate keeps the V1 runner's structure there.

How many graphs (config/vllm.py ``_set_cudagraph_sizes``; dispatcher ``initialize_cudagraph_keys``):

* ``max_cudagraph_capture_size = min(2 x max_num_seqs x (1 + speculative tokens), 512)`` (0.20.0
  L1479-1481), 1024 instead of 512 on compute capability 10.x from 0.28 (0.28.0 L1937-1943,
  0.33.0 L2463-2470), gpt-oss 1024 whatever max_num_seqs is (models/config.py 0.20.0 L169, 0.33.0
  L559), then ``min(max_num_batched_tokens, that)``.
* Sizes: 1, 2, 4, then every 8 below 256, then every 16 up to the maximum (0.20.0 L1509-1524); from
  0.21 ``max_num_batched_tokens`` itself when it is within the maximum (0.21.0 L1580-1585, 0.28.0 L1984-1988);
  from 0.31 ``max_num_seqs`` itself (0.31.0 L2540, 0.33.0 L2550, L2601-2603).
* PIECEWISE captures every size; FULL (decode, the default ``FULL_AND_PIECEWISE``) the sizes up to
  ``max_num_seqs`` (cudagraph_dispatcher.py 0.20.0 L204-223, 0.33.0 L203-222).

What the source leaves open is what ``first`` and ``per_graph`` measure; fitgate fits them (see
:data:`PER_GRAPH_LAYER_BYTES`). vLLM's own tracker (issues #45178, #50780, #53013) reports the estimate
off the real pool by tens of percent both ways; the logs in hand agree (README, "CUDA-graph estimate").
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.units import MiB
from fitgate.sizing.versions import VllmAccounting

#: Bytes one more captured graph costs per decoder layer it runs (``per_graph`` / layers). Fitted with
#: the two ``first`` constants below (least sum of absolute errors, grid search in
#: ``benchmarks/cudagraphs.py --fit``) on the 44 estimates vLLM printed in the logs we hold: 35 of 0.19
#: (shared/calibration; the same code as 0.20-0.21) and 9 of 0.20-0.26 (public-2026.jsonl), repeated
#: runs of one model and graph set counted once. For scale: Qwen2.5-7B (28 layers) printed 0.61 GiB
#: with 51 + 51 graphs on 0.19 and 0.37 GiB with 35 + 19 on 0.22, 0.24 GiB / (48 x 28) = 0.18 MiB.
PER_GRAPH_LAYER_BYTES = 220 * 1024
#: ``first``: the largest capture's own pool, dense and mixture-of-experts models (fitted likewise;
#: MoE kernels allocate their workspaces in it). Qwen3.6-35B-A3B with one graph per mode printed
#: 0.43 GiB (vLLM 0.20, GB10), which is ``first`` alone.
FIRST_CAPTURE_BYTES = 100 * MiB
FIRST_CAPTURE_MOE_BYTES = 480 * MiB
#: vLLM's floor per extrapolated graph ("at least 1 MiB per graph for driver overhead").
MIN_PER_GRAPH_BYTES = MiB


@dataclass(frozen=True)
class GraphCounts:
    """How many CUDA graphs vLLM captures in each mode, and the largest size it captures."""

    piecewise: int
    full: int
    largest: int


def capture_sizes(
    accounting: VllmAccounting,
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    model_max_capture_size: int | None = None,
    compute_capability: str | None = None,
    decode_query_len: int = 1,
) -> tuple[int, ...]:
    """The batch sizes vLLM captures graphs for (``cudagraph_capture_sizes``), as its config computes them.

    ``decode_query_len``: 1 + draft tokens with speculative decoding (``uniform_decode_query_len``); the
    decode sizes 0.33 appends for it beyond the ceiling (config/vllm.py L2471-2500) are not modelled.
    """
    v = accounting.version
    if model_max_capture_size is not None:
        largest = model_max_capture_size
    else:
        blackwell_dc = v >= (0, 28, 0) and (compute_capability or "").split(".")[0] == "10"
        largest = min(2 * max_num_seqs * decode_query_len, 1024 if blackwell_dc else 512)
    ceiling = largest
    largest = min(max_num_batched_tokens, largest)
    sizes = [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    if v >= (0, 21, 0) and max_num_batched_tokens <= ceiling:
        sizes.append(max_num_batched_tokens)
    if v >= (0, 31, 0) and model_max_capture_size is None and max_num_seqs <= ceiling:
        sizes += [max_num_seqs] if max_num_seqs <= max_num_batched_tokens else []
    return tuple(sorted(set(sizes)))


def graph_counts(sizes: tuple[int, ...], max_num_seqs: int, decode_query_len: int = 1) -> GraphCounts:
    """PIECEWISE graphs for every size, FULL decode graphs for the decode sizes.

    Those are the sizes from ``decode_query_len`` up to ``max_num_seqs x decode_query_len``
    (cudagraph_dispatcher.py 0.33.0 L209-220).
    """
    top = max_num_seqs * decode_query_len
    return GraphCounts(
        piecewise=len(sizes),
        full=sum(1 for s in sizes if decode_query_len <= s <= top),
        largest=max(sizes, default=0),
    )


def cuda_graph_estimate_bytes(num_layers: int, moe: bool, counts: GraphCounts) -> int:
    """What ``profile_cudagraph_memory`` returns: ``first + (graphs - 1) x per_graph`` summed over modes.

    ``per_graph`` is :data:`PER_GRAPH_LAYER_BYTES` per layer (at least 1 MiB), ``first`` one of the
    two fitted constants; a mode with no graph adds nothing, and no graph at all costs nothing.
    """
    if counts.piecewise + counts.full == 0:
        return 0
    per_graph = max(PER_GRAPH_LAYER_BYTES * num_layers, MIN_PER_GRAPH_BYTES)
    first = FIRST_CAPTURE_MOE_BYTES if moe else FIRST_CAPTURE_BYTES
    extra = sum(max(n - 1, 0) for n in (counts.piecewise, counts.full))
    return first + extra * per_graph
