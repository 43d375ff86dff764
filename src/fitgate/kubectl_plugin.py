"""``kubectl fitgate``: the ``fitgate`` commands as a kubectl plugin, plus ``why`` for a ModelDeployment in a cluster.

kubectl runs any ``kubectl-<name>`` executable on ``PATH`` for ``kubectl <name> ...`` and passes the rest of the
command line through unchanged, global flags included (https://kubernetes.io/docs/tasks/extend-kubectl/
kubectl-plugins/). So ``kubectl fitgate plan|check|recommend|compare|catalog|gpus ...`` hand their argv to
``fitgate.cli.main`` as they are, and ``kubectl fitgate why mdep/NAME [-n NS]`` reads the object with the
``kubernetes`` client the way kubectl would find it: ``--kubeconfig``, else ``KUBECONFIG`` (a ``:``-separated
list, merged), else ``~/.kube/config``, else the pod's service account; ``--context`` picks the context, whose
namespace is the default for ``-n``.

``why`` explains the status the operator wrote (src/fitgate/operator/schema/api.py, ``ModelDeploymentStatus``):
the verdict and its reason with the numbers, the per-GPU breakdown, the smallest fix, the pools, the conditions
and which generation was evaluated when. It never evaluates anything itself: what it prints is what admission
and ``kubectl get mdep`` see.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from fitgate.operator.schema.api import GROUP, KIND, PLURAL, SHORT_NAMES, VERSION, ModelDeploymentStatus
from fitgate.sizing.units import fmt_gib

PROG = "kubectl fitgate"
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
#: The resource words ``why`` accepts before ``/NAME``, as kubectl does for this CRD (its plural, kind,
#: short names, and the group-qualified forms).
RESOURCE_WORDS = frozenset(
    {PLURAL, PLURAL[:-1], KIND.lower(), f"{PLURAL}.{GROUP}", f"{KIND.lower()}.{GROUP}", f"{PLURAL[:-1]}.{GROUP}"}
    | {s.lower() for s in SHORT_NAMES}
)
#: A Kubernetes object name: a DNS-1123 subdomain (at most 253 characters), the rule the API server applies
#: to custom resources' metadata.name (k8s.io/apimachinery pkg/util/validation IsDNS1123Subdomain).
NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NAME_MAX = 253
#: A namespace: a DNS-1123 label (at most 63 characters).
NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
NAMESPACE_MAX = 63
#: Seconds to connect to the API server, then to read its answer: a plugin answers or says why, it does not hang.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 5.0, 20.0
#: The service account's namespace file, kubectl's in-cluster default namespace.
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: Commands handed to ``fitgate`` unchanged (the CLI's own subcommands; ``operator`` is left out on purpose:
#: the operator runs in the cluster, not from a kubectl session, but ``fitgate operator`` stays available).
DELEGATED = ("plan", "recommend", "check", "compare", "catalog", "gpus")

HELP = f"""usage: {PROG} <command> [args]

fitgate as a kubectl plugin.

commands:
  why RESOURCE [-n NAMESPACE]   explain a ModelDeployment's verdict from its status in the cluster
                                (RESOURCE: mdep/NAME, modeldeployment/NAME or NAME)
  {", ".join(DELEGATED)}
                                the fitgate commands, unchanged (`{PROG} plan --help`)

cluster flags (why): --kubeconfig PATH, --context NAME, -n/--namespace NAME, as kubectl's.
"""


WHY_HELP = f"""usage: {PROG} why RESOURCE [-n NAMESPACE] [--kubeconfig PATH] [--context NAME]

