"""A small CEL evaluator for DRA device selectors (Kubernetes quantities: :mod:`fitgate.workloads.quantity`).

Evaluates the forms device selectors use in practice (see :class:`_Parser`) over a
:class:`fitgate.operator.gpus.dra.Device`; anything else raises :class:`SelectorUnsupportedError` naming the
expression, which the caller turns into an Unknown verdict: never a crash, never a guess. Expressions are
bounded in length and depth; a compiled selector is a tree of closures, cached per expression.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fitgate.sizing.memo import BoundedMemo, Miss
from fitgate.workloads.quantity import parse_quantity

#: CEL expressions longer than this, or nested deeper, are not evaluated (Unknown).
MAX_EXPRESSION_CHARS = 2048
MAX_DEPTH = 32


# --------------------------------------------------------------------------------------------
# CEL


class SelectorUnsupportedError(ValueError):
    """A CEL expression outside the forms fitgate evaluates."""

    def __init__(self, expression: str, why: str) -> None:
        short = expression if len(expression) <= 200 else expression[:197] + "..."
        super().__init__(f"device selector {short!r} is not evaluated by fitgate ({why})")
        self.expression = expression


class _MissingKeyError(Exception):
    """A map key the device does not have: the selector does not match that device."""


@dataclass(frozen=True)
class _Quantity:
    value: int


_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[<>!().\[\],-]))"
)


class SelectorDevice(Protocol):
    """What a selector reads of a device; :class:`fitgate.operator.gpus.dra.Device` has it.

    A protocol, so that this module need not import :mod:`fitgate.operator.gpus.dra` (which imports this one).
    """

    @property
    def driver(self) -> str:
        """The device's driver (``gpu.nvidia.com``)."""

    @property
    def attributes(self) -> Mapping[str, str | int | bool]:
        """Attributes by qualified name (``domain/name``)."""

    @property
    def capacity(self) -> Mapping[str, int]:
        """Capacities by qualified name, in bytes or units."""


Node = Callable[[SelectorDevice], Any]


