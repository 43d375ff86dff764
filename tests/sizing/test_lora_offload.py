"""LoRA slots, --cpu-offload-gb, KV connectors and KV offloading: known answers from vLLM 0.33.0's source.

The rules and their file:line citations are in :mod:`fitgate.sizing.lora` and :mod:`fitgate.sizing.offload`;
each test shows its arithmetic. ``L`` = max_loras, ``r`` = max_lora_rank, bf16 (2 B) LoRA buffers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fitgate.cli import main
from fitgate.observe import parse_lines
from fitgate.observe.compare import serving_config
from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.evaluate import serving_config as spec_serving
from fitgate.operator.decision.workloads import evaluate_reading
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.schema.api import SpecError, parse_spec
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.activation import cuda_graph_bytes
from fitgate.sizing.advice import suggest
from fitgate.sizing.cudagraphs import (
    FIRST_CAPTURE_BYTES,
    PER_GRAPH_LAYER_BYTES,
    V2_PER_GRAPH_SCALE,
    capture_sizes,
    graph_counts,
)
from fitgate.sizing.errors import SizingError
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for
from fitgate.workloads.reader import read_workload
from tests.conftest import model
from tests.fitgate_operator.test_operator import H100 as H100_NODE
from tests.fitgate_operator.test_operator import L4 as L4_NODE

H100 = lookup_gpu("H100")
L4 = lookup_gpu("L4")
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # 32 layers, hidden 4096, 32 heads / 8 KV x 128, MLP 14336, vocab 128256


def _serving(**kw: Any) -> ServingConfig:
    return ServingConfig(vllm_version="0.33.0", max_model_len=8192, **kw)


# --------------------------------------------------------------------------------------------
# LoRA slots


def test_llama_8b_tp1_four_slots_of_rank_64() -> None:
    m = model(LLAMA)
    base = plan(m, H100, _serving())
    lora = plan(m, H100, _serving(enable_lora=True, max_loras=4, max_lora_rank=64))
    lb = lora.ranks[0].lora
    assert lb is not None
    # per layer, L=4, r=64, 2 B (column_parallel_linear.py L207-245, base_linear.py L112-169):
    #   qkv_proj A 3 slices x 4 x 64 x 4096 x 2 = 6,291,456; B 4 x (4096 + 1024 + 1024) x 64 x 2 = 3,145,728
    #   o_proj   A 4 x 64 x 4096 x 2 = 2,097,152;            B 4 x 4096 x 64 x 2 = 2,097,152
    assert lb.attention_bytes == 32 * (6_291_456 + 3_145_728 + 2_097_152 + 2_097_152)  # 436,207,616
    #   gate_up  A 2 x 2,097,152 = 4,194,304;                B 4 x (2 x 14336) x 64 x 2 = 14,680,064
    #   down     A 4 x 64 x 14336 x 2 = 7,340,032;           B 4 x 4096 x 64 x 2 = 2,097,152
    assert lb.mlp_bytes == 32 * (4_194_304 + 14_680_064 + 7_340_032 + 2_097_152)  # 905,969,664
    # embed_tokens (vocab_parallel_embedding.py L25-49): 4 x 128256 x 64 x 2 + 4 x 4096 x 64 x 2 = 67,764,224
    # lm_head (logits_processor.py L84-111): 4 x 64 x 4096 x 2 + 4 x 128256 x 64 x 2 = 67,764,224
    assert lb.embedding_bytes == lb.lm_head_bytes == 67_764_224
    assert lb.total_bytes == 1_477_705_728  # 1.38 GiB
    # "Model loading took" includes the slots (gpu_model_runner.py L4989-5008)
    assert lora.per_gpu.weights_bytes - base.per_gpu.weights_bytes == 1_477_705_728
    assert lora.per_gpu.lora_bytes == 1_477_705_728
    # one fp32 shrink buffer of qkv's 3 slices x 8192 tokens x 64 (punica_gpu.py L247-252) = 6,291,456
    assert lora.per_gpu.activation_bytes - base.per_gpu.activation_bytes == 3 * 8192 * 64 * 4
    assert lora.kv.num_blocks < base.kv.num_blocks
    assert any("4 adapter slot(s) of rank 64" in n for n in lora.notes)


def test_cuda_graphs_are_captured_without_and_with_adapters() -> None:
    # lora cases [0, max_loras + 1] (cudagraph_dispatcher.py L110-128): every size twice
    m = model(LLAMA)
    acc = accounting_for("0.33.0")
    sizes = capture_sizes(acc, max_num_seqs=1024, max_num_batched_tokens=8192)
    c = graph_counts(sizes, 1024)
    one = cuda_graph_bytes(m.arch, 32, acc, max_num_seqs=1024, max_num_batched_tokens=8192)
    two = cuda_graph_bytes(m.arch, 32, acc, max_num_seqs=1024, max_num_batched_tokens=8192, graph_cases=2)
    per_graph = int(PER_GRAPH_LAYER_BYTES * V2_PER_GRAPH_SCALE) * 32  # 0.33: the V2 runner's share (hunt184 F1)
    assert one == FIRST_CAPTURE_BYTES + (c.piecewise - 1 + c.full - 1) * per_graph
    assert two == FIRST_CAPTURE_BYTES + (2 * c.piecewise - 1 + 2 * c.full - 1) * per_graph
    base = plan(m, H100, _serving())
    lora = plan(m, H100, _serving(enable_lora=True))
    assert (base.per_gpu.cuda_graph_bytes, lora.per_gpu.cuda_graph_bytes) == (one, two)


def test_graphs_are_captured_once_with_adapters_before_0_11_1() -> None:
    # hunt138 F2: cudagraph_specialize_lora (config/compilation.py 0.11.1 L416) first captures each size without and
    # with adapters; 0.11.0's V1 runner captured each once, adapters active (gpu_model_runner.py 0.11.0 L3501-3523)
    m = model(LLAMA)
    for version, cases in (("0.11.0", 1), ("0.11.1", 2)):
        acc = accounting_for(version)
        lora = plan(m, H100, ServingConfig(vllm_version=version, max_model_len=8192, enable_lora=True))
        once = plan(m, H100, ServingConfig(vllm_version=version, max_model_len=8192))
        graphs = cuda_graph_bytes(
            m.arch, 32, acc, max_num_seqs=1024, max_num_batched_tokens=lora.serving.max_num_batched_tokens,
            graph_cases=cases,
        )  # fmt: skip
        assert lora.per_gpu.cuda_graph_bytes == graphs, version
        assert (lora.per_gpu.cuda_graph_bytes > once.per_gpu.cuda_graph_bytes) == (cases == 2), version


def test_qwen3_lists_its_embedding_and_lm_head_for_lora_from_0_16() -> None:
    # hunt138 F1: Qwen3ForCausalLM's embedding_modules first appear in models/qwen3.py 0.16.0 L274-277 (none in 0.8.5-
    # 0.15.1), so before 0.16 vLLM builds no embedding / LM-head slots for it. Qwen3-8B (hidden 4096, vocab 151936),
    # 8 slots of rank 64 at 2 B: embed 8 x 151936 x 64 x 2 + 8 x 4096 x 64 x 2 = 159,776,768; lm_head the same.
    m = model("Qwen/Qwen3-8B")
    lora = {"enable_lora": True, "max_loras": 8, "max_lora_rank": 64}
    old = plan(m, H100, ServingConfig(vllm_version="0.15.1", max_model_len=8192, **lora))  # type: ignore[arg-type]
    new = plan(m, H100, ServingConfig(vllm_version="0.16.0", max_model_len=8192, **lora))  # type: ignore[arg-type]
    lo, ln = old.ranks[0].lora, new.ranks[0].lora
    assert lo is not None and ln is not None
    assert (lo.embedding_bytes, lo.lm_head_bytes) == (0, 0)
    assert ln.embedding_bytes == ln.lm_head_bytes == 159_776_768
    assert ln.total_bytes - lo.total_bytes == 2 * 159_776_768


@pytest.mark.parametrize(
    ("fully_sharded", "expected"),
    [
        # TP2, per layer: qkv A 6,291,456 (r not split), B 4 x (2048 + 512 + 512) x 64 x 2 = 1,572,864;
        # o A 4 x 64 x 2048 x 2 = 1,048,576, B 2,097,152; gate_up A 4,194,304, B 4 x 2 x 7168 x 64 x 2 = 7,340,032;
        # down A 4 x 64 x 7168 x 2 = 3,670,016, B 2,097,152 -> 28,311,552 x 32 + 2 x 67,764,224 (not sharded)
        (False, 28_311_552 * 32 + 2 * 67_764_224),
        # --fully-sharded-loras: column A r/2 (qkv 3,145,728, gate_up 2,097,152), row B out/2 (o, down 1,048,576)
        # -> 20,971,520 x 32 + 135,528,448
        (True, 20_971_520 * 32 + 2 * 67_764_224),
    ],
)
def test_tensor_parallel_and_fully_sharded_slots(fully_sharded: bool, expected: int) -> None:
    p = plan(
        model(LLAMA),
        H100,
        _serving(
            tensor_parallel_size=2, enable_lora=True, max_loras=4, max_lora_rank=64, fully_sharded_loras=fully_sharded
        ),
    )
    assert p.per_gpu.lora_bytes == expected


def test_moe_experts_get_slots_per_expert() -> None:
    # Qwen3-30B-A3B: 48 layers, hidden 2048, 128 experts of 768, 32 heads / 4 KV x 128, vocab 151936; L=1, r=16
    p = plan(model("Qwen/Qwen3-30B-A3B"), H100, _serving(enable_lora=True))
    lb = p.ranks[0].lora
    assert lb is not None
    # fused_moe.py L172-230: w1,w3 A 2 x 128 x 16 x 2048 x 2 = 16,777,216; B 2 x 128 x 768 x 16 x 2 = 6,291,456;
    # w2 A 128 x 16 x 768 x 2 = 3,145,728; w2 B 128 x 2048 x 16 x 2 = 8,388,608 -> 34,603,008 a layer
    assert lb.experts_bytes == 48 * 34_603_008
    # the router (GateLinear, a ReplicatedLinear): A 16 x 2048 x 2 + B 128 x 16 x 2 = 69,632 a layer
    assert lb.mlp_bytes == 48 * 69_632
    # qkv A 3 x 16 x 2048 x 2 + B (4096 + 512 + 512) x 16 x 2; o A 16 x 4096 x 2 + B 2048 x 16 x 2 = 557,056
    assert lb.attention_bytes == 48 * 557_056
    # Qwen3MoeForCausalLM lists embed_tokens and lm_head (qwen3_moe.py L561): 151936 x 16 x 2 + 2048 x 16 x 2 each
    assert lb.embedding_bytes == lb.lm_head_bytes == 4_927_488


def test_target_modules_restrict_the_slots() -> None:
    # --lora-target-modules o_proj qkv_proj (lora/utils.py L298-340): attention only
    p = plan(
        model(LLAMA),
        H100,
        _serving(enable_lora=True, max_loras=4, max_lora_rank=64, lora_target_modules=("o_proj", "q_proj")),
    )
    lb = p.ranks[0].lora
    assert lb is not None and (lb.mlp_bytes, lb.embedding_bytes, lb.lm_head_bytes) == (0, 0, 0)
    assert lb.attention_bytes == 436_207_616  # as in the first test


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"max_lora_rank": 24}, "max_lora_rank"),  # MaxLoRARanks (config/lora.py L27)
        ({"max_loras": 4, "max_cpu_loras": 2}, "max_cpu_loras"),  # >= max_loras (L120-127)
        ({"lora_dtype": "float32"}, "lora_dtype"),  # LoRADType (L26)
        ({"max_lora_rank": 8, "fully_sharded_loras": True, "tensor_parallel_size": 16}, "max_lora_rank"),
    ],
)
def test_settings_vllm_refuses_name_the_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(SizingError) as err:
        plan(model(LLAMA), H100, _serving(enable_lora=True, **kw))
    assert err.value.field == field


def test_lora_slots_push_a_deployment_over_and_the_fixes_name_them() -> None:
    m = model(LLAMA)
    serving = ServingConfig(vllm_version="0.33.0", max_model_len=16384)
    assert plan(m, L4, serving).verdict.value == "Fits"
    lora = ServingConfig(vllm_version="0.33.0", max_model_len=16384, enable_lora=True, max_loras=8, max_lora_rank=64)
    over = plan(m, L4, lora)
    assert over.verdict.value == "DoesNotFit"
    # 8 slots of rank 64: 2 x 1,477,705,728 = 2.75 GiB of slots on a 22 GiB card
    assert over.per_gpu.lora_bytes == 2 * 1_477_705_728
    flags = {s.flags: s for s in suggest(m, L4, lora, None, over)}
    assert "--max-loras 2" in flags or "--max-loras 4" in flags
    assert any(f.startswith("--max-lora-rank") for f in flags)
    fixed = next(s for f, s in flags.items() if f.startswith("--max-loras"))
    assert fixed.verdict.value in ("Fits", "Tight")


# --------------------------------------------------------------------------------------------
# --cpu-offload-gb


def test_cpu_offload_moves_decoder_weights_to_the_host() -> None:
    m = model(LLAMA)
    base = plan(m, L4, _serving())
    off = plan(m, L4, _serving(cpu_offload_bytes=10 * GiB))
    # uva.py L74-126: parameters move until 10 GiB is reached, per GPU
    assert base.per_gpu.weights_bytes - off.per_gpu.weights_bytes == 10 * GiB
    assert off.host is not None and off.host.weights_offload_bytes == 10 * GiB
    # at most the decoder layers: an 8B model's 100 GiB request offloads its layers (not embedding, lm_head)
    most = plan(m, L4, _serving(cpu_offload_bytes=100 * GiB))
    w = most.ranks[0].weights
    assert most.per_gpu.cpu_offload_bytes == w.tensors_bytes - w.embedding_bytes
    assert any("all of them" in n for n in most.notes)


# --------------------------------------------------------------------------------------------
# KV connectors and KV offloading


def test_a_connector_without_hma_sizes_sliding_layers_as_full_attention() -> None:
    # Gemma 2 9B: 21 sliding-window (4096) layers of 42. LMCacheConnectorV1 has no SupportsHMA
    # (lmcache_connector.py L68), so vLLM turns the hybrid manager off (config/vllm.py L2257-2280)
    m = model("google/gemma-2-9b-it")

    def serving(connector: str | None) -> ServingConfig:
        return ServingConfig(
            vllm_version="0.33.0", max_model_len=8192, max_num_batched_tokens=1024, kv_connector=connector
        )

    base, lmcache, nixl = (plan(m, H100, serving(c)) for c in (None, "LMCacheConnectorV1", "NixlConnector"))
    # one 8192-token request: sliding layers hold 4095 + 1024 tokens with the hybrid manager, all 8192 without
    assert lmcache.kv.one_request_bytes > base.kv.one_request_bytes
    # 42 layers x 2 x 8 KV heads x 256 x 2 B = 344,064 B a token when every layer is full
    assert lmcache.kv.one_request_bytes == 8192 * 344_064
    assert nixl.kv.one_request_bytes == base.kv.one_request_bytes  # NIXL implements SupportsHMA
    assert any("does not support the hybrid KV cache manager" in n for n in lmcache.notes)
    # hunt57 F5: LMCacheMPConnector is the lmcache package's where installed (lmcache_mp_connector.py 0.34.0
    # L1191-1217), which keeps hybrids: sized with the manager kept, and said
    mp = plan(m, H100, serving("LMCacheMPConnector"))
    assert mp.kv.one_request_bytes == base.kv.one_request_bytes
    assert any("LMCacheMPConnector: sized with the hybrid KV cache manager kept" in n for n in mp.notes)


def test_before_0_22_any_connector_turning_the_hybrid_manager_off_is_said() -> None:
    # hunt154 F3: up to 0.21 vLLM turns the hybrid manager off for any --kv-transfer-config (config/vllm.py 0.20.0
    # L1288-1300: unless --no-disable-hybrid-kv-cache-manager), per connector only from 0.22 (L1442-1475). fitgate
    # keeps sizing NIXL with the manager (fail-open: the flag that keeps it is not read) and says so before 0.22.
    m = model("google/gemma-2-9b-it")
    for release, said in (("0.20.0", True), ("0.11.0", True), ("0.22.0", False), ("0.33.0", False)):
        serving = ServingConfig(vllm_version=release, max_model_len=8192, kv_connector="NixlConnector")
        notes = plan(m, H100, serving).notes
        assert any("turns the hybrid KV cache manager off for any --kv-transfer-config" in n for n in notes) == said
    dense = plan(model(LLAMA), H100, ServingConfig(vllm_version="0.20.0", kv_connector="NixlConnector"))
    assert not any("for any --kv-transfer-config" in n for n in dense.notes)  # no sliding or state layers


def test_kv_offloading_and_nixl_host_buffers() -> None:
    m = model(LLAMA)
    off = plan(m, H100, _serving(tensor_parallel_size=2, kv_offloading_bytes=64 * GiB))
    # --kv-offloading-size: cpu_bytes_to_use for all TP ranks together (cache.py L383-388, config/vllm.py L1166-1175)
    assert off.host is not None and off.host.kv_offload_bytes == 64 * GiB
    assert off.serving.kv_connector == "OffloadingConnector" and off.serving.kv_role == "kv_both"
    nixl = plan(m, H100, _serving(kv_connector="NixlConnector", kv_role="kv_consumer", kv_buffer_device="cpu"))
    # kv_buffer_device cpu: a host copy shaped like the KV cache (nixl/base_worker.py L1300-1317)
    assert nixl.host is not None
    assert nixl.host.kv_transfer_buffer_bytes == nixl.kv.num_blocks * nixl.ranks[0].layout.bytes_per_block
    assert any("holds the decode KV" in n for n in nixl.notes)
    unknown = plan(m, H100, _serving(kv_connector="P2pNcclConnector"))
    assert unknown.verdict.value == "Fits" and any("P2pNcclConnector" in n for n in unknown.notes)
    with pytest.raises(SizingError) as err:
        plan(m, H100, _serving(kv_connector="NixlConnector", kv_role="prefill"))
    assert err.value.field == "kv_role"


# --------------------------------------------------------------------------------------------
# Surfaces: CLI, CRD, workload reader, log reader


def test_cli_plan_takes_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            "--model",
            LLAMA,
            "--source",
            "catalog",
            "--gpu",
            "H100",
            "--max-model-len",
            "8192",
            "--enable-lora",
            "--max-loras",
            "4",
            "--max-lora-rank",
            "64",
            "--kv-transfer-config",
            '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}',
            "-o",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["per_gpu"]["lora_bytes"] == 1_477_705_728
    assert doc["serving"]["lora"]["max_lora_rank"] == 64 and doc["serving"]["kv_connector"] == "NixlConnector"
    assert "--enable-lora" in doc["vllm_args"] and "64" in doc["vllm_args"]
    bad = main(["plan", "--model", LLAMA, "--source", "catalog", "--gpu", "H100", "--kv-transfer-config", "{nope"])
    err = capsys.readouterr().err
    assert bad == 2 and "kv_transfer_config" in err and "Traceback" not in err


def test_crd_serving_fields_reach_the_sizing_core() -> None:
    spec = parse_spec(
        {
            "model": {"name": LLAMA},
            "serving": {
                "enforceEager": True,
                "blockSize": 32,
                "lora": {"maxLoras": 4, "maxLoraRank": 64},
                "cpuOffloadGiB": 2.5,
                "kvTransfer": {"connector": "NixlConnector", "role": "kv_producer"},
                "kvOffloading": {"sizeGiB": 16},
                "multimodal": {"limitPerPrompt": {"image": 2}, "processorCacheGiB": 0},
            },
        }
    )
    s = spec_serving(spec)
    assert (s.enforce_eager, s.block_size, s.enable_lora, s.max_loras, s.max_lora_rank) == (True, 32, True, 4, 64)
    assert s.cpu_offload_bytes == int(2.5 * GiB) and s.kv_offloading_bytes == 16 * GiB
    assert (s.kv_connector, s.kv_role) == ("NixlConnector", "kv_producer")
    assert s.limit_mm_per_prompt == (("image", 2),) and s.mm_processor_cache_bytes == 0
    with pytest.raises(SpecError, match="maxLoraRank"):
        parse_spec({"model": {"name": LLAMA}, "serving": {"lora": {"maxLoraRank": 24}}})


def _deployment(args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "lora", "namespace": "ns"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.33.0",
                            "args": ["--model", LLAMA, *args],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                }
            }
        },
    }


def test_workload_reader_reads_the_flags() -> None:
    r = read_workload(
        _deployment(
            [
                "--enable-lora",
                "--max-loras",
                "4",
                "--max-lora-rank=64",
                "--enforce-eager",
                "--block-size",
                "32",
                "--cpu-offload-gb",
                "4",
                "--kv-transfer-config",
                '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_buffer_device":"cuda"}',
                "--limit-mm-per-prompt",
                '{"image": 0}',
            ]
        )
    )
    assert r is not None and r.invalid is None and r.unknown is None
    assert r.serving["lora"] == {"maxLoras": 4, "maxLoraRank": 64}
    assert (r.serving["enforceEager"], r.serving["blockSize"], r.serving["cpuOffloadGiB"]) == (True, 32, 4.0)
    assert r.serving["kvTransfer"] == {"connector": "NixlConnector", "role": "kv_consumer", "bufferDevice": "cuda"}
    assert r.serving["multimodal"] == {"limitPerPrompt": {"image": 0}}
    assert not any("not in a ModelDeployment" in n for n in r.notes)
    parse_spec(r.spec())  # the CRD takes it
    broken = read_workload(_deployment(["--kv-transfer-config", "{nope"]))
    assert broken is not None and broken.invalid is not None and "--kv-transfer-config" in broken.invalid


def test_log_reader_reads_lora_from_the_non_default_args() -> None:
    lines = [
        "INFO 12-01 10:00:00 [utils.py:233] non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', "
        "'enable_lora': True, 'max_loras': 4, 'max_lora_rank': 64, 'cpu_offload_gb': 2, "
        "'kv_transfer_config': {'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'}}",
    ]
    log = parse_lines(lines)
    s, _ = serving_config(log, "0.33.0")
    assert (s.enable_lora, s.max_loras, s.max_lora_rank) == (True, 4, 64)
    assert s.cpu_offload_bytes == 2 * GiB and s.kv_connector == "NixlConnector"


def test_host_memory_over_the_pod_limit_is_a_warning_not_a_denial() -> None:
    obj = _deployment(["--max-model-len", "8192", "--cpu-offload-gb", "10", "--kv-offloading-size", "32"])
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["memory"] = "16Gi"
    reading = read_workload(obj)
    assert reading is not None and reading.memory_limit_bytes == 16 * GiB
    v = evaluate_reading(reading, model(LLAMA), parse_node(H100_NODE))
    # 10 GiB of offloaded weights + a 32 GiB KV offload buffer = 42 GiB pinned, over the 16 GiB limit
    assert v.evaluation.verdict.value == "Fits"
    assert any("host memory: 42.00 GiB" in w and "16.00 GiB memory limit" in w for w in v.evaluation.warnings)
    container["resources"]["limits"]["memory"] = "64Gi"
    roomy = read_workload(obj)
    assert roomy is not None
    assert not any(
        "memory limit" in w for w in evaluate_reading(roomy, model(LLAMA), parse_node(H100_NODE)).evaluation.warnings
    )


def test_a_model_deployment_with_lora_slots_over_the_budget_names_the_spec_field_to_change() -> None:
    spec = parse_spec(
        {
            "model": {"name": LLAMA},
            "serving": {"maxModelLen": 16384, "lora": {"maxLoras": 8, "maxLoraRank": 64}},
            "placement": {"gpuProduct": "NVIDIA-L4"},
            # 0.33's fixed 0.92 budget: under 0.34 (gmu 1.0) fewer slots are only Tight and fp8 weights come first
            "engine": {"version": "0.33.0"},
        }
    )
    ev = evaluate(spec, model(LLAMA), parse_node(L4_NODE))
    assert ev.verdict.value == "DoesNotFit"
    # 8 x 1.38 GiB / 4 = 2.75 GiB of slots (the first test's arithmetic, twice)
    assert "weights include 2.75 GiB of LoRA slots: --max-loras 8 x --max-lora-rank 64" in ev.message
    smallest = ev.message.split("smallest change that fits: ", 1)[1]
    assert "spec.serving.lora.maxLoras: " in smallest.split(" [vLLM", 1)[0]


def test_compare_predicts_the_slots_in_model_loading_took(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # a constructed two-line log (not a calibration case): the non-default args carry the LoRA flags, so
    # the predicted "Model loading took" is the weights plus 1,477,705,728 B of slots (first test)
    log = tmp_path / "lora.log"
    log.write_text(
        "(APIServer pid=1) INFO 12-01 10:00:00 [utils.py:233] non-default args: {'model_tag': "
        "'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'enable_lora': True, 'max_loras': 4, "
        "'max_lora_rank': 64}\n"
        "(EngineCore pid=2) INFO 12-01 10:00:30 [gpu_model_runner.py:5010] Model loading took 16.37 GiB memory\n"
    )
    assert main(
        ["compare", "--log", str(log), "--gpu", "H100", "--source", "catalog", "--vllm-version", "0.33.0", "-o", "json"]
    ) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    base = plan(
        model(LLAMA), H100, ServingConfig(vllm_version="0.33.0", max_model_len=8192, gpu_memory_utilization=0.9)
    )
    assert doc["predicted"]["ranks"][0]["weights_bytes"] == base.per_gpu.weights_bytes + 1_477_705_728
    assert doc["predicted"]["per_gpu"]["lora_bytes"] == 1_477_705_728


def test_expert_lora_slots_start_with_0_11_1() -> None:
    # hunt31 F1: vLLM 0.11.0 has no LoRA on fused-MoE experts (no lora/layers/fused_moe.py; lora/models.py L59-67 warns
    # "vLLM currently does not support fused MoE LoRA inference"); 0.11.1 adds it (vllm-project/vllm#21229). Qwen3-30B-A3B,
    # 4 adapters of rank 64: the expert slots are 48 layers x 128 experts x 4 x 64 x (2 x 2048 + 2 x 768 + 768 + 2048)
    # x 2 bytes = 24.75 GiB, which 0.11.0 never allocates.
    qwen = model("Qwen/Qwen3-30B-A3B")

    def lora(version: str) -> int:
        serving = ServingConfig(
            max_model_len=8192, enable_lora=True, max_loras=4, max_lora_rank=64, vllm_version=version
        )
        return plan(qwen, lookup_gpu("H100"), serving).per_gpu.lora_bytes

    experts = 48 * 128 * 4 * 64 * (2 * 2048 + 2 * 768 + 768 + 2048) * 2
    assert abs((lora("0.11.1") - lora("0.11.0")) - experts) < 0.01 * experts
