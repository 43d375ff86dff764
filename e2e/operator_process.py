"""A real `fitgate operator` process wired to a control plane, for the e2e tests and benchmarks."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import free_port

FITGATE = Path(sys.executable).parent / "fitgate"


def webhook_listening(port: int) -> bool:
    """Whether the operator's webhook server accepts connections (kopf starts it after the readiness probe)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


class Operator:
    """`fitgate operator` as a real process on 127.0.0.1, its webhook certificate from the control plane's CA.

    ``managed`` names the ValidatingWebhookConfiguration kopf maintains (None: someone else, e.g. the
    Helm chart, installs it); ``certs`` gives existing tls.crt/tls.key/ca.crt files instead of
    issuing new ones; ``kubeconfig`` runs the operator with other credentials (a ServiceAccount token).
    """

    def __init__(
        self,
        kube: Any,
        workdir: Path,
        *,
        resync_s: float = 2.0,
        verbose: bool = True,
        managed: str | None = "fitgate-e2e.fitgate.io",
        certs: Path | None = None,
        webhook_port: int | None = None,
        kubeconfig: Path | None = None,
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.kube = kube
        self.workdir = workdir
        self.metrics_port = free_port()
        self.webhook_port = webhook_port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "operator.log"
        self.resync_s = resync_s
        self.verbose = verbose
        self.managed = managed
        self.kubeconfig = kubeconfig
        self.extra_args = extra_args
        self.extra_env = dict(extra_env or {})
        self.certs = certs or workdir
        if certs is None:
            assert kube.control_plane is not None
            cert, key = kube.control_plane.ca.issue("fitgate-webhook", ips=("127.0.0.1",), dns=("localhost",))
            (workdir / "tls.crt").write_bytes(cert)
            (workdir / "tls.key").write_bytes(key)
            (workdir / "ca.crt").write_bytes(kube.control_plane.ca.pem)

    def start(self) -> None:
        env = {
            **self.kube.env,
            "HF_HUB_OFFLINE": "1",
            "FITGATE_CACHE_DIR": str(self.workdir / "cache"),
            "FITGATE_WEBHOOK_ADDR": "127.0.0.1",
            "FITGATE_METRICS_ADDR": "127.0.0.1",
            **self.extra_env,
        }
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        argv = [
            str(FITGATE),
            "operator",
            *(["--verbose"] if self.verbose else []),
            "--resync-seconds",
            str(self.resync_s),
            "--webhook-port",
            str(self.webhook_port),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-cert",
            str(self.certs / "tls.crt"),
            "--webhook-key",
            str(self.certs / "tls.key"),
            "--webhook-ca",
            str(self.certs / "ca.crt"),
            *(["--webhook-managed", self.managed] if self.managed else []),
            "--metrics-port",
            str(self.metrics_port),
            *self.extra_args,
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.kube.wait_for(self.ready, timeout=60, what=f"the operator to be ready (log: {self.log})")
        if self.managed:
            self.kube.wait_for(
                lambda: (
                    self.kube.kubectl("get", "validatingwebhookconfiguration", self.managed, check=False).returncode
                    == 0
                ),
                timeout=30,
                what="the managed webhook configuration",
            )

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then the exit status; past ``timeout_s`` the process is killed (never left running) and
        the test fails with the end of its log (where a stuck exit writes every thread's stack)."""
        assert self.proc is not None
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.wait(10)
            raise AssertionError(
                f"the operator did not exit {timeout_s:g} s after SIGTERM:\n{self.log.read_text()[-6000:]}"
            ) from exc


def admission_review(spec: dict[str, Any], name: str = "review") -> dict[str, Any]:
    """An AdmissionReview of a ModelDeployment CREATE, as the API server sends it."""
    obj = {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    kind = {"group": "fitgate.io", "version": "v1alpha1", "kind": "ModelDeployment"}
    resource = {"group": "fitgate.io", "version": "v1alpha1", "resource": "modeldeployments"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": name,
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "e2e", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def post_review(op: Operator, review: dict[str, Any]) -> dict[str, Any]:
    """POST one AdmissionReview to an operator's webhook over TLS; the response part of the answer."""
    context = ssl.create_default_context(cafile=str(op.certs / "ca.crt"))
    request = urllib.request.Request(
        f"https://127.0.0.1:{op.webhook_port}/fit",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as r:
        answer: dict[str, Any] = json.loads(r.read())
    return dict(answer["response"])


def chart_webhooks(kube: Any, op: Operator, workdir: Path, *sets: str) -> dict[str, Any]:
    """The chart's ValidatingWebhookConfiguration with the workload webhooks, in url mode at ``op``.

    ``sets`` are more ``--set`` values; the caller names it (and may drop entries) before applying it.
    """
    chart = Path(__file__).resolve().parents[1] / "charts" / "fitgate"
    args = ["--set", "workloadWebhook.enabled=true"]
    for value in sets:
        args += ["--set", value]
    rendered = kube.helm(
        "template",
        "fitgate",
        str(chart),
        *args,
        "--set",
        f"webhook.url=https://127.0.0.1:{op.webhook_port}",
        "--set-file",
        f"webhook.caBundle={workdir / 'ca.crt'}",
    ).stdout
    (vwc,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ValidatingWebhookConfiguration"]
    result: dict[str, Any] = vwc
    return result
