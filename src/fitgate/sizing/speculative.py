"""Speculative decoding (``--speculative-config``): what its drafter adds to one GPU.

What vLLM 0.33.0 does (vllm/config/speculative.py, vllm/v1/worker/gpu_model_runner.py,
vllm/v1/spec_decode/llm_base_proposer.py):

* The method names of a checkpoint's own multi-token-prediction layers (``deepseek_mtp``,
  ``qwen3_next_mtp``, ``glm4_moe_mtp``, ``mimo_mtp`` ... ``MTPModelTypes``, speculative.py L38-67) are
  all read as ``mtp`` (L1246-1250). The drafter is the same checkpoint's ``num_nextn_predict_layers``
  layers (``n_predict``; L735-826), built with the target's tensor parallelism; ``num_speculative_tokens``
  defaults to ``n_predict`` and, when larger, must be a multiple of it (the layers are reused, L1601-1612).
* Only the last pipeline stage builds a drafter (gpu_model_runner.py L598) and loads it inside the
  "Model loading took" window (L5008-5012, L5076). An MTP drafter shares the target's lm_head always
  and its embedding when there is one pipeline stage (``_maybe_share_embeddings`` /
  ``_maybe_share_lm_head``, llm_base_proposer.py L1418-1560); what the drafter allocated and dropped is
  not counted (``DeviceMemoryProfiler`` reads ``max_memory_allocated`` after resetting it).
* Each MTP layer holds a decoder layer (``mtp_block``), two RMSNorms and ``eh_proj``, an unquantized
  ``nn.Linear(2 x hidden, hidden)`` (deepseek_mtp.py L85-87), and ``shared_head.norm``.
* The drafter's attention layers are in the forward context like the target's, so they get KV cache
  specs and share the pool (``get_kv_cache_spec``).
* ``ngram``, ``ngram_gpu`` and ``suffix`` propose from the tokens: no weights, no KV cache.
* Every method widens the CUDA-graph capture range: ``max_num_seqs x (1 + num_speculative_tokens) x 2``
  (config/vllm.py 0.33.0 L2453-2470, ``uniform_decode_query_len``).

fitgate sizes an MTP layer as a copy of the model's last attention decoder layer (the checkpoint's
layer beyond ``num_hidden_layers`` has that shape in every MTP checkpoint read: DeepSeek V3/V3.2, GLM-4.5,
Qwen3-Next, MiMo). A drafter from another checkpoint (``eagle``, ``eagle3``, ``draft_model``, ``dflash``,
...) is not counted; the plan says so. The drafter's own CUDA graphs and its profiling pass are not
counted either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.jsonflags import expand_human_numbers, whole_number
from fitgate.sizing.model import MLA, Attention, CompressedSparseMLA, ModelArchitecture

#: vLLM 0.33.0's ``MTPModelTypes`` (config/speculative.py L38-67): all of them mean "mtp".
MTP_METHODS = frozenset(
    {
        "mtp",
        "deepseek_mtp",
        "dots3_note_mtp",
        "mimo_mtp",
        "mimo_v2_mtp",
        "glm4_moe_mtp",
        "glm4_moe_lite_mtp",
        "glm_ocr_mtp",
        "ernie_mtp",
        "nemotron_h_mtp",
        "nemotron3_5_transcribe_mtp",  # 0.34.0
        "exaone_moe_mtp",
        "exaone4_5_mtp",
        "qwen3_next_mtp",
        "qwen4_exp_mtp",
        "qwen3_5_mtp",
        "longcat_flash_mtp",
        "bailing_hybrid_v3_mtp",
        "minimax_m3_mtp",
        "bailing_hybrid_mtp",
        "kimi_k3_mtp",
        "pangu_ultra_moe_mtp",
        "step3p5_mtp",
        "step5_mtp",
        "hy_v3_mtp",
        "hy_v4_mtp",
        "gemma4_mtp",
        "inkling_mtp",
        "glm5_next_mtp",
    }
)
#: Methods without a drafter model: no drafter weights, no KV cache. ``extract_hidden_states`` has no draft model
#: either (config/speculative.py 0.34.0 L1830-1838, ``model=None`` beside ngram and suffix; hunt81 F4).
TOKEN_METHODS = frozenset({"ngram", "ngram_gpu", "suffix", "extract_hidden_states"})
#: Methods whose drafter is another checkpoint (not counted by fitgate).
#: ``mlp_speculator`` and ``medusa``: vLLM 0.30-0.32's methods (config/speculative.py 0.32.0 L74-77; hunt57 F2).
DRAFT_CHECKPOINT_METHODS = frozenset(
    {
        "eagle",
        "eagle3",
        "draft_model",
        "dflash",
        "dspark",
        "custom_class",
        "mlp_speculator",
        "medusa",
    }
)
#: ``num_speculative_tokens`` where the config leaves it out and vLLM fills it in (hunt57 F1): suffix decoding's
#: ``min(8, suffix_decoding_max_tree_depth)`` (v1/worker/gpu/spec_decode/suffix/config.py 0.34.0 L24-31; the depth
#: defaults to 24, which older releases took); a drafter checkpoint's ``n_predict``
#: (speculator_config.py 0.34.0 L275-291), which fitgate does not read: 1, its drafter is not counted anyway.
_DEFAULT_TOKENS = {"suffix": 8, "extract_hidden_states": 1, **dict.fromkeys(DRAFT_CHECKPOINT_METHODS, 1)}
#: MTP layers vLLM builds whatever config.json says (hunt57 F3): MiMo-V2's drafter is its first MTP layer only
#: (config/speculative.py 0.34.0 L904-945, ``_MIMO_V2_FLASH_NUM_MTP_LAYERS = 1``, models/mimo_v2_mtp.py L53-54).
_MTP_FIXED_LAYERS = {"mimo_v2_flash": 1, "mimo_v2": 1, "mimo_v2_omni": 1}
METHODS = MTP_METHODS | TOKEN_METHODS | DRAFT_CHECKPOINT_METHODS
#: The first release whose ``method`` may be one a plugin registers (``SpeculativeMethod | str``, config/speculative.py
#: 0.34.0 L461; ``_validate_method`` L1623-1634; 0.33.0 L419 takes vLLM's own only): another name is Unknown there.
PLUGIN_METHODS_SINCE = (0, 34, 0)
#: The methods a ModelDeployment names (``serving.speculativeConfig.method``): every ``*_mtp`` is ``mtp``.
SPEC_METHODS = (
    "mtp", "ngram", "ngram_gpu", "suffix", "eagle", "eagle3", "draft_model", "dflash", "dspark",
    "mlp_speculator", "medusa", "custom_class", "extract_hidden_states",
)  # fmt: skip
#: MTP layers the drafter class builds when the config names none (vLLM 0.33.0): Qwen3NextMTP,
#: ExaoneMoeMTP and Exaone4_5_MTP read ``getattr(config, "num_nextn_predict_layers", 1)``
#: (models/qwen3_next_mtp.py L63, exaone_moe_mtp.py L56, exaone4_5_mtp.py L59); the Qwen3.5 and Qwen4
#: MTP classes ``getattr(config, "mtp_num_hidden_layers", 1)`` (qwen3_5_mtp.py L82, qwen4_exp/nvidia/mtp.py
#: L190). config/speculative.py maps these model types to those classes (L908-1005).
_MTP_CLASS_DEFAULT_LAYERS = dict.fromkeys(
    (
        "qwen3_next",
        "exaone_moe",
        "exaone4_5",
        "qwen3_5",
        "qwen3_5_moe",
        "qwen3_5_text",
        "qwen3_5_moe_text",
        "qwen4_exp",
        "qwen4_exp_text",
    ),
    1,
)
#: The most draft tokens fitgate takes (vLLM itself has no upper bound; beyond this nobody gains).
MAX_SPECULATIVE_TOKENS = 64


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding as vLLM resolves it.

    Attributes:
        method: ``mtp``, ``ngram``, ``ngram_gpu``, ``suffix`` or a draft-checkpoint method, as vLLM names it.
        num_tokens: ``num_speculative_tokens``.
        drafter_layers: Decoder layers the drafter adds to the last pipeline stage (MTP: ``n_predict``).
        template_layer: The model layer each drafter layer is sized as (-1: none).
    """

    method: str
    num_tokens: int
    drafter_layers: int = 0
    template_layer: int = -1

    @property
    def counted(self) -> bool:
        """Whether fitgate counts the drafter (False for a drafter from another checkpoint)."""
        return self.method not in DRAFT_CHECKPOINT_METHODS


