"""Measure the working tree side by side with an earlier commit, in the same run (issue 23).

:func:`source_of` exports ``ref``'s ``src/`` with ``git archive`` into ``.cache/baseline/<commit>`` (once);
:func:`side_by_side` runs one benchmark command alternately with each code (``PYTHONPATH`` puts the
baseline's ``src/`` ahead of the installed package; the benchmark script itself is the working tree's,
so both are measured the same way), ``rounds`` times, and returns each round's JSON line. On a shared
machine only figures taken this way, interleaved, compare.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def source_of(ref: str) -> Path:
    """The ``src/`` folder of commit ``ref``, exported once under ``.cache/baseline``."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode != 0:
        raise SystemExit(f"--baseline {ref}: not a commit of {REPO} ({commit.stderr.strip()})")
    sha = commit.stdout.strip()
    out = REPO / ".cache" / "baseline" / sha
    if not (out / "src" / "fitgate").is_dir():
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "src.tar"
            subprocess.run(
                ["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), sha, "src"], check=True
            )
            with tarfile.open(archive) as tar:
                tar.extractall(out, filter="data")
    return out / "src"


def run_json(argv: list[str], src: Path | None) -> dict[str, Any]:
    """Run ``argv`` (a benchmark printing a JSON last line) with ``src`` first on the path; its last line."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} ({'baseline' if src else 'working tree'}) failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def side_by_side(argv: list[str], ref: str, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` interleaved runs of ``argv`` on the working tree and on ``ref``: {"current", "baseline"}."""
    base = source_of(ref)
    out: dict[str, list[dict[str, Any]]] = {"current": [], "baseline": []}
    for i in range(rounds):
        order = [("current", None), ("baseline", base)]
        for name, src in order if i % 2 == 0 else order[::-1]:
            out[name].append(run_json(argv, src))
    return out
