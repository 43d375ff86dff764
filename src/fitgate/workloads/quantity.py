"""Kubernetes resource quantities (``81559Mi``, ``80G``, ``1.5Gi``, ``20k``) as integers.

The API server stores and returns every quantity in canonical form (apimachinery ``resource.Quantity``'s
``MarshalJSON``): a pod's ``nvidia.com/gpumem: 20000`` comes back, and reaches an admission webhook, as ``20k``.
Whatever reads a limit or a capacity reads it here (DRA device capacities, HAMi's MiB limits).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def _decimal(text: object) -> Decimal | None:
    """The exact value of a quantity, or None (a bool, more than 64 characters, not a quantity, not finite)."""
    if isinstance(text, bool):
        return None
    raw = str(text).strip()
    match = _QUANTITY.match(raw) if len(raw) <= 64 else None
    if not match:
        return None
    try:
        value = Decimal(match.group(1)) * Decimal(_SUFFIX.get(match.group(2) or "", 1))
    except InvalidOperation:
        return None
    return value if value.is_finite() and abs(value) <= Decimal(2**63) else None


def parse_quantity(text: object) -> int | None:
    """A Kubernetes quantity (``81559Mi``, ``80G``, ``1.5Gi``, ``85520809984``) as an integer (ceil), or None."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = _decimal(text)
    return None if value is None else int(value.to_integral_value(rounding="ROUND_CEILING"))


def whole_quantity(text: object) -> int | None:
    """A quantity that is a whole, non-negative number (a GPU count: ``8``, or ``1k`` as the API server writes 1000)."""
    value = _decimal(text)
    return int(value) if value is not None and value >= 0 and value == value.to_integral_value() else None
