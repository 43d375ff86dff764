"""GPUs from Dynamic Resource Allocation (resource.k8s.io): ResourceSlices, claims, device classes, CEL.

Pure functions over the API objects as dicts (the DRA watch, :mod:`fitgate.operator.drawatch`, calls them).

* **ResourceSlices** (``resource.k8s.io/v1``; ``v1beta2`` has the same device shape, ``v1beta1`` nests
  attributes and capacity under ``basic``) -> :class:`Device` -> per node :class:`NodeGPUs`, keyed like
  the node-label pools (product, memory, MIG profile) so that a node known both by labels and by
  slices is one pool. The NVIDIA DRA driver (github.com/NVIDIA/k8s-dra-driver-gpu,
  ``cmd/gpu-kubelet-plugin/deviceinfo.go`` and ``mig.go`` at commit 22407113785e) publishes each GPU
  as ``gpu-<minor>`` with attributes ``type`` (``gpu``), ``uuid``, ``productName`` (NVML's name, e.g.
  ``NVIDIA H100 80GB HBM3``), ``brand``, ``architecture``, ``cudaComputeCapability``,
  ``driverVersion``, ``cudaDriverVersion`` and capacity ``memory`` (bytes); each MIG device with
  ``type`` ``mig``, ``profile`` (``1g.10gb``), ``parentUUID`` and capacity ``memory`` (the profile's
  MiB x 2^20) besides engine counts.
* **Claims**: a ResourceClaim's or ResourceClaimTemplate's ``spec.devices.requests[]`` (v1:
  ``exactly.{deviceClassName, count, allocationMode, selectors[].cel.expression}``; v1beta1: the same
  fields flat on the request) and the DeviceClass's ``spec.selectors``.
* **CEL**: :func:`compile_selector` evaluates the forms device selectors use in practice (see
  :class:`_Parser`); anything else raises :class:`SelectorUnsupportedError` naming the expression, which
  the caller turns into an Unknown verdict: never a crash, never a guess.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fitgate.operator.gpus.cel import compile_selector
from fitgate.sizing.gpus import GpuModel, find_gpu, with_reported_memory
from fitgate.sizing.memo import BoundedMemo
from fitgate.sizing.units import GiB, MiB
from fitgate.workloads.quantity import parse_quantity

NVIDIA_DRIVER = "gpu.nvidia.com"
#: What the NVIDIA driver keeps of a card (measured on H100: 81559 MiB by nvidia-smi, 79.19 GiB by CUDA).
DRIVER_RESERVED_BYTES = 470 * MiB
#: Devices read from one ResourceSlice at most (the API allows 128 per slice; a larger list is cut).
MAX_DEVICES_PER_SLICE = 1024

AttrValue = str | int | bool


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice: attributes and capacity by qualified name (``domain/name``)."""

    driver: str
    pool: str
    node: str
    name: str
    attributes: Mapping[str, AttrValue]
    capacity: Mapping[str, int]
    #: Equal for devices that differ only in identity (uuid, PCI address, MIG placement): selectors and the
    #: GPU model are worked out once per signature, not once per device (40,000 devices, a few kinds).
    signature: int = field(default=0, compare=False)

    def attribute(self, name: str) -> AttrValue | None:
        """An attribute by short name, in the driver's own domain."""
        return self.attributes.get(f"{self.driver}/{name}")


# --------------------------------------------------------------------------------------------
# ResourceSlices


def _attr_value(raw: object) -> AttrValue | None:
    if not isinstance(raw, Mapping):
        return None
    for key in ("string", "version"):
        if isinstance(raw.get(key), str):
            return str(raw[key])
    if isinstance(raw.get("bool"), bool):
        return bool(raw["bool"])
    if isinstance(raw.get("int"), int) and not isinstance(raw.get("int"), bool):
        return int(raw["int"])
    return None


