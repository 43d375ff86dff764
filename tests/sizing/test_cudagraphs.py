"""vLLM's CUDA-graph estimate by release: capture sizes from its config, then first + (graphs - 1) x per-graph.

Graph counts are checked against what vLLM printed ("Profiling CUDA graph memory: ...") in the public
logs of benchmarks/calibration/public-2026.jsonl (each case cites its source).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fitgate.sizing.cudagraphs import (
    FIRST_CAPTURE_BYTES,
    FIRST_CAPTURE_MOE_BYTES,
    PER_GRAPH_LAYER_BYTES,
    GraphCounts,
    capture_sizes,
    cuda_graph_estimate_bytes,
    graph_counts,
    graph_token_limits,
)
from fitgate.sizing.gpus import lookup_gpu
from fitgate.sizing.plan import ServingConfig, plan
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import accounting_for
from tests.conftest import model

ROOT = Path(__file__).resolve().parents[2]


def counts(version: str, seqs: int, mbt: int, **kw: object) -> GraphCounts:
    sizes = capture_sizes(accounting_for(version), max_num_seqs=seqs, max_num_batched_tokens=mbt, **kw)  # type: ignore[arg-type]
    return graph_counts(sizes, seqs)


@pytest.mark.parametrize(
    ("version", "seqs", "mbt", "expected"),
    [
        # largest = min(2 x 256, 512) = 512: 1, 2, 4 + 8..248 (31) + 256..512 by 16 (17) = 51 PIECEWISE;
        # FULL up to 256: 3 + 31 + 1 = 35
        ("0.20.0", 256, 8192, GraphCounts(51, 35, 512)),
        # the 0.19 H100 runs (max_num_seqs 1024): 51 and 51
        ("0.19.0", 1024, 8192, GraphCounts(51, 51, 512)),
        # printed by vLLM 0.23.0, Gemma 4 31B, --max-num-seqs 20: "PIECEWISE=8 (largest=40), FULL=5 (largest=16)"
        ("0.23.0", 20, 8192, GraphCounts(8, 5, 40)),
        # printed by vLLM 0.22.0, Qwen2.5-7B, 128 seqs, 2048 tokens: "PIECEWISE=35 (largest=256), FULL=19 (largest=128)"
        ("0.22.0", 128, 2048, GraphCounts(35, 19, 256)),
        # --max-num-batched-tokens 100 caps the largest at 100: 1, 2, 4, 8..96 = 15 sizes; from 0.21
        # 100 itself is captured too (config/vllm.py 0.21.0 L1580-1585)
        ("0.20.0", 256, 100, GraphCounts(15, 15, 96)),
        ("0.21.0", 256, 100, GraphCounts(16, 16, 100)),
        # 100 seqs: largest 200, 1, 2, 4 + 8..200 = 28 sizes, FULL up to 100: 15; from 0.31 100 itself
        # is a size too (0.31.0 L2540): 29 and 16
        ("0.30.0", 100, 8192, GraphCounts(28, 15, 200)),
        ("0.31.0", 100, 8192, GraphCounts(29, 16, 200)),
    ],
)
def test_graph_counts_by_release(version: str, seqs: int, mbt: int, expected: GraphCounts) -> None:
    assert counts(version, seqs, mbt) == expected


def test_blackwell_datacenter_and_gpt_oss_raise_the_largest_size_to_1024() -> None:
    # 0.28: 1024 on compute capability 10.x (config/vllm.py 0.28.0 L1937-1943): 3 + 31 + 256..1024 by 16
    # (49) = 83; not on 0.27, not on Hopper or the RTX 5090 (12.0)
    assert counts("0.28.0", 1024, 8192, compute_capability="10.0").piecewise == 83
    assert counts("0.27.0", 1024, 8192, compute_capability="10.0").piecewise == 51
    assert counts("0.28.0", 1024, 8192, compute_capability="9.0").piecewise == 51
    assert counts("0.28.0", 1024, 8192, compute_capability="12.0").piecewise == 51
    # gpt-oss sets 1024 whatever the release and max_num_seqs (models/config.py 0.20.0 L169)
    assert counts("0.20.0", 256, 8192, model_max_capture_size=1024) == GraphCounts(83, 35, 1024)


def test_estimate_arithmetic() -> None:
    # Qwen2.5-7B, 28 layers, 35 PIECEWISE + 19 FULL graphs (vLLM 0.22 printed 0.37 GiB):
    # 100 MiB + (34 + 18) x 28 x 220 KiB = 104,857,600 + 328,007,680 = 432,865,280 B (0.40 GiB)
    assert PER_GRAPH_LAYER_BYTES == 225_280  # 220 KiB
    assert FIRST_CAPTURE_BYTES == 104_857_600  # 100 MiB
    assert cuda_graph_estimate_bytes(28, False, GraphCounts(35, 19, 256)) == 432_865_280
    # one graph per mode (vLLM 0.20 on GB10 printed 0.43 GiB for Qwen3.6-35B-A3B): the MoE first capture only
    assert cuda_graph_estimate_bytes(40, True, GraphCounts(1, 1, 1)) == FIRST_CAPTURE_MOE_BYTES == 480 * MiB
    # vLLM's floor: at least 1 MiB per extrapolated graph (1 layer x 220 KiB < 1 MiB): 100 MiB + 2 x 1 MiB
    assert cuda_graph_estimate_bytes(1, False, GraphCounts(2, 2, 2)) == 102 * MiB
    # no graph, no estimate (cudagraph_mode NONE returns 0)
    assert cuda_graph_estimate_bytes(80, True, GraphCounts(0, 0, 0)) == 0


def test_plan_deducts_the_estimate_for_its_own_graph_count() -> None:
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    h100 = lookup_gpu("H100")
    cfg = ServingConfig(max_model_len=8192, gpu_memory_utilization=0.9, vllm_version="0.20.0")
    few = plan(m, h100, replace(cfg, max_num_seqs=4)).per_gpu
    many = plan(m, h100, replace(cfg, max_num_seqs=256)).per_gpu
    # 4 seqs: sizes 1, 2, 4, 8 -> 4 PIECEWISE + 3 FULL graphs: 100 MiB + 5 x 32 x 220 KiB = 140,902,400 B
    assert few.cuda_graph_bytes == 100 * MiB + 5 * 32 * 220 * 1024 == 140_902_400
    # 256 seqs: 51 + 35 graphs: 100 MiB + 84 x 32 x 220 KiB = 710,410,240 B
    assert many.cuda_graph_bytes == 100 * MiB + 84 * 32 * 220 * 1024 == 710_410_240
    # 0.19 does not deduct; its graphs (captured outside the budget) keep the pool-size formula:
    # 0.35 GiB + 32 x 17 MiB = 946,216,140 B
    old = plan(m, h100, replace(cfg, vllm_version="0.19.0", max_num_seqs=4)).per_gpu
    assert not old.cuda_graphs_in_budget
    assert old.cuda_graph_bytes == int(0.35 * 1024**3) + 32 * 17 * MiB


def test_printed_estimates_of_020_and_later_are_matched_better_than_before(tmp_path: Path) -> None:
    # benchmarks/cudagraphs.py on the public logs alone (an empty calibration set): the 9 estimates
    # vLLM 0.20-0.26 printed. Median |error| 0.10 GiB (0.76 GiB with the 0.19-fitted formula).
    spec = importlib.util.spec_from_file_location("fitgate_cudagraphs", ROOT / "benchmarks" / "cudagraphs.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    (tmp_path / "cases.jsonl").write_text("")
    points, _ = bench.collect(tmp_path)
    # the public set also holds 0.19 logs now (issue 20's VLM start-ups, never fitted): 0.20 and later only
    points = [p for p in points if tuple(int(x) for x in p.release.split(".")) >= (0, 20)]
    assert len(points) == 9
    new = statistics.median(abs(bench.new_bytes(p) / GiB - p.printed_gib) for p in points)
    old = statistics.median(abs(bench.old_bytes(p) / GiB - p.printed_gib) for p in points)
    assert new <= 0.12 < 0.7 <= old


def test_graph_token_limits_follow_each_release() -> None:
    # cudagraphs.graph_token_limits: the most tokens a decode-only step / a step with a prompt may carry and replay
    # a graph. 0.17.0 on an H100 (9.0), 1024 seqs: min(2 x 1024, 512) = 512 for both; 0.33.0 on a B200 (10.0):
    # min(2 x 1024, 1024) = 1024; 0.34.0 on a B200: decode max(1024, min(8192, 1024 seqs)) = 1024, a prompt step
    # min(8192, 16384 batched tokens) = 8192 (config/vllm.py 0.34.0 L2604-2660), unless a deprecated size is given.
    def limits(
        version: str, cc: str, *, mode: str = "FULL_AND_PIECEWISE", tokens: int = 16384, given_max: int | None = None
    ) -> tuple[int, int]:
        return graph_token_limits(
            accounting_for(version),
            mode=mode,
            max_num_seqs=1024,
            max_num_batched_tokens=tokens,
            compute_capability=cc,
            given_max=given_max,
        )

    assert limits("0.17.0", "9.0", tokens=8192) == (512, 512)
    assert limits("0.33.0", "10.0") == (1024, 1024)
    assert limits("0.34.0", "10.0") == (1024, 8192)
    assert limits("0.34.0", "10.0", tokens=4096) == (1024, 4096)
    assert limits("0.34.0", "10.0", given_max=512) == (512, 512)
    assert limits("0.34.0", "9.0", tokens=8192) == (512, 512)
    # no graph at all, or none for a step with a prompt (FULL_DECODE_ONLY)
    assert limits("0.17.0", "9.0", mode="NONE") == (0, 0)
    assert limits("0.17.0", "9.0", mode="FULL_DECODE_ONLY", tokens=8192) == (512, 0)

    # V0 replayed decode batches only: up to max_num_seqs rounded up to 8 from 0.6.1 (0.6.3 model_runner.py L985), up
    # to 256 before; every prompt step ran eagerly
    def v0(version: str, seqs: int) -> tuple[int, int]:
        return graph_token_limits(
            accounting_for(version, "V0"), mode="FULL_AND_PIECEWISE", max_num_seqs=seqs, max_num_batched_tokens=8192
        )

    assert v0("0.7.3", 256) == (256, 0)
    assert v0("0.7.3", 512) == (512, 0)
    assert v0("0.7.3", 60) == (64, 0)
    assert v0("0.5.5", 512) == (256, 0)

    # V1 before 0.10 captured up to 512 tokens whatever max_num_seqs was (0.9.2 cuda_graph_sizes [512]); 0.10.0 on
    # bounds it by 2 x max_num_seqs
    def seqs16(version: str) -> tuple[int, int]:
        return graph_token_limits(
            accounting_for(version), mode="FULL_AND_PIECEWISE", max_num_seqs=16, max_num_batched_tokens=8192
        )

    assert seqs16("0.9.2") == (512, 512)
    assert seqs16("0.10.2") == (32, 32)
