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
  fitgate keeps the V1 runner's structure there with a smaller cost per graph (:data:`V2_PER_GRAPH_SCALE`).

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

What the user can set (config/vllm.py 0.25.0 L1669-1828, ``_set_cudagraph_sizes``; compilation config
``cudagraph_mode``, cudagraph_dispatcher.py): ``--cudagraph-capture-sizes`` replaces the list (de-duplicated,
the sizes above ``max_num_batched_tokens`` dropped, L1736-1747); ``--max-cudagraph-capture-size`` replaces the
``2 x max_num_seqs`` ceiling (L1719-1728); ``cudagraph_mode`` picks which graphs are captured: NONE none (as
``--enforce-eager``, and ``-O0``), PIECEWISE every size piecewise, FULL every size as a full graph,
FULL_DECODE_ONLY full graphs of the decode sizes only, FULL_AND_PIECEWISE (the default since 0.11) both.
vLLM may lower a FULL mode to PIECEWISE for a backend without full-graph support (L1268-1318); fitgate counts
the mode as given, the larger count for a FULL mode.

What the source leaves open is what ``first`` and ``per_graph`` measure; fitgate fits them (see
:data:`PER_GRAPH_LAYER_BYTES`). vLLM's own tracker (issues #45178, #50780, #53013) reports the estimate
off the real pool by tens of percent both ways; the logs in hand agree (README, "CUDA-graph estimate").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from fitgate.sizing.jsonflags import expand_human_numbers, whole_number
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
#: The V2 model runner's cost per extra graph relative to :data:`PER_GRAPH_LAYER_BYTES`, from 0.29 where every model
#: runs on it. Fitted (the median) on the three estimates of 0.29-0.30 logs hunt184 found, each against fitgate's
#: V1 figure: 0.69 of 1.23 GiB (Qwen3.6-27B, RTX PRO 6000, 0.29.0, 256 sequences: scale 0.53), 0.37 of 0.73 GiB
#: (Qwen3-4B, RTX 5060 Ti, 0.29.0, vLLM's 0.7000 -> 0.6762 gmu line: 0.43), 0.55 of 0.77 GiB (Llama-3.1-8B, H100,
#: 0.30.0, 1024 sequences: 0.67); 0.5 leaves the last 0.11 GiB low (the miss side, never a denial) and the others
#: within 0.05 GiB. Where the pool is really smaller: the V2 runner captures the PIECEWISE graphs for real into one
#: pool and extrapolates only FULL ones (v1/worker/gpu/cudagraph_utils.py 0.29.0 L718-800).
V2_PER_GRAPH_SCALE = 0.5
V2_GRAPHS_SINCE = (0, 29, 0)
#: vLLM's floor per extrapolated graph ("at least 1 MiB per graph for driver overhead").
MIN_PER_GRAPH_BYTES = MiB


@dataclass(frozen=True)
class GraphCounts:
    """How many CUDA graphs vLLM captures in each mode, and the largest size it captures."""

    piecewise: int
    full: int
    largest: int


#: ``cudagraph_mode`` values (vllm/config/compilation.py ``CUDAGraphMode``), the default first.
CUDAGRAPH_MODES = ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "NONE")
#: The modes that capture full graphs (``CUDAGraphMode.has_full_cudagraphs``, config/compilation.py).
FULL_GRAPH_MODES = frozenset({"FULL_AND_PIECEWISE", "FULL", "FULL_DECODE_ONLY"})


