"""Weight offload, KV offloading and KV connectors: what they take from the GPU and from the host.

From vLLM 0.33.0's source:

* ``--cpu-offload-gb G`` (UVA offloading, config/offload.py L16-44): the model's decoder layers are
  wrapped by ``UVAOffloader.wrap_modules`` (model_executor/offloader/uva.py L56-126), which moves
  parameters, one at a time, to pinned host memory until ``G x 2**30`` bytes (per GPU: the limit is
  per worker, offloader/base.py L172-175) are offloaded, so the GPU holds that much less (and at
  most the decoder layers' weights less; the last parameter may overshoot by its own size). The
  host holds the same bytes, pinned, for each GPU.
* ``--kv-offloading-size S`` (config/cache.py L383-392) turns into an ``OffloadingConnector`` with
  ``cpu_bytes_to_use = S x 2**30`` (config/vllm.py L1151-1185; ``SimpleCPUOffloadConnector`` when
  VLLM_USE_SIMPLE_KV_OFFLOAD); that is the pinned host buffer of the whole engine, all TP ranks
  together (v1/kv_offload/cpu/spec.py L97-124; cache.py L384-386). ``--kv-offloading-backend lmcache``
  selects ``LMCacheMPConnector``, whose storage lives in a separate LMCache server process (L1176-1182).
  Neither allocates GPU tensors: the worker copies blocks between the GPU KV cache and the host buffer
  (v1/kv_offload/cpu/gpu_worker.py L270-281, L840-858: host tensors only).
* ``--kv-transfer-config`` connectors (distributed/kv_transfer/kv_connector/factory.py L149-250)
  register the GPU KV cache for transfer rather than copy it. ``NixlConnector`` with
  ``kv_buffer_device: cpu`` keeps a host copy shaped like each layer's KV cache
  (nixl/base_worker.py L1300-1317). A connector that does not implement ``SupportsHMA``
  (``LMCacheConnectorV1``, ``LMCacheMPConnector``, ``HF3FSKVConnector``, ``FlexKVConnectorV1``,
  ``ExampleConnector``; a ``MultiConnector`` unless all its children do) turns the hybrid KV cache
  manager off (config/vllm.py L2257-2280): sliding-window and chunked-local layers are then sized as
  full attention, and hybrid Mamba / linear-attention models fail at start-up.
* A disaggregated pair (llm-d, Dynamo) is two vLLM instances: the prefill one (``kv_producer``) and the
  decode one (``kv_consumer``); each is sized with its own settings and workload. The decode
  instance's pool holds the decode KV: every request it serves arrives with its whole prompt's KV.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.jsonflags import json_object
from fitgate.sizing.serving import ServingConfig
from fitgate.sizing.units import fmt_gib
from fitgate.sizing.versions import VllmAccounting

#: Connectors vLLM 0.33.0 registers (factory.py L149-250) -> whether they implement SupportsHMA.
KV_CONNECTORS: dict[str, bool] = {
    "ExampleConnector": False,
    "ExampleHiddenStatesConnector": True,
    "LMCacheConnectorV1": False,  # lmcache_connector.py L68
    # hunt57 F5: vLLM (0.31+) runs the LMCacheMPConnector of the lmcache package when one is installed
    # (lmcache_mp_connector.py 0.34.0 L1191-1217), its own (no SupportsHMA, L79-81) only without it; LMCache's MP
    # connector keeps hybrid models (club-3090 served a gated-delta-net hybrid at 262K with LMCache 0.4.7):
    # which one runs is the image's, so the hybrid manager is taken as kept (never a false denial) and said
    "LMCacheMPConnector": True,
    "NixlConnector": True,  # nixl/connector.py L78 (NixlBaseConnector)
    "NixlPullConnector": True,
    "NixlPushConnector": True,
    "MultiConnector": True,  # only when every child does (factory.py L132-146)
    "HiSparseConnector": True,
    "MoRIIOConnector": True,
    "OffloadingConnector": True,  # offloading_connector.py L53
    "DecodeBenchConnector": True,
    "MooncakeConnector": True,
    "MooncakeStoreConnector": True,
    "FlexKVConnectorV1": False,
    "SimpleCPUOffloadConnector": True,
    "HF3FSKVConnector": False,
}
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
KV_OFFLOADING_BACKENDS = ("native", "lmcache")


@dataclass(frozen=True)
class HostMemory:
    """Host (CPU) memory one replica's engine pins or holds besides its process, by term."""

    weights_offload_bytes: int  # --cpu-offload-gb, every GPU's share
    kv_offload_bytes: int  # --kv-offloading-size / cpu_bytes_to_use
    kv_transfer_buffer_bytes: int  # NIXL kv_buffer_device cpu: a host copy of the KV cache
    mm_processor_cache_bytes: int  # --mm-processor-cache-gb, API server + engine core copies
    lora_cpu_cache_bytes: int  # --max-cpu-loras adapters of at most max_lora_rank, on the CPU

    @property
    def total_bytes(self) -> int:
        """The sum of the terms."""
        return (
            self.weights_offload_bytes
            + self.kv_offload_bytes
            + self.kv_transfer_buffer_bytes
            + self.mm_processor_cache_bytes
            + self.lora_cpu_cache_bytes
        )


