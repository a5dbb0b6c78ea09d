#!/usr/bin/env python3
"""Where a build's time goes: per-stage p50 for the first and later builds of a turn, and the GC.

Why: ``bench_build.py`` says how long a build takes beside the peers; this says which stage
pays for it, so a change can be aimed and its effect seen stage by stage. Each stage is a
module-level function of ``contextfold.projections.builder``, wrapped with a timer for the run
(the wrapper adds about a microsecond per call). The cyclic GC is reported apart: the build
pauses it and the collection that follows (timed by ``gc.callbacks``) lands at the build's end.

The agent loop is ``bench_build``'s: per turn, append the new messages to a SQLite store and
fold them, build ``neutral`` (the ``first`` build: it pays the turn's new events), build
``openai-chat`` (``second``), build it again with nothing new (``rebuild``), append the
context-built record and fold it. ``--first-provider openai-chat`` makes the first build an
``openai-chat`` one: what a runtime that builds for one provider pays per turn.

Workloads: ``A``, every turn of the first ``--runs`` tau-bench runs at ``--budget``; ``B``, the
last ``--turns`` turns of the synthetic 10,000-message run at 128k (as in ``bench_build.py``).

``--evict`` writes a 64 MB buffer before every timed build, so the build starts with the CPU's
caches holding none of its data or code, as after an agent's wait for the model (other work
runs meanwhile). The loop itself leaves them partly warm (the fold and the record write touch
less); the difference says how much of a stage is memory traffic rather than work.

Each kind of build runs under a function of its own (``build_first``, ``build_second``,
``build_rebuild``), so a sampling profiler (``pip install py-spy``) can split its samples by kind:
``py-spy record --nonblocking -r 1000 -f raw -o spy.txt -- .venv/bin/python scripts/profile_build.py
--workload B``, then ``--spy-report spy.txt`` gives each stage's share of the first builds' samples
(several raw files add up: one run holds ~250 samples of B's first builds). ``--nonblocking``
matters: by default py-spy stops the process for each sample, and at 1 kHz on a 2-core machine it
fell behind, stretched the first builds' samples ~40-fold and moved the shares (the cut of the
edge unit: 34% of them blocking, 8% non-blocking over six runs; the stage timers above put it at
~15%). Read a share as a rough size, and a stage's timer for its cost.

Usage:
  .venv/bin/python scripts/profile_build.py --workload A [--runs 200] [--budget 3000]
  .venv/bin/python scripts/profile_build.py --workload B [--turns 100] [--cprofile first]
  .venv/bin/python scripts/profile_build.py --workload B --evict
  .venv/bin/python scripts/profile_build.py --spy-report spy.txt [--spy-kind first]
Needs the benchmark extras (``pip install -e '.[bench]'``) and, for A, the traces.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_build as bb

from contextfold.api import render_request
from contextfold.domain.events import RunStarted
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import builder
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.event_store import EventStore

STAGES = ("make_units", "_tool_candidates", "_select", "kept_texts", "dropped_lines", "lay_out",
          "finalize_media", "conversation_json", "finish_build")
"""The builder's stages, in the order a build runs them (module-level names in ``builder``)."""
KINDS = ("first", "second", "rebuild")


def build_first(state: Any, config: BuildConfig) -> Any:
    return builder.build_context(state, config, render=render_request)


def build_second(state: Any, config: BuildConfig) -> Any:
    return builder.build_context(state, config, render=render_request)


def build_rebuild(state: Any, config: BuildConfig) -> Any:
    return builder.build_context(state, config, render=render_request)


_BY_KIND = {"first": build_first, "second": build_second, "rebuild": build_rebuild}
"""One function per kind of build, so a sampling profiler's stacks say which kind a sample is in."""


