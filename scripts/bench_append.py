#!/usr/bin/env python3
"""The cost of one append, beside what a user would otherwise write: SQLite and PostgreSQL.

Why: every turn of an agent appends its events (the new user input or tool results, the model's
response) and the build appends its ``context_built`` record; the append is on the agent's
critical path. This reports one agent's appends, one process, no contention
(``scripts/bench_concurrent.py`` has many agents at once), for three sides on the same database:

  contextfold  ``EventStore.append`` (checks, canonical JSON parsed back, pairing rules, blake3
               chain hash, head check, eventsourcing's recorder)
  raw-es       an eventsourcing ``Application`` (its SQLite or PostgreSQL recorder, its default
               JSON transcoder), one aggregate per run, ``save()`` per append; each event's
               dict is ``json.loads`` of its canonical JSON (as ``bench_concurrent`` does)
  bare         a plain INSERT of each event's canonical JSON into a table keyed by (run,
               position), one transaction per append (sqlite3 / psycopg): "just a table"

Workload: tau-bench gpt-4o airline runs (``$CONTEXTFOLD_TRACES``), through the project's OpenAI
chat importer, appended as an agent loop does, bench_build's way: at each assistant turn the
messages since the last turn in one append (the previous response and its tool results, or the
user's input), then the ``context_built`` record of a real openai-chat build of that turn
(made beforehand, untimed, on a scratch store; the same record object, as ``Run.build`` hands
it to the store). Three kinds of append are reported apart:

  first   a run's first append (``RunStarted``, the policy and the user's first input): a new
          run, whose head the store has never seen
  turn    the later appends of a turn's events
  record  the appends of the ``context_built`` records

Each side replays every run in turn (runs interleaved across sides, so a drift of the machine's
speed reaches them alike), each run under a fresh run id. Reported per store and kind: p50 and
p95 in ms per side, and the ratios contextfold/bare and contextfold/raw-es of the p50s; and each
side's client CPU per append (p50 of ``time.thread_time``: its own work without the waits for
the database, steadier than wall time on a loaded machine).

``--profile sqlite|pg``: instead, run the contextfold side only under cProfile and print the
functions with the most cumulative and own time, per kind of append.

Usage: .venv/bin/python scripts/bench_append.py [--runs 40] [--rounds 2] [--pg URL | --no-pg]
           [--no-sqlite] [--profile sqlite|pg] [--kind first,turn,record]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_concurrent import _aggregate_class  # the raw side's aggregate: one per run

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, RunStarted, canonical_json
from contextfold.domain.manifest import BuildConfig
from contextfold.importers.openai_chat import parse_messages
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.event_store import EventStore

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
DEFAULT_PG = os.environ.get("CONTEXTFOLD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
KINDS = ("first", "turn", "record")
SIDES = ("contextfold", "raw-es", "bare")
BARE_TABLE = "bench_append_bare"
Step = tuple[str, list[AnyEvent]]
"""One append of a run: its kind and its events."""


# ----------------------------------------------------------------- the workload


def tau_runs(n: int) -> list[list[Step]]:
    """The appends of the first ``n`` tau-bench runs, records made by real builds (untimed)."""
    with TAU.open() as fh:
        data = json.load(fh)[:n]
    config = BuildConfig(provider="openai-chat", window=129_000, reserve=1_000)  # bench_build's A 128k
    runs: list[list[Step]] = []
    with EventStore("sqlite:///:memory:") as scratch:
        for i, item in enumerate(data):
            traj = item["traj"]
            events = parse_messages(traj, ())[1:]
            turns = [t for t, m in enumerate(traj) if m["role"] == "assistant"]
            run_id = f"scratch-{i}"
            state = new_state(run_id)
            steps: list[Step] = []
            fed = 0
            for t in turns:
                batch: list[AnyEvent] = list(events[fed:t])
                if not fed:
                    batch.insert(0, RunStarted(agent="bench", model="gpt-4o", encoding="cl100k_base"))
                fed = t
                steps.append(("turn" if steps else "first", batch))
                for rec in scratch.append(run_id, batch):
                    fold_event(state, rec)
                record = build_context(state, config, render=render_request).record()
                steps.append(("record", [record]))
                for rec in scratch.append(run_id, [record]):
                    fold_event(state, rec)
            runs.append(steps)
    return runs


# ----------------------------------------------------------------- the three sides


class Side:
    """Appends batches to runs; one object per store for the whole benchmark."""

    def append(self, run_id: str, position: int, batch: list[AnyEvent]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Contextfold(Side):
    def __init__(self, url: str) -> None:
        self.store = EventStore(url)

    def append(self, run_id: str, position: int, batch: list[AnyEvent]) -> None:
        self.store.append(run_id, batch)

    def close(self) -> None:
        self.store.close()


class Bare(Side):
    """One INSERT per event of its canonical JSON, one transaction per append."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite"):
            import sqlite3

            self.conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {BARE_TABLE} (run TEXT, position INTEGER, "
                              "kind TEXT, body BLOB, PRIMARY KEY (run, position))")
            self.sql = f"INSERT INTO {BARE_TABLE} VALUES (?, ?, ?, ?)"
            self.sqlite = True
        else:
            import psycopg

            self.conn = psycopg.connect(url.split("?")[0], autocommit=True)
            self.conn.execute(f"DROP TABLE IF EXISTS {BARE_TABLE}")
            self.conn.execute(f"CREATE TABLE {BARE_TABLE} (run TEXT, position BIGINT, kind TEXT, "
                              "body BYTEA, PRIMARY KEY (run, position))")
            self.sql = f"INSERT INTO {BARE_TABLE} VALUES (%s, %s, %s, %s)"
            self.sqlite = False

    def append(self, run_id: str, position: int, batch: list[AnyEvent]) -> None:
        rows = [(run_id, position + i, e.type, canonical_json(e)) for i, e in enumerate(batch, 1)]
        if self.sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(self.sql, rows)
            self.conn.execute("COMMIT")
        else:
            with self.conn.transaction(), self.conn.cursor() as c:
                c.executemany(self.sql, rows)

    def close(self) -> None:
        if not self.sqlite:
            self.conn.execute(f"DROP TABLE IF EXISTS {BARE_TABLE}")
        self.conn.close()


