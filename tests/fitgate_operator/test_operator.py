"""The operator without a cluster: API/CRD, GPU inventory, the shared evaluation, handlers called directly."""

from __future__ import annotations

import ast
import asyncio
import copy
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from fitgate.checkpoints import CheckpointError, resolve
from fitgate.cli import main as cli_main
from fitgate.operator.base.metrics import Metrics
from fitgate.operator.decision import logic
from fitgate.operator.decision.evaluate import evaluate, unknown
from fitgate.operator.decision.evaluation import MAX_NOTE_CHARS, MAX_NOTES, notes_of
from fitgate.operator.decision.logic import admit, reconcile
from fitgate.operator.decision.offline import check_files
from fitgate.operator.decision.status import same_outcome, status_of
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.gpus.inventory import group_pools, inventory_hash, parse_node
from fitgate.operator.observation.observe import Observer
from fitgate.operator.runtime import handlers
from fitgate.operator.runtime.memo import OperatorMemo
from fitgate.operator.runtime.run import DenialsAreNotErrors
from fitgate.operator.schema.api import ModelDeploymentStatus, ModelRef, SpecError, parse_spec
from fitgate.operator.schema.config import OperatorConfig
from fitgate.operator.schema.crd import crd, render
from fitgate.operator.watches.nodewatch import NodeWatch
from fitgate.settings import Settings
from fitgate.sizing import ReasonCode, ServingConfig, SizingError, Verdict, lookup_gpu, plan
from tests.conftest import model

REPO = Path(__file__).resolve().parents[2]


def node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


# Real GPU Feature Discovery label sets.
H100 = node(
    "h100-0",
    {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.family": "hopper",
    },
    {"nvidia.com/gpu": "8"},
)
L4 = node(
    "l4-0",
    {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.memory": "23034", "nvidia.com/gpu.count": "1"},
    {"nvidia.com/gpu": "1"},
)
A100_MIG_SINGLE = node(
    "a100-mig-0",
    {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.memory": "4864",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/mig.strategy": "single",
    },
    {"nvidia.com/gpu": "56"},
)
A100_MIG_MIXED = node(
    "a100-mixed-0",
    {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-3g.40gb.memory": "40192",
    },
    {"nvidia.com/gpu": "6", "nvidia.com/mig-3g.40gb": "4"},
)
MI300X = node(
    "mi300x-0", {"amd.com/gpu.product-name": "Instinct_MI300X", "amd.com/gpu.vram": "192G"}, {"amd.com/gpu": "8"}
)


def gpus(*nodes: dict[str, Any]) -> list[Any]:
    return [g for n in nodes for g in parse_node(n)]


SPEC = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
    "serving": {"maxModelLen": 32768},
    "workload": {"concurrentRequests": 8, "contextTokens": 32000},
}
MISFIT = {
    "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "source": "catalog"},
    "serving": {"maxModelLen": 32768},
}


# -- API and CRD --------------------------------------------------------------------------------


def test_crd_in_repo_matches_the_models() -> None:
    assert (REPO / "crds" / "fitgate.io_modeldeployments.yaml").read_text() == render(), (
        "crds/ drifted from src/fitgate/operator/schema/api.py: run python -m fitgate.operator.crd > crds/...yaml"
    )


