"""A store the database refuses to write (a SQLite file locked by another writer, read-only or
full; a read-only PostgreSQL session): a typed error that names the store, and nothing half-written."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from eventsourcing import persistence as es

from contextfold.api import open_store
from contextfold.domain.errors import (
    StoreConfigError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from contextfold.domain.events import FileRead, UserInput
from contextfold.store import backends
from contextfold.store.driver_errors import not_writable, translate_errors
from tests.storage import page_limit, pg_role, read_only


def test_a_write_to_a_sqlite_store_locked_by_another_writer_names_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection holds a write transaction past the busy timeout (shortened here). The
    error said "append to 'r': database is locked" and "store artifact: database is locked", no
    file: with several stores (CONTEXTFOLD_STORE, --store, a default in the working directory)
    the user could not tell which one to look at. (Read-only files and a full disk: typed errors
    of their own, below.)"""
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


def test_a_full_sqlite_store_is_a_store_full_error_that_names_the_file_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's "database or disk is full" came out as StoreUnavailableError ("retry later"): the
    write fails the same way until space is freed. Now StoreFullError (a StoreNotWritableError,
    not a StoreUnavailableError), naming the file and saying what to do; the event and the
    artifact writes both; nothing half-written, and the same append goes through once there is room."""
    path = tmp_path / "store.db"
    with open_store(f"sqlite:///{path}") as store:
        store.run("r").append(UserInput("go"))
    big = os.urandom(100_000).hex()  # an artifact, written before its event; random: zstd keeps its size
    with page_limit(monkeypatch, 1), open_store(f"sqlite:///{path}") as store:
        run = store.run("r")
        for event in (UserInput(os.urandom(20_000).hex()), FileRead(path="big.txt", content=big)):
            with pytest.raises(StoreFullError, match=re.escape(str(path))) as caught:
                run.append(event)
            assert not isinstance(caught.value, StoreUnavailableError)
            assert "free space" in str(caught.value)
            assert isinstance(caught.value.__cause__, Exception)  # the driver's error, kept
        assert [e.event.text for e in run.events()] == ["go"]  # type: ignore[union-attr]
    with open_store(f"sqlite:///{path}") as store:  # room again: the caller's retry
        run = store.run("r")
        run.append(FileRead(path="big.txt", content=big))
        assert run.version == 2 and run.verify().ok


def test_a_read_only_sqlite_store_is_a_store_read_only_error_that_names_the_file(tmp_path: Path) -> None:
    """A read-only store file ("attempt to write a readonly database") and a read-only directory,
    where SQLite cannot create the WAL's -shm file ("unable to open database file"), were
    StoreUnavailableError and StoreError: now StoreReadOnlyError naming the file, saying to make it
    writable. The file's reads still work; once writable, the same append goes through."""
    path = tmp_path / "store.db"
    with open_store(f"sqlite:///{path}") as store:
        store.run("r").append(UserInput("go"))
    assert not Path(f"{path}-wal").exists()  # closed: the directory holds the file alone
    with read_only(tmp_path), pytest.raises(StoreReadOnlyError, match=re.escape(str(path))):
        open_store(f"sqlite:///{path}")
    new = tmp_path / "new.db"  # a new store in a read-only directory: was unavailable (exit 4)
    with read_only(tmp_path), pytest.raises(StoreReadOnlyError, match=re.escape(str(new))):
        open_store(f"sqlite:///{new}")
    assert not new.exists()
    big = "x" * 200_000
    with read_only(path), open_store(f"sqlite:///{path}") as store:
        run = store.run("r")
        for event in (UserInput("blocked"), FileRead(path="big.txt", content=big)):
            with pytest.raises(StoreReadOnlyError, match=re.escape(str(path))) as caught:
                run.append(event)
            assert "writable" in str(caught.value)
        assert [e.event.text for e in run.events()] == ["go"]  # type: ignore[union-attr]
    with open_store(f"sqlite:///{path}") as store:
        run = store.run("r")
        run.append(UserInput("blocked"))
        assert [e.event.text for e in run.events()] == ["go", "blocked"]  # type: ignore[union-attr]
        assert run.verify().ok


