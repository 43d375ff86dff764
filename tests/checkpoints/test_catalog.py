"""User catalogs: `fitgate catalog add` on a connected machine, offline resolution from FITGATE_CATALOG_PATH."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from huggingface_hub import constants
from safetensors.numpy import save_file

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.checkpoints.catalog import catalog_entries
from fitgate.cli import main
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.errors import SizingError
from fitgate.sizing.weights import inventory_from_architecture
from tests.checkpoints.test_hub import SHA_MAIN, llama8b_files, tiny_files
from tests.conftest import GEMMA3_TINY, catalog_config, configmap_mount
from tests.hub_server import HubRepo, HubServer


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    repos = [
        HubRepo("meta-llama/Llama-3.1-8B-Instruct", {SHA_MAIN: llama8b_files()}, {"main": SHA_MAIN}),
        HubRepo("acme/tiny", {SHA_MAIN: tiny_files(4096)}, {"main": SHA_MAIN}),
    ]
    with HubServer(repos) as server:
        yield server


def online(monkeypatch: pytest.MonkeyPatch, hub: HubServer) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def model_dir(tmp_path: Path, config: dict[str, Any]) -> Path:
    """A Hugging Face layout directory with a real (tiny) safetensors file."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config, indent=3) + "\n")
    h, v, i = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    tensors = {"model.embed_tokens.weight": np.zeros((v, h), np.float16), "model.norm.weight": np.zeros(h, np.float16)}
    for n in range(config["num_hidden_layers"]):
        p = f"model.layers.{n}."
        tensors[p + "mlp.down_proj.weight"] = np.zeros((h, i), np.float16)
        tensors[p + "self_attn.o_proj.weight"] = np.zeros(
            (h, config["num_attention_heads"] * config["head_dim"]), np.float16
        )
    save_file(tensors, str(d / "model.safetensors"))
    return d


def test_added_from_the_hub_then_resolved_offline_with_the_same_plan(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog"
    online(monkeypatch, hub)
    code, out, err = run(capsys, "catalog", "add", "acme/tiny", "--into", str(catalog))
    assert code == 0, err
    assert f"added acme/tiny to {catalog / 'acme__tiny'}" in out
    assert "FITGATE_CATALOG_PATH" in err  # the directory is not on the path yet: say how to use it
    entry = json.loads((catalog / "acme__tiny" / "weights.json").read_text())
    # tiny_files: embed_tokens + lm_head, 256 x 64 F16 each = 2 x 256 x 64 x 2 B = 65536 B
    assert (
        entry["total_size"] == 65536 and entry["revision"] == SHA_MAIN and entry["tensor_totals"]["tensor_count"] == 2
    )
    via_hub = resolve("acme/tiny")
    hub.stop()
    offline(monkeypatch)
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(catalog))
    via_catalog = resolve("acme/tiny")  # auto: the Hub is off, the user catalog answers
    assert via_catalog.source == "catalog" and via_catalog.revision == SHA_MAIN
    assert via_catalog.tensors == via_hub.tensors and via_catalog.config == via_hub.config
    gpu, serving = lookup_gpu("L4"), ServingConfig(max_model_len=4096)
    a, b = plan(to_model_input(via_hub), gpu, serving), plan(to_model_input(via_catalog), gpu, serving)
    assert a.per_gpu == b.per_gpu and a.kv == b.kv and a.verdict is b.verdict


def test_a_user_entry_takes_precedence_over_the_built_in_one(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog"
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(catalog))
    catalog.mkdir()
    built_in = resolve("meta-llama/Llama-3.1-8B-Instruct", source="catalog")
    assert built_in.tensors is None and built_in.weights_basis == "total_size"
    online(monkeypatch, hub)
    code, _, err = run(capsys, "catalog", "add", "meta-llama/Llama-3.1-8B-Instruct", "--source", "hub")
    assert code == 0, err  # --into defaults to the first FITGATE_CATALOG_PATH directory
    assert "takes precedence over the built-in one (total_size of the real model.safetensors.index.json)" in err
    user = resolve("meta-llama/Llama-3.1-8B-Instruct", source="catalog")
    assert user.weights_basis == "safetensors" and user.tensors is not None and user.tensors.tensor_count == 291
    assert f"fitgate catalog in {catalog}" in user.origin
    # Same checkpoint, two bases: the real headers agree with the built-in index total to the byte.
    assert to_model_input(user).inventory.stored_bytes == built_in.total_size == 16_060_522_496
    code, out, _ = run(capsys, "catalog", "list")
    line = next(x for x in out.splitlines() if x.startswith("meta-llama/Llama-3.1-8B-Instruct "))
    assert f"[{catalog}]" in line and "safetensors headers (291 tensors" in line