def test_every_spec_field_is_documented_for_kubectl_explain() -> None:
    def walk(schema: dict[str, Any], path: str) -> None:
        for key, sub in schema.get("properties", {}).items():
            assert sub.get("description"), f"{path}.{key} has no description"
            walk(sub, f"{path}.{key}")

    version = crd()["spec"]["versions"][0]
    walk(version["schema"]["openAPIV3Schema"]["properties"]["spec"], "spec")
    columns = [c["name"].upper() for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert columns == ["MODEL", "GPU", "TP", "VERDICT", "HEADROOM", "MAX-CONC", "AGE"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec.model: Field required"),
        ({"model": {"name": ""}}, "spec.model.name: String should have at least 1 character"),
        (
            {"model": {"name": "a/b"}, "serving": {"tensorParallelSize": 0}},
            "spec.serving.tensorParallelSize: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            {"model": {"name": "a/b"}, "serving": {"gpuMemoryUtilization": 1.2}},
            "spec.serving.gpuMemoryUtilization: Input should be less than or equal to 1 (got 1.2)",
        ),
        (
            {"model": {"name": "a/b"}, "serving": {"kvCacheDtype": "int4"}},
            "spec.serving.kvCacheDtype: Input should be 'auto', 'bfloat16', 'float16', 'fp8'",
        ),
        (
            {"model": {"name": "a/b"}, "serving": {"surprise": 1}},
            "spec.serving.surprise: Extra inputs are not permitted",
        ),
        (
            {"model": {"name": "a/b"}, "policy": {"onMisfit": "Ignore"}},
            "spec.policy.onMisfit: Input should be 'Deny', 'Reject' or 'Warn'",
        ),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec(spec)
    assert message in str(exc.value)


# -- Inventory ----------------------------------------------------------------------------------


def test_gfd_nodes_become_pools() -> None:
    pools = group_pools(gpus(H100, node("h100-1", H100["metadata"]["labels"], {"nvidia.com/gpu": "8"}), L4))
    h100, l4 = pools
    assert (h100.product, h100.nodes, h100.gpus_per_node) == ("NVIDIA-H100-80GB-HBM3", ("h100-0", "h100-1"), 8)
    assert round(h100.gpu.memory_bytes / 2**30, 2) == 79.19  # the catalog's CUDA total, not the 81559 MiB label
    assert l4.gpus_per_node == 1


def test_mig_single_and_mixed_strategies() -> None:
    single = gpus(A100_MIG_SINGLE)
    assert [(g.mig_profile, g.count, g.gpu.memory_bytes) for g in single] == [("1g.5gb", 56, 4864 * 2**20)]
    mixed = gpus(A100_MIG_MIXED)
    assert {g.product: g.count for g in mixed} == {"NVIDIA-A100-SXM4-80GB": 6, "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb": 4}


def test_mig_media_extension_and_compute_instance_names_are_slices() -> None:
    """hunt193 F1: the device plugin names ``1g.10gb+me`` ``1g.10gb.me`` and a compute instance ``1c.3g.40gb``."""
    h100 = "NVIDIA-H100-80GB-HBM3"
    (me,) = gpus(
        node(
            "me",
            {"nvidia.com/gpu.product": f"{h100}-MIG-1g.10gb.me", "nvidia.com/gpu.memory": "9984"},
            {"nvidia.com/gpu": "1"},
        )
    )
    # the label exactly (9984 MiB = 9.75 GiB), no driver reserve taken off as from an unknown whole card (0.46 GiB)
    assert (me.mig_profile, me.gpu.memory_bytes, me.notes) == ("1g.10gb.me", 9984 * 2**20, ())
    mixed = gpus(
        node(
            "ci", {"nvidia.com/gpu.product": h100}, {"nvidia.com/mig-1c.3g.40gb": "4", "nvidia.com/mig-1g.10gb.me": "1"}
        )
    )
    # no memory labels: the GPU instance's size, an H100 SXM's half (lgip 39.50 GiB) and eighth (9.75 GiB)
    assert {(g.mig_profile, g.count, g.gpu.memory_bytes / 2**30) for g in mixed} == {
        ("1c.3g.40gb", 4, 39.5),
        ("1g.10gb.me", 1, 9.75),
    }


def test_amd_labels() -> None:
    (g,) = gpus(MI300X)
    assert g.vendor == "amd" and g.gpu.name == "MI300X" and g.count == 8


@pytest.mark.parametrize(
    "labels",
    [
        {"nvidia.com/gpu.product": "NVIDIA-Z9000", "nvidia.com/gpu.memory": "lots"},
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "-3"},
        {"nvidia.com/gpu.product": "", "amd.com/gpu.vram": "??"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-banana"},
    ],
)
def test_malformed_labels_never_crash_the_node_watch(labels: dict[str, str]) -> None:
    watch = index()
    watch.apply("ADDED", node("bad", labels, {"nvidia.com/gpu": "many"}))
    assert watch.version == 1 and watch.inventory().select(None, {})[0] == []  # left out, nothing counted


def test_unknown_product_falls_back_to_the_memory_label() -> None:
    (g,) = gpus(
        node(
            "x",
            {"nvidia.com/gpu.product": "NVIDIA-Future-96GB", "nvidia.com/gpu.memory": "98304"},
            {"nvidia.com/gpu": "4"},
        )
    )
    assert g.gpu.memory_bytes == 98304 * 2**20 - 470 * 2**20 and g.notes


# -- Evaluation ---------------------------------------------------------------------------------


def test_best_pool_decides_and_misfit_pools_warn() -> None:
    ev = evaluate(parse_spec(SPEC), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100, L4))
    assert ev.verdict is Verdict.FITS and ev.best is not None and ev.best.pool.product == "NVIDIA-H100-80GB-HBM3"
    assert {r.pool.product: r.verdict for r in ev.pools} == {
        "NVIDIA-H100-80GB-HBM3": Verdict.FITS,
        "NVIDIA-L4": Verdict.DOES_NOT_FIT,
    }
    assert any("does not fit on NVIDIA-L4" in w for w in ev.warnings)


def test_removing_the_fitting_pool_turns_it_does_not_fit() -> None:
    ev = evaluate(parse_spec(SPEC), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(L4, A100_MIG_SINGLE))
    assert ev.verdict is Verdict.DOES_NOT_FIT


def test_placement_filters_pools() -> None:
    spec = parse_spec({**SPEC, "placement": {"gpuProduct": "NVIDIA-L4"}})
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100, L4))
    assert [r.pool.product for r in ev.pools] == ["NVIDIA-L4"] and ev.verdict is Verdict.DOES_NOT_FIT
    none = evaluate(
        parse_spec({**SPEC, "placement": {"gpuProduct": "B200"}}), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100)
    )
    # no B200 node: the fit on a B200 (Fits), with no node yet (docs/clusters.md), never NoMatchingGPUPool
    assert none.verdict is Verdict.FITS and none.no_node == "no node with B200 (placement) yet"
    selected = evaluate(
        parse_spec({**SPEC, "placement": {"nodeSelector": {"pool": "a", "zone": "b"}}}),
        model("meta-llama/Llama-3.1-8B-Instruct"),
        gpus(H100),
    )
    assert "nodeSelector pool=a,zone=b" in selected.message and "{" not in selected.message  # no dict repr


def test_a_bare_a100_placement_matches_both_cards() -> None:
    # hunt42 F4: "A100" names the 40 GB and the 80 GB card (instances.AMBIGUOUS_NAMES); a placement that says only
    # A100 must not skip the 80 GB nodes (matching the 40 GB catalog entry alone) and deny what they run
    a100_80 = node(
        "a100-80-0",
        {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/gpu.memory": "81920",
            "nvidia.com/gpu.count": "8",
        },
        {"nvidia.com/gpu": "8"},
    )
    spec = parse_spec({**SPEC, "placement": {"gpuProduct": "A100"}})
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100, a100_80))
    assert [r.pool.product for r in ev.pools] == ["NVIDIA-A100-SXM4-80GB"] and ev.verdict is not Verdict.DOES_NOT_FIT


def test_tp_larger_than_the_node() -> None:
    spec = parse_spec({**MISFIT, "serving": {"maxModelLen": 32768, "tensorParallelSize": 8}})
    ev = evaluate(spec, model("meta-llama/Llama-3.1-70B-Instruct"), gpus(H100, L4))
    assert ev.verdict is Verdict.FITS
    assert {r.pool.product: r.reason for r in ev.pools}["NVIDIA-L4"] == "NotEnoughGPUsPerNode"


def test_no_gpu_nodes_is_unknown() -> None:
    ev = evaluate(parse_spec(SPEC), model("meta-llama/Llama-3.1-8B-Instruct"), [])
    assert ev.verdict is Verdict.UNKNOWN and ev.reason == "NoGPUInventory"


def test_misfit_message_has_numbers_and_the_smallest_change() -> None:
    ev = evaluate(parse_spec(MISFIT), model("meta-llama/Llama-3.1-70B-Instruct"), gpus(H100))
    assert ev.verdict is Verdict.DOES_NOT_FIT
    assert "131.45 GiB" in ev.message and "smallest change that fits: spec.serving.tensorParallelSize: " in ev.message


