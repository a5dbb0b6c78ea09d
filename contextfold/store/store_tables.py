"""The tables of a contextfold store and what both backends say alike.

Why apart: the SQLite and PostgreSQL backends (:mod:`.backends`, :mod:`.pg_backend`) both name
the tables and refuse a store not made yet in the same words; here neither imports the other.
"""

from __future__ import annotations

from contextfold.domain.errors import StoreConfigError
from contextfold.store.event_times import EVENT_TIMES_TABLE
from contextfold.store.tenants import META_TABLE
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

__all__ = ["ARTIFACTS_TABLE", "EVENTS_TABLE", "FIRST_ROWS_INDEX", "NO_WAIT", "STORE_TABLES",
           "first_rows_index_sql", "no_store"]

EVENTS_TABLE = "contextfold_events"
ARTIFACTS_TABLE = "contextfold_artifacts"
STORE_TABLES = (EVENTS_TABLE, ARTIFACTS_TABLE, META_TABLE, TOKEN_COUNTS_TABLE, EVENT_TIMES_TABLE)
"""The tables a contextfold store holds: a SQLite file with none of them is no store yet."""

FIRST_ROWS_INDEX = f"{EVENTS_TABLE}_first_rows"
"""A partial index of each run's first row (position 1) by commit order (SQLite's rowid,
PostgreSQL's notification id): the runs in the order they were first written, one entry a run.

Why: the listing of runs (:mod:`.run_listing`) read them from the events, which grow with every
event of every run: the whole listing grouped every row of the store, and the newest runs
(``runs --limit 20``) were found by reading the events back from the newest until 20 first rows
had passed, every event of the runs being written meanwhile included. With 10,000 runs and a
run of 100,000 events being written (``scripts/bench_listing.py``), ``runs --limit 20`` read
100,000 rows (306 ms on PostgreSQL, 168 ms on SQLite). Made where missing when a store is opened
to write (``create_schema``), so a store of an older version gets it; without it (a read-only
opening of such a store) the same queries read the events as before."""

NO_WAIT = 0.05
"""Seconds a write that need not be made (a cache's, ``execute_many(wait=False)``) waits for a
lock or connection another writer holds before it is given up."""


def no_store(where: str) -> StoreConfigError:
    """The refusal of a store not made yet (``must_exist``), SQLite's and PostgreSQL's alike."""
    return StoreConfigError(f"no store {where}: nothing has been recorded there; "
                            "`contextfold import` or `contextfold demo` creates one")


def first_rows_index_sql(table: str, order_column: str) -> str:
    """The statement that makes :data:`FIRST_ROWS_INDEX` on ``table`` (schema-qualified on
    PostgreSQL: the index goes in the table's schema) where it is missing. Each entry of a SQLite
    index holds its row's rowid: an index of ``originator_version`` where it is 1 is in rowid order."""
    column = "originator_version" if order_column == "rowid" else order_column
    return f"CREATE INDEX IF NOT EXISTS {FIRST_ROWS_INDEX} ON {table} ({column}) WHERE originator_version = 1"
