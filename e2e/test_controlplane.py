"""Smoke tests of the real control plane: CRDs, Nodes with GPU labels, Events, webhooks over TLS, Helm."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from e2e.conftest import Kube, needs_loopback

WIDGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.smoke.fitgate.io}
spec:
  group: smoke.fitgate.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
    subresources: {status: {}}
"""

H100_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-h100-0",
        "labels": {
            # GPU Feature Discovery labels of an 8 x H100 80GB HBM3 node
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.family": "hopper",
            "nvidia.com/gpu.compute.major": "9",
            "nvidia.com/gpu.compute.minor": "0",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "single",
        },
    },
    "status": {
        "capacity": {"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": "8"},
        "allocatable": {"cpu": "190", "memory": "2000Gi", "pods": "110", "nvidia.com/gpu": "8"},
    },
}


def test_crd_and_custom_resource(kube: Kube, namespace: str) -> None:
    kube.kubectl("apply", "-f", "-", stdin=WIDGET_CRD)
    kube.kubectl("wait", "--for=condition=Established", "crd/widgets.smoke.fitgate.io", "--timeout=30s")
    widget = {"apiVersion": "smoke.fitgate.io/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(widget))
    assert kube.get("widget", "w1", "-n", namespace)["spec"]["size"] == 3
    # the structural schema is enforced by the real API server
    bad = {**widget, "metadata": {"name": "w2"}, "spec": {"size": 0}}
    result = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(bad), check=False)
    assert result.returncode != 0 and "spec.size" in result.stderr


def test_nodes_with_gfd_labels_and_gpu_capacity(kube: Kube) -> None:
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(H100_NODE))
    node = kube.get("node", "gpu-h100-0")
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    # later changes go through the status subresource, as the device plugin's kubelet would
    kube.kubectl(
        "patch",
        "node",
        "gpu-h100-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"allocatable": {"nvidia.com/gpu": "7"}}}),
    )
    assert kube.get("node", "gpu-h100-0")["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    kube.kubectl("delete", "node", "gpu-h100-0")


def test_event_is_stored(kube: Kube, namespace: str) -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "smoke.1", "namespace": namespace},
        "involvedObject": {"kind": "ConfigMap", "name": "cm", "namespace": namespace},
        "reason": "Smoke",
        "message": "an event from the e2e suite",
        "type": "Warning",
        "source": {"component": "fitgate-e2e"},
    }
    kube.kubectl("create", "-f", "-", stdin=json.dumps(event))
    events = kube.get("events", "-n", namespace, "--field-selector", "reason=Smoke")["items"]
    assert [e["message"] for e in events] == ["an event from the e2e suite"]


class _DenyAll(BaseHTTPRequestHandler):
    """A validating webhook that denies every request with a message."""

    calls: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _DenyAll.calls.append(review)
        body = json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": False,
                    "status": {"code": 422, "message": "smoke webhook says no: size 99 does not fit"},
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def deny_webhook(kube: Kube, tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    needs_loopback(kube)
    ca = kube.control_plane.ca  # type: ignore[union-attr]
    cert, key = ca.issue("webhook", ips=("127.0.0.1",), dns=("localhost",))
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DenyAll)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], ca.pem
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_denial_reaches_kubectl(kube: Kube, namespace: str, deny_webhook: tuple[int, bytes]) -> None:
    port, ca_pem = deny_webhook
    vwc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"smoke-{namespace}"},
        "webhooks": [
            {
                "name": "deny.smoke.fitgate.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/validate",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ],
    }
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(vwc))
    try:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", "namespace": namespace}}
        result = kube.wait_for(
            lambda: (r := kube.kubectl("apply", "-f", "-", stdin=json.dumps(cm), check=False)).returncode != 0 and r,
            what="the webhook configuration to take effect",
        )
        assert "smoke webhook says no: size 99 does not fit" in result.stderr
        assert 'admission webhook "deny.smoke.fitgate.io" denied the request' in result.stderr
        assert any(c["request"]["namespace"] == namespace for c in _DenyAll.calls)
        assert kube.kubectl("get", "configmap", "denied", "-n", namespace, check=False).returncode != 0
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", f"smoke-{namespace}")


def test_helm_install_trivial_chart(kube: Kube, namespace: str, tmp_path: Path) -> None:
    chart = tmp_path / "smoke"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": "smoke", "version": "0.1.0"}))
    (chart / "values.yaml").write_text("greeting: hello\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  greeting: {{ .Values.greeting }}\n"
    )
    kube.helm("install", "smoke", str(chart), "-n", namespace, "--set", "greeting=hi")
    assert kube.get("configmap", "smoke-cm", "-n", namespace)["data"] == {"greeting": "hi"}
    releases = json.loads(kube.helm("list", "-n", namespace, "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in releases] == [("smoke", "deployed")]
    kube.helm("uninstall", "smoke", "-n", namespace)
    assert kube.kubectl("get", "configmap", "smoke-cm", "-n", namespace, check=False).returncode != 0
