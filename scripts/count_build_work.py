#!/usr/bin/env python3
"""Count the work inside A's or B's builds: machine instructions (callgrind) or bytecodes by function.

Why: a change worth 2-5% of a build does not show in timings on a shared 2-core machine, whose
runs swing more than that (``bench_ab.py``'s paired ratios have an IQR of about +-10%). A count
of the instructions executed is deterministic: the same code on the same turns gives the same
count to ~0.03%, so a small change is measured exactly (what it does not say is what memory
stalls cost, which the timings keep).

Modes:

- ``--instructions`` (default): re-runs this script under ``valgrind --tool=callgrind`` with
  collection off, and turns it on only inside the timed builds (a client request from a tiny C
  helper compiled here with ``gcc``: ``CALLGRIND_TOGGLE_COLLECT`` around each build, and the
  instrumentation itself started and stopped there). Prints
  the instructions per build. Needs valgrind, its headers (``valgrind/callgrind.h``) and gcc;
  ~2 minutes for the default 10 runs. ``--split plain|cut`` counts only the builds that cut no
  text, or those that cut one: the loop is run once first without valgrind (it is deterministic:
  the same turns give the same builds) to find which builds cut, then only those are collected
  under callgrind. Why: a build that cuts a JSON or log text costs ~4x a plain one (its search's
  probes are tokenized), so the mean over all builds weighs a sixth of them as much as the rest,
  while the p50 that issue 4's goal reads is a plain build's.
- ``--bytecodes``: counts the bytecodes each Python function executes inside the builds
  (``sys.monitoring``: Python 3.12 or newer, e.g. a second venv), split into the builds that
  cut a text and those that do not, and prints the top functions. What a function costs in
  the interpreter, which ``cProfile`` (that slows every call) and sampling profilers (that
  miss short builds) blur.
- ``--stages`` (Python 3.12+): bytecodes and calls (Python and C) by the build's stage, each
  counted in the innermost stage running (``STAGES``: the builder's steps, the parts of
  ``finish_build`` and of an OpenAI body's render and check), the rest under ``(outside the
  stages)``. Why: the per-function table spreads a plain first build over ~480 functions, none
  over 5%; what a structural change would have to remove is a stage's whole share, callees
  included (a plain first build: ``make_units`` 26%, ``finish_build`` 24%, ``_select`` 11%).

Workloads (``--workload``, as in ``profile_build.py``): ``A``, every turn of the first ``--runs``
tau-bench runs at ``--budget``; ``B``, the last ``--turns`` turns of the synthetic 10,000-message
run at 128k (its state folded once, then built at each turn). B's 100 first builds take ~15
minutes under callgrind; ``--turns 20`` counts the same kind of build in ~4.

The loop is ``profile_build.py``'s (its ``drive``): each turn's messages appended to a SQLite
store and folded, one untimed warm-up pair, then per turn ``neutral`` (the ``first`` build),
``openai-chat`` (``second``) and ``openai-chat`` again (``rebuild``), and the context-built
record appended. The cyclic GC is off
(a collection lands in whichever build allocates when it is due: it would make the count
depend on the heap's history).

Usage:
  .venv/bin/python scripts/count_build_work.py [--runs 10] [--budget 3000] [--kind first|second|rebuild]
  .venv/bin/python scripts/count_build_work.py --split plain|cut   (A's builds that cut no text, or one)
  .venv/bin/python scripts/count_build_work.py --workload B [--turns 100]
  .venv3.12/bin/python scripts/count_build_work.py --bytecodes [--split plain|cut|all]
  .venv3.12/bin/python scripts/count_build_work.py --stages [--split plain] [--kind rebuild]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
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
import profile_build as pb
from code_labels import code_label

import contextfold
from contextfold.domain.manifest import BuildConfig

_TOGGLE_C = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_TOGGLE_COLLECT; }
void cg_stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_STOP_INSTRUMENTATION; }
"""
"""Collection on and off around each build; instrumentation too, so what runs between the builds
(B's 10,000 messages made, stored and folded) runs at valgrind's uninstrumented ~5x slowdown rather
than callgrind's ~50x (the count is the same: only the collected builds are counted)."""


