"""What fitgate knows about a model: its layers, token mixers, feed-forward blocks and storage.

These frozen types sit at the bottom of the sizing core: the config parser
(:mod:`fitgate.sizing.architecture`) builds them, and the weight, KV-cache and profiling arithmetic
reads them. They hold no arithmetic beyond a few derived properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

#: The first release whose derived length is a Sentence Transformers config's ``max_seq_length`` (config.py 0.6.4
#: L1959-1960; 0.6.3 reads no such file).
ST_MAX_SEQ_LENGTH_SINCE = (0, 6, 4)
#: The first release whose default ``max_model_len`` for a LongRoPE model (Phi-3 / 3.5 / 4-mini) is its
#: ``original_max_position_embeddings``, not the 128k it accepts (vllm#27431; config/model.py 0.11.1 L2112-2120,
#: 0.12.0 L2231-2241, 0.34.0 L2687-2695; 0.11.0 L1870 takes the derived length). hunt194 F1: read from 0.33 only, a
#: bare ``vllm serve microsoft/Phi-3.5-mini-instruct`` on an L4 at 0.12-0.32 was sized at 131,072 tokens and denied.
LONGROPE_DEFAULT_SINCE = (0, 11, 1)

# --------------------------------------------------------------------------------------------
# Token mixers


@dataclass(frozen=True)
class Attention:
    """Softmax attention (MHA when kv heads == heads, GQA when fewer, MQA when one).

    ``sliding_window`` limits attention to the last N tokens; ``chunk_size`` is Llama 4's chunked
    local attention. At most one of them is set.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    gated_q: bool = False  # Qwen3-Next: q_proj also produces an output gate (2x width)
    sinks: bool = False  # gpt-oss: one learned sink logit per head
    k_eq_v: bool = False  # Gemma 4 global layers: one projection serves K and V (the cache still holds both)
    kv_shared: bool = False  # Gemma 3n/4: reads an earlier layer's KV cache and has none of its own
    #: MiniMax M3 block-sparse layers: the lightning indexer's head size (0: none). The layer also
    #: caches one bf16 index key of this size per token, one head, not TP-sharded
    #: (vllm/models/minimax_m3/common/indexer.py 0.33.0 L114-153).
    index_head_dim: int = 0
    #: Command R+ (``use_qk_norm``): q_norm / k_norm weights of shape (heads, head_dim) and
    #: (kv_heads, head_dim), sharded with the heads (vllm/model_executor/models/commandr.py 0.33.0 L257-263).
    sharded_qk_norms: bool = False


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention: one compressed latent (kv_lora_rank + rope dims) per token."""

    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    #: DeepSeek V3.2 / GLM-5 sparse attention: the lightning indexer's head size (0: none). An
    #: indexed layer caches one ``index_head_dim + index_head_dim // 128 * 4``-byte key per token
    #: (fp8 values plus one fp32 scale per 128), vLLM ``DeepseekV32IndexerCache``.
    index_head_dim: int = 0
    #: Kimi K3 (``mla_use_output_gate``): a column-parallel ``hidden -> heads x v_head_dim`` output
    #: gate, fused as shard 2 of ``fused_qkv_a_g_proj`` (vllm/models/kimi_k3/nvidia/mla.py 0.33.0
    #: L217-238, model_executor/layers/linear.py L1562-1601). Weights only; the cache is unchanged.
    output_gate: bool = False
    #: Kimi K3's MLA is NoPE-only (``use_rope`` False, mla.py L145, L164-196): no rotary cos/sin cache,
    #: though the cached latent still holds ``qk_rope_head_dim`` values (``head_size`` L160).
    rope: bool = True


@dataclass(frozen=True)
class CompressedSparseMLA:
    """DeepSeek V4 attention (vllm/models/deepseek_v4/attention.py 0.33.0, ``DeepseekV4Attention``).

    One latent of ``head_dim`` per token, shared by all heads. Every layer keeps the last
    ``sliding_window`` tokens in a sliding-window cache; ``compress_ratio`` 4 or 128 adds a cache of
    one compressed entry per that many tokens (plus, at 4, the lightning indexer's own compressed key
    cache); 1 is sliding window only. ``hc_mult`` is the hyper-connection width (weights only).
    """

    num_heads: int
    q_lora_rank: int
    head_dim: int
    qk_rope_head_dim: int
    o_lora_rank: int
    o_groups: int
    compress_ratio: int
    sliding_window: int
    index_n_heads: int
    index_head_dim: int
    hc_mult: int


@dataclass(frozen=True)
class Mamba:
    """A Mamba (v1) or Mamba2 state-space mixer; its cache is a fixed-size state per request."""

    version: int
    d_inner: int  # intermediate width (expand * hidden, or heads * head_dim for Mamba2)
    d_state: int
    d_conv: int
    n_groups: int = 1
    num_heads: int = 0  # Mamba2 only
    head_dim: int = 0  # Mamba2 only
    dt_rank: int = 0  # Mamba1 only


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet linear attention (Qwen3-Next) or Kimi Delta Attention: conv plus recurrent state.

    ``kda``: Kimi K3's KDA (vllm/models/kimi_k3/nvidia/kda.py 0.33.0 ``KimiK3DeltaAttention``), whose
    state has the gated-delta-net shapes with ``num_k_heads == num_v_heads`` and one head size
    (mamba_utils.py L296-319) but other projections (see weights.py). ``recurrent_dtype_bytes``: the
    recurrent state's element size when it is not the model dtype (KDA: fp32 by default,
    ``kda_state_dtype`` L133-149); 0 means the model dtype.
    """

    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int
    kda: bool = False
    recurrent_dtype_bytes: int = 0


