"""GPUs a deployment will get from a node that does not exist yet: pools that scale from zero (pure).

Fit is not availability. When no node matches a placement, the GPU it will land on can still be known:

* from the placement itself: ``placement.gpuProduct``, or a nodeSelector / single-valued required node
  affinity on a GPU label (GFD, GKE accelerator, Karpenter GPU name, instance type:
  :mod:`fitgate.operator.gpus.cloudlabels`);
* from the autoscaler's templates whose labels and taints admit the placement:

  - Karpenter ``NodePool`` (``karpenter.sh/v1``): ``spec.template.metadata.labels``,
    ``spec.template.spec.requirements`` (In / NotIn / Exists / DoesNotExist / Gt / Lt) and ``taints``
    (kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go; CRD in e2e/crds/karpenter.sh_nodepools.yaml). A key
    Karpenter itself sets (instance type, zone, arch, capacity type, ``karpenter.k8s.aws/*``) that the
    NodePool leaves open is any value: Karpenter picks an instance type that has it;
  - Karpenter ``NodeClaim`` (``karpenter.sh/v1``): a node being launched, Karpenter's or KAITO's
    gpu-provisioner's (a Workspace's instance type), read like a NodePool's template;
  - cluster-autoscaler's scale-from-zero annotations on Cluster API ``MachineDeployment`` / ``MachineSet``:
    ``capacity.cluster-autoscaler.kubernetes.io/gpu-type`` (the resource, ``nvidia.com/gpu``), ``/gpu-count``,
    ``/labels`` (``k=v,k=v``) and ``/taints`` (``k=v:Effect,...``) (kubernetes/autoscaler
    cluster-autoscaler/cloudprovider/clusterapi/clusterapi_utils.go and its README, "Scale from zero support").

A GPU named nowhere is not guessed: the verdict is Unknown (reason NoNodeYet), never DoesNotFit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fitgate.operator.gpus.cloudlabels import FAMILY_KEYS, GPU_KEYS, LabelGpu, gpu_from_labels, namesakes
from fitgate.operator.gpus.placement import Taint, Toleration, blocking_taint
from fitgate.sizing.gpus import GpuModel, find_gpu

#: Labels Karpenter sets from the instance type it launches: a NodePool that leaves one open admits any value
#: (kubernetes-sigs/karpenter pkg/apis/v1/labels.go WellKnownLabels; aws provider pkg/apis/v1/labels.go).
KARPENTER_WELL_KNOWN = (
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
)
KARPENTER_WELL_KNOWN_PREFIXES = ("karpenter.k8s.aws/", "eks.amazonaws.com/")
CA_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
#: Bounds on what one template may carry (the watch drops the rest).
MAX_REQUIREMENTS = 100
MAX_VALUES = 500


@dataclass(frozen=True)
class Requirement:
    """A node selector requirement (key, operator, values)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def admits(self, value: str) -> bool:
        """Whether a node with ``key=value`` satisfies it."""
        if self.operator == "In":
            return value in self.values
        if self.operator == "NotIn":
            return value not in self.values
        if self.operator == "Exists":
            return True
        if self.operator in ("Gt", "Lt") and self.values and value.lstrip("-").isdigit():
            limit = self.values[0]
            if not limit.lstrip("-").isdigit():
                return False
            return int(value) > int(limit) if self.operator == "Gt" else int(value) < int(limit)
        return False  # DoesNotExist, or a value that cannot be compared


