"""status.performance (issue 24): a ModelDeployment's speed at its declared ISL / OSL, against its latency targets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.parsing import parsed
from fitgate.operator.decision.status import status_of
from fitgate.operator.schema.api import SpecError, parse_spec
from fitgate.sizing import Verdict
from fitgate.sizing.capacity import MAX_REPLICAS
from tests.conftest import model
from tests.fitgate_operator.test_operator import H100, gpus

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def spec(**workload: Any) -> dict[str, Any]:
    return {
        "model": {"name": LLAMA, "source": "catalog"},
        "serving": {"maxModelLen": 8192},
        "workload": {"concurrentRequests": 16, "contextTokens": 4096, **workload},
    }


def status(raw: dict[str, Any]) -> dict[str, Any]:
    ev = evaluate(parse_spec(raw), model(LLAMA), gpus(H100))
    assert ev.verdict is Verdict.FITS
    return status_of(ev, 1, None)


def test_without_a_split_there_is_no_estimate() -> None:
    assert status(spec())["performance"] is None


def test_the_estimate_at_the_load_and_the_targets() -> None:
    perf = status(spec(inputTokens=3072, outputTokens=1024))["performance"]
    assert perf["concurrency"] == 16 and perf["replicas"] == 1 and perf["meetsTargets"] is None
    assert 0 < perf["tpotMs"] < perf["ttftMs"] * 100 and perf["ttftRangeMs"][0] <= perf["ttftMs"]
    assert perf["tpotRangeMs"][0] <= perf["tpotMs"] <= perf["tpotRangeMs"][1]
    # a target the estimate meets, and one it misses by 10 %: meetsTargets follows tpotMs, and the replicas needed
    # for the missed one split the 16 requests until a replica's TPOT is within it
    met = status(spec(inputTokens=3072, outputTokens=1024, tpotMs=perf["tpotMs"] * 1.1))["performance"]
    assert met["meetsTargets"] is True and met["replicasForTargets"] == 1
    missed = status(spec(inputTokens=3072, outputTokens=1024, tpotMs=perf["tpotMs"] * 0.9))["performance"]
    assert missed["meetsTargets"] is False and 1 < missed["replicasForTargets"] <= MAX_REPLICAS


def test_a_request_rate_is_split_over_the_replicas_and_the_replicas_needed_hold_it() -> None:
    raw = spec(inputTokens=1024, outputTokens=256, requestRate=40.0, ttftMs=2000)
    one = status(raw)["performance"]
    raw["replicas"] = 4
    four = status(raw)["performance"]
    # 40 req/s over 4 replicas: each serves 10 req/s, and Little's law gives it a quarter of one's concurrency
    assert four["replicas"] == 4 and four["concurrency"] < one["concurrency"]
    needed = one["replicasForTargets"]
    assert needed is not None
    raw["replicas"] = needed
    enough = status(raw)["performance"]
    # replicas x per-replica rate >= the target rate, and each replica within the TTFT target
    assert enough["meetsTargets"] is True and needed * enough["requestsPerSecond"] >= 40.0 * 0.999
    if needed > 1:
        raw["replicas"] = needed - 1
        assert status(raw)["performance"]["meetsTargets"] is False


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"inputTokens": 1024}, "workload.inputTokens and workload.outputTokens go together"),
        ({"inputTokens": 4000, "outputTokens": 200}, "their sum cannot exceed contextTokens"),
        (
            {"ttftMs": 500},
            "need inputTokens and outputTokens (the load they are estimated at) (got ttftMs 500 without inputTokens)",
        ),
        ({"requestRate": 0}, "workload.requestRate"),
    ],
)
def test_bad_loads_are_refused_naming_the_field(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(spec(**workload))
    parsed(spec())  # the workload-only path of a spec seen before says the same
    with pytest.raises(SpecError, match=re.escape(message)):
        parsed(spec(**workload))
