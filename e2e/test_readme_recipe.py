"""The README's "Try it without GPUs" recipe, run as it is written, on a fresh clone of this repository.

The block between ``<!-- recipe: try-without-gpus -->`` and the end of its code fence is run with
bash in a ``git clone`` of the repository: ``make cluster-up`` sets up the clone's own virtualenv (from
the pip cache) and starts a control plane; only the binaries the session already built (kube-apiserver,
etcd, kubectl, helm) are shared, by link, so the test does not spend the 7-minute cold build again.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from e2e import cluster, tools
from e2e.conftest import Kube

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- recipe: try-without-gpus -->"


def recipe(readme: str) -> str:
    """The bash block right after the marker."""
    after = readme.split(MARKER, 1)[1]
    match = re.search(r"```bash\n(.*?)\n```", after, flags=re.DOTALL)
    assert match, "no bash block after the recipe marker"
    return match.group(1)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def stop_recipe_operator(clone: Path) -> None:
    """End the operator the recipe started, by the PID it wrote, and only if that PID is still that process.

    Never by name (``pkill -f``): another operator on this machine, a developer's, must survive the test.
    """
    pid_file = clone / ".cache" / "try" / "operator.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().strip() or 0)
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        argv = cmdline.read_bytes().split(b"\0") if pid > 0 else []
    except OSError:  # already ended (the recipe's own clean-up stopped it)
        return
    if b"operator" in argv and b".cache/try/tls.crt" in argv:  # the PID was not reused by another process
        os.kill(pid, signal.SIGTERM)


def test_the_readme_recipe_runs_as_written(kube: Kube, tmp_path: Path) -> None:
    if kube.control_plane is None:
        pytest.skip("the recipe starts its own loopback control plane")
    if not (_port_free(9443) and _port_free(8080)):
        pytest.skip("the recipe's fixed ports 9443/8080 are taken on this machine")
    clone = tmp_path / "fitgate"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    (clone / ".cache" / "kube").mkdir(parents=True)
    (clone / ".cache" / "kube" / "bin").symlink_to(cluster.BIN)
    (clone / ".cache" / "tools").symlink_to(tools.BIN_DIR.parent)
    script = recipe((clone / "README.md").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "VIRTUAL_ENV", "FITGATE_E2E_KUBECONFIG")}
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    finally:
        # whatever happened, leave nothing running
        subprocess.run(["make", "cluster-down"], cwd=clone, env=env, capture_output=True, check=False)
        stop_recipe_operator(clone)
    log_file = clone / ".cache" / "try" / "operator.log"
    log = log_file.read_text() if log_file.exists() else ""
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n--- operator log\n{log[-2000:]}"
    out = done.stdout + done.stderr
    assert 'admission webhook "fit.fitgate.io" denied the request' in out and "does not fit" in out
    assert "smallest change that fits" in out
    assert re.search(r"llama-8b-chat\s+meta-llama/Llama-3.1-8B-Instruct\s+NVIDIA-H100-80GB-HBM3\s+1\s+Fits", out), out
    shutil.rmtree(clone / ".venv", ignore_errors=True)
