"""Fuzz fitgate's input boundaries with >= 10,000 generated cases and print what became of them.

    python benchmarks/fuzz.py [--cases 10000] [--seed 0] [--unguarded]
    python benchmarks/fuzz.py --hostile [--cases 6000]   # issue 22: workloads, logs, /metrics, bombs

Targets and checks are those of tests/fuzzing.py and tests/fuzzing_configs.py: safetensors files and
index files resolved as checkpoint directories, hostile ``config.json`` files (real configs with values
replaced) resolved, parsed and planned, ``fitgate plan`` arguments, and AdmissionReview bodies POSTed to
the webhook server (``--unguarded``: kopf's own server, for comparison). Every case ends accepted or
rejected (one line); anything else is counted as crash, multiline, nonsense or slow, and the first few
of each are shown. Exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from tests.fuzzing import (
    WebhookTarget,
    check_index,
    check_safetensors,
    index_files,
    review_bodies,
    safetensors_files,
)
from tests.fuzzing_configs import check_argv, check_config, hostile_configs, plan_argvs
from tests.fuzzing_workloads import (
    BOMBS,
    check_exposition,
    check_log,
    check_workload,
    check_workload_admission,
    expositions,
    hostile_logs,
    hostile_workloads,
)


def run(
    name: str, strategy: st.SearchStrategy[bytes], check: Callable[[bytes], str], cases: int, at: int
) -> Counter[str]:
    counts: Counter[str] = Counter()
    shown: Counter[str] = Counter()

    @seed(at)
    @settings(
        max_examples=cases,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=strategy)
    def one(data: bytes) -> None:
        outcome = check(data)
        kind = outcome.split(":", 1)[0]
        counts[kind] += 1
        if kind not in ("accepted", "rejected") and shown[kind] < 3:
            shown[kind] += 1
            print(f"  {name} {outcome[:300]}  <- {repr(data)[:120]}", file=sys.stderr)

    one()
    return counts


def _rss_mib() -> float:
    """This process's peak resident memory (ru_maxrss is KiB on Linux)."""
    import resource  # noqa: PLC0415 - Unix only, and only here

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hostile(cases: int, at: int) -> int:
    """Issue 22's probes: hostile workloads (read, and admitted in a warn namespace), logs, expositions; bombs."""
    from tests.fitgate_operator.test_operator import H100, index, memo, on  # noqa: PLC0415 - the operator only here

    per = -(-cases // 4)
    targets: list[tuple[str, Any, Callable[[Any], str], int]] = [
        ("workloads", hostile_workloads(), check_workload, per),
        ("wl-admission", hostile_workloads(), lambda o: check_workload_admission(o, on(memo(), index(H100))), per // 4),
        ("logs", hostile_logs, check_log, per),
        ("exposition", expositions, check_exposition, per),
    ]
    results: dict[str, Counter[str]] = {}
    timings: dict[str, float] = {}
    for name, strategy, check, n in targets:
        start = time.monotonic()
        results[name] = run(name, strategy, check, n, at)
        timings[name] = time.monotonic() - start
    kinds = ["accepted", "rejected", "crash", "multiline", "nonsense", "slow"]
    print(f"{'target':<14}" + "".join(f"{k:>10}" for k in kinds) + f"{'total':>10}{'seconds':>10}")
    for name, counts in results.items():
        row = "".join(f"{counts[k]:>10}" for k in kinds)
        print(f"{name:<14}{row}{sum(counts.values()):>10}{timings[name]:>10.1f}")
    print(f"\n{'bomb':<26}{'seconds':>10}{'peak RSS MiB':>14}")
    for name, bomb in BOMBS.items():
        start = time.monotonic()
        bomb()
        print(f"{name:<26}{time.monotonic() - start:>10.3f}{_rss_mib():>14.0f}")
    slowest = _latency_with_bombs()
    print(f"\nslowest of 20 ordinary workload reviews with every bomb in flight: {slowest:.3f} s")
    total = sum((c for c in results.values()), Counter())
    return 1 if any(total[k] for k in ("crash", "multiline", "nonsense", "slow")) else 0


def _latency_with_bombs() -> float:
    """Seconds of the slowest ordinary workload review answered while every bomb is reviewed at once."""
    import asyncio  # noqa: PLC0415
    import copy  # noqa: PLC0415

    import kopf  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import H100, index, memo, on  # noqa: PLC0415
    from tests.fuzzing_workloads import env_bomb, yaml_bomb_workload  # noqa: PLC0415
    from tests.workloads.test_workloads_webhook import CHART  # noqa: PLC0415

    from fitgate.operator.runtime import workload_handlers  # noqa: PLC0415

    m = on(memo(), index(H100))

    async def review(obj: dict[str, Any]) -> float:
        started = time.perf_counter()
        await workload_handlers.validate_workload(
            "warn", body=kopf.Body(obj), old=None, dryrun=False, warnings=[], memo=m
        )
        return time.perf_counter() - started

    async def all_at_once() -> float:
        bombs = [asyncio.create_task(review(b)) for b in (env_bomb(), yaml_bomb_workload()[0])]
        ordinary = []
        for i in range(20):
            obj = copy.deepcopy(CHART)
            obj["metadata"]["name"] = f"ordinary-{i}"
            ordinary.append(await review(obj))
        await asyncio.gather(*bombs)
        return max(ordinary)

    return asyncio.run(all_at_once())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all, split over the five targets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unguarded", action="store_true", help="kopf's own webhook server, for comparison")
    parser.add_argument("--hostile", action="store_true", help="issue 22: workloads, logs, /metrics and bombs")
    args = parser.parse_args(argv)
    if args.hostile:
        return hostile(args.cases, args.seed)
    per = -(-args.cases // 5)
    results: dict[str, Counter[str]] = {}
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def in_dir(name: str, check: Callable[[bytes, Path], str]) -> Callable[[bytes], str]:
            count = iter(range(10**9))
            return lambda data: check(data, work / name / str(next(count)))  # a fresh directory per case

        targets: list[tuple[str, Any, Callable[[bytes], str]]] = [
            ("safetensors", safetensors_files(), in_dir("safetensors", check_safetensors)),
            ("index", index_files, in_dir("index", check_index)),
            ("config", hostile_configs(), in_dir("config", check_config)),
            ("plan-args", plan_argvs(), check_argv),
        ]
        for name, strategy, check in targets:
            start = time.monotonic()
            results[name] = run(name, strategy, check, per, args.seed)
            timings[name] = time.monotonic() - start
        with WebhookTarget(guarded=not args.unguarded) as webhook:
            start = time.monotonic()
            results["admission"] = run("admission", review_bodies, webhook.check, per, args.seed)
            timings["admission"] = time.monotonic() - start
    kinds = ["accepted", "rejected", "crash", "multiline", "nonsense", "slow"]
    print(f"{'target':<12}" + "".join(f"{k:>10}" for k in kinds) + f"{'total':>10}{'seconds':>10}")
    for name, counts in results.items():
        row = "".join(f"{counts[k]:>10}" for k in kinds)
        print(f"{name:<12}{row}{sum(counts.values()):>10}{timings[name]:>10.1f}")
    total = sum((c for c in results.values()), Counter())
    print(f"{'all':<12}" + "".join(f"{total[k]:>10}" for k in kinds) + f"{sum(total.values()):>10}")
    return 1 if any(total[k] for k in ("crash", "multiline", "nonsense", "slow")) else 0


if __name__ == "__main__":
    sys.exit(main())
