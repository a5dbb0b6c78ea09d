"""Reads of a run's log that need its context_built records for less than their manifests: one
turn's records, the records' settings, one record's few keys, and the log as a fold reads it.

Why: a record's manifest lists every fragment its build left out, so on a long run it is most of
the record and grows with the run. Checking one turn read every record whole: ``Run.records(N)``
decoded each record after turn N's previous model response (for an early turn, every record of
the run) to keep turn N's, and a recorded turn's rebuild read the log up to its build with every
earlier record's manifest, though the fold notes a record's turn and position only. On an 800-turn
loop ``replay``, ``audit --turn``, ``why`` and ``diff`` of one turn each peaked at 0.9-1.6 GB and
``records`` of its first built turn took 3.4-4.7 s. The same held for ``Run.state(turn=N)`` and
the rebuild of a turn without a record (the nearest record's ``config``, the first record's
``encoding``, each observed turn's ``selected_tokens`` for the calibration): 27-59 s and 2.1 GB.
Here each record is read without its manifest, or with the few keys of it a caller reads
(:mod:`contextfold.domain.record_head`), and decoded whole only when it is one the caller asked
for; rows are inflated one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from contextfold.domain.events import ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.domain.record_head import RECORD_TYPE
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.chain_check import ChainCheck
from contextfold.store.event_reads import _MAX_POSITION, check_run_id

__all__ = ["RecordReads", "TurnRead"]

_PAGE_ROWS = 200
"""Record rows read per query by :meth:`RecordReads._record_rows` (a keyframe is ~100s of KB)."""


@dataclass(frozen=True)
class TurnRead:
    """What one read of a run's records after position ``after`` (a turn's previous model response)
    found for the turn (:meth:`RecordReads.turn_read`).

    ``records``: the turn's records there, decoded whole. ``later``: every record there, the turn's
    too, in log order, each with its manifest cut to the keys asked for: with
    :meth:`RecordReads.record_heads` up to ``after``, every record of the run, as a rebuild of a turn
    without a record reads them (the nearest one's ``config``), these ones not read again."""

    records: tuple[RecordedEvent, ...]
    after: int
    later: tuple[RecordedEvent, ...]


class RecordReads(ChainCheck):
    """The record reads of an :class:`~contextfold.store.event_store.EventStore`."""

    def _record_rows(self, run_id: str, after: int, upto: int = _MAX_POSITION
                     ) -> Iterator[tuple[int, str, bytes]]:
        """(position, topic, plain state) of the run's context_built rows after ``after`` (up to
        ``upto``), in order, a page at a time, each inflated as it is reached;
        :class:`RunNotFoundError` first for a run with no events."""
        topics = [t for t, _ in self._topics(run_id, RECORD_TYPE)]
        p = self.backend.placeholder
        sql = (f"SELECT originator_version, topic, state FROM {self.backend.table(EVENTS_TABLE)} "
               f"WHERE originator_id = {p} AND topic IN ({', '.join([p] * len(topics))}) "
               f"AND originator_version > {p} AND originator_version <= {p} "
               f"ORDER BY originator_version LIMIT {_PAGE_ROWS}")
        cursor, upto = after, min(upto, _MAX_POSITION)
        while topics and cursor < upto:  # (none after the last position a run holds)
            rows = self.backend.query(sql, (run_id, *topics, cursor, upto))
            for v, topic, stored in rows:
                position = int(v)
                yield position, str(topic), self._plain(run_id, position, str(topic), bytes(stored))
            if len(rows) < _PAGE_ROWS:
                break
            cursor = int(rows[-1][0])

    def turn_records(self, run_id: str, turn: int, *, after: int = 0,
                     keep: Iterable[str] | None = None) -> list[RecordedEvent]:
        """The run's context_built records of ``turn`` after position ``after``, in order, as
        :meth:`read_type` reads them; the run's other records are read for their turn only.
        ``keep``: the turn's records too are read with their manifests cut to these keys (what a
        reader of a few keys of them reads: ``Run.observe_usage``, their ``window_tokens``,
        ``selected_tokens`` and ``provider``).

        Every record after ``after`` is looked at: a past turn's rebuild is recorded at the end
        of the log, after other turns' records (``rebuild_api._record_once``)."""
        return self._turn_scan(run_id, turn, after, frozenset(keep or ()), whole=keep is None)

    def turn_read(self, run_id: str, turn: int, *, after: int = 0, keep: Iterable[str] = ()) -> TurnRead:
        """:meth:`turn_records` (decoded whole), and every record after ``after`` with the manifest
        keys ``keep`` (:class:`TurnRead`), each record row read once.

        Why: the rebuild of a turn without a record (``build --turn N``, ``audit --turn N``) read
        the records after the turn's previous response for the turn's, then every record of the
        run again for the nearest one's ``config``: the later records, most of the run for an
        early turn, were read and inflated twice. They are read here once, with those keys; the
        ones up to ``after`` by who needs them (:meth:`record_heads` with ``upto``)."""
        later: list[RecordedEvent] = []
        found = self._turn_scan(run_id, turn, after, frozenset(keep), whole=True, heads=later)
        return TurnRead(tuple(found), after, tuple(later))

    def _turn_scan(self, run_id: str, turn: int, after: int, keep: frozenset[str], *, whole: bool,
                   heads: list[RecordedEvent] | None = None) -> list[RecordedEvent]:
        """The records of ``turn`` after ``after``, in order: decoded whole (``whole``), or with
        the manifest keys ``keep``. Every record there is read with the keys ``keep`` for its
        turn, and added to ``heads`` so (when given: those of the turn too)."""
        found: list[RecordedEvent] = []
        for position, topic, plain in self._record_rows(run_id, after):
            head = self._parse(run_id, position, topic, plain, slim=True, keep=keep)
            if heads is not None:
                heads.append(head)
            if isinstance(head.event, ContextBuilt) and head.event.turn == turn:
                found.append(self._parse(run_id, position, topic, plain) if whole else head)
        return found

    def record_heads(self, run_id: str, keep: Iterable[str] = (), *,
                     upto: int = _MAX_POSITION) -> Iterator[RecordedEvent]:
        """The run's context_built records (up to position ``upto``) in order, each with its
        manifest cut to the keys in ``keep`` (the rest not decoded): what a reader of every
        record's turn and ``config`` reads (the nearest record's settings,
        ``audit.data.config_for_turn``). Read as it is consumed; the run's other events are
        neither read nor decoded."""
        kept = frozenset(keep)
        for position, topic, plain in self._record_rows(run_id, 0, upto):
            yield self._parse(run_id, position, topic, plain, slim=True, keep=kept)

    def record_keys(self, run_id: str, position: int, keep: Iterable[str]) -> RecordedEvent | None:
        """The event at ``position`` (None when the run has none there), a context_built record with
        its manifest cut to the keys in ``keep``: what a reader of a few of one record's keys reads
        (the first record's ``encoding``, a record's counts for the calibration)."""
        check_run_id(run_id)
        found = list(self._select(run_id, gt=position - 1, lte=position, slim=True, keep=frozenset(keep)))
        return found[0] if found else None

    def fold_events(self, run_id: str, *, upto: int | None = None,
                    keep: Iterable[str] = ()) -> Iterator[RecordedEvent]:
        """The run's events up to position ``upto``, in order, each context_built record with an
        empty manifest (not decoded): what a fold reads of a record is its turn and position
        (``projections.fold``), so a fold of a long run's log holds no manifest, nor reads one.
        Read as it is consumed, a page of rows at a time; positions, chain hashes and the other
        events are those :meth:`read` gives. ``keep``: the manifest keys each record keeps (a
        compaction's planner reads the newest live record's ``config``)."""
        check_run_id(run_id)
        return self._select(run_id, lte=upto, slim=True, keep=frozenset(keep))
