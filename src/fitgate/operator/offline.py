"""``fitgate check``: the webhook's decision on ModelDeployment manifests, without a cluster.

The GPUs come from ``--gpu`` or each manifest's ``placement.gpuProduct`` (a catalog GPU or a GPU
Feature Discovery product string), as a pool of ``--gpus-per-node`` GPUs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.operator.api import GROUP, KIND, SpecError, parse_spec
from fitgate.operator.evaluate import evaluate, unknown
from fitgate.operator.inventory import NodeGPUs
from fitgate.operator.logic import DENIED_INVALID, decide
from fitgate.sizing import ReasonCode, SizingError, find_gpu


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one manifest document."""

    source: str
    name: str
    verdict: str  # Fits | Tight | DoesNotFit | Unknown | Invalid
    message: str
    gpu: str | None = None
    admitted: bool | None = None  # what the webhook would answer (None: not evaluated)

    def line(self) -> str:
        """One line for the terminal."""
        return f"{self.source}: {self.name}: {self.verdict}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "source": self.source,
            "name": self.name,
            "verdict": self.verdict,
            "gpu": self.gpu,
            "admitted": self.admitted,
            "message": self.message,
        }


def _documents(path: str) -> Iterable[tuple[str, Any]]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    for i, doc in enumerate(yaml.safe_load_all(text)):
        if doc is not None:
            yield f"{path}#{i}", doc


def check_document(source: str, doc: Any, gpu_name: str | None, gpus_per_node: int) -> CheckResult | None:
    """The verdict on one YAML document (None for documents that are not ModelDeployments)."""
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not str(doc.get("apiVersion", "")).startswith(GROUP):
        return None
    meta = doc.get("metadata") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    try:
        spec = parse_spec(doc.get("spec"))
    except SpecError as exc:
        return CheckResult(source, name, "Invalid", str(exc), admitted=False)
    product = gpu_name or spec.placement.gpu_product
    if not product:
        return CheckResult(source, name, "Unknown", "no GPU to check against: pass --gpu or set placement.gpuProduct")
    gpu = find_gpu(product)
    if gpu is None:
        return CheckResult(source, name, "Invalid", f"GPU {product!r} is not in the catalog (see `fitgate gpus`)")
    try:
        facts = resolve(spec.model.name, spec.model.revision, source=spec.model.source)
        model = to_model_input(facts)
    except (CheckpointError, SizingError) as exc:  # the webhook's Unknown: policy.onUnknown decides
        decision = decide(spec, unknown(ReasonCode.CHECKPOINT_UNAVAILABLE, str(exc)), "Warn")
        return CheckResult(source, name, "Unknown", str(exc), product, admitted=decision.allowed)
    labels = dict(spec.placement.node_selector)
    pool = NodeGPUs("offline", labels, product, gpu, gpus_per_node)
    spec_offline = spec.model_copy(update={"placement": spec.placement.model_copy(update={"gpu_product": None})})
    ev = evaluate(spec_offline, model, [pool], facts=facts)
    decision = decide(spec, ev, "Warn")  # the webhook's own decision
    if not decision.allowed and decision.code == DENIED_INVALID:
        return CheckResult(source, name, "Invalid", ev.message, product, admitted=False)
    return CheckResult(source, name, ev.verdict.value, ev.message, product, admitted=decision.allowed)


def check_files(files: Iterable[str], gpu_name: str | None = None, gpus_per_node: int = 8) -> list[CheckResult]:
    """The verdict on every ModelDeployment in ``files``."""
    results = []
    for path in files:
        try:
            docs = list(_documents(path))
        except (OSError, yaml.YAMLError) as exc:
            results.append(CheckResult(path, "-", "Invalid", f"cannot read YAML: {exc}".splitlines()[0]))
            continue
        for source, doc in docs:
            result = check_document(source, doc, gpu_name, gpus_per_node)
            if result is not None:
                results.append(result)
    return results
