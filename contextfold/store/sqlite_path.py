"""What a SQLite store URL's path points at, checked before SQLite opens (or creates) anything.

SQLite's own answers name neither the path nor the problem: a directory is "unable to open
database file" (a :class:`StoreUnavailableError`, as if a retry could help), a text file is
"file is not a database", a FIFO blocks or is a "disk I/O error". Each is a
:class:`StoreConfigError` here: the URL names something that cannot be a store.

Another application's database (tables, none of ours) is refused too: SQLite would open it
happily and we would switch it to WAL and add our tables to it. The check reads the schema
without writing a byte to the file (see :func:`_tables`), so a mistyped URL pointing at an
app's data leaves it exactly as it was.

What SQLite is handed is decided here too (:func:`sqlite_database`): the checked file, resolved
to an absolute path once, as a ``file:`` URI. eventsourcing opens every pooled connection with
``uri=True``, so a relative path was resolved against the directory current when each connection
was made (a later ``os.chdir`` split a run across two files), and a path starting with ``file:``
was read as a URI naming another file than the one checked.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from contextfold.domain.errors import StoreConfigError, StoreNotWritableError, StoreUnavailableError
from contextfold.store.driver_errors import damaged, no_room_to_read

__all__ = ["SQLITE_HEADER", "OpenedFile", "SQLiteFile", "check_sqlite_path", "sqlite_database"]

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (an empty file is an empty database)."""
_WAL_VERSION = 2
"""Header bytes 18 and 19 (write and read format version) of a database in WAL mode."""
_SHOWN_TABLES = 5


@dataclass(frozen=True)
class SQLiteFile:
    """What :func:`check_sqlite_path` found: the file it checked (absolute, symlinks resolved)
    and its tables (none: no file yet, an empty file or a database without tables)."""

    target: Path
    tables: tuple[str, ...] = ()


def sqlite_database(checked: SQLiteFile | None) -> str:
    """What SQLite opens, always as a URI (eventsourcing connects with ``uri=True``): the checked
    file's absolute ``file:`` URI, its characters percent-encoded (``?``, ``#``, ``%`` and ``=``
    in a name stay part of the name, and nothing reads as ``mode=memory``); ``None`` (the URL's
    ``:memory:``) a new in-memory database shared by the store's pooled connections, where each
    connection opened its own empty one."""
    if checked is None:
        return f"file:contextfold-{uuid.uuid4().hex}?mode=memory&cache=shared"
    return checked.target.as_uri()


class OpenedFile:
    """The store file as this store opened it (its device and inode), checked by each insert of
    events, inside its transaction (:func:`~contextfold.store.head_check.sqlite_recorder_class`).

    Why: a store file deleted (``rm``) or replaced (a backup moved over it) under a running
    worker is still open in SQLite, which in WAL mode goes on writing into it (SQLite's own
    check, SQLITE_READONLY_DBMOVED, guards rollback journals only): the append returned as if
    recorded, into a file no path names any more, and the events were gone when the worker
    ended. One ``stat`` per insert, where the insert writes and syncs its rows."""

    def __init__(self, target: Path, url: str) -> None:
        self._target = target
        self._url = url
        self._identity = self._now()  # None: SQLite makes the file on first use; taken then

    def _now(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self._target)
        except FileNotFoundError:
            return None
        return (found.st_dev, found.st_ino)

    def check(self) -> None:
        """Raise :class:`StoreNotWritableError` if the path no longer names the file opened."""
        try:
            now = self._now()
        except OSError:
            return  # the path cannot be looked at (a directory made unreadable): SQLite will say
        if self._identity is None:
            self._identity = now
            return
        if now != self._identity:
            how = "deleted" if now is None else "replaced (another file is at its path)"
            raise StoreNotWritableError(
                f"append to {self._url!r}: the store file {self._target} was {how} after this store "
                "opened it; SQLite would write into the file it opened, which nothing reads once "
                "this process ends: nothing was written. Open the store again")


