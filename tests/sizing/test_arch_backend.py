"""Known-answer tests for the models vLLM serves through its Transformers modeling backend (fix90, hunt87).

The family is fitgate.sizing.families.transformers_backend: one vLLM ``Attention`` per decoder layer with the
config class's kv heads, head size and ``layer_types`` (vllm/model_executor/models/transformers/base.py 0.34.0
L609-708), no rotary cos/sin cache, and Unknown for what the backend cannot serve or fitgate does not size.
The configs are public ones (each cites where its values come from); the arithmetic is in the comments.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.families.transformers_backend import COMPUTED_LAYER_TYPES, NO_PP_PLAN, NO_TP_PLAN
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import FullAttentionSpec, SlidingWindowSpec
from fitgate.sizing.model import DenseMLP, ModelArchitecture, MoE
from fitgate.sizing.results import ModelInput, Verdict
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import inventory_from_architecture
from tests.conftest import catalog_config

#: bigcode/starcoder2-15b (hunt87 T3: the values of a TensorRT-LLM test "based on HuggingFace configs"): 40 layers,
#: 48 q / 4 kv heads of 6144 / 48 = 128, a global window of 4096 and no layer_types, c_fc / c_proj MLP.
STARCODER2_15B: dict[str, Any] = {
    "architectures": ["Starcoder2ForCausalLM"],
    "model_type": "starcoder2",
    "hidden_size": 6144,
    "intermediate_size": 24576,
    "num_hidden_layers": 40,
    "num_attention_heads": 48,
    "num_key_value_heads": 4,
    "sliding_window": 4096,
    "max_position_embeddings": 16384,
    "vocab_size": 49152,
    "use_bias": True,
    "norm_epsilon": 1e-5,
    "rope_theta": 100000,
    "torch_dtype": "bfloat16",
}
#: EleutherAI/gpt-neox-20b (its config.json, as transformer_lens's test of it quotes it): 44 layers, 64 heads of
#: 6144 / 64 = 96, intermediate 24576, vocab 50432, rotary_pct 0.25, 2048 positions; no kv-head key.
GPT_NEOX_20B: dict[str, Any] = {
    "architectures": ["GPTNeoXForCausalLM"],
    "model_type": "gpt_neox",
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "intermediate_size": 24576,
    "num_hidden_layers": 44,
    "max_position_embeddings": 2048,
    "layer_norm_eps": 1e-5,
    "vocab_size": 50432,
    "hidden_act": "gelu",
    "rotary_pct": 0.25,
    "rotary_emb_base": 10000,
    "use_parallel_residual": True,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
#: ByteDance-Seed/Seed-OSS-36B-Instruct (its config.json, 2026-05 snapshot): 64 layers, 80 q / 8 kv heads of 128,
#: intermediate 27648, vocab 155136, 524288 positions.
SEED_OSS_36B: dict[str, Any] = {
    "architectures": ["SeedOssForCausalLM"],
    "model_type": "seed_oss",
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "num_attention_heads": 80,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 27648,
    "vocab_size": 155136,
    "max_position_embeddings": 524288,
    "attention_bias": True,
    "attention_out_bias": False,
    "mlp_bias": False,
    "hidden_act": "silu",
    "rope_scaling": {"rope_type": "default"},
    "rope_theta": 10000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
#: bigcode/starcoder (GPTBigCode, multi-query): n_embd 6144, n_head 48, n_layer 40, n_inner 24576, n_positions 8192.
STARCODER: dict[str, Any] = {
    "architectures": ["GPTBigCodeForCausalLM"],
    "model_type": "gpt_bigcode",
    "n_embd": 6144,
    "n_head": 48,
    "n_layer": 40,
    "n_inner": 24576,
    "n_positions": 8192,
    "vocab_size": 49152,
    "multi_query": True,
    "activation_function": "gelu",
    "torch_dtype": "float32",
}


def _kv(arch: ModelArchitecture, tp: int = 1, dtype_bytes: int = 2) -> list[Any]:
    return layer_specs(arch, range(arch.num_layers), tp, dtype_bytes, dtype_bytes, 16, accounting_for())


def _model(config: dict[str, Any]) -> ModelInput:
    arch = parse_config(config)
    return ModelInput(str(config["architectures"][0]), arch, inventory_from_architecture(arch))


def test_starcoder2_slides_every_layer_on_its_global_window() -> None:
    # No layer_types: CacheConfig.sliding_window = 4096 for every layer (engine/arg_utils.py 0.34.0 L2321-2327):
    # 40 x SlidingWindowSpec(4096) of 2 (K, V) x 4 kv x 128 x 2 B = 2048 B -> 81,920 B a token
    arch = parse_config(STARCODER2_15B)
    specs = _kv(arch)
    assert len(specs) == 40 and all(isinstance(s, SlidingWindowSpec) and s.sliding_window == 4096 for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 40 * 2 * 4 * 128 * 2 == 81_920
    assert arch.layers[0].ffn == DenseMLP(24576, gated=False)  # Starcoder2MLP: c_fc, c_proj
    assert arch.rotary_dim == 0  # the backend's HF rotary keeps no cos/sin cache
    assert arch.norm_has_bias and arch.attention_bias  # nn.LayerNorm; use_bias
    backend = arch.transformers_backend
    assert backend is not None and backend.since == (0, 30, 0) and backend.tp_plan and backend.pp_plan


def test_gpt_neox_20b_kv_and_weights() -> None:
    # No kv-head key: num_attention_heads (transformers_utils/config.py 0.34.0 L57-64); head 6144 / 64 = 96.
    # 44 full layers x 2 x 64 x 96 x 2 B = 1,081,344 B a token
    arch = parse_config(GPT_NEOX_20B)
    specs = _kv(arch)
    assert all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 44 * 2 * 64 * 96 * 2 == 1_081_344
    assert arch.rotary_dim == 0 and arch.dtype == "float16"
    # GPT-NeoX-20B's published 20,554,567,680 parameters; the config-only estimate leaves out the attention output
    # projection's bias, 6144 a layer: 20,554,567,680 - 44 x 6144 = 20,554,297,344
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 20_554_567_680 - 44 * 6144 == 20_554_297_344


def test_seed_oss_36b_kv() -> None:
    # 64 full layers x 2 x 8 kv x 128 x 2 B = 262,144 B a token; at TP 2, 4 kv heads a rank: 131,072
    arch = parse_config(SEED_OSS_36B)
    assert sum(s.bytes_per_token for s in _kv(arch)) == 64 * 2 * 8 * 128 * 2 == 262_144
    assert sum(s.bytes_per_token for s in _kv(arch, tp=2)) == 131_072
    assert arch.layers[0].ffn == DenseMLP(27648, gated=True)
    assert arch.derived_max_model_len == 524_288


def test_gpt_bigcode_reads_its_attribute_names_and_multi_query() -> None:
    # n_embd / n_head / n_layer as hidden_size / heads / layers (GPTBigCodeConfig.attribute_map); multi_query: one
    # kv head (L82): 40 x 2 x 1 x 128 x 2 B = 20,480 B a token; multi_query false: 48 kv heads, 983,040 B
    arch = parse_config(STARCODER)
    assert (arch.hidden_size, arch.num_layers, arch.max_position_embeddings) == (6144, 40, 8192)
    assert sum(s.bytes_per_token for s in _kv(arch)) == 40 * 2 * 1 * 128 * 2 == 20_480
    mha = parse_config({**STARCODER, "multi_query": False})
    assert sum(s.bytes_per_token for s in _kv(mha)) == 40 * 2 * 48 * 128 * 2 == 983_040
    # the file's num_key_value_heads is overwritten by the class either way
    assert sum(s.bytes_per_token for s in _kv(parse_config({**STARCODER, "num_key_value_heads": 8}))) == 20_480
    assert arch.layers[0].ffn == DenseMLP(24576, gated=False)  # c_fc 6144 -> n_inner, c_proj back


def test_olmo3_through_the_backend_class_name_matches_the_llama_family() -> None:
    # allenai/Olmo-3.1-32B-Instruct (catalog) as TransformersForCausalLM: 64 layers, 48 sliding(4096) + 16 full of
    # 8 kv x 128: 2 x 8 x 128 x 2 B = 4096 B a layer, 262,144 B a token in all, the llama family's figure (hunt87 T2)
    raw = catalog_config("allenai/Olmo-3.1-32B-Instruct")
    arch = parse_config({**raw, "architectures": ["TransformersForCausalLM"]})
    native = parse_config(raw)
    specs = _kv(arch)
    assert sum(isinstance(s, SlidingWindowSpec) for s in specs) == 48 and len(specs) == 64
    assert sum(s.bytes_per_token for s in specs) == 64 * 4096 == sum(s.bytes_per_token for s in _kv(native))
    assert [layer.mixer for layer in arch.layers] == [layer.mixer for layer in native.layers]
    assert arch.rotary_dim == 0 < native.rotary_dim
    # without layer_types, Olmo3Config computes 3 sliding : 1 full
    computed = parse_config(
        {**{k: v for k, v in raw.items() if k != "layer_types"}, "architectures": ["TransformersForCausalLM"]}
    )
    assert [layer.mixer for layer in computed.layers] == [layer.mixer for layer in arch.layers]


def test_cwm_vaultgemma_mellum_computed_layer_types() -> None:
    # CwmConfig: full where i % 4 == 0 (L97-104); VaultGemmaConfig: sliding where (i + 1) % 2 (L91-95); MellumConfig:
    # every layer full (L115-117) though its class window is 1024
    base = {
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "vocab_size": 1000,
    }
    cwm = parse_config({**base, "architectures": ["CwmForCausalLM"], "model_type": "cwm", "num_hidden_layers": 8,
                        "intermediate_size": 4096, "sliding_window": 8192})  # fmt: skip
    assert [layer.mixer.sliding_window for layer in cwm.layers] == [None, 8192, 8192, 8192] * 2  # type: ignore[union-attr]
    vault = parse_config({**base, "architectures": ["VaultGemmaForCausalLM"], "model_type": "vaultgemma",
                          "num_hidden_layers": 6, "intermediate_size": 4096, "sliding_window": 512})  # fmt: skip
    assert [layer.mixer.sliding_window for layer in vault.layers] == [512, None] * 3  # type: ignore[union-attr]
    mellum = parse_config({**base, "architectures": ["MellumForCausalLM"], "model_type": "mellum",
                           "num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]})  # fmt: skip
    assert all(layer.mixer.sliding_window is None for layer in mellum.layers)  # type: ignore[union-attr]
    # MellumConfig's experts: 64 of moe_intermediate_size 896, top 8, no shared; the dense layer of intermediate_size
    assert [layer.ffn for layer in mellum.layers] == [DenseMLP(7168), *[MoE(64, 8, 896, 0)] * 3]


def _vllm_windows(config: Any, n: int) -> list[bool]:
    """Which layers vLLM gives a window from an instantiated config class (base.py L691-693, arg_utils L2321-2327)."""
    types, window = getattr(config, "layer_types", None), getattr(config, "sliding_window", None)
    if not window:
        return [False] * n
    if types is None or all(t == "sliding_attention" for t in types):
        return [True] * n
    return [t == "sliding_attention" for t in types]


def _through_the_backend(model_type: str, n: int, extra: dict[str, Any]) -> list[bool]:
    raw = {"architectures": ["TransformersForCausalLM"], "model_type": model_type, "num_hidden_layers": n, **extra}
    try:
        arch = parse_config(raw)
    except NotModelledError as exc:
        if "experts under the dense" not in str(exc):
            raise
        arch = parse_config({**raw, "architectures": ["TransformersMoEForCausalLM"]})
    return [layer.mixer.sliding_window is not None for layer in arch.layers]  # type: ignore[union-attr]


@pytest.mark.parametrize("model_type", sorted(COMPUTED_LAYER_TYPES))
def test_computed_layer_types_equal_transformers_classes(model_type: str) -> None:
    # Every model type whose layer_types the family computes (or knows its class leaves alone), through parse_config,
    # against the installed transformers class at several layer counts and windows: the class is how vLLM reads it
    transformers = pytest.importorskip("transformers")
    cls = transformers.CONFIG_MAPPING[model_type]
    for n in (5, 8, 12):
        for window in ({"sliding_window": 4096}, {"sliding_window": 64, "use_sliding_window": True,
                                                  "max_window_layers": 3}, {}):  # fmt: skip
            extra = {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8, **window}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = cls(num_hidden_layers=n, **extra)
            assert _through_the_backend(model_type, n, extra) == _vllm_windows(config, n), (model_type, n, extra)
    assert (model_type in NO_TP_PLAN) == (not cls.base_model_tp_plan), model_type
    assert (model_type in NO_PP_PLAN) == (not cls.base_model_pp_plan), model_type


def test_qwen2_under_the_backend_slides_only_past_max_window_layers() -> None:
    # Qwen2Config (L83-91): sliding only where use_sliding_window and i >= max_window_layers; the native llama family
    # slides every layer (qwen2.py's one global window)
    raw = {"architectures": ["TransformersForCausalLM"], "model_type": "qwen2", "hidden_size": 1024,
           "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 6, "intermediate_size": 4096,
           "vocab_size": 1000, "sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 4}  # fmt: skip
    arch = parse_config(raw)
    assert [layer.mixer.sliding_window for layer in arch.layers] == [None] * 4 + [4096] * 2  # type: ignore[union-attr]
    off = parse_config({**raw, "use_sliding_window": False})
    assert all(layer.mixer.sliding_window is None for layer in off.layers)  # type: ignore[union-attr]


def _plan(config: dict[str, Any], **serving: Any) -> Any:
    return plan(_model(config), lookup_gpu("L40S"), ServingConfig(**serving))


def test_plans_fit_and_releases_before_the_backend_are_unknown() -> None:
    # Starcoder2 15B on an L40S at 16384 tokens (hunt87 T3: ArchitectureNotSized before): ~29 GiB of weights, 81,920
    # B a token of sliding KV
    fit = _plan(STARCODER2_15B, max_model_len=16384, vllm_version="0.34.0")
    assert fit.verdict is Verdict.FITS and fit.kv.num_blocks > 0
    assert _plan(STARCODER2_15B, max_model_len=16384, vllm_version="0.30.0").verdict is Verdict.FITS
    # before 0.30 (not read: Starcoder2 was native) and, for the 0.32 group, 0.31 (SeedOss: seed_oss.py): Unknown
    with pytest.raises(NotModelledError, match=r"before 0\.30\.0"):
        _plan(STARCODER2_15B, max_model_len=16384, vllm_version="0.29.0")
    with pytest.raises(NotModelledError, match=r"before 0\.32\.0"):
        _plan(SEED_OSS_36B, max_model_len=8192, vllm_version="0.31.0", tensor_parallel_size=2)
    _plan(SEED_OSS_36B, max_model_len=8192, vllm_version="0.32.0", tensor_parallel_size=2)


def test_tp_and_pp_without_the_class_plan_are_unknown() -> None:
    # GPTBigCodeConfig has no base_model_tp_plan / pp_plan: the backend replicates what it cannot shard
    # (base.py L491-505, L566-572); TP 1 is sized
    assert _plan(STARCODER, max_model_len=8192, dtype="bfloat16").verdict is not None
    with pytest.raises(NotModelledError, match="base_model_tp_plan"):
        _plan(STARCODER, max_model_len=8192, tensor_parallel_size=2)
    with pytest.raises(NotModelledError, match="base_model_pp_plan"):
        _plan(STARCODER, max_model_len=8192, pipeline_parallel_size=2)
    # a remote-code class (Nanbeige: transformers has no nanbeige) has no plan fitgate can read
    nanbeige = {**SEED_OSS_36B, "architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige"}
    assert _plan(nanbeige, max_model_len=8192, vllm_version="0.34.0", tensor_parallel_size=1) is not None
    with pytest.raises(NotModelledError, match="base_model_tp_plan"):
        _plan(nanbeige, max_model_len=8192, tensor_parallel_size=2)


_TINY: dict[str, Any] = {
    "architectures": ["TransformersForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "intermediate_size": 4096,
    "vocab_size": 1000,
}


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        # MLA: the cache is the latent or padded full attention, by whether MLAFuser matches (base.py L715-731)
        ({"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64}, "MLA"),
        # layers that do not dispatch through the attention interface (L630-640)
        ({"layer_types": ["full_attention", "linear_attention"] * 2}, "not softmax attention"),
        ({"mamba_d_state": 128}, "recurrent"),
        ({"layers_block_type": ["attention", "mamba"] * 2}, "recurrent"),
        # cross-attention: two attention modules share one layer_idx (L515-528)
        ({"add_cross_attention": True}, "cross-attention"),
        ({"is_encoder_decoder": True}, "cross-attention"),
        ({"vision_config": {"hidden_size": 1024}}, "multimodal"),
        ({"block_configs": [{}] * 4}, "per-layer geometry"),
        # MXFP4 raises in the backend (L164-171)
        ({"quantization_config": {"quant_method": "mxfp4"}}, "MXFP4"),
        # experts without a top-k: vLLM asserts (moe.py L245-247); experts under the dense class name
        ({"architectures": ["TransformersMoEForCausalLM"], "num_experts": 8, "moe_intermediate_size": 512}, "top-k"),
        ({"num_experts": 8, "num_experts_per_tok": 2}, "experts under the dense backend class"),
        ({"architectures": ["TransformersMoEForCausalLM"]}, "without experts"),
    ],
)
def test_what_the_backend_cannot_serve_is_unknown(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(NotModelledError, match=match):
        parse_config({**_TINY, **extra})


def test_an_unread_class_with_a_window_and_no_layer_types_is_unknown() -> None:
    # hunt87 T4: a Qwen2-style remote-code config (model_type transformers does not know) with use_sliding_window
    # false, a window and max_window_layers: its class may slide every layer or none (refusal rule 7)
    raw = {**_TINY, "architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige", "sliding_window": 32768,
           "use_sliding_window": False, "max_window_layers": 28}  # fmt: skip
    with pytest.raises(NotModelledError, match="which layers slide"):
        parse_config(raw)
    # with layer_types written out, or without any window, it is sized
    types = ["full_attention", "sliding_attention"] * 2
    sized = parse_config({**raw, "layer_types": types})
    assert [layer.mixer.sliding_window for layer in sized.layers] == [None, 32768] * 2  # type: ignore[union-attr]
    plain = {k: v for k, v in raw.items() if k not in ("sliding_window", "use_sliding_window", "max_window_layers")}
    assert all(layer.mixer.sliding_window is None for layer in parse_config(plain).layers)  # type: ignore[union-attr]


def test_a_zero_window_is_none_and_chunked_layers_are_full() -> None:
    # sliding_window 0 is "disabled" (config/model.py L835-841); a chunked_attention layer gets no window
    # (base.py L691-693): both full, 2 x 2 kv x 128 x 2 B = 1024 B a layer
    zero = parse_config({**_TINY, "sliding_window": 0, "layer_types": ["sliding_attention"] * 4})
    chunked = parse_config({**_TINY, "layer_types": ["chunked_attention"] * 4, "attention_chunk_size": 8192,
                            "sliding_window": 4096})  # fmt: skip
    for arch in (zero, chunked):
        assert all(isinstance(s, FullAttentionSpec) for s in _kv(arch))
        assert sum(s.bytes_per_token for s in _kv(arch)) == 4 * 1024


def test_layer_types_shorter_than_the_layers_is_bad_input() -> None:
    with pytest.raises(SizingError, match="layer_types"):
        parse_config({**_TINY, "layer_types": ["full_attention"] * 3})


def test_kv_head_key_order_is_vllms() -> None:
    # n_head_kv before num_key_value_heads (transformers_utils/config.py 0.34.0 L57-64): 1 kv head, not _TINY's 2:
    # 4 layers x 2 x 1 x 128 x 2 B = 2048 B a token
    arch = parse_config({**_TINY, "model_type": "nanbeige", "n_head_kv": 1})
    assert sum(s.bytes_per_token for s in _kv(arch)) == 4 * 2 * 1 * 128 * 2 == 2048
    assert sum(s.bytes_per_token for s in _kv(parse_config(_TINY))) == 4 * 2 * 2 * 128 * 2