class _Counted(pb.Probe):
    """``profile_build``'s probe, with ``around(build)`` running the builds of one kind (the
    others run plain, untimed); ``counted`` is how many it ran."""

    def __init__(self, kind: str, around: Callable[[Callable[[], Any]], Any],
                 only: frozenset[int] | None = None) -> None:
        super().__init__()
        self._kind, self._around, self._only = kind, around, only
        self.seen = 0
        """Builds of the kind run so far (the index of the next one)."""
        self.counted = 0

    def build(self, kind: str, state: Any, config: BuildConfig, prof: Any) -> Any:
        def run() -> Any:
            return pb.build_first(state, config)  # every kind builds alike; only the loop differs
        if kind != self._kind:
            return run()
        index, self.seen = self.seen, self.seen + 1
        if self._only is not None and index not in self._only:  # not one of the builds asked for
            return run()
        self.counted += 1
        return self._around(run)


def drive(args: argparse.Namespace, around: Callable[[Callable[[], Any]], Any],
          only: frozenset[int] | None = None) -> int:
    """``profile_build``'s agent loop over the workload's turns (A: the first ``args.runs``
    tau-bench runs; B: the synthetic run's last ``args.turns``), each build of ``args.kind`` run
    by ``around(build)`` (with ``only``, just those of these indices; the others run plain).
    Returns how many builds ``around`` ran."""
    probe = _Counted(args.kind, around, only)
    if args.workload == "A":
        runs, budget = pb.turns_a(args.runs), args.budget
    else:
        runs, budget = pb.turns_b(args.turns), bb.BUDGET_B
    pb.drive(probe, runs, budget, None, lambda msg: None, first_provider=args.first_provider)
    return probe.counted


