"""A summary does not repeat, in the request, what that request already shows raw: the run's
policies, its goal and success contract, and the user inputs marked required
(``fold_compaction``'s ``shown``, ``render_summary``'s ``shown``).

Why: those are required fragments, shown whole in every build, and the summary copied them
verbatim: the policy (up to 600 characters), the goal, the contract and every required input
whole, the task twice over when no goal was set (as the summary's goal and as its constraint).
A run compacted again and again paid for them twice in every later request (a required
3,000-character task: some 2,000 tokens more per request), though nothing was added. The
recorded summary keeps them (``show`` renders it whole, and a plug-in summary is checked
against them)."""

from __future__ import annotations

from pathlib import Path

import pytest

import contextfold
from contextfold import GoalSet, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.events import HistoryCompacted
from tests.json_strings import joined_strings

POLICY = "Never touch prod. Deploys go to staging only, and only from the release branch."
TASK = ("Roll out release 7 to staging and check the health endpoint after each step. "
        "Never deploy on Fridays. ") * 20
GOAL = "Ship release 7 to the staging cluster"
LATER = "From now on, keep at least two replicas up at all times during the rollout."


def _turns(run: contextfold.Run, first: int, n: int) -> None:
    for i in range(first, first + n):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="deploy", arguments="{}"),)),
                   ToolResult(call_id=f"c{i}", content=f"Created deployment dep-{i:04d}\n" + "ok\n" * 300,
                              exit_code=0))


@pytest.mark.parametrize("goal", [True, False], ids=["goal-set", "goal-inferred"])
def test_a_summary_repeats_nothing_the_request_shows_raw(tmp_path: Path, goal: bool) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("rollout")
        run.append(PolicySet(text=POLICY))
        if goal:
            run.append(GoalSet(goal=GOAL, success_contract=("staging healthy",)))
        run.append(UserInput(TASK, required=True))
        _turns(run, 1, 8)
        run.append(UserInput(LATER, required=True))
        _turns(run, 9, 8)
        run.compact("summary", keep_recent=2)  # a summary, then one over it
        _turns(run, 17, 8)
        run.compact("summary", keep_recent=2)
        summaries = [r.event for r in run.events() if isinstance(r.event, HistoryCompacted)]
        assert len(summaries) == 2
        body = joined_strings(run.build("anthropic", window=60_000, reserve=1_000).request)
        last = summaries[-1]
    assert "summary of events 1-" in body
    # each shown once, where it is shown raw
    flat = " ".join(body.split())
    for text in (POLICY, " ".join(TASK.split()), LATER):
        assert flat.count(text) == 1, text[:40]
    if goal:
        # the goal fragment's, and the summary's record of when it was set
        assert body.count(GOAL) == 1 + body.count(f"goal set at event 2: {GOAL}")
        assert body.count("staging healthy") == 1
    # what the summary stands for is still there: the ids of its calls and results
    for i in range(1, 21):
        assert f"c{i}" in body
    # the record keeps them all
    assert any(POLICY in c for c in last.summary.constraints)
    assert any(LATER in c for c in last.summary.constraints)
    assert (last.summary.goal == GOAL) if goal else (TASK[:100] in last.summary.goal)


def test_the_goal_s_decision_line_cites_the_goal_the_request_states(tmp_path: Path) -> None:
    """The summary's decision "goal set at event N: <goal>" quoted the goal (up to 200 characters)
    in every request after a compaction, beside the goal fragment that states it whole. When the
    goal set at N is the one in force, the line cites it; an older goal, shown nowhere else, stays
    quoted. The recorded summary keeps the quote."""
    long_goal = "Ship release 7 to the staging cluster, " + "with every health check green, " * 8
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("rollout")
        run.append(GoalSet(goal="Ship release 6", success_contract=("staging healthy",)))
        run.append(UserInput(TASK, required=True))
        _turns(run, 1, 4)
        run.append(GoalSet(goal=long_goal))
        _turns(run, 5, 8)
        run.compact("summary", keep_recent=2)
        summary = next(r.event for r in run.events() if isinstance(r.event, HistoryCompacted))
        at = next(r.position for r in run.events() if isinstance(r.event, GoalSet) and r.position > 1)
        body = joined_strings(run.build("anthropic", window=60_000, reserve=1_000).request)
    flat = " ".join(body.split())
    head = " ".join(long_goal.split())[:150]
    assert flat.count(head) == 1  # the goal fragment's
    assert f"goal set at event {at} (the current goal; raw: event://rollout/{at})" in body
    assert "goal set at event 1: Ship release 6" in body  # superseded: said nowhere else
    assert any(d.startswith(f"goal set at event {at}: {head}") for d in summary.summary.decisions)
