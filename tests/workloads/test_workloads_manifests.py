"""Real manifests of every workload kind, each read to its verdict by ``fitgate check`` (offline, built-in catalog).

Sources: tests/fixtures/manifests/SOURCE.md (repo, path, commit per file). The GPU is ``--gpu H100`` (80 GiB).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fitgate.operator.decision.offline import check_files
from fitgate.operator.decision.workloads import decide_workload, evaluate_reading
from fitgate.workloads import read_workload
from fitgate.workloads.kinds import KINDS, admitted_kinds, find_kind
from tests.chart.test_chart import helm, render_chart

__all__ = ["helm"]

MANIFESTS = Path(__file__).parents[1] / "fixtures" / "manifests"
RUNTIME = str(MANIFESTS / "kserve-vllmserver-runtime.yaml")


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        # KAITO custom config: TP 2, max-model-len 131072 from the ConfigMap's vllm block; DeepSeek-R1-Distill-Qwen-14B
        # is not in the catalog, so offline it is Unknown (never a denial); the ConfigMap is merged, not skipped silently
        (
            "kaito-workspace-custom-config.yaml",
            [("ConfigMap", "Skipped"), ("Workspace", "Unknown")],
        ),
        # presets without tensor-parallel-size: KAITO takes it from the instance type's GPUs: Unknown, saying so
        ("kaito-workspace-deepseek-r1.yaml", [("Workspace", "Unknown")]),
        # Standard_NC24ads_A100_v4: one A100 80GB a node, so KAITO's TP 1 (sizing/data/cloud_gpus.json); 8B fits it
        ("kaito-inferenceset-llama-3.1-8b.yaml", [("Secret", "Skipped"), ("InferenceSet", "Fits")]),
        # Dynamo: one result per vLLM worker, decode first; Qwen3-0.6B (catalog, estimated) fits one H100
        (
            "dynamo-vllm-disagg.yaml",
            [("DynamoGraphDeployment", "Fits"), ("DynamoGraphDeployment", "Fits")],
        ),
        ("dynamo-vllm-agg-v1beta1.yaml", [("DynamoGraphDeployment", "Fits")]),
        # production-stack's VLLMRuntime sample: Llama-3.1-8B-Instruct, max-model-len 4096, gmu 0.8, 1 GPU
        ("production-stack-vllmruntime.yaml", [("VLLMRuntime", "Fits")]),
        # KServe: the ClusterServingRuntime merged into the InferenceService whose PVC the annotation names
        ("kserve-isvc-vllm-pvc.yaml", [("InferenceService", "Fits")]),
        # llm-d's prefill/decode DisaggregatedSet: one result per role, decode first; Qwen3-32B at TP 2 on H100s
        ("llm-d-disaggregatedset.yaml", [("DisaggregatedSet", "Fits"), ("DisaggregatedSet", "Fits")]),
        # KubeRay's Ray Serve LLM sample: engine_kwargs as vLLM flags, the 4-GPU worker group's GPUs
        ("kuberay-ray-serve-llm.yaml", [("RayService", "Fits"), ("Secret", "Skipped")]),
        # the LMCache image (an LMCache release, not vLLM 0.3.7): sized as the newest modelled release
        ("lmcache-deployment.yaml", [("Deployment", "Fits")]),
    ],
)
def test_real_manifest_verdicts(file: str, expected: list[tuple[str, str]]) -> None:
    results = [r for r in check_files([str(MANIFESTS / file), RUNTIME], gpu_name="H100") if file in r.source]
    assert [(r.kind, r.verdict) for r in results] == expected, [r.line() for r in results]
    for r in results:
        assert "None" not in r.message, r.line()  # every message names the model (or why it was skipped)


def test_a_vllm_runtime_is_read_with_every_flag_its_operator_writes() -> None:
    """hunt115 F1: production-stack's operator (vllmruntime_controller.go @a6c01db L441-564) writes --enable-lora,
    --[no-]enable-chunked-prefill, --max_loras, LMCache's --kv-transfer-config and VLLM_USE_V1 from the spec; read
    without them, the sample's 4 LoRA slots went uncounted."""
    import yaml  # noqa: PLC0415

    sample = yaml.safe_load((MANIFESTS / "production-stack-vllmruntime.yaml").read_text())
    reading = read_workload(sample)
    assert reading is not None
    assert reading.args["--enable-lora"] == "true" and reading.args["--max-loras"] == "4"
    assert reading.args["--enable-chunked-prefill"] == "false"
    assert "LMCacheConnectorV1" in reading.args["--kv-transfer-config"]
    assert reading.serving["lora"] == {"maxLoras": 4} and reading.serving["enableChunkedPrefill"] is False
    sample["spec"]["vllmConfig"]["v1"] = False  # the operator then writes VLLM_USE_V1=0 and LMCache's V0 connector
    sample["spec"]["model"]["enableLoRA"] = False
    reading = read_workload(sample)
    assert reading is not None and reading.serving.get("useV1") is False and "--enable-lora" not in reading.args
    assert '"LMCacheConnector"' in reading.args["--kv-transfer-config"]


def test_dynamo_workers_are_named_and_keep_their_role() -> None:
    results = check_files([str(MANIFESTS / "dynamo-vllm-disagg.yaml")], gpu_name="H100")
    assert [r.name for r in results] == [
        "default/vllm-disagg/VllmDecodeWorker",
        "default/vllm-disagg/VllmPrefillWorker",
    ]
    assert "Dynamo decode worker VllmDecodeWorker" in results[0].message


