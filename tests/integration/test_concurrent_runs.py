"""Appends to different runs of one PostgreSQL store proceed at once; appends to one run still
conflict; the cross-run feed (``read_all``) still misses nothing.

Why: every insert took eventsourcing's ``LOCK TABLE ... IN EXCLUSIVE MODE`` (and NOTIFY's
database-wide lock) until its COMMIT, so one agent's append waited for every other agent's
(``scripts/bench_concurrent.py``: at 16 agents 88% of the backends' time was spent queued for
it). An insert now holds a shared advisory lock (``contextfold.store.pg_recorder``). These
tests hold one insert open, after its INSERT and before its COMMIT, and show what others do
meanwhile; nothing in them is timed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import psycopg
import pytest

from contextfold import ConcurrencyConflictError, UserInput
from contextfold.domain.events import canonical_json
from contextfold.domain.log import GENESIS_HASH, chain_hash
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.event_store import EventStore
from contextfold.store.store_url import parse_store_url
from tests.conftest import PG_URL
from tests.storage import pg_role

pytestmark = pytest.mark.postgres


def with_options(url: str, options: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{options}"


class HeldInsert:
    """``store``'s next append, stopped after its INSERT and before its COMMIT (in a thread) until
    :meth:`commit`: a worker's transaction in flight, held open for as long as a test needs."""

    def __init__(self, store: EventStore, run_id: str, text: str) -> None:
        self.inserted, self._release = threading.Event(), threading.Event()
        self.outcome: list[object] = []
        recorder = store.backend.recorder
        recorder.pipeline_max_bytes = 0  # statement by statement: a point between INSERT and COMMIT
        original = recorder._fetch_ids_after_insert_events

        def stopped(*args: Any, **kwargs: Any) -> Any:
            ids = original(*args, **kwargs)
            if not self.inserted.is_set():
                self.inserted.set()
                self._release.wait(60)
            return ids

        recorder._fetch_ids_after_insert_events = stopped

        def append() -> None:
            try:
                store.append(run_id, [UserInput(text)])
                self.outcome.append("ok")
            except Exception as exc:  # what it met, for the assertion
                self.outcome.append(exc)

        self._thread = threading.Thread(target=append)
        self._thread.start()
        assert self.inserted.wait(30), "the held append never reached its INSERT"

    def commit(self) -> None:
        self._release.set()
        self._thread.join(30)
        assert not self._thread.is_alive()
        assert self.outcome == ["ok"], self.outcome


@contextlib.contextmanager
def held_insert(store: EventStore, run_id: str, text: str) -> Iterator[HeldInsert]:
    held = HeldInsert(store, run_id, text)
    try:
        yield held
    finally:
        held._release.set()
        held._thread.join(30)


def in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    """``call()`` started in a thread; the list gets what it returned or raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # what it met, for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_until_waiting(store: EventStore, what: str) -> None:
    """Until a session working on the store's schema waits on a lock of kind ``what`` (pg_locks'
    ``locktype``): the thread started has reached the wait, whatever the machine's load. (Not
    any session of the server: another test's wait, beside this one, would end this one early.)"""
    schema = parse_store_url(store.url).schema
    with psycopg.connect(PG_URL.split("?")[0], autocommit=True) as pg:
        deadline = time.monotonic() + 60
        while not pg.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND l.locktype = %s AND strpos(a.query, %s) > 0", (what, schema)
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, f"nothing waits on a {what} lock after 60 s"
            time.sleep(0.02)


def test_an_append_to_another_run_completes_while_one_runs_transaction_is_open(pg_url: str) -> None:
    """The other run's append went through while the first was held: it waited for the table
    lock, to its lock timeout (StoreBusyError), before."""
    with EventStore(pg_url) as writer, EventStore(with_options(pg_url, "lock_timeout=3")) as other:
        writer.append("agent-1", [UserInput("before")])
        other.append("agent-2", [UserInput("before")])
        with held_insert(writer, "agent-1", "held") as held:
            recorded = other.append("agent-2", [UserInput("meanwhile")])
            other.append("agent-3", [UserInput("a new run meanwhile")])
            held.commit()
        assert [r.position for r in recorded] == [2]
        assert [r.event.text for r in writer.read("agent-1")] == ["before", "held"]  # type: ignore[union-attr]
        assert [r.event.text for r in writer.read("agent-2")] == ["before", "meanwhile"]  # type: ignore[union-attr]
        assert all(writer.verify(run).ok for run in ("agent-1", "agent-2", "agent-3"))


