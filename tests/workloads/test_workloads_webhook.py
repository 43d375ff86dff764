"""The vLLM workload webhook, its handlers called directly (kopf decorators return them unchanged)."""

from __future__ import annotations

import asyncio
import copy
import inspect
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from fitgate.operator.runtime import workload_handlers
from fitgate.settings import OperatorConfig
from tests.fitgate_operator.test_operator import H100, L4, changed, index, memo, on, state

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"
MANIFEST_FIXTURES = Path(__file__).parents[1] / "fixtures" / "manifests"
CHART = yaml.safe_load((FIXTURES / "production-stack-deployment.yaml").read_text())  # affinity: NVIDIA-L4


def review(
    obj: dict[str, Any], nodes: Any, m: kopf.Memo, mode: str = "enforce", old: dict[str, Any] | None = None
) -> list[str]:
    warnings: list[str] = []
    asyncio.run(
        workload_handlers.validate_workload(
            mode,
            body=kopf.Body(obj),
            old=kopf.Body(old) if old is not None else None,
            dryrun=False,
            warnings=warnings,
            memo=on(m, nodes),
        )
    )
    return warnings


def test_enforce_denies_a_misfit_with_numbers_and_the_fix_in_its_args() -> None:
    m = memo()
    with pytest.raises(kopf.AdmissionError) as exc:
        review(CHART, index(H100, L4), m)
    text = str(exc.value)
    assert exc.value.code == 403
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in text
    assert "smallest fix: change `--kv-cache-dtype auto` to `--kv-cache-dtype fp8`" in text
    assert 'fitgate_admission_requests_total{result="denied"} 1.0' in state(m).metrics.exposition().decode()


def test_warn_admits_a_misfit_with_a_warning() -> None:
    warnings = review(CHART, index(L4), memo(), mode="warn")
    assert warnings and "smallest fix: change `--kv-cache-dtype auto`" in warnings[0]
    assert warnings[0].startswith("fitgate: Deployment default/vllm-llama3-deployment-vllm")


def test_a_fit_is_admitted_silently() -> None:
    fits = copy.deepcopy(CHART)
    fits["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]["values"] = ["NVIDIA-H100-80GB-HBM3"]
    assert review(fits, index(H100, L4), memo()) == []


def test_gpu_limit_below_tp_is_denied_with_the_limit_to_set() -> None:
    short = copy.deepcopy(CHART)
    command = short["spec"]["template"]["spec"]["containers"][0]["command"]
    command[command.index("--tensor-parallel-size") + 1] = "2"
    with pytest.raises(kopf.AdmissionError, match=r"vLLM needs 2 GPUs .* set nvidia.com/gpu: 2"):
        review(short, index(H100), memo())


def test_object_annotation_overrides_and_object_path_needs_it() -> None:
    m = memo()
    off = copy.deepcopy(CHART)
    off["metadata"]["annotations"] = {"fitgate.io/validate": "off"}
    assert review(off, index(L4), m) == []  # opted out in an enforce namespace
    assert review(CHART, index(L4), m, mode="object") == []  # no annotation, namespace not labelled
    warn = copy.deepcopy(CHART)
    warn["metadata"]["annotations"] = {"fitgate.io/validate": "warn"}
    assert review(warn, index(L4), m, mode="object")  # annotated: warned


def test_replicas_only_update_is_not_evaluated_again() -> None:
    m = memo()
    scaled = copy.deepcopy(CHART)
    scaled["spec"]["replicas"] = 4
    scaled["metadata"]["labels"]["team"] = "a"
    assert review(scaled, index(L4), m, old=CHART) == []  # a misfit created before opt-in can still scale
    assert 'fitgate_admission_requests_total{result="unchanged"} 1.0' in state(m).metrics.exposition().decode()


def test_non_vllm_and_controlled_objects_are_untouched() -> None:
    m = memo()
    train = {
        "kind": "Deployment",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "t", "image": "pytorch/pytorch:2.4"}]}}},
    }
    assert review(train, index(L4), m) == []
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "ownerReferences": [{"kind": "ReplicaSet", "controller": True}],
        },
        "spec": CHART["spec"]["template"]["spec"],
    }
    assert review(pod, index(L4), m) == []  # its Deployment was checked
    assert "fitgate_admission_requests_total{" not in state(m).metrics.exposition().decode()


def test_a_script_fitgate_cannot_split_is_admitted_with_a_warning_in_enforce() -> None:
    # hunt207: fitgate's splitter fails on scripts the shell runs ($'...', a ")" quoted in $( ... )); it cannot tell
    # them from an unclosed quote, so neither is refused: Unknown, under the default Warn policy admitted with the reason
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "v", "image": "vllm/vllm-openai:v0.19.0", "command": ["sh", "-c", "vllm serve 'x"]}]
        },
    }
    warnings = review(pod, index(L4), memo())
    assert any("fitgate cannot split the shell script" in w and "No closing quotation" in w for w in warnings), warnings


