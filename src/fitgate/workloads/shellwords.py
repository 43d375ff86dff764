"""Two pieces of the shell's semantics a container's ``sh -c`` script relies on (hunt74 F1 / F2).

* **Field splitting.** The shell splits the result of an unquoted ``$VAR`` / ``${VAR}`` on blanks (bash(1),
  "Word Splitting"): ``X="--max-model-len 4096"; exec vllm serve M $X`` passes two arguments; ``"$X"`` passes one
  (which vLLM refuses). ``shlex`` drops the quotes, so the unquoted references are marked before it runs
  (:func:`mark_unquoted`) and split after expansion (:func:`split_fields`); an assignment's value is never split
  (:func:`unmark`).
* **Conditionals.** ``if [ "$ENABLE_PROFILER" = "true" ]; then ARGS="..."; fi`` sets ``ARGS`` only when the test holds.
  :class:`Conditions` follows ``if / elif / else / fi`` (and treats ``case``, ``while``, ``until``, ``for`` bodies as
  undecided), evaluating the plain ``test`` / ``[`` / ``[[`` forms over the variables known; a branch it cannot
  decide is undecided: its assignments make their variables unknown (as unset), its commands are still read.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Marks around an unquoted variable reference, from before ``shlex`` to after expansion (control characters no
#: shell script of a manifest holds; the YAML reader refuses them in a plain scalar).
OPEN, CLOSE = "\x01", "\x02"
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME = _NAME_START | frozenset("0123456789")
_BLANKS = frozenset(" \t\n")


def mark_unquoted(text: str) -> str:
    """``text`` with every unquoted ``$NAME`` / ``${...}`` between :data:`OPEN` and :data:`CLOSE`.

    Quotes are followed as the shell reads them: nothing is special inside ``'...'``; inside ``"..."`` a reference
    is quoted (not split); a backslash outside single quotes escapes the next character. Positional and special
    parameters (``$1``, ``$@``) are left alone.
    """
    out: list[str] = []
    i, n = 0, len(text)
    quote = ""
    while i < n:
        ch = text[i]
        if quote == "'":
            out.append(ch)
            quote = "" if ch == "'" else quote
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch in "'\"" and (not quote or quote == ch):
            quote = "" if quote else ch
            out.append(ch)
            i += 1
            continue
        if ch == "$" and not quote and i + 1 < n:
            end = _reference_end(text, i)
            if end > i:
                out += [OPEN, text[i:end], CLOSE]
                i = end
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _reference_end(text: str, i: int) -> int:
    """The end of the named variable reference at ``text[i] == "$"``, else ``i`` (not a named reference)."""
    nxt = text[i + 1]
    if nxt == "{":
        close = text.find("}", i + 2)
        if close < 0 or not text[i + 2 : i + 3] or text[i + 2] not in _NAME_START:
            return i
        return close + 1
    if nxt not in _NAME_START:
        return i
    j = i + 1
    while j < len(text) and text[j] in _NAME:
        j += 1
    return j


def unmark(word: str) -> str:
    """``word`` without the marks (an assignment's value is not split)."""
    return word.replace(OPEN, "").replace(CLOSE, "")


def split_fields(word: str) -> list[str]:
    """The fields of an expanded word: blanks inside the marked (unquoted) expansions separate fields.

    A word whose only content was an empty unquoted expansion is no field at all, as in the shell.
    """
    if OPEN not in word:
        return [word]
    fields: list[str] = []
    current: list[str] = []
    literal = False  # the field holds text from outside an expansion (kept even when empty: "--x=$EMPTY")
    inside = False
    for ch in word:
        if ch == OPEN:
            inside = True
        elif ch == CLOSE:
            inside = False
        elif inside and ch in _BLANKS:
            if current or literal:
                fields.append("".join(current))
            current, literal = [], False
        else:
            current.append(ch)
            literal = literal or not inside
    if current or literal:
        fields.append("".join(current))
    return fields


#: The keywords that open and close the blocks :class:`Conditions` follows.
_OPENERS = frozenset({"case", "while", "until", "for"})
_CLOSERS = frozenset({"esac", "done"})
_LEADERS = frozenset({"then", "do", "else", "fi"}) | _OPENERS | _CLOSERS


@dataclass
class _Frame:
    active: bool | None  # this branch: taken, not taken, or undecided
    taken: bool = False  # an earlier branch of this if was taken
    undecided: bool = False  # an earlier branch of this if was undecided
    testing: bool = False  # between ``if`` / ``elif`` and ``then``: the condition list is still being read
    elif_: bool = False  # the condition being read is an ``elif``'s
    condition: bool | None = None  # the condition list so far (``&&`` / ``||`` of its tests)


def _and(a: bool | None, b: bool | None) -> bool | None:
    return False if a is False or b is False else (None if a is None or b is None else True)


def _or(a: bool | None, b: bool | None) -> bool | None:
    return True if a is True or b is True else (None if a is None or b is None else False)


@dataclass
class Conditions:
    """Which branch of the script's ``if`` blocks a command is in, as far as the known variables decide it."""

    frames: list[_Frame] = field(default_factory=list)

    def state(self) -> bool | None:
        """True: the command runs; False: it does not; None: undecided."""
        if any(f.active is False for f in self.frames):
            return False
        return None if any(f.active is None for f in self.frames) else True

    def command(self, words: Sequence[str], joiner: str = ";") -> list[str]:
        """What is left to run of ``words`` (one simple command, expanded; ``joiner``: the separator before it).

        ``if COND`` / ``elif COND`` open a branch (its condition list, tests joined by ``&&`` / ``||``, is no command to
        read), ``then`` / ``else`` / ``do`` lead the command after them, ``fi`` / ``esac`` / ``done`` close a block.
        """
        rest = list(words)
        top = self.frames[-1] if self.frames else None
        if top is not None and top.testing and rest[:1] != ["then"]:
            value = evaluate_test(rest)
            if joiner == "&&":
                top.condition = _and(top.condition, value)
            elif joiner == "||":
                top.condition = _or(top.condition, value)
            else:  # a list of commands: the last one's status decides
                top.condition = value
            return []
        while rest and rest[0] in _LEADERS:
            head = rest.pop(0)
            if head == "then" and top is not None and top.testing:
                self._decide(top)
            elif head == "else" and top is not None:
                top.active = False if top.taken else (None if top.undecided or top.active is None else True)
            elif head == "fi" or head in _CLOSERS:
                if self.frames:
                    self.frames.pop()
                top = self.frames[-1] if self.frames else None
            elif head in _OPENERS:
                self.frames.append(_Frame(None))
                return []  # the loop or case header itself: its words are not a command to read
        if not rest:
            return []
        if rest[0] == "if":
            self.frames.append(_Frame(None, testing=True, condition=evaluate_test(rest[1:])))
            return []
        if rest[0] == "elif" and top is not None:
            top.undecided = top.undecided or top.active is None
            top.testing, top.elif_, top.condition = True, True, evaluate_test(rest[1:])
            return []
        return rest

    @staticmethod
    def _decide(f: _Frame) -> None:
        """The branch after ``then``: taken, not taken or undecided, from its condition and the earlier branches."""
        value = False if f.taken else f.condition
        if f.elif_:
            f.active = None if (value is not False and f.undecided) else value
        else:
            f.active, f.undecided = value, value is None
        f.taken = f.taken or value is True
        f.testing = False


def evaluate_test(words: Sequence[str]) -> bool | None:
    """The value of a plain test (``[ A = B ]``, ``[[ -n A ]]``, ``test -z A``, ``true``, ``! ...``), else None.

    A word that still holds an unexpanded ``$`` (a variable fitgate does not know) leaves it undecided.
    """
    w = [unmark(x) for x in words]
    negate = False
    while w and w[0] == "!":
        negate, w = not negate, w[1:]
    if w in (["true"], [":"]):
        value: bool | None = True
    elif w == ["false"]:
        value = False
    else:
        value = _bracket_test(w)
    return None if value is None else value != negate


def _bracket_test(w: list[str]) -> bool | None:
    if w[:1] == ["test"]:
        inner = w[1:]
    elif len(w) >= 2 and (w[0], w[-1]) in (("[", "]"), ("[[", "]]")):
        inner = w[1:-1]
    else:
        return None
    if any("$" in x or "`" in x for x in inner):
        return None
    negate = False
    while inner and inner[0] == "!":
        negate, inner = not negate, inner[1:]
    value: bool | None = None
    if len(inner) == 1:
        value = inner[0] != ""
    elif len(inner) == 2 and inner[0] in ("-n", "-z"):
        value = (inner[1] != "") == (inner[0] == "-n")
    elif len(inner) == 3 and inner[1] in ("=", "==", "!="):
        value = (inner[0] == inner[2]) == (inner[1] != "!=")
    elif len(inner) == 3 and inner[1] in _NUMERIC and all(_INTEGER.fullmatch(x) for x in (inner[0], inner[2])):
        value = _NUMERIC[inner[1]](int(inner[0]), int(inner[2]))
    return None if value is None else value != negate


_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_NUMERIC: dict[str, Callable[[int, int], bool]] = {
    "-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt, "-ge": operator.ge, "-lt": operator.lt,
    "-le": operator.le,
}  # fmt: skip
