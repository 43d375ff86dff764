"""The one bounded reader of the JSON objects vLLM's flags take (``--limit-mm-per-prompt``, ``--eplb-config`` ...).

Each flag's parser reads its keys from what this returns; the size bound, the parse and the one-line error naming the
flag live here.
"""

from __future__ import annotations

import json
from typing import Any

from fitgate.sizing.errors import SizingError


def json_object(text: str, field: str, limit: int, example: str = "") -> dict[str, Any]:
    """``text`` as a JSON object, or a :class:`SizingError` naming ``field``.

    Longer than ``limit`` characters, not JSON (or nested past Python's recursion limit) or not an object is refused
    before anything reads it; ``example`` shows the expected shape in the message.
    """
    if len(text) > limit:
        raise SizingError(field, f"{len(text)} characters", f"at most {limit}")
    expected = f"a JSON object such as {example}" if example else "a JSON object"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise SizingError(field, text[:80], expected) from None
    if not isinstance(data, dict):
        raise SizingError(field, text[:80], expected)
    return data
