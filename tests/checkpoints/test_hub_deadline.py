"""A Hub that trickles, stalls or asks to retry later: every resolution ends within its deadline."""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import constants

from fitgate.checkpoints import CheckpointError, ModelFacts, resolve
from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.hub import HubSettings, HubSource
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.schema.api import ModelRef
from tests.checkpoints.test_hub import SHA_MAIN, llama8b_files, tiny_files
from tests.hub_server import HubRepo, HubServer, faithful_safetensors


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    repos = [
        HubRepo("meta-llama/Llama-3.1-8B-Instruct", {SHA_MAIN: llama8b_files()}, {"main": SHA_MAIN}),
        HubRepo("acme/tiny", {SHA_MAIN: tiny_files()}, {"main": SHA_MAIN}),
    ]
    with HubServer(repos) as server:
        yield server


def source(hub: HubServer, tmp_path: Path, deadline_s: float = 3.0, timeout_s: float = 2.0) -> HubSource:
    settings = HubSettings(endpoint=hub.url, timeout_s=timeout_s, deadline_s=deadline_s)
    return HubSource(settings, FactsCache(tmp_path / "cache"))


def within(limit_s: float, fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds taken, result or exception) of ``fn``, failing the test if it runs past ``limit_s``."""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(fn())
        except Exception as exc:  # the caller inspects it
            box.append(exc)

    start = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        pytest.fail(f"still resolving after {limit_s:g}s")
    return time.monotonic() - start, box[0]


@pytest.mark.parametrize("path", [r"^/api/models/acme/tiny", r"/config\.json$", r"/model\.safetensors$"])
def test_a_trickling_hub_is_given_up_on_at_the_deadline(hub: HubServer, tmp_path: Path, path: str) -> None:
    hub.trickle(path, bytes_per_s=1)
    took, result = within(3.0 + 5, lambda: source(hub, tmp_path).resolve("acme/tiny"))
    assert isinstance(result, CheckpointError) and result.transient, result
    assert "no complete answer within 3s (FITGATE_HUB_DEADLINE)" in str(result) and "\n" not in str(result)
    assert took >= 2.5


def test_auto_falls_back_to_the_catalog_when_the_deadline_passes(hub: HubServer, tmp_path: Path) -> None:
    hub.trickle(r"^/api/models/", bytes_per_s=1)
    _, facts = within(3.0 + 5, lambda: resolve("meta-llama/Llama-3.1-8B-Instruct", hub=source(hub, tmp_path)))
    assert isinstance(facts, ModelFacts), facts
    assert facts.source == "catalog" and "FITGATE_HUB_DEADLINE" in facts.notes[-1]


def test_retry_after_is_honoured_within_the_deadline(hub: HubServer, tmp_path: Path) -> None:
    hub.fail(r"^/api/models/acme/tiny", 503, retry_after="2")
    took, facts = within(8, lambda: source(hub, tmp_path, deadline_s=6).resolve("acme/tiny"))
    assert isinstance(facts, ModelFacts) and facts.revision == SHA_MAIN
    assert took >= 2.0  # waited as asked, where the backoff alone would have waited 0.5 s
    # An HTTP date works too.
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    hub.fail(r"^/api/models/acme/tiny", 503, retry_after=when)
    took, facts = within(9, lambda: source(hub, tmp_path / "1", deadline_s=7).resolve("acme/tiny"))
    assert isinstance(facts, ModelFacts) and took >= 1.5  # (the date has a resolution of one second)
    # A wait beyond the deadline is not waited: the error comes at once.
    hub.fail(r"^/api/models/acme/tiny", 429, retry_after="120")
    took, error = within(5, lambda: source(hub, tmp_path / "2", deadline_s=6).resolve("acme/tiny"))
    assert isinstance(error, CheckpointError) and error.transient and "Hub error 429" in str(error)
    assert took < 2.0


def test_catalog_resolutions_do_not_wait_behind_a_stuck_hub(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.trickle(r"^/api/models/", bytes_per_s=1)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("FITGATE_HUB_DEADLINE", "6")
    store = FactsStore()

    async def scenario() -> float:
        for i in range(40):  # more stuck Hub resolutions than any thread pool has threads
            store.peek(ModelRef(name=f"acme/tiny-{i}", source="hub"))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        known = await store.get(ModelRef(name="meta-llama/Llama-3.1-8B-Instruct", source="catalog"), 5.0)
        assert known is not None and known.facts is not None and known.facts.source == "catalog"
        return time.monotonic() - start

    assert asyncio.run(scenario()) < 2.0


def test_hub_headers_are_added_up_in_bounded_memory(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three shards of 20,000 tensors each (1.8 MB of headers each) read through Range requests."""
    import tracemalloc  # noqa: PLC0415 - only here

    config = json.loads(tiny_files()["config.json"])
    files: dict[str, Any] = {"config.json": json.dumps(config).encode()}
    weight_map = {}
    for s in range(3):
        shard = f"model-{s + 1:05d}-of-00003.safetensors"
        tensors = {
            f"model.layers.{i % 2}.mlp.experts.{s * 20_000 + i}.down_proj.weight": ("BF16", [4, 4])
            for i in range(20_000)
        }
        files[shard] = faithful_safetensors(tensors)
        weight_map |= dict.fromkeys(tensors, shard)
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": 60_000 * 32}, "weight_map": weight_map}
    ).encode()
    hub.repos.append(HubRepo("acme/many", {SHA_MAIN: files}, {"main": SHA_MAIN}))
    tracemalloc.start()
    try:
        facts = source(hub, tmp_path, deadline_s=60).resolve("acme/many")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, f"peak {peak >> 20} MiB (the loopback Hub's own copies of the headers included)"
    assert facts.tensors is not None and facts.tensors.tensor_count == 60_000
    monkeypatch.setenv("FITGATE_MAX_TENSORS", "50000")
    with pytest.raises(CheckpointError, match=r"more than 50000 tensors.*\(FITGATE_MAX_TENSORS\)"):
        source(hub, tmp_path / "again", deadline_s=60).resolve("acme/many")