class Probe:
    """Stage timers and GC timers, attributed to the kind of build running."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.stages: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.builds: dict[str, list[float]] = defaultdict(list)
        self.gc: dict[tuple[str, int], list[float]] = defaultdict(list)
        self._gc_start = 0.0
        self.evict: bytearray | None = None
        """A buffer larger than the last-level cache, written before each timed build."""

    def wrap(self, name: str) -> None:
        inner = getattr(builder, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                if self.kind is not None:
                    self.stages[(self.kind, name)].append(time.perf_counter() - t0)
        setattr(builder, name, timed)

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self.kind is not None:
            self.gc[(self.kind, info["generation"])].append(time.perf_counter() - self._gc_start)

    def build(self, kind: str, state: Any, config: BuildConfig, prof: cProfile.Profile | None) -> Any:
        if self.evict is not None:
            self.evict[::64] = b"\x01" * (len(self.evict) // 64)  # one write per cache line
        self.kind = kind
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        try:
            return _BY_KIND[kind](state, config)
        finally:
            self.builds[kind].append(time.perf_counter() - t0)
            if prof is not None:
                prof.disable()
            self.kind = None


def p50(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else 0.0


def turns_a(runs: int) -> Iterator[tuple[str, list[dict[str, Any]], list[int]]]:
    with bb.TAU.open() as fh:
        data = json.load(fh)[:runs]
    for i, run in enumerate(data):
        yield f"tau-{i}", run["traj"], bb.assistant_turns(run["traj"])


def turns_b(turns: int) -> Iterator[tuple[str, list[dict[str, Any]], list[int]]]:
    syn = bb.synth_history()
    yield "synthetic-10k", syn, bb.assistant_turns(syn)[-turns:]


def drive(probe: Probe, runs: Iterator[tuple[str, list[dict[str, Any]], list[int]]], budget: int,
          profile: str | None, progress: Callable[[str], None],
          first_provider: str = "neutral") -> cProfile.Profile | None:
    store = EventStore(f"sqlite:///{tempfile.mkdtemp(prefix='cf-profile-')}/runs.db")
    first = BuildConfig(provider=first_provider, window=budget + bb.RESERVE, reserve=bb.RESERVE)
    second = BuildConfig(provider="openai-chat", window=budget + bb.RESERVE, reserve=bb.RESERVE)
    prof = cProfile.Profile() if profile else None
    for n, (run_id, traj, turns) in enumerate(runs, 1):
        events = bb.to_events(traj)
        state = new_state(run_id)
        for rec in store.append(run_id, [RunStarted(agent="profile", model="gpt-4o")]):
            fold_event(state, rec)
        fed = 0
        for t in turns:
            for i in range(fed, t, 5000):
                for rec in store.append(run_id, events[i:min(t, i + 5000)]):
                    fold_event(state, rec)
            fed = t
            if n == 1 and t == turns[0]:  # one untimed pair warms imports and the facts tables
                builder.build_context(state, first, render=render_request)
                builder.build_context(state, second, render=render_request)
            probe.build("first", state, first, prof if profile == "first" else None)
            result = probe.build("second", state, second, prof if profile == "second" else None)
            probe.build("rebuild", state, second, prof if profile == "rebuild" else None)
            for rec in store.append(run_id, [result.record()]):
                fold_event(state, rec)
            del rec, result  # dropped once stored, as Run.build(record=True) does (bench_build)
        progress(f"{n} run(s), {len(probe.builds['first'])} turns")
    store.close()
    return prof


def report(probe: Probe) -> None:
    print(f"{'':22s}" + "".join(f"{k:>12s}" for k in KINDS) + "   (p50 ms per build; stage p50 over "
          "the builds that ran it)")
    print(f"{'build':22s}" + "".join(f"{p50(probe.builds[k]) * 1e3:12.3f}" for k in KINDS))
    for name in STAGES:
        cells = [probe.stages.get((k, name), []) for k in KINDS]
        if any(cells):
            print(f"  {name:20s}" + "".join(f"{p50(c) * 1e3:12.3f}" if c else f"{'-':>12s}" for c in cells)
                  + f"   ran in {len(cells[0])} first builds")
    print("GC inside builds (collections after the paused build, by generation): count, total ms, "
          "mean ms")
    for k in KINDS:
        n_builds = len(probe.builds[k]) or 1
        row = []
        for g in (0, 1, 2):
            xs = probe.gc.get((k, g), [])
            row.append(f"gen{g} {len(xs):5d} {sum(xs) * 1e3:9.1f} {sum(xs) / max(len(xs), 1) * 1e3:7.3f}")
        share = sum(sum(v) for (kk, _), v in probe.gc.items() if kk == k) / n_builds
        print(f"  {k:8s} " + " | ".join(row) + f" | {share * 1e3:.3f} ms per build on average")


def _called_from(names: list[str], frame: str) -> str:
    """The frame ``frame`` called in a stack (outermost first), or its own lines when it is the last."""
    at = names.index(frame) + 1
    return names[at] if at < len(names) else f"{frame} (own lines)"


def spy_report(paths: list[str], kind: str) -> None:
    """Per-stage share of a py-spy raw profile's samples in builds of ``kind``: each sample is
    given to the frame under ``_build`` (this script's stage timers skipped), the GC collection
    at ``paused_gc``'s exit to the GC, and a sample under ``finish_build`` is split once more."""
    marker = _BY_KIND[kind].__name__
    total, stages, finish = 0, Counter[str](), Counter[str]()
    for path in paths:
        for line in Path(path).read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            names = [f.split(" (")[0] for f in stack.split(";") if "wrap.<locals>.timed" not in f]
            if marker not in names:
                continue
            n = int(samples)
            total += n
            if "_build" not in names:
                gc_exit = "_GeneratorContextManager.__exit__" in names
                stages["GC (at paused_gc's exit)" if gc_exit else f"outside _build: {names[-1]}"] += n
                continue
            stages[_called_from(names, "_build")] += n
            if "finish_build" in names:
                finish[_called_from(names, "finish_build")] += n
    print(f"{total} samples in {kind} builds")
    for name, n in stages.most_common(16):
        print(f"  {n / max(total, 1):6.1%}  {name}")
    print("  of which in finish_build:")
    for name, n in finish.most_common(6):
        print(f"  {n / max(total, 1):6.1%}    {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=("A", "B"), default="A")
    ap.add_argument("--runs", type=int, default=200, help="A: how many tau-bench runs (default all 200)")
    ap.add_argument("--budget", type=int, default=3000, help="A: the budget (window - reserve)")
    ap.add_argument("--turns", type=int, default=100, help="B: how many of the last turns")
    ap.add_argument("--cprofile", choices=KINDS, help="also profile that kind of build (cProfile)")
    ap.add_argument("--top", type=int, default=30, help="cProfile rows to print")
    ap.add_argument("--sort", choices=("tottime", "cumulative"), default="tottime",
                    help="cProfile order: own time, or time including callees (which subtree pays)")
    ap.add_argument("--callers", metavar="PATTERN",
                    help="with --cprofile: also print who calls the functions matching PATTERN")
    ap.add_argument("--evict", action="store_true",
                    help="write 64 MB before each timed build: every build starts with cold caches")
    ap.add_argument("--spy-report", nargs="+", metavar="RAW",
                    help="only report: the per-stage share of the samples in py-spy raw profiles "
                         "(py-spy record -f raw) of this script, for the --spy-kind builds")
    ap.add_argument("--spy-kind", choices=KINDS, default="first")
    ap.add_argument("--first-provider", choices=("neutral", "openai-chat"), default="neutral",
                    help="the provider of each turn's first build: openai-chat is a runtime that "
                         "builds for one provider (its second build is then the first one again)")
    args = ap.parse_args()
    if args.spy_report:
        spy_report(args.spy_report, args.spy_kind)
        return 0
    if args.workload == "A" and not bb.TAU.exists():
        print(f"traces not found: {bb.TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    probe = Probe()
    if args.evict:
        probe.evict = bytearray(64 * 1024 * 1024)
    for name in STAGES:
        probe.wrap(name)
    gc.callbacks.append(probe.on_gc)
    runs = turns_a(args.runs) if args.workload == "A" else turns_b(args.turns)
    budget = args.budget if args.workload == "A" else bb.BUDGET_B

    def progress(msg: str) -> None:  # every 20th run of A, and the one run of B
        if int(msg.split()[0]) % 20 == 0 or args.workload == "B":
            print(f"  .. {msg}", file=sys.stderr, flush=True)

    prof = drive(probe, runs, budget, args.cprofile, progress, args.first_provider)
    print(f"workload {args.workload}, budget {budget}: {len(probe.builds['first'])} turns"
          + (", caches evicted before each build" if args.evict else "")
          + f", first builds for {args.first_provider}")
    report(probe)
    if prof is not None:
        print(f"\ncProfile of the {args.cprofile} builds ({args.sort}; cProfile slows Python calls):")
        stats = pstats.Stats(prof).sort_stats(args.sort)
        stats.print_stats(args.top)
        if args.callers:
            stats.print_callers(args.callers)
            stats.print_callees(args.callers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
