"""The times of a run's events: a table beside the events, one row per (run, position).

Why a table of its own and not a field of the event or a column of the events table:

- not in the event: its canonical JSON is what the chain hash covers and the builder folds
  (:mod:`contextfold.domain.event_times` says why a time must stay out of both);
- not in the chain: a previous release recomputes the chain (``verify``, a read refused row's
  check) over the event bytes alone, so a time hashed in would read as damage to every release
  before this one; and an export re-imported elsewhere (``events --json --with-artifacts`` then
  ``import``) ends at the same chain head as its source, which ``audit`` shows and a receiver
  compares. What that costs: a time is not tamper-evident (one can edit the table and no check
  says so). A time says when, the chain says what: an auditor who needs a signed time keeps the
  head and its time outside, as before;
- not a column of the events table: that table is eventsourcing's (its insert statement,
  PostgreSQL's row type and insert function), and a release before this one inserts into it;
  a table it does not know it leaves alone, so it reads and writes a store of this release as
  before (its events get no time, shown as ``-``).

The rows are written in the insert's transaction (``pg_recorder``'s and ``head_check``'s recorders
take them as ``times``), so an event is never committed without the time it was recorded with,
nor a time without its event. Upserted: a position written again after the log moved back under
it (a restored backup) keeps the new event's time. A store made before this table: made when the
store is opened to write (``create_schema``); opened where it cannot be made (a read-only
database), its events have no time and appends record none.

A time is kept as microseconds since the Unix epoch, UTC (one integer: the same in both
databases, no zone to read back wrong), ~20 bytes a row with its key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextfold.domain.event_times import from_micros, to_micros
from contextfold.store.driver_errors import translate_errors

if TYPE_CHECKING:
    from contextfold.store.backends import Backend, PostgresBackend, SQLiteBackend

__all__ = ["EVENT_TIMES_TABLE", "EventTimes", "TimeRow", "create_table_sql", "insert_sql", "run_spans",
           "times_of_run"]

EVENT_TIMES_TABLE = "contextfold_event_times"

TimeRow = tuple[str, int, int]
"""(run id, position, microseconds since the epoch, UTC): one row."""

_BATCH = 500
"""Run ids per query of :func:`run_spans` (SQLite's bound on a statement's parameters)."""


def create_table_sql(table: str, *, integer: str, without_rowid: bool) -> str:
    """The table's ``CREATE TABLE IF NOT EXISTS`` (``INTEGER`` and WITHOUT ROWID on SQLite: the
    key is the row; ``BIGINT`` on PostgreSQL)."""
    return (f"CREATE TABLE IF NOT EXISTS {table} (originator_id TEXT NOT NULL, "
            f"originator_version {integer} NOT NULL, recorded_us {integer} NOT NULL, "
            "PRIMARY KEY (originator_id, originator_version))" + (" WITHOUT ROWID" if without_rowid else ""))


def insert_sql(table: str, placeholder: str) -> str:
    """The upsert of one row (the module's docstring says why an upsert), in both dialects."""
    p = placeholder
    return (f"INSERT INTO {table} (originator_id, originator_version, recorded_us) "
            f"VALUES ({p}, {p}, {p}) ON CONFLICT (originator_id, originator_version) "
            "DO UPDATE SET recorded_us = excluded.recorded_us")


def times_of_run(backend: Backend, run_id: str, *, after: int = 0,
                 upto: int | None = None) -> dict[int, datetime]:
    """Position -> time of the run's events after ``after`` (up to ``upto``) that have one."""
    p = backend.placeholder
    bound = "" if upto is None else f" AND originator_version <= {p}"
    rows = backend.query(
        f"SELECT originator_version, recorded_us FROM {backend.table(EVENT_TIMES_TABLE)} "
        f"WHERE originator_id = {p} AND originator_version > {p}{bound}",
        (run_id, after) if upto is None else (run_id, after, upto))
    return {int(v): from_micros(int(us)) for v, us in rows}


def run_spans(backend: Backend, run_ids: Sequence[str]) -> dict[str, tuple[datetime, datetime]]:
    """Run id -> (earliest, latest) time of its events, for the runs that have any."""
    out: dict[str, tuple[datetime, datetime]] = {}
    p = backend.placeholder
    for start in range(0, len(run_ids), _BATCH):
        chunk = list(run_ids[start:start + _BATCH])
        rows: list[tuple[Any, ...]] = backend.query(
            f"SELECT originator_id, MIN(recorded_us), MAX(recorded_us) "
            f"FROM {backend.table(EVENT_TIMES_TABLE)} "
            f"WHERE originator_id IN ({', '.join([p] * len(chunk))}) GROUP BY originator_id", chunk)
        out.update({str(r): (from_micros(int(lo)), from_micros(int(hi))) for r, lo, hi in rows})
    return out


class EventTimes:
    """What an :class:`~contextfold.store.event_store.EventStore` answers about its events' times
    (mixed into it: set up by its ``__init__``)."""

    url: str
    backend: SQLiteBackend | PostgresBackend
    clock: Callable[[], datetime]
    _times_kept: bool | None

    def _time_rows(self, batches: Sequence[tuple[str, Sequence[int], Sequence[datetime | None] | None]]
                   ) -> list[TimeRow]:
        """The rows of an insert's times, from its batches as (run id, positions, the source's
        times or None): the clock read once for the whole insert (one transaction: its events
        are recorded at one time), a source's own times as given (None: no row); none where the
        store has no times table (a read-only store made before it)."""
        if not self.keeps_times():
            return []
        now: int | None = None
        rows: list[TimeRow] = []
        for run_id, positions, given in batches:
            if given is None:
                now = to_micros(self.clock()) if now is None else now
                rows += [(run_id, position, now) for position in positions]
            else:
                rows += [(run_id, position, to_micros(at))
                         for position, at in zip(positions, given, strict=True) if at is not None]
        return rows

    def keeps_times(self) -> bool:
        """Whether this store has the times table (asked once): a store made before it and opened
        where it cannot be made (read-only) has none; its events have no times."""
        if self._times_kept is None:
            with translate_errors("read", self.url, reading=True):
                self._times_kept = self.backend.tables_present(EVENT_TIMES_TABLE)
        return self._times_kept

    def event_times(self, run_id: str, *, after: int = 0,
                    upto: int | None = None) -> dict[int, datetime]:
        """Position -> the time (UTC) of each of the run's events after ``after`` (up to ``upto``)
        that has one: recorded when it was appended, or the time its trace gave it when imported.
        An event missing from it has none (recorded before times were kept, by an older release,
        or imported from a format without times)."""
        if not self.keeps_times():
            return {}
        with translate_errors(f"read the times of {run_id!r}", self.url, reading=True):
            return times_of_run(self.backend, run_id, after=after, upto=upto)

    def run_spans(self, run_ids: Sequence[str]) -> dict[str, tuple[datetime, datetime]]:
        """Run id -> (earliest, latest) time of its events, for those of ``run_ids`` that have any."""
        if not self.keeps_times() or not run_ids:
            return {}
        with translate_errors("read the runs' times", self.url, reading=True):
            return run_spans(self.backend, run_ids)
