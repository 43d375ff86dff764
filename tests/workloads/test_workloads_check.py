"""``fitgate check`` on vLLM workloads: the same contract as for ModelDeployments, through the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.cli import main
from fitgate.operator.decision import manifests
from fitgate.operator.decision.offline import check_files
from fitgate.sizing.versions import falls_back_to_v0
from fitgate.workloads.kinds import KINDS
from tests.workloads.test_workloads_reader import deployment as around

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"
MANIFESTS = Path(__file__).parents[1] / "fixtures" / "manifests"


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    """The results of the sized objects (the Skipped lines of Services and the like are tested on their own)."""
    code = main(["check", *argv, "--output", "json"])
    out, err = capsys.readouterr()
    assert err == ""
    return code, [r for r in json.loads(out) if r["verdict"] != "Skipped"]


def lws(tmp_path: Path, size: int) -> str:
    """vLLM's LWS example with the 405B base model of the built-in catalog (the example serves -Instruct)."""
    text = (FIXTURES / "lws-vllm-gpu.yaml").read_text().replace("Llama-3.1-405B-Instruct", "Llama-3.1-405B")
    path = tmp_path / "lws.yaml"
    path.write_text(text.replace("size: 2", f"size: {size}"))
    return str(path)


def test_production_stack_deployment_on_its_l4_pool_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code, results = check(capsys, str(FIXTURES / "production-stack-deployment.yaml"))
    assert code == 1
    [r] = results
    assert set(r) >= {"source", "kind", "name", "verdict", "gpu", "message"}
    assert (r["kind"], r["name"], r["verdict"], r["gpu"]) == (
        "Deployment",
        "default/vllm-llama3-deployment-vllm",
        "DoesNotFit",
        "NVIDIA-L4",  # from the chart's required node affinity on nvidia.com/gpu.product
    )
    # the numbers: 32 layers x 2 x 8 kv heads x 128 x 2 B = 128 KiB/token -> 16 GiB for one 131072-token request
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in r["message"]
    # the fix is written against the chart's own flags
    assert "smallest fix: change `--kv-cache-dtype auto` to `--kv-cache-dtype fp8`" in r["message"]


def test_the_same_deployment_fits_on_h100(capsys: pytest.CaptureFixture[str]) -> None:
    code, results = check(capsys, str(FIXTURES / "production-stack-deployment.yaml"), "--gpu", "H100")
    assert code == 0 and results[0]["verdict"] == "Fits", results


def test_lws_group_of_two_nodes_fits_and_one_node_is_short_of_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, [r] = check(capsys, lws(tmp_path, 2), "--gpu", "H100")
    assert code == 0 and (r["kind"], r["verdict"]) == ("LeaderWorkerSet", "Fits"), r
    code, [r] = check(capsys, lws(tmp_path, 1), "--gpu", "H100")
    assert code == 1 and r["verdict"] == "DoesNotFit"
    assert "vLLM needs 16 GPUs (TP 8 x PP 2) but container vllm-leader asks for 8 nvidia.com/gpu" in r["message"]


def test_an_lws_of_more_pods_than_a_replica_may_span_is_unknown_before_a_pool_per_pod_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt83 F5: size 10**30 built one offline node pool per pod first (35 s, 3.9 GB, MemoryError, exit 70). A group
    # past the 64 nodes a ModelDeployment replica spans is outside what fitgate sizes, not invalid for vLLM: Unknown
    # (hunt88 F5: it was Invalid, exit 2)
    start = time.perf_counter()
    code, [r] = check(capsys, lws(tmp_path, 10**30), "--gpu", "H100")
    assert code == 0 and r["verdict"] == "Unknown", r
    assert "nodesPerReplica: Input should be less than or equal to 64" in r["message"]
    assert "outside what fitgate sizes" in r["message"]
    assert time.perf_counter() - start < 5.0


def test_a_rayservice_whose_serve_config_is_not_yaml_is_invalid_and_the_next_object_is_still_checked(
    tmp_path: Path,
) -> None:
    # hunt83 F6: the parts reader's WorkloadError ended the whole run (internal error, exit 70): later documents
    # got no verdict. The webhook answers this RayService Invalid; so does check, and goes on
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-ray-serve-llm.yaml").read_text()) if d)
    ray["spec"]["serveConfigV2"] = "applications:\n  - name: x\n    args: [\n"
    deployment = (FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump(ray) + "---\n" + deployment)
    results = [r for r in check_files([str(path)], "H100") if r.verdict != "Skipped"]
    assert [(r.kind, r.verdict) for r in results] == [("RayService", "Invalid"), ("Deployment", "Fits")], results
    assert results[0].message == "spec.serveConfigV2 is not YAML: while parsing a flow node"


def test_a_value_vllms_parser_refuses_is_unknown_on_an_image_that_names_no_release(tmp_path: Path) -> None:
    # hunt122: GoogleCloudPlatform/kubernetes-engine-samples@241b7340 ai-ml/llm-serving-llama/vllm/
    # vllm-llama4-scout-17b-16e-instruct.yaml runs Vertex Model Garden's pytorch-vllm-serve:20250405_1205_RC01 with
    # `--limit_mm_per_prompt='image=5'` (the quotes reach the process: no shell). vLLM's own parser refuses that;
    # a vendor's build may not, so on an image naming no vLLM release it is Unknown, never Invalid; on vLLM's image
    # it stays Invalid.
    def deployment(image: str) -> dict[str, Any]:
        container = {
            "name": "inference-server", "image": image,
            "args": ["python3", "-m", "vllm.entrypoints.api_server", "--max-model-len=8192",
                     "--limit_mm_per_prompt='image=5'", "--model=meta-llama/Llama-4-Scout-17B-16E-Instruct",
                     "--tensor-parallel-size=8"],
            "resources": {"limits": {"nvidia.com/gpu": 8}},
        }  # fmt: skip
        pod = {"containers": [container], "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": image.rsplit("/", 1)[-1][:20]},
                "spec": {"template": {"spec": pod}}}  # fmt: skip

    vertex = "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve:20250405_1205_RC01"
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump_all([deployment(vertex), deployment("vllm/vllm-openai:v0.8.3")]))
    results = check_files([str(path)], None)
    assert [r.verdict for r in results] == ["Unknown", "Invalid"], results
    assert "\"'image=5'\" is not valid" in results[0].message and "names no vLLM release" in results[0].message


def test_a_gke_partition_size_selects_a_mig_slice_not_the_whole_card(tmp_path: Path) -> None:
    # hunt148 S1: GKE's documented MIG request is nodeSelector cloud.google.com/gke-gpu-partition-size beside the
    # accelerator and nvidia.com/gpu: 1 (gbrayut/cloud-examples@74ec5e2 gke-ai-misc/vllm-gemma3-1b.yaml ran seven
    # pods on one A100); the inventory sizes such nodes as slices (hunt77 F1), `fitgate check` sized the whole card.
    # Qwen3-8B's 15.27 GiB of bf16 weights exceed a 1g.10gb slice; the whole A100-80GB holds them.
    def deployment(partition: str | None) -> dict[str, Any]:
        selector = {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
        if partition:
            selector["cloud.google.com/gke-gpu-partition-size"] = partition
        container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                     "args": ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"],
                     "resources": {"limits": {"nvidia.com/gpu": 1}}}  # fmt: skip
        return around(container, nodeSelector=selector)

    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump_all([deployment("1g.10gb"), deployment(None)]))
    sliced, whole = check_files([str(path)], None)
    assert (sliced.verdict, sliced.gpu) == ("DoesNotFit", "A100-80GB-MIG-1g.10gb"), sliced.message
    assert (whole.verdict, whole.gpu) == ("Fits", "A100-80GB"), whole.message


def test_a_gpu_label_that_names_no_card_is_said_in_the_unknown(tmp_path: Path) -> None:
    # hunt148 S7: AKS node auto-provisioning's karpenter.azure.com/sku-gpu-name: H100 without a memory label names no
    # one card of the catalog; the Unknown said only "no GPU to check against", not which label was read and why
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": ["--model", "Qwen/Qwen3-8B"],
                 "resources": {"limits": {"nvidia.com/gpu": 1}}}  # fmt: skip
    path = tmp_path / "aks.yaml"
    path.write_text(yaml.safe_dump(around(container, nodeSelector={"karpenter.azure.com/sku-gpu-name": "H100"})))
    (result,) = check_files([str(path)], None)
    assert result.verdict == "Unknown" and "karpenter.azure.com/sku-gpu-name=H100 names no card" in result.message


def test_a_command_that_runs_a_mounted_configmap_script_is_read_as_that_script(tmp_path: Path) -> None:
    # hunt163 F2: castai's hosted-model chart runs `command: ["/scripts/startup.sh"]` from a mounted ConfigMap whose
    # script is `exec vllm serve --model=... "$@"`, the engine flags in `args`: Skipped ("runs no vLLM server"). With
    # the ConfigMap among the manifests the command is that script with the args as "$@" (sh -c SCRIPT PATH ARG ...);
    # `bash /start/run.sh` through a projected item reads the same; without the ConfigMap it stays unread.
    script = '#!/bin/bash\nset -e\nexec vllm serve --model="Qwen/Qwen3-8B" "$@"\n'
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "start"}, "data": {"startup.sh": script}}

    def pod(command: list[str], volume: dict[str, Any], mount: str, *args: str) -> dict[str, Any]:
        container = {"name": "vllm", "image": "example.com/llm/server:1", "command": command,
                     "args": ["--max-model-len=8192", *args], "resources": {"limits": {"nvidia.com/gpu": 1}},
                     "volumeMounts": [{"name": "scripts", "mountPath": mount}]}  # fmt: skip
        return around(container, volumes=[{"name": "scripts", "configMap": volume}])

    plain = pod(["/scripts/startup.sh"], {"name": "start", "defaultMode": 493}, "/scripts")
    items = {"name": "start", "items": [{"key": "startup.sh", "path": "run.sh"}]}
    projected = pod(["bash", "/start/run.sh"], items, "/start")
    two = pod(["/scripts/startup.sh"], {"name": "start"}, "/scripts", "--tensor-parallel-size=2")  # args are "$@"
    path = tmp_path / "chart.yaml"
    path.write_text(yaml.safe_dump_all([configmap, plain, projected, two]))
    results = [r for r in check_files([str(path)], "L4") if r.kind == "Deployment"]
    assert [r.verdict for r in results[:2]] == ["Fits", "Fits"], [r.message for r in results]
    assert all("Qwen/Qwen3-8B" in r.message for r in results[:2]), [r.message for r in results]
    assert results[2].verdict == "DoesNotFit" and "2 GPUs" in results[2].message, results[2].message
    path.write_text(yaml.safe_dump(plain))
    (alone,) = check_files([str(path)], "L4")
    assert alone.verdict == "Skipped", alone.message
    # a command of more words than a shell and the script's path is not read as the script alone (its words kept)
    longer = pod(["bash", "/scripts/startup.sh", "--tensor-parallel-size=2"], {"name": "start"}, "/scripts")
    path.write_text(yaml.safe_dump_all([configmap, longer]))
    assert [r.verdict for r in check_files([str(path)], "L4") if r.kind == "Deployment"] == ["Skipped"]