def test_dynamo_prefill_and_decode_component_types_are_workers(tmp_path: Path) -> None:
    # hunt16 G11: elizabetht/token-labs (api.tokenlabs.run) declares its disaggregated graph's workers as
    # `type: prefill` / `type: decode` components, whose containers run `command: [python3]` with
    # `args: [-m, dynamo.vllm, ...]`; Dynamo's operator runs them as workers, fitgate skipped the graph
    import yaml  # noqa: PLC0415

    def component(name: str, kind: str) -> dict[str, object]:
        args = ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
        main = {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", "command": ["python3"]}
        main |= {"args": args, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        return {"name": name, "type": kind, "podTemplate": {"spec": {"containers": [main]}}}

    graph = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "disagg", "namespace": "t"},
        "spec": {
            "components": [
                {"name": "Frontend", "type": "frontend"},
                component("P", "prefill"),
                component("D", "decode"),
            ]
        },
    }
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph))
    results = check_files([str(path)], gpu_name="H100")
    assert [(r.name, r.verdict) for r in results] == [("t/disagg/D", "Fits"), ("t/disagg/P", "Fits")], results
    assert "Dynamo decode worker D" in results[0].message


def test_a_dynamo_workers_kai_gpu_fraction_is_its_share(tmp_path: Path) -> None:
    # hunt79 F2: NVIDIA's Dynamo guide for KAI with GPU fractions puts gpu-fraction: "0.5" in a worker's
    # extraPodMetadata.annotations and no nvidia.com/gpu (KAI refuses a pod with both); fitgate read no annotation and
    # answered Unknown, "set nvidia.com/gpu: 1". Half an H100 (39.6 GiB) at gmu 0.4 (31.7 GiB) holds Qwen3-8B.
    import yaml  # noqa: PLC0415

    main = {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", "command": ["python3", "-m", "dynamo.vllm"]}
    main["args"] = ["--model", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.40", "--max-model-len", "4096"]
    worker = {
        "componentType": "worker",
        "extraPodMetadata": {"annotations": {"gpu-fraction": "0.5"}},
        "extraPodSpec": {"schedulerName": "kai-scheduler", "mainContainer": main},
    }
    graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "q", "namespace": "t"},
        "spec": {"services": {"VllmDecodeWorker": worker}},
    }
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph))
    [r] = check_files([str(path)], gpu_name="H100")
    assert r.verdict in ("Fits", "Tight") and "Run:ai gives this pod 39.59 GiB of the 79.19 GiB card" in r.message, r


def test_kaito_config_flags_are_read_from_the_configmap() -> None:
    docs = check_files([str(MANIFESTS / "kaito-workspace-custom-config.yaml")], gpu_name="H100")
    workspace = docs[-1]
    # the vllm block: tensor-parallel-size 2 is read (so not the instance-type Unknown), the model is the preset's
    assert "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" in workspace.message
    assert "KAITO sets --tensor-parallel-size" not in workspace.message


def test_kaito_without_its_configmap_names_it() -> None:
    import yaml  # noqa: PLC0415

    docs = list(yaml.safe_load_all((MANIFESTS / "kaito-workspace-custom-config.yaml").read_text()))
    reading = read_workload(docs[1], {})
    assert reading is not None and reading.unknown is not None
    assert reading.config_map == ("ds-inference-params", "inference_config.yaml")  # the webhook fetches this key


def test_storage_uri_without_annotation_is_unknown_and_says_how() -> None:
    import yaml  # noqa: PLC0415

    isvc = yaml.safe_load((MANIFESTS / "kserve-isvc-vllm-pvc.yaml").read_text())
    del isvc["metadata"]["annotations"]
    runtime = yaml.safe_load(Path(RUNTIME).read_text())
    reading = read_workload(isvc, runtimes={"kserve-vllmserver": runtime["spec"]})
    assert reading is not None and reading.unknown is not None
    assert "pvc://models/Meta-Llama-3.1-8B-Instruct" in reading.unknown and "fitgate.io/model" in reading.unknown


def test_pvc_path_model_with_the_annotation_is_sized() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama", "namespace": "ml"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"fitgate.io/model": "meta-llama/Llama-3.1-8B-Instruct@main"}},
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.99.0",
                            "args": ["--model", "/models/Meta-Llama-3.1-8B-Instruct", "--max-model-len", "8192"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            }
        },
    }
    reading = read_workload(deployment)
    assert reading is not None and reading.unknown is None
    assert (reading.model, reading.revision) == ("meta-llama/Llama-3.1-8B-Instruct", "main")
    assert any("/models/Meta-Llama-3.1-8B-Instruct holds meta-llama/Llama-3.1-8B-Instruct" in n for n in reading.notes)
    verdict = evaluate_reading(reading, None, [])
    outcome = decide_workload(verdict, "enforce", "Warn")
    assert outcome.allowed and any("vLLM 0.99.0" in w for w in outcome.warnings)  # newer than the table


def test_malformed_model_annotation_is_ignored_and_said() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "d", "annotations": {"fitgate.io/model": "not a repo id"}},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "v", "image": "vllm/vllm-openai:v0.19.0", "args": ["--model", "m/x"]}]}
            }
        },
    }
    reading = read_workload(deployment)
    assert reading is not None and reading.model == "m/x"
    assert any("expected org/name[@revision]" in n for n in reading.notes)