def test_two_appends_at_one_runs_position_still_conflict_and_nothing_is_lost(pg_url: str) -> None:
    """A second worker's append to the SAME run, staged at the position the held one is
    inserting, waits for it and then loses: ConcurrencyConflictError with ``expected_version``,
    a retry at the new end without."""
    with EventStore(pg_url) as writer, EventStore(pg_url) as second, EventStore(pg_url) as third:
        writer.append("shared", [UserInput("1")])
        assert second.read("shared") and third.read("shared")  # both see version 1
        with held_insert(writer, "shared", "2 from the first") as held:
            stale, stale_outcome = in_thread(
                lambda: second.append("shared", [UserInput("2 from the second")], expected_version=1)
            )
            wait_until_waiting(writer, "transactionid")  # on the held row's primary key
            at_end, at_end_outcome = in_thread(lambda: third.append("shared", [UserInput("at the end")]))
            held.commit()
            stale.join(30)
            at_end.join(30)
        assert len(stale_outcome) == 1 and isinstance(stale_outcome[0], ConcurrencyConflictError), (
            stale_outcome
        )
        assert [r.position for r in at_end_outcome[0]] == [3], at_end_outcome
        events = writer.read("shared")
        assert [(e.position, e.event.text) for e in events] == [  # type: ignore[union-attr]
            (1, "1"),
            (2, "2 from the first"),
            (3, "at the end"),
        ]
        assert writer.verify("shared").ok


def test_the_feed_across_runs_never_passes_over_an_insert_in_flight(pg_url: str) -> None:
    """Inserts no longer commit in notification-id order: the held insert's id is below the
    other run's, committed first. ``read_all`` waits for the held one, so a reader that goes on
    after the last id it was given misses nothing."""
    with EventStore(pg_url) as writer, EventStore(pg_url) as other, EventStore(pg_url) as reader:
        writer.append("first", [UserInput("0")])
        with held_insert(writer, "first", "held") as held:
            other.append("second", [UserInput("committed first")])
            feed, outcome = in_thread(reader.read_all)
            wait_until_waiting(writer, "advisory")
            held.commit()
            feed.join(30)
        ids = [n for n, _ in outcome[0]]
        assert [(r.run_id, r.event.text) for _, r in outcome[0]] == [
            ("first", "0"),
            ("first", "held"),
            ("second", "committed first"),
        ]
        assert ids == sorted(ids)
        assert reader.read_all(after=ids[-1]) == []


def test_a_writer_of_the_previous_version_and_this_one_share_a_store(pg_url: str) -> None:
    """The previous version's writer (eventsourcing's recorder as it was: the table lock and
    NOTIFY in its insert) held open: this version's append to another run waits for its table
    lock and then goes through, and the feed returns both in id order. A store made and written
    the previous way opens and appends as any other (the tables are unchanged)."""
    from eventsourcing.postgres import PostgresApplicationRecorder

    with EventStore(pg_url) as store:
        store.append("new-version", [UserInput("0")])
        table = store.backend.table(EVENTS_TABLE)
        body = canonical_json(UserInput("from the old writer"))
        row = (
            "old-version",
            1,
            "user_input@1",
            chain_hash("old-version", 1, GENESIS_HASH, body).encode() + body,
        )
        with psycopg.connect(PG_URL.split("?")[0]) as old:  # its transaction, as the old recorder ran it
            for statement in PostgresApplicationRecorder(
                cast(Any, store.backend.datastore), events_table_name=EVENTS_TABLE
            ).lock_table_statements:
                old.execute(statement)
            old.execute(f"NOTIFY {EVENTS_TABLE}")
            old.execute(
                f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
                "VALUES (%s, %s, %s, %s)",
                row,
            )
            append, appended = in_thread(lambda: store.append("new-version", [UserInput("1")]))
            wait_until_waiting(store, "relation")
            feed, fed = in_thread(store.read_all)
            old.commit()
            append.join(30)
            feed.join(30)
        assert [r.position for r in appended[0]] == [2], appended
        assert [(r.run_id, r.position) for _, r in fed[0]] == [
            ("new-version", 1),
            ("old-version", 1),
            ("new-version", 2),
        ]
        store.append("old-version", [UserInput("from this version")])
        assert store.verify("old-version").ok


def test_a_reader_with_select_only_reads_the_feed(pg_url: str) -> None:
    """The feed's wait is an advisory lock, which needs no privilege: a role that may only
    SELECT (an auditor's) reads it, where a table lock strong enough to wait for inserts
    (SHARE) needs UPDATE, DELETE or TRUNCATE on the table."""
    with EventStore(pg_url) as store:
        store.append("r", [UserInput("x")])
        with pg_role(
            pg_url,
            "GRANT USAGE ON SCHEMA {s} TO {r}",
            "GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r}",
            "ALTER ROLE {r} SET default_transaction_read_only = on",
        ) as role, EventStore(role.url, create_schema=False) as auditor:
            assert [(r.run_id, r.position) for _, r in auditor.read_all()] == [("r", 1)]
