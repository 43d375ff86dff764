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
import re
from dataclasses import dataclass

from fitgate.sizing.errors import SizingError
from fitgate.sizing.jsonflags import json_object, whole_number
from fitgate.sizing.model import ModelArchitecture

#: The first release that builds no vision tower when every image and video limit is 0 (``--language-model-only``
#: sets them all to 0, config/multimodal.py 0.34.0 L303-305, L699-706): ``SupportsMultiModal._mark_tower_model``
#: swaps the tower for a ``StageMissingLayer`` (model_executor/models/interfaces.py 0.15.0 L217-256, 0.15.1
#: L224-253, 0.34.0 L348-390; 0.14.0 has no ``_mark_tower_model``). hunt197 F2: it was gated at 0.15.1.
TOWER_SKIPPED_SINCE = (0, 15, 0)
#: Models that skipped their tower on their own before that, from the release given, when the limits of the
#: modalities given are all 0 (hunt197 F3: fitgate counted the tower there): Qwen2-VL / Qwen2.5-VL build no
#: ``visual`` without images and videos, LLaVA / Mistral 3 no vision tower and projector without images
#: (qwen2_vl.py 0.10.1 L1052-1053, qwen2_5_vl.py 0.10.1 L846-856, llava.py 0.10.1 L537-551, mistral3.py 0.10.1
#: L431; llava.py 0.10.0 builds it always), Qwen3-VL / Qwen3-VL-MoE from 0.11.0 (qwen3_vl.py L1129-1130,
#: qwen3_vl_moe.py L322-323). From :data:`TOWER_SKIPPED_SINCE` the image-only ones still need only images at 0
#: (``_mark_tower_model(vllm_config, "image")``).
EARLY_TOWER_SKIPS: dict[str, tuple[tuple[int, int, int], tuple[str, ...]]] = {
    "Qwen2VLForConditionalGeneration": ((0, 10, 1), ("image", "video")),
    "Qwen2_5_VLForConditionalGeneration": ((0, 10, 1), ("image", "video")),
    "LlavaForConditionalGeneration": ((0, 10, 1), ("image",)),
    "Mistral3ForConditionalGeneration": ((0, 10, 1), ("image",)),
    "Qwen3VLForConditionalGeneration": ((0, 11, 0), ("image", "video")),
    "Qwen3VLMoeForConditionalGeneration": ((0, 11, 0), ("image", "video")),
}


def vision_tower_built(
    limits: tuple[tuple[str, int], ...] | None, modalities: tuple[str, ...] = ("image", "video")
) -> bool:
    """Whether vLLM builds the vision tower under these ``--limit-mm-per-prompt`` limits (from 0.15.0).

    Built unless the limit of every one of ``modalities`` (the tower's) is 0.
    """
    given = dict(limits or ())
    return not all(given.get(m) == 0 for m in modalities)


def tower_built(architecture: str, version: tuple[int, int, int], limits: tuple[tuple[str, int], ...] | None) -> bool:
    """Whether vLLM ``version`` builds ``architecture``'s vision tower under these limits (see EARLY_TOWER_SKIPS)."""
    early = EARLY_TOWER_SKIPS.get(architecture)
    if early is not None and version >= early[0]:
        return vision_tower_built(limits, early[1])
    return version < TOWER_SKIPPED_SINCE or vision_tower_built(limits)


#: The most characters of a ``--limit-mm-per-prompt`` fitgate parses.
MAX_LIMIT_MM_CHARS = 4096
#: Modalities vLLM's processors know (config/multimodal.py 0.33.0 ``limit_per_prompt``).
MODALITIES = ("image", "video", "audio", "vision_chunk")


#: The ``image=2,video=1`` form vLLM read before 0.10 (engine/arg_utils.py 0.7.2 L52-85 ``nullable_kvs``; 0.9.2
#: L57-66 and L86-92, deprecated "will be removed in v0.10.0"; 0.10.0 L64-73 takes JSON only).
_KEY_VALUE = r"\s*[A-Za-z_][A-Za-z0-9_]{0,39}\s*=\s*\d{1,4}\s*"
_KEY_VALUES = re.compile(f"{_KEY_VALUE}(?:,{_KEY_VALUE})*")


#: ``BaseDummyOptions.count``'s default, for a modality's object that names no count.
MM_DEFAULT_COUNT = 999
#: The largest count read (vLLM has none; a bound on the input, far above any context's items).
MAX_MM_COUNT = 1_000_000