def test_an_argo_rollout_is_read_as_the_deployment_it_replaces(tmp_path: Path) -> None:
    # Argo Rollouts' Rollout carries a Deployment's selector and pod template (argoproj/argo-rollouts
    # pkg/apis/rollouts/v1alpha1/types.go RolloutSpec); GitOps teams swap `kind: Deployment` for it to canary a
    # model. It was Skipped ("kind Rollout is not one fitgate reads"). One with spec.workloadRef runs another
    # Deployment's template: nothing of its own to read.
    deployment = next(d for d in yaml.safe_load_all((FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()) if d)
    rollout = {**deployment, "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout"}
    rollout["spec"] = {**deployment["spec"], "strategy": {"canary": {"steps": [{"setWeight": 20}]}}}
    by_ref = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "by-ref"},
              "spec": {"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mistral-7b"}}}  # fmt: skip
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump_all([deployment, rollout, by_ref]))
    results = check_files([str(path)], "L4")
    assert [(r.kind, r.verdict) for r in results] == [
        ("Deployment", "Fits"), ("Rollout", "Fits"), ("Rollout", "Skipped")
    ], results  # fmt: skip
    assert results[1].message.removeprefix("Rollout") == results[0].message.removeprefix("Deployment")


@pytest.mark.parametrize(("spec", "got"), [("[1, 2]", "a list"), ("text", "a string"), ("7", "a number")])
def test_a_model_deployment_whose_spec_is_not_an_object_is_invalid(tmp_path: Path, spec: str, got: str) -> None:
    # hunt83 F7: `spec: [1, 2]` was dict([1, 2]): internal error: TypeError (exit 70)
    path = tmp_path / "mdep.yaml"
    path.write_text(f"apiVersion: fitgate.io/v1alpha1\nkind: ModelDeployment\nmetadata: {{name: m}}\nspec: {spec}\n")
    [result] = check_files([str(path)], "H100")
    assert (result.verdict, result.message) == ("Invalid", f"spec: expected an object (got {got})")


def test_a_manifest_past_the_size_limit_is_refused_after_reading_that_much(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hunt83 F8: read_text() read /dev/zero until 3.8 GB and MemoryError; now at most MAX_MANIFEST_BYTES + 1 are read
    monkeypatch.setattr(manifests, "MAX_MANIFEST_BYTES", 1024)
    path = tmp_path / "big.yaml"
    path.write_text("# x\n" * 300)  # 1200 bytes
    [result] = check_files([str(path)], "H100")
    assert (result.verdict, result.message) == (
        "Invalid",
        "cannot read YAML: more than 1024 bytes; fitgate check reads manifests of at most 64 MiB",
    )
    [result] = check_files(["/dev/zero"], "H100")  # never ends: refused at the limit
    assert result.message.startswith("cannot read YAML: more than 1024 bytes")


def test_a_manifest_number_past_pythons_digit_limit_is_named_as_such(tmp_path: Path) -> None:
    # before: "cannot read YAML: Exceeds the limit (4300 digits) ... use sys.set_int_max_str_digits()"
    path = tmp_path / "mdep.yaml"
    path.write_text("kind: ConfigMap\n---\nkind: ModelDeployment\nspec: {maxModelLen: " + "9" * 5000 + "}\n")
    [result] = [r for r in check_files([str(path)], "H100") if r.verdict == "Invalid"]
    assert result.message == "cannot read YAML: document 1 holds a number of more than 4300 digits"


def test_a_document_that_cannot_be_built_is_its_own_result_and_the_others_are_sized(tmp_path: Path) -> None:
    # hunt104 F2: GKE's Llama-4 sample ends with a Secret `hf_api_token: {{HF_TOKEN}}` (a mapping used as a key):
    # the whole file was "Invalid: cannot read YAML" beside the Deployment's Fits, so a CI gate on the exit code
    # failed a workload that fits. Now the Secret alone is Skipped, naming the line; a document fitgate sizes that
    # cannot be built is Invalid, and a document after both is still read.
    deployment = (FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hf-secret\nstringData:\n  hf_api_token: {{HF_TOKEN}}\n"
    broken = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\nspec: {replicas: {{N}}}\n"
    path = tmp_path / "set.yaml"
    path.write_text(secret + "---\n" + broken + "---\n" + deployment)
    results = check_files([str(path)], "H100")
    got = [(r.source.rsplit("#", 1)[1], r.kind, r.name, r.verdict) for r in results if r.kind != "Service"]
    assert got[:2] == [("0", "Secret", "default/hf-secret", "Skipped"), ("1", "Deployment", "default/bad", "Invalid")]
    assert [(k, v) for _, k, _, v in got[2:]] == [("Deployment", "Fits")], got
    assert "found unhashable key (line 6)" in results[0].message and "unrendered template" in results[0].message
    # the line is the file's: 6 of the Secret and its ---, then the broken one's 5th
    assert results[1].message == "cannot read YAML: found unhashable key (line 12)", results[1].message
    # the file's syntax itself is still the file's error
    path.write_text(deployment + "---\nkind: [\n")
    assert [r.verdict for r in check_files([str(path)], "H100") if r.source == str(path)] == ["Invalid"]


HELM_TEMPLATE_OUTPUT = """\
---
# Source: demo/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: vllm-config
data:
  config.yaml: |
    model: meta-llama/Llama-3.1-8B-Instruct
    max_model_len: 131072
---
# Source: demo/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: vllm
spec:
  ports: [{port: 8000}]
---
# Source: demo/templates/train.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  template:
    spec:
      containers:
      - name: train
        image: pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime
        command: ["torchrun", "train.py"]
        resources: {limits: {nvidia.com/gpu: 8}}
---
# Source: demo/templates/statefulset.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: vllm
  namespace: serving
spec:
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-L4
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.19.0
        args: ["--config", "/etc/vllm/config.yaml"]
        volumeMounts: [{name: cfg, mountPath: /etc/vllm}]
        resources: {limits: {nvidia.com/gpu: "1"}}
      volumes:
      - name: cfg
        configMap: {name: vllm-config}
"""


def test_helm_template_output_with_a_config_file_and_skipped_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rendered.yaml"
    path.write_text(HELM_TEMPLATE_OUTPUT)
    code, results = check(capsys, str(path))
    # the ConfigMap, the Service and the non-vLLM GPU Job are not listed
    assert [(r["kind"], r["name"]) for r in results] == [("StatefulSet", "serving/vllm")]
    assert code == 1 and results[0]["verdict"] == "DoesNotFit"
    assert "131072-token request" in results[0]["message"]  # max_model_len came from the ConfigMap


def test_kind_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [d for d in yaml.safe_load_all((FIXTURES / "vllm-docs-k8s-nvidia.yaml").read_text()) if d]
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    code, results = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and [r["verdict"] for r in results] == ["Fits"]
    assert results[0]["source"].endswith("#0.items[0]")


@pytest.mark.parametrize(
    ("container", "verdict", "code", "text"),
    [
        (  # an unclosed quote: fitgate's splitter fails, which it cannot tell from a script the shell runs and it
            # cannot split (hunt207): Unknown, never a refusal
            {"command": ["sh", "-c", "vllm serve 'meta-llama/Llama-3.1-8B-Instruct"]},
            "Unknown",
            0,
            "fitgate cannot split the shell script into words (No closing quotation)",
        ),
        (  # no GPU limit at all, TP 2: hunt27 F2, the node's default runtime may expose its GPUs (production-stack's
            # CI runs requestGPU 0.5, which drops the limit): Unknown, never "no GPU"
            {"args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "2"]},
            "Unknown",
            0,
            "container vllm asks for no nvidia.com/gpu: it sees GPUs only where the node's default container runtime "
            "exposes them (unscheduled and unsized by Kubernetes); set nvidia.com/gpu: 2",
        ),
        (  # a GPU limit of 0: the same
            {"args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"], "resources": {"limits": {"nvidia.com/gpu": 0}}},
            "Unknown",
            0,
            "container vllm asks for no nvidia.com/gpu",
        ),
        (  # too few GPUs asked for: the device plugin exposes only those, and vLLM's TP 4 cannot start on 2
            {
                "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "4"],
                "resources": {"limits": {"nvidia.com/gpu": 2}},
            },
            "DoesNotFit",
            1,
            "vLLM needs 4 GPUs (TP 4 x PP 1) but container vllm asks for 2 nvidia.com/gpu; set nvidia.com/gpu: 4",
        ),
    ],
)
def test_bad_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], container: dict[str, Any], verdict: str, code: int, text: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.19.0", **container}]},
    }
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    got, [r] = check(capsys, str(path), "--gpu", "H100")
    assert (got, r["verdict"], r["kind"]) == (code, verdict, "Pod")
    assert text in r["message"], r["message"]


def test_the_whole_helm_template_output_of_the_production_stack_chart(capsys: pytest.CaptureFixture[str]) -> None:
    # ServiceAccount, Secret, Role, RoleBinding, two Services and the router Deployment are not listed
    code, results = check(capsys, str(FIXTURES / "production-stack-helm-template.yaml"))
    assert code == 1
    assert [(r["kind"], r["name"], r["verdict"]) for r in results] == [
        ("Deployment", "default/vllm-llama3-deployment-vllm", "DoesNotFit")
    ]


def test_model_deployment_nodes_per_replica() -> None:
    """placement.nodesPerReplica: a replica of TP 8 x PP 2 spans 2 nodes of 8 GPUs, and needs 2 such nodes."""
    from fitgate.operator.decision.evaluate import evaluate  # noqa: PLC0415
    from fitgate.operator.gpus.inventory import parse_node  # noqa: PLC0415
    from fitgate.operator.schema.api import parse_spec  # noqa: PLC0415
    from tests.conftest import model  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import H100  # noqa: PLC0415

    second = {**H100, "metadata": {**H100["metadata"], "name": "h100-1"}}
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-405B"},
        "serving": {"tensorParallelSize": 8, "pipelineParallelSize": 2, "maxModelLen": 8192},
        "placement": {"nodesPerReplica": 2},
    }
    llama = model("meta-llama/Llama-3.1-405B")
    two = evaluate(parse_spec(spec), llama, [*parse_node(H100), *parse_node(second)])
    assert two.verdict.value == "Fits", two.message
    one = evaluate(parse_spec(spec), llama, parse_node(H100))
    assert one.verdict.value == "DoesNotFit" and one.reason == "NotEnoughGPUsPerNode"
    assert "8 GPUs per node x 2 nodes but the pool has 1 nodes of 8" in one.message
    single = evaluate(parse_spec({**spec, "placement": {}}), llama, [*parse_node(H100), *parse_node(second)])
    assert single.reason == "NotEnoughGPUsPerNode"  # 16 GPUs on one node of 8


def test_check_a_model_deployment_spanning_two_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mdep = {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "big"},
        "spec": {
            "model": {"name": "meta-llama/Llama-3.1-405B"},
            "serving": {"tensorParallelSize": 8, "pipelineParallelSize": 2, "maxModelLen": 8192},
            "placement": {"gpuProduct": "H100", "nodesPerReplica": 2},
        },
    }
    path = tmp_path / "mdep.yaml"
    path.write_text(yaml.safe_dump(mdep))
    code, [r] = check(capsys, str(path))
    assert code == 0 and (r["kind"], r["verdict"]) == ("ModelDeployment", "Fits"), r


