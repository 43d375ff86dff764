"""The encoder's profiling pass of vision-language models: known answers from vLLM 0.33.0's source.

The rules are cited in :mod:`fitgate.sizing.multimodal`; each test shows its arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitgate.cli import main
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.config_reader import parse_vision
from fitgate.sizing.errors import SizingError
from fitgate.sizing.multimodal import parse_limit_mm, parse_limit_mm_image_pixels, parse_max_pixels, tower_built
from tests.conftest import model

H100 = lookup_gpu("H100")
QWEN_VL = "Qwen/Qwen2.5-VL-7B-Instruct"  # vision: 32 blocks, hidden 1280, MLP 3420; decoder hidden 3584


def _serving(**kw: Any) -> ServingConfig:
    return ServingConfig(**{"vllm_version": "0.33.0", "max_model_len": 32768, **kw})


IMAGES_ONLY = (("video", 0),)


def test_qwen25_vl_encoder_profile_on_one_h100() -> None:
    m = model(QWEN_VL)
    p = plan(m, H100, _serving(limit_mm_per_prompt=IMAGES_ONLY))
    enc = p.ranks[0].encoder
    assert enc is not None
    # 16384 tokens an image; budget max(8192, 16384) = 16384; items max(1, min(16384 // 16384,
    # 1024 x min(limit, 32768 // 16384))) = 1 (encoder_budget.py _get_max_items)
    assert (enc.budget_tokens, enc.items, enc.tokens_per_item) == (16384, 1, 16384)
    # 16384 tokens x 4 patches = 65,536 patches x 2 B x (2 x 1280 + 3 x 3420) = 1,680,343,040 B
    assert enc.forward_bytes == 65_536 * 2 * 12_820
    # outputs 16384 x 3584 x 2 B = 117,440,512 B, held through the decoder and sampler passes
    assert enc.outputs_bytes == 117_440_512
    text = plan(m, H100, _serving(limit_mm_per_prompt=(("image", 0), ("video", 0))))
    assert text.ranks[0].encoder is not None and text.ranks[0].encoder.items == 0
    # hunt61 F3: images off alone still profiles a video: the largest one, below
    video = plan(m, H100, _serving(limit_mm_per_prompt=(("image", 0),))).ranks[0].encoder
    assert video is not None and video.modality == "video" and video.tokens_per_item >= enc.tokens_per_item
    assert p.per_gpu.activation_bytes == max(enc.forward_bytes, enc.outputs_bytes + text.per_gpu.activation_bytes)
    assert any("profiled with 1 image item(s) of 16384 tokens" in n for n in p.notes)


def test_qwen25_vl_profiles_its_largest_video_where_videos_are_on() -> None:
    # hunt181 F1: vLLM profiles the modality of the most tokens an item (encoder_budget.py 0.23.0 L87-92, L182-186).
    # A Qwen2.5-VL video is the largest image's 16384 tokens a temporal group, as many groups as max_model_len holds,
    # at most 14 frames / 2 = 7 (qwen2_vl.py 0.23.0 L1029-1087). The A100 log (0.23.0, max_model_len 128000) printed
    # "budget of 114688 tokens, and profiled with 1 video items": min(7, 128000 // 16384 = 7) x 16384 = 114688.
    m = model(QWEN_VL)
    long = plan(m, H100, _serving(max_model_len=128000)).ranks[0].encoder
    assert long is not None and long.modality == "video"
    assert (long.budget_tokens, long.items, long.tokens_per_item) == (114_688, 1, 114_688)
    # 114688 tokens x 4 patches x 2 B x (2 x 1280 + 3 x 3420) = 11,762,401,280 B (10.95 GiB; the log's peak ~15.5)
    assert long.forward_bytes == 114_688 * 4 * 2 * 12_820
    # at 32768 tokens: min(7, 2) = 2 groups, 32768 tokens, one item in a budget of max(8192, 32768)
    short = plan(m, H100, _serving()).ranks[0].encoder
    assert short is not None and (short.modality, short.budget_tokens, short.items) == ("video", 32_768, 1)
    # below one image's tokens a video is one group, no larger than an image: images are profiled
    tiny = plan(m, H100, _serving(max_model_len=8192)).ranks[0].encoder
    assert tiny is not None and tiny.modality == "image"
    # the V0 engine is not changed
    v0 = plan(m, H100, ServingConfig(vllm_version="0.8.5", max_model_len=128000, use_v1=False)).ranks[0].encoder
    assert v0 is not None and v0.modality == "image"


def test_encoder_tensor_parallel_modes() -> None:
    m = model(QWEN_VL)
    weights = plan(m, H100, _serving(tensor_parallel_size=2, limit_mm_per_prompt=IMAGES_ONLY)).ranks[0].encoder
    data = (
        plan(m, H100, _serving(tensor_parallel_size=2, mm_encoder_tp_mode="data", limit_mm_per_prompt=IMAGES_ONLY))
        .ranks[0]
        .encoder
    )
    assert weights is not None and data is not None
    # weights mode: the MLP is sharded, 65,536 x 2 x (2560 + 3 x 1710)
    assert weights.forward_bytes == 65_536 * 2 * (2_560 + 5_130)
    # data mode: each rank encodes ceil(1 / 2) = 1 item with the whole MLP
    assert data.forward_bytes == 65_536 * 2 * 12_820


def test_a_vlm_fitgate_cannot_size_gets_a_note_not_a_verdict() -> None:
    m = model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert m.arch.vision is not None
    p = plan(m, H100, ServingConfig(vllm_version="0.33.0", max_model_len=8192, tensor_parallel_size=4))
    assert p.ranks[0].encoder is None
    assert any("encoder profiling pass" in n and "not sized" in n for n in p.notes)


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ('{"image": 2, "video": 0}', (("image", 2), ("video", 0))),
        ('{"image": {"count": 3, "width": 512}}', (("image", 3),)),
        # hunt205 F1 / F2: an object without a count is vLLM's default 999 (BaseDummyOptions.count, config/multimodal.py
        # 0.34.0 L214), and vLLM sets no upper bound on a count (ge=0): both were Invalid
        ('{"image": {"width": 512, "height": 512}}', (("image", 999),)),
        ('{"image": 2000}', (("image", 2000),)),
    ],
)
def test_limit_mm_per_prompt_json(text: str, pairs: tuple[tuple[str, int], ...]) -> None:
    assert parse_limit_mm(text) == pairs


@pytest.mark.parametrize("text", ["[1]", '{"image": -1}', "{nope", "x" * 5000])
def test_bad_limit_mm_per_prompt_names_the_field(text: str) -> None:
    with pytest.raises(SizingError) as err:
        parse_limit_mm(text)
    assert str(err.value.field).startswith("limit_mm_per_prompt")


def test_mm_processor_kwargs_max_pixels_sets_the_profiled_image() -> None:
    # hunt20 G4: vLLM profiles the Qwen-VL encoder at the processor's largest image, and --mm-processor-kwargs
    # max_pixels (or size.longest_edge) sets it (models/qwen2_vl.py 0.34.0 L955-977, L1079-1113). olmOCR's 1003520
    # pixels are 1003520 // 28^2 = 1280 tokens, not 16384: fitgate profiled 16384 and over-counted ~1 GiB.
    m = model(QWEN_VL)
    small = plan(m, H100, _serving(mm_max_pixels=1_003_520, limit_mm_per_prompt=IMAGES_ONLY))
    enc = small.ranks[0].encoder
    assert enc is not None and enc.tokens_per_item == 1280
    # budget max(8192, 1280) = 8192; items min(8192 // 1280, 1024 x min(999, 32768 // 1280)) = 6
    assert (enc.budget_tokens, enc.items) == (8192, 6)
    assert enc.forward_bytes == 6 * 1280 * 4 * 2 * 12_820
    assert small.per_gpu.activation_bytes < plan(m, H100, _serving()).per_gpu.activation_bytes


def test_limit_mm_per_prompt_width_and_height_shrink_the_profiled_image_not_their_number() -> None:
    # hunt178 F2: {"image": {"count": 1, "width": 512, "height": 512}} makes vLLM's dummy image 512 x 512
    # (multimodal/processing/dummy_inputs.py 0.34.0 L84-110), while the items per batch follow the processor's
    # largest image (encoder_budget.py L20-41, L193-217): one item of 512 x 512 // 28^2 = 334 tokens, not 16384
    m = model(QWEN_VL)
    text = '{"image": {"count": 1, "width": 512, "height": 512}, "video": 0}'
    assert parse_limit_mm_image_pixels(text) == 262_144
    capped = plan(m, H100, _serving(limit_mm_per_prompt=parse_limit_mm(text), mm_item_pixels=262_144))
    enc = capped.ranks[0].encoder
    assert enc is not None and (enc.budget_tokens, enc.items, enc.tokens_per_item) == (16384, 1, 334)
    assert enc.forward_bytes == 334 * 4 * 2 * 12_820
    # a cap no smaller than the largest image changes nothing; width alone is not read
    full = plan(m, H100, _serving()).ranks[0].encoder
    assert plan(m, H100, _serving(mm_item_pixels=1 << 30)).ranks[0].encoder == full
    assert parse_limit_mm_image_pixels('{"image": {"count": 1, "width": 512}}') is None
    assert parse_limit_mm_image_pixels('{"image": 2}') is None
    with pytest.raises(SizingError, match=r"limit_mm_per_prompt\.image"):
        parse_limit_mm_image_pixels('{"image": {"width": 0, "height": 512}}')


@pytest.mark.parametrize(
    ("text", "pixels"),
    [
        ('{"max_pixels": 1003520}', 1_003_520),
        ('{"size": {"longest_edge": 802816, "shortest_edge": 3136}}', 802_816),
        ('{"images_kwargs": {"max_pixels": 401408}}', 401_408),
        ('{"fps": 2}', None),
        ('{"max_pixels": 1003520.0}', 1_003_520),  # hunt61 F4: a float is a pixel count to the processor too
    ],
)
def test_parse_max_pixels(text: str, pixels: int | None) -> None:
    assert parse_max_pixels(text) == pixels


@pytest.mark.parametrize("text", ["[1]", "{", '{"max_pixels": -1}', '{"max_pixels": "a lot"}', "x" * 5000])
def test_bad_mm_processor_kwargs_name_the_field(text: str) -> None:
    with pytest.raises(SizingError) as err:
        parse_max_pixels(text)
    assert str(err.value.field).startswith("mm_processor_kwargs")


def test_no_vision_tower_when_every_image_and_video_limit_is_zero() -> None:
    # hunt22 G1: --language-model-only (the recipes' Qwen3.5 commands) sets every modality's limit to 0, and from 0.15.0
    # vLLM then builds no vision tower (models/interfaces.py 0.15.0 L217-256 _mark_tower_model: StageMissingLayer);
    # fitgate counted its weights whatever the limits.
    m = model(QWEN_VL)
    vision = sum(e.numel for e in m.inventory.entries if e.role.value == "vision")
    assert vision > 600e6  # 32 blocks of a 1280-wide tower and the merger: ~0.67e9 weights
    both = (("image", 0), ("video", 0))
    full = plan(m, H100, _serving())
    text = plan(m, H100, _serving(limit_mm_per_prompt=both))
    assert full.per_gpu.weights_bytes - text.per_gpu.weights_bytes == pytest.approx(vision * 2, rel=1e-6)
    images_only_off = plan(m, H100, _serving(limit_mm_per_prompt=(("image", 0),)))
    assert images_only_off.per_gpu.weights_bytes == full.per_gpu.weights_bytes  # video still needs the tower
    # hunt197 F3: Qwen2.5-VL skipped its own tower from 0.10.1 (qwen2_5_vl.py 0.10.1 L846-856), before the generic
    # rule (0.15.0); 0.10.0 builds it whatever the limits
    for version, built in (("0.10.0", True), ("0.10.1", False), ("0.14.0", False)):
        old = ServingConfig(vllm_version=version, max_model_len=32768, limit_mm_per_prompt=both)
        assert (plan(m, H100, old).per_gpu.weights_bytes > text.per_gpu.weights_bytes) is built


def test_tower_skips_by_release_and_architecture() -> None:
    both, image = (("image", 0), ("video", 0)), (("image", 0),)
    # hunt197 F2: the generic skip (_mark_tower_model) is in 0.15.0 (interfaces.py 0.15.0 L217-256), not first 0.15.1
    assert not tower_built("Gemma3ForConditionalGeneration", (0, 15, 0), both)
    assert tower_built("Gemma3ForConditionalGeneration", (0, 14, 0), both)
    assert tower_built("Gemma3ForConditionalGeneration", (0, 15, 0), image)  # a video limit left: built
    # LLaVA / Mistral 3 have no video tower: images at 0 are enough (llava.py 0.10.1 L537-551)
    assert not tower_built("Mistral3ForConditionalGeneration", (0, 10, 1), image)
    assert tower_built("Mistral3ForConditionalGeneration", (0, 10, 0), image)
    # Qwen3-VL from 0.11.0 (qwen3_vl.py 0.11.0 L1129-1130), images and videos
    assert not tower_built("Qwen3VLForConditionalGeneration", (0, 11, 0), both)
    assert tower_built("Qwen3VLForConditionalGeneration", (0, 10, 2), both)
    assert tower_built("Qwen3VLForConditionalGeneration", (0, 11, 0), image)


def test_language_model_only_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", QWEN_VL, "--gpu", "L4", "--max-model-len", "16384", "--output", "json"]
    assert main(base) == 0
    full = json.loads(capsys.readouterr().out)
    assert main([*base, "--language-model-only"]) == 0
    text = json.loads(capsys.readouterr().out)
    assert text["per_gpu"]["weights_bytes"] < full["per_gpu"]["weights_bytes"]
    # hunt42 F5: no encoder pass and no processor cache to speak of without images or video
    assert any("processor cache" in n for n in full["notes"]) and not any("processor cache" in n for n in text["notes"])
    assert not any("encoder" in n for n in text["notes"])


# Qwen/Qwen2-VL-7B-Instruct config.json (huggingface.co/Qwen/Qwen2-VL-7B-Instruct, as published)
QWEN2_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "model_type": "qwen2_vl",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vision_config": {
        "depth": 32,
        "embed_dim": 1280,
        "mlp_ratio": 4,
        "num_heads": 16,
        "in_chans": 3,
        "hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vocab_size": 152064,
}


def test_qwen2_vl_tower_is_sized_at_its_embed_dim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt13 D1 (SkyPilot llm/qwen/qwen2-vl-7b.yaml on an L4 / A10G, vllm 0.6.1): Qwen2-VL's vision_config.hidden_size
    # (3584) is the text width its merger projects to; vLLM builds the ViT at embed_dim 1280 with an MLP of
    # 1280 x mlp_ratio 4 = 5120 (models/qwen2_vl.py 0.6.1 L449-482). 32 x (4 x 1280^2 + 2 x 1280 x 5120) = 629,145,600
    # parameters, not 32 x (4 x 3584^2 + 2 x 3584 x 14336) = 4.93e9 (8 GiB of weights that do not exist).
    vision = parse_vision(QWEN2_VL_7B)
    assert vision is not None and (vision.hidden_size, vision.intermediate_size) == (1280, 5120)
    # plus the patch merger over 2 x 2 patches: (1280 x 4)^2 + 5120 x 3584 (text width) = 44,564,480 (qwen2_vl.py
    # 0.34.0 L476-488)
    assert vision.num_params == 32 * (4 * 1280**2 + 2 * 1280 * 5120) + 5120**2 + 5120 * 3584 == 673_710_080
    # Qwen2.5-VL names the ViT's own width hidden_size (out_hidden_size is the projection): unchanged
    v25 = parse_vision({"vision_config": {"hidden_size": 1280, "intermediate_size": 3420, "depth": 32}})
    assert v25 is not None and (v25.hidden_size, v25.intermediate_size, v25.num_layers) == (1280, 3420, 32)
    # and its block MLP is gated (Qwen2_5_VisionMLP gate_up_proj, qwen2_5_vl.py 0.34.0 L315-347): 3 x h x i
    g25 = parse_vision(
        {"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": 1280, "intermediate_size": 3420, "depth": 32}}
    )
    assert g25 is not None and g25.num_params - v25.num_params == 32 * 1280 * 3420
    folder = tmp_path / "Qwen2-VL-7B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN2_VL_7B))
    argv = ["plan", "--model", str(folder), "--gpu", "A10G", "--vllm-version", "0.6.1", "--max-model-len", "2048"]
    code = main([*argv, "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    # 8.29e9 parameters x 2 bytes = 15.44 GiB of weights (the checkpoint's own total) on a 22 GiB card: admitted
    assert code == 0 and doc["verdict"] in ("Fits", "Tight"), doc["reasons"]
    assert abs(doc["per_gpu"]["weights_bytes"] / 2**30 - 15.44) < 0.2


def _gemma3n_e4b() -> dict[str, Any]:
    """google/gemma-3n-E4B-it config.json's text part as published (35 layers, every 5th global, the last 15 KV-shared)."""
    n = 35
    text = {
        "model_type": "gemma3n_text",
        "hidden_size": 2048,
        "hidden_size_per_layer_input": 256,
        "head_dim": 256,
        "intermediate_size": [16384] * n,
        "layer_types": ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(n)],
        "num_attention_heads": 8,
        "num_hidden_layers": n,
        "num_key_value_heads": 2,
        "num_kv_shared_layers": 15,
        "max_position_embeddings": 32768,
        "sliding_window": 512,
        "vocab_size": 262400,
        "vocab_size_per_layer_input": 262144,
        "laurel_rank": 64,
        "altup_num_inputs": 4,
        "torch_dtype": "bfloat16",
    }
    return {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n", "text_config": text}


def test_gemma3n_is_sized_as_its_kv_shared_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt13: Gemma 3n's per-layer intermediate_size list was refused (an error; the webhook said Unknown). vLLM
    # builds it as Gemma 4's E-models (gemma3n.py 0.34.0): the last 15 of 35 layers read an earlier layer's cache,
    # so 20 layers hold KV: 20 x 2 (K, V) x 2 heads x 256 x 2 bytes = 40,960 bytes a token.
    folder = tmp_path / "gemma-3n-E4B-it"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_gemma3n_e4b()))
    code = main(["plan", "--model", str(folder), "--gpu", "L4", "--max-model-len", "32768", "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["kv_cache"]["bytes_per_token"] == 20 * 2 * 2 * 256 * 2 == 40960
    config = _gemma3n_e4b()
    config["text_config"]["intermediate_size"] = [16384] * 34  # one short: named, not guessed
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["plan", "--model", str(folder), "--gpu", "L4"]) == 2
    assert "intermediate_size: '34 entries' is not valid; expected 35, one a layer" in capsys.readouterr().err


def test_skip_mm_profiling_leaves_the_encoder_out_of_the_profile() -> None:
    # hunt63 F1: --skip-mm-profiling (gpu_model_runner.py 0.19.0 L5721-5729; gpu/model_runner.py 0.34.0 L1077) skips
    # the encoder pass: the activation is the text model's, the tower's weights stay
    m = model(QWEN_VL)
    on, off = plan(m, H100, _serving()), plan(m, H100, _serving(mm_skip_profiling=True))
    assert on.ranks[0].encoder is not None and off.ranks[0].encoder is None
    assert off.per_gpu.activation_bytes < on.per_gpu.activation_bytes
    assert off.per_gpu.weights_bytes == on.per_gpu.weights_bytes
    assert any("--skip-mm-profiling" in n for n in off.notes)


def test_a_limit_written_as_json_text_is_read_as_vllms_pydantic_reads_it() -> None:
    # hunt90 F1: `{"image": "2"}` was exit 2; vLLM's lax pydantic config reads it as 2. A fraction stays refused.
    assert parse_limit_mm('{"image": "2", "video": {"count": 1.0}}') == (("image", 2), ("video", 1))
    with pytest.raises(SizingError, match=r"limit_mm_per_prompt\.image"):
        parse_limit_mm('{"image": 2.5}')
