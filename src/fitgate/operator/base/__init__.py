"""Shared plumbing: the Kubernetes client, bounded reads off the event loop, Prometheus metrics and their auth."""
