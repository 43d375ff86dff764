"""Checkpoint resolution against the loopback Hub: bytes read, cold and warm resolution time.

Serves faithful checkpoints (real configs, real safetensors headers, virtual tensor data) from
tests/hub_server.py on 127.0.0.1 and resolves them through the real huggingface_hub client.

Usage: python benchmarks/hub.py   (prints one JSON line per model)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import catalog_config
from tests.hub_server import HubRepo, HubServer, sharded_checkpoint

from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.hub import HubSettings, HubSource

FIXTURE = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hub" / "llama-3.1-8b.model.safetensors.index.json"
)
SHA = "c" * 40
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": json.loads(FIXTURE.read_text())["weight_map"],
    "meta-llama/Llama-3.1-70B-Instruct": None,
    "Qwen/Qwen2.5-7B-Instruct": None,
}


def main() -> int:
    repos = []
    for repo, weight_map in MODELS.items():
        config = catalog_config(repo)
        shards = 30 if "70B" in repo else 4
        repos.append(HubRepo(repo, {SHA: sharded_checkpoint(config, weight_map, shards=shards)}, {"main": SHA}))
    with HubServer(repos) as hub:
        for repo in MODELS:
            cold: list[float] = []
            warm: list[float] = []
            sent = requests = 0
            for _ in range(5):
                with tempfile.TemporaryDirectory() as tmp:
                    src = HubSource(HubSettings(endpoint=hub.url, timeout_s=5), FactsCache(Path(tmp)))
                    hub.reset_counters()
                    start = time.perf_counter()
                    facts = src.resolve(repo)
                    cold.append(time.perf_counter() - start)
                    sent, requests = hub.bytes_sent, len(hub.requests)
                    for _ in range(20):
                        start = time.perf_counter()
                        src.resolve(repo)
                        warm.append(time.perf_counter() - start)
            print(
                json.dumps(
                    {
                        "model": repo,
                        "tensors": facts.tensors.tensor_count if facts.tensors else 0,
                        "requests": requests,
                        "bytes_read": sent,
                        "cold_ms_median": round(1000 * statistics.median(cold), 1),
                        "warm_ms_median": round(1000 * statistics.median(warm), 2),
                    }
                )
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
