"""The README's try-without-GPUs recipe waits for the operator a bounded time, and not for a dead one.

Before issue 25 it was ``until curl -sf .../readyz; do sleep 1; done``: an operator that died at start
(a port taken, a bad certificate) left the reader's terminal, and ``e2e/test_readme_recipe.py``, waiting
forever. Here the recipe's own wait lines run after a stand-in "operator" that exits at once.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from e2e.test_readme_recipe import MARKER, recipe

REPO = Path(__file__).resolve().parents[2]


def wait_block() -> str:
    """The recipe's lines from starting the operator in the background to the end of its wait loop."""
    script = recipe((REPO / "README.md").read_text())
    start = script.index("> .cache/try/operator.log 2>&1 &")
    after = script[start:].split("\n", 1)[1]
    match = re.match(r"(.*?\n\s*done\b[^\n]*)", after, flags=re.DOTALL)
    assert match, "no wait loop after the operator is started"
    return match.group(1)


def test_the_recipe_stops_waiting_for_an_operator_that_died(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    assert MARKER in (REPO / "README.md").read_text()
    block = wait_block()
    assert "until curl" not in block
    script = "mkdir -p .cache/try\necho 'port 8080 taken' > .cache/try/operator.log; (exit 3) &\n" + block
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False)
    # a dead operator is seen within a second or two (unless something else answers on 8080: then at once)
    assert time.monotonic() - started < 30, done.stdout
    assert done.returncode == 0, done.stderr
