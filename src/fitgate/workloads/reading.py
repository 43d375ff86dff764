"""What a vLLM workload asks for, in ModelDeployment terms: :class:`Reading` (types, no parsing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fitgate.sizing.versions import UNKNOWN_RELEASE


class WorkloadError(ValueError):
    """An object that cannot be read; the message names the field and the value."""


@dataclass(frozen=True)
class Reading:
    """What a vLLM workload asks for, in ModelDeployment terms.

    ``unknown`` names what keeps it from being sized (an unexpanded variable, a ``--config`` file
    not in the manifest set); ``invalid`` is input vLLM itself would refuse (an unclosed quote, a
    flag value that is not a number).
    """

    kind: str
    namespace: str
    name: str
    container: str
    how: str
    model: str | None
    revision: str | None = None
    hf_overrides: dict[str, Any] | None = None  # --hf-overrides (a ModelDeployment's model.hfOverrides)
    serving: dict[str, Any] = field(default_factory=dict)
    vllm_version: str | None = None
    gpu_resource: str = "nvidia.com/gpu"
    gpus_per_replica: int = 0  # the vLLM containers' GPU limits over the pods of one replica
    pods_per_replica: int = 1
    data_parallel: int = 1  # data-parallel ranks in one replica (data_parallel_ranks)
    node_selector: dict[str, str] = field(default_factory=dict)
    claim_template: str | None = None  # the ResourceClaimTemplate the vLLM container's GPUs come from (DRA)
    claim_copies: int = 1  # how many of the container's claims use it (placement.resourceClaimsPerPod)
    claim_alternatives: tuple[str, ...] = ()  # its other claims' templates, where the first is no GPU's (hunt80 G2)
    tolerations: tuple[dict[str, str], ...] = ()
    gpu_share: dict[str, Any] = field(default_factory=dict)  # HAMi limits / Run:ai annotations: placement.gpuShare
    unknown: str | None = None
    invalid: str | None = None
    notes: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()  # engine words holding references fitgate could not expand (`$EXTRA_ARGS`)
    #: Where the model lies when not named by a Hub repo id (a path, s3://, pvc://, oci:// modelcar, storageUri)
    model_location: str | None = None
    #: Notes said at admission even when the workload fits (the vLLM release was not read or is not modelled)
    warnings: tuple[str, ...] = ()
    args: dict[str, str] = field(default_factory=dict)  # the flags as written, by long name
    #: (ConfigMap, key) of the ``--config`` file: read from it when given, else to be read (``unknown`` says so)
    config_map: tuple[str, str] | None = None
    #: Where a flag's value was written, when not as a literal on the command line: ``("env", VAR, "$(VAR)")``
    #: (a variable of the container's env), ``("config", ConfigMap, key, "max-model-len")`` (the --config file),
    #: ``("field", "spec.parallelism.tensor")`` or ``("env-args", "VLLM_ADDITIONAL_ARGS")`` (LLMInferenceService)
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fingerprint: str = ""
    memory_limit_bytes: int | None = None  # the vLLM container's memory limit (issue 20: host memory warning)
    #: Labels every pod of this workload carries (its ``spec.selector.matchLabels``; a LeaderWorkerSet's name label):
    #: the GPUs those pods hold are its own, free for it when its replicas are placed (a running Deployment that
    #: holds every GPU of its pool still fits there). Empty: none known (a bare Pod, a CRD).
    pod_selector: dict[str, str] = field(default_factory=dict)
    #: Offline only: labels naming the one GPU product a several-valued required node affinity allows
    #: (``instance-type In [g6e.xlarge, g6e.2xlarge]``: L40S); not a selector (podspec.placement_of).
    affinity_gpu: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """``Kind namespace/name``."""
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def parallel_gpus(self) -> int:
        """GPUs one replica's engine needs: TP x PP x data-parallel ranks."""
        tp = int(self.serving.get("tensorParallelSize", 1))
        pp = int(self.serving.get("pipelineParallelSize", 1))
        return tp * pp * self.data_parallel

    def gpu_shortfall(self) -> str | None:
        """Why the pods ask for fewer GPUs than the engine uses, or None when they ask for enough."""
        need = self.parallel_gpus
        if self.gpus_per_replica >= need or (self.claim_template and not self.gpus_per_replica):
            return None  # a DRA claim's count is checked against TP x PP with the template (decision/poolplan.py)
        tp = self.serving.get("tensorParallelSize", 1)
        pp = self.serving.get("pipelineParallelSize", 1)
        what = f"TP {tp} x PP {pp}" + (f" x DP {self.data_parallel}" if self.data_parallel > 1 else "")
        if self.pods_per_replica > 1:
            have = f"its {self.pods_per_replica} pods ask for {self.gpus_per_replica} {self.gpu_resource} in all"
            per_pod = -(-need // self.pods_per_replica)
            fix = f"set {self.gpu_resource}: {per_pod} on each pod"
        else:
            have = (
                f"container {self.container} asks for {self.gpus_per_replica} {self.gpu_resource}"
                if self.gpus_per_replica
                else f"container {self.container} has no {self.gpu_resource} limit (so no GPU)"
            )
            fix = f"set {self.gpu_resource}: {need}"
        return f"vLLM needs {need} GPU{'s' if need > 1 else ''} ({what}) but {have}; {fix}"

    def spec(self) -> dict[str, Any]:
        """The raw ModelDeployment ``spec`` this workload amounts to (for ``api.parse_spec``)."""
        model: dict[str, Any] = {"name": self.model or ""}
        if self.revision:
            model["revision"] = self.revision
        if self.hf_overrides:
            model["hfOverrides"] = dict(self.hf_overrides)
        spec: dict[str, Any] = {"model": model, "serving": dict(self.serving)}
        # a release the image does not name is "unknown": sized as the newest modelled, never denied on a misfit that
        # only the newest's accounting shows (evaluate._release_unknown, hunt82 F2)
        spec["engine"] = {"version": self.vllm_version or UNKNOWN_RELEASE}
        placement: dict[str, Any] = {}
        if self.node_selector:
            placement["nodeSelector"] = dict(self.node_selector)
        if self.pods_per_replica > 1:
            placement["nodesPerReplica"] = self.pods_per_replica
        if self.data_parallel > 1:
            placement["dataParallelSize"] = self.data_parallel
        if self.claim_template:
            placement["resourceClaimTemplateName"] = self.claim_template
            if self.claim_copies > 1:
                placement["resourceClaimsPerPod"] = self.claim_copies
        if self.tolerations:
            placement["tolerations"] = [dict(t) for t in self.tolerations]
        if self.gpu_share:
            placement["gpuShare"] = dict(self.gpu_share)
        if placement:
            spec["placement"] = placement
        if self.pod_selector:  # read by the free-GPU check only (evaluate.py: own pods count as free)
            spec["observe"] = {"selector": dict(self.pod_selector)}
        return spec
