"""The one bounded reader of the JSON objects vLLM's flags take (``--limit-mm-per-prompt``, ``--eplb-config`` ...).

Each flag's parser reads its keys from what this returns; the size bound, the parse and the one-line error naming the
flag live here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from fitgate.sizing.errors import SizingError

_INT = TypeAdapter(int)
#: Longer text is not a count any flag takes (and int() refuses past 4300 digits).
_MAX_NUMBER_CHARS = 32


#: vLLM's human-readable number suffixes: ``k/m/g/t`` decimal, ``K/M/G/T`` binary (utils/argparse_utils.py 0.34.0
#: L30-75 ``human_readable_int``).
HUMAN_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_QUOTED = re.compile(r'("(?:[^"\\]|\\.)*")')
#: At most 18 digits each side of the point, as workloads.flagvalues.human_int reads them: a longer run is no match
#: (``\b`` needs its first digit), so int(float(...)) never meets an infinity.
_SUFFIXED = re.compile(r"\b(\d{1,18}(?:\.\d{1,18})?)([kKmMgGtT])\b")


def expand_human_numbers(text: str) -> str:
    """A config flag's JSON with its bare ``80g`` / ``1k`` / ``2K`` numbers written out, as vLLM reads it.

    engine/arg_utils.py 0.34.0 L300-318 ``_expand_json_human_readable_numbers``, applied to every config-object
    flag before it is validated (L367-372): ``k/m/g/t`` decimal, ``K/M/G/T`` binary (utils/argparse_utils.py L30-75),
    outside quoted strings only; a decimal with a binary suffix is left as it is (vLLM refuses it). hunt107 F4:
    ``--kv-transfer-config '{..."cpu_bytes_to_use": 80g}'`` was Invalid.
    """
    if len(text) > 65536:
        return text

    def number(m: re.Match[str]) -> str:
        value, suffix = m.groups()
        if suffix.islower():
            return str(int(float(value) * HUMAN_SUFFIXES[suffix]))
        return str(int(value) * HUMAN_SUFFIXES[suffix]) if value.isdigit() else m.group()

    parts = _QUOTED.split(text)
    return "".join(_SUFFIXED.sub(number, part) if i % 2 == 0 else part for i, part in enumerate(parts))


def json_object(text: str, field: str, limit: int, example: str = "") -> dict[str, Any]:
    """``text`` as a JSON object, or a :class:`SizingError` naming ``field``.

    Longer than ``limit`` characters, not JSON (or nested past Python's recursion limit) or not an object is refused
    before anything reads it; ``example`` shows the expected shape in the message.
    """
    if len(text) > limit:
        raise SizingError(field, f"{len(text)} characters", f"at most {limit}")
    expected = f"a JSON object such as {example}" if example else "a JSON object"
    try:
        data = json.loads(expand_human_numbers(text))
    except (ValueError, RecursionError):
        raise SizingError(field, text[:80], expected) from None
    if not isinstance(data, dict):
        raise SizingError(field, text[:80], expected)
    return data


def whole_number(value: object) -> int | None:
    """``value`` as vLLM's config classes read an ``int`` field, or None when they would refuse it.

    vLLM's configs are pydantic dataclasses in lax mode (``config/utils.py`` 0.34.0 L46-77, ``ConfigDict(extra=
    "forbid")``, not strict): ``"4"``, ``4.0`` and ``"4.0"`` are 4 (hunt90 F1: KServe's LLMInferenceService keeps a
    speculator's ``num_speculative_tokens`` as a string, and ``"4"`` was Invalid), and ``true`` is 1 (hunt92 F3).
    """
    if not isinstance(value, int | float | str):
        return None
    if isinstance(value, str) and len(value) > _MAX_NUMBER_CHARS:
        return None
    try:
        return _INT.validate_python(value)
    except ValidationError:
        return None
