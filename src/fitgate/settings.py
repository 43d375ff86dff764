"""Every ``FITGATE_*`` / ``HF_*`` environment variable fitgate reads, read in one place into typed objects.

:func:`load` reads the environment once into a :class:`Settings`; ``fitgate`` (the CLI and the operator)
calls it at start and hands the object, or the part a component needs, down: the operator gets it in
kopf's memo, the Hub client its :class:`HubSettings`, the header reader its :class:`HeaderLimits`. A
library caller that passes nothing gets ``load()``'s value at that moment. No other module reads
``os.environ`` for these names (``tests/fitgate_operator/test_settings.py`` fails if one does).

A bad value raises :class:`SettingsError`: one line naming the variable, the value and what is allowed.
:data:`VARIABLES` documents each variable; the table of docs/settings.md is generated from it (``python -m
fitgate.settings``) and a test keeps the two in sync.

This module imports no other fitgate module, so every layer may import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

#: Hosts the Hub redirects file downloads to (its CDN and Xet storage).
DEFAULT_CDN_HOSTS = (
    "cdn-lfs.huggingface.co",
    "cdn-lfs-us-1.huggingface.co",
    "cdn-lfs-eu-1.huggingface.co",
    "cdn-lfs.hf.co",
    "cdn-lfs-us-1.hf.co",
    "cdn-lfs-eu-1.hf.co",
    "cas-bridge.xethub.hf.co",
)
DEFAULT_ENDPOINT = "https://huggingface.co"
#: Defaults of the per-checkpoint limits. The largest public checkpoints hold ~210k tensors (Kimi-K2 with
#: 4-bit packed experts: qweight, scales, zeros) in ~30 MB of headers.
DEFAULT_MAX_TENSORS = 500_000
DEFAULT_MAX_HEADER_BYTES = 128 << 20
_TRUE = {"1", "true", "yes", "on"}

UnknownPolicy = Literal["Allow", "Warn", "Deny"]
UNKNOWN_POLICIES: tuple[UnknownPolicy, ...] = ("Allow", "Warn", "Deny")


class SettingsError(ValueError):
    """A variable's value is not allowed: ``NAME: 'value' is not valid; expected ...``."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name}: {value!r} is not valid; expected {expected}")


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, its default as text ("" = unset) and what it means."""

    name: str
    default: str
    meaning: str


#: Every variable fitgate reads, in the order of the table in docs/settings.md.
VARIABLES: tuple[Variable, ...] = (
    Variable("HF_ENDPOINT", DEFAULT_ENDPOINT, "Hugging Face Hub base URL; the only Hub host contacted."),
    Variable("HF_TOKEN", "", "Hub access token for gated or private repos; never logged."),
    Variable("HF_HUB_OFFLINE", "0", "`1`/`true`/`yes`/`on`: never contact the Hub (cache, catalogs, paths only)."),
    Variable("FITGATE_HUB_TIMEOUT", "5", "Seconds per Hub request (> 0)."),
    Variable("FITGATE_HUB_DEADLINE", "30", "Seconds for one whole resolution, retries included (> 0)."),
    Variable(
        "FITGATE_HUB_CDN_HOSTS",
        ",".join(DEFAULT_CDN_HOSTS),
        "Comma-separated hosts (`.example.com`: its subdomains) Hub redirects may lead to.",
    ),
    Variable("FITGATE_MAX_TENSORS", str(DEFAULT_MAX_TENSORS), "Most tensors one checkpoint may hold (>= 1)."),
    Variable(
        "FITGATE_MAX_HEADER_BYTES",
        str(DEFAULT_MAX_HEADER_BYTES),
        "Most safetensors header bytes one checkpoint may hold, all shards (>= 1).",
    ),
    Variable(
        "FITGATE_CACHE_DIR", "", "Facts cache directory (default `$XDG_CACHE_HOME/fitgate` or `~/.cache/fitgate`)."
    ),
    Variable("FITGATE_CATALOG_PATH", "", "User catalog directories, `:`-separated, searched before the built-in one."),
    Variable("FITGATE_DEBUG", "", "Non-empty: the CLI shows a traceback for an internal error."),
    Variable("FITGATE_WEBHOOK_PORT", "9443", "Admission webhook port (0: no webhook server)."),
    Variable("FITGATE_WEBHOOK_ADDR", "0.0.0.0", "Address the webhook server listens on."),
    Variable("FITGATE_WEBHOOK_HOST", "", "Host the API server reaches the webhook at (managed configuration)."),
    Variable("FITGATE_WEBHOOK_CERT", "", "Serving certificate file (reloaded when it changes)."),
    Variable("FITGATE_WEBHOOK_KEY", "", "Serving key file."),
    Variable("FITGATE_WEBHOOK_CA", "", "CA bundle file written into a managed configuration's caBundle."),
    Variable(
        "FITGATE_WEBHOOK_MANAGED",
        "",
        "Name of a ValidatingWebhookConfiguration the operator creates and deletes on exit (out of cluster).",
    ),
    Variable("FITGATE_METRICS_ADDR", "0.0.0.0", "Address of /metrics, /healthz and /readyz."),
    Variable("FITGATE_METRICS_PORT", "8080", "Port of /metrics, /healthz and /readyz."),
    Variable(
        "FITGATE_RESYNC_SECONDS",
        "60",
        "Seconds between re-evaluations of every ModelDeployment (> 0); each object at its own phase of the period.",
    ),
    Variable(
        "FITGATE_ADMISSION_RESOLVE_SECONDS",
        "1.0",
        "Seconds admission waits for a first checkpoint resolution before answering Unknown (> 0).",
    ),
    Variable(
        "FITGATE_RECONCILE_RESOLVE_SECONDS", "20", "Seconds reconcile waits for a resolution before retrying (> 0)."
    ),
    Variable(
        "FITGATE_UNKNOWN_POLICY",
        "Warn",
        "Admission of an Unknown verdict when `policy.onUnknown` is unset: Allow, Warn or Deny (`Reject` = Deny).",
    ),
    Variable("FITGATE_MODEL_ROOTS", "", "Absolute directories `source: path` models may lie under, `:`-separated."),
    Variable("FITGATE_NAMESPACES", "", "Comma-separated namespaces to watch (empty: all)."),
    Variable("FITGATE_PEERING", "", "kopf peering object name: several replicas, one active reconciler."),
    Variable(
        "FITGATE_PEERING_LIFETIME_SECONDS",
        "10",
        "Seconds a replica's peering keep-alive counts; a standby takes over this long after a crash (2-3600).",
    ),
    Variable(
        "FITGATE_GPU_HOUR_PRICES",
        "",
        "USD per GPU-hour: one price (`2.5`) or per catalog GPU (`H100=2.5,L4=0.7`), over the ConfigMap's and the "
        "list prices; chart `operator.prices`. A bad value stops the operator at start.",
    ),
    Variable(
        "FITGATE_GPU_HOUR_PRICES_CONFIGMAP",
        "",
        "The same syntax, from a ConfigMap key (chart `operator.pricesConfigMap`), over the list prices; a bad "
        "value is logged and ignored.",
    ),
    Variable("FITGATE_LIST_PRICES", "1", "`0`/`false`: no dated list price for a GPU no other source prices."),
    Variable(
        "FITGATE_SHUTDOWN_SECONDS",
        "20",
        "Seconds a stopping operator has to exit; then it writes every thread's stack and ends (1-600).",
    ),
    Variable("FITGATE_SCRAPE_TIMEOUT_SECONDS", "5", "Seconds for one read of a serving pod's /metrics (1-60)."),
    Variable(
        "FITGATE_SCRAPE_MAX_BYTES",
        str(4 * 1024 * 1024),
        "Most bytes one /metrics response may hold after decompression (65536-67108864).",
    ),
    Variable(
        "FITGATE_WORKLOAD_WEBHOOK",
        "0",
        "`1`: serve the vLLM workload webhook (chart `workloadWebhook.enabled`); ignored with a managed configuration.",
    ),
    Variable(
        "FITGATE_WORKLOAD_AUDIT_SECONDS",
        "0",
        "Seconds between audits of the vLLM workloads of opted-in namespaces (0: no audit).",
    ),
    Variable(
        "FITGATE_WORKLOAD_OBSERVE",
        "0",
        "`1`: each audit also reads the audited workloads' vLLM /metrics (annotation `fitgate.io/observed`).",
    ),
    Variable(
        "FITGATE_WORKLOAD_AUDIT_OBJECTS",
        "0",
        "`1`: the audit also lists its kinds cluster-wide for objects annotated `fitgate.io/validate` "
        "(chart `workloadWebhook.objectOptIn`).",
    ),
    Variable(
        "FITGATE_WORKLOAD_CONFIGMAPS",
        "0",
        "`1`: the workload webhook and audit read the ConfigMaps a `--config` file is mounted from and the env reads "
        "(chart `workloadWebhook.readConfigMaps`); `0`: such a verdict is Unknown.",
    ),
)
# --- hardening (issue 22): parse budgets of user-controlled input -----------------------------------
#: The budgets every parse of user-controlled input runs under, and where the audit writes its verdicts
#: (docs/hardening.md; its table is generated
#: from this tuple by ``markdown_table(BUDGET_VARIABLES)`` and a test keeps the two in sync).
BUDGET_VARIABLES: tuple[Variable, ...] = (
    Variable(
        "FITGATE_MAX_EXPANSION_BYTES",
        str(1 << 20),
        "Most bytes `$(VAR)` / `$VAR` expansion may produce for one container (command, args, env together); "
        "past it the workload is Unknown (4096-67108864).",
    ),
    Variable(
        "FITGATE_MAX_YAML_NODES",
        "100000",
        "Most YAML nodes a `--config` file may hold once its aliases are expanded (100-10000000).",
    ),
    Variable("FITGATE_MAX_YAML_DEPTH", "64", "Deepest nesting of a `--config` file's YAML (collections) (4-1000)."),
    Variable(
        "FITGATE_MAX_YAML_EXPANDED_BYTES",
        str(1 << 20),
        "Most scalar bytes a `--config` file may hold once its aliases are expanded (4096-67108864).",
    ),
    Variable(
        "FITGATE_READ_DEADLINE_SECONDS",
        "2",
        "Seconds one workload read (argv, env, --config) may take off the event loop; then Unknown (0.1-60).",
    ),
    Variable(
        "FITGATE_WORKLOAD_ANNOTATE",
        "0",
        "`1`: the audit also writes `fitgate.io/verdict` annotations on the workloads (needs `patch` on them; "
        "chart `workloadWebhook.annotate`).",
    ),
    Variable(
        "FITGATE_WORKLOAD_POLICY_REPORTS",
        "1",
        "`1`: the audit writes its verdicts as one PolicyReport (wgpolicyk8s.io/v1alpha2) per namespace.",
    ),
    Variable(
        "FITGATE_WEBHOOK_CLIENT_CA",
        "",
        "CA file the API server's client certificate must chain to: set, the webhook refuses TLS clients without "
        "one (the API server presents it per its AdmissionConfiguration kubeconfig).",
    ),
    Variable(
        "FITGATE_METRICS_AUTH",
        "0",
        "`1`: /metrics answers only a bearer token that a TokenReview authenticates and a SubjectAccessReview "
        "allows `get /metrics` (chart `metrics.authorization`).",
    ),
    Variable(
        "FITGATE_MAX_REVIEW_BYTES",
        str(8 << 20),
        "Most bytes of one AdmissionReview body the webhook reads; a larger one is Unknown by policy "
        "(1048576-67108864).",
    ),
)
_DEFAULTS = {v.name: v.default for v in (*VARIABLES, *BUDGET_VARIABLES)}


class _Env:
    """Reads variables from one mapping, each checked against its documentation."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def text(self, name: str) -> str:
        value = self.environ.get(name)
        return _DEFAULTS[name] if value is None else value

    def optional(self, name: str) -> str | None:
        return self.text(name).strip() or None

    def flag(self, name: str) -> bool:
        return self.text(name).strip().lower() in _TRUE

    def number(self, name: str, low: float = 0.0, *, zero_allowed: bool = False) -> float:
        text = self.text(name)
        try:
            value = float(text.strip() or _DEFAULTS[name])
        except ValueError:
            value = float("nan")
        if zero_allowed and value == 0:
            return 0.0
        if not value > low or value == float("inf"):
            expected = (
                f"0 (off) or a number of seconds above {low:g}"
                if zero_allowed
                else f"a number of seconds above {low:g}"
            )
            raise SettingsError(name, text, expected)
        return value

    def whole(self, name: str, low: int, high: int, unit: str) -> int:
        text = self.text(name).strip() or _DEFAULTS[name]
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise SettingsError(name, text, f"{unit} from {low} to {high}")
        return value

    def port(self, name: str) -> int:
        return self.whole(name, 0, 65535, "a port")

    def split(self, name: str, sep: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.text(name).split(sep) if p.strip())


