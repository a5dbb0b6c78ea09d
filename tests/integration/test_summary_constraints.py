"""The seed's section 10: the constraints of turns 1, 20 and 50 still hold after compaction, here
through the path an agent loop takes (``build(..., auto_compact=True)`` at an 8k window).

A chat loop's user says "ok, carry on" nearly every turn; the summary's cap once kept the newest
of those whole and folded the older constraints, so after 100 turns the request held the turn 1
constraint and not that of turn 20, though nothing was excluded for budget.
"""

from __future__ import annotations

import json

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput

CONSTRAINTS = {1: "Never touch legacy/ledger.py.",
               20: "From now on, write every commit message in French.",
               50: "Do not use the requests library; use httpx."}


def test_constraints_of_turns_1_20_50_reach_the_request_under_auto_compaction(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        run = store.run("chat")
        run.append(PolicySet(text="You are a coding assistant."))
        for t in range(1, 101):
            run.append([UserInput(CONSTRAINTS.get(t, f"ok, carry on with part {t}")),
                        ModelResponse(text=f"working on part {t} " + "because " * 40, tool_calls=[ToolCall(
                            call_id=f"c{t}", name="sh", arguments=json.dumps({"cmd": f"make part{t}"}))]),
                        ToolResult(call_id=f"c{t}", content=f"part {t} built\n" + "compiler output\n" * 120)])
            if t % 10 == 0:
                built = run.build("anthropic", window=8000, reserve=1000, auto_compact=True)
        summaries = [e for e in run.events() if e.event.type == "history_compacted"
                     and e.event.strategy == "summary"]
        assert summaries  # (the pressure made it summarise, not only mask)
        request = json.dumps(built.request, ensure_ascii=False)
        for turn, text in CONSTRAINTS.items():
            assert text in request, f"the constraint of turn {turn} is not in the request"