def test_status_is_stable_and_conditions_do_not_flap() -> None:
    ev = evaluate(parse_spec(SPEC), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100))
    first = status_of(ev, 1, None)
    old = {**first, "conditions": [{**c, "lastTransitionTime": "2020-01-01T00:00:00Z"} for c in first["conditions"]]}
    second = status_of(ev, 1, old)
    assert [c["lastTransitionTime"] for c in second["conditions"]] == ["2020-01-01T00:00:00Z"] * 2
    assert same_outcome(old, second)
    assert second["verdict"] == "Fits" and second["perGPU"]["weightsBytes"] > 0 and second["headroom"].endswith("Gi")
    assert second["maxConcurrency"] == f"{second['kvCache']['maxConcurrency']:.2f}"  # the MAX-CONC column
    assert inventory_hash(gpus(H100)) == second["inventoryHash"]


# -- Handlers, called directly --------------------------------------------------------------------


class FakeStore(FactsStore):
    def __init__(self) -> None:
        super().__init__(resolver=lambda name, rev, source: resolve(name, rev, source="catalog"))


def memo(config: OperatorConfig | None = None, **fields: Any) -> kopf.Memo:
    """kopf's memo holding an :class:`OperatorMemo` as ``operator_startup`` leaves it (no server, no watch thread)."""
    config = config or OperatorConfig(webhook_port=0, metrics_port=0, unknown_policy="Warn")
    defaults: dict[str, Any] = {
        "store": FakeStore(),
        "metrics": Metrics(),
        "observer": Observer(lambda *a, **k: [], lambda *a, **k: ""),
        "nodewatch": index(),
    }
    m = kopf.Memo()
    OperatorMemo(settings=Settings(operator=config), **{**defaults, **fields}).attach(m)
    return m


def state(m: kopf.Memo) -> OperatorMemo:
    """The operator state in ``m``."""
    return OperatorMemo.of(m)


def changed(m: kopf.Memo, config: OperatorConfig | None = None, **fields: Any) -> kopf.Memo:
    """A new kopf memo: ``m``'s state with ``config`` and ``fields`` replaced (the state is frozen)."""
    old = state(m)
    settings = dataclasses.replace(old.settings, operator=config) if config is not None else old.settings
    fresh = kopf.Memo()
    dataclasses.replace(old, settings=settings, **fields).attach(fresh)
    return fresh


def index(*nodes: dict[str, Any]) -> NodeWatch:
    """A node watch that has listed ``nodes`` (the operator's one GPU inventory source)."""
    watch = NodeWatch(api_factory=lambda: None)
    watch.replace({n["metadata"]["name"]: parse_node(n) for n in nodes})
    return watch


def on(m: kopf.Memo, nodes: NodeWatch) -> kopf.Memo:
    """``m`` with ``nodes`` as its node watch."""
    return changed(m, nodewatch=nodes)


def validate(spec: dict[str, Any], nodes: dict[str, Any], m: kopf.Memo, dryrun: bool = False) -> list[str]:
    warnings: list[str] = []
    asyncio.run(
        handlers.modeldeployment_validate(
            spec=kopf.Body({"spec": spec}).spec, dryrun=dryrun, warnings=warnings, memo=on(m, nodes)
        )
    )  # type: ignore[arg-type]
    return warnings


def test_validate_admits_a_fit_and_denies_a_misfit() -> None:
    m = memo()
    assert validate(SPEC, index(H100), m) == []
    with pytest.raises(kopf.AdmissionError) as exc:
        validate(MISFIT, index(H100), m)
    assert "does not fit" in str(exc.value) and "--tensor-parallel-size" in str(exc.value)
    # not 422: kubectl edit/apply read a 422 as "Invalid" and print only details.causes (none here)
    assert exc.value.code == 403
    text = state(m).metrics.exposition().decode()
    assert 'fitgate_admission_requests_total{result="denied"} 1.0' in text
    assert 'fitgate_admission_requests_total{result="allowed"} 1.0' in text


@pytest.mark.parametrize("policy", ["Deny", "Reject"])
def test_on_misfit_deny_and_its_older_name_reject_both_deny(policy: str) -> None:
    """onMisfit says Deny, as onUnknown does; manifests written with Reject keep working (the CRD lists both)."""
    with pytest.raises(kopf.AdmissionError, match="does not fit"):
        validate({**MISFIT, "policy": {"onMisfit": policy}}, index(H100), memo())
    field = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["policy"]
    assert field["properties"]["onMisfit"]["enum"] == ["Deny", "Reject", "Warn"]


def test_a_workload_beyond_the_kv_pool_is_warned_not_denied() -> None:
    """The engine starts; requests beyond the pool wait for blocks (vLLM's scheduler): a slow deployment, not a failed one.

    Llama-3.1-8B on one H100 at 32768 tokens holds ~30 such requests (README: max concurrency 30.72 at TP 4 fp8 for
    the 70B; the 8B's pool is larger), so 4,096 concurrent 32,000-token requests are far beyond any pool: verdict
    DoesNotFit (WorkloadExceedsKVCache) in the status, admitted with the numbers as a warning.
    """
    m = memo()
    big = {**SPEC, "workload": {"concurrentRequests": 4096, "contextTokens": 32000}}
    warnings = validate(big, index(H100), m)
    assert warnings and "does not fit" in warnings[0] and "wait for blocks" in warnings[0]
    assert "KV blocks" in warnings[0]  # the numbers: blocks needed against the pool's
    # the engine itself not fitting is still denied (the 70B misfit above, with the same workload)
    with pytest.raises(kopf.AdmissionError, match="does not fit"):
        validate({**MISFIT, "workload": big["workload"]}, index(H100), m)


def test_validate_warns_on_warn_policy_and_dry_run() -> None:
    m = memo()
    warnings = validate({**MISFIT, "policy": {"onMisfit": "Warn"}}, index(H100), m)
    assert warnings and "does not fit" in warnings[0]
    dry = validate(SPEC, index(H100), m, dryrun=True)
    assert dry[0].startswith("fitgate (dry run): verdict Fits")


def test_validate_rejects_an_invalid_spec_naming_the_field() -> None:
    with pytest.raises(kopf.AdmissionError, match=r"spec\.serving\.tensorParallelSize") as exc:
        validate({**SPEC, "serving": {"tensorParallelSize": 0}}, index(H100), memo())
    assert exc.value.code == 400


