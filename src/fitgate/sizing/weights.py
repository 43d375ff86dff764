"""What one GPU loads: weight bytes per rank, as vLLM's 'Model loading took X GiB' reports them.

What the checkpoint holds is a :class:`~fitgate.sizing.inventory.WeightInventory`
(:mod:`fitgate.sizing.inventory` from tensor metadata, :mod:`fitgate.sizing.inventory_estimate` from
the architecture; both re-exported here). :func:`weights_per_rank` then applies vLLM's loading rules
for one (TP, PP) rank: vocab-parallel embedding and lm_head padded to 64 rows, column/row-parallel
linears and experts divided by TP (or whole experts under EP), replicated norms, routers and MLA latent
projections, KV projections replicated when TP exceeds the KV heads, layers partitioned over pipeline
stages like ``get_pp_indices``, runtime ``--dtype`` and ``--quantization fp8`` casts, and the buffers
vLLM allocates while loading (the rotary cos/sin cache and MLA's absorbed ``kv_b_proj`` copies).
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.dtypes import MODEL_DTYPES
from fitgate.sizing.errors import SizingError
from fitgate.sizing.inventory import (
    Role,
    WeightEntry,
    WeightInventory,
    bytes_from_dtype_counts,
    classify_tensor,
    inventory_from_tensors,
    quantized_bytes,
)
from fitgate.sizing.inventory_estimate import (  # the private two: still importable from here (tests)
    _Builder,  # noqa: F401
    _kda_params,  # noqa: F401
    inventory_from_architecture,
)
from fitgate.sizing.model import MLA, Attention, ModelArchitecture, MoE, Quantization
from fitgate.sizing.mxfp4 import MARLIN_LAYOUT, Mxfp4Layout
from fitgate.sizing.units import cdiv, round_up

__all__ = [
    "VOCAB_PADDING",
    "RankWeights",
    "Role",
    "WeightEntry",
    "WeightInventory",
    "bytes_from_dtype_counts",
    "classify_tensor",
    "inventory_from_architecture",
    "inventory_from_tensors",
    "pp_layer_ranges",
    "pp_partition",
    "quantized_bytes",
    "weights_per_rank",
]

VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE


def _layer_kv_factor(arch: ModelArchitecture, layer: int | None, tp: int, default: float) -> float:
    """Share of a layer's K/V projections one rank holds: its own KV heads (MiMo-V2: 4 global, 8 sliding)."""
    mixer = arch.layers[layer].mixer if layer is not None and layer < arch.num_layers else None
    if isinstance(mixer, Attention) and mixer.num_kv_heads:
        return max(1, mixer.num_kv_heads // tp) / mixer.num_kv_heads
    return default


def _kv_shared(arch: ModelArchitecture, layer: int) -> bool:
    mixer = arch.layers[layer].mixer if layer < arch.num_layers else None
    return isinstance(mixer, Attention) and mixer.kv_shared


def pp_layer_ranges(num_layers: int, pp: int, partition: tuple[int, ...] | None = None) -> list[range]:
    """VLLM's ``get_pp_indices``: equal shares, the remainder to the stages before the last.

    ``partition``: ``VLLM_PP_LAYER_PARTITION``'s layers per stage, which vLLM takes as they are once their count is
    the stages' and their sum the layers' (vllm/distributed/utils.py 0.34.0 L227-238; :func:`pp_partition`).
    """
    if pp < 1 or pp > num_layers:
        raise SizingError("pipeline_parallel_size", pp, f"an integer from 1 to num_hidden_layers ({num_layers})")
    if partition is not None:  # checked by pp_partition: one count a stage, summing to the layers
        parts = list(partition)
    else:
        parts = [num_layers // pp] * pp
        for i in range(2, num_layers % pp + 2):
            parts[-i] += 1
    out, start = [], 0
    for n in parts:
        out.append(range(start, start + n))
        start += n
    return out


#: The longest ``VLLM_PP_LAYER_PARTITION`` read (64 stages of up to 4 digits).
MAX_PARTITION_CHARS = 320


def pp_partition(text: str | None, num_layers: int, pp: int) -> tuple[int, ...] | None:
    """``VLLM_PP_LAYER_PARTITION`` as vLLM reads it: comma-separated layer counts, one per stage, summing to the layers.

    vLLM refuses anything else at start-up (vllm/distributed/utils.py 0.34.0 L227-238: "Invalid partition string",
    "len(partitions)=... does not match pp_size", "sum(partitions)=... does not match num_hidden_layers", negative
    counts); so does this, naming the value. None for no partition.
    """
    if text is None or not text.strip():
        return None
    if len(text) > MAX_PARTITION_CHARS:
        raise SizingError("VLLM_PP_LAYER_PARTITION", text[:40] + "...", f"at most {MAX_PARTITION_CHARS} characters")
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise SizingError("VLLM_PP_LAYER_PARTITION", text, "comma-separated layer counts, such as 24,40") from None
    if len(parts) != pp:
        raise SizingError("VLLM_PP_LAYER_PARTITION", text, f"{pp} counts, one per pipeline stage (vLLM refuses it)")
    if sum(parts) != num_layers or any(p < 0 for p in parts):
        raise SizingError(
            "VLLM_PP_LAYER_PARTITION", text, f"counts >= 0 summing to the model's {num_layers} layers (vLLM refuses it)"
        )
    return parts


@dataclass(frozen=True)
class RankWeights:
    """Bytes one GPU holds after loading."""

    total_bytes: int
    tensors_bytes: int
    rotary_cache_bytes: int
    mla_absorbed_bytes: int
    embedding_bytes: int


#: Gemma 4's per-layer table is in none of these: Gemma4Model builds it on every pipeline stage
#: (gemma4.py 0.33.0 L1018-1028, no ``is_first_rank`` test).
_FIRST_STAGE_ROLES = frozenset({Role.EMBED, Role.VISION})
#: Models whose vLLM class builds the token embedding on every pipeline stage (no ``PPMissingLayer``):
#: Gemma 4 (gemma4.py 0.33.0 L1007-1012; its lm_head is tied to that stage's own embedding, L1447-1454).
_EMBED_ON_EVERY_STAGE = frozenset({"gemma4", "gemma4_text"})
_LAST_STAGE_ROLES = frozenset({Role.LM_HEAD, Role.REPLICATED})
_VOCAB_ROLES = frozenset({Role.EMBED, Role.LM_HEAD})
_TP_SPLIT_ROLES = frozenset({Role.COLUMN, Role.ROW, Role.VISION})


def _expert_padding(arch: ModelArchitecture, tp: int, mxfp4: Mxfp4Layout | None) -> tuple[float, float]:
    """How much larger one rank's experts (quantized tensors, then biases) are than ``1 / TP`` of the checkpoint's.

    ``tp`` is the MoE layers' TP (1 under expert parallelism, TP x DP without; fitgate.sizing.parallel).
    Kimi K3 without expert parallelism pads ``moe_intermediate_size`` to
    ``min_intermediate_per_partition x TP`` when ``moe_intermediate_size // TP`` is below it
    (vllm/models/kimi_k3/nvidia/model.py 0.33.0 L418-427; with EP its TP is 1: no padding). ``mxfp4``:
    the MXFP4 MoE backend's layout (:mod:`fitgate.sizing.mxfp4`) for gpt-oss; other MXFP4 checkpoints keep
    Marlin's padding (intermediate to 128, expert width to 256; fused_moe/oracle/mxfp4.py 0.33.0 L837-873
    for the other backends: 128 / 128-256).
    """
    moe = next((layer.ffn for layer in arch.layers if isinstance(layer.ffn, MoE)), None)
    if moe is None:
        return 1.0, 1.0
    inter = moe.expert_intermediate_size // tp
    local = inter
    if tp > 1 and moe.min_intermediate_per_partition and local < moe.min_intermediate_per_partition:
        local = moe.min_intermediate_per_partition
    width = moe.latent_size or arch.hidden_size
    if mxfp4 is None:
        return local / inter, local / inter
    if arch.model_type != "gpt_oss":
        ratio = (round_up(local, 128) * round_up(width, 256)) / (inter * width)
        return ratio, local / inter
    stored, biases = Mxfp4Layout("checkpoint", 1, 1).expert_bytes(inter, width)
    quantized, bias = mxfp4.expert_bytes(local, width)
    return quantized / stored, bias / biases


def weights_per_rank(
    arch: ModelArchitecture,
    inventory: WeightInventory,
    *,
    tp: int,
    pp: int,
    pp_rank: int,
    dtype: str,
    runtime_quantization: Quantization | None = None,
    pooling: bool = False,
    drafter_layers: tuple[int, ...] = (),
    moe_tp: int | None = None,
    ep_size: int = 1,
    redundant_experts: int = 0,
    shared_experts_replicated: bool = False,
    mxfp4_layout: Mxfp4Layout | None = None,
    vision: bool = True,
    partition: tuple[int, ...] | None = None,
) -> RankWeights:
    """Bytes of weights one GPU (tensor rank 0 of pipeline stage ``pp_rank``) holds after loading.

    ``pooling``: vLLM's pooling adapter builds the model without its ``ParallelLMHead`` (replaced by
    ``StageMissingLayer``, model_executor/models/adapters.py 0.28.0 L145-152) and does not load a
    stored ``lm_head.weight``.

    ``drafter_layers``: an MTP drafter on this (the last) stage, one model layer index per drafter layer,
    each sized as that layer plus its ``eh_proj`` (unquantized ``2 x hidden -> hidden``) and three RMSNorms;
    with pipeline parallelism it loads its own embedding (:mod:`fitgate.sizing.speculative`).

    Expert and data parallelism (:mod:`fitgate.sizing.parallel`): ``moe_tp`` is the TP the experts are
    sharded over (default ``tp``; TP x DP without EP, 1 with it); ``ep_size`` > 1 gives this GPU whole
    experts, the fullest rank's ``ceil((E + redundant_experts) / ep_size)`` of each MoE layer's ``E``;
    ``shared_experts_replicated`` (sequence-parallel MoE) keeps the shared experts whole on every GPU.

    ``mxfp4_layout``: the MXFP4 MoE backend's layout of the experts (:func:`fitgate.sizing.mxfp4.mxfp4_layouts`);
    default Marlin's.

    ``vision`` False: the vision tower is not built (every image / video limit 0, or ``--language-model-only``:
    :data:`fitgate.sizing.multimodal.TOWER_SKIPPED_SINCE`).
    """
    dtype_bytes = MODEL_DTYPES[dtype]
    stages = pp_layer_ranges(arch.num_layers, pp, partition)
    layers = stages[pp_rank]
    first, last = pp_rank == 0, pp_rank == pp - 1
    kv = arch.kv_heads
    kv_factor = (max(1, kv // tp) / kv) if kv else 1 / tp
    vocab_factor = cdiv(round_up(arch.vocab_size, VOCAB_PADDING), tp) / arch.vocab_size
    mtp = moe_tp or tp
    expert_padding, _ = _expert_padding(arch, mtp, None)
    mxfp4, mxfp4_bias = expert_padding, expert_padding
    if arch.quantization and arch.quantization.method == "mxfp4":
        mxfp4, mxfp4_bias = _expert_padding(arch, mtp, mxfp4_layout or MARLIN_LAYOUT)
    ple = arch.per_layer_embedding
    ple_factor = cdiv(round_up(ple.vocab_size, VOCAB_PADDING), tp) / ple.vocab_size if ple else 1.0
    total = 0.0
    embedding = 0.0
    for e in inventory.entries:
        role = e.role
        if (
            role is Role.SKIPPED
            or (role is Role.LM_HEAD and (arch.tie_word_embeddings or pooling))
            or (role is Role.VISION and not vision)
        ):
            # A tied model's lm_head is its embedding: vLLM skips a stored lm_head.weight while loading
            # (``if self.config.tie_word_embeddings and "lm_head.weight" in name: continue``).
            continue
        if role is Role.KV_PROJ and e.layer is not None and _kv_shared(arch, e.layer):
            # Gemma 4 KV-shared layers build q_proj only; their stored k_proj / v_proj are dropped
            # (gemma4.py 0.33.0 L409-417, weights mapper L119-124).
            continue
        copies = 1
        if e.layer is None:
            every_stage = role is Role.EMBED and arch.model_type in _EMBED_ON_EVERY_STAGE
            if (role in _FIRST_STAGE_ROLES and not first and not every_stage) or (
                role in _LAST_STAGE_ROLES and not last
            ):
                continue
        else:
            copies = (e.layer in layers) + drafter_layers.count(e.layer)
            if not copies:
                continue
        if e.quantized:
            size = float(e.stored_bytes)
        elif (
            runtime_quantization is not None
            and e.linear
            and role is not Role.EMBED
            and (role is Role.EXPERT or not runtime_quantization.experts_only)
        ):
            size = float(quantized_bytes(e.numel, runtime_quantization))
        else:
            size = float(e.numel * dtype_bytes)
        if role in _VOCAB_ROLES:
            size *= vocab_factor
            embedding += size
        elif role is Role.EMBED_PER_LAYER:
            size *= ple_factor
        elif role in _TP_SPLIT_ROLES:
            size /= tp
        elif role is Role.EXPERT:
            size = size * _expert_share(arch, e.layer, mtp, ep_size, redundant_experts)
            size *= mxfp4 if e.quantized else mxfp4_bias
        elif role is Role.KV_PROJ:
            size *= _layer_kv_factor(arch, e.layer, tp, kv_factor)
        total += size * copies
    # One copy of the token embedding on this rank, for the stages that build another one.
    embed_copy = sum(e.numel for e in inventory.entries if e.role is Role.EMBED) * dtype_bytes * vocab_factor
    # The last stage builds its own lm_head from the tied embedding (Gemma 4: that stage's own embedding is it).
    tied_head = arch.tie_word_embeddings and not pooling and arch.model_type not in _EMBED_ON_EVERY_STAGE
    # An MTP drafter has no embedding to share on the last stage (llm_base_proposer.py 0.33.0 L1424, L1505-1509).
    copies_of_embed = (tied_head + bool(drafter_layers)) if pp > 1 and last and not first else 0
    total += copies_of_embed * embed_copy
    embedding += copies_of_embed * embed_copy
    if drafter_layers:
        hidden = arch.hidden_size
        total += len(drafter_layers) * (2 * hidden * hidden + 3 * hidden) * dtype_bytes
    rotary = arch.rope_cache_positions * arch.rotary_dim * dtype_bytes
    absorbed = 0
    for i in (*layers, *drafter_layers):
        m = arch.layers[i].mixer
        if isinstance(m, MLA):
            # MLA backends keep W_UK / W_UV copies of kv_b_proj, dequantized, next to it.
            absorbed += m.kv_lora_rank * (m.num_heads // tp) * (m.qk_nope_head_dim + m.v_head_dim) * dtype_bytes
    if shared_experts_replicated and tp > 1:
        total += (1 - 1 / tp) * _shared_expert_bytes(arch, layers, dtype_bytes, runtime_quantization)
    tensors = int(total)
    return RankWeights(tensors + rotary + absorbed, tensors, rotary, absorbed, int(embedding))


def _expert_share(arch: ModelArchitecture, layer: int | None, moe_tp: int, ep_size: int, redundant: int) -> float:
    """The part of a layer's stored experts one GPU holds.

    Without EP: ``1 / moe_tp`` of every expert. With EP: whole experts, ``ceil((E + redundant) / ep)``
    of the layer's ``E`` on the fullest rank (``determine_expert_map``, expert_map_manager.py 0.33.0
    L71-74; redundant experts are copies of stored ones, fused_moe/layer.py L76-89).
    """
    if ep_size <= 1:
        return 1 / moe_tp
    ffn = arch.layers[layer].ffn if layer is not None and layer < arch.num_layers else None
    moe = ffn if isinstance(ffn, MoE) else next((x.ffn for x in arch.layers if isinstance(x.ffn, MoE)), None)
    if moe is None or not moe.num_experts:
        return 1 / ep_size
    return cdiv(moe.num_experts + redundant, ep_size) / moe.num_experts


def _shared_expert_bytes(
    arch: ModelArchitecture, layers: range, dtype_bytes: int, runtime_quantization: Quantization | None
) -> float:
    """Shared-expert bytes of these layers, from the architecture (gate, up and down projections).

    Estimated: the inventory does not tell shared experts from other column / row linears.
    """
    numel = 0
    for i in layers:
        ffn = arch.layers[i].ffn
        if isinstance(ffn, MoE) and ffn.shared_intermediate_size:
            numel += (3 if ffn.gated else 2) * arch.hidden_size * ffn.shared_intermediate_size
    q = runtime_quantization or arch.quantization
    if q is not None and not q.experts_only:
        return float(quantized_bytes(numel, q))
    return float(numel * dtype_bytes)
