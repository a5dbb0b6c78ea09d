"""Driver and eventsourcing errors, translated into the store's branch of the error tree.

Nothing outside :mod:`contextfold.store` sees a sqlite3, psycopg or eventsourcing exception: each
becomes a :class:`StoreError` subclass with ``raise ... from`` (the driver's error stays on
``__cause__``) and a message naming the store.

Why the storage refusals are told apart: SQLite reports a full disk and a read-only file as
``OperationalError``, as it reports a locked database, and PostgreSQL's disk-full error is an
``OperationalError`` too; all of them came out as :class:`StoreUnavailableError`, which tells a
user to retry later, while the write will fail the same way until someone frees space or makes
the store writable. They are :class:`StoreFullError` and :class:`StoreReadOnlyError` here, told
apart by the driver's error code (SQLite's result code, PostgreSQL's SQLSTATE), never its text;
a SQLite write that failed as "disk I/O error" is a full store when the place says so: a
file-size limit or a quota (:mod:`contextfold.store.sqlite_space`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

from eventsourcing import persistence as es

from contextfold.domain.errors import (
    IntegrityError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreNotWritableError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from contextfold.store.sqlite_space import WRITE_ERRORS, why_no_room
from contextfold.store.store_url import display_url, parse_store_url

__all__ = ["PoolExhausted", "busy", "causes", "damaged", "no_room_to_read", "not_writable", "one_line",
           "translate_errors"]

_SQLITE_READONLY = 8
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_PG_READ_ONLY_TRANSACTION = "25006"
_PG_DISK_FULL = "53100"
_PG_LOCK_NOT_AVAILABLE = "55P03"
_PG_QUERY_CANCELED = "57014"
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


class PoolExhausted(Exception):
    """Marks a pool timeout met while every pooled connection was in use (the server up):
    :mod:`.pg_pool` raises a ``PoolTimeout`` with this mixed in, and :func:`busy` tells it from
    a server that did not answer."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its ``__cause__`` chain (eventsourcing wraps the driver's error)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__
    return chain


def _sqlite_code(cause: BaseException) -> int:
    """SQLite's primary result code of ``cause`` (the low byte of its extended code); 0 for an
    error that is not SQLite's."""
    return (getattr(cause, "sqlite_errorcode", None) or 0) & 0xFF if isinstance(cause, sqlite3.Error) else 0


def _why_no_room(cause: BaseException, url: str | None) -> str | None:
    """Why SQLite's refused write or sync ``cause`` (:data:`.sqlite_space.WRITE_ERRORS`: its
    "disk I/O error") failed when the store file at ``url`` has no room to grow
    (:func:`.sqlite_space.why_no_room`), else None: a write's refusal and a reader's alike."""
    if (isinstance(cause, sqlite3.Error) and url is not None
            and getattr(cause, "sqlite_errorcode", None) in WRITE_ERRORS):
        return why_no_room(_sqlite_path(url))
    return None


def not_writable(exc: BaseException, what: str, url: str | None, *,
                 reading: bool = False) -> StoreNotWritableError | None:
    """The typed refusal that ``exc`` (or an error on its cause chain) stands for, else None.

    ``what``: the operation, as the message starts; ``url``: the store (a SQLite store's file is
    named, and looked at when SQLite could not open it). ``reading``: the operation was a read
    (a sort or an index spilled to a temporary file, SQLite's ``-shm`` index made on first use):
    the message says it wrote nothing, where a write's says it was rolled back. Why: "This write
    was rolled back" and "the store file cannot grow" on a failed read sent users looking for a
    lost write, and at the store file rather than the place the read could not write to."""
    done = "; this read wrote nothing, the store is as it was" if reading else ". This write was rolled back"
    for cause in causes(exc):
        if isinstance(cause, sqlite3.Error):
            code = _sqlite_code(cause)
            path = _sqlite_path(url)
            if code == _SQLITE_FULL:
                place = (f"the store file {path}, or the temporary files this read needs,"
                         if reading else f"the store file {path}")
                return StoreFullError(
                    f"{what}: {place} is full ({cause}): its disk has no space left, "
                    "or a quota or the database's size limit was reached; free space there (or move "
                    f"the store to a larger disk), then retry{done}")
            if (why := _why_no_room(cause, url)) is not None:
                failed = (f"SQLite could not write a file this read needs (beside the store file {path}, "
                          "or a temporary one)" if reading else f"the store file {path} cannot grow")
                return StoreFullError(f"{what}: {failed} ({cause}): {why}, then retry{done}")
            if code == _SQLITE_READONLY or (code == _SQLITE_CANTOPEN and _read_only_place(path)):
                return StoreReadOnlyError(
                    f"{what}: the store file {path} is read-only ({cause}): make the file and its "
                    "directory writable for this user (SQLite writes -wal and -shm files beside it): "
                    "its mode or owner, an immutable attribute (lsattr), a read-only mount; then retry"
                    + (done if reading else ""))
        sqlstate = getattr(cause, "sqlstate", None)  # psycopg's errors, without importing psycopg
        if sqlstate == _PG_DISK_FULL:
            return StoreFullError(
                f"{what}: the PostgreSQL server is out of disk space ({one_line(cause)}): free space "
                f"on the server, then retry{done}")
        if sqlstate == _PG_READ_ONLY_TRANSACTION:
            return StoreReadOnlyError(
                f"{what}: the PostgreSQL server runs this session read-only ({one_line(cause)}): "
                "a standby, or default_transaction_read_only set for the role or the database; "
                "connect to the primary, or as a role that may write")
    return None


