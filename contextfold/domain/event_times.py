"""When a run's events happened: times read, kept and shown.

Pure: the store reads the clock when it appends (``EventStore(clock=...)``), an importer reads a
trace's own timestamps; here are only the rules that turn those times into answers, so a test
gives them any times it likes and nothing here reads a clock.

Where a time lives: BESIDE an event, never in it. An event's canonical JSON is what its chain
hash covers and what every build folds (DESIGN.md section 3: every input of a build comes from
the log, never the wall clock; a replay is byte-identical). A time in the event would make two
recordings of the same history differ, and a re-import of an export (a new recording) end at
another chain head. So the store keeps times in a table of their own
(:mod:`contextfold.store.event_times`), keyed by run and position, and nothing the builder reads
sees them.

Times are UTC, to the microsecond (what both databases keep as one integer). A time written
without a zone (``14:03``, or an OpenHands trace's ``2025-01-27T22:44:56.900854``, which
OpenHands writes from its machine's local clock without saying which) is read as UTC: the same
rule for a trace and for ``--at``, so a time copied from a trace finds its event.

Which turn a time names: :mod:`contextfold.domain.turn_times`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from contextfold.domain.errors import InvalidInputError

__all__ = ["from_micros", "shown_time", "source_time", "to_micros", "utc_time"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ZULU = re.compile(r"[zZ]$")


def utc_time(text: str) -> datetime:
    """The UTC instant of an ISO 8601 date and time (``2026-12-07T14:03``, ``...14:03:00+02:00``,
    ``...Z``, a space for the ``T``); one written without a zone is UTC. A date alone is its
    midnight. :class:`InvalidInputError` for anything else, saying what is read."""
    stripped = text.strip()
    try:
        parsed = datetime.fromisoformat(_ZULU.sub("+00:00", stripped))
    except ValueError:
        raise InvalidInputError(
            f"not a time: {text!r}; give an ISO 8601 date and time, such as 2026-12-07T14:03:00Z, "
            "2026-12-07 14:03 (no zone: UTC) or 2026-12-07T16:03+02:00") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def source_time(value: object) -> datetime | None:
    """A trace's timestamp as a UTC instant, or None when it holds none that reads as one (a
    missing key, a number, text that is no ISO 8601 time): an importer keeps the event and records
    no time for it, rather than refuse a history for its clock or invent a time."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return utc_time(value)
    except InvalidInputError:
        return None


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch of an aware ``moment``: how a store keeps a time."""
    if moment.tzinfo is None:
        raise InvalidInputError(f"a time without a zone: {moment.isoformat()} (give an aware datetime, UTC)")
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The UTC instant a store's integer names (:func:`to_micros`)."""
    return _EPOCH + timedelta(microseconds=micros)


def shown_time(moment: datetime | None) -> str:
    """A time as the CLI prints it and an export carries it: ISO 8601, UTC, ``Z``, to the
    microsecond (``2026-12-07T14:03:00.123456Z``); ``-`` for none."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