def test_added_from_a_directory_keeps_config_json_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = model_dir(tmp_path, GEMMA3_TINY)
    catalog = tmp_path / "catalog"
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(catalog))
    code, _, err = run(capsys, "catalog", "add", str(src))
    assert code == 2 and "--repo-id is required: the Hugging Face repo id" in err and "None" not in err
    code, out, err = run(capsys, "catalog", "add", str(src), "--repo-id", "acme/gemma-3-tiny")
    assert code == 0 and err == "", err
    written = (catalog / "acme__gemma-3-tiny" / "config.json").read_bytes()
    assert written == (src / "config.json").read_bytes()
    digest = hashlib.sha256(written).hexdigest()
    assert digest in (catalog / "acme__gemma-3-tiny" / "SOURCE.md").read_text()
    code, out, err = run(capsys, "plan", "--model", "acme/gemma-3-tiny", "--gpu", "L4", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"]["source"] == "catalog" and doc["model"]["weights_basis"] == "safetensors"
    # Nothing a user wrote is replaced silently: a second add is refused, --force replaces.
    code, _, err = run(capsys, "catalog", "add", str(src), "--repo-id", "acme/gemma-3-tiny")
    assert code == 2 and "pass --force to replace the entry" in err
    code, _, err = run(capsys, "catalog", "add", str(src), "--repo-id", "acme/gemma-3-tiny", "--force")
    assert code == 0, err
    assert sorted(p.name for p in catalog.iterdir()) == ["acme__gemma-3-tiny"]  # no staging leftovers


def test_bad_input_is_a_clear_error_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = model_dir(tmp_path, {**GEMMA3_TINY, "architectures": ["TotallyNewForCausalLM"], "model_type": "new"})
    catalog = tmp_path / "catalog"
    code, _, err = run(capsys, "catalog", "add", str(src), "--repo-id", "acme/new")
    assert code == 2 and "--into is required: the user catalog directory" in err and "None" not in err
    code, _, err = run(capsys, "catalog", "add", str(src), "--repo-id", "acme/new", "--into", str(catalog))
    assert code == 2 and "TotallyNewForCausalLM" in err and "Traceback" not in err
    assert not (catalog / "acme__new").exists()
    code, _, err = run(capsys, "catalog", "add", str(src), "--repo-id", "https://evil/x", "--into", str(catalog))
    assert code == 2 and "expected a Hugging Face repo id" in err
    offline(monkeypatch)
    code, _, err = run(capsys, "catalog", "add", "meta-llama/Llama-3.1-8B-Instruct", "--into", str(catalog))
    assert code == 2 and "this one came from the catalog" in err  # the offline fallback is not re-exported


def test_a_broken_user_catalog_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(tmp_path / "missing"))
    with pytest.raises(CheckpointError, match=r"FITGATE_CATALOG_PATH: .*missing.* expected directories of catalog"):
        catalog_entries()
    entry = tmp_path / "cat" / "acme__broken"
    entry.mkdir(parents=True)
    (entry / "config.json").write_text(json.dumps(GEMMA3_TINY))
    (entry / "weights.json").write_text(json.dumps({"repo_id": "acme/broken", "tensors": [["x", "BF16", "64"]]}))
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(tmp_path / "cat"))
    with pytest.raises(CheckpointError, match=r"acme__broken/weights.json:tensors: \['x', 'BF16', '64'\]"):
        resolve("acme/broken", source="catalog")
    (entry / "weights.json").write_text(json.dumps({"repo_id": "acme/broken", "total_size": -1}))
    with pytest.raises(CheckpointError, match=r"weights.json:total_size: -1 is not valid"):
        catalog_entries()


