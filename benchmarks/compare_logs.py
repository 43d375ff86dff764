"""``fitgate compare`` on the public vLLM start-up logs of the calibration set, as a user would run it.

For every case of ``../shared/calibration/cases.jsonl`` whose record is a vLLM log (full or excerpt), the
case's ``raw_lines`` are written to a file and read back with ``fitgate compare --log FILE -o json``
(the real CLI). The checkpoint is the calibration set's metadata directory for the model (``--model``),
else the built-in catalog; cases without either are listed as not planned. ``--vllm-version`` is passed
only where the log prints no version (the case's stated release, else 0.6.4 for the undated V0 logs).

Prints, per case: the release, what happened, fitgate's verdict and whether it agrees, how many of the
case's figures the log printed and how many were read back exactly, the error per term, and the source.

Usage: python benchmarks/compare_logs.py [--calibration DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.calibration_logs import FIGURES, NOT_A_LOG, printed

from fitgate.checkpoints.catalog import find_entry
from fitgate.cli import main as fitgate
from fitgate.observe import parse_lines

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CALIBRATION = ROOT.parent / "shared" / "calibration"
TERMS = ("weights_bytes", "kv_available_bytes", "num_gpu_blocks", "kv_tokens", "max_concurrency")


def _model_ref(case: dict[str, Any], calibration: Path) -> str | None:
    repo = str(case["model"]).split(" (")[0]
    folder = calibration / "models" / repo.replace("/", "__")
    if folder.is_dir():
        return str(folder)
    return repo if find_entry(repo) else None


def run_case(case: dict[str, Any], calibration: Path, workdir: Path) -> dict[str, Any]:
    log = workdir / f"{case['id']}.log"
    log.write_text("\n".join(case["raw_lines"]) + "\n")
    parsed = parse_lines(case["raw_lines"])
    measured = case["measured"]
    text = "\n".join(case["raw_lines"])
    shown = [k for k in FIGURES if measured.get(k) is not None and printed(measured[k], text)]
    read = [k for k in shown if getattr(parsed.observed, k) == measured[k]]
    row: dict[str, Any] = {
        "case": case["id"],
        "release": parsed.settings.vllm_version or f"({case['vllm_version'] or 'undated'} {case['vllm_engine']})",
        "status": case["status"],
        "outcome": parsed.outcome,
        "read": f"{len(read)}/{len(shown)}",
        "source": str(case["source"]),
    }
    ref = _model_ref(case, calibration)
    if ref is None:
        return row | {"verdict": "not planned (no public config.json)"}
    argv = ["compare", "--log", str(log), "--model", ref, "--output", "json"]
    if parsed.settings.vllm_version is None:
        argv += ["--vllm-version", str(case["vllm_version"] or "0.6.4").split()[0]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fitgate(argv)
    if code != 0:
        return row | {"verdict": f"exit {code}: {err.getvalue().strip()}"}
    doc = json.loads(out.getvalue())
    agrees = {True: "agrees", False: "DISAGREES", None: "-"}[doc["verdict_agrees"]]
    return row | {"verdict": f"{doc['predicted']['verdict']} ({agrees})", "errors": doc["errors"]}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    cases_file = args.calibration / "cases.jsonl"
    if not cases_file.is_file():
        print(f"compare_logs: {cases_file} not found (pass --calibration DIR)", file=sys.stderr)
        return 2
    cases = [json.loads(line) for line in cases_file.read_text().splitlines() if line.strip()]
    logs = [c for c in cases if c["source_kind"].split()[0] not in NOT_A_LOG]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_case(c, args.calibration, Path(tmp)) for c in logs]
    header = ["case", "release", "status", "outcome", "figures read", "verdict", *TERMS, "source"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for r in rows:
        errors = r.get("errors") or {}
        cells = [r["case"], r["release"], r["status"], r["outcome"], r["read"], r["verdict"]]
        cells += [_fmt(errors.get(t)) for t in TERMS]
        cells.append(r["source"].split("URL ")[-1] if args.markdown else r["source"][:60])
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
    planned = [r for r in rows if "errors" in r]
    print(
        f"\n{len(rows)} logs, {len(planned)} planned; printed figures read back exactly: "
        f"{sum(int(r['read'].split('/')[0]) for r in rows)}/{sum(int(r['read'].split('/')[1]) for r in rows)}; "
        f"verdicts agree: {sum('(agrees)' in r['verdict'] for r in planned)}/{len(planned)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
