"""Redirects from the Hub endpoint: followed to the Hub's own host and its CDN hosts only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import constants

from fitgate.checkpoints import CheckpointError
from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.hub import DEFAULT_CDN_HOSTS, HubSettings, HubSource, redirect_refusal
from tests.checkpoints.test_hub import SHA_MAIN, TOKEN, tiny_files
from tests.hub_server import HubRepo, HubServer


def repos(token: str | None) -> list[HubRepo]:
    return [
        HubRepo("acme/tiny", {SHA_MAIN: tiny_files()}, {"main": SHA_MAIN}),
        HubRepo("acme/gated", {SHA_MAIN: tiny_files()}, {"main": SHA_MAIN}, token=token, gated=token is not None),
    ]


@pytest.fixture
def hubs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, HubServer]]:
    """The Hub, and another server (another port: another origin) with the same files, like a CDN (no token)."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with HubServer(repos(TOKEN)) as hub, HubServer(repos(None)) as other:
        yield hub, other


def source(
    hub: HubServer, tmp_path: Path, cdn: tuple[str, ...] = DEFAULT_CDN_HOSTS, token: str | None = None
) -> HubSource:
    settings = HubSettings(endpoint=hub.url, token=token, timeout_s=2.0, deadline_s=10.0, cdn_hosts=cdn)
    return HubSource(settings, FactsCache(tmp_path / "cache"))


@pytest.mark.parametrize("path", [r"^/api/models/acme/tiny", r"/config\.json$", r"/model\.safetensors$"])
def test_a_redirect_to_another_port_is_not_followed(
    hubs: tuple[HubServer, HubServer], tmp_path: Path, path: str
) -> None:
    hub, other = hubs
    hub.redirect(path, other.url + "{path}")
    with pytest.raises(CheckpointError) as exc:
        source(hub, tmp_path).resolve("acme/tiny")
    assert f"to {other.url}, which is neither the Hub's host nor one of FITGATE_HUB_CDN_HOSTS" in str(exc.value)
    assert not exc.value.transient and other.requests == []


def test_same_host_and_listed_cdn_redirects_are_followed_without_the_token(
    hubs: tuple[HubServer, HubServer], tmp_path: Path
) -> None:
    hub, other = hubs
    hub.redirect(r"^/acme/tiny/resolve/main/", "/acme/tiny/resolve/" + SHA_MAIN + "/config.json")  # same host
    hub.redirect(r"^/acme/gated/resolve/.*safetensors$", other.url + "{path}")
    netloc = other.url.removeprefix("http://")
    facts = source(hub, tmp_path, cdn=(netloc,), token=TOKEN).resolve("acme/gated")
    assert facts.tensors is not None and facts.tensors.tensor_count == 2
    assert any(r.endswith("model.safetensors") for r in other.requests)
    assert other.authorized == [] and hub.authorized  # the token went to the Hub only
    # A CDN host answering on a loopback address is fine here only because the endpoint is loopback too.


@pytest.mark.parametrize(
    ("target", "endpoint", "cdn", "refused"),
    [
        ("https://huggingface.co/x", "https://huggingface.co", (), ""),
        ("https://cdn-lfs.hf.co/x", "https://huggingface.co", DEFAULT_CDN_HOSTS, ""),
        ("https://huggingface.co:8443/x", "https://huggingface.co", (), "neither the Hub's host"),
        ("https://evil.example/x", "https://huggingface.co", DEFAULT_CDN_HOSTS, "neither the Hub's host"),
        ("http://cdn-lfs.hf.co/x", "https://huggingface.co", DEFAULT_CDN_HOSTS, "not https"),
        ("https://169.254.169.254/x", "https://huggingface.co", ("169.254.169.254",), "loopback or private"),
        ("https://10.0.0.7/x", "https://huggingface.co", ("10.0.0.7",), "loopback or private"),
        ("https://localhost/x", "https://huggingface.co", ("localhost",), "loopback or private"),
        ("https://[::1]:9/x", "https://huggingface.co", ("::1:9",), "loopback or private"),
        ("https://10.0.0.7/x", "https://10.0.0.5", ("10.0.0.7",), ""),  # a private mirror and its private CDN
        ("https://files.mirror.corp/x", "https://hub.mirror.corp", (".mirror.corp",), ""),
    ],
)
def test_redirect_rules(target: str, endpoint: str, cdn: tuple[str, ...], refused: str) -> None:
    reason = redirect_refusal(httpx2.URL(target), endpoint, cdn)
    assert (refused in reason) if refused else reason == ""
