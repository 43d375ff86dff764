"""Known-answer tests for architectures vLLM 0.33 builds with a class fitgate already sizes.

Each test reads a real config of ``tests/corpus`` and checks the KV cache and the weights of one
layer against vLLM 0.33.0's model source (vllm/model_executor/models/<file>.py, cited as file and
line), the arithmetic in the comments.
"""

from __future__ import annotations

from pathlib import Path

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import FullAttentionSpec
from fitgate.sizing.model import ModelArchitecture
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import Role, inventory_from_architecture, weights_per_rank

CORPUS = Path(__file__).resolve().parent / "corpus"


def _arch(name: str) -> ModelArchitecture:
    return to_model_input(load_directory(CORPUS / name)).arch


def _layer_numel(arch: ModelArchitecture, layer: int) -> int:
    return sum(e.numel for e in inventory_from_architecture(arch).entries if e.layer == layer)


def test_internlm3_is_llama() -> None:
    # internlm/internlm3-8b-instruct: registry.py L143 maps InternLM3ForCausalLM to llama.py's LlamaForCausalLM.
    arch = _arch("internlm__internlm3-8b-instruct")
    # KV cache: 48 full-attention layers (llama.py L212) of 2 KV heads x head_dim 128 (L158-159), bf16:
    # 2 (K, V) x 2 x 128 x 2 B x 48 = 49,152 B a token.
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 16, accounting_for())
    assert len(specs) == 48 and all(isinstance(s, FullAttentionSpec) for s in specs)
    assert sum(s.bytes_per_token for s in specs) == 2 * 2 * 128 * 2 * 48 == 49_152
    # One layer: qkv_proj (L165) 4096 x (32 + 2 x 2) x 128 = 18,874,368, o_proj (L175) 32 x 128 x 4096
    # = 16,777,216, gate_up_proj + down_proj (L95, L103) 3 x 4096 x 10240 = 125,829,120, no biases
    # (qkv_bias / bias false, L268-305), input + post-attention RMSNorm (L308-309) 2 x 4096:
    # 161,488,896.
    assert _layer_numel(arch, 0) == 18_874_368 + 16_777_216 + 125_829_120 + 2 * 4096 == 161_488_896
    # Untied lm_head (tie_word_embeddings false): 48 layers + 2 x 128,512 x 4096 + final norm 4096 =
    # 8,804,241,408, the checkpoint index's 35,216,965,632 float32 bytes / 4 (SOURCE.md).
    assert not arch.tie_word_embeddings
    total = sum(e.numel for e in inventory_from_architecture(arch).entries)
    assert total == 48 * 161_488_896 + 2 * 128_512 * 4096 + 4096 == 35_216_965_632 // 4
    # Only 2 KV heads: at TP 4 each rank still holds one whole head (QKVParallelLinear replicates them,
    # max(1, 2 // 4)): 4096 x 2 (K, V) x 1 x 128 x 48 layers x 2 B = 100,663,296 B, not a quarter.
    inv = inventory_from_architecture(arch)
    kv_only = type(inv)(tuple(e for e in inv.entries if e.role is Role.KV_PROJ), "config")
    per_rank = weights_per_rank(arch, kv_only, tp=4, pp=1, pp_rank=0, dtype="bfloat16").tensors_bytes
    assert per_rank == 4096 * 2 * 1 * 128 * 48 * 2 == 100_663_296