def test_data_parallel_counts_in_the_per_node_check() -> None:
    """placement.dataParallelSize: each rank holds TP x PP GPUs, so a replica needs TP x PP x DP on its nodes."""
    from fitgate.operator.decision.evaluate import evaluate  # noqa: PLC0415
    from fitgate.operator.decision.workloads import evaluate_reading  # noqa: PLC0415
    from fitgate.operator.gpus.inventory import parse_node  # noqa: PLC0415
    from fitgate.operator.schema.api import parse_spec  # noqa: PLC0415
    from fitgate.workloads import read_workload  # noqa: PLC0415
    from tests.conftest import model  # noqa: PLC0415
    from tests.fitgate_operator.test_operator import H100  # noqa: PLC0415

    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    spec = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "serving": {"tensorParallelSize": 4, "maxModelLen": 8192},
        "placement": {"dataParallelSize": 2},
    }
    assert evaluate(parse_spec(spec), llama, parse_node(H100)).verdict.value == "Fits"  # 4 x 2 = 8 on a node of 8
    wide = evaluate(parse_spec({**spec, "placement": {"dataParallelSize": 4}}), llama, parse_node(H100))
    assert wide.verdict.value == "DoesNotFit" and wide.reason == "NotEnoughGPUsPerNode"
    assert "16 GPUs per replica (TP x PP x DP) but the pool has 1 nodes of 8" in wide.message  # 4 x 4 = 16
    # the same as a Deployment: `vllm serve -tp 4 -dp 4` with 16 GPUs in its one pod cannot be scheduled
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "command": [
            "vllm",
            "serve",
            "meta-llama/Llama-3.1-8B-Instruct",
            "-tp",
            "4",
            "-dp",
            "4",
            "--max-model-len",
            "8192",
        ],
        "resources": {"limits": {"nvidia.com/gpu": "16"}},
    }
    d = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [container]}}}}
    reading = read_workload(d)
    assert reading is not None and reading.gpu_shortfall() is None
    verdict = evaluate_reading(reading, llama, parse_node(H100))
    assert verdict.verdict.value == "DoesNotFit" and "16 GPUs per replica (TP x PP x DP)" in verdict.message


def test_check_writes_the_fix_in_the_configmap_of_the_manifest_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the production-stack Deployment with its engine settings moved into a --config file of a ConfigMap
    deployment = yaml.safe_load((FIXTURES / "production-stack-deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["command"] = ["vllm", "serve", "--config", "/etc/vllm/engine.yaml"]
    container["volumeMounts"] = [{"name": "engine", "mountPath": "/etc/vllm"}]
    pod["volumes"] = [{"name": "engine", "configMap": {"name": "llama-engine"}}]
    engine = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\nkv-cache-dtype: auto\n"
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llama-engine"}}
    configmap["data"] = {"engine.yaml": engine}
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump_all([configmap, deployment]))
    code, [r] = check(capsys, str(path))
    assert code == 1 and r["verdict"] == "DoesNotFit", r
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in r["message"]
    fix = (
        "smallest fix: change `kv-cache-dtype: auto` to `kv-cache-dtype: fp8` in ConfigMap llama-engine key engine.yaml"
    )
    assert fix in r["message"], r["message"]


def test_a_dra_claim_is_checked_offline_on_the_gpu_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # offline there are no ResourceSlices: the claim's devices are the --gpu pool, and the result says so
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: ml}
spec:
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: h100}]
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.19.0
        args: [meta-llama/Llama-3.1-8B-Instruct, --max-model-len, "8192"]
        resources: {claims: [{name: gpu}]}
---
apiVersion: fitgate.io/v1alpha1
kind: ModelDeployment
metadata: {name: md, namespace: ml}
spec:
  model: {name: meta-llama/Llama-3.1-8B-Instruct}
  serving: {maxModelLen: 8192}
  placement: {resourceClaimTemplateName: h100}
"""
    path = tmp_path / "claim.yaml"
    path.write_text(manifest)
    code, rows = check(capsys, str(path), "--gpu", "H100")
    assert code == 0 and [r["verdict"] for r in rows] == ["Fits", "Fits"]  # 8B at 8k on an 80 GB card
    assert all("ResourceClaimTemplate h100 is not resolved offline" in r["message"] for r in rows)
    code, rows = check(capsys, str(path), "--gpu", "L4", "--gpus-per-node", "1")
    assert code == 0 and rows[0]["verdict"] in ("Fits", "Tight")  # 15 GiB of weights on a 22 GiB card
    code, rows = check(capsys, str(path))
    assert [r["verdict"] for r in rows] == ["Unknown", "Unknown"]  # no GPU named: nothing to size on


def test_every_object_not_sized_gets_a_skipped_line_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm"}, "spec": {"ports": [{"port": 8000}]}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}},
        {"servingEngineSpec": {"modelSpec": []}},  # hunt99 G1: a chart's values file, not rendered
        # hunt114 F3: modelplane.ai's ModelDeployment (modelplane@90ba117d) is another project's kind of the name
        {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "k2"}, "spec": {}},
    ]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["check", str(path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0  # Skipped lines do not change the exit code
    assert out == [
        f"{path}#0: default/vllm: Skipped: kind Service is not one fitgate reads ("
        + ", ".join(k.kind for k in KINDS)
        + ")",
        f"{path}#1: shop/web: Skipped: runs no vLLM server (no container runs `vllm serve` or a vLLM image's entrypoint)",
        f"{path}#2: default/cfg: Skipped: a ConfigMap: read into the workloads of this manifest set that use it",
        f"{path}#3: default/?: Skipped: kind (none) is not one fitgate reads ("
        + ", ".join(k.kind for k in KINDS)
        + "); a Helm values file? render the chart first: helm template NAME CHART -f FILE | fitgate check -",
        f"{path}#4: default/k2: Skipped: a ModelDeployment of modelplane.ai/v1alpha1, not fitgate's (fitgate.io): "
        "another project's kind of the same name",
    ]


def _lab_deployment(labels: dict[str, str]) -> dict[str, Any]:
    """hunt14: Qwen3-14B-AWQ at TP 2 on two RTX 5060 Ti 16 GB (syv-ai/qwen38-27b-rtx3090 issue 22 ran such a pair)."""
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.27.1",
        "args": ["--model", "Qwen/Qwen3-14B-AWQ", "--tensor-parallel-size", "2", "--max-model-len", "8192"],
        "resources": {"limits": {"nvidia.com/gpu": 2}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "qwen3-14b", "namespace": "lab"},
        "spec": {
            "selector": {"matchLabels": {"app": "q"}},
            "template": {
                "metadata": {"labels": {"app": "q"}},
                "spec": {"nodeSelector": labels, "containers": [container]},
            },
        },
    }


def _check_on_one_h100(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], **container: Any
) -> dict[str, Any]:
    """``fitgate check``'s one result for the lab Deployment on one H100 with ``args`` (and ``container`` fields)."""
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    spec = doc["spec"]["template"]["spec"]["containers"][0]
    spec.update(container, args=args)
    spec["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, [r] = check(capsys, str(path))
    return r


def test_a_gpu_outside_the_catalog_is_sized_by_its_memory_label_or_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt14 D1: `fitgate check` answered Invalid (a denial) for every GPU product outside its catalog, where the live
    # webhook sizes the node by its memory label (operator/gpus/inventory.py). Now both read the same rule: the
    # product with nvidia.com/gpu.memory (16380 MiB less the driver's 470 = 15.54 GiB) is sized; without it, Unknown.
    # (The RTX 5060 Ti, 4070 Ti SUPER and RX 7900 XTX this test used are in the catalog now, and the RTX 5000 Ada
    # since hunt128's review, the PRO W7800 since hunt179: the Quadro RTX 5000 and PRO V710 are not.)
    product = {"nvidia.com/gpu.product": "Quadro-RTX-5000"}
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(_lab_deployment({**product, "nvidia.com/gpu.memory": "16380"})))
    code, [r] = check(capsys, str(path))
    assert r["verdict"] in ("Fits", "Tight") and r["gpu"] == "Quadro-RTX-5000" and code == 0, r
    path.write_text(yaml.safe_dump(_lab_deployment(product)))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Unknown") and "gives no memory label" in r["message"], r
    # an AMD product with its vram label, in a ModelDeployment's placement
    mdep = {
        "apiVersion": "fitgate.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "xtx"},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B", "source": "catalog"},
            "serving": {"maxModelLen": 8192},
            "placement": {
                "gpuProduct": "Radeon_PRO_V710",
                "nodeSelector": {"amd.com/gpu.product-name": "Radeon_PRO_V710", "amd.com/gpu.vram": "28G"},
            },
        },
    }
    path.write_text(yaml.safe_dump(mdep))
    code, [r] = check(capsys, str(path))
    assert r["verdict"] in ("Fits", "Tight") and code == 0, r
    del mdep["spec"]["placement"]["nodeSelector"]
    path.write_text(yaml.safe_dump(mdep))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Unknown"), r
    # a --gpu fitgate does not know: each workload's Unknown, never a usage error (hunt59 F2)
    assert main(["check", str(path), "--gpu", "Z9000"]) == 0
    assert "GPU 'Z9000' is not in the catalog (see `fitgate gpus`): not sized" in capsys.readouterr().out


