"""A workload split over replicas, and suggestions that add replicas instead of cutting the concurrency (issue 24)."""

from __future__ import annotations

import pytest

from fitgate.sizing import ServingConfig, SizingError, Verdict, Workload, estimate, lookup_gpu, plan, suggest
from fitgate.sizing.advice import ADD_REPLICAS, CUT_CONCURRENCY, apply_suggestion
from fitgate.sizing.serving import MAX_REPLICAS
from fitgate.sizing.verdict_rules import TIGHT_FRACTION
from tests.conftest import model

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
L4 = lookup_gpu("L4")
SERVING = ServingConfig(max_model_len=8192)


def test_per_replica_is_the_ceiling_of_the_split() -> None:
    # 64 over 4 = 16; 65 over 4 = 16.25, so one replica holds 17; 1 over 8 still needs one request's room
    assert Workload(64, 8192, 4).per_replica == 16
    assert Workload(65, 8192, 4).per_replica == 17
    assert Workload(1, 8192, 8).per_replica == 1
    assert Workload(64, 8192).per_replica == 64


def test_each_replica_pool_holds_only_its_share() -> None:
    m = model(LLAMA)
    one = plan(m, L4, SERVING, Workload(64, 8192))
    four = plan(m, L4, SERVING, Workload(64, 8192, 4))
    assert one.kv.workload_blocks is not None and four.kv.workload_blocks is not None
    # an 8192-token request is 8192 / 16 = 512 blocks: 64 of them are 32768 blocks, a quarter of them 8192
    assert one.kv.workload_blocks == 64 * 512 and four.kv.workload_blocks == 16 * 512
    assert one.kv.num_blocks == four.kv.num_blocks  # the pool does not depend on the workload
    # 8192 blocks are still more than the L4's pool (2080): the reason says how the 64 were split
    assert one.verdict is Verdict.DOES_NOT_FIT and four.verdict is Verdict.DOES_NOT_FIT
    assert "16 concurrent requests per replica (64 over 4 replicas)" in four.reasons[0].message
    assert "64 concurrent requests x" in one.reasons[0].message


def test_replicas_are_bounded() -> None:
    with pytest.raises(SizingError, match="replicas"):
        plan(model(LLAMA), L4, SERVING, Workload(64, 8192, MAX_REPLICAS + 1))


def test_a_workload_beyond_the_pool_is_offered_replicas_that_fit_before_fewer_requests() -> None:
    m = model(LLAMA)
    current = plan(m, L4, SERVING, Workload(64, 8192))
    found = suggest(m, L4, SERVING, Workload(64, 8192), current, limit=50)
    spread = [s for s in found if s.changes == ((ADD_REPLICAS, s.changes[0][1]),)]
    assert len(spread) == 1, found
    s = spread[0]
    n = int(s.changes[0][1])
    assert s.replicas == n and s.total_gpus == n * s.gpus and s.verdict is Verdict.FITS
    # the share each replica holds is within 90 % of its pool: the pool holds floor(2080 x 0.9 / 512) = 3 requests
    # of 8192 tokens on an L4 at this release, so 64 requests need ceil(64 / 3) = 22 replicas
    assert current.kv.num_blocks is not None
    share = int(current.kv.num_blocks * TIGHT_FRACTION / 512)
    assert n == -(-64 // share)
    # it re-plans to its verdict, and one replica fewer does not fit within 90 %
    again = plan(m, L4, apply_suggestion(SERVING, s), Workload(64, 8192, n))
    assert again.verdict is Verdict.FITS
    assert plan(m, L4, SERVING, Workload(64, 8192, n - 1)).verdict is not Verdict.FITS
    # fewer requests is still offered, ranked after every change that serves the workload
    cut = [i for i, x in enumerate(found) if x.changes[0][0] == CUT_CONCURRENCY]
    serving_all = [i for i, x in enumerate(found) if not x.cuts_workload]
    assert cut and serving_all and max(serving_all) < min(cut)


def test_replicas_combined_with_a_change_are_computed_on_its_pool() -> None:
    m = model(LLAMA)
    current = plan(m, L4, SERVING, Workload(64, 8192))
    found = suggest(m, L4, SERVING, Workload(64, 8192), current, limit=50)
    combined = [s for s in found if len(s.changes) == 2 and s.changes[1][0] == ADD_REPLICAS]
    assert combined
    for s in combined:
        n = int(s.changes[1][1])
        changed = apply_suggestion(SERVING, s)
        assert plan(m, L4, changed, Workload(64, 8192, n)).verdict is s.verdict
        # the fewest for that change: one fewer replica leaves each one's share beyond 90 % of its pool (or the pool)
        assert plan(m, L4, changed, Workload(64, 8192, n - 1)).verdict is not Verdict.FITS or n == 1


def test_the_split_lowers_each_replicas_speed_load() -> None:
    m = model(LLAMA)
    h100 = lookup_gpu("H100")
    one = plan(m, h100, SERVING, Workload(64, 4096))
    four = plan(m, h100, SERVING, Workload(64, 4096, 4))
    assert estimate(m, one).batch == 64 and estimate(m, four).batch == 16
