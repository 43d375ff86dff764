"""The operator's log says what it decided: one INFO line per decision, naming the object, verdict and reason.

kopf's per-object logger is at WARNING unless ``--verbose`` (operator/runtime/run.py), and a denial's kopf ERROR
line is dropped as not an error; before issue 25 the log of a default install said nothing about either.
"""

from __future__ import annotations

import asyncio
import copy
import logging

import kopf
import pytest

from fitgate.operator.runtime import handlers
from tests.fitgate_operator.test_operator import H100, MISFIT, SPEC, index, memo, on, validate


def _reconcile(name: str, spec: dict[str, object], status: dict[str, object] | None = None) -> kopf.Patch:
    body = kopf.Body(
        {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": "ml", "generation": 1, "annotations": {}},
            "spec": spec,
            "status": status or {},
        }
    )
    patch = kopf.Patch()
    asyncio.run(
        handlers.modeldeployment_reconcile(
            body=body,
            spec=body.spec,
            status=body.status,
            patch=patch,
            memo=on(memo(), index(H100)),
            logger=logging.getLogger("test"),
        )
    )
    return patch


def _decisions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "fitgate.decisions" and r.levelno == logging.INFO]


def test_reconcile_logs_its_verdict_once(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "event", lambda *a, **k: None)
    caplog.set_level(logging.INFO, logger="fitgate.decisions")
    patch = _reconcile("llama-70b", MISFIT)
    lines = _decisions(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith("[ml/llama-70b] verdict DoesNotFit (") and "131.45 GiB" in lines[0]
    # the same inputs again: nothing changes, nothing written, nothing logged
    caplog.clear()
    _reconcile("llama-70b", MISFIT, dict(patch["status"]))
    assert _decisions(caplog) == []


def test_a_fit_is_logged_too(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "event", lambda *a, **k: None)
    caplog.set_level(logging.INFO, logger="fitgate.decisions")
    _reconcile("llama-8b", SPEC)
    assert [line.split(":", 1)[0] for line in _decisions(caplog)] == ["[ml/llama-8b] verdict Fits (Fits)"]


def test_an_admission_denial_is_logged_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fitgate.decisions")
    warnings: list[str] = []
    with pytest.raises(kopf.AdmissionError):
        asyncio.run(
            handlers.modeldeployment_validate(  # type: ignore[arg-type]
                spec=kopf.Body({"spec": MISFIT}).spec,
                dryrun=False,
                warnings=warnings,
                memo=on(memo(), index(H100)),
                namespace="ml",
                name="llama-70b",
            )
        )
    lines = _decisions(caplog)
    assert len(lines) == 1 and lines[0].startswith("[ml/llama-70b] admission denied: fitgate: ")
    assert "does not fit" in lines[0] and "131.45 GiB" in lines[0]
    caplog.clear()
    assert validate(SPEC, index(H100), memo()) == []  # admitted: no decision line (the status will say it)
    assert _decisions(caplog) == []


def test_the_workload_audit_logs_a_verdict_it_writes_once(caplog: pytest.LogCaptureFixture) -> None:
    """The audit annotates a misfit Deployment (an Event, a decision line); the next pass changes nothing."""
    from tests.workloads.test_workloads_audit import ScriptedApi, deployment, misfit  # noqa: PLC0415

    caplog.set_level(logging.INFO, logger="fitgate.decisions")
    verdict = misfit()
    api = ScriptedApi(deployment())
    resource = ("apps", "v1", "deployments", "Deployment")
    asyncio.run(api._write(copy.deepcopy(api.obj), resource, verdict.reading, verdict))
    lines = _decisions(caplog)
    name = api.obj["metadata"]["name"]
    assert len(lines) == 1 and lines[0].startswith(f"[serving/{name}] Deployment verdict DoesNotFit (")
    caplog.clear()
    asyncio.run(api._write(copy.deepcopy(api.obj), resource, verdict.reading, verdict))  # already annotated
    assert _decisions(caplog) == []