Explain a ModelDeployment's verdict from the status the operator wrote (RESOURCE: mdep/NAME, modeldeployment/NAME
or NAME); the cluster flags are kubectl's.
"""


class PluginError(Exception):
    """A one-line error for the user (not found, forbidden, no cluster, bad argument)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kubectl-fitgate`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(HELP, end="")
        return EXIT_OK if args else EXIT_USAGE
    if args[0] == "why":
        if any(a in {"-h", "--help"} for a in args[1:]):  # hunt119: `why --help` said a resource was required, exit 1
            print(WHY_HELP, end="")
            return EXIT_OK
        try:
            print(why(args[1:]), end="")
        except PluginError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except BrokenPipeError:
            return 141
        return EXIT_OK
    from fitgate import cli  # noqa: PLC0415 - the sizing CLI loads only for the commands that use it

    return cli.main(args)


# --------------------------------------------------------------------------------------------
# why: arguments, the cluster read, the text


@dataclass(frozen=True)
class Target:
    """Which ModelDeployment to read, and with which kubeconfig."""

    name: str
    namespace: str | None
    kubeconfig: str | None
    context: str | None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise PluginError(f"{PROG} why: {message}")


def parse_why(argv: Sequence[str]) -> Target:
    """Parse ``why``'s arguments; a bad one is a :class:`PluginError` naming it."""
    p = _Parser(prog=f"{PROG} why", add_help=False)
    p.add_argument("resource")
    p.add_argument("-n", "--namespace")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    args = p.parse_args(list(argv))
    return Target(
        name=resource_name(args.resource),
        namespace=_namespace(args.namespace),
        kubeconfig=args.kubeconfig,
        context=args.context,
    )


def resource_name(text: str) -> str:
    """``mdep/NAME``, ``modeldeployment/NAME``, ``modeldeployments.fitgate.io/NAME`` or ``NAME`` -> ``NAME``."""
    word, sep, name = text.rpartition("/")
    if sep and word.lower() not in RESOURCE_WORDS:
        raise PluginError(
            f"resource {text[:80]!r}: {word[:60]!r} is not a ModelDeployment (use mdep/NAME, modeldeployment/NAME "
            "or NAME)"
        )
    if len(name) > NAME_MAX or not NAME_RE.fullmatch(name):
        raise PluginError(
            f"resource name {name[:80]!r}: not a Kubernetes object name (lower-case DNS-1123 subdomain, at most "
            f"{NAME_MAX} characters)"
        )
    return name


def _namespace(text: str | None) -> str | None:
    if text is None:
        return None
    if len(text) > NAMESPACE_MAX or not NAMESPACE_RE.fullmatch(text):
        raise PluginError(
            f"--namespace {text[:80]!r}: not a namespace name (lower-case DNS-1123 label, at most "
            f"{NAMESPACE_MAX} characters)"
        )
    return text


def why(argv: Sequence[str]) -> str:
    """Read the ModelDeployment ``argv`` names and explain its status."""
    target = parse_why(argv)
    api, namespace = connect(target)
    obj = read(api, target.name, namespace)
    return explain(obj)


def connect(target: Target) -> tuple[Any, str]:
    """An ``ApiClient`` for the target's kubeconfig and context, and the namespace to use."""
    from kubernetes import client, config  # noqa: PLC0415 - only `why` talks to a cluster

    cfg = client.Configuration()
    try:
        config.load_kube_config(
            config_file=target.kubeconfig, context=target.context, client_configuration=cfg, persist_config=False
        )
        namespace = target.namespace or _context_namespace(config, target)
    except (config.ConfigException, OSError) as exc:
        in_cluster = os.environ.get("KUBERNETES_SERVICE_HOST")
        if target.kubeconfig or target.context or not in_cluster:
            where = target.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise PluginError(f"no cluster configured: kubeconfig {where}: {_line(exc)}") from None
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException as exc2:
            raise PluginError(f"no cluster configured: in-cluster: {_line(exc2)}") from None
        namespace = target.namespace or _sa_namespace()
    cfg.retries = 1  # one try more on a dropped connection, not urllib3's three with back-off
    return client.ApiClient(cfg), namespace


def _context_namespace(config: Any, target: Target) -> str:
    contexts, current = config.list_kube_config_contexts(target.kubeconfig)
    chosen = next((c for c in contexts if c.get("name") == target.context), None) if target.context else current
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def _sa_namespace() -> str:
    try:
        return SA_NAMESPACE.read_text()[:NAMESPACE_MAX].strip() or "default"
    except OSError:
        return "default"


def read(api: Any, name: str, namespace: str) -> Mapping[str, Any]:
    """GET the ModelDeployment; every failure becomes one :class:`PluginError` line."""
    from kubernetes import client  # noqa: PLC0415
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
    from urllib3.exceptions import HTTPError  # noqa: PLC0415

    custom = client.CustomObjectsApi(api)
    what = f'{PLURAL}.{GROUP} "{name}" in namespace "{namespace}"'
    try:
        obj = custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
        )
    except ApiException as exc:
        raise PluginError(_api_error(exc, what)) from None
    except (HTTPError, OSError) as exc:
        raise PluginError(f"cannot reach the cluster at {api.configuration.host}: {_line(exc)}") from None
    if not isinstance(obj, Mapping):
        raise PluginError(f"{what}: the API server answered with a {type(obj).__name__}, not an object")
    return obj


def _api_error(exc: Any, what: str) -> str:
    message = _server_message(exc)
    if exc.status == 404:
        if message is None:  # not a Status object: the API itself is not served
            return (
                f"the {GROUP}/{VERSION} API is not served by this cluster: is fitgate's ModelDeployment CRD installed?"
            )
        return f"{what} not found"
    if exc.status == 403:
        return f"forbidden: cannot get {what}: {message or exc.reason}"
    if exc.status == 401:
        return f"unauthorized: the cluster did not accept these credentials ({message or exc.reason})"
    return f"getting {what}: HTTP {exc.status} {exc.reason}: {message or ''}".rstrip(": ")


def _server_message(exc: Any) -> str | None:
    """The message of a ``metav1.Status`` body, or None when the body is not one (e.g. ``404 page not found``)."""
    import json  # noqa: PLC0415

    try:
        body = json.loads((exc.body or "")[:65536])
    except (ValueError, TypeError):
        return None
    if not isinstance(body, dict) or body.get("kind") != "Status":
        return None
    return _line(str(body.get("message") or "")) or None


def _line(exc: object) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def explain(obj: Mapping[str, Any]) -> str:
    """The plain-text explanation of a ModelDeployment's status (what ``kubectl fitgate why`` prints)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ref = f"modeldeployment {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    model = ((spec.get("model") or {}) if isinstance(spec, Mapping) else {}).get("name", "?")
    generation = meta.get("generation")
    raw = obj.get("status") or {}
    try:
        status = ModelDeploymentStatus.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return f"{ref}: model {model}\nits status could not be read: status.{field}: {first['msg']}\n"
    if status.verdict is None:
        return (
            f"{ref}: model {model}\nnot evaluated yet (no status.verdict): is the fitgate operator running, and "
            "does it watch this namespace?\n"
        )
    out: list[str] = []
    where = f" on {status.gpu_product}" if status.gpu_product else ""
    tp = f" (tensor parallel {status.tensor_parallel_size})" if status.tensor_parallel_size else ""
    out.append(f"{ref}: {status.verdict}{where}{tp}")
    out.append(f"  model: {model}{_resolved(status)}")
    out.append(f"  evaluated: {_evaluated(status, generation)}")
    core, fixes = _split_message(status.message or "")
    out.append("")
    out.append(f"Why: {status.reason or status.verdict}")
    out.extend(f"  {part}" for part in _wrap(core))
    out.extend(_per_gpu(status))
    out.extend(_fix(status, fixes))
    out.extend(_pools(status))
    out.extend(_conditions(status))
    return "\n".join(out) + "\n"


def _resolved(status: ModelDeploymentStatus) -> str:
    r = status.resolved_model
    if r is None:
        return ""
    rev = f" @ {r.revision[:12]}" if r.revision else ""
    return f" (from {r.source}{rev}; weights from {r.weights_basis})"


def _evaluated(status: ModelDeploymentStatus, generation: Any) -> str:
    seen = status.observed_generation
    current = "the current spec" if seen is not None and seen == generation else "NOT the current spec"
    text = f"generation {seen} of {generation} ({current})" if seen is not None else "generation unknown"
    ready = next((c for c in status.conditions or [] if c.type == "Ready"), None)
    if ready is not None:
        text += f"; outcome last changed {ready.last_transition_time}"
    if status.inventory_hash:
        text += f"; GPU inventory {status.inventory_hash[:12]}"
    return text


def _split_message(message: str) -> tuple[str, list[str]]:
    """The verdict's message, and the fixes it names.

    evaluate.py ``_message`` appends them as '; smallest change that fits: ...' and '; cheaper but Tight: ...'.
    """
    fixes: list[str] = []
    for cut, label in (("; cheaper but Tight: ", "cheaper but Tight"), ("; smallest change that fits: ", "fits")):
        if cut in message:
            message, _, fix = message.partition(cut)
            fixes.insert(0, f"{label}: {fix}")
    return message, fixes


def _wrap(text: str, width: int = 110) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def _per_gpu(status: ModelDeploymentStatus) -> list[str]:
    g = status.per_gpu
    if g is None:
        return ["", "Per GPU: no plan (the model could not be sized; see Why)"]
    rows = [
        ("capacity (as CUDA reports it)", g.capacity_bytes),
        ("budget (capacity x gpu-memory-utilization)", g.budget_bytes),
        ("  weights", g.weights_bytes),
        ("  activation peak (profiling pass)", g.activation_bytes),
        ("  non-torch (NCCL, cuBLAS)", g.non_torch_bytes),
        ("  CUDA graphs", g.cuda_graph_bytes),
        ("  KV cache pool", g.kv_cache_bytes),
        ("headroom after the workload", g.headroom_bytes),
    ]
    out = ["", f"Per GPU ({status.gpu_product or '?'}):"]
    out.extend(f"  {label:<46}{fmt_gib(n):>12}" for label, n in rows)
    kv = status.kv_cache
    if kv is not None:
        blocks = f", {kv.num_gpu_blocks:,} blocks of {kv.block_size}" if kv.num_gpu_blocks and kv.block_size else ""
        out.append(
            f"  KV cache: {kv.bytes_per_token:,} B a token, {kv.capacity_tokens:,} tokens{blocks}; "
            f"{kv.max_concurrency:.2f} requests of maxModelLen at once"
        )
    return out


def _fix(status: ModelDeploymentStatus, fixes: list[str]) -> list[str]:
    out: list[str] = []
    if status.verdict in {"DoesNotFit", "Tight"} or fixes:
        out.extend(f"  {f}" for f in fixes)
        if status.recommended_max_model_len:  # 0: no maxModelLen fits
            out.append(f"  or spec.serving.maxModelLen: {status.recommended_max_model_len} (the longest that fits)")
        for a in status.alternatives or []:
            out.append(
                f"  or on {a.gpu_product}: tensorParallelSize {a.tensor_parallel_size}, pipelineParallelSize "
                f"{a.pipeline_parallel_size} ({a.gpus} GPUs, {a.verdict}, headroom {fmt_gib(a.headroom_bytes)}, "
                f"~{a.decode_tokens_per_second:.0f} decode tokens/s, {a.gpu_hours_per_million_output_tokens:.3f} "
                "GPU-h per 1M output tokens)"
            )
        if not out:
            out.append("  none found within the GPUs and settings fitgate tried")
        out.insert(0, "")
        out.insert(1, "Smallest fix:")
    if status.engine_args:
        # on a misfit the operator takes them from the fix (evaluate.py Evaluation.recommended_change)
        title = "vLLM args with the fix applied:" if status.verdict == "DoesNotFit" else "Recommended vLLM args:"
        out += ["", title]
        out.extend(f"  {a.name} {a.value}  ({a.reason})" for a in status.engine_args)
    return out


def _pools(status: ModelDeploymentStatus) -> list[str]:
    if not status.pools:
        return []
    out = ["", "GPU pools:"]
    for p in status.pools:
        headroom = f", headroom {fmt_gib(p.headroom_bytes)}" if p.headroom_bytes is not None else ""
        free = f", {p.free_gpus} free" if p.free_gpus is not None else ""
        extra = "".join(f", {x}" for x in (p.sharing, p.source) if x)
        reason = f" ({p.reason})" if p.reason else ""
        out.append(
            f"  {p.gpu_product}: {p.nodes} node(s) x {p.gpus_per_node} GPUs{free}{extra}: {p.verdict}{reason}{headroom}"
        )
    return out


def _conditions(status: ModelDeploymentStatus) -> list[str]:
    if not status.conditions:
        return []
    out = ["", "Conditions:"]
    for c in status.conditions:
        out.append(
            f"  {c.type}={c.status} {c.reason} (since {c.last_transition_time}, generation {c.observed_generation})"
        )
        if c.message == status.message:
            out.append("    (the message under Why)")
        else:
            out.extend(f"    {part}" for part in _wrap(c.message, 104))
    schedulable = next((c for c in status.conditions if c.type == "Schedulable"), None)
    if schedulable is None:
        out.append("  Schedulable: no condition (a node of the placement's GPU exists)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
