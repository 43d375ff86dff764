"""The workload reader: every command-line shape of vLLM on Kubernetes, each from a real manifest or doc.

Fixtures and their sources: tests/fixtures/workloads/SOURCE.md.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.operator.schema.api import parse_spec
from fitgate.workloads import expand_k8s, find_engine_command, read_workload, release_of_image
from fitgate.workloads.argv import long_name, parse_engine_argv
from fitgate.workloads.flagvalues import MAX_DOTTED_DEPTH, human_int

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"


def load(name: str) -> list[dict[str, Any]]:
    """The documents of a fixture file."""
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def first(name: str) -> dict[str, Any]:
    """The first document of a fixture file."""
    return load(name)[0]


def deployment(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    """A Deployment around one container."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [container], **pod}}},
    }


# ------------------------------------------------------------------------------------------------
# Shapes from real manifests


def test_vllm_serve_model_from_production_stack_chart() -> None:
    # production-stack deployment-vllm-multi.yaml: `vllm serve MODEL`, dashes and one underscore flag
    r = read_workload(first("production-stack-deployment.yaml"))
    assert r is not None and r.invalid is None and r.unknown is None
    assert r.how == "vllm serve"
    assert r.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert r.serving == {
        "maxModelLen": 131072,
        "kvCacheDtype": "auto",
        "dtype": "bfloat16",
        "tensorParallelSize": 1,
        "maxNumSeqs": 256,
        "gpuMemoryUtilization": 0.9,  # written --gpu_memory_utilization by the chart
        "enablePrefixCaching": True,
    }
    assert r.vllm_version == "0.19.0"
    assert r.gpus_per_replica == 1
    # required node affinity on GPU Feature Discovery's product label -> the GPU pool
    assert r.node_selector == {"nvidia.com/gpu.product": "NVIDIA-L4"}
    spec = parse_spec(r.spec())  # the same spec a ModelDeployment would have
    assert spec.serving.max_model_len == 131072
    assert spec.placement.node_selector == {"nvidia.com/gpu.product": "NVIDIA-L4"}
    assert spec.engine.version == "0.19.0"


def test_shell_string_from_vllm_k8s_docs() -> None:
    # vLLM docs k8s.md: command ["/bin/sh", "-c"], args ["vllm serve M ... --max_num_batched_tokens 1024"]
    r = read_workload(first("vllm-docs-k8s-nvidia.yaml"))
    assert r is not None and r.invalid is None
    assert r.model == "mistralai/Mistral-7B-Instruct-v0.3"
    # underscore spelling read as vLLM does; --enable-chunked-prefill (on, vLLM's default) read too
    assert r.serving == {"maxNumBatchedTokens": 1024, "enableChunkedPrefill": True}
    assert r.vllm_version == "0.34.0"  # :latest is the newest release fitgate models
    assert r.gpus_per_replica == 1 and r.gpu_shortfall() is None


def test_rocm_image_tag_and_amd_gpu_limit_from_vllm_k8s_docs() -> None:
    r = read_workload(first("vllm-docs-k8s-amd.yaml"))
    assert r is not None
    assert r.vllm_version == "0.6.4"  # rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4
    assert r.gpu_resource == "amd.com/gpu" and r.gpus_per_replica == 1
    assert r.model == "mistralai/Mistral-7B-v0.3"


def test_lws_api_server_in_sh_c_with_underscore_pp() -> None:
    # kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml: `sh -c "bash ... leader --ray_cluster_size=$(LWS_GROUP_SIZE);
    # python3 -m vllm.entrypoints.openai.api_server --model M --tensor-parallel-size 8 --pipeline_parallel_size 2"`
    docs = load("lws-vllm-gpu.yaml")
    r = read_workload(docs[0])
    assert r is not None and r.invalid is None
    assert r.how == "python -m vllm.entrypoints.openai.api_server"
    assert r.model == "meta-llama/Llama-3.1-405B-Instruct"
    assert r.serving == {"tensorParallelSize": 8, "pipelineParallelSize": 2}
    assert r.vllm_version == "0.8.5"
    # a group of size 2, 8 GPUs per pod: 16 GPUs cover TP 8 x PP 2 across 2 nodes
    assert (r.pods_per_replica, r.gpus_per_replica, r.parallel_gpus) == (2, 16, 16)
    assert r.gpu_shortfall() is None
    assert parse_spec(r.spec()).placement.nodes_per_replica == 2
    assert read_workload(docs[1]) is None  # the Service


def test_lws_group_short_of_gpus() -> None:
    lws = copy.deepcopy(first("lws-vllm-gpu.yaml"))
    lws["spec"]["leaderWorkerTemplate"]["size"] = 1
    r = read_workload(lws)
    assert r is not None
    assert r.gpu_shortfall() == (
        "vLLM needs 16 GPUs (TP 8 x PP 2) but container vllm-leader asks for 8 nvidia.com/gpu; set nvidia.com/gpu: 16"
    )


@pytest.mark.parametrize("size", ["${DECODE_SIZE}", "{{ .Values.size }}"])
def test_an_unrendered_lws_size_is_unknown_not_invalid(size: str) -> None:
    # hunt74 O1: llm-d's kustomize base writes `size: ${DECODE_SIZE}` (rendered by its pipeline); a template before
    # rendering is not an invalid manifest: Unknown, saying to check the rendered one. A plain bad size stays Invalid.
    lws = copy.deepcopy(first("lws-vllm-gpu.yaml"))
    lws["spec"]["leaderWorkerTemplate"]["size"] = size
    r = read_workload(lws)
    assert r is not None and r.invalid is None and r.unknown is not None and "placeholder" in r.unknown
    lws["spec"]["leaderWorkerTemplate"]["size"] = "two"
    bad = read_workload(lws)
    assert bad is not None and bad.invalid is not None


def test_kserve_huggingface_runtime_args() -> None:
    # KServe docs: modelFormat huggingface, args --model_name=llama3 --model_id=meta-llama/meta-llama-3-8b-instruct
    r = read_workload(first("kserve-huggingface-llama3.yaml"))
    assert r is not None and r.invalid is None and r.unknown is None
    assert r.model == "meta-llama/meta-llama-3-8b-instruct"
    assert r.gpus_per_replica == 1
    assert any("KServe huggingface runtime" in n for n in r.notes)


def test_kserve_huggingface_backend_is_not_vllm() -> None:
    isvc = copy.deepcopy(first("kserve-huggingface-llama3.yaml"))
    isvc["spec"]["predictor"]["model"]["args"].append("--backend=huggingface")
    assert read_workload(isvc) is None


def test_kserve_vllm_args_and_storage_uri() -> None:
    # the args shape of a KServe huggingface InferenceService with engine flags (--flag=value)
    isvc = copy.deepcopy(first("kserve-huggingface-llama3.yaml"))
    model = isvc["spec"]["predictor"]["model"]
    model["args"] = ["--max-model-len=1024", "--tensor-parallel-size=2", "--enforce-eager"]
    model["storageUri"] = "hf://meta-llama/Llama-3.1-8B-Instruct"
    r = read_workload(isvc)
    assert r is not None
    assert r.model == "meta-llama/Llama-3.1-8B-Instruct"
    # --enforce-eager is sized since issue 20 (spec.serving.enforceEager), not a note
    assert r.serving == {"maxModelLen": 1024, "tensorParallelSize": 2, "enforceEager": True}
    assert "vLLM needs 2 GPUs" in (r.gpu_shortfall() or "")
    assert not any("--enforce-eager" in n for n in r.notes)


def test_image_entrypoint_with_only_args() -> None:
    # vllm/vllm-openai's ENTRYPOINT is the server (docker/Dockerfile, stage vllm-openai): only args given
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "docker.io/vllm/vllm-openai:v0.10.2",
                "args": ["--model", "Qwen/Qwen3-8B", "-tp", "2", "--max-model-len=32k"],
                "resources": {"limits": {"nvidia.com/gpu": 2}},
            }
        )
    )
    assert r is not None and r.how == "image entrypoint"
    assert r.model == "Qwen/Qwen3-8B"
    assert r.serving == {"tensorParallelSize": 2, "maxModelLen": 32000}  # 32k: x1000 (human_readable_int)
    assert r.vllm_version == "0.10.2"
    assert r.gpu_shortfall() is None


