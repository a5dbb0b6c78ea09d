"""SQLite and PostgreSQL backends on the eventsourcing library's recorders.

The event table is eventsourcing's application recorder table (one stream
per run: ``originator_id`` = run id as text, ``originator_version`` = 1-based
position, a notification id giving the commit order across runs). Next to it
we keep one table of our own, ``contextfold_artifacts``, for content-addressed
blobs.

Driver and eventsourcing errors are translated here into our error tree with
``raise ... from`` so nothing else sees sqlite3, psycopg or eventsourcing
exceptions.

Schema creation is explicit (``create_schema``) and safe when many workers
start at once: on PostgreSQL concurrent ``CREATE TABLE IF NOT EXISTS`` races
on the catalog, so creation runs under a transaction-level advisory lock.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import ParseResult, parse_qs, unquote, urlparse

from eventsourcing import persistence as es

from contextfold.domain.errors import (
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
)
from contextfold.store.pg_recorder import recorder_class
from contextfold.store.sqlite_path import check_sqlite_path
from contextfold.store.tenants import META_TABLE
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE, create_table_sql

__all__ = [
    "ARTIFACTS_TABLE",
    "EVENTS_TABLE",
    "SQLITE_LOCK_TIMEOUT",
    "Backend",
    "PostgresBackend",
    "SQLiteBackend",
    "StoreURL",
    "display_url",
    "open_backend",
    "parse_store_url",
    "translate_errors",
]

EVENTS_TABLE = "contextfold_events"
ARTIFACTS_TABLE = "contextfold_artifacts"
DEFAULT_STORE_URL = "sqlite:///contextfold.db"
_T = TypeVar("_T")


@dataclass(frozen=True)
class StoreURL:
    scheme: str
    path: str = ""
    host: str = ""
    port: int = 5432
    user: str = ""
    password: str = ""
    dbname: str = ""
    schema: str = "public"


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""Lower case only: eventsourcing names the schema unquoted in one query (its row type's lookup),
where PostgreSQL folds it to lower case, so a schema ``MixedCase`` was created (quoted) and then
not found on the first append. Reserved words (``user``) are refused by the server's list in
``PostgresBackend._probe``, for the same reason."""


def display_url(url: str) -> str:
    """``url`` with its password, if any, shown as ``***`` (for messages and listings)."""
    try:
        parsed = urlparse(url)
    except ValueError:  # a URL urlparse refuses: mask what sits where a password would
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    if parsed.password is None:  # none, or one urlparse did not see: u:pa#ss@host cut at the '#'
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    return parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)).geturl()


def parse_store_url(url: str) -> StoreURL:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``,
    ``postgresql://user[:pw]@host[:port]/dbname[?schema=name]``."""
    if not url.strip():
        raise StoreConfigError(f"an empty store URL ({url!r}): use sqlite:///path.db or "
                               "postgresql://user@host:port/db")
    try:
        parsed = urlparse(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket: postgresql://u@[::1/db
        raise StoreConfigError(f"invalid store URL {display_url(url)!r}: {exc}") from exc
    # an option we would not apply (?mode=ro, ?sslmode=require) must not be dropped in silence
    options = parse_qs(parsed.query, keep_blank_values=True)
    unknown = sorted(set(options) - ({"schema"} if parsed.scheme in ("postgresql", "postgres") else set()))
    if unknown and parsed.scheme in ("sqlite", "postgresql", "postgres"):
        raise StoreConfigError(
            f"unsupported option {', '.join(map(repr, unknown))} in the store URL {display_url(url)!r}: "
            "a postgresql URL takes ?schema=name only (TLS and the like: libpq's environment, "
            "e.g. PGSSLMODE), a sqlite URL none")
    if parsed.scheme in ("sqlite", "postgresql", "postgres"):
        _refuse_ignored_parts(parsed, url, options)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("/") else parsed.path)
        if not path:
            raise StoreConfigError(f"sqlite URL needs a file path: {display_url(url)!r}")
        return StoreURL(scheme="sqlite", path=path)
    if parsed.scheme in ("postgresql", "postgres"):
        dbname = parsed.path.lstrip("/")
        if not dbname:
            raise StoreConfigError(f"postgresql URL needs a database name: {display_url(url)!r}")
        schema = options.get("schema", ["public"])[0]
        if not schema:  # ?schema= is not ?schema=public: someone meant a name and lost it
            raise StoreConfigError(
                f"empty schema in the store URL {display_url(url)!r}: give ?schema=name, or leave "
                "the option out for 'public'")
        if not _SCHEMA_NAME.fullmatch(schema):  # it is spliced into DDL as a quoted identifier
            raise StoreConfigError(
                f"invalid schema {schema!r} in the store URL: 1-63 characters a-z, 0-9 and _, "
                "not starting with a digit")
        try:
            port = parsed.port or 5432
        except ValueError as exc:
            raise StoreConfigError(
                f"invalid port in the store URL {display_url(url)!r}: {exc}") from exc
        return StoreURL(
            scheme="postgresql",
            host=parsed.hostname or "127.0.0.1",
            port=port,
            user=unquote(parsed.username or "postgres"),
            password=unquote(parsed.password or ""),
            dbname=dbname,
            schema=schema,
        )
    raise StoreConfigError(
        f"unsupported store URL {display_url(url)!r}: use sqlite:///path.db or "
        "postgresql://user@host:port/db"
    )


