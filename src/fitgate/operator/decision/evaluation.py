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
from fitgate.sizing import EngineArg, Option, ReasonCode, Suggestion, Verdict


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


def unknown(reason: ReasonCode, message: str, facts: ModelFacts | None = None, inv: str = "") -> Evaluation:
    """An Unknown verdict with its reason (missing inputs)."""
    return Evaluation(
        Verdict.UNKNOWN, reason, message, (f"fitgate: verdict Unknown: {message}",), inventory_hash=inv, facts=facts
    )
