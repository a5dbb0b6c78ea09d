"""A summary that merges an earlier one states each plan step once, in its newest state, and marks
a file revision a newer read superseded."""

from __future__ import annotations

from contextfold.domain.events import (
    AnyEvent,
    FileRead,
    ModelResponse,
    PlanStep,
    PlanUpdated,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold


def _turns(first: int, n: int) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    for t in range(first, first + n):
        out += [ModelResponse(text=f"s{t}", tool_calls=(ToolCall(call_id=f"c{t}", name="bash"),)),
                ToolResult(call_id=f"c{t}", content="out\n" * 50)]
    return out


def _compacted(events: list[AnyEvent]) -> list[AnyEvent]:
    """``events`` and the summary compaction of them."""
    records = [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]
    plan = plan_compaction(fold(records), records, "summary")
    assert plan is not None
    return [*events, plan.event]


def test_a_merged_summary_states_each_step_once_in_its_newest_state() -> None:
    events = _compacted([UserInput("go"), PlanUpdated(steps=(
        PlanStep(id="s1", title="reproduce", status="in_progress"), PlanStep(id="s2", title="fix"))),
        *_turns(0, 6)])
    events = _compacted([*events, PlanUpdated(steps=(
        PlanStep(id="s1", title="reproduce", status="done"),
        PlanStep(id="s2", title="fix", status="in_progress"))), *_turns(6, 6)])
    last = events[-1]
    assert last.type == "history_compacted"
    assert last.summary.completed_steps == ("s1: reproduce",)
    assert last.summary.pending_steps == ("[in_progress] s2: fix",)


def test_a_superseded_file_revision_is_marked_in_the_evidence_refs() -> None:
    events = _compacted([UserInput("go"), FileRead(path="a.py", content="x = 1\n", revision="r1"),
                         FileRead(path="a.py", content="x = 2\n", revision="r2"), *_turns(0, 5)])
    last = events[-1]
    assert last.type == "history_compacted"
    assert last.summary.evidence_refs[:2] == ("file://a.py@r1 (superseded by a newer read at event 3)",
                                              "file://a.py@r2")
