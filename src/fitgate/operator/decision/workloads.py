"""vLLM workloads (Deployments, StatefulSets, LeaderWorkerSets, KServe, Pods) on the ModelDeployment path.

A :class:`~fitgate.workloads.Reading` becomes a ModelDeployment spec (``api.parse_spec``), is evaluated by
:func:`fitgate.operator.decision.evaluate.evaluate` (through :mod:`fitgate.operator.decision.logic`'s cache) and
decided by :func:`fitgate.operator.decision.logic.decide`: one sizing and one verdict mapping for both kinds. What this
module adds is what only a workload has: the GPU limit of its pods against TP x PP, and the fix written
as a change to the user's own args (``change `--max-model-len 131072` to `--max-model-len 32768```).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from fitgate.checkpoints.facts import ModelFacts
from fitgate.operator.decision.evaluate import Evaluation, evaluate, unknown
from fitgate.operator.decision.logic import DENIED_INVALID, AdmissionOutcome, _evaluate, decide
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.gpus.cel import SelectorUnsupportedError
from fitgate.operator.gpus.dra import ClaimError
from fitgate.operator.gpus.inventory import Inventory, NodeGPUs
from fitgate.operator.schema.api import ModelDeploymentSpec, SpecError, parse_spec
from fitgate.operator.schema.config import UnknownPolicy
from fitgate.sizing import ModelInput, ReasonCode, Suggestion, Verdict, vllm_args_text
from fitgate.sizing.memo import BoundedMemo, Miss
from fitgate.sizing.offload import host_memory_note
from fitgate.sizing.versions import release_modelled
from fitgate.workloads import Reading
from fitgate.workloads.vllm_flags import RULES_WIDENED_BY, may_shrink, rule_widened, unknown_flags

#: The label (on a namespace) and annotation (on an object) that opt a workload in: enforce or warn.
VALIDATE_KEY = "fitgate.io/validate"
MODES = ("enforce", "warn")


@dataclass(frozen=True)
class WorkloadVerdict:
    """The verdict on one workload, with its message in the workload's own terms."""

    reading: Reading
    evaluation: Evaluation
    message: str
    fix: str = ""  # the smallest change that fits, as edits of the user's args ("" when none)
    invalid: bool = False  # input vLLM itself would refuse

    @property
    def verdict(self) -> Verdict:
        """Fits, Tight, DoesNotFit or Unknown."""
        return self.evaluation.verdict

    @property
    def recommended_args(self) -> str:
        """The engine args fitgate recommends (``fitgate.io/recommended-args``)."""
        return vllm_args_text(self.evaluation.engine_args) if self.evaluation.engine_args else ""


def to_spec(reading: Reading, mode: str = "enforce") -> ModelDeploymentSpec:
    """The ModelDeployment spec of a reading; misfits are refused in enforce mode, warned in warn mode.

    Raises:
        SpecError: a value the ModelDeployment schema refuses (``tensorParallelSize: 128``).
    """
    key = (reading.fingerprint, mode)
    hit = _SPECS.get(key) if reading.fingerprint else None
    if hit is not None and not isinstance(hit, Miss):
        return hit
    raw = reading.spec()
    raw["policy"] = {"onMisfit": "Reject" if mode == "enforce" else "Warn"}
    spec = parse_spec(raw)
    _SPECS.put(key, spec)
    return spec


#: Specs by (reading fingerprint, mode): a rollout re-applies the same pod template many times. Bound 4096:
#: one entry per distinct engine setting (a fingerprint) and mode, the cluster's workloads have a few hundred.
_SPECS: BoundedMemo[tuple[str, str], ModelDeploymentSpec] = BoundedMemo(4096)


