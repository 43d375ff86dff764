"""fitgate's own /fit path answers ModelDeployment reviews exactly as kopf's admission engine does (issue 23).

Each review goes both ways: through kopf's real engine (resource lookup, memo, the registered ``fit``
handler, ``build_response``) and through :func:`handlers.answer_fit_review`; the responses must be equal,
field for field. Reviews the direct path does not take (another resource, a subresource, DELETE) are
left to kopf (None).
"""

from __future__ import annotations

import asyncio
import copy
import functools
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import references
from kopf._core.engines import admission, indexing
from kopf._core.reactor import inventory

from fitgate.operator.decision import parsing
from fitgate.operator.runtime import handlers
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.schema.api import GROUP, PLURAL, VERSION, SpecError, parse_spec
from tests.fitgate_operator.test_operator import H100, MISFIT, SPEC, index, memo, on


def review(
    spec: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    dry_run: bool = False,
    resource: str = PLURAL,
    sub: str | None = None,
) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ModelDeployment", "metadata": {"name": "a", "namespace": "ml"}}
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": GROUP, "version": VERSION, "kind": "ModelDeployment"},
        "resource": {"group": GROUP, "version": VERSION, "resource": resource},
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": None if spec is None else {**body, "spec": spec},
        "oldObject": None if old is None else {**body, "spec": old},
        "dryRun": dry_run,
    }
    if sub:
        request["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def kopf_answer(m: kopf.Memo, data: dict[str, Any]) -> dict[str, Any]:
    insights = references.Insights()
    insights.webhook_resources.add(
        references.Resource(GROUP, VERSION, PLURAL, kind="ModelDeployment", namespaced=True, verbs=["list", "watch"])
    )
    engine = functools.partial(
        admission.serve_admission_request,
        settings=kopf.OperatorSettings(),
        memories=inventory.ResourceMemories(),
        memobase=m,
        registry=kopf.get_default_registry(),
        insights=insights,
        indices=indexing.OperatorIndices(indexing.OperatorIndexers()),
    )
    return dict(await engine(copy.deepcopy(data), webhook="fit"))


LONG = {**SPEC, "serving": {"maxModelLen": 131072}, "workload": {"concurrentRequests": 64, "contextTokens": 120000}}


@pytest.mark.parametrize(
    "data",
    [
        review(SPEC),  # fits: allowed, no warnings
        review(MISFIT),  # denied 403 with the numbers and the fix
        review({**MISFIT, "policy": {"onMisfit": "Warn"}}),  # admitted with warnings
        review(LONG, dry_run=True),  # dry run: the verdict as a warning
        review({**SPEC, "serving": {"tensorParallelSize": 3}}),  # invalid settings: denied 400
        review({**SPEC, "replicas": -1}),  # invalid spec: denied 400
        review(MISFIT, operation="UPDATE", old=MISFIT),  # unchanged spec: admitted
        review(MISFIT, operation="UPDATE", old=SPEC),  # changed to a misfit: denied
    ],
    ids=["fits", "misfit", "warn", "dryrun", "tp3", "invalid", "unchanged", "changed"],
)
def test_the_direct_path_answers_as_kopf_does(data: dict[str, Any]) -> None:
    m = on(memo(), index(H100))

    async def both() -> tuple[dict[str, Any], dict[str, Any] | None]:
        return await kopf_answer(m, data), await handlers.answer_fit_review(OperatorMemo.of(m), copy.deepcopy(data))

    by_kopf, direct = asyncio.run(both())
    assert direct is not None
    assert direct == by_kopf


@pytest.mark.parametrize(
    "data",
    [
        review(SPEC, resource="workloads"),
        review(SPEC, sub="status"),
        review(None, operation="DELETE", old=SPEC),
        review(SPEC, operation="CONNECT"),
    ],
    ids=["other-resource", "subresource", "delete", "connect"],
)
def test_reviews_the_direct_path_does_not_take_go_to_kopf(data: dict[str, Any]) -> None:
    m = on(memo(), index(H100))
    assert asyncio.run(handlers.answer_fit_review(OperatorMemo.of(m), data)) is None


def test_a_spec_reviewed_again_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: re-applies, dry runs and retries send the same spec; its parse is remembered by the raw value
    calls: list[object] = []
    real = parsing.parse_spec

    def counting(raw: Any) -> Any:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(parsing, "parse_spec", counting)
    fresh_memos(monkeypatch)
    m = on(memo(), index(H100))
    state = OperatorMemo.of(m)

    def answer(data: dict[str, Any]) -> dict[str, Any] | None:
        return asyncio.run(handlers.answer_fit_review(state, copy.deepcopy(data)))

    first = answer(review(MISFIT))
    again = answer(review(MISFIT))
    assert len(calls) == 1 and again == first and first is not None and not first["response"]["allowed"]
    # the same values in another key order: another text, parsed again, the same answer
    reordered = dict(reversed(list(MISFIT.items())))
    assert list(reordered) != list(MISFIT) and answer(review(reordered)) == first and len(calls) == 2
    # an invalid spec is not remembered: refused (400) and parsed every time
    bad = {**SPEC, "replicas": 2.5}
    for n in (3, 4):
        denied = answer(review(bad))
        assert denied is not None and denied["response"]["status"]["code"] == 400 and len(calls) == n


def test_a_large_spec_is_parsed_every_time_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The parse memo's keys are bounded (1024 x 16 KiB): a spec whose repr is longer is parsed on every review.
    fresh_memos(monkeypatch)
    monkeypatch.setattr(parsing, "PARSED_KEY_CHARS", 64)
    calls: list[object] = []
    real = parsing.parse_spec

    def counting(raw: Any) -> Any:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(parsing, "parse_spec", counting)
    state = OperatorMemo.of(on(memo(), index(H100)))
    assert len(repr(MISFIT)) > 64
    for n in (1, 2):
        asyncio.run(handlers.answer_fit_review(state, copy.deepcopy(review(MISFIT))))
        assert len(calls) == n


def test_a_specs_shape_is_its_raw_value_without_the_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: the shape (what INLINE_BUDGET_S judges by) comes from the review's raw spec, not a second JSON dump
    fresh_memos(monkeypatch)
    busy = {**SPEC, "workload": {"concurrentRequests": 3, "contextTokens": 1000}}
    quiet = {**SPEC, "workload": {"concurrentRequests": 9, "contextTokens": 2000}}
    bare = {k: v for k, v in SPEC.items() if k != "workload"}
    shapes = {parsing.parsed(copy.deepcopy(raw))[2] for raw in (busy, quiet, bare)}
    assert shapes == {repr(bare)}  # a deployment's workloads share one shape
    assert parsing.parsed(copy.deepcopy(busy))[1] != parsing.parsed(copy.deepcopy(quiet))[1]  # their cache keys differ
    other = {**busy, "serving": {"maxModelLen": 8192}}
    assert parsing.parsed(other)[2] != repr(bare)  # other settings: another shape


def fresh_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty parse memos for one test (the process's are shared by every test)."""
    monkeypatch.setattr(parsing, "PARSED", type(parsing.PARSED)(8))
    monkeypatch.setattr(parsing, "SHAPES", type(parsing.SHAPES)(8))


def whole(raw: dict[str, Any]) -> tuple[Any, str, frozenset[str]]:
    """What parse_spec gives for ``raw``: the spec, its JSON and the fields it sets."""
    spec = parse_spec(copy.deepcopy(raw))
    return spec, spec.model_dump_json(), frozenset(spec.model_fields_set)


SHAPED = {
    **SPEC,
    "serving": {"maxModelLen": 32768, "gpuMemoryUtilization": 0.85, "kvCacheDtype": "fp8"},
    "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3", "nodeSelector": {"pool": "a"}},
    "replicas": 2,
    "policy": {"onMisfit": "Warn"},
    "economics": {"gpuHourPriceUsd": 2.5},
}


@pytest.mark.parametrize("base", [SPEC, MISFIT, SHAPED])
def test_a_new_workload_of_a_known_shape_validates_only_the_workload(
    monkeypatch: pytest.MonkeyPatch, base: dict[str, Any]
) -> None:
    # issue 23: the common new spec changes only its workload; the rest is parsed once per shape, and the result is
    # what the whole parse gives: the same spec, the same fields set and the same canonical JSON (the cache key)
    fresh_memos(monkeypatch)
    calls: list[object] = []
    real = parsing.parse_spec
    monkeypatch.setattr(parsing, "parse_spec", lambda raw: calls.append(raw) or real(raw))
    workloads = [{"concurrentRequests": n, "contextTokens": 1000 + 7 * n} for n in (1, 3, 64)]
    for i, workload in enumerate(workloads):
        raw = {**base, "workload": workload}
        spec, text, shape = parsing.parsed(copy.deepcopy(raw))
        assert (spec, text, frozenset(spec.model_fields_set)) == whole(raw)
        assert shape == repr({k: v for k, v in raw.items() if k != "workload"})
        assert len(calls) == 1, f"workload {i}: parsed whole {len(calls)} times"  # only the shape's first review


@pytest.mark.parametrize(
    "workload",
    [
        {"concurrentRequests": 0, "contextTokens": 1000},  # below its minimum
        {"concurrentRequests": 2, "contextTokens": 40000},  # over serving.maxModelLen 32768 (a CEL rule)
        {"concurrentRequests": 2},  # contextTokens missing
        {"concurrentRequests": 2, "contextTokens": 1000, "burst": 1},  # a field the schema does not have
        ["not", "an", "object"],
    ],
)
def test_a_bad_workload_of_a_known_shape_is_refused_as_the_whole_parse_refuses_it(
    monkeypatch: pytest.MonkeyPatch, workload: Any
) -> None:
    fresh_memos(monkeypatch)
    parsing.parsed(copy.deepcopy({**SPEC, "workload": {"concurrentRequests": 1, "contextTokens": 10}}))
    raw = {**SPEC, "workload": workload}
    with pytest.raises(SpecError) as whole_error:
        parse_spec(copy.deepcopy(raw))
    for _ in range(2):  # and every time: an invalid spec is not remembered
        with pytest.raises(SpecError) as error:
            parsing.parsed(copy.deepcopy(raw))
        assert str(error.value) == str(whole_error.value)


def test_admission_searches_a_misfits_fixes_without_filling_the_per_deployment_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 23: a new spec's workload is new to the suggestion memo, and the plans it would keep alive cost a sixth of
    # a review's CPU; admission searches without it (the same fixes), reconcile's re-evaluations keep using it
    from fitgate.sizing import advice  # noqa: PLC0415 - the module whose memo is replaced

    fresh_memos(monkeypatch)
    monkeypatch.setattr(advice, "_SUGGESTIONS", type(advice._SUGGESTIONS)(16))
    state = OperatorMemo.of(on(memo(), index(H100)))
    answer = asyncio.run(handlers.answer_fit_review(state, copy.deepcopy(review(MISFIT))))
    assert answer is not None and not answer["response"]["allowed"]
    assert "smallest change that fits" in answer["response"]["status"]["message"]
    assert len(advice._SUGGESTIONS) == 0
