"""Block-fp8 MoE experts that vLLM refuses to split over TP (hunt174 F1): said in the plan, never suggested."""

from __future__ import annotations

import pytest

from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.advice_moves import moves_to_try
from fitgate.sizing.capacity import search
from fitgate.sizing.plan import Workload
from fitgate.sizing.quantization import fp8_moe_tp_split_refused, moe_tp_split_refused
from fitgate.sizing.versions import parse_version
from tests.conftest import model

H100 = lookup_gpu("H100")
MINIMAX = "MiniMaxAI/MiniMax-M2.5"  # moe_intermediate_size 1536, hidden 3072, weight_block_size [128, 128]


@pytest.mark.parametrize(
    ("tp", "version", "refused"),
    [
        (4, "0.11.0", False),  # 1536 / 4 = 384 = 3 x 128: whole blocks
        (8, "0.11.0", True),  # 1536 / 8 = 192 = 1.5 x 128: fp8.py 0.28.0 L534-546 raises
        (8, "0.28.0", True),
        (8, "0.29.0", False),  # refined to gcd(128, 128, 192, 3072) = 64 >= 32 (oracle/fp8.py 0.29.0 L272-303)
        (16, "0.29.0", False),  # 96 a GPU: gcd(128, 128, 96, 3072) = 32, still >= 32
    ],
)
def test_known_answers(tp: int, version: str, refused: bool) -> None:
    assert (fp8_moe_tp_split_refused((128, 128), 1536, 3072, tp, parse_version(version)) is not None) is refused


def test_a_shard_refined_below_32_is_refused_in_every_release() -> None:
    # 1536 / 32 = 48 a GPU: gcd(128, 128, 48, 3072) = 16 < 32, no refinement
    assert fp8_moe_tp_split_refused((128, 128), 1536, 3072, 32, (0, 34, 0)) is not None
    assert fp8_moe_tp_split_refused(None, 1536, 3072, 8, (0, 11, 0)) is None  # not block-quantized


def test_expert_parallel_does_not_split_the_experts() -> None:
    arch = model(MINIMAX).arch
    assert moe_tp_split_refused(arch, 8, False, (0, 11, 0)) is not None
    assert moe_tp_split_refused(arch, 8, True, (0, 11, 0)) is None


def test_the_plan_says_it_and_no_suggestion_or_option_offers_it() -> None:
    m = model(MINIMAX)
    p8 = plan(m, H100, ServingConfig(tensor_parallel_size=8, vllm_version="0.11.0"))
    assert p8.verdict.value == "Fits"  # said, not judged: the memory is sized as before
    assert any("not a whole number of the checkpoint's 128 x 128 fp8 blocks" in n for n in p8.notes)
    # the moves the suggestion search tries from TP 2 (any one may end up among the suggestions)
    tp2 = ServingConfig(tensor_parallel_size=2, vllm_version="0.11.0", max_model_len=32768)
    tried = {mv.changes for kind in moves_to_try(m, H100, tp2, None, plan(m, H100, tp2)) for mv in kind}
    assert (("--tensor-parallel-size", "4"),) in tried  # 384 a GPU: whole blocks
    assert (("--tensor-parallel-size", "8"),) not in tried
    found = search(m, Workload(1, 8192), [H100], max_gpus=8, vllm_version="0.11.0", expert_parallel=False)
    assert found.options and all(o.tensor_parallel_size != 8 for o in found.options)
    # from 0.29 vLLM refines the blocks: TP 8 is an option again
    later = search(m, Workload(1, 8192), [H100], max_gpus=8, vllm_version="0.29.0", expert_parallel=False)
    assert any(o.tensor_parallel_size == 8 for o in later.options)
