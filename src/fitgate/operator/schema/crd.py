"""Generate the ModelDeployment CRD from the pydantic models in :mod:`fitgate.operator.schema.api`.

    python -m fitgate.operator.crd > crds/fitgate.io_modeldeployments.yaml

The pydantic JSON schema is turned into a Kubernetes structural schema: references inlined,
``Optional`` as ``nullable``, no defaults (the API server must not rewrite what a user wrote; the
operator applies vLLM's defaults), ranges and enums kept, CEL rules carried over.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import yaml

from fitgate.operator.schema.api import (
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
)

_DROP = {"title", "default"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            single: dict[str, Any] = _structural({**options[0], **rest}, defs)
            if nullable:
                single["nullable"] = True
            return single
        if sorted(o.get("type", "") for o in options) == ["integer", "string"]:
            return _int_or_string(options, rest, nullable)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "exclusiveMinimum":
            out["minimum"] = value
            out["exclusiveMinimum"] = True
            continue
        if key == "exclusiveMaximum":
            out["maximum"] = value
            out["exclusiveMaximum"] = True
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        if key == "properties":
            out[key] = {k: _structural(v, defs) for k, v in value.items()}
            continue
        out[key] = _structural(value, defs)
    if "properties" in out and out.get("additionalProperties") is False:
        # Structural schemas cannot combine both; unknown fields are refused by the API server's
        # strict field validation (kubectl's default) instead of being silently pruned.
        del out["additionalProperties"]
    if out.get("additionalProperties") is True:  # dict[str, Any]: any JSON object, kept as written
        del out["additionalProperties"]
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _int_or_string(options: list[dict[str, Any]], rest: dict[str, Any], nullable: bool) -> dict[str, Any]:
    """An integer or one fixed word (``maxModelLen: auto``) as a structural schema.

    ``x-kubernetes-int-or-string`` with the only ``anyOf`` a structural schema allows beside it; the integer's
    bounds and the word's pattern sit beside them, each applying to its own type only (OpenAPI's ``minimum``
    to numbers, ``pattern`` to strings).
    """
    number = next(o for o in options if o["type"] == "integer")
    word = next(o for o in options if o["type"] == "string")
    words = [word["const"]] if "const" in word else list(word.get("enum", []))
    out: dict[str, Any] = {k: v for k, v in rest.items() if k not in _DROP}
    out["x-kubernetes-int-or-string"] = True
    out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    out.update({k: number[k] for k in ("minimum", "maximum") if k in number})
    if words:
        out["pattern"] = "^(" + "|".join(re.escape(w) for w in words) + ")$"
    if nullable:
        out["nullable"] = True
    return out


def schema_of(model: type[Any]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a pydantic model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    result: dict[str, Any] = _structural(raw, defs)
    return result


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition object."""
    status = schema_of(ModelDeploymentStatus)
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    spec = schema_of(ModelDeploymentSpec)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "annotations": {"fitgate.io/generated-by": "python -m fitgate.operator.crd"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": ["fitgate", "ai"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Model", "type": "string", "jsonPath": ".spec.model.name"},
                        {"name": "GPU", "type": "string", "jsonPath": ".status.gpuProduct"},
                        {"name": "TP", "type": "integer", "jsonPath": ".status.tensorParallelSize"},
                        {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
                        {"name": "Headroom", "type": "string", "jsonPath": ".status.headroom"},
                        {"name": "Max-Conc", "type": "string", "jsonPath": ".status.maxConcurrency"},
                        {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
                        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A model served with vLLM whose per-GPU memory fitgate checks against "
                            "the cluster's GPUs, at admission and continuously.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def render() -> str:
    """The CRD as YAML, as committed in crds/."""
    header = "# Generated from src/fitgate/operator/schema/api.py by `python -m fitgate.operator.crd`. Do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


def render_helm() -> str:
    """The CRD as the Helm chart's template: behind ``crds.enabled``, kept on uninstall with ``crds.keep``."""
    body = yaml.safe_dump(crd(), sort_keys=False, width=100)
    anchor = "    fitgate.io/generated-by: python -m fitgate.operator.crd\n"
    body = body.replace(
        anchor,
        anchor + "    {{- if .Values.crds.keep }}\n    helm.sh/resource-policy: keep\n    {{- end }}\n"
        '  labels:\n    {{- include "fitgate.labels" . | nindent 4 }}\n',
    )
    header = (
        "{{- /* Generated from src/fitgate/operator/schema/api.py by `python -m fitgate.operator.crd --helm`. */}}\n"
    )
    # A CRD applied by hand (or by another release) has no Helm ownership: Helm would refuse it with
    # "invalid ownership metadata"; say instead what to set. lookup is empty under helm template.
    guard = (
        '{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "modeldeployments.fitgate.io" }}\n'
        '{{- if and $crd (ne (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $crd) .Release.Name) }}\n'
        '{{- fail "the ModelDeployment CRD (modeldeployments.fitgate.io) already exists and this release does not '
        "own it (applied by hand or by another release): install with --set crds.enabled=false to keep it, "
        'or delete it first" }}\n'
        "{{- end }}\n"
    )
    return header + "{{- if .Values.crds.enabled }}\n" + guard + body + "{{- end }}\n"


def main() -> int:
    """Print the CRD (``--helm``: as the chart's template)."""
    sys.stdout.write(render_helm() if "--helm" in sys.argv[1:] else render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
