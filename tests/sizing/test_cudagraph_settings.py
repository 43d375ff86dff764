"""The compilation config's CUDA-graph settings: mode, capture sizes and their ceiling (fitgate.sizing.cudagraphs).

vLLM 0.25.0 config/vllm.py ``_set_cudagraph_sizes`` L1669-1828: given sizes replace the list (de-duplicated, those
above max_num_batched_tokens dropped); a given ceiling replaces min(2 x max_num_seqs, 512); cudagraph_mode picks the
graphs (cudagraph_dispatcher.py); ``-O0`` sets mode NONE (OPTIMIZATION_LEVEL_00).
"""

from __future__ import annotations

import contextlib
import io
import json

from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.cudagraphs import (
    FIRST_CAPTURE_MOE_BYTES,
    PER_GRAPH_LAYER_BYTES,
    capture_sizes,
    graph_counts,
    graph_flags,
)
from fitgate.sizing.resolve import graphs_in_budget
from fitgate.sizing.versions import accounting_for
from fitgate.workloads.argv import parse_engine_argv
from tests.conftest import model

V25 = accounting_for("0.25.0")


def test_given_sizes_and_ceiling() -> None:
    # given sizes: de-duplicated, sorted, the ones above max_num_batched_tokens (2048) dropped
    sizes = capture_sizes(V25, max_num_seqs=256, max_num_batched_tokens=2048, given_sizes=(8, 4096, 1, 8, 2))
    assert sizes == (1, 2, 8)
    # a ceiling of 64: 1, 2, 4, then every 8 from 8 to 64 = 3 + 8 sizes (instead of 51 up to 512)
    sizes = capture_sizes(V25, max_num_seqs=256, max_num_batched_tokens=2048, given_max=64)
    assert sizes == (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)


def test_modes_count_their_graphs() -> None:
    # the default list at 256 seqs / 2048 tokens: 1, 2, 4 + 8..248 (31) + 256..512 step 16 (17) = 51 sizes, the
    # decode ones (<= 256 seqs) 35
    sizes = capture_sizes(V25, max_num_seqs=256, max_num_batched_tokens=2048)
    assert len(sizes) == 51
    counts = {
        m: graph_counts(sizes, 256, 1, m) for m in ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY")
    }
    assert (counts["FULL_AND_PIECEWISE"].piecewise, counts["FULL_AND_PIECEWISE"].full) == (51, 35)
    assert (counts["PIECEWISE"].piecewise, counts["PIECEWISE"].full) == (51, 0)
    assert (counts["FULL"].piecewise, counts["FULL"].full) == (0, 51)
    assert (counts["FULL_DECODE_ONLY"].piecewise, counts["FULL_DECODE_ONLY"].full) == (0, 35)
    none = graph_counts(sizes, 256, 1, "NONE")
    assert none.piecewise == none.full == 0


def test_the_estimate_follows_the_mode() -> None:
    # Qwen3-30B-A3B, TP 2 x PP 2 on A10s at vLLM 0.25: a stage runs 24 layers; the estimate is
    # first + (graphs - 1) x 220 KiB x 24 per mode: default 480 MiB + (50 + 34) x 5.16 MiB;
    # FULL_DECODE_ONLY 480 MiB + 34 x 5.16 MiB; NONE nothing, and nothing deducted from the budget
    m = model("Qwen/Qwen3-30B-A3B-Instruct-2507")
    a10 = lookup_gpu("A10")
    base = {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "max_model_len": 2560, "vllm_version": "0.25.0"}
    per_graph = PER_GRAPH_LAYER_BYTES * 24
    default = plan(m, a10, ServingConfig(**base)).ranks[1].profile.cuda_graph_bytes
    decode = plan(m, a10, ServingConfig(**base, cudagraph_mode="FULL_DECODE_ONLY"))
    off = plan(m, a10, ServingConfig(**base, cudagraph_mode="NONE"))
    assert default == FIRST_CAPTURE_MOE_BYTES + 84 * per_graph
    assert decode.ranks[1].profile.cuda_graph_bytes == FIRST_CAPTURE_MOE_BYTES + 34 * per_graph
    assert off.ranks[1].profile.cuda_graph_bytes == 0
    assert not graphs_in_budget(m.arch, off.serving, V25) and not off.per_gpu.cuda_graphs_in_budget
    assert off.per_gpu.kv_cache_bytes > decode.per_gpu.kv_cache_bytes


def test_flags_as_vllm_reads_them() -> None:
    argv = ["M", "-O0", "--max-model-len", "4096"]
    assert graph_flags(parse_engine_argv("serve", argv).flags).mode == "NONE"
    argv = ["M", "-cc", '{"cudagraph_mode": "full_decode_only", "cudagraph_capture_sizes": [1, 2, 4]}']
    read = graph_flags(parse_engine_argv("serve", argv).flags)
    assert (read.mode, read.capture_sizes, read.notes) == ("FULL_DECODE_ONLY", (1, 2, 4), ())
    argv = ["-O", "3", "M", "--compilation-config.cudagraph_mode=PIECEWISE", "--cudagraph-capture-sizes", "1", "8"]
    cmd = parse_engine_argv("serve", argv)
    assert cmd.model == "M"  # -O 3 takes its level, not the model
    read = graph_flags(cmd.flags)
    assert (read.mode, read.capture_sizes) == ("PIECEWISE", (1, 8))
    assert graph_flags({"--max-cudagraph-capture-size": "64"}).max_capture_size == 64


