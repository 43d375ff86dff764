"""Which GPU model runner vLLM measures a model with: the V1 runner or the V2 one (0.22+).

The runners profile differently (the sampler warm-up, the CUDA-graph estimate: docs/vllm-releases.md section 10),
so a plan asks once, in :func:`fitgate.sizing.resolve.resolve`, and carries the answer as
``ResolvedServing.v2_runner``.
"""

from __future__ import annotations

from fitgate.sizing.model import LinearAttention, Mamba, ModelArchitecture, ShortConv
from fitgate.sizing.versions import RunnerTraits, VllmAccounting

#: The recurrent mixers: a model with them beside attention is vLLM's ``is_hybrid``, with only them attention-free.
_RECURRENT = (Mamba, LinearAttention, ShortConv)


def runs_v2_runner(
    arch: ModelArchitecture, accounting: VllmAccounting, runner: str = "generate", speculative_method: str | None = None
) -> bool:
    """Whether vLLM measures ``arch`` with its V2 GPU model runner (:meth:`VllmAccounting.uses_v2_runner`)."""
    recurrent = arch.has_state
    attention = any(layer.mixer is not None and not isinstance(layer.mixer, _RECURRENT) for layer in arch.layers)
    traits = RunnerTraits(
        moe=arch.is_moe,
        hybrid=recurrent and attention,
        attention_free=recurrent and not attention,
        quantized=arch.quantization is not None,
        generate=runner != "pooling",
        speculative=speculative_method,
    )
    return accounting.uses_v2_runner(arch.architecture, traits)
