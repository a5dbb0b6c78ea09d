#!/usr/bin/env python3
"""How much of a turn's first build is the loop's cold start: caches refilled after the work
between two turns' builds, not the build's own work.

Why: issue 4 reads the first build's p50 in ``bench_build.py``'s agent loop, where each first
build runs right after the last turn's record write and this turn's event append (two SQLite
commits, each waiting for its sync while other processes may run on the core) and their folds.
A change that removes work removes its cache misses with it, but what the build's code and
shared tables lose to the work in between is paid whatever the build does. This puts a figure
on that: per turn, one of the variants below runs before the timed neutral build, in turn, in
one process (the variants meet the same mix of turns and the same machine moments):

- ``plain``: the loop as ``bench_build`` runs it;
- ``decoy``: another run's state (the last one finished) built just before, with the same config:
  its memos hit, so it warms the builder's code and the process-wide tables, not this state's data;
- ``sleep``: the process sleeps ``--sleep-ms`` just before (the CPU given away, as during a
  commit's sync);
- ``no-record``: the last turn's context-built record was not appended (no commit, no fold of
  it): the build runs after the event append alone. Its state lacks that record (folding one
  notes the turn's build: the next manifest names the same turn again), the build's work alike.

Reports each variant's first-build p50 and its ratio to ``plain``'s. The second and later builds
of the turn run as in the loop, untimed.

Usage:
  .venv/bin/python scripts/measure_build_warmth.py [--runs 200] [--budget 3000] [--sleep-ms 3]
Needs the benchmark extras and the traces (``CONTEXTFOLD_TRACES``), as ``bench_build.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_build as bb

from contextfold.api import render_request
from contextfold.domain.events import RunStarted
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.event_store import EventStore

VARIANTS = ("plain", "decoy", "sleep", "no-record")


def measure(runs: int, budget: int, sleep_s: float) -> dict[str, list[float]]:
    """First-build seconds per variant over every turn of the first ``runs`` tau-bench runs."""
    with bb.TAU.open() as fh:
        data = json.load(fh)[:runs]
    first = BuildConfig(provider="neutral", window=budget + bb.RESERVE, reserve=bb.RESERVE)
    second = BuildConfig(provider="openai-chat", window=budget + bb.RESERVE, reserve=bb.RESERVE)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    decoy: Any = None
    turn = 0
    with tempfile.TemporaryDirectory(prefix="cf-warmth-") as tmp:
        store = EventStore(f"sqlite:///{tmp}/runs.db")
        for i, run in enumerate(data):
            run_id, traj = f"tau-{i}", run["traj"]
            events = bb.to_events(traj)
            state = new_state(run_id)
            for rec in store.append(run_id, [RunStarted(agent="warmth", model="gpt-4o")]):
                fold_event(state, rec)
            fed = 0
            for t in bb.assistant_turns(traj):
                variant = VARIANTS[turn % len(VARIANTS)]
                for rec in store.append(run_id, events[fed:t]):
                    fold_event(state, rec)
                fed = t
                if variant == "decoy" and decoy is not None:
                    build_context(decoy, first, render=render_request)
                elif variant == "sleep":
                    time.sleep(sleep_s)
                t0 = time.perf_counter()
                build_context(state, first, render=render_request)
                took = time.perf_counter() - t0
                if decoy is not None:  # the first run only warms the process up
                    times[variant].append(took)
                result = build_context(state, second, render=render_request)
                build_context(state, second, render=render_request)
                turn += 1
                if VARIANTS[turn % len(VARIANTS)] != "no-record":
                    for rec in store.append(run_id, [result.record()]):
                        fold_event(state, rec)
                del result
            decoy = state
        store.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200, help="tau-bench runs (default all 200)")
    ap.add_argument("--budget", type=int, default=3000)
    ap.add_argument("--sleep-ms", type=float, default=3.0, help="the sleep variant's pause (default 3 ms)")
    args = ap.parse_args()
    if not bb.TAU.exists():
        print(f"traces not found: {bb.TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    times = measure(args.runs, args.budget, args.sleep_ms / 1000)
    base = statistics.median(times["plain"])
    print(f"{'variant':10s} {'builds':>7s} {'p50 ms':>8s} {'/ plain':>8s}")
    for variant, xs in times.items():
        p50 = statistics.median(xs)
        print(f"{variant:10s} {len(xs):7d} {p50 * 1e3:8.3f} {p50 / base:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
