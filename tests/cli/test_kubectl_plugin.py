"""`kubectl fitgate` (src/fitgate/kubectl_plugin.py): delegation to the fitgate CLI, `why`'s arguments, its text
from statuses the operator's own code writes, and its one-line errors. The cluster read runs in
e2e/test_kubectl_plugin.py against the real API server."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from fitgate import kubectl_plugin
from fitgate.cli import main as cli_main
from fitgate.kubectl_plugin import PluginError, explain, parse_why, resource_name
from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.status import status_of
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.schema.api import parse_spec
from fitgate.sizing.units import fmt_gib
from tests.conftest import model

# Real GPU Feature Discovery labels (as tests/fitgate_operator/test_operator.py's H100 and L4 nodes).
H100 = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "h100-0",
        "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.count": "8",
        },
    },
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
}
FITS = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
    "serving": {"maxModelLen": 32768},
    "workload": {"concurrentRequests": 8, "contextTokens": 32000},
}
MISFIT = {
    "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "source": "catalog"},
    "serving": {"maxModelLen": 32768},
    "policy": {"onMisfit": "Warn"},
}


def obj(spec: dict[str, Any], generation: int, evaluated_generation: int) -> dict[str, Any]:
    """A ModelDeployment with the status the operator's own code (evaluate + status_of) writes."""
    ev = evaluate(parse_spec(spec), model(spec["model"]["name"]), parse_node(H100))
    return {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": "team-a", "generation": generation},
        "spec": spec,
        "status": status_of(ev, evaluated_generation, None),
    }


def test_misfit_why_shows_the_numbers_the_breakdown_and_the_smallest_fix() -> None:
    o = obj(MISFIT, 3, 3)
    text = explain(o)
    st = o["status"]
    assert text.startswith("modeldeployment team-a/m: DoesNotFit on NVIDIA-H100-80GB-HBM3 (tensor parallel 1)\n")
    assert f"Why: {st['reason']}\n" in text
    # the 70B's bf16 weights on one GPU: 131.45 GiB (tests/fitgate_operator/test_operator.py's misfit message)
    assert "131.45 GiB" in text
    # every per-GPU figure of the status, formatted as the sizing core formats bytes
    for key in ("capacityBytes", "budgetBytes", "weightsBytes", "activationBytes", "kvCacheBytes", "headroomBytes"):
        assert fmt_gib(st["perGPU"][key]) in text, key
    assert "Smallest fix:\n  fits: spec.serving.tensorParallelSize: " in text
    assert "generation 3 of 3 (the current spec)" in text
    assert "Fits=False WeightsExceedBudget" in text and "Ready=True Evaluated" in text
    assert "(the message under Why)" in text  # the Fits condition repeats status.message: shown once
    assert "vLLM args with the fix applied:\n  --max-model-len" in text  # engineArgs of a misfit are the fix's
    assert st["recommendedMaxModelLen"] == 0 and "maxModelLen: 0" not in text  # no length fits: not offered
    assert "; smallest change that fits:" not in text.split("Smallest fix:")[0]  # the fix is shown once, apart


def test_fits_why_has_no_fix_section_and_flags_a_stale_status() -> None:
    o = obj(FITS, 2, 1)  # the spec was edited (generation 2); the status is still generation 1's
    text = explain(o)
    assert text.startswith("modeldeployment team-a/m: Fits on NVIDIA-H100-80GB-HBM3")
    assert "Smallest fix:" not in text
    assert "generation 1 of 2 (NOT the current spec)" in text
    kv = o["status"]["kvCache"]
    assert f"{kv['bytesPerToken']:,} B a token, {kv['capacityTokens']:,} tokens" in text
    assert "--max-model-len" in text.split("Recommended vLLM args:")[1]


def test_why_before_the_operator_evaluated_it_and_with_a_foreign_status() -> None:
    o = obj(FITS, 1, 1)
    assert "not evaluated yet" in explain({**o, "status": {}})
    broken = copy.deepcopy(o)
    broken["status"]["perGPU"]["weightsBytes"] = "lots"
    assert "its status could not be read: status.perGPU.weightsBytes: " in explain(broken)