def test_validate_answers_unknown_fast_when_the_hub_is_slow() -> None:
    m = memo()

    def slow(name: str, rev: str | None, source: str) -> Any:
        time.sleep(5)
        raise AssertionError("not reached in time")

    m = changed(m, store=FactsStore(resolver=slow))
    m = changed(
        m, config=OperatorConfig(webhook_port=0, metrics_port=0, admission_resolve_s=0.3, unknown_policy="Warn")
    )
    warnings: list[str] = []

    async def timed() -> float:
        started = time.monotonic()
        spec = kopf.Body({"spec": {**SPEC, "model": {"name": "acme/slow"}}}).spec
        await handlers.modeldeployment_validate(spec=spec, dryrun=False, warnings=warnings, memo=on(m, index(H100)))  # type: ignore[arg-type]
        return time.monotonic() - started

    # the answer comes within the admission budget (the resolution thread finishes in the background)
    assert asyncio.run(timed()) < 2.0
    assert any("Unknown" in w for w in warnings)


def test_reconcile_handler_patches_status_and_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "event", lambda body, type, reason, message: posted.append((type, reason)))
    m = memo()
    body = kopf.Body(
        {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llama", "namespace": "ml", "generation": 3, "annotations": {}},
            "spec": SPEC,
            "status": {},
        }
    )
    patch = kopf.Patch()
    asyncio.run(
        handlers.modeldeployment_reconcile(
            body=body,
            spec=body.spec,
            status=body.status,
            patch=patch,
            memo=on(m, index(H100, L4)),
            logger=logging.getLogger("test"),
        )
    )
    status = patch["status"]
    assert status["verdict"] == "Fits" and status["observedGeneration"] == 3
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Ready": "True", "Fits": "True"}
    assert patch["metadata"]["annotations"]["fitgate.io/verdict"] == "Fits"
    assert "--max-model-len 32768" in patch["metadata"]["annotations"]["fitgate.io/recommended-args"]
    assert posted == [("Normal", "Fits")]
    assert (
        'fitgate_deployment_verdict{name="llama",namespace="ml",verdict="Fits"} 1.0'
        in state(m).metrics.exposition().decode()
    )
    # the same inputs again: nothing to patch, no new event
    body2 = kopf.Body(
        {**dict(body), "status": status, "metadata": {**body.metadata, "annotations": patch["metadata"]["annotations"]}}
    )
    patch2 = kopf.Patch()
    asyncio.run(
        handlers.modeldeployment_reconcile(
            body=body2,
            spec=body2.spec,
            status=body2.status,
            patch=patch2,
            memo=on(m, index(H100, L4)),
            logger=logging.getLogger("test"),
        )
    )
    assert not patch2 and posted == [("Normal", "Fits")]


def test_reconcile_does_not_rewrite_the_spec() -> None:
    m = memo()
    outcome = asyncio.run(
        reconcile(
            raw_spec=SPEC,
            old_status=None,
            generation=1,
            namespace="ml",
            name="x",
            nodes=gpus(H100),
            store=state(m).store,
            metrics=state(m).metrics,
            config=state(m).config,
        )
    )
    assert SPEC["serving"] == {"maxModelLen": 32768}  # untouched
    assert outcome.status is not None and "spec" not in outcome.status


def test_admit_unknown_policy_deny() -> None:
    m = memo()
    config = OperatorConfig(webhook_port=0, metrics_port=0, unknown_policy="Deny")
    outcome = asyncio.run(admit(raw_spec=SPEC, nodes=[], store=state(m).store, config=config, dryrun=False))
    assert not outcome.allowed and "cannot verify" in outcome.message


# -- fitgate check --------------------------------------------------------------------------------


def test_check_the_examples() -> None:
    results = {
        Path(r.source.split("#")[0]).name: r.verdict
        for r in check_files(sorted(str(p) for p in (REPO / "examples").glob("*.yaml")))
    }
    assert results == {
        "fake-gpu-node.yaml": "Skipped",  # a Node: `fitgate check` says why it does not size it
        "fits-gpt-oss-l40s.yaml": "Fits",
        "fits-llama-8b-h100.yaml": "Fits",
        "misfit-llama-70b-h100.yaml": "DoesNotFit",
        "observed-llama-8b-h100.yaml": "Fits",
        "targets-llama-8b-h100.yaml": "Fits",  # and its status.performance (test_speed_status.py)
        "tight-qwen3-30b-h100.yaml": "Tight",
    }


def test_check_reports_invalid_documents(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "fitgate.io/v1alpha1",
                    "kind": "ModelDeployment",
                    "metadata": {"name": "b"},
                    "spec": {
                        "model": {"name": "a/b"},
                        "serving": {"tensorParallelSize": 99},
                        "placement": {"gpuProduct": "H100"},
                    },
                },
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}},
            ]
        )
    )
    result, configmap = check_files([str(bad)])
    assert result.verdict == "Invalid" and "spec.serving.tensorParallelSize" in result.message
    assert (configmap.kind, configmap.verdict) == ("ConfigMap", "Skipped")  # said, not silently dropped


def test_facts_store_does_not_hammer_a_broken_hub() -> None:
    calls: list[str] = []

    def broken(name: str, rev: str | None, source: str) -> Any:
        calls.append(name)
        raise CheckpointError("model", name, "", transient=True, problem="cannot reach the Hub")

    store = FactsStore(resolver=broken, retry_after_s=60)
    ref = ModelRef(name="acme/x")

    async def twice() -> tuple[Any, Any]:
        first = await store.get(ref, 5)
        second = await store.get(ref, 5)
        return first, second

    first, second = asyncio.run(twice())
    assert first is second and first.transient and "cannot reach" in first.error
    assert calls == ["acme/x"] and store.errors == {"transient": 1}


def test_admission_reuses_evaluations_across_memo_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    # kopf hands every review a shallow copy of the memo; the inventory snapshot and the evaluation
    # cache must survive that, or every review plans again.
    calls: list[int] = []
    real = logic.evaluate

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(logic, "evaluate", counting)
    m = memo()
    nodes = index(H100)
    for _ in range(3):
        validate({**SPEC, "workload": {"concurrentRequests": 3, "contextTokens": 1000}}, nodes, copy.copy(m))
    assert len(calls) == 1