def parse_limit_mm(text: str) -> tuple[tuple[str, int], ...]:
    """``--limit-mm-per-prompt`` JSON (``{"image": 2}`` or ``{"image": {"count": 2, ...}}``) as pairs.

    The ``image=2,video=1`` form of vLLM before 0.10 is read too (vLLM 0.10+ refuses it: a workload's note says so).
    """
    if len(text) > MAX_LIMIT_MM_CHARS:
        raise SizingError("limit_mm_per_prompt", f"{len(text)} characters", f"at most {MAX_LIMIT_MM_CHARS}")
    if _KEY_VALUES.fullmatch(text):
        text = json.dumps({k.strip(): int(v) for k, _, v in (kv.partition("=") for kv in text.split(","))})
    data = json_object(text, "limit_mm_per_prompt", MAX_LIMIT_MM_CHARS, '{"image": 2}')
    pairs: list[tuple[str, int]] = []
    for modality, value in data.items():
        # an object without "count" is vLLM's default 999 (BaseDummyOptions.count, config/multimodal.py 0.12.0 L19,
        # 0.34.0 L214: the form that caps the profiled size alone); a count has no upper bound in vLLM (ge=0), and
        # the items are capped by the context where they are sized. hunt205 F1 / F2: both were Invalid.
        raw = value.get("count", MM_DEFAULT_COUNT) if isinstance(value, dict) else value
        count = whole_number(raw)
        if count is None or not 0 <= count <= MAX_MM_COUNT:
            raise SizingError(f"limit_mm_per_prompt.{modality}", raw, f"a count from 0 to {MAX_MM_COUNT}")
        pairs.append((str(modality)[:40], count))
    return tuple(sorted(pairs))


def parse_limit_mm_image_pixels(text: str) -> int | None:
    """The pixels of the image the encoder is profiled with (``--limit-mm-per-prompt`` image width x height).

    None where the image's ``width`` and ``height`` are not both given.

    vLLM's configurable profiling (vllm#25631, the ``{"image": {"count": 1, "width": 512, "height": 512}}`` form of
    config/multimodal.py 0.34.0 L227-231, L306-323) makes the dummy image no larger than that
    (multimodal/processing/dummy_inputs.py L84-110 ``_get_dummy_images``); the number of items profiled still follows
    the processor's largest image (multimodal/encoder_budget.py L20-41, L193-217). hunt178 F2: a Qwen3-VL-8B on an L4
    capped at 512 x 512 was profiled at 16,384 tokens and denied.
    """
    if len(text) > MAX_LIMIT_MM_CHARS or not text.lstrip().startswith("{"):
        return None
    image = json_object(text, "limit_mm_per_prompt", MAX_LIMIT_MM_CHARS, '{"image": 2}').get("image")
    if not isinstance(image, dict):
        return None
    width, height = whole_number(image.get("width")), whole_number(image.get("height"))
    if width is None or height is None:
        return None
    if not (1 <= width <= 1 << 17 and 1 <= height <= 1 << 17):
        raise SizingError("limit_mm_per_prompt.image", f"{width} x {height}", "a width and height from 1 to 131072")
    return width * height


def parse_max_pixels(text: str) -> int | None:
    """The largest image ``--mm-processor-kwargs`` lets the Qwen-VL processors make, in pixels (None: not set).

    vLLM merges the kwargs into the processor it profiles with and takes ``max_pixels``, else ``size.longest_edge``
    (``Qwen2VLProcessingInfo._get_vision_size`` and ``get_image_size_with_most_features``, models/qwen2_vl.py 0.34.0
    L955-977, L1079-1113); HF's processors also take them under ``images_kwargs``.
    """
    data = json_object(text, "mm_processor_kwargs", MAX_LIMIT_MM_CHARS, '{"max_pixels": 1003520}')
    found = None
    for source in (data.get("images_kwargs"), data):
        if not isinstance(source, dict):
            continue
        size = source.get("size")
        for value in (source.get("max_pixels"), size.get("longest_edge") if isinstance(size, dict) else None):
            if value is not None and found is None:
                found = value
    if found is None:
        return None
    # a float (1003520.0) is a pixel count to the processors' arithmetic too (hunt61 F4): taken, rounded down
    if isinstance(found, bool) or not isinstance(found, int | float) or not 1 <= found <= MAX_PIXELS:
        raise SizingError("mm_processor_kwargs.max_pixels", found, f"a number from 1 to {MAX_PIXELS}")
    return int(found)