@pytest.mark.parametrize(
    "text", ["m", "mdep/m", "modeldeployment/m", "modeldeployments/m", "modeldeployments.fitgate.io/m", "MDEP/m"]
)
def test_resource_forms_kubectl_accepts(text: str) -> None:
    assert resource_name(text) == "m"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("pod/m", "'pod' is not a ModelDeployment"),
        ("mdep/Big_Name", "not a Kubernetes object name"),
        ("mdep/" + "a" * 254, "at most 253 characters"),
        ("mdep/", "not a Kubernetes object name"),
    ],
)
def test_bad_resource_is_one_line_naming_it(text: str, says: str) -> None:
    with pytest.raises(PluginError, match=says) as err:
        resource_name(text)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_why_flags_as_kubectl_spells_them() -> None:
    t = parse_why(["mdep/m", "-n", "ns1", "--kubeconfig", "/k", "--context", "c"])
    assert (t.name, t.namespace, t.kubeconfig, t.context) == ("m", "ns1", "/k", "c")
    t = parse_why(["--namespace=ns2", "m"])
    assert (t.name, t.namespace, t.kubeconfig) == ("m", "ns2", None)
    with pytest.raises(PluginError, match="--namespace 'Bad_NS'"):
        parse_why(["m", "-n", "Bad_NS"])
    with pytest.raises(PluginError, match="unrecognized arguments: --bogus"):
        parse_why(["m", "--bogus"])


def test_other_commands_are_fitgates_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["gpus", "-o", "json"]
    assert kubectl_plugin.main(argv) == 0
    plugin = capsys.readouterr().out
    assert cli_main(argv) == 0
    assert plugin == capsys.readouterr().out and json.loads(plugin)  # the same document, byte for byte
    with pytest.raises(SystemExit) as usage:  # fitgate's own usage error, exit 2, as `fitgate plan` gives
        kubectl_plugin.main(["plan", "--gpu", "H100"])
    assert usage.value.code == 2 and "required: --model" in capsys.readouterr().err


def test_help_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl_plugin.main(["--help"]) == 0
    assert "why RESOURCE" in capsys.readouterr().out
    assert kubectl_plugin.main([]) == 2
    capsys.readouterr()
    # hunt119: `why --help` said "the following arguments are required: resource" and exited 1
    assert kubectl_plugin.main(["why", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: kubectl fitgate why RESOURCE")


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "from-context"}},
            {"name": "two", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "one",
    }
    path.write_text(json.dumps(doc))
    return path


def test_no_cluster_configured_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nope"
    assert kubectl_plugin.main(["why", "mdep/m", "--kubeconfig", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: no cluster configured: kubeconfig {missing}") and err.count("\n") == 1


def test_unreachable_cluster_is_one_line_and_the_context_picks_the_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _kubeconfig(tmp_path, "https://127.0.0.1:1")  # port 1: nothing listens, refused at once
    monkeypatch.setenv("KUBECONFIG", str(config))
    _, namespace = kubectl_plugin.connect(parse_why(["m", "--kubeconfig", str(config)]))
    assert namespace == "from-context"
    _, namespace = kubectl_plugin.connect(parse_why(["m", "--kubeconfig", str(config), "--context", "two"]))
    assert namespace == "default"
    assert kubectl_plugin.main(["why", "m", "--kubeconfig", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the cluster at https://127.0.0.1:1: ") and err.count("\n") == 1


def _api_exception(status: int, reason: str, body: str) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = body
    return exc


def test_api_errors_are_kubectl_like_lines() -> None:
    what = 'modeldeployments.fitgate.io "m" in namespace "ns"'
    # the metav1.Status bodies kube-apiserver sends (NotFound, Forbidden), and its plain 404 for an unserved API
    not_found = json.dumps({"kind": "Status", "reason": "NotFound", "message": 'modeldeployments "m" not found'})
    forbidden = json.dumps(
        {
            "kind": "Status",
            "reason": "Forbidden",
            "message": 'modeldeployments.fitgate.io "m" is forbidden: User "bob" cannot get resource "modeldeployments"',
        }
    )
    assert kubectl_plugin._api_error(_api_exception(404, "Not Found", not_found), what) == f"{what} not found"
    assert "CRD installed" in kubectl_plugin._api_error(_api_exception(404, "Not Found", "404 page not found"), what)
    line = kubectl_plugin._api_error(_api_exception(403, "Forbidden", forbidden), what)
    assert line.startswith(f"forbidden: cannot get {what}: ") and 'User "bob" cannot get' in line
    assert kubectl_plugin._api_error(_api_exception(401, "Unauthorized", ""), what).startswith("unauthorized: ")
