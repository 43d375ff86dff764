"""Built-in catalog entries of NVIDIA ModelOpt exports carry their quantization in hf_quant_config.json."""

from __future__ import annotations

from fitgate.checkpoints import resolve, to_model_input
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.units import GiB


def test_a_modelopt_fp8_catalog_entry_is_sized_at_fp8() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8 (hf_quant_config.json: quant_algo FP8): 70.6e9 parameters, about 68.5e9 of
    # them in the decoder's linear layers at 1 byte, the embeddings and lm_head (2 x 128256 x 8192 = 2.1e9) at 2:
    # ~72.7e9 B = ~67.7 GiB. Sized from config.json alone it was the 16-bit model's ~131 GiB, and one H200 (the
    # InferenceX and vLLM-recipe TP1 runs of the 3.3 export) was denied.
    m = to_model_input(resolve("nvidia/Llama-3.1-70B-Instruct-FP8", source="catalog"))
    p = plan(m, lookup_gpu("H200"), ServingConfig(vllm_version="0.10.2", max_model_len=8192))
    assert 66 * GiB < p.per_gpu.weights_bytes < 70 * GiB
    assert p.verdict.value != "DoesNotFit"


def test_a_modelopt_nvfp4_catalog_entry_is_sized_at_fp4() -> None:
    # nvidia/DeepSeek-V3-0324-NVFP4: the routed experts at 4 bits + one fp8 scale per 16 (~0.56 B a parameter),
    # ~400 GB in all; as a 16-bit model it was ~1257 GiB and 4 x B200 with TP 4 + EP (vLLM recipe) were denied.
    m = to_model_input(resolve("nvidia/DeepSeek-V3-0324-NVFP4", source="catalog"))
    serving = ServingConfig(vllm_version="0.11.0", tensor_parallel_size=4, enable_expert_parallel=True)
    p = plan(m, lookup_gpu("B200"), serving)
    assert p.per_gpu.weights_bytes < 160 * GiB
    assert p.verdict.value != "DoesNotFit"
