#!/usr/bin/env python3
"""A/B build timing: the working tree against an earlier commit, in one process, interleaved.

Why: on a shared 2-core machine one configuration's timings swing 20-50% between runs, so
two separate benchmark runs cannot show a 10% change. Here both versions build the same
turns in the same process, one right after the other (their order alternating per turn),
and the report is the median of the paired ratios new/base, with its interquartile range:
drift of the machine hits both sides of a pair alike.

How: ``git archive BASE contextfold`` is unpacked into a temporary folder as the package
``contextfold_base`` (its ``from contextfold``/``import contextfold`` lines rewritten), and
each side records its own copy of the run in its own SQLite store and folds it with its
own code. Every pair of builds must give the same request hash unless ``--changes-output``
says the change is meant to alter the output.

Series (p50 per side, and the paired ratio):

- ``neutral``: the first build of a turn (pays the turn's new events);
- ``openai``: openai-chat built next (the second provider of the turn); with ``--first-provider
  openai-chat`` it is built first (what a runtime that builds for one provider pays) and
  ``neutral`` second;
- ``rebuild``: openai-chat again with nothing new (B only; ``--reps`` per turn);
- ``write`` (with ``--write``): the durable write of the turn's context-built record, made as
  each version makes it (``BuildResult.record`` where it exists) and appended to its store.

Workloads: ``B`` (default), the last ``--turns`` turns of the synthetic 10,000-message run at
128k, as in ``bench_build.py``; ``A``, every turn of the tau-bench runs at ``--budget`` (3,000).

Usage:
  .venv/bin/python scripts/bench_ab.py --base HEAD~3 [--workload B] [--turns 20]
  .venv/bin/python scripts/bench_ab.py --base main --workload A --runs 60
Needs the benchmark extras (``pip install -e '.[bench]'``) and, for A, the traces.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import bench_build as bb  # noqa: E402  (after the path insert)

_IMPORT = re.compile(r"\b(from|import) contextfold(\.|\b)")
_QUOTED = re.compile(r"""(["'])contextfold\.""")
"""A module named in a string (``importlib.import_module``, the lazy exports of ``contextfold``
and ``contextfold.projections.render``, package data): unrewritten, the base's
``render_request`` imported the working tree's renderer, which refused the base's messages."""


def unpack_base(rev: str, into: Path) -> str:
    """The package at ``rev`` as ``contextfold_base`` under ``into``; returns its commit."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "contextfold"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / "contextfold_base"
    (into / "contextfold").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text("utf-8")
        text = _IMPORT.sub(r"\1 contextfold_base\2", text)
        path.write_text(_QUOTED.sub(r"\1contextfold_base.", text), "utf-8")
    sys.path.insert(0, str(into))
    return commit


class Side:
    """One version of the package: its own store, fold, builder and configs."""

    def __init__(self, package: str, budget: int, folder: Path) -> None:
        def module(name: str) -> Any:
            return importlib.import_module(f"{package}.{name}")

        self.events_mod = module("domain.events")
        self.fold_mod = module("projections.fold")
        self.builder = module("projections.builder")
        self.render = module("api").render_request
        self.importer = module("importers.openai_chat")
        manifest = module("domain.manifest")
        store_mod = module("store.event_store")
        self.store = store_mod.EventStore(f"sqlite:///{folder / package}.db")
        window = budget + bb.RESERVE
        self.neutral = manifest.BuildConfig(provider="neutral", window=window, reserve=bb.RESERVE)
        self.openai = manifest.BuildConfig(provider="openai-chat", window=window, reserve=bb.RESERVE)
        self.state: Any = None
        self.last: Any = None
        self.events: list[Any] = []
        self.run = ""
        self.fed = 0

    def start(self, run: str, traj: list[dict[str, Any]]) -> None:
        self.events = self.importer.parse_messages(traj, ())[1:]
        self.run, self.fed = run, 0
        self.state = self.fold_mod.new_state(run)
        self._fold([self.events_mod.RunStarted(agent="bench", model="gpt-4o")])

    def feed(self, upto: int) -> None:
        for i in range(self.fed, upto, 5000):
            self._fold(self.events[i:min(upto, i + 5000)])
        self.fed = max(self.fed, upto)

    def _fold(self, events: list[Any]) -> None:
        for rec in self.store.append(self.run, events):
            self.fold_mod.fold_event(self.state, rec)

    def build(self, config: Any) -> tuple[float, str]:
        t0 = time.perf_counter()
        result = self.last = self.builder.build_context(self.state, config, render=self.render)
        return time.perf_counter() - t0, result.manifest.request_hash

    def write(self) -> float:
        """Append the record of the last build (as that version makes it) and fold it back."""
        result = self.last
        t0 = time.perf_counter()
        if hasattr(result, "record"):
            event = result.record()
        else:  # before BuildResult.record: the event as the agent loop made it then
            m = result.manifest
            event = self.events_mod.ContextBuilt(
                turn=m.turn, provider=m.provider, request_hash=m.request_hash, prefix_hash=m.cache_key,
                config_hash=m.config_hash, manifest=m.model_dump(mode="json"), log_version=m.log_version)
        recs = self.store.append(self.run, [event])
        took = time.perf_counter() - t0
        for rec in recs:
            self.fold_mod.fold_event(self.state, rec)
        return took


def run_turns(sides: dict[str, Side], runs: list[tuple[str, list[dict[str, Any]], list[int]]],
              reps: int, same_output: bool, write: bool = False, openai_first: bool = False
              ) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {
        k: {"neutral": [], "openai": [], "rebuild": [], "write": []} for k in sides}
    pairs = 0
    for run, traj, turns in runs:
        for side in sides.values():
            side.start(run, traj)
        for t in turns:
            order = list(sides) if pairs % 2 else list(reversed(list(sides)))  # alternate every turn
            hashes: dict[str, tuple[str, str]] = {}
            for name in order:
                side = sides[name]
                side.feed(t)
                if openai_first:  # a runtime that builds for one provider: its build pays the turn
                    do, ho = side.build(side.openai)
                    dn, hn = side.build(side.neutral)
                else:
                    dn, hn = side.build(side.neutral)
                    do, ho = side.build(side.openai)
                times[name]["neutral"].append(dn)
                times[name]["openai"].append(do)
                hashes[name] = (hn, ho)
            if same_output and len(set(hashes.values())) > 1:
                raise SystemExit(f"{run} turn {t}: the versions built different requests {hashes}; "
                                 "pass --changes-output if that is the change")
            for _ in range(reps):
                for name in order:
                    side = sides[name]
                    times[name]["rebuild"].append(side.build(side.openai)[0])
            if write:  # the record of the turn's last openai-chat build
                for name in order:
                    times[name]["write"].append(sides[name].write())
            pairs += 1
    return times


def report(times: dict[str, dict[str, list[float]]], base: str) -> None:
    print(f"{'series':8s} {'base p50':>10s} {'new p50':>10s} {'new/base (paired median)':>26s} "
          f"{'IQR':>12s} {'n':>6s}")
    for series in ("neutral", "openai", "rebuild", "write"):
        old, new = times["base"][series], times["new"][series]
        if not old:
            continue
        ratios = sorted(b / a for a, b in zip(old, new, strict=True))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        print(f"{series:8s} {statistics.median(old) * 1e3:8.3f}ms {statistics.median(new) * 1e3:8.3f}ms "
              f"{statistics.median(ratios):26.3f} {q1:5.2f}-{q3:5.2f} {len(ratios):6d}")
    print(f"base = {base}; new = working tree ({REPO})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare against (any git revision)")
    ap.add_argument("--workload", choices=("A", "B"), default="B")
    ap.add_argument("--turns", type=int, default=20, help="B: how many of the last turns (default 20)")
    ap.add_argument("--runs", type=int, default=200, help="A: how many tau-bench runs (default all 200)")
    ap.add_argument("--budget", type=int, default=None, help="A: 3,000 by default; B: 128,000")
    ap.add_argument("--reps", type=int, default=None, help="rebuilds per turn (default 3 on B, 0 on A)")
    ap.add_argument("--write", action="store_true",
                    help="also time the durable write of each turn's context-built record (then folded: "
                         "later turns see it, as in bench_build.py)")
    ap.add_argument("--first-provider", choices=("neutral", "openai-chat"), default="neutral",
                    help="which build of a turn comes first and pays its new events (openai-chat: what "
                         "a runtime that builds for one provider pays, as in profile_build.py)")
    ap.add_argument("--changes-output", action="store_true",
                    help="the change alters requests: time it without requiring equal hashes")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cf-ab-") as tmp:
        folder = Path(tmp)
        commit = unpack_base(args.base, folder)
        if args.workload == "B":
            budget = args.budget or bb.BUDGET_B
            traj = bb.synth_history()
            turns = bb.assistant_turns(traj)[-(args.turns + 1):]
            warm = turns.pop(0)  # each side folds up to here and builds once before timing
            runs = [("synthetic-10k", traj, [warm, *turns])]
            reps = 3 if args.reps is None else args.reps
        else:
            budget = args.budget or 3000
            if not bb.TAU.exists():
                print(f"traces not found: {bb.TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
                return 2
            with bb.TAU.open() as fh:
                data = json.load(fh)[:args.runs]
            runs = [(f"tau-{i}", r["traj"], bb.assistant_turns(r["traj"])) for i, r in enumerate(data)]
            reps = 0 if args.reps is None else args.reps
        sides = {"base": Side("contextfold_base", budget, folder), "new": Side("contextfold", budget, folder)}
        gc.collect()
        times = run_turns(sides, runs, reps, not args.changes_output, args.write,
                          openai_first=args.first_provider == "openai-chat")
        if args.workload == "B":  # the first turn only warmed both sides up
            drop: Callable[[list[float]], list[float]] = lambda xs: xs[1:]  # noqa: E731
            for side in times.values():
                side["neutral"], side["openai"] = drop(side["neutral"]), drop(side["openai"])
                side["rebuild"] = side["rebuild"][reps:]
                side["write"] = drop(side["write"])
        report(times, f"{args.base} ({commit[:10]})")
        print(f"first build of each turn: {args.first_provider}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