def test_admission_denials_are_not_logged_as_errors() -> None:
    def record(level: int, msg: str) -> logging.LogRecord:
        return logging.LogRecord("kopf.objects", level, __file__, 1, msg, None, None)

    denial = "Webhook 'fit' failed permanently: fitgate: meta-llama/Llama-3.1-70B-Instruct does not fit: ..."
    assert not DenialsAreNotErrors(verbose=False).filter(record(logging.ERROR, denial))
    shown = record(logging.ERROR, denial)
    assert DenialsAreNotErrors(verbose=True).filter(shown) and shown.levelname == "INFO"
    crash = record(logging.ERROR, "Webhook 'fit' failed with an exception. Will retry.")
    assert DenialsAreNotErrors(verbose=False).filter(crash) and crash.levelname == "ERROR"


def test_node_watch_keeps_the_gpu_nodes_and_counts_changes() -> None:
    cpu_only = node("cpu-0", {}, {"cpu": "64"})

    class Api:  # the CoreV1Api list_node call, as the API server pages it (limit / continue)
        def __init__(self) -> None:
            self.calls: list[dict[str, Any]] = []

        def list_node(self, **kwargs: Any) -> Any:
            self.calls.append(kwargs)
            items, token = ([H100, L4], "next") if "_continue" not in kwargs else ([cpu_only], None)
            meta = {"resourceVersion": "42", **({"continue": token} if token else {})}
            return type("Response", (), {"data": json.dumps({"items": items, "metadata": meta}).encode()})()

    api = Api()
    watch = NodeWatch(api_factory=lambda: api, page_size=2)
    assert not watch.synced.is_set()
    assert watch._list(api) == "42"
    assert [c.get("_continue") for c in api.calls] == [None, "next"] and api.calls[0]["limit"] == 2
    assert watch.synced.is_set() and watch.version == 1
    first = watch.inventory()
    assert sorted(g.node for g in first.gpus) == ["h100-0", "l4-0"] and watch.inventory() is first  # cached
    watch.apply("MODIFIED", H100)  # same GPUs (a heartbeat): no change
    watch.apply("ADDED", node("cpu-1", {}, {"cpu": "8"}))  # no GPUs: no change
    assert watch.version == 1
    watch.apply("DELETED", L4)
    assert watch.version == 2 and [g.node for g in watch.inventory().gpus] == ["h100-0"]
    watch.replace({"h100-0": list(watch.inventory().gpus)})  # a periodic relist finding the same GPUs
    assert watch.version == 2
    bad = node("bad-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu": "many"})
    watch.apply("ADDED", bad)  # unreadable allocatable: left out, never raised
    assert [g.node for g in watch.inventory().gpus] == ["h100-0"]


def test_an_offline_model_in_no_catalog_is_a_condition_and_one_event_not_a_retry() -> None:
    """HF_HUB_OFFLINE and no catalog entry: nothing will change until an entry is added, so no retry storm."""
    from fitgate.checkpoints import CheckpointError  # noqa: PLC0415

    def offline(name: str, rev: str | None, source: str) -> Any:
        raise CheckpointError("model", name, "", transient=True, problem="cannot reach the Hub (HF_HUB_OFFLINE is set)")

    m = memo()
    m = changed(m, store=FactsStore(resolver=offline, offline=True))
    spec = {**SPEC, "model": {"name": "acme/not-anywhere"}}

    def once(old: dict[str, Any] | None) -> Any:
        return asyncio.run(
            reconcile(
                raw_spec=spec,
                old_status=old,
                generation=1,
                namespace="ml",
                name="x",
                nodes=gpus(H100),
                store=state(m).store,
                metrics=state(m).metrics,
                config=state(m).config,
            )
        )

    first = once(None)
    assert first.retry_in_s is None  # no TemporaryError, no ERROR line every 60 s
    assert first.status["verdict"] == "Unknown" and first.status["reason"] == "CheckpointNotInCatalog"
    assert "fitgate catalog add" in first.status["message"]
    assert first.event is not None and first.event[0] == "Warning"
    again = once(first.status)
    assert again.event is None and again.status is None and again.retry_in_s is None
    # online, the same failure is transient: retried
    m = changed(m, store=FactsStore(resolver=offline, offline=False))
    assert once(None).retry_in_s is not None


# -- one status contract, one decision path -------------------------------------------------------


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, int]]:
    return {c["type"]: (c["status"], c["reason"], c["observedGeneration"]) for c in status["conditions"]}


TIGHT_SPEC = {
    "model": {"name": "Qwen/Qwen3-30B-A3B", "source": "catalog"},
    "serving": {"maxModelLen": 8192, "gpuMemoryUtilization": 0.95},
    "workload": {"concurrentRequests": 18, "contextTokens": 8192},  # 18 x 512 of 9920 blocks: 92.9 %
}


@pytest.mark.parametrize(
    ("spec", "model_name", "expected"),
    [
        (SPEC, "meta-llama/Llama-3.1-8B-Instruct", {"Ready": ("True", "Evaluated", 4), "Fits": ("True", "Fits", 4)}),
        (TIGHT_SPEC, "Qwen/Qwen3-30B-A3B", {"Ready": ("True", "Evaluated", 4), "Fits": ("True", "Tight", 4)}),
        (
            MISFIT,
            "meta-llama/Llama-3.1-70B-Instruct",
            {"Ready": ("True", "Evaluated", 4), "Fits": ("False", "WeightsExceedBudget", 4)},
        ),
    ],
)
def test_conditions_follow_kep_1623_and_tight_has_its_own_reason(
    spec: dict[str, Any], model_name: str, expected: dict[str, tuple[str, str, int]]
) -> None:
    status = status_of(evaluate(parse_spec(spec), model(model_name), gpus(H100)), 4, None)
    assert conditions(status) == expected
    assert all(c["lastTransitionTime"].endswith("Z") and c["message"] for c in status["conditions"])


