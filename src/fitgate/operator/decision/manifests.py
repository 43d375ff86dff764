"""The manifests ``fitgate check`` reads: a file's bounded text, its YAML documents, and why one cannot be read."""

from __future__ import annotations

import codecs
import contextlib
import itertools
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from fitgate.workloads.bounds import SAFE_LOADER, BudgetError, budgets, check_yaml, too_many_digits

#: Most bytes of one manifest file (or stdin) ``fitgate check`` reads, as ``compare --log`` reads a log: the whole
#: text is held and parsed (hunt83 F8: ``fitgate check /dev/zero`` grew to 3.8 GB, then MemoryError).
MAX_MANIFEST_BYTES = 64 << 20


def read_manifest(path: str) -> str:
    """The text of a manifest file (``-``: stdin), at most :data:`MAX_MANIFEST_BYTES` read."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
    else:
        with Path(path).open("rb") as fh:
            data = fh.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise BudgetError(f"more than {MAX_MANIFEST_BYTES} bytes; fitgate check reads manifests of at most 64 MiB")
    # YAML 1.2 5.2: UTF-8, UTF-16 or UTF-32, told by a byte order mark; kubectl applies them (kubernetes issue 39008)
    # and Windows PowerShell's `>` writes UTF-16 (hunt100 F1: Invalid, exit 2)
    boms = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"))
    for bom, codec in (*boms, (codecs.BOM_UTF16_BE, "utf-16")):  # UTF-32 first: its LE mark begins as UTF-16's
        if data.startswith(bom):
            return data.decode(codec)
    return data.decode("utf-8")


def documents(path: str) -> Iterable[tuple[str, Any]]:
    """Each document of ``path`` with its source (``file#i``), or an :class:`Unbuilt` for one that cannot be built."""
    text = read_manifest(path)
    # hardening (issue 22): aliases may not expand a manifest set past its own size (or the YAML budgets),
    # nor nest it past their depth; checked on the parse events before anything is built
    budget = budgets()
    check_yaml(
        text,
        replace(
            budget,
            max_yaml_nodes=max(budget.max_yaml_nodes, len(text)),
            max_yaml_expanded_bytes=max(budget.max_yaml_expanded_bytes, 2 * len(text)),
            max_yaml_depth=max(budget.max_yaml_depth, 200),  # CRD schemas in a manifest set nest deeply
        ),
    )
    loader = SAFE_LOADER(text)
    try:
        for i in itertools.count():
            if not loader.check_node():
                return
            node = loader.get_node()  # the document's syntax: an error here is the file's (yaml.YAMLError)
            try:
                doc = loader.construct_document(node)
            except ValueError:  # int() past its digit limit, not Python's advice (hunt83 F4 in check)
                raise BudgetError(f"document {i} {too_many_digits()}") from None
            except yaml.constructor.ConstructorError as exc:
                # hunt104 F2: a document that parses but cannot be built (an unrendered `{{HF_TOKEN}}` in a Secret
                # is a mapping used as a key) is that document's fault, not the others'
                loader.constructed_objects, loader.recursive_objects, loader.state_generators = {}, {}, []
                yield f"{path}#{i}", Unbuilt.of(node, exc)
                continue
            yield from _expanded(path, i, doc)
    finally:
        loader.dispose()


@dataclass(frozen=True)
class Unbuilt:
    """A manifest document whose YAML parses but cannot be built into values.

    Its kind and name, where its top-level nodes give them, and why it cannot be built.
    """

    kind: str
    name: str
    why: str

    @staticmethod
    def of(node: yaml.Node, exc: yaml.YAMLError) -> Unbuilt:
        """The kind and name a document's top-level scalars give, and the error's first line and position."""

        def scalar(mapping: yaml.Node, key: str) -> yaml.Node | None:
            if isinstance(mapping, yaml.MappingNode):
                for k, v in mapping.value[:200]:
                    if isinstance(k, yaml.ScalarNode) and k.value == key:
                        return v  # type: ignore[no-any-return]
            return None

        kind = scalar(node, "kind")
        meta = scalar(node, "metadata")
        name = scalar(meta, "name") if meta is not None else None
        namespace = scalar(meta, "namespace") if meta is not None else None
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = str(getattr(exc, "problem", "") or str(exc).splitlines()[0])
        return Unbuilt(
            str(kind.value)[:63] if isinstance(kind, yaml.ScalarNode) else "",
            f"{str(namespace.value)[:63] if isinstance(namespace, yaml.ScalarNode) else 'default'}/"
            f"{str(name.value)[:63] if isinstance(name, yaml.ScalarNode) else '?'}",
            f"cannot read YAML: {problem[:200]}{where}",
        )


def _expanded(path: str, i: int, doc: Any) -> Iterable[tuple[str, Any]]:
    """A document, a ``kind: List``'s items or an OpenShift ``Template``'s objects, with their sources.

    A List is ``kubectl get -o yaml`` of several objects; a Template (template.openshift.io/v1 ``objects``) is how
    OpenShift AI ships its vLLM ServingRuntimes (hunt136 F2); its ``${PARAMETER}`` references stay as written.
    """
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        for j, item in enumerate(doc["items"]):
            yield f"{path}#{i}.items[{j}]", item
    elif isinstance(doc, dict) and doc.get("kind") == "Template" and isinstance(doc.get("objects"), list):
        for j, item in enumerate(doc["objects"]):
            yield f"{path}#{i}.objects[{j}]", item
    elif doc is not None:
        yield f"{path}#{i}", doc


def unreadable(exc: Exception, path: str) -> str:
    """Why a file is not YAML, with the line and column the parser stopped at (hunt173 F1), and a Helm hint."""
    first = f"cannot read YAML: {exc}".splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        first += f" (line {mark.line + 1}, column {mark.column + 1})"
    try:
        with open(path, "rb") if path != "-" else contextlib.nullcontext(None) as f:
            head = f.read(1 << 16) if f is not None else b""
    except OSError:
        head = b""
    if isinstance(exc, yaml.YAMLError) and b"{{" in head:
        first += "; an unrendered Helm / Go template? render it first: helm template NAME CHART | fitgate check -"
    return first
