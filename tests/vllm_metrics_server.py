"""A loopback vLLM ``/metrics`` endpoint: the exposition text vLLM 0.33 serves, made by the real ``prometheus_client``.

``vllm serve`` sets ``PROMETHEUS_MULTIPROC_DIR`` (vllm/entrypoints/cli/serve.py:283,
vllm/v1/metrics/prometheus.py:17-36), so its ``/metrics`` is a ``MultiProcessCollector`` over a fresh
``CollectorRegistry`` (prometheus.py:39-53) served by ``prometheus_client.make_asgi_app``
(vllm/entrypoints/serve/instrumentator/metrics.py:58,77): gzip when the client accepts it, ``# HELP ...
Multiprocess metric`` lines, no ``_created`` samples. The multiprocess value class is chosen when
``prometheus_client`` is imported, so this server runs as its own process (as vLLM's API server does):
``VllmMetrics`` starts it and drives it over a control endpoint.

The metrics are declared exactly as ``PrometheusStatLogger.__init__`` declares them
(vllm/v1/metrics/loggers.py of vLLM 0.33.0, unpacked from the PyPI wheel ``vllm-0.33.0``):

* labels ``model_name`` (the served model name) and ``engine`` (the engine index as a string), loggers.py:499-505;
* ``vllm:num_requests_running`` / ``_waiting`` gauges (mostrecent), loggers.py:527-545;
* ``vllm:engine_sleep_state`` gauge with ``sleep_state``, loggers.py:593-603;
* ``vllm:kv_cache_usage_perc`` gauge, loggers.py:619-624;
* ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` counters, loggers.py:661-677;
* ``vllm:num_preemptions`` counter, loggers.py:738-742;
* ``vllm:prompt_tokens`` / ``vllm:generation_tokens`` counters, loggers.py:747-801;
* ``vllm:request_success`` counter with ``finished_reason`` (one series per ``FinishReason``:
  stop, length, abort, error, repetition; vllm/v1/engine/__init__.py:49-70), loggers.py:808-820;
* ``vllm:time_to_first_token_seconds`` histogram (buckets of vllm/v1/metrics/buckets.py), loggers.py:930-935;
* ``vllm:cache_config_info``: a gauge set to 1 whose labels are ``CacheConfig.metrics_info()`` (every
  field of ``CacheConfig.__dict__`` as ``str``, vllm/config/cache.py:440-443, in declaration order
  cache.py:187-445) plus ``engine``, loggers.py:1114-1137, written once the engine is up.

Only the families fitgate reads and one histogram are declared; vLLM declares ~40 more (more histograms,
LoRA, spec decode, KV connector), and the API server's own ``http_*`` series are not made here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app, multiprocess

#: CacheConfig fields of vLLM 0.33.0 (vllm/config/cache.py:187-445) with their values after start-up
#: for a default ``vllm serve`` (``None`` -> "None", as ``str()`` writes them).
CACHE_CONFIG_FIELDS: tuple[tuple[str, str], ...] = (
    ("block_size", "16"),
    ("user_specified_block_size", "False"),
    ("kv_cache_layout", "None"),
    ("prefix_match_unit", "None"),
    ("gpu_memory_utilization", "0.92"),
    ("cache_dtype", "auto"),
    ("is_attention_free", "False"),
    ("num_gpu_blocks_override", "None"),
    ("sliding_window", "None"),
    ("enable_prefix_caching", "True"),
    ("prefix_caching_hash_algo", "sha256"),
    ("prefix_cache_retention_interval", "0"),
    ("kv_cache_dtype_skip_layers", "[]"),
    ("mamba_page_size_padded", "None"),
    ("skip_page_size_padded", "None"),
    ("mamba_block_size", "None"),
    ("mamba_cache_dtype", "auto"),
    ("mamba_ssm_cache_dtype", "auto"),
    ("mamba_cache_mode", "none"),
    ("enable_mamba_shared_prefix_checkpoint", "False"),
    ("replayssm_buffer_len", "16"),
    ("use_replayssm", "False"),
    ("use_kda_recoverssm", "False"),
    ("num_gpu_blocks", "None"),
    ("num_cpu_blocks", "None"),
    ("simple_cpu_offload_num_blocks", "None"),
    ("effective_attention_block_size", "None"),
    ("kv_cache_size_tokens", "None"),
    ("kv_cache_max_concurrency", "None"),
    ("hash_block_size", "None"),
    ("cache_hit_alignment_tokens", "None"),
    ("kv_sharing_fast_prefill", "False"),
    ("swa_bounded_replay", "True"),
    ("kv_cache_memory_bytes", "None"),
    ("kv_offloading_size", "None"),
    ("kv_offloading_backend", "native"),
    ("_block_size_resolved", "True"),
)

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vllm/v1/engine/__init__.py:37
#: TIME_TO_FIRST_TOKEN_BUCKETS, vllm/v1/metrics/buckets.py:57-80 (0.33.0).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
TTFT_BUCKETS += (40.0, 80.0, 160.0, 640.0, 2560.0)  # buckets.py:57-80


def _serve(port: int, cache: dict[str, str], model_name: str, engines: int) -> None:  # pragma: no cover - child
    """The child process: declare the metrics as vLLM does and serve them with make_wsgi_app."""
    labelnames = ["model_name", "engine"]
    per_engine = {i: [model_name, str(i)] for i in range(engines)}

    def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name=name, documentation=doc, multiprocess_mode="mostrecent", labelnames=[*labelnames, *extra])

    running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
    waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
    sleep = gauge(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
        "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        ("sleep_state",),
    )
    kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
    queries = Counter(
        name="vllm:prefix_cache_queries",
        documentation="Prefix cache queries, in terms of number of queried tokens.",
        labelnames=labelnames,
    )
    hits = Counter(
        name="vllm:prefix_cache_hits",
        documentation="Prefix cache hits, in terms of number of cached tokens.",
        labelnames=labelnames,
    )
    preempt = Counter(
        name="vllm:num_preemptions",
        documentation="Cumulative number of preemption from the engine.",
        labelnames=labelnames,
    )
    prompt = Counter(
        name="vllm:prompt_tokens", documentation="Number of prefill tokens processed.", labelnames=labelnames
    )
    generation = Counter(
        name="vllm:generation_tokens", documentation="Number of generation tokens processed.", labelnames=labelnames
    )
    success = Counter(
        name="vllm:request_success",
        documentation="Count of successfully processed requests.",
        labelnames=[*labelnames, "finished_reason"],
    )
    ttft = Histogram(
        name="vllm:time_to_first_token_seconds",
        documentation="Histogram of time to first token in seconds.",
        buckets=TTFT_BUCKETS,
        labelnames=labelnames,
    )
    info = Gauge(
        name="vllm:cache_config_info",
        documentation="Information of the LLMEngine CacheConfig",
        multiprocess_mode="mostrecent",
        labelnames=[*cache, "engine"],
    )
    for idx, values in per_engine.items():
        running.labels(*values).set(0)
        waiting.labels(*values).set(0)
        kv_usage.labels(*values).set(0)
        for state, v in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.labels(*values, state).set(v)
        for c in (queries, hits, preempt, prompt, generation):
            c.labels(*values)
        for reason in FINISH_REASONS:
            success.labels(*values, reason)
        ttft.labels(*values)
        info.labels(**cache, engine=str(idx)).set(1)

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    metrics_app = make_wsgi_app(registry)
    state: dict[str, Any] = {"mode": "normal"}

    def apply(change: dict[str, Any]) -> None:
        for idx, values in per_engine.items():
            if idx != int(change.get("engine", idx)):
                continue
            for key, metric in (("running", running), ("waiting", waiting), ("kv_usage", kv_usage)):
                if key in change:
                    metric.labels(*values).set(change[key])
            for key, metric in (
                ("queries", queries),
                ("hits", hits),
                ("preemptions", preempt),
                ("prompt_tokens", prompt),
                ("generation_tokens", generation),
            ):
                if change.get(key):
                    metric.labels(*values).inc(change[key])
            if change.get("requests"):
                success.labels(*values, "stop").inc(change["requests"])
            for seconds in change.get("ttft", ()):
                ttft.labels(*values).observe(seconds)
        if "mode" in change:
            state["mode"] = change["mode"]

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/_fixture/state" and environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            apply(json.loads(body))
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b"{}"]
        mode = state["mode"]
        if path == "/metrics" and mode == "hang":
            time.sleep(3600)
        if path == "/metrics" and mode == "garbage":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b'vllm:num_requests_running{model_name="x" 1 2 3\n\x00\xff{{{ not metrics\n']
        if path == "/metrics" and mode == "huge":
            start_response("200 OK", [("Content-Type", "text/plain")])
            line = b"# " + b"x" * 1022 + b"\n"
            return (line for _ in range(10 * 1024))  # 10 MiB of comments, streamed
        if path == "/metrics" and mode == "redirect":
            start_response("302 Found", [("Location", "http://169.254.169.254/metrics")])
            return [b""]
        return metrics_app(environ, start_response)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = make_server("127.0.0.1", port, app, server_class=Server, handler_class=Quiet)
    print(f"PORT {httpd.server_port}", flush=True)
    httpd.serve_forever()


class VllmMetrics:
    """The fixture server as a child process; ``set(...)`` moves its metrics, ``mode(...)`` injects faults.

    Modes: ``normal``; ``hang`` (never answers); ``garbage`` (200 with bytes that are not the text
    format); ``huge`` (10 MiB streamed); ``redirect`` (302 to another host).
    """

    def __init__(
        self,
        *,
        num_gpu_blocks: int = 31_000,
        block_size: int = 16,
        gpu_memory_utilization: float = 0.92,
        cache_dtype: str = "auto",
        model_name: str = "meta-llama/Llama-3.1-8B-Instruct",
        engines: int = 1,
        port: int = 0,
    ) -> None:
        cache = dict(CACHE_CONFIG_FIELDS)
        blocks_tokens = num_gpu_blocks * block_size
        cache.update(
            block_size=str(block_size),
            gpu_memory_utilization=str(gpu_memory_utilization),
            cache_dtype=cache_dtype,
            num_gpu_blocks=str(num_gpu_blocks),
            kv_cache_size_tokens=str(blocks_tokens),
        )
        self.config = {"cache": cache, "model_name": model_name, "engines": engines, "port": port}
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VllmMetrics:
        self._dir = tempfile.TemporaryDirectory(prefix="vllm-prom-")
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": self._dir.name}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), json.dumps(self.config)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"vLLM metrics fixture did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> VllmMetrics:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def set(self, **change: Any) -> None:
        """Gauges (running, waiting, kv_usage) are set; counters (queries, hits, preemptions,
        prompt_tokens, generation_tokens, requests) are increased; ttft: observations."""
        request = urllib.request.Request(f"{self.url}/_fixture/state", data=json.dumps(change).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as r:
            r.read()

    def mode(self, mode: str) -> None:
        self.set(mode=mode)

    def text(self) -> str:
        """The exposition text, as a plain client (no gzip) gets it."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as r:
            return str(r.read().decode())


if __name__ == "__main__":  # pragma: no cover - the child process
    settings = json.loads(sys.argv[1])
    _serve(settings["port"], settings["cache"], settings["model_name"], settings["engines"])