def split_builds(args: argparse.Namespace) -> frozenset[int]:
    """The indices (among the builds of ``args.kind``) of those in ``args.split``: the builds that
    cut a text (``cut``) or none (``plain``), found by running the loop once."""
    chosen: set[int] = set()

    def around(build: Callable[[], Any]) -> Any:
        result = build()
        if bool(result.manifest.truncations) == (args.split == "cut"):
            chosen.add(len(seen))
        seen.append(None)
        return result

    seen: list[None] = []
    drive(args, around)
    return frozenset(chosen)


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
        if args.split != "all":  # which builds are the split's: the loop run once, uninstrumented
            (work / "split.txt").write_text(" ".join(map(str, sorted(split_builds(args)))))
            env["CONTEXTFOLD_CALLGRIND_ONLY"] = str(work / "split.txt")
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--instr-atstart=no",
                               f"--callgrind-out-file={out}", sys.executable, __file__, *sys.argv[1:]],
                              env=env, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return proc.returncode
        builds = int(re.search(r"^builds (\d+)$", proc.stdout, re.M).group(1))  # type: ignore[union-attr]
        total = int(re.search(r"Collected : (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
        which = "" if args.split == "all" else f" ({args.split})"
        print(f"workload {args.workload}, {args.kind} builds{which}: {builds}, instructions {total:,} "
              f"({total / max(builds, 1):,.0f} per build); callgrind output {out}; "
              f"contextfold from {Path(contextfold.__file__).parent}")
        return 0
    helper = ctypes.CDLL(os.environ["CONTEXTFOLD_CALLGRIND_HELPER"])

    def around(build: Callable[[], Any]) -> Any:
        helper.cg_start()
        try:
            return build()
        finally:
            helper.cg_stop()

    listed = os.environ.get("CONTEXTFOLD_CALLGRIND_ONLY")
    only = None if listed is None else frozenset(map(int, Path(listed).read_text().split()))
    print(f"builds {drive(args, around, only)}")
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

    drive(args, around)
    monitoring.free_tool_id(tool)
    total = sum(counts.values())
    n = max(kept, 1)
    print(f"{args.kind} builds ({args.split}): {kept}; per build {total / n:,.0f} bytecodes, "
          f"{sum(calls.values()) / n:,.0f} Python calls")
    print(f"{'bytecodes':>9} {'share':>6} {'calls':>6}  function")
    for code, c in counts.most_common(args.top):
        where = code_label(code)
        print(f"{c / n:9,.0f} {100 * c / max(total, 1):5.1f}% {calls[code] / n:6.1f}  {where}")
    return 0


STAGES: tuple[tuple[str, str], ...] = (
    *(("contextfold.projections.builder", name) for name in (
        *pb.STAGES, "tool_inputs", "BuildCtx", "_twins", "history_start_tokens", "_kept_tools",
        "current_input_of", "request_closing_tokens")),
    ("contextfold.projections.state", "RunState.required_and_floor"),
    ("contextfold.projections.state", "RunState.live_timeline"),
    *(("contextfold.projections.finish_build", name) for name in (
        "plain_line", "_remade", "canonical_body", "_cache_key", "_request_id")),
    ("profile_build", "render_request"),
    *(("contextfold.projections.render.requests", name) for name in (
        "render_openai_chat", "validate_request")),
)
"""(module, attribute) of what ``--stages`` counts apart: names the builder (and ``finish_build``,
the benchmark loop's render, ``render_shared``) looks up in its module at each call, so a wrapper
set there sees every call; a method by ``Class.name``."""


def stages(args: argparse.Namespace) -> int:
    """Bytecodes and calls by stage (``STAGES``) inside the builds (``sys.monitoring``)."""
    monitoring: Any = getattr(sys, "monitoring", None)
    if monitoring is None:
        print("--stages needs Python 3.12 or newer (sys.monitoring)", file=sys.stderr)
        return 2
    outside = "(outside the stages)"
    stack = [outside]
    counts: Counter[str] = Counter()
    calls: Counter[str] = Counter()

    def wrap(owner: Any, attr: str, label: str) -> None:
        inner = getattr(owner, attr)

        def staged(*a: Any, **k: Any) -> Any:
            stack.append(label)
            try:
                return inner(*a, **k)
            finally:
                stack.pop()
        setattr(owner, attr, staged)

    for module, path in STAGES:
        owner: Any = importlib.import_module(module)
        *outer, attr = path.split(".")
        for name in outer:
            owner = getattr(owner, name)
        wrap(owner, attr, path)
    tool = monitoring.PROFILER_ID
    monitoring.use_tool_id(tool, "count_build_work")
    monitoring.register_callback(tool, monitoring.events.INSTRUCTION,
                                 lambda code, offset: counts.update((stack[-1],)))
    monitoring.register_callback(tool, monitoring.events.CALL,
                                 lambda code, offset, func, arg: calls.update((stack[-1],)))
    only = None
    if args.split != "all":  # found in another process: the loop run here first would leave the
        # process-wide memos (secret scans by content, token counts) warm for the counted builds
        found = subprocess.run([sys.executable, __file__, "--print-split", *sys.argv[1:]],
                               capture_output=True, text=True, check=True)
        only = frozenset(map(int, found.stdout.split()))

    def around(build: Callable[[], Any]) -> Any:
        monitoring.set_events(tool, monitoring.events.INSTRUCTION | monitoring.events.CALL)
        try:
            return build()
        finally:
            monitoring.set_events(tool, 0)

    n = max(drive(args, around, only), 1)
    monitoring.free_tool_id(tool)
    total = sum(counts.values())
    print(f"{args.kind} builds ({args.split}): {n}; per build {total / n:,.0f} bytecodes, "
          f"{sum(calls.values()) / n:,.0f} calls (Python and C)")
    print(f"{'bytecodes':>9} {'share':>6} {'calls':>6}  stage (its own: a stage inside it is apart)")
    for label, c in counts.most_common():
        print(f"{c / n:9,.0f} {100 * c / max(total, 1):5.1f}% {calls[label] / n:6.1f}  {label}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("A", "B"), default="A",
                        help="A: tau-bench runs; B: the synthetic 10,000-message run at 128k")
    parser.add_argument("--runs", type=int, default=10, help="A: tau-bench runs (default 10: ~140 turns)")
    parser.add_argument("--budget", type=int, default=3000, help="A: the budget (window - reserve)")
    parser.add_argument("--turns", type=int, default=100, help="B: how many of the last turns")
    parser.add_argument("--kind", choices=pb.KINDS, default="first",
                        help="which build of a turn to count")
    parser.add_argument("--bytecodes", action="store_true", help="bytecodes by function (Python 3.12+)")
    parser.add_argument("--stages", action="store_true",
                        help="bytecodes and calls by build stage (Python 3.12+)")
    parser.add_argument("--print-split", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--split", choices=("all", "plain", "cut"), default="all",
                        help="every build, or only those that cut a text (cut) or none (plain)")
    parser.add_argument("--first-provider", choices=("neutral", "openai-chat"), default="neutral",
                        help="the provider of each turn's first build (as in profile_build.py)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    gc.disable()
    if args.print_split:  # (for --stages: the split's builds, from a process of their own)
        print(" ".join(map(str, sorted(split_builds(args)))))
        return 0
    if args.stages:
        return stages(args)
    return bytecodes(args) if args.bytecodes else instructions(args)


if __name__ == "__main__":
    sys.exit(main())