def test_a_packed_kv_cache_dtype_is_unknown_and_int8_per_token_head_is_sized(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt14 D2: club-3090 served 2 x RTX 3090 with --kv-cache-dtype int8_per_token_head on stock v0.22.0; vLLM's
    # TurboQuant blog serves --kv-cache-dtype turboquant_4bit_nc. Both were Invalid (a denial).
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3090"})
    args = doc["spec"]["template"]["spec"]["containers"][0]["args"]
    path = tmp_path / "kv.yaml"
    # hunt32 F3: the packed one is bounded by the plan at the model's dtype, which fits here (Unknown where it does not)
    for dtype, verdicts in (("int8_per_token_head", {"Fits", "Tight"}), ("turboquant_4bit_nc", {"Fits", "Tight"})):
        doc["spec"]["template"]["spec"]["containers"][0]["args"] = [*args, "--kv-cache-dtype", dtype]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in verdicts, r
    # hunt70 F4: the packed dtype's figures are a bound, and check says so as `plan` does (JSON and text)
    assert any("turboquant_4bit_nc: its packed sub-byte pages are not sized" in n for n in r["notes"]), r
    assert main(["check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}#0: ") and any(
        n.startswith("  note: --kv-cache-dtype turboquant_4bit_nc: its packed sub-byte pages are not sized")
        for n in lines[1:]
    ), lines


def test_flags_that_may_change_memory_and_are_not_modelled_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt70 F4-F7: `fitgate plan` names --num-gpu-blocks-override, --mm-ipc-gpu-memory-gb and
    # --kv-cache-dtype-skip-layers as taken but not modelled; `check` said nothing, and the figures looked exact.
    # Same verdict and figures, each flag named in the message.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3090"})
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, [plain] = check(capsys, str(path))
    flags = ["--num-gpu-blocks-override", "1024", "--mm-ipc-gpu-memory-gb", "2", "--kv-cache-dtype-skip-layers", "0"]
    doc["spec"]["template"]["spec"]["containers"][0]["args"] += flags
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert code == 0 and r["verdict"] == plain["verdict"], r
    assert r["message"].startswith(plain["message"])
    for flag in flags[::2]:
        assert f"{flag}: may change memory, not modelled" in r["message"], flag
    # hunt80 O3: a not-modelled switch turned off is vLLM's default: nothing to say
    doc["spec"]["template"]["spec"]["containers"][0]["args"] += ["--no-disable-hybrid-kv-cache-manager"]
    path.write_text(yaml.safe_dump(doc))
    _, [r] = check(capsys, str(path))
    assert "hybrid-kv-cache-manager" not in r["message"], r


def test_gpus_under_other_resource_names_are_never_no_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt16 D1-D3: a pod that gets its GPU another way was denied "has no nvidia.com/gpu limit (so no GPU)":
    # the GPU Operator's renamed time-slicing resource (token-labs' Dynamo services on DGX Spark), a MIG slice
    # (rh-aiservices-bu/rhaiis-demo's nvidia.com/mig-3g.71gb), KServe's managed DRA annotations (kserve's samples).
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    path = tmp_path / "w.yaml"
    # hunt24 F1: another device plugin's resource (Tanguille/cluster's vLLM on an AMD RDNA4 card through squat's
    # generic-device-plugin, squat.ai/dri: 1; Volcano's vgpu) was DoesNotFit "set nvidia.com/gpu: 1"
    cases = (
        ("nvidia.com/gpu.shared", {"Fits", "Tight"}),
        ("nvidia.com/mig-3g.71gb", {"Unknown"}),
        ("squat.ai/dri", {"Unknown"}),
        ("volcano.sh/vgpu-number", {"Unknown"}),
    )
    for resource, verdicts in cases:
        container["resources"] = {"limits": {resource: 1, "memory": "32Gi"}}
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in verdicts, r
    # Kubernetes' own resources are no device: the pod asks for no GPU, which the node's default runtime may still
    # expose (hunt27 F2: production-stack's CI), so Unknown, never "no GPU" ...
    container["resources"] = {"limits": {"memory": "32Gi", "hugepages-2Mi": "1Gi"}}
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert r["verdict"] == "Unknown" and "asks for no nvidia.com/gpu" in r["message"], r
    # ... and hunt24 F2: under runtimeClassName nvidia a CUDA image sees the node's GPUs without a resource
    doc["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert code == 0 and r["verdict"] == "Unknown" and "runtimeClassName nvidia" in r["message"], r
    del doc["spec"]["template"]["spec"]["runtimeClassName"]
    llmisvc = {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": "q", "annotations": {"serving.kserve.io/exp-dra-device-class": "gpu.nvidia.com"}},
        "spec": {
            "model": {"uri": "hf://Qwen/Qwen3-8B", "name": "Qwen/Qwen3-8B"},
            "template": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "4"}}}]},
        },
    }
    path.write_text(yaml.safe_dump(llmisvc))
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and r["verdict"] == "Unknown" and "KServe managed DRA" in r["message"], r


def test_an_llminferenceservice_misfit_with_base_refs_is_unknown(tmp_path: Path) -> None:
    # hunt157 S5: an LLMInferenceService inherits what its baseRefs' LLMInferenceServiceConfig objects hold (the
    # controller merges them under the spec); fitgate reads the spec alone, so a misfit without them is not one it can
    # show. Llama-3.1-70B in bf16 (131.45 GiB) on one L4 does not fit: DoesNotFit without baseRefs, Unknown with.
    def llmisvc(refs: list[str]) -> dict[str, Any]:
        spec = {"model": {"uri": "hf://meta-llama/Llama-3.1-70B-Instruct"},
                "template": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                             "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}}  # fmt: skip
        if refs:
            spec["baseRefs"] = [{"name": r} for r in refs]
        return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
                "metadata": {"name": "-".join(refs) or "plain"}, "spec": spec}  # fmt: skip

    path = tmp_path / "llmisvc.yaml"
    path.write_text(yaml.safe_dump_all([llmisvc([]), llmisvc(["team-vllm-defaults"])]))
    plain, based = check_files([str(path)], None)
    assert plain.verdict == "DoesNotFit", plain.message
    assert based.verdict == "Unknown" and "LLMInferenceServiceConfig team-vllm-defaults" in based.message


def test_a_model_path_inside_the_container_says_so_and_the_annotation_sizes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt16 M1: a model on a PVC or GCS FUSE mount was "'/models/x' is not valid; expected a directory with
    # config.json": the path is not invalid, fitgate cannot see it. Unknown, saying how to name it.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    doc["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "--model",
        "/models/Qwen3-8B",
        "--max-model-len",
        "8192",
    ]
    doc["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Unknown") and "is a path inside the container" in r["message"], r
    assert "is not valid" not in r["message"]
    doc["metadata"]["annotations"] = {"fitgate.io/model": "Qwen/Qwen3-8B"}
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert code == 0 and r["verdict"] in ("Fits", "Tight"), r


def test_load_time_quantization_experts_int8_is_sized_and_unsized_ones_are_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt19 F1: `--quantization experts_int8` (vLLM 0.5.5+, quantization/experts_int8.py) was dropped with a note that
    # the checkpoint's own config was read, so AI21-Jamba-1.5-Mini on one H100 was sized at bf16 (96.12 GiB) and
    # denied. vLLM stores its experts as int8: 54.16 GiB. A load-time method fitgate does not size is Unknown.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "q.yaml"
    for quantization, verdicts in (("experts_int8", {"Fits", "Tight"}), ("torchao", {"Unknown"})):
        container["args"] = ["--model", "ai21labs/AI21-Jamba-1.5-Mini", "--max-model-len", "8192", "-q", quantization]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in verdicts, r


def test_a_v0_attention_backend_runs_v0_on_releases_that_fall_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt20 G1: Qwen's 1M-context cards set VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN; vLLM 0.8-0.10 runs V0 for
    # any backend outside V1's list (engine/arg_utils.py 0.9.0 L1346-1362) unless VLLM_USE_V1 is set. fitgate sized V1's
    # larger forward term and denied Qwen2.5-14B-Instruct-1M on 8 x A100-40GB at 1010000 tokens.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "vllm/vllm-openai:v0.9.0"
    container["args"] = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    path = tmp_path / "backend.yaml"
    messages = {}
    for backend in ("DUAL_CHUNK_FLASH_ATTN", "FLASH_ATTN"):
        container["env"] = [{"name": "VLLM_ATTENTION_BACKEND", "value": backend}]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in {"Fits", "Tight"}, r
        messages[backend] = r["message"]
    assert "falls back to V0" in messages["DUAL_CHUNK_FLASH_ATTN"]
    assert "falls back to V0" not in messages["FLASH_ATTN"]
    # VLLM_USE_V1=1 keeps V1 (vLLM then raises rather than fall back): the env is not read as V0
    container["env"].append({"name": "VLLM_USE_V1", "value": "1"})
    container["env"][0]["value"] = "DUAL_CHUNK_FLASH_ATTN"
    path.write_text(yaml.safe_dump(doc))
    _, [r] = check(capsys, str(path))
    assert "falls back to V0" not in r["message"]
    assert not falls_back_to_v0("0.11.0", "DUAL_CHUNK_FLASH_ATTN") and not falls_back_to_v0("0.7.3", "XFORMERS")
    # hunt164 F1: 0.9.2 / 0.10.0 list CUTLASS_MLA_VLLM_V1 among V1's backends (arg_utils.py 0.9.2 L1454), the recipes'
    # DeepSeek-R1 FP4 on B200 sets it: V1, not a V0 fallback
    assert not falls_back_to_v0("0.9.2", "CUTLASS_MLA_VLLM_V1") and not falls_back_to_v0("0.10.2", "CUTLASS_MLA")


def test_mm_processor_kwargs_max_pixels_is_read_and_a_value_it_cannot_read_is_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt20 G4: --mm-processor-kwargs max_pixels sets the image the Qwen-VL encoder is profiled at (models/qwen2_vl.py
    # 0.34.0 L955-977); fitgate profiled the checkpoint's largest (16384 tokens) whatever the flag said.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "vl.yaml"
    activation = {}
    for kwargs in (None, '{"max_pixels": 1003520}', '{"max_pixels": "lots"}'):
        extra = ["--mm-processor-kwargs", kwargs] if kwargs else []
        container["args"] = ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "16384", *extra]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in {"Fits", "Tight"}, r
        activation[kwargs] = float(r["message"].split("activation ")[1].split(" GiB")[0])
    assert activation['{"max_pixels": 1003520}'] < activation[None] == activation['{"max_pixels": "lots"}']


def test_language_model_only_drops_the_vision_tower_in_a_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt22 G1: the recipes' Qwen3.5 commands pass --language-model-only; vLLM sets every modality's limit to 0 and
    # (0.15.1+) builds no vision tower. The webhook ignored the flag and counted the tower's weights.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "lmo.yaml"
    weights = {}
    for extra in ([], ["--language-model-only"]):
        container["args"] = ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "16384", *extra]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in {"Fits", "Tight"}, r
        weights[bool(extra)] = float(r["message"].split("weights ")[1].split(" GiB")[0])
    # the tower: 32 x (4 x 1280^2 + 3 x 1280 x 3420) + the merger ~= 0.68e9 weights, 1.26 GiB in bf16
    assert 1.1 < weights[False] - weights[True] < 1.4


def _inference_service(name: str, namespace: str, model: dict[str, Any], product: str | None = None) -> dict[str, Any]:
    """A KServe InferenceService serving Qwen3-8B from the Hub on one GPU (``model``: the predictor's other fields)."""
    predictor: dict[str, Any] = {
        "model": {"storageUri": "hf://Qwen/Qwen3-8B", "resources": {"limits": {"nvidia.com/gpu": 1}}, **model}
    }
    if product:
        predictor["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"predictor": predictor},
    }


