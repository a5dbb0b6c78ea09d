"""A PostgreSQL schema a command that starts runs created, dropped again when nothing was recorded.

Why: an ``import`` into a new ``?schema=`` interrupted (Ctrl-C, or input refused after the store
was opened) left the schema behind with contextfold's empty tables, and every later command took
it for a store that had been recorded into ("no runs in ...") where they say there is no store
there: as the SQLite file of :mod:`contextfold.cli_new_store` did.

Only a schema absent when the command started is dropped (:func:`schema_absent`, asked before),
and only while it holds nothing but what contextfold creates and no event: under the lock that
schema creation takes, with the events table locked, so another process's append to it (it made
the same schema meanwhile) is either committed and seen, or waits and then fails, never lost
silently. Any doubt (a server that does not answer, a lock not had at once, any object that is
not one contextfold made) leaves the schema as it is.

"Nothing but what contextfold creates" is read from ``pg_depend``, not from the tables alone:
the check listed tables and views, so a sequence, function, type or domain a user had put in
the schema meanwhile (or a view elsewhere reading contextfold's table, a trigger on it) was
dropped with it by ``DROP SCHEMA ... CASCADE``. Now every object such a drop would reach (what
lives in the schema, and what depends on that, wherever it lives) must be one of the store's
own, each at most once; and the drop itself is of those objects by name, then of the schema
``RESTRICT``, so an object made after the check makes the drop fail, never go with it.
"""

from __future__ import annotations

from typing import Any

from contextfold.store.event_times import EVENT_TIMES_TABLE
from contextfold.store.pg_pool import libpq_dead_peer, libpq_timeout
from contextfold.store.store_tables import ARTIFACTS_TABLE, EVENTS_TABLE, FIRST_ROWS_INDEX
from contextfold.store.store_url import StoreURL
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

__all__ = ["drop_if_unrecorded", "schema_absent"]

_TABLES = (EVENTS_TABLE, ARTIFACTS_TABLE, TOKEN_COUNTS_TABLE, EVENT_TIMES_TABLE)
_ID_TYPE = "text"
"""The originator id type the store's recorder is made with (``pg_backend``): it names
eventsourcing's row type and insert function."""
_ROW_TYPE = f"stored_event_{_ID_TYPE}"
_INSERT_FUNCTION = f"es_insert_events_{_ID_TYPE}"
_SEQUENCE = f"{EVENTS_TABLE}_notification_id_seq"


def _own_objects() -> frozenset[tuple[str, str]]:
    """(kind, name) of every object a store's schema holds, as ``pg_identify_object`` names its
    kind (a name is the object's own, unqualified; a default value's is its column's).

    What eventsourcing's recorder and ``pg_backend`` create: the four tables with their row and
    array types, primary keys (constraint and index) and the events table's notification-id
    sequence, default and index, and its index of first rows; eventsourcing's composite row type
    and its insert function.
    (Each table's TOAST table and index live in ``pg_toast`` and are left to their table.)"""
    own = {("table", t) for t in _TABLES} | {("type", t) for t in _TABLES} | {
        ("type", f"_{t}") for t in _TABLES} | {("table constraint", f"{t}_pkey") for t in _TABLES} | {
        ("index", f"{t}_pkey") for t in _TABLES}
    return frozenset(own | {
        ("sequence", _SEQUENCE), ("default value", "notification_id"),
        ("index", f"{EVENTS_TABLE}_notification_id_idx"), ("index", FIRST_ROWS_INDEX),
        ("composite type", _ROW_TYPE), ("type", _ROW_TYPE), ("type", f"_{_ROW_TYPE}"),
        ("function", _INSERT_FUNCTION)})


_OWN_OBJECTS = _own_objects()
_REACHED = """
WITH RECURSIVE reached(classid, objid, objsubid) AS (
    SELECT d.classid, d.objid, d.objsubid FROM pg_depend d
     WHERE d.refclassid = 'pg_namespace'::regclass
       AND d.refobjid = (SELECT oid FROM pg_namespace WHERE nspname = %s)
    UNION
    SELECT d.classid, d.objid, d.objsubid FROM pg_depend d
      JOIN reached r ON d.refclassid = r.classid AND d.refobjid = r.objid
     WHERE d.deptype <> 'p'
)
SELECT o.type, o.schema, COALESCE(o.name, a.object_names[cardinality(a.object_names)])
  FROM reached r, pg_identify_object(r.classid, r.objid, r.objsubid) o,
       pg_identify_object_as_address(r.classid, r.objid, r.objsubid) a
"""
"""Every object ``DROP SCHEMA ... CASCADE`` would reach: what depends on the schema (all that
lives in it records that), and what depends on those, wherever it lives; as (kind, schema,
name). An object depending on another is never dropped with it without a ``pg_depend`` row."""
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


def _only_own_objects(reached: list[tuple[str, str | None, str | None]], schema: str) -> bool:
    """Whether ``reached`` (rows of :data:`_REACHED`) is the store's own objects, each once."""
    seen: set[tuple[str, str]] = set()
    for kind, where, name in reached:
        if where == "pg_toast" and kind in ("toast table", "index"):
            continue  # a table's out-of-line storage: goes with (and only with) its table
        key = (kind, name or "")
        if where not in (schema, None) or key not in _OWN_OBJECTS or key in seen:
            return False
        seen.add(key)
    return True


def drop_if_unrecorded(url: StoreURL) -> bool:
    """Drop the URL's schema if it holds nothing but a store's own objects and no event; whether
    it did."""
    import psycopg
    from psycopg import sql

    schema = sql.Identifier(url.schema)

    def own(name: str) -> sql.Composable:
        return sql.SQL("{}.{}").format(schema, sql.Identifier(name))

    try:
        with _connect(url) as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {_DROP_PATIENCE_MS}")
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_CREATE_LOCK,))
            present = {name for (name,) in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname = ANY(%s)",
                (url.schema, list(_TABLES)))}
            # Locked before they are looked at: no trigger, index or rule is added to them from here.
            for table in (t for t in _TABLES if t in present):
                conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(own(table)))
            if not _only_own_objects(conn.execute(_REACHED, (url.schema,)).fetchall(), url.schema):
                return False
            if EVENTS_TABLE in present and conn.execute(
                    sql.SQL("SELECT 1 FROM {} LIMIT 1").format(own(EVENTS_TABLE))).fetchone():
                return False
            # By name, then RESTRICT: an object made in the schema, or on its type or function,
            # since the check makes the drop fail rather than go with it.
            for table in _TABLES:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {} RESTRICT").format(own(table)))
            conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {}({}[]) RESTRICT").format(
                own(_INSERT_FUNCTION), own(_ROW_TYPE)))
            conn.execute(sql.SQL("DROP TYPE IF EXISTS {} RESTRICT").format(own(_ROW_TYPE)))
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} RESTRICT").format(schema))
    except psycopg.Error:  # not knowingly unrecorded: left as it is
        return False
    return True
