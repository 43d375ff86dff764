"""kubeconform, strict, on every rendered variant of the chart, against Kubernetes schemas made offline.

The built-in kinds' schemas come from the e2e control plane's own OpenAPI v3 (kube-apiserver v1.37, the one
e2e/controlplane builds), the CRDs' from the chart's CRDs and, for the kinds the chart renders for other
operators, from those operators' CRD files in their Go modules (fetched through the Go module proxy, checked
against sum.golang.org like any module): ServiceMonitor and PrometheusRule from prometheus-operator
(example/prometheus-operator-crd/), Certificate and Issuer from cert-manager (deploy/crds/). No GitHub raw.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import gotools, kubeschemas
from e2e.chart_variants import VARIANTS
from e2e.conftest import Kube

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "fitgate"
# The third-party CRDs the chart renders objects of: (Go module@version, CRD files in it).
THIRD_PARTY_CRDS = {
    "github.com/prometheus-operator/prometheus-operator@v0.85.0": (
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
        "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
    ),
    "github.com/cert-manager/cert-manager@v1.21.2": (
        "deploy/crds/cert-manager.io_certificates.yaml",
        "deploy/crds/cert-manager.io_issuers.yaml",
        "deploy/crds/cert-manager.io_clusterissuers.yaml",
    ),
}


def module_dir(module: str) -> Path:
    """The module's files in the Go module cache (``go mod download`` verifies them against go.sum's database)."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", module], capture_output=True, text=True, check=False, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(json.loads(result.stdout)["Dir"])


def render(kube: Kube, args: list[str]) -> list[dict[str, Any]]:
    out = kube.helm("template", "fitgate", str(CHART), "-n", "fitgate-system", "--include-crds", *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def schema_location(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> str:
    schemas = kubeschemas.from_openapi_v3(lambda path: kube.kubectl("get", "--raw", path).stdout)
    # the API server's own kinds first, then every CRD: the chart's (rendered with every CRD switch on) and the
    # third-party ones
    crds = [d for d in render(kube, []) if d["kind"] == "CustomResourceDefinition"]
    for module, files in THIRD_PARTY_CRDS.items():
        directory = module_dir(module)
        crds += [yaml.safe_load((directory / f).read_text()) for f in files]
    schemas |= kubeschemas.from_crds(crds)
    return kubeschemas.write(schemas, tmp_path_factory.mktemp("schemas"))


def kubeconform(tool: Path, location: str, path: Path) -> subprocess.CompletedProcess[str]:
    # No -ignore-missing-schemas: a kind without a schema fails. Only the local location: nothing is fetched.
    return subprocess.run(
        [str(tool), "-strict", "-summary", "-output", "json", "-schema-location", location, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_schemas_cover_what_the_api_server_serves(kube: Kube, schema_location: str) -> None:
    directory = Path(schema_location).parent
    # spot checks of kubeconform's file naming against kinds this API server serves
    for name in (
        "deployment-apps-v1.json",
        "service-v1.json",
        "validatingwebhookconfiguration-admissionregistration-v1.json",
        "modeldeployment-fitgate-v1alpha1.json",
        "servicemonitor-monitoring-v1.json",
    ):
        assert (directory / name).is_file(), name
    served = kube.kubectl("api-resources", "--no-headers", "-o", "name").stdout.split()
    assert len(list(directory.glob("*.json"))) >= len(served) // 2  # kinds (incl. sub-objects) vs resources


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_is_valid_kubernetes_strictly(
    request: pytest.FixtureRequest, kube: Kube, schema_location: str, variant: str, tmp_path: Path
) -> None:
    tool = gotools.ensure(request, "kubeconform", "kubeconform")
    docs = render(kube, VARIANTS[variant])
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = kubeconform(tool, schema_location, path)
    summary = json.loads(result.stdout)
    assert result.returncode == 0, json.dumps(summary["resources"], indent=1) + result.stderr
    assert summary["summary"]["valid"] == len(docs), summary["summary"]  # every object checked, none skipped


def test_kubeconform_rejects_a_field_the_schema_does_not_have(
    request: pytest.FixtureRequest, kube: Kube, schema_location: str, tmp_path: Path
) -> None:
    # the check can fail: an unknown field in the pod template, a wrong type, an unknown field in the CRD object
    tool = gotools.ensure(request, "kubeconform", "kubeconform")
    docs = render(kube, ["--set", "metrics.serviceMonitor.enabled=true"])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["surprise"] = True
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["interval"] = 30
    for doc, what in ((deployment, "surprise"), (monitor, "interval")):
        path = tmp_path / f"{doc['kind']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        result = kubeconform(tool, schema_location, path)
        assert result.returncode == 1, result.stdout
        assert what in result.stdout, result.stdout
