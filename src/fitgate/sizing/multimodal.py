"""Multimodal models: the encoder's profiling pass and ``--limit-mm-per-prompt``.

vLLM 0.33.0's ``profile_run`` (v1/worker/gpu_model_runner.py L6060-6137) first runs the encoder on
``max_items_per_batch`` dummy items of the modality with the most tokens per item, keeps their
outputs in ``self.encoder_cache`` while it runs the decoder's dummy batch, and only then clears them
(L6121-6122, L6135): the encoder outputs add to the decoder pass's peak. The budget is
``compute_mm_encoder_budget`` (v1/core/encoder_cache_manager.py L333-380):
``max(max_num_batched_tokens, max tokens of one item)`` (scheduler.py L306-307), and the items per
batch ``max(1, min(budget // tokens_per_item, max_num_seqs x items_per_prompt))`` with
``items_per_prompt = max(1, min(limit, max_model_len // tokens_per_item))``
(multimodal/encoder_budget.py ``_get_max_items``).
"""

from __future__ import annotations

import json

from fitgate.sizing.errors import SizingError

#: The most characters of a ``--limit-mm-per-prompt`` fitgate parses.
MAX_LIMIT_MM_CHARS = 4096
#: Modalities vLLM's processors know (config/multimodal.py 0.33.0 ``limit_per_prompt``).
MODALITIES = ("image", "video", "audio", "vision_chunk")


def parse_limit_mm(text: str) -> tuple[tuple[str, int], ...]:
    """``--limit-mm-per-prompt`` JSON (``{"image": 2}`` or ``{"image": {"count": 2, ...}}``) as pairs."""
    if len(text) > MAX_LIMIT_MM_CHARS:
        raise SizingError("limit_mm_per_prompt", f"{len(text)} characters", f"at most {MAX_LIMIT_MM_CHARS}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise SizingError("limit_mm_per_prompt", text[:80], 'a JSON object such as {"image": 2}') from None
    if not isinstance(data, dict):
        raise SizingError("limit_mm_per_prompt", text[:80], 'a JSON object such as {"image": 2}')
    pairs: list[tuple[str, int]] = []
    for modality, value in data.items():
        count = value.get("count") if isinstance(value, dict) else value
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 1024:
            raise SizingError(f"limit_mm_per_prompt.{modality}", count, "a count from 0 to 1024")
        pairs.append((str(modality)[:40], count))
    return tuple(sorted(pairs))