def test_status_notes_say_what_the_plan_does_not_count_as_fitgate_plan_does() -> None:
    # hunt70 F4: the plan's notes (a bound, what is not counted) reached `fitgate plan` only. A speculative drafter
    # that is another checkpoint is not counted: the plan says the KV pool is overestimated, and so does the status.
    spec = {**SPEC, "serving": {**SPEC["serving"], "speculativeConfig": {"method": "eagle", "numSpeculativeTokens": 3}}}
    ev = evaluate(parse_spec(spec), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100))
    assert ev.best is not None and ev.best.plan is not None
    status = status_of(ev, 1, None)
    assert status["notes"] == list(ev.notes) and set(ev.best.plan.notes) <= set(status["notes"])
    assert any("the drafter is another checkpoint and is not counted" in n for n in status["notes"]), status["notes"]
    assert status_of(unknown(ReasonCode.CHECKPOINT_RESOLVING, "resolving"), 2, None)["notes"] is None


def test_notes_are_bounded_and_each_given_once() -> None:
    long = "x" * 5000
    plan_ = dataclasses.replace(
        plan(model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("H100"), ServingConfig(max_model_len=4096)),
        notes=("a", "a", long, *(f"n{i}" for i in range(40))),
    )
    notes = notes_of(None, plan_)
    # 43 notes given, "a" twice: 42 distinct, the first MAX_NOTES kept; the long one cut to MAX_NOTE_CHARS
    assert len(notes) == MAX_NOTES and notes[:2] == ("a", long[: MAX_NOTE_CHARS - 3] + "...")
    assert all(len(n) <= MAX_NOTE_CHARS for n in notes)


def test_unknown_is_ready_unknown_while_pending_and_false_when_it_cannot_be_evaluated() -> None:
    pending = status_of(unknown(ReasonCode.CHECKPOINT_RESOLVING, "resolving"), 2, None)
    invalid = status_of(unknown(ReasonCode.INVALID_SPEC, "spec.model: required"), 2, None)
    assert conditions(pending)["Ready"] == ("Unknown", "CheckpointResolving", 2)
    assert conditions(invalid)["Ready"] == ("False", "InvalidSpec", 2)
    assert conditions(invalid)["Fits"] == ("Unknown", "InvalidSpec", 2)


def test_status_is_the_pydantic_model_dumped_by_alias() -> None:
    """What reconcile writes is exactly what the CRD's status schema (generated from the model) describes."""
    for spec, name in ((SPEC, "meta-llama/Llama-3.1-8B-Instruct"), (MISFIT, "meta-llama/Llama-3.1-70B-Instruct")):
        status = status_of(evaluate(parse_spec(spec), model(name), gpus(H100, L4)), 1, None)
        dumped = ModelDeploymentStatus.model_validate(status).model_dump(by_alias=True, mode="json")
        # nulls inside list items are left out: the API server drops them, and a resync would patch again
        dumped["pools"] = [{k: v for k, v in p.items() if v is not None} for p in dumped["pools"]]
        assert dumped == {**status, "observed": None}  # status.observed is the observer's (never cleared here)
        schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        assert set(status) | {"observed"} == set(schema)
    # a status without a plan clears what an earlier one had (None in a merge patch)
    cleared = status_of(unknown(ReasonCode.CHECKPOINT_RESOLVING, "resolving"), 2, None)
    assert cleared["perGPU"] is None and cleared["engineArgs"] is None and cleared["resolvedModel"] is None


def test_every_reason_the_plan_gives_is_a_reason_code() -> None:
    seen = set()
    for name in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B"):
        for gpu in ("H100", "L4", "A10"):
            for mml in (2048, 32768):
                for gmu in (0.5, 0.9, 0.99):
                    try:
                        p = plan(
                            model(name),
                            lookup_gpu(gpu),
                            ServingConfig(max_model_len=mml, gpu_memory_utilization=gmu, vllm_version="0.33.0"),
                        )
                    except SizingError:
                        continue
                    seen |= {ReasonCode(r.code) for r in p.reasons}  # ValueError if a code is not in the enum
    assert len(seen) >= 5


def test_the_annotation_recommends_what_fitgate_plan_recommends(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = asyncio.run(
        reconcile(
            raw_spec=MISFIT,
            old_status=None,
            generation=1,
            namespace="ml",
            name="m",
            nodes=gpus(H100),
            store=FakeStore(),
            metrics=Metrics(),
            config=state(memo()).config,
        )
    )
    argv = ["plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--source", "catalog"]
    cli_main([*argv, "--gpu", "NVIDIA-H100-80GB-HBM3", "--max-model-len", "32768", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert outcome.annotations[logic.ARGS_ANNOTATION] == " ".join(doc["vllm_args"])
    assert "--tensor-parallel-size 1 " not in outcome.annotations[logic.ARGS_ANNOTATION]  # not the misfit's args


def test_check_decides_with_the_webhook_decision() -> None:
    results = {r.verdict: r for r in check_files([str(REPO / "examples" / "misfit-llama-70b-h100.yaml")])}
    assert results["DoesNotFit"].admitted is False
    warn = check_files([str(REPO / "examples" / "tight-qwen3-30b-h100.yaml")])[0]
    assert warn.verdict == "Tight" and warn.admitted is True


def test_status_follows_a_node_change_at_once_not_at_the_next_resync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "event", lambda *a, **kw: None)
    # the object's own resync slot an hour away: its phase of the 60 s period (a CRC of its name against the clock)
    # fell within the scenario's 0.6 s about once in a hundred runs, and the added L4 node's new inventory hash
    # was then written at the slot (CI, 2026-12-05)
    monkeypatch.setattr(handlers, "resync_slot", lambda now, period, key: now + 3600)
    m = memo()
    m = changed(m, config=OperatorConfig(webhook_port=0, metrics_port=0, resync_s=60))
    nodes = NodeWatch(api_factory=lambda: None)
    nodes.replace({"h100-0": parse_node(H100), "l4-0": parse_node(L4)})
    m = changed(m, nodewatch=nodes)
    spec = {**SPEC, "placement": {"gpuProduct": "NVIDIA-H100-80GB-HBM3"}}
    first = status_of(evaluate(parse_spec(spec), model("meta-llama/Llama-3.1-8B-Instruct"), nodes.inventory()), 1, None)
    body = kopf.Body(
        {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llama", "namespace": "ml", "generation": 1, "annotations": {}},
            "spec": spec,
            "status": first,
        }
    )
    l4_1 = node("l4-1", L4["metadata"]["labels"], L4["status"]["allocatable"])

    async def scenario() -> tuple[kopf.Patch, float]:
        follow = asyncio.create_task(nodes.changes.follow(nodes, 0.01))
        patch = kopf.Patch()
        resync = asyncio.create_task(
            handlers.modeldeployment_resync(
                body=body, spec=body.spec, status=body.status, patch=patch, memo=m, logger=logging.getLogger("t")
            )  # type: ignore[arg-type]
        )
        await asyncio.sleep(0.3)
        nodes.apply("ADDED", l4_1)  # another L4: not a pool this deployment may land on
        await asyncio.sleep(0.3)
        assert not resync.done()
        started = time.monotonic()
        nodes.apply("DELETED", H100)  # its only pool is gone
        await asyncio.wait_for(resync, 5)
        follow.cancel()
        return patch, time.monotonic() - started

    patch, took = asyncio.run(scenario())
    # no H100 node any more: the fit on the H100 stands, and Schedulable says no node has one (docs/clusters.md)
    assert took < 2 and patch["status"]["verdict"] == "Fits"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in patch["status"]["conditions"]}
    assert conditions["Schedulable"] == ("False", "NoNodeYet")


def test_the_reevaluate_annotation_resolves_the_checkpoint_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "event", lambda *a, **kw: None)
    calls: list[str] = []

    def resolver(name: str, rev: str | None, source: str) -> Any:
        calls.append(name)
        return resolve(name, rev, source="catalog")

    m = memo()
    m = changed(m, store=FactsStore(resolver=resolver))
    body = kopf.Body(
        {
            "apiVersion": "fitgate.io/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llama", "namespace": "ml", "generation": 1, "annotations": {}},
            "spec": SPEC,
            "status": {},
        }
    )

    async def twice() -> kopf.Patch:
        for handler in (handlers.modeldeployment_reconcile, handlers.modeldeployment_reevaluate):
            patch = kopf.Patch()
            await handler(
                body=body,
                spec=body.spec,
                status=body.status,
                patch=patch,
                memo=on(m, index(H100)),
                logger=logging.getLogger("t"),
            )  # type: ignore[arg-type]
        return patch

    patch = asyncio.run(twice())
    assert len(calls) == 2  # resolved again, not served from the 10-minute facts cache
    assert patch["status"]["verdict"] == "Fits"


