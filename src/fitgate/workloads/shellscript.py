"""A container's ``sh -c`` script as the simple commands the shell runs, their words expanded (issue 21, hunt74).

Split out of :mod:`fitgate.workloads.argv`: the script's lexing (``shlex``), its assignments, ``if`` blocks
(:mod:`fitgate.workloads.shellwords`), ``$(( ))`` (:mod:`fitgate.workloads.shellmath`) and here-document bodies.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from fitgate.workloads import shellmath, shellwords
from fitgate.workloads.bounds import BudgetError, ExpansionBudget, check_script
from fitgate.workloads.expansion import ARITH_MARK, ASSIGNMENT, expand_shell, with_arithmetic
from fitgate.workloads.reading import WorkloadError

_SHELL_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})


class CommandError(WorkloadError):
    """A command line that vLLM's parser refuses (Invalid)."""


class UnsplittableScriptError(BudgetError):
    """A shell script fitgate's splitter (shlex) cannot read, which the shell may run: Unknown, never Invalid.

    hunt207 F1 / F2: a ``)`` quoted inside ``$( ... )``, bash's ``$'...'`` and here-document forms shlex does not know
    made scripts that bash and dash run Invalid.
    """


def split_script(script: str, env: Mapping[str, str], budget: ExpansionBudget | None = None) -> list[list[str]]:
    """A shell script as its simple commands (split at ``;``, ``&&``, ``|``, newlines ...), words expanded.

    Assignments (``START_RANK=$(( ... ))``, ``export A=1``) set variables for the commands after them and
    are not commands themselves; ``$(( ... ))`` is evaluated over the variables known at that point
    (:mod:`fitgate.workloads.shellmath`, issue 21).
    """
    # before shlex, quadratic in a word's length (hunt83 F1); here-document bodies are another program's input,
    # counted apart (hunt88 F3: a 17 KB chat template written by a here-document made the workload Unknown)
    main_text, _ = shellwords.split_heredocs(script)
    check_script(main_text, "the sh -c script")
    budget = budget or ExpansionBudget()  # one for the whole script: an array's appends add up (hunt101 F4)
    text = script.replace("\\\n", " ")
    expressions: list[str] = []
    spans = shellmath.arithmetic_spans(text)
    if spans:  # each $(( ... )) as one word-like mark: shlex would split its parentheses
        parts, at = [], 0
        for start, end in spans:
            parts += [text[at:start], ARITH_MARK.format(len(expressions))]
            expressions.append(text[start + 3 : end - 2])
            at = end
        text = "".join([*parts, text[at:]])
    # a here-document's body is another program's input (`python3 - <<EOF`): its `if` lines are not the shell's, so it
    # is read after the script, without following its blocks (a `vllm serve` written into a file there is still seen)
    main, bodies = shellwords.split_heredocs(text)
    # hunt89 F3: a `#` inside a word is no comment (shlex's rule swallowed the rest of the line); F1 / F2: a command
    # substitution is one word whose value fitgate cannot know (its parentheses split the command before)
    main = shellwords.without_substitutions(shellwords.strip_comments(main))
    shell_env = dict(env)
    commands = _commands_of(main, expressions, shell_env, budget, script, follow=True)
    return commands + _body_commands(bodies, expressions, shell_env, budget, script)


#: Most bytes, lines and bytes a line of here-document bodies read for a ``vllm serve`` written into a file (each
#: line is split on its own, ~15 us: 16 KiB of one-character lines took 128 ms, 512 lines take ~8 ms).
MAX_BODY_BYTES = 16 * 1024
MAX_BODY_LINES = 512
MAX_BODY_LINE_BYTES = 4096


def _body_commands(
    bodies: str, expressions: Sequence[str], shell_env: dict[str, str], budget: ExpansionBudget, script: str
) -> list[list[str]]:
    """The commands of here-document bodies, read line by line.

    A line that is no shell (``You're a helpful assistant.``, a Python line) is passed over, never Invalid
    (hunt88 F2); past :data:`MAX_BODY_BYTES` or :data:`MAX_BODY_LINES` the bodies are not read.
    """
    commands: list[list[str]] = []
    lines = [line for line in bodies[:MAX_BODY_BYTES].split("\n") if line.strip()]
    for line in lines[:MAX_BODY_LINES]:
        if len(line) > MAX_BODY_LINE_BYTES:
            continue
        try:
            text = shellwords.without_substitutions(shellwords.strip_comments(line))
            commands += _commands_of(text, expressions, shell_env, budget, script, follow=False)
        except (CommandError, UnsplittableScriptError):
            continue
    return commands


