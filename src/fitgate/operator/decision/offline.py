"""``fitgate check``: the webhook's decision on ModelDeployment manifests, without a cluster.

The GPUs come from ``--gpu`` or each manifest's ``placement.gpuProduct`` (a catalog GPU or a GPU
Feature Discovery product string), as a pool of ``--gpus-per-node`` GPUs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.operator.decision.evaluate import evaluate, unknown
from fitgate.operator.decision.logic import DENIED_INVALID, decide
from fitgate.operator.decision.manifests import Unbuilt, documents, unreadable
from fitgate.operator.decision.status import performance_of, performance_text
from fitgate.operator.decision.workloads import evaluate_reading, finish
from fitgate.operator.gpus.cloudlabels import (
    AMD_PRODUCT,
    GKE_PARTITION,
    amd_device_product,
    gpu_from_labels,
    says_memory,
)
from fitgate.operator.gpus.dra import ClaimError, claim_requests
from fitgate.operator.gpus.inventory import NodeGPUs, product_gpu
from fitgate.operator.gpus.sharing import node_share
from fitgate.operator.schema.api import GROUP, KIND, MAX_NODES_PER_REPLICA, ModelDeploymentSpec, SpecError, parse_spec
from fitgate.sizing import ReasonCode, SizingError, Verdict
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.instances import bare_gpu_name, larger_namesake, named_gpu
from fitgate.workloads import Reading, configmaps_of, cpu_backend, read_workload
from fitgate.workloads.bounds import BudgetError
from fitgate.workloads.crds import PARTS_READERS
from fitgate.workloads.kinds import KINDS, MERGED_KINDS, find_kind, other_group
from fitgate.workloads.kserve import runtimes_of
from fitgate.workloads.kubeai import off_gpu_profile

#: Node labels that name the GPU product (GPU Feature Discovery; the AMD GPU operator's labeller).
_PRODUCT_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name")


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one manifest document."""

    source: str
    name: str
    verdict: str  # Fits | Tight | DoesNotFit | Unknown | Invalid | Skipped (not a vLLM workload: message says why)
    message: str
    gpu: str | None = None
    admitted: bool | None = None  # what the webhook would answer (None: not evaluated)
    kind: str = KIND
    notes: tuple[str, ...] = ()  # the plan's and the checkpoint's notes (Evaluation.notes): bounds, what is not counted
    # issue 24 (hunt91 G8): status.performance as the operator writes it, and that as one line
    performance: dict[str, Any] | None = None
    performance_line: str = ""

    def line(self) -> str:
        """One line for the terminal."""
        return f"{self.source}: {self.name}: {self.verdict}: {self.message}"

    def lines(self) -> list[str]:
        """The line, then one indented line a note."""
        speed = [f"  performance: {self.performance_line}"] if self.performance_line else []
        return [self.line(), *speed, *(f"  note: {n}" for n in self.notes)]

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "source": self.source,
            "kind": self.kind,
            "name": self.name,
            "verdict": self.verdict,
            "gpu": self.gpu,
            "admitted": self.admitted,
            "message": self.message,
            "notes": list(self.notes),
            "performance": self.performance,
        }


#: GPUs a node of the offline pool has when neither ``--gpus-per-node`` nor a node label says: the common node of 8,
#: or as many as one pod of the workload asks for, whichever is more. A pod that asks for 16 GPUs runs on a node of
#: 16 (GKE's a2-megagpu-16g, whose ``cloud.google.com/gke-accelerator`` label gives no count) and stays Pending on a
#: smaller one, which is not a memory misfit: the gate does not deny it on a node size nobody stated (hunt90).
DEFAULT_GPUS_PER_NODE = 8


def per_node(stated: int | None, one_pod_asks: int) -> int:
    """The GPUs a node of the offline pool has.

    ``stated`` (``--gpus-per-node``), else :data:`DEFAULT_GPUS_PER_NODE` or what one pod asks for, whichever is more.
    """
    return stated if stated is not None else max(DEFAULT_GPUS_PER_NODE, one_pod_asks)


def _node_note(stated: int | None, one_pod_asks: int) -> str:
    """What the check assumed of a node nobody sized, when one pod asks for more than a common node holds."""
    if stated is not None or one_pod_asks <= DEFAULT_GPUS_PER_NODE:
        return ""
    return (
        f" (no node size given: checked on a node of the {one_pod_asks} GPUs one pod asks for; most nodes hold "
        f"{DEFAULT_GPUS_PER_NODE}, where the pod stays Pending: pass --gpus-per-node to check on yours)"
    )