def test_registry_is_what_the_chart_admits_and_audits(helm: Path) -> None:
    docs = render_chart(helm, "--set", "workloadWebhook.enabled=true")
    (config,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    hook = next(w for w in config["webhooks"] if w["name"] == "workloads-enforce.fitgate.io")
    rules = {
        (g, v, r)
        for rule in hook["rules"]
        for g in rule["apiGroups"]
        for v in rule["apiVersions"]
        for r in rule["resources"]
    }
    registry = {(k.group, v, k.plural) for k in admitted_kinds() for v in k.versions}
    assert rules == registry
    # the audit lists every kind; it patches them only when annotations are opted in (docs/hardening.md)
    for values, verb in ((("--set", "workloadWebhook.enabled=true"), "list"), (("--set", "workloadWebhook.enabled=true",
                          "--set", "workloadWebhook.annotate=true"), "patch")):  # fmt: skip
        (role,) = [d for d in render_chart(helm, *values) if d["kind"] == "ClusterRole"]
        granted = {
            (g, r)
            for rule in role["rules"]
            if verb in rule["verbs"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
        }
        assert {(k.group, k.plural) for k in admitted_kinds()} <= granted, verb


def test_every_registry_kind_has_a_reader() -> None:
    from fitgate.workloads.crds import CRD_READERS  # noqa: PLC0415

    own = {"LeaderWorkerSet", "InferenceService", "LLMInferenceService"}
    for kind in KINDS:
        assert kind.pod_template is not None or kind.kind in own | set(CRD_READERS), kind
    assert find_kind("Service") is None


def test_ray_serve_llm_engine_kwargs_are_vllm_flags() -> None:
    import yaml  # noqa: PLC0415

    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-ray-serve-llm.yaml").read_text()) if d)
    reading = read_workload(ray)
    assert reading is not None and reading.model == "Qwen/Qwen2.5-7B-Instruct"
    # engine_kwargs: dtype bfloat16, max_model_len 1024, gpu_memory_utilization 0.75
    assert reading.serving == {"dtype": "bfloat16", "maxModelLen": 1024, "gpuMemoryUtilization": 0.75}
    assert reading.gpus_per_replica == 4  # the worker group's nvidia.com/gpu
    # hunt207: engine_kwargs skip argparse's choices and vLLM lowercases the method (config/model.py 0.34.0
    # L1074-1078): quantization FP8 is fp8 (it was read as the checkpoint's own, bf16)
    upper = {**ray, "spec": {**ray["spec"], "serveConfigV2": ray["spec"]["serveConfigV2"].replace(
        "max_model_len: 1024", "max_model_len: 1024\n        quantization: FP8")}}  # fmt: skip
    fp8 = read_workload(upper)
    assert fp8 is not None and fp8.serving.get("quantization") == "fp8", fp8.serving if fp8 else None
    bad = {**ray, "spec": {**ray["spec"], "serveConfigV2": "applications: [unclosed"}}
    broken = read_workload(bad)
    assert broken is not None and broken.invalid is not None and broken.invalid.startswith("spec.serveConfigV2")


def _ray_llm_service(
    name: str, app: dict[str, Any], product: str, *, gpus: str, replicas: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A RayService serving ``app`` on one worker group of ``replicas`` pods of ``gpus`` GPUs (and that pod spec)."""
    import yaml  # noqa: PLC0415

    worker = {"containers": [{"name": "ray-worker", "image": "rayproject/ray-llm:2.49.0-py311-cu128",
                              "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
              "nodeSelector": {"nvidia.com/gpu.product": product}}  # fmt: skip
    group = {"groupName": "gpu", "replicas": replicas, "template": {"spec": worker}}
    spec = {"serveConfigV2": yaml.safe_dump({"applications": [app]}), "rayClusterConfig": {"workerGroupSpecs": [group]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name}, "spec": spec}, worker


@pytest.mark.parametrize("form", ["llm_configs", "llm_config"])
def test_ray_serve_data_parallel_ranks_are_serve_replicas_of_tp_x_pp_gpus(tmp_path: Path, form: str) -> None:
    """hunt93 F1: Ray Serve LLM's data parallelism (Ray's "Data parallel attention" guide) runs each DP rank as a Serve
    replica of TP x PP GPUs (its DPServer sets data_parallel_rank), Ray placing them on the worker pods: 16 ranks of
    Qwen3-30B-A3B with EP on 2 worker pods of 8 H100s were DoesNotFit against one pod ("needs 16 GPUs, asks for 8"),
    and the `build_dp_openai_app` form's single `llm_config` was Skipped ("runs no vLLM server")."""
    import yaml  # noqa: PLC0415

    config = {"model_loading_config": {"model_id": "Qwen/Qwen3-30B-A3B"},
              "engine_kwargs": {"data_parallel_size": 16, "tensor_parallel_size": 1, "enable_expert_parallel": True}}  # fmt: skip
    args = {"llm_configs": [config]} if form == "llm_configs" else {"llm_config": config}
    app = {"name": "dp", "import_path": "ray.serve.llm:build_dp_openai_app", "args": args}
    doc, worker = _ray_llm_service("dp-llm", app, "NVIDIA-H100-80GB-HBM3", gpus="8", replicas=2)
    path = tmp_path / "rs.yaml"
    path.write_text(yaml.safe_dump(doc))
    (result,) = check_files([str(path)])
    assert result.verdict == "Fits" and result.admitted, result.message
    assert "Ray Serve data parallel: 16 ranks, each a Serve replica of 1 GPU(s)" in result.message
    # hunt95 F5: a rank wider than a pod (TP 8 over pods of 4 GPUs, DP 2): the group spans 4 pods, 16 GPUs
    config["engine_kwargs"] = {"data_parallel_size": 2, "tensor_parallel_size": 8, "enable_expert_parallel": True}
    worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    doc["spec"]["serveConfigV2"] = yaml.safe_dump({"applications": [app]})
    path.write_text(yaml.safe_dump(doc))
    (wide,) = check_files([str(path)])
    assert wide.verdict == "Fits" and wide.admitted, wide.message


def test_a_ray_serve_llm_config_on_a_tpu_is_not_sized_on_the_gpu_group_beside_it(tmp_path: Path) -> None:
    # hunt152 F1: a Ray Serve LLM config with accelerator_type TPU-V6E is placed by Ray on the TPU worker group; with
    # an L4 group in the same cluster fitgate sized it there (Llama-3.1-8B at 65536 tokens: DoesNotFit). Ray's
    # non-GPU types (TPU-*, Intel-GAUDI, aws-neuron-core, Ascend910B) are skipped, outside the gate; a GPU type is
    # a note, the GPU the worker group's.
    import yaml  # noqa: PLC0415

    def verdict(accelerator: str) -> str:
        config = {"model_loading_config": {"model_id": "meta-llama/Llama-3.1-8B-Instruct"},
                  "accelerator_type": accelerator, "engine_kwargs": {"max_model_len": 65536}}  # fmt: skip
        app = {"name": "llm", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [config]}}
        doc, _ = _ray_llm_service("mixed", app, "NVIDIA-L4", gpus="1", replicas=1)
        path = tmp_path / f"{accelerator}.yaml"
        path.write_text(yaml.safe_dump(doc))
        (result,) = check_files([str(path)])
        return result.verdict

    assert [verdict(a) for a in ("TPU-V6E", "Intel-GAUDI", "aws-neuron-core")] == ["Skipped"] * 3
    assert verdict("L4") == "DoesNotFit"  # 8 GiB of KV for one 65536-token request on one L4: the arithmetic stands


def test_kuberays_vllm_sample_reads_its_model_and_parallelism_from_env_vars() -> None:
    import yaml  # noqa: PLC0415

    # hunt24 G1: KubeRay's vLLM sample (the Ray docs' guide) passes the model and TP through runtime_env env_vars that
    # its serve.py turns into vLLM's args, and pins vllm==0.5.4 with pip; it was skipped as "no vLLM server".
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-vllm-sample.yaml").read_text()) if d)
    reading = read_workload(ray)
    assert reading is not None and reading.model == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert reading.serving.get("tensorParallelSize") == 2 and reading.vllm_version == "0.5.4"
    assert reading.gpus_per_replica == 2
    assert any("KubeRay vLLM sample" in n for n in reading.notes)


def test_a_ray_serve_apps_env_vars_named_as_engine_args_are_those_args() -> None:
    import yaml  # noqa: PLC0415

    # hunt52 F1: ai-on-eks's DeepSeek RayService (awslabs/ai-on-eks blueprints/inference/vllm-ray-gpu-deepseek
    # ray-vllm-deepseek.yml) sets MAX_MODEL_LEN 8192, MAX_NUM_SEQS 4, GPU_MEMORY_UTILIZATION 0.9 and
    # TENSOR_PARALLEL_SIZE for its serve script's AsyncEngineArgs; its guide's log shows it ran on one A10G with 4.17 GiB
    # of KV cache. Sized at the model's 131,072 tokens it was denied.
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-vllm-sample.yaml").read_text()) if d)
    serve = yaml.safe_load(ray["spec"]["serveConfigV2"])
    serve["applications"][0]["runtime_env"]["env_vars"].update(
        {"MAX_MODEL_LEN": "8192", "MAX_NUM_SEQS": "4", "GPU_MEMORY_UTILIZATION": "0.9", "HF_TOKEN": "x", "MODEL": "y"}
    )
    ray["spec"]["serveConfigV2"] = yaml.safe_dump(serve)
    reading = read_workload(ray)
    assert reading is not None and reading.model == "meta-llama/Meta-Llama-3-8B-Instruct"  # MODEL is not MODEL_ID
    assert (reading.serving["maxModelLen"], reading.serving["maxNumSeqs"]) == (8192, 4)
    assert reading.serving["gpuMemoryUtilization"] == 0.9 and reading.serving["tensorParallelSize"] == 2


def test_a_ray_serve_app_that_shows_no_vllm_is_not_read_as_kuberays_vllm_sample() -> None:
    import copy  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    # hunt27 F1: GKE's "Serve an LLM on L4 GPUs with Ray" Llama-2-70B app (kubernetes-engine-samples
    # ai-ml/gke-ray/rayserve/llama2-70b.yaml) sets MODEL_ID but serves it with transformers + bitsandbytes 4-bit
    # (import_path model_nf4_mg:chat_app_nf4_mg, pip bitsandbytes): read as vLLM at bf16, it was denied on 2 L4s
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-vllm-sample.yaml").read_text()) if d)
    serve = yaml.safe_load(ray["spec"]["serveConfigV2"])
    app = serve["applications"][0]
    app["import_path"] = "model_nf4_mg:chat_app_nf4_mg"
    app["runtime_env"] = {"env_vars": app["runtime_env"]["env_vars"], "pip": ["bitsandbytes==0.42.0"]}
    other = copy.deepcopy(ray)
    other["spec"]["serveConfigV2"] = yaml.safe_dump(serve)
    assert read_workload(other) is None  # no vLLM server in it
    assert read_workload(ray) is not None  # the KubeRay sample pins vllm==0.5.4 and imports ...samples.vllm.serve
    # hunt111 F3: GKE's gemma-2b-it app (ai-ml/gke-ray/rayserve/llm, import_path ai-ml.gke-ray.rayserve.llm.serve:model)
    # lists a bare `vllm`: it installs vLLM at a release the manifest does not name, so it is read (Skipped before)
    for pip in (["vllm", "ray==2.40.0"], ["vllm>=0.6", "transformers<5"], ["vllm[audio]"]):
        app["import_path"], app["runtime_env"]["pip"] = "ai-ml.gke-ray.rayserve.llm.serve:model", pip
        other["spec"]["serveConfigV2"] = yaml.safe_dump(serve)
        reading = read_workload(other)
        assert reading is not None and reading.model == app["runtime_env"]["env_vars"]["MODEL_ID"], pip
    app["runtime_env"]["pip"] = ["vllmx", "my-vllm-tools"]  # other packages that merely start or end with the name
    other["spec"]["serveConfigV2"] = yaml.safe_dump(serve)
    assert read_workload(other) is None


def test_a_ray_worker_group_on_tpus_or_mig_slices_is_unknown_not_no_gpu(tmp_path: Path) -> None:
    import copy  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    # hunt25 F1: GKE's samples (kubernetes-engine-samples ai-ml/gke-ray/tpu/get-started/serve/ray-service.qwen3-tpu-
    # v6e.yaml) run KubeRay's vLLM sample on a worker group asking for google.com/tpu: 8. Only a group with a GPU limit
    # was the worker, so the pod had no resources and the verdict was DoesNotFit ("no nvidia.com/gpu limit").
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-vllm-sample.yaml").read_text()) if d)
    for device in ({"google.com/tpu": "8"}, {"nvidia.com/mig-3g.40gb": 1}):
        obj = copy.deepcopy(ray)
        for group in obj["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            for c in group["template"]["spec"]["containers"]:
                c["resources"] = {"limits": dict(device), "requests": dict(device)}
        reading = read_workload(obj)
        assert reading is not None and reading.unknown is not None and next(iter(device)) in reading.unknown, reading
        path = tmp_path / "ray.yaml"
        path.write_text(yaml.safe_dump(obj))
        [result] = check_files([str(path)])
        assert result.verdict == "Unknown", result


def test_the_webhook_and_audit_take_their_kinds_from_the_registry() -> None:
    from fitgate.operator.observation.audit import AUDITED  # noqa: PLC0415
    from fitgate.operator.runtime.workload_handlers import WORKLOAD_RESOURCES  # noqa: PLC0415

    assert ("kaito.sh", "v1beta1", "workspaces", "Workspace") in AUDITED
    assert ("kaito.sh", "v1alpha1", "workspaces") in WORKLOAD_RESOURCES  # every served version is admitted
    assert ("ray.io", "v1", "rayservices", "RayService") in AUDITED
    assert {k for *_, k in AUDITED} == {k.kind for k in admitted_kinds()}
    assert "CronJob" not in {k for *_, k in AUDITED}  # fitgate check only, as before


def test_kaito_multi_node_workspace_is_pipeline_parallel_over_its_nodes() -> None:
    import yaml  # noqa: PLC0415

    # kaito_workspace_deepseek_r1.yaml: resource.count 6 -> KAITO's --pipeline-parallel-size 6 (interface.go L568)
    ws = next(d for d in yaml.safe_load_all((MANIFESTS / "kaito-workspace-deepseek-r1.yaml").read_text()) if d)
    reading = read_workload(ws)
    assert reading is not None and reading.model == "deepseek-ai/DeepSeek-R1-0528"
    assert (reading.serving["pipelineParallelSize"], reading.pods_per_replica) == (6, 6)
    assert reading.node_selector["node.kubernetes.io/instance-type"] == "Standard_NC80adis_H100_v5"
    # TP: KAITO's, the GPUs of each node: Standard_NC80adis_H100_v5 has 2 H100 NVL (sizing/data/cloud_gpus.json)
    assert reading.unknown is None and reading.serving["tensorParallelSize"] == 2
    assert any("Standard_NC80adis_H100_v5: 2 x" in n for n in reading.notes)


def test_an_llm_inference_service_on_vllms_cpu_image_or_a_simulator_runs_no_vllm_on_gpus() -> None:
    import copy  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    # hunt27 F3: KServe's release smoke test (hack/release/smoke-test-data/llmisvc-opt-125m-cpu.yaml: image
    # vllm/vllm-openai-cpu) and its simulator sample (command /app/llm-d-inference-sim) were DoesNotFit "no GPU"
    obj = yaml.safe_load(
        (Path(__file__).parents[1] / "fixtures" / "workloads" / "llmisvc-qwen2-7b-gpu.yaml").read_text()
    )
    assert read_workload(obj) is not None
    for change in (
        {"image": "vllm/vllm-openai-cpu:v0.19.0", "resources": {"limits": {"cpu": "4", "memory": "16Gi"}}},
        {"image": "ghcr.io/llm-d/llm-d-inference-sim:v0.10.0", "command": ["/app/llm-d-inference-sim"]},
    ):
        other = copy.deepcopy(obj)
        containers = other["spec"].setdefault("template", {}).setdefault("containers", [{"name": "main"}])
        containers[0].update(change)
        assert read_workload(other) is None, change


def test_llm_inference_service_with_a_pvc_uri_is_sized_by_its_annotation() -> None:
    # KServe's LLMInferenceService sample shape (tests/fixtures/workloads/llmisvc-qwen2-7b-gpu.yaml), its model on a PVC
    import yaml  # noqa: PLC0415

    obj = yaml.safe_load(
        (Path(__file__).parents[1] / "fixtures" / "workloads" / "llmisvc-qwen2-7b-gpu.yaml").read_text()
    )
    obj["spec"]["model"]["uri"] = "pvc://models/qwen2.5-7b"
    unread = read_workload(obj)
    assert unread is not None and unread.model == "pvc://models/qwen2.5-7b"  # the message names the location
    assert unread.unknown is not None and "fitgate.io/model" in unread.unknown
    obj["metadata"].setdefault("annotations", {})["fitgate.io/model"] = "Qwen/Qwen2.5-7B-Instruct"
    read = read_workload(obj)
    assert read is not None and read.unknown is None and read.model == "Qwen/Qwen2.5-7B-Instruct"


def test_a_dynamo_graph_names_what_its_workers_local_path_holds(tmp_path: Path) -> None:
    # the Dynamo sample with the worker reading a local path, as the recipes do (--model /model-cache/...):
    # offline the path is Unknown; the graph's fitgate.io/model annotation names the checkpoint, on every worker
    text = (MANIFESTS / "dynamo-vllm-agg-v1beta1.yaml").read_text()
    text = text.replace("- Qwen/Qwen3-0.6B", "- /model-cache/qwen3")
    bare = tmp_path / "bare.yaml"
    bare.write_text(text)
    assert [r.verdict for r in check_files([str(bare)], gpu_name="H100")] == ["Unknown"]
    named = tmp_path / "named.yaml"
    named.write_text(
        text.replace("  name: vllm-agg\n", "  name: vllm-agg\n  annotations: {fitgate.io/model: Qwen/Qwen3-0.6B}\n", 1)
    )
    results = check_files([str(named)], gpu_name="H100")
    assert [r.verdict for r in results] == ["Fits"], [r.line() for r in results]
    assert results[0].message.count("annotation fitgate.io/model") == 1, results[0].message


def _l4_deployment(tmp_path: Path, image: str, extra: str) -> str:
    f = tmp_path / "d.yaml"
    f.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: vllm\n        image: " + image + "\n"
        "        args: [meta-llama/Llama-3.1-8B-Instruct, --max-model-len, '40000'" + extra + "]\n"
        "        resources: {limits: {nvidia.com/gpu: '1'}}\n"
    )
    (result,) = check_files([str(f)], gpu_name="NVIDIA-L4")
    return f"{result.verdict}: {result.message}"


def test_kv_cache_memory_bytes_is_sized_not_ignored(tmp_path: Path) -> None:
    # 8B on one L4 at 40,000 tokens: one request needs 40000 x 128 KiB = 4.88 GiB of KV; by gpu_memory_utilization
    # 0.92 only ~3.8 GiB is left on vLLM 0.21 (its V1 runner deducts the graph estimate; vLLM refuses), but
    # --kv-cache-memory-bytes 5200M (5.08 GiB) skips the profile and the fraction: weights + activations + 5.08 GiB
    # stay within the card
    assert _l4_deployment(tmp_path, "vllm/vllm-openai:v0.21.0", "").startswith("DoesNotFit")
    line = _l4_deployment(tmp_path, "vllm/vllm-openai:v0.21.0", ", --kv-cache-memory-bytes, 5200M")
    assert not line.startswith("DoesNotFit"), line
    # hunt196 F1: 0.10.2 has it (engine/arg_utils.py 0.10.2 L744-745; v1/worker/gpu_worker.py L235-252): sized
    assert _l4_deployment(tmp_path, "vllm/vllm-openai:v0.10.2", "").startswith("DoesNotFit")
    line = _l4_deployment(tmp_path, "vllm/vllm-openai:v0.10.2", ", --kv-cache-memory-bytes, 5200M")
    assert not line.startswith("DoesNotFit"), line
    # a release without the flag (before 0.10.2) says so and sizes without it
    line = _l4_deployment(tmp_path, "vllm/vllm-openai:v0.10.1", ", --kv-cache-memory-bytes, 5200M")
    assert "has no such flag (from 0.10.2)" in line, line
    # an empty value (a script's --kv-cache-memory-bytes=${VAR-}) is unset for vLLM's optional flags: the default
    line = _l4_deployment(tmp_path, "vllm/vllm-openai:v0.21.0", ", '--kv-cache-memory-bytes='")
    assert line.startswith("DoesNotFit") and "unset, vLLM's default" in line, line


def test_a_workload_on_vllms_cpu_image_is_skipped_for_that_reason() -> None:
    # hunt27 O1: it read "runs no vLLM server", which a reader of KServe's CPU smoke test took for a misreading
    from fitgate.operator.decision.offline import skipped  # noqa: PLC0415

    pod = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai-cpu:v0.19.0", "args": ["--model", "x/y"]}]}
    dep = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}}
    assert read_workload(dep) is None
    assert "CPU backend" in skipped("f.yaml", dep).message
    pod["containers"][0]["image"] = "ghcr.io/acme/not-an-engine:1"
    assert "runs no vLLM server" in skipped("f.yaml", dep).message
    # hunt195 F5: KubeAI's own TPU / CPU catalog entries (engine VLLM) said "runs no vLLM server"
    tpu = {
        "kind": "Model",
        "metadata": {"name": "m"},
        "spec": {"engine": "VLLM", "resourceProfile": "google-tpu-v5e-2x2:1"},
    }
    assert read_workload(tpu) is None
    assert "resource profile google-tpu-v5e-2x2" in skipped("f.yaml", tpu).message
    tpu["spec"]["engine"] = "OLlama"  # another engine: no vLLM server indeed
    assert "runs no vLLM server" in skipped("f.yaml", tpu).message


