"""The workload observer (operator/observation/workload_observe.py) against real loopback vLLM metrics servers
(tests/vllm_metrics_server.py): the pods of an audited workload, fitgate.io/observed, the drift Event once,
the fitgate_workload_* series, and a bad pod that must not block the pass. The I/O on a real API server
runs in e2e/test_workload_observe.py."""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.observe.metrics import Observation
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.workloads import WorkloadVerdict, evaluate_reading
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.observation.observe import Observer, PodsRead, no_log
from fitgate.operator.observation.scrape import ScrapeLimits
from fitgate.operator.observation.workload_observe import (
    OBSERVED_ANNOTATION,
    REWRITE_S,
    Audited,
    WorkloadObserver,
    observe_action,
    observed_annotation,
    predicted_blocks,
)
from fitgate.workloads import read_workload
from tests.conftest import model
from tests.fitgate_operator.test_operator import H100
from tests.vllm_metrics_server import VllmMetrics

FIXTURES = Path(__file__).parents[1] / "fixtures"
OOM_LOG = FIXTURES / "vllm-logs" / "openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192.FAILED.log.gz"
PATH = "/apis/apps/v1/namespaces/serving/deployments/vllm-llama3-deployment-vllm"


def deployment(port: int | None = None) -> dict[str, Any]:
    """The production-stack engine Deployment (8B, --max-model-len 131072) as the audit lists it, on H100s.

    ``--port port`` in its command (the port read); None: no ``--port``, the pods' container ports decide.
    """
    obj = copy.deepcopy(yaml.safe_load((FIXTURES / "workloads" / "production-stack-deployment.yaml").read_text()))
    obj["metadata"]["namespace"] = "serving"
    command = obj["spec"]["template"]["spec"]["containers"][0]["command"]
    at = command.index("--port")
    command[at : at + 2] = [] if port is None else ["--port", str(port)]
    affinity = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"][0]["values"] = ["NVIDIA-H100-80GB-HBM3"]  # the fixture asks for L4s
    return dict(obj)


def verdict(obj: dict[str, Any]) -> WorkloadVerdict:
    reading = read_workload(obj)
    assert reading is not None
    return evaluate_reading(reading, model("meta-llama/Llama-3.1-8B-Instruct"), parse_node(H100))


def pod(name: str, port: int, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"model": "llama3"}},
        "spec": {"containers": [{"name": "vllm", "ports": [{"name": "container-port", "containerPort": port}]}]},
        "status": {"phase": "Running", "podIP": "127.0.0.1", **status},
    }


