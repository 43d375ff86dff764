"""vLLM 0.34 (extensible KV cache), newer releases, context limits as vLLM derives them, sparse-MLA tokens.

Sources: the 0.33.0 and 0.34.0 wheels (``pip download --no-deps vllm==X``), file:line of the release named.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.cli import main
from fitgate.observe import parse_lines
from fitgate.observe.compare import serving_config as serving_config_of_log
from fitgate.operator.decision.evaluate import serving_config
from fitgate.operator.schema.api import parse_spec
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.activation import CUDA_CONTEXT_BYTES
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import SizingError
from fitgate.sizing.extensible import GRANULE_BYTES, blocks_within, measure_kv_bytes
from fitgate.sizing.units import GiB, MiB
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION, accounting_for, resolve_release
from tests.conftest import model

CORPUS = Path(__file__).parents[1] / "corpus"
REPO = Path(__file__).resolve().parents[2]
H100 = lookup_gpu("NVIDIA-H100-80GB-HBM3")
H200 = lookup_gpu("H200")


# -- 1. vLLM 0.34: the KV cache is measured after warm-up --------------------------------------


def test_measure_kv_cache_bytes_known_answer() -> None:
    # measure_kv_cache_bytes (extensible_kv_cache.py 0.34.0 L592-618) with gmu 1.0 on an 80 GiB card:
    # init_free 79.5 GiB, resident 16 GiB, transient 2 GiB -> margin max(1 GiB, 0.75 x 2 GiB) = 1.5 GiB;
    # by budget 80 - 16 = 64 GiB, by device 79.5 - 16 - 1.5 = 62 GiB; 62 - 2 = 60 GiB.
    m = measure_kv_bytes(
        requested_bytes=80 * GiB, init_free_bytes=int(79.5 * GiB), resident_bytes=16 * GiB, transient_bytes=2 * GiB
    )
    assert m.margin_bytes == int(1.5 * GiB) and m.device_bound and m.available_bytes == 60 * GiB
    # gmu 0.9 (72 GiB requested): the budget binds, 72 - 16 - 2 = 54 GiB; a small transient keeps the 1 GiB floor.
    m = measure_kv_bytes(
        requested_bytes=72 * GiB, init_free_bytes=int(79.5 * GiB), resident_bytes=16 * GiB, transient_bytes=GiB // 2
    )
    assert m.margin_bytes == GiB and not m.device_bound and m.available_bytes == 72 * GiB - 16 * GiB - GiB // 2


def test_blocks_within_rounds_each_segment_to_the_granule() -> None:
    # blocks_within (extensible_kv_cache.py 0.34.0 L343-348): 32 layer segments of 64 KiB blocks. 1 GiB
    # holds 1 GiB / (32 x 64 KiB) = 512 blocks exactly (each segment 32 MiB, a whole number of 2 MiB
    # granules); 1 GiB + 1 MiB still holds 512 (513 blocks need 32 x roundup(32.0625 MiB) = 32 x 34 MiB).
    strides = (64 * 1024,) * 32
    assert blocks_within(GiB, strides, 10**6) == 512
    assert blocks_within(GiB + MiB, strides, 10**6) == 512
    assert blocks_within(32 * 34 * MiB, strides, 10**6) == 544  # 544 x 64 KiB = 34 MiB per segment
    assert blocks_within(32 * 34 * MiB, strides, 100) == 100  # never above the reserved capacity
    assert 2 * MiB == GRANULE_BYTES


def test_034_plan_is_the_measured_pool() -> None:
    # Llama-3.1-8B on H100, vLLM 0.34 defaults: gmu 1.0 (config/cache.py 0.34.0 L495-501), no free-memory
    # check at start-up (v1/worker/utils.py L783-797). The pool is total - CUDA context - (weights + non-torch
    # + graphs) - max(1 GiB, 0.75 T) - T with T = the activation transient (the graph estimate is 0 with the
    # extensible cache: gpu/model_runner.py 0.34.0 L1121-1125); the blocks are the pool over
    # 32 segments of 16 x 8 x 128 x 2 x 2 B = 64 KiB, and vLLM checks (blocks - 1) x 2 MiB against one request.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(m, H100, ServingConfig(max_model_len=8192))
    r = p.ranks[0]
    assert p.serving.gpu_memory_utilization == 1.0 and p.serving.extensible_kv_cache
    resident = r.weights.total_bytes + r.profile.non_torch_bytes + r.profile.moe_workspace_bytes
    resident += r.profile.cuda_graph_bytes
    transient = r.profile.activation_bytes - r.profile.moe_workspace_bytes
    pool = H100.memory_bytes - CUDA_CONTEXT_BYTES - resident - max(GiB, int(0.75 * transient)) - transient
    assert r.num_blocks == blocks_within(pool, (64 * 1024,) * 32, 10**9)
    assert r.available_kv_bytes == (r.num_blocks - 1) * 2 * MiB
    assert p.verdict.value == "Fits"
    # 0.33 at its default gmu 0.92 keeps less: the pool grew with 0.34 on this card
    old = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.33.0"))
    assert old.serving.gpu_memory_utilization == 0.92 and old.kv.num_blocks < p.kv.num_blocks


def test_034_extensible_off_is_033s_accounting() -> None:
    # --no-enable-extensible-kv-cache or --kv-cache-memory-bytes: the 0.33 path (gpu_worker.py 0.34.0 L719-781)
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    off = plan(m, H100, ServingConfig(max_model_len=8192, extensible_kv_cache=False))
    old = plan(m, H100, ServingConfig(max_model_len=8192, vllm_version="0.33.0"))
    assert off.serving.gpu_memory_utilization == 0.92 and off.kv.num_blocks == old.kv.num_blocks
    with pytest.raises(SizingError, match="enable_extensible_kv_cache"):
        plan(m, H100, ServingConfig(max_model_len=8192, extensible_kv_cache=True, kv_cache_memory_bytes=10 * GiB))


@pytest.mark.parametrize(
    ("gpu", "connector", "buffer", "off"),
    [
        ("H100", "NixlConnector", None, True),  # fabric handles need an IMEX channel a pod here has none of
        ("H100", "NixlConnector", "cpu", False),  # a CPU buffer: NIXL registers host staging buffers only
        ("GB200", "NixlConnector", None, False),  # a ComputeDomain may give the pod one: the larger pool is kept
        ("H100", "LMCacheMPConnector", None, True),  # legacy CUDA IPC
        ("MI300X", "MooncakeConnector", None, True),  # ROCm: RDMA cannot register driver-mapped memory
        ("H100", "MooncakeConnector", None, False),  # CUDA: REGISTERS alone keeps it (single chunk)
        ("H100", "OffloadingConnector", None, False),  # in process
    ],
)
def test_034_connectors_that_turn_the_extensible_cache_off(
    gpu: str, connector: str, buffer: str | None, off: bool
) -> None:
    # hunt171 F1: VllmConfig._resolve_extensible_kv_cache (config/vllm.py 0.34.0 L3180-3258) asks the connector's
    # kv_cache_access; off, the default gmu is 0.92 again (config/cache.py L495-501) and the plan says why.
    m, g = model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu(gpu)
    p = plan(
        m, g, ServingConfig(max_model_len=8192, kv_connector=connector, kv_role="kv_both", kv_buffer_device=buffer)
    )
    assert p.serving.extensible_kv_cache is not off
    assert p.serving.gpu_memory_utilization == (0.92 if off else 1.0)
    assert any("turns the extensible KV cache off" in n for n in p.notes) is off
    # --enable-extensible-kv-cache decides: no connector reason then
    kept = plan(
        m, g, ServingConfig(max_model_len=8192, kv_connector=connector, kv_role="kv_both", extensible_kv_cache=True)
    )
    assert kept.serving.extensible_kv_cache and kept.serving.extensible_off_by is None


def test_034_nixl_at_gmu_one_is_refused_as_vllm_would() -> None:
    # hunt171 F1: with the cache off the 0.33 start check is back (v1/worker/utils.py 0.34.0 L783-797): gmu 1.0
    # leaves nothing for the CUDA context, which fitgate called Fits while it kept the cache on.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(m, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=1.0, kv_connector="NixlConnector"))
    assert p.verdict.value == "DoesNotFit"


def test_034_gmu_one_starts() -> None:
    # 0.33 refuses gmu 1.0 (free < requested); 0.34's extensible cache skips that check.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(m, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=1.0))
    assert "GpuMemoryUtilizationTooHigh" not in {r.code for r in p.reasons}


# -- 2. releases newer than the table, and nonsense -------------------------------------------


@pytest.mark.parametrize("text", ["0.35.0", "v1.0.0", "v0.40.2-cu130", "1.2"])
def test_newer_release_is_sized_as_the_newest_with_a_note(text: str) -> None:
    rel = resolve_release(text)
    assert rel.sized_as == accounting_for(DEFAULT_VLLM_VERSION).version and rel.note is not None
    p = plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, ServingConfig(max_model_len=8192, vllm_version=text))
    assert p.serving.vllm_version == DEFAULT_VLLM_VERSION
    assert any("newer than the newest release fitgate models" in n for n in p.notes)
    assert p.verdict.value != "Invalid"


@pytest.mark.parametrize("text", ["0.4.3", "v0.4.0.post1", "0.2.7"])
def test_older_release_is_sized_as_the_oldest_with_a_note(text: str) -> None:
    # hunt17 G1: 2024 tutorials pin vllm==0.4.x; its V0 worker sizes the KV cache as 0.5.0's (total x gmu - peak,
    # worker/worker.py 0.4.3 L159-173). Before, the CLI refused the release and an image tag was sized as 0.34.0.
    rel = resolve_release(text)
    assert rel.sized_as == (0, 5, 0) and rel.note is not None and "older than the oldest" in rel.note
    p = plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, ServingConfig(max_model_len=8192, vllm_version=text))
    assert p.serving.vllm_version == "0.5.0" and any("sized with 0.5.0's accounting" in n for n in p.notes)


@pytest.mark.parametrize("text", ["gptoss", "banana", "not-a-release", "cu128_custom"])
def test_tag_naming_no_release_is_sized_as_the_newest_with_a_note(text: str) -> None:
    # hunt78 O1: vllm/vllm-openai:gptoss is a real image tag; the operator sized it as the newest modelled release
    # while `plan --vllm-version gptoss` exited 2. A tag is not a reason to refuse (the first rule).
    rel = resolve_release(text)
    assert not rel.named and rel.sized_as == accounting_for(DEFAULT_VLLM_VERSION).version
    assert rel.note is not None and text in rel.note
    p = plan(model("meta-llama/Llama-3.1-8B-Instruct"), H100, ServingConfig(max_model_len=8192, vllm_version=text))
    assert p.serving.vllm_version == DEFAULT_VLLM_VERSION and any("names no release" in n for n in p.notes)


@pytest.mark.parametrize("text", ["", "x" * 500, "0.34 0", "v0.34.0;rm", "-rc1"])
def test_nonsense_release_is_a_one_line_error(text: str) -> None:
    with pytest.raises(SizingError) as err:
        resolve_release(text)
    assert "\n" not in str(err.value) and "vllm_version" in str(err.value)


def test_cli_accepts_newer_and_tags_and_refuses_nonsense(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192"]
    assert main([*args, "--vllm-version", "0.35.0", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("0.35.0" in n for n in doc["notes"])
    assert main([*args, "--vllm-version", "gptoss", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("'gptoss' names no release" in n for n in doc["notes"])
    assert main([*args, "--vllm-version", "not a release"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a release" in err


def test_plan_of_a_tag_naming_no_release_is_unknown_where_only_the_newest_accounting_denies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt82 F2 in `fitgate plan`, as `fitgate check` and the webhook answer it (ReleaseUnknown): Llama-3.1-70B-FP8 at
    # 36k, gmu 0.95, fp8 KV on one H100. As 0.34.0 the request does not fit what weights and activations leave
    # (DoesNotFit, exit 1); an older release that leaves graphs outside the budget admits it. (32k fitted 0.34 too
    # once hunt184 F1 halved the V2 runner's cost per graph.)
    args = ["plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--quantization", "fp8"]
    args += ["--max-model-len", "36864", "--gpu-memory-utilization", "0.95", "--kv-cache-dtype", "fp8", "-o", "json"]
    assert main([*args, "--vllm-version", "0.34.0"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "DoesNotFit"
    assert main([*args, "--vllm-version", "gptoss"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "Unknown" and doc["performance"] is None  # hunt92 F2: no estimate for a misfit
    first, misfit = doc["reasons"][:2]
    assert first["code"] == "ReleaseUnknown" and misfit["code"] == "KVCacheTooSmallForMaxModelLen"
    assert "'gptoss' names no release" in first["message"] and "does not fit, but as vLLM 0." in first["message"]
    # a misfit every release shows stays one: 131 GiB of bf16 weights on an 80 GB card
    assert main([*args[:5], "--max-model-len", "32768", "--vllm-version", "gptoss", "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "DoesNotFit"


# -- 3. scripts/vllm_release_diff.py ------------------------------------------------------------


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_release_diff", REPO / "scripts" / "vllm_release_diff.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vllm_release_diff"] = mod
    spec.loader.exec_module(mod)
    return mod


def _release(root: Path, worker: str, planning: str) -> Path:
    pkg = root / "vllm"
    (pkg / "v1" / "worker").mkdir(parents=True)
    (pkg / "v1" / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "v1" / "worker" / "gpu_worker.py").write_text(worker)
    (pkg / "v1" / "core" / "kv_cache_planning.py").write_text(planning)
    return root


def test_release_diff_finds_functions_by_name_and_diffs_them(tmp_path: Path) -> None:
    script = _load_script()
    old = _release(
        tmp_path / "old",
        "class Worker:\n    def determine_available_memory(self):\n        return self.requested - self.non_kv\n",
        "def get_kv_cache_groups(specs):\n    return [specs]\n",
    )
    new = _release(
        tmp_path / "new",
        "import os\n\nclass Worker:\n    def determine_available_memory(self):\n"
        "        return self.requested - self.non_kv - self.graphs\n",
        "def get_kv_cache_groups(specs):\n    return [specs]\n\n\n"
        "def finalize_extensible_kv_cache(n):\n    return min(n)\n",
    )
    changes = {c.name: c for c in script.compare(old / "vllm", new / "vllm")}
    assert changes["Worker.determine_available_memory"].status == "changed"
    assert changes["Worker.determine_available_memory"].new.first_line == 4  # moved by the import
    assert changes["get_kv_cache_groups"].status == "same"
    assert changes["finalize_extensible_kv_cache"].status == "added"
    assert changes["request_memory"].status == "absent"
    text = script.report(list(changes.values()), "0.1.0", "0.2.0")
    assert "+        return self.requested - self.non_kv - self.graphs" in text
    assert "-        return self.requested - self.non_kv\n" in text
    assert "get_kv_cache_groups" in text and "+def finalize_extensible_kv_cache(n):" in text


# -- 4. context limits as vLLM derives them (config/model.py 0.33.0 L2545-2684 = 0.34.0 L2589-2728) ------


@pytest.mark.parametrize(
    ("corpus", "limit"),
    [
        # Gemma 3: linear x8, but "gemma3" in model_type skips it: 131072 (not 131072 x 8 = 1,048,576)
        ("google__gemma-3-27b-it", 131072),
        # dynamic x6 scales max_position_embeddings: 32768 x 6 = 196608
        ("internlm__internlm3-8b-instruct", 196608),
        # dynamic x2: 32768 x 2 = 65536
        ("internlm__internlm2-chat-7b-sft", 65536),
        # llama3 is not scaled: 131072 (not x8)
        ("meta-llama__Llama-3.1-8B-Instruct", 131072),
        # yarn is not scaled again: max_position_embeddings 163840 (= 4096 x 40)
        ("deepseek-ai__DeepSeek-R1", 163840),
        # yarn: 65536 (= 8192 x 8)
        ("allenai__Olmo-3.1-32B-Instruct", 65536),
    ],
)
def test_derived_max_model_len_of_real_configs(corpus: str, limit: int) -> None:
    arch = parse_config(json.loads((CORPUS / corpus / "config.json").read_text()))
    assert arch.derived_max_model_len == limit


def test_longrope_default_is_the_original_context() -> None:
    # LongRoPE (Phi-3 style): the factor is not applied to the limit, and without --max-model-len the default
    # is original_max_position_embeddings (config/model.py 0.34.0 L2683-2692). Synthetic config.
    base = json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text())
    cfg = {
        **base,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
    }
    arch = parse_config(cfg)
    assert arch.derived_max_model_len == 131072 and arch.default_max_model_len((0, 34, 0)) == 4096
    # hunt194 F1: from 0.11.1 (vllm#27431, config/model.py 0.11.1 L2112-2120); 0.11.0 took the derived 131072
    assert arch.default_max_model_len((0, 11, 1)) == arch.default_max_model_len((0, 12, 0)) == 4096
    assert arch.default_max_model_len((0, 11, 0)) == 131072
    # hunt196: that is LongRoPE's alone; a YaRN config whose max_position_embeddings (32768) is below original x factor
    # (8192 x 16 = 131072) defaults to the product up to 0.29 (config/model.py 0.29.0 L2452-2458), the larger rule
    # before 0.33, and to max_position_embeddings from 0.33
    yarn = parse_config(
        {
            **base,
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 8192},
        }
    )
    assert yarn.default_max_model_len((0, 12, 0)) == 131072 and yarn.default_max_model_len((0, 34, 0)) == 32768


def test_a_bare_phi_3_5_mini_on_an_l4_is_not_denied_from_0_11_1() -> None:
    """hunt194 F1: ``vllm serve microsoft/Phi-3.5-mini-instruct`` starts at 4096 tokens on 0.11.1+, not 128k."""
    from fitgate.checkpoints import resolve  # noqa: PLC0415

    m = to_model_input(resolve("microsoft/Phi-3.5-mini-instruct", source="catalog"))
    l4 = lookup_gpu("L4")
    p = plan(m, l4, ServingConfig(vllm_version="0.12.0"))
    # 4096 tokens x 32 layers x 2 (K, V) x 32 KV heads x 96 dims x 2 B = 1.5 GiB: one request fits the L4's pool
    assert p.serving.max_model_len == 4096 and p.verdict.value != "DoesNotFit"
    # before 0.11.1 the default is the 131,072 it accepts: 48 GiB for one request, more than the L4 holds
    assert plan(m, l4, ServingConfig(vllm_version="0.11.0")).serving.max_model_len == 131072


def test_model_max_length_wins_and_default_factor_applies() -> None:
    # derive_max_model_len_and_key (model_arch_config_convertor.py 0.34.0 L375-408): model_max_length
    # overrides the smaller keys; a "default" rope set that carries a factor is applied (x2).
    base = json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text())
    arch = parse_config({**base, "model_max_length": 65536, "rope_scaling": None})
    assert arch.derived_max_model_len == 65536 and arch.max_len_key == "model_max_length"
    arch = parse_config(
        {**base, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "default", "factor": 2}}
    )
    assert arch.derived_max_model_len == 8192


def test_gemma3_refuses_what_vllm_refuses() -> None:
    # 500k on 2 x H100 used to plan as Fits; vLLM refuses anything above 131072 for gemma3.
    m = to_model_input(load_directory(CORPUS / "google__gemma-3-27b-it"))
    p = plan(m, H100, ServingConfig(tensor_parallel_size=2))
    assert p.serving.max_model_len == 131072
    with pytest.raises(SizingError, match=r"131072.*VLLM_ALLOW_LONG_MAX_MODEL_LEN") as err:
        plan(m, H100, ServingConfig(tensor_parallel_size=2, max_model_len=500_000))
    assert "\n" not in str(err.value)


# -- 5. DeepSeek-V3.2 (sparse MLA + indexer): reported tokens per group ------------------------------


def test_sparse_mla_tokens_are_blocks_times_block_size() -> None:
    # One UniformTypeKVCacheSpecs group (MLA 64 x 1152 B + indexer 64 x 132 B per layer, 61 layers):
    # a 163840-token request takes cdiv(163840, 64) = 2560 blocks, so tokens = blocks x 64 and the
    # concurrency is blocks / 2560 (kv_cache_utils.py 0.33.0 L1061-1128), e.g. 9038 blocks -> 578,432 tokens.
    m = to_model_input(load_directory(CORPUS / "deepseek-ai__DeepSeek-V3.2"))
    for version in ("0.33.0", "0.34.0"):
        p = plan(m, H200, ServingConfig(tensor_parallel_size=8, vllm_version=version))
        assert p.kv.block_size == 64 and p.kv.num_blocks > 0
        assert p.kv.max_concurrency == pytest.approx(p.kv.num_blocks / 2560)
        assert abs(p.kv.reported_tokens - p.kv.num_blocks * 64) <= 1  # int(concurrency x len) rounding


# -- 6. memory outside the budget: deny only what the derivation shows ------------------------------


def test_gpt_oss_120b_tp2_at_095_is_the_documented_oom() -> None:
    # vllm-project/recipes OpenAI/GPT-OSS.md L431 (commit 1e4b3adb, 2025-08-05, vLLM 0.10.1): "When running TP2
    # on H100, set your gpu memory utilization below 0.95 as that will also cause OOM". Outside the budget:
    # 79.19 GiB x 0.05 = 3.96 GiB. Needed at least: NCCL + context 1.53 GiB (TP > 1, measured) + the graph pool
    # captured after the KV cache (0.10 deducts no estimate; 0.35 + 36 layers x 34 MiB + 0.25 = 1.80 GiB)
    # + the sampler warm-up's logits, 1024 rows x 201088 x (2 + 4) B = 1.15 GiB -> 4.48 GiB > 3.96 GiB.
    m = to_model_input(load_directory(CORPUS / "openai__gpt-oss-120b"))
    p = plan(m, H100, ServingConfig(tensor_parallel_size=2, gpu_memory_utilization=0.95, vllm_version="0.10.1"))
    # Tight, not denied: the same floor margin started a Llama 4 Scout run (test below, from a public log)
    assert p.verdict.value == "Tight" and "OutsideBudgetTooSmall" in [r.code for r in p.reasons]
    floor = int(1.53 * GiB) + p.ranks[0].profile.cuda_graph_bytes + 1024 * 201088 * 6
    assert floor > H100.memory_bytes - p.per_gpu.budget_bytes
    assert any("4.48 GiB" in r.message for r in p.reasons if r.code == "OutsideBudgetTooSmall")
    # below 0.95 it starts: 7.92 GiB outside
    ok = plan(m, H100, ServingConfig(tensor_parallel_size=2, gpu_memory_utilization=0.9, vllm_version="0.10.1"))
    assert "OutsideBudgetTooSmall" not in {r.code for r in ok.reasons}


def test_gpt_oss_120b_on_one_h100_samples_with_flashinfer_on_0_10() -> None:
    # gpustack's performance lab ran `vllm serve openai/gpt-oss-120b --max-model-len 32768` on one H100 at vLLM
    # 0.10.2 (docs/performance-lab/gpt-oss-120b/h100.md, commit 47277d79, L476 and its ShareGPT run), while
    # vllm#23278 (0.10.1, a conda pip install, defaults) printed -2.14 GiB of KV. vLLM 0.8-0.11.0 sample with
    # FlashInfer when it is installed (topk_topp_sampler.py 0.10.2 L42-60; vLLM's image installs it), PyTorch's
    # sort otherwise. Sampler pass, 1024 rows x 201088 vocab: FlashInfer 14 B a logit = 2,882,838,528 B =
    # 2.685 GiB + 0.146 GiB = 2.83 GiB; the sort's 37.8 B = 7,783,664,025 B = 7.249 GiB + 0.146 = 7.39 GiB.
    # Budget 0.9 x 79.19 = 71.27 GiB - weights 65.91 - non-torch 0.13 - 2.83 = 2.40 GiB of KV (one 32768-token
    # request needs 32768 x 36864 B = 1.125 GiB of full attention plus the sliding window's): it starts, Tight;
    # on the sort path 2.40 - (7.39 - 2.83) < 0: the pip install's start is refused, said in the reason.
    m = to_model_input(load_directory(CORPUS / "openai__gpt-oss-120b"))
    image = plan(m, H100, ServingConfig(max_model_len=32768, vllm_version="0.10.2"))
    assert image.ranks[0].profile.activation_bytes == int(0.146 * GiB) + int(14.0 * 1024 * 201088)
    assert image.verdict.value == "Tight" and "SamplerNeedsFlashInfer" in {r.code for r in image.reasons}
    extra = image.ranks[0].profile.without_flashinfer_bytes
    assert extra == int(37.8 * 1024 * 201088) - int(14.0 * 1024 * 201088)
    assert image.ranks[0].available_kv_bytes - extra < 0
    pip = plan(
        m,
        H100,
        ServingConfig(max_model_len=32768, vllm_version="0.10.2", flashinfer_sampler=False, mxfp4_backend="marlin"),
    )
    assert pip.verdict.value == "DoesNotFit" and pip.ranks[0].profile.without_flashinfer_bytes == 0
    # the same pip install with triton_kernels added runs the Triton MoE layout (60.86 GiB, fitgate.sizing.mxfp4):
    # 71.27 - 60.86 - 7.39 - 0.13 = 2.89 GiB of KV, enough for 32768 tokens; fitgate cannot see it: Tight
    either = plan(m, H100, ServingConfig(max_model_len=32768, vllm_version="0.10.2", flashinfer_sampler=False))
    assert either.verdict.value == "Tight" and either.reasons[0].code == "Mxfp4NeedsTritonKernels"
    # 0.11.1 made FlashInfer's sampler opt-in (topk_topp_sampler.py 0.11.1 L34-35): the sort is the default there,
    # and with fewer sequences (vllm#33155 ran 0.11.2 at gmu 0.97 with --max-num-seqs 100) it is not denied
    later = plan(m, H100, ServingConfig(max_model_len=32768, vllm_version="0.11.2"))
    assert later.verdict.value == "DoesNotFit"
    issue = ServingConfig(max_model_len=87040, max_num_seqs=100, gpu_memory_utilization=0.97, vllm_version="0.11.2")
    assert plan(m, H100, issue).verdict.value != "DoesNotFit"
    # opted in on 0.11.2 (VLLM_USE_FLASHINFER_SAMPLER=1): FlashInfer's smaller pass, nothing assumed
    opted = plan(m, H100, ServingConfig(max_model_len=32768, vllm_version="0.11.2", flashinfer_sampler=True))
    assert opted.verdict.value != "DoesNotFit" and opted.ranks[0].profile.without_flashinfer_bytes == 0


def test_gpt_oss_20b_logs_of_019() -> None:
    # shared/calibration, vLLM 0.19.0 H100 (llm-d-planner logs): gmu 0.95 failed after KV sizing at TP2,
    # gmu 0.9 ran at TP2. TP2 at 0.95: 1.53 + 1.40 (24 layers x 34 MiB + 0.60) + 1024 x 201088 x 6 B (1.15) =
    # 4.08 GiB > 3.96 GiB -> Tight (OutsideBudgetTooSmall), never a denial: Llama 4 Scout TP4 at 0.95 on the same
    # H100s and release started with the same floor (next test); at 0.9 the 7.92 GiB outside hold it.
    m = model("openai/gpt-oss-20b")
    bad = plan(
        m,
        H100,
        ServingConfig(max_model_len=8192, tensor_parallel_size=2, gpu_memory_utilization=0.95, vllm_version="0.19.0"),
    )
    assert bad.verdict.value == "Tight" and "OutsideBudgetTooSmall" in {r.code for r in bad.reasons}
    ok = plan(
        m,
        H100,
        ServingConfig(max_model_len=8192, tensor_parallel_size=2, gpu_memory_utilization=0.9, vllm_version="0.19.0"),
    )
    assert ok.verdict.value == "Fits"


def test_llama4_scout_tp4_at_095_started_and_is_not_denied() -> None:
    # llm-d-incubation/llm-d-planner @ d3121e059da8 (benchmarks/calibration/public-2026.jsonl): Llama 4 Scout on
    # 4 x H100, TP 4, gmu 0.95, max-model-len 8192, vLLM 0.19.0 started. Outside: 3.96 GiB; floor 1.53 + 1.40
    # (fitted graphs) + 1024 x 202048 x 6 B (1.16) = 4.09 GiB: the floor over-counts, so it only warns
    m = to_model_input(
        load_directory(
            REPO / "src" / "fitgate" / "checkpoints" / "catalog" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
        )
    )
    p = plan(
        m,
        H100,
        ServingConfig(tensor_parallel_size=4, max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.19.0"),
    )
    assert p.verdict.value == "Tight" and "OutsideBudgetTooSmall" in {r.code for r in p.reasons}


@pytest.mark.parametrize("context", [1_000_000, 1_280_000, 1_310_720])
def test_llama4_scout_long_context_on_8_h100_is_not_denied(context: int) -> None:
    # blog.vllm.ai/2025/04/05/llama4.html: "Using 8xH100, vLLM can serve Scout with 1M context" (vLLM 0.8.3,
    # default gmu 0.9: 7.92 GiB outside); vllm-project/vllm PR #16104 (Llama 4 support, 2025-04-05) ran it with
    # --max-model-len 1280000 on 8 x H100. The floor, 1.53 + 1.40 (graphs) + 1024 x 202048 x 6 B (1.16) =
    # 4.09 GiB, fits; only the fitted sampler (PyTorch sort path, ~38 B a logit) says Tight.
    m = to_model_input(
        load_directory(
            REPO / "src" / "fitgate" / "checkpoints" / "catalog" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
        )
    )
    p = plan(m, H100, ServingConfig(tensor_parallel_size=8, max_model_len=context, vllm_version="0.8.3"))
    assert p.verdict.value != "DoesNotFit"
    assert "OutsideBudgetTooSmall" not in {r.code for r in p.reasons}


def test_llama4_chunked_layers_keep_their_group_on_0_10_0() -> None:
    # hunt182 F1: vLLM 0.10.0 gave chunked local attention its own spec with the hybrid manager on
    # (v1/worker/gpu_model_runner.py 0.10.0 L2794-2813; config.py L4655-4676: off only off-GPU, with KV transfer or
    # events, or EAGLE); 0.10.1 turned it off by default (vllm#21761, VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE
    # "0") until 0.14.0. Scout at 1M on 4 x H100 was denied at 0.10.0: every layer was sized as full attention.
    m = to_model_input(
        load_directory(
            REPO / "src" / "fitgate" / "checkpoints" / "catalog" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
        )
    )
    got = {}
    for version in ("0.9.2", "0.10.0", "0.10.1"):
        p = plan(m, H100, ServingConfig(tensor_parallel_size=4, max_model_len=1_000_000, vllm_version=version))
        got[version] = (p.kv.kinds, p.verdict.value, p.kv.max_concurrency)
    # 0.9.2 has no chunked spec (every layer full, in the start-up check too): denied. 0.10.1 sizes the pool at full
    # attention but checks the chunked layers at their chunk first (kv_cache_utils.py 0.10.1 L1095-1097; hunt203 F1):
    # it starts, and a 1M request fits 0.32 of the pool: Tight, not denied
    assert got["0.9.2"][:2] == (("full",), "DoesNotFit") and got["0.10.1"][:2] == (("full",), "Tight")
    # the 36 chunked layers hold a chunk (8192) plus a batch each, not the request: 0.32 requests of 1M become 1.22
    assert got["0.10.0"][0] == ("chunked_local", "full") and got["0.10.0"][1] != "DoesNotFit"
    assert got["0.10.0"][2] > 1 > got["0.10.1"][2]


def test_a_shorter_context_paired_with_a_change_is_the_one_that_change_holds() -> None:
    # hunt182 F3: Scout at 10M tokens on 8 x H200 (0.10.1): fp8 KV was offered with the bf16 pool's longest context
    # (4,130,816) and a summary of the fp8 pool's 516,381 blocks (8.26M tokens); each change now gets its own pool's
    from fitgate.sizing.advice import apply_suggestion, suggest  # noqa: PLC0415

    m = to_model_input(
        load_directory(
            REPO / "src" / "fitgate" / "checkpoints" / "catalog" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
        )
    )
    h200 = lookup_gpu("H200")
    # 0.9.2: chunked layers are full attention in the start-up check too (no ChunkedLocalAttentionSpec before 0.10); on
    # 0.10.1-0.13 the check counts their chunk, so that shape starts (Tight: hunt203 F1)
    serving = ServingConfig(tensor_parallel_size=8, max_model_len=10_000_000, vllm_version="0.9.2")
    current = plan(m, h200, serving)
    assert current.verdict.value == "DoesNotFit"
    found = suggest(m, h200, serving, None, current)
    fp8 = [s for s in found if ("--kv-cache-dtype", "fp8") in s.changes]
    assert fp8
    for s in fp8:
        length = int(dict(s.changes)["--max-model-len"])
        redone = plan(m, h200, apply_suggestion(serving, s))
        # the longest the fp8 pool holds, rounded down to 1024: within 1024 tokens of what it holds
        assert 0 <= redone.max_model_len_that_fits - length < 1024, (s.changes, redone.max_model_len_that_fits)


def test_model_deployment_carries_the_extensible_switch() -> None:
    # serving.enableExtensibleKvCache: false -> 0.34 with the 0.33 budget (gmu default 0.92)
    spec = {"model": {"name": "m"}, "serving": {"enableExtensibleKvCache": False}}
    assert serving_config(parse_spec(spec)).extensible_kv_cache is False
    assert serving_config(parse_spec({"model": {"name": "m"}})).extensible_kv_cache is None


def test_compare_reads_a_034_log() -> None:
    # 0.34 prints the final blocks as "Extended KV cache to %d blocks (%.2f GiB)." (extensible_kv_cache.py
    # 0.34.0 L795-799); compare plans with 0.34 and says its "Available KV cache memory" is the pre-warm-up bound.
    lines = [
        "(EngineCore pid=1) INFO 12-03 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.34.0) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=8192, tensor_parallel_size=1",
        "(EngineCore pid=1) INFO 12-03 10:00:10 [gpu_worker.py:796] Available KV cache memory: 61.20 GiB",
        "(EngineCore pid=1) INFO 12-03 10:00:40 [extensible_kv_cache.py:795] Extended KV cache to 29,696 blocks "
        "(58.00 GiB).",
    ]
    log = parse_lines(lines)
    assert log.observed.gpu_blocks == 29696
    serving, notes = serving_config_of_log(log)
    assert serving.vllm_version == "0.34.0" and serving.gpu_memory_utilization is None
    assert any("after warm-up" in n for n in notes)


def test_rocm_keeps_a_3_gib_margin() -> None:
    # KV_CACHE_MARGIN_FLOOR_BYTES = 3 GiB on ROCm (extensible_kv_cache.py 0.34.0 L64): 2 GiB more kept free than
    # CUDA's 1 GiB floor when 0.75 x the transient is below both.
    cuda = measure_kv_bytes(
        requested_bytes=80 * GiB, init_free_bytes=79 * GiB, resident_bytes=10 * GiB, transient_bytes=GiB
    )
    rocm = measure_kv_bytes(
        requested_bytes=80 * GiB,
        init_free_bytes=79 * GiB,
        resident_bytes=10 * GiB,
        transient_bytes=GiB,
        margin_floor_bytes=3 * GiB,
    )
    assert cuda.available_bytes - rocm.available_bytes == 2 * GiB
    mi300 = lookup_gpu("MI300X")
    p = plan(model("meta-llama/Llama-3.1-8B-Instruct"), mi300, ServingConfig(max_model_len=8192))
    q = plan(
        model("meta-llama/Llama-3.1-8B-Instruct"), mi300, ServingConfig(max_model_len=8192, extensible_kv_cache=False)
    )
    assert p.serving.extensible_kv_cache and not q.serving.extensible_kv_cache
    r = p.ranks[0]
    resident = r.weights.total_bytes + r.profile.non_torch_bytes + r.profile.moe_workspace_bytes
    resident += r.profile.cuda_graph_bytes
    transient = r.profile.activation_bytes - r.profile.moe_workspace_bytes
    pool = mi300.memory_bytes - CUDA_CONTEXT_BYTES - resident - max(3 * GiB, int(0.75 * transient)) - transient
    assert r.num_blocks == blocks_within(pool, (64 * 1024,) * 32, 10**9)


def test_033_outside_budget_terms() -> None:
    # 0.33 deducts its graph estimate and runs no post-capture sampler warm-up on the V2 runner (gpu_worker.py
    # 0.33.0 L1070-1090), so outside the budget: the CUDA context (0.41 GiB) and the pool's excess over the
    # estimate (fitted 0.43 x). Llama-3.1-8B at gmu 0.9925 on H100: 0.0075 x 79.19 = 0.59 GiB outside > 0.41 GiB
    # floor -> not denied; 0.41 + 0.43 x the 0.77 GiB estimate = 0.74 GiB exceeds it -> Tight.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    p = plan(m, H100, ServingConfig(max_model_len=8192, gpu_memory_utilization=0.9925, vllm_version="0.33.0"))
    outside = H100.memory_bytes - p.per_gpu.budget_bytes
    assert CUDA_CONTEXT_BYTES < outside < CUDA_CONTEXT_BYTES + int(0.43 * p.per_gpu.cuda_graph_bytes)
    assert p.verdict.value == "Tight" and "LowHeadroomOutsideBudget" in {r.code for r in p.reasons}
    # at TP2 NCCL joins the context before the snapshot: 79.19 - 1.53 GiB free < 0.99 x 79.19 -> vLLM refuses
    tp2 = plan(
        m,
        H100,
        ServingConfig(max_model_len=8192, gpu_memory_utilization=0.99, tensor_parallel_size=2, vllm_version="0.33.0"),
    )
    assert tp2.verdict.value == "DoesNotFit" and "GpuMemoryUtilizationTooHigh" in {r.code for r in tp2.reasons}


@pytest.mark.parametrize("text", ["0.34.0", "v0.35.0-cu130", "1.0", "latest", "nightly-aarch64"])
def test_model_deployment_engine_version_accepts_releases_and_moving_tags(text: str) -> None:
    spec = parse_spec({"model": {"name": "m"}, "engine": {"version": text}})
    assert spec.engine.version == text
    assert serving_config(spec).vllm_version == text


# a tag that names no release (banana, gptoss) is taken and sized as the newest with a warning (hunt37 F6); text that
# is no image tag at all is refused
@pytest.mark.parametrize("text", ["0.34.0 ; rm", "-v", "a b", "x" * 129])
def test_model_deployment_engine_version_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="version"):
        parse_spec({"model": {"name": "m"}, "engine": {"version": text}})


def test_throughput_points_without_a_release_take_their_month() -> None:
    # The speed benchmark reads "not stated (2025-07)" as 0.9.2 (its RELEASE_BY_MONTH): a tag that names no release
    # ("not") must not count as one, or the points are sized as 0.34.0 and the fitted decode error moves 8 -> 10 %.
    spec = importlib.util.spec_from_file_location("throughput_bench", REPO / "benchmarks" / "throughput.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["throughput_bench"] = mod
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert mod.point_release({"vllm": "not stated (2025-07)"}) == "0.9.2"
    assert mod.point_release({"vllm": "v0.6.3.post1 (dstack)"}) == "v0.6.3.post1"
    assert mod.point_release({"vllm": "rocm/vllm-dev nightly (2026)", "engine": "v1"}) == mod.RELEASE_BY_YEAR["2026"]


def test_spec_errors_clip_the_value_they_echo() -> None:
    # hunt83 G1: a 1 MB model.name came back whole in the Invalid message (CLI, ModelDeployment webhook)
    with pytest.raises(ValueError, match=r"spec\.model\.name") as err:
        parse_spec({"model": {"name": "x" * 1_000_000}})
    text = str(err.value)
    assert "spec.model.name" in text and "512" in text and "(1000000 characters)" in text and len(text) < 400


def test_the_v2_runner_by_release_follows_vllms_rule() -> None:
    # config/vllm.py ``_is_default_v2_model_runner_model`` per release (hunt125 F2: 0.27.1's dense Qwen3-32B log
    # prints the V2 runner's ``model_runner.py:329 Model loading took``, which the listed-architectures table missed)
    from fitgate.sizing.versions import RunnerTraits  # noqa: PLC0415

    def v2(version: str, architecture: str, **traits: object) -> bool:
        return accounting_for(version).uses_v2_runner(architecture, RunnerTraits(**traits))  # type: ignore[arg-type]

    llama, moe = "LlamaForCausalLM", "Qwen3MoeForCausalLM"
    # 0.21: none; 0.22-0.23: a listed, dense, unquantized one (0.22.0 L518-532): Qwen3 only in 0.22
    assert not v2("0.21.0", "Qwen3ForCausalLM")
    assert v2("0.22.0", "Qwen3ForCausalLM") and not v2("0.22.0", llama)
    assert v2("0.23.0", llama) and not v2("0.23.0", llama, quantized=True)
    # 0.24: the list alone (L550-562)
    assert v2("0.24.0", "Qwen2MoeForCausalLM", moe=True) and not v2("0.24.0", "Qwen2ForCausalLM")
    # 0.25-0.26: any dense model, listed MoE ones; never hybrid (0.25.0 L557-574)
    assert v2("0.25.0", "Qwen2ForCausalLM") and not v2("0.25.0", moe, moe=True)
    assert not v2("0.26.0", "NemotronHForCausalLM", hybrid=True)
    # 0.27-0.28: a hybrid only if listed; never attention-free, nor a pooling runner (0.27.0 L637-658)
    assert v2("0.27.1", "Qwen3ForCausalLM") and not v2("0.28.0", "Qwen3NextForCausalLM", hybrid=True, moe=True)
    assert not v2("0.28.0", "MambaForCausalLM", attention_free=True) and not v2("0.28.0", llama, generate=False)
    # speculative methods V2 does not run fall back to V1: ngram up to 0.31, suffix up to 0.33 (0.29.0 L2564-2574,
    # 0.31.0 L3075-3083, 0.33.0 L3066-3068); from 0.29 every other model is V2; 0.34 has no V1 runner
    assert not v2("0.27.1", llama, speculative="ngram") and v2("0.27.1", llama, speculative="eagle3")
    assert v2("0.29.0", moe, moe=True) and not v2("0.31.0", llama, speculative="ngram")
    assert v2("0.32.0", llama, speculative="ngram") and not v2("0.33.0", llama, speculative="suffix")
    assert v2("0.34.0", llama, speculative="suffix")


def test_0_9_to_0_13_check_one_request_at_the_layers_own_windows() -> None:
    """hunt203 F1: vLLM 0.9-0.13 run the start-up check on each layer's own spec before unifying sliding-window and
    chunked layers into full attention (kv_cache_utils.py 0.11.0 L1240-1257); 0.14 groups first (L1503, L1514)."""
    scout = to_model_input(
        load_directory(
            REPO / "src" / "fitgate" / "checkpoints" / "catalog" / "meta-llama__Llama-4-Scout-17B-16E-Instruct"
        )
    )
    # Scout at 3.6M on 8 x H100, 0.11.0 (chunked layers unified: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE 0).
    # The check: 12 full layers x 3.6M x 512 B (1 KV head of 128 per GPU, K and V, bf16) = 20.60 GiB, plus 36 chunked
    # layers x (8192 + 8192) x 512 B = 0.28 GiB: 20.88 GiB within the ~40 GiB pool. Counted at full length (48 layers:
    # 82.40 GiB) it was denied; the pool holds the 48 layers at full length, so a 3.6M request cannot be scheduled.
    p = plan(scout, H100, ServingConfig(tensor_parallel_size=8, max_model_len=3_600_000, vllm_version="0.11.0"))
    assert p.verdict.value == "Tight" and 20.8 < p.kv.one_request_bytes / GiB < 21.0
    assert any(r.code.value == "MaxModelLenNearKVCapacity" and "so it starts" in r.message for r in p.reasons)
    # Gemma 3 27B at 128k on one H100, 0.9.2 (no hybrid manager in fitgate before 0.10): the check caps its 52
    # sliding layers at their 1024-token window plus one batch of tokens: 13.66 GiB, as from 0.10 on; it was 62 GiB
    gemma = to_model_input(load_directory(CORPUS / "google__gemma-3-27b-it"))
    for version in ("0.9.2", "0.10.0"):
        g = plan(gemma, H100, ServingConfig(max_model_len=131072, vllm_version=version))
        assert g.verdict.value != "DoesNotFit" and round(g.kv.one_request_bytes / GiB, 2) == 13.66, version
