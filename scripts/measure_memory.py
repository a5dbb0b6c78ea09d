"""Where a long-lived process's memory goes as it records and builds run after run, and whether it levels off.

Why: a runtime keeps one process alive for days and builds for thousands of runs through the
public API (``store.run(id)``, ``Run.append``, ``Run.build``). What it keeps across runs is the
process-wide memos (token counts, rendered messages and their JSON, redactions, cut texts) and
each store's caches; per run it should keep nothing once the run's handle is dropped. This
drives that loop and prints, every ``--every`` runs: the RSS, the memos' entries and estimated
bytes (``contextfold.projections.memo_budget.memo_report``), the live ``Run`` handles and run states, and
with ``--tracemalloc`` the allocation sites holding the most memory (and what grew since the
last report). A line that keeps rising after the memos have filled is a leak.

Workloads (``--workload``):
  ``tau``   the 200 tau-bench airline trajectories (``$CONTEXTFOLD_TRACES``), cycled with each
            run's texts made distinct (``[run N]`` prefixed), every assistant turn built for
            ``--provider`` at ``--window`` and recorded, as an agent loop would.
  ``long``  synthetic runs of ``--turns`` tool calls, each output 20-400 KB of distinct log lines:
            the memos holding long texts (redactions, cuts, counts) fill in few runs.
  ``mixed`` both, alternating.
  ``random`` the random agents of ``tests/integration/test_random_runs.py`` (inputs, parallel
            calls, compactions, five providers, rebuilds), 60 steps each.

``--keep`` keeps every ``Run`` handle (a runtime that never drops them; their states are the
caller's memory); by default each handle is dropped after its run. ``--store`` takes a store URL
(default: a new SQLite file); ``--second-store`` opens another, builds a few runs there, closes
it and checks its connections and caches were released (weakrefs).

Usage:
  .venv/bin/python scripts/measure_memory.py --workload tau --runs 1500 --every 100
  .venv/bin/python scripts/measure_memory.py --workload long --runs 300 --tracemalloc
  .venv/bin/python scripts/measure_memory.py --runs 50 --second-store postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextfold
from contextfold.api import Run, Store
from contextfold.domain.errors import ContextfoldError
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.importers.openai_chat import parse_messages
from contextfold.projections.memo_budget import memo_report
from contextfold.projections.state import RunState

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"


def rss_mb() -> float:
    """Resident memory now, from /proc (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / (1 << 20)


def tau_runs() -> Iterator[list[dict[str, Any]]]:
    """The tau-bench trajectories, cycled, each run's texts distinct from every other's."""
    with TAU.open() as fh:
        data = json.load(fh)
    n = 0
    while True:
        for run in data:
            n += 1
            traj = []
            for m in run["traj"]:
                m = dict(m)
                if isinstance(m.get("content"), str) and m["role"] in ("user", "tool"):
                    m["content"] = f"[run {n}] {m['content']}"
                traj.append(m)
            yield traj


def drive_tau(run: Run, traj: list[dict[str, Any]], provider: str, window: int) -> int:
    """Append the trajectory turn by turn, building (and recording) before each assistant message."""
    events = parse_messages(traj, ())[1:]
    run.append(RunStarted(agent="measure", model="gpt-4o"))
    builds = fed = 0
    turns = [i for i, m in enumerate(traj) if m["role"] == "assistant"]
    for t in turns:
        if t > fed:
            run.append(events[fed:t])
        fed = t
        run.build(provider, window=window)
        builds += 1
    return builds


def drive_long(run: Run, seed: int, turns: int, provider: str, window: int) -> int:
    """A run of ``turns`` shell calls whose outputs are 20-400 KB of distinct log lines, built each turn."""
    rng = random.Random(seed)
    run.append(RunStarted(agent="measure", model="gpt-4o"), UserInput(f"look at the logs of job {seed}"))
    for k in range(turns):
        cid = f"c{k}"
        line = f"2026-12-04 INFO job {seed} step {k} worker {{i}} processed item in {{ms}}ms ok\n"
        text = "".join(line.format(i=i, ms=rng.randint(1, 99)) for i in range(rng.randint(250, 5_000)))
        call = ToolCall(call_id=cid, name="sh", arguments='{"cmd": "cat log"}')
        run.append(ModelResponse(tool_calls=(call,)), ToolResult(call_id=cid, content=text))
        run.build(provider, window=window)
    return turns


def drive_random(run: Run, seed: int, steps: int = 60) -> int:
    """One random agent of the property tests, ``steps`` steps (appends, builds, compactions)."""
    from tests.integration.test_random_runs import Agent

    agent = Agent(run, seed)
    for _ in range(steps):
        agent.step()
    return steps


def live_objects() -> tuple[int, int, int]:
    """Live Run handles, run states and stores (by a walk of the GC's objects)."""
    runs = states = stores = 0
    for o in gc.get_objects():
        if isinstance(o, Run):
            runs += 1
        elif isinstance(o, RunState):
            states += 1
        elif isinstance(o, Store):
            stores += 1
    return runs, states, stores


def check_closed_store(url: str, runs: int, provider: str, window: int) -> None:
    """Open a second store, build a few runs there, close it, drop it: is what it held freed?"""
    store = contextfold.open_store(url)
    prefix = f"second-{os.getpid()}-{time.time_ns()}"
    traj_iter = tau_runs()
    for n in range(runs):
        drive_tau(store.run(f"{prefix}-{n}"), next(traj_iter), provider, window)
    events = store.events
    refs = {"store": weakref.ref(store), "event store": weakref.ref(events),
            "backend": weakref.ref(events.backend)}
    rss_open = rss_mb()
    store.close()
    del store, events
    gc.collect()
    alive = [name for name, ref in refs.items() if ref() is not None]
    print(f"second store {url.split('?')[0]}: {runs} runs built, closed; "
          f"RSS {rss_open:.0f} -> {rss_mb():.0f} MB; still alive after close and drop: {alive or 'nothing'}",
          flush=True)


def report(n: int, builds: int, t0: float, snap: tracemalloc.Snapshot | None,
           last: tracemalloc.Snapshot | None, top: int) -> None:
    gc.collect()
    runs, states, stores = live_objects()
    memos = memo_report()
    held = sum(m.bytes for m in memos)
    print(f"after {n:5d} runs ({builds} builds, {time.perf_counter() - t0:.0f} s): RSS {rss_mb():6.0f} MB; "
          f"memos ~{held / 2**20:.0f} MB; live Run {runs}, RunState {states}, Store {stores}", flush=True)
    for m in sorted(memos, key=lambda m: -m.bytes)[:top]:
        print(f"    {m.bytes / 2**20:7.1f} MB {m.entries:9d} entries  {m.name}")
    if snap is not None:
        stats = snap.statistics("lineno")
        print(f"    tracemalloc: {sum(s.size for s in stats) / 2**20:.0f} MB traced; top sites:")
        for s in stats[:top]:
            print(f"      {s.size / 2**20:7.1f} MB {s.count:8d} blocks  {s.traceback[0]}")
        if last is not None:
            print("    grew since the last report:")
            for d in snap.compare_to(last, "lineno")[:top]:
                print(f"      {d.size_diff / 2**20:+7.1f} MB {d.count_diff:+8d} blocks  {d.traceback[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=("tau", "long", "mixed", "random"), default="tau")
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--every", type=int, default=100, help="report every N runs")
    ap.add_argument("--turns", type=int, default=12, help="long: tool calls per run")
    ap.add_argument("--provider", default="openai-chat")
    ap.add_argument("--window", type=int, default=16_000)
    ap.add_argument("--keep", action="store_true",
                    help="keep every Run handle (default: dropped after its run)")
    ap.add_argument("--store", default=None, help="store URL (default: a new SQLite file)")
    ap.add_argument("--second-store", default=None,
                    help="a store URL to build a few runs in, close, and check freed")
    ap.add_argument("--tracemalloc", action="store_true", help="report the top allocation sites (slow: ~2x)")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    if args.workload in ("tau", "mixed") and not TAU.exists():
        print(f"traces not found: {TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    if args.tracemalloc:
        tracemalloc.start(1)
    tmp = tempfile.mkdtemp(prefix="cf-memory-")
    store = contextfold.open_store(args.store or f"sqlite:///{tmp}/runs.db")
    prefix = f"m{os.getpid()}-{time.time_ns()}"
    kept: list[Run] = []
    traj_iter = tau_runs() if args.workload in ("tau", "mixed") else iter(())
    print(f"workload {args.workload}, provider {args.provider}, window {args.window}, handles "
          f"{'kept' if args.keep else 'dropped'}: RSS {rss_mb():.0f} MB at the start", flush=True)
    builds, t0, last = 0, time.perf_counter(), None
    for n in range(1, args.runs + 1):
        run = store.run(f"{prefix}-{n}")
        try:
            if args.workload == "random":
                builds += drive_random(run, n)
            elif args.workload == "tau" or (args.workload == "mixed" and n % 2):
                builds += drive_tau(run, next(traj_iter), args.provider, args.window)
            else:
                builds += drive_long(run, n, args.turns, args.provider, args.window)
        except ContextfoldError as e:  # a run the window cannot hold: reported, the loop goes on
            print(f"  run {n}: {type(e).__name__}: {str(e)[:120]}")
        if args.keep:
            kept.append(run)
        del run
        if n % args.every == 0:
            snap = tracemalloc.take_snapshot() if args.tracemalloc else None
            report(n, builds, t0, snap, last, args.top)
            last = snap
    if args.second_store:
        check_closed_store(args.second_store, 5, args.provider, args.window)
        gc.collect()
        print(f"after the second store: RSS {rss_mb():.0f} MB", flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