#: Before 0.11.0, ``{"num_speculative_tokens": N}`` with neither a method nor a model made the target its own drafter
#: when its model_type was one of these (config.py 0.8.5 L2292-2300: deepseek_v3; 0.9.2 L2600-2608 and 0.10.1
#: config/__init__.py L2049-2060: + mimo; 0.10.2 L2047-2060: + ernie4_5_moe, qwen3_next); from 0.11.0 the method
#: must be given (config/speculative.py 0.11.0 L218-239: "num_speculative_tokens was provided but without
#: speculative model"). hunt127 F1: DeepSeek-R1 with that config on 0.8.5 was exit 2.
IMPLICIT_MTP_UNTIL = (0, 11, 0)
_IMPLICIT_MTP_TYPES: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 10, 2), frozenset({"deepseek_v3", "mimo", "ernie4_5_moe", "qwen3_next"})),
    ((0, 9, 0), frozenset({"deepseek_v3", "mimo"})),
    ((0, 0, 0), frozenset({"deepseek_v3"})),
)


def implicit_method(arch: ModelArchitecture, version: tuple[int, int, int] | None) -> str | None:
    """``mtp`` where the release makes a method-less config's target its own drafter (:data:`IMPLICIT_MTP_UNTIL`)."""
    if version is None or version >= IMPLICIT_MTP_UNTIL:
        return None
    types = next(t for since, t in _IMPLICIT_MTP_TYPES if version >= since)
    return "mtp" if arch.model_type in types else None