def damaged(exc: BaseException, what: str, url: str | None) -> IntegrityError | None:
    """The :class:`IntegrityError` that ``exc`` (or its cause chain) stands for when SQLite found
    the store file itself damaged (SQLITE_CORRUPT "database disk image is malformed", SQLITE_NOTADB
    in a file whose header said SQLite), else None.

    Why not a plain StoreError: that was exit 2 ("bad input, not found"), and a file cut short
    was "not a contextfold SQLite store", as for a mistyped URL; the user was not told that the
    bytes on disk are broken and that no retry will read them, only a backup or SQLite's own
    recovery. Told apart by SQLite's result code, never its text."""
    for cause in causes(exc):
        if _sqlite_code(cause) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
            path = _sqlite_path(url)
            return IntegrityError(
                f"{what}: the store file {path} is damaged ({cause}): SQLite cannot read it, and no "
                f"retry will; restore it from a backup, or recover what SQLite still reads "
                f"(sqlite3 {path} .recover)")
    return None


def no_room_to_read(exc: BaseException, what: str, url: str) -> StoreFullError | None:
    """The :class:`StoreFullError` that a read's ``exc`` stands for when SQLite could not write the
    store's ``-shm`` index file (made on first use, 32 KiB, needed by every reader of a WAL
    store) for want of room (:func:`.sqlite_space.why_no_room`), else None.

    Why: on a full disk a store that no process held open could not be read at all, and once
    a first attempt had left the ``-shm`` file behind, empty, the schema check said "not a
    contextfold SQLite store (not a readable database: disk I/O error)", a StoreConfigError
    (exit 2: check the URL) for a store that reads again as soon as there is room."""
    for cause in causes(exc):
        if (why := _why_no_room(cause, url)) is not None:
            path = _sqlite_path(url)
            return StoreFullError(
                f"{what}: the store file {path} cannot be read: SQLite could not write its index "
                f"file {path}-shm, which every reader needs ({cause}): {why}, then retry")
    return None


def busy(exc: BaseException, what: str) -> StoreBusyError | None:
    """The :class:`StoreBusyError` that ``exc`` (or its cause chain) stands for, else None: a lock
    waited for past ``lock_timeout`` (PostgreSQL's SQLSTATE 55P03, SQLite's busy and locked
    codes), a statement the server canceled (57014: its ``statement_timeout``, or an
    administrator's ``pg_cancel_backend``), or every pooled connection in use past
    ``pool_timeout`` (:class:`PoolExhausted`).

    Why apart from an outage: "the server did not answer, retry once it is back" sent users
    looking for a dead server that was up, and a retry loop cannot tell a store that is busy
    (another writer stalled, this process's own threads holding every connection) from one
    that is gone; the message says which bound was reached."""
    for cause in causes(exc):
        if isinstance(cause, PoolExhausted):
            return StoreBusyError(
                f"{what}: every connection of this store's pool was in use for the store URL's "
                f"?pool_timeout= ({one_line(cause)}): the server is up, this process's own "
                "operations held them all; retry, or raise ?pool_size= (default 10)")
        if getattr(cause, "sqlstate", None) == _PG_QUERY_CANCELED:  # not retried: the same wait again
            return StoreBusyError(
                f"{what}: the server canceled the statement ({one_line(cause)}): it ran past the "
                "statement_timeout set for this role or database (behind another session's lock, "
                "or slow), or an administrator canceled it; retry, or raise statement_timeout")
        pg = getattr(cause, "sqlstate", None) == _PG_LOCK_NOT_AVAILABLE
        if pg or _sqlite_code(cause) in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return StoreBusyError(
                f"{what}: the store is busy: another session held a lock it needs for longer than "
                f"the store URL's ?lock_timeout= seconds (default 30; {one_line(cause)}); retry"
                + (" (a stopped session of this store holds its locks a third of that at most: the "
                   "server ends it)" if pg else ""))
    return None


