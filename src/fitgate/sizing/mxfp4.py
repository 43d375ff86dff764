"""How vLLM lays out gpt-oss's MXFP4 experts on a GPU: the MoE backend a release picks and the bytes it keeps.

vLLM's MXFP4 MoE method (``Mxfp4MoEMethod``, quantization/mxfp4.py) picks a kernel backend by GPU and
environment, and each pads the experts differently and keeps different tensors after loading. fitgate sizes
the backend vLLM's own image picks; where an install can pick a smaller layout that fitgate cannot see (a
separately installed package), the plan is Tight when only that layout fits, never DoesNotFit
(:func:`fitgate.sizing.plan.plan`).

On Hopper (SM90), with no FlashInfer opt-in (``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16``):

- 0.10.1-0.11.2: Triton (``matmul_ogs``) when the separate ``triton_kernels`` package is importable and torch
  is 2.8.0 or newer, else Marlin (``get_mxfp4_backend``, 0.10.2 L89-97, 0.11.0 L88-97, 0.11.2; 0.10.1.1
  ``_should_use_marlin`` L123-135). vLLM's image does not ship ``triton_kernels``: the release's recipe says
  the model runs on Hopper "using the FlashAttention3 backend and Marlin MXFP4 MoE" (vllm-project/recipes
  OpenAI/GPT-OSS.md L54 at 888856d for 0.10.1, c23f4ff for 0.10.2, 1e750f8 for 0.11.0, e340ef7 for 0.11.2),
  and vllm#23278's 0.10.1 log loads 65.97 GiB with Marlin. Default: Marlin; possible: Triton.
- 0.12.0 onwards: the wheel vendors ``triton_kernels`` (``vllm/third_party/triton_kernels``,
  ``has_triton_kernels`` in utils/import_utils.py 0.12.0 L431-438), so Triton is the default
  (``get_mxfp4_backend`` 0.12.0 L151-166, 0.14.1 L152-166; from 0.19 ``_get_priority_backends_for_gpt_oss``
  lists TRITON before FlashInfer CUTLASS and Marlin: fused_moe/oracle/mxfp4.py 0.19.0, 0.33.0, 0.34.0
  L421-458); Marlin only with ``VLLM_MXFP4_USE_MARLIN=1``. vllm#33155's 0.14.1 log loads 64.38 GiB.

Other GPUs keep fitgate's earlier layout (Marlin's padding): Ampere and Ada run Marlin in every PyPI release
(0.10.1.1 ``_should_use_marlin`` L123-135: below SM90; 0.19.0 fused_moe/oracle/mxfp4.py L204-207: Triton needs
9.0 <= cc < 11), but the gpt-oss launch build of 0.10.1 (``vllm/vllm-openai:gptoss``) loaded gpt-oss-20b unpadded on an
RTX 3090, 12.88 GiB (vllm#22331), the strided Triton layout's 12.84 where Marlin's is 13.69: there, at 0.10.1, that
layout is the possible smaller one (hunt186 F1). Blackwell's FlashInfer and ROCm's layouts are not modelled here.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.units import round_up

MARLIN = "marlin"
TRITON = "triton"
MXFP4_BACKENDS = (MARLIN, TRITON)

#: The first release that can run Triton on Hopper: gpt-oss's own release. 0.10.1 / 0.10.1.1 from PyPI pin
#: torch==2.7.1 (their wheels' metadata) and ``_should_use_marlin`` takes Marlin below torch 2.8.0
#: (quantization/mxfp4.py 0.10.1.1 L123-135), but the gpt-oss launch build of the same release, ``vllm==0.10.1+gptoss``
#: from wheels.vllm.ai/gpt-oss, hard-pins a torch 2.9 nightly (``torch==2.9.0.dev20250804+cu128``, the error public
#: deployment notes quote once that nightly was purged), so with ``triton_kernels`` installed it runs Triton's smaller
#: layout (hunt121 G01: vllm#23278's `--max-model-len 100000` on one H100 was DoesNotFit at 0.10.1, Tight at 0.10.2).
#: 0.10.2 pins 2.8.0.
TRITON_POSSIBLE_SINCE = (0, 10, 1)
#: The first release whose wheel vendors ``triton_kernels`` (Triton becomes Hopper's default).
TRITON_VENDORED_SINCE = (0, 12, 0)
#: The first release whose Hopper Triton path keeps the scales once: its conversion deletes the loaded
#: ``w13_weight_scale`` / ``w2_weight_scale`` params once they are swizzled into the precision configs ("drop the
#: now-dead weight/scale Parameters to free their memory": fused_moe/oracle/mxfp4.py 0.25.0 L1152-1155, 0.33.0
#: L1468-1471; 0.34.0's ``store_params_in_triton`` backs them by the swizzled tensors, L86-91). Before it they stay
#: registered beside the swizzled copies (quantization/mxfp4.py 0.11.0 L571-605 and oracle/mxfp4.py 0.24.0
#: L1147-1148 delete only the weights; gpt-oss-20b on an H100 at 0.19.0 loads 13.64 GiB, llm-d-planner's log).
#: hunt197 F1: gated at 0.34, gpt-oss-120b on one H100 at 0.25-0.33 carried 3.34 GiB of scales twice and was
#: denied at 0.33 (131,072 tokens).
TRITON_SCALES_ONCE_SINCE = (0, 25, 0)
#: The first release with torch 2.8.1 or newer pinned (0.11.1: torch==2.9.0 in its wheel's metadata; 0.10.2 and
#: 0.11.0 pin 2.8.0): before it ``_swizzle_mxfp4`` keeps the strided layout on Hopper, no copy, no padding
#: (mxfp4_utils.py 0.11.0 L28-37; ``StridedLayout.swizzle_data`` returns its input).
HOPPER_SWIZZLE_SINCE = (0, 11, 1)
#: Releases whose vendored ``HopperMXValueLayout.swizzle_data`` pre-pads both dims of the value bytes to 64
#: (third_party/triton_kernels/tensor_details/layout_details/hopper_value.py 0.17.0 L128-134, to 0.21.0);
#: the others pad the rows to 16 and the bytes to 32 (its pack sizes, 0.14.1 L131-148, 0.22.0-0.34.0).
HOPPER_VALUE_PAD64 = ((0, 17, 0), (0, 22, 0))
#: ``HopperMXScaleLayout``: rows padded to ``2 x num_warps x 2 x 8`` with ``num_warps`` 8 (quantization/mxfp4.py
#: 0.14.1 L760-764 without batched MoE; ``_swizzle_mxfp4(..., num_warps=8)`` mxfp4_utils.py 0.19.0 L22),
#: columns to 2 (hopper_scale.py 0.14.1 L22-29).
HOPPER_SCALE_ROWS = 256
HOPPER_SCALE_COLS = 2
MX_BLOCK = 32  # OCP_MX_BLOCK_SIZE: one e8m0 scale byte per 32 fp4 values


@dataclass(frozen=True)
class Mxfp4Layout:
    """Bytes one expert's MXFP4 tensors take after vLLM loads and converts them.

    Attributes:
        backend: ``marlin`` or ``triton``.
        intermediate_align: ``intermediate_size_per_partition`` padded to this (create_weights).
        hidden_align: the hidden size padded to this.
        value_rows_align / value_bytes_align: the Hopper swizzle's padding of each value matrix (rows: its output
            dim, bytes: its input dim / 2); 1 / 1 without the swizzle.
        scale_rows_align / scale_cols_align: the Hopper scale swizzle's padding; 0 without a swizzled copy.
        scale_copies: scale tensors resident (the loaded params plus the swizzled copy: 2).
        bias_bytes: bytes per bias element (Triton converts the bf16 biases to fp32).
    """

    backend: str
    intermediate_align: int
    hidden_align: int
    value_rows_align: int = 1
    value_bytes_align: int = 1
    scale_rows_align: int = 0
    scale_cols_align: int = 1
    scale_copies: int = 1
    bias_bytes: int = 2

    def expert_bytes(self, intermediate: int, hidden: int) -> tuple[int, int]:
        """(fp4 values + scales, biases) of one expert of this rank's ``intermediate`` and the model's ``hidden``."""
        i = round_up(intermediate, self.intermediate_align)
        h = round_up(hidden, self.hidden_align)
        # w13: (2i, h) gate/up, w2: (h, i) down; rows are outputs, fp4 values two a byte along the input dim
        mats = ((2 * i, h), (h, i))
        values = sum(round_up(n, self.value_rows_align) * round_up(k // 2, self.value_bytes_align) for n, k in mats)
        scales = sum(n * (k // MX_BLOCK) for n, k in mats)
        if self.scale_rows_align:
            swizzled = sum(
                round_up(n, self.scale_rows_align) * round_up(k // MX_BLOCK, self.scale_cols_align) for n, k in mats
            )
            scales = scales * (self.scale_copies - 1) + swizzled
        return values + scales, (2 * i + h) * self.bias_bytes


#: Marlin (quantization/mxfp4.py 0.10.2 L184-200, 0.14.1 L279-300, fused_moe/oracle/mxfp4.py 0.34.0 L850-855):
#: ``n % 256 == 0 and k % 128 == 0`` -> intermediate to 128, hidden to 256; ``prepare_moe_fp4_layer_for_marlin``
#: repacks into tensors of the same sizes, e8m0 scales back to one byte (marlin_utils_fp4.py 0.10.2 L195-297).
MARLIN_LAYOUT = Mxfp4Layout(MARLIN, 128, 256)
#: Triton before the Hopper swizzle (torch < 2.8.1): intermediate to 64 (0.11.0 L225-227), fp32 biases
#: (L573-577), the strided layout keeps the loaded storage.
TRITON_STRIDED = Mxfp4Layout(TRITON, 64, 1, bias_bytes=4)


def triton_hopper_layout(version: tuple[int, int, int]) -> Mxfp4Layout:
    """The Triton backend's Hopper layout at ``version`` (see the constants above)."""
    if version < HOPPER_SWIZZLE_SINCE:
        return TRITON_STRIDED
    pad64 = HOPPER_VALUE_PAD64[0] <= version < HOPPER_VALUE_PAD64[1]
    return Mxfp4Layout(
        TRITON,
        64,
        1,
        value_rows_align=64 if pad64 else 16,
        value_bytes_align=64 if pad64 else 32,
        scale_rows_align=HOPPER_SCALE_ROWS,
        scale_cols_align=HOPPER_SCALE_COLS,
        scale_copies=1 if version >= TRITON_SCALES_ONCE_SINCE else 2,
        bias_bytes=4,
    )