def check_kv_transfer(
    connector: str | None, role: str | None, backend: str, offloading_bytes: int | None, buffer_device: str | None
) -> None:
    """Reject values vLLM itself rejects; a connector fitgate does not know is a note, not an error."""
    if role is not None and role not in KV_ROLES:
        raise SizingError("kv_role", role, "kv_producer, kv_consumer or kv_both")
    if backend not in KV_OFFLOADING_BACKENDS:
        raise SizingError("kv_offloading_backend", backend, "native or lmcache")
    if offloading_bytes is not None and (isinstance(offloading_bytes, bool) or offloading_bytes <= 0):
        raise SizingError("kv_offloading_size", offloading_bytes, "a positive size")
    if buffer_device is not None and buffer_device not in ("cuda", "cpu", "xpu"):
        raise SizingError("kv_buffer_device", buffer_device, "cuda or cpu")
    if connector is not None and (len(connector) > 100 or not connector.replace("_", "").isalnum()):
        raise SizingError("kv_connector", connector, "a connector class name")


def effective_connector(connector: str | None, offloading_bytes: int | None, backend: str) -> str | None:
    """The connector vLLM runs: ``--kv-offloading-size`` replaces the configured one (config/vllm.py L1166-1182)."""
    if offloading_bytes is None:
        return connector
    return "OffloadingConnector" if backend == "native" else "LMCacheMPConnector"


def disables_hybrid_manager(connector: str | None) -> bool | None:
    """Whether this connector turns the hybrid KV cache manager off (None: a connector fitgate does not know)."""
    if connector is None:
        return False
    if connector not in KV_CONNECTORS:
        return None
    return not KV_CONNECTORS[connector]


#: NIXL's connectors (``NixlConnector`` is ``NixlPullConnector``: nixl/connector.py 0.34.0 L447).
NIXL_CONNECTORS = frozenset({"NixlConnector", "NixlPullConnector", "NixlPushConnector"})
#: Connectors whose workers register the device KV cache with an RDMA engine (``KVCacheAccess.REGISTERS``, 0.34.0:
#: mooncake/mooncake_connector.py L777-779, mooncake/store/connector.py L134-136, moriio/moriio_connector.py
#: L282-284, umbp/connector.py L104-106; NIXL's with a GPU buffer, nixl/connector.py L85-90).
REGISTERING_CONNECTORS = NIXL_CONNECTORS | {
    "MooncakeConnector", "MooncakeStoreConnector", "MoRIIOConnector", "UMBPStoreConnector",
}  # fmt: skip