def _commands_of(
    text: str, expressions: Sequence[str], shell_env: dict[str, str], budget: ExpansionBudget, script: str,
    *, follow: bool,
) -> list[list[str]]:  # fmt: skip
    """The simple commands of ``text``: words expanded, assignments applied to ``shell_env``.

    Its ``if`` blocks are followed when ``follow`` (:class:`shellwords.Conditions`).
    """
    text = shellwords.mark_unquoted(text)  # hunt74 F1: an unquoted $VAR's value is split into fields
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()\n")
    lexer.commenters = ""  # comments are gone already (shellwords.strip_comments): a `#` left is a word's
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    raw: list[list[str]] = [[]]
    joiners = [";"]  # the separator before each command (an if's condition list joins its tests with && / ||)
    array = False  # inside `NAME=( ... )`: its words are the array's, its newlines none of the script's
    try:
        for token in lexer:
            # the lexer groups punctuation: `(\n`, `)\n`, `);` are one token each
            # an empty token is a quoted empty word ("" of `[ "$X" != "" ]`), no separator (hunt102 F3)
            punctuation = bool(token) and set(token) <= set(";&|()\n")
            if array and not token.startswith(")") and (token.strip("\n") == "" or not punctuation):
                if not token or token.strip("\n"):
                    raw[-1].append(token)
            elif array:  # `)` ends it (a `;` / `|` inside is bash's syntax error: the array ends there too)
                array = False
                raw.append([])
                joiners.append(token[1:] or ";" if token.startswith(")") else token)
            elif token[:1] == "(" and set(token[1:]) <= {"\n"} and raw[-1] and _ARRAY_ASSIGNMENT.fullmatch(raw[-1][-1]):
                *lead, word = raw[-1]  # `then ARGS=(`: the keyword before it stays a command of its own
                raw[-1:] = [lead, [ARRAY_WORDS, word]] if lead else [[ARRAY_WORDS, word]]
                joiners += [";"] if lead else []
                array = True
            elif token in _SHELL_SEPARATORS or punctuation:
                raw.append([])
                joiners.append(token.strip("\n") or "\n")  # `&&\n`: the next line is after && (hunt102 F5)
            else:
                raw[-1].append(token)
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise UnsplittableScriptError(
            f"fitgate cannot split the shell script into words ({exc}): {script[:200]!r}"
        ) from None
    commands: list[list[str]] = []
    branches = shellwords.Conditions()  # hunt74 F2: an assignment in an if branch not taken sets nothing
    status: bool | None = True  # the and-or list's status so far (True: exit 0), for a command after && / ||
    for raw_words, joiner in ((c, j) for c, j in zip(raw, joiners, strict=True) if c):
        # hunt101 F2: `[ "$DEBUG" = 1 ] && ARGS=(...)` runs the assignment only where the test holds
        runs = status if joiner == "&&" else (None if status is None else not status) if joiner == "||" else True
        if follow and branches.testing:
            runs = True  # an if's condition list: its tests joined by && / || are the Conditions' to decide
        if runs is False:
            continue  # skipped: the list's status stays the one before it
        if raw_words[0] == ARRAY_WORDS:
            if branches.state() is not False:
                undecided = branches.state() is None or runs is None
                _assign_array(raw_words[1], raw_words[2:], expressions, shell_env, budget, undecided)
            status = runs
            continue
        expanded = [expand_shell(with_arithmetic(w, expressions, shell_env), shell_env, budget) for w in raw_words]
        if follow:
            expanded = branches.command(expanded, joiner)
        if not expanded or branches.state() is False:
            status = True
            continue
        words = raw_words[len(raw_words) - len(expanded) :]
        undecided = branches.state() is None or runs is None
        status = _status(expanded) if runs else None
        declared = words[0] in _DECLARATIONS  # `export A=1`, `local A=1`, `declare -x A=1 B`: their assignments
        targets = [w for w in words[1:] if not w.startswith("-")] if declared else words
        body = [w for w in expanded[1:] if not w.startswith("-")] if declared else expanded
        if body and all(ASSIGNMENT.match(w) or (declared and _NAME.fullmatch(w)) for w in targets):
            exported: list[str] = []
            for word in body:  # NAME=value: known to the commands that follow; undecided in an undecided branch
                name, eq, value = shellwords.unmark(word).partition("=")
                if not eq:
                    continue  # `declare -a A`, `export A`: no value given
                before = shell_env.get(name, "")  # bash: `A=x` on an array sets its first element
                if before.startswith(shellwords.ARRAY) and not undecided:
                    value = shellwords.array_value([value, *shellwords.array_elements(before)[1:]])
                shell_env[name] = shellwords.undecided(name) if undecided else value
                if not undecided and _exports(words):
                    exported.append(f"{name}={value}")
            if exported:  # hunt178 F1: recorded as the command it is, for the process env of a `vllm serve` after it
                commands.append(["export", *exported])
            continue
        if _ELEMENT_ASSIGNMENT.match(words[0]):  # hunt101 F3: `A[3]=8`: elements fitgate does not follow, so the
            for word in expanded:  # array is undecided (a vLLM command using it Unknown, never sized on a stale value)
                if (m := _ELEMENT_ASSIGNMENT.match(word)) is not None:
                    shell_env[m.group(1)] = shellwords.undecided(m.group(1))
            continue
        if words[0] == "unset":  # `unset A`: unset for the commands that follow
            for word in expanded[1:]:
                shell_env.pop(word, None)
            continue
        commands.append([f for w in expanded for f in shellwords.split_fields(w)])
    return commands


