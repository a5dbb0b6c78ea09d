"""Listing the runs of a store that holds many: the newest few (``limit``) and one prefix's runs
read without reading every run's rows.

Why: a store in production for a year holds thousands of runs of many agents and hundreds of
thousands of events. ``runs`` read every event row of the store (grouped by run) and filtered
the prefix in Python, so ``runs agent-03/`` cost the whole store, and there was no way to ask
for the runs started last but reading all of them (``runs | tail``). The cost is counted here
as SQLite's virtual-machine steps (a progress handler called at each step: deterministic, the
same data gives the same count), never timed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.sqlite import SQLiteConnectionPool

from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.store.backends import SQLiteBackend
from contextfold.store.event_store import EventStore
from contextfold.store_api import open_store

AGENTS = 10


def _log(n: int) -> list[Any]:
    return [RunStarted(model="gpt-4o"), UserInput(f"task {n}"),
            ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),)),
            ToolResult(call_id="c1", content=f"output {n}\n" * 20), ModelResponse(text="done")]


def _fill(store: EventStore, runs: int) -> list[str]:
    """``runs`` runs of 5 events, round-robin over ``AGENTS`` prefixes, 100 per transaction."""
    ids = [f"agent-{n % AGENTS:02d}/run-{n:05d}" for n in range(runs)]
    for start in range(0, runs, 100):
        store.append_new_runs([(run_id, _log(n)) for n, run_id in enumerate(ids[start:start + 100], start)])
    return ids


@contextlib.contextmanager
def _steps() -> Iterator[list[int]]:
    """Counts SQLite's virtual-machine steps on the connections of stores opened meanwhile."""
    counted = [0]
    create = SQLiteConnectionPool._create_connection

    def counting(self: SQLiteConnectionPool) -> Any:
        conn = create(self)

        def step() -> int:
            counted[0] += 1
            return 0

        conn._sqlite_conn.set_progress_handler(step, 1)  # eventsourcing's wrapper
        return conn

    with pytest.MonkeyPatch.context() as m:
        m.setattr(SQLiteConnectionPool, "_create_connection", counting)
        yield counted


def _cost(path: Path, call: Any) -> int:
    with _steps() as counted, EventStore(f"sqlite:///{path}", create_schema=False) as store:
        store.version("warm-up")  # the pool's connection made and the schema read outside the count
        counted[0] = 0
        call(store)
        return counted[0]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """A SQLite store of 40 runs and one of 800, the same runs first."""
    made = {}
    for size in (40, 800):
        path = tmp_path_factory.mktemp("many") / "runs.db"
        with EventStore(f"sqlite:///{path}") as store:
            _fill(store, size)
        made[size] = path
    return made


def test_the_newest_runs_cost_the_same_in_a_store_twenty_times_larger(stores: dict[int, Path]) -> None:
    small = _cost(stores[40], lambda s: s.runs(limit=3))
    large = _cost(stores[800], lambda s: s.runs(limit=3))
    whole_small = _cost(stores[40], lambda s: s.runs())
    whole_large = _cost(stores[800], lambda s: s.runs())
    assert whole_large > 10 * whole_small  # the whole listing reads every run: the scale is there
    assert large < 2 * small, (small, large)  # the newest three: their rows, not the store's