def test_a_kserve_vllm_model_format_names_the_vllm_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt24 M1 (kserve#4769): modelFormat vllm was said to run on "the KServe huggingface runtime"
    isvc = _inference_service(
        "qwen-llm", "kserve-test", {"modelFormat": {"name": "vllm"}, "args": ["--max-model-len=8192"]}
    )
    path = tmp_path / "isvc.yaml"
    for fmt, runtime in (("vllm", "KServe vLLM runtime"), ("huggingface", "KServe huggingface runtime")):
        isvc["spec"]["predictor"]["model"]["modelFormat"]["name"] = fmt
        path.write_text(yaml.safe_dump(isvc))
        code, [r] = check(capsys, str(path), "--gpu", "L4")
        assert code == 0 and f"the {runtime}'s vLLM release" in r["message"], r


def test_a_misfit_without_its_named_servingruntimes_args_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hunt136 F1: OpenShift AI's InferenceService names its vllm-cuda-runtime (modelFormat vLLM), whose args KServe puts
    before the predictor's; Red Hat's guides keep the runtime in a file of its own (or a Template), and the webhook
    reads none. Without it Qwen3-8B at its 40960 tokens is short on an L4 (one request needs 40960 x 36 layers x 8 KV
    heads x 128 x 2 x 2 B = 5.62 GiB; 3.72 GiB is left at 0.34), and the runtime's --max-model-len=8192 makes it fit: a
    misfit without the runtime is Unknown, not DoesNotFit.
    """
    isvc = _inference_service(
        "qwen", "rhoai", {"modelFormat": {"name": "vLLM"}, "runtime": "vllm-cuda-runtime"}, "NVIDIA-L4"
    )
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "vllm-cuda-runtime", "namespace": "rhoai"},
        "spec": {
            "supportedModelFormats": [{"name": "vLLM", "autoSelect": True}],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": "quay.io/modh/vllm:rhoai-2.20-cuda",
                    "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
                    "args": [
                        "--port=8080",
                        "--model=/mnt/models",
                        "--served-model-name={{.Name}}",
                        "--max-model-len=8192",
                    ],
                }
            ],
        },
    }
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump(isvc))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Unknown"), r
    assert "ServingRuntime vllm-cuda-runtime's args" in r["message"] and "without it" in r["message"], r
    path.write_text(yaml.safe_dump_all([runtime, isvc]))  # with the runtime at hand: its args are read
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Fits"), r
    # F2: OpenShift AI ships the runtime inside a Template (template.openshift.io/v1 objects): read from there too
    template = {"apiVersion": "template.openshift.io/v1", "kind": "Template", "metadata": {"name": "vllm-cuda"}}
    path.write_text(yaml.safe_dump_all([{**template, "objects": [runtime]}, isvc]))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Fits"), r
    # hunt136 F3: OpenShift AI annotates a vLLM runtime with its vLLM release, which the Red Hat image tag does not name
    assert "release unknown" in r["message"] or any("release unknown" in n for n in r["notes"]), r
    runtime["metadata"]["annotations"] = {"opendatahub.io/runtime-version": "v0.10.1.1"}
    path.write_text(yaml.safe_dump_all([runtime, isvc]))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (0, "Fits") and not any("release unknown" in n for n in r["notes"]), r
    assert "release unknown" not in r["message"], r
    # KServe's own huggingface runtime sets nothing that moves memory: its misfit stays DoesNotFit
    isvc["spec"]["predictor"]["model"]["runtime"] = "kserve-huggingfaceserver"
    path.write_text(yaml.safe_dump(isvc))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (1, "DoesNotFit"), r


def test_an_image_built_on_vllm_with_vllm_flags_as_args_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt23 G3: aws-samples/sample-llm-inference-on-eks runs Kimi-K3 from `vllm-efa-kimi-k3`, built on vllm/vllm-openai
    # with its `vllm serve` entrypoint; the pods carry the model and vLLM's flags as args and were Skipped ("runs no vLLM
    # server"). An image named for vLLM whose args hold a flag only vLLM takes is read as vLLM's entrypoint.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    container["args"] = ["Qwen/Qwen3-8B", "--max-model-len", "8192"]
    path = tmp_path / "custom.yaml"
    for image, verdicts in (
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa-custom:efa1.49", {"Fits", "Tight"}),
        ("ghcr.io/example/llm-server:1.0", {"Skipped"}),  # not named for vLLM: not guessed
    ):
        container["image"] = image
        path.write_text(yaml.safe_dump(doc))
        main(["check", str(path), "--output", "json"])
        [r] = json.loads(capsys.readouterr().out)
        assert r["verdict"] in verdicts, r
    container["image"] = "example/vllm-router:1.0"  # named for vLLM, but its args are no vLLM server's
    container["args"] = ["--service-discovery", "k8s", "--port", "8000"]
    path.write_text(yaml.safe_dump(doc))
    main(["check", str(path), "--output", "json"])
    assert json.loads(capsys.readouterr().out)[0]["verdict"] == "Skipped"


def test_a_kserve_model_on_a_storage_connection_is_unknown_until_annotated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt23 M3: an OpenShift AI InferenceService (storage: {key, path}, no storageUri) whose ServingRuntime passes
    # --model /mnt/models was "'/mnt/models' is not valid; expected a directory with config.json"
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "llm"},
        "spec": {
            "supportedModelFormats": [{"name": "vllm"}],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": "vllm/vllm-openai:v0.11.0",
                    "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
                    "args": ["--model", "/mnt/models", "--max-model-len", "8192"],
                }
            ],
        },
    }
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm"},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": "vllm"},
                    "runtime": "llm",
                    "storage": {"key": "aws-connection-models", "path": "/qwen3-8b/"},
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            }
        },
    }
    path = tmp_path / "odh.yaml"
    path.write_text(yaml.safe_dump_all([runtime, isvc]))
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert r["verdict"] == "Unknown" and "storage aws-connection-models:/qwen3-8b/ mounted by KServe" in r["message"], r
    isvc["metadata"]["annotations"] = {"fitgate.io/model": "Qwen/Qwen3-8B"}
    path.write_text(yaml.safe_dump_all([runtime, isvc]))
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and r["verdict"] in {"Fits", "Tight"}, r


def test_an_isvc_naming_a_vllm_runtime_not_in_the_set_is_unknown_in_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt23 M2: `runtime: vllm` with the ServingRuntime elsewhere was Skipped as "runs no vLLM server"
    from fitgate.workloads.reader import read_workload  # noqa: PLC0415

    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "demo-llm"},
        "spec": {"predictor": {"model": {"runtime": "vllm", "storageUri": "s3://models/llm-demo/"}}},
    }
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump(isvc))
    main(["check", str(path), "--gpu", "L4", "--output", "json"])
    [r] = json.loads(capsys.readouterr().out)
    assert r["verdict"] == "Unknown" and "no such ServingRuntime at hand" in r["message"], r
    assert read_workload(isvc) is None  # the webhook reads no ServingRuntime: it keeps skipping the object


def test_online_mxfp4_on_an_unquantized_checkpoint_is_sized_from_0_30(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt26 F3: `--quantization mxfp4` on a bf16 checkpoint was dropped with the note "read from the checkpoint's own
    # config", so Qwen3-30B-A3B (61 GB in bf16) on one 32 GB RTX 5090 was sized in bf16 and denied. From vLLM 0.30
    # mxfp4 is a deferred online shorthand (config/quantization.py 0.30.0 L230): ~0.53 bytes a linear weight, ~16 GB.
    # Before 0.30 it is the checkpoint method, which fitgate does not size there: Unknown.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    container["args"] = ["--model", "Qwen/Qwen3-30B-A3B", "--max-model-len", "8192", "--quantization", "mxfp4"]
    path = tmp_path / "mxfp4.yaml"
    for image, verdicts in (("vllm/vllm-openai:v0.31.0", {"Fits", "Tight"}), ("vllm/vllm-openai:v0.29.0", {"Unknown"})):
        container["image"] = image
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in verdicts, r
        assert "checkpoint's own config" not in json.dumps(r)


def test_gguf_weights_are_unknown_even_when_annotated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt28 F2: a Q4_K_M GGUF of Qwen3-8B (vllm-gguf-plugin#101: a .gguf path with --hf-config-path) was Unknown,
    # and the advice to annotate fitgate.io/model: Qwen/Qwen3-8B then sized the bf16 model (15.27 GiB, not ~4.7) and
    # denied it on a 16 GB RTX 4060 Ti. A GGUF's per-tensor types are in the file fitgate does not read: Unknown.
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4060-Ti"})
    doc["metadata"]["annotations"] = {"fitgate.io/model": "Qwen/Qwen3-8B"}
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "gguf.yaml"
    for args in (
        ["--model", "/models/Qwen3-8B-Q4_K_M.gguf", "--hf-config-path", "/models/Qwen3-8B", "--max-model-len", "16384"],
        ["--model", "unsloth/Qwen3-8B-GGUF:Q4_K_M", "--max-model-len", "16384"],
        ["--model", "Qwen/Qwen3-8B", "--quantization", "gguf", "--max-model-len", "16384"],
    ):
        container["args"] = args
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert (code, r["verdict"]) == (0, "Unknown") and "gguf" in r["message"].lower(), r


def test_a_tab_after_a_value_reads_as_kubectl_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt27 F4: GKE's ai-ml/vllm-tpu/vllm-llama3-70b.yaml (`type: LoadBalancer<TAB>`) and RedHatAI's OpenShift AI
    # InferenceService (`cpu: '2'<TAB># ...`) were Invalid, exit 2: PyYAML's pure scanner refuses the tab that kubectl
    # (sigs.k8s.io/yaml) and libyaml take; fitgate reads with libyaml's safe loader
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-L4"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    text = yaml.safe_dump(doc).replace("name: qwen3-14b\n", "name: qwen3-14b\t# a comment after a tab\n")
    assert "\t" in text
    path = tmp_path / "tab.yaml"
    path.write_text(text)
    _, [r] = check(capsys, str(path))
    assert r["verdict"] in ("Fits", "Tight", "DoesNotFit") and r["name"] == "lab/qwen3-14b", r


def test_no_chunked_prefill_in_a_workload_makes_the_step_budget_max_model_len() -> None:
    # hunt31 F4: `--no-enable-chunked-prefill` was ignored; vLLM then runs a prompt in one step and makes the budget
    # max(max_model_len, default) (engine/arg_utils.py 0.34.0 L3227-3236)
    from fitgate.workloads import read_workload  # noqa: PLC0415

    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "32768", "--no-enable-chunked-prefill"]
    reading = read_workload(doc)
    assert reading is not None and reading.serving.get("enableChunkedPrefill") is False


def test_a_rocm_pod_without_a_gpu_resource_is_told_amds_resource(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt30 F3: a vLLM ROCm pod that gets its GPU through a hostPath /dev/kfd was told to "set nvidia.com/gpu: 1"
    doc = _lab_deployment({"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container.update(image="rocm/vllm:latest", command=["vllm", "serve"], args=["Qwen/Qwen3-8B"], resources={})
    path = tmp_path / "rocm.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, [r] = check(capsys, str(path))
    assert r["verdict"] == "Unknown" and "amd.com/gpu" in r["message"] and "nvidia.com" not in r["message"], r


@pytest.mark.parametrize(
    ("selector", "affinity", "gpu"),
    [
        # hunt116 F3: the ROCm labeller's legacy prefix, the VRAM label alone, and an affinity over the MI300X's two
        # product names named no GPU (Unknown); each names the card, or a 192 GB AMD GPU, as the inventory reads them
        ({"beta.amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}, None, "AMD_Instinct_MI300X_OAM"),
        ({"amd.com/gpu.vram": "192G"}, None, "AMD-GPU-unnamed"),
        ({"beta.amd.com/gpu.family": "AI", "beta.amd.com/gpu.vram": "192G"}, None, "AMD-GPU-unnamed"),
        ({}, ["AMD_Instinct_MI300X_OAM", "AMD_Instinct_MI300X_VF"], "AMD_Instinct_MI300X_OAM"),
        ({}, ["AMD_Instinct_MI300X_OAM", "AMD_Instinct_MI325_OAM"], None),  # two products: a choice, Unknown
        # hunt179 F1/F2: Azure's MI300X HF name, and a device-id selector alone (libdrm amdgpu.ids: 74A1 MI300X,
        # 75B3 MI355X VF); 744C is the RX 7900 XTX, XT or GRE by revision, which the label does not carry: Unknown
        ({"amd.com/gpu.product-name": "AMD_Instinct_MI300X_HF"}, None, "AMD_Instinct_MI300X_HF"),
        ({"amd.com/gpu.device-id": "74a1"}, None, "AMD_Instinct_MI300X"),
        ({"beta.amd.com/gpu.device-id": "0x75B3"}, None, "AMD_Instinct_MI355X_VF"),
        ({"amd.com/gpu.device-id": "744c"}, None, None),
    ],
)
def test_amd_labels_name_the_gpu_offline(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    selector: dict[str, str],
    affinity: list[str] | None,
    gpu: str | None,
) -> None:
    doc = _lab_deployment(selector)
    spec = doc["spec"]["template"]["spec"]
    if affinity:
        expr = {"key": "amd.com/gpu.product-name", "operator": "In", "values": affinity}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]
        }}}  # fmt: skip
    container = spec["containers"][0]
    container.update(
        image="rocm/vllm:latest", command=["vllm", "serve"], args=["Qwen/Qwen3-8B", "--max-model-len", "8192"]
    )
    container["resources"] = {"limits": {"amd.com/gpu": 1}}
    path = tmp_path / "rocm.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, [r] = check(capsys, str(path))
    assert r["gpu"] == gpu, r
    assert r["verdict"] == ("Fits" if gpu else "Unknown"), r
    if gpu is None:
        assert "amd.com/gpu.product-name" in r["message"] and "nvidia.com/gpu.product" not in r["message"], r


def _claim_template(name: str, device_class: str) -> dict[str, Any]:
    """A ResourceClaimTemplate of one request of ``device_class``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": device_class}}]}}},
    }