#: The commands whose status an ``&&`` / ``||`` after them reads (shellwords.evaluate_test).
_TESTS = frozenset({"[", "test", "[[", "true", "false", ":", "!"})
#: Commands whose status is the pod's to know (a search, a probe, a program): what follows && / || is undecided
#: (hunt102 F4: `nvidia-smi -L | grep -q H200 && LEN=131072`); any other (cd, mkdir, export, pip ...) succeeds.
_PROBES = frozenset({
    "grep", "egrep", "fgrep", "pgrep", "command", "which", "type", "hash", "curl", "wget", "nc", "ping", "ls", "stat",
    "find", "python", "python3", "nvidia-smi", "rocm-smi", "amd-smi", "timeout", "cmp", "diff",
})  # fmt: skip


def _status(words: Sequence[str]) -> bool | None:
    """Whether a simple command succeeds, where fitgate can tell; None where only the pod can."""
    if words[0] in _TESTS:
        return shellwords.evaluate_test(words)
    return None if words[0].rsplit("/", 1)[-1] in _PROBES else True


_ELEMENT_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[[^\]]*\]\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The builtins whose ``NAME=value`` words are assignments (their ``-x`` / ``-a`` options aside).
_DECLARATIONS = frozenset({"export", "declare", "typeset", "local", "readonly"})


def _exports(words: Sequence[str]) -> bool:
    """Whether a declaration puts its variables in the environment of later commands (``export``, ``declare -x``)."""
    if words[0] == "export":
        return True
    return words[0] in ("declare", "typeset") and any(w.startswith("-") and "x" in w for w in words[1:])


#: ``NAME=(`` / ``NAME+=(``: a bash array's assignment (bash(1), "Arrays"), which ``sh`` (dash) refuses.
_ARRAY_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
#: The first word of an array assignment's raw command (a control character no script holds).
ARRAY_WORDS = "\x07array"


def _assign_array(
    word: str, raw_words: Sequence[str], expressions: Sequence[str], shell_env: dict[str, str],
    budget: ExpansionBudget, undecided: bool,
) -> None:  # fmt: skip
    """``ARGS=(--max-model-len 8192 "$X")`` (``+=`` appends): each word expanded and split as a command's words are.

    Stored as :func:`shellwords.array_value`, which ``"${ARGS[@]}"`` gives back as one word an element
    (:func:`fitgate.workloads.expansion.expand_shell`); in a branch fitgate cannot decide, undecided.
    """
    name = word.rstrip("=").rstrip("+")
    if undecided:
        shell_env[name] = shellwords.undecided(name)
        return
    expanded = [expand_shell(with_arithmetic(w, expressions, shell_env), shell_env, budget) for w in raw_words]
    elements = [f for w in expanded for f in shellwords.split_fields(w)]
    before = shellwords.array_elements(shell_env.get(name)) if word.endswith("+=") else []
    value = shellwords.array_value([*before, *elements])
    budget.spend(len(value), f"array {name} in sh -c")  # hunt101 F4: each append copies the whole array again
    shell_env[name] = value
