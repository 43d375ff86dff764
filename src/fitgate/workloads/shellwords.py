"""Two pieces of the shell's semantics a container's ``sh -c`` script relies on (hunt74 F1 / F2).

* **Field splitting.** The shell splits the result of an unquoted ``$VAR`` / ``${VAR}`` on blanks (bash(1),
  "Word Splitting"): ``X="--max-model-len 4096"; exec vllm serve M $X`` passes two arguments; ``"$X"`` passes one
  (which vLLM refuses). ``shlex`` drops the quotes, so the unquoted references are marked before it runs
  (:func:`mark_unquoted`) and split after expansion (:func:`split_fields`); an assignment's value is never split
  (:func:`unmark`).
* **Conditionals.** ``if [ "$ENABLE_PROFILER" = "true" ]; then ARGS="..."; fi`` sets ``ARGS`` only when the test holds.
  :class:`Conditions` follows ``if / elif / else / fi`` (and treats ``case``, ``while``, ``until``, ``for`` bodies as
  undecided), evaluating the plain ``test`` / ``[`` forms over the variables known (``[[`` is left undecided); a
  branch not taken sets and runs nothing; in a branch it cannot decide, its commands are still read and a variable
  it sets is :func:`undecided`, which makes a vLLM command that uses it Unknown.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Marks around an unquoted variable reference, from before ``shlex`` to after expansion (control characters no
#: shell script of a manifest holds; the YAML reader refuses them in a plain scalar).
OPEN, CLOSE = "\x01", "\x02"
#: A blank inside an unquoted ``${NAME op word}`` (``${LEN:+--max-model-len $LEN}``), kept from the lexer's split so the
#: reference stays one word until it is expanded; a blank of the expansion's fields after it (:func:`split_fields`).
BLANK = "\x04"
#: A blank inside a double-quoted part of such a word: a blank of the field it is in, never a split.
QUOTED_BLANK = "\x08"
#: Around a double-quoted part of such a word: what it expands to is one field, blanks and all (hunt102 F1:
#: `${HF:+--hf-overrides "$HF"}` with a JSON value holding blanks).
Q_OPEN, Q_CLOSE = "\x0e", "\x0f"
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
                out += [OPEN, _protected(text[i:end]), CLOSE]
                i = end
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _protected(reference: str) -> str:
    """An unquoted ``${NAME op word}`` kept one word for the lexer, to be split after expansion.

    Its blanks become :data:`BLANK` (split), a double-quoted part's :data:`QUOTED_BLANK` (kept), and its double
    quotes are dropped (``${TP:+-tp "$TP"}``, hunt101 F6).
    """
    out: list[str] = []
    quoted = False
    for c in reference:
        if c == '"':
            out.append(Q_CLOSE if quoted else Q_OPEN)
            quoted = not quoted
        elif c in _BLANKS:
            out.append(QUOTED_BLANK if quoted else BLANK)
        else:
            out.append(c)
    return "".join(out)


#: The longest ``${...}`` read as one reference (bash sets no bound; a default of a few flags fits).
MAX_REFERENCE_CHARS = 512


def closing_brace(text: str, start: int) -> int:
    """The index of the ``}`` closing the ``${`` before ``start`` (nested ones counted), or -1.

    Looked for within :data:`MAX_REFERENCE_CHARS`, with ``str.find``: a run of unclosed ``${`` stays linear.
    """
    limit = min(len(text), start + MAX_REFERENCE_CHARS)
    depth, j = 1, start
    while (close := text.find("}", j, limit)) >= 0:
        depth += text.count("${", j, close) - 1
        if depth == 0:
            return close
        j = close + 1
    return -1


def _reference_end(text: str, i: int) -> int:
    """The end of the named variable reference at ``text[i] == "$"``, else ``i`` (not a named reference)."""
    nxt = text[i + 1]
    if nxt == "{":
        close = closing_brace(text, i + 2) if text[i + 2 : i + 3] and text[i + 2] in _NAME_START else -1
        if close < 0 or any(c in text[i:close] for c in "'\\`\n") or text.count('"', i, close) % 2:
            return i  # unclosed, a single quote or escape inside: left as the lexer splits it (`${X:-'a b'}`)
        return close + 1
    if nxt not in _NAME_START:
        return i
    j = i + 1
    while j < len(text) and text[j] in _NAME:
        j += 1
    return j


#: A here-document's opener and its delimiter word as the shell takes it: ``\EOF``, quoted (``'END-TPL'``) or bare, any
#: run of characters but blanks and ``;&|<>()`` (hunt207 F1: ``<<\EOF`` and ``<<'END-TPL'`` were missed, so a Jinja
#: template's body was lexed as shell). Not ``<<<`` (a here-string), nor a shift (``$((1 << 4))``: a bare word
#: starting with a digit or ``$`` is read as no delimiter).
_HEREDOC = re.compile(
    r"(?<!<)<<(?!<)-?[ \t]*"
    r"(?:\\([^\s;&|<>()'\"]+)|(['\"])([^'\"\n]+)\2|([^\s;&|<>()'\"\\0-9$][^\s;&|<>()'\"\\]*))"
)


def split_heredocs(text: str) -> tuple[str, str]:
    """(``text`` without the bodies of its here-documents, the bodies).

    A body (``python3 - <<EOF ... EOF``) is another program's input, whose ``if`` / ``for`` lines are not the shell's
    (hunt75 G1). The line that opens one stays in the script; an unterminated body runs to the end, as in the shell.
    """
    if "<<" not in text:
        return text, ""
    main: list[str] = []
    bodies: list[str] = []
    ending: str | None = None
    for line in text.split("\n"):
        if ending is not None:
            if line.strip() == ending:
                ending = None
            else:
                bodies.append(line)
            continue
        main.append(line)
        m = _HEREDOC.search(line)
        if m is not None:
            ending = m.group(1) or m.group(3) or m.group(4)
    return "\n".join(main), "\n".join(bodies)


#: The value of a variable set in a branch fitgate cannot decide (hunt75 D1-D4): ``UNDECIDED + name + UNDECIDED``,
#: which makes a test on it undecided and a vLLM command that uses it Unknown (never sized on one branch's guess).
UNDECIDED = "\x03"
_UNDECIDED_NAME = re.compile("\x03([A-Za-z_][A-Za-z0-9_]*)\x03")


def undecided(name: str) -> str:
    """The value of ``name`` after an assignment in an undecided branch."""
    return f"{UNDECIDED}{name}{UNDECIDED}"


def undecided_names(word: str) -> list[str]:
    """The undecided variables ``word`` holds."""
    return _UNDECIDED_NAME.findall(word) if UNDECIDED in word else []


def plain(word: str) -> str:
    """``word`` with each undecided value written back as the reference (``$NAME``), for messages."""
    return _UNDECIDED_NAME.sub(lambda m: "$" + m.group(1), word) if UNDECIDED in word else word


#: A bash array's value: :data:`ARRAY` then its elements joined by :data:`FIELD`, a boundary between words that no
#: quoting joins (``"${ARGS[@]}"`` is one word an element, bash(1) "Arrays").
ARRAY, FIELD = "\x06", "\x05"


def array_value(elements: Sequence[str]) -> str:
    """The value a shell variable holds for an array of ``elements``."""
    return ARRAY + FIELD.join(elements)


def array_elements(value: str | None) -> list[str]:
    """The elements of an array's value; a plain value is an array of one (``X=a; X+=(b)``), unset of none."""
    if value is None:
        return []
    return value[1:].split(FIELD) if value.startswith(ARRAY) else [value]


def first_element(value: str | None) -> str | None:
    """``$A`` / ``${A[0]}``: an array's first element (one split, not the whole array's), a plain value itself."""
    if value is None or not value.startswith(ARRAY):
        return value
    return value[1:].split(FIELD, 1)[0]


def unmark(word: str) -> str:
    """``word`` without the marks (an assignment's value is not split; an array's elements joined by blanks)."""
    out = word.replace(OPEN, "").replace(CLOSE, "").replace(BLANK, " ").replace(QUOTED_BLANK, " ")
    return out.replace(ARRAY, "").replace(FIELD, " ").replace(Q_OPEN, "").replace(Q_CLOSE, "")


def split_fields(word: str) -> list[str]:
    """The fields of an expanded word: blanks inside the marked (unquoted) expansions separate fields.

    A word whose only content was an empty unquoted expansion is no field at all, as in the shell.
    """
    word = word.replace(ARRAY, "")
    if OPEN not in word and FIELD not in word:
        return [unmark(word)]  # a mark the lexer parted from its pair (`${X:-a b}` unquoted: hunt75 O2)
    fields: list[str] = []
    current: list[str] = []
    literal = False  # the field holds text from outside an expansion (kept even when empty: "--x=$EMPTY")
    inside = quoted = False
    for ch in word:
        if ch == OPEN:
            inside = True
        elif ch == CLOSE:
            inside = False
        elif ch in (Q_OPEN, Q_CLOSE):  # a double-quoted part of `${X:+... "..."}`: one field, even empty
            quoted, literal = ch == Q_OPEN, True
        elif ch == FIELD or (inside and not quoted and (ch in _BLANKS or ch == BLANK)):  # FIELD: "${A[@]}"
            if current or literal:
                fields.append("".join(current))
            current, literal = [], False
        else:
            current.append(" " if ch == QUOTED_BLANK else ch)
            literal = literal or not inside
    if current or literal:
        fields.append("".join(current))
    return fields


#: The keywords that open and close the blocks :class:`Conditions` follows; ``{`` / ``}`` (a brace group, a function's
#: body) only lead or end the command they stand before (hunt75 D3: an ``if`` after ``{`` opened no block).
_OPENERS = frozenset({"case", "while", "until", "for"})
_CLOSERS = frozenset({"esac", "done"})
_LEADERS = frozenset({"then", "do", "else", "fi", "{", "}"}) | _OPENERS | _CLOSERS


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
    """Which branch of the script's ``if`` blocks a command is in, as far as the known variables decide it.

    The open blocks' states are counted as they change, so a command costs the same at any depth (hunt75 O1: 20,000
    nested ifs took 19 s when every command rescanned them).
    """

    frames: list[_Frame] = field(default_factory=list)
    _false: int = 0  # open frames whose branch is not taken
    _none: int = 0  # open frames whose branch is undecided

    @property
    def testing(self) -> bool:
        """Whether the next command belongs to an ``if`` / ``elif`` condition list (before its ``then``)."""
        return bool(self.frames) and self.frames[-1].testing

    def state(self) -> bool | None:
        """True: the command runs; False: it does not; None: undecided."""
        return False if self._false else (None if self._none else True)

    def _count(self, active: bool | None, step: int) -> None:
        if active is False:
            self._false += step
        elif active is None:
            self._none += step

    def _push(self, frame: _Frame) -> None:
        self.frames.append(frame)
        self._count(frame.active, 1)

    def _pop(self) -> None:
        if self.frames:
            self._count(self.frames.pop().active, -1)

    def _set(self, frame: _Frame, active: bool | None) -> None:
        self._count(frame.active, -1)
        frame.active = active
        self._count(active, 1)

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
            elif head == "else" and top is not None and not top.testing:
                self._set(top, False if top.taken else (None if top.undecided or top.active is None else True))
            elif (head == "fi" or head in _CLOSERS) and top is not None:
                self._pop()
                top = self.frames[-1] if self.frames else None
            elif head in _OPENERS:
                self._push(_Frame(None))
                return []  # the loop or case header itself: its words are not a command to read
        if not rest:
            return []
        if rest[0] == "if":
            self._push(_Frame(None, testing=True, condition=evaluate_test(rest[1:])))
            return []
        if rest[0] == "elif" and top is not None:
            top.undecided = top.undecided or top.active is None
            top.testing, top.elif_, top.condition = True, True, evaluate_test(rest[1:])
            return []
        return rest

    def _decide(self, f: _Frame) -> None:
        """The branch after ``then``: taken, not taken or undecided, from its condition and the earlier branches."""
        value = False if f.taken else f.condition
        if f.elif_:
            self._set(f, None if (value is not False and f.undecided) else value)
        else:
            self._set(f, value)
            f.undecided = value is None
        f.taken = f.taken or value is True
        f.testing = False


def evaluate_test(words: Sequence[str]) -> bool | None:
    """The value of a plain test (``[ A = B ]``, ``[ -n A ]``, ``test -z A``, ``true``, ``! ...``), else None.

    A word that still holds an unexpanded ``$`` (a variable fitgate does not know) leaves it undecided.
    """
    w = [f for x in words for f in split_fields(x)]  # `[ -n $EMPTY ]` is `[ -n ]` (hunt75 D5)
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
    # `[[ ]]` is left undecided: bash matches its right side as a pattern (`== *70B*`), and dash, /bin/sh of the
    # Debian and Ubuntu based images, has no `[[` at all (hunt75 D2 / D4); so is `==` in `[`, which dash refuses
    if w[:1] == ["test"]:
        inner = w[1:]
    elif len(w) >= 2 and (w[0], w[-1]) == ("[", "]"):
        inner = w[1:-1]
    else:
        return None
    if "==" in inner:
        return None
    if any("$" in x or "`" in x or UNDECIDED in x for x in inner):
        return None
    negate = False
    while inner and inner[0] == "!":
        negate, inner = not negate, inner[1:]
    value: bool | None = None
    if len(inner) == 1:
        value = inner[0] != ""
    elif len(inner) == 2 and inner[0] in ("-n", "-z"):
        value = (inner[1] != "") == (inner[0] == "-n")
    elif len(inner) == 3 and inner[1] in ("=", "!="):
        value = (inner[0] == inner[2]) == (inner[1] != "!=")
    elif len(inner) == 3 and inner[1] in _NUMERIC and all(_INTEGER.fullmatch(x) for x in (inner[0], inner[2])):
        value = _NUMERIC[inner[1]](int(inner[0]), int(inner[2]))
    return None if value is None else value != negate


_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_NUMERIC: dict[str, Callable[[int, int], bool]] = {
    "-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt, "-ge": operator.ge, "-lt": operator.lt,
    "-le": operator.le,
}  # fmt: skip


#: What a command substitution (``$(hostname -i)``, ``\`nproc\```, or a Kubernetes ``$(POD_IP)`` of a ``fieldRef`` /
#: ``secretKeyRef`` variable left in a script) stands for: a value only known when the pod runs (hunt89 F1, F2).
SUBSTITUTION = "command_substitution"
_WORD_START = " \t\n;&|()"


def strip_comments(text: str) -> str:
    r"""``text`` without its shell comments: a ``#`` that starts a word, outside quotes, to the end of its line.

    A ``#`` inside a word is a character (``name#x``, ``${MODEL##*/}``, ``$#``, ``${#X}``): shlex's comment rule took
    it for a comment and swallowed the rest of the line, and with ``\`` continuations the rest of the command
    (hunt89 F3).
    """
    if "#" not in text:
        return text
    out: list[str] = []
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"' and i + 1 < n:
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == "\\" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in _WORD_START):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def substitution_spans(text: str) -> list[tuple[int, int]]:
    r"""(start, end) of each ``$( ... )`` (not ``$((``) and ``\\`...\\``` outside single quotes, outermost only."""
    spans: list[tuple[int, int]] = []
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and quote != "'" and i + 1 < n:
            i += 2
            continue
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "$" and text.startswith("$(", i) and not text.startswith("$((", i):
            depth, j = 0, i + 1
            while j < n:
                if text[j] == "(":
                    depth += 1
                elif text[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j < n:
                spans.append((i, j + 1))
                i = j + 1
                continue
        elif c == "`":
            j = text.find("`", i + 1)
            if j > 0:
                spans.append((i, j + 1))
                i = j + 1
                continue
        i += 1
    return spans


def without_substitutions(text: str) -> str:
    """``text`` with each command substitution replaced by an undecided value (:data:`SUBSTITUTION`)."""
    spans = substitution_spans(text) if ("$(" in text or "`" in text) else []
    if not spans:
        return text
    parts, at = [], 0
    for start, end in spans:
        parts += [text[at:start], undecided(SUBSTITUTION)]
        at = end
    return "".join([*parts, text[at:]])


def undecided_reason(name: str) -> str:
    """Why a vLLM command holding the undecided value of ``name`` is Unknown."""
    if name == SUBSTITUTION:
        return "a command substitution ($(...) or `...`) of the vLLM command: its value is known when the pod runs"
    return f"${name}: set in a branch of the script fitgate cannot decide"
