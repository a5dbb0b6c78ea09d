"""The PostgreSQL backend: a shared store for many workers (the ``postgres`` extra).

Why apart from :mod:`.backends`: it is half of that module's code (pools, timeouts, tenants'
roles, schema creation under an advisory lock) and none of it is SQLite's.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

from eventsourcing import persistence as es

from contextfold.domain.errors import (
    StoreConfigError,
    StoreError,
    StoreNotWritableError,
    StoreUnavailableError,
)
from contextfold.store.driver_errors import causes, not_writable, one_line, translate_errors
from contextfold.store.event_times import EVENT_TIMES_TABLE
from contextfold.store.event_times import create_table_sql as times_table_sql
from contextfold.store.fork_renewal import forget_after_fork, keep_inherited, renew_after_fork
from contextfold.store.pg_pool import datastore_class, libpq_dead_peer, libpq_timeout
from contextfold.store.pg_recorder import recorder_class
from contextfold.store.store_tables import (
    ARTIFACTS_TABLE,
    EVENTS_TABLE,
    FIRST_ROWS_INDEX,
    NO_WAIT,
    first_rows_index_sql,
    no_store,
)
from contextfold.store.store_url import (
    DEFAULT_LOCK_TIMEOUT,
    StoreURL,
)
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE, create_table_sql

__all__ = ["PostgresBackend"]

_T = TypeVar("_T")
_REFUSED_FOR_GOOD = re.compile(
    r'FATAL: (?:database|role) "[^"]*" does not exist|FATAL: password authentication failed'
    r'|FATAL: no pg_hba\.conf entry|FATAL: role "[^"]*" is not permitted to log in')
"""The server's answers to a connection that a retry will not change (a mistyped database or
user, a wrong password): a configuration error (exit 2), where a server that cannot be reached,
is starting up or has too many clients is unavailable (exit 4: retry later). libpq gives these
no SQLSTATE, so they are known by the server's message, which is English unless the server's
``lc_messages`` says otherwise; an answer not recognised stays unavailable."""

class PostgresBackend:
    """Shared store for many workers. Requires the ``postgres`` extra (psycopg 3 + pool)."""

    placeholder = "%s"

    def __init__(self, url: StoreURL, raw_url: str, *, role: str | None = None,
                 must_exist: bool = False) -> None:
        try:
            import eventsourcing.postgres  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreConfigError(
                "PostgreSQL support needs the postgres extra: pip install 'contextfold[postgres]'"
            ) from exc
        self.url = raw_url
        self.parsed = url
        self.schema = url.schema
        self.role = role
        if not self._probe(url) and must_exist:
            where = f"tenant {role!r}'s schema {url.schema!r}" if role else f"schema {url.schema!r}"
            raise no_store(f"in {where} of {self._safe_url()}")
        # No pool_open_timeout: with one, eventsourcing calls the pool's wait() on every
        # connection it takes, and two threads doing so while a connection is out trip
        # psycopg_pool's `assert not self._pool_full_event` (a bare AssertionError from a store
        # shared by threads). _probe above already fails fast when the server is unreachable.
        self.datastore = self._new_datastore()
        try:  # the recorder connects as it is made (it registers the row type's adapters)
            self.recorder = recorder_class()(self.datastore, events_table_name=EVENTS_TABLE)
        except (es.InterfaceError, es.OperationalError) as exc:
            self.datastore.close()  # the pool would go on retrying in its threads
            raise StoreUnavailableError(f"cannot reach {self._safe_url()}: {exc}") from exc
        renew_after_fork(self)

    def _new_datastore(self) -> Any:
        """eventsourcing's datastore for this store; its pool connects on first use."""
        url = self.parsed
        kept = min(2, url.pool_size)
        lock_timeout = DEFAULT_LOCK_TIMEOUT if url.lock_timeout is None else url.lock_timeout
        return datastore_class(self.role, url.network_timeout, lock_timeout, url.pool_timeout)(
            dbname=url.dbname, host=url.host, port=url.port, user=url.user,
            password=url.password, schema=url.schema, originator_id_type="text",
            pool_size=kept, max_overflow=url.pool_size - kept, connect_timeout=url.connect_timeout,
            idle_in_transaction_session_timeout=max(1.0, lock_timeout / 3),  # store_url: why
        )

    def _after_fork_in_child(self) -> None:
        """A forked child's store leaves the parent's pool for a new one, connected on first use.

        Why: the pooled connections are the parent's sessions, their sockets shared with the
        child; a child's query on one interleaved with the parent's on the wire ("unexpected
        result status", "the last operation didn't produce a result" on both sides). The old
        pool is kept, never closed: closing it would end the parent's sessions (psycopg does not
        finish a connection in a process other than its own when it is collected). The row
        type's adapters, read already, carry over; nothing is sent from the fork hook."""
        inherited = self.datastore
        keep_inherited(inherited)
        fresh = self._new_datastore()
        fresh.db_type_names = inherited.db_type_names
        fresh.psycopg_type_adapters = inherited.psycopg_type_adapters
        fresh.psycopg_python_types = inherited.psycopg_python_types
        self.datastore = self.recorder.datastore = fresh

    def _probe(self, url: StoreURL) -> bool:
        """Connect once, plainly, before the pool does: a missing database or role, a wrong
        password or a closed port then fails at once with the server's reason, where the
        pool retried for its 10 s open timeout and said only that it timed out. Whether the
        schema holds a store (its events table) already."""
        import psycopg

        try:
            with psycopg.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                                 dbname=url.dbname, connect_timeout=libpq_timeout(url.connect_timeout),
                                 **libpq_dead_peer(url.network_timeout)) as conn:
                row = conn.execute(
                    "SELECT quote_ident(%s), to_regclass(format('%%I.%%I', %s::text, %s::text))",
                    (url.schema, url.schema, EVENTS_TABLE)).fetchone()
        except psycopg.Error as exc:
            reason = one_line(exc)
            if _REFUSED_FOR_GOOD.search(reason):
                raise StoreConfigError(f"{self._safe_url()} refused the connection: {reason} "
                                       "(fix the store URL; retrying will not help)") from exc
            raise StoreUnavailableError(f"cannot reach {self._safe_url()}: {reason}") from exc
        if row is None or row[0] != url.schema:  # a keyword: quoted by the server
            raise StoreConfigError(
                f"invalid schema {url.schema!r} in the store URL: a PostgreSQL keyword, which "
                "eventsourcing cannot use unquoted; choose another name")
        return row[1] is not None

    def tables_present(self, *names: str) -> bool:
        """Whether the schema holds every table of ``names`` (one read, no lock)."""
        checks = " AND ".join(["to_regclass(%s) IS NOT NULL"] * len(names))
        return bool(self.query(f"SELECT {checks}", [self.table(n) for n in names])[0][0])

    def create_schema(self) -> None:
        """Create what is missing. A schema that holds every table is only read: a read-only
        session (a standby, ``default_transaction_read_only``) refuses even ``CREATE TABLE IF NOT
        EXISTS``, so opening a complete store there failed. One made before the token-count table
        is opened there without it (it keeps no counts: ``token_counts``), one made before the
        times table without it (its events have no times: ``event_times``), one made before the
        index of first rows without it (``store_tables.FIRST_ROWS_INDEX``)."""
        if self.tables_present(EVENTS_TABLE, ARTIFACTS_TABLE, TOKEN_COUNTS_TABLE, EVENT_TIMES_TABLE,
                               FIRST_ROWS_INDEX):
            self.datastore.register_type_adapters()
            return
        try:
            self._create_schema()
        except StoreNotWritableError:
            if not self.tables_present(EVENTS_TABLE, ARTIFACTS_TABLE):
                raise
            self.datastore.register_type_adapters()

    def _create_schema(self) -> None:
        import psycopg

        lock_key = "contextfold.create_schema"
        lock = "SELECT pg_advisory_xact_lock(hashtext(%s))"
        statements = self.recorder.sql_create_statements
        with translate_errors("create schema", self.url):
            try:
                with self.datastore.transaction(commit=True) as c:
                    c.execute(lock, (lock_key,))
                    # Checked first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the
                    # database even when the schema exists (a tenant role has not).
                    c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
                    if c.fetchone() is None:
                        c.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                # Composite types have no IF NOT EXISTS: check under the lock.
                for statement in statements:
                    if "CREATE TYPE" in statement.as_string():
                        with self.datastore.transaction(commit=True) as c:
                            c.execute(lock, (lock_key,))
                            c.execute(
                                "SELECT 1 FROM pg_type t JOIN pg_namespace n "
                                "ON n.oid = t.typnamespace WHERE n.nspname = %s "
                                "AND t.typname = %s",
                                (self.schema, self.recorder.stored_event_type_name),
                            )
                            if c.fetchone() is None:
                                c.execute(statement, prepare=False)
                with self.datastore.transaction(commit=True) as c:
                    c.execute(lock, (lock_key,))
                    for statement in statements:
                        if "CREATE TYPE" not in statement.as_string():
                            c.execute(statement, prepare=False)
                    c.execute(
                        f'CREATE TABLE IF NOT EXISTS "{self.schema}".{ARTIFACTS_TABLE} ('
                        "hash TEXT PRIMARY KEY, size BIGINT NOT NULL, "
                        "media_type TEXT NOT NULL, data BYTEA NOT NULL)"
                    )
                    c.execute(times_table_sql(f'"{self.schema}".{EVENT_TIMES_TABLE}', integer="BIGINT",
                                              without_rowid=False))
                    c.execute(create_table_sql(f'"{self.schema}".{TOKEN_COUNTS_TABLE}', blob="BYTEA",
                                               integer="BIGINT"))
                    # an older version's store: built once, under the lock, inserts waiting meanwhile
                    c.execute(first_rows_index_sql(f'"{self.schema}".{EVENTS_TABLE}', "notification_id"))
            except psycopg.Error as exc:
                refusal = not_writable(exc, f"create schema ({self._safe_url()})", None)
                if refusal is not None:  # a read-only role, database or standby
                    raise refusal from exc
                if not isinstance(exc, psycopg.OperationalError):
                    raise
                raise StoreUnavailableError(f"cannot reach {self._safe_url()}: {exc}") from exc
            self.datastore.register_type_adapters()

    def _safe_url(self) -> str:
        """The URL for a message: user, host and port kept (they say what was tried), never
        the password."""
        parsed = urlparse(self.url)
        netloc = parsed.hostname or ""
        if parsed.port is not None:
            netloc += f":{parsed.port}"
        if parsed.username:
            netloc = f"{parsed.username}@{netloc}"
        return parsed._replace(netloc=netloc).geturl()

    def table(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    def _idempotent(self, what: str, work: Callable[[], _T], *, reading: bool = False) -> _T:
        """Run ``work`` (a read, or an insert that may run twice), again on a fresh connection when
        the one it took was closed by the server (a restart, ``pg_terminate_backend``).

        Why: the pool hands out idle connections unchecked, and after a restart it holds only
        dead ones; eventsourcing retries its own reads and inserts, but our queries failed once
        per pooled connection, on a server that was back. The pool drops each dead connection as
        it comes back, so at most ``max_size`` of them are met. A connection the pool cannot get
        at all (``PoolTimeout``: the server is down) is not retried: that is the outage to report,
        after the URL's ``connect_timeout``. Nor is a refusal (disk full, read-only). ``reading``:
        ``work`` only reads (a refusal then says it wrote nothing: ``driver_errors.not_writable``)."""
        import psycopg
        import psycopg_pool

        attempts = self.datastore.pool.max_size + 1
        for attempt in range(1, attempts + 1):
            try:
                with translate_errors(what, self.url, reading=reading):
                    try:
                        return work()
                    except psycopg.Error as exc:
                        refusal = not_writable(exc, f"{what} ({self._safe_url()})", None, reading=reading)
                        if refusal is not None:
                            raise refusal from exc
                        if isinstance(exc, psycopg.OperationalError):
                            raise StoreUnavailableError(f"{what} ({self._safe_url()}): {exc}") from exc
                        raise StoreError(f"{what} ({self._safe_url()}): {exc}") from exc
            except StoreUnavailableError as exc:
                if attempt == attempts or any(isinstance(c, psycopg_pool.PoolTimeout) for c in causes(exc)):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        def work() -> list[tuple[Any, ...]]:
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, tuple(params))
                return [tuple(row.values()) for row in c.fetchall()]

        return self._idempotent("query", work, reading=True)

    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]], *, replace: bool = False) -> None:
        """``replace``: a row held under a hash is overwritten (a repair, ``EventStore.put_artifact``)."""
        conflict = ("DO UPDATE SET size = EXCLUDED.size, media_type = EXCLUDED.media_type, "
                    "data = EXCLUDED.data" if replace else "DO NOTHING")

        def work() -> None:  # content-addressed, ON CONFLICT DO NOTHING: a second run is harmless
            with self.datastore.transaction(commit=True) as c:
                for row in rows:
                    c.execute(
                        f'INSERT INTO "{self.schema}".{ARTIFACTS_TABLE} '
                        "(hash, size, media_type, data) VALUES (%s, %s, %s, %s) "
                        f"ON CONFLICT (hash) {conflict}",
                        row,
                    )

        self._idempotent("store artifact", work)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._writing_transaction() as c:
            c.execute(sql, tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]], *, wait: bool = True) -> None:
        """``sql`` once per row, in one transaction; without ``wait``, given up when a row lock
        is held (:meth:`SQLiteBackend.execute_many` says why)."""
        with self._writing_transaction() as c:
            if not wait:
                c.execute(f"SET LOCAL lock_timeout = '{round(NO_WAIT * 1000)}ms'")
            c.executemany(sql, [tuple(r) for r in rows])

    @contextlib.contextmanager
    def _writing_transaction(self) -> Iterator[Any]:
        """A committed transaction's cursor; a driver error is a StoreError, a refusal (disk
        full, read-only) its StoreNotWritableError."""
        import psycopg

        with translate_errors("execute", self.url):
            try:
                with self.datastore.transaction(commit=True) as c:
                    yield c
            except psycopg.Error as exc:
                refusal = not_writable(exc, f"execute ({self._safe_url()})", None)
                raise refusal or StoreError(str(exc)) from exc

    def close(self) -> None:
        forget_after_fork(self)
        self.datastore.close()
