"""Out of cluster with ``--webhook-managed``: kopf's webhook configurations are not left behind on exit.

kopf creates a ValidatingWebhookConfiguration *and* a MutatingWebhookConfiguration of the managed name
and, on exit, only empties them; the operator's cleanup deletes both (:mod:`fitgate.operator.runtime.managed`).
"""

from __future__ import annotations

import json
from pathlib import Path

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator

REPO = Path(__file__).resolve().parents[1]
NAME = "fitgate-e2e-managed.fitgate.io"


def webhooks(kube: Kube, kind: str) -> list[dict[str, object]] | None:
    """The webhooks of the ``kind`` configuration NAME, None when there is no such object."""
    got = kube.kubectl("get", f"{kind}webhookconfiguration", NAME, "-o", "json", check=False)
    return None if got.returncode else list(json.loads(got.stdout).get("webhooks") or [])


def test_the_managed_configurations_are_deleted_when_the_operator_exits(kube: Kube, tmp_path: Path) -> None:
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    op = Operator(kube, tmp_path, managed=NAME)
    op.start()
    try:
        kube.wait_for(lambda: bool(webhooks(kube, "validating")), timeout=30, what="kopf to fill the configuration")
        assert webhooks(kube, "mutating") == []  # kopf creates it too, with nothing in it
    finally:
        code = op.terminate()
    log = op.log.read_text()
    assert code == 0, log[-3000:]
    assert "removed the empty webhook configuration validating/" + NAME in log, log[-3000:]
    assert webhooks(kube, "validating") is None and webhooks(kube, "mutating") is None
