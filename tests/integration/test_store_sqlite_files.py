"""What a SQLite store URL opens: the file it named when the store was opened, for every pooled
connection; one shared database for ``:memory:``; nothing made of a path that holds no store
when the store must exist."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest

from contextfold.domain.errors import StoreConfigError
from contextfold.domain.events import RunStarted, UserInput
from contextfold.store.backends import EVENTS_TABLE, SQLiteBackend
from contextfold.store.event_store import EventStore
from tests.threads import errors_in_threads


def _new_connection_appends(store: EventStore, run_id: str) -> None:
    """Append while the pool's idle connections are held, so that the append's is made now."""
    assert isinstance(store.backend, SQLiteBackend)
    with ExitStack() as held:
        for _ in range(3):
            held.enter_context(store.backend.datastore.transaction(commit=False))
        store.append(run_id, [UserInput("after the chdir")])


def _tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]
    finally:
        conn.close()


def test_a_relative_store_path_names_the_same_file_after_the_process_changes_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent runtime cd-ing into its workspace: each connection the pool made later opened
    ``runs.db`` in the new directory (``no such table``, or another project's store of that name
    took the writes)."""
    (tmp_path / "workspace").mkdir()
    monkeypatch.chdir(tmp_path / "workspace")
    EventStore("sqlite:///runs.db").close()  # the workspace's own store of the same name
    monkeypatch.chdir(tmp_path)
    store = EventStore("sqlite:///runs.db")
    try:
        store.append("r", [RunStarted(), UserInput("go")])
        monkeypatch.chdir(tmp_path / "workspace")
        _new_connection_appends(store, "r")
        assert [(r.run_id, r.events) for r in store.runs()] == [("r", 3)]
        assert store.url == "sqlite:///runs.db"  # messages name the store as the user gave it
    finally:
        store.close()
    with EventStore(f"sqlite:///{tmp_path / 'runs.db'}") as opened:
        assert opened.verify("r").ok and opened.version("r") == 3
    with EventStore(f"sqlite:///{tmp_path / 'workspace' / 'runs.db'}") as other:
        assert other.runs() == []


def test_a_path_that_starts_with_file_colon_is_that_file_not_a_uri(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """eventsourcing connects with ``uri=True``: ``sqlite:///file:app.db`` opened ``app.db``,
    another application's database the path check had refused by name, and added our tables."""
    monkeypatch.chdir(tmp_path)
    app = sqlite3.connect("app.db")
    app.execute("CREATE TABLE users (name TEXT)")
    app.commit()
    app.close()
    with EventStore("sqlite:///file:app.db") as store:
        store.append("r", [UserInput("x")])
    assert _tables(tmp_path / "app.db") == ["users"]
    assert EVENTS_TABLE in _tables(tmp_path / "file:app.db")
    odd = "a?mode=memory&cache=shared#1.db"  # URI syntax in a file's name is part of the name
    url = f"sqlite:///{tmp_path}/a%3Fmode=memory&cache=shared%231.db"
    with EventStore(url) as store:
        store.append("r", [UserInput("kept")])
    assert (tmp_path / odd).is_file()
    with EventStore(url) as store:
        assert store.version("r") == 1


def test_an_in_memory_store_is_one_database_for_all_its_connections() -> None:
    """Each pooled connection opened its own empty ``:memory:`` database: threads sharing the
    store failed with ``no such table``, or wrote where nothing read."""
    store = EventStore("sqlite:///:memory:")
    try:
        store.append("m", [RunStarted(), UserInput("hi")])
        assert isinstance(store.backend, SQLiteBackend)
        datastore = store.backend.datastore
        with datastore.transaction(commit=False) as a, datastore.transaction(commit=False) as b:
            for cursor in (a, b):  # two connections, one database
                cursor.execute(f"SELECT COUNT(*) FROM {EVENTS_TABLE}")
                assert cursor.fetchone()[0] == 2
        barrier = threading.Barrier(4)

        def work(w: int) -> None:
            barrier.wait()
            for j in range(10):
                store.append(f"t{w}", [UserInput(f"{w}-{j}")])

        assert errors_in_threads(4, work) == []
        assert sorted((r.run_id, r.events) for r in store.runs()) == [
            ("m", 2), ("t0", 10), ("t1", 10), ("t2", 10), ("t3", 10)]
        with EventStore("sqlite:///:memory:") as another:  # a store of its own, as before
            assert another.runs() == []
    finally:
        store.close()


@pytest.mark.parametrize("content", ["empty", "no tables"])
def test_a_file_without_contextfold_s_tables_is_no_store_when_one_must_exist(
        tmp_path: Path, content: str) -> None:
    """``contextfold runs --store sqlite:///notes.txt`` on an existing empty file made it a 28 KB
    store; only import and demo create a store."""
    path = tmp_path / "notes.txt"
    path.touch()
    if content == "no tables":
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 7")  # a database file, no table in it
        conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreConfigError, match=f"no store at {path}"):
        EventStore(f"sqlite:///{path}", must_exist=True)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    EventStore(f"sqlite:///{path}").close()  # a store made by a creating open
    EventStore(f"sqlite:///{path}", must_exist=True).close()


@pytest.mark.parametrize("position", [1, 2], ids=["plain", "compressed"])
def test_an_event_row_stored_as_text_is_an_integrity_failure_said_safely(
        tmp_path: Path, position: int) -> None:
    """A SQLite event row stored as TEXT (by hand, by another tool) was an integrity failure when its
    text decoded as UTF-8, but when it did not (a zstd frame, a delta, an envelope) Python's sqlite3
    raised "Could not decode to UTF-8 column 'state' with text '<the row's bytes>'": every command
    said StoreUnavailableError, retry later (exit 4), and printed the raw bytes. PostgreSQL's bytea
    column holds no text, so this is SQLite's alone."""
    from contextfold.domain.errors import IntegrityError
    from tests.cli_runner import cf

    db = tmp_path / "t.db"
    with EventStore(f"sqlite:///{db}") as store:
        noise = "".join("abcdefgh xyz"[i * 7 % 12] for i in range(40_000))  # compresses: a zstd frame
        store.append("r", [UserInput("hi"), UserInput(noise)])
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {EVENTS_TABLE} SET state = CAST(state AS TEXT) WHERE originator_version = ?",
                     (position,))
    with EventStore(f"sqlite:///{db}") as store:
        for read in (lambda: store.read("r"), lambda: store.verify("r")):
            try:
                report = read()
            except IntegrityError as exc:
                message = str(exc)
            else:  # a row that decodes is reported by verify as it reads it
                assert position == 1 and not getattr(report, "ok", True)
                message = getattr(report, "reason", "")
            assert "stored event" in message or "not valid UTF-8" in message, message
            assert message.isprintable() and "cfz1" not in message, message
    for command in (["verify", "r"], ["events", "r"]):
        out = cf("--store", f"sqlite:///{db}", *command, cwd=tmp_path)
        assert out.returncode == 3, (command, out.stderr)
        shown = (out.stdout + out.stderr).strip().splitlines()[-1]
        assert shown.isprintable() and "cfz1" not in shown, shown
