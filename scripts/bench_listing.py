#!/usr/bin/env python3
"""Listing the runs of a big store: 10,000 runs and one run of 100,000 events, SQLite and PostgreSQL.

Why: a dashboard lists runs (``Store.runs()``, ``contextfold runs``) while agents write. The
whole listing was one ``GROUP BY`` over every event row of the store: its cost grows with the
events, not the runs (one run of 100,000 events costs as much as 5,000 runs of 20).

The store: ``--runs`` runs of ``--events`` events each (a run started, a user input, model
responses with a call and its result), ids ``agent-<k>/run-<n>`` (20 agents), recorded 250 runs
a transaction, and one run of ``--big`` events. Then each measured ``--repeat`` times (the
median, wall time): ``runs()`` (all), ``runs(limit=20)``, ``runs("agent-07/")`` through the API
(one store object, after a first call), and ``contextfold runs`` and ``runs --limit 20`` as a
user runs them (a new process each, output to /dev/null). ``--keep DIR`` keeps the stores there
and reuses them (to time another version on the same stores: ``--cli`` names its command).

Usage: .venv/bin/python scripts/bench_listing.py [--runs 10000] [--events 20] [--big 100000]
           [--pg URL | --no-pg] [--no-sqlite] [--keep DIR] [--repeat 3] [--cli "python -m contextfold"]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.store.event_store import EventStore

DEFAULT_PG = os.environ.get("CONTEXTFOLD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def run_events(n: int, seed: int) -> list[AnyEvent]:
    events: list[AnyEvent] = [
        RunStarted(agent=f"agent-{seed % 20:02d}", model="gpt-4o"),
        UserInput(f"task {seed}"),
    ]
    i = 0
    while len(events) < n:
        i += 1
        events.append(
            ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="sh", arguments='{"cmd": "ls"}')])
        )
        events.append(ToolResult(call_id=f"c{i}", content=f"file-{i}.py\n"))
    return events[:n]


def fill(url: str, runs: int, events: int, big: int) -> None:
    with EventStore(url) as store:
        if store.runs(limit=1):
            return  # kept from an earlier call
        t0 = time.perf_counter()
        template = run_events(events, 0)
        for start in range(0, runs, 250):
            store.append_new_runs(
                [(f"agent-{n % 20:02d}/run-{n:05d}", template) for n in range(start, min(runs, start + 250))]
            )
            if start and start % 2000 == 0:
                print(f"  {start} runs ({time.perf_counter() - t0:.0f} s)", flush=True)
        store.append_new_runs([("agent-big/run-big", run_events(big, 1))])
        print(f"  filled in {time.perf_counter() - t0:.0f} s", flush=True)


def median_time(call: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, url: str, repeat: int, cli: list[str]) -> None:
    env = {**os.environ, "CONTEXTFOLD_STORE": url}
    with EventStore(url) as store:
        listed = store.runs()
        total = sum(r.events for r in listed)
        print(f"\n== {name}: {len(listed):,} runs, {total:,} events")
        cases: dict[str, Callable[[], Any]] = {
            "API runs()": store.runs,
            "API runs(limit=20)": lambda: store.runs(limit=20),
            'API runs("agent-07/")': lambda: store.runs("agent-07/"),
        }
        for label, call in cases.items():
            print(f"{label:<28} {median_time(call, repeat) * 1e3:>9.1f} ms", flush=True)

    def command(*args: str) -> Callable[[], None]:
        def run() -> None:
            subprocess.run([*cli, "runs", *args], env=env, stdout=subprocess.DEVNULL, check=True)

        return run

    for label, args in (("contextfold runs", ()), ("contextfold runs --limit 20", ("--limit", "20"))):
        print(f"{label:<28} {median_time(command(*args), repeat) * 1e3:>9.1f} ms", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--keep", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", default=f"{shlex.quote(sys.executable)} -m contextfold")
    args = ap.parse_args()
    cli = shlex.split(args.cli)
    print(f"{os.cpu_count()} cores, shared with the database server and other work")
    keep = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_listing_"))
    keep.mkdir(parents=True, exist_ok=True)
    if not args.no_sqlite:
        url = f"sqlite:///{keep / 'listing.db'}"
        fill(url, args.runs, args.events, args.big)
        measure("SQLite", url, args.repeat, cli)
    if not args.no_pg:
        url = f"{args.pg}?schema=bench_listing_{args.runs}_{args.events}_{args.big}"
        fill(url, args.runs, args.events, args.big)
        measure("PostgreSQL", url, args.repeat, cli)


if __name__ == "__main__":
    main()
