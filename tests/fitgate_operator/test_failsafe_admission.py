"""Fail-safe admission: a slow or failing Hub never lets a misfit fitgate already knows through as Unknown.

While a Hub resolution is pending or failing transiently, the webhook and reconcile answer from what is
known without the Hub (a catalog, the on-disk facts cache) and say so; what is known nowhere follows
``policy.onUnknown`` (Allow, Warn, Deny), else the operator's ``FITGATE_UNKNOWN_POLICY``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from fitgate.checkpoints import CheckpointError, ModelFacts, resolve
from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.resolve import resolve_known
from fitgate.operator.decision.logic import reconcile
from fitgate.operator.decision.offline import check_files
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.runtime import handlers
from fitgate.operator.schema.config import OperatorConfig
from fitgate.operator.schema.crd import crd
from tests.fitgate_operator.test_operator import H100, gpus, index, state
from tests.fitgate_operator.test_operator import memo as operator_memo

MISFIT_70B = {"model": {"name": "meta-llama/Llama-3.1-70B-Instruct"}, "serving": {"maxModelLen": 32768}}
ENDPOINT = "https://hub.example"
SHA = "c" * 40


@pytest.fixture
def hung() -> Iterator[threading.Event]:
    """A Hub resolver that hangs until the test ends (as the Hub did: 25 s before an answer)."""
    release = threading.Event()
    yield release
    release.set()


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has its own (empty) on-disk facts cache and Hub endpoint."""
    monkeypatch.setenv("FITGATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_ENDPOINT", ENDPOINT)


def memo(store: FactsStore, policy: Any = "Warn") -> kopf.Memo:
    config = OperatorConfig(webhook_port=0, metrics_port=0, admission_resolve_s=0.3, unknown_policy=policy)
    return operator_memo(config, store=store, nodewatch=index(H100))


def hanging_store(release: threading.Event) -> FactsStore:
    def hub(name: str, rev: str | None, source: str) -> ModelFacts:
        release.wait(30)
        raise CheckpointError("model", name, "", transient=True, problem="cannot reach the Hub")

    return warmed(FactsStore(resolver=hub))


def warmed(store: FactsStore) -> FactsStore:
    """As the operator starts it: the catalog loaded before the first review (FactsStore.warm)."""
    asyncio.run(store.warm())
    return store


def failing_store() -> FactsStore:
    def hub(name: str, rev: str | None, source: str) -> ModelFacts:
        raise CheckpointError("model", name, "", transient=True, problem="cannot reach https://hub.example (503)")

    return warmed(FactsStore(resolver=hub))


def validate(spec: dict[str, Any], m: kopf.Memo) -> tuple[float, list[str]]:
    """Run the webhook handler; (seconds taken, warnings). Raises kopf.AdmissionError on a denial."""
    warnings: list[str] = []

    async def run() -> float:
        started = time.monotonic()
        await handlers.modeldeployment_validate(
            spec=kopf.Body({"spec": spec}).spec, dryrun=False, warnings=warnings, memo=m
        )  # type: ignore[arg-type]
        return time.monotonic() - started

    return asyncio.run(run()), warnings


def test_a_hung_hub_does_not_admit_a_misfit_the_catalog_knows(hung: threading.Event) -> None:
    # Before: verdict Unknown, admitted with a warning under the default Warn (denied 25 s later).
    with pytest.raises(kopf.AdmissionError) as exc:
        validate(MISFIT_70B, memo(hanging_store(hung)))
    text = str(exc.value)
    assert exc.value.code == 403 and "does not fit" in text
    assert "provisional verdict from fitgate catalog" in text and "is still in progress" in text


def test_a_catalog_lookup_that_outlasts_a_review_still_lands_for_the_next(hung: threading.Event) -> None:
    # A busy node: the lookup takes 1.2 s, the review waits 0.3 s for the Hub and 0.3 s more for the lookup
    # (admission_resolve_s in memo(); the lookup starts beside the Hub's wait, so it has both). The first review
    # answers Unknown (Warn: admitted); before, the lookup's answer was dropped and every later review started it
    # again and timed out the same way, so the misfit was never denied.
    def slow(name: str, rev: str | None, source: str) -> ModelFacts | None:
        time.sleep(1.2)
        return resolve_known(name, rev, source=source)

    def hub(name: str, rev: str | None, source: str) -> ModelFacts:
        hung.wait(30)
        raise CheckpointError("model", name, "", transient=True, problem="cannot reach the Hub")

    m = memo(FactsStore(resolver=hub, fallback=slow))
    _, warnings = validate(MISFIT_70B, m)
    assert any("Unknown" in w or "resolving" in w for w in warnings), warnings
    time.sleep(1.0)  # the first lookup (started 0.6 s ago, at the first review's start) has finished meanwhile
    with pytest.raises(kopf.AdmissionError) as exc:
        validate(MISFIT_70B, m)
    assert "provisional verdict from fitgate catalog" in str(exc.value)


def test_warm_loads_a_built_in_catalog_entry_before_the_first_review() -> None:
    seen: list[str] = []

    def fallback(name: str, rev: str | None, source: str) -> ModelFacts | None:
        seen.append(name)
        return resolve_known(name, rev, source=source)

    warmed(FactsStore(fallback=fallback))
    assert len(seen) == 1 and "/" in seen[0], seen