def test_o_as_vllm_0_11_compilation_config_alias() -> None:
    # hunt94 F9: up to 0.11 `-O` was --compilation-config's alias (engine/arg_utils.py 0.11.0), so `-O '{json}'` and
    # `-O.key=value` are its JSON; `plan` exited 2 on them (argparse choices 0-3) and check sized vLLM's default
    for argv in (["M", "-O", '{"cudagraph_mode": "NONE"}'], ["M", "-O.cudagraph_mode=NONE"]):
        assert graph_flags(parse_engine_argv("serve", argv).flags).mode == "NONE", argv
    from fitgate.cli.app import main  # noqa: PLC0415

    for value in ('{"cudagraph_mode": "NONE"}', ".cudagraph_mode=NONE"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--vllm-version", "0.11.0", "-O", value,
                       "--output", "json"])  # fmt: skip
        assert rc == 0 and json.loads(out.getvalue())["per_gpu"]["cuda_graph_bytes"] == 0, value


def test_what_cannot_be_read_is_said_and_sized_at_the_default() -> None:
    read = graph_flags({"--compilation-config": "{not json", "--max-cudagraph-capture-size": "lots"})
    assert read.mode is None and read.max_capture_size is None and len(read.notes) == 2
    read = graph_flags({"--compilation-config.cudagraph_mode": "SOMETHING_NEW"})
    assert read.mode is None and "expected one of FULL_AND_PIECEWISE" in read.notes[0]


def test_the_estimate_variable_decides_whether_graphs_are_in_the_budget() -> None:
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: "0" in 0.18-0.19, "1" from 0.20 (envs.py 0.18.0 L1636, 0.20.0 L1725);
    # set to 0 on 0.25 the estimate is not deducted, so the KV pool is larger by exactly the estimate. A MoE model
    # 0.25 does not list for V2 (config/vllm.py 0.25.0 L557-574): its V1 runner estimates graphs (a dense one runs V2)
    m = model("Qwen/Qwen3-30B-A3B")
    h100 = lookup_gpu("H100")
    on = plan(m, h100, ServingConfig(vllm_version="0.25.0", max_model_len=8192))
    off = plan(m, h100, ServingConfig(vllm_version="0.25.0", max_model_len=8192, cudagraph_memory_estimate=False))
    assert on.per_gpu.cuda_graphs_in_budget and not off.per_gpu.cuda_graphs_in_budget
    graphs = on.ranks[0].profile.cuda_graph_bytes
    assert off.ranks[0].available_kv_bytes - on.ranks[0].available_kv_bytes == graphs
    # set to 1 on 0.19 it is deducted; before 0.18 the variable does not exist and changes nothing
    old = plan(m, h100, ServingConfig(vllm_version="0.19.0", max_model_len=8192, cudagraph_memory_estimate=True))
    assert old.per_gpu.cuda_graphs_in_budget
    older = plan(m, h100, ServingConfig(vllm_version="0.17.0", max_model_len=8192, cudagraph_memory_estimate=True))
    assert not older.per_gpu.cuda_graphs_in_budget


def test_performance_mode() -> None:
    # throughput doubles the default batch limits where not given (engine/arg_utils.py 0.17.0 L2128-2133):
    # an H100's 1024 seqs / 8192 tokens -> 2048 / 16384; a given --max-num-seqs stays; 0.14 has no such mode
    m = model("Qwen/Qwen3-8B")
    h100 = lookup_gpu("H100")
    fast = plan(m, h100, ServingConfig(vllm_version="0.25.0", performance_mode="throughput"))
    assert (fast.serving.max_num_seqs, fast.serving.max_num_batched_tokens) == (2048, 16384)
    given = plan(m, h100, ServingConfig(vllm_version="0.25.0", performance_mode="throughput", max_num_seqs=64))
    assert (given.serving.max_num_seqs, given.serving.max_num_batched_tokens) == (64, 16384)
    old = plan(m, h100, ServingConfig(vllm_version="0.14.0", performance_mode="throughput"))
    assert (old.serving.max_num_seqs, old.serving.max_num_batched_tokens) == (1024, 8192)
    # interactivity: every size 1-32, then the usual 40..248 step 8 and 256..512 step 16 = 32 + 27 + 17 = 76 sizes
    sizes = capture_sizes(V25, max_num_seqs=1024, max_num_batched_tokens=8192, interactivity=True)
    assert sizes[:32] == tuple(range(1, 33)) and len(sizes) == 76


def test_json_numbers_vllms_pydantic_configs_take_are_read_not_refused() -> None:
    """hunt90 F1 / F3: vLLM's configs are lax pydantic dataclasses: a capture size "8" is 8, a cudagraph_mode of 2 is
    CUDAGraphMode(2) = FULL (config/compilation.py 0.34.0 L129-139); both were exit 2 in `fitgate plan`."""
    read = graph_flags({"--compilation-config": '{"cudagraph_mode": 2, "cudagraph_capture_sizes": [1, 2, 4, "8"]}'})
    assert (read.mode, read.capture_sizes, read.problems) == ("FULL", (1, 2, 4, 8), ())
    assert graph_flags({"--compilation-config": '{"cudagraph_mode": 0}'}).mode == "NONE"
    assert graph_flags({"--compilation-config": '{"cudagraph_mode": 2.0}'}).mode == "FULL"  # hunt92 F3
    assert graph_flags({"--compilation-config": '{"cudagraph_capture_sizes": [1, true]}'}).capture_sizes == (1, 1)
    assert graph_flags({"--compilation-config": '{"max_cudagraph_capture_size": 64.0}'}).max_capture_size == 64
    # what pydantic refuses stays a note naming it: a fraction, a mode past the enum's plain values
    assert graph_flags({"--compilation-config": '{"cudagraph_capture_sizes": [1, 2.5]}'}).problems
    assert graph_flags({"--compilation-config": '{"cudagraph_mode": 7}'}).problems
