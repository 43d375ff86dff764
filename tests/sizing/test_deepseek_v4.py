"""Known-answer tests for DeepSeek V4 (compressed sparse MLA), the arithmetic in the comments.

Every figure comes from vLLM 0.33.0's source (vllm/models/deepseek_v4/attention.py, compressor.py,
vllm/v1/attention/backends/mla/sparse_swa.py, vllm/v1/core/kv_cache_planning.py), cited in
fitgate.sizing.kv_layout.dsv4_layer_specs and build_packed_layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.advice import suggest
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import SizingError
from fitgate.sizing.kv_layout import (
    blocks_per_request,
    build_layout,
    layer_specs,
    max_concurrency,
    num_blocks,
    one_request_bytes,
    reported_tokens,
)
from fitgate.sizing.kv_specs import CompressedMLASpec, ServingShape, SlidingWindowMLASpec
from fitgate.sizing.model import CompressedSparseMLA
from fitgate.sizing.plan import Verdict
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for

CORPUS = Path(__file__).parents[1] / "corpus"
FLASH = CORPUS / "deepseek-ai__DeepSeek-V4-Flash"
V033 = accounting_for("0.33.0")


def _config(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "config.json").read_text())
    return data


def test_flash_layers_take_their_compress_ratio() -> None:
    # compress_ratios (43 layers, then the MTP layer): 0, 0, then 4/128 alternating over layers
    # 2-41, then 4 at layer 42 -> 2 window-only layers, 21 ratio-4 layers, 20 ratio-128 layers.
    arch = parse_config(_config(FLASH))
    ratios = [layer.mixer.compress_ratio for layer in arch.layers if isinstance(layer.mixer, CompressedSparseMLA)]
    assert len(ratios) == arch.num_layers == 43
    assert (ratios.count(1), ratios.count(4), ratios.count(128)) == (2, 21, 20)
    assert arch.mtp_layers == 1


def test_flash_cache_pages_per_layer_kind() -> None:
    # fp8_ds_mla entry 584 B (448 fp8 NoPE + 64 x 2 B RoPE + 8 scale bytes), pages padded to 576 B:
    #   window cache     64 tokens x 584 = 37,376 -> 65 x 576 = 37,440 B
    #   ratio-4 cache    256 / 4 = 64 entries x 584 = 37,376 -> 37,440 B
    #   ratio-128 cache  256 / 128 = 2 entries x 584 = 1,168 -> 3 x 576 = 1,728 B
    #   indexer keys     64 entries x (128 + 128 / 128 x 4 = 132) = 8,448 -> 15 x 576 = 8,640 B
    #   ratio-4 state    4 tokens x 2 x 2 x 512 fp32 (8,192 B) = 32,768 -> 57 x 576 = 32,832 B
    #   indexer state    4 tokens x 2 x 2 x 128 fp32 (2,048 B) = 8,192 -> 8,640 B
    #   ratio-128 state  8 tokens x 2 x 1 x 512 fp32 (4,096 B) = 32,768 -> 32,832 B
    arch = parse_config(_config(FLASH))
    by_ratio = {}
    for i in (0, 2, 3):
        by_ratio[i] = layer_specs(arch, [i], 2, 1, 2, 256, V033)
    assert [s.page_size_bytes for s in by_ratio[0]] == [37_440]
    c4 = by_ratio[2]
    assert [type(s) for s in c4] == [
        CompressedMLASpec,
        SlidingWindowMLASpec,
        SlidingWindowMLASpec,
        CompressedMLASpec,
        SlidingWindowMLASpec,
    ]
    assert [s.page_size_bytes for s in c4] == [8_640, 8_640, 37_440, 37_440, 32_832]
    assert [s.page_size_bytes for s in by_ratio[3]] == [37_440, 1_728, 32_832]
    # Windows: the attention window 128 tokens; the states coff x ratio = 8 (ratio 4) and 128 (ratio 128).
    windows = {s.sliding_window for spec in by_ratio.values() for s in spec if isinstance(s, SlidingWindowMLASpec)}
    assert windows == {128, 8}


def test_flash_packed_layout_matches_the_vllm_025_log() -> None:
    # Buckets (same kind, same block size): window caches (43 x 37,440, 64-token blocks), the
    # 256-token compressed caches (21 x 37,440 + 21 x 8,640 + 20 x 1,728: unbalanced, one group),
    # the 4-token states (21 x 32,832 + 21 x 8,640: balanced, 21 repeats) and the 8-token states
    # (20 x 32,832). Repeats per group: the d >= 21 with the least padding of (43, 21, 20) is 22
    # (pad 1 + 1 + 2), so the window caches split into 2 groups (22 and 21 layers).
    # Widest group: 21 x 37,440 + 21 x 8,640 + 20 x 1,728 = 1,002,240 B = one block id.
    arch = parse_config(_config(FLASH))
    layout = build_layout(layer_specs(arch, range(arch.num_layers), 2, 1, 2, 256, V033), V033)
    assert layout.packed
    assert sorted(g.num_layers for g in layout.groups) == [20, 21, 22, 42, 62]
    assert layout.bytes_per_block == 21 * 37_440 + 21 * 8_640 + 20 * 1_728 == 1_002_240
    # vLLM 0.25.0, TP 2, --max-model-len 1048576, --max-num-batched-tokens 4096 (benchmarks/calibration/
    # public-2026.jsonl gh-file-56819795714): "Available KV cache memory: 10.29 GiB".
    # 10.29 GiB // 1,002,240 = 11,024 blocks. Pages per request: window 2 x (cdiv(127 + 4096, 64) + 1)
    # = 134, 4-token states cdiv(7 + 4096, 4) + 1 = 1,027, 8-token states cdiv(127 + 4096, 8) + 1 = 529,
    # compressed cdiv(1048576, 256) = 4,096 -> 5,786; 11,024 / 5,786 = 1.905 (the log: "1.90x", from
    # the unrounded budget); x 1048576 = 1,997,839 tokens against the log's 1,993,100 (-0.24 %).
    shape = ServingShape(1_048_576, 4096, layout.block_size)
    blocks = num_blocks(layout, int(10.29 * GiB))
    assert blocks == 11_024
    assert blocks_per_request(layout, shape, V033) == 134 + 1_027 + 529 + 4_096 == 5_786
    assert f"{max_concurrency(layout, blocks, shape, V033):.2f}" == "1.91"
    assert abs(reported_tokens(layout, blocks, shape, V033) / 1_993_100 - 1) < 0.005
    # vLLM's one-request check: 5,786 pages x 1,002,240 B against the budget less the null block.
    assert one_request_bytes(layout, shape) == (5_786 + 1) * 1_002_240


def test_flash_weights_match_the_checkpoint_size() -> None:
    # Flash: FP8 (128 x 128 blocks, one fp32 scale each) linear layers, MXFP4 experts (expert_dtype
    # fp4: 4-bit values + one byte per 32). The vLLM 0.25 log of the same checkpoint prints
    # "Checkpoint size: 148.66 GiB" (public-2026.jsonl gh-file-56819795714); MTP layer included.
    m = to_model_input(load_directory(FLASH))
    assert abs(m.inventory.stored_bytes / (148.66 * GiB) - 1) < 0.01
    q = m.arch.quantization
    assert q is not None and q.method == "fp8" and q.group_size == 128 * 128
    assert q.experts is not None and (q.experts.weight_bits, q.experts.group_size) == (4, 32)


@pytest.mark.parametrize(
    ("name", "method", "group"),
    [
        ("nvidia__DeepSeek-V4-Flash-NVFP4", "modelopt_fp4", 16),
        ("RedHatAI__DeepSeek-V4-Flash-NVFP4-FP8", "compressed-tensors", 16),
        ("deepseek-ai__DeepSeek-V4-Pro", "mxfp4", 32),
    ],
)
def test_expert_formats(name: str, method: str, group: int) -> None:
    # ModelOpt's moe_quant_algo NVFP4 and the compressed-tensors ffn group: 4-bit experts with one fp8
    # scale per 16; DeepSeek's own checkpoints: MXFP4 (one UE8M0 byte per 32).
    q = parse_config(_config(CORPUS / name)).quantization
    assert q is not None and q.experts is not None
    assert (q.experts.method, q.experts.weight_bits, q.experts.group_size) == (method, 4, group)


def test_pro_plans_on_h200s_with_256_token_blocks() -> None:
    m = to_model_input(load_directory(CORPUS / "deepseek-ai__DeepSeek-V4-Pro"))
    p = plan(m, lookup_gpu("H200"), ServingConfig(max_model_len=65536, tensor_parallel_size=8))
    assert p.kv.block_size == 256  # DeepseekSparseSWABackend.get_preferred_block_size()
    assert set(p.kv.kinds) == {"compressed_mla", "sliding_window_mla"}
    assert p.kv.num_blocks > 0
    # what is not counted (MTP drafter, workspaces) is said in the plan, not left for the user to find
    assert any(n.startswith("DeepSeek V4:") and "not counted" in n for n in p.notes)


@pytest.mark.parametrize("block", [16, 64])
def test_blocks_below_the_compress_ratio_are_unknown_not_a_crash(block: int) -> None:
    # hunt118 #1: --block-size 64 on V4-Pro's 128-token ratio: a page holds 64 // 128 = 0 entries, 0 bytes, and the
    # plan divided by it (internal error, exit 70); 128 and up are sized as before
    from fitgate.sizing.errors import NotModelledError  # noqa: PLC0415

    m = to_model_input(load_directory(CORPUS / "deepseek-ai__DeepSeek-V4-Pro"))
    with pytest.raises(NotModelledError, match="128-token ratio"):
        plan(m, lookup_gpu("H200"), ServingConfig(max_model_len=4096, tensor_parallel_size=8, block_size=block))
    assert plan(m, lookup_gpu("H200"), ServingConfig(max_model_len=4096, tensor_parallel_size=8, block_size=128))


def test_unknown_compress_ratio_is_refused_with_the_key() -> None:
    config = _config(FLASH)
    config["compress_ratios"] = [0, 2, *config["compress_ratios"][2:]]
    with pytest.raises(SizingError, match=r"compress_ratios\[1\]"):
        parse_config(config)


def test_kv_cache_dtype_is_fp8_ds_mla() -> None:
    # vLLM's default DeepSeek V4 backends turn --kv-cache-dtype auto into fp8_ds_mla and refuse
    # bfloat16 (attention.py L107-123): auto and fp8 give the same layout, bfloat16 is an error.
    m = to_model_input(load_directory(FLASH))
    h200 = lookup_gpu("H200")
    auto = plan(m, h200, ServingConfig(max_model_len=65536, tensor_parallel_size=4))
    fp8 = plan(m, h200, ServingConfig(max_model_len=65536, tensor_parallel_size=4, kv_cache_dtype="fp8"))
    assert auto.kv.num_blocks == fp8.kv.num_blocks and auto.kv.page_size_bytes == 1_002_240
    with pytest.raises(SizingError, match="kv_cache_dtype"):
        plan(m, h200, ServingConfig(max_model_len=65536, tensor_parallel_size=4, kv_cache_dtype="bfloat16"))


def test_a_request_that_fits_only_in_the_uncounted_workspaces_is_tight() -> None:
    # hunt29 F2: vllm#44376, DeepSeek-V4-Flash on 2 x GH200 (vLLM 0.22, TP 2 + EP, gmu 0.95, fp8, 256-token blocks,
    # the LLM class): vLLM had 5.44 GiB of KV and refused a 30,000-token request needing 6.66 GiB; the plan had 10.45
    # GiB and said Fits. With the workspaces fitgate does not count taken at the larger public gap (5 GiB a GPU,
    # verdict_rules.UNCOUNTED_BYTES) the request fits only in them: Tight, not Fits, and never DoesNotFit for it.
    m = to_model_input(load_directory(FLASH))
    serving = ServingConfig(
        max_model_len=30000, tensor_parallel_size=2, enable_expert_parallel=True, gpu_memory_utilization=0.95,
        kv_cache_dtype="fp8", block_size=256, offline=True, vllm_version="0.22.0",
    )  # fmt: skip
    p = plan(m, lookup_gpu("GH200"), serving)
    avail = p.ranks[p.binding_rank].available_kv_bytes
    assert avail - 5 * GiB < p.kv.one_request_bytes < 0.9 * avail
    assert p.verdict.value == "Tight" and "does not count" in p.reasons[0].message


def test_a_smaller_step_is_suggested_where_in_flight_batches_hold_the_window() -> None:
    # hunt180 F1: the recipe's DeepSeek-V4-Pro on 8 x H200 (DP 8 + EP, 200000 tokens, fp8 KV, 0.95, 16 sequences) at
    # 0.28: each sliding-window page set holds 2 in-flight batches of max_num_batched_tokens (async scheduling,
    # config/vllm.py 0.28.0 L550-571; v1/kv_cache_interface.py L546-582), so one request needs 9.98 GiB at 8192 where
    # 8.34 GiB is left. The fixes offered only cut the context or added GPUs; a smaller step keeps both.
    m = to_model_input(load_directory(CORPUS / "deepseek-ai__DeepSeek-V4-Pro"))
    serving = ServingConfig(
        vllm_version="0.28.0",
        data_parallel_size=8,
        enable_expert_parallel=True,
        kv_cache_dtype="fp8",
        block_size=256,
        max_model_len=200000,
        gpu_memory_utilization=0.95,
        max_num_seqs=16,
    )
    h200 = lookup_gpu("H200")
    current = plan(m, h200, serving)
    assert current.verdict is Verdict.DOES_NOT_FIT
    found = {s.changes: s for s in suggest(m, h200, serving, None, current)}
    step = found.get((("--max-num-batched-tokens", "4096"),))
    assert step is not None and step.gpus * step.replicas == 8 and step.verdict is not Verdict.DOES_NOT_FIT
