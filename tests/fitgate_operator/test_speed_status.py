"""status.performance (issue 24): a ModelDeployment's speed at its declared ISL / OSL, against its latency targets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.cli import main
from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.parsing import parsed
from fitgate.operator.decision.status import edit_text, status_of
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
    assert enough["meetsTargets"] is True and needed * enough["requestsPerSecond"] >= 40.0
    if needed > 1:
        raw["replicas"] = needed - 1
        assert status(raw)["performance"]["meetsTargets"] is False


def test_a_request_rate_without_targets_names_the_replicas_that_absorb_it() -> None:
    # hunt92 F6: 100 requests/s of 1024 + 256 tokens saturates one Llama-3.1-8B H100 replica; with no targets the
    # status said saturated and no replica count, where `fitgate recommend` names them. replicasForTargets is now the
    # fewest that are not saturated; at that many the status is not saturated, one fewer is.
    raw = spec(inputTokens=1024, outputTokens=256, requestRate=100.0)
    one = status(raw)["performance"]
    assert one["saturated"] and one["meetsTargets"] is None
    needed = one["replicasForTargets"]
    assert needed is not None and needed > 1
    raw["replicas"] = needed
    assert not status(raw)["performance"]["saturated"]
    raw["replicas"] = needed - 1
    assert status(raw)["performance"]["saturated"]


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


def test_concurrent_requests_are_split_over_the_replicas_for_the_kv_pool_too() -> None:
    # 512 requests of 4,096 tokens: 512 x 256 = 131,072 blocks, beyond one H100's pool (Llama-3.1-8B, 30,368)
    raw = spec()
    raw["workload"]["concurrentRequests"] = 512
    one = evaluate(parse_spec(raw), model(LLAMA), gpus(H100))
    assert one.verdict is Verdict.DOES_NOT_FIT
    # the fixes serve all 512: more replicas (spec.replicas), alone or with another change, before fewer requests
    spread = [s for s in one.suggestions if s.changes[-1][0] == "replicas"]
    alone = [s for s in spread if len(s.changes) == 1]
    assert alone and not any(s.cuts_workload for s in one.suggestions), one.suggestions
    # the first Fits suggestion (fewest GPUs: fp8 KV over 3 replicas) as the message words it: its spec fields and
    # every replica's GPUs
    first = next(s for s in one.suggestions if s.verdict is Verdict.FITS)
    assert first in spread and first.replicas > 1
    words = f"smallest change that fits: {edit_text(first)} ({first.total_gpus} GPUs: {first.replicas} replicas x 1)"
    assert words in one.message, one.message
    n = alone[0].replicas
    assert "spec.replicas: " + str(n) in edit_text(alone[0])
    # 30,368 x 0.9 / 256 = 106 requests a replica within 90 % of its pool: ceil(512 / 106) = 5
    assert n == 5
    raw["replicas"] = n
    assert evaluate(parse_spec(raw), model(LLAMA), gpus(H100)).verdict is Verdict.FITS
    raw["replicas"] = n - 1  # the fewest: one fewer is not within 90 % of each pool
    assert evaluate(parse_spec(raw), model(LLAMA), gpus(H100)).verdict is not Verdict.FITS


def test_fitgate_check_shows_what_status_performance_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt91 G8: the workload's targets, answered offline as the operator's status answers them (same code path)
    raw = spec(inputTokens=1024, outputTokens=256, requestRate=40.0, ttftMs=2000)
    raw["placement"] = {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}
    manifest = tmp_path / "md.yaml"

    def check(replicas: int) -> tuple[dict[str, Any], dict[str, Any], str]:
        doc = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "m"}}
        manifest.write_text(yaml.safe_dump({**doc, "spec": {**raw, "replicas": replicas}}))
        assert main(["check", str(manifest), "-o", "json"]) == 0
        (result,) = json.loads(capsys.readouterr().out)
        assert main(["check", str(manifest)]) == 0
        text = capsys.readouterr().out
        return result["performance"], status({**raw, "replicas": replicas})["performance"], text

    one, operator_one, text = check(1)
    # the operator's fields, with its values (the status drops nulls as the check's JSON does)
    assert one == {k: v for k, v in operator_one.items() if v is not None}
    # one replica cannot serve 40 req/s: TTFT unbounded (-1), the targets missed, 2 replicas needed
    assert (one["saturated"], one["ttftMs"], one["meetsTargets"], one["replicasForTargets"]) == (True, -1.0, False, 2)
    assert "  performance: per replica of 1: TTFT unbounded (saturated)" in text
    assert "saturated: the request rate is more than the replicas serve" in text
    assert "targets TTFT <= 2000 ms: not met at 1 replica, replicasForTargets 2" in text
    two, operator_two, text = check(2)
    assert two == {k: v for k, v in operator_two.items() if v is not None}
    # 40 req/s over 2 replicas: each serves 20, and 2 x 20 = 40 within the 2000 ms TTFT
    assert (two["saturated"], two["requestsPerSecond"], two["meetsTargets"]) == (False, 20.0, True)
    assert "targets TTFT <= 2000 ms: met at 2 replicas, replicasForTargets 2" in text
    assert f"TTFT {two['ttftMs']:g} ms [{two['ttftRangeMs'][0]:g}-{two['ttftRangeMs'][1]:g}]" in text


def test_fitgate_check_without_a_split_has_no_performance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "md.yaml"
    doc = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "m"}, "spec": spec()}
    manifest.write_text(yaml.safe_dump(doc))
    assert main(["check", str(manifest), "--gpu", "H100", "-o", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["performance"] is None
    assert main(["check", str(manifest), "--gpu", "H100"]) == 0
    assert "performance:" not in capsys.readouterr().out
