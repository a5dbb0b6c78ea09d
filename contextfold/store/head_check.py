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

Cheap on purpose: one primary-key read per run of the batch and a SHA-256 of one row, where the
insert writes every row of the batch and syncs. The head's digest is of the stored bytes (an
envelope or a compressed frame as stored), so the check needs no key and decompresses nothing.
SHA-256, not the chain's blake3, because PostgreSQL computes it (``sha256()``): there the check
is a condition of the INSERT itself, sent with it (:mod:`.pg_recorder`), not a read the client
waits for first; SQLite reads the row in the insert's transaction (:func:`check_heads`). The
digest is never stored: a store written before reads the same.
A read that continues a fold checks the row it continues from the same way
(:class:`FoldedTails`).
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.store.event_times import EVENT_TIMES_TABLE, TimeRow, insert_sql

__all__ = ["ExpectedHead", "FoldedTails", "StaleHeadError", "check_heads", "sqlite_recorder_class",
           "tail_digest"]


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
    """The digest a head keeps of its last row's stored bytes (SHA-256: the module says why)."""
    return hashlib.sha256(state).digest()


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
    """eventsourcing's SQLite application recorder, checking the heads of an insert's runs and
    writing its events' times (``times``: :mod:`.event_times`) in the insert's transaction."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    class Recorder(SQLiteApplicationRecorder):
        file_check: Callable[[], None] | None = None
        """Raises when the store file is no longer at its path (:class:`.sqlite_path.OpenedFile`)."""

        def _insert_events(self, c: Any, stored_events: Sequence[Any], *,
                           heads: Sequence[ExpectedHead] = (), times: Sequence[TimeRow] = (),
                           **kwargs: Any) -> Sequence[int] | None:
            """Insert, then check the heads: after the insert the transaction holds the write
            lock and reads the latest log. A read first would begin the transaction on a snapshot
            that the insert cannot upgrade once another writer committed ("database is locked"
            at once, without waiting out the busy timeout)."""
            ids: Sequence[int] | None = super()._insert_events(c, stored_events, **kwargs)
            if self.file_check is not None:
                self.file_check()
            check_heads(c, f"SELECT state FROM {self.events_table_name} "
                           "WHERE originator_id = ? AND originator_version = ?", heads)
            if times:  # the events' times, in their transaction (:mod:`.event_times`)
                c.executemany(insert_sql(EVENT_TIMES_TABLE, "?"), times)
            return ids

    return Recorder


class FoldedTails:
    """The digest of the stored row a read of a run ended at, by (run id, position): what lets
    the next read that continues that fold (``iter_events(after=V, after_hash=H)``) check the row
    at V by its stored bytes alone.

    Why: that check decoded the row to compare its chain hash, and the row folded last is usually
    the previous build's record, ~1 MB of JSON stored as a delta of the run's keyframe: every
    catch-up of a ``Run`` handle inflated it (and, encrypted, opened it), 0.3-0.7 ms of a catch-up
    otherwise ~0.04 ms. The same bytes are the same event: the chain hash the read decoded from
    them is in them (literally, as the first bytes of the state, never a match into a keyframe),
    so a row whose digest is the one remembered still holds H. A row whose bytes differ is
    decoded and compared as before (rewritten under a new key, or by hand, it may still hold H).
    Nothing is stored: old rows are checked the same way. Thread-safe, bounded (least recent out)."""

    def __init__(self, size: int) -> None:
        self._tails: OrderedDict[tuple[str, int], tuple[str, bytes]] = OrderedDict()
        self._size = size
        self._lock = fork_safe_lock(self._forget_all)

    def put(self, run_id: str, position: int, chain_hash: str, state: bytes) -> None:
        """Remember the row at ``position`` (its stored bytes ``state``) as decoded to ``chain_hash``."""
        entry = (chain_hash, tail_digest(state))
        with self._lock:
            self._tails.pop((run_id, position), None)
            self._tails[(run_id, position)] = entry
            while len(self._tails) > self._size:
                self._tails.popitem(last=False)

    def _forget_all(self) -> None:
        """Remember nothing: in a forked child whose parent's thread held the lock, the table may
        be half updated (:mod:`~contextfold.domain.fork_locks`); a row not remembered is decoded."""
        self._tails.clear()

    def holds(self, run_id: str, position: int, chain_hash: str, state: bytes) -> bool:
        """Whether ``state``, the row at ``position``, is the one remembered as ``chain_hash``
        (False: not known, or not the same bytes; decode it to tell)."""
        with self._lock:
            entry = self._tails.get((run_id, position))
        return entry is not None and entry[0] == chain_hash and entry[1] == tail_digest(state)
