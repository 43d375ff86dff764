"""blocks_within bisects where vLLM steps down one block at a time: the same answer on every input."""

from __future__ import annotations

import random

from fitgate.sizing.extensible import GRANULE_BYTES, blocks_within
from fitgate.sizing.units import KiB, MiB


def _vllm_loop(num_bytes: int, strides: tuple[int, ...], capacity: int) -> int:
    """extensible_kv_cache.py 0.34.0 L335-348 as written: step down until the rounded footprint fits."""
    per_block = sum(strides)
    if num_bytes <= 0 or per_block <= 0:
        return 0
    blocks = min(num_bytes // per_block, capacity)
    while blocks > 0 and sum(-(-blocks * s // GRANULE_BYTES) * GRANULE_BYTES for s in strides) > num_bytes:
        blocks -= 1
    return blocks


def test_bisection_equals_the_step_down_loop() -> None:
    rng = random.Random(23)
    shapes = [
        lambda: (rng.choice([16, 32, 64, 128]) * KiB,) * rng.randint(1, 96),  # equal per-layer segments
        lambda: tuple(rng.choice([8, 24, 72, 144, 576]) * KiB for _ in range(rng.randint(1, 60))),  # mixed
        lambda: (rng.randint(1, 5 * MiB),),  # one packed segment
        lambda: tuple(rng.randint(1, 3 * MiB) for _ in range(rng.randint(1, 8))),
    ]
    for _ in range(3000):
        strides = rng.choice(shapes)()
        num_bytes = rng.choice([rng.randint(-5, 4 * MiB), rng.randint(0, 80 * 1024 * MiB)])
        capacity = rng.choice([10**9, rng.randint(0, 5000)])
        assert blocks_within(num_bytes, strides, capacity) == _vllm_loop(num_bytes, strides, capacity), (
            num_bytes,
            strides,
            capacity,
        )


def test_known_answer_rounding_per_segment() -> None:
    # Two segments of 1 MiB per block with a 2 MiB granule: 3 blocks take 2 x ceil(3 MiB / 2 MiB) x 2 MiB
    # = 8 MiB; 7 MiB of room holds 2 blocks (2 x 2 MiB = 4 MiB), not 3 (7 MiB // 2 MiB per block).
    assert 2 * MiB == GRANULE_BYTES
    assert blocks_within(7 * MiB, [MiB, MiB], 100) == 2
    assert blocks_within(8 * MiB, [MiB, MiB], 100) == 4
