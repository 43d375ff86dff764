"""Kubernetes' ``$(VAR)`` expansion, container env (ConfigMaps included) and the shell's ``$VAR`` / ``$(( ))``.

Split out of :mod:`fitgate.workloads.argv` along its seam: the values words take before the engine's argv is read.
Every expansion is bounded by an :class:`~fitgate.workloads.bounds.ExpansionBudget`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fitgate.workloads import shellmath
from fitgate.workloads.bounds import BudgetError, ExpansionBudget
from fitgate.workloads.shellwords import ARRAY, array_elements, array_value, closing_brace, first_element

# ---------------------------------------------------------------------------------------------
# Kubernetes' $(VAR) expansion


_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(
    pattern: re.Pattern[str],
    text: str,
    value: Callable[[re.Match[str]], str | None],
    budget: ExpansionBudget | None,
    what: str,
) -> str:
    """``text`` with each match of ``pattern`` replaced by ``value(match)`` (None: kept as written).

    The bytes copied out of variables are counted against ``budget`` before each copy, so a value that
    doubles per env entry stops at the budget instead of filling memory (issue 22).
    """
    budget = budget or ExpansionBudget()  # no caller expands without a bound
    parts: list[str] = []
    at = 0
    for m in pattern.finditer(text):
        parts.append(text[at : m.start()])
        got = value(m)
        if got is None:
            parts.append(m.group(0))
        else:
            budget.spend(len(got), what)
            parts.append(got)
        at = m.end()
    parts.append(text[at:])
    return "".join(parts)


def expand_k8s(text: str, env: Mapping[str, str], budget: ExpansionBudget | None = None) -> str:
    """Kubernetes' expansion of ``$(VAR)`` in command, args and env values.

    ``$$`` is a literal ``$`` and ``$(VAR)`` of a variable not in ``env`` stays as written
    (kubernetes third_party/forked/golang/expansion/expand.go). Bytes copied out of variables count
    against ``budget`` (:class:`~fitgate.workloads.bounds.BudgetError` past it).
    """

    def sub(m: re.Match[str]) -> str | None:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1))

    return _expand(_K8S_REF, text, sub, budget, "$(VAR)")


_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def configmap_refs(container: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The ConfigMaps a container's env reads, in the order the kubelet reads them (``envFrom`` first).

    (name, key) of each ``configMapKeyRef``, (name, None) of each ``envFrom`` ``configMapRef``.
    """
    refs: list[tuple[str, str | None]] = []
    env_from, env = container.get("envFrom"), container.get("env")
    for item in env_from if isinstance(env_from, list) else ():
        ref = item.get("configMapRef") if isinstance(item, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("name"), str):
            refs.append((ref["name"], None))
    for item in env if isinstance(env, list) else ():
        source = item.get("valueFrom") if isinstance(item, dict) else None
        ref = source.get("configMapKeyRef") if isinstance(source, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("key"), str):
            refs.append((ref["name"], ref["key"]))
    return refs


def missing_configmap(
    container: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]]
) -> tuple[str, str] | None:
    """The first ConfigMap (name, key; "*" for a whole ``envFrom``) the env names that ``configmaps`` lacks."""
    for name, key in configmap_refs(container):
        if name not in configmaps or (key is not None and key not in configmaps[name]):
            return name, key or "*"
    return None


