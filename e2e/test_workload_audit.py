"""The workload audit run by two replicas at once against the real API server: one Event per verdict change.

Two :class:`~fitgate.operator.observation.audit.WorkloadAudit` instances (the chart's 2 replicas, each with its own
client) audit the same namespace in one pass each. Their evaluations meet at a barrier, so both have read
the object (the same resourceVersion, no verdict annotation) before either writes: without the
resourceVersion guard both would post "verdict changed". The verdicts are the real ones (the catalog's
checkpoint on the e2e GPU nodes), no stub.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes import config as kube_config

from e2e.conftest import Kube
from e2e.test_operator import NODES
from e2e.test_workloads import apply, chart_deployment, labelled
from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision.workloads import WorkloadVerdict, evaluate_reading
from fitgate.operator.gpus.inventory import Inventory, parse_node
from fitgate.operator.observation.audit import WorkloadAudit
from fitgate.workloads import Reading


def inventory() -> Inventory:
    return Inventory(
        n
        for name, labels, allocatable in NODES
        for n in parse_node({"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}})
    )


def audits(kube: Kube, namespace: str) -> tuple[list[WorkloadAudit], Any]:
    """Two audits, each with its own API client, and a pass of both whose evaluations for ``namespace`` meet."""
    replicas = [WorkloadAudit(kube_config.new_client_from_config(config_file=str(kube.kubeconfig))) for _ in "ab"]
    nodes = inventory()
    barrier: list[asyncio.Barrier] = []

    async def evaluate(reading: Reading) -> WorkloadVerdict:
        try:
            model = to_model_input(resolve(reading.model or "", source="catalog"))
        except CheckpointError:
            model = None
        verdict = evaluate_reading(reading, model, nodes)
        if reading.namespace == namespace:
            await asyncio.wait_for(barrier[0].wait(), timeout=30)  # both replicas have read it, neither has written
        return verdict

    async def both() -> None:
        barrier[:] = [asyncio.Barrier(2)]
        await asyncio.gather(*(r.audit_once(evaluate, Metrics()) for r in replicas))

    return replicas, both


def events(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    items = kube.get("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"]
    return [(e["reason"], e["source"]["component"]) for e in items]


def test_two_replicas_auditing_at_once_post_one_event(kube: Kube, namespace: str) -> None:
    ns = labelled(kube, namespace, "warn")
    d = chart_deployment("NVIDIA-L4")  # DoesNotFit on L4 (warn: admitted if any webhook is installed)
    apply(kube, ns, d)
    name = d["metadata"]["name"]
    _, both = audits(kube, ns)
    asyncio.run(both())
    got = kube.get("deployment", name, "-n", ns)["metadata"]["annotations"]
    assert got["fitgate.io/verdict"] == "DoesNotFit"
    assert events(kube, ns, name) == [("DoesNotFit", "fitgate")]
    # a second pass of both: nothing changed, nothing posted
    asyncio.run(both())
    assert events(kube, ns, name) == [("DoesNotFit", "fitgate")]
    # the verdict changes (on H100 it fits): again exactly one Event for the change, from one replica
    d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]["values"] = ["NVIDIA-H100-80GB-HBM3"]
    kube.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(d))
    asyncio.run(both())
    assert kube.get("deployment", name, "-n", ns)["metadata"]["annotations"]["fitgate.io/verdict"] == "Fits"
    assert sorted(events(kube, ns, name)) == [("DoesNotFit", "fitgate"), ("Fits", "fitgate")]
