"""SQLite and PostgreSQL backends on the eventsourcing library's recorders (PostgreSQL's in
:mod:`contextfold.store.pg_backend`, re-exported here with the tables of :mod:`.store_tables`).

The event table is eventsourcing's application recorder table (one stream
per run: ``originator_id`` = run id as text, ``originator_version`` = 1-based
position, a notification id ordering the events across runs: ``EventReads.read_all``). Next to it
we keep one table of our own, ``contextfold_artifacts``, for content-addressed
blobs.

Driver and eventsourcing errors are translated into our error tree with
``raise ... from`` (:mod:`contextfold.store.driver_errors`) so nothing else
sees sqlite3, psycopg or eventsourcing exceptions. Store URLs are parsed by
:mod:`contextfold.store.store_url`; both modules' names are re-exported here.

During a PostgreSQL outage an operation fails within about the URL's
``connect_timeout`` (5 s by default): a connection the pool cannot get is not
retried, and the pool gives up reconnecting in the background after as long,
so that the first operation after the server is back connects at once.

Schema creation is explicit (``create_schema``) and safe when many workers
start at once: on PostgreSQL concurrent ``CREATE TABLE IF NOT EXISTS`` races
on the catalog, so creation runs under a transaction-level advisory lock.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from eventsourcing import persistence as es

from contextfold.domain.errors import (
    StoreError,
    StoreNotWritableError,
)
from contextfold.store.driver_errors import translate_errors
from contextfold.store.event_times import EVENT_TIMES_TABLE
from contextfold.store.event_times import create_table_sql as times_table_sql
from contextfold.store.fork_renewal import forget_after_fork, keep_inherited, renew_after_fork
from contextfold.store.head_check import sqlite_recorder_class
from contextfold.store.pg_backend import PostgresBackend
from contextfold.store.pg_pool import libpq_dead_peer
from contextfold.store.sqlite_path import OpenedFile, check_sqlite_path, sqlite_database
from contextfold.store.store_tables import (
    ARTIFACTS_TABLE,
    EVENTS_TABLE,
    NO_WAIT,
    STORE_TABLES,
    first_rows_index_sql,
    no_store,
)
from contextfold.store.store_url import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_STORE_URL,
    StoreURL,
    display_url,
    parse_store_url,
)
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE, create_table_sql

if TYPE_CHECKING:
    from eventsourcing.sqlite import SQLiteDatastore

__all__ = [
    "ARTIFACTS_TABLE",
    "DEFAULT_STORE_URL",
    "EVENTS_TABLE",
    "SQLITE_LOCK_TIMEOUT",
    "STORE_TABLES",
    "Backend",
    "PostgresBackend",
    "SQLiteBackend",
    "StoreURL",
    "display_url",
    "libpq_dead_peer",
    "open_backend",
    "parse_store_url",
    "translate_errors",
]


class Backend(Protocol):
    """What the event store needs from a database."""

    url: str
    recorder: es.ApplicationRecorder
    placeholder: str

    def create_schema(self) -> None: ...
    def table(self, name: str) -> str: ...
    def tables_present(self, *names: str) -> bool: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]], *,
                      replace: bool = False) -> None: ...
    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]], *, wait: bool = True) -> None: ...
    def close(self) -> None: ...


SQLITE_LOCK_TIMEOUT: float = DEFAULT_LOCK_TIMEOUT
"""Seconds a SQLite write waits for another writer's transaction before "database is locked"
(a StoreBusyError), unless the URL says (``?lock_timeout=``)."""
_CREATE_PATIENCE = 30.0
"""Seconds a new SQLite store keeps retrying a schema creation that lost a WAL-switch race."""


class SQLiteBackend:
    """The embedded default. One file; WAL mode (set by eventsourcing) for readers beside a writer."""

    placeholder = "?"

    def __init__(self, url: StoreURL, raw_url: str, *, must_exist: bool = False) -> None:
        """``raw_url`` names the store in messages as the user wrote it; SQLite is handed the file
        resolved once, here (:func:`~contextfold.store.sqlite_path.sqlite_database`).
        ``must_exist``: a path without contextfold's tables (no file, an empty file, a database
        without tables) is :func:`.store_tables.no_store`, and left as it was."""
        self.url = raw_url
        ours = STORE_TABLES
        checked = check_sqlite_path(url.path, raw_url, ours=ours)
        if must_exist and checked is not None and not set(checked.tables) & set(ours):
            raise no_store(f"at {url.path} ({display_url(raw_url)!r})")
        database = sqlite_database(checked)
        # A shared in-memory database lives while a connection to it is open: this one keeps it
        # for the store's life (the pool closes the connections it does not keep).
        self._memory_keeper = (None if checked else
                               sqlite3.connect(database, uri=True, check_same_thread=False))
        self._database = database
        self._lock_timeout = SQLITE_LOCK_TIMEOUT if url.lock_timeout is None else url.lock_timeout
        self.datastore = self._new_datastore()
        self.recorder = sqlite_recorder_class()(self.datastore, events_table_name=EVENTS_TABLE)
        self._opened = None if checked is None else OpenedFile(checked.target, display_url(raw_url))
        if self._opened is not None:  # a file; a shared in-memory database lives in this process only
            self.recorder.file_check = self._opened.check  # no insert into a file deleted or replaced
            renew_after_fork(self)

    def _new_datastore(self) -> SQLiteDatastore:
        from eventsourcing.sqlite import SQLiteDatastore

        return SQLiteDatastore(  # lock_timeout: annotated int, passed to sqlite3's float timeout
            self._database, lock_timeout=self._lock_timeout, originator_id_type="text",  # type: ignore[arg-type]
            pool_size=2, max_overflow=8, pool_timeout=30.0,
        )

    def _after_fork_in_child(self) -> None:
        """A forked child's store leaves the parent's connections for new ones, opened on use.

        Why: SQLite's rule is that a connection is not carried across a fork (its locks are the
        parent's process's), and the pool lets one writer at a time: a parent's thread writing
        at the fork held that turn in the child for good, whose first write waited the pool's
        30 s and failed. The old pool is kept, never closed (:func:`.fork_renewal.keep_inherited`)."""
        keep_inherited(self.datastore)
        self.datastore = self.recorder.datastore = self._new_datastore()

    def create_schema(self) -> None:
        """Create the tables if missing. Several processes opening one new file at once race to
        switch it to WAL, and SQLite answers the losers "database is locked" at once, without
        waiting on its busy timeout: retry that, with backoff, for up to ``_CREATE_PATIENCE`` s."""
        deadline = time.monotonic() + _CREATE_PATIENCE
        delay = 0.005
        while True:
            try:
                with translate_errors("create schema", self.url):
                    self.recorder.create_table()
                    with self.datastore.transaction(commit=True) as c:
                        c.execute(
                            f"CREATE TABLE IF NOT EXISTS {ARTIFACTS_TABLE} ("
                            "hash TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                            "media_type TEXT NOT NULL, data BLOB NOT NULL)"
                        )
                try:
                    with translate_errors("create schema", self.url), \
                            self.datastore.transaction(commit=True) as c:
                        c.execute(create_table_sql(TOKEN_COUNTS_TABLE, blob="BLOB", integer="INTEGER"))
                except StoreNotWritableError:
                    pass  # a read-only store made before the table: it keeps no counts (token_counts)
                try:
                    with translate_errors("create schema", self.url), \
                            self.datastore.transaction(commit=True) as c:
                        c.execute(times_table_sql(EVENT_TIMES_TABLE, integer="INTEGER", without_rowid=True))
                except StoreNotWritableError:
                    pass  # a read-only store made before the table: its events have no times (event_times)
                try:
                    with translate_errors("create schema", self.url), \
                            self.datastore.transaction(commit=True) as c:
                        c.execute(first_rows_index_sql(EVENTS_TABLE, "rowid"))
                except StoreNotWritableError:
                    pass  # a read-only store made before the index: its runs are listed without it
                if self._opened is not None:
                    self._opened.check()  # a new store's file exists from here: its identity taken
                return
            except StoreError as exc:
                locked = "database is locked" in str(exc.__cause__ or "")
                if not locked or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def table(self, name: str) -> str:
        return name

    def tables_present(self, *names: str) -> bool:
        """Whether the file holds every table of ``names`` (one read)."""
        marks = ", ".join("?" * len(names))
        rows = self.query(f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ({marks})",
                          names)
        return int(rows[0][0]) == len(set(names))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with translate_errors("query", self.url, reading=True), self.datastore.transaction(commit=False) as c:
            c.execute(sql, tuple(params))
            return [tuple(row) for row in c.fetchall()]

    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]], *, replace: bool = False) -> None:
        """``replace``: a row held under a hash is overwritten (a repair, ``EventStore.put_artifact``)."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with translate_errors("store artifact", self.url), self.datastore.transaction(commit=True) as c:
            for row in rows:
                c.execute(
                    f"{verb} INTO {ARTIFACTS_TABLE} (hash, size, media_type, data) "
                    "VALUES (?, ?, ?, ?)",
                    row,
                )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with translate_errors("execute", self.url), self.datastore.transaction(commit=True) as c:
            c.execute(sql, tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]], *, wait: bool = True) -> None:
        """``sql`` once per row, in one transaction. Without ``wait``, only if no other writer
        holds the store (this process's or another's): else a StoreError at once (:data:`NO_WAIT`).

        Why: a cache's rows (``token_counts``) written by a read (a fold in a new process: a
        resumed worker, ``manifest``, ``replay``) waited the whole busy timeout (30 s) behind
        another process's import, then were dropped anyway; WAL readers never wait for writers."""
        if wait:
            with translate_errors("execute", self.url), self.datastore.transaction(commit=True) as c:
                c.executemany(sql, [tuple(r) for r in rows])
            return
        pool = self.datastore.pool
        with translate_errors("execute", self.url):
            conn = pool.get_connection(timeout=NO_WAIT, is_writer=True)
            try:
                conn.cursor().execute(f"PRAGMA busy_timeout = {round(NO_WAIT * 1000)}")
                try:
                    with conn.transaction(commit=True) as c:
                        c.executemany(sql, [tuple(r) for r in rows])
                finally:
                    conn.cursor().execute(f"PRAGMA busy_timeout = {round(self._lock_timeout * 1000)}")
            finally:
                pool.put_connection(conn)

    def close(self) -> None:
        forget_after_fork(self)
        self.datastore.close()
        if self._memory_keeper is not None:
            self._memory_keeper.close()


def open_backend(url: str, *, tenant: str | None = None, provision: bool = False,
                 must_exist: bool = False) -> SQLiteBackend | PostgresBackend:
    """The backend for ``url``; with ``tenant`` on PostgreSQL, the tenant's schema and role
    (provisioned first when ``provision``). ``must_exist``: a store not made yet (no SQLite
    file, or one without contextfold's tables: an empty file; a PostgreSQL schema or tenant
    without the events table) is a StoreConfigError,
    before anything is created: opening a SQLite path creates its file, provisioning a tenant
    its role and schema."""
    parsed = parse_store_url(url)
    if parsed.scheme == "sqlite":
        return SQLiteBackend(parsed, url, must_exist=must_exist)
    if tenant is None:
        return PostgresBackend(parsed, url, must_exist=must_exist)
    from dataclasses import replace

    from contextfold.store.tenants import provision_postgres_tenant, tenant_schema

    provisioned = provision and not must_exist
    name = provision_postgres_tenant(parsed, tenant) if provisioned else tenant_schema(tenant, parsed.schema)
    return PostgresBackend(replace(parsed, schema=name), url, role=name, must_exist=must_exist)