class _Parser:
    """A recursive-descent parser of the CEL forms device selectors use.

    Over: ``||``, ``&&``, ``!``, ``==`` ``!=`` ``<`` ``<=`` ``>`` ``>=`` ``in``,
    parentheses, ``device.driver``, ``device.attributes["domain"].name``, ``device.capacity["domain"].name``,
    string/int/bool literals, ``quantity("40Gi")``, ``.compareTo(...)``, ``.matches``, ``.startsWith``,
    ``.endsWith``, ``.contains``.
    """

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(expression):
            if expression[pos:].strip() == "":
                break
            m = _TOKEN.match(expression, pos)
            if not m or m.end() == pos:
                raise SelectorUnsupportedError(expression, f"unexpected character at {pos}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def fail(self, why: str) -> SelectorUnsupportedError:
        return SelectorUnsupportedError(self.expression, why)

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise self.fail(f"expected {value!r}, got {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_()
        if self.peek()[0] != "end":
            raise self.fail(f"unexpected {self.peek()[1]!r}")
        return node

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH}")

    def or_(self) -> Node:
        left = self.and_()
        while self.peek()[1] == "||":
            self.take()
            right = self.and_()
            left = _either(left, right)
        return left

    def and_(self) -> Node:
        left = self.unary()
        while self.peek()[1] == "&&":
            self.take()
            right = self.unary()
            left = _both(left, right)
        return left

    def unary(self) -> Node:
        if self.peek()[1] == "!":
            self.take()
            self._nest()
            inner = self.unary()
            self.depth -= 1
            return lambda d: not _truth(inner, d)
        return self.comparison()

    def comparison(self) -> Node:
        left = self.postfix()
        op = self.peek()[1]
        if op in {"==", "!=", "<", "<=", ">", ">=", "in"}:
            self.take()
            right = self.postfix()
            return _compare(op, left, right, self)
        return left

    def postfix(self) -> Node:
        node, path = self.atom()
        while self.peek()[1] in {".", "["}:
            if self.take()[1] == "[":
                key = self.take()
                if key[0] != "str":
                    raise self.fail("only string map keys are evaluated")
                self.take("]")
                node, path = _index(node, _unquote(key[1])), (*path, "[]")
                continue
            kind, name = self.take()
            if kind != "id":
                raise self.fail(f"expected a name after '.', got {name!r}")
            if self.peek()[1] == "(":
                args = self.args()
                node, path = _method(node, name, args, self), (*path, name + "()")
            else:
                node, path = _field(node, name, path, self), (*path, name)
        return node

    def args(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        if self.peek()[1] != ")":
            args.append(self.or_())
            while self.peek()[1] == ",":
                self.take()
                args.append(self.or_())
        self.take(")")
        return args

    def atom(self) -> tuple[Node, tuple[str, ...]]:
        kind, value = self.take()
        if value == "(":
            self._nest()
            inner = self.or_()
            self.take(")")
            self.depth -= 1
            return inner, ("()",)
        if value == "-" and self.peek()[0] == "num":
            return _literal(-_number(self.take()[1], self)), ()
        if kind == "num":
            return _literal(_number(value, self)), ()
        if kind == "str":
            return _literal(_unquote(value)), ()
        if kind == "id":
            if value in ("true", "false"):
                return _literal(value == "true"), ()
            if value == "device":
                return (lambda d: d), ("device",)
            if value == "quantity" and self.peek()[1] == "(":
                args = self.args()
                if len(args) != 1:
                    raise self.fail("quantity() takes one string")
                arg = args[0]

                def quantity(d: SelectorDevice) -> _Quantity:
                    number = parse_quantity(arg(d))
                    if number is None:
                        raise SelectorUnsupportedError(self.expression, f"unreadable quantity {arg(d)!r}")
                    return _Quantity(number)

                return quantity, ()
        raise self.fail(f"{value or 'the end'!r} is not an evaluated form")


def _either(a: Node, b: Node) -> Node:
    return lambda d: _truth(a, d) or _truth(b, d)


def _both(a: Node, b: Node) -> Node:
    return lambda d: _truth(a, d) and _truth(b, d)


def _table(which: str) -> Node:
    return lambda d: (which, d)


def _truth(node: Node, device: SelectorDevice) -> bool:
    value = node(device)
    if not isinstance(value, bool):
        raise TypeError(f"not a bool: {value!r}")
    return value


def _literal(value: Any) -> Node:
    return lambda _d: value


def _number(text: str, parser: _Parser) -> int:
    if "." in text:
        raise parser.fail("floating-point literals are not evaluated")
    return int(text)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _field(node: Node, name: str, path: tuple[str, ...], parser: _Parser) -> Node:
    if path == ("device",):
        if name == "driver":
            return lambda d: d.driver
        if name in ("attributes", "capacity"):
            return _table(name)
        raise parser.fail(f"device.{name} is not evaluated")
    if len(path) == 3 and path[1] in ("attributes", "capacity") and path[2] == "[]":

        def lookup(d: SelectorDevice) -> Any:
            which, domain, device = node(d)
            table = device.attributes if which == "attributes" else device.capacity
            key = f"{domain}/{name}"
            if key not in table:
                raise _MissingKeyError(key)
            value = table[key]
            return _Quantity(value) if which == "capacity" else value

        return lookup
    raise parser.fail(f".{name} is not an evaluated form")


def _index(node: Node, key: str) -> Node:
    def index(d: SelectorDevice) -> Any:
        which = node(d)
        if not (isinstance(which, tuple) and len(which) == 2):
            raise TypeError("only device.attributes[...] and device.capacity[...] are indexed")
        return (which[0], key, which[1])

    return index


def _method(node: Node, name: str, args: list[Node], parser: _Parser) -> Node:
    if len(args) != 1:
        raise parser.fail(f".{name}() with {len(args)} arguments is not evaluated")
    arg = args[0]
    if name == "compareTo":

        def compare_to(d: SelectorDevice) -> int:
            a, b = node(d), arg(d)
            if not isinstance(a, _Quantity) or not isinstance(b, _Quantity):
                raise TypeError("compareTo() compares two quantities")
            return (a.value > b.value) - (a.value < b.value)

        return compare_to
    string_methods: dict[str, Callable[[str, str], bool]] = {
        "matches": lambda s, p: re.search(p, s) is not None,
        "startsWith": str.startswith,
        "endsWith": str.endswith,
        "contains": lambda s, p: p in s,
    }
    if name in string_methods:
        fn = string_methods[name]

        def call(d: SelectorDevice) -> bool:
            a, b = node(d), arg(d)
            if not isinstance(a, str) or not isinstance(b, str):
                raise TypeError(f".{name}() needs strings")
            if name == "matches" and len(b) > 256:
                raise TypeError("pattern too long")
            return fn(a, b)

        return call
    raise parser.fail(f".{name}() is not evaluated")


def _compare(op: str, left: Node, right: Node, parser: _Parser) -> Node:
    if op == "in":

        def contains(d: SelectorDevice) -> bool:
            key, where = left(d), right(d)
            if not isinstance(key, str) or not (isinstance(where, tuple) and len(where) == 3):
                raise TypeError("'in' tests a name in device.attributes[domain] / device.capacity[domain]")
            which, domain, device = where
            table = device.attributes if which == "attributes" else device.capacity
            return f"{domain}/{key}" in table

        return contains

    def compare(d: SelectorDevice) -> bool:
        a, b = left(d), right(d)
        if isinstance(a, _Quantity) and isinstance(b, _Quantity):
            a, b = a.value, b.value
        if type(a) is not type(b) or isinstance(a, tuple):
            if op in ("==", "!=") and not isinstance(a, tuple) and not isinstance(b, tuple):
                return op == "!="  # CEL: values of different types are not equal
            raise TypeError(f"cannot compare {a!r} {op} {b!r}")
        result = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return bool(result)

    return compare


@dataclass(frozen=True)
class Selector:
    """A compiled CEL device selector."""

    expression: str
    node: Node = field(repr=False, compare=False)

    def matches(self, device: SelectorDevice) -> bool:
        """Whether the device passes; a map key the device lacks means it does not."""
        try:
            return _truth(self.node, device)
        except _MissingKeyError:
            return False
        except (TypeError, ValueError, re.error) as exc:
            raise SelectorUnsupportedError(self.expression, str(exc)) from None


#: Compiled selectors by expression. Bound 4096: a cluster's ResourceClaimTemplates hold a few distinct
#: expressions; the bound only keeps a flood of distinct ones (each <= MAX_EXPRESSION_CHARS) from growing it.
_COMPILED: BoundedMemo[str, Selector] = BoundedMemo(4096)


def compile_selector(expression: str) -> Selector:
    """A selector for ``expression``; raises :class:`SelectorUnsupportedError` for other forms or oversized input."""
    hit = _COMPILED.get(expression)
    if not isinstance(hit, Miss):
        return hit
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise SelectorUnsupportedError(expression, f"longer than {MAX_EXPRESSION_CHARS} characters")
    selector = Selector(expression, _Parser(expression).parse())
    _COMPILED.put(expression, selector)
    return selector
