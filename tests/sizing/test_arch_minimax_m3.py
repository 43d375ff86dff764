"""Known-answer tests for MiniMax M3 (vLLM 0.33.0 vllm/models/minimax_m3), arithmetic in the comments."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, custom_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import SizingError, UnknownArchitectureError
from fitgate.sizing.kv_layout import layer_specs
from fitgate.sizing.kv_specs import FullAttentionSpec, MLAAttentionSpec
from fitgate.sizing.model import Attention, ModelArchitecture
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for
from fitgate.sizing.weights import Role, WeightInventory, inventory_from_architecture

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _m3() -> ModelArchitecture:
    return to_model_input(load_directory(CORPUS / "nvidia__MiniMax-M3-NVFP4")).arch


def test_minimax_m3_sparse_layers_add_a_key_only_index_cache() -> None:
    # Real config: sparse_attention_freq marks layers 3..59 (57 layers); 4 KV heads of 128, bf16.
    # Every layer: FullAttentionSpec 4 x (128 + 128) x 2 B = 2,048 B a token (nvidia/model.py L562-571).
    # Sparse layers also: indexer MLAAttentionSpec, 1 head x sparse_index_dim 128 x bf16 = 256 B
    # (common/indexer.py L145-153): 60 x 2,048 + 57 x 256 = 122,880 + 14,592 = 137,472 B a token.
    arch = _m3()
    specs = layer_specs(arch, range(arch.num_layers), 1, 2, 2, 128, accounting_for())
    index = [s for s in specs if isinstance(s, MLAAttentionSpec)]
    full = [s for s in specs if isinstance(s, FullAttentionSpec)]
    assert (len(full), len(index)) == (60, 57)
    assert sum(s.bytes_per_token for s in specs) == 60 * 2048 + 57 * 256 == 137_472
    # TP4: max(1, 4 // 4) = 1 KV head -> 512 B; the index key is one head, not sharded:
    # 60 x 512 + 57 x 256 = 30,720 + 14,592 = 45,312 B. An fp8 KV cache halves the main cache only
    # (the indexer dtype is its own, bf16 by default, nvidia/model.py L505-509): 60 x 256 + 14,592 = 29,952.
    tp4 = layer_specs(arch, range(arch.num_layers), 4, 2, 2, 128, accounting_for())
    assert sum(s.bytes_per_token for s in tp4) == 45_312
    fp8 = layer_specs(arch, range(arch.num_layers), 4, 1, 2, 128, accounting_for())
    assert sum(s.bytes_per_token for s in fp8) == 60 * 256 + 57 * 256 == 29_952


def test_minimax_m3_plans_one_group_of_128_token_blocks() -> None:
    # The sparse and indexer backends take 128-token pages only, so vLLM sets block_size 128
    # (platforms/interface.py L700-782). MLAAttentionSpec's uniform type base is FullAttentionSpec
    # (single_type_kv_cache_manager.py L2707-2710): one group of per-layer tensors whose block is
    # 128 x 45,312 = 5,799,936 B at TP4.
    m = to_model_input(load_directory(CORPUS / "nvidia__MiniMax-M3-NVFP4"))
    result = plan(m, custom_gpu(192 * GiB), ServingConfig(max_model_len=4096, tensor_parallel_size=4))
    assert result.kv.block_size == 128
    assert result.kv.num_groups == 1
    assert result.kv.page_size_bytes == 128 * 45_312 == 5_799_936
    with pytest.raises(SizingError, match="multiple of 128"):
        plan(m, custom_gpu(192 * GiB), ServingConfig(max_model_len=4096, tensor_parallel_size=4, block_size=64))


def test_minimax_m3_index_projections() -> None:
    # Sparse layer 3 with and without its index branch: MinimaxM3QKVParallelLinearWithIndexer
    # (layers/linear.py L1418-1440) adds index_q 6144 x 4 heads x 128 = 3,145,728 (sharded like K/V)
    # and index_k 6144 x 128 = 786,432 (replicated), plus index_q_norm / index_k_norm 2 x 128 = 256.
    arch = _m3()
    layers = list(arch.layers)
    mixer = layers[3].mixer
    assert isinstance(mixer, Attention) and mixer.index_head_dim == 128
    layers[3] = replace(layers[3], mixer=replace(mixer, index_head_dim=0))
    with_index = inventory_from_architecture(arch)
    without = inventory_from_architecture(replace(arch, layers=tuple(layers)))

    def numel(inv: WeightInventory, role: Role) -> int:
        return sum(e.numel for e in inv.entries if e.layer == 3 and e.role is role)

    assert numel(with_index, Role.KV_PROJ) - numel(without, Role.KV_PROJ) == 6144 * 4 * 128 == 3_145_728
    assert numel(with_index, Role.REPLICATED) - numel(without, Role.REPLICATED) == 786_432 + 256


def test_minimax_m3_original_name_stays_refused() -> None:
    # MiniMaxAI/MiniMax-M3's config names MiniMaxM3ForCausalLM: vLLM 0.33 registers only
    # MiniMaxM3SparseForCausalLM / ...ForConditionalGeneration (registry.py L169-172, L523-526) and maps
    # no other name to them.
    config = json.loads((CORPUS / "MiniMaxAI__MiniMax-M3" / "config.json").read_text())
    with pytest.raises(UnknownArchitectureError, match="MiniMaxM3ForCausalLM"):
        parse_config(config)
