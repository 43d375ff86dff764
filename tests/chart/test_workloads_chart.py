"""The chart's workload webhook entries, rendered with helm."""

from __future__ import annotations

from pathlib import Path

from fitgate.operator.runtime.rbac import workload_audit_rules, workload_configmap_rules
from tests.chart.test_chart import helm, render_chart

__all__ = ["helm"]


def webhooks(helm: Path, *args: str) -> dict[str, dict[str, object]]:
    docs = render_chart(helm, *args)
    (config,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    return {w["name"]: w for w in config["webhooks"]}


def test_off_by_default(helm: Path) -> None:
    assert list(webhooks(helm)) == ["fit.fitgate.io"]


def test_enforce_and_warn_namespaces_ignore_failures(helm: Path) -> None:
    hooks = webhooks(helm, "--set", "workloadWebhook.enabled=true")
    assert list(hooks) == ["fit.fitgate.io", "workloads-enforce.fitgate.io", "workloads-warn.fitgate.io"]
    enforce = hooks["workloads-enforce.fitgate.io"]
    assert enforce["failurePolicy"] == "Ignore" and hooks["fit.fitgate.io"]["failurePolicy"] == "Fail"
    assert enforce["clientConfig"]["service"]["path"] == "/workloads-enforce"  # type: ignore[index]
    assert {"key": "fitgate.io/validate", "operator": "In", "values": ["enforce"]} in enforce["namespaceSelector"][
        "matchExpressions"  # type: ignore[index]
    ]
    resources = {(tuple(r["apiGroups"]), r["resources"][0]) for r in enforce["rules"]}  # type: ignore[attr-defined]
    assert (("leaderworkerset.x-k8s.io",), "leaderworkersets") in resources
    assert (("",), "pods") in resources and (("serving.kserve.io",), "llminferenceservices") in resources
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in enforce["rules"])  # type: ignore[attr-defined]


def test_object_opt_in_covers_the_other_namespaces_and_the_audit_lists_them(helm: Path) -> None:
    on = ("--set", "workloadWebhook.enabled=true", "--set", "workloadWebhook.objectOptIn=true")
    hooks = webhooks(helm, *on)
    selector = hooks["workloads-object.fitgate.io"]["namespaceSelector"]["matchExpressions"]  # type: ignore[index]
    # unlabelled and `off` namespaces (NotIn also matches a namespace without the label); not the system ones
    assert {"key": "fitgate.io/validate", "operator": "NotIn", "values": ["enforce", "warn"]} in selector
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "fitgate-system"],
    } in selector
    assert hooks["workloads-object.fitgate.io"]["clientConfig"]["service"]["path"] == "/workloads-object"  # type: ignore[index]

    def env(*args: str) -> dict[str, object]:
        (deployment,) = [d for d in render_chart(helm, *args) if d["kind"] == "Deployment"]
        return {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert env(*on)["FITGATE_WORKLOAD_AUDIT_OBJECTS"] == "1"
    assert "FITGATE_WORKLOAD_AUDIT_OBJECTS" not in env("--set", "workloadWebhook.enabled=true")
    # the audit's cluster-wide lists need no more RBAC: the ClusterRole's list is already cluster-wide
    (role,) = [d for d in render_chart(helm, *on) if d["kind"] == "ClusterRole"]
    (plain,) = [d for d in render_chart(helm, "--set", "workloadWebhook.enabled=true") if d["kind"] == "ClusterRole"]
    assert role["rules"] == plain["rules"]


def test_audit_rbac_is_exactly_what_the_audit_calls(helm: Path) -> None:
    def granted(*args: str) -> set[tuple[str, str, tuple[str, ...]]]:
        (role,) = [d for d in render_chart(helm, *args) if d["kind"] == "ClusterRole"]
        return {
            (g, r, tuple(sorted(rule["verbs"])))
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
        }

    base = granted()
    cm = ("--set", "workloadWebhook.readConfigMaps=true")  # off by default: it grants get on configmaps cluster-wide
    with_audit = granted("--set", "workloadWebhook.enabled=true", *cm)
    audit = {(r.group, r.resource, r.verbs) for r in workload_audit_rules()}
    configmaps = {(r.group, r.resource, r.verbs) for r in workload_configmap_rules()}
    assert with_audit - base == audit | configmaps
    assert granted("--set", "workloadWebhook.enabled=true", "--set", "workloadWebhook.auditSeconds=0", *cm) - base == (
        configmaps
    )
    no_cm = granted("--set", "workloadWebhook.enabled=true")
    assert no_cm - base == audit
    (deployment,) = [
        d for d in render_chart(helm, "--set", "workloadWebhook.enabled=true") if d["kind"] == "Deployment"
    ]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FITGATE_WORKLOAD_AUDIT_SECONDS"] == "300" and env["FITGATE_WORKLOAD_WEBHOOK"] == "1"
    assert env["FITGATE_WORKLOAD_CONFIGMAPS"] == "0"  # the default: least privilege
