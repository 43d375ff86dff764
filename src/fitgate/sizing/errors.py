"""Domain errors of the sizing core.

Every error names the field, the value it got and what it accepts, so that the CLI and the
admission webhook can show it as one line to the user without a traceback.
"""

from __future__ import annotations

from typing import Any


class SizingError(ValueError):
    """Bad or incomplete input to the sizing core.

    Attributes:
        field: The input field at fault (a CLI flag, a spec path or a config.json key).
        value: The value that was given (None when the field is missing).
        expected: What the field accepts, in words ("an integer >= 1", "one of auto, fp8").
    """

    def __init__(self, field: str, value: object, expected: str, detail: str = "") -> None:
        self.field = field
        self.value = value
        self.expected = expected
        self.detail = detail
        shown = "missing" if value is None else repr(value)
        if len(shown) > MAX_VALUE_CHARS:
            shown = shown[: MAX_VALUE_CHARS - 20] + f"... ({len(shown)} characters)"
        if value is None and field.startswith("-"):  # a command-line flag not given
            text = f"{_one_line(field)} is required: {expected}"
        else:
            text = f"{_one_line(field)}: {shown} is not valid; expected {expected}"
        if detail:
            text += f" ({detail})"
        super().__init__(_one_line(text))


#: A value shown in an error is cut to this many characters (a whole config or header is never echoed).
MAX_VALUE_CHARS = 200


def _one_line(text: str) -> str:
    """Control characters (a key with a newline in a hostile config) shown escaped: an error is one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


class UnknownArchitectureError(SizingError):
    """The model's architecture is not one the sizing core knows how to size.

    Not an invalid checkpoint (vLLM may serve it: an encoder, a reranker, an audio model; hunt46 F2): the message says
    fitgate does not size it, and the verdict is Unknown.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(field, value, expected)
        self.args = (_one_line(f"{field}: {value!r} is an architecture fitgate does not size; it sizes {expected}"),)


class NotModelledError(SizingError):
    """A setting vLLM takes that fitgate does not size: the answer is Unknown, never a denial for it.

    ``expected`` says what is not sized: the message reads ``field: value is taken by vLLM but not sized: ...``.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(field, value, expected)
        self.args = (_one_line(f"{field}: {value!r} is taken by vLLM but not sized by fitgate: {expected}"),)

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownGpuError(NotModelledError):
    """A GPU name outside fitgate's catalog (hunt59 F2): a verdict command answers Unknown, never a usage error."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(field, value, expected)
        self.args = (_one_line(f"{field}: {value!r} is not a GPU of fitgate's catalog: {expected}"),)


class ReleaseUnknownError(NotModelledError):
    """A setting the newest modelled release refuses, on a release fitgate cannot tell, that an older one takes.

    hunt116 F1/F2: a gate never refuses for a release it does not know; ``plan`` answers Unknown (ReleaseUnknown).
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(field, value, expected)
        self.args = (_one_line(f"{field}: {value!r} names no release fitgate knows: {expected}"),)


#: How much of a value an error echoes, and the longest error message (hunt83 G1: a 1 MB model.name came back whole).
MAX_SHOWN_CHARS = 120
MAX_ERROR_CHARS = 2000


def clipped(value: Any) -> str:
    """``repr(value)``, at most :data:`MAX_SHOWN_CHARS` characters of it (``...`` where it was cut)."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
        return repr(value[:MAX_SHOWN_CHARS]) + f"... ({len(value)} characters)"
    shown = repr(value)
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[:MAX_SHOWN_CHARS] + "..."
