"""The operator end to end: the real API server, the real `fitgate operator` process, kubectl."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file
from tests.conftest import GEMMA3_TINY, configmap_mount

from e2e.conftest import Kube, needs_loopback
from e2e.operator_process import Operator

REPO = Path(__file__).resolve().parents[1]

NODES = [
    # GPU Feature Discovery labels of real node types.
    (
        "e2e-h100",
        {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.family": "hopper",
        },
        {"nvidia.com/gpu": "8"},
    ),
    (
        "e2e-l4",
        {
            "nvidia.com/gpu.product": "NVIDIA-L4",
            "nvidia.com/gpu.memory": "23034",
            "nvidia.com/gpu.count": "1",
            "nvidia.com/gpu.family": "ada-lovelace",
        },
        {"nvidia.com/gpu": "1"},
    ),
    (
        "e2e-a100-mig",
        {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            "nvidia.com/gpu.memory": "4864",
            "nvidia.com/gpu.count": "56",
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/mig.capable": "true",
        },
        {"nvidia.com/gpu": "56"},
    ),
]


def node_manifest(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {
                "capacity": {"cpu": "64", "memory": "512Gi", **allocatable},
                "allocatable": {"cpu": "64", "memory": "512Gi", **allocatable},
            },
        }
    )


def mdep(name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": name}, "spec": spec}
    )


FITS = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
    "serving": {"maxModelLen": 32768},
    "workload": {"concurrentRequests": 8, "contextTokens": 32000},
}
MISFIT = {"model": {"name": "meta-llama/Llama-3.1-70B-Instruct"}, "serving": {"maxModelLen": 32768}}
TIGHT = {
    "model": {"name": "Qwen/Qwen3-30B-A3B"},
    "serving": {"maxModelLen": 8192, "gpuMemoryUtilization": 0.95},
    "workload": {"concurrentRequests": 18, "contextTokens": 8192},
    "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
}


def user_catalog(kube: Kube, workdir: Path) -> Path:
    """A user catalog made the way a user makes one for a cluster: `fitgate catalog add --flat` on a model
    directory, `kubectl create configmap --from-file`, mounted as the kubelet projects a ConfigMap."""
    model = workdir / "gemma-3-tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(GEMMA3_TINY, indent=2))
    save_file({"model.embed_tokens.weight": np.zeros((512, 64), np.float16)}, str(model / "model.safetensors"))
    flat = workdir / "catalog"
    fitgate = Path(sys.executable).parent / "fitgate"
    argv = [str(fitgate), "catalog", "add", str(model), "--repo-id", "acme/gemma-3-tiny", "--into", str(flat), "--flat"]
    subprocess.run(argv, check=True, capture_output=True)
    kube.kubectl("delete", "configmap", "fitgate-catalog", "-n", "default", "--ignore-not-found")
    kube.kubectl("create", "configmap", "fitgate-catalog", "-n", "default", f"--from-file={flat}")
    data = kube.get("configmap", "fitgate-catalog", "-n", "default")["data"]
    return configmap_mount({key: value.encode() for key, value in data.items()}, workdir / "mount")


def install_crd_and_nodes(kube: Kube) -> None:
    """The ModelDeployment CRD (established) and the GPU nodes of :data:`NODES`, as the operator e2e tests start."""
    kube.kubectl("apply", "-f", str(REPO / "crds" / "fitgate.io_modeldeployments.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/modeldeployments.fitgate.io", "--timeout=30s")
    for name, labels, allocatable in NODES:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))


@pytest.fixture(scope="module")
def operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    needs_loopback(kube)
    install_crd_and_nodes(kube)
    workdir = tmp_path_factory.mktemp("operator")
    op = Operator(kube, workdir, extra_env={"FITGATE_CATALOG_PATH": str(user_catalog(kube, workdir))})
    op.start()
    try:
        yield op
    finally:
        op.stop()
        if os.environ.get("FITGATE_E2E_KEEP"):
            print(f"operator log: {op.log}")


def status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(kube.get("mdep", name, "-n", namespace).get("status") or {})


def wait_verdict(kube: Kube, namespace: str, name: str, verdict: str, timeout: float = 45) -> dict[str, Any]:
    return dict(
        kube.wait_for(
            lambda: (s := status(kube, namespace, name)).get("verdict") == verdict and s,
            timeout=timeout,
            what=f"{name} to be {verdict}",
        )
    )


def test_fitting_deployment_gets_status_and_columns(kube: Kube, operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("llama-8b", FITS))
    st = wait_verdict(kube, namespace, "llama-8b", "Fits")
    assert st["gpuProduct"] == "NVIDIA-H100-80GB-HBM3" and st["perGPU"]["weightsBytes"] > 0
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"Ready": "True", "Fits": "True"}
    assert st["observedGeneration"] == 1 and st["recommendedMaxModelLen"] >= 32768
    table = kube.kubectl("get", "mdep", "llama-8b", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "MODEL", "GPU", "TP", "VERDICT", "HEADROOM", "MAX-CONC", "AGE"]
    row = table[1].split()
    assert row[:5] == ["llama-8b", "meta-llama/Llama-3.1-8B-Instruct", "NVIDIA-H100-80GB-HBM3", "1", "Fits"]
    assert row[5].endswith("Gi") and float(row[6]) > 8
    assert len(row[6].split(".")[1]) == 2  # MAX-CONC always with two decimals
    annotations = kube.get("mdep", "llama-8b", "-n", namespace)["metadata"]["annotations"]
    assert (
        annotations["fitgate.io/verdict"] == "Fits"
        and "--max-model-len 32768" in annotations["fitgate.io/recommended-args"]
    )
    obj = kube.get("mdep", "llama-8b", "-n", namespace)
    assert obj["spec"] == FITS  # nothing the user wrote was rewritten or defaulted
    # the resync timer needs kopf's finalizer; it is fitgate's, and deletion goes through while it runs
    assert obj["metadata"]["finalizers"] == ["fitgate.io/finalizer"]
    kube.kubectl("delete", "mdep", "llama-8b", "-n", namespace, "--timeout=30s")
    assert kube.kubectl("get", "mdep", "llama-8b", "-n", namespace, check=False).returncode != 0


def test_latency_targets_are_answered_in_status(kube: Kube, operator: Operator, namespace: str) -> None:
    # issue 24: the ISL / OSL and a request rate with a TTFT target; one replica cannot serve 40 req/s of 1k / 256
    # tokens (saturated), the status says so and how many replicas would
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "serving": {"maxModelLen": 8192},
        "workload": {
            "concurrentRequests": 16,
            "contextTokens": 4096,
            "inputTokens": 1024,
            "outputTokens": 256,
            "requestRate": 40,
            "ttftMs": 2000,
        },
        "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("rate", spec))
    perf = wait_verdict(kube, namespace, "rate", "Fits")["performance"]
    assert perf["saturated"] is True and perf["ttftMs"] == -1 and perf["meetsTargets"] is False
    needed = perf["replicasForTargets"]
    assert needed > 1
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("rate", {**spec, "replicas": needed}))
    enough = kube.wait_for(
        lambda: (p := status(kube, namespace, "rate").get("performance") or {}).get("replicas") == needed and p,
        timeout=45,
        what="status.performance at the replicas it named",
    )
    assert enough["meetsTargets"] is True and needed * enough["requestsPerSecond"] >= 40 * 0.999
    assert kube.get("mdep", "rate", "-n", namespace)["spec"]["workload"] == spec["workload"]  # kept as written


def test_speculative_decoding_counts_the_mtp_layer(kube: Kube, operator: Operator, namespace: str) -> None:
    base = {
        "model": {"name": "Qwen/Qwen3-Next-80B-A3B-Thinking"},
        "serving": {"maxModelLen": 32768, "tensorParallelSize": 4},
        "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
    }
    spec = {**base, "serving": {**base["serving"], "speculativeConfig": {"method": "mtp", "numSpeculativeTokens": 2}}}
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("next", base))
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("next-mtp", spec))
    plain, mtp = wait_verdict(kube, namespace, "next", "Fits"), wait_verdict(kube, namespace, "next-mtp", "Fits")
    # the MTP layer's full attention: 2 KV heads over TP 4 -> 1 head x 256 x (K, V) x 2 B = 1,024 B a token
    assert mtp["kvCache"]["bytesPerToken"] - plain["kvCache"]["bytesPerToken"] == 1024
    assert mtp["perGPU"]["weightsBytes"] > plain["perGPU"]["weightsBytes"]
    obj = kube.get("mdep", "next-mtp", "-n", namespace)
    assert obj["spec"] == spec  # the CRD keeps the field as written
    args = obj["metadata"]["annotations"]["fitgate.io/recommended-args"]
    assert """--speculative-config '{"method":"mtp","num_speculative_tokens":2}'""" in args
    bad = {**base, "serving": {**base["serving"], "speculativeConfig": {"method": "lookahead"}}}  # no vLLM method
    refused = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("bad", bad), check=False)
    assert refused.returncode != 0 and "speculativeConfig.method" in refused.stderr


def test_misfit_is_denied_with_the_numbers(kube: Kube, operator: Operator, namespace: str) -> None:
    result = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("llama-70b", MISFIT), check=False)
    assert result.returncode != 0
    assert "denied the request" in result.stderr and "131.45 GiB" in result.stderr
    assert "smallest change that fits: spec.serving.tensorParallelSize: " in result.stderr
    assert kube.kubectl("get", "mdep", "llama-70b", "-n", namespace, check=False).returncode != 0
    # A denial is the webhook working, not an operator error: fitgate's own /fit path answers it (issue 23) and logs
    # one INFO decision line; kopf's engine, which logged a handler failure for each denial, is not in the path.
    log = operator.log.read_text().splitlines()
    denial = [line for line in log if "admission denied: fitgate:" in line]
    assert len(denial) == 1 and "[INFO" in denial[0] and "llama-70b" in denial[0], denial
    assert not [line for line in log if "failed permanently: fitgate:" in line]


def test_a_workload_beyond_one_pool_is_offered_replicas_and_admitted_with_them(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    # issue 24: 512 requests of 4096 tokens are beyond one H100's KV pool (Llama-3.1-8B: ~118 such requests). vLLM
    # starts and queues them, so admission warns instead of denying; the warning offers spec.replicas (the fewest
    # whose pools hold the workload within 90 %, alone or with another change) before fewer requests, and the same
    # spec with those replicas is admitted without the warning: concurrentRequests is split over them
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "serving": {"maxModelLen": 8192},
        "workload": {"concurrentRequests": 512, "contextTokens": 4096},
        "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"},
    }
    dry = ("apply", "--dry-run=server", "-n", namespace, "-f", "-")
    warned = kube.kubectl(*dry, stdin=mdep("wide", spec))
    assert "does not fit" in warned.stderr and "512 concurrent requests x 4096 tokens" in warned.stderr, warned.stderr
    fix = warned.stderr.split("smallest change that fits: ")[1]
    found = re.match(r"[^\[]*spec\.replicas: (\d+)", fix)
    assert found and "spec.workload.concurrentRequests" not in fix.split("[")[0], fix
    replicas = int(found.group(1))
    spec["serving"] = {
        **spec["serving"],
        **({"kvCacheDtype": "fp8"} if "kvCacheDtype: fp8" in fix.split("[")[0] else {}),
    }
    admitted = kube.kubectl(*dry, stdin=mdep("wide", {**spec, "replicas": replicas}))
    assert "does not fit" not in admitted.stderr and "verdict Fits" in admitted.stderr, admitted.stderr


def test_kubectl_edit_into_a_misfit_shows_the_whole_denial(
    kube: Kube, operator: Operator, namespace: str, tmp_path: Path
) -> None:
    """`kubectl edit` prints only the causes of a 422 ("... is invalid"); the denial must keep its numbers."""
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("edited", FITS))
    wait_verdict(kube, namespace, "edited", "Fits")
    editor = tmp_path / "editor.py"  # what a user does in $EDITOR: swap the 8B model for the 70B one
    editor.write_text(
        "import pathlib, sys\n"
        "p = pathlib.Path(sys.argv[-1])\n"
        "p.write_text(p.read_text().replace('Llama-3.1-8B-Instruct', 'Llama-3.1-70B-Instruct'))\n"
    )
    edit = {"KUBE_EDITOR": f"{sys.executable} {editor}"}
    result = kube.kubectl("edit", "mdep", "edited", "-n", namespace, env=edit, check=False)
    assert result.returncode != 0
    assert "denied the request" in result.stderr and "131.45 GiB" in result.stderr, result.stderr
    assert "smallest change that fits: spec.serving.tensorParallelSize: " in result.stderr
    assert "is invalid" not in result.stderr
    assert kube.get("mdep", "edited", "-n", namespace)["spec"]["model"]["name"] == FITS["model"]["name"]
    # apply of the same change shows it too
    applied = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("edited", MISFIT), check=False)
    assert applied.returncode != 0 and "131.45 GiB" in applied.stderr, applied.stderr


def test_tight_is_admitted_with_a_warning(kube: Kube, operator: Operator, namespace: str) -> None:
    result = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("qwen-moe", TIGHT))
    assert "Warning: fitgate: verdict Tight" in result.stderr
    wait_verdict(kube, namespace, "qwen-moe", "Tight")


def test_dry_run_returns_the_verdict_and_stores_nothing(kube: Kube, operator: Operator, namespace: str) -> None:
    result = kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=mdep("dry", FITS))
    assert "fitgate (dry run): verdict Fits" in result.stderr
    assert kube.kubectl("get", "mdep", "dry", "-n", namespace, check=False).returncode != 0
    denied = kube.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=mdep("dry70", MISFIT), check=False
    )
    assert denied.returncode != 0 and "does not fit" in denied.stderr


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "serving": {"tensorParallelSize": 100}},
            "spec.serving.tensorParallelSize",
        ),
        (
            {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "serving": {"kvCacheDtype": "int4"}},
            "spec.serving.kvCacheDtype",
        ),
        (
            {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "serving": {"tensorParallelSize": 3}},
            "tensor_parallel_size: 3 is not valid",
        ),
        ({"serving": {"maxModelLen": 1024}}, "spec.model"),
        (  # an integer or auto: the CRD's int-or-string pattern
            {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "serving": {"maxModelLen": "banana"}},
            "spec.serving.maxModelLen",
        ),
        (  # the CRD's CEL rule
            {
                "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
                "serving": {"maxModelLen": 4096},
                "workload": {"concurrentRequests": 2, "contextTokens": 8192},
            },
            "spec.workload.contextTokens",
        ),
        (  # the CRD's CEL rule (issue 24): latency targets need the load they are estimated at
            {
                "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
                "workload": {"concurrentRequests": 2, "contextTokens": 4096, "ttftMs": 500},
            },
            "workload.requestRate, ttftMs and tpotMs need inputTokens and outputTokens",
        ),
    ],
)
def test_invalid_specs_are_refused_naming_the_field(
    kube: Kube, operator: Operator, namespace: str, spec: dict[str, Any], field: str, tmp_path: Path
) -> None:
    result = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("bad", spec), check=False)
    assert result.returncode != 0 and field in result.stderr, result.stderr
    # `fitgate check` in CI refuses the same manifest, naming the same field (exit 2, one line)
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(mdep("bad", spec))
    fitgate = Path(sys.executable).parent / "fitgate"
    argv = [str(fitgate), "check", "--gpu", "H100", str(manifest)]
    check = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert check.returncode == 2 and check.stdout.count("\n") == 1 and field in check.stdout, check


def test_max_model_len_auto_is_sized_at_the_length_vllm_picks(kube: Kube, operator: Operator, namespace: str) -> None:
    # 8B on one L4 (23 GiB): at the model's 131072 tokens one request needs 16 GiB of KV and ~4 GiB is left, so
    # vLLM refuses to start; with auto (vLLM 0.14+) it lowers the length to what the pool holds and starts
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "engine": {"name": "vllm", "version": "0.25.1"},
        # with the CUDA-graph settings of a memory-tight decode (the CRD takes them as vLLM's compilation config)
        "serving": {"maxModelLen": "auto", "cudagraphMode": "FULL_DECODE_ONLY", "cudagraphCaptureSizes": [1, 2, 4]},
        "workload": {"concurrentRequests": 1, "contextTokens": 8192},  # the CEL rule lets auto through
        "placement": {"gpuProduct": "NVIDIA-L4"},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("auto-len", spec))
    assert kube.get("mdep", "auto-len", "-n", namespace)["spec"]["serving"]["maxModelLen"] == "auto"  # kept as written
    s = wait_verdict(kube, namespace, "auto-len", "Fits")
    assert 8192 < s["recommendedMaxModelLen"] < 131072, s
    # --hf-overrides as a ModelDeployment holds it: any JSON object, stored as written
    yarn = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    spec["model"] = {**spec["model"], "hfOverrides": yarn}
    kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=mdep("auto-len-yarn", spec))
    full = {**spec, "serving": {}}
    denied = kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("full-len", full), check=False)
    assert denied.returncode != 0 and "does not fit" in denied.stderr, denied.stderr


def test_metrics_are_scraped(kube: Kube, operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("scraped", FITS))
    wait_verdict(kube, namespace, "scraped", "Fits")
    text = operator.metrics()
    assert f'fitgate_deployment_verdict{{name="scraped",namespace="{namespace}",verdict="Fits"}} 1.0' in text
    assert "fitgate_admission_requests_total" in text and "fitgate_reconcile_duration_seconds_bucket" in text


def test_restart_keeps_status(kube: Kube, operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("steady", FITS))
    before = wait_verdict(kube, namespace, "steady", "Fits")
    operator.stop()
    operator.start()
    time.sleep(5)  # two resync periods: give a restarted operator the chance to (wrongly) rewrite status
    after = status(kube, namespace, "steady")
    assert after == before
    events = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=steady")["items"]
    assert [e["reason"] for e in events] == ["Fits"]


def test_removing_the_only_fitting_pool(kube: Kube, operator: Operator, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("pool", FITS))
    wait_verdict(kube, namespace, "pool", "Fits")
    name, labels, allocatable = NODES[0]
    kube.kubectl("delete", "node", name)
    try:
        st = wait_verdict(kube, namespace, "pool", "DoesNotFit")
        assert {p["gpuProduct"] for p in st["pools"]} == {"NVIDIA-L4", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
        kube.wait_for(
            lambda: any(
                e["reason"] == "DoesNotFit" and e["type"] == "Warning"
                for e in kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=pool")["items"]
            ),
            timeout=20,
            what="a DoesNotFit Warning event",
        )
    finally:
        kube.kubectl("apply", "-f", "-", stdin=node_manifest(name, labels, allocatable))
    wait_verdict(kube, namespace, "pool", "Fits")


def test_a_user_catalog_model_resolves_offline(kube: Kube, operator: Operator, namespace: str) -> None:
    spec = {
        "model": {"name": "acme/gemma-3-tiny", "source": "catalog"},
        "serving": {"maxModelLen": 8192},
        "placement": {"gpuProduct": "NVIDIA-L4"},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("user-catalog", spec))
    s = wait_verdict(kube, namespace, "user-catalog", "Fits")
    assert s["resolvedModel"]["source"] == "catalog" and s["resolvedModel"]["weightsBasis"] == "safetensors"
    # The same figures as planning the model directory itself with the CLI.
    fitgate = Path(sys.executable).parent / "fitgate"
    argv = [str(fitgate), "plan", "--model", str(operator.workdir / "gemma-3-tiny"), "--gpu", "L4"]
    out = subprocess.run([*argv, "--max-model-len", "8192", "-o", "json"], check=True, capture_output=True, text=True)
    direct = json.loads(out.stdout)["per_gpu"]
    assert s["perGPU"]["weightsBytes"] == direct["weights_bytes"]
    assert s["perGPU"]["kvCacheBytes"] == direct["kv_cache_bytes"]
    assert "user catalog" in operator.log.read_text()


def test_an_offline_model_in_no_catalog_is_one_event_not_a_retry_storm(
    kube: Kube, operator: Operator, namespace: str
) -> None:
    spec = {"model": {"name": "acme/not-anywhere"}, "serving": {"maxModelLen": 4096}}
    kube.kubectl("apply", "-n", namespace, "-f", "-", stdin=mdep("missing", spec))
    kube.wait_for(
        lambda: status(kube, namespace, "missing").get("reason") == "CheckpointNotInCatalog",
        timeout=45,
        what="reason CheckpointNotInCatalog",
    )
    assert status(kube, namespace, "missing")["verdict"] == "Unknown"

    def events() -> list[dict[str, Any]]:
        items = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=missing")["items"]
        return [e for e in items if e["reason"] == "Unknown"]

    kube.wait_for(events, timeout=20, what="the Unknown event")
    time.sleep(3)  # a retry would come within seconds (the operator runs with a short resync)
    assert len(events()) == 1 and events()[0].get("count", 1) == 1
    assert events()[0]["source"]["component"] == "fitgate" and events()[0]["reportingComponent"] == "fitgate"
    st = status(kube, namespace, "missing")
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("False", "CheckpointNotInCatalog", 1)
    log = operator.log.read_text()
    assert "failed temporarily" not in log, log[-3000:]
    assert f"[{namespace}/missing] verdict Unknown" in log, log[-3000:]  # the line names the object