def test_webhook_never_patches_the_object() -> None:
    # kopf hands a validating handler no patch; the handler asks for none and writes no annotation
    params = inspect.signature(workload_handlers.validate_workload).parameters
    assert "patch" not in params
    body = copy.deepcopy(CHART)
    assert review(body, index(L4), memo(), mode="warn") and body == CHART


def test_registered_only_when_asked_and_not_kopf_managed() -> None:
    def config(env: dict[str, str]) -> OperatorConfig:
        return OperatorConfig.from_env(env)

    assert workload_handlers.enabled(config({"FITGATE_WORKLOAD_WEBHOOK": "1"}))
    assert not workload_handlers.enabled(config({}))
    assert not workload_handlers.enabled(
        config({"FITGATE_WORKLOAD_WEBHOOK": "1", "FITGATE_WEBHOOK_MANAGED": "x.fitgate.io"})
    )


def _command(obj: dict[str, Any]) -> list[str]:
    return obj["spec"]["template"]["spec"]["containers"][0]["command"]  # type: ignore[no-any-return]


def test_fix_names_the_env_variable_a_value_came_from() -> None:
    # the chart's --kv-cache-dtype=auto written as $(KV_DTYPE), the value in the container's env
    obj = copy.deepcopy(CHART)
    command = _command(obj)
    command[command.index("--kv-cache-dtype=auto")] = "--kv-cache-dtype=$(KV_DTYPE)"
    obj["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "KV_DTYPE", "value": "auto"})
    with pytest.raises(kopf.AdmissionError) as exc:
        review(obj, index(L4), memo())
    assert "smallest fix: set env KV_DTYPE=fp8 (used by `--kv-cache-dtype $(KV_DTYPE)`)" in str(exc.value)


def test_fix_names_the_env_variable_of_a_shell_script() -> None:
    obj = copy.deepcopy(CHART)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    script = " ".join(w if w != "--kv-cache-dtype=auto" else '--kv-cache-dtype "$KV"' for w in _command(obj))
    container["command"] = ["/bin/sh", "-c", f"echo starting; exec {script}"]
    container["env"].append({"name": "KV", "value": "auto"})
    with pytest.raises(kopf.AdmissionError) as exc:
        review(obj, index(L4), memo())
    assert "smallest fix: set env KV=fp8 (used by `--kv-cache-dtype $KV`)" in str(exc.value)


def test_fix_names_the_config_file_a_value_came_from() -> None:
    # the settings in a --config file (vLLM reads `kv_cache_dtype: auto` as --kv-cache-dtype auto)
    from fitgate.operator.runtime.configmaps import ConfigMaps  # noqa: PLC0415

    obj = copy.deepcopy(CHART)
    pod = obj["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["command"] = ["vllm", "serve", "--config", "/etc/vllm/engine.yaml"]
    container["volumeMounts"] = [{"name": "engine", "mountPath": "/etc/vllm"}]
    pod["volumes"] = [{"name": "engine", "configMap": {"name": "llama-engine"}}]
    engine = (
        "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\ndtype: bfloat16\n"
        "max_num_seqs: 256\ngpu_memory_utilization: 0.9\nkv_cache_dtype: auto\n"
    )

    class Cluster(ConfigMaps):
        async def get(self, namespace: str, name: str, timeout_s: float) -> dict[str, str]:
            assert (namespace, name) == ("default", "llama-engine")
            return {"engine.yaml": engine}

    m = memo()
    m = changed(m, configmaps=Cluster())
    with pytest.raises(kopf.AdmissionError) as exc:
        review(obj, index(L4), m)
    text = str(exc.value)
    assert "one 131072-token request needs 16.00 GiB of KV cache per GPU" in text  # the same numbers as the args
    assert "smallest fix: change `kv_cache_dtype: auto` to `kv_cache_dtype: fp8` in ConfigMap llama-engine key" in text
    assert "engine.yaml" in text


def test_a_kaito_workspace_is_read_from_its_top_level_fields() -> None:
    # kaito-project/kaito examples (tests/fixtures/manifests): `resource` and `inference` sit beside metadata
    docs = list(yaml.safe_load_all((MANIFEST_FIXTURES / "kaito-workspace-deepseek-r1.yaml").read_text()))
    first = next(d for d in docs if d)
    other = copy.deepcopy(first)
    other["inference"]["preset"]["name"] = "phi-4"
    reading = asyncio.run(workload_handlers._READINGS.read(kopf.Body(first)))
    assert reading is not None and reading.model == "deepseek-ai/DeepSeek-R1-0528"
    # two Workspaces differing only in their top-level fields are two readings, not one cached answer
    assert workload_handlers.ReadingCache.key(first) != workload_handlers.ReadingCache.key(other)
    again = asyncio.run(workload_handlers._READINGS.read(kopf.Body(other)))
    assert again is not None and again.model == "microsoft/phi-4"
    # its TP comes from the instance type's GPUs, unknown here: admitted in enforce (Unknown is never a denial)
    review(first, index(H100), memo())  # no AdmissionError raised


def test_a_vllm_runtime_with_an_lmcache_image_is_admitted_with_the_release_warning() -> None:
    runtime = yaml.safe_load((MANIFEST_FIXTURES / "production-stack-vllmruntime.yaml").read_text())
    runtime["spec"]["deploymentConfig"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]}
    ]
    warnings = review(runtime, index(H100), memo())
    assert any("VLLMRuntime default/vllmruntime-sample" in w and "LMCache release" in w for w in warnings), warnings