def _claim_deployment(pod: dict[str, Any]) -> dict[str, Any]:
    """A Deployment ``d`` of ``pod``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod},
        },
    }


def test_a_claim_for_another_accelerator_is_unknown_not_sized_on_the_gpu_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt60 F1: llm-d's Rebellions NPU guide serves gpt-oss-120b through a claim of DeviceClass npu.rebellions.ai;
    # with --gpu L4 it was sized on the L4 (DoesNotFit). A template of the same files that asks for no NVIDIA or AMD
    # GPU class makes it Unknown; an NVIDIA one is sized on --gpu as before.
    def manifest(device_class: str) -> str:
        pod = {
            "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": "accel"}],
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.19.0",
                    "args": ["Qwen/Qwen3-8B", "--max-model-len", "8192"],
                    "resources": {"claims": [{"name": "accel"}]},
                }
            ],
        }
        return yaml.safe_dump_all([_claim_template("accel", device_class), _claim_deployment(pod)])

    path = tmp_path / "npu.yaml"
    path.write_text(manifest("npu.rebellions.ai"))
    assert main(["check", str(path), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert "ResourceClaimTemplate: read into the workloads" in out
    assert "Unknown: its devices come from ResourceClaimTemplate accel (DeviceClass npu.rebellions.ai)" in out
    path.write_text(manifest("gpu.nvidia.com"))
    assert main(["check", str(path), "--gpu", "L4"]) == 0
    assert "Fits" in capsys.readouterr().out


def test_a_compute_domain_channel_listed_before_the_gpu_claim_is_not_the_gpu_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt80 G2: a GB200 pod with its ComputeDomain's IMEX channel claim first and its DRA GPU claim second was Unknown
    # ("not an NVIDIA or AMD GPU"): the GPUs come from the claim whose class is a GPU's
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.34.0",
        "args": ["Qwen/Qwen3-8B", "--max-model-len", "8192"],
        "resources": {"claims": [{"name": "channel"}, {"name": "gpus"}]},
    }
    pod = {
        "resourceClaims": [
            {"name": "channel", "resourceClaimTemplateName": "imex-channel"},
            {"name": "gpus", "resourceClaimTemplateName": "gb200"},
        ],
        "containers": [container],
    }
    docs = [
        _claim_template("imex-channel", "compute-domain-default-channel.nvidia.com"),
        _claim_template("gb200", "gpu.nvidia.com"),
    ]
    path = tmp_path / "cd.yaml"
    path.write_text(yaml.safe_dump_all([*docs, _claim_deployment(pod)]))
    code, [r] = check(capsys, str(path), "--gpu", "GB200")
    assert code == 0 and r["verdict"] in ("Fits", "Tight"), r
    # with no GPU claim at all it stays Unknown, naming the channel's class
    pod["resourceClaims"] = pod["resourceClaims"][:1]
    container["resources"] = {"claims": [{"name": "channel"}]}
    path.write_text(yaml.safe_dump_all([*docs, _claim_deployment(pod)]))
    _, [r] = check(capsys, str(path), "--gpu", "GB200")
    assert r["verdict"] == "Unknown" and "compute-domain-default-channel.nvidia.com" in r["message"], r


def test_extra_args_from_a_secret_make_a_misfit_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt89 F4: `exec vllm serve M $EXTRA_ARGS` with EXTRA_ARGS from a Secret may hold `--max-model-len 8192`; without
    # it Llama-3.1-8B's 131072-token default needs 16 GiB of KV on an L4 (32 layers x 8 kv x 128 x 2 x 2 B = 128 KiB a
    # token): DoesNotFit was shown on flags fitgate could not read. Now Unknown, naming the word; a fit stays a fit
    def doc(model_len: str) -> dict[str, Any]:
        script = f"exec vllm serve meta-llama/Llama-3.1-8B-Instruct {model_len} $EXTRA_ARGS"
        secret = {"name": "EXTRA_ARGS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
        container = {"name": "vllm", "image": "vllm/vllm-openai:v0.19.0", "command": ["sh", "-c", script],
                     "env": [secret], "resources": {"limits": {"nvidia.com/gpu": "1"}}}  # fmt: skip
        return _claim_deployment({"containers": [container]})

    for model_len, verdict in (("", "Unknown"), ("--max-model-len 4096", "Fits")):
        path = tmp_path / "d.yaml"
        path.write_text(yaml.safe_dump(doc(model_len)))
        code, [r] = check(capsys, str(path), "--gpu", "L4")
        assert (code, r["verdict"]) == (0, verdict), r
        assert ("$EXTRA_ARGS, whose value fitgate cannot read" in r["message"]) == (verdict == "Unknown")


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_a_manifest_with_a_byte_order_mark_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str
) -> None:
    # hunt100 F1: YAML 1.2 (5.2) is UTF-8, UTF-16 or UTF-32 told by a byte order mark; kubectl applies such files and
    # Windows PowerShell's `>` writes UTF-16. They were Invalid ("'utf-8' codec can't decode byte 0xff"), exit 2
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    path = tmp_path / "m.yaml"
    text = yaml.safe_dump(doc)
    path.write_bytes(("\ufeff" + text).encode("utf-16-be") if codec == "utf-16-be" else text.encode(codec))
    code = main(["check", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and ": Fits: Deployment lab/qwen3-14b" in out, out


def _pd_llmisvc(prefill_gmu: str, *, prefill_template: bool = True) -> dict[str, Any]:
    """KServe's P/D LLMInferenceService shape (kserve@aaac4e29 docs/samples/llmisvc/dp-ep/...-pd-gpu-p-deepep-ht-d-
    deepep-ht.yaml: ``spec.prefill`` with its own replicas, parallelism and template) with Qwen2.5-7B on one L4 each."""

    def template(gmu: str, role: str) -> dict[str, Any]:
        args = f"--gpu-memory-utilization {gmu} --max-model-len 8192 --kv-transfer-config "
        args += f"""'{{"kv_connector":"NixlConnector","kv_role":"{role}"}}'"""
        env = [{"name": "VLLM_ADDITIONAL_ARGS", "value": args}]
        return {"containers": [{"name": "main", "env": env, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}

    prefill: dict[str, Any] = {"replicas": 2, "parallelism": {"tensor": 1}}
    if prefill_template:
        prefill["template"] = template(prefill_gmu, "kv_producer")
    return {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": "qwen-pd"},
        "spec": {
            "model": {"uri": "hf://Qwen/Qwen2.5-7B-Instruct", "name": "Qwen/Qwen2.5-7B-Instruct"},
            "replicas": 1,
            "template": template("0.9", "kv_consumer"),
            "prefill": prefill,
        },
    }


def test_an_llm_inference_services_prefill_pool_is_sized_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt104 F1: spec.prefill was never read, so a prefill pool that cannot start was admitted with the decode
    # pool's numbers. Qwen2.5-7B's bf16 weights are 7.62e9 x 2 B = 14.2 GiB; an L4's budget at 0.3 is 0.3 x 22.0 GiB
    # = 6.6 GiB < 14.2 GiB: the prefill pool is DoesNotFit, the decode one (0.9 x 22.0 = 19.8 GiB) Fits.
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(_pd_llmisvc("0.3")))
    code, results = check(capsys, str(path), "--gpu", "L4")
    got = {r["name"].split("/", 1)[1]: r["verdict"] for r in results}  # namespace/name
    assert got == {"qwen-pd": got["qwen-pd"], "qwen-pd/prefill": "DoesNotFit"} and got["qwen-pd"] in ("Fits", "Tight")
    assert code == 1, results
    # at the decode pool's 0.9 both fit
    path.write_text(yaml.safe_dump(_pd_llmisvc("0.9")))
    code, results = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and {r["verdict"] for r in results} <= {"Fits", "Tight"} and len(results) == 2, results
    # a prefill without a template of its own reads the decode template's containers, and says so
    path.write_text(yaml.safe_dump(_pd_llmisvc("0.3", prefill_template=False)))
    code, results = check(capsys, str(path), "--gpu", "L4")
    [prefill] = [r for r in results if r["name"] == "default/qwen-pd/prefill"]
    assert prefill["verdict"] in ("Fits", "Tight") and "no template" in json.dumps(prefill), prefill
    # the webhook answers the object with its decode workload and names the prefill one, as for Dynamo's workers
    from fitgate.workloads import read_workload  # noqa: PLC0415

    reading = read_workload(_pd_llmisvc("0.3"))
    assert reading is not None and reading.name == "qwen-pd"
    assert any("spec.prefill" in n for n in reading.notes), reading.notes


def test_an_aibrix_stormservices_roles_are_each_sized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt104 F3: AIBrix's StormService (its prefill / decode orchestration) was Skipped, kind unknown. Each role of
    # spec.template.spec.roles is a pod template; with the model named by the annotation (the sample serves a path)
    # both Qwen3-8B roles fit one H100. A role of podGroupSize 2 pods of one GPU each is a replica of 2 GPUs: at TP 2
    # each GPU holds half the weights (Qwen3-8B: 8.19e9 x 2 B = 15.3 GiB, 7.6 GiB a GPU).
    doc = yaml.safe_load((FIXTURES / "aibrix-stormservice-1p1d.yaml").read_text())
    doc["metadata"]["annotations"] = {"fitgate.io/model": "Qwen/Qwen3-8B"}
    path = tmp_path / "storm.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, results = check(capsys, str(path), "--gpu", "H100")
    assert code == 0 and [r["name"] for r in results] == ["default/vllm-1p1d/decode", "default/vllm-1p1d/prefill"]
    assert {r["verdict"] for r in results} == {"Fits"} and all(r["kind"] == "StormService" for r in results), results
    decode = next(r for r in doc["spec"]["template"]["spec"]["roles"] if r["name"] == "decode")
    decode["podGroupSize"] = 2
    container = decode["template"]["spec"]["containers"][0]
    container["args"] = [container["args"][0].replace("vllm serve", "vllm serve --tensor-parallel-size 2")]
    path.write_text(yaml.safe_dump(doc))
    code, results = check(capsys, str(path), "--gpu", "H100")
    assert code == 0 and "weights 7.6" in results[0]["message"], results[0]["message"]
    decode["podGroupSize"] = 0  # the CRD's minimum is 1: named as the StormService's field
    path.write_text(yaml.safe_dump(doc))
    code, results = check(capsys, str(path), "--gpu", "H100")
    assert results[0]["verdict"] == "Invalid" and "role decode: podGroupSize" in results[0]["message"], results[0]


def test_an_aibrix_ray_cluster_fleet_is_read_as_its_ray_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt104 F3: AIBrix's RayClusterFleet (vllm-project/aibrix@e3e10f9e samples/distributed/fleet-two-node.yaml:
    # a head and one worker of one GPU each, the head running vllm serve --tensor-parallel-size 2 over Ray) was
    # Skipped. Its spec.template.spec is a RayClusterSpec; Qwen2.5-7B at TP 2 holds 7.62e9 x 2 B / 2 = 7.1 GiB a GPU.
    def pod(command: str) -> dict[str, Any]:
        container = {"name": "ray", "image": "vllm/vllm-openai:v0.7.1", "command": ["/bin/bash", "-c"]}
        return {
            "spec": {"containers": [{**container, "args": [command], "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
        }

    serve = "ray start --head && vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 8192 "
    serve += "--distributed-executor-backend ray"
    fleet = {
        "apiVersion": "orchestration.aibrix.ai/v1alpha1",
        "kind": "RayClusterFleet",
        "metadata": {"name": "qwen"},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "headGroupSpec": {"template": pod(serve)},
                    "workerGroupSpecs": [{"replicas": 1, "groupName": "w", "template": pod("ray start --block")}],
                }
            },
        },
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and r["kind"] == "RayClusterFleet" and r["verdict"] in ("Fits", "Tight"), r
    assert "weights 7.1" in r["message"], r["message"]


def test_a_kserve_multi_node_predictor_is_sized_at_its_worker_specs_parallel_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt109 F1: workerSpec.tensorParallelSize / pipelineParallelSize (the controller's TENSOR_PARALLEL_SIZE /
    # PIPELINE_PARALLEL_SIZE) were not read, so KServe's documented TP 8 x PP 2 layout of Llama-3.1-405B was sized on
    # one GPU: 755.99 GiB of weights, DoesNotFit. Over 16 GPUs each holds ~1/16 of them (the embedding and head on
    # the first and last stage): ~47 GiB on an 80 GB H100.
    code, [r] = check(capsys, str(FIXTURES / "kserve-multinode-405b.yaml"), "--gpu", "H100")
    assert code == 0 and r["verdict"] in ("Fits", "Tight"), r["message"]
    assert "weights 47." in r["message"] and "TP 8 x PP 2 from workerSpec, 16 GPUs over 2 pod(s)" in r["message"]


def _hf_runtime_isvc(args: list[str], uri: str = "hf://meta-llama/Llama-3.1-8B-Instruct") -> dict[str, Any]:
    """KServe's huggingface runtime InferenceService (kserve/website docs/.../huggingface/text_generation)."""
    model = {
        "modelFormat": {"name": "huggingface"},
        "args": ["--model_name=llama3", *args],
        "storageUri": uri,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llama3"},
        "spec": {"predictor": {"model": model}},
    }