def _hopper(gpu: GpuModel | None) -> bool:
    return gpu is not None and gpu.vendor == "nvidia" and gpu.compute_capability == "9.0"


#: The gpt-oss launch build's release (0.10.1, 0.10.1.1): on Ampere / Ada its image may load the strided Triton layout.
LAUNCH_BUILD = ((0, 10, 1), (0, 10, 2))


def _ampere_or_ada_launch(gpu: GpuModel | None, version: tuple[int, int, int]) -> bool:
    cc = (gpu.compute_capability or "") if gpu is not None and gpu.vendor == "nvidia" else ""
    return cc.startswith("8.") and LAUNCH_BUILD[0] <= version < LAUNCH_BUILD[1]


def mxfp4_layouts(
    version: tuple[int, int, int], gpu: GpuModel | None, stated: str | None = None
) -> tuple[Mxfp4Layout, Mxfp4Layout | None]:
    """The layout vLLM's image uses for gpt-oss's experts, and a smaller one an install may pick instead.

    ``stated``: the backend the user names (``--mxfp4-backend``); then there is no other. The second layout is
    given only where fitgate cannot see which one runs (Hopper, 0.10.1 to 0.11.2: ``triton_kernels`` installed
    by hand; Ampere / Ada at 0.10.1: the launch build), so a start that fits only with it is Tight, not denied.
    """
    if not _hopper(gpu):
        if _ampere_or_ada_launch(gpu, version):
            if stated is not None:
                return (TRITON_STRIDED if stated == TRITON else MARLIN_LAYOUT), None
            return MARLIN_LAYOUT, TRITON_STRIDED
        return MARLIN_LAYOUT, None
    triton = triton_hopper_layout(version)
    if stated is not None:
        return (triton if stated == TRITON else MARLIN_LAYOUT), None
    if version >= TRITON_VENDORED_SINCE:
        return triton, None
    return MARLIN_LAYOUT, (triton if version >= TRITON_POSSIBLE_SINCE else None)
