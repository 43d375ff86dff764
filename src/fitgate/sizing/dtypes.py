"""Element sizes of the dtypes that appear in configs, safetensors headers and vLLM flags."""

from __future__ import annotations

from fitgate.sizing.errors import SizingError

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
}


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
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise SizingError("kv_cache_dtype", kv_cache_dtype, "one of " + ", ".join(KV_CACHE_DTYPES))
    size = KV_CACHE_DTYPES[kv_cache_dtype]
    return MODEL_DTYPES[model_dtype] if size is None else size
