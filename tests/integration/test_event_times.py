"""Each event's time, kept beside it by every store (SQLite and PostgreSQL alike): part of the
store contract (``test_store_contract``), in a file of its own.

A time is recorded by the append (the store's clock, injected here), or given by an import (its
trace's); it is kept out of the events table and the hash chain, so what a release before this
one reads and verifies is byte for byte what it wrote itself."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contextfold.domain.errors import ConcurrencyConflictError, InvalidInputError
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.event_store import EventStore
from contextfold.store.event_times import EVENT_TIMES_TABLE
from tests.storage import read_only

T0 = datetime(2026, 3, 29, 0, 59, 59, 999_999, tzinfo=UTC)  # a DST change in Europe: UTC has none


def ticking(start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> Callable[[], datetime]:
    """A clock that moves ``step`` on each reading."""
    counter = itertools.count()
    return lambda: start + next(counter) * step


def events() -> list:  # type: ignore[type-arg]
    return [RunStarted(model="gpt-4o"), UserInput("fix it"),
            ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),)),
            ToolResult(call_id="c1", content="ok")]


def rows(store: EventStore, run_id: str) -> list[tuple[object, ...]]:
    p = store.backend.placeholder
    return [(int(v), str(t), bytes(s)) for v, t, s in store.backend.query(
        f"SELECT originator_version, topic, state FROM {store.backend.table(EVENTS_TABLE)} "
        f"WHERE originator_id = {p} ORDER BY originator_version", (run_id,))]


@pytest.fixture
def timed(store_url: str) -> Iterator[EventStore]:
    with EventStore(store_url, clock=ticking()) as store:
        yield store


def test_each_append_records_its_time_once_for_its_batch(timed: EventStore) -> None:
    first = timed.append("r", events()[:2])
    timed.append("r", events()[2:])
    assert [r.position for r in first] == [1, 2]
    later = T0 + timedelta(seconds=1)
    assert timed.event_times("r") == {1: T0, 2: T0, 3: later, 4: later}
    assert timed.event_times("r", after=1, upto=3) == {2: T0, 3: T0 + timedelta(seconds=1)}
    assert timed.event_times("no-such-run") == {}
    assert all(t.tzinfo is UTC for t in timed.event_times("r").values())


def test_the_time_is_in_neither_the_events_table_nor_the_chain(store_url: str, tmp_path: Path) -> None:
    """Two stores record the same events an hour apart: the same stored rows, the same chain (a
    release before this one reads and verifies them as it wrote them)."""
    with EventStore(store_url, clock=ticking()) as a, \
            EventStore(f"sqlite:///{tmp_path / 'other.db'}", clock=ticking(T0 + timedelta(hours=1))) as b:
        for store in (a, b):
            store.append("r", events())
        assert [r.hash for r in a.read("r")] == [r.hash for r in b.read("r")]
        assert rows(a, "r") == rows(b, "r")
        assert a.event_times("r") != b.event_times("r")
        assert a.verify("r").ok and a.verify("r").head == b.verify("r").head


def test_an_import_keeps_its_sources_times_and_invents_none(timed: EventStore) -> None:
    at = [None, T0 - timedelta(days=400), T0 - timedelta(days=401), None]  # unsorted, as a trace may be
    timed.append_new_runs([("imported", events()), ("live", events())], times={"imported": at})
    assert timed.event_times("imported") == {2: at[1], 3: at[2]}
    assert set(timed.event_times("live").values()) == {T0}  # no source times: the append's
    assert timed.run_spans(["imported", "live", "none"]) == {"imported": (at[2], at[1]), "live": (T0, T0)}
    with pytest.raises(InvalidInputError, match="3 times for 4 events"):
        timed.append_new_runs([("short", events())], times={"short": at[:3]})
    assert timed.version("short") == 0


def test_an_append_that_is_refused_leaves_no_time(timed: EventStore) -> None:
    timed.append("r", events()[:2])
    with pytest.raises(ConcurrencyConflictError):
        timed.append("r", [UserInput("late")], expected_version=1)
    assert set(timed.event_times("r")) == {1, 2}
    timed.append("r", [UserInput("now")], expected_version=2)
    assert timed.event_times("r")[3] > T0


def test_a_store_made_before_times_opens_reads_and_writes(store_url: str) -> None:
    """An older release's store (no times table) gets the table when opened to write; its events
    have no time, the ones appended after do. Opened without creating anything, it reads and
    appends as before, recording no time."""
    with EventStore(store_url, clock=ticking()) as store:
        store.append("old", events())
        store.backend.execute(f"DROP TABLE {store.backend.table(EVENT_TIMES_TABLE)}")
    with EventStore(store_url, create_schema=False, clock=ticking()) as store:
        assert not store.keeps_times() and store.event_times("old") == {} and store.run_spans(["old"]) == {}
        store.append("old", [UserInput("more")])
        assert store.version("old") == 5 and store.event_times("old") == {}
    with EventStore(store_url, clock=ticking()) as store:
        assert store.keeps_times() and store.event_times("old") == {}
        store.append("old", [UserInput("and more")])
        assert store.event_times("old") == {6: T0}
        assert [r.position for r in store.read("old")] == [1, 2, 3, 4, 5, 6] and store.verify("old").ok


def test_a_read_only_store_made_before_times_reads_without_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with EventStore(f"sqlite:///{path}") as store:
        store.append("old", events())
        store.backend.execute(f"DROP TABLE {EVENT_TIMES_TABLE}")
    with read_only(path), EventStore(f"sqlite:///{path}") as store:
        assert [r.position for r in store.read("old")] == [1, 2, 3, 4]
        assert store.event_times("old") == {} and not store.keeps_times()


def test_a_position_written_again_after_the_log_moved_back_keeps_the_new_time(timed: EventStore) -> None:
    """A restored backup of the events alone (the times table not restored with it): the position
    written again takes the new event's time, not the lost one's."""
    timed.append("r", events())
    p = timed.backend.placeholder
    timed.backend.execute(f"DELETE FROM {timed.backend.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                          f"AND originator_version = {p}", ("r", 4))
    timed.append("r", [ToolResult(call_id="c1", content="again")])
    assert timed.event_times("r")[4] == T0 + timedelta(seconds=1)


def test_an_append_after_a_stale_head_records_times_only_for_what_it_wrote(timed: EventStore) -> None:
    """The log moved back under this store's cached head (a restored backup without its last
    event): the append's first insert finds its head gone and writes nothing, the second lands at
    the log's real end. No time is left at a position no event holds (on PostgreSQL the times
    are written by the INSERT's own statement, whose COMMIT is sent whatever it wrote)."""
    timed.append("r", events()[:2])
    p = timed.backend.placeholder
    timed.backend.execute(f"DELETE FROM {timed.backend.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                          f"AND originator_version = {p}", ("r", 2))
    timed.backend.execute(f"DELETE FROM {timed.backend.table(EVENT_TIMES_TABLE)} WHERE originator_id = {p} "
                          f"AND originator_version = {p}", ("r", 2))
    recorded = timed.append("r", [UserInput("after the restore")])
    assert [r.position for r in recorded] == [2]
    assert set(timed.event_times("r")) == {1, 2}
    assert timed.event_times("r")[2] > T0
