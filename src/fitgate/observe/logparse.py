"""Read a vLLM start-up log: the settings the engine ran with and the memory figures it printed.

One narrow parser for ``kubectl logs`` output of vLLM 0.6 to 0.33, with or without the process prefix
vLLM adds (``(EngineCore_DP0 pid=243)``, ``(VllmWorker TP0 pid=..)``, ``(Worker_PP1 pid=..)``) or the
one ``kubectl logs --prefix`` adds (``[pod/x/c]``). It reads, where printed:

* settings: the ``non-default args: {...}`` dict (``ast.literal_eval``, never ``eval``), the
  ``Initializing a V1 LLM engine (vX.Y.Z) with config: ...`` line, the ``Defaulting max_num_seqs ...``
  lines, the older ``args: Namespace(...)`` line;
* the GPU total: the worker's memory snapshot, ``Free memory on device (a/b GiB)``, or the V0
  ``total_gpu_memory`` lines;
* the figures: weights, activation peak, non-torch increase, total non-KV, available KV cache, KV
  tokens, GPU blocks, maximum concurrency, CUDA-graph memory (estimated and actual);
* the failure: the KV-cache ``ValueError`` lines, CUDA out of memory, and the generic engine failure.

Figures are kept as printed (GiB with the log's decimals; vLLM's old "GB" lines divide by 2**30 too),
so that a test can compare them exactly with the numbers in the log; ``Observed.bytes`` converts.
Where several ranks print a figure, tensor/pipeline rank 0 wins; where several lines print the same
figure, the more detailed one wins (the profiler's "weights memory" over "Model loading took").

UTF-8 (invalid bytes replaced) or UTF-16 with a byte-order mark (PowerShell 5 redirection). Bounded: lines
longer than :data:`MAX_LINE_BYTES` are skipped unread, reading stops after
:data:`MAX_LOG_BYTES`, and nothing in a log can raise anything but :class:`LogError` from
:func:`read_log`.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import BinaryIO

from fitgate.observe.logpatterns import (
    _ANSI,
    _EXCEPTION,
    _HEADER,
    _TRIGGER,
    MAX_FAILURE_CHARS,
    MAX_KEPT_LINES,
    MAX_LINE_BYTES,
    MAX_LOG_BYTES,
    _is_rank0,
    printable,
)
from fitgate.observe.logsteps import (
    _QUOTED_STEPS,
    _STEPS,
    _printed_by_vllm,
)
from fitgate.observe.records import Failure, LogError, Observed, RunSettings, StartupLog

#: The bounds and :func:`printable` live with the grammar (:mod:`fitgate.observe.logpatterns`); re-exported.
__all__ = [
    "MAX_FAILURE_CHARS",
    "MAX_KEPT_LINES",
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "StartupLog",
    "parse_lines",
    "printable",
    "read_log",
]


class _Reader:
    """Accumulates one log, line by line, keeping the best source of every value."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[tuple[bool, int], object]] = {}
        self.failure: Failure | None = None
        self.generic_failure: Failure | None = None
        self.lines = 0
        self.recognised = 0
        self.too_long = 0
        self.binary = 0
        self.kept: list[str] = []
        self._rank0 = True
        self._hit = False
        self.in_traceback = False
        self.starts = 0
        self.error_failure: Failure | None = None
        self.printed = 0  # lines of vLLM's own start-up output (see StartupLog.vllm_lines)

    def put(self, name: str, value: object, priority: int) -> None:
        if value is None:
            return
        self._hit = True
        rank = (self._rank0, priority)
        old = self.values.get(name)
        if old is None or rank > old[0]:
            self.values[name] = (rank, value)

    def value(self, name: str) -> object | None:
        kept = self.values.get(name)
        return None if kept is None else kept[1]

    def feed(self, raw: str) -> None:
        self.lines += 1
        if len(raw) > MAX_LINE_BYTES:
            self.too_long += 1
            return
        if "\x00" in raw:
            self.binary += 1
            return
        if not _TRIGGER.search(raw):  # serving traffic: most lines of a long log
            return
        line = _ANSI.sub("", raw) if "\x1b" in raw else raw
        self._rank0 = _is_rank0(line)
        hit = False
        for step in _STEPS:
            self._hit = False
            step(self, line)
            if self._hit and (step not in _QUOTED_STEPS or _printed_by_vllm(line)):
                self.printed += 1
            hit = hit or self._hit
        self._hit = hit
        if self._hit:
            self.recognised += 1
            if len(self.kept) < MAX_KEPT_LINES:
                self.kept.append(line)

    def fail(self, kind: str, line: str, at: int) -> None:
        self._hit = True
        header = _HEADER.search(line, 0, at + 1)
        start = header.end() if header else 0
        exc = _EXCEPTION.search(line, start, at + 80)
        if exc and exc.start() <= at:
            start = exc.start()
        # one line: a newline inside a "line" handed to parse_lines (hostile input) is escaped like the rest
        message = printable(line[start:].strip()).replace("\n", "\\x0a")[:MAX_FAILURE_CHARS]
        failure = Failure(kind, message)
        if kind == "engine_failed":
            self.generic_failure = self.generic_failure or failure
        elif kind == "error":
            self.error_failure = self.error_failure or failure
        elif self.failure is None:
            self.failure = failure

    def result(self, bytes_read: int, truncated: bool) -> StartupLog:
        got = {name: value for name, (_, value) in self.values.items()}
        settings = RunSettings(**{f.name: got.get(f.name) for f in fields(RunSettings)})  # type: ignore[arg-type]
        observed = Observed(**{f.name: got.get(f.name) for f in fields(Observed)})  # type: ignore[arg-type]
        return StartupLog(
            settings=settings,
            observed=observed,
            failure=self.failure or self.error_failure or self.generic_failure,
            lines_read=self.lines,
            lines_recognised=self.recognised,
            lines_too_long=self.too_long,
            lines_binary=self.binary,
            bytes_read=bytes_read,
            truncated=truncated,
            raw_lines=tuple(self.kept),
            starts=self.starts,
            vllm_lines=self.printed,
        )


