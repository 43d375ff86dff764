"""The Helm chart, tested like code: lint, render every knob, validate against Kubernetes 1.37 schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import tools

from fitgate.operator.runtime.rbac import required_rules
from fitgate.operator.schema.crd import render, render_helm

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "fitgate"
CUSTOM_KINDS = {
    "ClusterKopfPeering",
    "KopfPeering",
    "ServiceMonitor",
    "Certificate",
    "Issuer",
    "PrometheusRule",
}  # no upstream schema

KNOBS: dict[str, list[str]] = {
    "default": [],
    "no-crds": ["--set", "crds.enabled=false"],
    "crds-not-kept": ["--set", "crds.keep=false"],
    "single-replica": ["--set", "replicaCount=1", "--set", "operator.peering.enabled=false"],
    "cert-manager": ["--set", "webhook.certManager.enabled=true"],
    "cert-manager-issuer": [
        "--set",
        "webhook.certManager.enabled=true",
        "--set",
        "webhook.certManager.issuerRef.name=ca",
        "--set",
        "webhook.certManager.issuerRef.kind=ClusterIssuer",
    ],
    "url-mode": ["--set", "webhook.url=https://127.0.0.1:9443"],
    "no-webhook": ["--set", "webhook.enabled=false"],
    "service-monitor": ["--set", "metrics.serviceMonitor.enabled=true"],
    "network-policy": ["--set", "networkPolicy.enabled=true"],
    "workload-observe": ["--set", "workloadWebhook.enabled=true", "--set", "workloadWebhook.observe=true"],
    "observe": [
        "--set",
        "metrics.grafanaDashboard.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.egress.enabled=true",
        "--set-json",
        'operator.prices={"H100":2.5}',
    ],
    "namespaced": ["--set", "operator.watchNamespaces={ml,serving}"],
    "prices-configmap": ["--set", "operator.pricesConfigMap.name=gpu-prices", "--set", "operator.listPrices=false"],
    "model-roots": ["--set", "operator.modelRoots={/models,/mnt/checkpoints}"],
    "hub-token": ["--set", "operator.hub.tokenSecret.name=hf", "--set", "operator.hub.offline=true"],
    "hub-mirror": [
        "--set",
        "operator.hub.endpoint=https://hub.mirror.corp",
        "--set",
        "operator.hub.cdnHosts={.mirror.corp,files.example.com:8443}",
        "--set",
        "operator.hub.deadlineSeconds=10",
    ],
    "catalog-volume": ["--set", "operator.catalog.volume.persistentVolumeClaim.claimName=fitgate-catalog"],
    "models-volume": ["--set", "operator.models.volume.persistentVolumeClaim.claimName=models"],
    "verbose": ["--set", "operator.verbose=true", "--set", "webhook.failurePolicy=Ignore"],
    "name-overrides": ["--set", "nameOverride=gate", "--set", "fullnameOverride=acme-fitgate"],
}


@pytest.fixture(scope="module")
def helm() -> Path:
    return tools.install() / "helm"


def render_chart(helm: Path, *args: str, include_crds: bool = False) -> list[dict[str, Any]]:
    extra = ["--include-crds"] if include_crds else []
    result = subprocess.run(
        [str(helm), "template", "fitgate", str(CHART), "-n", "fitgate-system", *extra, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_lint(helm: Path) -> None:
    result = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_every_knob_renders_valid_kubernetes_1_37(helm: Path, knob: str, tmp_path: Path) -> None:
    docs = render_chart(helm, *KNOBS[knob], include_crds=True)
    builtin = [d for d in docs if d["kind"] not in CUSTOM_KINDS]
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(builtin))
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bin_dir / "kubernetes-validate"), "-k", "1.37.0", "--strict", "--quiet", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = {d["kind"] for d in docs}
    assert ("ValidatingWebhookConfiguration" in kinds) == (knob != "no-webhook")
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert ("modeldeployments.fitgate.io" in crds) == (knob != "no-crds")
    assert {"clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"} <= crds  # the chart's crds/, before the templates


def test_pods_are_hardened(helm: Path) -> None:
    (deploy,) = [d for d in render_chart(helm) if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deploy["spec"]["replicas"] == 2
    assert (
        pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]
    assert (
        container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        and container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    )
    assert pod["topologySpreadConstraints"] and container["resources"]["requests"]


def test_the_pod_grace_period_outlasts_the_operators_own_exit_bound(helm: Path) -> None:
    for given, seconds in ((None, 20), ("45", 45)):
        args = ["--set", f"operator.shutdownSeconds={given}"] if given else []
        (deploy,) = [d for d in render_chart(helm, *args) if d["kind"] == "Deployment"]
        pod = deploy["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["FITGATE_SHUTDOWN_SECONDS"] == str(seconds)
        # the stack dump at `seconds` and kopf's SIGKILL at `seconds` + 5 both come before the kubelet's
        assert pod["terminationGracePeriodSeconds"] == seconds + 10


def test_catalog_volume_is_mounted_read_only_and_named_in_the_catalog_path(helm: Path) -> None:
    def pod(*args: str) -> dict[str, Any]:
        (deploy,) = [d for d in render_chart(helm, *args) if d["kind"] == "Deployment"]
        spec: dict[str, Any] = deploy["spec"]["template"]["spec"]
        return spec

    plain = pod()
    assert "FITGATE_CATALOG_PATH" not in {e["name"] for e in plain["containers"][0]["env"]}
    assert "catalog" not in {v["name"] for v in plain["volumes"]}
    spec = pod("--set", "operator.catalog.volume.configMap.name=my-catalog")
    container = spec["containers"][0]
    assert {"name": "FITGATE_CATALOG_PATH", "value": "/etc/fitgate/catalog"} in container["env"]
    assert {"name": "catalog", "mountPath": "/etc/fitgate/catalog", "readOnly": True} in container["volumeMounts"]
    assert {"name": "catalog", "configMap": {"name": "my-catalog"}} in spec["volumes"]


def test_models_volume_is_mounted_read_only_and_added_to_the_model_roots(helm: Path) -> None:
    # docs/workloads.md "Models on volumes": the PVC the vLLM pods mount, readable by the operator
    (deploy,) = [
        d
        for d in render_chart(
            helm,
            "--set",
            "operator.models.volume.persistentVolumeClaim.claimName=models",
            "--set",
            "operator.modelRoots={/mnt/checkpoints}",
        )
        if d["kind"] == "Deployment"
    ]
    spec = deploy["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert {"name": "FITGATE_MODEL_ROOTS", "value": "/mnt/checkpoints:/models"} in container["env"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "models"}} in spec["volumes"]


def test_chart_crd_template_is_generated() -> None:
    assert (CHART / "templates" / "crd-modeldeployments.yaml").read_text() == render_helm(), (
        "run python -m fitgate.operator.crd --helm > charts/fitgate/templates/crd-modeldeployments.yaml"
    )


def test_chart_crd_equals_crds_dir(helm: Path) -> None:
    (chart_crd,) = [d for d in render_chart(helm) if d["kind"] == "CustomResourceDefinition"]
    committed = yaml.safe_load(render())
    assert chart_crd["spec"] == committed["spec"]
    assert yaml.safe_load((REPO / "crds" / "fitgate.io_modeldeployments.yaml").read_text()) == committed
    assert chart_crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (not_kept,) = [d for d in render_chart(helm, "--set", "crds.keep=false") if d["kind"] == "CustomResourceDefinition"]
    assert "helm.sh/resource-policy" not in not_kept["metadata"]["annotations"]


@pytest.mark.parametrize("peering", ["cluster", "namespaced", "off"])
def test_cluster_role_grants_exactly_what_the_code_uses(helm: Path, peering: str) -> None:
    args = {
        "cluster": [],
        "namespaced": ["--set", "operator.watchNamespaces={ml,serving}"],
        "off": ["--set", "replicaCount=1", "--set", "operator.peering.enabled=false"],
    }[peering]
    (role,) = [d for d in render_chart(helm, *args) if d["kind"] == "ClusterRole"]
    granted = sorted(
        (g, r, tuple(sorted(rule["verbs"])))
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    )
    rules = required_rules(peering=peering != "off", namespaced=peering == "namespaced")
    if peering == "off":  # and watching given namespaces without peering
        (role,) = [
            d for d in render_chart(helm, *args, "--set", "operator.watchNamespaces={ml}") if d["kind"] == "ClusterRole"
        ]
        assert ("", "namespaces", ("list", "watch")) in [
            (g, r, tuple(sorted(rule["verbs"])))
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
        ]
    assert granted == sorted((r.group, r.resource, r.verbs) for r in rules)


def test_watched_namespaces_get_their_own_peering_objects(helm: Path) -> None:
    docs = render_chart(helm, "--set", "operator.watchNamespaces={ml,serving}")
    peerings = sorted((d["kind"], d["metadata"].get("namespace")) for d in docs if "Peering" in d["kind"])
    assert peerings == [("KopfPeering", "ml"), ("KopfPeering", "serving")]
    assert all(d["metadata"]["name"] == "fitgate" for d in docs if d["kind"] == "KopfPeering")


def test_webhook_configuration(helm: Path) -> None:
    docs = render_chart(helm)
    (vwc,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    hook = vwc["webhooks"][0]
    assert hook["sideEffects"] == "None" and hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10
    assert hook["clientConfig"]["service"]["path"] == "/fit" and hook["clientConfig"]["caBundle"]
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and {"kube-system", "fitgate-system"} <= set(excluded["values"])
    (url_vwc,) = [
        d
        for d in render_chart(helm, "--set", "webhook.url=https://127.0.0.1:9443")
        if d["kind"] == "ValidatingWebhookConfiguration"
    ]
    assert url_vwc["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/fit"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "surprise=1"], "additional properties 'surprise' not allowed"),
        (["--set", "replicaCount=two"], "want integer"),
        (["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
        (["--set", "operator.unknownPolicy=Maybe"], "unknownPolicy"),
        (["--set", "replicaCount=3", "--set", "operator.peering.enabled=false"], "needs operator.peering.enabled=true"),
        (["--set", "webhook.url=http://10.0.0.1:9443"], "must start with https://"),
        (["--set", "webhook.certManager.enabled=true", "--set", "webhook.caBundle=x"], "cert-manager injects the CA"),
        (["--set", "operator.pricesConfigMap.name=GPU_Prices"], "pricesConfigMap"),
        (["--set", "operator.pricesConfigMap.keys=prices"], "pricesConfigMap"),
        (["--set", "operator.listPrices=maybe"], "listPrices"),
    ],
)
def test_bad_values_fail_with_a_message(helm: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [str(helm), "template", "fitgate", str(CHART), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_every_value_is_documented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "#")) and ":" in line:
            assert lines[i - 1].startswith("#"), f"top-level value {line.split(':')[0]} has no comment above it"
    readme = (CHART / "README.md").read_text()
    for key in yaml.safe_load((CHART / "values.yaml").read_text()):
        assert f"`{key}`" in readme


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        ([], "fitgate"),
        (["--set", "fullnameOverride=acme-gate"], "acme-gate"),
        (["--set", "nameOverride=gpu"], "fitgate-gpu"),
    ],
)
def test_name_overrides(helm: Path, args: list[str], prefix: str) -> None:
    docs = render_chart(helm, *args, "--set", "webhook.certManager.enabled=true")
    names = {d["kind"]: d["metadata"]["name"] for d in docs if d["kind"] != "Service"}
    assert names["Deployment"] == prefix and names["Certificate"] == f"{prefix}-webhook"
    services = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Service")
    assert services == [f"{prefix}-metrics", f"{prefix}-webhook"]


def test_a_long_release_name_keeps_every_suffix_within_63_characters(helm: Path) -> None:
    release = "a-long-release-name-for-the-gpu-fit-admission-webhook"  # 53 characters, Helm's longest
    result = subprocess.run(
        [str(helm), "template", release, str(CHART), "--set", "webhook.certManager.enabled=true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    names = [d["metadata"]["name"] for d in docs]
    assert all(len(n) <= 63 for n in names), names
    services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    assert {n.rsplit("-", 1)[-1] for n in services} == {"webhook", "metrics"}, services
    (webhook,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    assert webhook["webhooks"][0]["clientConfig"]["service"]["name"] in services
