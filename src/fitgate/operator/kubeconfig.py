"""Where the operator's Kubernetes clients get their credentials: one function for every watch and call."""

from __future__ import annotations


def load() -> None:
    """Configure the ``kubernetes`` client: the in-cluster service account, else the kubeconfig (``KUBECONFIG``)."""
    from kubernetes import config  # noqa: PLC0415 - only the operator needs the client

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
