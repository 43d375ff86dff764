"""Observed vs predicted end to end: the real API server, the real `fitgate operator`, serving pods whose
vLLM /metrics are loopback servers speaking vLLM 0.33's exposition (tests/vllm_metrics_server.py).

Pods are not run in this control plane (no scheduler, no kubelet): each Pod object is created bound to a
fake node (``spec.nodeName``) with a container port that is the fixture server's port, and its status is
written through the status subresource (phase Running, podIP 127.0.0.1), as a kubelet would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.vllm_metrics_server import VllmMetrics

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, admission_review, post_review
from e2e.test_operator import install_crd_and_nodes, mdep, status, wait_verdict

SPEC = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
    "serving": {"maxModelLen": 32768},
    "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
}


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    install_crd_and_nodes(kube)
    workdir = tmp_path_factory.mktemp("observe")
    env = {
        "FITGATE_SCRAPE_TIMEOUT_SECONDS": "2",
        "FITGATE_SCRAPE_MAX_BYTES": str(1024 * 1024),
        "FITGATE_GPU_HOUR_PRICES": "H100=2.5",
    }
    op = Operator(kube, workdir, extra_env=env)
    op.start()
    try:
        yield op
    finally:
        op.stop()


def serving_pod(kube: Kube, namespace: str, name: str, app: str, port: int) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "nodeName": "e2e-h100",
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.33.0",
                    "ports": [{"name": "http", "containerPort": port}],
                }
            ],
        },
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    running = {"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}}
    kube.kubectl(
        "patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", json.dumps(running)
    )


def observed_spec(app: str) -> dict[str, Any]:
    return {**SPEC, "observe": {"selector": {"app": app}, "intervalSeconds": 1}}


def predicted_blocks(kube: Kube, namespace: str, name: str) -> int:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep(name, SPEC))
    blocks = int(wait_verdict(kube, namespace, name, "Fits")["kvCache"]["numGpuBlocks"])
    kube.kubectl("delete", "mdep", name, "-n", namespace, "--timeout=30s")
    return blocks


def conditions(st: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in st.get("conditions") or []}


def test_observed_status_conditions_and_metrics(kube: Kube, operator: Operator, namespace: str) -> None:
    blocks = predicted_blocks(kube, namespace, "probe")
    with VllmMetrics(num_gpu_blocks=blocks) as a, VllmMetrics(num_gpu_blocks=blocks - blocks // 200) as b:
        serving_pod(kube, namespace, "vllm-a", "llama", a.port)
        serving_pod(kube, namespace, "vllm-b", "llama", b.port)
        kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("llama", observed_spec("llama")))
        kube.wait_for(
            lambda: (status(kube, namespace, "llama").get("observed") or {}).get("pods") == 2,
            timeout=60,
            what="both pods observed",
        )
        a.set(running=6, waiting=1, kv_usage=0.97, queries=2000, hits=500, requests=12, prompt_tokens=9000)
        b.set(running=2, kv_usage=0.40, requests=4, generation_tokens=3000)
        st = kube.wait_for(
            lambda: (
                (s := status(kube, namespace, "llama")).get("observed", {}).get("requestsCompleted") == 16
                and conditions(s).get("AtCapacity", ("", ""))[0] == "True"
                and s
            ),
            timeout=30,
            what="the traffic to show in status.observed",
        )
        o = st["observed"]
        assert o["observedBlocks"] == blocks - blocks // 200 and o["predictedBlocks"] == blocks
        assert -0.006 < o["blocksErrorRatio"] < 0  # one pod 0.5 % short: within 2 %
        assert o["peakKvUsage"] == 0.97 and o["prefixCacheHitRate"] == 0.25  # 500 / 2000
        assert o["runningRequests"] == 8 and o["waitingRequests"] == 1
        assert o["tokensPerSecond"] > 0 and o["usdPerRequest"] > 0 and o["gpuHourPriceUsd"] == 2.5
        assert o["podsFailed"] == 0 and o["lastScrapeTime"].endswith("Z")
        assert conditions(st)["PredictionVerified"] == ("True", "WithinTolerance")
        assert conditions(st)["AtCapacity"] == ("True", "KVCacheFull")
        assert conditions(st)["Ready"][0] == "True"  # reconcile's conditions live beside the observer's
        text = operator.metrics()
        labels = f'{{name="llama",namespace="{namespace}"}}'
        assert f"fitgate_observed_kv_blocks{labels} {float(blocks - blocks // 200)}" in text
        assert f"fitgate_at_capacity{labels} 1.0" in text
        assert f"fitgate_prediction_error_ratio{labels} -" in text
        # a reconcile (spec change) keeps the observer's conditions and status.observed
        change = '{"spec":{"serving":{"maxModelLen":16384}}}'
        kube.kubectl("patch", "mdep", "llama", "-n", namespace, "--type=merge", "-p", change)
        kube.wait_for(
            lambda: (
                (s := status(kube, namespace, "llama")).get("observedGeneration") == 2
                and {"Ready", "Fits", "PredictionVerified", "AtCapacity"} <= set(conditions(s))
                and s.get("observed")
            ),
            timeout=30,
            what="the re-evaluation beside the observer's conditions",
        )
        # without spec.observe, what the observer wrote goes
        kube.kubectl(
            "patch", "mdep", "llama", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/spec/observe"}]'
        )
        kube.wait_for(
            lambda: (
                "observed" not in (s := status(kube, namespace, "llama"))
                and set(conditions(s)) == {"Ready", "Fits"}
                and "fitgate_at_capacity" + labels not in operator.metrics()
            ),
            timeout=30,
            what="status.observed, the observer's conditions and series removed",
        )


def test_drift_event_and_bad_pods_never_block(kube: Kube, operator: Operator, namespace: str) -> None:
    blocks = predicted_blocks(kube, namespace, "probe")
    with (
        VllmMetrics(num_gpu_blocks=blocks * 9 // 10) as drifted,
        VllmMetrics() as hang,
        VllmMetrics() as garbage,
        VllmMetrics() as huge,
    ):
        hang.mode("hang")
        garbage.mode("garbage")
        huge.mode("huge")
        for name, server in (("drifted", drifted), ("hang", hang), ("garbage", garbage), ("huge", huge)):
            serving_pod(kube, namespace, name, "drift", server.port)
        kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("drift", observed_spec("drift")))
        st = kube.wait_for(
            lambda: (
                (s := status(kube, namespace, "drift")).get("observed", {}).get("podsFailed") == 3
                and conditions(s).get("PredictionVerified") == ("False", "PredictionDrift")
                and s
            ),
            timeout=60,
            what="the bad pods reported and the drift",
        )
        errors = " | ".join(st["observed"]["errors"])
        assert "hang: GET" in errors and "no complete answer within 2 s" in errors
        assert "huge: GET" in errors and "exceeds the limit of 1048576" in errors
        assert "garbage: GET" in errors and "not UTF-8" in errors
        events = kube.wait_for(
            lambda: [
                e
                for e in kube.get("events", "-n", namespace)["items"]
                if e["reason"] == "PredictionDrift" and e["involvedObject"]["name"] == "drift"
            ],
            timeout=30,
            what="the PredictionDrift event",
        )
        assert "fitgate predicted" in events[0]["message"]
        # While a pod hangs every round, admission and reconcile answer at once.
        started = time.monotonic()
        answer = post_review(operator, admission_review(SPEC, name="while-hanging"))
        admission_s = time.monotonic() - started
        assert answer["allowed"] is True and admission_s < 1.0, admission_s
        started = time.monotonic()
        kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("other", SPEC))
        wait_verdict(kube, namespace, "other", "Fits", timeout=20)
        applied_s = time.monotonic() - started
        assert applied_s < 10
        print(f"\nwhile a pod hangs: admission review {admission_s * 1000:.0f} ms, apply to verdict {applied_s:.2f} s")
        # rounds keep coming (each bounded by the 2 s scrape timeout)
        first = st["observed"]["lastScrapeTime"]
        kube.wait_for(
            lambda: status(kube, namespace, "drift")["observed"]["lastScrapeTime"] != first,
            timeout=15,
            what="another round",
        )


def test_failed_pod_log_read_through_the_api(kube: Kube, operator: Operator, namespace: str) -> None:
    """A crash-looping pod: its log is asked for through pods/log (no kubelet here: the API server answers
    with an error, which status.observed reports in one line instead of blocking)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "crashing", "labels": {"app": "crash"}},
        "spec": {"nodeName": "e2e-h100", "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}]},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    crash = {
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.33.0",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }
            ],
        }
    }
    kube.kubectl(
        "patch", "pod", "crashing", "-n", namespace, "--subresource=status", "--type=merge", "-p", json.dumps(crash)
    )
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("crash", observed_spec("crash")))
    st = kube.wait_for(
        lambda: (
            (s := status(kube, namespace, "crash")).get("observed", {}).get("podsFailed") == 1
            and "PredictionVerified" in conditions(s)
            and s
        ),
        timeout=60,
        what="the crashing pod reported",
    )
    (error,) = st["observed"]["errors"]
    assert error.startswith("crashing: log not readable: HTTP ") and "\n" not in error
    assert conditions(st)["PredictionVerified"][0] == "Unknown"
