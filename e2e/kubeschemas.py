"""Offline JSON schemas for kubeconform, from the real kube-apiserver's OpenAPI v3 and from CRDs.

kubeconform's default schemas live on GitHub raw (yannh/kubernetes-json-schema), which a CI machine may not
reach, and no release of that repository covers every Kubernetes version on the day it ships. So the e2e
suite writes its own, in kubeconform's file layout (``{kind}{-group-version}.json``, the ``KindSuffix`` of
kubeconform's registry.go: the group's first dot-separated part, lower-cased), from:

* the e2e control plane's OpenAPI v3 (``/openapi/v3`` then each group-version's ``serverRelativeURL``;
  https://kubernetes.io/docs/concepts/overview/kubernetes-api/#openapi-v3), every kind a group-version
  names in ``x-kubernetes-group-version-kind``;
* CustomResourceDefinitions (``spec.versions[].schema.openAPIV3Schema``): the chart's, fitgate's, and any
  third-party CRD files (prometheus-operator, cert-manager) the test reads from their Go modules.

The conversion follows kubeconform's scripts/openapi2jsonschema.py (yannh/kubeconform): every ``$ref``
inlined ("standalone"), ``additionalProperties: false`` on every object that lists its properties and does not
preserve unknown fields ("strict"), ``nullable`` as a ``null`` type, int-or-string as a union. A reference
cycle (only JSONSchemaProps, inside the CRD kind itself) is cut to an open schema ``{}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

REF_PREFIX = "#/components/schemas/"
# kubeconform's -schema-location template for the files write() lays out (kubeconform README, "Overriding
# schemas location": ResourceKind is the lower-cased kind, KindSuffix "-group-version" or "-version").
LOCATION = "{{ .ResourceKind }}{{ .KindSuffix }}.json"


def file_name(group: str, version: str, kind: str) -> str:
    """kubeconform's file name for a kind (registry.go: ``strings.Split(group, ".")[0]``, lower-cased)."""
    suffix = f"-{group.split('.', maxsplit=1)[0].lower()}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix}.json"


def _strict(node: Any, resolve: Callable[[str], Any]) -> Any:
    """One schema node made standalone and strict (see the module docstring)."""
    if isinstance(node, list):
        return [_strict(item, resolve) for item in node]
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("$ref"), str):
        resolved = resolve(node["$ref"])
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**resolved, **_strict(rest, resolve)} if rest else resolved
    if len(node.get("allOf", ())) == 1:  # the OpenAPI v3 idiom {"allOf": [{"$ref": X}], "default": ...}
        (only,) = node["allOf"]
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return {**_strict(rest, resolve), **_strict(only, resolve)}
    out = {key: _strict(value, resolve) for key, value in node.items() if key not in ("default", "properties")}
    if node.get("x-kubernetes-int-or-string") or node.get("format") == "int-or-string":
        out.pop("type", None)
        out.pop("format", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node:
        out["properties"] = {name: _strict(sub, resolve) for name, sub in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def standalone(schema: Mapping[str, Any], components: Mapping[str, Any]) -> Any:
    """``schema`` with every ``#/components/schemas/`` reference inlined; a cycle becomes ``{}``."""
    done: dict[str, Any] = {}
    stack: list[str] = []
    cuts = [0]

    def resolve(ref: str) -> Any:
        if not ref.startswith(REF_PREFIX):
            raise ValueError(f"$ref {ref!r}: only {REF_PREFIX}... is supported")
        name = ref.removeprefix(REF_PREFIX)
        if name in done:
            return done[name]
        if name in stack:
            cuts[0] += 1
            return {}
        before = cuts[0]
        stack.append(name)
        try:
            result = _strict(components[name], resolve)
        finally:
            stack.pop()
        if cuts[0] == before:  # a result with a cut in it depends on where the cycle was entered: not reused
            done[name] = result
        return result

    return _strict(schema, resolve)


def from_openapi_v3(get_raw: Callable[[str], str]) -> dict[str, Any]:
    """Every kind the API server serves, as {file name: standalone strict schema}.

    ``get_raw(path)`` returns the body of ``kubectl get --raw path``."""
    index = json.loads(get_raw("/openapi/v3"))
    out: dict[str, Any] = {}
    for path, entry in sorted(index["paths"].items()):
        parts = path.split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            continue  # discovery and version documents: no kinds
        document = json.loads(get_raw(entry["serverRelativeURL"]))
        components = document.get("components", {}).get("schemas", {})
        for schema in components.values():
            for gvk in schema.get("x-kubernetes-group-version-kind", ()):
                if (gvk.get("group", ""), gvk["version"]) != (group, version):
                    continue  # e.g. DeleteOptions, listed under every group-version
                name = file_name(group, version, gvk["kind"])
                out[name] = standalone(schema, components)
    return out


def from_crds(crds: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Every served version of each CustomResourceDefinition, as {file name: standalone strict schema}."""
    out: dict[str, Any] = {}
    for crd in crds:
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = version.get("schema", {}).get("openAPIV3Schema")
            if schema is None or not version.get("served", True):
                continue
            # metadata is ObjectMeta, checked by the API server not by the CRD's schema (kubeconform's
            # openapi2jsonschema.py leaves it open the same way).
            # apiVersion and kind are the API server's too, whether or not the CRD lists them.
            string = {"type": "string"}
            properties = {
                **schema.get("properties", {}),
                "apiVersion": string,
                "kind": string,
                "metadata": {"type": "object"},
            }
            out[file_name(spec["group"], version["name"], spec["names"]["kind"])] = standalone(
                {**schema, "properties": properties}, {}
            )
    return out


def write(schemas: Mapping[str, Any], directory: Path) -> str:
    """Write the schemas as files; return kubeconform's ``-schema-location`` for them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas.items():
        (directory / name).write_text(json.dumps(schema))
    return str(directory / LOCATION)