def test_catalog_totals_that_claim_to_equal_the_config_tensor_list_do() -> None:
    # An entry whose weights.json says its total equals the tensor list implied by config.json is checked here:
    # e.g. Llama-3.2-1B-Instruct: 2 B x 1,235,814,400 parameters (embeddings tied) = 2,471,628,800 B.
    claimed = [e for e in catalog_entries() if "equal to the tensor list implied by config.json" in e.basis]
    assert len(claimed) >= 4
    for e in claimed:
        facts = resolve(e.repo_id, source="catalog")
        derived = inventory_from_architecture(parse_config(facts.config)).stored_bytes
        assert derived == e.total_size, e.repo_id


def test_flat_entries_mounted_from_a_configmap_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = model_dir(tmp_path, GEMMA3_TINY)
    flat = tmp_path / "flat"
    argv = ("catalog", "add", str(src), "--repo-id", "acme/gemma-3-tiny", "--into", str(flat))
    code, _, err = run(capsys, *argv, "--flat")
    assert code == 0, err
    names = sorted(p.name for p in flat.iterdir())
    assert names == [f"acme__gemma-3-tiny.{n}" for n in ("SOURCE.md", "config.json", "weights.json")]
    # The same entry once more as a folder is refused: one layout per repo id.
    code, _, err = run(capsys, *argv)
    assert code == 2 and "one layout per repo id" in err
    mount = configmap_mount({p.name: p.read_bytes() for p in flat.iterdir()}, tmp_path / "mount")
    monkeypatch.setenv("FITGATE_CATALOG_PATH", str(mount))
    facts = resolve("acme/gemma-3-tiny", source="catalog")
    assert facts.weights_basis == "safetensors" and facts.config == GEMMA3_TINY
    direct = plan(to_model_input(resolve(str(src))), lookup_gpu("L4"), ServingConfig(max_model_len=8192))
    via_mount = plan(to_model_input(facts), lookup_gpu("L4"), ServingConfig(max_model_len=8192))
    assert via_mount.per_gpu == direct.per_gpu and via_mount.kv == direct.kv


def test_a_sentence_transformers_checkpoint_plans_with_the_pooling_runner(tmp_path: Path) -> None:
    # hunt46 F1: Qwen3-Embedding ships modules.json with a pooling module; vLLM 0.10.1+ serves it with the pooling
    # runner though its architecture is Qwen3ForCausalLM (config/model.py 0.34.0 L1303-1311). The catalog entry says
    # so (weights.json pooling_config), and so does a local directory holding modules.json.
    from fitgate.checkpoints import resolve, to_model_input  # noqa: PLC0415
    from fitgate.checkpoints.local import load_directory  # noqa: PLC0415
    from fitgate.sizing import ServingConfig, lookup_gpu, plan  # noqa: PLC0415

    rtx = lookup_gpu("RTX-4090")
    m = to_model_input(resolve("Qwen/Qwen3-Embedding-0.6B", source="catalog"))
    given = {"gpu_memory_utilization": 0.2, "vllm_version": "0.11.0"}
    auto = plan(m, rtx, ServingConfig(**given))  # type: ignore[arg-type]
    pooled = plan(m, rtx, ServingConfig(runner="pooling", **given))  # type: ignore[arg-type]
    generate = plan(m, rtx, ServingConfig(runner="generate", **given))  # type: ignore[arg-type]
    assert auto.serving.runner == "pooling"
    assert auto.per_gpu.activation_bytes == pooled.per_gpu.activation_bytes < generate.per_gpu.activation_bytes
    assert auto.verdict.value != "DoesNotFit" and generate.verdict.value == "DoesNotFit"
    # before 0.10.1 vLLM's default runner was generate for a *ForCausalLM checkpoint
    old = plan(m, rtx, ServingConfig(gpu_memory_utilization=0.2, vllm_version="0.10.0"))
    assert old.serving.runner == "generate"
    # a local directory: the same from its modules.json; a malformed one is not read (generate), never an error
    d = tmp_path / "Qwen__Qwen3-Embedding-0.6B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(m_config())))
    modules = [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (d / "modules.json").write_text(json.dumps(modules))
    assert load_directory(d).pooling_config
    (d / "modules.json").write_text("{not json")
    assert not load_directory(d).pooling_config


def test_a_sentence_transformers_max_seq_length_is_vllms_derived_length(tmp_path: Path) -> None:
    """hunt137 F4: gte-Qwen2-7B-instruct's 131072 positions are not what vLLM serves by default: its
    sentence_bert_config.json says max_seq_length 32768, which vLLM 0.6.4+ takes as the derived length
    (config.py 0.6.4 L1959-1960, config/model.py 0.34.0 L2680-2681). At 131072 one request needs 131072 x 28 layers x
    4 KV heads x 128 x 2 x 2 B = 7.00 GiB of KV, more than an L4 leaves after its ~14 GiB of weights: a false
    DoesNotFit of what vLLM runs at 32768 (1.75 GiB).
    """
    from fitgate.checkpoints.local import load_directory  # noqa: PLC0415

    config = dict(catalog_config("Qwen/Qwen2.5-7B-Instruct"))
    config.update(max_position_embeddings=131072, rope_scaling=None)
    d = tmp_path / "Alibaba-NLP__gte-Qwen2-7B-instruct"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    l4 = lookup_gpu("L4")
    bare = plan(to_model_input(load_directory(d)), l4, ServingConfig(vllm_version="0.10.0"))
    assert bare.serving.max_model_len == 131072 and bare.verdict.value == "DoesNotFit", bare.reasons
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32768, "do_lower_case": False}))
    m = to_model_input(load_directory(d))
    st = plan(m, l4, ServingConfig(vllm_version="0.10.0"))
    assert st.serving.max_model_len == 32768 and st.verdict.value != "DoesNotFit", st.reasons
    # before 0.6.4 vLLM read no such file: the positions; a longer --max-model-len than the length is vLLM's refusal
    assert plan(m, l4, ServingConfig(vllm_version="0.6.3")).serving.max_model_len == 131072
    with pytest.raises(SizingError, match="max_model_len"):
        plan(m, l4, ServingConfig(vllm_version="0.10.0", max_model_len=65536))