@contextlib.contextmanager
def translate_errors(what: str, url: str | None = None, *, reading: bool = False) -> Iterator[None]:
    """Translate driver / eventsourcing errors into StoreError subclasses. ``url``: the store, named
    in the message (password masked): "database is locked" alone did not say which file.
    ``reading``: the operation only reads (:func:`not_writable` says why it matters)."""
    if url is not None:
        what = f"{what} ({display_url(url)})"
    try:
        yield
    except (es.ConnectionPoolClosedError, es.ConnectionNotFromPoolError) as exc:
        # a store closed (by another thread) while this operation held a connection: eventsourcing's
        # SQLite pool refuses the connection back with an error outside its PersistenceError tree
        raise StoreError(f"{what}: the store was closed during the operation ({exc}); "
                         "open it again (an append may have been written: reload the run)") from exc
    except (es.PersistenceError, sqlite3.Error) as exc:
        undecodable = _text_not_utf8(exc)
        if undecodable is not None:
            raise IntegrityError(f"{what}: a stored row holds TEXT that is not valid UTF-8 in column "
                                 f"{undecodable!r} (written as text by another tool: this store writes "
                                 "events and artifacts as BLOBs); no retry will read it") from exc
        refusal = not_writable(exc, what, url, reading=reading) or damaged(exc, what, url)
        if refusal is not None:
            raise refusal from exc
        held = busy(exc, what)
        if held is not None:
            raise held from exc
        if isinstance(exc, es.InterfaceError | es.OperationalError):
            raise StoreUnavailableError(f"{what}: {exc}{_outage_hint(exc)}") from exc
        raise StoreError(f"{what}: {exc}") from exc


_NOT_UTF8 = re.compile(r"Could not decode to UTF-8 column '([^']{0,100})'")


def _text_not_utf8(exc: BaseException) -> str | None:
    """The column of a row whose TEXT is not UTF-8, if that is what ``exc`` reports, else None.

    Why: Python's sqlite3 cannot hand such a value to us as ``str`` and raises OperationalError,
    which read as an outage (StoreUnavailableError: retry later, exit 4) although the row is
    damaged for good, and its message quotes the row's raw bytes. Told apart by that message,
    the one signal it carries: sqlite3 raises it itself, with no SQLite result code (an error
    from SQLite has ``sqlite_errorcode``). The column name is the store's own; the text is
    never shown."""
    for cause in causes(exc):
        if isinstance(cause, sqlite3.OperationalError) and not hasattr(cause, "sqlite_errorcode"):
            match = _NOT_UTF8.match(str(cause))
            if match is not None:
                return match.group(1)
    return None


def _sqlite_path(url: str | None) -> str:
    """The file a SQLite store URL names (the URL itself if it is not one)."""
    if url is None:
        return "(unknown)"
    try:
        return str(Path(parse_store_url(url).path).resolve())
    except (StoreError, OSError, ValueError):
        return display_url(url)


def _read_only_place(path: str) -> bool:
    """Whether ``path`` or its directory cannot be written (``access`` honours modes, immutable
    attributes and read-only mounts, for root too): SQLite says only "unable to open database
    file" when a WAL store's directory is read-only and it cannot create the ``-shm`` file, or
    when a new store's file cannot be created in a read-only directory."""
    target = Path(path)
    if not target.exists():
        return target.parent.is_dir() and not os.access(target.parent, os.W_OK)
    return not (os.access(target, os.W_OK) and os.access(target.parent, os.W_OK))


def _outage_hint(exc: BaseException) -> str:
    """What to do when the PostgreSQL pool could not get a connection in time (the server is
    down or unreachable): the bare "couldn't get a connection after 5.00 sec" said neither."""
    pool = sys.modules.get("psycopg_pool")  # loaded by a PostgreSQL store only
    if pool is None or not any(isinstance(c, pool.PoolTimeout) for c in causes(exc)):
        return ""
    return ("; the server did not answer: retry once it is back (the wait is the store URL's "
            "?connect_timeout=, in seconds)")


def one_line(exc: BaseException) -> str:
    """A driver's message on one line, its runs of whitespace as one space: a server's message
    spans lines (a ``DETAIL:``), and so does pydantic's report."""
    return " ".join(str(exc).split())