@dataclass(frozen=True)
class NodeTemplate:
    """The nodes an autoscaler can create: a Karpenter NodePool or a Cluster API node group."""

    kind: str  # NodePool, MachineDeployment, MachineSet
    name: str  # namespace/name for namespaced kinds
    labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    gpu_count: int | None = None  # cluster-autoscaler's gpu-count
    open_keys: tuple[str, ...] = ()  # keys the autoscaler sets itself (any value)
    open_prefixes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """How the pool shows its origin: ``NodePool/gpu``."""
        return f"{self.kind}/{self.name}"

    def admits(self, key: str, value: str) -> bool:
        """Whether a node of this template can carry ``key=value``."""
        fixed = dict(self.labels)
        if key in fixed:
            return fixed[key] == value
        reqs = [r for r in self.requirements if r.key == key]
        if reqs:
            return all(r.admits(value) for r in reqs)
        return key in self.open_keys or key.startswith(self.open_prefixes)

    def candidates(self, key: str) -> tuple[str, ...]:
        """The values a node of this template may carry for ``key`` when it says (a label, an ``In``)."""
        fixed = dict(self.labels)
        if key in fixed:
            return (fixed[key],)
        for r in self.requirements:
            if r.key == key and r.operator == "In":
                return r.values
        return ()


def _str_pairs(raw: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in list(raw.items())[:MAX_REQUIREMENTS]))


def _taints(raw: object) -> tuple[Taint, ...]:
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, Mapping) and t.get("key"):
            out.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule")))
    return tuple(out[:MAX_REQUIREMENTS])


def _requirements(spec: object) -> tuple[Requirement, ...]:
    requirements = []
    raw = spec.get("requirements") if isinstance(spec, Mapping) else None
    for r in raw[:MAX_REQUIREMENTS] if isinstance(raw, list) else []:
        if isinstance(r, Mapping) and r.get("key") and r.get("operator"):
            values = tuple(str(v) for v in (r.get("values") or [])[:MAX_VALUES])
            requirements.append(Requirement(str(r["key"]), str(r["operator"]), values))
    return tuple(requirements)


def parse_nodeclaim(obj: Mapping[str, Any]) -> NodeTemplate | None:
    """A Karpenter ``NodeClaim`` (karpenter.sh/v1): a node being launched, by a NodePool or by KAITO.

    KAITO's gpu-provisioner asks for the Workspace's instance type with one (kaito-project/kaito
    pkg/utils/nodeclaim/nodeclaim.go GenerateNodeClaimManifestWithOptions: labels from the Workspace's
    label selector, ``node.kubernetes.io/instance-type In [<instanceType>]``, taint ``sku=gpu:NoSchedule``).
    A claim whose node has joined is left to the node.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    if ((obj.get("status") or {}).get("nodeName")) or not isinstance(spec, Mapping):
        return None
    return NodeTemplate(
        "NodeClaim",
        str(meta.get("name") or "?"),
        _str_pairs(meta.get("labels")),
        _requirements(spec),
        _taints(spec.get("taints")),
        open_keys=KARPENTER_WELL_KNOWN,
        open_prefixes=KARPENTER_WELL_KNOWN_PREFIXES,
    )


def parse_nodepool(obj: Mapping[str, Any]) -> NodeTemplate | None:
    """A Karpenter ``NodePool`` (karpenter.sh/v1) as a template (None: not readable)."""
    meta = obj.get("metadata") or {}
    template = (obj.get("spec") or {}).get("template") or {}
    if not isinstance(template, Mapping):
        return None
    spec = template.get("spec") or {}
    requirements = _requirements(spec)
    name = str(meta.get("name") or "?")
    labels = dict(_str_pairs((template.get("metadata") or {}).get("labels")))
    labels["karpenter.sh/nodepool"] = name  # Karpenter labels its nodes with their NodePool's name
    return NodeTemplate(
        "NodePool",
        name,
        tuple(sorted(labels.items())),
        requirements,
        _taints(spec.get("taints") if isinstance(spec, Mapping) else None),
        open_keys=KARPENTER_WELL_KNOWN,
        open_prefixes=KARPENTER_WELL_KNOWN_PREFIXES,
    )


def _pairs_text(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in text.split(",")[:MAX_REQUIREMENTS]:
        key, sep, value = part.strip().partition("=")
        if sep and key:
            out.append((key.strip(), value.strip()))
    return tuple(sorted(out))


def _taints_text(text: str) -> tuple[Taint, ...]:
    out = []
    for part in text.split(",")[:MAX_REQUIREMENTS]:
        left, _, effect = part.strip().rpartition(":")
        key, _, value = left.partition("=")
        if key:
            out.append(Taint(key.strip(), value.strip(), effect.strip() or "NoSchedule"))
    return tuple(out)


def parse_machine_group(obj: Mapping[str, Any], kind: str = "MachineDeployment") -> NodeTemplate | None:
    """A Cluster API node group with cluster-autoscaler's scale-from-zero GPU annotations (None: no GPUs)."""
    meta = obj.get("metadata") or {}
    notes = {str(k): str(v)[:4096] for k, v in (meta.get("annotations") or {}).items()}
    gpu_type = notes.get(f"{CA_PREFIX}gpu-type", "")
    count_text = notes.get(f"{CA_PREFIX}gpu-count", "").strip()
    if not gpu_type and not count_text:
        return None
    count = int(count_text) if count_text.isdigit() and len(count_text) < 6 else None
    name = f"{meta.get('namespace') or ''}/{meta.get('name') or '?'}"
    return NodeTemplate(
        kind,
        name,
        _pairs_text(notes.get(f"{CA_PREFIX}labels", "")),
        (),
        _taints_text(notes.get(f"{CA_PREFIX}taints", "")),
        gpu_count=count,
    )


