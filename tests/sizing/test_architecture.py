"""The config.json parser, on real configs from the catalog and on broken ones."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fitgate.sizing.architecture import MLA, Attention, LinearAttention, Mamba, MoE, parse_config, parse_quantization
from fitgate.sizing.errors import NotModelledError, SizingError, UnknownArchitectureError
from tests.conftest import catalog_config


def test_llama_31_8b() -> None:
    arch = parse_config(catalog_config("meta-llama/Llama-3.1-8B-Instruct"))
    assert arch.num_layers == 32
    first = arch.layers[0].mixer
    assert isinstance(first, Attention)
    assert (first.num_heads, first.num_kv_heads, first.head_dim) == (32, 8, 128)
    assert arch.dtype == "bfloat16" and arch.vocab_size == 128256 and not arch.tie_word_embeddings
    assert arch.derived_max_model_len == 131072  # llama3 rope scaling does not stretch max_position_embeddings


def test_gemma2_alternates_sliding_and_global_layers() -> None:
    arch = parse_config(catalog_config("google/gemma-2-9b-it"))
    windows = [layer.mixer.sliding_window for layer in arch.layers if isinstance(layer.mixer, Attention)]
    assert windows[:4] == [4096, None, 4096, None]
    assert windows.count(4096) == 21 and windows.count(None) == 21
    assert arch.tie_word_embeddings  # Gemma ties lm_head to the embedding


def test_gpt_oss_reads_layer_types_and_mxfp4() -> None:
    arch = parse_config(catalog_config("openai/gpt-oss-20b"))
    kinds = [layer.mixer.sliding_window for layer in arch.layers if isinstance(layer.mixer, Attention)]
    assert kinds.count(128) == 12 and kinds.count(None) == 12
    assert arch.quantization is not None and arch.quantization.method == "mxfp4"
    assert isinstance(arch.layers[0].ffn, MoE) and arch.layers[0].ffn.num_experts == 32


def test_qwen25_sliding_window_is_off_unless_use_sliding_window() -> None:
    arch = parse_config(catalog_config("Qwen/Qwen2.5-7B-Instruct"))
    assert all(isinstance(layer.mixer, Attention) and layer.mixer.sliding_window is None for layer in arch.layers)


@pytest.mark.parametrize("nested", [False, True])
def test_qwen25_vl_window_is_off_unless_use_sliding_window(nested: bool) -> None:
    # hunt72 F1: the Hub's Qwen2.5-VL-7B-Instruct config says sliding_window 32768 with use_sliding_window false;
    # transformers' Qwen2_5_VLTextConfig drops the window then (self.sliding_window = ... if self.use_sliding_window
    # else None), so vLLM keeps full attention on all 28 layers. Flat (the released config) or as a text_config of
    # model_type qwen2_5_vl_text (newer exports), no layer may slide.
    config = copy.deepcopy(catalog_config("Qwen/Qwen2.5-VL-7B-Instruct"))
    config["sliding_window"], config["use_sliding_window"] = 32768, False
    if nested:
        text = {k: v for k, v in config.items() if k not in ("architectures", "vision_config", "model_type")}
        config = {**{k: config[k] for k in ("architectures", "vision_config", "model_type")}, "text_config": {
            **text, "model_type": "qwen2_5_vl_text"}}  # fmt: skip
    arch = parse_config(config)
    assert arch.num_layers == 28
    assert all(isinstance(layer.mixer, Attention) and layer.mixer.sliding_window is None for layer in arch.layers)
    config_on = copy.deepcopy(config)
    text_on = config_on["text_config"] if nested else config_on
    # the window on: vLLM gives every layer the one global window whatever max_window_layers says (qwen2.py 0.34.0
    # L247-255; hunt73 F3: max_window_layers = num_hidden_layers, 28 here, left every layer full)
    text_on["use_sliding_window"] = True
    assert all(getattr(layer.mixer, "sliding_window", None) == 32768 for layer in parse_config(config_on).layers)


def test_deepseek_mla_and_moe_layout() -> None:
    arch = parse_config(catalog_config("deepseek-ai/DeepSeek-V3"))
    mla = arch.layers[0].mixer
    assert isinstance(mla, MLA) and mla.kv_lora_rank + mla.qk_rope_head_dim == 576
    assert [isinstance(layer.ffn, MoE) for layer in arch.layers[:4]] == [False, False, False, True]
    assert arch.mtp_layers == 1 and arch.quantization is not None and arch.quantization.method == "fp8"


def test_qwen3_next_is_hybrid_linear_attention() -> None:
    arch = parse_config(catalog_config("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    full = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mixer, Attention)]
    linear = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mixer, LinearAttention)]
    assert full == list(range(3, 48, 4)) and len(linear) == 36


def test_nested_text_config_is_read() -> None:
    text = catalog_config("meta-llama/Llama-3.1-8B-Instruct")
    config = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "text_config": {**text, "model_type": "mistral"},
        "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096},
    }
    arch = parse_config(config)
    assert arch.num_layers == 32 and arch.vision is not None and arch.vision.num_layers == 24


def _broken(repo: str, **changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(catalog_config(repo))
    for key, value in changes.items():
        if value is ...:
            config.pop(key)
        else:
            config[key] = value
    return config


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"hidden_size": ..., "model_type": "not-in-transformers"},
            r"config.json:hidden_size: missing is not valid; expected an integer >= 1",
        ),
        ({"rope_scaling": {"rope_type": "yarn", "factor": float("nan")}}, r"rope_scaling.factor: nan is not valid"),
        (
            {"intermediate_size": 10**30},
            r"intermediate_size: '1000000000\.\.\.000000 \(31 digits\)' is not valid; expected an integer within 64 bits",
        ),
        (
            {"num_hidden_layers": 0},
            r"config.json:num_hidden_layers: 0 is not valid; expected an integer from 1 to 1024",
        ),
        ({"num_attention_heads": "32"}, r"config.json:num_attention_heads: '32' is not valid"),
        (
            {"num_key_value_heads": 5},
            r"num_key_value_heads: 5 is not valid; expected a divisor of num_attention_heads \(32\)",
        ),
        ({"vocab_size": 10**12}, r"config.json:vocab_size: 1000000000000 is not valid"),
        ({"torch_dtype": "int3"}, r"torch_dtype: 'int3' is not valid; expected one of auto, bfloat16"),
        ({"architectures": "LlamaForCausalLM"}, r"config.json:architectures: 'LlamaForCausalLM' is not valid"),
    ],
)
def test_bad_configs_name_the_key(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SizingError, match=message):
        parse_config(_broken("meta-llama/Llama-3.1-8B-Instruct", **changes))


def test_missing_key_takes_the_transformers_default() -> None:
    # LlamaConfig's default intermediate_size is 11008 (transformers LlamaConfig.__init__), which is
    # what vLLM builds when config.json omits the key; fitgate reads the same value.
    arch = parse_config(_broken("meta-llama/Llama-3.1-8B-Instruct", intermediate_size=...))
    ffn = arch.layers[0].ffn
    assert ffn is not None and getattr(ffn, "intermediate_size", None) == 11008


def test_a_config_without_architectures_is_the_class_vllm_names() -> None:
    # hunt76 F2: vLLM 0.34 fills a missing (or empty) architectures with transformers' base class of the model type
    # (transformers_utils/config.py L984-994): LlamaModel, an embedding model in its registry. It was exit 2; the
    # class is looked up as any other: since hunt181 F4 fitgate sizes LlamaModel, as vLLM serves it (pooling).
    for missing in (..., []):
        arch = parse_config(_broken("meta-llama/Llama-3.1-8B-Instruct", architectures=missing))
        assert arch.architecture == "LlamaModel" and arch.pooling_architecture
    # a base class fitgate does not size stays Unknown
    with pytest.raises(UnknownArchitectureError, match=r"'PhiModel' is an architecture fitgate does not size"):
        parse_config({"model_type": "phi", "hidden_size": 8})
    # a model type transformers maps to no class: vLLM wants --hf-overrides naming one
    with pytest.raises(
        UnknownArchitectureError, match=r"missing, and model_type .acme. maps to no transformers model class"
    ):
        parse_config({"model_type": "acme", "hidden_size": 8})


def test_unknown_architecture_names_it() -> None:
    with pytest.raises(
        UnknownArchitectureError,
        match=r"architectures: 'BertModel' is an architecture fitgate does not size; it sizes \d+ architectures",
    ):
        parse_config({"architectures": ["BertModel"], "hidden_size": 768})


def test_an_architecture_vllm_dropped_says_so_in_one_sentence() -> None:
    # hunt124 F3: the reason read "it sizes an architecture fitgate sizes: vLLM serves ... up to 0.10.2"
    with pytest.raises(UnknownArchitectureError) as err:
        parse_config({"architectures": ["MllamaForConditionalGeneration"], "hidden_size": 4096})
    text = str(err.value)
    assert "vLLM served MllamaForConditionalGeneration up to 0.10.2 and dropped it after" in text
    assert "it sizes an architecture fitgate sizes" not in text


def test_unknown_quantization_method_is_not_modelled_never_invalid() -> None:
    # hunt76: a checkpoint method fitgate does not size (hqq of older releases, moe_wna16 ...) was a usage error, exit 2
    config = _broken("meta-llama/Llama-3.1-8B-Instruct", quantization_config={"quant_method": "hqq"})
    with pytest.raises(NotModelledError, match=r"quant_method: 'hqq' is taken by vLLM but not sized by fitgate"):
        parse_config(config)
    # hunt76 F4: MLX's {"bits": 4, "group_size": 64} names no method (vLLM reads it unquantized; its weights do not load)
    config = _broken("meta-llama/Llama-3.1-8B-Instruct", quantization_config={"bits": 4, "group_size": 64})
    with pytest.raises(NotModelledError, match=r"a quantization without quant_method \(MLX's bits / group_size\?\)"):
        parse_config(config)
    # a quantization_config that is not an object stays a malformed config
    with pytest.raises(SizingError, match="quantization_config"):
        parse_config(_broken("meta-llama/Llama-3.1-8B-Instruct", quantization_config=[4]))


def test_jamba_places_attention_and_experts_by_period() -> None:
    # AI21-Jamba-1.5-Mini: attention every 8th layer from layer 4, experts every 2nd layer from layer 1.
    arch = parse_config(catalog_config("ai21labs/AI21-Jamba-1.5-Mini"))
    attention = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mixer, Attention)]
    assert attention == [4, 12, 20, 28]
    assert [isinstance(layer.ffn, MoE) for layer in arch.layers[:4]] == [False, True, False, True]
    assert sum(isinstance(layer.ffn, MoE) for layer in arch.layers) == 16


# Parser rules on minimal configs written for these tests (the keys real configs of these families use).


def test_granite_4_hybrid_reads_layer_types() -> None:
    config = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_hidden_layers": 4,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 100352,
        "intermediate_size": 512,
        "shared_intermediate_size": 1024,
        "layer_types": ["mamba", "mamba", "mamba", "attention"],
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_d_state": 128,
        "mamba_n_groups": 1,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "num_local_experts": 0,
    }
    arch = parse_config(config)
    assert [type(layer.mixer).__name__ for layer in arch.layers] == ["Mamba", "Mamba", "Mamba", "Attention"]
    mamba = arch.layers[0].mixer
    assert isinstance(mamba, Mamba) and mamba.d_inner == 48 * 64


def test_gemma3_text_sliding_pattern() -> None:
    config = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "num_hidden_layers": 12,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262208,
        "intermediate_size": 10240,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
    }
    arch = parse_config(config)
    full = [
        i
        for i, layer in enumerate(arch.layers)
        if isinstance(layer.mixer, Attention) and not layer.mixer.sliding_window
    ]
    assert full == [5, 11] and arch.tie_word_embeddings


@pytest.mark.parametrize(
    ("qc", "method", "bits"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", 4),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq", 4),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", 8),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 128, "type": "int"}}},
            },
            "compressed-tensors",
            4,
        ),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "modelopt_fp4", 4),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes", 4),
        ({"quant_method": "mxfp4"}, "mxfp4", 4),
    ],
)
def test_quantization_configs(qc: dict[str, Any], method: str, bits: int) -> None:
    q = parse_quantization(qc)
    assert q is not None and q.method == method and q.weight_bits == bits


@pytest.mark.parametrize("order", [("fp8", "nvfp4"), ("nvfp4", "fp8")])
def test_compressed_tensors_mixed_precision_sizes_with_the_narrowest_group(order: tuple[str, str]) -> None:
    # hunt177 F1: unsloth's Qwen3.6-27B-NVFP4 is compressed-tensors "mixed-precision", group_0 FP8 attention and
    # group_1 NVFP4 MLP. Reading only group_0 sized every linear as FP8 (28.3 GiB of weights, DoesNotFit on an
    # RTX 5090 where it ran). Whatever the order, the estimate takes the narrowest group: NVFP4, 4 bits with an
    # fp8 scale per 16 values = 0.5625 bytes a weight against FP8's 1 byte (+ one fp32 scale per 4096).
    schemes = {
        "fp8": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}, "targets": ["re:.*self_attn.*"]},
        "nvfp4": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}, "targets": ["re:.*mlp.*"]},
    }
    qc = {
        "quant_method": "compressed-tensors",
        "format": "mixed-precision",
        "config_groups": {f"group_{i}": schemes[name] for i, name in enumerate(order)},
    }
    q = parse_quantization(qc)
    assert q is not None and (q.weight_bits, q.group_size, q.scale_bytes) == (4, 16, 1.0)


def test_unknown_architecture_suggests_close_names_in_one_short_line() -> None:
    with pytest.raises(UnknownArchitectureError) as err:
        parse_config({"architectures": ["Qwen3MoeForCausalLm"], "model_type": "qwen3_moe"})
    message = str(err.value)
    assert "Qwen3MoeForCausalLM" in message and "\n" not in message and len(message) < 300


def test_registry_embedding_classes_are_sized_as_pooling_models() -> None:
    # hunt181 F4: e5-mistral-7b-instruct's config names MistralModel, which vLLM registers as an embedding model built
    # with LlamaForCausalLM (registry.py 0.34.0 _EMBEDDING_MODELS: LlamaModel, MistralModel, Qwen2Model, Gemma2Model)
    # and serves pooling under --runner auto: it was Unknown (architecture not sized)
    from fitgate.sizing.resolve import runner_of  # noqa: PLC0415

    config = {
        "architectures": ["MistralModel"],
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "vocab_size": 32000,
        "torch_dtype": "float16",
    }
    arch = parse_config(config)
    assert arch.pooling_architecture and runner_of(arch, "auto", (0, 6, 3)) == "pooling"
    assert runner_of(arch, "generate") == "generate"
    assert not parse_config({**config, "architectures": ["MistralForCausalLM"]}).pooling_architecture


def test_index_cache_skips_follow_vllms_defaults() -> None:
    """hunt198 F3: ``index_skip_topk_offset`` defaults to 2 (deepseek_v2.py 0.34.0 L1147), and a pattern decides alone."""
    cfg = catalog_config("zai-org/GLM-5.2-FP8")
    cfg.pop("index_skip_topk_offset")

    def indexers(c: dict[str, Any]) -> list[int]:
        return [i for i, layer in enumerate(parse_config(c).layers) if getattr(layer.mixer, "index_head_dim", 0)]

    # 78 layers, freq 4, offset 2: max(i - 1, 0) % 4 == 0 -> layers 0, 1, 5, 9, ..., 77: 21 (offset 0 gave 19)
    got = indexers(cfg)
    assert got[:4] == [0, 1, 5, 9] and len(got) == 21
    # a pattern, where given, decides: "F" keeps the indexer, "S" skips it, past its end kept (freq ignored)
    assert indexers({**cfg, "index_topk_pattern": "FSSF"}) == [0, *range(3, 78)]
