"""vLLM workloads people already run (Deployments, StatefulSets, LeaderWorkerSets, KServe, Pods).

Pure: reads Kubernetes objects as dicts and turns them into ModelDeployment specs; no kopf, no
Kubernetes client, no I/O (an import-linter contract keeps it so).
"""

from fitgate.workloads.argv import EngineCommand, find_engine_command, parse_engine_argv
from fitgate.workloads.expansion import expand_k8s
from fitgate.workloads.podspec import release_of_image, vllm_image
from fitgate.workloads.reader import KINDS, POD_TEMPLATE_PATHS, configmaps_of, cpu_backend, read_workload
from fitgate.workloads.reading import Reading, WorkloadError
from fitgate.workloads.shellscript import CommandError

__all__ = [
    "KINDS",
    "POD_TEMPLATE_PATHS",
    "CommandError",
    "EngineCommand",
    "Reading",
    "WorkloadError",
    "configmaps_of",
    "cpu_backend",
    "expand_k8s",
    "find_engine_command",
    "parse_engine_argv",
    "read_workload",
    "release_of_image",
    "vllm_image",
]