def check_sqlite_path(path: str, url: str, *, ours: Collection[str]) -> SQLiteFile | None:
    """Raise :class:`StoreConfigError` if ``path`` (of the store URL ``url``) cannot be a store:
    its directory is missing or not a directory, or it is a directory, not a regular file, a
    file that is not a SQLite database, or a database with tables none of which is in ``ours``
    (another application's). A path that does not exist yet, an empty file or a database
    without tables is a new store. Returns what was checked (None for ``:memory:``); messages
    name ``path`` as the user wrote it."""
    if path == ":memory:":
        return None
    try:
        target = Path(path).resolve()  # once: what the pool opens later, whatever the cwd is then
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before Python 3.13
        raise StoreConfigError(f"cannot use {path} as the store {url!r}: {exc}") from exc
    parent = target.parent
    if not parent.is_dir():
        if parent.exists():
            raise StoreConfigError(f"{parent} is not a directory, so it cannot hold the store {url!r}")
        raise StoreConfigError(f"directory {parent} does not exist for {url!r}")
    if path.endswith("/") and not target.is_dir():  # resolve() drops the slash that says "a directory"
        raise StoreConfigError(f"{path} ends in '/', so it names a directory, not a contextfold SQLite "
                               f"store file ({url!r})")
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return SQLiteFile(target)
    except OSError as exc:
        raise StoreConfigError(f"cannot use {path} as the store {url!r}: {exc.strerror}") from exc
    if stat.S_ISDIR(mode):
        raise StoreConfigError(f"{path} is a directory, not a contextfold SQLite store file ({url!r})")
    if not stat.S_ISREG(mode):
        raise StoreConfigError(f"{path} is not a regular file, so not a contextfold SQLite store ({url!r})")
    try:
        with target.open("rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise StoreConfigError(f"cannot read {path}, the store {url!r}: {exc.strerror}") from exc
    if header and not header.startswith(SQLITE_HEADER):
        raise StoreConfigError(f"{path} is not a contextfold SQLite store (not a database): {url!r}")
    if not header:
        return SQLiteFile(target)
    tables = _tables(target, path, url, wal=header[18:19] == bytes([_WAL_VERSION]))
    if tables and not set(tables) & set(ours):
        shown = ", ".join(tables[:_SHOWN_TABLES]) + (
            f" and {len(tables) - _SHOWN_TABLES} more" if len(tables) > _SHOWN_TABLES else "")
        raise StoreConfigError(
            f"{path} is not a contextfold SQLite store: it is another application's database "
            f"(tables {shown}; none of contextfold's), left unchanged: {url!r}")
    return SQLiteFile(target, tuple(tables))


def _tables(target: Path, path: str, url: str, *, wal: bool) -> list[str]:
    """The names of the tables in the database at ``target`` (sorted), read without writing.

    ``mode=ro`` never writes the database file, but on a WAL database whose ``-wal`` and
    ``-shm`` files are gone (nobody has it open) it creates them and leaves them behind; then
    the main file holds every committed page, so it is read ``immutable`` (no sidecar files, no
    locks). If a writer opened it meanwhile and the immutable read fails, it is read again
    ``mode=ro`` beside that writer."""
    sidecars = any(Path(f"{target}{suffix}").exists() for suffix in ("-wal", "-shm"))
    uri = target.as_uri()
    if wal and not sidecars:
        try:
            return _read_tables(f"{uri}?mode=ro&immutable=1")
        except sqlite3.DatabaseError:
            pass  # a writer changed the file under the read: read it beside that writer
    try:
        return _read_tables(f"{uri}?mode=ro")
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise StoreUnavailableError(f"cannot read the schema of {path} ({url!r}): {exc}") from exc
        what = f"read the schema of {path} ({url!r})"
        # SQLite's header, then broken pages: a store cut short; or no room for the -shm file
        # every reader writes (a full disk): not a wrong URL either way
        refusal = damaged(exc, what, url) or no_room_to_read(exc, what, url)
        if refusal is not None:
            raise refusal from exc
        raise StoreConfigError(
            f"{path} is not a contextfold SQLite store (not a readable database: {exc}): {url!r}") from exc


def _read_tables(uri: str) -> list[str]:
    conn = sqlite3.connect(uri, uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name").fetchall()
    finally:
        conn.close()
    return [str(name) for (name,) in rows]