@dataclass(frozen=True)
class ShortConv:
    """LFM2's gated short convolution: its cache is the last ``kernel - 1`` inputs of width ``dim``."""

    dim: int
    kernel: int


Mixer = Attention | MLA | CompressedSparseMLA | Mamba | LinearAttention | ShortConv

# --------------------------------------------------------------------------------------------
# Feed-forward blocks


@dataclass(frozen=True)
class DenseMLP:
    """A dense MLP; ``gated`` MLPs (SwiGLU/GeGLU) have gate and up projections."""

    intermediate_size: int
    gated: bool = True


@dataclass(frozen=True)
class MoE:
    """A mixture-of-experts block. All experts are resident in GPU memory."""

    num_experts: int
    top_k: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0
    gated: bool = True
    #: Latent MoE (Nemotron 3 Super/Ultra ``moe_latent_size``): experts work in this width, with one
    #: hidden -> latent and one latent -> hidden projection shared by all experts (0: hidden size).
    latent_size: int = 0
    #: Kimi K3 ``latent_moe_use_norm``: an RMSNorm of ``latent_size`` after the routed experts.
    latent_norm: bool = False
    #: Kimi K3 pads ``moe_intermediate_size`` under TP without expert parallelism so each rank holds
    #: at least this many columns (vllm/models/kimi_k3/nvidia/model.py 0.33.0 L418-427); 0: no padding.
    min_intermediate_per_partition: int = 0


FeedForward = DenseMLP | MoE


@dataclass(frozen=True)
class Layer:
    """One decoder layer: an optional token mixer and an optional feed-forward block."""

    mixer: Mixer | None
    ffn: FeedForward | None


@dataclass(frozen=True)
class Quantization:
    """What ``quantization_config`` says about how the checkpoint's weights are stored.

    Attributes:
        method: vLLM's name for the method (``fp8``, ``compressed-tensors``, ``awq``, ``gptq``,
            ``mxfp4``, ``nvfp4``/``modelopt_fp4``, ``bitsandbytes``...).
        weight_bits: Bits per stored weight element of quantized linear layers.
        group_size: Elements per scale (0 = per channel / per tensor).
        scale_bytes: Bytes of one scale (plus zero point where stored).
        experts_only: Only expert weights are quantized (gpt-oss MXFP4).
        experts: Expert weights stored another way than the other linear layers (DeepSeek V4: fp8
            linear layers, fp4 experts); None when the experts use this format too.
    """

    method: str
    weight_bits: float
    group_size: int = 0
    scale_bytes: float = 0.0
    experts_only: bool = False
    experts: Quantization | None = None
    #: Module patterns the checkpoint leaves unquantized (``ignore``, ``exclude_modules``, ``modules_to_not_convert``,
    #: ``ignored_layers``, ``exclude``: globs, and ``re:`` patterns of only ``.*`` wildcards). Read by the config-only
    #: estimate (inventory_estimate.py); a checkpoint's own tensors are exact without them.
    excluded: tuple[str, ...] = ()
    #: The ``--kv-cache-dtype`` vLLM's ``auto`` becomes for this checkpoint (ModelOpt's ``kv_cache_quant_algo``,
    #: :func:`fitgate.sizing.quantization.modelopt_kv_cache_dtype`); None: ``auto`` is the model's dtype.
    kv_cache_dtype: str | None = None
    #: ``weight_block_size`` of a block-quantized fp8 checkpoint ([block_n, block_k]); None: not block-quantized.
    block_shape: tuple[int, int] | None = None


