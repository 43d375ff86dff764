"""The optional measured-kernel speed backend: NVIDIA's aiconfigurator, where it has data (``fitgate[aic]``).

aiconfigurator (PyPI ``aiconfigurator``, Apache-2.0) sums kernel times measured on real GPUs per backend
(TensorRT-LLM, SGLang, vLLM) and release into a TTFT and a TPOT for one model, system and parallel shape
(``aiconfigurator.cli.api.cli_estimate``, 0.12.0). Where it has data for the GPU, the model and the vLLM
backend, ``fitgate plan --speed-backend aic`` reports its TTFT and TPOT and says so; everywhere else fitgate's own
step model answers and the output says why. It is never a dependency of the operator or of the sizing core
(import-linter contracts in pyproject.toml): this module imports it lazily, only when asked.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from typing import Any

from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel

#: fitgate's GPU product -> aiconfigurator's system name (``aiconfigurator_core/systems/*.yaml``, 0.12.0).
SYSTEMS = {
    "A100-40GB": "a100_sxm",
    "A100-80GB": "a100_sxm",
    "A100-PCIe": "a100_pcie",
    "A30": "a30",
    "H100-SXM": "h100_sxm",
    "H100-PCIe": "h100_pcie",
    "H200": "h200_sxm",
    "B200": "b200_sxm",
    "B300": "b300_sxm",
    "GB200": "gb200",
    "GB300": "gb300",
    "L40S": "l40s",
    "L4": "l4",
    "RTX-PRO-6000": "rtx_pro_6000_server",
}
#: fitgate catalog ids -> the id aiconfigurator ships a config for (``aiconfigurator_core/model_configs``,
#: 0.12.0): the same architecture under another name, so that it needs no download.
MODEL_ALIASES = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B-Instruct": "meta-llama/Meta-Llama-3.1-405B",
    "meta-llama/Llama-3.1-405B": "meta-llama/Meta-Llama-3.1-405B",
}
#: The serving framework whose kernel tables are read (fitgate sizes vLLM).
AIC_BACKEND = "vllm"
INSTALL_HINT = "pip install 'fitgate[aic]'"


class AicUnavailableError(SizingError):
    """``--speed-backend aic`` without aiconfigurator installed."""

    def __init__(self) -> None:
        super().__init__(
            "--speed-backend",
            "aic",
            f"NVIDIA's aiconfigurator installed for the aic backend ({INSTALL_HINT}); it is not importable here. "
            "Use --speed-backend fitgate (the default) for fitgate's own step model",
        )


@dataclass(frozen=True)
class AicEstimate:
    """What aiconfigurator answered (times in seconds), or why it did not (``reason``)."""

    answered: bool
    system: str | None
    version: str | None
    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    reason: str = ""

    @property
    def backend(self) -> str:
        """Which backend answered, in words."""
        if self.answered:
            return f"aiconfigurator {self.version} ({AIC_BACKEND} kernel tables, {self.system})"
        return f"fitgate step model (aiconfigurator {self.version}: {self.reason})"


def available() -> bool:
    """Whether aiconfigurator can be imported (it is an optional extra)."""
    return importlib.util.find_spec("aiconfigurator") is not None


def _version() -> str:
    try:
        return importlib.metadata.version("aiconfigurator")
    except importlib.metadata.PackageNotFoundError:  # importable from a source tree, not installed
        return "unknown"


def estimate(
    model_id: str,
    gpu: GpuModel,
    tensor_parallel_size: int,
    input_tokens: int,
    output_tokens: int,
    concurrency: int,
    *,
    moe: bool = False,
    expert_parallel: bool = False,
) -> AicEstimate:
    """The aggregated (in-flight batching) TTFT and TPOT aiconfigurator estimates, or why it has none.

    ``moe``: the experts are sharded as vLLM shards them, by TP (``moe_tp_size`` = TP), or whole experts
    over the TP GPUs with ``expert_parallel`` (``moe_ep_size`` = TP).

    Raises:
        AicUnavailableError: aiconfigurator is not installed.
    """
    if not available():
        raise AicUnavailableError
    version = _version()
    system = SYSTEMS.get(gpu.name)
    if system is None:
        return AicEstimate(False, None, version, reason=f"no system for {gpu.name}")
    api: Any = importlib.import_module("aiconfigurator.cli.api")
    try:
        result = api.cli_estimate(
            MODEL_ALIASES.get(model_id, model_id),
            system,
            mode="agg",
            backend_name=AIC_BACKEND,
            isl=input_tokens,
            osl=output_tokens,
            batch_size=max(1, concurrency),
            tp_size=tensor_parallel_size,
            **(
                {"moe_tp_size": 1, "moe_ep_size": tensor_parallel_size}
                if moe and expert_parallel
                else {"moe_tp_size": tensor_parallel_size, "moe_ep_size": 1}
                if moe
                else {}
            ),
        )
    except Exception as exc:  # its errors are its own types: no data for this model / system / backend
        return AicEstimate(False, system, version, reason=f"{type(exc).__name__}: {str(exc)[:200]}")
    ttft, tpot = float(result.ttft), float(result.tpot)
    if not (ttft > 0 and tpot > 0):
        return AicEstimate(False, system, version, reason=f"no latency in its answer (TTFT {ttft}, TPOT {tpot})")
    return AicEstimate(True, system, version, ttft / 1000, tpot / 1000)


def document(e: AicEstimate) -> dict[str, Any]:
    """The estimate as the plan JSON's ``performance.speed_backend``."""
    return {
        "answered_by": "aiconfigurator" if e.answered else "fitgate",
        "backend": e.backend,
        "system": e.system,
        "aiconfigurator_version": e.version,
        "ttft_seconds": e.ttft_seconds,
        "tpot_seconds": e.tpot_seconds,
        "reason": e.reason or None,
    }
