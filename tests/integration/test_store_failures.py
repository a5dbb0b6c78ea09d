"""A SQLite store the database refuses to write (locked by another writer, read-only, disk full):
a typed error that names the store file, and nothing half-written."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import StoreUnavailableError
from contextfold.domain.events import FileRead, UserInput
from contextfold.store import backends


def test_a_write_to_a_sqlite_store_locked_by_another_writer_names_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection holds a write transaction past the busy timeout (shortened here). The
    error said "append to 'r': database is locked" and "store artifact: database is locked", no
    file: with several stores (CONTEXTFOLD_STORE, --store, a default in the working directory)
    the user could not tell which one to look at. Read-only files and a full disk take the same
    path (SQLite's "attempt to write a readonly database", "database or disk is full")."""
    monkeypatch.setattr(backends, "SQLITE_LOCK_TIMEOUT", 0.05)
    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}")
    run = store.run("r")
    run.append(UserInput("go"))
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailableError, match=re.escape(str(path))):
            run.append(UserInput("blocked"))
        big = "x" * (store.events.artifact_threshold + 1)  # its artifact is written first
        with pytest.raises(StoreUnavailableError, match=re.escape(str(path))):
            run.append(FileRead(path="big.txt", content=big))
        locker.execute("ROLLBACK")
        run.append(UserInput("after"))
        assert [e.event.text for e in run.events()] == ["go", "after"]  # type: ignore[union-attr]
        assert run.verify().ok
    finally:
        locker.close()
        store.close()