def extensible_kv_cache_off(
    connector: str | None, buffer_device: str | None, amd: bool, imex_possible: bool
) -> str | None:
    """Why a KV connector turns 0.34's extensible KV cache off when no flag asks for it (None: it does not).

    ``VllmConfig._resolve_extensible_kv_cache`` (config/vllm.py 0.34.0 L3180-3258, hunt171 F1) asks the connector how
    it reaches the device KV cache: LMCacheMPConnector shares it through legacy CUDA IPC (lmcache_mp_connector.py
    L474-476): unsupported; on ROCm a connector that registers it with RDMA: unsupported; NIXL with a GPU buffer
    exports fabric handles (nixl/connector.py L85-90), which need an IMEX channel (utils/vmm_driver.py), so it is off
    where the pod has none: every GPU but the multi-node NVLink racks (GB200 / GB300), where a ComputeDomain may give
    one and fitgate keeps the larger pool (never denying what would run). A MultiConnector's children are not read:
    kept on.
    """
    if connector is None:
        return None
    if connector == "LMCacheMPConnector":
        return "LMCacheMPConnector shares the KV cache through legacy CUDA IPC"
    registers = connector in REGISTERING_CONNECTORS and not (connector in NIXL_CONNECTORS and buffer_device == "cpu")
    if amd and registers:
        return f"on ROCm, {connector} registers the KV cache with RDMA, which cannot map driver-mapped memory"
    if not amd and registers and connector in NIXL_CONNECTORS and not imex_possible:
        return (
            f"{connector} exports the KV cache by fabric handle, which needs an IMEX channel a pod on this GPU "
            "does not have (--enable-extensible-kv-cache keeps it on)"
        )
    return None


def extensible_kv_cache(serving: ServingConfig, accounting: VllmAccounting, gpu: GpuModel) -> tuple[bool, str | None]:
    """Whether vLLM sizes the KV cache after warm-up (0.34+), and why a connector turned it off (else None).

    ``VllmConfig._resolve_extensible_kv_cache``: the reason only where no flag decided.

    Off with ``--kv-cache-memory-bytes`` (config/vllm.py 0.34.0 L3203-3207) or
    ``--no-enable-extensible-kv-cache``; asking for both is vLLM's start-up error (L3261-3262). Unset, off where the
    KV connector cannot use it (:func:`extensible_kv_cache_off`).
    Releases before 0.34 have no such cache: the setting is ignored there.
    """
    if not accounting.extensible_kv_cache:
        return False, None
    if serving.kv_cache_memory_bytes is not None:
        if serving.extensible_kv_cache:
            raise SizingError(
                "enable_extensible_kv_cache",
                True,
                "off with kv_cache_memory_bytes (vLLM: it sizes the KV cache from measured memory, "
                "which kv_cache_memory_bytes overrides)",
            )
        return False, None
    if serving.extensible_kv_cache is not None:
        return serving.extensible_kv_cache, None
    connector = effective_connector(serving.kv_connector, serving.kv_offloading_bytes, serving.kv_offloading_backend)
    imex = gpu.name.startswith(IMEX_GPU_PREFIXES)
    off_by = extensible_kv_cache_off(connector, serving.kv_buffer_device, gpu.vendor == "amd", imex)
    return off_by is None, off_by


#: GPUs sold in multi-node NVLink racks, whose pods may hold an IMEX channel (a DRA ComputeDomain).
IMEX_GPU_PREFIXES = ("GB200", "GB300")


def offloaded_bytes(requested_bytes: int, decoder_bytes: int) -> int:
    """Weights ``--cpu-offload-gb`` moves to the host on one GPU: the limit, at most its decoder layers."""
    return max(0, min(requested_bytes, decoder_bytes))


#: The first release that turns the hybrid KV cache manager off only for a connector without ``SupportsHMA``
#: (config/vllm.py 0.22.0 L1442-1475). Before, any ``--kv-transfer-config`` turned it off: 0.9.2 config.py
#: L4637-4639, 0.11.0 config/__init__.py L506-508, 0.11.2 config/vllm.py L705-709 ("turn HMA off for connector for
#: now"); 0.20.0 L1288-1300 and 0.21.0 unless ``--no-disable-hybrid-kv-cache-manager`` asks to keep it.
HMA_BY_CONNECTOR_SINCE = (0, 22, 0)


