"""What a long-lived process keeps in memory as it builds for run after run.

Why: the process-wide memos (rendered messages, their JSON, token counts, redaction results, cut
texts) are what make a turn cost O(its new events), and they are shared by every run a process
serves. Each must be bounded, by entries and by the size of what it holds, or a runtime that
serves many runs grows until it is killed. This prints the process's RSS as it goes, so a memo
that keeps growing shows as a line that keeps rising rather than a plateau.

Workloads:
  ``large``  each run one tool output of 0.1-2 MB (distinct text), built for two providers
             under a small window, as an agent that cats logs would: the redaction and
             truncation memos hold texts of that size.
  ``random`` the random agents of ``tests/integration/test_random_runs.py`` (inputs, parallel
             calls, compactions, five providers, rebuilds), 60 steps each, one SQLite store.

Usage:
  .venv/bin/python scripts/measure_process_memory.py --workload large --runs 150
  .venv/bin/python scripts/measure_process_memory.py --workload random --runs 400
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextfold.api import open_store, render_request
from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold


def rss_mb() -> int:
    """Resident memory now, from /proc (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 >> 20


def large_run(seed: int) -> int:
    """Fold and build one run whose only tool output is 0.1-2 MB; returns its size in bytes."""
    rng = random.Random(seed)
    line = "2026-12-04 INFO worker {i} processed item in 3ms ok\n"
    text = "".join(line.format(i=i * (seed + 1)) for i in range(rng.randint(2_000, 40_000)))
    events: list[AnyEvent] = [UserInput("show the worker log"),
              ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh"),)),
              ToolResult(call_id="c1", content=text)]
    state = fold([RecordedEvent(f"large-{seed}", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    for provider in ("openai-chat", "anthropic"):
        with contextlib.suppress(RequiredContextExceedsBudgetError):  # a window too small for it
            build_context(state, BuildConfig(provider=provider, window=rng.randint(700, 6_000), reserve=300),
                          render=render_request)
    return len(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=("large", "random"), default="large")
    ap.add_argument("--runs", type=int, default=150)
    ap.add_argument("--every", type=int, default=25, help="print the RSS every N runs")
    args = ap.parse_args()
    fed = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/memory.db") if args.workload == "random" else None
        if store is not None:
            from tests.integration.test_random_runs import Agent
        print(f"workload {args.workload}: RSS {rss_mb()} MB at the start")
        for n in range(1, args.runs + 1):
            if store is None:
                fed += large_run(n)
            else:
                agent = Agent(store.run(f"random-{n}"), n)
                for _ in range(60):
                    agent.step()
            if n % args.every == 0:
                gc.collect()
                extra = f", {fed / 1e6:.0f} MB of tool output so far" if fed else ""
                print(f"  after {n:4d} runs: RSS {rss_mb():5d} MB{extra}", flush=True)
        if store is not None:
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
