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


def build_named(module: Path, log: Path, env: dict[str, str], *names: str) -> list[str]:
    """The `go build` command lines of one `build.sh NAMES...` run."""
    before = len(log.read_text().splitlines()) if log.exists() else 0
    subprocess.run(["bash", str(module / "build.sh"), *names], env=env, check=True, capture_output=True)
    return log.read_text().splitlines()[before:]


def test_the_controllers_are_built_only_when_named_from_their_own_module(
    script: tuple[Path, Path, dict[str, str]],
) -> None:
    module, log, env = script
    assert [line.split()[-1] for line in build_named(module, log, env)] == ["./cmd/kube-apiserver", "./cmd/etcd"]
    bin_dir = Path(env["FITGATE_KUBE_BIN"])
    assert not (bin_dir / "kube-scheduler").exists()  # a plain run (every e2e test's) leaves them out
    built = build_named(module, log, env, "kube-controller-manager", "kube-scheduler")
    assert [line.split()[-1] for line in built] == ["./cmd/kube-controller-manager", "./cmd/kube-scheduler"]
    assert all("version.gitVersion=v1." in line for line in built)  # stamped with the apiserver's release
    assert build_named(module, log, env, "all") == []
    # a change to the controllers' module rebuilds them, never kube-apiserver (whose stamp hashes only its module)
    gomod = module / "controllers" / "go.mod"
    gomod.write_text(gomod.read_text() + "\n// changed\n")
    rebuilt = build_named(module, log, env, "all")
    assert [line.split()[-1] for line in rebuilt] == ["./cmd/kube-controller-manager", "./cmd/kube-scheduler"]


def test_an_unknown_component_is_named_and_nothing_is_built(script: tuple[Path, Path, dict[str, str]]) -> None:
    module, log, env = script
    done = subprocess.run(
        ["bash", str(module / "build.sh"), "kube-scheduler", "kubelet"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown component 'kubelet'" in done.stderr
    assert not log.exists()


def test_both_modules_require_the_same_kubernetes_release() -> None:
    """The controllers' go.mod is the apiserver's plus what they add: same k8s.io/kubernetes, same pins, so the
    packages they share compile once into the Go cache (docs/development.md)."""

    def requires(path: Path) -> dict[str, str]:
        out = {}
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and "." in parts[0] and parts[1].startswith("v") and "=>" not in line:
                out[parts[0]] = parts[1]
        return out

    api = requires(REPO / "e2e" / "controlplane" / "go.mod")
    controllers = requires(REPO / "e2e" / "controlplane" / "controllers" / "go.mod")
    assert api["k8s.io/kubernetes"] == controllers["k8s.io/kubernetes"]
    differing = {m: (v, controllers.get(m)) for m, v in api.items() if controllers.get(m) != v}
    assert differing == {}
