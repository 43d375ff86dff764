"""DRA (operator/gpus/dra.py, gpuview.py): ResourceSlices in the NVIDIA driver's shape, claims, the CEL forms."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.gpus.cel import MAX_EXPRESSION_CHARS, SelectorUnsupportedError, compile_selector
from fitgate.operator.gpus.dra import (
    ClaimError,
    Device,
    DraState,
    allocated_devices,
    claim_requests,
    class_selectors,
    gfd_product,
    slice_devices,
)
from fitgate.operator.gpus.gpuview import NodeMeta, build_inventory, merge
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.schema.api import parse_spec
from fitgate.operator.watches.nodewatch import NodeWatch
from fitgate.operator.watches.resourcewatch import ResourceWatch, Sources, parse_slice
from fitgate.sizing import ReasonCode, Verdict
from fitgate.sizing.units import MiB
from fitgate.workloads.quantity import parse_quantity, whole_quantity
from tests.conftest import model

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dra" / "nvidia-dra-driver.yaml"
OBJECTS = list(yaml.safe_load_all(FIXTURE.read_text()))
SLICES = [o for o in OBJECTS if o["kind"] == "ResourceSlice"]
CLASSES = {o["metadata"]["name"]: class_selectors(o) for o in OBJECTS if o["kind"] == "DeviceClass"}
H100_DEVICES = slice_devices(SLICES[0])
MIG_DEVICES = slice_devices(SLICES[1])


def state(**templates: Any) -> DraState:
    devices: dict[str, tuple[Device, ...]] = {}
    for d in H100_DEVICES + MIG_DEVICES:
        devices[d.node] = (*devices.get(d.node, ()), d)
    parsed = {("ns", name): claim_requests(t) for name, t in templates.items()}
    return DraState(devices, frozenset(), CLASSES, parsed)


def template(count: int = 1, cls: str = "gpu.nvidia.com", *selectors: str, v1: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    request = {"name": "gpu", "exactly": body} if v1 else {"name": "gpu", **body}
    return {"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {"requests": [request]}}}}


# -- quantities and slices --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("81559Mi", 81559 * 1024 * 1024),  # 85520809984 B: the H100's NVML total
        ("40Gi", 40 * 2**30),
        ("80G", 80 * 10**9),
        ("1.5Gi", 3 * 2**29),
        ("100m", 1),  # 0.1, rounded up like Quantity.Value()
        ("12", 12),
        ("1e3", 1000),
    ],
)
def test_quantities(text: str, value: int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "12Zi", "x" * 100, "1..2"])
def test_bad_quantities_are_none(text: str) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(("text", "value"), [("8", 8), ("1k", 1000), ("2k", 2000), (16, 16), ("1e3", 1000)])
def test_counts_read_the_api_servers_canonical_quantities(text: object, value: int) -> None:
    # the API server writes 1000 as "1k" (apimachinery Quantity's canonical form): a node under time-slicing that
    # offers 8 cards x 125 replicas reports allocatable nvidia.com/gpu "1k"
    assert whole_quantity(text) == value
    node = {
        "metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"allocatable": {"nvidia.com/gpu": text}},
    }
    [gpus] = parse_node(node)
    assert gpus.count == value


@pytest.mark.parametrize("text", ["500m", "-1", "1.5", "x", True])
def test_counts_that_are_not_whole_are_none(text: object) -> None:
    assert whole_quantity(text) is None


def test_slice_devices_read_the_driver_shape() -> None:
    gpu = H100_DEVICES[0]
    assert (gpu.driver, gpu.pool, gpu.node, gpu.name) == ("gpu.nvidia.com", "h100-dra-0", "h100-dra-0", "gpu-0")
    assert gpu.attribute("productName") == "NVIDIA H100 80GB HBM3"
    assert gpu.attribute("cudaComputeCapability") == "9.0.0"
    assert gpu.attributes["resource.kubernetes.io/pciBusID"] == "0000:18:00.0"  # already qualified: kept as is
    assert gpu.capacity["gpu.nvidia.com/memory"] == 81559 * MiB
    mig = MIG_DEVICES[0]
    assert (mig.attribute("type"), mig.attribute("profile")) == ("mig", "1g.10gb")
    assert mig.capacity["gpu.nvidia.com/memory"] == 9728 * MiB


def test_v1beta1_devices_nest_under_basic() -> None:
    beta = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "n"},
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {
                        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA L4"}},
                        "capacity": {"memory": {"value": "23034Mi"}},
                    },
                }
            ],
        }
    }
    (device,) = slice_devices(beta)
    assert device.attribute("productName") == "NVIDIA L4"
    assert device.capacity["gpu.nvidia.com/memory"] == 23034 * MiB


def test_a_slice_without_a_node_or_driver_gives_no_devices() -> None:
    assert slice_devices({"spec": {"driver": "gpu.nvidia.com", "devices": [{"name": "x"}]}}) == []
    assert slice_devices({"spec": {"nodeName": "n", "devices": [{"name": "x"}]}}) == []


def test_gfd_product_names_match_node_labels() -> None:
    assert gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


# -- devices become pools like node labels ----------------------------------------------------


def test_dra_devices_become_pools_keyed_like_labels() -> None:
    inventory = build_inventory({}, {}, state())
    pools, _ = inventory.select(None, {})
    by_product = {p.product: p for p in pools}
    h100 = by_product["NVIDIA-H100-80GB-HBM3"]
    assert (h100.gpus_per_node, h100.nodes, h100.source) == (2, ("h100-dra-0",), "dra")
    assert h100.gpu.name == "H100-SXM"  # the catalog entry, found from the driver's productName
    mig = by_product["NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"]
    assert (mig.mig_profile, mig.gpus_per_node, mig.gpu.memory_bytes) == ("1g.10gb", 2, 9728 * MiB)


def test_a_node_known_by_labels_and_slices_is_one_pool() -> None:
    labelled = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "h100-dra-0",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"},
        },
        "status": {"allocatable": {"nvidia.com/gpu": "2"}},
    }
    gpus = merge({"h100-dra-0": parse_node(labelled)}, {}, state(), {})
    h100 = [g for g in gpus if g.node == "h100-dra-0"]
    assert len(h100) == 1  # not 2 entries of 2 GPUs each
    assert (h100[0].count, h100[0].source) == (2, "labels+dra")


def test_allocated_devices_are_not_free() -> None:
    claim = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-dra-0", "device": "gpu-1"}]
                }
            }
        }
    }
    base = state()
    held = frozenset(allocated_devices(claim))
    inventory = build_inventory({}, {}, DraState(base.devices, held, base.classes, base.templates))
    pools, _ = inventory.select("NVIDIA-H100-80GB-HBM3", {})
    assert (pools[0].gpus_per_node, pools[0].free_gpus) == (2, 1)


def test_dra_nodes_take_labels_and_cordon_from_the_node() -> None:
    metas = {"h100-dra-0": NodeMeta({"pool": "a"}, (), True)}
    inventory = build_inventory({}, metas, state())
    assert inventory.select(None, {"pool": "a"})[0] == []  # cordoned: no candidate
    assert inventory.left_out(None, {"pool": "a"}) == ("h100-dra-0 (cordoned)",)


# -- claims ------------------------------------------------------------------------------------


def test_claim_template_v1_and_v1beta1_shapes() -> None:
    (v1,) = claim_requests(template(2, "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].type == 'gpu'"))
    (beta,) = claim_requests(template(2, v1=False))
    assert (v1.device_class, v1.count, len(v1.selectors)) == ("gpu.nvidia.com", 2, 1)
    assert (beta.device_class, beta.count) == ("gpu.nvidia.com", 2)


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ({"spec": {"spec": {"devices": {"requests": []}}}}, "no device request"),
        (template(0), "count: 0 is not a count from 1 to 64"),
        ({"spec": {"spec": {"devices": {"requests": [{"name": "x", "exactly": {}}]}}}}, "deviceClassName: missing"),
        (
            {"spec": {"spec": {"devices": {"requests": [{"name": "x", "firstAvailable": [{"name": "a"}]}]}}}},
            r"requests\[0\]\.firstAvailable\[0\]\.deviceClassName: missing",
        ),
        (
            {"spec": {"spec": {"devices": {"requests": [{"name": "x", "firstAvailable": ["a"] * 9}]}}}},
            "firstAvailable: expected a list of at most 8 subrequests",
        ),
    ],
)
def test_unreadable_claims_name_the_field(obj: dict[str, Any], error: str) -> None:
    with pytest.raises(ClaimError, match=error):
        claim_requests(obj)


def test_claim_selects_devices_through_class_and_request_selectors() -> None:
    memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    s = state(big=template(1, "gpu.nvidia.com", memory), small=template(1, "mig.nvidia.com"))
    assert set(s.matching(s.gpu_request("ns", "big"))) == {"h100-dra-0"}
    small = s.matching(s.gpu_request("ns", "small"))
    assert set(small) == {"a100-mig-dra-0"} and len(small["a100-mig-dra-0"]) == 2


def test_missing_template_and_class_are_claim_errors() -> None:
    s = state(other=template(1, "nope.example.com"))
    with pytest.raises(ClaimError, match="ResourceClaimTemplate ns/absent not found"):
        s.gpu_request("ns", "absent")
    with pytest.raises(ClaimError, match=re.escape("DeviceClass 'nope.example.com' not found")):
        s.gpu_request("ns", "other")


# -- CEL ---------------------------------------------------------------------------------------

H100, MIG = H100_DEVICES[0], MIG_DEVICES[0]


@pytest.mark.parametrize(
    ("expression", "on_h100", "on_mig"),
    [
        ('device.driver == "gpu.nvidia.com"', True, True),
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", True, False),
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', True, False),
        ('device.attributes["gpu.nvidia.com"].type == "mig"', False, True),
        ('device.attributes["gpu.nvidia.com"].profile == "1g.10gb"', False, True),  # no profile on a GPU: no match
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True, False),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) < 0', False, True),
        ('!(device.attributes["gpu.nvidia.com"].type == "mig")', True, False),
        (
            'device.attributes["gpu.nvidia.com"].type == "mig" || device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
            True,
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].productName.matches("H100|H200")', True, False),
        ('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA A100")', False, True),
        ('device.attributes["gpu.nvidia.com"].productName.contains("80GB")', True, True),
        ('"profile" in device.attributes["gpu.nvidia.com"]', False, True),
        ('device.attributes["gpu.nvidia.com"].type != "gpu"', False, True),
    ],
)
def test_cel_forms(expression: str, on_h100: bool, on_mig: bool) -> None:
    selector = compile_selector(expression)
    assert (selector.matches(H100), selector.matches(MIG)) == (on_h100, on_mig)


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))',
        "device.attributes.exists(a, a == 1)",
        'has(device.attributes["gpu.nvidia.com"].profile)',
        "device.capacity['gpu.nvidia.com'].memory >= 1.5",
        "device.driver ==",
        "device.driver == 'x' ; drop",
    ],
)
def test_other_cel_is_unsupported_and_named(expression: str) -> None:
    with pytest.raises(SelectorUnsupportedError) as caught:
        compile_selector(expression).matches(H100)
    assert expression[:40] in str(caught.value)


def test_cel_length_and_depth_are_bounded() -> None:
    with pytest.raises(SelectorUnsupportedError, match=f"longer than {MAX_EXPRESSION_CHARS}"):
        compile_selector("true || " * 400 + "true")
    with pytest.raises(SelectorUnsupportedError, match="nested deeper"):
        compile_selector("(" * 40 + "true" + ")" * 40)


# -- evaluation --------------------------------------------------------------------------------

SPEC = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "source": "catalog"},
    "serving": {"maxModelLen": 8192},
}


def test_a_claim_template_places_on_its_devices_only() -> None:
    s = state(h100=template(1, "gpu.nvidia.com"), mig=template(1, "mig.nvidia.com"))
    inventory = build_inventory({}, {}, s)
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    on_h100 = evaluate(
        parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "h100"}}), llama, inventory, namespace="ns"
    )
    assert on_h100.verdict is Verdict.FITS
    assert [r.pool.product for r in on_h100.pools] == ["NVIDIA-H100-80GB-HBM3"]
    # 8B bf16 weights are ~15 GiB: a 9.5 GiB MIG 1g.10gb device cannot hold them
    on_mig = evaluate(
        parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "mig"}}), llama, inventory, namespace="ns"
    )
    assert on_mig.verdict is Verdict.DOES_NOT_FIT
    assert on_mig.reason is ReasonCode.WEIGHTS_EXCEED_BUDGET
    assert [r.pool.product for r in on_mig.pools] == ["NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"]


def test_claim_count_below_parallelism_does_not_fit() -> None:
    inventory = build_inventory({}, {}, state(one=template(1)))
    spec = parse_spec({**SPEC, "serving": {"tensorParallelSize": 2}, "placement": {"resourceClaimTemplateName": "one"}})
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), inventory, namespace="ns")
    assert (ev.verdict, ev.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.GPU_LIMIT_BELOW_PARALLELISM)
    assert "asks for 1 GPU per pod but tensorParallelSize x pipelineParallelSize is 2" in ev.message


def test_allocation_mode_all_gives_the_pod_every_matching_device_of_its_node() -> None:
    every = template(1)
    body = every["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    del body["count"]
    body["allocationMode"] = "All"
    inventory = build_inventory({}, {}, state(every=every))
    spec = parse_spec(
        {**SPEC, "serving": {"tensorParallelSize": 2}, "placement": {"resourceClaimTemplateName": "every"}}
    )
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), inventory, namespace="ns")
    # h100-dra-0 publishes 2 H100s: the pod gets both, TP 2 is covered (count 1 would be a false denial)
    assert ev.verdict is Verdict.FITS, ev.message
    spec = parse_spec(
        {**SPEC, "serving": {"tensorParallelSize": 4}, "placement": {"resourceClaimTemplateName": "every"}}
    )
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), inventory, namespace="ns")
    assert (ev.verdict, ev.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.GPU_LIMIT_BELOW_PARALLELISM)
    assert "asks for 2 GPU" in ev.message


def prioritized(*options: tuple[str, int]) -> dict[str, Any]:
    """A template whose one request is a firstAvailable list of (deviceClassName, count)."""
    subs = [{"name": f"o{i}", "deviceClassName": cls, "count": n} for i, (cls, n) in enumerate(options)]
    return {
        "kind": "ResourceClaimTemplate",
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}}},
    }


def test_first_available_takes_the_first_subrequest_a_node_can_satisfy() -> None:
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    # h100-dra-0 publishes 2 H100s: 4 cannot be allocated anywhere, so the scheduler falls back to the MIG slice
    inventory = build_inventory({}, {}, state(fallback=prioritized(("gpu.nvidia.com", 4), ("mig.nvidia.com", 1))))
    spec = parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "fallback"}})
    ev = evaluate(spec, llama, inventory, namespace="ns")
    assert [r.pool.product for r in ev.pools] == ["NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"]
    assert ev.verdict is Verdict.DOES_NOT_FIT  # the 8B model does not fit a 1g.10gb slice
    # 2 H100s can be allocated: the first subrequest is the one
    inventory = build_inventory({}, {}, state(first=prioritized(("gpu.nvidia.com", 2), ("mig.nvidia.com", 1))))
    spec = parse_spec(
        {**SPEC, "serving": {"tensorParallelSize": 2}, "placement": {"resourceClaimTemplateName": "first"}}
    )
    ev = evaluate(spec, llama, inventory, namespace="ns")
    assert ev.verdict is Verdict.FITS and [r.pool.product for r in ev.pools] == ["NVIDIA-H100-80GB-HBM3"]


def test_missing_template_and_unsupported_selector_are_unknown() -> None:
    weird = template(1, "gpu.nvidia.com", "device.attributes.exists(a, true)")
    inventory = build_inventory({}, {}, state(weird=weird))
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    missing = evaluate(
        parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "gone"}}), llama, inventory, namespace="ns"
    )
    assert (missing.verdict, missing.reason) == (Verdict.UNKNOWN, ReasonCode.RESOURCE_CLAIM_UNKNOWN)
    assert "ResourceClaimTemplate ns/gone not found" in missing.message
    odd = evaluate(
        parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "weird"}}), llama, inventory, namespace="ns"
    )
    assert (odd.verdict, odd.reason) == (Verdict.UNKNOWN, ReasonCode.DEVICE_SELECTOR_UNKNOWN)
    assert "device.attributes.exists(a, true)" in odd.message


# -- the watches (operator/watches/resourcewatch.py), without a cluster ----------------------------------


class _Page:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.data = json.dumps({"items": items, "metadata": {"resourceVersion": "7"}}).encode()


class _FakeApis:
    """CustomObjectsApi and CoreV1Api as the watches call them, serving the fixture."""

    def __init__(self, pods: list[dict[str, Any]] | None = None) -> None:
        self.pods = pods or []

    def list_cluster_custom_object(self, _group: str, _version: str, plural: str, **_: Any) -> _Page:
        kinds = {"resourceslices": "ResourceSlice", "deviceclasses": "DeviceClass"}
        items = [o for o in OBJECTS if o["kind"] == kinds.get(plural)]
        if plural == "resourceclaimtemplates":
            items = [{**template(2), "metadata": {"name": "two", "namespace": "ns"}}]
        return _Page(items)

    def list_pod_for_all_namespaces(self, **_: Any) -> _Page:
        return _Page(self.pods)

    def list_node(self, **_: Any) -> _Page:
        return _Page([{"metadata": {"name": "h100-dra-0", "labels": {"zone": "a"}}, "spec": {"unschedulable": True}}])


def test_sources_and_node_watch_build_the_merged_inventory() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {
            "nodeName": "h100-dra-0",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    apis = _FakeApis([pod])
    sources = Sources(custom_factory=lambda: apis, core_factory=lambda: apis)
    for w in sources.watches:
        w._list(apis)
    assert sources.synced
    state = sources.state()
    assert set(state.devices) == {"h100-dra-0", "a100-mig-dra-0"} and set(state.classes) == set(CLASSES)
    assert state.gpu_request("ns", "two").count == 2
    assert sources.pod_map()[("ns", "p")].resources == (("nvidia.com/gpu", 1),)
    watch = NodeWatch(api_factory=lambda: apis, sources=sources)
    watch._list(apis)
    inventory = watch.inventory()
    assert {g.product for g in inventory.gpus} == {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    # the Node's labels and cordon reach its DRA GPUs
    assert inventory.select(None, {"zone": "a"})[0] == [] and inventory.left_out(None, {"zone": "a"})
    assert inventory.select("NVIDIA-H100-80GB-HBM3", {})[0] == []  # cordoned; uncordoned, free GPUs follow claims
    watch.apply("MODIFIED", {"metadata": {"name": "h100-dra-0", "labels": {"zone": "a"}}, "spec": {}})
    assert watch.inventory().select("NVIDIA-H100-80GB-HBM3", {})[0][0].free_gpus == 2
    held = {
        "metadata": {"name": "c", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "h100-dra-0", "device": "gpu-0"}]}
            }
        },
    }
    sources.dra["resourceclaims"].apply("ADDED", held)  # the per-node cache must not hide the allocation
    assert watch.inventory().select("NVIDIA-H100-80GB-HBM3", {})[0][0].free_gpus == 1
    before = watch.version
    sources.dra["resourceslices"].apply("DELETED", SLICES[1])
    assert watch.version != before
    assert {g.product for g in watch.inventory().gpus} == {"NVIDIA-H100-80GB-HBM3"}


def test_a_cluster_without_the_dra_api_is_synced_and_empty() -> None:
    def lister(_api: Any) -> Any:
        def call(**_: Any) -> Any:
            raise ApiException(status=404, reason="Not Found")

        return call

    watch = ResourceWatch("resourceslices", lister, parse_slice, api_factory=object, relist_s=60)
    watch.start()
    try:
        assert watch.synced.wait(5)
        assert not watch.served and watch.snapshot() == {} and watch.errors == 0
    finally:
        watch.stop()


def gpu_and_nic(gpu_first: bool = False) -> dict[str, Any]:
    """llm-d's GKE template (guides/pd-disaggregation/modelserver/components/gke-rdma): a GPU and a NIC per claim."""
    gpu = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    nic = {"name": "nic", "exactly": {"deviceClassName": "mrdma.google.com", "count": 1}}
    requests = [gpu, nic] if gpu_first else [nic, gpu]
    return {"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {"requests": requests}}}}


def with_nic_class(s: DraState) -> DraState:
    nic = "device.driver == 'dra.net' && device.attributes['dra.net'].rdma == true"  # GKE DRANET's class
    return DraState(s.devices, s.allocated, {**s.classes, "mrdma.google.com": (nic,)}, s.templates)


@pytest.mark.parametrize("gpu_first", [True, False])
def test_claims_of_a_gpu_and_nic_template_add_up_their_gpu_requests(gpu_first: bool) -> None:
    # hunt50 F1: llm-d's decode (TP 4) holds four claims of a one-GPU + one-NIC template; here TP 2 and two claims
    # on h100-dra-0's two H100s. The NIC request, first or not, is no GPU.
    inventory = build_inventory({}, {}, with_nic_class(state(pair=gpu_and_nic(gpu_first))))
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    placement = {"resourceClaimTemplateName": "pair", "resourceClaimsPerPod": 2}
    spec = parse_spec({**SPEC, "serving": {"tensorParallelSize": 2}, "placement": placement})
    ev = evaluate(spec, llama, inventory, namespace="ns")
    assert ev.verdict is Verdict.FITS, ev.message
    assert [r.pool.product for r in ev.pools] == ["NVIDIA-H100-80GB-HBM3"]
    # one claim: 1 x 1 GPU < TP 2
    spec = parse_spec(
        {**SPEC, "serving": {"tensorParallelSize": 2}, "placement": {"resourceClaimTemplateName": "pair"}}
    )
    ev = evaluate(spec, llama, inventory, namespace="ns")
    assert (ev.verdict, ev.reason) == (Verdict.DOES_NOT_FIT, ReasonCode.GPU_LIMIT_BELOW_PARALLELISM)


def test_a_template_with_no_gpu_request_is_unknown_never_a_denial() -> None:
    nic_only = {
        "kind": "ResourceClaimTemplate",
        "spec": {"spec": {"devices": {"requests": [{"name": "nic", "deviceClassName": "mrdma.google.com"}]}}},
    }
    inventory = build_inventory({}, {}, with_nic_class(state(nic=nic_only)))
    spec = parse_spec({**SPEC, "placement": {"resourceClaimTemplateName": "nic"}})
    ev = evaluate(spec, model("meta-llama/Llama-3.1-8B-Instruct"), inventory, namespace="ns")
    assert ev.verdict is Verdict.UNKNOWN
    assert "requests no NVIDIA GPU (DeviceClass mrdma.google.com)" in ev.message


def test_a_workloads_gpu_claim_is_found_behind_a_claim_of_no_gpu() -> None:
    # hunt80 G2: a pod whose first claim is no GPU's (a DRANET NIC here; a ComputeDomain's IMEX channel on GB200) and
    # whose second is its GPUs' was Unknown, "requests no NVIDIA GPU": the webhook tries the container's other claims
    from fitgate.operator.decision.workloads import _gpu_claim  # noqa: PLC0415
    from fitgate.workloads import Reading  # noqa: PLC0415

    nic_only = {
        "kind": "ResourceClaimTemplate",
        "spec": {"spec": {"devices": {"requests": [{"name": "nic", "deviceClassName": "mrdma.google.com"}]}}},
    }
    inventory = build_inventory({}, {}, with_nic_class(state(nic=nic_only, gpus=template())))
    reading = Reading(
        "Deployment", "ns", "d", "vllm", "args", "meta-llama/Llama-3.1-8B-Instruct",
        claim_template="nic", claim_alternatives=("gpus",),
    )  # fmt: skip
    assert _gpu_claim(reading, inventory).claim_template == "gpus"
    # a GPU claim first stays; none anywhere stays as read (Unknown, naming it)
    first = replace(reading, claim_template="gpus", claim_alternatives=("nic",))
    assert _gpu_claim(first, inventory).claim_template == "gpus"
    assert _gpu_claim(replace(reading, claim_alternatives=("nic",)), inventory).claim_template == "nic"