def test_non_vllm_gpu_container_is_skipped() -> None:
    assert (
        read_workload(
            deployment(
                {"name": "train", "image": "pytorch/pytorch:2.4", "resources": {"limits": {"nvidia.com/gpu": 8}}}
            )
        )
        is None
    )
    assert read_workload({"kind": "ConfigMap", "data": {}}) is None
    assert read_workload("not an object") is None


# ------------------------------------------------------------------------------------------------
# Flags


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("-tp", "--tensor-parallel-size"),  # arg_utils.py 0.33.0 L1208-1210
        ("-pp", "--pipeline-parallel-size"),  # L1170-1173
        ("-q", "--quantization"),  # L992
        ("-dp", "--data-parallel-size"),  # L1240-1242
        ("--pipeline_parallel_size", "--pipeline-parallel-size"),  # argparse_utils.py L379-394
        ("--max_model_len", "--max-model-len"),
        ("--compilation_config.mode", "--compilation-config.mode"),  # only before the first dot
    ],
)
def test_long_name(flag: str, expected: str) -> None:
    assert long_name(flag) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [("32768", 32768), ("32k", 32000), ("32K", 32768), ("1M", 1 << 20), ("25.6k", 25600), ("x", None)],
)
def test_human_int(text: str, value: int | None) -> None:
    assert human_int(text) == value


def test_equals_and_space_forms_and_booleans() -> None:
    cmd = find_engine_command(
        ["vllm", "serve", "m", "--enforce-eager", "--max-model-len=4096", "--no-enable-prefix-caching", "-pp", "2"],
        [],
        {},
        image_entrypoint=False,
    )
    assert cmd is not None and cmd.model == "m"
    assert cmd.flags == {
        "--enforce-eager": "true",
        "--max-model-len": "4096",
        "--enable-prefix-caching": "false",
        "--pipeline-parallel-size": "2",
    }


def test_k8s_variable_expansion() -> None:
    env = {"MODEL": "Qwen/Qwen3-8B", "TP": "4"}
    # kubernetes expansion: $(VAR) known -> value; unknown -> left; $$ -> $
    assert expand_k8s("$(MODEL) $(NOPE) $$(MODEL) $$HOME", env) == "Qwen/Qwen3-8B $(NOPE) $(MODEL) $HOME"
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.1",
                "command": ["vllm", "serve", "$(MODEL)", "--tensor-parallel-size", "$(TP)"],
                "env": [
                    {"name": "MODEL", "value": "Qwen/Qwen3-8B"},
                    {"name": "TP", "value": "4"},
                ],
                "resources": {"limits": {"nvidia.com/gpu": "4"}},
            }
        )
    )
    assert r is not None and r.model == "Qwen/Qwen3-8B" and r.serving == {"tensorParallelSize": 4}


def test_variable_from_a_secret_is_unknown_naming_it() -> None:
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.1",
                "args": ["--model", "Qwen/Qwen3-8B", "--max-model-len", "$(LEN)"],
                "env": [{"name": "LEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "len"}}}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None and r.unknown == "--max-model-len $(LEN): a variable not set in the container's env"
    assert r.config_map is None  # fitgate never reads Secrets


def test_variables_from_configmaps_are_read_where_fitgate_has_them() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.1",
        "args": ["--model", "$(VLLM_MODEL)", "--max-model-len", "$(LEN)", "--tensor-parallel-size", "$(TP)"],
        "envFrom": [{"configMapRef": {"name": "shared"}, "prefix": "VLLM_"}, {"configMapRef": {"name": "other"}}],
        "env": [
            {"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "len"}}},
            {"name": "TP", "value": "2"},
        ],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    unread = read_workload(deployment(container))
    assert unread is not None and unread.config_map == ("shared", "*")  # the first one the kubelet reads
    assert "ConfigMap shared (key *)" in str(unread.unknown)
    maps = {"shared": {"MODEL": "Qwen/Qwen3-8B", "1bad": "x"}, "c": {"len": "16384"}}
    half = read_workload(deployment(container), {"shared": maps["shared"]})  # the next missing one, in order
    assert half is not None and half.config_map == ("other", "*") and "$(LEN)" in str(half.unknown)
    r = read_workload(deployment(container), maps)  # "other" is missing: none of the flags needs it
    assert r is not None and r.unknown is None and r.invalid is None, r
    serving = parse_spec(r.spec()).serving
    assert r.model == "Qwen/Qwen3-8B" and serving.max_model_len == 16384 and serving.tensor_parallel_size == 2


def test_config_file_from_a_configmap_in_the_manifest_set() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.1",
        "args": ["--config", "/etc/vllm/config.yaml", "--max-model-len", "8192"],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    obj = deployment(container, volumes=[{"name": "cfg", "configMap": {"name": "vllm-config"}}])
    data = {"config.yaml": "model: Qwen/Qwen3-8B\ntensor_parallel_size: 2\nmax-model-len: 65536\nenforce_eager: true\n"}
    r = read_workload(obj, {"vllm-config": data})
    assert r is not None and r.unknown is None
    assert r.model == "Qwen/Qwen3-8B"
    # the command line wins over the file (vLLM: cli > config > defaults); enforce_eager is sized (issue 20)
    assert r.serving == {"maxModelLen": 8192, "tensorParallelSize": 2, "enforceEager": True}
    missing = read_workload(obj, {})
    assert missing is not None
    assert missing.unknown == (
        "--config /etc/vllm/config.yaml: ConfigMap vllm-config (key config.yaml) is not in the manifests read"
    )
    assert missing.config_map == ("vllm-config", "config.yaml")  # what the webhook and the audit read
    # items: the file config.yaml is the ConfigMap's key `engine`
    mapped = copy.deepcopy(obj)
    mapped["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"] = [{"key": "engine", "path": "config.yaml"}]
    assert read_workload(mapped, {}).config_map == ("vllm-config", "engine")  # type: ignore[union-attr]
    huge = read_workload(obj, {"vllm-config": {"config.yaml": "a: " + "x" * 300_000}})
    # past fitgate's bound, not vLLM's (load_config_file has none): Unknown, never Invalid (hunt207 F3)
    assert huge is not None and huge.invalid is None and huge.unknown and "holds more than 262144 bytes" in huge.unknown


def test_a_config_file_turns_a_switch_off_as_the_parser_reading_it_does() -> None:
    # hunt99 F1: `no-enable-chunked-prefill: true` is `--no-enable-chunked-prefill` in every release and invocation
    # (argparse_utils.py 0.34.0 L654-656 appends `--` + key, which the subcommand's parser reads). `enable-chunked-prefill:
    # false` is `--no-...` only where the parser expanding the file holds the switch (L657-658, vLLM PR 51573, 0.28.0+):
    # the API server's, not `vllm serve`'s top-level parser (hunt101 F1: entrypoints/cli/main.py 0.34.0 L88-110), and
    # only with dashes (the key is looked up as written). A false value of a valued flag is dropped in all.
    def read(image: str, text: str, command: list[str] | None = None) -> dict[str, object]:
        container = {
            "name": "vllm",
            "image": image,
            "args": [*(command or []), "--config", "/etc/vllm/config.yaml"],
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }
        obj = deployment(container, volumes=[{"name": "cfg", "configMap": {"name": "vllm-config"}}])
        r = read_workload(obj, {"vllm-config": {"config.yaml": "model: Qwen/Qwen3-8B\n" + text}})
        assert r is not None and r.unknown is None and r.invalid is None, r
        return dict(r.serving)

    off = {"enableChunkedPrefill": False}
    api = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert read("vllm/vllm-openai:v0.19.1", "no-enable-chunked-prefill: true\n") == off
    assert read("vllm/vllm-openai:v0.34.0", "disable-chunked-prefill: true\n") == off  # 0.34's paired spelling (F9)
    assert read("vllm/vllm-openai:v0.34.0", "enable-chunked-prefill: false\n") == {}  # vllm serve: dropped
    assert read("vllm/vllm-openai:v0.28.0", "enable-chunked-prefill: false\n", api) == off
    assert read("vllm/vllm-openai:latest", "enable_chunked_prefill: false\n", api) == {}  # underscores: dropped
    assert read("vllm/vllm-openai:v0.27.0", "enable-chunked-prefill: false\n", api) == {}
    assert read("vllm/vllm-openai:v0.34.0", "kv-cache-dtype: false\nno-enforce-eager: false\n", api) == {}
    # hunt100 F2: vLLM splices the file's keys into the argv its parser reads, unique prefixes included
    assert read("vllm/vllm-openai:v0.34.0", "max-model: 8192\n") == {"maxModelLen": 8192}
    assert read("vllm/vllm-openai:v0.34.0", "enable-chunked: false\n", api) == {}  # `--no-KEY` exact (hunt102 F6)


def test_memory_env_vars_are_noted() -> None:
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.20.0",
                "args": ["--model", "Qwen/Qwen3-8B"],
                "env": [{"name": "VLLM_ALLREDUCE_USE_FLASHINFER", "value": "0"}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None
    assert "VLLM_ALLREDUCE_USE_FLASHINFER=0: fitgate sizes vLLM with its default (1)" in r.notes


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("vllm/vllm-openai:v0.19.0", "0.19.0"),
        ("vllm/vllm-openai:v0.8.5.post1", "0.8.5"),
        ("vllm/vllm-openai:latest", "0.34.0"),
        ("vllm/vllm-openai", "0.34.0"),
        ("registry.example.com:5000/vllm/vllm-openai:v0.10.2@sha256:abc", "0.10.2"),
        ("rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", "0.8.5"),
        ("vllm/vllm-openai:sha-1234", None),
    ],
)
def test_release_of_image(image: str, release: str | None) -> None:
    assert release_of_image(image)[0] == release


# ------------------------------------------------------------------------------------------------
# Bad input: a clear verdict or error, never a crash


def test_a_script_fitgate_cannot_split_is_unknown_not_invalid() -> None:
    # hunt207 F1 / F2: fitgate's splitter (shlex) fails on scripts bash and dash run (a ")" quoted inside $( ... ),
    # bash's $'...'), so a failure to split is fitgate's, never a refusal: Unknown, naming it. An unclosed quote
    # (which the shell refuses too) reads the same: fitgate cannot tell the two apart.
    for script in ("vllm serve 'm", 'X=$(echo ")"); vllm serve m', "SEP=$'it\\'s'; vllm serve m"):
        r = read_workload(
            deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "command": ["bash", "-c", script]})
        )
        assert r is not None and r.invalid is None and r.unknown is not None, script
        assert "fitgate cannot split the shell script into words" in r.unknown, r.unknown


