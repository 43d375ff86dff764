"""Dense decoders with softmax attention (Llama layout), sliding windows by layer_types or the global window.

vLLM builds most of them with llama.py or a class of the same layout under other tensor names
(the comments by each architecture cite which).
"""

from __future__ import annotations

from dataclasses import replace

from fitgate.sizing.config_reader import ConfigReader
from fitgate.sizing.families.base import Family, FamilyLayers, ModelTypeTraits
from fitgate.sizing.families.common import attention, dense_mlp, sliding_pattern
from fitgate.sizing.model import Layer

#: ``config.json:architectures[0]`` values read by the llama family (vllm/model_executor/models/registry.py).
#: Base-model classes vLLM registers as embedding models (``--runner auto`` serves them pooling).
EMBEDDING_ARCHITECTURES = ("LlamaModel", "MistralModel", "Qwen2Model", "Gemma2Model")
ARCHITECTURES: tuple[str, ...] = (
    # dense decoders, sliding windows from layer_types or the global window
    "Ministral3ForCausalLM",
    "MiMoForCausalLM",
    "Olmo2ForCausalLM",
    "Olmo3ForCausalLM",
    "Exaone4ForCausalLM",
    "SmolLM3ForCausalLM",
    "Ernie4_5ForCausalLM",
    "Cohere2ForCausalLM",
    # Command R / R+: the same vLLM class as Cohere2 (registry.py L87-88), without sliding windows
    # (commandr.py L235-244), one LayerNorm per layer (L309), q/k norms with use_qk_norm (L257-263)
    "CohereForCausalLM",
    "Glm4ForCausalLM",
    "HunYuanDenseV1ForCausalLM",
    "Qwen2VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "LlavaForConditionalGeneration",
    "LlavaNextForConditionalGeneration",
    "LlavaOnevisionForConditionalGeneration",
    "Idefics3ForConditionalGeneration",
    "InternVLForConditionalGeneration",
    # InternLM3: vLLM 0.33 builds it with LlamaForCausalLM (registry.py L143); transformers' config
    # renames qkv_bias -> attention_bias and bias -> mlp_bias, which llama.py reads (L268-305)
    "InternLM3ForCausalLM",
    # InternLM2: internlm2.py (0.33.0) builds the Llama layout under other names (wqkv, wo, w1/w3/w2,
    # attention_norm / ffn_norm, tok_embeddings / output): no biases whatever the config (L66-138),
    # head_dim = hidden_size // num_attention_heads (L119), lm_head tied only by tie_word_embeddings (L354)
    "InternLM2ForCausalLM",
    # Solar Pro: solar.py (0.33.0) is llama.py's layout (L75-152, L221-224) plus weightless skip
    # connections (bskcn, L312-332); its global sliding_window reaches every layer through
    # CacheConfig.sliding_window (engine/arg_utils.py L2288-2294, attention.py L266-271)
    "SolarForCausalLM",
    # EXAONE 3.0 / 3.5: exaone.py (0.33.0) is llama.py's layout under GPT-2 names (transformer.h, attn.attention
    # q/k/v/out_proj, mlp.c_fc_0/c_fc_1/c_proj, ln_1/ln_2, wte, ln_f; L77-155, L264-265); transformers'
    # ExaoneConfig renames num_layers and layer_norm_epsilon
    "ExaoneForCausalLM",
    # StableLM (2): stablelm.py (0.33.0) is llama.py's layout with nn.LayerNorm (weight and bias, L191-192,
    # L240), q/k/v biases when use_qkv_bias (L125-138) and a partial rotary; it builds no qk_layernorm
    "StableLmForCausalLM",
    "LlamaForCausalLM",
    # the early conversions' spelling, which vLLM 0.34 builds with LlamaForCausalLM (registry.py "LLaMAForCausalLM";
    # hunt76 F5)
    "LLaMAForCausalLM",
    "MistralForCausalLM",
    # embedding models vLLM builds with the causal LM's class and serves pooling (registry.py 0.34.0
    # ``_EMBEDDING_MODELS``: "LlamaModel" / "MistralModel" -> LlamaForCausalLM, "Qwen2Model" -> Qwen2ForCausalLM,
    # "Gemma2Model" -> Gemma2ForCausalLM; e5-mistral-7b-instruct, gte-Qwen2, BGE-multilingual-gemma2; hunt181 F4)
    *EMBEDDING_ARCHITECTURES,
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen2_5_VLForConditionalGeneration",
    "GraniteForCausalLM",
    "Phi3ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Mistral3ForConditionalGeneration",
)


def _family_llama(text: ConfigReader, model_type: str) -> FamilyLayers:
    n = text.int_("num_hidden_layers")
    sliding = sliding_pattern(text, model_type, n)
    window = text.data.get("sliding_window")
    if model_type == "cohere2" and isinstance(window, int):
        window += 1  # commandr.py (0.33.0) L237-244: Cohere's window sees sliding_window + 1 tokens
    qk_norms = model_type == "cohere" and text.bool_("use_qk_norm", False)  # Command R+ (L207, L257-263)
    layers = []
    for i in range(n):
        w = window if sliding[i] and isinstance(window, int) else None
        att = attention(text, window=w)
        layers.append(Layer(replace(att, sharded_qk_norms=True) if qk_norms else att, dense_mlp(text)))
    return layers, {}


LLAMA = Family(
    "llama",
    ARCHITECTURES,
    _family_llama,
    model_types={
        # CohereForCausalLM (Command R, Cohere2) drops lm_head: tied whatever the config says
        # (commandr.py 0.33.0 L417, L464-466)
        "cohere": ModelTypeTraits(always_tied=True),
        "cohere2": ModelTypeTraits(always_tied=True),
        # stablelm.py (0.33.0): nn.LayerNorm with weight and bias (L191-192, L240), q/k/v biases with use_qkv_bias
        "stablelm": ModelTypeTraits(norm_has_bias=True, attention_bias_key="use_qkv_bias"),
        "qwen2": ModelTypeTraits(attention_bias=True),
        "qwen2_5_vl": ModelTypeTraits(attention_bias=True),
        "qwen2_5_vl_text": ModelTypeTraits(attention_bias=True),
        "qwen2_vl_text": ModelTypeTraits(attention_bias=True),
        "gemma": ModelTypeTraits(tied_by_default=True),
        "gemma2": ModelTypeTraits(tied_by_default=True),
        "gemma3": ModelTypeTraits(tied_by_default=True),
        "gemma3_text": ModelTypeTraits(tied_by_default=True),
        "granite": ModelTypeTraits(tied_by_default=True),
    },
)