@dataclass(frozen=True)
class Prospect:
    """A GPU the placement will get on a node that does not exist yet."""

    gpu: LabelGpu
    count: int | None  # GPUs per node, when the template or the labels say
    source: str  # placement, or the templates: NodePool/gpu, MachineDeployment/ns/name


def _from_template(t: NodeTemplate, selector: Mapping[str, str]) -> list[tuple[LabelGpu, int | None]]:
    merged = {**dict(t.labels), **selector}
    got, _ = gpu_from_labels(merged)
    if got is not None:
        return [(each, got.count or t.gpu_count) for each in namesakes(got, merged)]
    # hunt77 F11: an EKS Auto Mode / Karpenter NodePool may pin only the instance family (g6e: every instance of
    # it carries an L40S), which names the GPU as well as a GPU name would
    for key in (*GPU_KEYS, *FAMILY_KEYS):
        values = t.candidates(key)
        out = []
        for value in values[:MAX_VALUES]:
            each, _ = gpu_from_labels({**merged, key: value})
            if each is not None:
                out.append((each, each.count or t.gpu_count))
        if out:
            return out
    return []


#: Templates named in a prospect's source; the rest are counted.
MAX_SOURCES_NAMED = 3


def _sources(names: list[str]) -> str:
    more = len(names) - MAX_SOURCES_NAMED
    return ",".join(names[:MAX_SOURCES_NAMED]) + (f" and {more} more" if more > 0 else "")


def prospects(
    gpu_product: str | None,
    node_selector: Mapping[str, str],
    tolerations: tuple[Toleration, ...],
    templates: Iterable[NodeTemplate],
) -> tuple[Prospect, ...]:
    """The GPUs a placement that matches no node will get: from autoscaler templates, else from itself."""
    wanted: GpuModel | None = find_gpu(gpu_product) if gpu_product else None
    found: dict[tuple[str, int | None], tuple[LabelGpu, list[str]]] = {}
    for t in templates:
        if not all(t.admits(k, v) for k, v in node_selector.items()):
            continue
        if blocking_taint(t.taints, False, tolerations) is not None:
            continue
        for got, count in _from_template(t, node_selector):
            if wanted is not None and got.gpu.name != wanted.name:
                continue
            found.setdefault((got.gpu.name, count), (got, []))[1].append(t.source)
    if found:
        return tuple(Prospect(got, count, _sources(names)) for (_, count), (got, names) in found.items())
    if wanted is not None:
        return (Prospect(LabelGpu(str(gpu_product), wanted, None, wanted.vendor, "placement"), None, "placement"),)
    named, _ = gpu_from_labels(node_selector)
    if named is not None:
        return tuple(Prospect(each, named.count, "placement") for each in namesakes(named, node_selector))
    return ()
