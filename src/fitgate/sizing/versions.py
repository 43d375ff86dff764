"""How each vLLM release accounts memory: the differences that change the numbers.

Source: ``shared/reference/vllm-memory.md`` (read from the vLLM wheels 0.8.5, 0.10.2, 0.11.0, 0.19.0
and 0.33.0) and the measured startup logs in ``shared/calibration``. Where a behaviour is known at
two releases but not where it changed in between, the switch is placed at the release the comment
names and the README says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fitgate.sizing.errors import SizingError

#: The release whose accounting ``plan`` uses when none is given: the newest release with measured
#: startup logs in the calibration set (61 runs of vLLM 0.19.0 on H100).
DEFAULT_VLLM_VERSION = "0.19.0"
_OLDEST = (0, 5, 0)
_NEWEST = (0, 40, 0)


@dataclass(frozen=True)
class VllmAccounting:
    """The memory-accounting behaviour of one vLLM release.

    Attributes:
        version: (major, minor, patch).
        engine: ``V1`` (0.8+, default since 0.8) or ``V0``.
        hybrid_kv_manager: Sliding-window / chunked / Mamba layers get their own groups (0.10+);
            before, every attention layer is sized as full attention.
        chunked_local_hybrid: Chunked local attention (Llama 4) keeps its own group. vLLM 0.11-0.19
            disable the hybrid manager for it unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1,
            so chunked layers cost full-length KV; fitgate assumes the default.
        requested_ceil: ``requested = ceil(total * gmu)`` (0.19+) instead of a float product.
        cudagraph_in_budget: The CUDA-graph estimate is subtracted from the KV budget (0.21+).
        tokens_report: How ``GPU KV cache size: N tokens`` is computed: ``blocks`` (N = blocks x
            block size; V0 and 0.8), ``groups`` (blocks // groups x block size; 0.10-0.20) or
            ``derived`` (int(max concurrency x max_model_len); 0.21+).
        big_gpu_tier_bytes: Cards at least this large get the 16384-token batch in ``vllm serve``
            (0.33: 160 GiB), else None.
        a100_small_tier: A100s get the small defaults even with 80 GB (0.10+).
        sampler_bytes_per_logit: Bytes of the profiling sampler pass per (sequence x vocab)
            element; larger before 0.17 (see activation.py).
        sampler_base_bytes: Fixed part of the sampler pass.
        mla_align_bytes: Per-token MLA cache entry alignment (V0 0.7.x: 256 bytes).
    """

    version: tuple[int, int, int]
    engine: str
    hybrid_kv_manager: bool
    chunked_local_hybrid: bool
    requested_ceil: bool
    cudagraph_in_budget: bool
    tokens_report: str
    big_gpu_tier_bytes: int | None
    a100_small_tier: bool
    sampler_bytes_per_logit: float
    sampler_base_bytes: int
    mla_align_bytes: int

    @property
    def label(self) -> str:
        """The version as ``0.19.0``."""
        return ".".join(str(p) for p in self.version)


_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+\-_a-zA-Z0-9]*)?$")


def parse_version(text: str, field: str = "vllm_version") -> tuple[int, int, int]:
    """Parse ``0.19.0``, ``v0.19.1``, ``0.19`` or an image tag like ``v0.19.0-cu128`` into a tuple."""
    match = _VERSION_RE.match(str(text).strip())
    if not match:
        raise SizingError(field, text, "a vLLM release such as 0.19.0 (or an image tag like v0.19.0)")
    version = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    if not _OLDEST <= version <= _NEWEST:
        raise SizingError(field, text, "a vLLM release from 0.5.0 to 0.40.0")
    return version


def accounting_for(version_text: str | None = None, engine: str | None = None) -> VllmAccounting:
    """The accounting of a vLLM release (``None``: :data:`DEFAULT_VLLM_VERSION`).

    ``engine="V0"`` selects the legacy engine on releases that still had it (up to 0.10).
    """
    version = parse_version(version_text or DEFAULT_VLLM_VERSION)
    if engine not in (None, "V0", "V1"):
        raise SizingError("engine", engine, "V0 or V1")
    v0 = engine == "V0" or version < (0, 8, 0)
    if v0 and version >= (0, 11, 0):
        raise SizingError("engine", engine, "V1 (the V0 engine was removed in vLLM 0.11)")
    return VllmAccounting(
        version=version,
        engine="V0" if v0 else "V1",
        hybrid_kv_manager=not v0 and version >= (0, 10, 0),
        chunked_local_hybrid=False,
        requested_ceil=version >= (0, 19, 0),
        cudagraph_in_budget=version >= (0, 21, 0),
        tokens_report="blocks" if v0 or version < (0, 10, 0) else ("groups" if version < (0, 21, 0) else "derived"),
        big_gpu_tier_bytes=160 * 1024**3 if version >= (0, 33, 0) else None,
        a100_small_tier=version >= (0, 10, 0),
        # Fitted on the calibration logs: 14.35 B per logit on 0.19 (8 dense models); Qwen3-14B
        # profiled 5.64 GiB on 0.15/0.16 and 2.23 GiB on 0.17/0.18, and the undated V1 runs of one
        # benchmark imply the same 37.8 B per logit. V0 samples only the last token of each sequence.
        sampler_bytes_per_logit=24.0 if v0 else (14.35 if version >= (0, 17, 0) else 37.8),
        sampler_base_bytes=0 if v0 else int(0.146 * 1024**3),
        mla_align_bytes=256 if v0 and version >= (0, 7, 0) else 1,
    )
