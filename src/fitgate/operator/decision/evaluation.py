"""What one evaluation found: the :class:`Evaluation` that admission, reconcile and ``fitgate check`` share.

Made by :mod:`fitgate.operator.decision.evaluate`, rendered into status, conditions and messages by
:mod:`fitgate.operator.decision.status`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fitgate.checkpoints.facts import ModelFacts
from fitgate.operator.decision.poolplan import PoolResult
from fitgate.operator.decision.speed import SpeedAtLoad
from fitgate.operator.gpus.inventory import GpuPool
from fitgate.sizing import EngineArg, Option, Plan, ReasonCode, Suggestion, Verdict


@dataclass(frozen=True)
class Evaluation:
    """Everything admission and reconcile need."""

    verdict: Verdict
    reason: ReasonCode
    message: str
    warnings: tuple[str, ...]
    pools: tuple[PoolResult, ...] = ()
    best: PoolResult | None = None
    suggestions: tuple[Suggestion, ...] = ()
    engine_args: tuple[EngineArg, ...] = ()
    inventory_hash: str = ""
    facts: ModelFacts | None = None
    # What the checkpoint's resolution and the best pool's plan say a reader should know, as ``fitgate plan``
    # prints them: what is not counted, where a figure is a bound (:func:`notes_of`)
    notes: tuple[str, ...] = field(default_factory=tuple)
    recommended_change: Suggestion | None = None  # the suggestion engine_args were taken from (a misfit)
    alternatives: tuple[tuple[GpuPool, Option], ...] = ()  # pools of the cluster that would hold a misfit
    # (reason, note) of a verdict from facts known without the Hub while its resolution is pending or failing
    provisional: tuple[ReasonCode, str] | None = None
    # Clusters (docs/clusters.md): why no node can take it now although the GPU is known (a pool that scales
    # from zero): the verdict is the fit on that GPU, the Schedulable condition False with reason NoNodeYet
    no_node: str = ""
    # issue 24: the best plan's speed at the workload's inputTokens / outputTokens, against its targets
    speed: SpeedAtLoad | None = None


#: At most this many notes, each cut to this many characters: they go into the object's status and every
#: ``fitgate check`` answer, and a checkpoint's notes can quote what its files say.
MAX_NOTES = 16
MAX_NOTE_CHARS = 1000


def notes_of(facts: ModelFacts | None, plan: Plan | None) -> tuple[str, ...]:
    """The checkpoint's notes, then the plan's, each once (at most :data:`MAX_NOTES` of :data:`MAX_NOTE_CHARS`)."""
    seen: dict[str, None] = {}
    for note in (*(facts.notes if facts else ()), *(plan.notes if plan else ())):
        seen.setdefault(note if len(note) <= MAX_NOTE_CHARS else note[: MAX_NOTE_CHARS - 3] + "...")
    return tuple(seen)[:MAX_NOTES]


def unknown(reason: ReasonCode, message: str, facts: ModelFacts | None = None, inv: str = "") -> Evaluation:
    """An Unknown verdict with its reason (missing inputs)."""
    return Evaluation(
        Verdict.UNKNOWN, reason, message, (f"fitgate: verdict Unknown: {message}",), inventory_hash=inv, facts=facts
    )