def test_here_document_forms_the_shell_takes_are_read() -> None:
    # hunt207 F1: <<\EOF and a delimiter with "-" were missed, so a Jinja chat template's body (quotes and all) was
    # lexed as shell and the Deployment was Invalid; bash and dash run both
    for opener, end in (("<<\\EOF", "EOF"), ("<<'END-TPL'", "END-TPL")):
        script = (
            f"cat > /tmp/t.jinja {opener}\n{{% if x %}}You're helpful{{% endif %}}\n{end}\n"
            "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --chat-template /tmp/t.jinja"
        )
        r = read_workload(
            deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "command": ["bash", "-c", script]})
        )
        assert r is not None and r.invalid is None and r.unknown is None and r.model == "Qwen/Qwen3-8B", (opener, r)


def test_no_model_is_vllms_default() -> None:
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.1",
                "command": ["vllm", "serve"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None and r.model == "Qwen/Qwen3-0.6B"
    assert "no model given: vLLM serves its default, Qwen/Qwen3-0.6B" in r.notes


@pytest.mark.parametrize("limit", [0, None])
def test_gpu_limit_zero_or_missing_does_not_fit(limit: int | None) -> None:
    resources = {"limits": {"nvidia.com/gpu": limit}} if limit is not None else {}
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.1",
                "args": ["--model", "m", "-tp", "2"],
                "resources": resources,
            }
        )
    )
    assert r is not None
    shortfall = r.gpu_shortfall()
    assert shortfall is not None and shortfall.startswith("vLLM needs 2 GPUs (TP 2 x PP 1) but container vllm")
    assert shortfall.endswith("set nvidia.com/gpu: 2")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "m", "--max-model-len", "lots"], "--max-model-len: expected a whole number (got 'lots')"),
        (["--model", "m", "--gpu-memory-utilization", "high"], "--gpu-memory-utilization: expected a number"),
        (["--model", "m", "--dtype", "int3"], "--dtype: expected one of auto, half"),
    ],
)
def test_bad_flag_values_are_invalid(args: list[str], message: str) -> None:
    r = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "args": args}))
    assert r is not None and r.invalid is not None and message in r.invalid


@pytest.mark.parametrize(
    ("value", "tp", "mml"), [("+1", 1, 1), ("+4096", 4096, 4096), ("4_096", 4096, 4096), (" 2 ", 2, 2)]
)
def test_whole_numbers_vllms_int_accepts_are_read(value: str, tp: int, mml: int) -> None:
    # hunt83 F9: vLLM parses -tp with type=int and --max-model-len with human_readable_int, which ends in int(value)
    # (vllm/utils/argparse_utils.py 0.34 L30-74); Python's int() takes a sign, underscores and blanks: was Invalid
    args = ["--model", "m", "--tensor-parallel-size", value, "--max-model-len", value]
    r = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "args": args}))
    assert r is not None and r.invalid is None and r.unknown is None, (r.invalid, r.unknown)
    assert (r.serving["tensorParallelSize"], r.serving["maxModelLen"]) == (tp, mml)


def test_a_19_digit_whole_number_is_unknown_not_invalid() -> None:
    args = ["--model", "m", "--max-model-len", "1" + "0" * 18]  # 10**18: a whole number, past the 18 digits read
    r = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "args": args}))
    assert r is not None and r.invalid is None
    assert r.unknown is not None and "--max-model-len: a number of 19 digits, past what fitgate reads (18)" in r.unknown


def test_bad_gpu_limit_is_invalid() -> None:
    r = read_workload(
        deployment(
            {"name": "vllm", "image": "vllm/vllm-openai:v0.19.1", "resources": {"limits": {"nvidia.com/gpu": "two"}}}
        )
    )
    assert r is not None and r.invalid is not None
    assert "resources.limits.nvidia.com/gpu: expected a whole number of GPUs (got 'two')" in r.invalid


def test_a_release_outside_the_table_is_sized_never_invalid() -> None:
    # a gate never denies for the release alone: 0.40.0 (newer than the table) is read as given and the plan
    # sizes it as the newest modelled release with a note (sizing.versions.resolve_release); 0.4.0 (older
    # than the table) is sized as 0.5.0, whose V0 worker budgets memory as 0.4's, with a warning
    r = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.40.0", "args": ["--model", "m"]}))
    assert r is not None and r.invalid is None and r.vllm_version == "0.40.0" and r.model == "m"
    assert any("newer than the newest release fitgate models" in w for w in r.warnings)
    old = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.4.0", "args": ["--model", "m"]}))
    assert old is not None and old.invalid is None and old.vllm_version == "0.4.0"
    assert any("vLLM 0.4.0" in w and "sized with 0.5.0's accounting" in w for w in old.warnings)