class RawES(Side):
    """An eventsourcing Application: one aggregate per run, ``save()`` per append."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlparse

        from eventsourcing.application import Application

        if url.startswith("sqlite"):
            env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                   "SQLITE_DBNAME": url.removeprefix("sqlite:///"), "CREATE_TABLE": "y"}
        else:
            u = urlparse(url)
            self.schema = f"bench_append_es_{uuid.uuid4().hex[:8]}"
            self.admin_url = url.split("?")[0]
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {self.schema}")
            env = {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": u.path.lstrip("/"),
                   "POSTGRES_HOST": u.hostname or "127.0.0.1", "POSTGRES_PORT": str(u.port or 5432),
                   "POSTGRES_USER": u.username or "postgres", "POSTGRES_PASSWORD": u.password or "",
                   "POSTGRES_SCHEMA": self.schema, "CREATE_TABLE": "y"}
        self.app: Any = Application(env=env)
        self.aggregates: dict[str, Any] = {}
        self.pg = not url.startswith("sqlite")

    def append(self, run_id: str, position: int, batch: list[AnyEvent]) -> None:
        aggregate = self.aggregates.get(run_id)
        if aggregate is None:
            aggregate = self.aggregates[run_id] = _aggregate_class()()
        for e in batch:
            aggregate.add(e.type, json.loads(canonical_json(e)))
        self.app.save(aggregate)

    def close(self) -> None:
        self.app.close()
        if self.pg:
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {self.schema} CASCADE")


MAKERS: dict[str, Callable[[str], Side]] = {"contextfold": Contextfold, "raw-es": RawES, "bare": Bare}


# ----------------------------------------------------------------- stores


def pg_store_url(base: str) -> tuple[str, Callable[[], None]]:
    """A fresh schema on ``base`` for contextfold, and its dropper."""
    import psycopg

    schema = f"bench_append_{uuid.uuid4().hex[:8]}"
    admin = base.split("?")[0]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    return f"{base}{sep}schema={schema}", drop


def replay(side: Side, run_id: str, steps: list[Step], times: dict[str, list[float]],
           cpu: dict[str, list[float]] | None = None) -> None:
    """Append ``steps`` to ``run_id``: each append's wall time into ``times``, and its CPU time
    in this thread (``time.thread_time``: the client's own work, without the waits for the
    database) into ``cpu``."""
    position = 0
    for kind, batch in steps:
        c0, t0 = time.thread_time(), time.perf_counter()
        side.append(run_id, position, batch)
        times[kind].append(time.perf_counter() - t0)
        if cpu is not None:
            cpu[kind].append(time.thread_time() - c0)
        position += len(batch)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def bench(label: str, url: str, runs: list[list[Step]], rounds: int) -> None:
    sides = {name: make(url) for name, make in MAKERS.items()}
    times: dict[str, dict[str, list[float]]] = {name: {k: [] for k in KINDS} for name in SIDES}
    cpu: dict[str, dict[str, list[float]]] = {name: {k: [] for k in KINDS} for name in SIDES}
    try:
        for side in sides.values():  # warm: imports, prepared statements, the pools
            replay(side, f"warm-{uuid.uuid4().hex[:8]}", runs[0], {k: [] for k in KINDS})
        for r in range(rounds):
            for i, steps in enumerate(runs):
                for name in (SIDES if (i + r) % 2 == 0 else SIDES[::-1]):
                    replay(sides[name], f"r{r}-{i}-{uuid.uuid4().hex[:6]}", steps, times[name], cpu[name])
    finally:
        for side in sides.values():
            side.close()
    print(f"\n{label}: {len(runs)} tau-bench runs x {rounds} rounds")
    print(f"  {'kind':7s} {'n':>5s}  " + "  ".join(f"{s + ' p50/p95 ms':>22s}" for s in SIDES)
          + "   cf/bare  cf/raw-es  (p50)")
    for kind in KINDS:
        cells = []
        for s in SIDES:
            xs = times[s][kind]
            cells.append(f"{pct(xs, 0.5) * 1e3:10.3f} /{pct(xs, 0.95) * 1e3:9.3f}")
        cf, es, bare = (statistics.median(times[s][kind]) for s in SIDES)
        print(f"  {kind:7s} {len(times['contextfold'][kind]):5d}  " + "  ".join(cells)
              + f"   {cf / bare:7.2f}  {cf / es:8.2f}")
    cells = [f"{kind} " + " / ".join(f"{statistics.median(cpu[s][kind]) * 1e3:.3f}" for s in SIDES)
             for kind in KINDS]
    print(f"  client CPU per append, p50 ms ({' / '.join(SIDES)}): {', '.join(cells)}")


def profile(label: str, url: str, runs: list[list[Step]], rounds: int, kinds: set[str]) -> None:
    """The contextfold side under cProfile, one profile per kind of append."""
    store = EventStore(url)
    profiles = {k: cProfile.Profile() for k in kinds}
    counts = dict.fromkeys(kinds, 0)
    try:
        for r in range(rounds):
            for i, steps in enumerate(runs):
                run_id = f"p{r}-{i}-{uuid.uuid4().hex[:6]}"
                for kind, batch in steps:
                    if kind in kinds:
                        profiles[kind].enable()
                        store.append(run_id, batch)
                        profiles[kind].disable()
                        counts[kind] += 1
                    else:
                        store.append(run_id, batch)
    finally:
        store.close()
    for kind, prof in profiles.items():
        print(f"\n===== {label} {kind}: {counts[kind]} appends")
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=40, help="tau-bench runs (of 200)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--profile", choices=("sqlite", "pg"))
    ap.add_argument("--kind", default=",".join(KINDS), help="kinds profiled (--profile)")
    args = ap.parse_args()
    if not TAU.exists():
        print(f"traces not found: {TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    runs = tau_runs(args.runs)
    n = {k: sum(1 for steps in runs for kind, _ in steps if kind == k) for k in KINDS}
    ev = sum(len(b) for steps in runs for kind, b in steps if kind == "turn") / max(1, n["turn"])
    rec = statistics.median(len(canonical_json(b[0])) for steps in runs for k, b in steps if k == "record")
    print(f"workload: {len(runs)} runs, appends per run: {n['first']} first, {n['turn']} turn "
          f"({ev:.1f} events each), {n['record']} record (median {rec / 1024:.1f} KiB of JSON); "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="cf-bench-append-") as tmp:
        targets: list[tuple[str, str, Callable[[], None]]] = []
        if not args.no_sqlite and args.profile in (None, "sqlite"):
            targets.append(("SQLite (file, WAL)", f"sqlite:///{tmp}/runs.db", lambda: None))
        if not args.no_pg and args.profile in (None, "pg"):
            targets.append(("PostgreSQL", *pg_store_url(args.pg)))
        for label, url, drop in targets:
            try:
                if args.profile:
                    profile(label, url, runs, args.rounds, set(args.kind.split(",")))
                else:
                    bench(label, url, runs, args.rounds)
            finally:
                drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