def resolve(
    arch: ModelArchitecture, method: str | None, num_tokens: int | None, version: tuple[int, int, int] | None = None
) -> Speculative | None:
    """How vLLM ``version`` reads ``--speculative-config`` for this model; errors name the field, value and rule."""
    if method is None and num_tokens is None:
        return None
    if method is None:
        method = implicit_method(arch, version)
    if method is None:
        # vLLM infers "draft_model" without a method, and refuses its missing model; fitgate's inputs name a method
        raise SizingError("speculative_config.method", None, "one of mtp, ngram, suffix, eagle, eagle3, draft_model")
    if method not in METHODS and version is not None and version >= PLUGIN_METHODS_SINCE:
        # hunt205 F3: 0.34 takes a method a plugin registers (config/speculative.py 0.34.0 L461, L1623-1634)
        raise NotModelledError(
            "speculative_config.method", method, "a method fitgate sizes (a plugin's drafter is not)"
        )
    if method not in METHODS:
        raise SizingError(
            "speculative_config.method", method, "a method of vLLM 0.33 (mtp, ngram, suffix, eagle3, ...)"
        )
    if num_tokens is not None and (isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1):
        raise SizingError("speculative_config.num_speculative_tokens", num_tokens, f"1 to {MAX_SPECULATIVE_TOKENS}")
    if num_tokens is not None and num_tokens > MAX_SPECULATIVE_TOKENS:
        # hunt144 F2: vLLM sets no upper bound (suffix decoding's forks run 128): a count past fitgate's is Unknown
        raise NotModelledError(
            "speculative_config.num_speculative_tokens", num_tokens, f"at most {MAX_SPECULATIVE_TOKENS} draft tokens"
        )
    if method in MTP_METHODS:
        n_predict = _MTP_FIXED_LAYERS.get(arch.model_type or "", arch.mtp_layers)
        if not n_predict and arch.model_type in _MTP_CLASS_DEFAULT_LAYERS:
            # n_predict stays None in vLLM: no default token count (speculative.py L1601-1618)
            if num_tokens is None:
                raise SizingError(
                    "speculative_config.num_speculative_tokens",
                    None,
                    f"1 to {MAX_SPECULATIVE_TOKENS}",
                    "the config names no MTP layer count, so vLLM has no default",
                )
            return Speculative("mtp", num_tokens, _MTP_CLASS_DEFAULT_LAYERS[arch.model_type], _template_layer(arch))
        if not n_predict:
            raise SizingError(
                "speculative_config.method",
                method,
                "a checkpoint with multi-token-prediction layers (num_nextn_predict_layers)",
                f"{arch.architecture} has none",
            )
        tokens = num_tokens or n_predict
        if tokens > n_predict and tokens % n_predict:
            raise SizingError(
                "speculative_config.num_speculative_tokens", tokens, f"a multiple of the model's {n_predict} MTP layers"
            )
        return Speculative("mtp", tokens, n_predict, _template_layer(arch))
    if num_tokens is None:
        if method not in _DEFAULT_TOKENS:  # ngram: vLLM refuses it too (config/speculative.py 0.34.0 L1653-1658)
            raise SizingError("speculative_config.num_speculative_tokens", None, f"1 to {MAX_SPECULATIVE_TOKENS}")
        num_tokens = _DEFAULT_TOKENS[method]
    return Speculative(method, num_tokens)