def test_the_kserve_huggingface_servers_own_flags_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # hunt109 F3: the server's --max_length is its --max_model_len (dest="max_model_len", kserve/kserve@00397f1e
    # huggingfaceserver/__main__.py); it was passed over, and Llama-3.1-8B on an L4 was sized at its 131072 tokens:
    # 131072 x 128 KiB = 16 GiB of KV for one request, ~4 GiB left: DoesNotFit. At 8192 (1 GiB) it fits.
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump(_hf_runtime_isvc(["--max_length=8192"])))
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and r["verdict"] in ("Fits", "Tight"), r["message"]
    # F4: hf://org/name:revision (kserve/website docs/model-serving/storageuri/hf/hf.md L11) is org/name@revision
    path.write_text(
        yaml.safe_dump(_hf_runtime_isvc(["--max_model_len=8192"], "hf://meta-llama/Llama-3.1-8B-Instruct:0e9e39f"))
    )
    code, [r] = check(capsys, str(path), "--gpu", "L4")
    assert code == 0 and "meta-llama/Llama-3.1-8B-Instruct@0e9e39f" in r["message"], r["message"]


def test_a_ray_serve_llm_app_whose_configs_are_files_in_the_image_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt109 F5: Ray's documented "Standalone Config" (ray-project/ray doc/source/serve/llm/quick-start.md@0afabf1:
    # llm_configs: [models/qwen-0.5b.yaml, ...]) runs vLLM, but from files inside the image: it was Skipped as
    # "runs no vLLM server"; it is Unknown, saying why
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-ray-serve-llm.yaml").read_text()) if d)
    serve = "applications:\n- name: llms\n  import_path: ray.serve.llm:build_openai_app\n  route_prefix: /\n"
    serve += "  args:\n    llm_configs:\n    - models/qwen-0.5b.yaml\n    - models/qwen-1.5b.yaml\n"
    ray["spec"]["serveConfigV2"] = serve
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(ray))
    code, [r] = check(capsys, str(path), "--gpu", "A10G")
    assert code == 0 and r["verdict"] == "Unknown" and "is a file in the image" in r["message"], r


def test_an_openshift_ai_vllm_runtime_without_a_command_is_merged(tmp_path: Path) -> None:
    # hunt109 N1: OpenShift AI's vLLM ServingRuntime (cfchase/rhoai-api-docs@bd899ed3) runs its image's entrypoint
    # with only --port, --model and --served-model-name: not recognised as vLLM, it was not merged, and its other
    # args (here --quantization fp8) were dropped from the InferenceService's reading
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "vllm-runtime"},
        "spec": {
            "supportedModelFormats": [{"name": "vLLM", "autoSelect": True}],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": "quay.io/modh/vllm:rhoai-2.19-cuda",
                    "args": [
                        "--port=8080",
                        "--model=/mnt/models",
                        "--served-model-name={{.Name}}",
                        "--quantization=fp8",
                    ],
                }
            ],
        },
    }
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llama", "annotations": {"fitgate.io/model": "meta-llama/Llama-3.1-8B-Instruct"}},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": "vLLM"},
                    "runtime": "vllm-runtime",
                    "storageUri": "pvc://models/llama",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            }
        },
    }
    path = tmp_path / "rhoai.yaml"
    path.write_text(yaml.safe_dump_all([runtime, isvc]))
    [result] = [r for r in check_files([str(path)], "H100") if r.kind == "InferenceService"]
    assert "ServingRuntime vllm-runtime merged in" in " ".join(result.notes) + result.message, result
    # fp8 weights of Llama-3.1-8B: ~8.5 GiB, not the 14.99 GiB of bf16
    assert "weights 8." in result.message, result.message


@pytest.mark.parametrize(
    ("extra", "verdicts"),
    [
        # hunt107 F2: argparse gives a one-letter option its value attached: -qfp8 is --quantization fp8 (vLLM 0.34.0
        # parses it so); the word was dropped and Llama-3.1-70B sized in bf16, 131.45 GiB a GPU. In fp8 it is
        # 67.70 GiB, which at vLLM 0.27's 0.92 x 79.19 GiB leaves 2.71 GiB of KV on the V2 runner for a 16384-token
        # request's 16384 x 320 KiB = 5.00 GiB: short by more than the fitted terms' band
        (["-qfp8"], {"DoesNotFit"}),
        # hunt107 F3: 0.34's prefetch weight offload (config/offload.py L54-60: the last layer of every two on the
        # host) is not modelled; a misfit without it is Unknown, saying so
        (["--offload-group-size", "2", "--offload-num-in-group", "1", "--offload-backend", "prefetch"], {"Unknown"}),
        # hunt127 F2: prefill context parallelism's ranks hold 1/PCP of each request's KV (and widen a MoE's group):
        # not modelled, so a misfit without it is Unknown, by its short name too
        (["-pcp", "2"], {"Unknown"}),
        # hunt206 F2: elastic EP turns 0.34's extensible KV cache off (config/vllm.py 0.34.0 L3213-3216), which fitgate
        # keeps on: not modelled, a misfit with it is Unknown
        (["--enable-elastic-ep"], {"Unknown"}),
        ([], {"DoesNotFit"}),  # neither: bf16, 131.45 GiB on one 79.19 GiB card
    ],
)
def test_flags_that_shrink_a_misfit_are_read_or_make_it_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], verdicts: set[str]
) -> None:
    r = _check_on_one_h100(
        tmp_path, capsys, ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "16384", *extra]
    )
    assert r["verdict"] in verdicts, r["message"]
    if extra and verdicts == {"Unknown"}:
        assert "may make it fit, which fitgate does not model" in r["message"], r["message"]
    assert ("weights 67.70 GiB" in r["message"]) == (extra == ["-qfp8"]), r["message"]


@pytest.mark.parametrize(("pcp", "verdict"), [("2", "Unknown"), ("1", "Invalid")])
def test_eplb_on_one_gpu_is_unknown_when_prefill_context_parallelism_widens_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pcp: str, verdict: str
) -> None:
    # session 30's note: vLLM's EP group (and EPLB's TP x PCP x DP > 1 rule, config/parallel.py 0.34.0 L609-621)
    # spans the PCP ranks, which fitgate takes without modelling: Invalid by its TP x DP > 1 rule was a denial of a
    # setting vLLM takes. -pcp 1 adds no rank: still Invalid.
    args = ["--model", "Qwen/Qwen3-30B-A3B", "-ep", "--enable-eplb", "-pcp", pcp]
    r = _check_on_one_h100(tmp_path, capsys, args)
    assert r["verdict"] == verdict and "enable_eplb" in r["message"], r["message"]
    assert ("--prefill-context-parallel-size 2, which fitgate takes without modelling" in r["message"]) == (pcp == "2")


@pytest.mark.parametrize(
    ("image", "extra", "verdict"),
    [
        # hunt110 F2: a flag no release fitgate has read may be a newer release's that changes memory: on vLLM 0.36
        # a misfit with it is Unknown, saying so (bf16 Llama-3.1-70B, 131.45 GiB on one 79.19 GiB card)
        ("vllm/vllm-openai:v0.36.0", ["--kv-cache-spill-policy", "lru"], "Unknown"),
        # on a release fitgate models it is a typo (vLLM's parser refuses it) or a wrapper's: noted, the misfit stands
        ("vllm/vllm-openai:v0.27.1", ["--kv-cache-spill-policy", "lru"], "DoesNotFit"),
        ("vllm/vllm-openai:v0.36.0", [], "DoesNotFit"),  # no unknown flag: every release's accounting denies it
        # hunt110 F1: vLLM-Omni's pipelines (diffusion, speech) are not sized: Unknown, whatever the weights
        ("vllm/vllm-openai:v0.27.1", ["--omni"], "Unknown"),
    ],
)
def test_a_flag_no_release_has_is_noted_and_unknown_only_on_a_newer_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str, extra: list[str], verdict: str
) -> None:
    args = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "16384", *extra]
    r = _check_on_one_h100(tmp_path, capsys, args, image=image)
    assert r["verdict"] == verdict, r["message"]
    said = "--kv-cache-spill-policy: not a flag of any vLLM release fitgate has read" in r["message"]
    assert said == ("--kv-cache-spill-policy" in extra), r["message"]
    if verdict == "Unknown":
        assert "--omni: vLLM-Omni" in r["message"] or "may make it fit" in r["message"], r["message"]


