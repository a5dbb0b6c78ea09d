"""The listing of a store's runs (``contextfold runs``, ``Store.runs``): one prefix's runs, or the
runs started last, read without reading the other runs' rows.

Why: a store in production for a year holds thousands of runs of many agents and hundreds of
thousands of events. The listing read every event row of the store, grouped by run, and the
command filtered the prefix in Python: ``runs agent-03/`` cost the whole store, and the newest
few runs could only be had by reading all of them (``runs | tail``); at 10,000 runs (614,000
events, 1.8 GB) that was 0.2 s of SQL and 1.3 s of command, growing with every run recorded
(``scripts/measure_big_store.py``). So both are asked of the database:

- a prefix is a range of the run-id index where run ids compare as bytes: SQLite's TEXT, and
  PostgreSQL's under a C or POSIX collation (run ids are ASCII, so the ids that start with the
  prefix are those from it up to the prefix with its last character's successor). Under a
  locale's or ICU's order no range holds exactly those ids (ICU puts ";" before ":", so the
  range of "job:" is empty there; "b" falls between "A" and "B"), so there it is
  ``starts_with`` over the rows;
- the runs started last are the rows at position 1 read from the newest back (SQLite's rowid,
  PostgreSQL's notification id), ``limit`` of them, then each one's count by the run-id index;
- the whole listing is every row at position 1, then each one's count by the run-id index.

Both read the rows at position 1 by their own partial index (``store_tables.FIRST_ROWS_INDEX``):
without it, the newest runs were found by reading back every event written since they started
(those of a run being written too), and the whole listing grouped every row of the store.
"""

from __future__ import annotations

import re
from typing import Any
from weakref import WeakKeyDictionary

from contextfold.domain.errors import InvalidInputError
from contextfold.store.backends import EVENTS_TABLE, PostgresBackend, SQLiteBackend

__all__ = ["list_runs"]

_MOST_ROWS = 2**63 - 1
"""The largest LIMIT the drivers take (a SQLite INTEGER, a PostgreSQL bigint)."""


def list_runs(backend: SQLiteBackend | PostgresBackend, order_column: str, run_ids: re.Pattern[str],
              prefix: str = "", limit: int | None = None) -> list[tuple[str, int]]:
    """(run id, event count) of the runs whose id starts with ``prefix``, in the order they were
    first written (``order_column``: the backend's commit order); the last ``limit`` of them
    when given. ``run_ids``: what a run id is (``event_reads.RUN_ID_PATTERN``); a prefix it does
    not match (a character no run id holds, or a first one no id starts with) starts no run's id."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"limit must be a count of runs (an integer >= 0), got {limit!r}")
    matching = _prefix_filter(backend, prefix, run_ids)
    if matching is None or limit == 0:
        return []
    where, params = matching
    table = backend.table(EVENTS_TABLE)
    if limit is None:
        # each run's first row in commit order, then its last position by one probe of the
        # run-id index: what the rows grouped by run said, without reading them. All runs: by the
        # index of first rows; a prefix's: by a range of the run-id index (``+`` keeps SQLite from
        # taking the index of first rows, every run's, for it)
        first = "originator_version = 1" if not where else f"+originator_version = 1 AND {where}"
        rows = backend.query(
            f"SELECT f.originator_id, (SELECT MAX(e.originator_version) FROM {table} AS e "
            f"WHERE e.originator_id = f.originator_id) AS events, f.o AS o FROM (SELECT originator_id, "
            f"{order_column} AS o FROM {table} WHERE {first}) AS f ORDER BY 3", params)
    else:
        # the newest first rows, then each one's last position by one probe of the run-id index
        # (the columns named: PostgreSQL's rows come as dicts). Not a join grouped by run: that
        # read every row of each run listed, and the run an agent is writing is often among the
        # newest (a run of 100,000 events made `runs --limit 20` cost 330 ms instead of 43 ms)
        rows = backend.query(
            f"SELECT n.originator_id, (SELECT MAX(e.originator_version) FROM {table} AS e "
            "WHERE e.originator_id = n.originator_id) AS events, n.o AS o "
            f"FROM (SELECT originator_id, {order_column} AS o FROM {table} WHERE originator_version = 1 "
            f"{'AND ' + where if where else ''} ORDER BY {order_column} DESC LIMIT {backend.placeholder}) "
            "AS n ORDER BY 3", (*params, min(limit, _MOST_ROWS)))
    return [(str(r[0]), int(r[1])) for r in rows]


def _prefix_filter(backend: SQLiteBackend | PostgresBackend, prefix: str,
                   run_ids: re.Pattern[str]) -> tuple[str, tuple[str, ...]] | None:
    """The SQL condition (and its parameters) of the run ids that start with ``prefix``; None
    when no run id can (a character a run id cannot hold)."""
    if not isinstance(prefix, str):
        raise InvalidInputError(f"a run-id prefix is a string, got {type(prefix).__name__}")
    if not prefix:
        return "", ()
    if not run_ids.fullmatch(prefix):  # a prefix of an id is an id's shape, only shorter
        return None
    p = backend.placeholder
    if isinstance(backend, PostgresBackend) and not _bytewise(backend):
        return f"starts_with(originator_id, {p})", (prefix,)
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return f"originator_id >= {p} AND originator_id < {p}", (prefix, upper)


_BYTEWISE: WeakKeyDictionary[PostgresBackend, bool] = WeakKeyDictionary()


def _bytewise(backend: PostgresBackend) -> bool:
    """Whether the events table's run ids compare as bytes on PostgreSQL: their column's collation,
    or the database's when it is the default, is libc's C or POSIX (C.UTF-8 too). Asked once per
    store; the database's row read whole (``to_jsonb``), since its locale provider is a column
    from PostgreSQL 15 on."""
    known = _BYTEWISE.get(backend)
    if known is None:
        rows = backend.query(
            "SELECT c.collname, c.collprovider, c.collcollate, (SELECT to_jsonb(d) FROM pg_database d "
            "WHERE d.datname = current_database()) AS db FROM pg_attribute a JOIN pg_collation c "
            "ON c.oid = a.attcollation WHERE a.attrelid = to_regclass(%s) AND a.attname = 'originator_id'",
            (backend.table(EVENTS_TABLE),))
        known = _BYTEWISE[backend] = bool(rows) and _c_collation(*rows[0])
    return known


def _c_collation(name: str, provider: str, collate: str | None, db: dict[str, Any] | None) -> bool:
    if name == "default":
        if db is None or db.get("datlocprovider", "c") != "c":  # an ICU database
            return False
        collate = str(db.get("datcollate", ""))
    elif provider != "c":
        return False
    return collate in ("C", "POSIX") or str(collate).startswith("C.")
