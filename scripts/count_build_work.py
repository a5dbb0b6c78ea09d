#!/usr/bin/env python3
"""Count the work inside A's first builds: machine instructions (callgrind) or bytecodes by function.

Why: a change worth 2-5% of a build does not show in timings on a shared 2-core machine, whose
runs swing more than that (``bench_ab.py``'s paired ratios have an IQR of about +-10%). A count
of the instructions executed is deterministic: the same code on the same turns gives the same
count to ~0.03%, so a small change is measured exactly (what it does not say is what memory
stalls cost, which the timings keep).

Modes:

- ``--instructions`` (default): re-runs this script under ``valgrind --tool=callgrind`` with
  collection off, and turns it on only inside the timed builds (a client request from a tiny C
  helper compiled here with ``gcc``: ``CALLGRIND_TOGGLE_COLLECT`` around each build). Prints
  the instructions per build. Needs valgrind, its headers (``valgrind/callgrind.h``) and gcc;
  ~2 minutes for the default 10 runs.
- ``--bytecodes``: counts the bytecodes each Python function executes inside the builds
  (``sys.monitoring``: Python 3.12 or newer, e.g. a second venv), split into the builds that
  cut a text and those that do not, and prints the top functions. What a function costs in
  the interpreter, which ``cProfile`` (that slows every call) and sampling profilers (that
  miss short builds) blur.

The loop is ``profile_build.py``'s: each turn's messages appended to a SQLite store and
folded, one untimed warm-up pair, then per turn ``neutral`` (the ``first`` build) and
``openai-chat`` (``second``), and the context-built record appended. The cyclic GC is off
(a collection lands in whichever build allocates when it is due: it would make the count
depend on the heap's history).

Usage:
  .venv/bin/python scripts/count_build_work.py [--runs 10] [--budget 3000] [--kind first|second]
  .venv3.12/bin/python scripts/count_build_work.py --bytecodes [--split plain|cut|all]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_build as bb

from contextfold.api import render_request
from contextfold.domain.events import RunStarted
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import builder
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.event_store import EventStore

_TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"
_REPO = str(Path(__file__).resolve().parents[1]) + "/"


def drive(runs: int, budget: int, kind: str, around: Callable[[Callable[[], Any]], Any]) -> int:
    """The agent loop over the first ``runs`` tau-bench runs; ``around(build)`` runs each
    build of ``kind`` (the others run plain). Returns the number of turns."""
    with bb.TAU.open() as fh:
        data = json.load(fh)[:runs]
    store = EventStore(f"sqlite:///{tempfile.mkdtemp(prefix='cf-count-')}/runs.db")
    first = BuildConfig(provider="neutral", window=budget + bb.RESERVE, reserve=bb.RESERVE)
    second = BuildConfig(provider="openai-chat", window=budget + bb.RESERVE, reserve=bb.RESERVE)
    turns_done = 0
    for n, run in enumerate(data):
        traj = run["traj"]
        events = bb.to_events(traj)
        run_id = f"tau-{n}"
        state = new_state(run_id)
        for rec in store.append(run_id, [RunStarted(agent="count", model="gpt-4o")]):
            fold_event(state, rec)
        fed = 0
        for t in bb.assistant_turns(traj):
            for rec in store.append(run_id, events[fed:t]):
                fold_event(state, rec)
            fed = t
            if n == 0 and turns_done == 0:  # warms imports and the process-wide tables
                builder.build_context(state, first, render=render_request)
                builder.build_context(state, second, render=render_request)
            for config, name in ((first, "first"), (second, "second")):
                def build(config: BuildConfig = config, state: Any = state) -> Any:
                    return builder.build_context(state, config, render=render_request)
                result = around(build) if name == kind else build()
            turns_done += 1
            for rec in store.append(run_id, [result.record()]):
                fold_event(state, rec)
    store.close()
    return turns_done


def instructions(args: argparse.Namespace) -> int:
    """Under callgrind: collect inside the builds only and print the count per build."""
    if os.environ.get("CONTEXTFOLD_UNDER_CALLGRIND") != "1":
        for tool in ("valgrind", "gcc"):
            if shutil.which(tool) is None:
                print(f"{tool} is not installed (apt-get install -y valgrind gcc)", file=sys.stderr)
                return 2
        work = Path(tempfile.mkdtemp(prefix="cf-callgrind-"))
        (work / "toggle.c").write_text(_TOGGLE_C)
        built = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(work / "toggle.so"),
                                str(work / "toggle.c")], capture_output=True, text=True)
        if built.returncode:
            print(f"could not build the callgrind helper (valgrind headers?): {built.stderr}",
                  file=sys.stderr)
            return 2
        out = work / "callgrind.out"
        env = {**os.environ, "CONTEXTFOLD_UNDER_CALLGRIND": "1", "PYTHONHASHSEED": "0",
               "CONTEXTFOLD_CALLGRIND_HELPER": str(work / "toggle.so")}
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                               f"--callgrind-out-file={out}", sys.executable, __file__, *sys.argv[1:]],
                              env=env, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return proc.returncode
        turns = int(re.search(r"^turns (\d+)$", proc.stdout, re.M).group(1))  # type: ignore[union-attr]
        total = int(re.search(r"Collected : (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
        print(f"{args.kind} builds: {turns}, instructions {total:,} ({total / turns:,.0f} per build); "
              f"callgrind output {out}")
        return 0
    helper = ctypes.CDLL(os.environ["CONTEXTFOLD_CALLGRIND_HELPER"])

    def around(build: Callable[[], Any]) -> Any:
        helper.cg_toggle()
        try:
            return build()
        finally:
            helper.cg_toggle()

    print(f"turns {drive(args.runs, args.budget, args.kind, around)}")
    return 0


def bytecodes(args: argparse.Namespace) -> int:
    """Bytecodes executed per function inside the builds (``sys.monitoring``)."""
    monitoring: Any = getattr(sys, "monitoring", None)
    if monitoring is None:
        print("--bytecodes needs Python 3.12 or newer (sys.monitoring)", file=sys.stderr)
        return 2
    tool = monitoring.PROFILER_ID
    monitoring.use_tool_id(tool, "count_build_work")
    counts: Counter[CodeType] = Counter()
    calls: Counter[CodeType] = Counter()
    monitoring.register_callback(tool, monitoring.events.INSTRUCTION,
                                 lambda code, offset: counts.update((code,)))
    monitoring.register_callback(tool, monitoring.events.PY_START, lambda code, offset: calls.update((code,)))
    kept = 0

    def around(build: Callable[[], Any]) -> Any:
        nonlocal kept
        before, before_calls = counts.copy(), calls.copy()
        monitoring.set_events(tool, monitoring.events.INSTRUCTION | monitoring.events.PY_START)
        try:
            result = build()
        finally:
            monitoring.set_events(tool, 0)
        cut = bool(result.manifest.truncations)
        if args.split != "all" and cut != (args.split == "cut"):  # not one of the builds asked for
            counts.clear()
            counts.update(before)
            calls.clear()
            calls.update(before_calls)
        else:
            kept += 1
        return result

    drive(args.runs, args.budget, args.kind, around)
    monitoring.free_tool_id(tool)
    total = sum(counts.values())
    n = max(kept, 1)
    print(f"{args.kind} builds ({args.split}): {kept}; per build {total / n:,.0f} bytecodes, "
          f"{sum(calls.values()) / n:,.0f} Python calls")
    print(f"{'bytecodes':>9} {'share':>6} {'calls':>6}  function")
    for code, c in counts.most_common(args.top):
        where = f"{code.co_filename.replace(_REPO, '')}:{code.co_firstlineno}:{code.co_name}"
        print(f"{c / n:9,.0f} {100 * c / max(total, 1):5.1f}% {calls[code] / n:6.1f}  {where}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="tau-bench runs (default 10: ~140 turns)")
    parser.add_argument("--budget", type=int, default=3000)
    parser.add_argument("--kind", choices=("first", "second"), default="first",
                        help="which build of a turn to count")
    parser.add_argument("--bytecodes", action="store_true", help="bytecodes by function (Python 3.12+)")
    parser.add_argument("--split", choices=("all", "plain", "cut"), default="all",
                        help="with --bytecodes: every build, or those that cut (or not) a text")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    gc.disable()
    return bytecodes(args) if args.bytecodes else instructions(args)


if __name__ == "__main__":
    sys.exit(main())
