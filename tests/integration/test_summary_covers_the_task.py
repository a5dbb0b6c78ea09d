"""A summary that covers the run's task: the task still steers the turn after it.

An agent run whose task is its only input is compacted with the input covered (the documented
fallback of ``plan_compactions``): the requests that follow must still rank the tools against the
task, keep it as the summary's goal and instruction, and tell the model about the media it carried.
"""

from __future__ import annotations

from contextfold.api import open_store
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
         "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon")
CATALOGUE = (ToolSpec(name="bash", description="run a shell command"),
             *(ToolSpec(name=f"{w}_sync", description=f"sync the {w} store") for w in WORDS),
             ToolSpec(name="github_create_issue", description="create an issue on a GitHub repository"))
"""22 tools, over max_tools: a catalogue ranked against the turn, not declared whole."""


def _work(turns: int = 6) -> list[AnyEvent]:
    """The agent's turns after its task: long shell outputs a summary is worth making for."""
    out: list[AnyEvent] = []
    for i in range(turns):
        out += [ModelResponse(text=f"step {i}", tool_calls=(
                    ToolCall(call_id=f"k{i}", name="bash", arguments='{"cmd": "cat log"}'),)),
                ToolResult(call_id=f"k{i}", content=f"log line {i} " * 300)]
    return out


def _tools(built: object) -> list[str]:
    return sorted(t["name"] for t in built.request["tools"])  # type: ignore[attr-defined]


def test_tools_are_still_ranked_against_the_task_a_summary_covers(sqlite_url: str) -> None:
    """The task was the only user message; once summarized the tools were ranked against an empty
    query (the latest *visible* user input: none), so ``github_create_issue`` left the request and
    the first registered tools filled the cap: the model was asked to file an issue with no tool."""
    task = "Investigate the crash in the logs, then file a GitHub issue about it"
    with open_store(sqlite_url) as store:
        run = store.run("task")
        run.append(PolicySet(text="You are a coding agent."), ToolsRegistered(tools=CATALOGUE),
                   UserInput(task), *_work())
        before = run.preview(provider="anthropic", window=100_000)
        report = run.compact("summary")
        assert report.events and report.events[0].covers_to >= 3  # the task input is covered
        after = run.preview(provider="anthropic", window=100_000)
        assert "github_create_issue" in _tools(before)
        assert _tools(after) == _tools(before)
        reasons = {t.name: t.reason.split(" ")[0] for t in after.manifest.tools}
        assert reasons["github_create_issue"] == "relevant" and "fallback" not in reasons.values()