def parse_lines(lines: Iterable[str]) -> StartupLog:
    """Read log lines (without their newline) already in memory; over-long lines are skipped.

    Never raises on content: a log with no vLLM line gives a :class:`StartupLog` with
    ``lines_recognised == 0``.
    """
    reader = _Reader()
    size = 0
    truncated = False
    for line in lines:
        if size >= MAX_LOG_BYTES:
            truncated = True
            break
        size += len(line) + 1
        reader.feed(line.rstrip("\r\n"))
    return reader.result(size, truncated)


def _read_stream(stream: BinaryIO, reader: _Reader) -> tuple[int, bool]:
    """Feed ``reader`` from a binary stream, one bounded line at a time; returns (bytes read, truncated)."""
    total = 0
    while total < MAX_LOG_BYTES:
        chunk = stream.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return total, False
        total += len(chunk)
        if len(chunk) > MAX_LINE_BYTES:  # skip the rest of this line without keeping it
            reader.lines += 1
            reader.too_long += 1
            while not chunk.endswith(b"\n") and total < MAX_LOG_BYTES:
                chunk = stream.readline(MAX_LINE_BYTES)
                if not chunk:
                    return total, False
                total += len(chunk)
            continue
        reader.feed(chunk.decode("utf-8", errors="replace").rstrip("\r\n"))
    return total, stream.read(1) != b""


def _read_utf16(stream: BinaryIO, reader: _Reader) -> tuple[int, bool]:
    """Like :func:`_read_stream` for a UTF-16 file (Windows PowerShell 5 writes ``kubectl logs > f`` so)."""
    text = io.TextIOWrapper(stream, encoding="utf-16", errors="replace", newline="")
    try:
        return _read_text(text, reader)
    finally:
        text.detach()  # the caller closes the file


def _read_text(text: io.TextIOWrapper, reader: _Reader) -> tuple[int, bool]:
    limit = MAX_LINE_BYTES // 2
    total = 0
    while total < MAX_LOG_BYTES:
        line = text.readline(limit + 1)
        if not line:
            return total, False
        total += 2 * len(line)
        if len(line) > limit:
            reader.lines += 1
            reader.too_long += 1
            while not line.endswith("\n") and total < MAX_LOG_BYTES:
                line = text.readline(limit)
                if not line:
                    return total, False
                total += 2 * len(line)
            continue
        reader.feed(line.rstrip("\r\n"))
    return total, text.read(1) != ""


def read_log(path: str | Path) -> StartupLog:
    """Read a vLLM start-up log file (``-`` is not accepted: give a file).

    Raises:
        LogError: the file cannot be opened, or has no line vLLM prints at start-up (binary data, an
            empty file, a file of over-long lines, some other program's log).
    """
    where = str(path)
    reader = _Reader()
    try:
        with Path(path).open("rb") as stream:
            utf16 = stream.read(2) in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
            stream.seek(0)
            size, truncated = (_read_utf16 if utf16 else _read_stream)(stream, reader)
    except IsADirectoryError:
        raise LogError("--log", where, "a log file (this is a directory)") from None
    except OSError as exc:
        raise LogError("--log", where, "a readable log file", exc.strerror or type(exc).__name__) from None
    log = reader.result(size, truncated)
    if not log.is_vllm:
        detail = f"no vLLM start-up line in {log.lines_read} lines ({log.bytes_read} bytes)"
        if log.lines_binary:
            detail += f"; {log.lines_binary} lines of binary data"
        if log.lines_too_long:
            detail += f"; {log.lines_too_long} lines over {MAX_LINE_BYTES} bytes skipped"
        raise LogError("--log", where, "a vLLM start-up log (`kubectl logs POD`)", detail)
    return log
