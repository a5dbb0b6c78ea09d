#!/usr/bin/env python3
"""Store benchmark: contextfold's event store vs a raw `eventsourcing` application, same work, same run.

For each backend (SQLite file, PostgreSQL) and each size:
  append-1     single-event appends (one transaction each)
  append-100   batches of 100 events per append (one transaction each)
  reload       read the whole run back as typed events

The raw side is an eventsourcing ``Application`` with one aggregate per run
whose events carry the same payload (a dict shaped like our tool results);
``save()`` per append and ``repository.get()`` for the reload. Both sides
serialise JSON and hit the same database. The contextfold side additionally
validates pairing rules, hashes the chain (blake3) and parses pydantic models.

Usage: scripts/bench_store.py [--sizes 10000,100000] [--single 2000] [--pg URL] [--no-pg]
Prints a table of events/s per side and the overhead ratio (raw time / ours ⇒ >1 means slower).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from contextfold.domain.events import ModelResponse, ToolCall, ToolResult
from contextfold.store.event_store import EventStore

PAYLOAD = ("collected 48 items\n" + "tests/test_totals.py::test_line_item PASSED\n" * 10)[:480]


class RunLog(Aggregate):
    """The raw-eventsourcing twin of a run: one aggregate, one event type per appended item."""

    @event("Created")
    def __init__(self) -> None:
        self.count = 0

    @event("Appended")
    def append(self, item: dict[str, Any]) -> None:
        self.count += 1


def our_events(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n // 2):
        cid = f"call_{i}"
        call = ToolCall(call_id=cid, name="run_tests", arguments="{}")
        out.append(ModelResponse(text="", tool_calls=(call,)))
        out.append(ToolResult(call_id=cid, content=PAYLOAD, exit_code=0))
    return out


def raw_items(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n // 2):
        cid = f"call_{i}"
        out.append({"type": "model_response", "text": "", "tool_calls": [
            {"call_id": cid, "name": "run_tests", "arguments": "{}"}]})
        out.append({"type": "tool_result", "call_id": cid, "content": PAYLOAD, "exit_code": 0})
    return out


def raw_app(url: str) -> Application[Any]:
    if url.startswith("sqlite"):
        env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": url.split("///", 1)[1]}
    else:
        from urllib.parse import urlparse

        p = urlparse(url)
        env = {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": p.path.lstrip("/"),
               "POSTGRES_HOST": p.hostname or "127.0.0.1", "POSTGRES_PORT": str(p.port or 5432),
               "POSTGRES_USER": p.username or "postgres", "POSTGRES_PASSWORD": p.password or "",
               "POSTGRES_SCHEMA": "cf_bench_raw"}
    return Application(env=env)


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_ours(url: str, n: int, batch: int) -> tuple[float, float]:
    store = EventStore(url)
    run = f"bench-{uuid.uuid4().hex[:8]}"
    events = our_events(n)

    def append() -> None:
        for i in range(0, len(events), batch):
            store.append(run, events[i:i + batch])

    t_append = timed(append)
    fresh = EventStore(url, create_schema=False)
    t_reload = timed(lambda: fresh.read(run))
    assert len(fresh.read(run)) == len(events)
    store.close()
    fresh.close()
    return t_append, t_reload


def bench_raw(url: str, n: int, batch: int) -> tuple[float, float]:
    app = raw_app(url)
    agg = RunLog()
    app.save(agg)
    items = raw_items(n)

    def append() -> None:
        for i in range(0, len(items), batch):
            for item in items[i:i + batch]:
                agg.append(item)
            app.save(agg)

    t_append = timed(append)
    fresh = raw_app(url)
    t_reload = timed(lambda: fresh.repository.get(agg.id))
    got: Any = fresh.repository.get(agg.id)
    assert got.count == len(items)
    return t_append, t_reload


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--single", type=int, default=2000, help="events for the single-append case")
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = tempfile.mkdtemp()
    backends = [("sqlite", f"sqlite:///{tmp}/ours.db", f"sqlite:///{tmp}/raw.db")]
    if not args.no_pg:
        import psycopg

        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute("DROP SCHEMA IF EXISTS cf_bench_ours CASCADE")
            c.execute("DROP SCHEMA IF EXISTS cf_bench_raw CASCADE")
            c.execute("CREATE SCHEMA cf_bench_raw")
        backends.append(("postgres", f"{args.pg}?schema=cf_bench_ours", args.pg))
    print(f"python {sys.version.split()[0]}; payload ~{len(PAYLOAD)} B per tool result")
    print(f"{'backend':<9} {'case':<12} {'events':>7} {'ours ev/s':>11} {'raw ev/s':>11} {'overhead':>9}")
    for name, ours_url, raw_url in backends:
        cases = [("append-1", args.single, 1)] + [("append-100", n, 100) for n in sizes]
        for case, n, batch in cases:
            a_ours, r_ours = bench_ours(ours_url, n, batch)
            a_raw, r_raw = bench_raw(raw_url, n, batch)
            print(f"{name:<9} {case:<12} {n:>7} {n / a_ours:>11,.0f} {n / a_raw:>11,.0f} "
                  f"{a_ours / a_raw:>8.2f}x")
            if batch == 100:
                print(f"{name:<9} {'reload':<12} {n:>7} {n / r_ours:>11,.0f} {n / r_raw:>11,.0f} "
                      f"{r_ours / r_raw:>8.2f}x")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
