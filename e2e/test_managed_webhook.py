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


def test_the_managed_flag_keeps_the_workload_paths_out_whatever_the_environment(kube: Kube, tmp_path: Path) -> None:
    """``--webhook-managed`` with ``FITGATE_WORKLOAD_WEBHOOK=1``: only the ModelDeployment path is served.

    A configuration kopf manages has no namespace selector, so ``/workloads-enforce`` would judge every
    namespace's Deployments. The paths were registered at import from the environment, the flag unseen;
    now at start-up from the settings with the flags applied (flags win).
    """
    needs_loopback(kube)
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    op = Operator(kube, tmp_path, managed=NAME, extra_env={"FITGATE_WORKLOAD_WEBHOOK": "1"})
    op.start()
    try:
        kube.wait_for(lambda: bool(webhooks(kube, "validating")), timeout=30, what="kopf to fill the configuration")
        served = webhooks(kube, "validating") or []
        paths = {str((w.get("clientConfig") or {}).get("url", "")).rsplit("/", 1)[-1] for w in served}  # type: ignore[union-attr]
        assert "fit" in paths and not {p for p in paths if p.startswith("workloads-")}, paths
    finally:
        code = op.terminate()
    log = op.log.read_text()
    assert code == 0, log[-3000:]
    assert "FITGATE_WORKLOAD_WEBHOOK is ignored with a kopf-managed webhook configuration" in log, log[-3000:]
