"""Fail-safe admission on a real API server: a hung Hub does not let a misfit the catalog knows through.

Issue 13: with the Hub hanging, a 70B misfit was admitted as Unknown under the default Warn policy and
denied 25 s later. Here the Hub answers one byte a second: the webhook denies the misfit from the built-in
catalog at once and says the verdict is provisional; the status written by reconcile does the same, with
Ready Unknown until the Hub answers; a model known nowhere follows ``policy.onUnknown``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hub_server import HubServer

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator, admission_review, post_review
from e2e.test_operator import MISFIT, install_crd_and_nodes, mdep, wait_verdict

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hung_operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    install_crd_and_nodes(kube)
    with HubServer([]) as hub:
        hub.trickle(r"^/api/models/", bytes_per_s=1)
        env = {
            "HF_HUB_OFFLINE": "0",
            "HF_ENDPOINT": hub.url,
            "FITGATE_HUB_DEADLINE": "60",
            "FITGATE_RECONCILE_RESOLVE_SECONDS": "1",
        }
        op = Operator(kube, tmp_path_factory.mktemp("failsafe"), managed=None, extra_env=env)
        op.start()
        try:
            yield op
        finally:
            op.stop()


def test_a_hung_hub_does_not_admit_a_catalog_misfit(hung_operator: Operator) -> None:
    answer = post_review(hung_operator, admission_review(MISFIT))
    assert answer["allowed"] is False, answer
    message = answer["status"]["message"]
    assert "does not fit" in message and "131.45 GiB" in message
    assert "provisional verdict from fitgate catalog" in message and "is still in progress" in message


def test_the_status_is_provisional_until_the_hub_answers(kube: Kube, hung_operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("misfit", MISFIT))
    status = wait_verdict(kube, namespace, "misfit", "DoesNotFit", timeout=30)
    assert "provisional verdict from fitgate catalog" in status["message"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "Unknown" and ready["reason"] == "CheckpointResolving", ready


@pytest.mark.parametrize(("policy", "allowed"), [("Warn", True), ("Allow", True), ("Deny", False)])
def test_a_model_known_nowhere_follows_on_unknown(hung_operator: Operator, policy: str, allowed: bool) -> None:
    spec = {"model": {"name": f"acme/unheard-of-{policy.lower()}"}, "policy": {"onUnknown": policy}}
    answer = post_review(hung_operator, admission_review(spec))
    assert answer["allowed"] is allowed, answer
    if not allowed:
        assert "policy.onUnknown is Deny" in answer["status"]["message"]
