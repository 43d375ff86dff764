"""The Kubernetes side: ModelDeployment API, GPU inventory, evaluation, kopf handlers, metrics.

Its rooms import one way, top to bottom (an import-linter contract in pyproject.toml):

- :mod:`~fitgate.operator.runtime`: kopf handlers, the webhook server, start-up, shutdown, RBAC, finalizers;
- :mod:`~fitgate.operator.observation` (running pods, their metrics, the audit) and
  :mod:`~fitgate.operator.watches` (the node, DRA and template watches), independent of each other;
- :mod:`~fitgate.operator.decision`: verdicts from a spec, the facts store and the inventory;
- :mod:`~fitgate.operator.gpus` (the GPU inventory: nodes, DRA, CEL, labels, placement, sharing, templates),
  :mod:`~fitgate.operator.schema` (the CRD model, its generator, the operator's config) and
  :mod:`~fitgate.operator.base` (Kubernetes client, bounded reads, Prometheus metrics), independent of each other.

``python -m fitgate.operator.crd`` prints the CRD (:mod:`fitgate.operator.crd` re-exports the generator).
"""