class Api:
    """The audit's request and Event functions, recording; a PATCH is applied to the object as the API server would."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.patches: list[tuple[str, str, Any]] = []
        self.events: list[tuple[str, str, str]] = []

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        self.patches.append((method, path, body))
        annotations = self.obj["metadata"].setdefault("annotations", {})
        for k, v in body["metadata"]["annotations"].items():
            if v is None:
                annotations.pop(k, None)
            else:
                annotations[k] = v
        return {}

    async def event(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))


def run_passes(
    server_ports: list[int], obj: dict[str, Any], v: WorkloadVerdict, metrics: Metrics, api: Api, passes: int = 1
) -> list[Observation | None]:
    selectors: list[str] = []

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        selectors.append(selector)
        return [pod(f"vllm-{i}", port) for i, port in enumerate(server_ports)]

    observer = Observer(list_pods, no_log)
    watcher = WorkloadObserver(observer, metrics)

    async def run() -> list[Observation | None]:
        out = []
        for _ in range(passes):
            out.append(await watcher.observe_one(Audited(copy.deepcopy(obj), PATH, v), api.request, api.event))
            obj["metadata"]["annotations"] = dict(api.obj["metadata"].get("annotations") or {})
        await observer.close()
        return out

    got = asyncio.run(run())
    assert set(selectors) == {
        "app.kubernetes.io/component=serving-engine,app.kubernetes.io/instance=vllm,app.kubernetes.io/managed-by=helm,"
        "app.kubernetes.io/name=llama3,app.kubernetes.io/part-of=vllm-stack,environment=test,helm-release-name=vllm,"
        "model=llama3,release=test"
    }
    return got


def test_within_tolerance_annotates_without_an_event_and_sets_the_series() -> None:
    obj = deployment()
    v = verdict(obj)
    predicted = predicted_blocks(v)
    assert v.verdict.value == "Fits" and predicted is not None and predicted > 1000
    api, metrics = Api(obj), Metrics()
    short = predicted - predicted // 200  # one pod 0.5 % short: within 2 %
    with VllmMetrics(num_gpu_blocks=predicted) as a, VllmMetrics(num_gpu_blocks=short) as b:
        a.set(running=3, kv_usage=0.5)
        b.set(running=1, kv_usage=0.96)
        (obs,) = run_passes([a.port, b.port], obj, v, metrics, api)
    assert obs is not None and obs.verified is True and obs.at_capacity is True  # 0.96 >= 0.95
    assert api.events == []
    ((method, path, body),) = api.patches
    assert (method, path) == ("PATCH", PATH)
    assert list(body) == ["metadata"] and list(body["metadata"]) == ["annotations"]  # never the spec
    written = json.loads(body["metadata"]["annotations"][OBSERVED_ANNOTATION])
    ratio = round((short - predicted) / predicted, 4)
    assert written == {
        "pods": 2,
        "podsFailed": 0,
        "observedBlocks": short,
        "predictedBlocks": predicted,
        "blocksErrorRatio": ratio,
        "peakKvUsage": 0.96,
        "atCapacity": True,
    }
    assert " " not in body["metadata"]["annotations"][OBSERVED_ANNOTATION]  # compact
    text = metrics.exposition().decode()
    labels = '{kind="Deployment",name="vllm-llama3-deployment-vllm",namespace="serving"}'
    assert f"fitgate_workload_observed_kv_blocks{labels} {float(short)}" in text
    assert f"fitgate_workload_at_capacity{labels} 1.0" in text
    assert f"fitgate_workload_prediction_error_ratio{labels} {(short - predicted) / predicted}" in text


def test_drift_posts_one_event_then_the_annotation_remembers_it() -> None:
    obj = deployment(8000)
    predicted = predicted_blocks(verdict(obj))
    assert predicted is not None
    drifted = predicted * 9 // 10  # 10 % fewer blocks than predicted
    api = Api(obj)

    def passes(blocks: int, count: int = 1) -> list[Observation | None]:
        with VllmMetrics(num_gpu_blocks=blocks) as a:
            command = obj["spec"]["template"]["spec"]["containers"][0]["command"]
            command[command.index("--port") + 1] = str(a.port)
            # the pods' container port (1) is closed: the Deployment's --port is the one read
            return run_passes([1], obj, verdict(obj), Metrics(), api, passes=count)

    assert [o.verified if o else None for o in passes(drifted, 3)] == [False, False, False]
    passes(drifted)  # an operator restart: a fresh observer reads the annotation it wrote, posts nothing again
    percent = (drifted - predicted) / predicted * 100
    assert api.events == [
        (
            "Warning",
            "PredictionDrift",
            f"vLLM allocated {drifted} KV blocks, fitgate predicted {predicted} ({percent:+.2f} %; tolerance 2 %)",
        )
    ]
    # written when a figure changes: pass 1 (one scrape, no rates yet), pass 2 (rates over two scrapes),
    # not pass 3 (the same figures), and after the restart (one scrape again: no rates)
    rates = [
        json.loads(b["metadata"]["annotations"][OBSERVED_ANNOTATION]).get("tokensPerSecond") for *_, b in api.patches
    ]
    assert rates == [None, 0.0, None]
    # back within tolerance, then off again: a second Event
    passes(predicted)
    passes(drifted)
    assert [e[1] for e in api.events] == ["PredictionDrift", "PredictionDrift"]
    assert len(api.patches) == 5


def test_a_pod_is_read_itself_and_a_failed_start_is_read_from_its_log() -> None:
    crashed = pod(
        "vllm", 8000, containerStatuses=[{"name": "vllm", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    )
    crashed["kind"] = "Pod"
    crashed["metadata"]["namespace"] = "serving"
    crashed["spec"]["containers"][0].update(
        image="vllm/vllm-openai:v0.19.0",
        args=["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"],
        resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    v = verdict(crashed)
    asked: list[str] = []

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        raise AssertionError("a Pod is not listed")

    async def read_log(namespace: str, name: str, container: str, previous: bool) -> str:
        asked.append(f"{namespace}/{name}/{container}")
        return gzip.decompress(OOM_LOG.read_bytes()).decode()

    api = Api(crashed)
    metrics = Metrics()
    watcher = WorkloadObserver(Observer(list_pods, read_log), metrics)
    obs = asyncio.run(
        watcher.observe_one(Audited(crashed, "/api/v1/namespaces/serving/pods/vllm", v), api.request, api.event)
    )
    assert obs is not None and obs.pods == 0
    assert asked == ["serving/vllm/vllm"]
    written = json.loads(api.obj["metadata"]["annotations"][OBSERVED_ANNOTATION])
    assert written["pods"] == 0 and written["podsFailed"] == 1
    assert written["failure"].startswith("out_of_memory: torch.OutOfMemoryError: CUDA out of memory.")
    assert api.events == []  # nothing observed to compare
    assert "fitgate_workload_observed_kv_blocks{" not in metrics.exposition().decode()


def test_workloads_no_longer_audited_lose_their_series_and_history() -> None:
    obj = deployment()
    v = verdict(obj)
    predicted = predicted_blocks(v)
    api, metrics = Api(obj), Metrics()
    with VllmMetrics(num_gpu_blocks=predicted) as a:

        async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
            return [pod("vllm-0", a.port)]

        observer = Observer(list_pods, no_log)
        watcher = WorkloadObserver(observer, metrics)

        async def run() -> None:
            await watcher.observe_all([Audited(obj, PATH, v)], api.request, api.event)
            assert "fitgate_workload_observed_kv_blocks{" in metrics.exposition().decode()
            assert ("serving", "Deployment/vllm-llama3-deployment-vllm") in observer._history
            await watcher.observe_all([], api.request, api.event)
            await observer.close()

        asyncio.run(run())
    text = metrics.exposition().decode()
    assert "fitgate_workload_observed_kv_blocks{" not in text and "fitgate_workload_at_capacity{" not in text
    assert not observer._history


def test_a_hanging_pod_never_blocks_the_pass() -> None:
    obj = deployment()
    v = verdict(obj)
    with VllmMetrics(num_gpu_blocks=predicted_blocks(v)) as good, VllmMetrics() as bad:
        bad.mode("hang")

        async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
            return [pod("good", good.port), pod("bad", bad.port)]

        observer = Observer(list_pods, no_log, limits=ScrapeLimits(timeout_s=1.0, max_bytes=1024 * 1024))
        api = Api(obj)

        async def run() -> None:
            await WorkloadObserver(observer, Metrics()).observe_all([Audited(obj, PATH, v)], api.request, api.event)
            await observer.close()

        started = time.monotonic()
        asyncio.run(run())
        took = time.monotonic() - started
    assert took < 3.0, took
    written = json.loads(api.obj["metadata"]["annotations"][OBSERVED_ANNOTATION])
    assert written["pods"] == 1 and written["podsFailed"] == 1 and written["blocksErrorRatio"] == 0.0


def test_nothing_observed_removes_a_stale_annotation() -> None:
    empty = Observation(0, None, 100, None, None, None, None, None, None, None, None, None, None, 0.0)
    assert observed_annotation(empty, PodsRead((), 0, None)) is None
    stale = {OBSERVED_ANNOTATION: '{"pods":1,"observedBlocks":90,"blocksErrorRatio":-0.1}'}
    action = observe_action(stale, None, empty)
    assert action.annotations == {OBSERVED_ANNOTATION: None} and action.event is None  # merge patch null: removed
    assert observe_action({}, None, empty).annotations is None


@pytest.mark.parametrize(
    ("old", "posted"),
    [
        (None, True),
        ('{"blocksErrorRatio":0.01}', True),  # was within 2 %
        ('{"blocksErrorRatio":-0.1}', False),  # had drifted: already said
        ("not json", True),
    ],
)
def test_drift_event_only_when_new(old: str | None, posted: bool) -> None:
    drift = Observation(1, 90, 100, -0.1, 0.2, 0.0, None, None, None, None, None, None, None, 60.0)
    current = {} if old is None else {OBSERVED_ANNOTATION: old}
    action = observe_action(current, '{"blocksErrorRatio":-0.1}', drift)
    assert (action.event is not None) is posted


def test_rates_alone_are_rewritten_at_most_every_five_minutes() -> None:
    # every annotation change bumps a Deployment's generation (the API server's Deployment strategy)
    obs = Observation(1, 100, 100, 0.0, 0.5, 0.0, None, 120.0, None, None, None, None, None, 60.0)
    old = {OBSERVED_ANNOTATION: '{"pods":1,"observedBlocks":100,"blocksErrorRatio":0.0,"tokensPerSecond":100.0}'}
    faster = '{"pods":1,"observedBlocks":100,"blocksErrorRatio":0.0,"tokensPerSecond":120.0}'
    assert observe_action(old, faster, obs, since_write_s=60.0).annotations is None
    assert observe_action(old, faster, obs, since_write_s=REWRITE_S).annotations == {OBSERVED_ANNOTATION: faster}
    assert observe_action(old, faster, obs, since_write_s=None).annotations is not None  # not written by this process
    fewer = '{"pods":1,"observedBlocks":99,"blocksErrorRatio":-0.01,"tokensPerSecond":100.0}'
    assert observe_action(old, fewer, obs, since_write_s=1.0).annotations == {OBSERVED_ANNOTATION: fewer}
    rates_gone = '{"pods":1,"observedBlocks":100,"blocksErrorRatio":0.0}'
    assert observe_action(old, rates_gone, obs, since_write_s=1.0).annotations is not None  # a figure went


def test_a_listing_error_keeps_what_was_written() -> None:
    obj = deployment()
    obj["metadata"]["annotations"] = {OBSERVED_ANNOTATION: '{"pods":1,"observedBlocks":100}'}
    v = verdict(obj)

    async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
        raise ConnectionError("API server unreachable")

    api = Api(obj)
    got = asyncio.run(
        WorkloadObserver(Observer(list_pods, no_log), Metrics()).observe_one(
            Audited(obj, PATH, v), api.request, api.event
        )
    )
    assert got is None and api.patches == [] and api.events == []