def capture_sizes(
    accounting: VllmAccounting,
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    model_max_capture_size: int | None = None,
    compute_capability: str | None = None,
    decode_query_len: int = 1,
    given_sizes: tuple[int, ...] | None = None,
    given_max: int | None = None,
    interactivity: bool = False,
) -> tuple[int, ...]:
    """The batch sizes vLLM captures graphs for (``cudagraph_capture_sizes``), as its config computes them.

    ``decode_query_len``: 1 + draft tokens with speculative decoding (``uniform_decode_query_len``); the
    decode sizes ``n x query_len`` 0.33 adds up to the ceiling (config/vllm.py L2541-2547) are not modelled.
    ``given_sizes`` / ``given_max``: ``--cudagraph-capture-sizes`` / ``--max-cudagraph-capture-size``.
    ``interactivity``: ``--performance-mode interactivity`` (0.17+) captures every size from 1 to 32 first
    (config/vllm.py 0.17.0 L1404-1408, 0.25.0 L1749-1753).
    """
    if given_sizes is not None:
        return tuple(sorted({s for s in given_sizes if s <= max_num_batched_tokens}))
    v = accounting.version
    if given_max is not None:
        largest = given_max
    elif model_max_capture_size is not None:
        largest = model_max_capture_size
    else:
        blackwell_dc = v >= (0, 28, 0) and (compute_capability or "").split(".")[0] == "10"
        largest = min(2 * max_num_seqs * decode_query_len, 1024 if blackwell_dc else 512)
    ceiling = largest
    largest = min(max_num_batched_tokens, largest)
    sizes = list(range(1, min(largest, 32) + 1)) if interactivity else [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    if v >= (0, 21, 0) and max_num_batched_tokens <= ceiling:
        sizes.append(max_num_batched_tokens)
    if v >= (0, 31, 0) and model_max_capture_size is None and max_num_seqs <= ceiling:
        sizes += [max_num_seqs] if max_num_seqs <= max_num_batched_tokens else []
    return tuple(sorted(set(sizes)))


def graph_counts(
    sizes: tuple[int, ...], max_num_seqs: int, decode_query_len: int = 1, mode: str = "FULL_AND_PIECEWISE"
) -> GraphCounts:
    """By ``mode``: PIECEWISE graphs for every size, FULL decode graphs for the decode sizes (the default).

    The decode sizes are those from ``decode_query_len`` up to ``max_num_seqs x decode_query_len``
    (cudagraph_dispatcher.py 0.33.0 L209-220); FULL captures every size as a full graph, PIECEWISE and
    FULL_DECODE_ONLY one kind only, NONE nothing.
    """
    top = max_num_seqs * decode_query_len
    decode = sum(1 for s in sizes if decode_query_len <= s <= top)
    piecewise = len(sizes) if mode in ("FULL_AND_PIECEWISE", "PIECEWISE") else 0
    full = {"FULL_AND_PIECEWISE": decode, "FULL_DECODE_ONLY": decode, "FULL": len(sizes)}.get(mode, 0)
    return GraphCounts(piecewise=piecewise, full=full, largest=max(sizes, default=0) if piecewise or full else 0)


def cuda_graph_estimate_bytes(num_layers: int, moe: bool, counts: GraphCounts, *, v2: bool = False) -> int:
    """What ``profile_cudagraph_memory`` returns: ``first + (graphs - 1) x per_graph`` summed over modes.

    ``per_graph`` is :data:`PER_GRAPH_LAYER_BYTES` per layer (at least 1 MiB; ``v2``: the V2 runner's share of it,
    :data:`V2_PER_GRAPH_SCALE`), ``first`` one of the two fitted constants; a mode with no graph adds nothing, and
    no graph at all costs nothing.
    """
    if counts.piecewise + counts.full == 0:
        return 0
    layer_bytes = int(PER_GRAPH_LAYER_BYTES * (V2_PER_GRAPH_SCALE if v2 else 1.0))
    per_graph = max(layer_bytes * num_layers, MIN_PER_GRAPH_BYTES)
    first = FIRST_CAPTURE_MOE_BYTES if moe else FIRST_CAPTURE_BYTES
    extra = sum(max(n - 1, 0) for n in (counts.piecewise, counts.full))
    return first + extra * per_graph


@dataclass(frozen=True)
class GraphFlags:
    """The CUDA-graph settings of an engine command line (None: vLLM's default) and what was not read."""

    mode: str | None = None
    capture_sizes: tuple[int, ...] | None = None
    max_capture_size: int | None = None
    #: What was not read, each as (the flag or key, its value, what it should be): sized at vLLM's default.
    problems: tuple[tuple[str, str, str], ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        """The problems as a workload's notes."""
        return tuple(f"{key} {value!r}: expected {want}; sized at vLLM's default" for key, value, want in self.problems)


#: At most this many capture sizes (vLLM sets no bound; its default list has 67 at most), each at most this large.
MAX_CAPTURE_SIZES = 1024
MAX_CAPTURE_SIZE = 1 << 24


#: ``--optimization-level`` / ``-O<n>`` and the ``cudagraph_mode`` each level sets (config/vllm.py 0.25.0
#: ``OPTIMIZATION_LEVEL_00`` .. ``_03`` L200-275; the levels exist from 0.12): a mode given explicitly wins.
_LEVEL_MODES = {"0": "NONE", "1": "PIECEWISE", "2": "FULL_AND_PIECEWISE", "3": "FULL_AND_PIECEWISE"}
_GRAPH_KEYS = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size")


def _sizes(value: object) -> tuple[int, ...] | None:
    if isinstance(value, str):
        text = value.strip().strip("[]")
        words = [w for w in re.split(r"[,\s]+", text) if w]
        if len(words) > MAX_CAPTURE_SIZES or not all(re.fullmatch(r"\d{1,9}", w) for w in words):
            return None
        value = [int(w) for w in words]
    if not isinstance(value, list) or not 0 < len(value) <= MAX_CAPTURE_SIZES:
        return None
    sizes = tuple(whole_number(v) for v in value)  # `[1, 2, "8"]`: vLLM's lax int (hunt90 F1)
    if all(s is not None and 0 < s <= MAX_CAPTURE_SIZE for s in sizes):
        return tuple(s for s in sizes if s is not None)
    return None


def _whole(value: object) -> int | None:
    n = whole_number(value)
    return n if n is not None and 0 < n <= MAX_CAPTURE_SIZE else None


#: ``CUDAGraphMode``'s plain values (config/compilation.py 0.34.0 L129-139: NONE = 0, PIECEWISE = 1, FULL = 2), which
#: pydantic reads as the enum when the JSON gives a number.
_MODE_VALUES = {"0": "NONE", "1": "PIECEWISE", "2": "FULL"}


def graph_flags(flags: Mapping[str, str]) -> GraphFlags:
    """The CUDA-graph settings of an engine's flags, as vLLM's engine args read them.

    ``--compilation-config`` (JSON or ``.key=value``), ``--cudagraph-capture-sizes``,
    ``--max-cudagraph-capture-size`` and ``-O<n>`` (arg_utils.py 0.25.0 L1478-1482, L1534, L2303-2318;
    utils/argparse_utils.py L322-333).

    A value fitgate cannot read is named in the notes and left at vLLM's default, never an error: the
    default captures the most graphs, so it can only over-count.
    """
    found: dict[str, object] = {}
    problems: list[tuple[str, str, str]] = []
    text = flags.get("--compilation-config")
    if text is not None and not re.fullmatch(r"\s*\d\s*", text):
        try:
            data = json.loads(expand_human_numbers(text)) if len(text) <= 65536 else None
        except (ValueError, RecursionError):  # ValueError: also a number past int()'s 4300 digits (hunt83 F3)
            data = None
        if isinstance(data, dict):
            found.update({k: data[k] for k in _GRAPH_KEYS if k in data})
        else:
            problems.append(("--compilation-config", text[:80], "a JSON object of at most 65536 bytes"))
    for key in _GRAPH_KEYS:
        for flag in (f"--compilation-config.{key}", f"--compilation-config.{key.replace('_', '-')}"):
            if flag in flags:
                found[key] = flags[flag]
    if "--cudagraph-capture-sizes" in flags:
        found["cudagraph_capture_sizes"] = flags["--cudagraph-capture-sizes"]
    if "--max-cudagraph-capture-size" in flags:
        found["max_cudagraph_capture_size"] = flags["--max-cudagraph-capture-size"]
    mode = found.get("cudagraph_mode")
    if isinstance(mode, int | float) and (n := whole_number(mode)) is not None and str(n) in _MODE_VALUES:
        mode = _MODE_VALUES[str(n)]  # hunt90 F3, hunt92 F3: the enum by value, `2`, `2.0` (and `true`: 1 == True)
    elif isinstance(mode, str) and mode.strip() in _MODE_VALUES:
        mode = _MODE_VALUES[mode.strip()]  # `--compilation-config.cudagraph_mode=2` (vLLM's JSON string "2" fails)
    if mode is None and flags.get("--optimization-level", "").strip() in _LEVEL_MODES:
        mode = _LEVEL_MODES[flags["--optimization-level"].strip()]
    if mode is not None and str(mode).strip().upper() not in CUDAGRAPH_MODES:
        problems.append(("cudagraph_mode", str(mode)[:40], "one of " + ", ".join(CUDAGRAPH_MODES)))
        mode = None
    sizes = _sizes(found["cudagraph_capture_sizes"]) if "cudagraph_capture_sizes" in found else None
    if "cudagraph_capture_sizes" in found and sizes is None:
        value = str(found["cudagraph_capture_sizes"])[:80]
        problems.append(
            ("cudagraph_capture_sizes", value, f"1 to {MAX_CAPTURE_SIZES} sizes from 1 to {MAX_CAPTURE_SIZE}")
        )
    largest = _whole(found["max_cudagraph_capture_size"]) if "max_cudagraph_capture_size" in found else None
    if "max_cudagraph_capture_size" in found and largest is None:
        value = str(found["max_cudagraph_capture_size"])[:40]
        problems.append(("max_cudagraph_capture_size", value, f"a whole number from 1 to {MAX_CAPTURE_SIZE}"))
    return GraphFlags(str(mode).strip().upper() if mode is not None else None, sizes, largest, tuple(problems))


#: From 0.34 on compute capability 10.x (SM100 family), with neither deprecated size field set, steps that carry a
#: prompt replay PIECEWISE graphs up to ``min(8192, max_num_batched_tokens)`` tokens and decode steps FULL graphs up
#: to ``max_num_seqs`` requests within 8192 tokens (config/vllm.py 0.34.0 L2604-2611 ``wide_defaults``, L2636-2660;
#: config/compilation.py L89-99 ``prefill_cudagraph_capture_grid``; absent in 0.33.0).
WIDE_GRAPHS_SINCE = (0, 34, 0)
WIDE_GRAPH_TOKENS = 8192
#: V0 replayed graphs for decode batches only, of up to 256 requests through 0.5.x (worker/model_runner.py 0.5.5
#: L64-66) and up to ``max_num_seqs`` rounded up to 8 from 0.6.1 (0.6.3 L73-75, L985 ``_get_max_graph_batch_size``;
#: 0.7.3 config.py L3369-3391), and none once a sequence is past ``max_seq_len_to_capture`` (8192 by default,
#: 0.7.3 worker/model_runner.py L762-770, arg_utils.py L137): ``performance.work`` applies that one per context.
V0_GRAPH_BATCH = 256
V0_GRAPH_TO_SEQS_SINCE = (0, 6, 1)
V0_MAX_SEQ_LEN_TO_CAPTURE = 8192
#: V1 before 0.10 captured up to 512 tokens whatever ``max_num_seqs`` was (0.8.5 config.py L4033-4036; 0.9.2
#: ``cuda_graph_sizes`` [512], L2133); ``min(2 x max_num_seqs, 512)`` from 0.10.0 (config.py L2451-2456).
SEQS_BOUND_SINCE = (0, 10, 0)


def graph_token_limits(
    accounting: VllmAccounting,
    *,
    mode: str,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    model_max_capture_size: int | None = None,
    compute_capability: str | None = None,
    decode_query_len: int = 1,
    given_sizes: tuple[int, ...] | None = None,
    given_max: int | None = None,
    interactivity: bool = False,
) -> tuple[int, int]:
    """(decode-only, prompt-carrying): the most tokens a step may carry and still replay a CUDA graph.

    A step above its limit runs eagerly (step_time.EAGER_STEP): the dispatcher finds no captured size for it
    (v1/cudagraph_dispatcher.py 0.17.0 L268-275; v1/worker/gpu/cudagraph_utils.py 0.34.0 L558-602). ``mode`` is the
    resolved ``cudagraph_mode``: NONE captures nothing, FULL_DECODE_ONLY no graph for a step with a prompt.
    """
    if mode == "NONE":
        return 0, 0
    if accounting.engine == "V0":
        if accounting.version >= V0_GRAPH_TO_SEQS_SINCE:
            return -(-max_num_seqs // 8) * 8, 0
        return min(V0_GRAPH_BATCH, max_num_seqs), 0
    defaults = given_sizes is None and given_max is None
    if accounting.version < SEQS_BOUND_SINCE and defaults:
        largest = min(512, max_num_batched_tokens)
    else:
        largest = max(
            capture_sizes(
                accounting,
                max_num_seqs=max_num_seqs,
                max_num_batched_tokens=max_num_batched_tokens,
                model_max_capture_size=model_max_capture_size,
                compute_capability=compute_capability,
                decode_query_len=decode_query_len,
                given_sizes=given_sizes,
                given_max=given_max,
                interactivity=interactivity,
            ),
            default=0,
        )
    decode, prompt = largest, largest
    sm100 = (compute_capability or "").split(".")[0] == "10"
    if accounting.version >= WIDE_GRAPHS_SINCE and sm100 and defaults:
        decode = max(largest, min(WIDE_GRAPH_TOKENS, max_num_seqs * decode_query_len))
        prompt = max(largest, min(WIDE_GRAPH_TOKENS, max_num_batched_tokens))
    return decode, 0 if mode == "FULL_DECODE_ONLY" else prompt


#: Pooling models capture no full CUDA graph: vLLM lowers the mode to PIECEWISE ("Pooling models do not support full
#: cudagraphs"), in 0.11.0 the default only (config/__init__.py 0.11.0 L361-374), from 0.11.1 any mode with full graphs
#: (config/vllm.py 0.11.1 L484-490, 0.11.2 L486-490, 0.20.0 L1040-1045, 0.34.0 L1863-1873; ``has_full_cudagraphs``:
#: FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE). hunt146 F1: from 0.20, where the graph estimate comes out of the
#: budget, a small-gmu embedder beside a generator was charged ~0.2 GiB of full graphs it never captures.
POOLING_PIECEWISE_SINCE = (0, 11, 0)
POOLING_ANY_MODE_PIECEWISE_SINCE = (0, 11, 1)


def pooling_graph_mode(mode: str, given: str | None, runner: str, accounting: VllmAccounting) -> str:
    """``mode`` as vLLM resolves it for ``runner``: PIECEWISE for a pooling model where it would capture full graphs."""
    since = POOLING_PIECEWISE_SINCE if given is None else POOLING_ANY_MODE_PIECEWISE_SINCE
    if runner == "pooling" and mode in FULL_GRAPH_MODES and accounting.version >= since:
        return "PIECEWISE"
    return mode
