"""eventsourcing's PostgreSQL application recorder, as the store inserts with it.

Six changes: the runs' heads are checked by the INSERT itself
(:mod:`contextfold.store.head_check`), an append is sent in one round trip (BEGIN, lock, INSERT
and COMMIT pipelined: eventsourcing's insert and the head's read waited for the server six times,
counted through a proxy in ``tests/integration/test_append_round_trips.py``), a large batch is
inserted without psycopg's pipeline mode, a retried insert recognises its own batch when the
connection was lost after the COMMIT (see :func:`recorder_class`), only a lost connection is
retried (:func:`worth_retrying`), and inserts into different runs no longer wait for each other
(:data:`INSERTING`).

Why the last: eventsourcing takes ``LOCK TABLE ... IN EXCLUSIVE MODE`` and ``NOTIFY`` in every
insert, so that notification ids are issued in commit order (a reader tailing the notification
log by id never passes over a lower id committed later). Both are held to the COMMIT, its WAL
flush included (NOTIFY's lock is the database's), so every append of every run of every agent
went through one lock: measured with ``scripts/bench_concurrent.py`` (2 cores), 16 agents
spent 88% of their time queued for it (13 waiting on average), throughput fell from 178
appends/s at 8 agents to 121 at 16, and the median append took 125 ms. Nothing of contextfold
LISTENs, and one thing reads by notification id: :meth:`.event_reads.EventReads.read_all`, a
feed across runs. So an insert takes a SHARED advisory lock instead (inserts never wait for
each other; two appends at one run's position still conflict on its primary key), and
``read_all`` takes it EXCLUSIVELY for an instant (:meth:`committed_horizon`): once it holds it,
no insert is between issuing ids and committing, so ids up to the largest committed are final,
and it reads only those.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from eventsourcing import persistence as es

from contextfold.store.driver_errors import busy, causes, not_writable
from contextfold.store.event_times import EVENT_TIMES_TABLE, TimeRow
from contextfold.store.head_check import ExpectedHead, StaleHeadError, check_heads

__all__ = ["INSERTING", "INSERT_ATTEMPTS", "PIPELINE_MAX_BYTES", "recorder_class", "worth_retrying"]

_T = TypeVar("_T")


PIPELINE_MAX_BYTES = 1024 * 1024
"""Batches with more stored bytes than this are inserted without psycopg's pipeline mode."""
INSERT_ATTEMPTS = 10
"""Attempts of an insert or a read whose connection failed (eventsourcing's own count)."""
INSERTING = "contextfold.inserting:"
"""The advisory lock's name (followed by the schema-qualified events table): held SHARED by each
insert from before its notification ids are issued to its COMMIT, EXCLUSIVELY by a reader that
needs every id below its horizon final (:meth:`committed_horizon`). Per table: a tenant's or
another schema's inserts do not meet it."""


def worth_retrying(exc: BaseException) -> bool:
    """Whether an operation that raised ``exc`` (an eventsourcing Interface/OperationalError) may
    succeed on another connection: it lost its connection (a restart, a terminated backend).

    Not when the pool could not hand out a connection within the connect timeout (``PoolTimeout``:
    the server is down, and the pool was already trying to reach it all that time): eventsourcing
    retried that 10 times, so an append during an outage blocked for 10 connect timeouts (37 s
    measured, 52 s for a run's first append, which reads first) before it failed. Nor a refusal
    (a full disk, a read-only session): it fails the same way on any connection. Nor a lock
    waited for past ``lock_timeout`` (:func:`.driver_errors.busy`): ten times the wait, for a
    holder that may be stopped."""
    import psycopg_pool

    return not (any(isinstance(c, psycopg_pool.PoolTimeout) for c in causes(exc))
                or not_writable(exc, "", None) is not None or busy(exc, "") is not None)


def _retrying(call: Callable[[], _T]) -> _T:
    """``call()``, again (after 0.2 s) while it fails in a way :func:`worth_retrying`."""
    attempts = 0
    while True:
        try:
            return call()
        except (es.InterfaceError, es.OperationalError) as exc:
            attempts += 1
            if attempts >= INSERT_ATTEMPTS or not worth_retrying(exc):
                raise
            time.sleep(0.2 * random.uniform(0.9, 1.1))


