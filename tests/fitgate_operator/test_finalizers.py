"""Issue 22: the CRD's deletion releases fitgate's finalizer (the handler called directly, a fake API)."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from fitgate.operator.runtime import finalizers
from fitgate.operator.runtime.finalizers import FINALIZER, crd_deleting, release_all, released


class FakeApi:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def list_cluster_custom_object(self, *_: Any, **__: Any) -> dict[str, Any]:
        return {"items": self.items}

    def list_namespaced_custom_object(self, group: str, version: str, ns: str, *_: Any, **__: Any) -> dict[str, Any]:
        return {"items": [i for i in self.items if i["metadata"]["namespace"] == ns]}

    def patch_namespaced_custom_object(
        self, group: str, version: str, ns: str, plural: str, name: str, body: Any, **_: Any
    ) -> None:
        if name == "gone":
            raise RuntimeError("HTTP 404")
        self.patches.append((ns, name, body))


def md(ns: str, name: str, *finalizers: str) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": "7", "finalizers": list(finalizers)}}


def test_released_keeps_other_finalizers() -> None:
    assert released([FINALIZER, "example.com/keep"]) == ["example.com/keep"]
    assert released(["example.com/keep"]) is None
    assert released(None) is None


def test_release_all_patches_only_what_carries_ours_and_skips_failures() -> None:
    api = FakeApi([md("a", "x", FINALIZER), md("a", "y"), md("b", "z", "other", FINALIZER), md("b", "gone", FINALIZER)])
    assert release_all(api) == 2
    assert api.patches == [
        ("a", "x", {"metadata": {"finalizers": [], "resourceVersion": "7"}}),
        ("b", "z", {"metadata": {"finalizers": ["other"], "resourceVersion": "7"}}),
    ]
    api.patches.clear()
    assert release_all(api, ("b",)) == 1  # watchNamespaces: only those


def test_the_handler_acts_only_on_a_deleting_crd(monkeypatch: Any) -> None:
    api = FakeApi([md("a", "x", FINALIZER)])
    monkeypatch.setattr(finalizers.kubeconfig, "custom_objects", lambda: api)
    logger: Any = kopf.LocalObjectLogger(body=kopf.Body({}), settings=kopf.OperatorSettings())
    memo = kopf.Memo()
    alive = kopf.Body({"metadata": {"name": finalizers.CRD_NAME}})
    asyncio.run(crd_deleting(body=alive, memo=memo, logger=logger))
    assert api.patches == []
    deleting = kopf.Body({"metadata": {"name": finalizers.CRD_NAME, "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    asyncio.run(crd_deleting(body=deleting, memo=memo, logger=logger))
    assert [p[1] for p in api.patches] == ["x"]
