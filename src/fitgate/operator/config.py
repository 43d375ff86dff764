"""Operator settings: from ``FITGATE_*`` environment variables, overridable by ``fitgate operator`` flags."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _flag(name: str, default: bool) -> bool:
    return _env(name, "true" if default else "false").strip().lower() in {"1", "true", "yes", "on"}


UnknownPolicy = Literal["Allow", "Warn", "Deny"]
UNKNOWN_POLICIES: tuple[UnknownPolicy, ...] = ("Allow", "Warn", "Deny")


def _seconds(name: str, default: str, low: int, high: int) -> int:
    text = _env(name, default)
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ValueError(f"{name}: {text!r} is not valid; expected whole seconds from {low} to {high}")
    return value


@dataclass(frozen=True)
class OperatorConfig:
    """Everything the operator process is configured with.

    Attributes:
        webhook_port: Port of the admission webhook server (0 disables it).
        webhook_addr: Address it listens on.
        webhook_host: Host name or IP the API server uses to reach it (for a managed configuration).
        webhook_cert, webhook_key: Serving certificate and key files (mounted by the chart; reloaded on change).
        webhook_ca: CA bundle file written into a managed configuration's caBundle.
        webhook_managed: Name of a ValidatingWebhookConfiguration kopf creates and keeps up to date
            (out-of-cluster development); empty when the chart installs its own.
        metrics_addr, metrics_port: /metrics, /healthz and /readyz.
        resync_s: How often every ModelDeployment is re-evaluated against the current GPU inventory.
        admission_resolve_s: How long admission waits for a first checkpoint resolution before answering
            Unknown (the Hub is never allowed to hang admission).
        reconcile_resolve_s: How long reconcile waits for a resolution before retrying later.
        unknown_policy: What admission does with an Unknown verdict when the spec's ``policy.onUnknown`` is
            unset: Allow, Warn (admit with a warning) or Deny (``Reject``, its older name, is read as Deny).
        model_roots: Directories under which ``source: path`` models may lie (``FITGATE_MODEL_ROOTS``,
            ``os.pathsep``-separated); empty: no directories at all (the operator's filesystem is not for
            every ModelDeployment author to probe).
        namespaces: Namespaces to watch (empty: all).
        standalone: Run without kopf peering (single replica).
        peering: kopf peering object name for HA (several replicas, one active reconciler).
        peering_lifetime_s: How long a replica's peering keep-alive counts (kopf's ``settings.peering.lifetime``;
            it is renewed 5-10 s before it runs out, at least every second): after a ``kill -9`` of the
            active replica, the standby takes over once this has passed since the last keep-alive.
        gpu_hour_prices: ``FITGATE_GPU_HOUR_PRICES``: the cluster's USD per GPU-hour, one price (``2.5``) or per
            catalog GPU (``H100=2.5,L4=0.7``; chart value ``prices``), for status.observed.usdPerRequest.
        scrape_timeout_s, scrape_max_bytes: Bounds of one read of a serving pod's /metrics (spec.observe):
            ``FITGATE_SCRAPE_TIMEOUT_SECONDS`` (1-60) and ``FITGATE_SCRAPE_MAX_BYTES`` (64 KiB-64 MiB).
    """

    webhook_port: int = 9443
    webhook_addr: str = "0.0.0.0"
    webhook_host: str | None = None
    webhook_cert: str | None = None
    webhook_key: str | None = None
    webhook_ca: str | None = None
    webhook_managed: str | None = None
    metrics_addr: str = "0.0.0.0"
    metrics_port: int = 8080
    resync_s: float = 60.0
    admission_resolve_s: float = 1.0
    reconcile_resolve_s: float = 20.0
    unknown_policy: UnknownPolicy = "Warn"
    model_roots: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    standalone: bool = True
    peering: str | None = None
    peering_lifetime_s: int = 10
    gpu_hour_prices: str = ""
    scrape_timeout_s: float = 5.0
    scrape_max_bytes: int = 4 * 1024 * 1024

    @classmethod
    def from_env(cls) -> OperatorConfig:
        """Settings from ``FITGATE_*`` variables (the chart sets these)."""
        policy = _env("FITGATE_UNKNOWN_POLICY", "Warn")
        policy = "Deny" if policy == "Reject" else policy
        if policy not in UNKNOWN_POLICIES:
            raise ValueError(f"FITGATE_UNKNOWN_POLICY: {policy!r} is not valid; expected Allow, Warn or Deny")
        namespaces = tuple(n for n in _env("FITGATE_NAMESPACES", "").split(",") if n.strip())
        roots = tuple(r.strip() for r in _env("FITGATE_MODEL_ROOTS", "").split(os.pathsep) if r.strip())
        for root in roots:
            if not root.startswith("/"):
                raise ValueError(f"FITGATE_MODEL_ROOTS: {root!r} is not valid; expected absolute directories")
        return cls(
            webhook_port=int(_env("FITGATE_WEBHOOK_PORT", "9443")),
            webhook_addr=_env("FITGATE_WEBHOOK_ADDR", "0.0.0.0"),
            webhook_host=os.environ.get("FITGATE_WEBHOOK_HOST") or None,
            webhook_cert=os.environ.get("FITGATE_WEBHOOK_CERT") or None,
            webhook_key=os.environ.get("FITGATE_WEBHOOK_KEY") or None,
            webhook_ca=os.environ.get("FITGATE_WEBHOOK_CA") or None,
            webhook_managed=os.environ.get("FITGATE_WEBHOOK_MANAGED") or None,
            metrics_addr=_env("FITGATE_METRICS_ADDR", "0.0.0.0"),
            metrics_port=int(_env("FITGATE_METRICS_PORT", "8080")),
            resync_s=float(_env("FITGATE_RESYNC_SECONDS", "60")),
            admission_resolve_s=float(_env("FITGATE_ADMISSION_RESOLVE_SECONDS", "1.0")),
            reconcile_resolve_s=float(_env("FITGATE_RECONCILE_RESOLVE_SECONDS", "20")),
            unknown_policy=policy,
            model_roots=roots,
            namespaces=namespaces,
            standalone=_flag("FITGATE_STANDALONE", True),
            peering=os.environ.get("FITGATE_PEERING") or None,
            peering_lifetime_s=_seconds("FITGATE_PEERING_LIFETIME_SECONDS", "10", 2, 3600),
            gpu_hour_prices=_prices(_env("FITGATE_GPU_HOUR_PRICES", "")),
            scrape_timeout_s=_seconds("FITGATE_SCRAPE_TIMEOUT_SECONDS", "5", 1, 60),
            scrape_max_bytes=_bytes("FITGATE_SCRAPE_MAX_BYTES", 4 * 1024 * 1024, 64 * 1024, 64 * 1024 * 1024),
        )


def _bytes(name: str, default: int, low: int, high: int) -> int:
    text = _env(name, str(default))
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ValueError(f"{name}: {text!r} is not valid; expected a whole number of bytes from {low} to {high}")
    return value


def _prices(text: str) -> str:
    """``FITGATE_GPU_HOUR_PRICES`` checked now (a bad price stops the operator at start, naming the item)."""
    if text.strip():
        from fitgate.sizing.cost import parse_gpu_prices  # noqa: PLC0415

        try:
            parse_gpu_prices(text)
        except ValueError as exc:
            raise ValueError(f"FITGATE_GPU_HOUR_PRICES: {exc}") from None
    return text.strip()
