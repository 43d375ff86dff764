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

from fitgate.operator import workload_handlers
from fitgate.settings import OperatorConfig
from tests.test_operator import H100, L4, index, memo, on

FIXTURES = Path(__file__).parent / "fixtures" / "workloads"
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
    assert 'fitgate_admission_requests_total{result="denied"} 1.0' in m.metrics.exposition().decode()


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
    assert 'fitgate_admission_requests_total{result="unchanged"} 1.0' in m.metrics.exposition().decode()


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
    assert "fitgate_admission_requests_total{" not in m.metrics.exposition().decode()


def test_unclosed_quote_is_denied_as_invalid_in_enforce() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "v", "image": "vllm/vllm-openai:v0.19.0", "command": ["sh", "-c", "vllm serve 'x"]}]
        },
    }
    with pytest.raises(kopf.AdmissionError, match="No closing quotation") as exc:
        review(pod, index(L4), memo())
    assert exc.value.code == 400
    assert review(pod, index(L4), memo(), mode="warn")  # warn: admitted with the reason


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
