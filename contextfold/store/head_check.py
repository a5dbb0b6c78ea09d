"""An append's check, inside its insert's transaction, that the run still ends where it was staged.

Why: an append is staged on the run's head as this store object last saw it (its version and
last chain hash, cached between appends), and the database refuses only a position that is
taken. A log that moved back under a long-lived worker (an operator restored an earlier backup,
online, through SQLite's backup API or a PostgreSQL restore) left that head ahead of the log: the
worker's next append was written past a gap (positions 1, 2, 5), a run no fold could read again.
So each insert also reads the row at the head's version, in the same transaction, and compares
its stored bytes with those the head was made from (:attr:`~.run_heads.RunHead.tail`, a digest);
a missing or different row rolls the insert back with :class:`StaleHeadError`, and the append
reads the run again and goes on at its real end (:meth:`.event_store.EventStore.append`).

Cheap on purpose: one primary-key read per run of the batch and a blake3 of one row, where the
insert writes every row of the batch and syncs. The head's digest is of the stored bytes (an
envelope or a compressed frame as stored), so the check needs no key and decompresses nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import blake3

__all__ = ["ExpectedHead", "StaleHeadError", "check_heads", "sqlite_recorder_class", "tail_digest"]


class ExpectedHead(NamedTuple):
    """The row a run's append was staged after: its position and the digest of its stored bytes."""

    run_id: str
    version: int
    tail: bytes


class StaleHeadError(Exception):
    """The log does not end where the append was staged: its insert was rolled back. Caught by the
    append, which reads the run again. Also raised by a read that continues a caller's fold
    (``iter_events(after_hash=...)``): caught by :meth:`contextfold.api.Run.state`, which folds
    the run again from its start."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} does not end where this store last saw it")
        self.run_id = run_id


def tail_digest(state: bytes) -> bytes:
    """The digest a head keeps of its last row's stored bytes."""
    return blake3.blake3(bytes(state)).digest()


def check_heads(cursor: Any, statement: Any, heads: Sequence[ExpectedHead]) -> None:
    """Raise :class:`StaleHeadError` unless each run's row at ``head.version`` is the head's
    ``tail``. ``statement`` selects ``state`` by (run id, position) with the driver's
    placeholders; ``cursor`` is the insert's (same transaction)."""
    for head in heads:
        cursor.execute(statement, (head.run_id, head.version))
        row = cursor.fetchone()
        if row is None or tail_digest(row["state"]) != head.tail:
            raise StaleHeadError(head.run_id)


@functools.cache
def sqlite_recorder_class() -> type[Any]:
    """eventsourcing's SQLite application recorder, checking the heads of an insert's runs."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    class Recorder(SQLiteApplicationRecorder):
        def _insert_events(self, c: Any, stored_events: Sequence[Any], *,
                           heads: Sequence[ExpectedHead] = (), **kwargs: Any) -> Sequence[int] | None:
            """Insert, then check the heads: after the insert the transaction holds the write
            lock and reads the latest log. A read first would begin the transaction on a snapshot
            that the insert cannot upgrade once another writer committed ("database is locked"
            at once, without waiting out the busy timeout)."""
            ids: Sequence[int] | None = super()._insert_events(c, stored_events, **kwargs)
            check_heads(c, f"SELECT state FROM {self.events_table_name} "
                           "WHERE originator_id = ? AND originator_version = ?", heads)
            return ids

    return Recorder
