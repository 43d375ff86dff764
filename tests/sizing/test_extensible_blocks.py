"""``blocks_within`` by bisection gives vLLM's step-down answer (extensible_kv_cache.py 0.34.0 L343-348)."""

from __future__ import annotations

import random

from fitgate.sizing.extensible import GRANULE_BYTES, _footprint, blocks_within


def _step_down(num_bytes: int, strides: list[int], capacity: int) -> int:
    """vLLM's own loop: start at bytes // per-block bytes and step down one block until the footprint fits."""
    per_block = sum(strides)
    if num_bytes <= 0 or per_block <= 0:
        return 0
    blocks = min(num_bytes // per_block, capacity)
    while blocks > 0 and _footprint(blocks, strides) > num_bytes:
        blocks -= 1
    return blocks


def test_bisection_equals_the_step_down_loop() -> None:
    rng = random.Random(24)
    for _ in range(3000):
        strides = [
            rng.choice([0, 1, 7, 4096, 65536, 131072, rng.randint(1, 300_000)]) for _ in range(rng.randint(1, 80))
        ]
        num_bytes = rng.randint(-5, 2 ** rng.randint(10, 40))
        capacity = rng.randint(0, 10**7)
        assert blocks_within(num_bytes, strides, capacity) == _step_down(num_bytes, strides, capacity)


def test_known_answer_rounding_per_segment() -> None:
    # Two segments of 1 MiB per block with a 2 MiB granule: 3 blocks take 2 x ceil(3 MiB / 2 MiB) x 2 MiB
    # = 8 MiB; 7 MiB of room holds 2 blocks (2 x 2 MiB = 4 MiB), not 3 (7 MiB // 2 MiB per block).
    mib = 2**20
    assert 2 * mib == GRANULE_BYTES
    assert blocks_within(7 * mib, [mib, mib], 100) == 2
    assert blocks_within(8 * mib, [mib, mib], 100) == 4
