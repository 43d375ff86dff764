"""Checkpoint resolution through the real huggingface_hub client against a loopback Hub."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from huggingface_hub import constants
from safetensors.numpy import save

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.hub import HubSettings, HubSource
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.errors import NotModelledError
from tests.conftest import catalog_config
from tests.hub_server import HubRepo, HubServer, VirtualFile, sharded_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hub"
SHA_MAIN = "a" * 40
SHA_V1 = "b" * 40
TOKEN = "hf_s3cr3t_token_never_printed"


def llama8b_files() -> dict[str, Any]:
    config = catalog_config("meta-llama/Llama-3.1-8B-Instruct")
    index = json.loads((FIXTURES / "llama-3.1-8b.model.safetensors.index.json").read_text())
    return sharded_checkpoint(config, index["weight_map"])


def tiny_files(max_pos: int = 2048) -> dict[str, Any]:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "max_position_embeddings": max_pos,
        "torch_dtype": "bfloat16",
    }
    arrays = {
        "model.embed_tokens.weight": np.zeros((256, 64), np.float16),
        "lm_head.weight": np.zeros((256, 64), np.float16),
    }
    return {"config.json": json.dumps(config).encode(), "model.safetensors": save(arrays)}


#: A Sentence Transformers checkpoint's modules.json: transformer, pooling, normalize.
ST_MODULES = json.dumps(
    [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
).encode()


#: Its sentence_bert_config.json: a max_seq_length below the config's 2048 positions.
ST_CONFIG = json.dumps({"max_seq_length": 512, "do_lower_case": False}).encode()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; these tests talk to the loopback Hub.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    repos = [
        HubRepo("meta-llama/Llama-3.1-8B-Instruct", {SHA_MAIN: llama8b_files()}, {"main": SHA_MAIN}),
        HubRepo(
            "acme/tiny", {SHA_MAIN: tiny_files(4096), SHA_V1: tiny_files(2048)}, {"main": SHA_MAIN, "v1.0": SHA_V1}
        ),
        HubRepo("acme/gated", {SHA_MAIN: tiny_files()}, {"main": SHA_MAIN}, token=TOKEN, gated=True),
        HubRepo(
            "acme/pytorch-only",
            {SHA_MAIN: {"config.json": tiny_files()["config.json"], "pytorch_model.bin": b"\0" * 1024}},
            {"main": SHA_MAIN},
        ),
        HubRepo("acme/huge-config", {SHA_MAIN: {"config.json": b" " * (9 << 20)}}, {"main": SHA_MAIN}),
        HubRepo(
            "acme/mistral-native",
            {SHA_MAIN: {"params.json": b'{"dim": 4096}', "consolidated.safetensors": b"\0" * 64}},
            {"main": SHA_MAIN},
        ),
        HubRepo(
            "acme/st-embedder",
            {SHA_MAIN: {**tiny_files(), "modules.json": ST_MODULES, "sentence_bert_config.json": ST_CONFIG}},
            {"main": SHA_MAIN},
        ),
        HubRepo(
            "acme/bad-header",
            {
                SHA_MAIN: {
                    "config.json": tiny_files()["config.json"],
                    "model.safetensors": VirtualFile((10**12).to_bytes(8, "little") + b"{}", 4096),
                }
            },
            {"main": SHA_MAIN},
        ),
        HubRepo(
            "acme/truncated",
            {
                SHA_MAIN: {
                    "config.json": tiny_files()["config.json"],
                    "model.safetensors": (200_000).to_bytes(8, "little") + b'{"a":',
                }
            },
            {"main": SHA_MAIN},
        ),
    ]
    with HubServer(repos) as server:
        yield server


def source(hub: HubServer, tmp_path: Path, **kw: Any) -> HubSource:
    settings = HubSettings(
        endpoint=hub.url,
        token=kw.pop("token", None),
        timeout_s=kw.pop("timeout_s", 2.0),
        deadline_s=kw.pop("deadline_s", 10.0),
        offline=kw.pop("offline", False),
    )
    return HubSource(settings, FactsCache(tmp_path / "cache", **kw))


def test_sharded_checkpoint_reads_headers_only(hub: HubServer, tmp_path: Path) -> None:
    facts = source(hub, tmp_path).resolve("meta-llama/Llama-3.1-8B-Instruct")
    assert facts.revision == SHA_MAIN and facts.weights_basis == "safetensors"
    assert facts.tensors is not None and facts.tensors.tensor_count == 291 and facts.total_size == 16_060_522_496
    # headers only: four shard headers (<= 100 kB each), the index and config.json, far under 1 MiB
    assert hub.bytes_sent < 1 << 20
    assert not any("bytes=" in r for r in hub.requests)  # (requests log paths; ranges are in headers)


def test_catalog_and_hub_give_the_same_plan(hub: HubServer, tmp_path: Path) -> None:
    via_hub = to_model_input(source(hub, tmp_path).resolve("meta-llama/Llama-3.1-8B-Instruct"))
    via_catalog = to_model_input(resolve("meta-llama/Llama-3.1-8B-Instruct", source="catalog"))
    gpu, serving = lookup_gpu("H100"), ServingConfig(max_model_len=32768)
    a, b = plan(via_hub, gpu, serving), plan(via_catalog, gpu, serving)
    assert a.per_gpu == b.per_gpu and a.kv == b.kv and a.verdict is b.verdict


def test_revision_pinning(hub: HubServer, tmp_path: Path) -> None:
    src = source(hub, tmp_path)
    main = src.resolve("acme/tiny")
    tagged = src.resolve("acme/tiny", "v1.0")
    pinned = src.resolve("acme/tiny", SHA_V1)
    assert (main.revision, tagged.revision, pinned.revision) == (SHA_MAIN, SHA_V1, SHA_V1)
    assert main.config["max_position_embeddings"] == 4096 and tagged.config["max_position_embeddings"] == 2048


def test_unknown_repo_and_revision(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="repository not found") as exc:
        source(hub, tmp_path).resolve("acme/missing")
    assert not exc.value.transient
    with pytest.raises(CheckpointError, match="revision not found"):
        source(hub, tmp_path).resolve("acme/tiny", "v9")


def test_gated_repo_needs_a_token_and_never_leaks_it(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="gated repository: set HF_TOKEN"):
        source(hub, tmp_path).resolve("acme/gated")
    with pytest.raises(CheckpointError, match="the token was refused") as exc:
        source(hub, tmp_path, token="hf_wrong_" + TOKEN).resolve("acme/gated")
    assert TOKEN not in str(exc.value)
    facts = source(hub, tmp_path, token=TOKEN).resolve("acme/gated")
    assert facts.revision == SHA_MAIN and TOKEN not in json.dumps(facts.__dict__, default=str)


def test_5xx_then_success(hub: HubServer, tmp_path: Path) -> None:
    hub.fail(r"^/api/models/acme/tiny", 503, times=2)
    facts = source(hub, tmp_path).resolve("acme/tiny")
    assert facts.revision == SHA_MAIN
    assert sum(r.startswith("GET /api/models/acme/tiny") for r in hub.requests) == 3


def test_slow_server_times_out_within_the_deadline(hub: HubServer, tmp_path: Path) -> None:
    hub.slow(r"^/api/models/acme/tiny", 3.0)
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"timed out after 0\.5s") as exc:
        source(hub, tmp_path, timeout_s=0.5, deadline_s=2.0).resolve("acme/tiny")
    assert exc.value.transient and time.monotonic() - start < 5


def test_oversized_and_truncated_headers(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(
        CheckpointError, match=r"bad-header/model.safetensors: 'header length 10+' .* at most 100000000"
    ):
        source(hub, tmp_path).resolve("acme/bad-header")
    with pytest.raises(CheckpointError, match=r"truncated/model.safetensors: .*within the file's 13 bytes \(truncated"):
        source(hub, tmp_path).resolve("acme/truncated")


def test_oversized_config_is_refused(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="more than the 8388608-byte limit"):
        source(hub, tmp_path).resolve("acme/huge-config")


def test_a_mistral_format_checkpoint_is_not_modelled_not_refused(hub: HubServer, tmp_path: Path) -> None:
    # hunt180 F2: mistralai/Mistral-Small-4-119B-2603-NVFP4 has params.json and consolidated safetensors, no
    # config.json; vLLM reads params.json (transformers_utils/config.py 0.28.0 L687-716) and the recipe serves it.
    # A missing config.json was a permanent checkpoint error; it is Unknown (NotModelledError), here and on disk.
    with pytest.raises(NotModelledError, match="Mistral's native format"):
        source(hub, tmp_path).resolve("acme/mistral-native")
    local = tmp_path / "mistral"
    local.mkdir()
    (local / "params.json").write_text('{"dim": 4096}')
    with pytest.raises(NotModelledError, match="Mistral's native format"):
        load_directory(local)
    (local / "params.json").unlink()  # no config.json and nothing else: still the checkpoint's error
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_directory(local)


def test_non_safetensors_checkpoint_is_estimated(hub: HubServer, tmp_path: Path) -> None:
    facts = source(hub, tmp_path).resolve("acme/pytorch-only")
    assert facts.weights_basis == "estimated" and "estimated from config.json" in facts.notes[0]


def test_cache_hit_with_the_server_stopped(hub: HubServer, tmp_path: Path) -> None:
    src = source(hub, tmp_path)
    expired = source(hub, tmp_path, ref_ttl_s=0.0)
    first = src.resolve("acme/tiny")
    hub.stop()
    again = src.resolve("acme/tiny")  # branch within its TTL: no request at all
    assert again == first
    stale = expired.resolve("acme/tiny")  # TTL over, Hub down: stale-if-error
    assert stale.revision == SHA_MAIN and "could not be reached" in stale.notes[-1]


def test_offline_mode_falls_back_to_the_catalog(hub: HubServer, tmp_path: Path) -> None:
    offline = source(hub, tmp_path, offline=True)
    facts = resolve("meta-llama/Llama-3.1-8B-Instruct", hub=offline)
    assert facts.source == "catalog" and "built-in catalog" in facts.notes[-1]
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE") as exc:
        resolve("acme/tiny", hub=offline)
    assert exc.value.transient
    assert hub.requests == []


def test_definitive_answers_are_not_replaced_by_the_catalog(hub: HubServer, tmp_path: Path) -> None:
    hub.repos.append(
        HubRepo(
            "meta-llama/Llama-3.1-70B-Instruct", {SHA_MAIN: tiny_files()}, {"main": SHA_MAIN}, token=TOKEN, gated=True
        )
    )
    with pytest.raises(CheckpointError, match="gated"):
        resolve("meta-llama/Llama-3.1-70B-Instruct", hub=source(hub, tmp_path))


@pytest.mark.parametrize("ref", ["http://169.254.169.254/latest", "acme/tiny@../../etc", "../etc/passwd@x", "a/b/c"])
def test_references_are_repo_ids_not_urls(ref: str, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError):
        resolve(
            ref,
            source="hub",
            hub=HubSource(HubSettings(endpoint="http://127.0.0.1:9", timeout_s=0.2), FactsCache(tmp_path)),
        )


def test_cache_is_safe_under_concurrent_use(tmp_path: Path) -> None:
    cache = FactsCache(tmp_path)
    facts = resolve("meta-llama/Llama-3.1-8B-Instruct", source="catalog")
    facts = type(facts)(**{**facts.__dict__, "revision": SHA_MAIN})
    seen: list[object] = []
    errors: list[BaseException] = []

    def writer() -> None:
        for _ in range(20):
            cache.put("e", "r", facts)

    def reader() -> None:
        try:
            for _ in range(200):
                seen.append(cache.get("e", "r", SHA_MAIN))
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(3)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(s is None or s == facts for s in seen)  # never a torn file
    assert cache.get("e", "r", SHA_MAIN) == facts


def test_cache_is_bounded(tmp_path: Path) -> None:
    cache = FactsCache(tmp_path, max_bytes=8000)
    facts = resolve("meta-llama/Llama-3.1-8B-Instruct", source="catalog")
    for i in range(10):
        cache.put("e", f"r{i}", type(facts)(**{**facts.__dict__, "revision": f"{i:040d}"}))
        time.sleep(0.01)
    files = list((tmp_path / "facts").glob("*.json"))
    assert sum(f.stat().st_size for f in files) <= 8000
    assert cache.get("e", "r9", f"{9:040d}") is not None  # the newest survives


def test_a_sentence_transformers_checkpoint_is_served_pooling_by_default(hub: HubServer, tmp_path: Path) -> None:
    # hunt46 F1: vLLM 0.10.1+ serves a checkpoint whose modules.json lists a pooling module with the pooling runner
    # whatever its *ForCausalLM architecture (config/model.py 0.34.0 L1303-1311): no sampler warm-up, no lm_head
    facts = source(hub, tmp_path).resolve("acme/st-embedder")
    assert facts.pooling_config and any("modules.json" in r for r in hub.requests)
    plain = source(hub, tmp_path / "other").resolve("acme/tiny")
    assert not plain.pooling_config and not any("acme/tiny" in r and "modules.json" in r for r in hub.requests)
    cached = source(hub, tmp_path).resolve("acme/st-embedder")  # from the facts cache: the flag kept
    assert cached.pooling_config
    auto = plan(to_model_input(facts), lookup_gpu("L4"), ServingConfig(max_model_len=256))
    assert auto.serving.runner == "pooling"
    # its sentence_bert_config.json's max_seq_length is vLLM's derived length (config/model.py 0.34.0 L2680-2681),
    # read once and kept by the facts cache: the default max_model_len is 512, not the config's 2048 positions
    assert facts.st_max_seq_length == cached.st_max_seq_length == 512
    assert any("sentence_bert_config.json" in r for r in hub.requests)
    default = plan(to_model_input(cached), lookup_gpu("L4"), ServingConfig())
    assert default.serving.max_model_len == 512 and plain.st_max_seq_length is None
