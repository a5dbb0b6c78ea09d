#!/usr/bin/env python3
"""Store benchmark: contextfold's event store vs a raw `eventsourcing` application, same work, same run.

For each backend (SQLite file, PostgreSQL) and each size:
  append-1     single-event appends (one transaction each)
  append-100   batches of 100 events per append (one transaction each)
  reload       read the whole run back as typed events
  large-<size> (``--large``) tool results of that size (a long build log), one call and its
               result per append as an agent loop writes them; its reload reads every payload
               back in full (ours: the events, then each offloaded artifact by its ref)

The raw side is an eventsourcing ``Application`` with one aggregate per run
whose events carry the same payload (a dict shaped like our tool results);
``save()`` per append and ``repository.get()`` for the reload. Both sides
serialise JSON and hit the same database. The contextfold side additionally
validates pairing rules, hashes the chain (blake3) and parses pydantic models.

Payloads of 64 KiB or more are kept by contextfold as artifacts (zstd-compressed text, a
preview in the event); the raw side keeps them inline in the event's JSON. The table's
"stored" column says what each side's database holds after the case (SQLite: the file).

Usage: scripts/bench_store.py [--sizes 10000,100000] [--single 2000] [--large 262144,2097152]
                              [--large-events 40] [--pg URL] [--no-pg]
Prints a table of events/s per side and the overhead ratio (ours time / raw time: >1 means slower).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from contextfold.domain.events import ModelResponse, ToolCall, ToolResult
from contextfold.store.backends import ARTIFACTS_TABLE, EVENTS_TABLE
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


def calls_and_results(n: int, tool: str, exit_code: int, payload: Callable[[int], str]
                      ) -> tuple[list[Any], list[dict[str, Any]]]:
    """``n`` events, a call then its result, as ours and as the raw side's items: the same
    payload strings on both sides (``payload(i)`` for the i-th result)."""
    ours: list[Any] = []
    raw: list[dict[str, Any]] = []
    for i in range(n // 2):
        cid, content = f"call_{i}", payload(i)
        ours += [ModelResponse(text="", tool_calls=(ToolCall(call_id=cid, name=tool, arguments="{}"),)),
                 ToolResult(call_id=cid, content=content, exit_code=exit_code)]
        raw += [{"type": "model_response", "text": "", "tool_calls": [
                    {"call_id": cid, "name": tool, "arguments": "{}"}]},
                {"type": "tool_result", "call_id": cid, "content": content, "exit_code": exit_code}]
    return ours, raw


def small_events(n: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """Test runs with a ~460-byte output each."""
    return calls_and_results(n, "run_tests", 0, lambda i: PAYLOAD)


def large_events(n: int, size: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """CI runs failing with a log of ``size`` bytes each."""
    return calls_and_results(n, "run_ci", 1, lambda i: build_log(size, i))


def build_log(size: int, seed: int) -> str:
    """A failing CI log of about ``size`` bytes: timestamped lines of varying content (so it does
    not compress to nothing), a traceback near the end and a summary line."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        line = (f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}Z {rng.choice(('INFO', 'INFO', 'DEBUG', 'WARN'))} "
                f"tests/test_{rng.choice(_MODULES)}.py::test_{rng.choice(_MODULES)}_{rng.randint(1, 999)} "
                f"{rng.choice(('PASSED', 'PASSED', 'PASSED', 'SKIPPED', 'XFAIL'))} [{rng.randint(1, 100)}%] "
                f"({rng.random() * 3:.3f}s) worker=gw{rng.randint(0, 7)} seed={rng.getrandbits(32):08x}")
        lines.append(line)
        total += len(line) + 1
    lines[-3:] = ["Traceback (most recent call last):", "AssertionError: totals differ: 41.5 != 42.0",
                  "FAILED tests/test_totals.py::test_line_item - exit code 1"]
    return "\n".join(lines)


_MODULES = ("totals", "invoice", "parser", "auth", "queue", "cache", "export", "billing", "search")


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


def _size_sql(url: str, column: str) -> str:
    """What a stored value occupies: PostgreSQL may compress large values itself (TOAST)."""
    return f"pg_column_size({column})" if url.startswith("postgres") else f"length({column})"


