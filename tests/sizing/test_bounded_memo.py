"""sizing/memo.py's BoundedMemo: the one bounded cache the operator, the reader's callers and the catalog use."""

from __future__ import annotations

import pytest

from fitgate.operator.gpus import cel
from fitgate.sizing.memo import MISS, BoundedMemo, Miss


def test_least_recently_used_leaves_first_and_the_bound_holds() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # a used: b is now the least recently used
    memo.put("c", 3)
    assert len(memo) == 2 and "b" not in memo and memo.get("a") == 1 and memo.get("c") == 3
    assert memo.get("b") is MISS


def test_none_is_a_value_not_a_miss() -> None:
    memo: BoundedMemo[str, int | None] = BoundedMemo(4)
    calls: list[str] = []

    def compute() -> None:
        calls.append("x")

    assert memo.get_or_compute("x", compute) is None
    assert memo.get_or_compute("x", compute) is None
    assert calls == ["x"] and not isinstance(memo.get("x"), Miss)


def test_a_failed_computation_is_not_remembered() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(4)

    def boom() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        memo.get_or_compute("k", boom)
    assert "k" not in memo and memo.get_or_compute("k", lambda: 7) == 7


def test_a_bound_below_one_is_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="size: 0 is not allowed"):
        BoundedMemo(0)


def test_compiled_cel_selectors_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # one of the migrated caches: a flood of distinct expressions no longer grows it past its bound
    monkeypatch.setattr(cel, "_COMPILED", BoundedMemo(3))
    for n in range(10):
        cel.compile_selector(f'device.attributes["gpu.nvidia.com"].index == {n}')
    assert len(cel._COMPILED) == 3
    again = cel.compile_selector('device.attributes["gpu.nvidia.com"].index == 9')
    assert again is cel.compile_selector('device.attributes["gpu.nvidia.com"].index == 9')
