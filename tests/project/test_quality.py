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
        (str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "e2e", "scripts"),
        (str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks", "e2e", "scripts"),
        (str(BIN / "mypy"),),
        (str(BIN / "lint-imports"),),
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict", "import-linter"],
)
def test_tool_passes(argv: tuple[str, ...]) -> None:
    result = _run(*argv)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


#: A module past this many lines is two modules (STYLE.md: types and arithmetic together past ~400 lines).
MAX_MODULE_LINES = 600
#: Modules allowed past it, each for a reason a test below checks: the CRD's pydantic types (one parser).
TYPES_ONLY = {"src/fitgate/operator/schema/api.py"}


def test_no_module_outgrows_its_room() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "src").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert set(long) <= TYPES_ONLY, f"split these modules along their seams: {long}"


def test_the_types_only_modules_hold_no_arithmetic() -> None:
    # a types-only module: classes, at most one module-level function (its boundary parser)
    for name in TYPES_ONLY:
        lines = (REPO / name).read_text().splitlines()
        functions = [line for line in lines if line.startswith("def ")]
        assert len(functions) <= 1, (name, functions)