def bench_ours(url: str, events: list[Any], batch: int) -> tuple[float, float, int]:
    """(append seconds, reload seconds, bytes stored for the run: events and their artifacts)."""
    store = EventStore(url)
    run = f"bench-{uuid.uuid4().hex[:8]}"
    hashes: list[str] = []

    def append() -> None:
        for i in range(0, len(events), batch):
            store.append(run, events[i:i + batch])

    def reload() -> None:  # the events, and every offloaded payload in full
        got = fresh.read(run)
        refs = [r.event.artifact for r in got if isinstance(r.event, ToolResult) and r.event.artifact]
        texts = [fresh.artifact(ref).decode() for ref in refs]
        assert len(got) == len(events) and all(texts)
        hashes[:] = [ref.hash for ref in refs]

    t_append = timed(append)
    fresh = EventStore(url, create_schema=False)
    t_reload = timed(reload)
    b, p = store.backend, store.backend.placeholder
    stored = int(b.query(f"SELECT COALESCE(SUM({_size_sql(url, 'state')}), 0) FROM {b.table(EVENTS_TABLE)} "
                         f"WHERE originator_id = {p}", (run,))[0][0])
    for digest in set(hashes):
        stored += int(b.query(f"SELECT {_size_sql(url, 'data')} FROM {b.table(ARTIFACTS_TABLE)} "
                              f"WHERE hash = {p}", (digest,))[0][0])
    store.close()
    fresh.close()
    return t_append, t_reload, stored


def bench_raw(url: str, items: list[dict[str, Any]], batch: int) -> tuple[float, float, int]:
    """(append seconds, reload seconds, bytes stored for the aggregate's events)."""
    app = raw_app(url)
    agg = RunLog()
    app.save(agg)

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
    table = getattr(app.recorder, "events_table_name", "stored_events")
    if not url.startswith("sqlite"):
        table = f"cf_bench_raw.{table}"  # raw_app's POSTGRES_SCHEMA
    sql = f"SELECT COALESCE(SUM({_size_sql(url, 'state')}), 0) FROM {table} WHERE originator_id = "
    if url.startswith("sqlite"):
        with sqlite3.connect(url.split("///", 1)[1]) as lite:
            stored = int(lite.execute(sql + "?", (agg.id.hex,)).fetchone()[0])  # kept as hex text
    else:
        import psycopg

        with psycopg.connect(url) as pg:
            row = pg.execute(sql + "%s", (agg.id,)).fetchone()
            stored = int(row[0]) if row else 0
    return t_append, t_reload, stored


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--single", type=int, default=2000, help="events for the single-append case")
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--large", default="262144,2097152", help="payload sizes in bytes of the large cases "
                    "('' for none)")
    ap.add_argument("--large-events", type=int, default=40, help="events per large case")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    large = [int(s) for s in args.large.split(",") if s]
    tmp = tempfile.mkdtemp()
    backends = [("sqlite", f"sqlite:///{tmp}/ours.db", f"sqlite:///{tmp}/raw.db")]
    if not args.no_pg:
        import psycopg

        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute("DROP SCHEMA IF EXISTS cf_bench_ours CASCADE")
            c.execute("DROP SCHEMA IF EXISTS cf_bench_raw CASCADE")
            c.execute("CREATE SCHEMA cf_bench_raw")
        backends.append(("postgres", f"{args.pg}?schema=cf_bench_ours", args.pg))
    print(f"python {sys.version.split()[0]}; payload ~{len(PAYLOAD)} B per tool result "
          f"(large-<size>: {args.large_events} events, half of them results of that size)")
    print(f"{'backend':<9} {'case':<12} {'events':>7} {'ours ev/s':>11} {'raw ev/s':>11} {'overhead':>9} "
          f"{'ours stored':>12} {'raw stored':>12}")
    cases: list[tuple[str, tuple[list[Any], list[dict[str, Any]]], int]] = [
        ("append-1", small_events(args.single), 1)]
    cases += [("append-100", small_events(n), 100) for n in sizes]
    cases += [(f"large-{size // 1024}K", large_events(args.large_events, size), 2) for size in large]
    for name, ours_url, raw_url in backends:
        for case, (events, items), batch in cases:
            n = len(events)
            a_ours, r_ours, s_ours = bench_ours(ours_url, events, batch)
            a_raw, r_raw, s_raw = bench_raw(raw_url, items, batch)
            print(f"{name:<9} {case:<12} {n:>7} {n / a_ours:>11,.0f} {n / a_raw:>11,.0f} "
                  f"{a_ours / a_raw:>8.2f}x {s_ours / 1e6:>10.2f}MB {s_raw / 1e6:>10.2f}MB")
            if batch != 1:
                print(f"{name:<9} {'  reload':<12} {n:>7} {n / r_ours:>11,.0f} {n / r_raw:>11,.0f} "
                      f"{r_ours / r_raw:>8.2f}x")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