def test_an_unknown_pool_is_not_outvoted_by_a_pool_that_cannot_host_it() -> None:
    # hunt209 F3: an image of unknown release (a rocm/vllm-dev nightly) runs Qwen3-8B at a YaRN 131072 tokens on TP 2
    # with no nodeSelector: Unknown on the H100 pool (only the newest release refuses that length); a one-GPU L4 node
    # beside it is DoesNotFit (2 GPUs a replica), and ranked before Unknown it made the webhook deny (403) what the
    # scheduler places on the H100 nodes
    from tests.fitgate_operator.test_operator import H100  # noqa: PLC0415

    yarn = '{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'
    args = ["Qwen/Qwen3-8B", "--max-model-len", "131072", "--hf-overrides", yarn, "--tensor-parallel-size", "2"]
    container = {
        "name": "vllm",
        "image": "rocm/vllm-dev:nightly_main_20260211",
        "command": ["vllm", "serve"],
        "args": args,
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "qwen", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    for nodes in ((H100,), (H100, L4)):
        assert review(dep, index(*nodes), memo()) is not None  # admitted (with the Unknown's warning), not denied


def test_an_unreadable_extra_args_word_makes_a_refusal_unknown_and_says_so() -> None:
    # hunt209 F2: `vllm serve Qwen/Qwen3-8B --max-model-len 131072 $EXTRA_ARGS` with EXTRA_ARGS from a Secret: the
    # word may hold the --hf-overrides (a YaRN rope) that makes vLLM take that length; it was denied 400 (Invalid).
    # And an Unknown made so says why in its warnings (under the Warn policy it said nothing)
    from tests.fitgate_operator.test_operator import H100  # noqa: PLC0415

    def dep(script: str) -> dict[str, Any]:
        container = {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.34.0",
            "command": ["/bin/sh", "-c"],
            "args": [script],
            "env": [{"name": "EXTRA_ARGS", "valueFrom": {"secretKeyRef": {"name": "x", "key": "args"}}}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }
        return {"kind": "Deployment", "metadata": {"name": "q", "namespace": "default"},
                "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip

    for script in (
        "vllm serve Qwen/Qwen3-8B --max-model-len 131072 $EXTRA_ARGS",  # a refusal without the word
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 131072 $EXTRA_ARGS",  # a misfit without it
    ):
        warnings = review(dep(script), index(H100), memo())
        assert any("verdict Unknown" in w and "$EXTRA_ARGS" in w for w in warnings), (script, warnings)


def test_vllm_allow_long_max_model_len_from_a_reference_is_read_as_set() -> None:
    # hunt209 F1: VLLM_ALLOW_LONG_MAX_MODEL_LEN from a Secret (or a ConfigMap the webhook does not read) was taken as
    # unset, and Qwen3-8B at 65536 tokens (past its 40960) denied 400; vLLM takes the length with the switch on
    from tests.fitgate_operator.test_operator import H100  # noqa: PLC0415

    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.34.0",
        "args": ["--model", "Qwen/Qwen3-8B", "--max-model-len", "65536"],
        "env": [{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    dep = {"kind": "Deployment", "metadata": {"name": "q", "namespace": "default"},
           "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip
    review(dep, index(H100), memo())  # admitted
    from fitgate.workloads import read_workload  # noqa: PLC0415

    reading = read_workload(dep)
    assert reading is not None and reading.serving.get("allowLongMaxModelLen") is True
    assert any("read as set" in n for n in reading.notes)
    # without the switch vLLM refuses the length, and so does fitgate
    container["env"] = []
    with pytest.raises(kopf.AdmissionError) as exc:
        review(dep, index(H100), memo())
    assert exc.value.code == 400