class Stopped:
    """kopf's ``stopped`` flag of a timer, set by the test."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def wait(self) -> None:
        await self.event.wait()


def start_resync(body: kopf.Body, m: kopf.Memo, stopped: Stopped, patch: kopf.Patch) -> asyncio.Task[None]:
    """The resync timer of one deployment on an H100 inventory, as kopf runs it."""
    return asyncio.create_task(
        handlers.modeldeployment_resync(
            body=body,
            spec=body.spec,
            status=body.status,
            patch=patch,
            memo=on(m, index(H100)),
            logger=logging.getLogger("t"),
            stopped=stopped,
        )  # type: ignore[arg-type]
    )


def test_the_resync_wait_ends_at_once_when_kopf_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted deployment's finalizer must not wait for the resync period."""
    monkeypatch.setattr(kopf, "event", lambda *a, **kw: None)
    monkeypatch.setattr(handlers, "resync_slot", lambda now, period, key: now + 3600)  # not within the 0.2 s
    m = memo()
    m = changed(m, config=OperatorConfig(webhook_port=0, metrics_port=0, resync_s=60))
    body = kopf.Body({"metadata": {"name": "x", "namespace": "ml"}, "spec": SPEC, "status": {}})

    async def scenario() -> tuple[kopf.Patch, float]:
        stopped = Stopped()
        patch = kopf.Patch()
        resync = start_resync(body, m, stopped, patch)
        await asyncio.sleep(0.2)
        started = time.monotonic()
        stopped.event.set()
        await asyncio.wait_for(resync, 5)
        return patch, time.monotonic() - started

    patch, took = asyncio.run(scenario())
    assert took < 1 and not patch


def test_every_reason_in_the_sizing_core_is_a_reason_code_member() -> None:
    """The enum is the one list: a Reason(...) in the sizing core whose code is not a ReasonCode member fails here.

    Issue 25 typed ``Reason.code`` as :class:`ReasonCode` (mypy --strict refuses a string there); this reads the
    source as well, so that a string literal (or any other expression) in a ``Reason(...)`` fails without mypy.
    """
    found: set[str] = set()
    for path in (REPO / "src" / "fitgate" / "sizing").glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Reason"):
                continue
            code = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "code")
            options = [code.body, code.orelse] if isinstance(code, ast.IfExp) else [code]
            for node in options:
                if ast.unparse(node) == "r.code":  # the code of another Reason: a member already
                    continue
                assert isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name), ast.unparse(node)
                assert node.value.id == "ReasonCode", f"{path.name}:{node.lineno}: {ast.unparse(node)}"
                found.add(ReasonCode[node.attr].value)  # KeyError: not a member
    assert len(found) >= 12, found  # the plan's DoesNotFit, Tight and Fits codes


def test_the_crd_accepts_the_values_fitgate_plan_accepts() -> None:
    """One set of names and limits for the CLI, the sizing core and the CRD."""
    from typing import get_args  # noqa: PLC0415

    from fitgate.operator.schema.api import Serving, WorkloadSpec  # noqa: PLC0415
    from fitgate.sizing.architecture import RUNTIME_QUANTIZATION  # noqa: PLC0415
    from fitgate.sizing.dtypes import KV_CACHE_DTYPES, KV_CACHE_DTYPES_NOT_SIZED  # noqa: PLC0415
    from fitgate.sizing.quantization import RUNTIME_QUANTIZATION_NOT_SIZED  # noqa: PLC0415

    crd = set(get_args(Serving.model_fields["kv_cache_dtype"].annotation))
    assert (
        crd == set(KV_CACHE_DTYPES) | KV_CACHE_DTYPES_NOT_SIZED and not set(KV_CACHE_DTYPES) & KV_CACHE_DTYPES_NOT_SIZED
    )
    quantization = Serving.model_fields["quantization"].annotation
    named = {a for arg in get_args(quantization) for a in get_args(arg)}
    # the sized methods and the ones answered Unknown, and the checkpoint methods vLLM takes (hunt37 F1)
    assert named >= set(RUNTIME_QUANTIZATION) | RUNTIME_QUANTIZATION_NOT_SIZED and {"awq", "modelopt_fp4"} <= named
    limit = next(m.le for m in WorkloadSpec.model_fields["concurrent_requests"].metadata if hasattr(m, "le"))
    assert limit == 1 << 20  # plan()'s concurrency limit
    from fitgate.sizing.parallel import ALL2ALL_BACKENDS  # noqa: PLC0415

    backend = Serving.model_fields["all2all_backend"].annotation
    assert {a for arg in get_args(backend) for a in get_args(arg)} == set(ALL2ALL_BACKENDS)