def container_env(
    env: object,
    budget: ExpansionBudget | None = None,
    platform: Mapping[str, str] | None = None,
    *,
    env_from: object = None,
    configmaps: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, str]:
    """A container's env as the kubelet builds it: ``envFrom`` ConfigMaps, then ``env``.

    Each literal value is expanded against those before it; a ``configMapKeyRef`` (or an ``envFrom``
    ConfigMap) is read from ``configmaps`` when it is there, any other ``valueFrom`` left out.

    ``platform``: the variables the platform injects before them (LeaderWorkerSet's ``LWS_*``); the
    container's own entries of the same name win. A ConfigMap's values count against ``budget`` as copies.

    Raises:
        BudgetError: the values expand past ``budget`` (``A_i=$(A_{i-1})$(A_{i-1})``).
    """
    out: dict[str, str] = dict(platform or {})
    budget = budget or ExpansionBudget()
    maps = configmaps or {}
    for item in env_from if isinstance(env_from, list) else ():
        ref = item.get("configMapRef") if isinstance(item, dict) else None
        data = maps.get(ref["name"]) if isinstance(ref, dict) and isinstance(ref.get("name"), str) else None
        prefix = str(item.get("prefix") or "")
        for key, value in (data or {}).items():
            if _ENV_NAME.fullmatch(prefix + key):  # the kubelet skips keys that are not variable names
                budget.spend(len(value), f"envFrom ConfigMap {ref['name'] if isinstance(ref, dict) else ''}")
                out[prefix + key] = value
    for item in env if isinstance(env, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        if "value" in item:
            out[item["name"]] = expand_k8s(str(item.get("value") or ""), out, budget)
            continue
        source = item.get("valueFrom")
        ref = source.get("configMapKeyRef") if isinstance(source, dict) else None
        if isinstance(ref, dict) and str(ref.get("key")) in (maps.get(str(ref.get("name"))) or {}):
            value = maps[str(ref["name"])][str(ref["key"])]
            budget.spend(len(value), f"env {item['name']} from ConfigMap {ref['name']}")
            out[item["name"]] = value
        elif item["name"] == ALLOW_LONG_ENV:
            # hunt209 F1: set from a Secret or a ConfigMap fitgate did not read, it was taken as unset and the length
            # vLLM then takes was refused (400); a switch someone sets from a reference is read as set, never denied
            out[item["name"]] = ALLOW_LONG_FROM_REFERENCE
    return out


#: vLLM's switch that takes a ``--max-model-len`` above the model's (envs.py); a reference to it reads as set.
ALLOW_LONG_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
#: Its value where a reference fitgate did not read sets it (read as "1": flags.env_serving).
ALLOW_LONG_FROM_REFERENCE = "1\x04"
_NAME_AT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The operators of ``${NAME op word}`` fitgate expands: a default (``-``, ``=``) or an alternative (``+``), with ``:``
#: also for an empty value (bash(1), "Parameter Expansion"); any other (``${#X}``, ``${X%y}``) stays as written.
_OPERATOR = re.compile(r":?[-=+]")
#: The most levels of ``${A:+... ${B:-...} ...}`` read inside one another; deeper ones stay as written.
MAX_SHELL_DEPTH = 4


def _expand_shell(text: str, env: Mapping[str, str], budget: ExpansionBudget, depth: int) -> str:
    """``text`` with its ``$NAME`` / ``${NAME}`` / ``${NAME op word}`` expanded over ``env``; unknown ones as written.

    A substituted value is not read again (the shell expands once); an operator's word is expanded only where it is the
    result, so ``${LEN:+--max-model-len $LEN}`` needs LEN alone.
    """
    parts: list[str] = []
    at = i = 0
    while (i := text.find("$", i)) >= 0:
        got: str | None = None
        end = i + 1
        if text.startswith("${", i):
            close = closing_brace(text, i + 2)
            name = _NAME_AT.match(text, i + 2)
            if close > 0 and name is not None:
                end = close + 1
                value = env.get(name.group(0))
                rest = text[name.end() : close]
                if rest in ("[@]", "[*]") and value is not None:  # bash arrays: every element (shellwords.ARRAY)
                    elements = array_elements(value)
                    got = array_value(elements) if rest == "[@]" else " ".join(elements)
                    rest, value = "", got
                elif rest == "[0]" or (value is not None and value.startswith(ARRAY)):
                    rest = "" if rest == "[0]" else rest  # `$ARGS`, `${ARGS[0]}`: the first element
                    value = first_element(value)
                op = _OPERATOR.match(rest)
                if not rest:
                    got = value
                elif op is not None and depth < MAX_SHELL_DEPTH:
                    is_set = value is not None and (value != "" or not op.group(0).startswith(":"))
                    word = rest[op.end() :]
                    if op.group(0).endswith("+"):  # the word where set (not empty, with `:`), else nothing
                        got = _expand_shell(word, env, budget, depth + 1) if is_set else ""
                    else:  # the value where set, else the default word
                        got = value if is_set else _expand_shell(word, env, budget, depth + 1)
        elif (name := _NAME_AT.match(text, i + 1)) is not None:
            end = name.end()
            got = env.get(name.group(0))
            got = first_element(got) if got is not None and got.startswith(ARRAY) else got
        if got is not None:
            budget.spend(len(got), "$VAR in sh -c")
            parts += [text[at:i], got]
            at = end
        i = end
    parts.append(text[at:])
    return "".join(parts)


def expand_shell(word: str, env: Mapping[str, str], budget: ExpansionBudget | None = None) -> str:
    """``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` / ``${VAR:+word}`` of a known variable, as the shell would.

    Unknown ones stay as written, for the reader to name. Bytes copied out of variables count against ``budget``.
    """
    return _expand_shell(word, env, budget or ExpansionBudget(), 0)


ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
ARITH_MARK = "FITGATEARITH{}X"
_ARITH_REF = re.compile(r"FITGATEARITH(\d{1,6})X")


def with_arithmetic(word: str, expressions: Sequence[str], env: Mapping[str, str]) -> str:
    """``word`` with each ``$(( ... ))`` it held evaluated over ``env`` (kept as written when it cannot be)."""

    def value(m: re.Match[str]) -> str:
        expression = expressions[int(m.group(1))]
        try:  # ${VAR:-0} inside is expanded first, as bash does; bare names are looked up by the evaluator
            return str(shellmath.evaluate(expand_shell(expression, env), env))
        except (shellmath.ArithmeticUnknownError, BudgetError):
            return f"$(({expression}))"

    return _ARITH_REF.sub(value, word)
