"""fitgate's pure sizing core: config -> layer and KV specs, weights, vLLM budget, verdict, engine args.

No I/O beyond reading its own packaged data, no Kubernetes, no network (an import-linter contract
checks this). Everything is bytes as integers.
"""

from fitgate.sizing.advice import Suggestion, recommend, suggest
from fitgate.sizing.architecture import ModelArchitecture, parse_config
from fitgate.sizing.capacity import Option, Search, fewest_gpus, search
from fitgate.sizing.cost import Cost, GpuPrices, check_utilization, parse_gpu_prices, replica_cost
from fitgate.sizing.engine_args import EngineArg, engine_args, vllm_args_text, vllm_argv, vllm_command
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.gpus import GpuModel, custom_gpu, find_gpu, gpu_catalog, lookup_gpu
from fitgate.sizing.performance import Performance, estimate
from fitgate.sizing.plan import ModelInput, Plan, ServingConfig, Verdict, Workload, plan
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION

__all__ = [
    "DEFAULT_VLLM_VERSION",
    "Cost",
    "EngineArg",
    "GpuModel",
    "GpuPrices",
    "ModelArchitecture",
    "ModelInput",
    "Option",
    "Performance",
    "Plan",
    "ReasonCode",
    "Search",
    "ServingConfig",
    "SizingError",
    "Suggestion",
    "UnknownArchitectureError",
    "Verdict",
    "Workload",
    "check_utilization",
    "custom_gpu",
    "engine_args",
    "estimate",
    "fewest_gpus",
    "find_gpu",
    "gpu_catalog",
    "lookup_gpu",
    "parse_config",
    "parse_gpu_prices",
    "plan",
    "recommend",
    "replica_cost",
    "search",
    "suggest",
    "vllm_args_text",
    "vllm_argv",
    "vllm_command",
]