def test_the_provisional_answer_comes_within_the_admission_budget(hung: threading.Event) -> None:
    took, warnings = validate({**MISFIT_70B, "policy": {"onMisfit": "Warn"}}, memo(hanging_store(hung)))
    assert took < 2.0
    assert warnings[0].startswith("fitgate: meta-llama/Llama-3.1-70B-Instruct does not fit")
    assert warnings[1].startswith("fitgate: provisional verdict from fitgate catalog")


def test_a_transiently_failing_hub_is_answered_from_the_catalog_in_status() -> None:
    m = memo(failing_store())
    outcome = asyncio.run(
        reconcile(
            raw_spec=MISFIT_70B,
            old_status=None,
            generation=1,
            namespace="ml",
            name="llama",
            nodes=gpus(H100),
            store=state(m).store,
            metrics=state(m).metrics,
            config=state(m).config,
        )
    )
    assert outcome.status is not None and outcome.status["verdict"] == "DoesNotFit"
    assert "provisional verdict from fitgate catalog" in outcome.status["message"]
    assert "is failing for now" in outcome.status["message"] and "503" in outcome.status["message"]
    assert outcome.retry_in_s is not None  # the Hub's own answer is still wanted
    # planned, but not on the Hub's facts yet: Ready stays Unknown until the Hub answers
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "CheckpointUnavailable")
    assert ready["message"].startswith("provisional verdict from fitgate catalog")


def _cache_70b_as(repo_id: str, root: Path) -> None:
    """The on-disk cache as a past Hub resolution left it: main -> SHA, and the facts of SHA."""
    facts = resolve("meta-llama/Llama-3.1-70B-Instruct", source="catalog")
    cached = ModelFacts(**{**facts.__dict__, "name": repo_id, "ref": repo_id, "source": "hub", "revision": SHA})
    cache = FactsCache(root)
    cache.put_ref(ENDPOINT, repo_id, "main", SHA)
    cache.put(ENDPOINT, repo_id, cached)


def test_a_model_in_no_catalog_is_answered_from_the_on_disk_cache(hung: threading.Event, tmp_path: Path) -> None:
    _cache_70b_as("acme/private-70b", tmp_path / "cache")
    spec = {**MISFIT_70B, "model": {"name": "acme/private-70b", "source": "hub"}}
    with pytest.raises(kopf.AdmissionError) as exc:
        validate(spec, memo(hanging_store(hung)))
    assert f"provisional verdict from the on-disk facts cache (commit {SHA})" in str(exc.value)


def test_resolve_known_reads_cache_then_catalog_never_the_hub(tmp_path: Path) -> None:
    _cache_70b_as("acme/private-70b", tmp_path / "cache")
    cached = resolve_known("acme/private-70b")
    assert cached is not None and cached.revision == SHA and cached.source == "hub"
    catalog = resolve_known("meta-llama/Llama-3.1-70B-Instruct@v2")
    assert catalog is not None and catalog.source == "catalog" and "revision v2 was not checked" in catalog.notes[-1]
    # `hub` asked for the Hub's answer: the catalog is no stand-in; directories and `catalog` never wait on the Hub
    assert resolve_known("meta-llama/Llama-3.1-70B-Instruct", source="hub") is None
    assert resolve_known("meta-llama/Llama-3.1-70B-Instruct", source="catalog") is None
    assert resolve_known("/models/x") is None
    assert resolve_known("acme/nowhere") is None
    assert resolve_known("not a repo id") is None


def test_known_nowhere_follows_the_spec_policy_then_the_operator_default(hung: threading.Event) -> None:
    spec: dict[str, Any] = {"model": {"name": "acme/unheard-of"}, "serving": {"maxModelLen": 4096}}
    store = hanging_store(hung)
    _, warnings = validate(spec, memo(store, "Warn"))
    assert any("verdict Unknown" in w for w in warnings)
    assert validate(spec, memo(store, "Allow"))[1] == []
    with pytest.raises(kopf.AdmissionError, match=r"policy\.onUnknown is Deny") as exc:
        validate(spec, memo(store, "Deny"))
    assert exc.value.code == 403
    # the spec's policy.onUnknown wins over the operator's default, both ways
    with pytest.raises(kopf.AdmissionError, match="cannot verify the fit"):
        validate({**spec, "policy": {"onUnknown": "Deny"}}, memo(store, "Allow"))
    assert validate({**spec, "policy": {"onUnknown": "Allow"}}, memo(store, "Deny"))[1] == []


def test_on_unknown_is_in_the_crd_as_an_enum() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    field = schema["properties"]["policy"]["properties"]["onUnknown"]
    assert field["enum"] == ["Allow", "Warn", "Deny"] and "Deny" in field["description"]


def test_unknown_policy_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITGATE_UNKNOWN_POLICY", "Reject")  # the older name
    assert OperatorConfig.from_env().unknown_policy == "Deny"
    monkeypatch.setenv("FITGATE_UNKNOWN_POLICY", "Block")
    with pytest.raises(ValueError, match=r"FITGATE_UNKNOWN_POLICY: 'Block' is not valid; expected Allow, Warn or Deny"):
        OperatorConfig.from_env()


def test_check_follows_on_unknown(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "x"},
        "spec": {"model": {"name": "acme/unheard-of", "source": "catalog"}, "placement": {"gpuProduct": "H100"}},
    }
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(doc))
    (warned,) = check_files([str(path)])
    assert warned.verdict == "Unknown" and warned.admitted is True
    doc["spec"]["policy"] = {"onUnknown": "Deny"}
    path.write_text(yaml.safe_dump(doc))
    (denied,) = check_files([str(path)])
    assert denied.verdict == "Unknown" and denied.admitted is False
