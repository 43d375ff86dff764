"""The operator's observer (operator/observation/observe.py) against real loopback vLLM metrics servers: pods as the
API server returns them, status.observed, PredictionVerified / AtCapacity, the drift Event, and faults
that must not block it."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.pricing import OperatorPrices
from fitgate.operator.decision.status import kept_conditions, same_outcome
from fitgate.operator.observation.observe import Observer, drop_conditions, no_log, put_conditions, targets
from fitgate.operator.observation.scrape import ScrapeLimits
from fitgate.operator.schema.api import ModelDeploymentStatus, parse_spec
from fitgate.sizing.cost import parse_gpu_prices
from tests.vllm_metrics_server import VllmMetrics

# A real failed start (tests/fixtures/vllm-logs/SOURCE.md): gpt-oss-20b on an H100, CUDA out of memory.
OOM_LOG = (
    Path(__file__).parents[1]
    / "fixtures"
    / "vllm-logs"
    / "openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192.FAILED.log.gz"
)


def pod(name: str, port: int, *, ip: str = "127.0.0.1", phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "vllm"}},
        "spec": {"containers": [{"name": "vllm", "ports": [{"name": "http", "containerPort": port}]}]},
        "status": {"phase": phase, "podIP": ip, **status},
    }


def spec(**observe: Any) -> Any:
    return parse_spec(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
            "serving": {"tensorParallelSize": 2},
            "observe": {"selector": {"app": "vllm"}, **observe},
        }
    )


STATUS = {"gpuProduct": "NVIDIA-H100-80GB-HBM3", "kvCache": {"numGpuBlocks": 31_000, "blockSize": 16}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def servers() -> Iterator[list[VllmMetrics]]:
    with VllmMetrics(num_gpu_blocks=31_000) as a, VllmMetrics(num_gpu_blocks=30_900) as b:
        yield [a, b]


def test_targets_read_ports_and_failed_starts() -> None:
    crashed = pod(
        "c",
        1,
        phase="Running",
        containerStatuses=[
            {
                "name": "vllm",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1}},
            }
        ],
    )
    pending = pod("p", 1, phase="Pending", ip="")
    gone = pod("g", 1)
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    unnamed = pod("u", 1)
    unnamed["spec"]["containers"][0]["ports"] = [{"containerPort": 9000}, {"name": "metrics", "containerPort": 9100}]
    got = targets([pod("b", 8000, ip="fd00::5"), crashed, pending, gone, unnamed], None)
    assert [(t.pod, t.url, t.failed_container, t.previous) for t in got] == [
        ("b", "http://[fd00::5]:8000/metrics", None, False),
        ("c", None, "vllm", True),
        ("u", "http://127.0.0.1:9100/metrics", None, False),
    ]
    assert targets([pod("b", 8000)], 9999)[0].url == "http://127.0.0.1:9999/metrics"


def test_round_writes_observed_conditions_and_drift_event(servers: list[VllmMetrics]) -> None:
    a, b = servers
    pods = [pod("a", a.port), pod("b", b.port)]

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        assert (namespace, selector) == ("ns", "app=vllm")
        return pods

    clock = Clock()
    observer = Observer(list_pods, no_log, prices=OperatorPrices(chart=parse_gpu_prices("H100=2.5")), clock=clock)
    s = spec(intervalSeconds=30)

    async def run() -> list[Any]:
        out = []
        assert observer.due("ns", "m", s)
        out.append(await observer.round("ns", "m", s, STATUS, 3))
        assert not observer.due("ns", "m", s)
        a.set(running=4, kv_usage=0.5, preemptions=0, queries=1000, hits=400, requests=30)
        a.set(prompt_tokens=30_000, generation_tokens=6_000)
        b.set(running=1, kv_usage=0.97, requests=10, generation_tokens=6_000)
        clock.now += 60
        assert observer.due("ns", "m", s)
        out.append(await observer.round("ns", "m", s, {**STATUS, **out[-1].status}, 3))
        await observer.close()
        return out

    first, second = asyncio.run(run())
    o = second.status["observed"]
    ModelDeploymentStatus.model_validate({"observed": o, "conditions": second.status["conditions"]})
    assert o["pods"] == 2 and o["podsFailed"] == 0
    assert o["observedBlocks"] == 30_900 and o["predictedBlocks"] == 31_000
    assert o["blocksErrorRatio"] == pytest.approx(-0.0032, abs=1e-4)  # (30900 - 31000) / 31000
    assert o["peakKvUsage"] == 0.97
    assert o["prefixCacheHitRate"] == 0.4  # 400 / 1000
    assert o["tokensPerSecond"] == pytest.approx(700.0)  # (30000 + 6000 + 6000) / 60 s
    assert o["outputTokensPerSecond"] == pytest.approx(200.0)  # (6000 + 6000) / 60 s
    assert o["requestsCompleted"] == 40 and o["runningRequests"] == 5
    # 2.5 USD x 2 GPUs (TP 2) x 2 pods x 60 s / 3600 = 0.1667 USD for 40 requests
    assert o["usdPerRequest"] == pytest.approx(2.5 * 2 * 2 * 60 / 3600 / 40, rel=1e-4)
    assert o["gpuHourPriceUsd"] == 2.5
    assert o["priceBasis"] == "operator price (chart operator.prices, FITGATE_GPU_HOUR_PRICES)"
    conditions = {c["type"]: c for c in second.status["conditions"]}
    assert conditions["PredictionVerified"]["status"] == "True"
    assert conditions["AtCapacity"]["status"] == "True" and conditions["AtCapacity"]["reason"] == "KVCacheFull"
    assert first.event is None and second.event is None  # within 2 %: no drift


def test_drift_posts_one_event_and_spec_price_wins() -> None:
    with VllmMetrics(num_gpu_blocks=28_000) as server:

        async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
            return [pod("a", server.port)]

        clock = Clock()
        observer = Observer(list_pods, no_log, prices=OperatorPrices(chart=parse_gpu_prices("2.0")), clock=clock)
        s = parse_spec({**spec().model_dump(by_alias=True, exclude_none=True), "economics": {"gpuHourPriceUsd": 4.0}})

        async def run() -> list[Any]:
            out = []
            for _ in range(3):
                out.append(await observer.round("ns", "m", s, STATUS, 1))
                clock.now += 30
            await observer.close()
            return out

        rounds = asyncio.run(run())
    events = [r.event for r in rounds]
    assert events[0] == (
        "Warning",
        "PredictionDrift",
        "vLLM allocated 28000 KV blocks, fitgate predicted 31000 (-9.68 %; tolerance 2 %)",
    )
    assert events[1:] == [None, None]  # once, not every round
    verified = next(c for c in rounds[-1].status["conditions"] if c["type"] == "PredictionVerified")
    assert (verified["status"], verified["reason"]) == ("False", "PredictionDrift")
    assert rounds[-1].status["observed"]["gpuHourPriceUsd"] == 4.0
    assert rounds[-1].status["observed"]["priceBasis"] == "spec.economics.gpuHourPriceUsd"


def test_failed_pod_log_is_read_and_parsed() -> None:
    crashed = pod(
        "c",
        8000,
        containerStatuses=[
            {"name": "vllm", "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {}}}
        ],
    )
    asked: list[tuple[str, str, str, bool]] = []

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        return [crashed]

    async def read_log(namespace: str, name: str, container: str, previous: bool) -> str:
        asked.append((namespace, name, container, previous))
        lines = gzip.decompress(OOM_LOG.read_bytes()).decode().splitlines()
        return "\n".join(lines[-400:])  # what pods/log?tailLines=400 returns

    observer = Observer(list_pods, read_log)
    outcome = asyncio.run(observer.round("ns", "m", spec(), STATUS, 1))
    o = outcome.status["observed"]
    assert asked == [("ns", "c", "vllm", True)]
    assert o["pods"] == 0 and o["podsFailed"] == 1
    assert o["failure"].startswith(
        "out_of_memory: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB"
    )
    verified = next(c for c in outcome.status["conditions"] if c["type"] == "PredictionVerified")
    assert (verified["status"], verified["reason"]) == ("Unknown", "PodFailedToStart")


@pytest.mark.parametrize("mode", ["hang", "garbage", "huge", "redirect"])
def test_a_bad_pod_never_blocks_the_round(mode: str) -> None:
    with VllmMetrics(num_gpu_blocks=31_000) as good, VllmMetrics() as bad:
        bad.mode(mode)

        async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
            return [pod("good", good.port), pod("bad", bad.port)]

        observer = Observer(list_pods, no_log, limits=ScrapeLimits(timeout_s=1.0, max_bytes=1024 * 1024))

        async def run() -> Any:
            try:
                return await observer.round("ns", "m", spec(), STATUS, 1)
            finally:
                await observer.close()

        started = time.monotonic()
        outcome = asyncio.run(run())
        took = time.monotonic() - started
    o = outcome.status["observed"]
    assert took < 3.0, took
    assert o["pods"] == 1 and o["podsFailed"] == 1 and o["observedBlocks"] == 31_000
    assert len(o["errors"]) == 1 and o["errors"][0].startswith("bad: ")
    assert "\n" not in o["errors"][0]


def test_listing_failure_is_reported_not_raised() -> None:
    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        raise ConnectionError("API server unreachable")

    outcome = asyncio.run(Observer(list_pods, no_log).round("ns", "m", spec(), STATUS, 1))
    assert outcome.status["observed"]["errors"] == ["listing pods app=vllm: ConnectionError: API server unreachable"]
    assert {c["type"]: c["status"] for c in outcome.status["conditions"]} == {
        "PredictionVerified": "Unknown",
        "AtCapacity": "Unknown",
    }


def test_reconcile_keeps_the_observers_conditions() -> None:
    old = {
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": "X",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
            for t in ("Ready", "Fits", "PredictionVerified", "AtCapacity")
        ]
    }
    assert [c.type for c in kept_conditions(old)] == ["PredictionVerified", "AtCapacity"]


def test_metrics_series() -> None:
    m = Metrics()
    m.observed("ns", "m", 30_900, 494_400, -0.0032, True, 0.97, 0.0)
    text = m.exposition().decode()
    assert 'fitgate_observed_kv_blocks{name="m",namespace="ns"} 30900.0' in text
    assert 'fitgate_observed_kv_capacity_tokens{name="m",namespace="ns"} 494400.0' in text
    assert 'fitgate_prediction_error_ratio{name="m",namespace="ns"} -0.0032' in text
    assert 'fitgate_at_capacity{name="m",namespace="ns"} 1.0' in text
    m.forget("ns", "m")
    assert 'name="m"' not in m.exposition().decode()


def test_put_conditions_replaces_only_the_observers() -> None:
    body: dict[str, Any] = {
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "AtCapacity", "status": "True"}]}
    }
    put_conditions(body, [{"type": "AtCapacity", "status": "False"}, {"type": "PredictionVerified", "status": "True"}])
    assert body["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "AtCapacity", "status": "False"},
        {"type": "PredictionVerified", "status": "True"},
    ]
    drop_conditions(body)
    assert body["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    empty: dict[str, Any] = {}
    put_conditions(empty, [{"type": "AtCapacity", "status": "False"}])
    assert empty == {"status": {"conditions": [{"type": "AtCapacity", "status": "False"}]}}


def test_same_outcome_ignores_the_observers_fields() -> None:
    old = {"verdict": "Fits", "conditions": [], "observed": {"pods": 1}}
    assert same_outcome(old, {"verdict": "Fits", "conditions": []})
    assert not same_outcome(old, {"verdict": "Tight", "conditions": []})


def test_api_errors_are_one_line() -> None:
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    exc = ApiException(status=500, reason="Internal Server Error")
    exc.body = '{"kind":"Status","message":"Get \\"https://node:10250/containerLogs\\":\\n dial tcp: refused"}'

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        raise exc

    outcome = asyncio.run(Observer(list_pods, no_log).round("ns", "m", spec(), STATUS, 1))
    assert outcome.status["observed"]["errors"] == [
        'listing pods app=vllm: HTTP 500: Get "https://node:10250/containerLogs": dial tcp: refused'
    ]


def test_the_timer_handler_patches_status_by_type_and_takes_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """handlers.modeldeployment_observe called as kopf calls it (kopf decorators return the function)."""
    import kopf  # noqa: PLC0415

    from fitgate.operator.runtime import handlers  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import memo, state  # noqa: PLC0415

    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "event", lambda body, type, reason, message: posted.append((type, reason)))
    with VllmMetrics(num_gpu_blocks=27_000) as server:

        async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
            return [pod("a", server.port)]

        m = memo(observer=Observer(list_pods, no_log))
        ready = {"type": "Ready", "status": "True", "reason": "Evaluated", "message": "m"}
        raw = {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llama", "namespace": "ml", "generation": 2},
            "spec": spec().model_dump(by_alias=True, exclude_none=True),
            "status": {**STATUS, "conditions": [ready]},
        }
        body = kopf.Body(raw)
        patch = kopf.Patch()
        asyncio.run(
            handlers.modeldeployment_observe(body=body, spec=body.spec, status=body.status, patch=patch, memo=m)
        )
        asyncio.run(state(m).observer.close())
    assert patch["status"]["observed"]["observedBlocks"] == 27_000 and "conditions" not in patch["status"]
    fresh: dict[str, Any] = {"status": {"conditions": [ready]}}
    for fn in patch.fns:
        fn(fresh)
    assert [c["type"] for c in fresh["status"]["conditions"]] == ["Ready", "PredictionVerified", "AtCapacity"]
    assert posted == [("Warning", "PredictionDrift")]  # 27000 vs 31000: -12.9 %
    assert 'fitgate_prediction_error_ratio{name="llama",namespace="ml"}' in state(m).metrics.exposition().decode()
    # spec.observe removed: status.observed, the two conditions and the series go
    del raw["spec"]["observe"]
    raw["status"] = {
        **raw["status"],
        "observed": patch["status"]["observed"],
        "conditions": fresh["status"]["conditions"],
    }
    body = kopf.Body(raw)
    patch = kopf.Patch()
    asyncio.run(handlers.modeldeployment_observe(body=body, spec=body.spec, status=body.status, patch=patch, memo=m))
    assert patch["status"] == {"observed": None}
    for fn in patch.fns:
        fn(fresh)
    assert [c["type"] for c in fresh["status"]["conditions"]] == ["Ready"]
    assert "fitgate_prediction_error_ratio{" not in state(m).metrics.exposition().decode()


def test_the_timer_runs_while_anything_of_the_observer_is_left() -> None:
    import kopf  # noqa: PLC0415

    from fitgate.operator.runtime import handlers  # noqa: PLC0415

    def runs(raw: dict[str, Any]) -> bool:
        body = kopf.Body(raw)
        return handlers._observed(spec=body.spec, status=body.status)

    assert runs({"spec": {"observe": {"selector": {"app": "x"}}}})
    assert runs({"spec": {}, "status": {"observed": {"pods": 1}}})
    assert runs({"spec": {}, "status": {"conditions": [{"type": "AtCapacity"}]}})  # written back by a reconcile
    assert not runs({"spec": {}, "status": {"conditions": [{"type": "Ready"}]}})


def test_observe_spec_is_checked_with_the_field_named() -> None:
    from fitgate.operator.schema.api import SpecError  # noqa: PLC0415

    with pytest.raises(SpecError) as info:
        spec(selector={}, intervalSeconds=0, port=70000)
    text = str(info.value)
    assert "spec.observe.selector: Dictionary should have at least 1 item" in text
    assert "spec.observe.intervalSeconds: Input should be greater than or equal to 1 (got 0)" in text
    assert "spec.observe.port: Input should be less than or equal to 65535 (got 70000)" in text
    with pytest.raises(
        SpecError, match=r"spec.economics.gpuHourPriceUsd: Input should be greater than or equal to 0.001 \(got -1\)"
    ):
        parse_spec({"model": {"name": "m"}, "economics": {"gpuHourPriceUsd": -1}})


def test_the_example_is_admitted_by_fitgate_check(capsys: pytest.CaptureFixture[str]) -> None:
    from fitgate.cli import main  # noqa: PLC0415

    example = Path(__file__).resolve().parents[2] / "examples" / "observed-llama-8b-h100.yaml"
    assert main(["check", str(example), "--gpu", "H100"]) == 0
    assert "llama-8b-chat-observed: Fits" in capsys.readouterr().out