@pytest.mark.parametrize(
    ("image", "verdict"),
    [
        # hunt116 F1: Qwen's YaRN command (qwen.readthedocs.io deployment/vllm) on ROCm's dated nightly: vLLM 0.33's
        # rule (vllm#56446: YaRN no longer raises the limit, 40960 positions) refuses 131072, 0.32's takes it; the
        # build's release is unknown, so the refusal is not one fitgate can show
        ("rocm/vllm-dev:nightly_main_20260211", "Unknown"),
        ("vllm/vllm-openai:v0.34.0", "Invalid"),  # the release named: vLLM 0.34 refuses it
        ("vllm/vllm-openai:v0.32.0", "Fits"),
    ],
)
def test_a_setting_only_the_newest_release_refuses_is_unknown_on_an_unknown_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str, verdict: str
) -> None:
    yarn = '{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'
    args = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "131072", "--hf-overrides", yarn]
    # ROCm's dev image has no vllm serve entrypoint
    r = _check_on_one_h100(tmp_path, capsys, args, image=image, command=["vllm", "serve"])
    assert r["verdict"] == verdict, r["message"]
    if verdict == "Unknown":
        assert "the vLLM release is unknown, and vLLM 0.32.0 takes the setting" in r["message"], r["message"]


@pytest.mark.parametrize(
    ("image", "verdict"),
    [
        # hunt132 F1: Vertex Model Garden's Llama 3 notebook (vertex-ai-samples@cc0d791 model_garden_pytorch_llama3_
        # deployment.ipynb) serves its pytorch-vllm-serve build with --max-loras 100 and --max-cpu-loras 8 on an
        # A100: every stock release refuses max_cpu_loras below max_loras, the build names no release: Unknown
        (
            "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve:20240721_0916_RC00",
            "Unknown",
        ),
        ("vllm/vllm-openai:v0.5.2", "Invalid"),  # the release named: vLLM refuses it
    ],
)
def test_a_setting_every_release_refuses_is_unknown_on_a_build_naming_no_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str, verdict: str
) -> None:
    args = ["--model=meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=8192", "--enable-lora", "--max-loras=100"]
    r = _check_on_one_h100(tmp_path, capsys, [*args, "--max-cpu-loras=8"], image=image)
    assert r["verdict"] == verdict, r["message"]
    assert "max_cpu_loras: 8 is not valid" in r["message"]
    if verdict == "Unknown":
        assert "every vLLM release fitgate models refuses it, but the release is unknown" in r["message"]


def test_a_workloads_empty_or_none_values_and_suffixed_json_numbers_are_vllms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # hunt107 F4 / F5: a Helm template's unset value (None, '') is the flag unset for vLLM (engine/arg_utils.py 0.34.0
    # L173-178), and 80g in a config flag's JSON is 80e9 (L300-318); both were Invalid in a Deployment
    doc = _lab_deployment({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / "d.yaml"
    for extra in (
        ["--kv-offloading-size", "None", "--kv-transfer-config", ""],
        [
            "--kv-transfer-config",
            '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use": 80g}}',
        ],
    ):
        container["args"] = ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192", *extra]
        path.write_text(yaml.safe_dump(doc))
        code, [r] = check(capsys, str(path))
        assert code == 0 and r["verdict"] in ("Fits", "Tight"), r["message"]


def _shared_card(tmp_path: Path, strategy: str, replicas: int, gmu: float) -> str:
    """Qwen2.5-7B (bf16 weights 14.19 GiB) on a node a nodeSelector picks by GPU Feature Discovery's sharing labels."""
    doc = _lab_deployment(
        {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.sharing-strategy": strategy,
            "nvidia.com/gpu.replicas": str(replicas),
        }
    )
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
    container["args"] += ["--gpu-memory-utilization", str(gmu)]
    container["resources"]["limits"]["nvidia.com/gpu"] = 1
    path = tmp_path / f"{strategy}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_a_selector_on_mps_nodes_sizes_the_pinned_share_as_the_cluster_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """hunt128 F1: the selector's MPS labels are on every node it picks, so each pod gets card / replicas."""
    # 4 MPS clients per 79.19 GiB H100: a 19.80 GiB pinned limit; gmu 0.9 asks vLLM for 71.27 GiB of it
    code, [r] = check(capsys, _shared_card(tmp_path, "mps", 4, 0.9))
    assert (code, r["verdict"]) == (1, "DoesNotFit"), r
    assert (
        "MPS shares each card among 4 pods" in r["message"]
        and "set spec.serving.gpuMemoryUtilization: 0.25" in (r["message"])
    )
    # at gmu 0.24 (19.0 GiB, under the limit) the 14.19 GiB of weights leave a KV pool: admitted
    code, [r] = check(capsys, _shared_card(tmp_path, "mps", 4, 0.24))
    assert (code, r["verdict"]) in ((0, "Fits"), (0, "Tight")), r


def test_a_selector_on_a_mig_single_strategy_product_sizes_the_slice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """hunt128 F2: GPU Feature Discovery's ``<card>-MIG-<profile>`` product is read as the node parser reads it."""
    text = Path(_shared_card(tmp_path, "none", 1, 0.9)).read_text()
    doc = yaml.safe_load(text)
    doc["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"}
    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    # 3g.40gb is half an A100-80GB (79.15 GiB): inventory.mig_slice_bytes gives ~39.4 GiB, x 0.9 = 35.44 GiB budget
    assert (code, r["verdict"]) == (0, "Fits"), r
    assert "of a 35.44 GiB budget" in r["message"]
    # the 1g.10gb slice (an eighth: 9.54 GiB, budget 8.59) cannot hold the 14.19 GiB of bf16 weights
    doc["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    path.write_text(yaml.safe_dump(doc))
    code, [r] = check(capsys, str(path))
    assert (code, r["verdict"]) == (1, "DoesNotFit"), r


def _endpoint_config(tmp_path: Path, args: list[str], model_id: str | None = None) -> str:
    """A SageMaker HyperPod InferenceEndpointConfig as aws-samples' kimi-k3.yaml writes one (v1, worker.args)."""
    source: dict[str, Any] = {"modelSourceType": "huggingface"}
    if model_id:
        source["huggingFaceModel"] = {"modelId": model_id}
    doc = {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "llama70b", "namespace": "inference"},
        "spec": {
            "modelName": "llama70b",
            "instanceType": "ml.p5.48xlarge",
            "replicas": 1,
            "modelSourceConfig": source,
            "worker": {
                "image": "vllm/vllm-openai:v0.31.0",
                "modelInvocationPort": {"containerPort": 8000, "name": "http"},
                "modelVolumeMount": {"mountPath": "/opt/ml/model", "name": "model-weights"},
                "resources": {"limits": {"nvidia.com/gpu": 4}, "requests": {"nvidia.com/gpu": 4}},
                "args": args,
            },
        },
    }
    path = tmp_path / "iec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_a_sagemaker_hyperpod_endpoint_config_is_read_on_its_instance_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hunt133 F1: it was Skipped as a kind fitgate does not read; its worker runs vLLM on ml.p5.48xlarge (8 x H100)."""
    tp4 = ["--tensor-parallel-size", "4", "--max-model-len", "32768"]
    code, [r] = check(capsys, _endpoint_config(tmp_path, ["--model", "meta-llama/Llama-3.1-70B-Instruct", *tp4]))
    assert (code, r["kind"], r["verdict"], r["gpu"]) == (0, "InferenceEndpointConfig", "Fits", "H100-SXM"), r
    # the model at the worker's mount is the Hub model the operator put there
    code, [r] = check(
        capsys, _endpoint_config(tmp_path, ["--model", "/opt/ml/model", *tp4], "meta-llama/Llama-3.1-70B-Instruct")
    )
    assert r["verdict"] == "Fits" and "meta-llama/Llama-3.1-70B-Instruct" in r["message"], r
    # on one GPU of the machine its bf16 weights (131.45 GiB) cannot fit
    one = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768"]
    code, [r] = check(capsys, _endpoint_config(tmp_path, one))
    assert (code, r["verdict"]) == (1, "DoesNotFit"), r


@pytest.mark.parametrize(
    ("selector", "verdict", "card"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-H20"}, "Fits", "H20-141GB"),  # no memory label: either card
        ({"aliyun.accelerator/nvidia_name": "NVIDIA-H20"}, "Fits", "H20-141GB"),
        ({"machine.cluster.vke.volcengine.com/gpu-name": "NVIDIA-H20"}, "Fits", "H20-141GB"),
        # ACK's memory label says the 141 GB board (143771 MiB, as GFD's nvidia.com/gpu.memory reads it)
        ({"aliyun.accelerator/nvidia_name": "NVIDIA-H20", "aliyun.accelerator/nvidia_mem": "143771MiB"}, "Fits", "H20"),
        # and here the 96 GB one (97871 MiB): 79.55 GiB of weights leave 2.62 GiB, under one request's 11.95 GiB
        ({"nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.memory": "97871"}, "DoesNotFit", "NVIDIA-H20"),
    ],
)
def test_a_bare_h20_selector_is_either_board_unless_a_memory_label_says(
    tmp_path: Path, selector: dict[str, str], verdict: str, card: str
) -> None:
    # hunt175 F2: DeepSeek-V3.2 at TP 8 ran its defaults on "8xH20" (vllm-project/recipes), which only the 141 GB board
    # holds; nvidia-smi names both "NVIDIA H20", so a selector without a memory label was denied on the 96 GB one.
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                 "args": ["--model", "deepseek-ai/DeepSeek-V3.2", "--tensor-parallel-size", "8"],
                 "resources": {"limits": {"nvidia.com/gpu": 8}}}  # fmt: skip
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dsv32"},
           "spec": {"template": {"spec": {"nodeSelector": selector, "containers": [container]}}}}  # fmt: skip
    path = tmp_path / "h20.yaml"
    path.write_text(yaml.safe_dump(doc))
    (result,) = check_files([str(path)], None)
    assert result.verdict == verdict, result.message
    assert f": {card}:" in result.message, result.message


def test_an_unreadable_file_says_where_and_an_unrendered_template_how(tmp_path: Path) -> None:
    # hunt173 F1: GKE samples with broken indentation and unrendered Helm templates were "cannot read YAML: while
    # parsing a block mapping", with no line; PyYAML's mark gives it (1-based here)
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: 1\n  b: [\n")
    template = tmp_path / "template.yaml"
    template.write_text('kind: ConfigMap\nmetadata:\n  labels: {{- include "x" . | nindent 4 }}\n')
    first, second = check_files([str(broken), str(template)], "H100")
    assert first.verdict == "Invalid" and first.message.endswith("(line 2, column 4)"), first.message
    assert "(line 3, column 13)" in second.message and "helm template NAME CHART | fitgate check -" in second.message
    assert "helm" not in first.message


def test_a_dynamo_0_3_graph_is_skipped_saying_where_its_vllm_args_are(tmp_path: Path) -> None:
    # hunt173 F3: vllm-project/aibrix test/regression/v0.4.0/dynamo/disagg_router.yaml (ai-dynamo/vllm-runtime:0.3.2)
    # runs `dynamo serve graphs.disagg_router:VllmWorker`; its engine args live in DYN_DEPLOYMENT_CONFIG
    worker = {
        "dynamoNamespace": "d",
        "componentType": "worker",
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {
                "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.3.2",
                "command": ["/bin/sh", "-c"],
                "args": ["dynamo serve graphs.disagg_router:VllmWorker -f c.yaml"],
            }
        },
    }
    doc = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "disagg-router"},
           "spec": {"services": {"VllmWorker": worker}}}  # fmt: skip
    path = tmp_path / "dynamo.yaml"
    path.write_text(yaml.safe_dump(doc))
    (result,) = check_files([str(path)], "H100")
    assert result.verdict == "Skipped" and "DYN_DEPLOYMENT_CONFIG" in result.message, result