def m_config() -> dict[str, object]:
    from tests.conftest import catalog_config  # noqa: PLC0415

    return dict(catalog_config("Qwen/Qwen3-Embedding-0.6B"))


def test_float32_shards_of_a_16_bit_config_load_in_16_bits() -> None:
    # hunt76 F1: MBZUAI's AIN (a Qwen2-VL-7B fine-tune) says torch_dtype bfloat16 and ships 33,165,502,464 bytes of
    # float32 shards; vLLM loads every tensor into the config's dtype (config/model.py 0.34.0 L2511-2560,
    # weight_utils.py L1588-1602 default_weight_loader), so its GPU holds 2 bytes a parameter. fitgate scaled the
    # parameter counts with the bytes: 30.90 GiB of weights, DoesNotFit on an L4 where it runs.
    from fitgate.checkpoints.facts import ModelFacts  # noqa: PLC0415

    config = json.loads(tiny_files()["config.json"])  # a small Llama, torch_dtype bfloat16
    estimate = inventory_from_architecture(parse_config(config))
    params = sum(e.numel for e in estimate.entries)
    assert estimate.stored_bytes == 2 * params  # bfloat16: 2 bytes a parameter
    as_16 = to_model_input(ModelFacts("x", "x", config, total_size=estimate.stored_bytes))
    as_32 = to_model_input(ModelFacts("x", "x", config, total_size=4 * params))  # the same tensors in float32
    assert sum(e.numel for e in as_32.inventory.entries) == sum(e.numel for e in as_16.inventory.entries)
    assert as_32.inventory.stored_bytes == 2 * as_16.inventory.stored_bytes
    h100 = lookup_gpu("H100")
    serving = ServingConfig(max_model_len=1024)
    assert plan(as_32, h100, serving).per_gpu.weights_bytes == plan(as_16, h100, serving).per_gpu.weights_bytes
    # a total 1.5x the estimate is more parameters, not float32: scaled as before
    more = to_model_input(ModelFacts("x", "x", config, total_size=3 * params))
    assert sum(e.numel for e in more.inventory.entries) == pytest.approx(1.5 * params, rel=1e-3)
    # the Hub's per-dtype counts say it exactly: F32 parameters are parameters
    counted = to_model_input(ModelFacts("x", "x", config, dtype_counts={"F32": params}))
    assert sum(e.numel for e in counted.inventory.entries) == pytest.approx(params, rel=1e-3)
