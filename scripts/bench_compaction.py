"""Compaction on real traces: tokens kept vs saved, and what survives, next to the alternatives.

    .venv/bin/pip install langchain-core      # the LangChain peer (bench only, not a dependency)
    .venv/bin/python scripts/bench_compaction.py [--windows 8000,16000,32000] [--reserve 2000]

Workload: every SWE-agent demo trajectory and every OpenHands event stream in
``../shared/traces`` (``$CONTEXTFOLD_TRACES``), imported as in
``tests/integration/test_compaction_runs.py`` (SWE-agent steps as calls answered
by their observations; OpenHands through ``contextfold.importers``). Each run is
replayed as an agent loop: before each model response (and at the end) the
next request is built for window W (budget ``W - reserve``).

Methods, side by side at each window:

- ``contextfold``: ``compaction_api.build`` with automatic compaction (mask
  first, summary only when masking is not enough), recorded in SQLite;
- ``mask only``: the same, the ladder stopped after masking;
- ``no compaction``: ``Run.build`` (budgeted selection and truncation only);
- ``trim_messages``: LangChain ``trim_messages`` (strategy ``last``,
  include_system, start_on ``human``, no partial messages) over the same
  history as chat messages; tool results carry ``exit code N`` in their text
  (as an agent would show them) and errors ``status="error"``.

Per turn: ``full`` = tokens of the whole history as chat messages (4 per
message + content + tool-call arguments, cl100k), ``kept`` = tokens sent
(contextfold: the manifest's ``selected_tokens``; trim: the trimmed
messages), ``saved = full - kept``. Survival (fraction of turns where it
applies): the goal (the task's first 200 characters), the latest error's call
id, and the last exit code (its call id and ``exit code N``/``exit_code=N``),
searched in the request's strings. ``failed`` counts turns where no request
could be built (the typed budget error).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        trim_messages,
    )
except ModuleNotFoundError:  # pragma: no cover - printed for people
    sys.exit("LangChain is needed for the comparison: .venv/bin/pip install langchain-core")

from contextfold.api import Run, open_store  # noqa: E402 - after the langchain check
from contextfold.compaction_api import build  # noqa: E402 - after the langchain check
from contextfold.domain.errors import BudgetError  # noqa: E402 - after the langchain check
from contextfold.domain.events import (  # noqa: E402 - after the langchain check
    AnyEvent,
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ToolResult,
    UserInput,
)
from contextfold.projections.tokens import get_counter  # noqa: E402 - after the langchain check
from tests.integration.test_compaction_runs import SWE, trace_runs  # noqa: E402 - after the langchain check

COUNT = get_counter("cl100k_base").count
METHODS = ("contextfold", "mask only", "no compaction", "trim_messages")


@dataclass
class Tally:
    turns: int = 0
    failed: int = 0
    full: int = 0
    kept: int = 0
    hits: dict[str, list[int]] = field(default_factory=lambda: {"goal": [0, 0], "error": [0, 0],
                                                                "exit": [0, 0]})
    compactions: int = 0

    def check(self, text: str, events: list[AnyEvent]) -> None:
        flat = " ".join(text.split())
        task = next((e.text for e in events if isinstance(e, UserInput) and e.text.strip()), "")
        self._hit("goal", bool(task), " ".join(task[:200].split()) in flat)
        results = [e for e in events if isinstance(e, ToolResult)]
        errors = [e for e in results if e.is_error]
        self._hit("error", bool(errors), bool(errors) and errors[-1].call_id in text)
        coded = [e for e in results if e.exit_code is not None]
        last = coded[-1] if coded else None
        self._hit("exit", last is not None, last is not None and last.call_id in text and (
            f"exit code {last.exit_code}" in text or f"exit_code={last.exit_code}" in text))

    def _hit(self, key: str, applies: bool, ok: bool) -> None:
        if applies:
            self.hits[key][1] += 1
            self.hits[key][0] += int(ok)


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def lc_messages(events: list[AnyEvent]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for e in events:
        if isinstance(e, PolicySet):
            out.append(SystemMessage(content=e.text))
        elif isinstance(e, UserInput):
            out.append(HumanMessage(content=e.text or "(empty)"))
        elif isinstance(e, ModelResponse):
            out.append(AIMessage(content=e.text, tool_calls=[
                {"id": c.call_id, "name": c.name, "args": _args(c.arguments)} for c in e.tool_calls]))
        elif isinstance(e, ToolResult):
            head = f"exit code {e.exit_code}\n" if e.exit_code is not None else ""
            out.append(ToolMessage(content=head + e.content, tool_call_id=e.call_id,
                                   status="error" if e.is_error else "success"))
    return out


def _args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


def lc_tokens(msgs: list[BaseMessage]) -> int:
    total = 0
    for m in msgs:
        total += 4 + COUNT(m.content if isinstance(m.content, str) else json.dumps(m.content))
        if isinstance(m, AIMessage):
            total += sum(COUNT(json.dumps(tc["args"])) for tc in m.tool_calls)
    return total


def lc_text(msgs: list[BaseMessage]) -> str:
    parts: list[str] = []
    for m in msgs:
        parts.append(m.content if isinstance(m.content, str) else json.dumps(m.content))
        if isinstance(m, ToolMessage):
            parts.append(m.tool_call_id)
        if isinstance(m, AIMessage):
            parts.extend(tc["id"] or "" for tc in m.tool_calls)
    return "\n".join(parts)


def turn_cuts(events: list[AnyEvent]) -> list[int]:
    starts = [i for i, e in enumerate(events) if isinstance(e, ModelResponse)]
    return [*starts[1:], len(events)]


def bench_contextfold(runs: list[tuple[str, list[AnyEvent]]], window: int, reserve: int,
                      method: str, tmp: Path) -> Tally:
    tally = Tally()
    db = tmp / (method.replace(" ", "_") + f"-{window}.db")
    with open_store(f"sqlite:///{db}") as store:
        for run_id, events in runs:
            run: Run = store.run(run_id)
            done = 0
            for cut in turn_cuts(events):
                run.append(events[done:cut])
                done = cut
                prefix = events[:cut]
                tally.turns += 1
                tally.full += lc_tokens(lc_messages(prefix))
                try:
                    if method == "no compaction":
                        built = run.build("openai-chat", window=window, reserve=reserve)
                    else:
                        built = build(run, "openai-chat", window=window, reserve=reserve,
                                      strategy="mask" if method == "mask only" else "summary")
                except BudgetError:
                    tally.failed += 1
                    continue
                tally.kept += built.manifest.selected_tokens
                tally.check("\n".join(strings(built.request)), prefix)
            tally.compactions += sum(isinstance(r.event, HistoryCompacted) for r in run.events())
    return tally


def bench_trim(runs: list[tuple[str, list[AnyEvent]]], window: int, reserve: int) -> Tally:
    tally = Tally()
    for _, events in runs:
        for cut in turn_cuts(events):
            prefix = lc_messages(events[:cut])
            tally.turns += 1
            tally.full += lc_tokens(prefix)
            kept = trim_messages(prefix, max_tokens=window - reserve, token_counter=lc_tokens,
                                 strategy="last", include_system=True, start_on="human",
                                 allow_partial=False)
            if not kept:
                tally.failed += 1
                continue
            tally.kept += lc_tokens(kept)
            tally.check(lc_text(kept), events[:cut])
    return tally


def pct(pair: list[int]) -> str:
    return f"{100 * pair[0] / pair[1]:5.1f}% ({pair[0]}/{pair[1]})" if pair[1] else "   n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", default="8000,16000,32000")
    parser.add_argument("--reserve", type=int, default=2_000)
    args = parser.parse_args()
    if not SWE.is_dir():
        print(f"traces not found at {SWE.parent} (set CONTEXTFOLD_TRACES)")
        return 1
    runs = trace_runs()
    print(f"{len(runs)} runs, {sum(len(turn_cuts(e)) for _, e in runs)} turns per method and window; "
          f"reserve {args.reserve}")
    header = (f"{'window':>6}  {'method':<14} {'turns':>5} {'failed':>6} {'full tok':>9} {'kept tok':>9} "
              f"{'saved':>6}  {'goal kept':<18} {'latest error kept':<18} {'last exit code kept':<18} comp.")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for window in (int(w) for w in args.windows.split(",")):
            for method in METHODS:
                t0 = time.perf_counter()
                tally = (bench_trim(runs, window, args.reserve) if method == "trim_messages"
                         else bench_contextfold(runs, window, args.reserve, method, Path(tmp)))
                saved = 1 - tally.kept / tally.full if tally.full else 0.0
                print(f"{window:>6}  {method:<14} {tally.turns:>5} {tally.failed:>6} {tally.full:>9} "
                      f"{tally.kept:>9} {100 * saved:5.1f}%  {pct(tally.hits['goal']):<18} "
                      f"{pct(tally.hits['error']):<18} {pct(tally.hits['exit']):<18} "
                      f"{tally.compactions:>4}  ({time.perf_counter() - t0:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
