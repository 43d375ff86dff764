"""A real Kubernetes control plane on loopback: etcd + kube-apiserver built from Go modules.

By default no kubelet, scheduler or controller-manager (envtest-style): CRDs, admission webhooks, RBAC, Events
and Helm releases are all served by kube-apiserver alone. ``ControlPlane(..., scheduling=True)`` adds
kube-controller-manager (Deployments -> ReplicaSets -> Pods, StatefulSets, garbage collection, namespaces),
kube-scheduler and kwok (fake nodes: the Nodes annotated ``kwok.x-k8s.io/node: fake`` get Ready and
heartbeats, their bound pods Running), the cluster of the scheduling tests (e2e/test_scheduling.py).
Everything listens on 127.0.0.1 on free ports; certificates are generated per run (a CA, a serving
certificate with an IP SAN for 127.0.0.1, a service-account signing key, an admin client certificate and token).

    python -m e2e.cluster up      # build if needed, start in the background, write .cache/kube/kubeconfig
    python -m e2e.cluster up --scheduling   # the same with controller-manager, scheduler and kwok
    python -m e2e.cluster down    # stop it
    python -m e2e.cluster status

Tests use :class:`ControlPlane` directly (``e2e/conftest.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "kube"
BIN = Path(os.environ.get("FITGATE_KUBE_BIN", CACHE / "bin"))
DEFAULT_DIR = CACHE / "cluster"
KUBECONFIG = CACHE / "kubeconfig"
KWOK_STAGES = ROOT / "e2e" / "kwok" / "stages.yaml"
#: The annotation kwok manages nodes by (``--manage-nodes-with-annotation-selector``).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: The controllers a vLLM Deployment, a StatefulSet and their cleanup need (kube-controller-manager's names,
#: cmd/kube-controller-manager/names/controller_names.go of k8s.io/kubernetes v1.37.2). node-lifecycle-controller
#: takes off the ``node.kubernetes.io/not-ready`` taint the API server puts on every new Node (TaintNodesByCondition)
#: once kwok reports it Ready: without it the scheduler places nothing.
CONTROLLERS = (
    "node-lifecycle-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "garbage-collector-controller",
    "namespace-controller",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build(*components: str) -> None:
    """Compile kube-apiserver and etcd (or the ``components`` named) into ``.cache/kube/bin`` (skipped when
    up to date)."""
    subprocess.run(["bash", str(ROOT / "e2e" / "controlplane" / "build.sh"), *components], check=True)


def kwok_bin() -> Path:
    """Where ``e2e/gotools/build.sh kwok`` puts kwok (``e2e/gotools.py``'s layout)."""
    base = os.environ.get("FITGATE_GOTOOLS_DIR")
    return (Path(base) if base else ROOT / ".cache" / "gotools") / "kwok" / "bin" / "kwok"


def build_scheduling() -> None:
    """Everything a ``scheduling=True`` control plane runs: the apiserver's build, the controllers, kwok."""
    build("all")
    subprocess.run(["bash", str(ROOT / "e2e" / "gotools" / "build.sh"), "kwok"], check=True)


# --------------------------------------------------------------------------------------------
# Certificates


@dataclass(frozen=True)
class CertificateAuthority:
    """A throw-away CA that signs the API server's, clients' and webhooks' certificates."""

    key: rsa.RSAPrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str = "fitgate-e2e-ca") -> CertificateAuthority:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        *,
        ips: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        organizations: tuple[str, ...] = (),
        server: bool = True,
    ) -> tuple[bytes, bytes]:
        """A (cert PEM, key PEM) pair signed by this CA; servers get SANs (Go ignores the CN)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        sans += [x509.DNSName(name) for name in dns]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.crt").write_bytes(self.pem)
        (directory / "ca.key").write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
        )

    @classmethod
    def load(cls, directory: Path) -> CertificateAuthority:
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise TypeError("ca.key is not an RSA key")
        return cls(key, x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes()))


def _write_pki(pki: Path) -> tuple[CertificateAuthority, str]:
    ca = CertificateAuthority.create()
    ca.write(pki)
    cert, key = ca.issue(
        "kube-apiserver",
        ips=("127.0.0.1", "10.0.0.1"),
        dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
    )
    (pki / "apiserver.crt").write_bytes(cert)
    (pki / "apiserver.key").write_bytes(key)
    cert, key = ca.issue("admin", organizations=("system:masters",), server=False)
    (pki / "admin.crt").write_bytes(cert)
    (pki / "admin.key").write_bytes(key)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").write_bytes(
        sa.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    (pki / "sa.pub").write_bytes(
        sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    token = secrets.token_hex(16)
    (pki.parent / "tokens.csv").write_text(f'{token},admin,1000,"system:masters"\n')
    return ca, token


# --------------------------------------------------------------------------------------------
# Processes


@dataclass
class ControlPlane:
    """etcd + kube-apiserver in ``directory``; logs stay there (``etcd.log``, ``apiserver.log``).

    ``scheduling``: also kube-controller-manager, kube-scheduler and kwok (``controller-manager.log``,
    ``scheduler.log``, ``kwok.log``).
    """

    directory: Path
    api_port: int = 0
    etcd_port: int = 0
    token: str = ""
    scheduling: bool = False
    pids: dict[str, int] = field(default_factory=dict)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ca(self) -> CertificateAuthority:
        return CertificateAuthority.load(self.directory / "pki")

    def start(self, *, detach: bool = False, timeout: float = 90.0) -> ControlPlane:
        """Start etcd and kube-apiserver, wait for ``/readyz`` and write an admin kubeconfig."""
        binaries = [BIN / "etcd", BIN / "kube-apiserver"]
        if self.scheduling:
            binaries += [BIN / "kube-controller-manager", BIN / "kube-scheduler", kwok_bin()]
        for binary in binaries:
            if not binary.is_file():
                raise RuntimeError(
                    f"{binary} is missing: run python -m e2e.cluster build{' --scheduling' * self.scheduling}"
                )
        if self.directory.exists():
            shutil.rmtree(self.directory)
        pki = self.directory / "pki"
        pki.mkdir(parents=True)
        _, self.token = _write_pki(pki)
        self.etcd_port, peer_port, self.api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self._spawn(
            "etcd",
            [
                str(BIN / "etcd"),
                f"--data-dir={self.directory / 'etcd-data'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            detach,
        )
        self._spawn(
            "apiserver",
            [
                str(BIN / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={self.directory / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer=https://127.0.0.1:{self.api_port}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={pki}",
                "--v=1",
            ],
            detach,
        )
        try:
            self._wait_ready(timeout)
            self._write_kubeconfig()
            if self.scheduling:
                self._start_scheduling(detach, timeout)
        except BaseException:
            self.stop()
            raise
        (self.directory / "state.json").write_text(
            json.dumps({"api_port": self.api_port, "etcd_port": self.etcd_port, "pids": self.pids})
        )
        return self

    def _start_scheduling(self, detach: bool, timeout: float) -> None:
        """kube-controller-manager, kube-scheduler and kwok with the admin kubeconfig; each serves its health
        on a free port of 127.0.0.1, and all three answer ``/healthz`` before this returns."""
        pki = self.directory / "pki"
        kubeconfig = str(self.kubeconfig)
        delegated = [f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}"]
        ports = {"controller-manager": free_port(), "scheduler": free_port(), "kwok": free_port()}
        self._spawn(
            "controller-manager",
            [
                str(BIN / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                *delegated,
                f"--controllers={','.join(CONTROLLERS)}",
                "--use-service-account-credentials=false",  # every controller on the admin credentials
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['controller-manager']}",
                f"--cert-dir={self.directory / 'controller-manager-certs'}",
                "--v=1",
            ],
            detach,
        )
        self._spawn(
            "scheduler",
            [
                str(BIN / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                *delegated,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                f"--cert-dir={self.directory / 'scheduler-certs'}",
                "--v=1",
            ],
            detach,
        )
        key, value = KWOK_NODE_ANNOTATION
        self._spawn(
            "kwok",
            [
                str(kwok_bin()),
                f"--config={KWOK_STAGES}",
                f"--kubeconfig={kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={key}={value}",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                "--node-ip=10.0.1.1",
                "--cidr=10.0.2.0/24",
            ],
            detach,
        )
        for name, port in ports.items():
            scheme = "http" if name == "kwok" else "https"
            self._wait_healthy(name, f"{scheme}://127.0.0.1:{port}/healthz", timeout)

    def _wait_healthy(self, name: str, url: str, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate: only "is it up" is asked
        self._poll(f"{name} not healthy", urllib.request.Request(url), context, timeout)

    def _poll(self, failure: str, request: urllib.request.Request, context: ssl.SSLContext, timeout: float) -> None:
        """Until ``request`` answers 200 (every 0.25 s, each of our processes checked alive), else TimeoutError."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(request, context=context, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise TimeoutError(f"{failure} after {timeout:.0f}s ({last}); logs in {self.directory}")

    def _check_alive(self) -> None:
        names = {pid: name for name, pid in self.pids.items()}
        for proc in self._procs:
            if proc.poll() is not None:
                name = names.get(proc.pid, "a control-plane process")
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {name}.log in {self.directory}")

    def _spawn(self, name: str, argv: list[str], detach: bool) -> None:
        with (self.directory / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=detach)
        self._procs.append(proc)
        self.pids[name] = proc.pid

    def _wait_ready(self, timeout: float) -> None:
        context = ssl.create_default_context(cafile=str(self.directory / "pki" / "ca.crt"))
        request = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"})
        self._poll("kube-apiserver not ready", request, context, timeout)

    def _write_kubeconfig(self) -> None:
        pki = self.directory / "pki"
        self.kubeconfig.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: fitgate-e2e\n"
            "  cluster:\n"
            f"    server: {self.server}\n"
            f"    certificate-authority: {pki / 'ca.crt'}\n"
            "users:\n"
            "- name: admin\n"
            "  user:\n"
            f"    token: {self.token}\n"
            "contexts:\n"
            "- name: fitgate-e2e\n"
            "  context: {cluster: fitgate-e2e, user: admin, namespace: default}\n"
            "current-context: fitgate-e2e\n"
        )
        self.kubeconfig.chmod(0o600)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every process (the API server's clients, then the API server, then etcd), then SIGKILL what
        is left."""
        for name in ("kwok", "scheduler", "controller-manager", "apiserver", "etcd"):
            pid = self.pids.get(name)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            _wait_pid(pid, timeout)
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        self.pids.clear()

    @classmethod
    def attach(cls, directory: Path) -> ControlPlane:
        """A handle on a control plane started by ``up`` (to stop it)."""
        state = json.loads((directory / "state.json").read_text())
        cp = cls(directory, state["api_port"], state["etcd_port"])
        cp.pids = {k: int(v) for k, v in state["pids"].items()}
        return cp


def _wait_pid(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
            if finished:
                return
        except ChildProcessError:  # not our child (started by `up`): poll for existence
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fitgate's e2e control plane (etcd + kube-apiserver on loopback)")
    parser.add_argument("action", choices=("up", "down", "status", "build"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument(
        "--scheduling", action="store_true", help="also kube-controller-manager, kube-scheduler and kwok"
    )
    args = parser.parse_args(argv)
    if args.action == "build":
        build_scheduling() if args.scheduling else build()
        return 0
    if args.action == "up":
        if (args.dir / "state.json").exists():
            ControlPlane.attach(args.dir).stop()
        build_scheduling() if args.scheduling else build()
        started = time.monotonic()
        cp = ControlPlane(args.dir, scheduling=args.scheduling).start(detach=True)
        shutil.copy(cp.kubeconfig, KUBECONFIG)
        print(f"control plane ready in {time.monotonic() - started:.1f}s at {cp.server}")
        print(f"export KUBECONFIG={KUBECONFIG}")
        return 0
    if not (args.dir / "state.json").exists():
        print("no control plane is running (no state in {args.dir})")
        return 0 if args.action == "down" else 1
    cp = ControlPlane.attach(args.dir)
    if args.action == "down":
        cp.stop()
        (args.dir / "state.json").unlink()
        KUBECONFIG.unlink(missing_ok=True)
        print("control plane stopped")
        return 0
    alive = {}
    for name, pid in cp.pids.items():
        try:
            os.kill(pid, 0)
            alive[name] = True
        except ProcessLookupError:
            alive[name] = False
    print(json.dumps({"server": cp.server, "alive": alive}))
    return 0 if all(alive.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
