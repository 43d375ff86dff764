"""Run a server in a network namespace of its own, reachable from the test only through a loopback relay.

Some servers the tests run (llm-d's vLLM simulator) listen on every interface and have no flag to bind
one address (``net.Listen("tcp4", ":8000")``, llm-d-inference-sim v0.10.2 pkg/communication/http.go:54).
``unshare -rn`` (an unprivileged user namespace and a new network namespace; no root needed) gives such
a process a namespace whose only interface is its own loopback, so nothing outside it can reach its
ports. The test reaches it through a path in the filesystem, which namespaces share:

* inside, ``python -m e2e.netns inner SOCKET PORT -- COMMAND...`` brings the namespace's loopback up,
  starts COMMAND (ended with this process: ``PR_SET_PDEATHSIG``) and relays each connection to the Unix
  socket SOCKET on to ``127.0.0.1:PORT`` of the namespace;
* outside, :class:`Namespaced` listens on ``127.0.0.1:<a free port>`` and relays to SOCKET.

    with Namespaced(["simulator", "--port", "8000"], port=8000, workdir=tmp) as server:
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health")
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[1]

_SIOCGIFFLAGS = 0x8913  # linux/sockios.h
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1  # linux/if.h
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_CHUNK = 64 * 1024


class NetnsError(RuntimeError):
    """The namespace or the server in it could not be started."""


def loopback_up() -> None:
    """Set ``lo`` up in the current network namespace (a new one starts with it down), as ``ip link set lo up``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)  # struct ifreq: name, then ifr_flags in the union
        flags = struct.unpack("16sH22x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until ``source`` ends, then end ``sink``'s sending side."""
    with contextlib.suppress(OSError):
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _splice(client: socket.socket, upstream: socket.socket) -> None:
    """Relay both ways between two connected sockets until both sides have ended."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join(timeout=60)
    upstream.close()


class _Relay(socketserver.BaseRequestHandler):
    """One accepted connection, relayed to the server's ``target`` (a Unix path or a (host, port))."""

    server: _TcpRelay | _UnixRelay

    def handle(self) -> None:
        target = self.server.target
        family = socket.AF_UNIX if isinstance(target, str) else socket.AF_INET
        upstream = socket.socket(family, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            upstream.close()
            return  # the client sees the connection close: nothing listens on the other side yet
        _splice(self.request, upstream)


class _TcpRelay(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: str) -> None:
        self.target: str | tuple[str, int] = target
        super().__init__(("127.0.0.1", 0), _Relay)


class _UnixRelay(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, port: int) -> None:
        self.target: str | tuple[str, int] = ("127.0.0.1", port)
        super().__init__(path, _Relay)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def inner(path: str, port: int, command: Sequence[str]) -> int:
    """In the new namespace: loopback up, ``command`` started, Unix socket ``path`` relayed to ``port``.

    Returns the command's exit status once it ends, as a shell gives it (128 + N when signal N ended it;
    SIGTERM to this process ends the command first). The command's PID is written to ``path + ".pid"``, so
    a test can check that it is gone.
    """
    loopback_up()
    child = subprocess.Popen(list(command), preexec_fn=_die_with_parent)  # noqa: PLW1509 - only prctl
    Path(path + ".pid").write_text(f"{child.pid}\n")

    def end(signum: int, frame: object) -> None:
        child.terminate()

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    relay = _UnixRelay(path, port)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        while True:
            try:
                code = child.wait(timeout=30)
                return code if code >= 0 else 128 - code
            except subprocess.TimeoutExpired:
                continue
    finally:
        relay.shutdown()
        relay.server_close()


def unshare_available() -> str | None:
    """None when ``unshare -rn`` works here, else why not (one line)."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    result = subprocess.run(["unshare", "-rn", "true"], capture_output=True, text=True, timeout=10, check=False)
    if result.returncode != 0:
        return f"`unshare -rn true` failed ({result.returncode}): {result.stderr.strip()[:200]}"
    return None


class Namespaced:
    """``command`` in a network namespace of its own; ``port`` of it reachable at ``127.0.0.1:self.port``.

    Started by :meth:`start` (or ``with``) and ended by PID in :meth:`stop`: SIGTERM to the namespace's
    first process, which ends the command, then SIGKILL after ``stop_timeout_s``. Its output goes to
    ``workdir/output.log``; ``env`` is added to this process's environment for it.
    """

    def __init__(
        self,
        command: Sequence[str],
        port: int,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.command = list(command)
        self.env = {**os.environ, **(env or {})}
        self.inner_port = port
        self.workdir = workdir
        self.stop_timeout_s = stop_timeout_s
        self.socket_path = str(workdir / "relay.sock")
        self.log_path = workdir / "output.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._relay: _TcpRelay | None = None

    @property
    def port(self) -> int:
        """The host loopback port that reaches the command's ``port``."""
        if self._relay is None:
            raise NetnsError("the namespace is not started")
        return int(self._relay.server_address[1])

    @property
    def child_pid(self) -> int | None:
        """The command's PID (as the host sees it), once the namespace has started it."""
        with contextlib.suppress(OSError, ValueError):
            return int(Path(self.socket_path + ".pid").read_text())
        return None

    def start(self) -> Namespaced:
        """Start the namespace and the host side of the relay; does not wait for the command to listen."""
        why = unshare_available()
        if why is not None:
            raise NetnsError(f"cannot make a network namespace: {why}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if len(self.socket_path.encode()) > 100:  # sun_path holds 108 bytes
            raise NetnsError(f"socket path {self.socket_path!r} is longer than 100 bytes; use a shorter workdir")
        argv = ["unshare", "-rn", sys.executable, "-m", "e2e.netns", "inner", self.socket_path, str(self.inner_port)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [*argv, "--", *self.command],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._relay = _TcpRelay(self.socket_path)
        threading.Thread(target=self._relay.serve_forever, daemon=True).start()
        return self

    def wait_http(self, path: str, timeout_s: float = 30.0) -> None:
        """Wait until ``GET path`` answers 200 through the relay (the command is up and listening).

        Raises:
            NetnsError: the namespace ended first, or ``timeout_s`` passed; the message holds the log's tail.
        """
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{self.port}{path}"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise NetnsError(f"the namespaced command ended before answering {path}:\n{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
            time.sleep(0.1)
        raise NetnsError(f"no 200 from {url} within {timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the command's output."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> int | None:
        """End the namespace by PID (SIGTERM, then SIGKILL) and the relay; returns the exit status."""
        if self._relay is not None:
            self._relay.shutdown()
            self._relay.server_close()
            self._relay = None
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)  # the command dies with it (PR_SET_PDEATHSIG)
                self.process.wait(timeout=self.stop_timeout_s)
        return self.process.returncode

    def __enter__(self) -> Namespaced:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: Sequence[str]) -> int:
    """``inner SOCKET PORT -- COMMAND...`` (what :class:`Namespaced` runs under ``unshare -rn``)."""
    if len(argv) < 5 or argv[0] != "inner" or argv[3] != "--":
        print("usage: python -m e2e.netns inner SOCKET PORT -- COMMAND...", file=sys.stderr)
        return 2
    return inner(argv[1], int(argv[2]), argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
