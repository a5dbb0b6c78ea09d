#!/usr/bin/env python3
"""What keeping each event's time costs an append, and the store, per backend.

Why: every append now writes one more row per event (``contextfold_event_times``, in the insert's
transaction: :mod:`contextfold.store.event_times`). Measured against the same code writing no
time, as a store made before the table and opened without creating it does (the previous
release's write path, to a bool): the paired ratio with/without is what the time costs.

Workload, per backend: an agent loop's appends to its own run, one append per step (a user input,
a response with two tool calls, its two results: 1 and 2 events an append), ``--appends`` appends
per side; the sides alternate in blocks of ``--block`` appends on two runs of two stores (one
with the table, one without), so the machine's drift hits both alike. Reported: p50 and p95 of
an append (ms) per side, the median of the paired block ratios with/without (and its IQR), and
the bytes the table adds per event (SQLite: the file after VACUUM, with and without the table;
PostgreSQL: ``pg_total_relation_size`` of the table over its rows, beside the events table's).

Usage: .venv/bin/python scripts/bench_event_times.py [--appends 3000] [--block 50]
           [--pg URL | --no-pg] [--no-sqlite]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store.event_store import EventStore
from contextfold.store.event_times import EVENT_TIMES_TABLE
from contextfold.store.store_tables import EVENTS_TABLE


def loop_steps() -> Iterator[list[AnyEvent]]:
    """An agent loop's appends: a response with two calls (1 event), then its two results (2)."""
    n = 0
    while True:
        n += 1
        if n % 10 == 1:
            yield [UserInput(f"step {n}: go on with the task, the tests still fail in module {n}")]
        calls = tuple(ToolCall(call_id=f"c{n}-{k}", name="sh",
                               arguments=f'{{"cmd": "pytest -q tests/{n}/{k}"}}') for k in range(2))
        yield [ModelResponse(text=f"I will run the tests of step {n}.", tool_calls=calls)]
        yield [ToolResult(call_id=c.call_id, content=f"{n} passed, 1 failed\n" * 20, exit_code=1)
               for c in calls]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench(url: str, appends: int, block: int) -> dict[str, object]:
    timed = EventStore(url)
    untimed = EventStore(url, create_schema=False)
    untimed._times_kept = False  # as a store made before the table, opened without creating it
    stores = {"with": timed, "without": untimed}
    runs = {side: f"bench-{side}-{uuid.uuid4().hex[:8]}" for side in stores}
    steps = {side: loop_steps() for side in stores}
    took: dict[str, list[float]] = {side: [] for side in stores}
    ratios: list[float] = []
    events = {side: 0 for side in stores}
    done = 0
    order = ["with", "without"]
    while done < appends:
        block_ms: dict[str, float] = {}
        for side in order:
            start_block = time.perf_counter()
            for _ in range(block):
                batch = next(steps[side])
                t0 = time.perf_counter()
                stores[side].append(runs[side], batch)
                took[side].append((time.perf_counter() - t0) * 1000)
                events[side] += len(batch)
            block_ms[side] = time.perf_counter() - start_block
        ratios.append(block_ms["with"] / block_ms["without"])
        order.reverse()
        done += block
    out: dict[str, object] = {
        side: (statistics.median(took[side]), pct(took[side], 0.95)) for side in stores}
    q = statistics.quantiles(ratios, n=4)
    out["ratio"] = (statistics.median(ratios), q[0], q[2])
    out["events"] = events
    out["runs"] = runs
    timed.close()
    untimed.close()
    return out


def sqlite_sizes(appends: int) -> tuple[float, float]:
    """Bytes per event of the pages the times table holds, and of the rest of the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "s.db")
        with EventStore(f"sqlite:///{path}") as store:
            steps = loop_steps()
            n = 0
            for _ in range(appends):
                batch = next(steps)
                store.append("r", batch)
                n += len(batch)
        with sqlite3.connect(path) as db:  # pages in use, before and after the table is dropped

            def used() -> int:
                pages, free, size = (db.execute(f"PRAGMA {p}").fetchone()[0]
                                     for p in ("page_count", "freelist_count", "page_size"))
                return int((pages - free) * size)

            with_table = used()
            db.execute(f"DROP TABLE {EVENT_TIMES_TABLE}")
            db.commit()
            without = used()
    return (with_table - without) / n, without / n


def pg_sizes(url: str) -> tuple[float, float]:
    """Bytes per row of the times table and of the events table (their whole relations)."""
    with EventStore(url) as store:
        table = store.backend.table(EVENT_TIMES_TABLE)
        events_table = store.backend.table(EVENTS_TABLE)
        times_bytes = int(store.backend.query(f"SELECT pg_total_relation_size('{table}')")[0][0])
        times_rows = int(store.backend.query(f"SELECT COUNT(*) FROM {table}")[0][0])
        events_bytes = int(store.backend.query(f"SELECT pg_total_relation_size('{events_table}')")[0][0])
        events_rows = int(store.backend.query(f"SELECT COUNT(*) FROM {events_table}")[0][0])
    return times_bytes / max(times_rows, 1), events_bytes / max(events_rows, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=3000)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG"))
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {args.appends} appends a side, "
          f"blocks of {args.block}")
    cases: list[tuple[str, str]] = []
    tmp = tempfile.TemporaryDirectory()
    if not args.no_sqlite:
        cases.append(("sqlite", f"sqlite:///{Path(tmp.name, 'bench.db')}"))
    if args.pg and not args.no_pg:
        sep = "&" if "?" in args.pg else "?"
        cases.append(("postgresql", f"{args.pg}{sep}schema=bench_times_{uuid.uuid4().hex[:8]}"))
    for name, url in cases:
        result = bench(url, args.appends, args.block)
        (w50, w95), (o50, o95) = result["with"], result["without"]  # type: ignore[misc]
        med, lo, hi = result["ratio"]  # type: ignore[misc]
        print(f"{name:<11} append p50/p95 ms: with time {w50:.3f}/{w95:.3f}, without "
              f"{o50:.3f}/{o95:.3f}; paired ratio with/without {med:.3f} (IQR {lo:.3f}-{hi:.3f})")
        if name == "postgresql":
            per_time, per_event = pg_sizes(url)
            print(f"{'':<11} bytes per event: times table {per_time:.1f} (rows, key and index), events "
                  f"table {per_event:.1f}")
            import psycopg

            schema = url.rpartition("schema=")[2]
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if not args.no_sqlite:
        per_time, per_event = sqlite_sizes(args.appends)
        print(f"{'sqlite':<11} bytes per event (pages in use): times table {per_time:.1f}, "
              f"the rest of the store {per_event:.1f}")
    tmp.cleanup()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
