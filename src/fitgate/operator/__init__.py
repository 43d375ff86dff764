"""The Kubernetes side: ModelDeployment API, GPU inventory, evaluation, kopf handlers, metrics."""