def check_document(source: str, doc: Any, gpu_name: str | None, gpus_per_node: int | None) -> CheckResult | None:
    """The verdict on one YAML document (None for documents that are not ModelDeployments)."""
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not str(doc.get("apiVersion", "")).startswith(GROUP):
        return None
    meta = doc.get("metadata") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    try:
        spec = parse_spec(doc.get("spec"))
    except SpecError as exc:
        return CheckResult(source, name, "Invalid", str(exc), admitted=False)
    product = gpu_name or spec.placement.gpu_product
    labelled = None
    if not product:  # hunt106 F1: the placement's own node labels, as a Deployment's nodeSelector is read (below)
        labelled, _ = gpu_from_labels(spec.placement.node_selector)
        product = labelled.product if labelled is not None else None
    if not product:
        return CheckResult(
            source,
            name,
            "Unknown",
            "no GPU to check against: pass --gpu, set placement.gpuProduct or select nodes by a GPU label "
            "(nvidia.com/gpu.product, a GKE accelerator, Karpenter GPU name or instance type)",
        )
    if gpu_name is not None:
        gpu = named_gpu(product)
    elif labelled is not None:
        gpu = labelled.gpu
    else:
        gpu = product_gpu(product, spec.placement.node_selector)[0]
        if gpu is None and (gpu := named_gpu(product)) is not None:
            product = gpu.name  # hunt106 F2: an instance type as gpuProduct (g5.8xlarge) names its GPU as --gpu does
    if gpu is None:  # the webhook's Unknown: a GPU fitgate cannot size is not a reason to deny
        msg = _unsized_gpu(product, gpu_name is not None)
        decision = decide(spec, unknown(ReasonCode.NO_MATCHING_GPU_POOL, msg), "Warn")
        return CheckResult(source, name, "Unknown", msg, product, admitted=decision.allowed)
    try:
        facts = resolve(spec.model.name, spec.model.revision, source=spec.model.source)
        model = to_model_input(facts)
    except (CheckpointError, SizingError) as exc:  # the webhook's Unknown: policy.onUnknown decides
        decision = decide(spec, unknown(ReasonCode.CHECKPOINT_UNAVAILABLE, str(exc)), "Warn")
        return CheckResult(source, name, "Unknown", str(exc), product, admitted=decision.allowed)
    labels = dict(spec.placement.node_selector)
    nodes = spec.placement.nodes_per_replica  # a pool of as many nodes as one replica spans
    asks = spec.serving.tensor_parallel_size * spec.serving.pipeline_parallel_size * spec.placement.data_parallel_size
    size = per_node(gpus_per_node or (labelled.count if labelled is not None else None), -(-asks // nodes))
    pools = [NodeGPUs(f"offline-{i}", labels, product, gpu, size) for i in range(nodes)]
    namesake = _namesake(product, labels) if gpu_name is None else None  # --gpu's reading is check_files'
    if namesake is not None:  # a bare A100 / V100 / H20 / GH200 placement: either card's nodes serve it (inventory)
        pools += [NodeGPUs(f"offline-{namesake.name}-{i}", labels, namesake.name, namesake, size) for i in range(nodes)]
    offline = {"gpu_product": None, "resource_claim_template_name": None}  # the pool is --gpu's, not the cluster's
    spec_offline = spec.model_copy(update={"placement": spec.placement.model_copy(update=offline)})
    ev = evaluate(spec_offline, model, pools, facts=facts)
    decision = decide(spec, ev, "Warn")  # the webhook's own decision
    message = ev.message + _claim_note(spec.placement.resource_claim_template_name, product)
    message += _node_note(gpus_per_node, -(-asks // nodes))
    if not decision.allowed and decision.code == DENIED_INVALID:
        return CheckResult(source, name, "Invalid", message, product, admitted=False)
    perf = performance_of(ev.speed)  # the operator's status.performance, same code path (hunt91 G8)
    return CheckResult(
        source,
        name,
        ev.verdict.value,
        message,
        product,
        admitted=decision.allowed,
        notes=ev.notes,
        performance=None if perf is None else perf.model_dump(by_alias=True, mode="json", exclude_none=True),
        performance_line="" if perf is None else performance_text(perf, *_targets(spec)),
    )


def _targets(spec: ModelDeploymentSpec) -> tuple[float | None, float | None]:
    """The workload's TTFT and TPOT targets in ms (None: not given)."""
    w = spec.workload
    return (None, None) if w is None else (w.ttft_ms, w.tpot_ms)


def _unsized_gpu(product: str, from_flag: bool) -> str:
    """Why a GPU cannot be sized offline, and what would size it."""
    if from_flag:
        return f"GPU {product!r} is not in the catalog (see `fitgate gpus`): not sized"
    return (
        f"GPU {product!r} is not in the catalog and the nodeSelector gives no memory label (nvidia.com/gpu.memory, "
        "amd.com/gpu.vram): not sized; pass --gpu with one of `fitgate gpus`"
    )


def _claim_note(template: str | None, product: str) -> str:
    """What an offline check of a DRA claim could not know (no ResourceSlices offline)."""
    if not template:
        return ""
    return (
        f" (ResourceClaimTemplate {template} is not resolved offline, there are no ResourceSlices: sized on {product})"
    )


def check_files(
    files: Iterable[str], gpu_name: str | None = None, gpus_per_node: int | None = None
) -> list[CheckResult]:
    """The verdict on every ModelDeployment and workload in ``files``; ``gpus_per_node`` None: :func:`per_node`."""
    unread: list[CheckResult] = []
    read: list[tuple[str, Any]] = []
    for path in files:
        try:
            read.extend(documents(path))
        except (OSError, yaml.YAMLError, BudgetError, ValueError, RecursionError) as exc:
            unread.append(CheckResult(path, "-", "Invalid", unreadable(exc, path)))
    results = _evaluate_documents(read, gpu_name, gpus_per_node)
    namesake = larger_namesake(gpu_name) if gpu_name else None
    if namesake is not None and any(r.verdict == "DoesNotFit" for r in results):
        # a bare A100 / V100 / H20 / GH200 names two cards: never deny on the smaller what the larger runs (the first
        # rule; plan reads the name the same way, cli/plan.py)
        larger = _evaluate_documents(read, namesake.name, gpus_per_node)
        if len(larger) == len(results):
            results = [
                _namesake_result(r, big, str(gpu_name), namesake.name) for r, big in zip(results, larger, strict=True)
            ]
    return unread + results


def _namesake(product: str, labels: Mapping[str, str]) -> GpuModel | None:
    """The larger card a selector's bare product name may also mean (``NVIDIA-H20``: 96 or 141 GB), else None.

    None too where a memory label beside the name says which card it is.
    """
    if says_memory(labels):
        return None
    return larger_namesake(bare_gpu_name(product))


def _namesake_result(small: CheckResult, big: CheckResult, asked: str, larger: str) -> CheckResult:
    """``big`` (with a note) where the smaller card of an ambiguous ``--gpu`` denies and the larger does not."""
    if (
        small.verdict != "DoesNotFit"
        or big.verdict == "DoesNotFit"
        or (small.source, small.name) != (big.source, big.name)
    ):
        return small
    found = named_gpu(asked)
    card = found.name if found is not None else asked
    why = (
        f"--gpu {asked} names the {card} and the {larger}: it does not fit the {card} "
        f"({small.message.split(' [per GPU')[0]}), so this is the {larger}'s verdict; pass --gpu {card} for the "
        "smaller card"
    )
    return replace(big, notes=(*big.notes, why))


def _evaluate_documents(
    read: list[tuple[str, Any]], gpu_name: str | None, gpus_per_node: int | None
) -> list[CheckResult]:
    """The results of every document ``read`` holds, on ``gpu_name`` (None: each one's placement)."""
    results: list[CheckResult] = []
    configmaps = configmaps_of([doc for _, doc in read])  # --config files of the whole manifest set
    runtimes = runtimes_of([doc for _, doc in read])  # KServe ServingRuntimes, merged into their InferenceServices
    templates = claim_templates_of([doc for _, doc in read])  # the DRA device classes the workloads' claims ask for
    for source, doc in read:
        if isinstance(doc, Unbuilt):
            results.append(_unbuilt(source, doc))
            continue
        if isinstance(doc, dict) and not isinstance(doc.get("kind", ""), str):  # hunt75: `kind: [a]` was a TypeError
            results.append(CheckResult(source, "-", "Skipped", "not a Kubernetes object: its kind is not a string"))
            continue
        result = check_document(source, doc, gpu_name, gpus_per_node)
        if result is not None:
            results.append(result)
            continue
        if isinstance(doc, dict) and doc.get("kind") in PARTS_READERS:  # one result per worker / role
            try:
                parts = PARTS_READERS[str(doc["kind"])](doc, configmaps)
            except Exception:  # hunt83 F6: one object's error (a serveConfigV2 that is not YAML)
                # ended the run; read_workload never raises and says it as the webhook does (Invalid / Unknown)
                whole = read_workload(doc, configmaps)
                parts = [whole] if whole is not None else []
            results.extend(check_reading(source, r, gpu_name, gpus_per_node, templates) for r in parts)
            if not parts:
                results.append(skipped(source, doc, _no_vllm_part(doc)))
            continue
        result = check_workload(source, doc, gpu_name, gpus_per_node, configmaps, runtimes, templates)
        results.append(result if result is not None else skipped(source, doc))
    return results


def _no_vllm_part(doc: Any) -> str:
    """Why a multi-part object is skipped: no vLLM server, or a Dynamo 0.3 graph fitgate does not read (hunt173 F3)."""
    text = json.dumps(doc, default=str)[: 1 << 20]
    if re.search(r"dynamo serve graphs\.\w+:\w*(Vllm|Prefill)Worker", text):
        return (
            "a Dynamo 0.3 `dynamo serve graphs...:VllmWorker` graph: its vLLM engine args are in the "
            "DYN_DEPLOYMENT_CONFIG environment JSON, which fitgate does not read (not sized)"
        )
    return "none of its workers or roles runs a vLLM server"


def _unbuilt(source: str, doc: Unbuilt) -> CheckResult:
    """A document that cannot be built: Invalid where fitgate sizes its kind (or none can be read), else Skipped.

    A Secret with an unrendered ``{{HF_TOKEN}}`` beside a Deployment is not that workload's fault (hunt104 F2),
    though ``kubectl apply`` refuses it too.
    """
    sized = not doc.kind or doc.kind == KIND or doc.kind in PARTS_READERS or find_kind(doc.kind) is not None
    if sized:
        return CheckResult(source, doc.name, "Invalid", doc.why, kind=doc.kind or "-")
    why = (
        f"a {doc.kind} fitgate does not size, and it {doc.why} (kubectl apply refuses it too; an unrendered template?)"
    )
    return CheckResult(source, doc.name, "Skipped", why, kind=doc.kind)


def claim_templates_of(objects: list[Any]) -> dict[str, tuple[str, ...]]:
    """ResourceClaimTemplate name -> the DeviceClasses of its requests (and their alternatives), of a manifest set."""
    out: dict[str, tuple[str, ...]] = {}
    for obj in objects:
        if isinstance(obj, dict) and obj.get("kind") == "ResourceClaimTemplate":
            try:
                requests = claim_requests(obj)
            except ClaimError:
                continue
            name = str((obj.get("metadata") or {}).get("name") or "")
            out[name] = tuple(o.device_class for r in requests for o in (r.alternatives or (r,)))
    return out


def _gpu_class(device_class: str) -> bool:
    """Whether a DeviceClass name is an NVIDIA or AMD GPU's (gpu.nvidia.com, mig.nvidia.com, gpu.amd.com)."""
    name = device_class.lower()
    return ("nvidia" in name or "amd" in name) and "compute-domain" not in name


def amd_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` with the AMD labeller's legacy ``beta.amd.com/gpu.*`` read as ``amd.com/gpu.*`` where not both.

    hunt116 F3: ROCm's k8s-device-plugin labeller writes both prefixes; a selector on the beta one named no GPU.
    """
    out = dict(labels)
    for key, value in labels.items():
        if key.startswith("beta.amd.com/gpu."):
            out.setdefault(key.removeprefix("beta."), value)
    product = amd_device_product(out)
    if product is not None:  # hunt179 F2: a device-id selector names the card where no product-name label does
        out.setdefault(AMD_PRODUCT, product)
    return out


def skipped(source: str, doc: Any, why: str | None = None) -> CheckResult:
    """The line ``fitgate check`` prints for an object it does not size, with the reason."""
    if not isinstance(doc, dict):
        return CheckResult(source, "-", "Skipped", why or "not a Kubernetes object (a mapping with kind)", kind="-")
    kind = str(doc.get("kind") or "")
    raw = doc.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    if why is None:
        if kind in MERGED_KINDS:
            why = f"a {kind}: read into the workloads of this manifest set that use it"
        elif kind == KIND:  # hunt114 F3: modelplane.ai's ModelDeployment said "kind ModelDeployment is not one ..."
            api = str(doc.get("apiVersion") or "(none)")[:100]
            why = f"a {KIND} of {api}, not fitgate's ({GROUP}): another project's kind of the same name"
        elif (entry := find_kind(kind)) is None:
            known = ", ".join(k.kind for k in KINDS)
            why = f"kind {kind or '(none)'} is not one fitgate reads ({known})"
            if not kind and "apiVersion" not in doc:  # hunt99 G1: a chart's values.yaml, given as it is
                why += (
                    "; a Helm values file? render the chart first: helm template NAME CHART -f FILE | fitgate check -"
                )
        elif (group := other_group(doc)) is not None:
            why = f"{kind} of group {group} is not one fitgate reads (it reads {entry.group or 'core'}'s)"
        elif cpu_backend(doc):  # hunt27 O1: the reason, not "no vLLM server"
            why = "runs vLLM's CPU backend (a vLLM CPU image or --device cpu): no GPU to size"
        elif (off_gpu := off_gpu_profile(doc)) is not None:
            why = off_gpu
        else:
            why = "runs no vLLM server (no container runs `vllm serve` or a vLLM image's entrypoint)"
    return CheckResult(source, name, "Skipped", why, kind=kind or "-")


def check_workload(
    source: str,
    doc: Any,
    gpu_name: str | None,
    gpus_per_node: int | None,
    configmaps: dict[str, dict[str, str]],
    runtimes: dict[str, dict[str, Any]] | None = None,
    templates: dict[str, tuple[str, ...]] | None = None,
) -> CheckResult | None:
    """The verdict on a vLLM workload (Deployment, LeaderWorkerSet, ...); None for anything else."""
    reading = read_workload(doc, configmaps, runtimes=runtimes)
    if reading is None:
        return None
    return check_reading(source, reading, gpu_name, gpus_per_node, templates)


def check_reading(
    source: str,
    reading: Reading,
    gpu_name: str | None,
    gpus_per_node: int | None,
    templates: dict[str, tuple[str, ...]] | None = None,
) -> CheckResult:
    """The verdict on one reading.

    The GPU is ``--gpu``, else the product label the workload's nodeSelector or required node affinity
    names. A workload spanning N nodes is checked on a pool of N nodes of ``--gpus-per-node`` GPUs (else the count
    the labels give, else :func:`per_node`). A DRA claim
    whose template (in the same files) asks for no NVIDIA or AMD GPU class (Intel Gaudi, a Rebellions NPU) is
    Unknown, never sized as the ``--gpu`` card (hunt60 F1).
    """
    claim = reading.claim_template
    classes = (templates or {}).get(claim or "")
    if claim and classes and not any(_gpu_class(c) for c in classes):
        # hunt80 G2: a ComputeDomain's IMEX channel claim listed before the GPU claim: the GPUs are the other's
        gpu_claim = next(
            (t for t in reading.claim_alternatives if any(_gpu_class(c) for c in (templates or {}).get(t, ()))), None
        )
        if gpu_claim is not None:
            claim, classes = gpu_claim, (templates or {}).get(gpu_claim, ())
    if claim and classes and not any(_gpu_class(c) for c in classes):
        kinds = ", ".join(sorted(set(classes)))[:200]
        why = f"its devices come from ResourceClaimTemplate {claim} (DeviceClass {kinds}), not an NVIDIA or AMD GPU"
        return CheckResult(source, f"{reading.namespace}/{reading.name}", "Unknown", why, kind=reading.kind)
    if claim:  # offline there are no ResourceSlices: the pool is --gpu's, and the claim taken to cover TP x PP
        reading = replace(
            reading, claim_template=None, gpus_per_replica=max(reading.gpus_per_replica, reading.parallel_gpus)
        )
    name = f"{reading.namespace}/{reading.name}"
    if reading.invalid is not None:
        return CheckResult(source, name, "Invalid", reading.invalid, admitted=False, kind=reading.kind)
    selector = amd_labels({**reading.affinity_gpu, **reading.node_selector})
    product = gpu_name or next((selector[k] for k in _PRODUCT_LABELS if k in selector), None)
    label_note, labelled = None, None
    if not product:  # a cloud's GPU label: GKE accelerator, Karpenter GPU name, instance type (docs/clusters.md)
        named, label_note = gpu_from_labels(selector)
        if named is not None:
            product, gpus_per_node = named.product, named.count or gpus_per_node
            labelled = named.gpu if named.scheme == "cloud-name" else None  # with its memory label read (hunt175 F2)
            if named.scheme == "gke" and selector.get(GKE_PARTITION, "").strip():
                # hunt148 S1: GKE's MIG nodes offer one nvidia.com/gpu per slice of this size, as the inventory reads
                # them (hunt77 F1): a pod selecting the partition gets a slice, not the whole card
                product = f"{product}-MIG-{selector[GKE_PARTITION].strip()}"
    if not product and reading.gpu_resource == "amd.com/gpu" and "amd.com/gpu.vram" in selector:
        product = "AMD-GPU-unnamed"  # hunt116 F3: the VRAM label alone, as the inventory sizes such a node
    gpu = None
    if product:
        gpu = labelled or (product_gpu(product, selector)[0] if gpu_name is None else named_gpu(product))
    model = facts = None
    if reading.unknown is None and reading.gpu_shortfall() is None:
        if not product:
            msg = (
                "no GPU to check against: pass --gpu or select nodes by nvidia.com/gpu.product (or a GKE "
                "accelerator, Karpenter GPU name or instance type label)"
                if reading.gpu_resource != "amd.com/gpu"
                else "no GPU to check against: pass --gpu or select nodes by amd.com/gpu.product-name (or "
                "amd.com/gpu.vram, or an instance type label)"
            )
            if label_note:  # hunt148 S7: the label that is there, and why it names no card, said
                msg += f" ({label_note})"
            return CheckResult(source, name, "Unknown", msg, kind=reading.kind)
        if gpu is None:  # as the webhook: a GPU fitgate cannot size is Unknown, admitted (docs/workload-webhook.md)
            return CheckResult(
                source, name, "Unknown", _unsized_gpu(product, gpu_name is not None), product, True, reading.kind
            )
        try:
            facts = resolve(reading.model or "", reading.revision)
            model = to_model_input(facts)
        except (CheckpointError, SizingError) as exc:
            ev = unknown(ReasonCode.CHECKPOINT_UNAVAILABLE, str(exc))
            return CheckResult(source, name, "Unknown", finish(reading, ev).message, product, True, reading.kind)
    pools = []
    node_note = ""
    if gpu is not None and product and reading.pods_per_replica <= MAX_NODES_PER_REPLICA:
        # more pods than a replica may span is the spec's Invalid (as the webhook answers), before a pool per pod
        # is built (hunt83 F5: an LWS size of 10**30 grew to 3.9 GB and MemoryError)
        labels = dict(selector)
        one_pod = -(-(reading.gpus_per_replica or reading.parallel_gpus) // reading.pods_per_replica)
        size = per_node(gpus_per_node, one_pod)
        node_note = _node_note(gpus_per_node, one_pod)  # hunt92 F1: the assumption said, not hidden
        # hunt128 F1: a selector that names time-slicing or MPS labels picks nodes that carry them, so each pod
        # gets the share the inventory would give those nodes (MPS pins card / replicas), not the whole card
        share = node_share(labels)
        pools = [
            NodeGPUs(f"offline-{i}", labels, product, gpu, size, share=share) for i in range(reading.pods_per_replica)
        ]
        namesake = _namesake(product, labels) if gpu_name is None else None
        if namesake is not None:  # hunt175 F2: a selector's bare H20 / GH200 is either card, as the ModelDeployment's
            pools += [
                NodeGPUs(f"offline-{namesake.name}-{i}", labels, namesake.name, namesake, size, share=share)
                for i in range(reading.pods_per_replica)
            ]
    verdict = evaluate_reading(reading, model, pools, facts=facts)
    if verdict.invalid:
        return CheckResult(source, name, "Invalid", verdict.message, product, False, reading.kind)
    admitted = verdict.verdict is not Verdict.DOES_NOT_FIT
    message = verdict.message + _claim_note(claim, product or "") + node_note
    return CheckResult(
        source, name, verdict.verdict.value, message, product, admitted, reading.kind, verdict.evaluation.notes
    )