def test_fingerprint_ignores_replicas_and_labels() -> None:
    a = first("production-stack-deployment.yaml")
    b = copy.deepcopy(a)
    b["spec"]["replicas"] = 5
    b["metadata"]["labels"]["extra"] = "x"
    b["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    ra, rb = read_workload(a), read_workload(b)
    assert ra is not None and rb is not None and ra.fingerprint == rb.fingerprint
    c = copy.deepcopy(a)
    command = c["spec"]["template"]["spec"]["containers"][0]["command"]
    command[command.index("--max-model-len") + 1] = "65536"
    rc = read_workload(c)
    assert rc is not None and rc.fingerprint != ra.fingerprint and rc.serving["maxModelLen"] == 65536


def test_extra_pod_template_path_for_other_crds() -> None:
    obj = {
        "kind": "RayService",
        "metadata": {"name": "r"},
        "spec": {
            "head": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "v", "command": ["vllm", "serve", "Qwen/Qwen3-8B"], "image": "my/vllm:1"}
                        ]
                    }
                }
            }
        },
    }
    assert read_workload(obj) is None
    r = read_workload(obj, extra_paths={"RayService": "spec.head.template.spec"})
    assert r is not None and r.model == "Qwen/Qwen3-8B"


def test_llm_inference_service_single_gpu() -> None:
    # KServe sample: spec.model.uri hf://Qwen/Qwen2.5-7B-Instruct, template main container with 1 GPU
    r = read_workload(first("llmisvc-qwen2-7b-gpu.yaml"))
    assert r is not None and r.invalid is None and r.unknown is None
    assert (r.kind, r.model, r.gpus_per_replica, r.pods_per_replica) == (
        "LLMInferenceService",
        "Qwen/Qwen2.5-7B-Instruct",
        1,
        1,
    )
    assert parse_spec(r.spec()).model.name == "Qwen/Qwen2.5-7B-Instruct"


