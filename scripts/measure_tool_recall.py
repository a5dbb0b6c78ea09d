"""Whether the tool a model called was declared in the request built just before the call.

Why: tool exposure declares a subset of a larger toolkit (``tool_exposure``); a subset that
leaves out the tool the model goes on to call costs the turn (the model asks again, improvises,
or gives up). Real traces say which tool each turn needed: this script replays runs as an agent
loop does (the log's events appended one by one, a live build before each model response) and,
for every response that calls tools, counts the called tools that the build just before it
declared. A tool the history already calls is declared for that reason alone; recall therefore
measures the exposure of the tools a turn needs, however the rules chose them.

It reports, per ``max_tools`` cap: ``recall`` (called tools declared / called tools), ``first
calls`` (the same, for the first call of each tool in its run: a tool the history did not call
yet is declared only by relevance, recency, the toolkit or the fallback), and the mean number
of tools declared per build. ``--tools FILE`` registers a JSON list of tool specs before the
first user input of each run (tau-bench's traces do not log their toolkit).

    contextfold --store sqlite:///tau.db import \\
        ../shared/traces/tau-bench-gpt4o-airline/gpt-4o-airline.json --run tau
    .venv/bin/python scripts/measure_tool_recall.py --store sqlite:///tau.db --prefix tau/ \\
        --tools scripts/data/tau_airline_tools.json --caps 12,6
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure_prefix_reuse import replay_logs  # (scripts/ is the path's first entry)

from contextfold.domain.events import AnyEvent, ModelResponse
from contextfold.domain.manifest import BuildConfig

__all__ = ["main"]


@dataclass
class Recall:
    calls: int = 0
    declared: int = 0
    first_calls: int = 0
    first_declared: int = 0
    builds: int = 0
    tools: int = 0


def measure_run(events: list[AnyEvent], run_id: str, config: BuildConfig, scratch: Any, out: Recall) -> None:
    run = scratch.run(f"{config.max_tools}/{run_id}")
    called: set[str] = set()
    done = 0
    for i, event in enumerate(events):
        if not isinstance(event, ModelResponse):
            continue
        run.append(events[done:i])
        done = i
        declared = {t.name for t in run.build(config=config).manifest.tools}
        out.builds += 1
        out.tools += len(declared)
        for name in dict.fromkeys(c.name for c in event.tool_calls):
            out.calls += 1
            out.declared += name in declared
            if name not in called:
                out.first_calls += 1
                out.first_declared += name in declared
                called.add(name)
    run.append(events[done:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="store URL holding the runs (e.g. imported traces)")
    ap.add_argument("--prefix", default="", help="only runs whose id starts with this")
    ap.add_argument("--limit", type=int, default=0, help="at most this many runs (0: all)")
    ap.add_argument("--provider", default="openai-chat")
    ap.add_argument("--window", type=int, default=200_000)
    ap.add_argument("--caps", default="12,6", help="max_tools values to measure, comma-separated")
    ap.add_argument("--tools", type=Path, default=None, help="JSON list of tool specs to register")
    args = ap.parse_args(argv)
    with replay_logs(args.store, args.prefix, args.limit or None, args.tools) as (logs, scratch):
        for cap in map(int, args.caps.split(",")):
            config = BuildConfig(provider=args.provider, window=args.window, max_tools=cap)
            out = Recall()
            for rid, events in logs.items():
                measure_run(events, rid, config, scratch, out)
            print(f"max_tools {cap:>3}: {len(logs)} runs, {out.builds} builds; "
                  f"recall {out.declared}/{out.calls} = {out.declared / max(out.calls, 1):.1%}; "
                  f"first calls {out.first_declared}/{out.first_calls} = "
                  f"{out.first_declared / max(out.first_calls, 1):.1%}; "
                  f"mean tools declared {out.tools / max(out.builds, 1):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