@dataclass(frozen=True)
class TransformersBackend:
    """How vLLM's Transformers modeling backend serves the model (vllm/model_executor/models/transformers/).

    The backend builds the Hugging Face model and swaps in vLLM's attention, linears and experts; its KV specs are
    those of a native model (base.py 0.34.0 L609-708), but it shards only what the config class's
    ``base_model_tp_plan`` names and replicates the rest (L491-505, L566-572), and splits pipeline stages by
    ``base_model_pp_plan`` or a guess that may fail (L386-440).

    Attributes:
        since: The first vLLM release fitgate read that serves the architecture through the backend (an earlier
            one serves it natively or not at all: not sized).
        tp_plan: The config class has a ``base_model_tp_plan`` (a remote-code class: unknown, False).
        pp_plan: The config class has a ``base_model_pp_plan``.
        fallback: ``architectures[0]`` is not in vLLM's registry; vLLM falls back to the backend
            (registry.py 0.34.0 L1466-1495).
    """

    since: tuple[int, int, int]
    tp_plan: bool
    pp_plan: bool
    fallback: bool = False


@dataclass(frozen=True)
class VisionEncoder:
    """Size of a multimodal model's vision tower, for weights and the encoder's profiling pass."""

    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_params: int


@dataclass(frozen=True)
class PerLayerEmbedding:
    """Gemma 4 E2B/E4B per-layer embeddings (``hidden_size_per_layer_input`` > 0).

    vllm/model_executor/models/gemma4.py (0.33.0) builds one extra vocab-parallel table of
    ``vocab_size x (hidden_size x num_layers)`` (L1022-1028), a column-parallel ``hidden ->
    hidden_size x num_layers`` projection with its norm (L1039-1052), and in every decoder layer a
    replicated gate ``hidden -> hidden_size``, a replicated projection back and a norm (L678-703).
    """

    hidden_size: int  # hidden_size_per_layer_input
    vocab_size: int  # vocab_size_per_layer_input


