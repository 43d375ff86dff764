"""The kind runner is there for users with Docker; here it is checked, and skipped with its reason."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "kind" / "run.sh"


def test_kind_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0


def test_kind_runner() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, check=False).returncode != 0:
        pytest.skip(
            "no Docker engine is reachable here (docker info failed): kind cannot run; the loopback "
            "control plane runs the e2e suite instead"
        )
    result = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