def _ray_cluster(workers: int, max_workers: int | None = None) -> dict[str, Any]:
    """A KubeRay RayCluster (ray.io/v1) whose head runs vLLM's multi-node command (vLLM's docs, serving/
    distributed_serving.md: `vllm serve ... --tensor-parallel-size 8 --pipeline-parallel-size 2` on a Ray cluster),
    written here in the shape of KubeRay's ray-cluster.complete.yaml sample; the head holds no GPU."""
    group: dict[str, Any] = {
        "groupName": "gpu",
        "replicas": workers,
        "template": {
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "vllm/vllm-openai:v0.10.1",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ],
            }
        },
    }
    if max_workers is not None:
        group["maxReplicas"] = max_workers
    head = {
        "name": "ray-head",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["bash", "-c"],
        "args": [
            "ray start --head --dashboard-host=0.0.0.0 && vllm serve meta-llama/Llama-3.1-70B-Instruct "
            "--tensor-parallel-size 8 --pipeline-parallel-size 2 --max-model-len 32768"
        ],
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "vllm", "namespace": "ml"},
        "spec": {
            "enableInTreeAutoscaling": max_workers is not None,
            "headGroupSpec": {"template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [group],
        },
    }


def test_a_ray_clusters_head_runs_vllm_over_its_worker_groups_gpus() -> None:
    # hunt54 F2: the KubeRay pattern of vLLM's multi-node serving (production-stack's pipeline-parallel chart renders
    # a RayCluster) was "kind RayCluster is not one fitgate reads"
    r = read_workload(_ray_cluster(2))
    assert r is not None and r.kind == "RayCluster" and r.model == "meta-llama/Llama-3.1-70B-Instruct"
    # 2 workers x 8 H100s hold TP 8 x PP 2; the engine is sized on the workers' GPUs (their nodeSelector)
    assert (r.gpus_per_replica, r.pods_per_replica, r.gpu_shortfall()) == (16, 3, None)
    assert r.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"} and r.vllm_version == "0.10.1"
    one = read_workload(_ray_cluster(1))
    assert one is not None and one.gpu_shortfall() is not None and "needs 16 GPUs" in str(one.gpu_shortfall())
    # the in-tree autoscaler may add workers up to maxReplicas: no shortfall
    scaled = read_workload(_ray_cluster(1, max_workers=2))
    assert scaled is not None and scaled.gpu_shortfall() is None


