"""One decision, one Event: the ledger two handlers reconciling one object at once share (note38's flaky e2e)."""

from __future__ import annotations

from fitgate.operator.runtime.memo import EventLedger

UNKNOWN = ("Warning", "Unknown", "acme/not-anywhere is in no catalog")


def test_the_same_event_for_the_same_generation_is_posted_once() -> None:
    ledger = EventLedger()
    assert ledger.first("uid-1", 1, UNKNOWN)
    assert not ledger.first("uid-1", 1, UNKNOWN)  # the resync timer's round deciding it again, 23 ms later
    assert ledger.first("uid-2", 1, UNKNOWN)  # another object
    assert ledger.first("uid-1", 2, UNKNOWN)  # a new generation is a new decision
    fits = ("Normal", "Fits", "fits")
    assert ledger.first("uid-1", 2, fits) and ledger.first("uid-1", 2, UNKNOWN)  # a flip back is posted


def test_the_ledger_is_bounded() -> None:
    ledger = EventLedger()
    for i in range(EventLedger.MAX_OBJECTS + 5):
        ledger.first(f"uid-{i}", 1, UNKNOWN)
    assert ledger.first("uid-0", 1, UNKNOWN)  # the oldest is forgotten: its event would be posted again
    assert not ledger.first(f"uid-{EventLedger.MAX_OBJECTS + 4}", 1, UNKNOWN)
