"""Issue 22: the ClusterRole is generated from the features the values turn on; with every feature off it
grants no verb on other people's workloads, and each value adds exactly what its feature calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fitgate.operator.runtime.rbac import pod_log_rules, workload_audit_rules, workload_configmap_rules
from tests.chart.test_chart import helm, render_chart

__all__ = ["helm"]

WORKLOADS = {
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    ("serving.kserve.io", "inferenceservices"),
    ("serving.kserve.io", "llminferenceservices"),
}
Grant = tuple[str, str, tuple[str, ...]]


def granted(docs: list[dict[str, Any]], kind: str = "ClusterRole") -> set[Grant]:
    return {
        (g, r, tuple(sorted(rule["verbs"])))
        for role in docs
        if role["kind"] == kind
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }


def as_grants(rules: list[Any]) -> set[Grant]:
    return {(r.group, r.resource, r.verbs) for r in rules}


def test_every_feature_off_grants_no_verb_on_workloads(helm: Path) -> None:
    grants = granted(render_chart(helm))
    assert not {g for g in grants if (g[0], g[1]) in WORKLOADS}
    assert ("", "pods", ("list", "watch")) in grants  # the pod watch and the observer: read, never patch
    assert not any("patch" in g[2] for g in grants if (g[0], g[1]) == ("", "pods"))


def test_what_each_value_adds(helm: Path) -> None:
    """The table of docs/hardening.md, asserted: value -> the rules it adds to the ClusterRole."""
    base = granted(render_chart(helm))
    audit = ("--set", "workloadWebhook.enabled=true")
    adds = {
        "workloadWebhook.enabled": granted(render_chart(helm, *audit)) - base,
        "workloadWebhook.annotate": granted(render_chart(helm, *audit, "--set", "workloadWebhook.annotate=true"))
        - granted(render_chart(helm, *audit)),
        "workloadWebhook.policyReports=false": granted(render_chart(helm, *audit))
        - granted(render_chart(helm, *audit, "--set", "workloadWebhook.policyReports=false")),
        "workloadWebhook.readConfigMaps": granted(
            render_chart(helm, *audit, "--set", "workloadWebhook.readConfigMaps=true")
        )
        - granted(render_chart(helm, *audit)),
        "operator.podLogs=false": base - granted(render_chart(helm, "--set", "operator.podLogs=false")),
    }
    assert adds["workloadWebhook.enabled"] == as_grants(workload_audit_rules())  # list + policyreports, no patch
    assert all("patch" not in g[2] for g in adds["workloadWebhook.enabled"])
    patched = as_grants(workload_audit_rules(patch=True)) - as_grants(workload_audit_rules())
    assert adds["workloadWebhook.annotate"] == patched  # the list+patch rules replace the list-only ones
    assert adds["workloadWebhook.policyReports=false"] == {
        ("wgpolicyk8s.io", "policyreports", ("create", "list", "update"))
    }
    assert adds["workloadWebhook.readConfigMaps"] == as_grants(workload_configmap_rules())
    assert adds["operator.podLogs=false"] == as_grants(pod_log_rules())


def test_pod_logs_are_namespaced_with_watch_namespaces(helm: Path) -> None:
    docs = render_chart(helm, "--set", "operator.watchNamespaces={ml,serving}")
    assert ("", "pods/log", ("get",)) not in granted(docs)  # never cluster-wide
    roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-pod-logs")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["ml", "serving"]
    assert all(granted([r], "Role") == as_grants(pod_log_rules()) for r in roles)
    bindings = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("-pod-logs")]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["ml", "serving"]
    assert not [
        d
        for d in render_chart(helm, "--set", "operator.watchNamespaces={ml}", "--set", "operator.podLogs=false")
        if d["kind"] == "Role"
    ]


def test_metrics_authorization_adds_the_reviews_and_a_reader_role(helm: Path) -> None:
    base = render_chart(helm)
    on = render_chart(helm, "--set", "metrics.authorization=true", "--set", "metrics.serviceMonitor.enabled=true")
    operator = [d for d in on if d["kind"] == "ClusterRole" and not d["metadata"]["name"].endswith("-metrics-reader")]
    (reader,) = [d for d in on if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-metrics-reader")]
    assert granted(operator) - granted(base) == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (deployment,) = [d for d in on if d["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FITGATE_METRICS_AUTH"] == "1"
    (monitor,) = [d for d in on if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["bearerTokenFile"].endswith("serviceaccount/token")
