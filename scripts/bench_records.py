#!/usr/bin/env python3
"""What a long run's context-built records cost to keep: delta frames vs a frame per record.

Why: every build appends a record listing what the model saw and what was left out, so on a
long run each record is nearly the one before it and grows with the history. This drives
``bench_build.py``'s workload B (the synthetic 10,000-message tool-calling run, 128k budget):
per turn it appends the turn's messages, builds the ``openai-chat`` request and appends its
``ContextBuilt`` record to two stores side by side, one writing delta frames (the default:
``contextfold.store.deltas``), one a zstd frame per record (``delta_frames=False``, what the
store wrote before). Both get the same record bytes, in alternating order per turn.

Reported per store: the record's write (p50/p95 ms), the bytes stored per record (the row as
written), the store's size on disk after the run (SQLite: the file), reading the whole run back,
and reading one late record alone (a new store object: its keyframe is fetched too).

Usage: .venv/bin/python scripts/bench_records.py [--turns 100] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_build as bb  # the same workload B, byte for byte

from contextfold.api import render_request
from contextfold.domain.events import RunStarted
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.event_store import EventStore


def _row_bytes(store: EventStore, run_id: str, position: int) -> int:
    b = store.backend
    p = b.placeholder
    rows = b.query(f"SELECT LENGTH(state) FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                   f"AND originator_version = {p}", (run_id, position))
    return int(rows[0][0])


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def bench(url_of: dict[str, str], turns: int) -> None:
    syn = bb.synth_history()
    b_turns = bb.assistant_turns(syn)[-turns:]
    events = bb.to_events(syn)
    run_id = f"records-{uuid.uuid4().hex[:8]}"
    stores = {"delta frames": EventStore(url_of["delta frames"]),
              "frame per record": EventStore(url_of["frame per record"], delta_frames=False)}
    writes: dict[str, list[float]] = {k: [] for k in stores}
    sizes: dict[str, list[int]] = {k: [] for k in stores}
    state = new_state(run_id)
    cfg = BuildConfig(provider="openai-chat", window=bb.BUDGET_B + bb.RESERVE, reserve=bb.RESERVE)
    for i, s in enumerate(stores.values()):
        recs = s.append(run_id, [RunStarted(agent="bench", model="gpt-4o")])
        if i == 0:
            fold_event(state, recs[0])
    fed = 0
    for n, t in enumerate(b_turns):
        for i in range(fed, t, 5000):
            batch = events[i:min(t, i + 5000)]
            for j, s in enumerate(stores.values()):
                recs = s.append(run_id, batch)
                if j == 0:
                    for rec in recs:
                        fold_event(state, rec)
        fed = t
        record = build_context(state, cfg, render=render_request).record()
        order = list(stores.items()) if n % 2 == 0 else list(reversed(stores.items()))
        for name, s in order:
            t0 = time.perf_counter()
            recs = s.append(run_id, [record])
            writes[name].append(time.perf_counter() - t0)
            sizes[name].append(_row_bytes(s, run_id, recs[0].position))
        fold_event(state, recs[0])
        if (n + 1) % 20 == 0:
            print(f"  .. {n + 1} turns", flush=True)
    print(f"workload B, {len(b_turns)} turns: record JSON ~{len(record.model_dump_json()) / 1e6:.2f} MB each")
    print(f"{'store':<18}{'write p50':>10}{'p95':>8}{'KB/record':>11}{'read run':>10}{'read one':>10}")
    base_kb = statistics.mean(sizes["frame per record"]) / 1024
    for name, s in stores.items():
        last = s.version(run_id)
        t0 = time.perf_counter()
        s.read(run_id)
        read_all = time.perf_counter() - t0
        with EventStore(s.url, delta_frames=name == "delta frames") as fresh:
            t0 = time.perf_counter()
            fresh.read(run_id, after=last - 1)
            read_one = time.perf_counter() - t0
        kb = statistics.mean(sizes[name]) / 1024
        ratio = f"   ({base_kb / kb:.1f}x smaller)" if name == "delta frames" else ""
        print(f"{name:<18}{_pct(writes[name], 0.5) * 1e3:>9.2f}m{_pct(writes[name], 0.95) * 1e3:>7.2f}m"
              f"{kb:>10.1f}K{read_all:>9.2f}s{read_one * 1e3:>8.1f}ms{ratio}")
        s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=100, help="last turns of workload B to build and record")
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG"),
                    help="also run on this PostgreSQL database (default: $CONTEXTFOLD_TEST_PG)")
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("SQLite (two files):")
        bench({"delta frames": f"sqlite:///{tmp}/delta.db", "frame per record": f"sqlite:///{tmp}/frame.db"},
              args.turns)
        for name in ("delta", "frame"):
            print(f"  {name}.db: {os.path.getsize(f'{tmp}/{name}.db') / 1e6:.1f} MB on disk")
    if args.pg and not args.no_pg:
        print("PostgreSQL (one database, two schemas):")
        tag = uuid.uuid4().hex[:8]
        schemas = (f"bench_delta_{tag}", f"bench_frame_{tag}")
        try:
            bench({"delta frames": f"{args.pg}?schema={schemas[0]}",
                   "frame per record": f"{args.pg}?schema={schemas[1]}"}, args.turns)
        finally:  # the benchmark's schemas are its own: leave the database as it was
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
