"""Read ``config.json`` the way vLLM does: with transformers' defaults and key aliases.

vLLM builds its model config with ``AutoConfig`` (transformers' ``CONFIG_MAPPING[model_type]``, plus a
small registry of its own for model types transformers lacks), so the values it sizes with are the
class's: omitted keys take the class defaults, alias keys (``attribute_map``: ``n_head`` ->
``num_attention_heads``, ``layer_types`` -> ``layers_block_type``) are renamed, and nested sub-configs
(``text_config``, ``vision_config``) get their own class's defaults, even when the file omits them.

fitgate applies the same defaults and aliases from a table generated from transformers' classes
(``data/hf_defaults.json``, ``scripts/gen_hf_defaults.py``) rather than importing transformers at run
time. Why: the defaults that are plain values fit in a table, while those a class computes from other
keys (``head_dim`` from ``hidden_size``, ``layer_types`` from a pattern) are left out of it by the
generator and computed by fitgate's parser from the file's own values, as the class would; and
importing transformers alone takes longer than the 1.2 s a cold ``fitgate plan`` may take (measured
here: 5-20 s for ``from transformers import CONFIG_MAPPING`` on this 2-core machine). The test
``tests/sizing/test_hf_defaults.py`` regenerates the table from the installed transformers and proves it
equal to the committed file, and proves that every real config of the test corpus parses to the same
architecture through the table as through transformers' own classes.

A model type the table does not know is read as written (fitgate's parser has its own defaults).
Before any of this, integers beyond 64 bits and nesting deeper than :data:`MAX_DEPTH` are refused
anywhere in the file, with the key path that holds them (floats are checked where they are read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from fitgate.sizing.errors import SizingError

MAX_DEPTH = 32
_INT64 = 1 << 63


def check_numbers(value: object, path: str = "config.json", depth: int = 0) -> None:
    """Refuse integers beyond 64 bits and deep nesting anywhere in a JSON value.

    Raises:
        SizingError: Naming the key path, the value and the limit.
    """
    if depth > MAX_DEPTH:
        raise SizingError(path, "nesting deeper than 32 levels", f"at most {MAX_DEPTH} levels of objects and lists")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, float):
        # Not refused here: real configs hold infinities where nothing is sized from them
        # (Nemotron-H's time_step_limit [0.0, Infinity]); the parser checks every float it reads.
        return
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise SizingError(path, _short(value), "an integer within 64 bits")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            check_numbers(item, f"{path}:{key}" if depth == 0 else f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_numbers(item, f"{path}[{i}]", depth + 1)
        return
    raise SizingError(path, type(value).__name__, "a JSON value")


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:10] + "..." + text[-6:] + f" ({len(text)} digits)"


@lru_cache(maxsize=1)
def _raw() -> Mapping[str, Any]:
    raw: Mapping[str, Any] = json.loads(resources.files("fitgate.sizing").joinpath("data/hf_defaults.json").read_text())
    return raw


def _table() -> Mapping[str, Any]:
    table: Mapping[str, Any] = _raw()["model_types"]
    return table


def base_model_class(model_type: object) -> str | None:
    """The base model class transformers gives a ``model_type`` (``MODEL_MAPPING_NAMES``, from the generated table)."""
    classes: Mapping[str, str] = _raw()["model_classes"]
    return classes.get(model_type) if isinstance(model_type, str) else None


#: Model types vLLM builds with another type's class (its ``_CONFIG_REGISTRY`` in
#: vllm/transformers_utils/config.py, 0.33.0 L122-176): the defaults are that class's.
VLLM_CONFIG_CLASSES = {"kimi_k2": "deepseek_v3", "deepseek_v32": "deepseek_v3"}
#: Model types vLLM builds with a class of its own, not transformers' (the same registry, L155-156:
#: MiniMax M3's ``MiniMaxM3Config`` keeps ``sparse_attention_config``, which transformers' class drops).
VLLM_OWN_CONFIG_CLASSES = frozenset({"minimax_m3_vl", "minimax_m3_mtp"})


def normalize(config: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The config as vLLM sees it: class defaults filled in, aliases renamed, sub-configs completed.

    Returns the filled-in mapping and notes (for example that the model type is not one transformers
    knows, so the raw keys were used).

    Raises:
        SizingError: A number in the file is not finite, too large, or nested too deep.
    """
    check_numbers(config)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        return dict(config), ("config.json has no model_type: read as written, without transformers' defaults",)
    if model_type in VLLM_OWN_CONFIG_CLASSES:
        return dict(config), (f"vLLM builds model_type {model_type!r} with its own config class: read as written",)
    model_type = VLLM_CONFIG_CLASSES.get(model_type, model_type)
    if model_type not in _table():
        return dict(config), (f"transformers does not know model_type {model_type!r}: config.json read as written",)
    return _fill(config, model_type), ()


