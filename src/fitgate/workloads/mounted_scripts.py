"""A container whose command runs a script from a mounted ConfigMap, read as that script (hunt157 S1, hunt163 F2).

Charts keep the server's start-up in a ConfigMap key mounted into the pod and run it as the command
(``command: ["/scripts/startup.sh"]`` with ``exec vllm serve --model=... "$@"`` in the script and the engine flags in
``args``: castai's hosted-model chart). Kubernetes runs the file with its ``args`` as the positional parameters, which
is what ``sh -c SCRIPT PATH ARG ...`` does; so, where the ConfigMap is among the manifests read, the command becomes
that, and the script is read as every ``sh -c`` script is (its size bounded by :func:`~fitgate.workloads.bounds.
check_script` there). A script the manifests do not hold leaves the container as it was.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from fitgate.workloads.argv import SHELLS
from fitgate.workloads.podspec import as_dict, as_list


def with_mounted_scripts(pod: dict[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """``pod`` with each container that runs a mounted ConfigMap script given that script as ``sh -c``."""
    if not configmaps:
        return pod
    volumes = {str(v.get("name")): as_dict(v.get("configMap")) for v in map(as_dict, as_list(pod.get("volumes")))}
    containers = []
    changed = False
    for container in map(as_dict, as_list(pod.get("containers"))):
        script = _script_of(container, volumes, configmaps)
        if script is None:
            containers.append(container)
            continue
        text, path = script
        containers.append({**container, "command": ["sh", "-c", text, path]})
        changed = True
    return {**pod, "containers": containers} if changed else pod


def _script_of(
    container: dict[str, Any], volumes: Mapping[str, dict[str, Any]], configmaps: Mapping[str, Mapping[str, str]]
) -> tuple[str, str] | None:
    """(the script's text, its path) where ``container``'s command runs a file of a mounted ConfigMap, else None."""
    command = [str(w) for w in as_list(container.get("command"))[:3]]  # two words at most: a third is not dropped
    if len(command) == 2 and posixpath.basename(command[0]) in SHELLS:
        command = command[1:]
    if len(command) != 1 or not command[0].startswith("/"):
        return None
    path = posixpath.normpath(command[0])
    for mount in map(as_dict, as_list(container.get("volumeMounts"))):
        source = volumes.get(str(mount.get("name")))
        at = posixpath.normpath(str(mount.get("mountPath") or "/-"))
        if not source or not (path == at or path.startswith(at.rstrip("/") + "/")):
            continue
        key = str(mount.get("subPath") or "") if path == at else path[len(at.rstrip("/")) + 1 :]
        items = {str(i.get("path")): str(i.get("key")) for i in map(as_dict, as_list(source.get("items")))}
        if items:  # only the listed keys are projected, each at its path
            key = items.get(key, "")
        text = configmaps.get(str(source.get("name")), {}).get(key)
        return (text, path) if isinstance(text, str) and text.strip() else None
    return None