def before_sizing(reading: Reading) -> Evaluation | None:
    """The verdict when the reading alone decides it (unreadable, or too few GPUs), else None."""
    if reading.invalid is not None:
        return unknown(ReasonCode.INVALID_SPEC, reading.invalid)
    if reading.unknown is not None:
        return unknown(ReasonCode.WORKLOAD_SETTINGS_UNKNOWN, reading.unknown)
    shortfall = reading.gpu_shortfall()
    if shortfall is not None and not reading.gpus_per_replica and reading.pods_per_replica == 1:
        # hunt27 F2: a pod that asks for no GPU resource at all still sees the node's GPUs where the node's default
        # container runtime is NVIDIA's (the CUDA image's NVIDIA_VISIBLE_DEVICES=all): production-stack's CI runs its
        # chart with requestGPU 0.5, which drops the limit, and its disaggregated values pin GPUs with
        # CUDA_VISIBLE_DEVICES. Which GPUs it gets is the node's to say, not the pod's: Unknown, never "no GPU".
        why = (
            f"container {reading.container} asks for no {reading.gpu_resource}: it sees GPUs only where the node's "
            "default container runtime exposes them (unscheduled and unsized by Kubernetes); set "
            f"{reading.gpu_resource}: {reading.parallel_gpus} to have it placed on GPUs and sized"
        )
        return unknown(ReasonCode.WORKLOAD_SETTINGS_UNKNOWN, why)
    if shortfall is not None:
        return Evaluation(Verdict.DOES_NOT_FIT, ReasonCode.GPU_LIMIT_BELOW_PARALLELISM, shortfall, ())
    return None


def edit_of(reading: Reading, flag: str, value: str) -> str:
    """One change in the user's own terms: where the value was written (command line, env, --config file)."""
    old = reading.args.get(flag)
    origin = reading.origins.get(flag, ())
    if origin[:1] == ("env",) and len(origin) == 3:
        _, var, written = origin
        return f"set env {var}={value} (used by `{flag} {written}`)"
    if origin[:1] == ("config",) and len(origin) == 4:
        _, configmap, key, name = origin
        where = f"in ConfigMap {configmap} key {key}"
        return f"change `{name}: {old}` to `{name}: {value}` {where}" if old else f"set `{name}: {value}` {where}"
    if origin[:1] == ("field",) and len(origin) == 2:
        return f"set {origin[1]}: {value}"
    if origin[:1] == ("env-args",) and len(origin) == 2 and old is not None:
        return f"change `{flag} {old}` to `{flag} {value}` in env {origin[1]}"
    if old is None and reading.config_map is not None:  # written nowhere yet, the settings kept in a --config file
        configmap, key = reading.config_map
        return f"add `{flag[2:]}: {value}` in ConfigMap {configmap} key {key} (or `{flag} {value}` to the args)"
    return f"add `{flag} {value}`" if old is None else f"change `{flag} {old}` to `{flag} {value}`"


