"""The Go tools the tests drive, built from the Go module proxy on first use (``e2e/gotools/build.sh``).

Each directory of ``e2e/gotools`` is one Go module whose ``tool`` directives pin the versions; its binaries
land in ``.cache/gotools/<name>/bin`` and are rebuilt only when its go.mod or go.sum changes.

    python -m e2e.gotools NAME [NAME ...]     # build (skipped when up to date), print the bin directories
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "e2e" / "gotools"


def bin_dir(name: str) -> Path:
    """Where the tools of module ``name`` are (or will be) built."""
    base = os.environ.get("FITGATE_GOTOOLS_DIR")
    return (Path(base) if base else ROOT / ".cache" / "gotools") / name / "bin"


def build(name: str) -> Path:
    """Build module ``name``'s tools if needed (progress on the terminal), return their bin directory."""
    subprocess.run(["bash", str(MODULES / "build.sh"), name], check=True)
    return bin_dir(name)


def ensure(request: pytest.FixtureRequest, name: str, tool: str) -> Path:
    """The path of ``tool`` from module ``name``, built first with pytest's capture off (a cold build prints
    a progress line every 30 s). Missing Go fails the test: CI has Go, and a skipped check proves nothing."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        directory = build(name)
    else:
        with capture.global_and_fixture_disabled():
            directory = build(name)
    path = directory / tool
    if not path.is_file():
        raise AssertionError(f"{path} was not built by e2e/gotools/build.sh {name}")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description="build the Go tools the tests drive")
    parser.add_argument("names", nargs="+", help="directories of e2e/gotools")
    for name in parser.parse_args().names:
        print(build(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
