"""The habits that run: ruff (lint + format), mypy --strict on src/, import-linter's layer contracts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize(
    "argv",
    [
        (str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "e2e"),
        (str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks", "e2e"),
        (str(BIN / "mypy"),),
        (str(BIN / "lint-imports"),),
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict", "import-linter"],
)
def test_tool_passes(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