def _production_stack_pp_head(command: list[str]) -> dict[str, Any]:
    """production-stack's pipeline-parallel RayCluster (helm/templates/ray-cluster.yaml L93-98, tutorial 15): the head
    holds a GPU and starts vllm serve from the ConfigMap script it mounts at /entrypoint."""
    head = {
        "name": "vllm-ray-head",
        "image": "lmcache/vllm-openai:latest",
        "command": command,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        "volumeMounts": [{"name": "vllm-script", "mountPath": "/entrypoint"}],
    }
    volume = {"name": "vllm-script", "configMap": {"name": "m-vllm-start-script"}}
    group = {"replicas": 1, "template": {"spec": {"containers": [{**head, "name": "vllm-ray-worker"}]}}}
    spec = {"headGroupSpec": {"template": {"spec": {"containers": [head], "volumes": [volume]}}}}
    return {"kind": "RayCluster", "metadata": {"name": "ps"}, "spec": {**spec, "workerGroupSpecs": [group]}}


def test_a_vllm_image_on_gpus_with_a_command_fitgate_cannot_follow_is_unknown_not_skipped() -> None:
    # hunt195 F1: the chart's head copies the script and starts it in the background; fitgate does not follow `cp`, and
    # the RayCluster was Skipped as "runs no vLLM server" (a published, running example)
    rendered = (
        '/bin/bash -c " cp /entrypoint/vllm-entrypoint.sh $HOME/x.sh && chmod +x $HOME/x.sh && $HOME/x.sh & echo"'
    )
    r = read_workload(_production_stack_pp_head([rendered]))
    assert (
        r is not None and r.unknown is not None and "cannot follow" in r.unknown and "lmcache/vllm-openai" in r.unknown
    )
    # a head that runs the mounted script itself is read from the ConfigMap (with_mounted_scripts, as for Deployments)
    script = {"vllm-entrypoint.sh": "#!/bin/bash\nexec vllm serve distilbert/distilgpt2 --pipeline-parallel-size 2\n"}
    direct = read_workload_with(_production_stack_pp_head(["/entrypoint/vllm-entrypoint.sh"]), script)
    assert direct is not None and direct.unknown is None and direct.model == "distilbert/distilgpt2"
    # the same image on no GPU running its own command (a client, a dev shell) runs no vLLM server fitgate sizes
    pod = {"containers": [{"name": "c", "image": "vllm/vllm-openai:v0.19.0", "command": ["sleep", "infinity"]}]}
    dep = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}}
    assert read_workload(dep) is None
    pod["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    on_gpu = read_workload(dep)
    assert on_gpu is not None and on_gpu.unknown is not None and "'sleep infinity'" in on_gpu.unknown


def read_workload_with(obj: dict[str, Any], data: dict[str, str]) -> Any:
    return read_workload(obj, {"m-vllm-start-script": data})


def _kubeai_model(name: str, url: str, args: list[str], profile: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {
            "features": ["TextGeneration"],
            "url": url,
            "engine": "VLLM",
            "args": args,
            "resourceProfile": profile,
        },
    }


def test_a_kubeai_model_is_the_vllm_pod_its_controller_creates(tmp_path: Path) -> None:
    import yaml  # noqa: PLC0415

    # hunt27 G1 / hunt52 G4: KubeAI's Model (substratusai/kubeai charts/models/values.yaml catalog entries
    # llama-3.1-70b-instruct-fp8-1-h100 and llama-3.1-70b-instruct-fp8-l4, as written there) was "not a kind fitgate
    # reads"; its controller runs vLLM with --model=<hf ref> and the Model's args (engine_vllm.go vLLMPodForModel)
    h100 = _kubeai_model(
        "llama-3.1-70b-instruct-fp8-1-h100",
        "hf://neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
        ["--enable-prefix-caching", "--max-model-len=16384", "--max-num-batched-token=16384",
         "--gpu-memory-utilization=0.95", "--disable-log-requests", "--kv-cache-dtype=fp8"],
        "nvidia-gpu-h100:1",
    )  # fmt: skip
    r = read_workload(h100)
    assert r is not None and r.kind == "Model" and r.model == "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"
    assert (r.serving["maxModelLen"], r.serving["kvCacheDtype"], r.gpus_per_replica) == (16384, "fp8", 1)
    l4 = _kubeai_model(
        "llama-3.1-70b-instruct-fp8-l4",
        "hf://neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
        ["--max-model-len=32768", "--max-num-batched-token=32768", "--max-num-seqs=512",
         "--gpu-memory-utilization=0.9", "--pipeline-parallel-size=4", "--tensor-parallel-size=2",
         "--enable-prefix-caching", "--enable-chunked-prefill=false", "--disable-log-requests",
         "--kv-cache-dtype=fp8"],
        "nvidia-gpu-l4:8",
    )  # fmt: skip
    r = read_workload(l4)
    assert r is not None and (r.gpus_per_replica, r.parallel_gpus, r.gpu_shortfall()) == (8, 8, None)
    # another engine, or a profile of no NVIDIA / AMD GPU (hunt152 F2: intel-gpu-max-1550 holds "gpu"): not sized
    assert read_workload({**h100, "spec": {**h100["spec"], "engine": "OLlama"}}) is None
    for profile in ("cpu:2", "intel-gpu-max-1550:1", "gaudi-for-text-generation:1", "google-tpu-v5e-2x2:1"):
        assert read_workload({**h100, "spec": {**h100["spec"], "resourceProfile": profile}}) is None, profile
    path = tmp_path / "kubeai.yaml"
    path.write_text(yaml.safe_dump_all([h100, l4]))
    results = check_files([str(path)], gpu_name="H100")
    # read as KubeAI's kind (offline the FP8 checkpoint is not in the catalog: Unknown for the checkpoint, not the kind)
    assert [r.kind for r in results] == ["Model", "Model"] and all("KubeAI Model" in r.message for r in results)


def test_a_kubeai_profile_names_the_gpu_to_check_on_offline(tmp_path: Path) -> None:
    import yaml  # noqa: PLC0415

    # hunt151 S1: KubeAI's chart names each resource profile for its card (nvidia-gpu-h100, amd-gpu-mi300x,
    # nvidia-gpu-a100-80gb), whose node selector is in Helm values `fitgate check` does not see: offline the profile's
    # name is the GPU (it was "no GPU to check against"); a name of no card stays Unknown. Llama-3.1-8B (catalog).
    models = [
        _kubeai_model(f"m{i}", "hf://meta-llama/Llama-3.1-8B-Instruct", ["--max-model-len=8192"], profile)
        for i, profile in enumerate(("nvidia-gpu-h100:1", "amd-gpu-mi300x:1", "nvidia-gpu-a100:1", "nvidia-gpu-x9:1"))
    ]
    path = tmp_path / "kubeai.yaml"
    path.write_text(yaml.safe_dump_all(models))
    h100, mi300x, a100, unknown = check_files([str(path)], gpu_name=None)
    assert (h100.verdict, h100.gpu) == ("Fits", "H100-SXM"), h100.message
    assert (mi300x.verdict, mi300x.gpu) == ("Fits", "MI300X"), mi300x.message
    assert a100.gpu == "A100-80GB", a100.message  # a bare a100 is the larger of its two cards
    assert unknown.verdict == "Unknown" and "no GPU to check against" in unknown.message


def _requester(patch: str) -> dict[str, Any]:
    """llm-d-modelservice's requester Deployment (examples/values-requester.yaml, as helm renders it): the pod runs
    llm-d-fast-model-actuation's requester on the GPU; the vLLM server comes from the dual-pod server patch."""
    requester = {
        "name": "inference-server",
        "image": "ghcr.io/llm-d-incubation/llm-d-fast-model-actuation/requester:latest",
        "command": ["/app/requester"],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    template = {
        "metadata": {"annotations": {"dual-pod.llm-d.ai/server-patch": patch}},
        "spec": {"containers": [requester]},
    }
    return {"kind": "Deployment", "metadata": {"name": "decode"}, "spec": {"template": template}}


def test_an_llm_d_dual_pod_requester_is_sized_from_its_server_patch() -> None:
    # hunt195 F4: it was Skipped as "runs no vLLM server"
    patch = (
        "spec:\n  containers:\n  - name: vllm\n    image: ghcr.io/llm-d/llm-d-cuda:latest\n"
        "    command: [vllm, serve]\n    args: [facebook/opt-125m, --port, '8200', --enforce-eager]\n"
        "    resources: {limits: {nvidia.com/gpu: '1'}}\n"
    )
    r = read_workload(_requester(patch))
    assert r is not None and r.unknown is None and r.model == "facebook/opt-125m" and r.gpus_per_replica == 1
    # a patch fitgate cannot read is the controller's to judge: Unknown, never Invalid
    bad = read_workload(_requester("spec: [unclosed"))
    assert bad is not None and bad.invalid is None and bad.unknown is not None and "dual-pod" in bad.unknown
    # without the annotation the requester runs no vLLM server
    plain = _requester(patch)
    plain["spec"]["template"]["metadata"] = {}
    assert read_workload(plain) is None


def test_dynamos_own_worker_flags_do_not_make_a_misfit_unknown(tmp_path: Path) -> None:
    # hunt199 F1: ai-dynamo/dynamo recipes/llama-3-70b/vllm/disagg-single-node's prefill worker passes
    # --is-prefill-worker (Dynamo's, parsed before vLLM's own parser: components/src/dynamo/vllm/args.py), which read as
    # a newer vLLM's unknown flag made every misfit Unknown. A 70B bf16 (~131 GiB of weights) on one L4 does not fit.
    text = (MANIFESTS / "dynamo-vllm-disagg.yaml").read_text()
    text = text.replace("Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-70B-Instruct")
    text = text.replace("            - prefill\n", "            - prefill\n            - --is-prefill-worker\n")
    text = text.replace(
        "            - decode\n", "            - decode\n            - --dyn-reasoning-parser\n            - x\n"
    )
    f = tmp_path / "dgd.yaml"
    f.write_text(text)
    results = [r for r in check_files([str(f)], gpu_name="L4") if r.kind == "DynamoGraphDeployment"]
    assert [r.verdict for r in results] == ["DoesNotFit", "DoesNotFit"], [r.line() for r in results]
    assert not any("not a flag of any vLLM release" in r.line() for r in results)
    # a flag neither vLLM's nor Dynamo's still says so (a newer release's may change memory: a misfit is Unknown)
    f.write_text(text.replace("--is-prefill-worker", "--some-future-vllm-flag"))
    results = [r for r in check_files([str(f)], gpu_name="L4") if r.kind == "DynamoGraphDeployment"]
    assert any("--some-future-vllm-flag: not a flag of any vLLM release" in r.line() for r in results)
