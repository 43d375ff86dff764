"""Element sizes of the dtypes that appear in configs, safetensors headers and vLLM flags."""

from __future__ import annotations

from fitgate.sizing.errors import NotModelledError, SizingError

#: Bytes per element of safetensors / torch dtypes. Sub-byte formats (packed 4-bit) are stored in
#: U8/I32 containers in safetensors, so they never appear here.
DTYPE_BYTES: dict[str, float] = {
    "f64": 8,
    "float64": 8,
    "f32": 4,
    "float32": 4,
    "float": 4,
    "f16": 2,
    "float16": 2,
    "half": 2,
    "bf16": 2,
    "bfloat16": 2,
    "f8_e4m3": 1,
    "f8_e4m3fn": 1,
    "f8_e5m2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "f8_e8m0": 1,
    "i64": 8,
    "int64": 8,
    "i32": 4,
    "int32": 4,
    "u32": 4,
    "i16": 2,
    "u16": 2,
    "i8": 1,
    "int8": 1,
    "u8": 1,
    "uint8": 1,
    "bool": 1,
}

#: The model dtypes vLLM accepts for ``--dtype`` (besides ``auto``), with their element size.
MODEL_DTYPES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
_MODEL_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "torch.bfloat16": "bfloat16",
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "float16": "float16",
    "torch.float16": "float16",
    "float": "float32",
    "fp32": "float32",
    "f32": "float32",
    "float32": "float32",
    "torch.float32": "float32",
}

#: ``--kv-cache-dtype`` values and their element size; ``auto`` follows the model dtype.
KV_CACHE_DTYPES: dict[str, int | None] = {
    "auto": None,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    # vllm/config/cache.py 0.34.0 L44-66 (CacheDType; float16 from 0.18.0, the per-token-head ones from 0.20.0): one
    # or two bytes an element plus a scale per token and head (v1/kv_cache_interface.py 0.34.0 L119-122), which
    # fitgate does not count (~3 % at head size 128: a lower bound, so never a false denial)
    "float16": 2,
    "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
}
#: ``--kv-cache-dtype`` values vLLM 0.34 takes whose packed pages (sub-byte codes, block scales, slots a backend
#: lays out: v1/kv_cache_interface.py 0.34.0 L40-66, L564-616 ``state_content_bytes``) fitgate does not size: a
#: deployment using one is Unknown, never refused for it (hunt14 D2: club-3090's 2 x RTX 3090 runs, vLLM's
#: TurboQuant blog).
KV_CACHE_DTYPES_NOT_SIZED = frozenset(
    {
        "int4_per_token_head",
        "nvfp4",
        "nvfp4_4over6",
        "nvfp4_ds_mla",
        "turboquant_k8v4",
        "turboquant_4bit_nc",
        "turboquant_k3v4_nc",
        "turboquant_3bit_nc",
        "octave_k3v4",
        "octave_k3v3",
        "octave_k3v3_compact",
        "ultraquant_4bit",
    }
)


#: torch dtypes a quantized checkpoint's config may state as its ``torch_dtype`` (its storage), which vLLM's auto dtype
#: does not serve in: it falls back to the platform's first model dtype (architecture.parse_config).
CHECKPOINT_STORAGE_DTYPES = frozenset(
    {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "uint8",
     "float4_e2m1fn_x2", "torch.float8_e4m3fn", "torch.float8_e5m2", "torch.int8", "torch.uint8"}
)  # fmt: skip


def normalize_model_dtype(value: str, field: str = "dtype") -> str:
    """Return the canonical model dtype name (``bfloat16``, ``float16`` or ``float32``)."""
    canonical = _MODEL_DTYPE_ALIASES.get(str(value).lower())
    if canonical is None:
        raise SizingError(field, value, "one of auto, bfloat16, float16, float32")
    return canonical