def test_an_unchanged_object_resyncs_every_period_within_one_timer_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to write: the next slot is waited for in the same call (kopf's round per call cost more, issue 23)."""
    monkeypatch.setattr(kopf, "event", lambda *a, **kw: None)
    monkeypatch.setattr(logic, "_LAST", logic.LastReconciles())
    m = on(changed(memo(), config=OperatorConfig(webhook_port=0, metrics_port=0, resync_s=0.1)), index(H100))
    meta = {"name": "llama", "namespace": "ml", "generation": 1, "annotations": {}}
    body = kopf.Body({"metadata": meta, "spec": SPEC, "status": {}})

    async def scenario() -> tuple[kopf.Patch, int, bool]:
        first = kopf.Patch()
        await handlers.modeldeployment_reconcile(
            body=body, spec=body.spec, status=body.status, patch=first, memo=m, logger=logging.getLogger("t")
        )  # type: ignore[arg-type]
        written = {**meta, "annotations": dict(first["metadata"]["annotations"])}
        # the object as the API server stores it: the status without its null fields
        live = kopf.Body({"metadata": written, "spec": SPEC, "status": no_nulls(dict(first["status"]))})
        before = logic.REUSE.same_snapshot
        stopped, patch = Stopped(), kopf.Patch()
        resync = asyncio.create_task(
            handlers.modeldeployment_resync(
                body=live,
                spec=live.spec,
                status=live.status,
                patch=patch,
                memo=m,
                logger=logging.getLogger("t"),
                stopped=stopped,
            )  # type: ignore[arg-type]
        )
        await asyncio.sleep(1.0)  # ten periods
        running = not resync.done()
        stopped.event.set()
        await asyncio.wait_for(resync, 5)
        return patch, logic.REUSE.same_snapshot - before, running

    patch, reused, running = asyncio.run(scenario())
    assert running and not patch  # still in its first call, nothing written
    assert 5 <= reused <= 11  # once a period (0.1 s) over 1 s, each answered from the last reconcile


def no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [no_nulls(v) for v in value]
    return value


def test_the_crd_takes_the_values_vllm_takes() -> None:
    # hunt37 F1-F5: a ModelDeployment refused values vLLM takes, so `kubectl apply` failed before the webhook ran
    def spec(**serving: object) -> Any:
        return parse_spec({"model": {"name": "Qwen/Qwen3-8B"}, "serving": serving})

    # vLLM's human sizes (128k = 128,000, 128K = 131,072) and -1 for auto (engine/arg_utils.py 0.34.0 L403-405)
    assert spec(maxModelLen="128k").serving.max_model_len == 128000
    assert spec(maxModelLen="128K").serving.max_model_len == 131072
    assert spec(maxModelLen=-1).serving.max_model_len == spec(maxModelLen="auto").serving.max_model_len == "auto"
    for bad in (0, "12q", 1 << 40):
        with pytest.raises(SpecError, match="maxModelLen: a number of tokens"):
            spec(maxModelLen=bad)
    assert spec(dtype="half").serving.dtype == "float16" and spec(dtype="float").serving.dtype == "float32"
    assert spec(quantization="awq").serving.quantization == "awq"  # a quantized checkpoint's method
    assert spec(speculativeConfig={"method": "qwen3_next_mtp"}).serving.speculative_config.method == "mtp"
    # the CRD's names are the sizing core's: its own methods and vLLM's MTPModelTypes (one list kept in two places
    # because the CRD's enum is static; this ties them)
    from typing import get_args  # noqa: PLC0415

    from fitgate.operator.schema.api import SpeculativeConfig  # noqa: PLC0415
    from fitgate.sizing.speculative import MTP_METHODS, SPEC_METHODS  # noqa: PLC0415

    assert set(get_args(SpeculativeConfig.model_fields["method"].annotation)) == set(SPEC_METHODS) | MTP_METHODS
    # hunt78 F1: vLLM's docs serve an MLP speculator and its CI Medusa (0.30-0.32 list both): the CRD refused them
    # (Invalid at kubectl apply) where `fitgate plan` and a Deployment's --speculative-config were sized
    for method in ("mlp_speculator", "medusa", "custom_class", "extract_hidden_states"):
        raw = {**SPEC, "serving": {**SPEC["serving"], "speculativeConfig": {"method": method}}}
        ev = evaluate(parse_spec(raw), model("meta-llama/Llama-3.1-8B-Instruct"), gpus(H100))
        assert ev.verdict in (Verdict.FITS, Verdict.TIGHT), (method, ev.message)
        # extract_hidden_states has no draft model (hunt81 F4); the others' drafter is another checkpoint
        drafter = any("the drafter is another checkpoint and is not counted" in n for n in ev.notes)
        assert drafter is (method != "extract_hidden_states"), (method, ev.notes)


def test_an_engine_version_that_names_no_release_is_sized_as_the_newest_with_a_warning() -> None:
    # hunt37 F6: vLLM's own gpt-oss launch image (vllm/vllm-openai:gptoss) and image digests were refused by the CRD's
    # pattern, so `kubectl apply` failed; a tag that names no release is now sized as the newest modelled one
    from fitgate.operator.decision.evaluate import engine_release  # noqa: PLC0415
    from tests.conftest import model  # noqa: PLC0415

    for version in ("gptoss", "sha256:" + "a" * 64):
        spec = parse_spec({"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"version": version}})
        assert engine_release(spec.engine.version) is None
        ev = evaluate(spec, model("Qwen/Qwen3-8B"), gpus(H100))
        assert ev.verdict is not Verdict.UNKNOWN and any("names no vLLM release" in w for w in ev.warnings), ev
    assert engine_release("v0.19.1-cu128") == "v0.19.1-cu128"