def fix_in_args(reading: Reading, suggestion: Suggestion) -> str:
    """A suggestion as edits of the workload's own command line, env, ``--config`` file and GPU limit."""
    parts: list[str] = []
    for flag, value in suggestion.changes:
        if not flag.startswith("--"):
            continue
        parts.append(edit_of(reading, flag, value))
    # suggestion.gpus is TP x PP x the deployment's DP (docs/parallelism.md); this replica holds its own share
    old_dp = int(reading.serving.get("dataParallelSize") or reading.data_parallel or 1)
    new_dp = int(dict(suggestion.changes).get("--data-parallel-size") or old_dp)
    need = suggestion.gpus // new_dp * (reading.data_parallel * new_dp // old_dp)
    if need > reading.gpus_per_replica:
        per_pod = -(-need // reading.pods_per_replica)
        parts.append(f"set {reading.gpu_resource}: {per_pod}")
    return ", ".join(parts)


def _core(message: str) -> str:
    """An evaluation's message without the fix in ModelDeployment terms (the workload's replaces it)."""
    for cut in ("; smallest change that fits:", "; cheaper but Tight:"):
        message = message.split(cut, 1)[0]
    return message


def _host_memory_warning(reading: Reading, ev: Evaluation) -> str | None:
    """Issue 20: the host memory the plan pins (offloaded weights, KV offload, caches) over the pod's limit."""
    plan = ev.best.plan if ev.best is not None else None
    if plan is None or plan.host is None or reading.memory_limit_bytes is None:
        return None
    if plan.host.total_bytes <= reading.memory_limit_bytes:
        return None
    return f"{reading.source}: {host_memory_note(plan.host, reading.memory_limit_bytes)}"


def _unknown(ev: Evaluation, why: str) -> Evaluation:
    """``ev`` made Unknown for ``why``, which the warnings carry (hunt209: under the Warn policy it said nothing)."""
    warning = f"fitgate: verdict Unknown: {why}"
    return replace(
        ev,
        verdict=Verdict.UNKNOWN,
        reason=ReasonCode.WORKLOAD_SETTINGS_UNKNOWN,
        message=why,
        warnings=(*ev.warnings, warning),
    )


def _widened(reading: Reading, ev: Evaluation) -> Evaluation:
    """An invalid setting that a flag fitgate takes without modelling makes valid in vLLM: Unknown (its rule, widened).

    The evaluation's message names the sizing field its rule refused (``spec.serving: enable_eplb: ...``).
    """
    words = [f"{name} {value}" for name, value in reading.args.items()]
    for field in RULES_WIDENED_BY:
        word = rule_widened(field, words) if f"spec.serving: {field}:" in ev.message else None
        if word is not None:
            return _unknown(
                ev,
                f"{ev.message}; but {word}, which fitgate takes without modelling, widens vLLM's rule, which takes it",
            )
    return ev


def finish(reading: Reading, ev: Evaluation) -> WorkloadVerdict:
    """The verdict in the workload's terms: its source, the numbers, and the fix in its args."""
    if reading.unresolved and (ev.verdict is Verdict.DOES_NOT_FIT or ev.reason is ReasonCode.INVALID_SETTINGS):
        # hunt89 F4: `vllm serve M $EXTRA_ARGS` with EXTRA_ARGS from a Secret (or "${ARGS[@]}") may hold the very flags
        # that make it fit (--max-model-len 8192), or that vLLM needs to take a setting (--hf-overrides with a YaRN
        # rope: hunt209 F2, a refusal was Invalid): neither is one fitgate can show
        words = " ".join(w[:60] for w in reading.unresolved[:3])
        ev = _unknown(
            ev, f"the vLLM command also holds {words}, whose value fitgate cannot read, and without it: {ev.message}"
        )
    if ev.reason is ReasonCode.INVALID_SETTINGS and reading.invalid is None:
        ev = _widened(reading, ev)
    shrink = may_shrink(reading.args)
    if not shrink and not release_modelled(reading.vllm_version):
        shrink = unknown_flags(reading.args, reading.how)  # hunt110 F2: a newer release's flag may change memory
    if shrink and ev.verdict is Verdict.DOES_NOT_FIT:
        # hunt107 F3: flags fitgate takes without modelling that can make it fit (prefetch weight offload ...)
        ev = _unknown(
            ev, f"{', '.join(shrink[:3])} may make it fit, which fitgate does not model; without them: {ev.message}"
        )
    host = _host_memory_warning(reading, ev)
    if host is not None:  # a warning, never a denial: the kubelet, not vLLM, would stop it
        ev = replace(ev, warnings=(*ev.warnings, f"fitgate: {host}"))
    fits = next((s for s in ev.suggestions if s.verdict is Verdict.FITS), None)
    fix = fix_in_args(reading, fits) if fits is not None else ""
    text = f"{reading.source}: {reading.model or 'model not read'}: {_core(ev.message)}"
    if ev.reason is ReasonCode.GPU_LIMIT_BELOW_PARALLELISM:
        text = f"{reading.source}: {ev.message}"
    elif fix:
        text += f"; smallest fix: {fix}"
    if reading.notes:
        text += " (" + "; ".join(reading.notes) + ")"
    invalid = reading.invalid is not None or ev.reason is ReasonCode.INVALID_SETTINGS
    return WorkloadVerdict(reading, ev, text, fix, invalid)


def _spec_or_verdict(reading: Reading) -> ModelDeploymentSpec | WorkloadVerdict:
    """The spec to size, or the verdict already known before sizing (a shortfall, an invalid setting)."""
    early = before_sizing(reading)
    if early is not None:
        return finish(reading, early)
    try:
        return to_spec(reading)
    except SpecError as exc:
        # the workload's own settings were read; a bound of fitgate's ModelDeployment (64 nodes a replica, 64 GPUs of
        # TP x PP) is what fitgate sizes, not what vLLM takes: Unknown, never Invalid for that alone (hunt88 F5)
        why = f"{exc}: outside what fitgate sizes"
        return finish(replace(reading, unknown=why), unknown(ReasonCode.WORKLOAD_SETTINGS_UNKNOWN, why))


def evaluate_reading(
    reading: Reading, model: ModelInput | None, gpus: Inventory | Iterable[NodeGPUs], *, facts: ModelFacts | None = None
) -> WorkloadVerdict:
    """The verdict on a workload whose checkpoint is known (``fitgate check``, tests)."""
    spec = _spec_or_verdict(reading)
    if isinstance(spec, WorkloadVerdict):
        return spec
    return finish(reading, evaluate(spec, model, gpus, facts=facts, namespace=reading.namespace))


async def evaluate_workload(
    reading: Reading, nodes: Inventory | Iterable[NodeGPUs], store: FactsStore, timeout_s: float, *, blocking: bool
) -> WorkloadVerdict:
    """The verdict with whatever the store knows (admission: not blocking; the audit: blocking)."""
    reading = _gpu_claim(reading, nodes)
    spec = _spec_or_verdict(reading)
    if isinstance(spec, WorkloadVerdict):
        return spec
    lane = "reconcile" if blocking else "admission"  # the audit never holds up a review
    ev, _ = await _evaluate(spec, nodes, store, timeout_s, blocking, reading.namespace, lane=lane)
    return finish(reading, ev)


def _gpu_claim(reading: Reading, nodes: Inventory | Iterable[NodeGPUs]) -> Reading:
    """The reading with its GPUs' claim template: the first of its claims the cluster's DRA state says asks for GPUs.

    hunt80 G2: a ComputeDomain's IMEX channel claim listed before the GPU claim made the workload Unknown ("requests no
    NVIDIA GPU"); the other claims the container uses are tried in order. Unchanged where none asks for GPUs either.
    """
    if not reading.claim_template or not reading.claim_alternatives or not isinstance(nodes, Inventory):
        return reading
    for template in (reading.claim_template, *reading.claim_alternatives):
        try:
            nodes.dra.gpu_request(reading.namespace, template)
        except (ClaimError, SelectorUnsupportedError):
            continue
        if template == reading.claim_template:
            return reading
        return replace(reading, claim_template=template, claim_copies=1)
    return reading


def decide_workload(
    verdict: WorkloadVerdict, mode: str, unknown_policy: UnknownPolicy, *, dryrun: bool = False
) -> AdmissionOutcome:
    """Admit or deny: enforce denies DoesNotFit and what vLLM would refuse; warn admits both with a warning.

    A workload that sizes goes through :func:`fitgate.operator.decision.logic.decide` (the ModelDeployment
    decision); only the message is the workload's.
    """
    ev = verdict.evaluation
    reading = verdict.reading
    text = f"fitgate: {verdict.message}"
    if verdict.invalid:
        if mode == "enforce":
            return AdmissionOutcome(False, text, (), "denied", DENIED_INVALID)
        return AdmissionOutcome(True, text, (text,), "warned")
    try:
        spec = to_spec(reading, mode)
    except SpecError:  # the reading could not be sized (an unknown setting): decided as Unknown
        spec = to_spec(replace(reading, serving={}, model=reading.model or "unknown", fingerprint=""), mode)
    outcome = decide(spec, ev, unknown_policy, dryrun=dryrun)
    if ev.verdict is Verdict.DOES_NOT_FIT:
        warnings = (text,) if outcome.allowed else ()
        outcome = replace(outcome, message=text, warnings=warnings + outcome.warnings[len(warnings) :])
    return _with_reading_warnings(outcome, reading)


def _with_reading_warnings(outcome: AdmissionOutcome, reading: Reading) -> AdmissionOutcome:
    """The reading's own warnings (a vLLM release not read or not modelled) said at admission, once each."""
    said = " ".join(outcome.warnings)
    extra = tuple(f"fitgate: {reading.source}: {w}" for w in reading.warnings if w not in said)
    return replace(outcome, warnings=outcome.warnings + extra) if extra and outcome.allowed else outcome


def mode_of(annotations: dict[str, str] | None, namespace_mode: str | None) -> str | None:
    """The validation mode: the object's annotation, else its namespace's label; None when not opted in."""
    value = (annotations or {}).get(VALIDATE_KEY) or namespace_mode
    return value if value in MODES else None
