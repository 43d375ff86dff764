"""Fuzzing, bounded for CI: hostile config.json files and fitgate plan arguments (see tests/fuzzing_configs.py).

Zero crashes, hangs or nonsense numbers; every rejection is one line. ``benchmarks/fuzz.py`` runs the
same checks over >= 10,000 cases.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.fuzzing_configs import check_argv, check_config, hostile_configs, plan_argvs

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(data=hostile_configs())
def test_hostile_configs(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outcome = check_config(data, Path(tmp) / "m")
    assert outcome in ("accepted", "rejected"), outcome


@FUZZ
@given(argv=plan_argvs())
def test_hostile_plan_arguments(argv: list[str]) -> None:
    outcome = check_argv(argv)
    assert outcome in ("accepted", "rejected"), f"{outcome} <- {argv}"
