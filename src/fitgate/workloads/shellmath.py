"""Shell arithmetic ``$(( ... ))`` as the platform's shell runs it, over known integers only (issue 21).

llm-d's wide-EP LeaderWorkerSets compute vLLM's data-parallel ranks in their ``bash -c`` script from the env
LeaderWorkerSet injects (llm-d/llm-d@3318b75dcc3e0f7496199a35fd6c624c690490c1:
guides/wide-ep-lws/manifests/modelserver/base/decode.yaml: ``--data-parallel-size $((LWS_GROUP_SIZE *
DP_SIZE_LOCAL))``, ``START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))``). A tiny evaluator, not a
shell: integers, variables whose value is an integer, ``+ - * / %``, unary signs and parentheses, with
bash's integer semantics (``/`` truncates toward zero, ``%`` takes the dividend's sign). Bounded: at most
:data:`MAX_EXPRESSION_CHARS` characters, :data:`MAX_DEPTH` nested parentheses and magnitudes up to
:data:`MAX_MAGNITUDE`. Anything else (a command substitution, a comparison, an unknown variable, a division
by zero) is :class:`ArithmeticUnknownError`, which leaves the word unexpanded: the reading is Unknown, naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_EXPRESSION_CHARS = 256
MAX_DEPTH = 16
MAX_MAGNITUDE = 1 << 53

_TOKEN = re.compile(r"\s*(?:(\d{1,18})|([A-Za-z_][A-Za-z0-9_]{0,63})|([-+*/%()]))")


class ArithmeticUnknownError(Exception):
    """An expression fitgate does not evaluate; the message names the part it could not."""


def evaluate(expression: str, variables: Mapping[str, str]) -> int:
    """The value of a ``$(( ... ))`` expression (its inside), as bash computes it.

    Raises:
        ArithmeticUnknownError: past a bound, an operator or a variable fitgate does not evaluate.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ArithmeticUnknownError(f"an expression of more than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[str] = []
    at = 0
    text = expression.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise ArithmeticUnknownError(
                f"{text[at : at + 20].strip()!r} (only + - * / % and parentheses are evaluated)"
            )
        number, name, op = m.groups()
        if name is not None:
            value = variables.get(name, "").strip()
            if not re.fullmatch(r"-?\d{1,18}", value):
                raise ArithmeticUnknownError(f"{name} is not set to an integer" if value else f"{name} is not set")
            tokens.append(value)
        else:
            tokens.append(number or op)
        at = m.end()
    parser = _Parser(tokens)
    result = parser.expr(0)
    if parser.at != len(tokens):
        raise ArithmeticUnknownError(f"unexpected {tokens[parser.at]!r}")
    return result


class _Parser:
    """Recursive descent over the tokens; depth and magnitude bounded."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def expr(self, depth: int) -> int:
        value = self.term(depth)
        while self._peek() in ("+", "-"):
            op = self.tokens[self.at]
            self.at += 1
            right = self.term(depth)
            value = _bounded(value + right if op == "+" else value - right)
        return value

    def term(self, depth: int) -> int:
        value = self.unary(depth)
        while self._peek() in ("*", "/", "%"):
            op = self.tokens[self.at]
            self.at += 1
            right = self.unary(depth)
            if op == "*":
                value = _bounded(value * right)
                continue
            if right == 0:
                raise ArithmeticUnknownError("a division by zero")
            quotient = abs(value) // abs(right) * (1 if (value >= 0) == (right >= 0) else -1)
            value = quotient if op == "/" else value - quotient * right  # C semantics, as bash
        return value

    def unary(self, depth: int) -> int:
        token = self._peek()
        if token in ("+", "-"):
            self.at += 1
            if depth >= MAX_DEPTH:
                raise ArithmeticUnknownError(f"more than {MAX_DEPTH} nested operators")
            value = self.unary(depth + 1)
            return -value if token == "-" else value
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ArithmeticUnknownError(f"more than {MAX_DEPTH} nested parentheses")
            self.at += 1
            value = self.expr(depth + 1)
            if self._peek() != ")":
                raise ArithmeticUnknownError("an unclosed parenthesis")
            self.at += 1
            return value
        if token is None or not re.fullmatch(r"-?\d+", token):
            raise ArithmeticUnknownError(f"unexpected {token!r}" if token else "an incomplete expression")
        self.at += 1
        return _bounded(int(token))


def _bounded(value: int) -> int:
    if abs(value) > MAX_MAGNITUDE:
        raise ArithmeticUnknownError(f"a value beyond {MAX_MAGNITUDE}")
    return value


def arithmetic_spans(script: str) -> list[tuple[int, int]]:
    """(start, end) of each ``$(( ... ))`` in ``script`` (end after its ``))``), outermost only."""
    spans: list[tuple[int, int]] = []
    at = script.find("$((")
    while at >= 0:
        depth = 0
        i = at + 1
        end = -1
        while i < len(script) and i - at <= MAX_EXPRESSION_CHARS + 8:
            c = script[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
            i += 1
        if end < 0 or script[end - 2 : end] != "))":
            at = script.find("$((", at + 3)
            continue
        spans.append((at, end))
        at = script.find("$((", end)
    return spans
