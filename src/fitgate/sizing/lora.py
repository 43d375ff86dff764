"""LoRA adapter slots: the GPU memory ``--enable-lora`` reserves, module by module, from vLLM 0.33's source.

With ``--enable-lora`` vLLM wraps every linear layer (and, for models that list them in
``embedding_modules``, the token embedding and the LM head) in a LoRA layer that owns stacked A and B
buffers for ``max_loras`` adapters of ``max_lora_rank`` (lora/model_manager.py 0.33.0 L476-623:
``_create_lora_modules`` over ``named_modules``; ``lora_slots`` = ``max_loras``, L347-349;
lora/utils.py L245-259: every ``LinearBase`` / ``MoERunner`` suffix plus ``embedding_modules``). The
buffers are allocated in ``load_lora_model`` inside the ``DeviceMemoryProfiler`` of ``load_model``
(v1/worker/gpu_model_runner.py 0.33.0 L4989-5008), so "Model loading took" includes them and they
come out of the KV budget like weights. Per module, with ``L`` = max_loras, ``r`` = max_lora_rank,
``b`` = lora dtype bytes (``--lora-dtype auto``: the model dtype, config/lora.py L157-160):

* column-parallel (``qkv_proj`` with 3 slices, ``gate_up_proj`` with 2, a plain column layer 1):
  A ``L x r x in`` per slice, B ``L x out_slice/TP x r`` per slice (lora/layers/column_parallel_linear.py
  L207-245, L455-474; base_linear.py L112-169). ``--fully-sharded-loras``: A uses ``r/TP``.
* row-parallel (``o_proj``, ``down_proj``): A ``L x r x in/TP``, B ``L x out x r``; fully sharded:
  B ``out/TP`` (base_linear.py L127-133, row_parallel_linear.py L22-30).
* replicated (an MoE router ``gate``, a ``GateLinear``): A ``L x r x in``, B ``L x out x r``.
* fused MoE experts (lora/layers/fused_moe.py L172-230): per local expert, w1 and w3 A
  ``L x E x r x hidden`` (one when the checkpoint stores w13 fused, L486-518) and B
  ``L x E x I/TP x r``, w2 A ``L x E x r x I/TP`` and B ``L x E x hidden x r``.
* token embedding (vocab_parallel_embedding.py L25-49): A ``L x vocab x r``, B ``L x hidden x r``,
  not sharded; LM head (logits_processor.py L84-111): A ``L x r x hidden``, B ``L x vocab x r``, not
  sharded (``vocab_size`` is the full vocabulary).

Dummy adapters for the profiling run and CUDA-graph capture are built on the CPU
(model_manager.py L648-700 ``create_dummy_lora`` with device "cpu") and copied into these slots, so
they add no GPU memory. Each LoRA linear layer's forward allocates one fp32 shrink buffer of
``slices x tokens x r`` (lora/punica_wrapper/punica_gpu.py L247-252): the profile pass's transient
peak grows by the largest such buffer. CUDA graphs are captured once per LoRA case: with the
default ``cudagraph_specialize_lora`` (config/compilation.py L663) the cases are ``[0, max_loras+1]``
(v1/cudagraph_dispatcher.py L110-128, lora/utils.py L55-70; the V2 runner's
v1/worker/gpu/lora_utils.py L21-35 alike), so a LoRA server captures twice as many graphs.

What the source leaves to the model class (``packed_modules_mapping``, which modules exist) is taken
from the layer types fitgate parses; mixers other than softmax attention (MLA, Mamba, linear
attention) get no slots here and the plan says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.errors import SizingError
from fitgate.sizing.model import Attention, DenseMLP, ModelArchitecture, MoE
from fitgate.sizing.serving import LoraSlots

#: ``MaxLoRARanks`` (config/lora.py 0.33.0 L27): the ranks vLLM accepts.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: ``LoRADType`` (config/lora.py 0.33.0 L26).
LORA_DTYPES = {"float16": 2, "bfloat16": 2}
#: LogitsProcessorWithLoRA refuses larger vocabularies (logits_processor.py 0.33.0 L89-91).
LORA_MAX_VOCAB = 258048
#: Model classes whose ``embedding_modules`` name the embedding and LM head, so both get LoRA slots
#: (read from vllm/model_executor/models/*.py 0.33.0: e.g. llama.py L479-482, qwen3.py L288,
#: qwen3_moe.py L561, mixtral.py L388, granite.py L420; Mistral overrides it with {} in mistral.py).
#: Cohere lists only embed_tokens (commandr.py L424).
EMBEDDING_LORA = frozenset(
    {
        "ApertusForCausalLM",
        "ExaoneForCausalLM",
        "Exaone4ForCausalLM",
        "ExaoneMoeForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteForCausalLM",
        "GraniteMoeForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "GraniteMoeSharedForCausalLM",
        "HyperCLOVAXForCausalLM",
        "JambaForCausalLM",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "LlamaForCausalLM",
        "MiniCPMForCausalLM",
        "MixtralForCausalLM",
        "NemotronForCausalLM",
        "NemotronHForCausalLM",
        "DeciLMForCausalLM",
        "PhiMoEForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3MoeForCausalLM",
        "SolarForCausalLM",
    }
)
EMBED_ONLY_LORA = frozenset({"CohereForCausalLM"})
#: Classes of :data:`EMBEDDING_LORA` that list their embedding and LM head only from a release (hunt138 F1: Qwen3's
#: and Qwen3-MoE's ``embedding_modules`` first appear in models/qwen3.py 0.16.0 L274-277 and qwen3_moe.py 0.16.0
#: L692-695; the 0.8.5-0.15.1 classes have none, so vLLM built no such slots there).
EMBEDDING_LORA_SINCE = {"Qwen3ForCausalLM": (0, 16, 0), "Qwen3MoeForCausalLM": (0, 16, 0)}
#: The first release that captures each CUDA graph without and with adapters (``cudagraph_specialize_lora``, default
#: True: config/compilation.py 0.11.1 L416, v1/worker/gpu_model_runner.py 0.11.1 L4184-4195); 0.11.0's V1 and the V0
#: runner capture each size once, adapters active (gpu_model_runner.py 0.11.0 L3501-3523; hunt138 F2).
LORA_GRAPH_CASES_SINCE = (0, 11, 1)
#: Models whose checkpoint stores w1/w3 fused, so FusedMoE3DWithLoRA keeps one w13 A buffer
#: (``is_3d_moe_weight``: gpt_oss.py 0.33.0 L1372, qwen3_5.py L707, qwen3_vl_moe.py L233).
MOE_3D = frozenset({"gpt_oss", "qwen3_5_moe", "qwen3_vl_moe"})
#: The module suffixes fitgate sizes, and the adapter-visible names that select them
#: (``--lora-target-modules``, lora/utils.py 0.33.0 L298-340: a suffix, or a packed child).
TARGETS = {
    "qkv_proj": ("qkv_proj", "q_proj", "k_proj", "v_proj"),
    "o_proj": ("o_proj",),
    "gate_up_proj": ("gate_up_proj", "gate_proj", "up_proj"),
    "up_proj": ("up_proj",),
    "down_proj": ("down_proj",),
    "experts": ("experts",),
    "gate": ("gate",),
    "embed_tokens": ("embed_tokens",),
    "lm_head": ("lm_head",),
}


@dataclass(frozen=True)
class LoraBytes:
    """LoRA slot bytes on one GPU, by module kind, plus what the profile pass adds."""

    attention_bytes: int
    mlp_bytes: int
    experts_bytes: int
    embedding_bytes: int
    lm_head_bytes: int
    shrink_buffer_bytes: int  # the largest fp32 shrink buffer of one layer's forward (transient)
    uncounted: tuple[str, ...]  # mixers that get slots fitgate does not size

    @property
    def total_bytes(self) -> int:
        """All slot buffers on this GPU."""
        return self.attention_bytes + self.mlp_bytes + self.experts_bytes + self.embedding_bytes + self.lm_head_bytes


#: The first release with LoRA on fused-MoE experts (vllm-project/vllm#21229; 0.11.1 adds ``lora/layers/fused_moe.py``).
#: 0.11.0 has none: ``lora/models.py`` L59-67 warns "For MoE models, vLLM currently does not support fused MoE LoRA
#: inference" and builds no expert slots (hunt31 F1: Qwen3-30B-A3B with 4 rank-64 adapters on one H100 was sized with
#: 24.75 GiB of expert slots vLLM 0.11.0 never allocates, and denied).
EXPERT_LORA_SINCE = (0, 11, 1)


def resolve_lora(
    *,
    enable: bool,
    max_loras: int | None,
    max_lora_rank: int | None,
    max_cpu_loras: int | None,
    fully_sharded: bool,
    lora_dtype: str,
    model_dtype_bytes: int,
    tp: int,
    version: tuple[int, int, int] = EXPERT_LORA_SINCE,
) -> LoraSlots | None:
    """``LoRAConfig`` after its defaults and checks (config/lora.py 0.33.0 L34-46, L120-160)."""
    if not enable:
        return None  # without --enable-lora vLLM builds no LoRAConfig and ignores --max-loras & co.
    loras = 1 if max_loras is None else max_loras
    if isinstance(loras, bool) or not isinstance(loras, int) or not 1 <= loras <= 1024:
        raise SizingError("max_loras", loras, "an integer from 1 to 1024")
    rank = 16 if max_lora_rank is None else max_lora_rank
    if rank not in LORA_RANKS:
        raise SizingError("max_lora_rank", rank, "one of " + ", ".join(map(str, LORA_RANKS)) + " (vLLM's ranks)")
    cpu = loras if max_cpu_loras is None else max_cpu_loras
    if isinstance(cpu, bool) or not isinstance(cpu, int) or not loras <= cpu <= 65536:
        raise SizingError("max_cpu_loras", cpu, f"an integer from max_loras ({loras}) to 65536")
    if lora_dtype == "auto":
        dtype_bytes = model_dtype_bytes
    elif lora_dtype in LORA_DTYPES:
        dtype_bytes = LORA_DTYPES[lora_dtype]
    else:
        raise SizingError("lora_dtype", lora_dtype, "auto, float16 or bfloat16")
    if fully_sharded and rank % tp:
        # divide(max_lora_rank, tp_size) asserts divisibility (column_parallel_linear.py L218-222)
        raise SizingError("max_lora_rank", rank, f"a multiple of tensor_parallel_size {tp} with fully_sharded_loras")
    return LoraSlots(
        loras, rank, cpu, fully_sharded, dtype_bytes, experts=version >= EXPERT_LORA_SINCE, release=version
    )


def _selected(targets: tuple[str, ...] | None, module: str) -> bool:
    return targets is None or any(name in targets for name in TARGETS[module])


def lora_bytes(
    arch: ModelArchitecture,
    slots: LoraSlots,
    *,
    layers: range,
    first_stage: bool,
    last_stage: bool,
    tp: int,
    max_num_batched_tokens: int,
    targets: tuple[str, ...] | None = None,
) -> LoraBytes:
    """The slot buffers one GPU of this pipeline stage allocates, module by module (see the module doc)."""
    n, r, b = slots.max_loras, slots.max_lora_rank, slots.dtype_bytes
    r_col = r // tp if slots.fully_sharded else r  # column layers' A rank (fully sharded: r / TP)
    hidden = arch.hidden_size

    def column(in_size: int, out_slices: tuple[int, ...]) -> int:
        return sum(n * r_col * in_size * b + n * out * r * b for out in out_slices)

    def row(in_per_rank: int, out: int) -> int:
        out_b = out // tp if slots.fully_sharded else out
        return n * r * in_per_rank * b + n * out_b * r * b

    attention = mlp = experts = 0
    widest_slices = 0  # slices x rank of the widest LoRA layer: its fp32 shrink buffer
    uncounted: set[str] = set()
    for i in layers:
        layer = arch.layers[i]
        mixer = layer.mixer
        if isinstance(mixer, Attention):
            kv = max(1, mixer.num_kv_heads // tp)
            q_out = mixer.num_heads // tp * mixer.head_dim * (2 if mixer.gated_q else 1)
            if _selected(targets, "qkv_proj"):
                # MergedQKVParallelLinearWithLoRA: q, k, v slices (k == v for Gemma 4's shared K=V
                # projection is still one column layer of two slices; sized as three here)
                attention += column(hidden, (q_out, kv * mixer.head_dim, kv * mixer.v_head_dim))
                widest_slices = max(widest_slices, 3)
            if _selected(targets, "o_proj"):
                attention += row(mixer.num_heads // tp * mixer.v_head_dim, hidden)
                widest_slices = max(widest_slices, 1)
        elif mixer is not None:
            uncounted.add(type(mixer).__name__)
        ffn = layer.ffn
        dense = ffn.intermediate_size if isinstance(ffn, DenseMLP) else 0
        gated = ffn.gated if isinstance(ffn, DenseMLP | MoE) else True
        if isinstance(ffn, MoE):
            dense = ffn.shared_intermediate_size
            local = ffn.expert_intermediate_size // tp
            e = ffn.num_experts
            if slots.experts and _selected(targets, "experts"):
                w13 = 2 if ffn.gated else 1
                a13 = 1 if (arch.model_type in MOE_3D or not ffn.gated) else 2
                experts += a13 * n * e * r_col * hidden * b  # w1 (and w3) lora_A
                experts += w13 * n * e * local * r * b  # w1 (and w3) lora_B (3D: one of 2 x I/TP)
                experts += n * e * r * local * b  # w2 lora_A
                experts += n * e * (hidden // tp if slots.fully_sharded else hidden) * r * b  # w2 lora_B
            if _selected(targets, "gate"):
                mlp += n * r * hidden * b + n * e * r * b  # the router, a ReplicatedLinear
        if dense:
            if gated and _selected(targets, "gate_up_proj"):
                mlp += column(hidden, (dense // tp, dense // tp))
                widest_slices = max(widest_slices, 2)
            elif not gated and _selected(targets, "up_proj"):
                mlp += column(hidden, (dense // tp,))
            if _selected(targets, "down_proj"):
                mlp += row(dense // tp, hidden)
    embedding = lm_head = 0
    listed = arch.architecture in EMBEDDING_LORA and slots.release >= EMBEDDING_LORA_SINCE.get(arch.architecture, (0,))
    lists_embedding = listed or arch.architecture in EMBED_ONLY_LORA
    if first_stage and lists_embedding and _selected(targets, "embed_tokens"):
        embedding = n * arch.vocab_size * r * b + n * hidden * r * b
    if last_stage and listed and _selected(targets, "lm_head"):
        if arch.vocab_size > LORA_MAX_VOCAB:
            raise SizingError("enable_lora", True, f"a vocabulary of at most {LORA_MAX_VOCAB} (vLLM's LoRA LM head)")
        lm_head = n * r * hidden * b + n * arch.vocab_size * r * b
    return LoraBytes(
        attention_bytes=attention,
        mlp_bytes=mlp,
        experts_bytes=experts,
        embedding_bytes=embedding,
        lm_head_bytes=lm_head,
        shrink_buffer_bytes=widest_slices * max_num_batched_tokens * r * 4,
        uncounted=tuple(sorted(uncounted)),
    )


def graph_cases(slots: LoraSlots | None) -> int:
    """How many times each CUDA graph is captured: with LoRA from 0.11.1 once without adapters and once with."""
    return 2 if slots is not None and slots.release >= LORA_GRAPH_CASES_SINCE else 1
