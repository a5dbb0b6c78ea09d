"""The tables of a contextfold store and what both backends say alike.

Why apart: the SQLite and PostgreSQL backends (:mod:`.backends`, :mod:`.pg_backend`) both name
the tables and refuse a store not made yet in the same words; here neither imports the other.
"""

from __future__ import annotations

from contextfold.domain.errors import StoreConfigError
from contextfold.store.tenants import META_TABLE
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

__all__ = ["ARTIFACTS_TABLE", "EVENTS_TABLE", "NO_WAIT", "STORE_TABLES", "no_store"]

EVENTS_TABLE = "contextfold_events"
ARTIFACTS_TABLE = "contextfold_artifacts"
STORE_TABLES = (EVENTS_TABLE, ARTIFACTS_TABLE, META_TABLE, TOKEN_COUNTS_TABLE)
"""The tables a contextfold store holds: a SQLite file with none of them is no store yet."""

NO_WAIT = 0.05
"""Seconds a write that need not be made (a cache's, ``execute_many(wait=False)``) waits for a
lock or connection another writer holds before it is given up."""


def no_store(where: str) -> StoreConfigError:
    """The refusal of a store not made yet (``must_exist``), SQLite's and PostgreSQL's alike."""
    return StoreConfigError(f"no store {where}: nothing has been recorded there; "
                            "`contextfold import` or `contextfold demo` creates one")
