"""e2e/controlplane/build.sh decides by content, not file times (a copied .cache is not rebuilt)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_GO = """#!/usr/bin/env bash
# records the build and writes the -o target, like `go build -o X`
echo "$*" >> "$FAKE_GO_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then printf '#!/bin/sh\\n' > "$2"; chmod +x "$2"; fi
  shift
done
"""


@pytest.fixture
def script(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the control plane module (sources only) and a fake `go` on PATH."""
    module = tmp_path / "e2e" / "controlplane"
    shutil.copytree(REPO / "e2e" / "controlplane", module, ignore=shutil.ignore_patterns("*.tmp"))
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(FAKE_GO)
    (tools / "go").chmod(0o755)
    log = tmp_path / "go.log"
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "FITGATE_KUBE_BIN": str(tmp_path / "bin"),
        "FAKE_GO_LOG": str(log),
    }
    return module, log, env


def builds(module: Path, log: Path, env: dict[str, str]) -> int:
    before = len(log.read_text().splitlines()) if log.exists() else 0
    subprocess.run(["bash", str(module / "build.sh")], env=env, check=True, capture_output=True)
    return len(log.read_text().splitlines()) - before


def test_a_copied_cache_with_new_file_times_is_not_rebuilt(script: tuple[Path, Path, dict[str, str]]) -> None:
    module, log, env = script
    assert builds(module, log, env) == 2  # cold: both binaries
    assert builds(module, log, env) == 0
    future = time.time() + 3600  # a fresh checkout or copy: every source newer than the binaries
    for src in (module / "go.mod", module / "go.sum", *module.glob("cmd/*/main.go")):
        os.utime(src, (future, future))
    assert builds(module, log, env) == 0


def test_a_changed_source_rebuilds_only_its_binary(script: tuple[Path, Path, dict[str, str]]) -> None:
    module, log, env = script
    builds(module, log, env)
    main = module / "cmd" / "etcd" / "main.go"
    main.write_text(main.read_text() + "\n// changed\n")
    assert builds(module, log, env) == 1
    assert "./cmd/etcd" in log.read_text().splitlines()[-1]


def test_binaries_built_before_the_record_are_adopted_once(script: tuple[Path, Path, dict[str, str]]) -> None:
    module, log, env = script
    builds(module, log, env)
    bin_dir = Path(env["FITGATE_KUBE_BIN"])
    for record in bin_dir.glob("*.sources"):
        record.unlink()
    assert builds(module, log, env) == 0  # newer than their sources: adopted, records written
    assert sorted(p.name for p in bin_dir.glob("*.sources")) == ["etcd.sources", "kube-apiserver.sources"]
