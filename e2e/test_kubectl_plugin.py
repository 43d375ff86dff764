"""`kubectl fitgate why` end to end: the real API server, the real `fitgate operator` writing the status, the
repo's real kubectl finding the `kubectl-fitgate` console script on PATH (as krew or pipx would put it there)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Kube
from e2e.operator_process import Operator
from e2e.test_operator import MISFIT, install_crd_and_nodes, mdep, wait_verdict
from fitgate.sizing.units import fmt_gib

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[1]
SCRIPTS = Path(sys.executable).parent  # where pip put the kubectl-fitgate console script
WARN_MISFIT = {**MISFIT, "policy": {"onMisfit": "Warn"}}  # stored despite DoesNotFit, so it has a status to explain


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    if kube.control_plane is None:
        pytest.skip("the operator e2e runs the webhook on 127.0.0.1: needs the loopback control plane")
    assert (SCRIPTS / "kubectl-fitgate").exists(), "pip install -e . did not install the kubectl-fitgate script"
    install_crd_and_nodes(kube)
    op = Operator(kube, tmp_path_factory.mktemp("kubectl-plugin"))
    op.start()
    try:
        yield op
    finally:
        op.stop()


def plugin(kube: Kube, *args: str, kubeconfig: Path | None = None) -> Any:
    """`kubectl fitgate ...` through kubectl's plugin lookup, with the script's directory on PATH."""
    env = {"PATH": f"{kube.bin_dir}:{SCRIPTS}:/usr/bin:/bin"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return kube.kubectl("fitgate", *args, check=False, env=env)


def test_kubectl_finds_the_plugin(kube: Kube) -> None:
    listed = kube.kubectl("plugin", "list", check=False, env={"PATH": f"{kube.bin_dir}:{SCRIPTS}:/usr/bin:/bin"})
    assert str(SCRIPTS / "kubectl-fitgate") in listed.stdout, listed.stdout + listed.stderr


def test_why_explains_a_misfit_with_the_status_numbers(kube: Kube, operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("llama-70b", WARN_MISFIT))
    st = wait_verdict(kube, namespace, "llama-70b", "DoesNotFit")
    for form in ("mdep/llama-70b", "modeldeployment/llama-70b", "llama-70b"):
        result = plugin(kube, "why", form, "-n", namespace)
        assert result.returncode == 0, result.stderr
        text = result.stdout
        assert text.startswith(f"modeldeployment {namespace}/llama-70b: DoesNotFit on {st['gpuProduct']}")
        # the 70B's bf16 weights: 131.45 GiB on one GPU (e2e/test_operator.py's denial shows the same figure)
        assert "131.45 GiB" in text and f"Why: {st['reason']}" in text
        assert fmt_gib(st["perGPU"]["weightsBytes"]) in text and fmt_gib(st["perGPU"]["budgetBytes"]) in text
        assert "Smallest fix:\n  fits: spec.serving.tensorParallelSize: " in text
        assert "generation 1 of 1 (the current spec)" in text
        ready = next(c for c in st["conditions"] if c["type"] == "Ready")
        assert f"outcome last changed {ready['lastTransitionTime']}" in text
        assert "NVIDIA-L4: 1 node(s) x 1 GPUs" in text  # every pool of the cluster, with its own verdict


def test_why_takes_the_namespace_from_the_kubeconfig_context(
    kube: Kube, operator: Operator, namespace: str, tmp_path: Path
) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("misfit", WARN_MISFIT))
    wait_verdict(kube, namespace, "misfit", "DoesNotFit")
    config = tmp_path / "kubeconfig"
    shutil.copy(kube.kubeconfig, config)
    kube.kubectl("config", "set-context", "--current", f"--namespace={namespace}", f"--kubeconfig={config}")
    by_context = plugin(kube, "why", "mdep/misfit", kubeconfig=config)
    assert by_context.returncode == 0 and f"{namespace}/misfit: DoesNotFit" in by_context.stdout, by_context.stderr
    by_flag = plugin(kube, "why", "mdep/misfit", "--kubeconfig", str(config))  # --kubeconfig over KUBECONFIG
    assert by_flag.returncode == 0 and by_flag.stdout == by_context.stdout


def test_why_errors_are_one_line(kube: Kube, operator: Operator, namespace: str, tmp_path: Path) -> None:
    missing = plugin(kube, "why", "mdep/nope", "-n", namespace)
    assert missing.returncode == 1
    assert missing.stderr == f'error: modeldeployments.fitgate.io "nope" in namespace "{namespace}" not found\n'
    bad = plugin(kube, "why", "pod/x")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "not a ModelDeployment" in bad.stderr
    # a user the API server knows (a client certificate of its CA) but RBAC grants nothing
    assert kube.control_plane is not None
    cert, key = kube.control_plane.ca.issue("e2e-nobody", server=False)
    (tmp_path / "u.crt").write_bytes(cert)
    (tmp_path / "u.key").write_bytes(key)
    config = tmp_path / "kubeconfig"
    shutil.copy(kube.kubeconfig, config)
    kc = f"--kubeconfig={config}"
    kube.kubectl(
        "config", "set-credentials", "nobody", f"--client-certificate={tmp_path / 'u.crt'}",
        f"--client-key={tmp_path / 'u.key'}", "--embed-certs", kc,
    )  # fmt: skip
    kube.kubectl("config", "set-context", "--current", "--user=nobody", kc)
    forbidden = plugin(kube, "why", "mdep/nope", "-n", namespace, kubeconfig=config)
    assert forbidden.returncode == 1 and forbidden.stderr.count("\n") == 1
    assert forbidden.stderr.startswith("error: forbidden: cannot get ") and '"e2e-nobody"' in forbidden.stderr
    # no cluster: a kubeconfig whose server nothing listens on
    doc = json.loads(kube.kubectl("config", "view", "--raw", "-o", "json", kc).stdout)
    doc["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    (tmp_path / "dead").write_text(json.dumps(doc))
    dead = plugin(kube, "why", "mdep/x", "-n", namespace, kubeconfig=tmp_path / "dead")
    assert dead.returncode == 1 and dead.stderr.startswith("error: cannot reach the cluster at https://127.0.0.1:1")
    assert dead.stderr.count("\n") == 1
