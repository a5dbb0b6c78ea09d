"""A SQLite store file damaged on disk (a page overwritten, the file cut short): a typed integrity
error that names the file, from the API and as one line and exit 3 from the command line."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import IntegrityError
from contextfold.domain.events import ModelResponse, UserInput
from contextfold.store.backends import EVENTS_TABLE
from tests.cli_runner import cf


def _store_with_a_run(path: Path) -> None:
    """A closed store (its WAL checkpointed into the file) holding run 'r' with a recorded build."""
    with open_store(f"sqlite:///{path}") as store:
        run = store.run("r")
        run.append(UserInput("fix the failing test"))
        run.build("openai-chat", window=8000)
        run.append(ModelResponse(text="done"))
    assert not Path(f"{path}-wal").exists()


def _overwrite_page(path: Path, page: int) -> None:
    """Page ``page`` (1-based) of the database file filled with bytes that are no b-tree page."""
    conn = sqlite3.connect(path)
    try:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes((i * 37 + 11) & 0xFF for i in range(size)))


def _events_root_page(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        (page,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                               (EVENTS_TABLE,)).fetchone()
    finally:
        conn.close()
    return int(page)


def test_a_sqlite_store_with_an_overwritten_page_is_an_integrity_error_naming_the_file(
        tmp_path: Path) -> None:
    """SQLite's "database disk image is malformed" (SQLITE_CORRUPT) was a plain StoreError: the
    command line said exit 2 ("bad input, not found...") and nothing told the user that the file
    itself is damaged and that no retry will read it. Now IntegrityError (exit 3) naming the file
    and what to do: restore it, or recover what SQLite still reads."""
    path = tmp_path / "store.db"
    _store_with_a_run(path)
    _overwrite_page(path, _events_root_page(path))
    store = open_store(f"sqlite:///{path}")
    try:
        with pytest.raises(IntegrityError, match=f"the store file {path} is damaged") as raised:
            store.run("r").events()
        assert isinstance(raised.value.__cause__, Exception)  # the driver's error, kept
    finally:
        store.close()
    for command in (("events", "r"), ("verify", "r"), ("replay", "r", "--turn", "1", "--verify")):
        out = cf("--store", f"sqlite:///{path}", *command, cwd=tmp_path)
        assert out.returncode == 3, (command, out.stderr)
        assert out.stderr.startswith("contextfold: integrity error: ") and out.stderr.count("\n") == 1
        assert f"the store file {path} is damaged (database disk image is malformed)" in out.stderr
        assert "Traceback" not in out.stderr


def test_a_sqlite_store_cut_short_is_a_damaged_store_not_another_file(tmp_path: Path) -> None:
    """A store file cut short (a copy interrupted, a disk that filled during a copy) was "not a
    contextfold SQLite store (not a readable database: database disk image is malformed)", a
    StoreConfigError (exit 2), as for a mistyped URL. It has SQLite's header: it is a database,
    damaged."""
    path = tmp_path / "store.db"
    _store_with_a_run(path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)
    with pytest.raises(IntegrityError, match=f"the store file {path} is damaged"):
        open_store(f"sqlite:///{path}")
    out = cf("--store", f"sqlite:///{path}", "runs", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert out.stderr.startswith("contextfold: integrity error: ") and out.stderr.count("\n") == 1
    assert "not a contextfold SQLite store" not in out.stderr