def test_llm_inference_service_multi_node_data_parallel_with_additional_args() -> None:
    # KServe sample: parallelism data 16 / dataLocal 8 / tensor 1, a worker, 8 GPUs per pod, and engine
    # flags in VLLM_ADDITIONAL_ARGS
    r = read_workload(first("llmisvc-dp-ep-qwen3-multi-node.yaml"))
    assert r is not None and r.invalid is None
    assert r.model == "Qwen/Qwen3-Coder-30B-A3B-Instruct"
    # spec.parallelism data / dataLocal / expert are vLLM's -dp / -dpl / --enable-expert-parallel (docs/parallelism.md)
    # its --enforce-eager is sized since issue 20
    assert r.serving == {
        "tensorParallelSize": 1,
        "gpuMemoryUtilization": 0.85,
        "maxModelLen": 8192,
        "dataParallelSize": 16,
        "dataParallelSizeLocal": 8,
        "enableExpertParallel": True,
        "enforceEager": True,
    }
    assert (r.pods_per_replica, r.gpus_per_replica, r.data_parallel, r.parallel_gpus) == (2, 16, 16, 16)
    assert r.gpu_shortfall() is None
    assert not any("--enforce-eager" in n for n in r.notes)
    short = copy.deepcopy(first("llmisvc-dp-ep-qwen3-multi-node.yaml"))
    short["spec"]["worker"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    short["spec"]["template"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    rs = read_workload(short)
    assert rs is not None
    assert rs.gpu_shortfall() == (
        "vLLM needs 16 GPUs (TP 1 x PP 1 x DP 16) but its 2 pods ask for 8 nvidia.com/gpu in all; "
        "set nvidia.com/gpu: 8 on each pod"
    )


def test_dynamos_vllm_worker_is_read_in_any_pod() -> None:
    """ai-dynamo/dynamo@2ac51dda recipes/gpt-oss-120b/vllm/disagg-h200-agentic runs `python3 -m dynamo.vllm` engines in
    a plain Pod, skipped as "runs no vLLM server" (hunt114 F2); Dynamo's SGLang worker is not vLLM."""
    worker = {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1",
              "command": ["python3", "-m", "dynamo.vllm"], "args": ["--model", "openai/gpt-oss-120b"],
              "resources": {"limits": {"nvidia.com/gpu": "1"}}}  # fmt: skip
    r = read_workload(deployment(worker))
    assert r is not None and r.model == "openai/gpt-oss-120b" and r.vllm_version == "0.23.0"
    shell = {**worker, "command": ["/bin/sh", "-c"], "args": ["python3 -m dynamo.vllm --model openai/gpt-oss-120b &"]}
    assert (rs := read_workload(deployment(shell))) is not None and rs.model == "openai/gpt-oss-120b"
    assert read_workload(deployment({**worker, "command": ["python3", "-m", "dynamo.sglang"]})) is None


def test_vllm_server_run_as_a_script_on_a_vllm_image() -> None:
    """OPEA's ROCm chart runs its copy of vLLM's server as a script (opea-project/GenAIInfra
    helm-charts/common/vllm/rocm-values.yaml: image opea/vllm-rocm, command python3 /workspace/api_server.py): read,
    not skipped (hunt112); vLLM's own source path is read on any image; another image's api_server.py is not vLLM."""
    args = ["--swap-space", "16", "--dtype", "float16", "--model", "meta-llama/Meta-Llama-3-8B-Instruct",
            "--max-model-len", "4096"]  # fmt: skip
    opea = {"name": "vllm", "image": "opea/vllm-rocm:latest", "command": ["python3", "/workspace/api_server.py"],
            "args": args, "resources": {"limits": {"amd.com/gpu": "1"}}}  # fmt: skip
    r = read_workload(deployment(opea))
    assert r is not None and r.how == "python /workspace/api_server.py" and r.invalid is None
    assert r.model == "meta-llama/Meta-Llama-3-8B-Instruct" and r.serving["maxModelLen"] == 4096
    source = {**opea, "image": "python:3.12", "command": ["python3", "/src/vllm/entrypoints/openai/api_server.py"]}
    assert (rs := read_workload(deployment(source))) is not None and rs.model == opea["args"][5]
    assert read_workload(deployment({**opea, "image": "example/sglang:1"})) is None


# kaito-project/kaito@cfad92e8e9bba2f5f1d0537a3583d487a96366bc:pkg/workspace/inference/preset_inferences_test.go,
# the commands KAITO's controller writes ("test-model-download-a100/vllm" and "test-model-download-distributed/vllm")
KAITO_SINGLE = (
    "python3 /workspace/vllm/inference_api.py --gpu-memory-utilization=0.84 --max-model-len=2048 "
    "--tensor-parallel-size=2 --model=test-repo/test-model-a100 --code-revision=test-revision "
    "--download-dir=/workspace/weights --kaito-config-file=/mnt/config/inference_config.yaml"
)
KAITO_DISTRIBUTED = (
    'if [ "${POD_INDEX}" = "0" ]; then  --ray_cluster_size=3 --ray_port=6379; python3 /workspace/vllm/inference_api.py '
    "--model=test-repo/test-model --code-revision=test-revision --download-dir=/workspace/weights "
    "--gpu-memory-utilization=0.84 --max-model-len=2048 --kaito-config-file=/mnt/config/inference_config.yaml "
    "--pipeline-parallel-size=3 --tensor-parallel-size=2; else  --ray_address=testWorkspace-0.testWorkspace-headless"
    ".kaito.svc.cluster.local --ray_port=6379; fi"
)


def test_kaito_deployment() -> None:
    r = read_workload(
        deployment(
            {
                "name": "m",
                "image": "mcr.microsoft.com/aks/kaito/kaito-base:0.4.2",
                "command": ["/bin/sh", "-c", KAITO_SINGLE],
                "resources": {"limits": {"nvidia.com/gpu": "2"}},
            }
        )
    )
    assert r is not None and r.how == "KAITO inference_api.py" and r.invalid is None
    assert r.model == "test-repo/test-model-a100"
    assert r.serving == {"gpuMemoryUtilization": 0.84, "maxModelLen": 2048, "tensorParallelSize": 2}
    assert r.gpu_shortfall() is None


def test_kaito_multi_node_statefulset_is_one_replica_of_its_ray_cluster() -> None:
    sts = deployment(
        {
            "name": "m",
            "image": "mcr.microsoft.com/aks/kaito/kaito-base:0.4.2",
            "command": ["/bin/sh", "-c", KAITO_DISTRIBUTED],
            "resources": {"limits": {"nvidia.com/gpu": "2"}},
        }
    )
    sts["kind"] = "StatefulSet"
    r = read_workload(sts)
    assert r is not None and r.serving["pipelineParallelSize"] == 3 and r.serving["tensorParallelSize"] == 2
    # 3 pods x 2 GPUs hold TP 2 x PP 3
    assert (r.pods_per_replica, r.gpus_per_replica, r.gpu_shortfall()) == (3, 6, None)


# hunt54 F1: a Ray head pod that starts vLLM over the Ray cluster's pods (the pattern of LWS's vLLM example,
# kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml, written as a plain StatefulSet): each pod holds one node's GPUs
RAY_HEAD = (
    'if [ "${HOSTNAME##*-}" = "0" ]; then ray start --head --port=6379; vllm serve deepseek-ai/DeepSeek-R1 '
    "--tensor-parallel-size 8 --pipeline-parallel-size 2{backend} --max-model-len 16384; "
    "else ray start --address=vllm-r1-0.vllm-r1:6379 --block; fi"
)


@pytest.mark.parametrize("backend", [" --distributed-executor-backend ray", ""])
def test_a_ray_head_spans_the_ray_clusters_pods(backend: str) -> None:
    sts = deployment(
        {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.8.5",
            "command": ["bash", "-c", RAY_HEAD.replace("{backend}", backend)],
            "resources": {"limits": {"nvidia.com/gpu": "8"}},
        }
    )
    sts["kind"] = "StatefulSet"
    r = read_workload(sts)
    assert r is not None and r.invalid is None and r.unknown is None
    # TP 8 x PP 2 = 16 workers; 16 / 8 GPUs a pod = 2 pods, sized per GPU as one replica
    assert (r.pods_per_replica, r.gpus_per_replica, r.gpu_shortfall()) == (2, 16, None)
    assert any("span pods" in n for n in r.notes)


def test_nnodes_spans_pods_and_a_single_pod_engine_still_needs_its_gpus() -> None:
    # vLLM's multi-node multiprocessing (--nnodes 2 --node-rank R): TP 16 over 2 nodes of 8 (arg_utils.py 0.33.0)
    args = ["serve", "deepseek-ai/DeepSeek-R1", "-tp", "16", "--nnodes", "2", "--node-rank", "0"]
    spread = read_workload(
        deployment(
            {
                "name": "v",
                "image": "vllm/vllm-openai:v0.12.0",
                "command": ["vllm"],
                "args": args,
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }
        )
    )
    assert spread is not None and (spread.pods_per_replica, spread.gpu_shortfall()) == (2, None)
    # no Ray, no --nnodes: the engine's 16 workers need 16 GPUs in its pod (the mp executor stays on one node)
    alone = read_workload(
        deployment(
            {
                "name": "v",
                "image": "vllm/vllm-openai:v0.12.0",
                "command": ["vllm"],
                "args": args[:4],
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }
        )
    )
    assert alone is not None and alone.gpu_shortfall() is not None and "needs 16 GPUs" in alone.gpu_shortfall()


# ------------------------------------------------------------------------------------------------
# Data parallelism: the command lines of vLLM's docs/serving/data_parallel_deployment.md
# (vllm-project/vllm@01e4fce07423dafcc832600ba05159fb28dc1126), flags as vLLM 0.33's arg_utils.py reads them


@pytest.mark.parametrize(
    ("args", "limit", "ranks", "need"),
    [
        # "This will run DP=4, TP=2 on a single 8-GPU node": 4 ranks x TP 2 = 8 GPUs in the pod
        ("--data-parallel-size 4 --tensor-parallel-size 2", 8, 4, 8),
        ("-dp 4 -tp 2", 8, 4, 8),  # the short flags (arg_utils.py L1241, L1208-1210)
        # "DP ranks 0 and 1 on the head node": this pod runs 2 of the 4 ranks -> 2 x TP 1 = 2 GPUs
        ("--data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 10.99.48.128", 2, 2, 2),
        ("--headless -dp 4 -dpl 2 -dpr 2 --data-parallel-address 10.99.48.128", 2, 2, 2),
        # "only the API server on the first node": no rank, no GPU
        ("--data-parallel-size 4 --data-parallel-size-local 0", 0, 0, 0),
        # external load balancing: one rank per process (arg_utils.py L2463-2483: local size 1)
        ("--data-parallel-size 2 --data-parallel-rank 0 --port 8000", 1, 1, 1),
        # --nnodes 2 without -dpl: world 4 x TP 2 = 8 / 2 nodes = 4 GPUs -> 2 ranks here (L2441-2446)
        ("--data-parallel-size 4 -tp 2 --nnodes 2 --node-rank 0", 4, 2, 4),
    ],
)
def test_data_parallel_ranks_of_one_pod(args: str, limit: int, ranks: int, need: int) -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", *args.split()],
        "resources": {"limits": {"nvidia.com/gpu": str(limit)}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None, r
    assert (r.data_parallel, r.parallel_gpus) == (ranks, need)
    assert r.gpu_shortfall() is None
    if ranks > 1:
        assert parse_spec(r.spec()).placement.data_parallel_size == ranks
    if need:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(need - 1)
        short = read_workload(deployment(container))
        assert short is not None and short.gpu_shortfall() is not None
        assert f"vLLM needs {need} GPU" in short.gpu_shortfall()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("-dp -3", "--data-parallel-size: expected a whole number >= 1 (got '-3')"),
        ("-dp 0", "--data-parallel-size: expected a whole number >= 1 (got '0')"),
        ("-dp 4 -dpl -1", "--data-parallel-size-local: expected a whole number >= 0 (got '-1')"),
        ("-dp 4 --nnodes -2", "--nnodes: expected a whole number >= 0 (got '-2')"),
    ],
)
def test_negative_data_parallel_flags_are_invalid_not_clamped(args: str, message: str) -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", *args.split()],
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is not None and message in r.invalid


def test_data_parallel_shortfall_names_dp() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--data-parallel-size=4", "--tensor-parallel-size=2"],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    r = read_workload(deployment(container))
    assert r is not None
    # 4 ranks x TP 2 x PP 1 = 8
    assert r.gpu_shortfall() == (
        "vLLM needs 8 GPUs (TP 2 x PP 1 x DP 4) but container vllm asks for 2 nvidia.com/gpu; set nvidia.com/gpu: 8"
    )


def test_lws_data_parallel_over_the_group() -> None:
    # an LWS group of 2 pods, each `-dp 4 -dpl 2`: 4 ranks in the replica, 2 x TP 2 = 4 GPUs per pod
    obj = first("lws-vllm-gpu.yaml")
    lwt = obj["spec"]["leaderWorkerTemplate"]
    lwt["size"] = 2
    for role in ("leaderTemplate", "workerTemplate"):
        c = lwt[role]["spec"]["containers"][0]
        c["resources"]["limits"]["nvidia.com/gpu"] = "4"
    lead = lwt["leaderTemplate"]["spec"]["containers"][0]
    lead["command"] = ["sh", "-c", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 -dp 4 -dpl 2"]
    r = read_workload(obj)
    assert r is not None and r.invalid is None, r
    assert (r.pods_per_replica, r.gpus_per_replica, r.data_parallel, r.parallel_gpus) == (2, 8, 4, 8)
    assert r.gpu_shortfall() is None
    only_local = copy.deepcopy(obj)
    only_local["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 -dpl 2",
    ]
    r2 = read_workload(only_local)
    assert r2 is not None and r2.data_parallel == 4  # 2 local ranks x 2 pods


def test_origins_say_where_each_value_was_written() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.1",
        "args": ["--config", "/etc/vllm/config.yaml", "--max-model-len", "$(LEN)", "-tp", "$(TP)", "--dtype", "half"],
        "env": [{"name": "LEN", "value": "8192"}, {"name": "TP", "value": "2"}],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    obj = deployment(container, volumes=[{"name": "cfg", "configMap": {"name": "vllm-config"}}])
    data = {"config.yaml": "model: Qwen/Qwen3-8B\nmax_model_len: 65536\nkv_cache_dtype: auto\n"}
    r = read_workload(obj, {"vllm-config": data})
    assert r is not None and r.unknown is None
    assert r.origins == {
        "--max-model-len": ("env", "LEN", "$(LEN)"),  # the command line wins over the file's max_model_len
        "--tensor-parallel-size": ("env", "TP", "$(TP)"),  # -tp read as its long name
        "--kv-cache-dtype": ("config", "vllm-config", "config.yaml", "kv_cache_dtype"),
        "--model": ("config", "vllm-config", "config.yaml", "model"),
    }
    assert "--dtype" not in r.origins  # a literal on the command line
    from fitgate.operator.decision.workloads import edit_of  # noqa: PLC0415

    # a flag written nowhere yet goes where the user keeps the rest: vLLM's --config keys are the flags' names
    assert edit_of(r, "--max-num-seqs", "16") == (
        "add `max-num-seqs: 16` in ConfigMap vllm-config key config.yaml (or `--max-num-seqs 16` to the args)"
    )


def test_llm_inference_service_origins_are_its_fields_and_additional_args() -> None:
    from fitgate.operator.decision.workloads import edit_of  # noqa: PLC0415

    r = read_workload(first("llmisvc-dp-ep-qwen3-multi-node.yaml"))
    assert r is not None
    assert r.origins["--tensor-parallel-size"] == ("field", "spec.parallelism.tensor")
    assert r.origins["--max-model-len"] == ("env-args", "VLLM_ADDITIONAL_ARGS")
    assert edit_of(r, "--tensor-parallel-size", "2") == "set spec.parallelism.tensor: 2"
    assert edit_of(r, "--max-model-len", "4096") == (
        "change `--max-model-len 8192` to `--max-model-len 4096` in env VLLM_ADDITIONAL_ARGS"
    )
    assert edit_of(r, "--kv-cache-dtype", "fp8") == "add `--kv-cache-dtype fp8`"  # written nowhere yet


def test_dra_claim_template_tolerations_and_hami_limits_reach_the_placement() -> None:
    claimed = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["meta-llama/Llama-3.1-8B-Instruct"],
        "resources": {"claims": [{"name": "gpu"}]},
    }
    r = read_workload(
        deployment(
            claimed,
            resourceClaims=[
                {"name": "other", "resourceClaimTemplateName": "nic"},
                {"name": "gpu", "resourceClaimTemplateName": "h100"},
            ],
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ],
        )
    )
    assert r is not None and r.gpu_shortfall() is None  # no nvidia.com/gpu limit: the claim's count is checked later
    placement = parse_spec(r.spec()).placement
    assert placement.resource_claim_template_name == "h100"  # the claim the vLLM container uses
    assert [(t.key, t.operator, t.effect) for t in placement.tolerations] == [
        ("nvidia.com/gpu", "Exists", "NoSchedule")
    ]
    hami = {**claimed, "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480"}}}
    r = read_workload(deployment(hami))
    assert r is not None and parse_spec(r.spec()).placement.gpu_share is not None
    assert parse_spec(r.spec()).placement.gpu_share.hami_gpu_mem_mib == 20480
    # hunt131 F1: the API server writes 20000 in canonical form, "20k", and that reaches the webhook; HAMi reads it as a
    # quantity (20000 MiB), so it is one: it was Invalid, and the webhook denied a running pod
    canonical = {**claimed, "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20k"}}}
    r = read_workload(deployment(canonical))
    assert r is not None and r.invalid is None
    share = parse_spec(r.spec()).placement.gpu_share
    assert share is not None and share.hami_gpu_mem_mib == 20000
    bad = {**claimed, "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "lots"}}}
    r = read_workload(deployment(bad))
    assert r is not None and r.invalid is not None and "nvidia.com/gpumem: expected a whole number" in r.invalid


def test_dra_claims_per_pod_and_claims_beside_a_gpu_limit() -> None:
    # hunt50 F1: llm-d's GKE decode (guides/pd-disaggregation/.../gke/base/kustomization.yaml): TP 4 over four
    # claims of the one-GPU + one-NIC template, no nvidia.com/gpu limit
    claims = [{"name": f"gke-rdma-claim-{i}"} for i in range(4)]
    decode = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["openai/gpt-oss-120b", "--tensor-parallel-size=4"],
        "resources": {"claims": claims},
    }
    pod_claims = [{"name": c["name"], "resourceClaimTemplateName": "gke-rdma-template"} for c in claims]
    r = read_workload(deployment(decode, resourceClaims=pod_claims))
    assert r is not None and (r.claim_template, r.claim_copies, r.gpu_shortfall()) == ("gke-rdma-template", 4, None)
    assert parse_spec(r.spec()).placement.resource_claims_per_pod == 4
    # hunt50 F2-F3: GPUs from the device plugin beside a NIC claim (GKE A4X) or an IMEX channel (a ComputeDomain):
    # the claim is no GPU source, the limit is
    imex = {**decode, "resources": {"claims": [{"name": "imex"}], "limits": {"nvidia.com/gpu": "4"}}}
    r = read_workload(
        deployment(imex, resourceClaims=[{"name": "imex", "resourceClaimTemplateName": "imex-channel-0"}])
    )
    assert r is not None and (r.claim_template, r.gpus_per_replica, r.gpu_shortfall()) == (None, 4, None)
    assert "resourceClaimTemplateName" not in r.spec().get("placement", {})


