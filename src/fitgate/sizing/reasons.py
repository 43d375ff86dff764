"""Every reason code fitgate writes, as one enum: plan reasons, condition reasons and operator reasons.

The values are CamelCase words (Kubernetes condition reasons); being a :class:`~enum.StrEnum`, each
member is the string itself in JSON, status and messages.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    """Why a verdict is what it is."""

    # The plan: DoesNotFit
    GPU_MEMORY_UTILIZATION_TOO_HIGH = "GpuMemoryUtilizationTooHigh"
    WEIGHTS_EXCEED_BUDGET = "WeightsExceedBudget"
    NO_KV_CACHE_MEMORY = "NoKVCacheMemory"
    KV_CACHE_MEMORY_EXCEEDS_GPU = "KVCacheMemoryExceedsGpu"
    OUTSIDE_BUDGET_TOO_SMALL = "OutsideBudgetTooSmall"
    KV_CACHE_TOO_SMALL_FOR_MAX_MODEL_LEN = "KVCacheTooSmallForMaxModelLen"
    WORKLOAD_EXCEEDS_KV_CACHE = "WorkloadExceedsKVCache"
    MAX_NUM_SEQS_EXCEEDS_MAMBA_BLOCKS = "MaxNumSeqsExceedsMambaBlocks"
    # The plan: Tight
    WEIGHTS_NEAR_BUDGET = "WeightsNearBudget"
    WORKLOAD_NEAR_KV_CAPACITY = "WorkloadNearKVCapacity"
    MAX_MODEL_LEN_NEAR_KV_CAPACITY = "MaxModelLenNearKVCapacity"
    LOW_HEADROOM_OUTSIDE_BUDGET = "LowHeadroomOutsideBudget"
    SAMPLER_NEEDS_FLASHINFER = "SamplerNeedsFlashInfer"
    SHORT_WITHIN_ESTIMATE_ERROR = "ShortWithinEstimateError"
    MXFP4_NEEDS_TRITON_KERNELS = "Mxfp4NeedsTritonKernels"
    # The plan: Fits; and the Fits condition's reasons for a Tight and a Fits verdict
    FITS = "Fits"
    TIGHT = "Tight"
    # The operator: the Ready condition and what keeps a deployment from being evaluated
    EVALUATED = "Evaluated"
    INVALID_SPEC = "InvalidSpec"
    INVALID_SETTINGS = "InvalidSettings"
    # a setting vLLM takes that fitgate does not size (a packed sub-byte KV cache dtype): Unknown, never a denial
    SETTINGS_NOT_MODELLED = "SettingsNotModelled"
    CHECKPOINT_RESOLVING = "CheckpointResolving"
    CHECKPOINT_UNAVAILABLE = "CheckpointUnavailable"
    CHECKPOINT_INVALID = "CheckpointInvalid"
    CHECKPOINT_NOT_IN_CATALOG = "CheckpointNotInCatalog"
    # an architecture fitgate does not size (an encoder, a reranker, an audio model vLLM may serve): Unknown
    ARCHITECTURE_NOT_SIZED = "ArchitectureNotSized"
    NO_GPU_INVENTORY = "NoGPUInventory"
    NO_MATCHING_GPU_POOL = "NoMatchingGPUPool"
    NOT_ENOUGH_GPUS_PER_NODE = "NotEnoughGPUsPerNode"
    # A vLLM workload (Deployment, LeaderWorkerSet, ...): its pods ask for fewer GPUs than TP x PP, or a
    # setting cannot be known (a variable from a Secret, a --config file outside the manifests read)
    GPU_LIMIT_BELOW_PARALLELISM = "GPULimitBelowParallelism"
    # GPU inventory beyond node labels (operator/gpus/dra.py, sharing.py, placement.py): vLLM's gmu asks for more
    # than a shared card's slice; the replicas cannot all be placed on free GPUs; a ResourceClaimTemplate or a
    # device selector that cannot be read or evaluated
    GPU_MEMORY_UTILIZATION_EXCEEDS_SHARE = "GpuMemoryUtilizationExceedsShare"
    UNSCHEDULABLE = "Unschedulable"
    RESOURCE_CLAIM_UNKNOWN = "ResourceClaimUnknown"
    DEVICE_SELECTOR_UNKNOWN = "DeviceSelectorUnknown"
    WORKLOAD_SETTINGS_UNKNOWN = "WorkloadSettingsUnknown"
    # The image's vLLM release is unknown (engine.version "unknown" or a tag naming none): sized as the newest modelled
    # release it does not fit, but an older release's accounting admits it (hunt82 F2), so it is not shown to misfit
    RELEASE_UNKNOWN = "ReleaseUnknown"
    # Clusters (docs/clusters.md): no node of the placement's GPU exists yet (a pool that scales from zero); the
    # Schedulable condition's reasons
    NO_NODE_YET = "NoNodeYet"
    NODES_MATCH = "NodesMatch"
    # The observer (operator/observation/observe.py, workload_observe.py): the PredictionVerified and AtCapacity
    # conditions, and the PredictionDrift Event of an audited workload
    NOT_OBSERVED = "NotObserved"
    POD_FAILED_TO_START = "PodFailedToStart"
    WITHIN_TOLERANCE = "WithinTolerance"
    PREDICTION_DRIFT = "PredictionDrift"
    PREEMPTING = "Preempting"
    KV_CACHE_FULL = "KVCacheFull"
    HAS_ROOM = "HasRoom"