@pytest.fixture(scope="module")
def newest_is_long(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Two SQLite stores of 40 runs, the same but for the newest run's length: 5 events or 3,005
    (an agent's run being written while a dashboard lists)."""
    made = {}
    for extra in (0, 1500):
        path = tmp_path_factory.mktemp("long") / "runs.db"
        with EventStore(f"sqlite:///{path}") as store:
            _fill(store, 39)
            turns = [e for i in range(extra) for e in (
                ModelResponse(tool_calls=(ToolCall(call_id=f"t{i}", name="sh", arguments="{}"),)),
                ToolResult(call_id=f"t{i}", content="ok"))]
            store.append_new_runs([("agent-09/run-00039", [*_log(39), *turns])])
        made[extra] = path
    return made


def test_a_long_run_among_the_newest_costs_the_listing_nothing_more(newest_is_long: dict[int, Path]) -> None:
    """The listing reads each run's first row (``store_tables.FIRST_ROWS_INDEX``) and its last
    position, never its other events: the newest runs were found by reading back every event
    written since they started, and each one's count by reading its rows; the whole listing
    grouped every row of the store."""
    for listing in (lambda s: s.runs(limit=3), lambda s: s.runs()):
        short, long = (_cost(newest_is_long[extra], listing) for extra in (0, 1500))
        assert long < short * 1.2, (short, long)
    with EventStore(f"sqlite:///{newest_is_long[1500]}") as store:
        assert store.runs(limit=1)[0].events == 3005


def _has_first_rows_index(store: EventStore) -> bool:
    from contextfold.store.store_tables import FIRST_ROWS_INDEX

    if isinstance(store.backend, SQLiteBackend):
        indexes = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
        return bool(store.backend.query(indexes, (FIRST_ROWS_INDEX,))[0][0])
    return store.backend.tables_present(FIRST_ROWS_INDEX)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_made_before_the_index_of_first_rows_lists_the_same(store_url: str, read_only: bool) -> None:
    """A store of an older version (no index of first rows) gets the index when opened to write;
    opened without creating anything (a reader) it lists the same runs without it."""
    from contextfold.store.store_tables import FIRST_ROWS_INDEX

    with EventStore(store_url) as store:
        ids = _fill(store, 12)
        store.append(ids[2], [UserInput("later")])
        expected = store.runs()
        assert _has_first_rows_index(store)
        schema = store.backend.table("").rpartition(".")[0]
        store.backend.execute(f"DROP INDEX {schema + '.' if schema else ''}{FIRST_ROWS_INDEX}")
        assert not _has_first_rows_index(store)
    with EventStore(store_url, create_schema=not read_only) as store:
        assert store.runs() == expected and store.runs(limit=5) == expected[-5:]
        assert [r.run_id for r in expected] == ids and expected[2].events == 6
        assert _has_first_rows_index(store) is not read_only


def test_one_prefix_costs_its_own_runs_not_the_stores(stores: dict[int, Path]) -> None:
    whole = _cost(stores[800], lambda s: s.runs())
    one_agent = _cost(stores[800], lambda s: s.runs("agent-03/"))
    assert one_agent * 4 < whole, (one_agent, whole)  # a tenth of the runs: not the whole store


def test_limit_and_prefix_list_what_the_whole_listing_would(store: EventStore) -> None:
    ids = _fill(store, 57)
    store.append(ids[3], [UserInput("later"), ModelResponse(text="again")])  # an old run written last
    whole = store.runs()
    assert [r.run_id for r in whole] == ids  # in the order the runs started
    assert {r.run_id: r.events for r in whole}[ids[3]] == 7
    assert store.runs(limit=4) == whole[-4:]
    assert store.runs(limit=1000) == whole
    assert store.runs(limit=0) == []
    assert store.runs("agent-03/") == [r for r in whole if r.run_id.startswith("agent-03/")]
    assert store.runs("agent-03/", limit=2) == [r for r in whole if r.run_id.startswith("agent-03/")][-2:]
    assert store.runs("agent-03/run-00003") == [r for r in whole if r.run_id == ids[3]]
    assert store.runs("agent-0") == whole
    # no wildcard, no collation: "_" and "%" are characters, and case counts
    assert store.runs("agent_0") == store.runs("agent%") == store.runs("AGENT") == []
    assert store.runs("agent-09/run-00059") == []
    assert store.runs("zzz", limit=3) == [] and store.runs("é") == []


@pytest.mark.parametrize("bad", [-1, True, 2.0, "3"])
def test_a_limit_that_is_not_a_count_is_refused(store: EventStore, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        store.runs(limit=bad)


def test_the_store_handle_lists_as_its_event_store(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        ids = _fill(store.events, 12)
        assert [r.run_id for r in store.runs(limit=2)] == ids[-2:]
        assert [r.run_id for r in store.runs("agent-01/")] == [i for i in ids if i.startswith("agent-01/")]


def _plan_nodes(plan: dict[str, Any]) -> Iterator[str]:
    yield f"{plan['Node Type']} {plan.get('Scan Direction', '')}".strip()
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


@pytest.mark.postgres
def test_postgres_reads_the_newest_runs_by_its_indexes(pg_url: str) -> None:
    """PostgreSQL's plan of the newest runs' query, on a store of 800 runs with its statistics
    taken (as autovacuum takes them): the notification index read backwards, each run's rows by
    the primary key; no sequential scan of the events."""
    with EventStore(pg_url) as store:
        _fill(store, 800)
        table = store.backend.table("contextfold_events")
        store.backend.execute(f"ANALYZE {table}")
        ran, query = _spied(store)
        assert [r.run_id for r in store.runs(limit=3)] == [f"agent-{n % AGENTS:02d}/run-{n:05d}"
                                                           for n in (797, 798, 799)]
        store.backend.query = query  # type: ignore[method-assign]
        [(sql, params)] = [(s, p) for s, p in ran if table in s]
        plan = query(f"EXPLAIN (FORMAT JSON) {sql}", params)[0][0][0]["Plan"]
        nodes = list(_plan_nodes(plan))
        assert "Seq Scan" not in nodes and "Index Scan Backward" in nodes, nodes


def _spied(store: EventStore) -> tuple[list[tuple[str, tuple[Any, ...]]], Any]:
    """The statements ``store``'s backend queries from now on, and its own ``query``."""
    ran: list[tuple[str, tuple[Any, ...]]] = []
    query = store.backend.query

    def spy(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        ran.append((sql, tuple(params)))
        return query(sql, params)

    store.backend.query = spy  # type: ignore[method-assign]
    return ran, query


@pytest.mark.postgres
def test_postgres_reads_a_prefix_by_the_run_id_index_under_a_c_collation(pg_url: str) -> None:
    """The test database's collation is C.UTF-8: run ids compare as bytes, so a prefix is a range
    of the primary key, as on SQLite."""
    with EventStore(pg_url) as store:
        ids = _fill(store, 300)
        table = store.backend.table("contextfold_events")
        store.backend.execute(f"ANALYZE {table}")
        ran, query = _spied(store)
        assert [r.run_id for r in store.runs("agent-03/")] == [i for i in ids if i.startswith("agent-03/")]
        [(sql, params)] = [(s, p) for s, p in ran if table in s]
        nodes = list(_plan_nodes(query(f"EXPLAIN (FORMAT JSON) {sql}", params)[0][0][0]["Plan"]))
        assert "Seq Scan" not in nodes, nodes


@pytest.mark.postgres
def test_postgres_lists_a_prefix_exactly_under_a_collation_that_is_not_bytewise(pg_url: str) -> None:
    """An events table whose run ids follow ICU's order (a database made with an ICU or a locale's
    collation): ICU sorts ";" before ":" and "ab" between "A" and "B", so the range a prefix makes
    in byte order holds none of its ids ("job:" up to "job;"), or others ("A" up to "B"); the
    listing is still exactly the ids that start with the prefix."""
    import psycopg
    from psycopg import sql

    schema = pg_url.rpartition("schema=")[2]
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        admin.execute(sql.SQL(  # eventsourcing's table, its run ids under ICU's root order
            "CREATE TABLE {}.contextfold_events (originator_id text COLLATE \"und-x-icu\" NOT NULL, "
            "originator_version bigint NOT NULL, topic text, state bytea, notification_id bigserial, "
            "PRIMARY KEY (originator_id, originator_version))").format(sql.Identifier(schema)))
    ids = ["job:1", "job=2", "job:3/x", "Ab", "ab", "b1", "AZ", "B", "job.4", "job-5"]
    with EventStore(pg_url) as store:
        for run_id in ids:
            store.append(run_id, [UserInput(run_id)])
        for prefix in ("job:", "job=", "A", "B", "job", "b", "a", "job-"):
            assert [r.run_id for r in store.runs(prefix)] == [i for i in ids if i.startswith(prefix)], prefix
            newest = [r.run_id for r in store.runs(prefix, limit=1)]
            assert newest == [i for i in ids if i.startswith(prefix)][-1:], prefix