@dataclass(frozen=True)
class ModelArchitecture:
    """A decoder-only language model, as vLLM will build it."""

    architecture: str
    model_type: str
    dtype: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    layers: tuple[Layer, ...]
    max_position_embeddings: int
    rotary_dim: int
    rope_cache_positions: int
    # vLLM's derived max_model_len (architecture.vllm_max_model_len, 0.33+): the limit, the default
    # without --max-model-len (LongRoPE: the original context) and the config key it came from; 0: none found
    max_len_limit: int = 0
    max_len_default: int = 0
    max_len_key: str = ""
    quantization: Quantization | None = None
    vision: VisionEncoder | None = None
    mtp_layers: int = 0
    max_capture_size_override: int | None = None
    norm_has_bias: bool = False
    attention_bias: bool = False
    per_layer_embedding: PerLayerEmbedding | None = None
    #: Kimi K3 attention residuals (``attn_res_block_size``): two RMSNorms and two ``hidden -> 1``
    #: projections per layer, one norm and one projection after the last (model.py 0.33.0 L796-821,
    #: L1003-1015). Weights only.
    attn_res: bool = False
    #: config.json's dtype for the Mamba / gated-delta-net recurrent (SSM) state: Qwen3.5's ``mamba_ssm_dtype``,
    #: NemotronH's ``mamba_ssm_cache_dtype`` (vLLM applies it by architecture: resolve.mamba_ssm_dtype_bytes)
    mamba_ssm_dtype: str | None = None
    #: vLLM's default runner serves the checkpoint as a pooling model: it ships a Sentence Transformers pooling
    #: module (modules.json; checkpoints.facts.st_pooling), so ``--runner auto`` is ``pooling``.
    pooling_by_default: bool = False
    #: The architecture is an embedding model of vLLM's registry (``LlamaModel``, ``MistralModel``: families.llama
    #: EMBEDDING_ARCHITECTURES), which every release serves pooling under ``--runner auto``.
    pooling_architecture: bool = False
    #: ``max_seq_length`` of its Sentence Transformers config: vLLM's derived length from 0.6.4 (checkpoints.facts.
    #: st_max_seq_length), the default and the longest ``--max-model-len`` it starts with.
    st_max_seq_length: int | None = None
    #: Served through vLLM's Transformers modeling backend (families/transformers_backend.py); None: a native class.
    transformers_backend: TransformersBackend | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def num_layers(self) -> int:
        """Number of decoder layers."""
        return len(self.layers)

    @property
    def derived_max_model_len(self) -> int:
        """The longest context vLLM 0.33+ accepts for this model (``_get_and_verify_max_len``)."""
        return self.st_max_seq_length or self.max_len_limit or self.legacy_max_model_len

    @property
    def legacy_max_model_len(self) -> int:
        """The longest context vLLM accepted before 0.33.

        YaRN is ``original_max_position_embeddings x factor``, linear / dynamic
        scale max_position_embeddings, Llama 3 / LongRoPE do not, Gemma 3 skips its factor (vllm/config.py
        0.8.5 L3051-3072, vllm/config/__init__.py 0.10.1 L2903-2924). Releases between 0.10.1 and 0.33.0
        were not re-read; :meth:`max_model_len_limit` takes the larger rule there.
        """
        if "gemma3" in self.model_type:
            return self.max_position_embeddings
        return max(self.max_position_embeddings, self.rope_cache_positions)

    def max_model_len_limit(self, version: tuple[int, int, int]) -> int:
        """The longest ``--max-model-len`` vLLM ``version`` starts with (the larger rule before 0.33: never deny)."""
        if self.st_max_seq_length and version >= ST_MAX_SEQ_LENGTH_SINCE:
            return self.st_max_seq_length
        if version >= (0, 33, 0):
            return self.derived_max_model_len
        return max(self.legacy_max_model_len, self.derived_max_model_len)

    def default_max_model_len(self, version: tuple[int, int, int]) -> int:
        """``max_model_len`` when none is given (LongRoPE from 0.11.1: ``original_max_position_embeddings``)."""
        if self.st_max_seq_length and version >= ST_MAX_SEQ_LENGTH_SINCE:
            return self.st_max_seq_length
        # only LongRoPE's default is below the derived length (hunt196: a YaRN config's 0.33 default is not the
        # original x factor that 0.11-0.29 default to; the larger rule stands there)
        if (
            version >= LONGROPE_DEFAULT_SINCE
            and self.max_len_default
            and self.max_len_default < self.derived_max_model_len
        ):
            return self.max_len_default
        return self.max_model_len_limit(version)

    # The traits below scan every layer; a plan asks them many times (and suggestions re-plan the same
    # model dozens of times), so each is computed once per architecture: the object is frozen and its
    # layers a tuple, so the answer never changes (issue 23).

    @cached_property
    def is_moe(self) -> bool:
        """Whether any layer is a mixture of experts."""
        return any(isinstance(layer.ffn, MoE) for layer in self.layers)

    @cached_property
    def first_moe(self) -> MoE | None:
        """The first mixture-of-experts block, if any."""
        return next((layer.ffn for layer in self.layers if isinstance(layer.ffn, MoE)), None)

    @cached_property
    def uses_mla(self) -> bool:
        """Whether any layer is multi-head latent attention (vLLM's ``model_config.use_mla``)."""
        return any(isinstance(layer.mixer, MLA) for layer in self.layers)

    @cached_property
    def mla_indexed(self) -> bool:
        """Whether an MLA layer has an indexer (sparse MLA: DeepSeek V3.2, GLM-5)."""
        return any(isinstance(layer.mixer, MLA) and layer.mixer.index_head_dim for layer in self.layers)

    @cached_property
    def compressed_sparse_mla(self) -> bool:
        """Whether any layer is DeepSeek V4's compressed sparse MLA."""
        return any(isinstance(layer.mixer, CompressedSparseMLA) for layer in self.layers)

    @cached_property
    def attention_indexed(self) -> bool:
        """Whether a softmax-attention layer has an indexer cache (MiniMax M3's block-sparse attention)."""
        return any(isinstance(layer.mixer, Attention) and layer.mixer.index_head_dim for layer in self.layers)

    @cached_property
    def windowed_attention(self) -> bool:
        """Whether a softmax-attention layer is sliding-window or chunked-local."""
        return any(
            isinstance(layer.mixer, Attention) and (layer.mixer.sliding_window or layer.mixer.chunk_size)
            for layer in self.layers
        )

    @cached_property
    def has_state(self) -> bool:
        """Whether a layer keeps a recurrent state (Mamba, linear attention, short convolution)."""
        return any(isinstance(layer.mixer, Mamba | LinearAttention | ShortConv) for layer in self.layers)

    @cached_property
    def attention_heads(self) -> int:
        """Query heads of the first attention-like layer (for TP divisibility checks)."""
        for layer in self.layers:
            if isinstance(layer.mixer, Attention | MLA | CompressedSparseMLA):
                return layer.mixer.num_heads
        return 0

    @cached_property
    def kv_heads(self) -> int:
        """KV heads of the first softmax-attention layer (0 for MLA / attention-free models)."""
        for layer in self.layers:
            if isinstance(layer.mixer, Attention):
                return layer.mixer.num_kv_heads
        return 0
