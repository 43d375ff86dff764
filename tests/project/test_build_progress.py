"""A cold `make test` is not silent: e2e/controlplane/build.sh says how far the Go build is, every 30 s.

The build runs 7-16 minutes from an empty Go cache (README, docs/e2e.md); before, pytest showed nothing
for all of it. A fake `go` that compiles 6 "packages" in 3 s stands in for it, with the progress period
set to 1 s (FITGATE_BUILD_PROGRESS_SECONDS).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SLOW_GO = """#!/usr/bin/env bash
# `go build -v -o X ...`: one package name a half second on stderr, as -v prints them, then the binary
for i in 1 2 3 4 5 6; do echo "k8s.io/fake/pkg$i" >&2; sleep 0.5; done
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then printf '#!/bin/sh\\n' > "$2"; chmod +x "$2"; fi
  shift
done
"""

FAILING_GO = """#!/usr/bin/env bash
echo "k8s.io/fake/pkg1" >&2
echo "# k8s.io/fake/broken" >&2
echo "broken.go:3:1: syntax error: unexpected }" >&2
exit 1
"""


def _build(tmp_path: Path, go: str) -> subprocess.CompletedProcess[str]:
    module = tmp_path / "e2e" / "controlplane"
    shutil.copytree(REPO / "e2e" / "controlplane", module, ignore=shutil.ignore_patterns("*.tmp"))
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(go)
    (tools / "go").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "FITGATE_KUBE_BIN": str(tmp_path / "bin"),
        "FITGATE_BUILD_PROGRESS_SECONDS": "1",
    }
    return subprocess.run(
        ["bash", str(module / "build.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_cold_build_prints_progress_while_go_compiles(tmp_path: Path) -> None:
    done = _build(tmp_path, SLOW_GO)
    assert done.returncode == 0, done.stderr
    progress = re.findall(r"still building: (\d+) packages compiled in 0 min (\d+) s", done.stdout)
    # two builds (kube-apiserver, etcd) of ~3 s each, a line a second: at least 2 lines each, counts rising
    assert len(progress) >= 4, done.stdout
    assert int(progress[1][0]) >= int(progress[0][0])
    assert done.stdout.count("done: 6 packages compiled") == 2
    assert (tmp_path / "bin" / "kube-apiserver").exists() and (tmp_path / "bin" / "etcd").exists()
    # the package names themselves are counted, not printed: a cold build compiles thousands
    assert "k8s.io/fake/pkg" not in done.stdout + done.stderr


def test_a_failed_build_shows_gos_error_and_fails(tmp_path: Path) -> None:
    done = _build(tmp_path, FAILING_GO)
    assert done.returncode == 1
    assert "go build failed (exit 1)" in done.stderr and "syntax error: unexpected }" in done.stderr
    assert not (tmp_path / "bin" / "kube-apiserver").exists()