#: The most pixels an image may be given (2**34: a 131072 x 131072 image).
MAX_PIXELS = 1 << 34


@dataclass(frozen=True)
class VisionFamily:
    """What vLLM's processor makes of one image, for a model family fitgate sizes (see FAMILIES)."""

    tokens_per_item: int  # the largest item's tokens after the projector (get_mm_max_tokens_per_item)
    patches_per_token: int  # vision-tower positions per output token (spatial merge / pooling)
    #: Pixels on a side of one output token (patch x spatial merge) where ``max_pixels`` sets the largest item
    #: (0: the item's size is fixed).
    token_side_pixels: int = 0
    #: Temporal groups of the largest dummy video (0: videos not sized). Qwen2-VL / Qwen2.5-VL:
    #: ``_MAX_FRAMES_PER_VIDEO`` 14 frames over a temporal patch of 2, each group a largest image's tokens
    #: (see :func:`video_tokens`).
    video_groups: int = 0


#: Vision-language families whose largest item fitgate knows from the source and the published
#: processor configs:
#: * Qwen2-VL / Qwen2.5-VL / Qwen3-VL: ``get_max_image_tokens`` is ``max_pixels / (patch x merge)^2``
#:   (models/qwen2_vl.py 0.33.0 L980-1060, ``_get_vision_info``); the published preprocessor_config.json
#:   max_pixels 12845056 = 16384 x 28^2 (Qwen3-VL: 16777216 = 16384 x 32^2) -> 16384 tokens (or the
#:   ``--mm-processor-kwargs`` ``max_pixels`` over 28^2 / 32^2 where given: :func:`parse_max_pixels`), each
#:   ``spatial_merge_size^2`` = 4 patches. Public 0.2x logs print "Encoder cache will be initialized
#:   with a budget of 16384 tokens, and profiled with 1 image items".
#: * Gemma 3: ``mm_tokens_per_image`` 256 tokens per image without pan-and-scan (models/gemma3_mm.py
#:   0.33.0 L197-232, L713-732), pooled from SigLIP's 64 x 64 = 4096 patches (896 px / 14) -> 16.
FAMILIES = {
    "Qwen2VLForConditionalGeneration": VisionFamily(16384, 4, 28, video_groups=7),
    "Qwen2_5_VLForConditionalGeneration": VisionFamily(16384, 4, 28, video_groups=7),
    "Qwen3VLForConditionalGeneration": VisionFamily(16384, 4, 32),
    "Qwen3VLMoeForConditionalGeneration": VisionFamily(16384, 4, 32),
    # Qwen3.5 / 3.6: Qwen3-VL's processor (models/qwen3_5.py 0.34.0 L89-114, L466-467: Qwen3VLProcessingInfo and
    # Qwen3VLMultiModalProcessor) and vision tower (1152 x 27 layers); hunt61 F1: a 0.19 RTX 5090 log had 0.73 GiB
    # less KV with images on than off, which fitgate counted as nothing
    "Qwen3_5ForConditionalGeneration": VisionFamily(16384, 4, 32),
    "Qwen3_5MoeForConditionalGeneration": VisionFamily(16384, 4, 32),
    "Gemma3ForConditionalGeneration": VisionFamily(256, 16),
}