def test_runai_annotations_of_the_pod_template_are_its_share() -> None:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.19.0", "args": ["meta-llama/Llama-3.1-8B-Instruct"]}
    obj = deployment(container)
    obj["spec"]["template"]["metadata"] = {"annotations": {"gpu-fraction": "0.5"}}
    r = read_workload(obj)
    assert r is not None
    share = parse_spec(r.spec()).placement.gpu_share
    assert share is not None and share.runai_gpu_fraction == 0.5
    obj["spec"]["template"]["metadata"] = {"annotations": {"gpu-fraction": "half"}}
    r = read_workload(obj)
    assert r is not None and r.invalid is not None and "gpu-fraction: expected a fraction" in r.invalid
    # hunt81 F3: Run:ai's gpu-fraction-num-devices gives the pod that many devices, each with the fraction: TP 2 on two
    # halves was denied "set nvidia.com/gpu: 2", which KAI refuses beside gpu-fraction
    container["args"] = [*container["args"], "--tensor-parallel-size", "2"]
    obj = deployment(container)
    obj["spec"]["template"]["metadata"] = {"annotations": {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}}
    r = read_workload(obj)
    assert r is not None and r.invalid is None and r.gpu_shortfall() is None and r.gpus_per_replica == 2, r
    obj["spec"]["template"]["metadata"]["annotations"]["gpu-fraction-num-devices"] = "0"
    r = read_workload(obj)
    assert r is not None and r.invalid is not None and "gpu-fraction-num-devices: expected a whole number" in r.invalid


def test_extensible_kv_cache_flag_reaches_the_spec() -> None:
    # vLLM 0.34's --[no-]enable-extensible-kv-cache (arg_utils.py 0.34.0 L1413): off, the 0.33 budget applies
    args = ["--model", "m", "--no-enable-extensible-kv-cache", "--max-model-len", "8192"]
    r = read_workload(deployment({"name": "vllm", "image": "vllm/vllm-openai:v0.34.0", "args": args}))
    assert r is not None and r.invalid is None and r.serving["enableExtensibleKvCache"] is False
    assert parse_spec(r.spec()).serving.enable_extensible_kv_cache is False


def test_cuda_graph_settings_and_max_model_len_auto_reach_the_spec() -> None:
    # llm-d's wide-EP decode runs FULL_DECODE_ONLY; KAITO passes --max-model-len=auto: both sized as vLLM runs them
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.25.1",
                "args": [
                    "Qwen/Qwen3-8B",
                    "--max-model-len=auto",
                    "--compilation-config",
                    '{"cudagraph_mode": "FULL_DECODE_ONLY"}',
                    "--cudagraph-capture-sizes",
                    "1",
                    "2",
                    "4",
                ],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None and r.invalid is None and r.unknown is None, r
    serving = parse_spec(r.spec()).serving
    assert serving.max_model_len == "auto"
    assert serving.cudagraph_mode == "FULL_DECODE_ONLY" and serving.cudagraph_capture_sizes == [1, 2, 4]