def _template_layer(arch: ModelArchitecture) -> int:
    """The last decoder layer with attention (an MTP layer has full attention even in hybrid models)."""
    for i in range(arch.num_layers - 1, -1, -1):
        if isinstance(arch.layers[i].mixer, Attention | MLA | CompressedSparseMLA):
            return i
    return arch.num_layers - 1


def canonical_method(method: str | None) -> str | None:
    """The method as vLLM 0.33 runs it: every ``*_mtp`` name is ``mtp`` (config/speculative.py L1246-1250)."""
    return "mtp" if method in MTP_METHODS else method


def parse_config(text: str, flag: str = "--speculative-config") -> tuple[str | None, int | None]:
    """(method, num_speculative_tokens) of a ``--speculative-config`` JSON object as vLLM's CLI takes it.

    Other keys (``draft_tensor_parallel_size``, ...) do not change what fitgate counts; a ``model`` beside an MTP
    method is a drafter checkpoint of its own (``draft_model``, not counted). Keys are read with
    dashes as underscores, as vLLM does (``num-speculative-tokens``: engine/arg_utils.py 0.34.0 L2159-2161, hunt94 F1),
    and an empty value, ``None`` or ``null`` is no speculative decoding (hunt94 F8).
    """
    if text.strip() in ("", "None", "null"):
        return None, None
    try:
        data = json.loads(expand_human_numbers(text))
    except (ValueError, RecursionError):  # ValueError: also a number past int()'s 4300 digits (hunt83 F3)
        raise SizingError(
            flag, text[:80], 'a JSON object such as {"method": "mtp", "num_speculative_tokens": 1}'
        ) from None
    if data is None:
        return None, None
    if not isinstance(data, dict):
        raise SizingError(flag, text[:80], "a JSON object")
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    method = data.get("method")
    tokens = data.get("num_speculative_tokens")
    if method is None and data.get("model") in ("ngram", "[ngram]"):
        method = "ngram"
    if method is None and data.get("model") is not None:
        method = "draft_model"  # vLLM's own inference for a model without a method
    if method in MTP_METHODS and data.get("model") not in (None, ""):
        # hunt117 F1: Gemma 4's MTP drafter is its own checkpoint (vLLM's "Gemma 4 Assistant Models" docs:
        # {"method": "mtp", "model": "google/gemma-4-31B-it-assistant"}): a drafter from another checkpoint, whose
        # weights fitgate does not read, not the target's num_nextn_predict_layers (refused as "has none" before)
        method = "draft_model"
    if method is not None and not isinstance(method, str):
        raise SizingError(f"{flag} method", method, "a string")
    if tokens is not None:
        count = whole_number(tokens)
        if count is None:
            raise SizingError(f"{flag} num_speculative_tokens", tokens, "a whole number")
        tokens = count
    return method, tokens
