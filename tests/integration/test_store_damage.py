"""A SQLite store file damaged on disk (a page overwritten, the file cut short): a typed integrity
error that names the file, from the API and as one line and exit 3 from the command line."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import IntegrityError, StoreNotWritableError
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


def _without_room_to_write(size: int) -> Callable[[], None]:
    """Run in the child before it starts: no file may grow past ``size`` bytes (RLIMIT_FSIZE;
    Python ignores the SIGXFSZ that comes with it, and the write fails with EFBIG), as on a full
    disk."""
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    return limit


@pytest.mark.parametrize("size", [0, 1024], ids=["no-byte", "a-kilobyte"])
def test_reading_a_closed_store_where_no_file_may_grow_says_no_room_not_another_file(
        tmp_path: Path, size: int) -> None:
    """Every reader of a WAL store needs SQLite's -shm index file, 32 KiB, made on first use: on
    a full disk (here: a file-size limit, the same refusal at each write) with no process
    holding the store open, the first command failed, and left the -shm and -wal files behind,
    empty; every later command, a read ('events', 'verify', 'replay') too, said the store was
    "not a contextfold SQLite store (not a readable database: disk I/O error)", a
    StoreConfigError (exit 2: check your URL). Where not even the -shm file's first bytes could
    be written (IOERR_SHMOPEN, the no-byte case) the first command was a plain StoreError, exit 2
    too. Both are StoreFullError (exit 5: free space, then retry), and once there is room the
    store reads as before."""
    path = tmp_path / "store.db"
    _store_with_a_run(path)
    limit = f"this process may not write files larger than {size} bytes (its file-size limit"
    for attempt in range(2):  # the first makes the -shm and -wal files, empty; the second finds them
        out = subprocess.run([sys.executable, "-m", "contextfold", "--store", f"sqlite:///{path}",
                              "events", "r"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             preexec_fn=_without_room_to_write(size))
        assert out.returncode == 5, (attempt, out.stderr)
        assert out.stderr.startswith("contextfold: StoreFullError: ") and out.stderr.count("\n") == 1
        assert f"the store file {path} " in out.stderr and limit in out.stderr, (attempt, out.stderr)
    assert Path(f"{path}-shm").exists()  # the state the second attempt met
    out = cf("--store", f"sqlite:///{path}", "verify", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_an_append_after_the_store_file_was_deleted_or_replaced_is_refused(tmp_path: Path, how: str) -> None:
    """A SQLite store's file deleted (``rm``) or replaced (a backup copied over it with
    ``mv``/``os.replace``) under a running worker: SQLite in WAL mode goes on writing into the
    file it opened, which no path names any more, and the append returned as if recorded: the
    events were gone when the worker ended (SQLite keeps a -wal file nobody reads), and a
    replacement never received them. The append is refused, typed, nothing written anywhere;
    the replacement takes the append once the store is opened again."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    store = open_store(url)
    run = store.run("r")
    run.append(UserInput("first"))
    backup = tmp_path / "backup.db"
    with sqlite3.connect(path) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    if how == "deleted":
        path.unlink()
    else:
        backup.replace(path)
    try:
        with pytest.raises(StoreNotWritableError, match=f"the store file {path} was {how}"):
            run.append(UserInput("lost"))
        with pytest.raises(StoreNotWritableError, match=f"the store file {path} was {how}"):
            run.build("openai-chat", window=8000)  # its record is refused too
    finally:
        store.close()
    if how == "deleted":
        assert not path.exists()
        return
    with open_store(url) as again:
        run = again.run("r")
        assert [e.event.text for e in run.events()] == ["first"]  # type: ignore[union-attr]
        run.append(UserInput("second"))
        assert run.version == 2 and run.verify().ok