@functools.cache
def recorder_class() -> type[Any]:
    """eventsourcing's PostgresApplicationRecorder, with large batches inserted without the pipeline.

    Why: psycopg's pipeline mode (which eventsourcing uses for every insert) hangs for good when
    one query's message is large: seen here with psycopg 3.3.9 and libpq 18, an insert of 8 MB
    of rows never returned, the server waiting on the client (``ClientRead``) and the client on
    the server; 6 MB went through (psycopg issue #685 describes the same hang). A run's batch of
    5,000 events of tool output is that large. Above :data:`PIPELINE_MAX_BYTES` the same
    statements (lock, insert) run in a plain transaction: a few more round trips on a batch
    whose transfer takes far longer anyway. Made once per process, on the first
    PostgreSQL store (eventsourcing's postgres module imports psycopg).
    """
    from eventsourcing.postgres import PostgresApplicationRecorder

    select_once = PostgresApplicationRecorder.select_events.__wrapped__
    notifications_once = PostgresApplicationRecorder.select_notifications.__wrapped__

    class Recorder(PostgresApplicationRecorder):
        pipeline_max_bytes = PIPELINE_MAX_BYTES
        """Batches with more stored bytes are inserted statement by statement (set lower on one
        recorder, a test holds a small append between its INSERT and its COMMIT)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            """eventsourcing's, with a shared advisory lock in place of its table lock (the
            module's docstring says why) and without its ``SET LOCAL lock_timeout``: the
            session's ``lock_timeout`` (``?lock_timeout=``, set on each connection by
            :mod:`.pg_pool`) applies to every lock as to every statement; eventsourcing's '0s'
            lifted it, and an append waited for a stalled writer's lock forever."""
            from psycopg.sql import SQL, Literal

            super().__init__(*args, **kwargs)
            self._insert_statements: dict[tuple[int, bool], Any] = {}
            self._inserting_key = SQL("hashtextextended({}, 0)").format(Literal(
                f'{INSERTING}"{self.datastore.schema}".{self.events_table_name}'))
            # taken where eventsourcing took the table lock: before the INSERT issues ids
            self.lock_table_statements = [
                SQL("SELECT pg_advisory_xact_lock_shared({})").format(self._inserting_key)]

        def _notify_channel(self, curs: Any) -> None:
            """Nothing: no one LISTENs, and NOTIFY serialises every committing transaction of
            the database behind one lock held through its COMMIT (PostgreSQL's async.c)."""

        def committed_horizon(self) -> int:
            """The largest notification id below which every id is final: committed, or never
            to be (0 for an empty store). Holds the inserts' lock exclusively for the read of
            the largest id: it waits for the inserts in flight (each holds the lock shared from
            before its ids are issued) and the inserts after it are issued larger ids. A writer of
            an older contextfold holds eventsourcing's table lock instead, under which no other
            insert issues ids: until it commits, its ids are above every committed one."""
            from psycopg.sql import SQL, Identifier

            def once() -> int:
                with self.datastore.transaction(commit=False) as curs:
                    curs.execute(SQL("SELECT pg_advisory_xact_lock({})").format(self._inserting_key))
                    curs.execute(SQL("SELECT MAX(notification_id) AS m FROM {}.{}").format(
                        Identifier(self.datastore.schema), Identifier(self.events_table_name)))
                    row = curs.fetchone()
                    return int(row["m"] or 0) if row is not None else 0

            return _retrying(once)

        def insert_events(self, stored_events: Sequence[es.StoredEvent], *,
                          heads: Sequence[ExpectedHead] = (), times: Sequence[TimeRow] = (),
                          **kwargs: Any) -> Any:
            """Insert in one transaction, retrying a lost connection, as eventsourcing does, but
            knowing that a lost connection may have lost only the COMMIT's acknowledgement: when
            the retry finds its positions taken, by rows equal to its own (run, position, topic,
            state: chain hash and body), the first attempt was committed. eventsourcing's retry
            raised IntegrityError there, and an append "at the end" took it for a lost race and
            wrote its batch a second time. ``heads``: the rows the batch was staged after, checked
            by the INSERT itself (:meth:`_insert_statement`): :class:`StaleHeadError` when one of
            them is not in the log as the head knew it, nothing written. ``times``: the events'
            times (:mod:`.event_times`), written by the same statement for the rows it wrote."""
            if not stored_events:
                return []
            large = sum(len(e.state) for e in stored_events) > self.pipeline_max_bytes
            attempts = 0
            while True:
                try:
                    if large:
                        return self._insert_statement_by_statement(stored_events, heads, times, **kwargs)
                    return self._insert_in_one_trip(stored_events, heads, times, **kwargs)
                except (es.InterfaceError, es.OperationalError) as exc:
                    attempts += 1
                    if attempts >= INSERT_ATTEMPTS or not worth_retrying(exc):
                        raise
                    time.sleep(0.2 * random.uniform(0.9, 1.1))
                except es.IntegrityError:
                    if attempts and self._already_stored(stored_events):
                        return None
                    raise

        def _insert_statement(self, stored_events: Sequence[es.StoredEvent], heads: Sequence[ExpectedHead],
                              times: Sequence[TimeRow]) -> tuple[Any, list[Any]]:
            """The INSERT of ``stored_events``, writing them only if each head's row is in the log
            with the stored bytes its digest was taken of (:func:`.head_check.tail_digest`:
            SHA-256, which the server computes, ``sha256()``, built in since PostgreSQL 11), and
            returning their notification ids: none when a head is stale.

            Why a condition of the INSERT: the check was a read of its own before it, whose
            answer the client waited for inside the transaction; so the whole append (BEGIN, the
            inserts' lock, the INSERT, COMMIT) goes to the server at once
            (:meth:`_insert_in_one_trip`). The rows go as four arrays, not as eventsourcing's
            array of a row type, which psycopg writes as text, each state escaped by a regular
            expression in Python. One statement per number of heads (prepared by the server).

            With ``times``, the events' times (:mod:`.event_times`) are upserted by the same
            statement (a data-modifying WITH), for the rows the INSERT wrote only: a stale head
            writes no event, so no time either (the COMMIT is sent whatever the INSERT did)."""
            from psycopg.sql import SQL, Identifier

            key = (len(heads), bool(times))
            statement = self._insert_statements.get(key)
            if statement is None:
                table = SQL("{}.{}").format(Identifier(self.datastore.schema),
                                            Identifier(self.events_table_name))
                statement = SQL("INSERT INTO {} (originator_id, originator_version, topic, state) "
                                "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::bytea[])"
                                ).format(table)
                if heads:
                    statement += SQL(" WHERE ") + SQL(" AND ").join(
                        [SQL("EXISTS (SELECT FROM {} WHERE originator_id = %s AND originator_version = %s "
                             "AND sha256(state) = %s)").format(table)] * len(heads))
                if times:
                    statement = SQL(
                        "WITH inserted AS ({} RETURNING notification_id, originator_id, originator_version), "
                        "timed AS (INSERT INTO {} (originator_id, originator_version, recorded_us) "
                        "SELECT t.r, t.v, t.us "
                        "FROM unnest(%b::text[], %b::bigint[], %b::bigint[]) AS t(r, v, us) "
                        "WHERE EXISTS (SELECT FROM inserted i WHERE i.originator_id = t.r "
                        "AND i.originator_version = t.v) ON CONFLICT (originator_id, originator_version) "
                        "DO UPDATE SET recorded_us = excluded.recorded_us) "
                        "SELECT notification_id FROM inserted ORDER BY notification_id").format(
                        statement, SQL("{}.{}").format(Identifier(self.datastore.schema),
                                                       Identifier(EVENT_TIMES_TABLE)))
                else:
                    statement += SQL(" RETURNING notification_id")
                self._insert_statements[key] = statement
            params: list[Any] = [[e.originator_id for e in stored_events],
                                 [e.originator_version for e in stored_events],
                                 [e.topic for e in stored_events], [e.state for e in stored_events]]
            for head in heads:
                params.extend((head.run_id, head.version, head.tail))
            if times:
                params.extend(([r for r, _, _ in times], [v for _, v, _ in times],
                               [us for _, _, us in times]))
            return statement, params

        def _insert_in_one_trip(self, stored_events: Sequence[es.StoredEvent],
                                heads: Sequence[ExpectedHead], times: Sequence[TimeRow],
                                **kwargs: Any) -> list[int]:
            """BEGIN, the inserts' lock, the INSERT and COMMIT sent at once, in psycopg's pipeline
            mode: one wait for the server. eventsourcing's insert, after the head's read, waited
            four times, the server each time waiting on the client inside the transaction with
            its locks held. An error (a position taken) aborts the rest of the pipeline, COMMIT
            included, and the transaction is rolled back: nothing written."""
            from psycopg.pq import TransactionStatus

            statement, params = self._insert_statement(stored_events, heads, times)
            with self.datastore.get_connection() as conn:
                try:
                    with conn.pipeline():  # its end sends them all, with one Sync, and waits once
                        curs, inserting = conn.cursor(), conn.cursor()  # open past the end: results
                        self._insert_events(curs, stored_events, heads=heads, **kwargs)  # (a hook)
                        curs.execute(b"BEGIN")
                        self._lock_table(curs)
                        inserting.execute(statement, params, prepare=True)
                        curs.execute(b"COMMIT")
                    ids = [row["notification_id"] for row in inserting.fetchall()]
                finally:
                    if conn.info.transaction_status in (TransactionStatus.INERROR, TransactionStatus.INTRANS):
                        conn.rollback()  # the aborted transaction ended here, not left to the pool
            return self._inserted(ids, stored_events, heads)

        def _insert_statement_by_statement(self, stored_events: Sequence[es.StoredEvent],
                                           heads: Sequence[ExpectedHead], times: Sequence[TimeRow],
                                           **kwargs: Any) -> list[int]:
            """The same statements in a plain transaction, each waited for: a large batch (the
            pipeline's hang, :func:`recorder_class`)."""
            statement, params = self._insert_statement(stored_events, heads, times)
            with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
                self._insert_events(curs, stored_events, heads=heads, **kwargs)
                self._lock_table(curs)
                curs.execute(statement, params)
                ids = self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
                return self._inserted(ids, stored_events, heads, curs)

        def _fetch_ids_after_insert_events(self, curs: Any, stored_events: Sequence[es.StoredEvent],
                                           **kwargs: Any) -> list[int]:
            """The ids the INSERT returned. eventsourcing's asserts the statement was an INSERT;
            with the events' times it is a WITH whose status is ``SELECT n``
            (:meth:`_insert_statement`)."""
            return [row["notification_id"] for row in curs.fetchall()]

        def _inserted(self, ids: Sequence[int] | None, stored_events: Sequence[es.StoredEvent],
                      heads: Sequence[ExpectedHead], curs: Any = None) -> list[int]:
            """``ids``, one per event; or, when the INSERT wrote none (a head stale), the
            :class:`StaleHeadError` naming the first stale head's run (a read of the heads, in
            ``curs``'s transaction when given)."""
            if ids is not None and len(ids) == len(stored_events):
                return list(ids)
            from psycopg.sql import SQL, Identifier

            read = SQL("SELECT state FROM {}.{} WHERE originator_id = %s AND originator_version = %s").format(
                Identifier(self.datastore.schema), Identifier(self.events_table_name))
            if curs is not None:
                check_heads(curs, read, heads)
            else:
                with self.datastore.transaction(commit=False) as reading:
                    check_heads(reading, read, heads)
            raise StaleHeadError(heads[0].run_id if heads else str(stored_events[0].originator_id))

        def select_events(self, *args: Any, **kwargs: Any) -> Any:
            return _retrying(lambda: select_once(self, *args, **kwargs))

        def select_notifications(self, *args: Any, **kwargs: Any) -> Any:
            return _retrying(lambda: notifications_once(self, *args, **kwargs))

        def _already_stored(self, stored_events: Sequence[es.StoredEvent]) -> bool:
            """Whether the log holds exactly ``stored_events`` at their positions."""
            by_run: dict[Any, list[es.StoredEvent]] = {}
            for e in stored_events:
                by_run.setdefault(e.originator_id, []).append(e)
            for run_id, mine in by_run.items():
                lo, hi = min(e.originator_version for e in mine), max(e.originator_version for e in mine)
                rows = self.select_events(run_id, gt=lo - 1, lte=hi)
                if ([(r.originator_version, r.topic, bytes(r.state)) for r in rows]
                        != [(e.originator_version, e.topic, bytes(e.state)) for e in mine]):
                    return False
            return True

    return Recorder
