"""Time and memory of auditing a long recorded run that never compacts.

Why: each context-built record lists every fragment its build left out, so on a run that never
compacts the records grow with the run and their sum as its square. ``audit`` reads every record
(``contextfold.audit.records``); this makes such a run (a tool call and a ~160-token result per
turn, each turn built and recorded at an 8k window for openai-chat) and audits it in a fresh
process, printing the wall time and the peak RSS, so a change that holds records whole again
shows as memory that grows with the square of the turns.

Usage:
  .venv/bin/python scripts/measure_audit.py --turns 1666        # ~5,000 events
  .venv/bin/python scripts/measure_audit.py --turns 400 800 1666
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import contextfold
from contextfold import GoalSet, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.audit.data import audit_run
from contextfold.cli_progress import progress_bar


def make_run(path: Path, turns: int) -> int:
    """The run ``long`` in a new SQLite store at ``path``; its event count."""
    store = contextfold.open_store(f"sqlite:///{path}")
    run = store.run("long")
    run.append(PolicySet(text="Be careful."))
    run.append(GoalSet(goal="Fix the bug", success_contract=("tests pass",)))
    run.append(UserInput("Fix the failing test in module foo"))
    with progress_bar(turns, f"recording {turns} turns") as advance:
        for i in range(turns):
            run.build(provider="openai-chat", model="gpt-4o", window=8000, reserve=1000)
            run.append(ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="grep",
                                                          arguments=json.dumps({"q": f"x{i}"}))]))
            run.append(ToolResult(call_id=f"c{i}", content=f"line {i}: " + "word " * 150))
            advance(1)
    events = run.version
    store.close()
    return events


def audit_in_child(path: Path) -> None:
    """Run by the child process: audit the run and print seconds and peak RSS (MiB) as JSON."""
    store = contextfold.open_store(f"sqlite:///{path}")
    start = time.perf_counter()
    audit = audit_run(store.run("long"))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": round(seconds, 2), "peak_mib": round(peak), "turns": len(audit.turns)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[1666])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        audit_in_child(args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for turns in args.turns:
            path = Path(tmp) / f"long-{turns}.db"
            events = make_run(path, turns)
            out = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True,
                                 capture_output=True, text=True).stdout
            got = json.loads(out)
            print(f"{turns} turns ({events} events, {path.stat().st_size / 2**20:.1f} MiB stored): "
                  f"audit {got['seconds']} s, peak RSS {got['peak_mib']} MiB, {got['turns']} turns audited")


if __name__ == "__main__":
    main()
