"""Prometheus metrics, owned by one :class:`Metrics` object with its own registry, plus /healthz and /readyz.

Names are prefixed ``fitgate_`` with the unit as suffix; labels are bounded (namespace/name of
ModelDeployments, a fixed set of results and verdicts).
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from fitgate.operator.base.metrics_auth import MetricsAuth

VERDICTS = ("Fits", "Tight", "DoesNotFit", "Unknown")
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """fitgate's metrics and the tiny HTTP server that exposes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        #: Each deployment's verdict and memory series (:meth:`observe`), by (namespace, name).
        self._series: dict[tuple[str, str], dict[object, Any]] = {}
        self.verdict = Gauge(
            "fitgate_deployment_verdict",
            "1 for the current verdict of a ModelDeployment, else 0",
            ["namespace", "name", "verdict"],
            registry=self.registry,
        )
        self.required = Gauge(
            "fitgate_deployment_required_bytes",
            "Per-GPU bytes the deployment needs (weights, activation, non-torch, KV for its workload)",
            ["namespace", "name"],
            registry=self.registry,
        )
        self.headroom = Gauge(
            "fitgate_deployment_headroom_bytes",
            "Per-GPU KV bytes left after the workload",
            ["namespace", "name"],
            registry=self.registry,
        )
        self.kv_tokens = Gauge(
            "fitgate_deployment_kv_capacity_tokens",
            "KV cache size in tokens as vLLM reports it",
            ["namespace", "name"],
            registry=self.registry,
        )
        self.admission = Counter(
            "fitgate_admission_requests_total", "Admission reviews by result", ["result"], registry=self.registry
        )
        self.admission_seconds = Histogram(
            "fitgate_admission_duration_seconds",
            "Time to answer an admission review",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        # A workload review fitgate could not evaluate (an exception on its way): answered Unknown through the
        # namespace's mode and the Unknown policy, so under Warn/Allow the object is admitted unchecked; the
        # chart's FitgateWorkloadAdmissionErrors alert watches it (the workload webhooks fail open).
        self.workload_admission_errors = Counter(
            "fitgate_workload_admission_errors_total",
            "Workload admission reviews fitgate could not evaluate, by kind and answer (allowed or denied)",
            ["kind", "allowed"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "fitgate_reconcile_duration_seconds",
            "Time to evaluate and patch status",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.resolution_errors = Counter(
            "fitgate_checkpoint_resolution_errors_total",
            "Checkpoint resolutions that failed, by kind",
            ["kind"],
            registry=self.registry,
        )
        observed = ["namespace", "name"]
        self.observed_blocks = Gauge(
            "fitgate_observed_kv_blocks",
            "num_gpu_blocks vLLM reports in vllm:cache_config_info (the smallest of the deployment's pods)",
            observed,
            registry=self.registry,
        )
        self.observed_tokens = Gauge(
            "fitgate_observed_kv_capacity_tokens",
            "The observed KV cache size in tokens (num_gpu_blocks x block_size)",
            observed,
            registry=self.registry,
        )
        self.prediction_error = Gauge(
            "fitgate_prediction_error_ratio",
            "(observed - predicted) / predicted num_gpu_blocks; negative: vLLM got fewer blocks",
            observed,
            registry=self.registry,
        )
        self.at_capacity = Gauge(
            "fitgate_at_capacity",
            "1 when the deployment's pods preempt requests or fill the KV cache to 95 % or more, else 0",
            observed,
            registry=self.registry,
        )
        self.kv_usage = Gauge(
            "fitgate_observed_kv_usage_ratio",
            "Peak vllm:kv_cache_usage_perc of the deployment's pods over the window (1 = full)",
            observed,
            registry=self.registry,
        )
        self.preemptions = Gauge(
            "fitgate_observed_preemptions_per_minute",
            "Preemptions per minute of the deployment's pods over the window",
            observed,
            registry=self.registry,
        )
        self.scrapes = Counter(
            "fitgate_observe_scrapes_total",
            "Reads of serving pods (spec.observe, audited workloads) by result",
            ["result"],
            registry=self.registry,
        )
        self.workload_verdict = Gauge(
            "fitgate_workload_verdict",
            "1 for the current verdict of a vLLM workload (Deployment, LeaderWorkerSet, ...) the audit read, else 0",
            ["namespace", "kind", "name", "verdict"],
            registry=self.registry,
        )
        workload = ["namespace", "kind", "name"]
        self.workload_observed_blocks = Gauge(
            "fitgate_workload_observed_kv_blocks",
            "num_gpu_blocks the serving pods of an audited vLLM workload report (the smallest of its pods)",
            workload,
            registry=self.registry,
        )
        self.workload_prediction_error = Gauge(
            "fitgate_workload_prediction_error_ratio",
            "(observed - predicted) / predicted num_gpu_blocks of an audited vLLM workload",
            workload,
            registry=self.registry,
        )
        self.workload_at_capacity = Gauge(
            "fitgate_workload_at_capacity",
            "1 when an audited vLLM workload's pods preempt requests or fill the KV cache to 95 % or more, else 0",
            workload,
            registry=self.registry,
        )
        self.ready = False
        self._runner: web.AppRunner | None = None

    def observe(
        self, namespace: str, name: str, verdict: str, required: int | None, headroom: int | None, tokens: int | None
    ) -> None:
        """Record a deployment's latest evaluation.

        The deployment's series are looked up once and kept (:attr:`_series`, one entry per deployment, dropped by
        :meth:`forget`): ``labels()`` validates and hashes its values on every call, seven calls a reconcile, a
        twentieth of a cold start's CPU (issue 23).
        """
        series = self._series.setdefault((namespace, name), {})
        for v in VERDICTS:
            child = series.get(v)
            if child is None:
                child = series[v] = self.verdict.labels(namespace, name, v)
            child.set(1 if v == verdict else 0)
        for gauge, value in ((self.required, required), (self.headroom, headroom), (self.kv_tokens, tokens)):
            if value is None:
                series.pop(gauge, None)
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, name)
                continue
            child = series.get(gauge)
            if child is None:
                child = series[gauge] = gauge.labels(namespace, name)
            child.set(value)

    def observed(
        self,
        namespace: str,
        name: str,
        blocks: int | None,
        tokens: int | None,
        error_ratio: float | None,
        at_capacity: bool | None,
        kv_usage: float | None,
        preemptions_per_minute: float | None,
    ) -> None:
        """Record what a deployment's pods report (spec.observe); None removes a series."""
        values = (
            (self.observed_blocks, blocks),
            (self.observed_tokens, tokens),
            (self.prediction_error, error_ratio),
            (self.at_capacity, None if at_capacity is None else int(at_capacity)),
            (self.kv_usage, kv_usage),
            (self.preemptions, preemptions_per_minute),
        )
        _put(values, namespace, name)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted deployment's series."""
        self._series.pop((namespace, name), None)
        for v in VERDICTS:
            with contextlib.suppress(KeyError):
                self.verdict.remove(namespace, name, v)
        for gauge in (self.required, self.headroom, self.kv_tokens, *self._observed_gauges()):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, name)

    def _observed_gauges(self) -> tuple[Gauge, ...]:
        return (
            self.observed_blocks,
            self.observed_tokens,
            self.prediction_error,
            self.at_capacity,
            self.kv_usage,
            self.preemptions,
        )

    def observe_workload(self, namespace: str, kind: str, name: str, verdict: str | None) -> None:
        """Record a workload's verdict (None: it is gone, or no longer opted in: drop its series)."""
        for v in VERDICTS:
            if verdict is None:
                with contextlib.suppress(KeyError):
                    self.workload_verdict.remove(namespace, kind, name, v)
            else:
                self.workload_verdict.labels(namespace, kind, name, v).set(1 if v == verdict else 0)

    def observed_workload(
        self,
        namespace: str,
        kind: str,
        name: str,
        blocks: int | None,
        error_ratio: float | None,
        at_capacity: bool | None,
    ) -> None:
        """Record what an audited workload's pods report; None removes a series (all None: the workload is gone)."""
        values = (
            (self.workload_observed_blocks, blocks),
            (self.workload_prediction_error, error_ratio),
            (self.workload_at_capacity, None if at_capacity is None else int(at_capacity)),
        )
        _put(values, namespace, kind, name)

    def exposition(self) -> bytes:
        """The Prometheus text format."""
        return generate_latest(self.registry)

    async def serve(self, host: str, port: int, auth: MetricsAuth | None = None) -> None:
        """Serve /metrics, /healthz and /readyz; with ``auth``, /metrics needs an authorized bearer token."""
        app = web.Application()

        async def metrics(request: web.Request) -> web.Response:
            if auth is not None:  # hardening (issue 22): TokenReview + SubjectAccessReview
                code = await auth.status(request.headers.get("Authorization"))
                if code != 200:
                    return web.Response(status=code, text="Unauthorized" if code == 401 else "Forbidden")
            return web.Response(body=self.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            return web.Response(text="ready" if self.ready else "starting", status=200 if self.ready else 503)

        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()

    async def close(self) -> None:
        """Stop the HTTP server."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _put(values: tuple[tuple[Gauge, float | None], ...], *labels: str) -> None:
    """Set each gauge's series of ``labels`` to its value; None removes the series."""
    for gauge, value in values:
        if value is None:
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        else:
            gauge.labels(*labels).set(value)
