"""Where the operator's Kubernetes clients get their credentials: one function for every watch and call."""

from __future__ import annotations

from typing import Any


def load() -> None:
    """Configure the ``kubernetes`` client: the in-cluster service account, else the kubeconfig (``KUBECONFIG``)."""
    from kubernetes import config  # noqa: PLC0415 - only the operator needs the client

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


def core_v1() -> Any:
    """A ``CoreV1Api`` on :func:`load`'s credentials (nodes, pods, ConfigMaps)."""
    from kubernetes import client  # noqa: PLC0415

    load()
    return client.CoreV1Api()


def custom_objects() -> Any:
    """A ``CustomObjectsApi`` on :func:`load`'s credentials (resource.k8s.io and other API groups)."""
    from kubernetes import client  # noqa: PLC0415

    load()
    return client.CustomObjectsApi()