def _qualified(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


class _Attributes(Mapping[str, AttrValue]):
    """A device's attributes: its kind's part shared (interned), its identity (uuid, PCI address) its own.

    40,000 devices hold a few kinds: one dict per kind instead of one per device.
    """

    __slots__ = ("_identity", "_kind")

    def __init__(self, kind: Mapping[str, AttrValue], identity: tuple[tuple[str, AttrValue], ...]) -> None:
        self._kind = kind
        self._identity = identity

    def __getitem__(self, key: str) -> AttrValue:
        if key in self._kind:
            return self._kind[key]
        for k, v in self._identity:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from self._kind
        yield from (k for k, _ in self._identity)

    def __len__(self) -> int:
        return len(self._kind) + len(self._identity)


#: One shared copy of equal attribute / capacity mappings. Bound 65536: a cluster has a few kinds of device
#: (one entry each); a snapshot of 40,000 devices of a few hundred kinds stays far below it.
_INTERNED: BoundedMemo[Any, Mapping[str, Any]] = BoundedMemo(65536)


def _intern(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """One shared copy of equal mappings (bounded: a cluster has few kinds of device)."""
    key = tuple(sorted(value.items()))
    return _INTERNED.get_or_compute(key, lambda: dict(value))


def slice_devices(obj: Mapping[str, Any]) -> list[Device]:
    """The devices of one ResourceSlice (v1, v1beta2 or v1beta1 shape); unreadable entries are skipped."""
    spec = obj.get("spec") or {}
    driver = sys.intern(str(spec.get("driver") or ""))
    pool = sys.intern(str((spec.get("pool") or {}).get("name") or ""))
    node = sys.intern(str(spec.get("nodeName") or ""))
    if not driver or not node:  # network-attached devices (no node) cannot be a node's GPUs
        return []
    found: list[Device] = []
    for raw in (spec.get("devices") or [])[:MAX_DEVICES_PER_SLICE]:
        if not isinstance(raw, Mapping) or not raw.get("name"):
            continue
        basic = raw.get("basic")
        body: Mapping[str, Any] = basic if isinstance(basic, Mapping) else raw  # v1beta1 nests under basic
        attributes: dict[str, AttrValue] = {}
        for name, value in (body.get("attributes") or {}).items():
            parsed = _attr_value(value)
            if parsed is not None:
                attributes[_qualified(driver, str(name))] = parsed
        capacity: dict[str, int] = {}
        for name, value in (body.get("capacity") or {}).items():
            number = parse_quantity(value.get("value") if isinstance(value, Mapping) else value)
            if number is not None:
                capacity[_qualified(driver, str(name))] = number
        kind = {k: v for k, v in attributes.items() if k.rsplit("/", 1)[-1] not in _IDENTITY}
        identity = tuple((sys.intern(k), v) for k, v in attributes.items() if k.rsplit("/", 1)[-1] in _IDENTITY)
        sized = tuple(sorted((k, v) for k, v in capacity.items() if not k.rsplit("/", 1)[-1].startswith("memorySlice")))
        signature = hash((driver, tuple(sorted(kind.items())), sized))
        name = sys.intern(str(raw["name"]))
        attrs = _Attributes(_intern(kind), identity)
        found.append(Device(driver, pool, node, name, attrs, _intern(capacity), signature))
    return found


#: Attributes that name one device rather than describe its kind.
_IDENTITY = frozenset({"uuid", "parentUUID", "pciBusID", "pcieRoot"})


def gfd_product(product_name: str) -> str:
    """NVML's product name as GPU Feature Discovery writes it in ``nvidia.com/gpu.product``.

    GFD replaces spaces with dashes (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``), so a
    node known both ways lands in the same pool.
    """
    return re.sub(r"\s+", "-", product_name.strip())


#: What GPU a device of a given signature (driver, kind attributes, capacity) is; None: not a GPU. Bound 4096:
#: one entry per kind of device, and a cluster has a few.
_GPU_OF: BoundedMemo[int, tuple[str, GpuModel, str | None, tuple[str, ...]] | None] = BoundedMemo(4096)


def device_gpu(device: Device) -> tuple[str, GpuModel, str | None, tuple[str, ...]] | None:
    """(product, GPU model, MIG profile, notes) of one NVIDIA DRA device, or None when it is not a GPU."""
    if not device.signature:
        return _device_gpu(device)
    return _GPU_OF.get_or_compute(device.signature, lambda: _device_gpu(device))


def _device_gpu(device: Device) -> tuple[str, GpuModel, str | None, tuple[str, ...]] | None:
    kind = device.attribute("type")
    name = device.attribute("productName")
    memory = device.capacity.get(f"{device.driver}/memory")
    if not isinstance(name, str) or kind not in ("gpu", "mig"):
        return None
    product = gfd_product(name)
    if kind == "mig":
        profile = device.attribute("profile")
        if not isinstance(profile, str) or not memory or memory < GiB // 2:
            return None
        mig_product = f"{product}-MIG-{profile}"
        return mig_product, GpuModel(name=mig_product, memory_bytes=memory, memory_basis="MIG profile"), profile, ()
    known = find_gpu(product)
    if known is not None:
        reported = memory - DRIVER_RESERVED_BYTES if memory else None
        gpu, note = with_reported_memory(known, reported, "DRA capacity")
        return product, gpu, None, () if note is None else (note,)
    if memory and memory - DRIVER_RESERVED_BYTES >= GiB // 2:
        note = (
            f"{product} is not in the GPU catalog: "
            f"its DRA memory capacity ({memory // MiB} MiB) minus the driver's share"
        )
        gpu = GpuModel(name=product, memory_bytes=memory - DRIVER_RESERVED_BYTES, memory_basis="DRA capacity")
        return product, gpu, None, (note,)
    return None


def device_pool_key(device: Device) -> str | None:
    """The inventory pool key of a device (``vendor/product/memory``), None when it is not an NVIDIA GPU."""
    got = device_gpu(device) if device.driver == NVIDIA_DRIVER else None
    return None if got is None else f"nvidia/{got[0]}/{got[1].memory_bytes}"


# --------------------------------------------------------------------------------------------
# Claims and device classes


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim: ``count`` devices of ``device_class`` that pass every selector."""

    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...] = ()
    all_devices: bool = False  # allocationMode: All
    #: ``firstAvailable``: the subrequests in the order the scheduler tries them (this request is the first)
    alternatives: tuple[DeviceRequest, ...] = ()


class ClaimError(ValueError):
    """A claim or template that cannot be read (the message names the field and the value)."""


#: The most ``firstAvailable`` subrequests a request may hold (the API server's own limit is 8).
MAX_SUBREQUESTS = 8


def _request(raw: Mapping[str, Any], where: str) -> DeviceRequest:
    first = raw.get("firstAvailable")
    if first:
        # A prioritized list (DRAPrioritizedList): the scheduler allocates the first subrequest it can.
        if not isinstance(first, list) or len(first) > MAX_SUBREQUESTS:
            raise ClaimError(f"{where}.firstAvailable: expected a list of at most {MAX_SUBREQUESTS} subrequests")
        subs = tuple(
            _request_body(sub, f"{where}.firstAvailable[{i}]", f"{raw.get('name') or ''}/{sub.get('name') or i}")
            for i, sub in enumerate(first)
            if isinstance(sub, Mapping)
        )
        if len(subs) != len(first):
            raise ClaimError(f"{where}.firstAvailable: every subrequest must be an object")
        return replace(subs[0], alternatives=subs)
    body = raw.get("exactly") if isinstance(raw.get("exactly"), Mapping) else raw  # v1 nests under exactly
    return _request_body(body, where, str(raw.get("name") or ""))


def _request_body(body: Any, where: str, name: str) -> DeviceRequest:
    """One request (or subrequest): ``deviceClassName``, ``count`` or ``allocationMode: All``, selectors."""
    if not isinstance(body, Mapping) or not body.get("deviceClassName"):
        raise ClaimError(f"{where}.deviceClassName: missing")
    mode = str(body.get("allocationMode") or "ExactCount")
    count = body.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 64:
        raise ClaimError(f"{where}.count: {count!r} is not a count from 1 to 64")
    selectors = []
    for i, sel in enumerate(body.get("selectors") or []):
        expression = (sel.get("cel") or {}).get("expression") if isinstance(sel, Mapping) else None
        if not isinstance(expression, str):
            raise ClaimError(f"{where}.selectors[{i}].cel.expression: missing")
        selectors.append(expression)
    return DeviceRequest(name, str(body["deviceClassName"]), count, tuple(selectors), mode == "All")


def claim_requests(obj: Mapping[str, Any]) -> tuple[DeviceRequest, ...]:
    """The device requests of a ResourceClaim (``spec.devices``) or ResourceClaimTemplate (``spec.spec.devices``)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "ResourceClaimTemplate" or "spec" in spec:
        spec = spec.get("spec") or {}
    requests = (spec.get("devices") or {}).get("requests") or []
    if not isinstance(requests, list) or not requests:
        raise ClaimError("spec.devices.requests: no device request")
    return tuple(_request(r, f"spec.devices.requests[{i}]") for i, r in enumerate(requests[:32]))


def class_selectors(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The CEL expressions of a DeviceClass's ``spec.selectors``."""
    out = []
    for sel in (obj.get("spec") or {}).get("selectors") or []:
        expression = (sel.get("cel") or {}).get("expression") if isinstance(sel, Mapping) else None
        if isinstance(expression, str):
            out.append(expression)
    return tuple(out)


def allocated_devices(claim: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(driver, pool, device) of each device a ResourceClaim's ``status.allocation`` holds."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    out = []
    for r in results[:256]:
        if isinstance(r, Mapping) and r.get("driver") and r.get("device"):
            out.append((str(r["driver"]), str(r.get("pool") or ""), str(r["device"])))
    return out


def request_matches(request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]) -> Callable[[Device], bool]:
    """A predicate: the device passes the request's class selectors and its own.

    Raises :class:`ClaimError` when the class is unknown and :class:`SelectorUnsupportedError` for a form
    fitgate does not evaluate (both before any device is looked at).
    """
    if request.device_class not in classes:
        raise ClaimError(f"deviceClassName: DeviceClass {request.device_class!r} not found")
    selectors = [compile_selector(e) for e in (*classes[request.device_class], *request.selectors)]
    return lambda device: all(s.matches(device) for s in selectors)


# --------------------------------------------------------------------------------------------
# The cluster's DRA objects, as the watch keeps them


@dataclass(frozen=True)
class DraState:
    """What the DRA watch read: devices per node, devices already allocated, classes and claim templates."""

    devices: Mapping[str, tuple[Device, ...]] = field(default_factory=dict)
    allocated: frozenset[tuple[str, str, str]] = frozenset()
    classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: (namespace, name) -> the template's requests, or why it cannot be read
    templates: Mapping[tuple[str, str], tuple[DeviceRequest, ...] | str] = field(default_factory=dict)

    def is_allocated(self, device: Device) -> bool:
        """Whether a ResourceClaim's allocation holds the device."""
        return (device.driver, device.pool, device.name) in self.allocated

    def allocated_by_pool(self) -> dict[str, frozenset[str]]:
        """NVIDIA devices held by claims, per pool (the driver names its pools after their nodes)."""
        out: dict[str, set[str]] = {}
        for driver, pool, name in self.allocated:
            if driver == NVIDIA_DRIVER:
                out.setdefault(pool, set()).add(name)
        return {k: frozenset(v) for k, v in out.items()}

    def gpu_request(self, namespace: str, name: str) -> DeviceRequest:
        """The GPU request of a claim template: its first request of an NVIDIA GPU class.

        Raises :class:`ClaimError` (template missing or unreadable, unknown class) and
        :class:`SelectorUnsupportedError`.
        """
        got = self.templates.get((namespace, name))
        if got is None:
            raise ClaimError(f"placement.resourceClaimTemplateName: ResourceClaimTemplate {namespace}/{name} not found")
        if isinstance(got, str):
            raise ClaimError(f"ResourceClaimTemplate {namespace}/{name}: {got}")
        for request in got:
            for option in request.alternatives or (request,):
                if option.device_class not in self.classes:
                    raise ClaimError(
                        f"ResourceClaimTemplate {namespace}/{name} request {option.name!r}: "
                        f"DeviceClass {option.device_class!r} not found"
                    )
        for request in got:  # hunt50 F1: a GPU + NIC template (llm-d on GKE) plans on its GPU request
            if any(self._selects_gpus(option) for option in request.alternatives or (request,)):
                return request
        classes = ", ".join(sorted({r.device_class for r in got}))
        raise ClaimError(f"ResourceClaimTemplate {namespace}/{name} requests no NVIDIA GPU (DeviceClass {classes})")

    def _selects_gpus(self, request: DeviceRequest) -> bool:
        """Whether a request's class or selectors name NVIDIA's GPU driver (its ``gpu`` and ``mig`` classes).

        A DRANET NIC (``mrdma.google.com``) or an IMEX channel (``compute-domain.nvidia.com``) does not; a
        class that selects by a GPU attribute only (``gpu.nvidia.com/productName``) does.
        """
        text = " ".join((*self.classes.get(request.device_class, ()), *request.selectors))
        return NVIDIA_DRIVER in text or request.device_class.endswith(NVIDIA_DRIVER)

    def first_available(self, request: DeviceRequest) -> tuple[DeviceRequest, dict[str, list[Device]]]:
        """The subrequest the scheduler would allocate and its devices per node.

        Of a ``firstAvailable`` list, the first that some node can satisfy (``count`` matching devices, or
        one for ``allocationMode: All``), else the first; a plain request is itself. Later subrequests are
        not evaluated once one is chosen.
        """
        options = request.alternatives or (request,)
        for option in options:
            matching = self.matching(option)
            need = 1 if option.all_devices else option.count
            if any(len(devices) >= need for devices in matching.values()):
                return option, matching
        return options[0], self.matching(options[0])

    def matching(self, request: DeviceRequest) -> dict[str, list[Device]]:
        """Devices per node that the request may get (allocated ones included; see :meth:`is_allocated`)."""
        passes = request_matches(request, self.classes)
        seen: dict[int, bool] = {}  # by device signature: a selector reads no identity attribute in practice
        out: dict[str, list[Device]] = {}
        for node, devices in self.devices.items():
            chosen = []
            for d in devices:
                ok = seen.get(d.signature) if d.signature else None
                if ok is None:
                    ok = passes(d)
                    if d.signature and not _names_identity(request, self.classes):
                        seen[d.signature] = ok
                if ok:
                    chosen.append(d)
            if chosen:
                out[node] = chosen
        return out


def _names_identity(request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether a selector reads an identity attribute (then each device is evaluated by itself)."""
    text = " ".join((*classes.get(request.device_class, ()), *request.selectors))
    return any(name in text for name in _IDENTITY) or "device.name" in text
