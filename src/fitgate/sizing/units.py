"""Byte arithmetic and human sizes.

All sizes inside fitgate are integers in bytes; GiB appear only when formatting.
"""

from __future__ import annotations

import math
import re

from fitgate.sizing.errors import SizingError

KiB = 1024
MiB = 1024**2
GiB = 1024**3

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": KiB,
    "kib": KiB,
    "mi": MiB,
    "mib": MiB,
    "gi": GiB,
    "gib": GiB,
    "ti": 1024**4,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers (vLLM's ``cdiv``)."""
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """Round ``a`` up to a multiple of ``multiple``."""
    return cdiv(a, multiple) * multiple


#: No memory size fitgate reads is this large (sizes enter int64 arithmetic and Kubernetes quantities).
MAX_SIZE_BYTES = 1 << 60


def parse_size(text: str, field: str = "size") -> int:
    """Parse a memory size such as ``79.19GiB``, ``81559MiB``, ``80GB`` or ``80Gi`` into bytes.

    Decimal units (GB, MB) are powers of 1000 and binary units (GiB, MiB, Gi) powers of 1024,
    as in Kubernetes quantities. A bare number is bytes.

    Raises:
        SizingError: The text is not a positive size.
    """
    match = _SIZE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _SIZE_UNITS:
        raise SizingError(field, text, "a size such as 79.19GiB, 81559MiB, 80GB or 80Gi")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(value) or value >= MAX_SIZE_BYTES:
        raise SizingError(field, text, "a size below 1 EiB")
    if value < 1:
        raise SizingError(field, text, "a size greater than zero")
    return int(value)


def gib(n_bytes: int | float) -> float:
    """Bytes as GiB (float), for display only."""
    return n_bytes / GiB


def fmt_gib(n_bytes: int | float) -> str:
    """Bytes formatted as ``12.34 GiB``."""
    return f"{n_bytes / GiB:.2f} GiB"