def tensor_dtype_bytes(name: str, field: str = "dtype") -> float:
    """Bytes per element of a safetensors/torch dtype name (``BF16``, ``F8_E4M3``, ``torch.int32``)."""
    key = str(name).lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise SizingError(field, name, "a safetensors dtype such as BF16, F16, F32, F8_E4M3, I32, U8")
    return DTYPE_BYTES[key]


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Element size of the KV cache for ``--kv-cache-dtype`` (``auto`` = the model dtype)."""
    if kv_cache_dtype in KV_CACHE_DTYPES_NOT_SIZED:
        raise NotModelledError(
            "kv_cache_dtype", kv_cache_dtype, "its packed sub-byte pages and scales; the fit is not checked"
        )
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise SizingError("kv_cache_dtype", kv_cache_dtype, "one of " + ", ".join(KV_CACHE_DTYPES))
    size = KV_CACHE_DTYPES[kv_cache_dtype]
    return MODEL_DTYPES[model_dtype] if size is None else size


#: Model types vLLM refuses to run in float16 (numerical instability): its ``_FLOAT16_NOT_SUPPORTED_MODELS``, by the
#: first release of each list. None before 0.9.1 (0.8.5 config.py L2885-2960 and 0.9.0 accept an explicit float16;
#: the list first appears in 0.9.1 config.py L3121-3126); gemma3_text from 0.10.2 (config/__init__.py L2615-2622;
#: 0.10.1.1 L2669-2674 without it); plamo2 gone from 0.27.0 (config/model.py 0.26.0 L2010, 0.27.0 L2105, 0.34.0
#: L2442-2447). ``auto`` leaves float16 out for these model types whatever the release (0.9.1's candidates; an older
#: release keeps a bfloat16 checkpoint's dtype, which a T4 refuses anyway).
FLOAT16_UNSUPPORTED_BY_RELEASE: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 27, 0), frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})),
    ((0, 10, 2), frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})),
    ((0, 9, 1), frozenset({"gemma2", "gemma3", "plamo2", "glm4"})),
    ((0, 0, 0), frozenset()),
)
FLOAT16_UNSUPPORTED_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})


def float16_refused(model_type: str, version: tuple[int, int, int]) -> bool:
    """Whether vLLM ``version`` refuses an explicit ``--dtype float16`` for ``model_type``."""
    return model_type in next(types for since, types in FLOAT16_UNSUPPORTED_BY_RELEASE if version >= since)


#: CUDA has bfloat16 from compute capability 8.0 (Ampere); T4 (7.5) and V100 (7.0) do not.
BFLOAT16_MIN_COMPUTE_CAPABILITY = (8, 0)


def compute_capability_at_least(compute_capability: str | None, least: tuple[int, int]) -> bool:
    """Whether a CUDA compute capability (``"7.5"``) is at least ``least``; unknown (AMD, custom GPUs) = yes."""
    if not compute_capability:
        return True
    major, _, minor = compute_capability.partition(".")
    return (int(major), int(minor or 0)) >= least


def has_bfloat16(compute_capability: str | None) -> bool:
    """Whether a GPU of this CUDA compute capability runs bfloat16 (8.0 and later)."""
    return compute_capability_at_least(compute_capability, BFLOAT16_MIN_COMPUTE_CAPABILITY)


def served_dtype(
    requested: str | None,
    checkpoint: str,
    model_type: str,
    compute_capability: str | None,
    version: tuple[int, int, int] = (99, 0, 0),
) -> str:
    """The dtype vLLM runs the model in on a GPU of ``compute_capability``, as its ``_resolve_auto_dtype`` picks it.

    The candidates are the platform's dtypes (bfloat16, float16, float32; no bfloat16 below compute
    capability 8.0) less float16 for the model types vLLM refuses in float16. ``auto`` keeps the
    checkpoint's dtype when it is a candidate and otherwise takes the first candidate: a bfloat16
    checkpoint runs in float16 on a T4, a Gemma 2 one in float32; a float32 checkpoint takes the first
    candidate too.

    An explicit ``--dtype float16`` is refused only by the releases that refuse it (:func:`float16_refused`).

    Raises:
        SizingError: an explicit ``--dtype`` the GPU or the model cannot run.
    """
    platform = [d for d in ("bfloat16", "float16", "float32") if d != "bfloat16" or has_bfloat16(compute_capability)]
    candidates = [d for d in platform if d != "float16" or model_type not in FLOAT16_UNSUPPORTED_MODEL_TYPES]
    if requested in ("auto", "", None):
        dtype = candidates[0] if checkpoint == "float32" else checkpoint
        return dtype if dtype in candidates else candidates[0]
    candidates = [d for d in platform if d != "float16" or not float16_refused(model_type, version)]
    dtype = normalize_model_dtype(requested, "dtype")
    if dtype not in candidates:
        why = (
            f"vLLM refuses float16 for {model_type} (numerical instability)"
            if dtype == "float16"
            else f"compute capability {compute_capability} has no bfloat16 (it needs 8.0)"
        )
        raise SizingError("dtype", requested, "one of " + ", ".join(candidates) + " on this GPU", why)
    return dtype


#: vLLM's ``--quantization fp8`` needs compute capability 8.0 (``Fp8Config.get_min_capability``; weight-only
#: Marlin kernels below 8.9): not offered on a T4 or V100
#: (advice's suggestions and capacity's search).
FP8_WEIGHTS_MIN_COMPUTE_CAPABILITY = (8, 0)
#: fp8 KV-cache kernels need 8.0 too, as ``recommend``'s search has it (capacity.kv_dtypes; hunt170 F2: a V100 / T4 was
#: offered ``--kv-cache-dtype fp8``, which 0.11's FlexAttention and 0.24+'s Triton attention refuse there).
FP8_KV_MIN_COMPUTE_CAPABILITY = (8, 0)