@pytest.mark.postgres
def test_a_read_only_postgresql_session_is_the_same_store_read_only_error(pg_url: str) -> None:
    """PostgreSQL's read-only transaction (a standby, or default_transaction_read_only on the role
    or database; here on a role made for the test, with the privileges to write) was a bare
    StoreError that did not say why or what to do: now StoreReadOnlyError, the class a read-only
    SQLite file raises, saying what to do. Reads work; nothing is written."""
    with open_store(pg_url) as store:
        store.run("r").append(UserInput("go"))
    with pg_role(pg_url, "GRANT USAGE ON SCHEMA {s} TO {r}",
                 "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {s} TO {r}",
                 "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {r}") as role:
        with open_store(role.url, create_schema=False) as store:  # writable: the grants suffice
            store.run("w").append(UserInput("may write"))
        role.read_only()
        with open_store(role.url, create_schema=False) as store:
            run = store.run("r")
            for event in (UserInput("blocked"), FileRead(path="big.txt", content="x" * 100_000)):
                with pytest.raises(StoreReadOnlyError, match="read-only transaction") as caught:
                    run.append(event)
                assert "connect to the primary" in str(caught.value)
                assert f"{role.name}@" in str(caught.value)  # the store, as the URL names it
            assert [e.event.text for e in run.events()] == ["go"]  # type: ignore[union-attr]


