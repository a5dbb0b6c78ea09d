"""A PostgreSQL schema a command that starts runs created, dropped again when nothing was recorded.

Why: an ``import`` into a new ``?schema=`` interrupted (Ctrl-C, or input refused after the store
was opened) left the schema behind with contextfold's empty tables, and every later command took
it for a store that had been recorded into ("no runs in ...") where they say there is no store
there: as the SQLite file of :mod:`contextfold.cli_new_store` did.

Only a schema absent when the command started is dropped (:func:`schema_absent`, asked before),
and only while it holds nothing but contextfold's tables and no event: under the lock that
schema creation takes, with the events table locked, so another process's append to it (it made
the same schema meanwhile) is either committed and seen, or waits and then fails, never lost
silently. Any doubt (a server that does not answer, a lock not had at once, another table in
the schema) leaves the schema as it is.
"""

from __future__ import annotations

from typing import Any

from contextfold.store.pg_pool import libpq_dead_peer, libpq_timeout
from contextfold.store.store_tables import ARTIFACTS_TABLE, EVENTS_TABLE
from contextfold.store.store_url import StoreURL
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

__all__ = ["drop_if_unrecorded", "schema_absent"]

_OURS = frozenset({EVENTS_TABLE, ARTIFACTS_TABLE, TOKEN_COUNTS_TABLE})
_CREATE_LOCK = "contextfold.create_schema"
"""The advisory lock :meth:`~.pg_backend.PostgresBackend.create_schema` takes: no creation of
the schema's tables runs while it is dropped."""
_DROP_PATIENCE_MS = 2000
"""How long the drop waits for a lock before it leaves the schema (a writer holds it)."""


def _connect(url: StoreURL) -> Any:
    import psycopg

    return psycopg.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           dbname=url.dbname, connect_timeout=libpq_timeout(url.connect_timeout),
                           **libpq_dead_peer(url.network_timeout))


def schema_absent(url: StoreURL) -> bool:
    """Whether the server says the URL's schema does not exist (False when it could not say)."""
    import psycopg

    try:
        with _connect(url) as conn:
            row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (url.schema,)).fetchone()
    except psycopg.Error:  # the command itself says what is wrong with the server
        return False
    return row is None


def drop_if_unrecorded(url: StoreURL) -> bool:
    """Drop the URL's schema if it holds no table but contextfold's and no event; whether it did."""
    import psycopg
    from psycopg import sql

    schema = sql.Identifier(url.schema)
    try:
        with _connect(url) as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {_DROP_PATIENCE_MS}")
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_CREATE_LOCK,))
            tables = {name for (name,) in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')", (url.schema,))}
            if not tables <= _OURS:
                return False
            if EVENTS_TABLE in tables:
                events = sql.SQL("{}.{}").format(schema, sql.Identifier(EVENTS_TABLE))
                conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(events))
                if conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(events)).fetchone():
                    return False
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
    except psycopg.Error:  # not knowingly unrecorded: left as it is
        return False
    return True
