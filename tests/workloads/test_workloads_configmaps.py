"""--config files read from the cluster's ConfigMaps: the webhook path with a real HTTP server for the API.

The ConfigMap reads go through the real Kubernetes client to a loopback HTTP server that answers as the
API server does (a ConfigMap object, 404 Status, or nothing in time), so the time and size bounds are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import http.server
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import kopf
import pytest
from kubernetes import client

from fitgate.operator.runtime import workload_handlers
from fitgate.operator.runtime.configmaps import ConfigMaps
from tests.fitgate_operator.test_operator import L4, changed, index, memo, on

CONFIG = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\n"


class ApiServer(http.server.BaseHTTPRequestHandler):
    """GET /api/v1/namespaces/NS/configmaps/NAME from ``configmaps``; ``delay_s`` before each answer."""

    configmaps: ClassVar[dict[str, dict[str, str]]] = {}
    delay_s = 0.0
    gets: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).gets.append(self.path)
        time.sleep(self.delay_s)
        name = self.path.rsplit("/", 1)[-1]
        data = self.configmaps.get(name)
        if data is None:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
            self._send(404, body)
            return
        self._send(200, {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name}, "data": data})

    def _send(self, code: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError):  # the client gave up (the slow answer)
            self.wfile.write(raw)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    ApiServer.configmaps, ApiServer.delay_s, ApiServer.gets = {}, 0.0, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    configuration.retries = False  # as ConfigMaps configures its own client
    api_client = client.ApiClient(configuration)
    try:
        yield api_client
    finally:
        api_client.rest_client.pool_manager.clear()
        api_client.close()
        server.shutdown()
        server.server_close()


def deployment(items: list[dict[str, str]] | None = None) -> dict[str, Any]:
    cm: dict[str, Any] = {"name": "vllm-config", **({"items": items} if items else {})}
    return {
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "serving"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.19.0",
                            "args": ["--config", "/etc/vllm/config.yaml"],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                    "volumes": [{"name": "cfg", "configMap": cm}],
                }
            }
        },
    }


def review(obj: dict[str, Any], m: kopf.Memo, mode: str = "enforce", took: list[float] | None = None) -> list[str]:
    warnings: list[str] = []

    async def timed() -> None:
        started = time.monotonic()
        try:
            await workload_handlers.validate_workload(
                mode, body=kopf.Body(obj), old=None, dryrun=False, warnings=warnings, memo=on(m, index(L4))
            )
        finally:
            (took if took is not None else []).append(time.monotonic() - started)

    asyncio.run(timed())
    return warnings


def test_the_config_file_is_read_from_the_cluster_and_decides(api: client.ApiClient) -> None:
    ApiServer.configmaps = {"vllm-config": {"config.yaml": CONFIG}}
    m = memo()
    m = changed(m, configmaps=ConfigMaps(api))
    with pytest.raises(kopf.AdmissionError, match=r"one 131072-token request needs 16\.00 GiB of KV cache per GPU"):
        review(deployment(), m)
    assert ApiServer.gets == ["/api/v1/namespaces/serving/configmaps/vllm-config"]
    with pytest.raises(kopf.AdmissionError):
        review(deployment(), m)
    assert len(ApiServer.gets) == 1  # the second review is served from the 30 s cache


def test_a_missing_configmap_or_key_is_unknown_naming_both(api: client.ApiClient) -> None:
    m = memo()
    m = changed(m, configmaps=ConfigMaps(api))
    warnings = review(deployment(), m)  # Unknown: admitted with a warning (FITGATE_UNKNOWN_POLICY Warn)
    assert any("ConfigMap vllm-config (key config.yaml) in serving: not found" in w for w in warnings), warnings
    ApiServer.configmaps = {"vllm-config": {"config.yaml": CONFIG}}  # applied after its Deployment
    with pytest.raises(kopf.AdmissionError):  # a failure is not cached: the next review reads it
        review(deployment(), m)
    ApiServer.configmaps = {"vllm-config": {"other.yaml": CONFIG}}
    m = changed(m, configmaps=ConfigMaps(api))
    mapped = deployment(items=[{"key": "engine.yaml", "path": "config.yaml"}])
    warnings = review(mapped, m)
    assert any("ConfigMap vllm-config has no key engine.yaml" in w for w in warnings), warnings


def test_a_slow_api_server_never_holds_admission_past_its_budget(api: client.ApiClient) -> None:
    ApiServer.configmaps = {"vllm-config": {"config.yaml": CONFIG}}
    ApiServer.delay_s = 5.0
    m = memo()  # FITGATE_ADMISSION_RESOLVE_SECONDS: 1.0
    m = changed(m, configmaps=ConfigMaps(api))
    took: list[float] = []
    warnings = review(deployment(), m, took=took)
    assert took[0] < 3.0, took  # the 1 s budget (and a loaded machine), not the 5 s answer
    # whichever of the two 1 s bounds fires first: the await's, or the HTTP client's read timeout
    late = re.compile(
        r"ConfigMap vllm-config \(key config\.yaml\) in serving: (not read within 1 s|cannot be read \(\w+\))"
    )
    assert any(late.search(w) for w in warnings), warnings


def test_an_oversized_configmap_is_unknown(api: client.ApiClient) -> None:
    ApiServer.configmaps = {"vllm-config": {"config.yaml": CONFIG, "blob": "x" * (1024 * 1024 + 1)}}
    m = memo()
    m = changed(m, configmaps=ConfigMaps(api))
    warnings = review(deployment(), m)
    assert any("holds 1048" in w and "more than fitgate reads (1048576)" in w for w in warnings), warnings


def test_without_configmaps_the_verdict_stays_unknown() -> None:
    warnings = review(copy.deepcopy(deployment()), memo())  # FITGATE_WORKLOAD_CONFIGMAPS=0: no reader in memo
    assert any(
        "ConfigMap vllm-config (key config.yaml) in serving: fitgate does not read ConfigMaps "
        "(chart workloadWebhook.readConfigMaps: false)" in w
        for w in warnings
    ), warnings


def test_the_env_is_read_from_the_cluster_s_configmaps(api: client.ApiClient) -> None:
    # the model from an envFrom ConfigMap and the length from a configMapKeyRef of another: two reads, then the
    # verdict (Llama-3.1-8B at 131072 tokens on an L4 is the denial of the --config test above)
    obj = deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "$(MODEL)", "--max-model-len", "$(LEN)"]
    container["envFrom"] = [{"configMapRef": {"name": "models"}}]
    container["env"] = [{"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "lengths", "key": "long"}}}]
    ApiServer.configmaps = {"models": {"MODEL": "meta-llama/Llama-3.1-8B-Instruct"}, "lengths": {"long": "131072"}}
    m = changed(memo(), configmaps=ConfigMaps(api))
    with pytest.raises(kopf.AdmissionError, match=r"one 131072-token request needs 16\.00 GiB of KV cache per GPU"):
        review(obj, m)
    assert ApiServer.gets == [
        "/api/v1/namespaces/serving/configmaps/models",
        "/api/v1/namespaces/serving/configmaps/lengths",
    ]
    ApiServer.configmaps = {"models": {"MODEL": "meta-llama/Llama-3.1-8B-Instruct"}}
    m = changed(memo(), configmaps=ConfigMaps(api))
    warnings = review(obj, m)  # the second ConfigMap is missing: Unknown, naming it
    assert any("ConfigMap lengths (key long) in serving: not found" in w for w in warnings), warnings
