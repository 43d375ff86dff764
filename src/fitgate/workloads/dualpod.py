"""llm-d's dual-pod serving: the vLLM server of a requester pod comes from its ``server-patch`` annotation.

llm-d-modelservice with ``requester.enable`` renders a Deployment whose pod runs llm-d-fast-model-actuation's
requester (``/app/requester``), holding the GPU; the dual-pods controller creates the server-providing pod from that
pod patched with the annotation ``dual-pod.llm-d.ai/server-patch`` (a YAML pod patch whose ``spec.containers`` hold the
``vllm serve`` container: llm-d-incubation/llm-d-modelservice ``examples/values-requester.yaml``,
``templates/_helpers.tpl``). hunt195 F4: the requester was Skipped as "runs no vLLM server".
"""

from __future__ import annotations

from typing import Any

import yaml

from fitgate.workloads.bounds import BudgetError, load_yaml
from fitgate.workloads.podspec import as_dict, as_list

SERVER_PATCH = "dual-pod.llm-d.ai/server-patch"
#: The most bytes of the annotation parsed (the API server caps all of an object's annotations at 256 KiB).
MAX_PATCH_BYTES = 256 * 1024


def server_pod(pod: dict[str, Any], annotations: dict[str, Any]) -> dict[str, Any] | str | None:
    """The server-providing pod's spec; None without the annotation; why, where the patch cannot be read.

    ``pod`` with the patch's containers merged by name (a strategic merge's key for them) and its other spec fields
    set. A patch fitgate cannot read is the controller's to judge: the reader makes it Unknown, never Invalid.
    """
    text = annotations.get(SERVER_PATCH)
    if not isinstance(text, str):
        return None
    if len(text.encode()) > MAX_PATCH_BYTES:
        return f"annotation {SERVER_PATCH}: more than {MAX_PATCH_BYTES} bytes"
    try:
        patch = load_yaml(text)
    except (yaml.YAMLError, BudgetError) as exc:
        first = (str(exc).splitlines() or [""])[0][:120]
        return f"annotation {SERVER_PATCH}: not a YAML pod patch fitgate can read ({first})"
    spec = as_dict(as_dict(patch).get("spec"))
    if not spec:
        return f"annotation {SERVER_PATCH}: no spec in the pod patch"
    containers = [as_dict(c) for c in as_list(pod.get("containers"))]
    for extra in (as_dict(c) for c in as_list(spec.get("containers"))[:64]):
        at = next((i for i, c in enumerate(containers) if c.get("name") == extra.get("name")), None)
        if at is None:
            containers.append(extra)
        else:
            containers[at] = {**containers[at], **extra}
    return {
        **pod,
        **{k: v for k, v in spec.items() if k not in ("containers", "initContainers")},
        "containers": containers,
    }