def video_tokens(family: VisionFamily, image_tokens: int, max_model_len: int) -> int:
    """Tokens of the largest dummy video vLLM's Qwen2-VL processor makes (0 where the family's videos are not sized).

    ``get_max_video_tokens`` (models/qwen2_vl.py 0.23.0 L1029-1087; 0.11.0 L82 the same 14 frames): the largest
    image's size, as many frames as fit ``max_model_len`` (``_get_max_video_frames``: each two frames one temporal
    group of ``image_tokens``) up to ``_MAX_FRAMES_PER_VIDEO`` = 14, at least one group. hunt181 F1: an A100 log of
    Qwen2.5-VL-7B at 128000 tokens (0.23.0) printed "budget of 114688 tokens, and profiled with 1 video items"
    (7 x 16384) and an activation peak near 15.5 GiB, where fitgate profiled one image of 16384 tokens.
    """
    if not family.video_groups:
        return 0
    return min(family.video_groups, max(1, max_model_len // image_tokens)) * image_tokens


@dataclass(frozen=True)
class EncoderProfile:
    """The encoder's share of the profiling pass on the first pipeline stage."""

    budget_tokens: int  # "Encoder cache will be initialized with a budget of N tokens"
    items: int  # "... and profiled with M image items of the maximum feature size"
    tokens_per_item: int
    forward_bytes: int  # the vision tower's live activations on those items (a lower bound, see below)
    outputs_bytes: int  # the encoder outputs kept in the encoder cache through the decoder's dummy pass
    modality: str = "image"  # the modality profiled: the one of the most tokens an item


def encoder_profile(
    arch: ModelArchitecture,
    *,
    max_model_len: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    limits: tuple[tuple[str, int], ...] | None,
    tp: int,
    tp_mode: str,
    dtype_bytes: int,
    max_pixels: int | None = None,
    item_pixels: int | None = None,
    videos: bool = True,
) -> EncoderProfile | None:
    """The encoder profile of a vision-language model fitgate knows (None: not multimodal, or unknown).

    Items per batch follow ``_get_max_items`` exactly; the vision tower's activation is the live
    tensors of one vision block's MLP per patch (the residual stream and its norm, ``2 x hidden``,
    gate_up ``2 x I`` and its activation ``I``, sharded by TP in ``weights`` mode: qwen2_5_vl.py
    0.33.0 L346-350) and is a lower bound: attention workspaces and the patch embedding are not
    counted, and no public log of a VLM with its config.json is in hand to fit more. ``item_pixels`` (the
    ``--limit-mm-per-prompt`` image's width x height, :func:`parse_limit_mm_image_pixels`) makes each profiled item
    smaller, not their number. ``videos``: vLLM profiles the modality of the most tokens an item (the V1 engine's
    ``MultiModalBudget.get_modality_with_max_tokens``, multimodal/encoder_budget.py 0.23.0 L87-92, L182-186;
    v1/worker/utils.py 0.11.0 L75-79): a Qwen2 / 2.5-VL video where :func:`video_tokens` exceeds an image's.
    """
    vision = arch.vision
    family = FAMILIES.get(arch.architecture)
    if vision is None or family is None:
        return None
    given = dict(limits or ())
    limit = given.get("image")
    if limit == 0 and arch.architecture.startswith("Qwen") and given.get("video") != 0:
        # hunt61 F3: the Qwen-VL processors take videos too, and vLLM profiles the modality of the most tokens that
        # is not disabled (multimodal/encoder_budget.py 0.34.0 L140-186): with images off it profiles a video, at
        # least as many tokens as the largest image (qwen2_vl.py 0.24.0 L1029-1065) -- sized as one, a lower bound
        limit, item_pixels = given.get("video"), None  # the image's width x height does not size a video
    elif limit == 0:
        return EncoderProfile(0, 0, family.tokens_per_item, 0, 0)  # images disabled: no encoder profiling
    per_item = family.tokens_per_item
    if max_pixels is not None and family.token_side_pixels:
        # --mm-processor-kwargs max_pixels: the largest image is max_pixels // (patch x merge)^2 tokens (hunt20 G4)
        per_item = max(1, max_pixels // family.token_side_pixels**2)
    video = video_tokens(family, per_item, max_model_len) if videos and given.get("video") != 0 else 0
    modality = "image"
    if video > per_item or (video and given.get("image") == 0):
        per_item, limit, item_pixels = video, given.get("video"), None  # one video profiled, not images
        modality = "video"
    budget = max(max_num_batched_tokens, per_item)  # compute_mm_encoder_budget, scheduler.py L306-307
    per_prompt = max(1, min(limit if limit is not None else 999, max_model_len // per_item))
    items = max(1, min(budget // per_item, max_num_seqs * per_prompt))
    if item_pixels is not None and family.token_side_pixels:
        per_item = max(1, min(per_item, item_pixels // family.token_side_pixels**2))  # the dummy image's tokens
    patches = items * per_item * family.patches_per_token
    inter = vision.intermediate_size
    if tp_mode == "data" and tp > 1:
        patches = -(-items // tp) * per_item * family.patches_per_token  # each rank encodes its share
    else:
        inter //= tp
    forward = patches * dtype_bytes * (2 * vision.hidden_size + 3 * inter)
    outputs = items * per_item * arch.hidden_size * dtype_bytes
    return EncoderProfile(budget, items, per_item, forward, outputs, modality)