@dataclass(frozen=True)
class HubSettings:
    """How to reach the Hub.

    Attributes:
        endpoint: Base URL (``HF_ENDPOINT``, default https://huggingface.co); the only host contacted.
        token: Access token for gated/private repos (``HF_TOKEN``); never logged.
        offline: Do not contact the Hub (``HF_HUB_OFFLINE=1``).
        timeout_s: Per-request timeout (``FITGATE_HUB_TIMEOUT``).
        deadline_s: Overall time for one resolution, every read and retry included (``FITGATE_HUB_DEADLINE``).
        retries: Extra attempts after a transient failure.
        cdn_hosts: Hosts (``host`` or ``host:port``; ``.example.com`` for its subdomains) redirects may
            lead to besides the endpoint's own (``FITGATE_HUB_CDN_HOSTS``, comma-separated).
    """

    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = None
    offline: bool = False
    timeout_s: float = 5.0
    deadline_s: float = 30.0
    retries: int = 2
    cdn_hosts: tuple[str, ...] = DEFAULT_CDN_HOSTS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HubSettings:
        """Settings from ``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_OFFLINE`` and ``FITGATE_HUB_*``."""
        env = _Env(os.environ if environ is None else environ)
        return cls(
            endpoint=(env.optional("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            token=env.optional("HF_TOKEN"),
            offline=env.flag("HF_HUB_OFFLINE"),
            timeout_s=env.number("FITGATE_HUB_TIMEOUT"),
            deadline_s=env.number("FITGATE_HUB_DEADLINE"),
            cdn_hosts=tuple(h.lower() for h in env.split("FITGATE_HUB_CDN_HOSTS", ",")),
        )


@dataclass(frozen=True)
class HeaderLimits:
    """What one checkpoint's safetensors headers may hold, all shards together.

    Attributes:
        max_tensors: Tensors (``FITGATE_MAX_TENSORS``, default 500,000).
        max_header_bytes: Header bytes (``FITGATE_MAX_HEADER_BYTES``, default 128 MiB).
    """

    max_tensors: int = DEFAULT_MAX_TENSORS
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HeaderLimits:
        """The limits from ``FITGATE_MAX_TENSORS`` and ``FITGATE_MAX_HEADER_BYTES``."""
        env = _Env(os.environ if environ is None else environ)
        return cls(
            env.whole("FITGATE_MAX_TENSORS", 1, 1 << 40, "a positive integer"),
            env.whole("FITGATE_MAX_HEADER_BYTES", 1, 1 << 50, "a positive integer"),
        )


# --- hardening (issue 22): parse budgets -------------------------------------------------------------
@dataclass(frozen=True)
class ParseBudgets:
    """What one parse of user-controlled input may produce or take (docs/hardening.md).

    Attributes:
        max_expansion_bytes: Output of Kubernetes ``$(VAR)`` and shell ``$VAR`` expansion, one container
            (``FITGATE_MAX_EXPANSION_BYTES``): 29 env entries ``A_i=$(A_{i-1})$(A_{i-1})`` would expand to 512 MiB.
        max_yaml_nodes: Nodes of a ``--config`` YAML file with its aliases expanded (``FITGATE_MAX_YAML_NODES``).
        max_yaml_depth: Its deepest nesting (``FITGATE_MAX_YAML_DEPTH``).
        max_yaml_expanded_bytes: Its scalar bytes with aliases expanded (``FITGATE_MAX_YAML_EXPANDED_BYTES``).
        read_deadline_s: Seconds one workload read may take in its worker thread before the review
            is answered Unknown (``FITGATE_READ_DEADLINE_SECONDS``).
        max_review_bytes: Bytes of one AdmissionReview body read (``FITGATE_MAX_REVIEW_BYTES``).
    """

    max_expansion_bytes: int = 1 << 20
    max_yaml_nodes: int = 100_000
    max_yaml_depth: int = 64
    max_yaml_expanded_bytes: int = 1 << 20
    read_deadline_s: float = 2.0
    max_review_bytes: int = 8 << 20

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ParseBudgets:
        """The budgets from ``FITGATE_MAX_*`` and ``FITGATE_READ_DEADLINE_SECONDS``."""
        env = _Env(os.environ if environ is None else environ)
        deadline = env.number("FITGATE_READ_DEADLINE_SECONDS", low=0.099)
        if deadline > 60:
            raise SettingsError("FITGATE_READ_DEADLINE_SECONDS", env.text("FITGATE_READ_DEADLINE_SECONDS"), "0.1-60")
        return cls(
            max_expansion_bytes=env.whole("FITGATE_MAX_EXPANSION_BYTES", 4096, 64 << 20, "bytes"),
            max_yaml_nodes=env.whole("FITGATE_MAX_YAML_NODES", 100, 10_000_000, "nodes"),
            max_yaml_depth=env.whole("FITGATE_MAX_YAML_DEPTH", 4, 1000, "levels"),
            max_yaml_expanded_bytes=env.whole("FITGATE_MAX_YAML_EXPANDED_BYTES", 4096, 64 << 20, "bytes"),
            read_deadline_s=deadline,
            max_review_bytes=env.whole("FITGATE_MAX_REVIEW_BYTES", 1 << 20, 64 << 20, "bytes"),
        )


@dataclass(frozen=True)
class OperatorConfig:
    """Everything the operator process is configured with (``FITGATE_*``, overridable by ``fitgate operator`` flags).

    Attributes:
        webhook_port: Port of the admission webhook server (0 disables it).
        webhook_addr: Address it listens on.
        webhook_host: Host name or IP the API server uses to reach it (for a managed configuration).
        webhook_cert, webhook_key: Serving certificate and key files (mounted by the chart; reloaded on change).
        webhook_ca: CA bundle file written into a managed configuration's caBundle.
        webhook_managed: Name of a ValidatingWebhookConfiguration kopf creates and keeps up to date
            (out-of-cluster development; deleted when the operator exits); empty when the chart installs its own.
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
        peering: kopf peering object name for HA (several replicas, one active reconciler); unset: one
            replica, no peering.
        peering_lifetime_s: How long a replica's peering keep-alive counts (kopf's ``settings.peering.lifetime``;
            it is renewed 5-10 s before it runs out, at least every second): after a ``kill -9`` of the
            active replica, the standby takes over once this has passed since the last keep-alive.
        gpu_hour_prices: ``FITGATE_GPU_HOUR_PRICES`` as written (checked against the GPU catalog when the
            operator starts), for status.observed.usdPerRequest and the cheapest pool.
        gpu_hour_prices_configmap: ``FITGATE_GPU_HOUR_PRICES_CONFIGMAP`` as written: a ConfigMap key's prices
            (below ``gpu_hour_prices``); :mod:`fitgate.operator.decision.pricing` parses both, bounded.
        list_prices: Price a GPU no other source prices from the dated list-price table (``FITGATE_LIST_PRICES``).
        shutdown_s: Seconds from SIGTERM for the operator to exit (:mod:`fitgate.operator.runtime.shutdown`); the chart
            gives the pod 10 s more (``terminationGracePeriodSeconds``).
        scrape_timeout_s, scrape_max_bytes: Bounds of one read of a serving pod's /metrics (spec.observe).
        workload_webhook: Serve the vLLM workload webhook paths (Deployments, LeaderWorkerSets, ...).
        workload_audit_s: Seconds between audits of existing vLLM workloads (0: off).
        workload_observe: Each audit also reads the serving pods of the audited workloads (their vLLM
            /metrics, the log of one that failed to start): annotation ``fitgate.io/observed``, a drift
            Event, ``fitgate_workload_*`` series (:mod:`fitgate.operator.observation.workload_observe`).
        workload_audit_objects: The audit also lists its kinds in every namespace (paged) for objects that opt
            in with the ``fitgate.io/validate`` annotation where the namespace is not labelled.
        workload_annotate: The audit writes ``fitgate.io/verdict`` / ``recommended-args`` annotations and the
            verdict Events (``FITGATE_WORKLOAD_ANNOTATE``; needs ``patch`` on the workloads).
        workload_policy_reports: The audit writes one PolicyReport per namespace (``FITGATE_WORKLOAD_POLICY_REPORTS``).
        webhook_client_ca: CA file a webhook client's certificate must chain to (``FITGATE_WEBHOOK_CLIENT_CA``):
            set, only the API server (configured to present such a certificate) can send reviews.
        metrics_auth: /metrics needs a token a TokenReview authenticates and a SubjectAccessReview allows
            (``FITGATE_METRICS_AUTH``; :mod:`fitgate.operator.base.metrics_auth`).
        workload_configmaps: Read the ConfigMap a workload's ``--config`` file is mounted from (one ``get``,
            cached 30 s); off, such a verdict is Unknown.
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
    peering: str | None = None
    peering_lifetime_s: int = 10
    gpu_hour_prices: str = ""
    gpu_hour_prices_configmap: str = ""
    list_prices: bool = True
    shutdown_s: int = 20
    scrape_timeout_s: float = 5.0
    scrape_max_bytes: int = 4 * 1024 * 1024
    workload_webhook: bool = False
    workload_audit_s: float = 0.0
    workload_observe: bool = False
    workload_audit_objects: bool = False
    workload_configmaps: bool = False
    # hardening (issue 22): where the audit's verdicts go (docs/hardening.md)
    workload_annotate: bool = False
    workload_policy_reports: bool = True
    webhook_client_ca: str | None = None
    metrics_auth: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        """Settings from ``FITGATE_*`` variables (the chart sets these)."""
        env = _Env(os.environ if environ is None else environ)
        return cls(
            webhook_port=env.port("FITGATE_WEBHOOK_PORT"),
            webhook_addr=env.text("FITGATE_WEBHOOK_ADDR"),
            webhook_host=env.optional("FITGATE_WEBHOOK_HOST"),
            webhook_cert=env.optional("FITGATE_WEBHOOK_CERT"),
            webhook_key=env.optional("FITGATE_WEBHOOK_KEY"),
            webhook_ca=env.optional("FITGATE_WEBHOOK_CA"),
            webhook_managed=env.optional("FITGATE_WEBHOOK_MANAGED"),
            metrics_addr=env.text("FITGATE_METRICS_ADDR"),
            metrics_port=env.port("FITGATE_METRICS_PORT"),
            resync_s=env.number("FITGATE_RESYNC_SECONDS"),
            admission_resolve_s=env.number("FITGATE_ADMISSION_RESOLVE_SECONDS"),
            reconcile_resolve_s=env.number("FITGATE_RECONCILE_RESOLVE_SECONDS"),
            unknown_policy=unknown_policy("FITGATE_UNKNOWN_POLICY", env.text("FITGATE_UNKNOWN_POLICY")),
            model_roots=model_roots(env.text("FITGATE_MODEL_ROOTS")),
            namespaces=env.split("FITGATE_NAMESPACES", ","),
            peering=env.optional("FITGATE_PEERING"),
            peering_lifetime_s=env.whole("FITGATE_PEERING_LIFETIME_SECONDS", 2, 3600, "whole seconds"),
            gpu_hour_prices=env.text("FITGATE_GPU_HOUR_PRICES").strip(),
            gpu_hour_prices_configmap=env.text("FITGATE_GPU_HOUR_PRICES_CONFIGMAP").strip(),
            list_prices=env.flag("FITGATE_LIST_PRICES"),
            shutdown_s=env.whole("FITGATE_SHUTDOWN_SECONDS", 1, 600, "whole seconds"),
            scrape_timeout_s=env.whole("FITGATE_SCRAPE_TIMEOUT_SECONDS", 1, 60, "whole seconds"),
            scrape_max_bytes=env.whole("FITGATE_SCRAPE_MAX_BYTES", 64 * 1024, 64 * 1024 * 1024, "bytes"),
            workload_webhook=env.flag("FITGATE_WORKLOAD_WEBHOOK"),
            workload_audit_s=env.number("FITGATE_WORKLOAD_AUDIT_SECONDS", low=0.0, zero_allowed=True),
            workload_observe=env.flag("FITGATE_WORKLOAD_OBSERVE"),
            workload_audit_objects=env.flag("FITGATE_WORKLOAD_AUDIT_OBJECTS"),
            workload_configmaps=env.flag("FITGATE_WORKLOAD_CONFIGMAPS"),
            workload_annotate=env.flag("FITGATE_WORKLOAD_ANNOTATE"),
            workload_policy_reports=env.flag("FITGATE_WORKLOAD_POLICY_REPORTS"),
            webhook_client_ca=env.optional("FITGATE_WEBHOOK_CLIENT_CA"),
            metrics_auth=env.flag("FITGATE_METRICS_AUTH"),
        )


def unknown_policy(name: str, text: str) -> UnknownPolicy:
    """``Allow``, ``Warn`` or ``Deny`` (``Reject``, the older name, is read as ``Deny``)."""
    value = "Deny" if text.strip() == "Reject" else text.strip()
    for policy in UNKNOWN_POLICIES:
        if value == policy:
            return policy
    raise SettingsError(name, text, "Allow, Warn or Deny")


def model_roots(text: str) -> tuple[str, ...]:
    """``FITGATE_MODEL_ROOTS``: absolute directories, ``os.pathsep``-separated."""
    roots = tuple(r.strip() for r in text.split(os.pathsep) if r.strip())
    for root in roots:
        if not root.startswith("/"):
            raise SettingsError("FITGATE_MODEL_ROOTS", root, "absolute directories")
    return roots


def _cache_dir(environ: Mapping[str, str]) -> Path:
    explicit = environ.get("FITGATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fitgate"


@dataclass(frozen=True)
class Settings:
    """Everything fitgate reads from the environment.

    Attributes:
        hub: How to reach the Hub.
        limits: What one checkpoint's headers may hold.
        cache_dir: The facts cache directory (``FITGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/fitgate``,
            else ``~/.cache/fitgate``).
        catalog_path: User catalog directories (``FITGATE_CATALOG_PATH``, ``os.pathsep``-separated).
        operator: The operator process's settings.
        budgets: The parse budgets of user-controlled input (:class:`ParseBudgets`).
        debug: The CLI shows tracebacks of internal errors (``FITGATE_DEBUG`` non-empty).
    """

    hub: HubSettings = field(default_factory=HubSettings)
    limits: HeaderLimits = field(default_factory=HeaderLimits)
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "fitgate")
    catalog_path: tuple[str, ...] = ()
    operator: OperatorConfig = field(default_factory=OperatorConfig)
    debug: bool = False
    budgets: ParseBudgets = field(default_factory=ParseBudgets)  # hardening (issue 22)


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``environ`` (default: the process environment) once into :class:`Settings`.

    Raises:
        SettingsError: a variable's value is not allowed.
    """
    environ = os.environ if environ is None else environ
    return Settings(
        hub=HubSettings.from_env(environ),
        limits=HeaderLimits.from_env(environ),
        cache_dir=_cache_dir(environ),
        catalog_path=tuple(p for p in environ.get("FITGATE_CATALOG_PATH", "").split(os.pathsep) if p.strip()),
        operator=OperatorConfig.from_env(environ),
        debug=bool(environ.get("FITGATE_DEBUG")),
        budgets=ParseBudgets.from_env(environ),
    )


def markdown_table(variables: tuple[Variable, ...] = VARIABLES) -> str:
    """The table of :data:`VARIABLES` in docs/settings.md (docs/hardening.md's of :data:`BUDGET_VARIABLES`)."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for v in variables:
        default = f"`{v.default}`" if v.default else "(unset)"
        rows.append(f"| `{v.name}` | {default} | {v.meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