def _refuse_ignored_parts(parsed: ParseResult, url: str, options: dict[str, list[str]]) -> None:
    """Refuse what a store URL holds that would be ignored: an option given twice (which one
    wins?), a ``#fragment`` (``sqlite:///runs#2.db`` opened ``runs``), a host in a sqlite URL."""
    repeated = sorted(name for name, values in options.items() if len(values) > 1)
    if repeated:
        raise StoreConfigError(
            f"option {', '.join(map(repr, repeated))} given more than once in the store URL "
            f"{display_url(url)!r}: give it once")
    if parsed.fragment or url.endswith("#"):
        raise StoreConfigError(
            f"a '#' fragment in the store URL {display_url(url)!r} would be ignored: write a '#' "
            "in a name as %23")
    if parsed.scheme == "sqlite" and parsed.netloc:
        raise StoreConfigError(
            f"a sqlite URL takes no host ({parsed.netloc!r} in {display_url(url)!r}): "
            "sqlite:///relative/path.db or sqlite:////absolute/path.db")


@contextlib.contextmanager
def translate_errors(what: str, url: str | None = None) -> Iterator[None]:
    """Translate driver / eventsourcing errors into StoreError subclasses. ``url``: the store, named
    in the message (password masked): "database is locked" alone did not say which file."""
    if url is not None:
        what = f"{what} ({display_url(url)})"
    try:
        yield
    except (es.ConnectionPoolClosedError, es.ConnectionNotFromPoolError) as exc:
        # a store closed (by another thread) while this operation held a connection: eventsourcing's
        # SQLite pool refuses the connection back with an error outside its PersistenceError tree
        raise StoreError(f"{what}: the store was closed during the operation ({exc}); "
                         "open it again (an append may have been written: reload the run)") from exc
    except (es.InterfaceError, es.OperationalError) as exc:
        raise StoreUnavailableError(f"{what}: {exc}") from exc
    except es.PersistenceError as exc:
        raise StoreError(f"{what}: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"{what}: {exc}") from exc


class Backend(Protocol):
    """What the event store needs from a database."""

    url: str
    recorder: es.ApplicationRecorder
    placeholder: str

    def create_schema(self) -> None: ...
    def table(self, name: str) -> str: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]]) -> None: ...
    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    def close(self) -> None: ...


SQLITE_LOCK_TIMEOUT: float = 30
"""Seconds a SQLite write waits for another writer's transaction before "database is locked"."""
_CREATE_PATIENCE = 30.0
"""Seconds a new SQLite store keeps retrying a schema creation that lost a WAL-switch race."""


