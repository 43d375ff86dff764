"""Budgets of every parse of a workload's user-controlled input (issue 22, docs/hardening.md).

A workload's env, command line and ``--config`` file are written by whoever may create a Deployment.
Kubernetes' ``$(VAR)`` expansion doubles a value per env entry (``A_i=$(A_{i-1})$(A_{i-1})``: 29 entries,
1.4 KB of manifest, 512 MiB expanded) and YAML aliases multiply a node per level (a 518-byte "billion
laughs" file is a few hundred million nodes once printed). Both are bounded here *before* the output
exists: expansion counts the bytes it copies out of variables, YAML is walked as a stream of events
(PyYAML's parser keeps an explicit stack: no recursion, linear in the text) counting nodes and scalar
bytes with every alias expanded, and only a document within :class:`~fitgate.settings.ParseBudgets` is
built. Past a budget the reading is Unknown (:class:`BudgetError`): fitgate cannot size it, which
never denies on its own.

The budgets in force are set once by the process (:func:`configure`, from :func:`fitgate.settings.load`);
a library caller that sets nothing gets the defaults.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from fitgate.settings import ParseBudgets

#: The YAML loader every manifest, ConfigMap and serve config is read with: libyaml's where PyYAML was built with it
#: (kubectl's YAML reader and libyaml take a tab after a value, ``type: LoadBalancer<TAB>``, which the pure-Python
#: scanner refuses: hunt27 F4, GKE's vllm-tpu sample and RedHatAI's OpenShift AI InferenceService), and a fifth of
#: the time; the safe constructors either way.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def too_many_digits() -> str:
    """Why a JSON or YAML text whose load raised ValueError, not a parse error, was refused.

    Python's ``int()`` refuses a number of more than ``sys.get_int_max_str_digits()`` digits (4300): the one
    ValueError a safe load raises on text that is otherwise well-formed (hunt83 F3, F4).
    """
    return f"holds a number of more than {sys.get_int_max_str_digits()} digits"


_ACTIVE: list[ParseBudgets] = [ParseBudgets()]


def budgets() -> ParseBudgets:
    """The budgets in force."""
    return _ACTIVE[0]


def configure(value: ParseBudgets) -> None:
    """Set the budgets in force (the operator and the CLI, from the environment, at start)."""
    _ACTIVE[0] = value


class BudgetError(Exception):
    """Input past a parse budget; the message names what, the size reached and the setting."""


#: Most bytes of shell text fitgate splits into words: an ``sh -c`` script (after ``$(VAR)`` expansion) or
#: ``VLLM_ADDITIONAL_ARGS``. ``shlex`` is quadratic in the length of a word (hunt83 F1: a 1.4 MB word took 15 s) and
#: expanding a script's words costs up to ~3 us a byte; at 16 KiB the slowest shape measured (``$(a) `` words) reads in
#: 54 ms on the development machine (64 KiB: 218 ms), and the longest real script among the fixtures is 1.9 KB.
MAX_SCRIPT_BYTES = 16 * 1024


def check_script(text: str, what: str) -> None:
    """Raise :class:`BudgetError` when shell ``text`` is longer than :data:`MAX_SCRIPT_BYTES`, before it is split."""
    if len(text) > MAX_SCRIPT_BYTES or len(text.encode()) > MAX_SCRIPT_BYTES:
        raise BudgetError(
            f"{what} of {len(text.encode())} bytes: fitgate reads shell text of at most {MAX_SCRIPT_BYTES} bytes"
        )


class ExpansionBudget:
    """Bytes variable expansion may still copy for one container (``FITGATE_MAX_EXPANSION_BYTES``)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = budgets().max_expansion_bytes if limit is None else limit
        self.spent = 0

    def spend(self, n: int, what: str) -> None:
        """Count ``n`` bytes copied out of a variable; raise once past the limit (before they are copied)."""
        self.spent += n
        if self.spent > self.limit:
            raise BudgetError(
                f"{what}: variable expansion exceeds {self.limit} bytes (FITGATE_MAX_EXPANSION_BYTES); "
                "fitgate cannot read what it expands to"
            )


def check_yaml(text: str, limits: ParseBudgets | None = None) -> None:
    """Refuse a YAML text whose alias-expanded size or nesting is past the budgets, without building it.

    Raises:
        BudgetError: past ``max_yaml_nodes``, ``max_yaml_expanded_bytes`` or ``max_yaml_depth``.
        yaml.YAMLError: not YAML.
    """
    limits = limits or budgets()
    nodes = 0
    size = 0
    anchors: dict[str, tuple[int, int]] = {}
    stack: list[tuple[str | None, int, int]] = []  # (anchor, nodes, bytes) when the collection started

    def add(n: int, b: int) -> None:
        nonlocal nodes, size
        nodes += n
        size += b
        if nodes > limits.max_yaml_nodes:
            raise BudgetError(
                f"more than {limits.max_yaml_nodes} YAML nodes with aliases expanded (FITGATE_MAX_YAML_NODES)"
            )
        if size > limits.max_yaml_expanded_bytes:
            raise BudgetError(
                f"more than {limits.max_yaml_expanded_bytes} bytes with aliases expanded "
                "(FITGATE_MAX_YAML_EXPANDED_BYTES)"
            )

    try:
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            if isinstance(event, yaml.ScalarEvent):
                add(1, len(event.value))
                if event.anchor:
                    anchors[event.anchor] = (1, len(event.value))
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                if len(stack) >= limits.max_yaml_depth:
                    raise BudgetError(f"YAML nested more than {limits.max_yaml_depth} levels (FITGATE_MAX_YAML_DEPTH)")
                stack.append((event.anchor, nodes, size))
                add(1, 0)
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                anchor, n0, b0 = stack.pop()
                if anchor:
                    anchors[anchor] = (nodes - n0, size - b0)
            elif isinstance(event, yaml.AliasEvent):
                n, b = anchors.get(str(event.anchor), (1, 0))
                add(n, b)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound (1,000 levels), past ours
            raise BudgetError(
                f"YAML nested more than {limits.max_yaml_depth} levels (FITGATE_MAX_YAML_DEPTH)"
            ) from None
        raise


def load_yaml(text: str, limits: ParseBudgets | None = None) -> Any:
    """``yaml.safe_load`` of a text within the budgets.

    Raises:
        BudgetError: past a budget, or a value PyYAML cannot build (an integer of more digits than Python
            converts, nesting its constructor cannot follow).
        yaml.YAMLError: not YAML.
    """
    check_yaml(text, limits)
    try:
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError:
        raise
    except (ValueError, RecursionError, OverflowError, MemoryError) as exc:
        raise BudgetError(f"a value fitgate cannot build: {type(exc).__name__}: {str(exc)[:120]}") from None