def connector_notes(
    connector: str | None,
    role: str | None,
    has_hybrid_layers: bool,
    has_state_layers: bool,
    version: tuple[int, int, int] | None = None,
) -> list[str]:
    """What the plan says about a KV connector and a disaggregated role."""
    notes: list[str] = []
    if (
        connector is not None
        and version is not None
        and version < HMA_BY_CONNECTOR_SINCE
        and not disables_hybrid_manager(connector)
        and (has_hybrid_layers or has_state_layers)
    ):
        # hunt154 F3: said, not sized (fail-open): the pool is the hybrid manager's, which this release keeps only
        # with --no-disable-hybrid-kv-cache-manager (0.20-0.21), a flag fitgate does not read
        notes.append(
            f"vLLM {'.'.join(map(str, version))} turns the hybrid KV cache manager off for any --kv-transfer-config "
            "(per connector only from 0.22): unless --no-disable-hybrid-kv-cache-manager keeps it (0.20-0.21), "
            "sliding-window layers take full-attention pages (fewer tokens than this plan's)"
            + ("; Mamba / linear-attention layers need it and vLLM fails at start-up" if has_state_layers else "")
        )
    if connector is not None and connector not in KV_CONNECTORS:
        notes.append(
            f"kv connector {connector}: not one vLLM 0.33 registers (P2pNcclConnector was removed); its GPU "
            "and host memory are not counted"
        )
    elif connector is not None:
        notes.append(
            f"kv connector {connector}: registers the GPU KV cache for transfer and adds no GPU tensor in vLLM's "
            "source; memory its transport library (NIXL/UCX, LMCache, Mooncake) allocates is not counted"
        )
    if disables_hybrid_manager(connector) and (has_hybrid_layers or has_state_layers):
        notes.append(
            f"{connector} does not support the hybrid KV cache manager, so vLLM turns it off "
            "(config/vllm.py 0.33.0 L2257-2280): sliding-window and chunked layers are sized as full attention"
            + (
                "; this model's Mamba / linear-attention layers need it and vLLM fails at start-up"
                if has_state_layers
                else ""
            )
        )
    if connector == "LMCacheMPConnector" and (has_hybrid_layers or has_state_layers):
        notes.append(
            "LMCacheMPConnector: sized with the hybrid KV cache manager kept, as the lmcache package's connector "
            "does (0.4.7+); vLLM's builtin one, run where lmcache is not installed, turns it off (sliding-window "
            "layers then take full attention; Mamba / linear-attention models fail at start-up)"
        )
    if role == "kv_consumer":
        notes.append(
            "kv_role kv_consumer (the decode side of a disaggregated pair): this pool holds the decode KV, "
            "every request's whole prompt arriving from the prefill side; size its workload with full contexts"
        )
    elif role == "kv_producer":
        notes.append(
            "kv_role kv_producer (the prefill side): size the decode instance (kv_consumer) separately; it holds "
            "the decode KV"
        )
    return notes


def host_memory_note(host: HostMemory, pod_limit_bytes: int | None = None) -> str | None:
    """One line on the host memory, with a warning when it exceeds the pod's memory limit."""
    if host.total_bytes == 0:
        return None
    parts = [
        (name, n)
        for name, n in (
            ("--cpu-offload-gb weights", host.weights_offload_bytes),
            ("KV offload buffer", host.kv_offload_bytes),
            ("NIXL host KV buffer", host.kv_transfer_buffer_bytes),
            ("multimodal processor cache", host.mm_processor_cache_bytes),
            ("CPU LoRA cache", host.lora_cpu_cache_bytes),
        )
        if n
    ]
    text = f"host memory: {fmt_gib(host.total_bytes)} (" + ", ".join(f"{k} {fmt_gib(v)}" for k, v in parts) + ")"
    if pod_limit_bytes is not None and host.total_bytes > pod_limit_bytes:
        text += f", more than the pod's {fmt_gib(pod_limit_bytes)} memory limit: the kubelet would OOM-kill it"
    return text


#: The most characters of a ``--kv-transfer-config`` fitgate parses (vLLM's own are a few hundred).
MAX_KV_TRANSFER_CONFIG_CHARS = 16384


def parse_kv_transfer_config(text: str) -> tuple[str | None, str | None, str | None]:
    """``--kv-transfer-config`` JSON as (kv_connector, kv_role, kv_buffer_device); errors name the field.

    Only those three keys change memory (config/kv_transfer.py 0.33.0: ``kv_connector``, ``kv_role``,
    ``kv_buffer_device``); the rest (``kv_connector_extra_config``, ports, ranks) are read by the
    connector at run time.
    """
    data = json_object(text, "kv_transfer_config", MAX_KV_TRANSFER_CONFIG_CHARS)
    values: list[str | None] = []
    for key in ("kv_connector", "kv_role", "kv_buffer_device"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise SizingError(f"kv_transfer_config.{key}", value, "a string")
        values.append(value)
    return values[0], values[1], values[2]
