#!/usr/bin/env python3
"""What checking one turn of a long run, or its whole chain, costs: time and peak memory.

Why: a ``context_built`` record's manifest lists every fragment its build left out, so on a
long run it is most of the record and grows with the run (here ~240 KB of JSON per record).
A call that decodes every record of the run to answer for one turn, or to check the chain,
costs O(the run's records x their size): seconds and a peak of a gigabyte at 800 turns. This
builds such a run once in a SQLite store (a history the window cannot hold, then one build
per turn for ``anthropic`` under a 16k window, each turn's usage observed; two turns, an
early and a middle one, left without a record) and measures, each in a new process:

- ``state first`` / ``state last``: ``Run.state(turn=N)`` of the first and the last built turn;
- ``rebuild unrecorded``: ``Run.build(turn=N, record=False)`` of the early turn without a
  record (the nearest record's settings, the log up to the turn folded, the calibration read);
- ``verify``: ``Run.verify()`` (the chain of every event, each record checked);
- ``audit --turn``: ``contextfold.cli_audit.audit_turn`` of the first built turn (the chain
  verified, then the turn's record rebuilt and compared);
- ``audit unrecorded``: ``audit_turn`` of the early turn without a record (the chain verified,
  the turn's records looked for, the nearest record's config read, the turn rebuilt);
- ``observe first`` / ``observe last``: ``Run.observe_usage`` of the first and the last built
  turn (the turn's records read for their window), on a copy of the store (it appends);
- ``compact mask`` / ``compact summary``: ``Run.compact(..., dry_run=True)`` without a window
  (the live state folded, the log read for the planner, the newest live record's config);
- ``compact window``: ``Run.compact("mask", window=8000, dry_run=True)`` (the ladder's trial
  builds);
- ``auto build``: ``compaction_api.build(..., auto=True)`` of the next turn under an 8k window
  (the live state, the planner's log, the trial builds, the build), on a copy of the store.

Per call: wall time, the child's peak RSS (``VmHWM``) and its rise over the RSS just before
the call (imports, the open store, and a first build of a one-event run apart: the provider
SDK's request types and the tokenizer load once per process, ~1-3 s), and a digest of the answer (the state's
fingerprint, the request hash, the verify report), so that two checkouts can be compared.

``--before PATH`` runs the same calls with the ``contextfold`` package of another checkout
(e.g. ``/work/main``) on the same store, side by side: the store is written once, by this
checkout. ``--db PATH`` keeps the store there (built only when the file does not exist).

Usage:
  .venv/bin/python scripts/bench_turn_reads.py [--turns 800] [--history 650] [--db PATH]
                                               [--before /work/main] [--repeat 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
RUN = "long"
WINDOW, RESERVE, PROVIDER = 16_000, 2_000, "anthropic"
CALLS = ("state first", "state last", "rebuild unrecorded", "verify", "audit --turn", "audit unrecorded",
         "observe first", "observe last", "compact mask", "compact summary", "compact window", "auto build")
_WRITES = ("observe first", "observe last", "auto build")
"""The calls that append to the run: measured on a copy of the store, made before the timing."""


def _rss_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (the peak) of this process, in MB, from /proc (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def build_run(db: Path, turns: int, history: int) -> None:
    """The long run: a user input, ``history`` tool pairs, then ``turns`` turns of one build each
    (turns 2 and turns // 2 of them left unbuilt), each built turn's usage observed."""
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput

    with open_store(f"sqlite:///{db}") as store:
        run = store.run(RUN)
        run.append(UserInput("fix the failing build"))
        events: list[Any] = []
        for i in range(history):
            call = ToolCall(call_id=f"h{i}", name="sh", arguments=json.dumps({"cmd": f"cat file_{i}.py"}))
            events += [ModelResponse(tool_calls=(call,)),
                       ToolResult(call_id=f"h{i}", content=f"file_{i}.py line\n" * 20, exit_code=0)]
        run.append(events)
        first = run.next_turn()
        skipped = {first + 1, first + turns // 2}
        started = time.perf_counter()
        for k in range(turns):
            turn = first + k
            built = None if turn in skipped else run.build(PROVIDER, window=WINDOW, reserve=RESERVE)
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{k}", name="sh", arguments="{}"),)),
                       ToolResult(call_id=f"c{k}", content=f"step {k} ok", exit_code=0))
            if built is not None:
                run.observe_usage(turn, built.manifest.selected_tokens + 50)
            if (k + 1) % 100 == 0:
                print(f"  .. {k + 1} turns ({time.perf_counter() - started:.0f} s)", flush=True)
        if built is not None:
            print(f"  record JSON of the last turn: {len(built.record().model_dump_json()) / 1e3:.0f} KB")


def _turns(run: Any) -> dict[str, int]:
    """The first and last built turns and the early unbuilt one, as :func:`build_run` made them:
    its turns are the run's last ``records + 2`` (two left unbuilt)."""
    responses = run.next_turn() - 1
    turns = run.store.events.count_events(RUN, "context_built") + 2
    start = responses - turns + 1
    return {"first": start, "unrecorded": start + 1, "last": responses}


def _warm(tmp: Path) -> None:
    """Load what any build loads once per process (the provider SDK's request types, the
    tokenizer) with a build of a one-event run: not the cost of the calls measured."""
    from contextfold.api import open_store
    from contextfold.domain.events import UserInput

    with open_store(f"sqlite:///{tmp / 'warm.db'}") as store:
        run = store.run("warm")
        run.append(UserInput("hello"))
        run.build(PROVIDER, window=WINDOW, reserve=RESERVE, record=False)


def measure(db: Path, call: str) -> dict[str, Any]:
    """One call on the store at ``db``, in this (new) process: time, peak and its digest."""
    import contextfold

    with tempfile.TemporaryDirectory() as tmp:
        _warm(Path(tmp))
        if call in _WRITES:
            db = Path(shutil.copy(db, Path(tmp) / "copy.db"))
        return _measured(db, call, contextfold.__file__)


def _measured(db: Path, call: str, package: str) -> dict[str, Any]:
    """:func:`measure`'s call on the store at ``db`` (warmed, a copy when it writes)."""
    from contextfold.api import open_store

    with open_store(f"sqlite:///{db}") as store:
        run = store.run(RUN)
        turns = _turns(run)
        before = _rss_mb("VmRSS")
        started = time.perf_counter()
        if call == "state first":
            digest = run.state(turn=turns["first"]).fingerprint()
        elif call == "state last":
            digest = run.state(turn=turns["last"]).fingerprint()
        elif call == "rebuild unrecorded":
            digest = run.build(turn=turns["unrecorded"], record=False).manifest.request_hash
        elif call == "verify":
            report = run.verify()
            digest = f"{report.ok} {report.events} {report.first_bad_position} {report.reason}"
        elif call == "audit --turn":
            from contextfold.cli_audit import audit_turn

            verdict, result = audit_turn(run, turns["first"])
            digest = f"{verdict['ok']} {result.manifest.request_hash}"
        elif call == "audit unrecorded":
            from contextfold.cli_audit import audit_turn

            verdict, result = audit_turn(run, turns["unrecorded"])
            digest = f"{verdict['ok']} {verdict['check']['recorded']} {result.manifest.request_hash}"
        elif call in ("observe first", "observe last"):
            turn = turns[call.split()[1]]
            digest = run.observe_usage(turn, 12_000).hash
        elif call.startswith("compact "):
            strategy = "summary" if call == "compact summary" else "mask"
            report = run.compact(strategy, window=8_000 if call == "compact window" else None, dry_run=True)
            digest = json.dumps(dataclasses.asdict(report), sort_keys=True, default=str)
        elif call == "auto build":
            from contextfold.compaction_api import build

            built = build(run, PROVIDER, window=8_000, reserve=RESERVE)
            digest = built.manifest.request_hash
        else:
            raise SystemExit(f"unknown call {call!r}")
        seconds = time.perf_counter() - started
    peak = _rss_mb("VmHWM")
    return {"call": call, "seconds": seconds, "peak_mb": peak, "rise_mb": peak - before, "digest": digest,
            "package": str(Path(package).parent)}


def _child(db: Path, call: str, checkout: Path) -> dict[str, Any]:
    """:func:`measure` in a new process importing ``contextfold`` from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, __file__, "--measure", call, "--db", str(db)], env=env,
                         check=True, capture_output=True, text=True).stdout
    found = json.loads(out.strip().splitlines()[-1])
    if Path(found["package"]) != checkout / "contextfold":
        raise SystemExit(f"{checkout}: the child imported contextfold from {found['package']}")
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=800, help="built turns of the run (two left unbuilt)")
    ap.add_argument("--history", type=int, default=200,
                    help="tool pairs before the first turn: what each record lists as left out")
    ap.add_argument("--db", type=Path, help="keep the store in this SQLite file (built if missing)")
    ap.add_argument("--before", type=Path, help="another checkout to measure beside this one")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each call per checkout (the fastest is shown)")
    ap.add_argument("--calls", default=",".join(CALLS), help="which calls, comma-separated")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.db, args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "long.db"
        if not db.exists():
            print(f"building {args.turns} turns over {args.history} tool pairs in {db} ...", flush=True)
            build_run(db, args.turns, args.history)
        print(f"store: {db.stat().st_size / 1e6:.0f} MB on disk")
        checkouts = {"after": HERE}
        if args.before is not None:
            checkouts = {"before": args.before.resolve(), **checkouts}
        head = "".join(f"{name + ' s':>10}{'peak MB':>9}{'rise MB':>9}" for name in checkouts)
        print(f"{'call':<20}{head}  same answer")
        for call in args.calls.split(","):
            row, digests = f"{call:<20}", set()
            for checkout in checkouts.values():
                runs = [_child(db, call, checkout) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["seconds"])
                digests.update(r["digest"] for r in runs)
                row += f"{best['seconds']:>10.2f}{best['peak_mb']:>9.0f}{best['rise_mb']:>9.0f}"
            same = "yes" if len(digests) == 1 else "NO: " + " / ".join(sorted(digests))
            print(f"{row}  {same}", flush=True)


if __name__ == "__main__":
    main()
