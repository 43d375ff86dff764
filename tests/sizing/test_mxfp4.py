"""gpt-oss's MXFP4 experts per MoE backend (fitgate.sizing.mxfp4): known answers against vLLM's loading logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.errors import SizingError
from fitgate.sizing.mxfp4 import MARLIN_LAYOUT, TRITON_STRIDED, mxfp4_layouts, triton_hopper_layout
from fitgate.sizing.units import GiB
from fitgate.sizing.weights import weights_per_rank

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
H100 = lookup_gpu("H100-SXM")
A100 = lookup_gpu("A100-80GB")


def _model(name: str):  # type: ignore[no-untyped-def]
    return to_model_input(load_directory(CORPUS / name))


def test_one_expert_per_layout() -> None:
    # gpt-oss-120b, TP1: intermediate 2880, hidden 2880. Checkpoint per expert: w13 5760 x 1440 B of fp4 +
    # 5760 x 90 scales, w2 2880 x 1440 + 2880 x 90 = 8,294,400 + 518,400 + 4,147,200 + 259,200 = 13,219,200 B;
    # biases (5760 + 2880) x 2 B = 17,280 B.
    assert TRITON_STRIDED.expert_bytes(2880, 2880) == (13_219_200, 34_560)  # strided: same bytes, fp32 biases
    # Marlin: intermediate 2880 -> 2944 (128), hidden -> 3072 (256): w13 5888 x 1536 + 5888 x 96, w2 3072 x 1472
    # + 3072 x 92 = 9,043,968 + 565,248 + 4,521,984 + 282,624 = 14,413,824; biases (5888 + 3072) x 2 = 17,920.
    assert MARLIN_LAYOUT.expert_bytes(2880, 2880) == (14_413_824, 17_920)
    # Triton on Hopper at 0.14.1: values unpadded (5760 % 16, 1440 % 32, 2880 % 16 all 0) = 12,441,600; the
    # loaded scales stay (777,600) beside the swizzled copy, rows padded to 256: 5888 x 90 + 3072 x 90 = 806,400;
    # -> 14,025,600; fp32 biases 34,560.
    assert triton_hopper_layout((0, 14, 1)).expert_bytes(2880, 2880) == (14_025_600, 34_560)
    # 0.25.0 deletes the loaded scales once swizzled (oracle/mxfp4.py 0.25.0 L1152-1155), 0.34.0 backs them by the
    # swizzled tensors: once, 12,441,600 + 806,400 = 13,248,000; 0.24.0 deletes only the weights (L1147-1148).
    assert triton_hopper_layout((0, 34, 0)).expert_bytes(2880, 2880) == (13_248_000, 34_560)
    assert triton_hopper_layout((0, 25, 0)).expert_bytes(2880, 2880) == (13_248_000, 34_560)
    assert triton_hopper_layout((0, 33, 0)).expert_bytes(2880, 2880) == (13_248_000, 34_560)
    assert triton_hopper_layout((0, 24, 0)).expert_bytes(2880, 2880) == (14_025_600, 34_560)
    # 0.17-0.21 pad the value bytes to 64: 1440 -> 1472: (5760 + 2880) x 1472 = 12,718,080 + 777,600 + 806,400.
    assert triton_hopper_layout((0, 19, 0)).expert_bytes(2880, 2880) == (14_302_080, 34_560)


@pytest.mark.parametrize(
    ("version", "backend", "measured_gib"),
    [
        # vllm#23278 (vLLM 0.10.1, one H100, Marlin per its marlin_utils_fp4 warning): "Model loading took 65.9651 GiB"
        ("0.10.1", "marlin", 65.97),
        # vllm#33155 (0.14.1, one H100, Triton: the wheel vendors triton_kernels): 64.38 GiB
        ("0.14.1", "triton", 64.38),
    ],
)
def test_gpt_oss_120b_one_h100_weights_by_backend(version: str, backend: str, measured_gib: float) -> None:
    # 36 layers x 128 experts x the expert bytes above (Marlin 14,431,744 B, Triton 14,060,160 B with biases),
    # plus the unquantized rest (embedding and lm_head 201088 x 2880 x 2 B each, attention, routers, norms):
    # Marlin 65.91 GiB, Triton 64.32 GiB, both 0.06 GiB under the logs.
    m = _model("openai__gpt-oss-120b")
    p = plan(m, H100, ServingConfig(vllm_version=version, max_model_len=8192))
    parts = tuple(int(x) for x in version.split("."))
    assert mxfp4_layouts((parts[0], parts[1], parts[2]), H100)[0].backend == backend
    got = p.ranks[0].weights.total_bytes / GiB
    assert got == pytest.approx(measured_gib, abs=0.1)


@pytest.mark.parametrize(("tp", "measured_gib"), [(1, 13.64), (2, 7.01)])
def test_gpt_oss_20b_h100_v019_triton(tp: int, measured_gib: float) -> None:
    # llm-d-planner accuracy logs, vLLM 0.19.0, H100 80GB (../shared/calibration): "Model loading took 13.64 GiB"
    # (TP1) and 7.01 GiB (TP2). 24 layers x 32 experts on Triton with 0.19's 64-byte value padding: TP1 13.62 GiB
    # (Marlin would be 13.69), TP2 6.97 (Marlin 7.08): within 0.05 GiB.
    m = _model("openai__gpt-oss-20b")
    p = plan(m, H100, ServingConfig(vllm_version="0.19.0", tensor_parallel_size=tp, max_model_len=8192))
    assert p.ranks[0].weights.total_bytes / GiB == pytest.approx(measured_gib, abs=0.05)


def test_ampere_keeps_marlin() -> None:
    # Below SM90 every release picks Marlin (get_mxfp4_backend 0.10.2 L90-94, oracle priority: Triton needs SM90+).
    # The myoceane.fr blog's vLLM 0.19.0 A100 run: 13.72 GiB; Marlin's layout gives 13.69.
    assert mxfp4_layouts((0, 19, 0), A100) == (MARLIN_LAYOUT, None)
    m = _model("openai__gpt-oss-20b")
    arch, inv = m.arch, m.inventory
    w = weights_per_rank(arch, inv, tp=1, pp=1, pp_rank=0, dtype="bfloat16", mxfp4_layout=MARLIN_LAYOUT)
    assert w.total_bytes / GiB == pytest.approx(13.72, abs=0.05)


def test_the_launch_build_on_ampere_may_load_unpadded() -> None:
    # hunt186 F1: vllm#22331, an RTX 3090 on vllm/vllm-openai:gptoss (0.10.1+gptoss): "Model loading took 12.8848
    # GiB", the strided Triton layout's 12.84 where Marlin's is 13.69. At 0.10.1 on Ampere / Ada that layout is the
    # possible smaller one (Tight where only it fits); from 0.10.2 Ampere is Marlin's alone
    rtx3090 = lookup_gpu("RTX-3090")
    assert mxfp4_layouts((0, 10, 1), rtx3090) == (MARLIN_LAYOUT, TRITON_STRIDED)
    assert mxfp4_layouts((0, 10, 1), rtx3090, "triton") == (TRITON_STRIDED, None)  # --mxfp4-backend triton honoured
    assert mxfp4_layouts((0, 10, 2), rtx3090) == (MARLIN_LAYOUT, None)
    m = _model("openai__gpt-oss-20b")
    # at gmu 0.72 Marlin's 13.69 GiB leave too little for one 131072-token request (vLLM's PyPI release refuses it)
    tight = plan(m, rtx3090, ServingConfig(vllm_version="0.10.1", gpu_memory_utilization=0.72))
    assert tight.verdict.value == "Tight" and tight.reasons[0].code == "Mxfp4NeedsTritonKernels"
    assert "launch image" in tight.reasons[0].message
    later = plan(m, rtx3090, ServingConfig(vllm_version="0.10.2", gpu_memory_utilization=0.72))
    assert later.verdict.value == "DoesNotFit"


def test_hopper_default_by_release() -> None:
    # before 0.12.0 vLLM's image has no triton_kernels: Marlin, with Triton possible; from 0.12.0 it is vendored
    assert mxfp4_layouts((0, 10, 2), H100) == (MARLIN_LAYOUT, TRITON_STRIDED)
    # 0.10.1 from PyPI pins torch 2.7.1 (Marlin: vllm#23278's log), but its gpt-oss launch build (0.10.1+gptoss)
    # pins a torch 2.9 nightly: Triton possible there too (hunt121 G01)
    assert mxfp4_layouts((0, 10, 1), H100) == (MARLIN_LAYOUT, TRITON_STRIDED)
    assert mxfp4_layouts((0, 11, 2), H100) == (MARLIN_LAYOUT, triton_hopper_layout((0, 11, 2)))
    assert mxfp4_layouts((0, 12, 0), H100) == (triton_hopper_layout((0, 12, 0)), None)
    # stated: sized as stated, nothing else
    assert mxfp4_layouts((0, 10, 2), H100, "marlin") == (MARLIN_LAYOUT, None)
    assert mxfp4_layouts((0, 14, 1), H100, "marlin") == (MARLIN_LAYOUT, None)


def test_public_h100_100000_run_is_not_denied() -> None:
    # vllm#23278, averyngo34 (2025-09-18, release 0.10.x): gpt-oss-120b "does not run 128k on H100, running with
    # --max-model-len 100000 works". At 0.10.2 defaults (gmu 0.9, FlashInfer sampler as in vLLM's image) Marlin's
    # 65.91 GiB leave 71.27 - 65.91 - 2.83 - 0.13 = 2.40 GiB of KV, under one 100000-token request's 3.72 GiB;
    # an install with triton_kernels (torch 2.8.0: strided, 60.86 GiB) leaves 7.45 GiB. fitgate cannot see which:
    # Tight, naming the Marlin figure, never DoesNotFit.
    m = _model("openai__gpt-oss-120b")
    for version in ("0.10.1", "0.10.2", "0.11.0"):
        p = plan(m, H100, ServingConfig(max_model_len=100000, vllm_version=version))
        assert p.verdict.value == "Tight", version
        assert p.reasons[0].code == "Mxfp4NeedsTritonKernels" and "65.91 GiB" in p.reasons[0].message
        assert p.ranks[0].weights.total_bytes / GiB == pytest.approx(60.86, abs=0.01)
    # stated Marlin: sized as stated, and it does not fit
    marlin = plan(m, H100, ServingConfig(max_model_len=100000, vllm_version="0.10.2", mxfp4_backend="marlin"))
    assert marlin.verdict.value == "DoesNotFit"
    # what fits on Marlin keeps Marlin's sizes (the default is sized first)
    short = plan(m, H100, ServingConfig(max_model_len=32768, vllm_version="0.10.2"))
    assert short.ranks[0].weights.total_bytes / GiB == pytest.approx(65.91, abs=0.01)
    assert "Mxfp4NeedsTritonKernels" not in {r.code for r in short.reasons}


def test_bad_backend_is_one_line() -> None:
    m = _model("openai__gpt-oss-120b")
    with pytest.raises(SizingError, match="mxfp4_backend"):
        plan(m, H100, ServingConfig(mxfp4_backend="flashinfer"))


def test_gpt_oss_120b_on_one_h100_at_0_33_is_not_denied() -> None:
    """hunt197 F1: with the scales counted twice at 0.25-0.33, the bare 131,072-token serve was DoesNotFit at 0.33."""
    m = _model("openai__gpt-oss-120b")
    p = plan(m, H100, ServingConfig(vllm_version="0.33.0"))
    # 36 layers x 128 experts x (14,025,600 - 13,248,000) B = 3.34 GiB less than with the loaded scales kept
    assert p.serving.max_model_len == 131072 and p.verdict.value != "DoesNotFit"
