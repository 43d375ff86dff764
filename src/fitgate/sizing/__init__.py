"""fitgate's pure sizing core: config -> layer and KV specs, weights, vLLM budget, verdict, engine args.

No I/O beyond reading its own packaged data, no Kubernetes, no network (an import-linter contract
checks this). Everything is bytes as integers.
"""

from fitgate.sizing.advice import (
    EngineArg,
    Suggestion,
    engine_args,
    recommend,
    suggest,
    vllm_argv,
    vllm_command,
)
from fitgate.sizing.architecture import ModelArchitecture, parse_config
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.gpus import GpuModel, custom_gpu, find_gpu, gpu_catalog, lookup_gpu
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION

__all__ = [
    "DEFAULT_VLLM_VERSION",
    "EngineArg",
    "GpuModel",
    "ModelArchitecture",
    "ModelInput",
    "Plan",
    "ReasonCode",
    "ServingConfig",
    "SizingError",
    "Suggestion",
    "UnknownArchitectureError",
    "Verdict",
    "Workload",
    "custom_gpu",
    "engine_args",
    "find_gpu",
    "gpu_catalog",
    "lookup_gpu",
    "parse_config",
    "plan",
    "recommend",
    "suggest",
    "vllm_argv",
    "vllm_command",
]
