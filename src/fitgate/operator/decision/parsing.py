"""Admission's parse of a raw ModelDeployment spec, remembered by its value and by its shape (issue 23).

A review's spec is a plain ``dict`` decoded from the API server's JSON, and its ``repr`` tells such values apart
(types, key order, every string quoted). Two memos:

* the same spec reviewed again (GitOps re-applies, dry runs, retries, the same spec under another name) is not
  validated again (:data:`PARSED`, by the raw spec's value);
* a new workload of a spec seen before (every ``kubectl apply`` that changes only ``spec.workload``: the common
  new spec) validates its workload alone and reuses the rest (:data:`SHAPES`, by the raw spec without its
  workload): the spec's settings, model and placement are most of a parse, and their JSON most of the cache key.

Either way the result is what :func:`~fitgate.operator.schema.api.parse_spec` gives for the whole raw spec (the
same values, the same fields set, the same canonical JSON, and the same error for an invalid one: anything the
workload-only path does not accept is parsed whole again, which raises exactly as before). Parsing reads nothing
but the spec; an invalid one raises every time (not remembered).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fitgate.operator.schema.api import SPEC_RULES, ModelDeploymentSpec, WorkloadSpec, parse_spec
from fitgate.sizing.memo import BoundedMemo, Miss

#: A parsed spec, its canonical JSON (``model_dump_json()``: the evaluation cache's key) and its shape (the raw
#: spec without its workload: what :data:`~fitgate.operator.decision.logic.INLINE_BUDGET_S` is judged by).
Parsed = tuple[ModelDeploymentSpec, str, str]


_FIELDS = list(ModelDeploymentSpec.model_fields)
_BEFORE_WORKLOAD = set(_FIELDS[: _FIELDS.index("workload")])
_AFTER_WORKLOAD = set(_FIELDS[_FIELDS.index("workload") + 1 :])


class _Shape:
    """A spec parsed without its workload, and its canonical JSON cut where the workload goes."""

    __slots__ = ("head", "spec", "tail")

    def __init__(self, spec: ModelDeploymentSpec) -> None:
        self.spec = spec.model_copy(update={"workload": None}) if spec.workload is not None else spec
        # ``{"model":...,"serving":...}`` and ``{"placement":...,"economics":...}``: the whole spec's JSON is the
        # first without its ``}``, ``,"workload":``, the workload's JSON, ``,`` and the second without its ``{``
        # (pydantic writes fields in declaration order, without spaces; every field is written, None as null).
        self.head = self.spec.model_dump_json(include=_BEFORE_WORKLOAD)[:-1]
        self.tail = self.spec.model_dump_json(include=_AFTER_WORKLOAD)[1:]

    def json(self, workload: WorkloadSpec | None) -> str:
        """The JSON of this shape's spec with ``workload``, as ``model_dump_json()`` writes the whole spec."""
        inner = workload.model_dump_json() if workload is not None else "null"
        return f'{self.head},"workload":{inner},{self.tail}'


def parsed(raw_spec: Mapping[str, Any]) -> Parsed:
    """``raw_spec`` parsed, its canonical JSON and its shape; see the module docstring.

    Raises:
        SpecError: the raw spec is invalid (the message :func:`parse_spec` gives for it).
    """
    if type(raw_spec) is not dict:  # anything but a plain dict: parsed every time, its shape from the parsed spec
        spec = parse_spec(raw_spec)
        return spec, spec.model_dump_json(), spec.model_dump_json(exclude={"workload"})
    has_workload = "workload" in raw_spec
    rest = {k: v for k, v in raw_spec.items() if k != "workload"} if has_workload else raw_spec
    shape_key = repr(rest)
    key = (shape_key, repr(raw_spec["workload"]) if has_workload else "")
    if len(shape_key) + len(key[1]) > PARSED_KEY_CHARS:  # parsed every time: the memos' memory stays bounded
        spec = parse_spec(raw_spec)
        return spec, spec.model_dump_json(), shape_key
    hit = PARSED.get(key)
    if not isinstance(hit, Miss):
        return hit
    value = _with_shape(raw_spec, shape_key)
    PARSED.put(key, value)
    return value


def _with_shape(raw_spec: dict[str, Any], shape_key: str) -> Parsed:
    """A raw spec not seen before: its workload alone validated on a shape seen before, else the whole parse."""
    shape = SHAPES.get(shape_key)
    raw_workload = raw_spec.get("workload")
    if not isinstance(shape, Miss) and isinstance(raw_workload, dict):
        try:
            workload = WorkloadSpec.model_validate(raw_workload)
        except ValidationError:
            workload = None  # the whole parse below names the fields as it always has
        if workload is not None:
            spec = shape.spec.model_copy(update={"workload": workload})
            if all(rule.holds(spec) for rule in SPEC_RULES):
                return spec, shape.json(workload), shape_key
    spec = parse_spec(raw_spec)  # raises SpecError for an invalid spec, every time
    if isinstance(shape, Miss):
        shape = _Shape(spec)
        SHAPES.put(shape_key, shape)
    return spec, shape.json(spec.workload), shape_key


#: Parsed specs by their raw value (the shape's and the workload's ``repr``). Bound 1024, as the evaluation cache:
#: the specs reviewed lately.
PARSED: BoundedMemo[tuple[str, str], Parsed] = BoundedMemo(1024)
#: Specs parsed without their workload by the raw spec's ``repr`` without it. Bound 1024: the deployments (and
#: settings) reviewed lately; a deployment's workloads share one.
SHAPES: BoundedMemo[str, _Shape] = BoundedMemo(1024)
PARSED_KEY_CHARS = 16_384  # a real spec's repr is 0.3-2 KB
