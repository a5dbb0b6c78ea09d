"""A summary shown beside the run's plan does not repeat that plan's steps (``render_summary``'s
``plan_steps``).

Why: the deterministic summary copies the plan as it stood at the compaction (completed and
pending steps, "next action: plan step s1"), and the request shows it verbatim whatever plan
came after. After the runtime marked s1 and s2 done, the request showed the current plan
("[ready] s3: publish") and, further on, "pending steps: [ready] s1: run tests" and "next action:
plan step s1: run tests": two plans, the outdated one last and worded as what to do next (the
seed, 5.1: the current ready step, never the plan's history)."""

from __future__ import annotations

import json
from pathlib import Path

import contextfold
from contextfold import GoalSet, ModelResponse, PlanStep, PlanUpdated, ToolCall, ToolResult, UserInput
from contextfold.domain.event_values import StepStatus
from contextfold.domain.events import HistoryCompacted


def _plan(s1: StepStatus, s2: StepStatus, s3: StepStatus) -> PlanUpdated:
    return PlanUpdated(steps=(PlanStep(id="s1", title="run tests", status=s1),
                              PlanStep(id="s2", title="tag release", status=s2, depends_on=("s1",)),
                              PlanStep(id="s3", title="publish", status=s3, depends_on=("s2",))))


def test_the_request_shows_the_current_plan_and_not_the_summarys_copy(tmp_path: Path) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("release")
        run.append(GoalSet(goal="ship the release"), _plan("ready", "pending", "pending"), UserInput("go"),
                   ModelResponse(text="Noted: the changelog stays as it is."))
        for i in range(6):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="pytest", arguments="{}"),)),
                       ToolResult(call_id=f"c{i}", content="passed " * 200))
        run.compact("summary")
        recorded = [e.event for e in run.events() if isinstance(e.event, HistoryCompacted)][-1]
        assert isinstance(recorded, HistoryCompacted)
        assert "[ready] s1: run tests" in recorded.summary.pending_steps  # the record keeps it
        assert recorded.summary.next_action == "plan step s1: run tests"
        run.append(_plan("done", "done", "ready"), UserInput("continue"))
        body = json.dumps(run.build("anthropic", window=20_000, reserve=1_000).request)
    assert "[ready] s3: publish" in body
    assert "summary of events" in body  # the summary is shown, without the old plan's lines
    for outdated in ("[ready] s1: run tests", "[pending] s2", "next action: plan step s1"):
        assert outdated not in body


def test_a_replaced_plan_does_not_bring_the_summarys_copy_back(tmp_path: Path) -> None:
    """A summary is rendered again when the goal, a policy or the plan changes
    (``fold_compaction.refresh_summaries``); the plan of its day stays left out: a newer plan with
    other steps replaces it, and the old "next action: plan step s1" is not what to do next."""
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("release")
        run.append(GoalSet(goal="ship the release"), _plan("ready", "pending", "pending"), UserInput("go"))
        for i in range(6):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="pytest", arguments="{}"),)),
                       ToolResult(call_id=f"c{i}", content="passed " * 200))
        run.compact("summary")
        run.append(PlanUpdated(steps=(PlanStep(id="r1", title="roll back", status="ready"),)),
                   GoalSet(goal="roll the release back"), UserInput("roll back"))
        body = json.dumps(run.build("anthropic", window=20_000, reserve=1_000).request)
    assert "[ready] r1: roll back" in body and "goal: ship the release" in body  # re-rendered
    for outdated in ("[ready] s1: run tests", "[pending] s2", "next action: plan step s1"):
        assert outdated not in body