def test_a_postgresql_database_or_role_that_does_not_exist_is_a_config_error_not_an_outage(
        pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped database or user was StoreUnavailableError (exit 4, "retry later"): a script
    retrying on 4 waited for a database that will never appear. The server's refusal is now a
    StoreConfigError (exit 2); a server that does not answer stays unavailable (exit 4)."""
    from contextfold.cli import main

    server = urlparse(pg_url)
    for url, missing in ((f"postgresql://{server.username}@{server.hostname}:{server.port}/cf_no_such_db",
                          'database "cf_no_such_db" does not exist'),
                         (f"postgresql://cf_no_such_role@{server.hostname}:{server.port}/test",
                          'role "cf_no_such_role" does not exist')):
        with pytest.raises(StoreConfigError, match="retrying will not help") as caught:
            open_store(url)
        assert missing in str(caught.value)
        assert main(["--store", url, "runs"]) == 2
        assert missing in capsys.readouterr().err
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailableError, match="Connection refused"):
        open_store(f"postgresql://postgres@127.0.0.1:{port}/test")


def test_a_server_error_with_a_detail_line_is_printed_on_one_line(
        pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line prints an error as one line: PostgreSQL's refusal to create tables in
    ``pg_catalog`` brought its ``DETAIL:`` line along, a second line on stderr."""
    from contextfold.cli import main

    url = re.sub(r"\?schema=[^&]*", "?schema=pg_catalog", pg_url)
    assert main(["--store", url, "demo"]) == 2  # a command that creates the store's tables
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DETAIL:" in err and "System catalog modifications" in err, err


_OVER_THE_FILE_SIZE_LIMIT = """
import os, resource, sys
from contextfold.api import open_store
from contextfold.domain.errors import StoreError
from contextfold.domain.events import UserInput

path = sys.argv[1]
with open_store(f"sqlite:///{path}") as store:
    store.run("r").append(UserInput("go"))
# the limit raises SIGXFSZ too: Python ignores it (and the write fails with EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))
with open_store(f"sqlite:///{path}") as store:
    run = store.run("r")
    for attempt in range(2):  # the same write again fails the same way: no outage to wait out
        try:
            for _ in range(100):
                run.append(UserInput(os.urandom(10_000).hex()))
        except StoreError as exc:
            print(type(exc).__name__, "|", exc)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    run.append(UserInput("after"))
    print("verified", run.verify().ok, run.events()[-1].event.text)
"""


def test_a_sqlite_store_past_the_file_size_limit_is_a_store_full_error(tmp_path: Path) -> None:
    """A process file-size limit (RLIMIT_FSIZE, ``ulimit -f``) or a disk quota makes SQLite's write
    fail with "disk I/O error" (SQLITE_IOERR_WRITE: only ENOSPC is SQLITE_FULL), which was
    StoreUnavailableError, "retry later" (exit 4), every time. Now StoreFullError saying which
    limit; the append goes through once the limit is raised. In a child process: the limit holds
    for every file it writes (SIGXFSZ, which the limit also raises, is ignored by Python)."""
    path = tmp_path / "store.db"
    out = subprocess.run([sys.executable, "-c", _OVER_THE_FILE_SIZE_LIMIT, str(path)],
                         capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) == 3, (out.stdout, out.stderr)
    for line in lines[:2]:
        assert line.startswith(f"StoreFullError | append to 'r' (sqlite:///{path}): the store file "
                               f"{path} cannot grow (disk I/O error): this process may not write files "
                               "larger than 300000 bytes (its file-size limit, RLIMIT_FSIZE"), line
    assert lines[2] == "verified True after"


def test_a_disk_i_o_error_is_a_store_full_error_only_when_there_is_no_room(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write SQLite could not make ("disk I/O error") is StoreFullError when the store's
    directory takes no more (a quota used up: EDQUOT, simulated here, since a quota needs root
    and a mounted file system), and stays StoreUnavailableError otherwise: a disk fault."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        store.run("r").append(UserInput("go"))
    write_failed = sqlite3.OperationalError("disk I/O error")
    write_failed.sqlite_errorcode = 778  # SQLITE_IOERR_WRITE
    assert not_writable(write_failed, "append", url) is None
    with pytest.raises(StoreUnavailableError, match="disk I/O error"), translate_errors("append", url):
        raise es.OperationalError(str(write_failed)) from write_failed  # as eventsourcing wraps it

    def over_quota(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(tempfile, "TemporaryFile", over_quota)
    refusal = not_writable(write_failed, "append", url)
    assert isinstance(refusal, StoreFullError)
    assert f"the store file {path} cannot grow (disk I/O error): the file system holding it has no room " \
           "left for this user (Disk quota exceeded" in str(refusal)
    assert not_writable(write_failed, "append", None) is None  # no file to look at: as it was


def _sqlite_error(message: str, code: int) -> es.OperationalError:
    """SQLite's error with its result code, wrapped as eventsourcing raises it."""
    cause = sqlite3.OperationalError(message)
    cause.sqlite_errorcode = code
    wrapped = es.OperationalError(message)
    wrapped.__cause__ = cause
    return wrapped


@pytest.mark.parametrize(("message", "code"), [("database or disk is full", 13),  # SQLITE_FULL
                                               ("disk I/O error", 778)])  # SQLITE_IOERR_WRITE, a quota
def test_a_read_refused_for_want_of_room_says_it_was_a_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, message: str, code: int) -> None:
    """A read that SQLite or PostgreSQL failed for want of room (a sort spilled to a temporary
    file on a full disk, a quota) said "This write was rolled back" and that the store file
    "cannot grow": a user looked for a lost write, and at the store file. A read says it read,
    and that it wrote nothing; a write still says it was rolled back."""
    path = tmp_path / "store.db"
    with open_store(f"sqlite:///{path}") as store:
        store.run("r").append(UserInput("go"))
    monkeypatch.setattr(tempfile, "TemporaryFile", _over_quota)  # the place takes no more
    with open_store(f"sqlite:///{path}") as store:
        recorder = store.events.backend.recorder
        select_events = recorder.select_events

        def refused(*args: object, **kwargs: object) -> None:
            raise _sqlite_error(message, code)
        monkeypatch.setattr(recorder, "select_events", refused)
        for read in (lambda: store.events.read("r"), lambda: store.events.verify("r"),
                     lambda: store.events.iter_events("r").__next__()):
            with pytest.raises(StoreFullError, match=re.escape(str(path))) as caught:
                read()
            text = str(caught.value)
            assert "rolled back" not in text and "cannot grow" not in text, text
            assert "this read wrote nothing" in text, text
        monkeypatch.setattr(recorder, "select_events", select_events)
        monkeypatch.setattr(recorder, "insert_events", refused)
        with pytest.raises(StoreFullError) as caught:
            store.run("r").append(UserInput("more"))
        assert "This write was rolled back" in str(caught.value)


def _over_quota(*args: object, **kwargs: object) -> None:
    raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))


@pytest.mark.postgres
def test_a_postgresql_read_out_of_disk_says_it_was_a_read(pg_url: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL's disk-full error (53100) on a read (a sort or a hash spilled to temporary
    files) said "This write was rolled back"; it says the read wrote nothing now, and a write
    that meets it still that it was rolled back."""
    import psycopg

    with open_store(pg_url) as store:
        store.run("r").append(UserInput("go"))
        backend = store.events.backend
        datastore = backend.datastore

        @contextlib.contextmanager
        def full(*args: object, **kwargs: object) -> Iterator[None]:
            raise psycopg.errors.DiskFull('could not write to file "base/pgsql_tmp/x": No space left')
            yield
        monkeypatch.setattr(datastore, "transaction", full)
        with pytest.raises(StoreFullError) as caught:
            backend.query("SELECT 1")
        text = str(caught.value)
        assert "out of disk space" in text and "this read wrote nothing" in text, text
        assert "rolled back" not in text, text
        with pytest.raises(StoreFullError) as caught:
            backend.execute("SELECT 1")
        assert "This write was rolled back" in str(caught.value)
