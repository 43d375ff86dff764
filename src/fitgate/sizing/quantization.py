"""How a checkpoint's weights are stored: ``quantization_config`` and runtime ``--quantization``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fitgate.sizing.errors import NotModelledError, SizingError
from fitgate.sizing.model import ModelArchitecture, Quantization

_FIELD = "config.json:quantization_config"


def _number(qc: Mapping[str, Any], key: str, default: float, low: float, high: float, *, integer: bool) -> float:
    """A number of ``quantization_config``, checked where it enters (finite, in range, integral)."""
    value = qc.get(key, default)
    if value is None:
        value = default
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and low <= value <= high
        and (not integer or float(value).is_integer())
    )
    if not ok:
        kind = "an integer" if integer else "a number"
        raise SizingError(f"{_FIELD}.{key}", value, f"{kind} from {low:g} to {high:g}")
    return float(value)


#: vLLM's names for a ModelOpt checkpoint's KV cache algorithm (``utils/torch_utils.py`` 0.34.0 L90-93
#: ``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP``).
MODELOPT_KV_CACHE_DTYPES = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def modelopt_kv_cache_dtype(qc: Mapping[str, Any]) -> str | None:
    """The ``--kv-cache-dtype`` that ``auto`` becomes for a ModelOpt checkpoint, or None where it stays ``auto``.

    vLLM 0.14.0 onwards resolves ``auto`` from the checkpoint (``engine/arg_utils.py`` 0.34.0 L2329-2332 calls
    ``resolve_kv_cache_dtype_string``, ``utils/torch_utils.py`` L518-535; 0.14.0 ``arg_utils.py`` L1397-1400):
    ``get_kv_cache_quant_algo_string`` (L463-515) takes ``kv_cache_scheme`` or ``kv_cache_quant_algo``, at the top or
    under ``quantization``; a scheme of static 8-bit floats is fp8, of 4-bit floats nvfp4, a name is looked up in
    :data:`MODELOPT_KV_CACHE_DTYPES`; anything else stays ``auto``. NVIDIA's FP8 / NVFP4 exports carry
    ``kv_cache_quant_algo: FP8``, so vLLM serves them with a one-byte KV cache unless told otherwise.
    """
    inner = qc.get("quantization")
    source = inner if isinstance(inner, Mapping) else qc
    algo = (
        source.get("kv_cache_scheme")
        or qc.get("kv_cache_scheme")
        or source.get("kv_cache_quant_algo")
        or qc.get("kv_cache_quant_algo")
    )
    if isinstance(algo, Mapping):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            algo = "fp8"
        elif algo.get("num_bits") == 4 and algo.get("type") == "float":
            algo = "nvfp4"
        else:
            return None
    return MODELOPT_KV_CACHE_DTYPES.get(algo.lower()) if isinstance(algo, str) else None


def _modelopt(qc: Mapping[str, Any]) -> Quantization:
    """NVIDIA ModelOpt: ``quant_algo`` at the top or under ``quantization`` (hf_quant_config.json layout)."""
    kv = modelopt_kv_cache_dtype(qc)
    inner = qc.get("quantization")
    source = inner if isinstance(inner, Mapping) else qc
    algo = str(source.get("quant_algo") or qc.get("quant_algo") or "").upper()
    if algo in {"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"}:
        return Quantization("modelopt", 8, 0, 4.0, kv_cache_dtype=kv)
    if "NVFP4" in algo or algo in {"MIXED_PRECISION", "W4A8_NVFP4_FP8", "W4A16_NVFP4"}:
        # NVFP4: two 4-bit values a byte plus one fp8 scale per 16 elements (and an fp32 global
        # scale per tensor, negligible). MIXED_PRECISION checkpoints keep some layers in FP8; they
        # are sized as NVFP4 throughout (weights from safetensors headers, when read, are exact).
        group = int(_number(source, "group_size", 16, 1, 1 << 20, integer=True))
        return Quantization("modelopt_fp4", 4, group, 1.0, kv_cache_dtype=kv)
    if algo == "MXFP8":
        # hunt190 F1: e4m3 weights with one e8m0 scale per 32 (``modelopt.py`` 0.17.0 L96-110 QUANT_ALGOS; 0.34.0
        # L150-167 LINEAR_ALGOS "MXFP8": ("modelopt_mxfp8", ...); 0.14.0 L105-114 lacks it). Tencent's Hy4-preview
        # and NVIDIA's Nemotron conversions ship it.
        return Quantization("modelopt_mxfp8", 8, 32, 1.0, kv_cache_dtype=kv)
    # an algorithm fitgate does not size (a newer ModelOpt's, or W4A16_AWQ, which vLLM 0.34 refuses): Unknown, never
    # a denial for it alone (hunt190 F1: MXFP8 was a usage error where vLLM 0.17+ loads it)
    raise NotModelledError(f"{_FIELD}.quant_algo", algo[:64] or None, "FP8, NVFP4, MXFP8 or MIXED_PRECISION (ModelOpt)")


#: The keys under which quantization configs list the modules they leave unquantized (compressed-tensors ``ignore``,
#: ModelOpt ``exclude_modules`` (also under ``quantization``), AWQ / bitsandbytes ``modules_to_not_convert``, fp8
#: ``ignored_layers``, Quark ``exclude``) and how many patterns are read (a long list is a model's every layer).
EXCLUDE_KEYS = ("ignore", "exclude_modules", "modules_to_not_convert", "ignored_layers", "exclude")
MAX_EXCLUDED = 4096
MAX_PATTERN_CHARS = 256


def excluded_modules(qc: Mapping[str, Any]) -> tuple[str, ...]:
    """The unquantized module patterns of a quantization config, as globs (:data:`EXCLUDE_KEYS`).

    ``re:`` patterns (compressed-tensors) are kept only when ``.*`` is their one wildcard (``re:.*self_attn.*``
    becomes ``*self_attn*``); any other regex is left out rather than run: a pattern from a checkpoint is never
    compiled as a regex, so it cannot cost more than a glob.
    """
    inner = qc.get("quantization")
    found: list[str] = []
    for source in (qc, inner if isinstance(inner, Mapping) else {}):
        for key in EXCLUDE_KEYS:
            value = source.get(key)
            if isinstance(value, list):
                found.extend(v for v in value[:MAX_EXCLUDED] if isinstance(v, str) and len(v) <= MAX_PATTERN_CHARS)
    patterns: list[str] = []
    for given in found[:MAX_EXCLUDED]:
        if not given.startswith("re:"):
            patterns.append(given)
            continue
        body = given[3:].replace("\\.", "\x00")  # an escaped dot is a dot
        if any(ch in body for ch in "()[]{}+?|^$\\"):
            continue
        glob = body.replace(".*", "*").replace(".", "?").replace("\x00", ".")
        patterns.append(glob if glob.endswith("*") else glob + "*")  # compressed-tensors runs re.match: a prefix
    return tuple(dict.fromkeys(patterns))


def parse_quantization(qc: object) -> Quantization | None:
    """Read ``quantization_config`` into a :class:`Quantization` (None for unquantized checkpoints).

    The modules it leaves unquantized are read too (:func:`excluded_modules`).
    """
    q = _parse_quantization(qc)
    if q is None or not isinstance(qc, Mapping):
        return q
    excluded = excluded_modules(qc)
    return replace(q, excluded=excluded) if excluded else q


def _parse_quantization(qc: object) -> Quantization | None:
    """Read ``quantization_config`` into a :class:`Quantization` (None for unquantized checkpoints).

    Every number is checked where it enters: bits and group sizes must be finite integers in range;
    an error names the key (``config.json:quantization_config.bits``), the value and the range.
    """
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise SizingError(_FIELD, qc, "a JSON object")
    method = str(qc.get("quant_method") or "").lower()
    producer = qc.get("producer")
    if not method and isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        method = "modelopt"  # vLLM's ModelOpt configs accept a producer block without quant_method
    if method == "fp8":
        block = qc.get("weight_block_size")
        group, shape = 0, None
        if block is not None:
            if not isinstance(block, list) or len(block) != 2:
                raise SizingError(f"{_FIELD}.weight_block_size", block, "two integers, e.g. [128, 128]")
            sizes = {"weight_block_size[0]": block[0], "weight_block_size[1]": block[1]}
            rows = _number(sizes, "weight_block_size[0]", 128, 1, 1 << 16, integer=True)
            cols = _number(sizes, "weight_block_size[1]", 128, 1, 1 << 16, integer=True)
            group, shape = int(rows * cols), (int(rows), int(cols))
        return Quantization("fp8", 8, group, 4.0, block_shape=shape)
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method in {"awq", "gptq", "awq_marlin", "gptq_marlin"}:
        bits = _number(qc, "bits" if "bits" in qc else "w_bit", 4, 2, 8, integer=True)
        key = "group_size" if "group_size" in qc else "q_group_size"
        group = int(_number(qc, key, 128, -1, 1 << 20, integer=True))
        # fp16 scale per group plus a packed zero point (bits/8 bytes) per group
        return Quantization(method.removesuffix("_marlin"), bits, max(group, 0), 2.0 + bits / 8)
    if method == "mxfp4":
        return Quantization("mxfp4", 4, 32, 1.0, experts_only=True)
    if method in {"modelopt", "modelopt_fp4", "nvfp4", "modelopt_mixed", "modelopt_mxfp8"}:
        return _modelopt(qc)
    if method == "bitsandbytes":
        four_bit = qc.get("load_in_4bit", True)
        if not isinstance(four_bit, bool):
            raise SizingError(f"{_FIELD}.load_in_4bit", four_bit, "true or false")
        return Quantization("bitsandbytes", 4 if four_bit else 8, 64 if four_bit else 0, 4.0)
    if method in {"fbgemm_fp8", "ptpc_fp8"}:
        return Quantization(method, 8, 0, 4.0)
    if method in {"auto-round", "auto_round", "inc"}:
        # Intel AutoRound: vLLM reads it as "inc" (quantization/inc/inc.py, 0.24) and loads its GPTQ / AWQ packing
        # ("packing_format" auto_round:auto_gptq / auto_awq): bits and group_size as a GPTQ checkpoint's.
        bits = _number(qc, "bits", 4, 2, 8, integer=True)
        group = int(_number(qc, "group_size", 128, -1, 1 << 20, integer=True))
        return Quantization("gptq", bits, max(group, 0), 2.0 + bits / 8)
    if method == "quark":
        return _quark(qc)
    sized = (
        "fitgate sizes fp8, compressed-tensors, awq, gptq, auto-round, quark, mxfp4, modelopt, modelopt_fp4, "
        "bitsandbytes and fbgemm_fp8 checkpoints"
    )
    if not method:
        # hunt76 F4: MLX's quantization_config ({"bits": 4, "group_size": 64}) names no method; vLLM 0.34 reads it as
        # unquantized (model_arch_config_convertor.py L274, config/model.py L1472) and its packed weights do not load
        exc = NotModelledError(f"{_FIELD}.quant_method", None, sized)
        exc.args = (
            f"{_FIELD}: a quantization without quant_method (MLX's bits / group_size?), which vLLM reads as "
            f"unquantized and whose packed weights it does not load; {sized} (Unknown)",
        )
        raise exc
    # a method of a release fitgate does not know, or one it does not size (moe_wna16, experts_int8, w4afp8, hqq in
    # older releases ...): Unknown, never a usage error (hunt76)
    raise NotModelledError(f"{_FIELD}.quant_method", method[:64], f"its weights' bytes; {sized}")


def _compressed_tensors(qc: Mapping[str, Any]) -> Quantization:
    """compressed-tensors: each ``config_groups`` entry quantizes the modules its ``targets`` match.

    vLLM gives every layer the scheme of the group its name matches (``compressed_tensors.py`` 0.24.0 L321-349 builds
    the target map over every group; ``find_matched_target`` picks a layer's). A "mixed-precision" checkpoint (FP8
    attention, NVFP4 MLP: unsloth's and llm-compressor's Qwen3.6 NVFP4 builds) has groups of different widths; the
    config-only estimate sizes every quantized linear layer with the narrowest group, as ModelOpt's MIXED_PRECISION
    is sized, so it stays on the low side (hunt177 F1: an FP8 group 0 sized a 4-bit Qwen3.6-27B as FP8, 28.3 GiB of
    weights where about 18 load, and denied it on an RTX 5090 where it ran). Weights read from the checkpoint's own
    safetensors headers are exact either way.
    """
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise SizingError(f"{_FIELD}.config_groups", groups, "a JSON object of quantization groups")
    found: list[Quantization] = []
    for grp in groups.values():
        weights = grp.get("weights") if isinstance(grp, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        bits = _number(weights, "num_bits", 8, 1, 16, integer=True)
        # -1 (or 0, null) is no group: compressed-tensors reads group_size -1 as channel-wise (quant_args.py 0.10.2
        # L243-254; llm-compressor writes it), which fitgate refused (hunt204 F1: a Qwen3.5 FP8 on vLLM 0.17.1)
        group = max(0, int(_number(weights, "group_size", 0, -1, 1 << 20, integer=True)))
        kind = str(weights.get("type", "int"))
        if kind == "float" and bits == 4:
            # NVFP4 / MXFP4 in compressed-tensors: fp8 (NVFP4, 16) or e8m0 (MXFP4, 32) group scales
            found.append(Quantization("compressed-tensors", 4, group or 16, 1.0))
        else:
            found.append(Quantization("compressed-tensors", bits, group, 2.0 if bits < 8 or kind == "int" else 4.0))
    if not found:
        return Quantization("compressed-tensors", 8, 0, 2.0)
    # bytes a weight, packed value plus its share of a scale (inventory.quantized_bytes' rule)
    return min(found, key=lambda q: q.weight_bits / 8 + q.scale_bytes / (q.group_size or 4096))


def _quark(qc: Mapping[str, object]) -> Quantization:
    """AMD Quark (``QuarkConfig``, vLLM quantization/quark/quark.py): the global weight format sizes the layers.

    ``global_quant_config.weight.dtype``: ``fp8_e4m3`` (one fp32 scale per tensor or channel), ``fp4`` (OCP MX
    FP4: an e8m0 scale per 32), ``int4`` / ``uint4`` (fp16 scale and zero point per ``group_size``), ``int8``.
    Layers a ``layer_quant_config`` or ``exclude`` treats otherwise are sized as the global format.
    """
    where = f"{_FIELD}.global_quant_config.weight"
    glob = qc.get("global_quant_config")
    weight = glob.get("weight") if isinstance(glob, Mapping) else None
    if isinstance(weight, list):
        # W4A8 (vLLM 0.14+ ``_is_fp8_w4a8``: [fp8_e4m3 per tensor, int4 per channel], quark.py 0.34.0 L440-470) stores
        # the int4 weights; its fp8 entry was sized (hunt204 F4: 8.80 GiB of a Qwen3-8B where ~5.6 load)
        int4 = [w for w in weight if isinstance(w, Mapping) and str(w.get("dtype") or "").lower() in {"int4", "uint4"}]
        weight = int4[0] if int4 else weight[0] if weight else None
    if not isinstance(weight, Mapping):
        raise SizingError(where, weight, "an object with the weights' dtype (AMD Quark)")
    dtype = str(weight.get("dtype") or "").lower()
    if dtype.startswith("fp8"):
        return Quantization("quark", 8, 0, 4.0)
    if dtype in {"fp4", "mxfp4"}:
        return Quantization("quark", 4, 32, 1.0)
    if dtype in {"int4", "uint4"}:
        group = int(_number(weight, "group_size", 128, -1, 1 << 20, integer=True))
        return Quantization("quark", 4, max(group, 0), 2.5)
    if dtype in {"int8", "uint8"}:
        return Quantization("quark", 8, 0, 4.0)
    if dtype in {"fp6_e3m2", "fp6_e2m3", "mxfp6_e3m2", "mxfp6_e2m3"}:
        # OCP MX FP6: 6 bits and an e8m0 scale per 32 (quantization/utils/ocp_mx_utils.py 0.12.0 L13-19, 0.34.0
        # L36-75; vLLM before 0.12 has no FP6, which fitgate does not check here); hunt204 F3: it was refused
        return Quantization("quark", 6, 32, 1.0)
    # a Quark dtype fitgate does not size is not a refusal: vLLM may take it (hunt204 F3)
    raise NotModelledError(f"{where}.dtype", dtype or None, "fp8_e4m3, fp4, fp6, int4, uint4 or int8 (AMD Quark)")


#: Runtime ``--quantization`` values fitgate can size, mapped to how weights end up stored.
RUNTIME_QUANTIZATION: dict[str, Quantization] = {
    "fp8": Quantization("fp8", 8, 0, 0.0),  # online fp8: one fp32 scale per tensor (negligible)
    "bitsandbytes": Quantization("bitsandbytes", 4, 64, 4.0),
    # hunt19 F1: int8 experts with an fp32 scale per output row, every other linear layer left in the model's dtype
    # (``quantization/experts_int8.py`` 0.6.3 L40-45 and L60-96; 0.34.0 L53-60 and ``online/int8.py`` L63-108).
    "experts_int8": Quantization("experts_int8", 8, 0, 4.0, experts_only=True),
    # hunt26 F1: vLLM's online shorthands (``config/quantization.py`` 0.26.0 L116-140, 0.34.0 L273-330
    # ``_ONLINE_SHORTHANDS``): each names the weight format of the linear layers and / or the experts it quantizes
    # at load time. ``fp8_per_tensor`` is what online ``fp8`` became (``model_loader/weight_utils.py`` 0.31.0
    # L341-349, 0.34.0 L383-390: "--quantization fp8 is deprecated for online quantization; use
    # --quantization fp8_per_tensor"). Scales: per tensor (negligible), per 128 x 128 block (4 bytes a block,
    # under 0.03 %: left out), per output channel (fp32, counted as one per 4,096 weights like experts_int8), per
    # 32 (MX: one e8m0 byte) or 16 (NVFP4: one e4m3 byte, plus a global fp32 per expert) weights.
    "fp8_per_tensor": Quantization("fp8_per_tensor", 8, 0, 0.0),
    "fp8_per_block": Quantization("fp8_per_block", 8, 0, 0.0),
    "fp8_per_channel": Quantization("fp8_per_channel", 8, 0, 4.0),
    "mxfp8": Quantization("mxfp8", 8, 32, 1.0),
    "mxfp4": Quantization("mxfp4", 4, 32, 1.0),
    # the experts only; the linear layers stay in the model's dtype (no ``linear`` spec in the shorthand)
    "int8_per_channel_weight_only": Quantization("int8_per_channel_weight_only", 8, 0, 4.0, experts_only=True),
    "nvfp4_per_token": Quantization("nvfp4_per_token", 4, 16, 1.0, experts_only=True),
    # hunt30 F1: ROCm's per-token-activation / per-channel-weight FP8 (vLLM 0.7.3 to 0.18, deprecated in 0.15:
    # ``quantization/ptpc_fp8.py`` 0.11.0 L50, L110-116 quantizes an unquantized checkpoint while loading, fp8
    # weights with one fp32 scale per output row), the vLLM blog's "PTPC-FP8" Llama-3.1-70B on one MI300X
    "ptpc_fp8": Quantization("ptpc_fp8", 8, 0, 4.0),
}

#: Shorthands that are also checkpoint methods: on a checkpoint without a quantization config vLLM quantizes at load
#: time only from 0.30.0 (``config/quantization.py`` 0.30.0 L230 ``_DEFERRED_ONLINE_SHORTHANDS = frozenset(("mxfp4",
#: "mxfp8"))``, "resolved only when checkpoint quantization metadata is absent"); before, ``--quantization mxfp4``
#: picks the checkpoint method (``layers/quantization/__init__.py`` 0.29.0 L164-175: ``setdefault`` keeps
#: ``Mxfp4Config`` / ``ModelOptMxFp8Config``), whose behaviour on an unquantized checkpoint fitgate does not size.
DEFERRED_ONLINE_SHORTHANDS = frozenset({"mxfp4", "mxfp8"})
DEFERRED_ONLINE_SINCE = (0, 30, 0)

#: Runtime ``--quantization`` values vLLM 0.34 takes on an unquantized checkpoint that fitgate does not size:
#: ``online`` (its spec is ``--quantization-config``), ``lut_b_moe`` (LUT-B experts) and ``mxfp4_hadamard32`` (MXFP4
#: linear layers with unquantized experts: ``config/quantization.py`` 0.34.0 ``_ONLINE_SHORTHANDS``), torchao and
#: humming (no config file of their own), and gguf (a GGUF file's per-tensor types, which fitgate does not read: hunt28
#: F2). A plan with one is Unknown (``NotModelledError``), never refused for it.
RUNTIME_QUANTIZATION_NOT_SIZED = frozenset(
    {
        "online", "lut_b_moe", "mxfp4_hadamard32", "torchao", "humming", "gguf",
        # load-time methods of older releases and other devices (hunt36 F3): DeepSpeed's FP6/FP8 (0.4-0.6), TPU int8,
        # AWS Neuron's
        "deepspeedfp", "tpu_int8", "neuron_quant",
        # round-to-nearest of a bf16 checkpoint while it loads (vllm#18768; quantization/__init__.py 0.10.1 L37,
        # rtn.py 0.14.0 L44-48: int8 or int4 by RTN_NUM_BITS, groups of RTN_GROUP_SIZE): it was read as the
        # checkpoint's own and sized in bf16 (hunt208 F1: Qwen3-14B on an L4 denied)
        "rtn",
    }
)  # fmt: skip


#: The first release that refines a block-fp8 MoE checkpoint's scales when a TP shard of the experts is not a whole
#: number of blocks (``refine_fp8_moe_block_shape``, fused_moe/oracle/fp8.py 0.29.0 L272-303: to
#: ``gcd(block_n, block_k, shard, hidden)`` when that is at least 32). Before, the shard must be whole blocks
#: (quantization/fp8.py 0.28.0 L534-546 raises "The output_size of gate's and up's weight = ... is not divisible by
#: weight quantization block_n").
FP8_MOE_BLOCK_REFINE_SINCE = (0, 29, 0)


def fp8_moe_tp_split_refused(
    block_shape: tuple[int, int] | None, expert_width: int, hidden: int, tp: int, version: tuple[int, int, int]
) -> str | None:
    """Why vLLM refuses to shard block-fp8 experts of ``expert_width`` over ``tp`` GPUs (None: it does not).

    hunt174 F1: MiniMax-M2 (1536 / 8 = 192, block 128) "Pure TP=8 fails" (vllm-project/recipes
    models/MiniMaxAI/MiniMax-M2.yaml L96-97); expert parallelism does not shard the experts (pass ``tp`` 1 then).
    """
    if block_shape is None or tp <= 1 or expert_width <= 0:
        return None
    block_n, block_k = block_shape
    shard = expert_width // tp
    if shard * tp == expert_width and shard % block_n == 0 and shard % block_k == 0:
        return None
    if version >= FP8_MOE_BLOCK_REFINE_SINCE and math.gcd(block_n, block_k, shard, hidden) >= 32:
        return None
    return (
        f"the experts' {expert_width} columns over TP {tp} are {shard} a GPU, not a whole number of the checkpoint's "
        f"{block_n} x {block_k} fp8 blocks"
        + (" (vLLM 0.29+ refines the blocks only to a divisor of at least 32)" if version >= (0, 29, 0) else "")
        + ": vLLM refuses to load it; use --enable-expert-parallel or another TP size"
    )


def moe_tp_split_refused(
    arch: ModelArchitecture, tp: int, expert_parallel: bool, version: tuple[int, int, int]
) -> str | None:
    """:func:`fp8_moe_tp_split_refused` for ``arch``'s routed experts (None for a dense model or with EP)."""
    moe, q = arch.first_moe, arch.quantization
    if moe is None or q is None or expert_parallel:
        return None
    width = moe.expert_intermediate_size
    return fp8_moe_tp_split_refused((q.experts or q).block_shape, width, arch.hidden_size, tp, version)


def is_gguf(model: str) -> bool:
    """Whether vLLM's ``--model`` names GGUF weights.

    A ``.gguf`` file, or a Hub repo of GGUF files (``repo:QUANT`` from vLLM 0.11.2: ``unsloth/Qwen3-0.6B-GGUF:IQ1_S``;
    such repos carry ``GGUF`` in their name).
    """
    text = model.strip().lower()
    repo = text.split(":", 1)[0]
    return text.endswith(".gguf") or ("/" in repo and "gguf" in repo.rsplit("/", 1)[-1] and "://" not in text)
