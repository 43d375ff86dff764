"""Generate ``src/fitgate/sizing/data/hf_defaults.json`` from transformers' configuration classes.

vLLM reads ``config.json`` through transformers (``AutoConfig``): keys a file omits take the class's
defaults, and alias keys (``attribute_map``: ``n_head`` -> ``num_attention_heads``) are renamed. fitgate
applies the same defaults and aliases from this table at run time instead of importing transformers
(whose import alone takes longer than a whole ``fitgate plan``); ``tests/sizing/test_hf_defaults.py``
regenerates the table and proves it equal to the committed file, and proves that the architecture
parsed through the table equals the one parsed through transformers itself for every real config in
the test corpus.

Usage: python scripts/gen_hf_defaults.py > src/fitgate/sizing/data/hf_defaults.json
"""

from __future__ import annotations

import json
import logging
import math
import sys
import warnings
from typing import Any

#: PreTrainedConfig's own generic keys (generation, labels, tokenizer ids...) carry nothing about
#: memory; ``tie_word_embeddings`` does and is kept.
_KEEP_BASE = {"tie_word_embeddings"}
_MAX_LIST = 4096
#: Per-layer lists are computed from other keys (a pattern, the layer count): never defaults.
_PER_LAYER = {"layer_types", "layers_block_type", "mtp_layers_block_type", "no_rope_layers", "mlp_only_layers"}
#: A second build with these changed shows which defaults are computed from them (head_dim from
#: hidden_size / heads, layer_types from num_hidden_layers...): those stay out of the table, and
#: fitgate's parser computes them from the file's values as the class would.
_PERTURB = {
    "num_hidden_layers": 7,
    "hidden_size": 1800,
    "num_attention_heads": 12,
    "num_key_value_heads": 6,
    "max_position_embeddings": 12345,
    "vocab_size": 54321,
    "intermediate_size": 4321,
    "sliding_window": 777,
    # GPTBigCodeConfig computes num_key_value_heads as 1 if multi_query else n_head (L82, hunt87): not a default
    "multi_query": False,
}


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return not (isinstance(value, float) and not math.isfinite(value))
    if isinstance(value, list):
        return len(value) <= _MAX_LIST and all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def _build(cls: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(cls(**kwargs).to_dict())
    except Exception:
        return {}


def _constant(key: str, value: Any, variant: dict[str, Any], without: dict[str, dict[str, Any]]) -> bool:
    """A default that does not move when the other keys do (so not computed from them)."""
    if key in without:
        other = without[key]
        return key not in other or other[key] == value
    return key not in variant or variant[key] == value


def build_table(only: list[str] | None = None) -> dict[str, Any]:
    """model_type -> {defaults, aliases, sub_configs} for every class transformers registers (or ``only``)."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    import transformers  # noqa: PLC0415
    from transformers import CONFIG_MAPPING, PretrainedConfig  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = set(PretrainedConfig().to_dict()) - _KEEP_BASE
        table: dict[str, Any] = {}
        for model_type in only if only is not None else sorted(CONFIG_MAPPING.keys()):
            cls = CONFIG_MAPPING[model_type]
            try:
                config = cls()
            except Exception:
                continue
            subs: dict[str, str | None] = {}
            for key in getattr(cls, "sub_configs", None) or {}:
                sub = getattr(config, key, None)
                subs[key] = getattr(sub, "model_type", None) or None
            variant = _build(cls, _PERTURB)
            without = {key: _build(cls, {k: v for k, v in _PERTURB.items() if k != key}) for key in _PERTURB}
            layers = config.to_dict().get("num_hidden_layers")
            defaults = {
                key: value
                for key, value in config.to_dict().items()
                if key not in base
                and key not in subs
                and key not in _PER_LAYER
                and key != "model_type"
                and _jsonable(value)
                and not (isinstance(value, list) and isinstance(layers, int) and len(value) == layers > 1)
                and _constant(key, value, variant, without)
            }
            aliases = {str(k): str(v) for k, v in (getattr(cls, "attribute_map", None) or {}).items()}
            table[model_type] = {"defaults": defaults, "aliases": aliases, "sub_configs": subs}
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES  # noqa: PLC0415

    # the base model class vLLM names for a config without ``architectures`` (transformers_utils/config.py 0.34.0
    # L984-994)
    classes = {str(k): str(v) for k, v in MODEL_MAPPING_NAMES.items()}
    return {"_transformers_version": transformers.__version__, "model_types": table, "model_classes": classes}


def main() -> None:
    """Print the table as JSON (sorted keys, one model type per line)."""
    table = build_table()
    out = sys.stdout
    out.write('{"_comment": "Generated by scripts/gen_hf_defaults.py from transformers\' configuration classes; ')
    out.write('do not edit. tests/sizing/test_hf_defaults.py proves it equal to transformers.",\n')
    out.write(f' "_transformers_version": {json.dumps(table["_transformers_version"])},\n "model_types": {{\n')
    items = sorted(table["model_types"].items())
    for i, (model_type, entry) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        out.write(f"  {json.dumps(model_type)}: {json.dumps(entry, sort_keys=True, separators=(',', ':'))}{sep}\n")
    out.write(" },\n")
    out.write(f' "model_classes": {json.dumps(table["model_classes"], sort_keys=True, separators=(",", ":"))}\n}}\n')


if __name__ == "__main__":
    main()