def test_the_cuda_graph_estimate_variable_is_sized() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.25.1",
        "args": ["Qwen/Qwen3-8B"],
        "env": [{"name": "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "value": "0"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None
    assert parse_spec(r.spec()).serving.cudagraph_memory_estimate is False
    assert not any("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0: fitgate sizes" in n for n in r.notes)


def test_hunt11_argument_spellings_vllm_reads() -> None:
    # hunt11 (2026-12-05), each read as vLLM's own parser does:
    # D1 --limit-mm-per-prompt image=1 (the key=value form before 0.10: arg_utils.py 0.9.2 L57-66, L86-92);
    # D2 --rope-scaling JSON merged into the overrides (config.py 0.10.0 L501-513; gone in 0.11.1);
    # D3 a unique prefix of a long option (argparse's allow_abbrev, kept by vLLM: --tensor_parallel 2).
    # Runs they come from: D1 dstack's Llama-3.2-11B-Vision service (dstackai/dstack examples, vllm-openai of Nov 2024,
    # its README shows the running service answering) and vllm#15737 (0.8.2 printing image=5,video=5); D2 Qwen3's
    # YaRN guide command, reported running at 0.8.5 in vllm-ascend #760 / #1024; D3 vllm#28228 (a 48B-A3B AWQ model
    # served with --tensor_parallel 2 on 2 x RTX 3090, ~19 GiB a card)
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.9.2",
        "args": [
            "Qwen/Qwen3-8B",
            "--tensor_parallel",
            "2",
            "--rope-scaling",
            '{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}',
            "--max-model-len",
            "131072",
            "--limit-mm-per-prompt",
            "image=1,video=0",
        ],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None and r.unknown is None, r
    spec = parse_spec(r.spec())
    assert spec.serving.tensor_parallel_size == 2 and spec.serving.max_model_len == 131072
    assert r.hf_overrides == {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    }
    assert spec.serving.multimodal is not None and dict(spec.serving.multimodal.limit_per_prompt or {}) == {
        "image": 1,
        "video": 0,
    }
    assert any("key=value" in n for n in r.notes)
    container["args"] = ["Qwen/Qwen3-8B", "--max-num", "4"]  # --max-num-seqs or --max-num-batched-tokens: left as is
    r = read_workload(deployment(container))
    assert r is not None and "--max-num" in r.args and "--max-num-seqs" not in r.args


def test_limit_mm_per_prompt_image_size_reaches_the_spec() -> None:
    # hunt178 F2: the configurable form's width x height (vllm#25631) is the size the encoder is profiled at
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.34.0",
        "args": [
            "Qwen/Qwen3-VL-8B-Instruct",
            '--limit-mm-per-prompt={"image": {"count": 1, "width": 512, "height": 384}, "video": 0}',
        ],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None, r
    mm = parse_spec(r.spec()).serving.multimodal
    assert mm is not None and mm.profile_image_pixels == 512 * 384 and dict(mm.limit_per_prompt or {})["image"] == 1


def test_a_rope_theta_that_is_no_base_is_noted_not_sized() -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.9.2",
        "args": ["Qwen/Qwen3-8B", "--rope-theta", "nan"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None and not r.hf_overrides
    assert any("--rope-theta 'nan': not a number above 0, at most 1e+12" in n for n in r.notes)
    container["args"] = ["Qwen/Qwen3-8B", "--rope-theta", "5000000"]
    r = read_workload(deployment(container))
    assert r is not None and r.hf_overrides == {"rope_theta": 5000000.0}


def test_dotted_json_flags_are_merged_as_vllm_merges_them() -> None:
    # hunt12 G2: llm-d's GLM-5.2 guide and vLLM's recipes pass `--speculative-config.method mtp` (FlexibleArgumentParser
    # turns --flag.key value into --flag '{"key": value}', merging every key of a flag and appending them after all
    # other args, so they win over a whole JSON given earlier: vllm/utils/argparse_utils.py 0.34.0 L410-499). Before,
    # the MTP layer was not counted.
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.34.0",
        "args": [
            "Qwen/Qwen3-8B",
            "--speculative-config",
            '{"method": "eagle3", "num_speculative_tokens": 3}',
            "--speculative_config.method",
            "ngram",
            "--speculative-config.num_speculative_tokens=2",
            "-cc.cudagraph_mode",
            "PIECEWISE",
            "--hf-overrides.max_position_embeddings",
            "64k",
        ],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None, r
    spec = parse_spec(r.spec())
    # the dotted keys replace the whole JSON given before them: ngram with 2 tokens, not eagle3 with 3
    assert spec.serving.speculative_config is not None
    assert (spec.serving.speculative_config.method, spec.serving.speculative_config.num_speculative_tokens) == (
        "ngram",
        2,
    )
    assert spec.serving.cudagraph_mode == "PIECEWISE"
    assert r.hf_overrides == {"max_position_embeddings": 64000}  # human-readable 64k = 64 x 1000, as vLLM reads it


def test_dotted_flag_values_and_lists() -> None:
    flags = parse_engine_argv(
        "vllm serve",
        [
            "m",
            "--x.a.b",
            "1",
            "--x.a.c",
            "true",
            "--x.l+",
            "p,q",
            "--x.l+",
            "r",
            "--x.s",
            "text",
            "--x" + ".k" * 9,
            "1",
        ],
    ).flags
    # JSON where it parses (1, true), the string otherwise, "+" lists appended; a key deeper than the limit is dropped
    assert json.loads(flags["--x"]) == {"a": {"b": 1, "c": True}, "l": ["p", "q", "r"], "s": "text"}
    assert MAX_DOTTED_DEPTH == 8


@pytest.mark.parametrize(
    ("args", "runner"),
    [
        (["--runner", "pooling"], "pooling"),
        (["--task", "embed"], "pooling"),  # vLLM up to 0.10 (config.py 0.9.2 _TASK_RUNNER)
        (["--task=score"], "pooling"),
        (["--convert", "classify"], "pooling"),  # 0.10.2+ (config/model.py ConvertOption)
        # vLLM's default: the spec keeps auto, which the sizing core resolves (pooling where the checkpoint ships a
        # Sentence Transformers pooling module, resolve.runner_of; generate for Qwen3-8B)
        (["--task", "generate"], "auto"),
        (["--runner", "auto"], "auto"),
    ],
)
def test_the_pooling_runner_is_read_from_runner_task_and_convert(args: list[str], runner: str) -> None:
    # hunt17 G3: the webhook sized embedding servers (gte-Qwen2, Qwen3-Embedding) with the lm_head and the sampler's
    # warm-up that vLLM's pooling adapter drops (model_executor/models/adapters.py 0.11.0 L190-206); plan read
    # --runner pooling, the workload reader did not
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "args": ["Qwen/Qwen3-8B", *args],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None, r
    assert parse_spec(r.spec()).serving.runner == runner


def test_sh_c_positional_parameters_are_the_words_after_the_script() -> None:
    # hunt23 G4: a GLM-5.2 pod runs `bash -c '... exec vllm serve "$@"' vllm zai-org/GLM-5.2-FP8 --tensor-parallel-size=8`;
    # POSIX sh -c makes the word after the script $0 and the rest $1 ... ("$@"). fitgate read "$@" as the model.
    from fitgate.workloads.argv import find_engine_command  # noqa: PLC0415

    script = 'set -e; nvidia-smi; exec vllm serve "$@"'
    words = ["vllm", "zai-org/GLM-5.2-FP8", "--tensor-parallel-size=8", "--max-model-len", "65536"]
    engine = find_engine_command(["bash", "-c"], [script, *words], {}, image_entrypoint=False)
    assert engine is not None and engine.model == "zai-org/GLM-5.2-FP8"
    assert engine.flags["--tensor-parallel-size"] == "8" and engine.flags["--max-model-len"] == "65536"
    single = find_engine_command(["sh", "-c", "vllm serve $1 --max-model-len $2", "sh", "Qwen/Qwen3-8B", "8192"], [], {},
                                 image_entrypoint=False)  # fmt: skip
    assert single is not None and single.model == "Qwen/Qwen3-8B" and single.flags["--max-model-len"] == "8192"


def test_a_model_the_same_script_downloads_is_read_as_its_repo() -> None:
    # hunt23 G2: `huggingface-cli download deepseek-ai/DeepSeek-V3 --local-dir /models && vllm serve --model /models`
    # was Unknown ("a path inside the container"); the directory holds that repo's files
    from fitgate.workloads.argv import find_engine_command  # noqa: PLC0415

    script = "pip install -q hf_transfer; huggingface-cli download Qwen/Qwen3-8B --local-dir /models/q && "
    for serve in (
        "vllm serve /models/q/ --max-model-len 8192",
        "python3 -m vllm.entrypoints.openai.api_server --model /models/q",
    ):
        engine = find_engine_command(["sh", "-c", script + serve], [], {}, image_entrypoint=False)
        assert engine is not None and "downloaded from Qwen/Qwen3-8B" in engine.how
        assert (engine.model or engine.flags["--model"]) == "Qwen/Qwen3-8B"
    other = find_engine_command(["sh", "-c", script + "vllm serve /other"], [], {}, image_entrypoint=False)
    assert other is not None and other.model == "/other"  # a directory the script did not download: as written


def test_a_hugging_face_cache_path_names_its_repo_and_commit() -> None:
    # hunt52 G2: llmaz passes the model as its cache directory; Dynamo's llama-3-70b disaggregated recipe passes a
    # snapshot (huggingface_hub's layout: models--{org}--{name}/snapshots/{commit})
    sha = "0123456789abcdef0123456789abcdef01234567"
    path = f"/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/{sha}"
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.0",
                "args": [path],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None and r.unknown is None and (r.model, r.revision) == ("Qwen/Qwen3-8B", sha)
    assert any("the Hugging Face cache of Qwen/Qwen3-8B" in n for n in r.notes)
    r = read_workload(
        deployment(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.19.0",
                "args": ["/data/models--x"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        )
    )
    assert r is not None and r.unknown is not None and "a path inside the container" in r.unknown


def test_vllm_pp_layer_partition_env_reaches_the_serving() -> None:
    # hunt54 F3: LLMPQ's launcher sets VLLM_PP_LAYER_PARTITION=24,40 with --pipeline-parallel-size 2
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["meta-llama/Llama-3.1-8B-Instruct", "-pp", "2"],
        "env": [{"name": "VLLM_PP_LAYER_PARTITION", "value": "24, 8"}],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.serving["ppLayerPartition"] == "24,8"
    assert parse_spec(r.spec()).serving.pp_layer_partition == "24,8"


def test_a_flag_and_its_value_in_one_argv_word_is_what_vllm_refuses() -> None:
    # hunt55 F1: `- --tensor-parallel-size 2 # Run on 2 GPUs` in a YAML list is one word; argparse reads a word with
    # a space as a positional, so vLLM exits "unrecognized arguments" (it was dropped and TP 1 sized instead)
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.7.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size 2"],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is not None and "'--tensor-parallel-size 2' is one word" in r.invalid
    assert "--tensor-parallel-size=2" in r.invalid
    container["args"] = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size=2"]
    r = read_workload(deployment(container))
    assert r is not None and r.invalid is None and r.serving["tensorParallelSize"] == 2


def test_bash_dash_c_double_dash_takes_the_script_after_it() -> None:
    # hunt60 F2: tpu-inference's manifests run `command: ["/bin/bash", "-c", "--"]` with the script in args; "--" was
    # read as the script and the pod "runs no vLLM server", hiding a DoesNotFit on GPUs
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "command": ["/bin/bash", "-c", "--"],
        "args": ["vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.model == "meta-llama/Llama-3.1-8B-Instruct" and r.serving["maxModelLen"] == 8192


def test_skip_mm_profiling_reaches_the_multimodal_settings() -> None:
    # hunt63 F1: the recipes' Qwen3.6 RTX 5090 profile (vllm-project/recipes PR #854) passes --skip-mm-profiling
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.19.0",
        "args": ["Qwen/Qwen3.5-35B-A3B", "--skip-mm-profiling"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    r = read_workload(deployment(container))
    assert r is not None and r.serving["multimodal"] == {"skipProfiling": True}
    assert parse_spec(r.spec()).serving.multimodal.skip_profiling  # type: ignore[union-attr]


@pytest.mark.parametrize("switch", ["-dph", "-dpe", "-ep"])
def test_data_parallel_switch_aliases_take_no_value(switch: str) -> None:
    # hunt93 F3: -dph / -dpe (and -ep) alias bool fields (arg_utils.py 0.34.0 L1299-1308, L1319-1323), so they are
    # switches; recorded as taking a value, `vllm serve -dph Qwen/Qwen3-30B-A3B` swallowed the model and sized
    # vLLM's default Qwen3-0.6B.
    cmd = parse_engine_argv("serve", [switch, "Qwen/Qwen3-30B-A3B", "-dp", "16", "-dpl", "8"])
    assert cmd.model == "Qwen/Qwen3-30B-A3B"
    assert cmd.flags[long_name(switch)] == "true" and cmd.flags["--data-parallel-size"] == "16"


def test_speculative_flags_in_every_spelling_vllm_takes() -> None:
    """hunt94: vLLM reads `--speculative-config.num-speculative-tokens 3` with the dashes as underscores (F1), `-sc.method`
    as --speculative-config's (F4), and sets `--spec-tokens 3` in a --speculative-config JSON given beside it (F5:
    fitgate let the split flag replace the JSON); a dotted key replaces a whole JSON (argparse keeps the last)."""
    from fitgate.sizing.speculative import parse_config  # noqa: PLC0415

    model = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    dashed = parse_engine_argv("serve", [model, "--speculative-config.method", "mtp",
                                         "--speculative-config.num-speculative-tokens", "3"])  # fmt: skip
    assert parse_config(dashed.flags["--speculative-config"]) == ("mtp", 3)
    short = parse_engine_argv("serve", [model, "-sc.method", "mtp", "-sc.num_speculative_tokens", "2"])
    assert parse_config(short.flags["--speculative-config"]) == ("mtp", 2)
    split = parse_engine_argv("serve", [model, "--speculative-config", '{"method": "mtp"}', "--spec-tokens", "3"])
    assert parse_config(split.flags["--speculative-config"]) == ("mtp", 3)
    replaced = parse_engine_argv("serve", [model, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 5}',
                                           "--speculative-config.num_speculative_tokens", "2"])  # fmt: skip
    assert json.loads(replaced.flags["--speculative-config"]) == {"num_speculative_tokens": 2}
    for unset in ("", "None", "null"):  # F8: vLLM takes these for no speculative decoding
        assert parse_config(unset) == (None, None)


def test_dotted_keys_of_a_config_file_fold_into_their_flag() -> None:
    # hunt94 F2: vLLM turns a --config YAML's keys into argv, so `speculative-config.method: mtp` is folded as the
    # command line's dotted flag; fitgate dropped it (only compilation-config's were read)
    from fitgate.workloads.flagvalues import config_file_flags  # noqa: PLC0415

    flags = config_file_flags({"speculative-config.method": "mtp", "speculative_config.num_speculative_tokens": 2,
                               "compilation-config.cudagraph_capture_sizes": [1, 2, 4], "max-model-len": 8192})  # fmt: skip
    assert json.loads(flags["--speculative-config"]) == {"method": "mtp", "num_speculative_tokens": 2}
    assert json.loads(flags["--compilation-config"]) == {"cudagraph_capture_sizes": [1, 2, 4]}
    assert flags["--max-model-len"] == "8192"
