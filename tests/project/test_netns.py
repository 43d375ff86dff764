"""e2e/netns.py: a server in its own network namespace, reached only through the loopback relay.

The server is Python's ``http.server`` bound to every interface (as llm-d's simulator binds), on a port
the test already holds on the host: it can only bind there because the namespace is its own, and a
connection to that host port reaches the test's socket, not the server.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
from e2e.netns import Namespaced, NetnsError, main, unshare_available


@pytest.fixture
def short_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir whose socket path fits sun_path (pytest's tmp paths can be long)."""
    return Path(os.path.realpath(tmp_path_factory.mktemp("ns")))


def test_unshare_works_here() -> None:
    # CI and the developers' machines have util-linux and unprivileged user namespaces; a skip would hide it
    assert unshare_available() is None


def test_server_isolated_and_reached_through_the_relay(short_tmp: Path) -> None:
    www = short_tmp / "www"
    www.mkdir()
    (www / "hello.txt").write_text("from inside the namespace\n")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        command = [sys.executable, "-m", "http.server", str(port), "--bind", "0.0.0.0", "--directory", str(www)]
        server = Namespaced(command, port, short_tmp / "ns")
        with server:
            server.wait_http("/hello.txt")
            assert server.port != port
            body = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/hello.txt", timeout=5).read()
            assert body == b"from inside the namespace\n"
            # the same port on the host is the test's own socket: the server is not there
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                accepted, _ = held.accept()
                accepted.close()
            pid = server.child_pid
            assert pid is not None and Path(f"/proc/{pid}").exists()
        assert server.process is not None and server.process.returncode == 128 + 15  # SIGTERM passed on
        assert not Path(f"/proc/{pid}").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.inner_port), timeout=1).close()


def test_a_command_that_fails_is_reported_with_its_output(short_tmp: Path) -> None:
    command = [sys.executable, "-c", "import os, sys; print(os.environ['WHY']); sys.exit(3)"]
    with Namespaced(command, 8000, short_tmp / "ns", env={"WHY": "no model here"}) as server:
        with pytest.raises(NetnsError, match="ended before answering /health") as caught:
            server.wait_http("/health", timeout_s=20)
        assert "no model here" in str(caught.value)
    assert server.process is not None and server.process.returncode == 3


def test_a_long_socket_path_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    with pytest.raises(NetnsError, match="longer than 100 bytes"):
        Namespaced(["true"], 8000, deep).start()


def test_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inner", "/tmp/x.sock"]) == 2
    assert "usage: python -m e2e.netns inner" in capsys.readouterr().err