class SQLiteBackend:
    """The embedded default. One file; WAL mode (set by eventsourcing) for readers beside a writer."""

    placeholder = "?"

    def __init__(self, url: StoreURL, raw_url: str) -> None:
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.url = raw_url
        check_sqlite_path(url.path, raw_url, ours=(EVENTS_TABLE, ARTIFACTS_TABLE, META_TABLE,
                                                         TOKEN_COUNTS_TABLE))
        self.datastore = SQLiteDatastore(  # lock_timeout: annotated int, passed to sqlite3's float timeout
            url.path, lock_timeout=SQLITE_LOCK_TIMEOUT, originator_id_type="text",  # type: ignore[arg-type]
            pool_size=2, max_overflow=8, pool_timeout=30.0,
        )
        self.recorder = SQLiteApplicationRecorder(self.datastore, events_table_name=EVENTS_TABLE)

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
                        c.execute(create_table_sql(TOKEN_COUNTS_TABLE, blob="BLOB", integer="INTEGER"))
                return
            except StoreError as exc:
                locked = "database is locked" in str(exc.__cause__ or "")
                if not locked or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def table(self, name: str) -> str:
        return name

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with translate_errors("query", self.url), self.datastore.transaction(commit=False) as c:
            c.execute(sql, tuple(params))
            return [tuple(row) for row in c.fetchall()]

    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]]) -> None:
        with translate_errors("store artifact", self.url), self.datastore.transaction(commit=True) as c:
            for row in rows:
                c.execute(
                    f"INSERT OR IGNORE INTO {ARTIFACTS_TABLE} (hash, size, media_type, data) "
                    "VALUES (?, ?, ?, ?)",
                    row,
                )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with translate_errors("execute", self.url), self.datastore.transaction(commit=True) as c:
            c.execute(sql, tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` once per row, in one transaction."""
        with translate_errors("execute", self.url), self.datastore.transaction(commit=True) as c:
            c.executemany(sql, [tuple(r) for r in rows])

    def close(self) -> None:
        self.datastore.close()


class PostgresBackend:
    """Shared store for many workers. Requires the ``postgres`` extra (psycopg 3 + pool)."""

    placeholder = "%s"

    def __init__(self, url: StoreURL, raw_url: str, *, role: str | None = None) -> None:
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
        self._probe(url)
        # No pool_open_timeout: with one, eventsourcing calls the pool's wait() on every
        # connection it takes, and two threads doing so while a connection is out trip
        # psycopg_pool's `assert not self._pool_full_event` (a bare AssertionError from a store
        # shared by threads). _probe above already fails fast when the server is unreachable.
        self.datastore = _datastore_class(role)(
            dbname=url.dbname, host=url.host, port=url.port, user=url.user,
            password=url.password, schema=url.schema, originator_id_type="text",
            pool_size=2, max_overflow=8, connect_timeout=5.0,
        )
        try:  # the recorder connects as it is made (it registers the row type's adapters)
            self.recorder = recorder_class()(self.datastore, events_table_name=EVENTS_TABLE)
        except (es.InterfaceError, es.OperationalError) as exc:
            self.datastore.close()  # the pool would go on retrying in its threads
            raise StoreUnavailableError(f"cannot reach {self._safe_url()}: {exc}") from exc

    def _probe(self, url: StoreURL) -> None:
        """Connect once, plainly, before the pool does: a missing database or role, a wrong
        password or a closed port then fails at once with the server's reason, where the
        pool retried for its 10 s open timeout and said only that it timed out."""
        import psycopg

        try:
            with psycopg.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                                 dbname=url.dbname, connect_timeout=5) as conn:
                row = conn.execute("SELECT quote_ident(%s)", (url.schema,)).fetchone()
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())  # the server's message spans lines
            raise StoreUnavailableError(f"cannot reach {self._safe_url()}: {reason}") from exc
        if row is None or row[0] != url.schema:  # a keyword: quoted by the server
            raise StoreConfigError(
                f"invalid schema {url.schema!r} in the store URL: a PostgreSQL keyword, which "
                "eventsourcing cannot use unquoted; choose another name")

    def create_schema(self) -> None:
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
                    c.execute(create_table_sql(f'"{self.schema}".{TOKEN_COUNTS_TABLE}', blob="BYTEA",
                                               integer="BIGINT"))
            except psycopg.OperationalError as exc:
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

    def _idempotent(self, what: str, work: Callable[[], _T]) -> _T:
        """Run ``work`` (a read, or an insert that may run twice), again on a fresh connection when
        the one it took was closed by the server (a restart, ``pg_terminate_backend``).

        Why: the pool hands out idle connections unchecked, and after a restart it holds only
        dead ones; eventsourcing retries its own reads and inserts, but our queries failed once
        per pooled connection, on a server that was back. The pool drops each dead connection as
        it comes back, so at most ``max_size`` of them are met. A connection the pool cannot get
        at all (``PoolTimeout``: the server is down) is not retried: that is the outage to report."""
        import psycopg
        import psycopg_pool

        attempts = self.datastore.pool.max_size + 1
        for attempt in range(1, attempts + 1):
            try:
                with translate_errors(what, self.url):
                    try:
                        return work()
                    except psycopg.OperationalError as exc:
                        raise StoreUnavailableError(f"{what} ({self._safe_url()}): {exc}") from exc
                    except psycopg.Error as exc:
                        raise StoreError(f"{what} ({self._safe_url()}): {exc}") from exc
            except StoreUnavailableError as exc:
                causes = _causes(exc)
                if attempt == attempts or any(isinstance(c, psycopg_pool.PoolTimeout) for c in causes):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        def work() -> list[tuple[Any, ...]]:
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, tuple(params))
                return [tuple(row.values()) for row in c.fetchall()]

        return self._idempotent("query", work)

    def put_artifacts(self, rows: Sequence[tuple[str, int, str, bytes]]) -> None:
        def work() -> None:  # content-addressed, ON CONFLICT DO NOTHING: a second run is harmless
            with self.datastore.transaction(commit=True) as c:
                for row in rows:
                    c.execute(
                        f'INSERT INTO "{self.schema}".{ARTIFACTS_TABLE} '
                        "(hash, size, media_type, data) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (hash) DO NOTHING",
                        row,
                    )

        self._idempotent("store artifact", work)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        import psycopg

        with translate_errors("execute", self.url):
            try:
                with self.datastore.transaction(commit=True) as c:
                    c.execute(sql, tuple(params))
            except psycopg.Error as exc:
                raise StoreError(str(exc)) from exc

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` once per row, in one transaction."""
        with translate_errors("execute", self.url), self.datastore.transaction(commit=True) as c:
            c.executemany(sql, [tuple(r) for r in rows])

    def close(self) -> None:
        self.datastore.close()


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its ``__cause__`` chain."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__
    return chain


def _datastore_class(role: str | None) -> type[Any]:
    """eventsourcing's PostgresDatastore, plus ``SET ROLE`` on every new pooled connection.

    The role is a tenant's (see :mod:`contextfold.store.tenants`): from the first
    statement on, the connection has that role's privileges and no others.
    """
    from eventsourcing.postgres import PostgresDatastore

    if role is None:
        return PostgresDatastore
    from psycopg import sql

    set_role = sql.SQL("SET ROLE {}").format(sql.Identifier(role))

    class TenantDatastore(PostgresDatastore):
        def after_connect_func(self) -> Any:
            base = super().after_connect_func()

            def after_connect(conn: Any) -> None:
                base(conn)
                conn.execute(set_role)

            return after_connect

    return TenantDatastore


def open_backend(url: str, *, tenant: str | None = None,
                 provision: bool = False) -> SQLiteBackend | PostgresBackend:
    """The backend for ``url``; with ``tenant`` on PostgreSQL, the tenant's schema and role
    (provisioned first when ``provision``)."""
    parsed = parse_store_url(url)
    if parsed.scheme == "sqlite":
        return SQLiteBackend(parsed, url)
    if tenant is None:
        return PostgresBackend(parsed, url)
    from dataclasses import replace

    from contextfold.store.tenants import provision_postgres_tenant, tenant_schema

    name = provision_postgres_tenant(parsed, tenant) if provision else tenant_schema(tenant, parsed.schema)
    return PostgresBackend(replace(parsed, schema=name), url, role=name)
