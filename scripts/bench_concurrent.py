#!/usr/bin/env python3
"""One store under many agents at once: N worker processes appending, side by side with raw baselines.

Why: in production one PostgreSQL store (or one SQLite file on one machine) serves dozens of
agent processes, each appending to its own run, while dashboards list runs and auditors read.
Whether appends/s stay flat, fall or collapse as N grows, and where the time goes, was never
measured. On PostgreSQL every insert of eventsourcing's application recorder takes
``LOCK TABLE ... IN EXCLUSIVE MODE`` (its notification ids gap-free in commit order), so every
append of every run goes through one lock held until COMMIT (its WAL flush included).

Each worker (a forked process, its own store object opened after the fork) appends an agent
loop's events to its OWN run for ``--seconds``: per turn the build's ``context_built`` record (a
real manifest, made once by a real build), the model response with two tool calls, and the two
tool results, one append each (a user input on the first turn and every tenth); every append
timed. The same loop, the same event JSON, goes through:

  contextfold   ``EventStore.append`` (pairing rules, chain hash, head check, the recorder)
  raw-sql       a plain INSERT into a table keyed by (run, position) (psycopg / sqlite3), one
                transaction per append: what a user who wanted "just a table" would write
  raw-sql+lock  (PostgreSQL) the same with eventsourcing's LOCK TABLE ... EXCLUSIVE and NOTIFY in
                each transaction: what that lock costs by itself
  raw-es        (PostgreSQL) an eventsourcing ``Application``, one aggregate per run, ``save()``
                per append: the same recorder and table lock without contextfold

Reported per backend and N: appends/s (all workers), p50/p95 append latency (ms), and the
ratio contextfold/raw of appends/s. On PostgreSQL a sampler in the parent reads pg_stat_activity
every 20 ms during the contextfold case, for the workers' sessions only (their application_name):
the share of their active time seen waiting on a lock (and which: ``Lock:relation`` is a table
lock), on the WAL flush (``IO:WALSync``), on their own client (``Client:ClientRead``: the worker's
Python between statements of a transaction), or running; and how many wait on a lock on average.

``--readers``: N writers again, each with a reader process beside it, alternately listing the
runs (``runs()``, ``runs(limit=20)``) and reading one writer's run whole: writer appends/s with
and without readers, and the readers' operations/s.

Usage: .venv/bin/python scripts/bench_concurrent.py [--ns 1,2,4,8,16] [--seconds 6]
           [--pg URL | --no-pg] [--no-sqlite] [--readers] [--only contextfold,raw-sql,raw-sql+lock,raw-es]
The machine's core count is printed: on 2 cores, 16 processes share 2 CPUs with the server.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.domain.events import (
    AnyEvent,
    ContextBuilt,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    UserInput,
    canonical_json,
)
from contextfold.store.event_store import EventStore

DEFAULT_PG = os.environ.get("CONTEXTFOLD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
_CTX = mp.get_context("fork")
APP_NAME = "bench-concurrent"
"""The workers' sessions' application_name (libpq's ``PGAPPNAME``): the sampler counts only them,
not the other sessions of a shared server."""


# ----------------------------------------------------------------- the agent loop's events


def template_record(url: str) -> dict[str, Any]:
    """A real build's ``context_built`` fields (its manifest), made once on a small run."""
    from contextfold.store_api import open_store

    with open_store(url) as store:
        run = store.run(f"template-{uuid.uuid4().hex[:8]}")
        run.append(RunStarted(agent="bench", model="gpt-4o", encoding="cl100k_base"))
        run.append(UserInput("Fix the failing test in tests/test_parser.py and run the suite."))
        for i in range(3):
            run.append(
                ModelResponse(
                    text="Running the tests.",
                    tool_calls=[ToolCall(call_id=f"t{i}", name="pytest", arguments='{"path": "tests"}')],
                )
            )
            run.append(
                ToolResult(
                    call_id=f"t{i}",
                    content="FAILED tests/test_parser.py::test_x\n" * 20,
                    is_error=True,
                    exit_code=1,
                )
            )
        built = run.build(provider="openai-chat", window=16_000, reserve=2_000)
        record = [e.event for e in store.events.read(run.run_id) if isinstance(e.event, ContextBuilt)][-1]
        del built
        return record.model_dump(exclude={"type", "v", "turn", "log_version"})


def turn_batches(turn: int, version: int, record: dict[str, Any]) -> list[list[AnyEvent]]:
    """One turn's appends as an agent loop makes them, from the run at ``version``."""
    batches: list[list[AnyEvent]] = []
    if turn == 1:
        batches.append(
            [
                RunStarted(agent="bench", model="gpt-4o", encoding="cl100k_base"),
                UserInput("Fix the failing test in tests/test_parser.py."),
            ]
        )
    elif turn % 10 == 0:
        batches.append([UserInput(f"Turn {turn}: also check the linter.")])
    version += sum(len(b) for b in batches)
    batches.append([ContextBuilt(turn=turn, log_version=version, **record)])
    batches.append(
        [
            ModelResponse(
                text=f"Step {turn}: running the tests and reading the parser.",
                tool_calls=[
                    ToolCall(
                        call_id=f"c{turn}a", name="pytest", arguments='{"path": "tests/test_parser.py"}'
                    ),
                    ToolCall(call_id=f"c{turn}b", name="read_file", arguments='{"path": "src/parser.py"}'),
                ],
            )
        ]
    )
    batches.append(
        [
            ToolResult(
                call_id=f"c{turn}a",
                content=f"===== 1 failed, {turn} passed =====\n" * 30,
                is_error=True,
                exit_code=1,
            )
        ]
    )
    batches.append([ToolResult(call_id=f"c{turn}b", content="def parse(text):\n    return text\n" * 40)])
    return batches


# ----------------------------------------------------------------- the three writers


class Writer:
    """Appends one batch to one run; made in the worker after the fork."""

    def append(self, batch: list[AnyEvent]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Contextfold(Writer):
    def __init__(self, url: str, run_id: str) -> None:
        self.store, self.run_id = EventStore(url), run_id

    def append(self, batch: list[AnyEvent]) -> None:
        self.store.append(self.run_id, batch)

    def close(self) -> None:
        self.store.close()


RAW_TABLE = "bench_raw_events"


class RawSQL(Writer):
    """A plain table keyed by (run, position); one INSERT per event, one transaction per append."""

    locked = False

    def __init__(self, url: str, run_id: str) -> None:
        self.run_id, self.position = run_id, 0
        if url.startswith("sqlite"):
            import sqlite3

            self.conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.sql = f"INSERT INTO {RAW_TABLE} VALUES (?, ?, ?, ?)"
            self.sqlite = True
        else:
            import psycopg

            self.conn = psycopg.connect(url.split("?")[0], autocommit=True)
            self.sql = f"INSERT INTO {RAW_TABLE} VALUES (%s, %s, %s, %s)"
            self.sqlite = False

    def append(self, batch: list[AnyEvent]) -> None:
        rows = [(self.run_id, self.position + i, e.type, canonical_json(e)) for i, e in enumerate(batch, 1)]
        if self.sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(self.sql, rows)
            self.conn.execute("COMMIT")
        else:
            with self.conn.transaction(), self.conn.cursor() as c:
                if self.locked:  # what eventsourcing's recorder does in every insert
                    c.execute(f"LOCK TABLE {RAW_TABLE} IN EXCLUSIVE MODE")
                    c.execute(f"NOTIFY {RAW_TABLE}")
                c.executemany(self.sql, rows)
        self.position += len(batch)

    def close(self) -> None:
        self.conn.close()


def make_raw_table(url: str) -> None:
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {RAW_TABLE} (run TEXT, position INTEGER, kind TEXT, "
                "body BLOB, PRIMARY KEY (run, position))"
            )
    else:
        import psycopg

        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")
            conn.execute(
                f"CREATE TABLE {RAW_TABLE} (run TEXT, position BIGINT, kind TEXT, body BYTEA, "
                "PRIMARY KEY (run, position))"
            )


class RawES(Writer):
    """An eventsourcing Application on PostgreSQL: one aggregate per run, ``save()`` per append."""

    def __init__(self, url: str, run_id: str, *, create: bool = False) -> None:
        from urllib.parse import urlparse

        from eventsourcing.application import Application

        u = urlparse(url)
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": u.path.lstrip("/"),
            "POSTGRES_HOST": u.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(u.port or 5432),
            "POSTGRES_USER": u.username or "postgres",
            "POSTGRES_PASSWORD": u.password or "",
            "POSTGRES_SCHEMA": "bench_es",
            "CREATE_TABLE": "y" if create else "n",
            "POSTGRES_POOL_SIZE": "2",
        }
        self.app = Application(env=env)
        self.aggregate = _aggregate_class()()

    def append(self, batch: list[AnyEvent]) -> None:
        import json

        for e in batch:
            self.aggregate.add(e.type, json.loads(canonical_json(e)))
        self.app.save(self.aggregate)

    def close(self) -> None:
        self.app.close()


class RawSQLLocked(RawSQL):
    """:class:`RawSQL` with eventsourcing's table lock and NOTIFY in each transaction: what the
    lock alone costs, with a client that does little else."""

    locked = True


@functools.cache
def _aggregate_class() -> type[Any]:
    """The raw side's aggregate: one per run, an event per appended event (its JSON as a dict)."""
    from eventsourcing.domain import Aggregate, event

    class AgentRun(Aggregate):
        def __init__(self) -> None:
            self.n = 0

        @event("Appended")
        def add(self, kind: str, body: dict[str, Any]) -> None:
            self.n += 1

    return AgentRun


WRITERS: dict[str, Callable[[str, str], Writer]] = {
    "contextfold": Contextfold,
    "raw-sql": RawSQL,
    "raw-sql+lock": RawSQLLocked,
    "raw-es": RawES,
}


# ----------------------------------------------------------------- workers and readers


def writer_main(
    kind: str, url: str, run_id: str, record: dict[str, Any], ready: Any, go: Any, stop_at: Any, out: Any
) -> None:
    try:
        os.environ["PGAPPNAME"] = APP_NAME  # read by libpq as each connection is made
        writer = WRITERS[kind](url, run_id)
        ready.release()
        go.wait()
        latencies: list[float] = []
        version, turn = 0, 0
        deadline = stop_at.value
        while time.time() < deadline:
            turn += 1
            for batch in turn_batches(turn, version, record):
                t0 = time.perf_counter()
                writer.append(batch)
                latencies.append(time.perf_counter() - t0)
                version += len(batch)
        writer.close()
        out.put(("ok", latencies, version))
    except BaseException as exc:  # reported by the parent
        ready.release()
        out.put(("error", repr(exc), 0))


def reader_main(url: str, run_ids: list[str], ready: Any, go: Any, stop_at: Any, out: Any) -> None:
    try:
        store = EventStore(url)
        ready.release()
        go.wait()
        ops: Counter[str] = Counter()
        took: dict[str, float] = Counter()
        i = 0
        while time.time() < stop_at.value:
            i += 1
            for name, call in (
                ("runs()", lambda: store.runs()),
                ("runs(limit=20)", lambda: store.runs(limit=20)),
                ("read(run)", lambda i=i: store.read(run_ids[i % len(run_ids)])),  # type: ignore[misc]
            ):
                t0 = time.perf_counter()
                try:
                    call()
                except Exception as exc:  # a run not written yet
                    if type(exc).__name__ != "RunNotFoundError":
                        raise
                took[name] += time.perf_counter() - t0
                ops[name] += 1
        store.close()
        out.put(("ok", dict(ops), dict(took)))
    except BaseException as exc:
        ready.release()
        out.put(("error", repr(exc), {}))


class LockSampler(threading.Thread):
    """What the workers' PostgreSQL backends wait on, sampled from pg_stat_activity every 20 ms."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(url.split("?")[0], autocommit=True)
        self.waits: Counter[str] = Counter()
        self.queued = 0
        self.samples = 0
        self.halt = threading.Event()

    def run(self) -> None:
        me = self.conn.info.backend_pid
        while not self.halt.wait(0.02):
            rows = self.conn.execute(
                "SELECT coalesce(wait_event_type, '') || ':' || coalesce(wait_event, '') "
                "FROM pg_stat_activity WHERE application_name = %s AND pid <> %s AND state <> 'idle'",
                (APP_NAME, me),
            ).fetchall()
            self.samples += 1
            for (wait,) in rows:
                self.waits["running" if wait == ":" else wait] += 1
                self.queued += wait.startswith("Lock:")

    def stop(self) -> None:
        self.halt.set()
        self.join()
        self.conn.close()

    def summary(self) -> str:
        total = sum(self.waits.values()) or 1
        parts = [f"{k} {100 * v / total:.0f}%" for k, v in self.waits.most_common(5)]
        return (
            f"active backends by wait: {', '.join(parts)}; "
            f"mean waiting for a lock: {self.queued / max(1, self.samples):.1f}"
        )


def run_case(
    kind: str,
    url: str,
    n: int,
    seconds: float,
    record: dict[str, Any],
    readers: bool = False,
    sample: bool = False,
) -> dict[str, Any]:
    ready, go = _CTX.Semaphore(0), _CTX.Event()
    stop_at = _CTX.Value("d", 0.0)
    out: Any = _CTX.Queue()
    tag = uuid.uuid4().hex[:6]
    run_ids = [f"bench-{kind}-{tag}-{w}" for w in range(n)]
    procs = [
        _CTX.Process(target=writer_main, args=(kind, url, r, record, ready, go, stop_at, out))
        for r in run_ids
    ]
    rout: Any = _CTX.Queue()
    rprocs = (
        [_CTX.Process(target=reader_main, args=(url, run_ids, ready, go, stop_at, rout)) for _ in range(n)]
        if readers
        else []
    )
    for p in [*procs, *rprocs]:
        p.start()
    for _ in range(len(procs) + len(rprocs)):
        ready.acquire()
    sampler = LockSampler(url) if sample and not url.startswith("sqlite") else None
    if sampler:
        sampler.start()
    stop_at.value = time.time() + seconds
    t0 = time.perf_counter()
    go.set()
    results = [out.get() for _ in procs]
    wall = time.perf_counter() - t0
    rresults = [rout.get() for _ in rprocs]
    for p in [*procs, *rprocs]:
        p.join()
    if sampler:
        sampler.stop()
    errors = [r[1] for r in [*results, *rresults] if r[0] == "error"]
    if errors:
        raise SystemExit(f"{kind} N={n}: {errors[0]}")
    lat = sorted(x for r in results for x in r[1])
    row: dict[str, Any] = {
        "appends": len(lat),
        "per_s": len(lat) / wall,
        "events": sum(r[2] for r in results),
        "p50": lat[len(lat) // 2] * 1e3,
        "p95": lat[int(len(lat) * 0.95)] * 1e3,
        "p99": lat[int(len(lat) * 0.99)] * 1e3,
        "waits": sampler.summary() if sampler else "",
    }
    if readers:
        ops: Counter[str] = Counter()
        took: Counter[str] = Counter()
        for r in rresults:
            ops.update(r[1])
            took.update(r[2])
        row["reads"] = {k: (ops[k] / wall, 1e3 * took[k] / max(1, ops[k])) for k in ops}
    return row


# ----------------------------------------------------------------- the report


def bench_backend(
    name: str, url: str, ns: list[int], seconds: float, kinds: list[str], readers: bool
) -> None:
    record = template_record(url)
    kinds = [k for k in kinds if not (k in ("raw-es", "raw-sql+lock") and url.startswith("sqlite"))]
    if "raw-sql" in kinds or "raw-sql+lock" in kinds:
        make_raw_table(url)
    if "raw-es" in kinds:  # its schema and table made once, not raced by N workers
        import psycopg

        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute("CREATE SCHEMA IF NOT EXISTS bench_es")
        RawES(url, "setup", create=True).close()
    print(f"\n== {name}: {seconds:.0f} s per case; appends of an agent loop (1-2 events each)")
    print(
        f"{'N':>3} "
        + " ".join(f"{k + ' /s':>15} {'p50 ms':>7} {'p95 ms':>7}" for k in kinds)
        + "".join(f" {'cf/' + k:>11}" for k in kinds[1:])
    )
    waits: list[str] = []
    for n in ns:
        rows = {k: run_case(k, url, n, seconds, record, sample=(k == "contextfold")) for k in kinds}
        line = f"{n:>3} " + " ".join(
            f"{rows[k]['per_s']:>15.0f} {rows[k]['p50']:>7.1f} {rows[k]['p95']:>7.1f}" for k in kinds
        )
        line += "".join(f" {rows['contextfold']['per_s'] / rows[k]['per_s']:>11.2f}" for k in kinds[1:])
        print(line, flush=True)
        if rows["contextfold"]["waits"]:
            waits.append(f"  N={n}: {rows['contextfold']['waits']}")
    if waits:
        print("where contextfold's backends were (pg_stat_activity, sampled every 20 ms):")
        print("\n".join(waits))
    if readers:
        print(f"\n-- {name}: N writers (contextfold) each with a reader beside it")
        for n in ns:
            alone = run_case("contextfold", url, n, seconds, record)
            both = run_case("contextfold", url, n, seconds, record, readers=True)
            reads = ", ".join(f"{k} {v[0]:.0f}/s ({v[1]:.1f} ms)" for k, v in sorted(both["reads"].items()))
            print(
                f"N={n:>2}: writers {alone['per_s']:.0f}/s alone, {both['per_s']:.0f}/s with readers "
                f"(p95 {alone['p95']:.1f} -> {both['p95']:.1f} ms); readers: {reads}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="1,2,4,8,16")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--readers", action="store_true")
    ap.add_argument("--only", default="contextfold,raw-sql,raw-sql+lock,raw-es")
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",")]
    kinds = args.only.split(",")
    print(
        f"{os.cpu_count()} cores (os.cpu_count), shared by every worker, reader and the database server; "
        f"python {sys.version.split()[0]}"
    )
    if not args.no_pg:
        schema = f"bench_conc_{uuid.uuid4().hex[:6]}"
        bench_backend("PostgreSQL", f"{args.pg}?schema={schema}", ns, args.seconds, kinds, args.readers)
        import psycopg

        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            conn.execute("DROP SCHEMA IF EXISTS bench_es CASCADE")
            conn.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as d:
            bench_backend(
                "SQLite (one file, WAL)",
                f"sqlite:///{Path(d) / 'store.db'}",
                ns,
                args.seconds,
                kinds,
                args.readers,
            )


if __name__ == "__main__":
    main()