def with_attribute_names(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with each ``attribute_map`` name of its class readable, as ``getattr`` on the class reads it.

    :func:`normalize` renames an alias to the key the class stores (GPTBigCode keeps ``n_embd``); vLLM reads
    ``hf_config.hidden_size``, which the class answers from ``n_embd``. A name already set is kept.
    """
    entry = _table().get(str(config.get("model_type")))
    out = dict(config)
    if entry is None:
        return out
    for name, stored in entry["aliases"].items():
        if name not in out and stored in out:
            out[name] = out[stored]
    return out


def _fill(raw: Mapping[str, Any], model_type: str, depth: int = 0) -> dict[str, Any]:
    entry = _table().get(model_type)
    if entry is None or depth > 2:
        return dict(raw)
    aliases: Mapping[str, str] = entry["aliases"]
    out: dict[str, Any] = dict(entry["defaults"])
    for key, value in raw.items():
        out[aliases.get(key, key)] = value
    out["model_type"] = model_type  # the class's, as its to_dict() writes it
    sub_configs: Mapping[str, str | None] = entry["sub_configs"]
    for key, sub_type in sub_configs.items():
        sub_raw = raw.get(key)
        if sub_raw is None:
            # A composite class builds a missing text config from the top-level keys (Qwen2.5-VL's
            # language model is written at the top level), any other missing sub-config from defaults.
            sub_raw = (
                {k: v for k, v in raw.items() if not isinstance(v, Mapping) and k != "model_type"}
                if key == "text_config"
                else {}
            )
        if not isinstance(sub_raw, Mapping):
            continue
        named = sub_raw.get("model_type")
        named = VLLM_CONFIG_CLASSES.get(named, named) if isinstance(named, str) else None
        chosen = named if named in _table() else sub_type
        if chosen:
            out[key] = _fill(sub_raw, chosen, depth + 1)
    return out


#: Bounds of ``--hf-overrides`` (a ModelDeployment's ``model.hfOverrides``, a workload's flag): JSON bytes, nesting.
MAX_HF_OVERRIDES_BYTES = 16384
MAX_HF_OVERRIDES_DEPTH = 8
#: ``--hf-overrides`` keys whose dict value updates a nested sub-config rather than replacing it: the
#: sub-configs transformers builds as ``PretrainedConfig`` objects (vLLM's ``_apply_dict_overrides`` recurses into
#: those, config/model.py 0.25.0 L461-476); any other dict (``rope_scaling``, ``quantization_config``) is replaced.
_NESTED_CONFIGS = frozenset(
    {"text_config", "vision_config", "audio_config", "llm_config", "language_config", "thinker_config"}
)


def apply_hf_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``config.json`` with vLLM's ``--hf-overrides`` applied, as vLLM applies them before reading the model.

    Flat values update the top level (``config.update``, transformers_utils/config.py 0.25.0 L760-762); a dict
    value updates a nested sub-config key by key, or replaces any other key (config/model.py 0.25.0 L461-476,
    L517-531, L566-567). So ``{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, ...}}`` turns on YaRN and
    raises the derived max_model_len as vLLM does.
    """
    merged = dict(config)
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and key in _NESTED_CONFIGS and isinstance(current, Mapping):
            merged[key] = apply_hf_overrides(current, value)
        else:
            merged[key] = value
    return merged


def json_depth(value: object) -> int:
    """How deeply a decoded JSON value nests (0 for a scalar)."""
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def parse_hf_overrides(text: str) -> dict[str, Any] | None:
    """``--hf-overrides`` as vLLM's flag takes it: a JSON object, bounded in bytes and nesting (None: it is not)."""
    try:
        value = json.loads(text) if len(text) <= MAX_HF_OVERRIDES_BYTES else None
    except (ValueError, RecursionError):  # ValueError: also a number past int()'s 4300 digits (hunt83 F3)
        return None
    return value if isinstance(value, dict) and json_depth(value) <= MAX_HF_OVERRIDES_DEPTH else None


#: The largest ``--rope-theta`` read (RoPE bases in use reach 10^8; past this it is not a base).
MAX_ROPE_THETA = 1e12

#: What :func:`parse_hf_overrides` accepts, in words.
OVERRIDES_EXPECTED = (
    f"a JSON object of at most {MAX_HF_OVERRIDES_BYTES} bytes, nested at most {MAX_HF_OVERRIDES_DEPTH} deep"
)
