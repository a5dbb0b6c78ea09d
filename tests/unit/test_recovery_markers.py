"""A runtime recovery marker (``ToolResultLost``/``ToolCallCancelled``) logged long after its call.

A build appends the marker when it finds a call unanswered, which for an imported or resumed
run, or one built only now and then, is long after the call. The marker says nothing new from
the tool, so it must not make the old group rank as the newest unit of the run.
"""

from __future__ import annotations

import re

import pytest

from contextfold.api import render_request
from contextfold.domain.errors import CompactionError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.repair import check_compaction_cover
from contextfold.projections.state import ToolGroup


def _recorded(events: list[AnyEvent]) -> list[RecordedEvent]:
    return [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]


def _build(events: list[AnyEvent], window: int) -> BuildResult:
    return build_context(fold(_recorded(events)), BuildConfig(provider="anthropic", window=window),
                         render=render_request)


def _early_lost_run(*, lost: bool) -> list[AnyEvent]:
    """Turn 1 reads a big file and a second call's result never arrives; 60 turns follow."""
    events: list[AnyEvent] = [
        UserInput("Task: fix the bug."),
        ModelResponse(tool_calls=(ToolCall(call_id="old1", name="read_file", arguments='{"p":"a"}'),
                                  ToolCall(call_id="old2", name="read_file", arguments='{"p":"b"}'))),
        ToolResult(call_id="old1", content="OLD-TURN-1 " + "x = 1\n" * 3000),
    ]
    if not lost:
        events.append(ToolResult(call_id="old2", content="done"))
    for t in range(60):
        events += [ModelResponse(text=f"step {t}", tool_calls=(ToolCall(call_id=f"c{t}", name="bash",
                                                                        arguments="{}"),)),
                   ToolResult(call_id=f"c{t}", content=f"RECENT-{t} " + "ok line\n" * 200)]
    events.append(UserInput("continue"))
    if lost:  # what the first build appends, at the end of the log
        events.append(ToolResultLost(call_id="old2", call_position=2, reason="no result recorded"))
    return events


def _recent_kept(result: BuildResult) -> list[int]:
    return sorted(int(n) for n in re.findall(r"RECENT-(\d+) ", str(result.request)))


def test_a_late_lost_marker_does_not_make_its_old_group_the_newest() -> None:
    lost, answered = _build(_early_lost_run(lost=True), 16_000), _build(_early_lost_run(lost=False), 16_000)
    assert "OLD-TURN-1" not in str(lost.request)
    assert "OLD-TURN-1" not in str(answered.request)
    assert _recent_kept(lost) == _recent_kept(answered)
    assert len(_recent_kept(lost)) > 11


def test_a_lost_answer_names_its_call_position_in_its_reason() -> None:
    events = _early_lost_run(lost=True)
    marker = len(events)
    result = _build(events, 200_000)
    line = next(f for f in result.manifest.fragments if f.id == f"e{marker}")
    assert "position 2," in line.selection_reason, line.selection_reason


def _lost_then_moved_on() -> list[RecordedEvent]:
    """An early call whose result never came; ten turns later a build appends its marker."""
    events: list[AnyEvent] = [UserInput("Task"), ModelResponse(tool_calls=(
        ToolCall(call_id="early", name="bash", arguments="{}"),))]
    for t in range(10):
        events += [ModelResponse(text=f"s{t}", tool_calls=(ToolCall(call_id=f"c{t}", name="bash",
                                                                    arguments="{}"),)),
                   ToolResult(call_id=f"c{t}", content=f"R{t} " + "line\n" * 50)]
    events += [UserInput("continue"), ToolResultLost(call_id="early", call_position=2, reason="no result")]
    return _recorded(events)


def _appended(records: list[RecordedEvent], event: AnyEvent) -> list[RecordedEvent]:
    return [*records, RecordedEvent("r", len(records) + 1, event, f"{len(records) + 1:064x}")]


def test_a_late_lost_marker_does_not_block_a_summary() -> None:
    records = _lost_then_moved_on()
    marker = len(records)
    plan = plan_compaction(fold(records), records, "summary", summarizer=lambda events, skeleton: skeleton)
    assert plan is not None and plan.event.covers_to > 2 and plan.tokens_before > plan.tokens_after
    summary = plan.event.summary
    assert f"call early (bash) {{}} at event 2 -> TOOL_RESULT_LOST [event://r/{marker}]" in (
        summary.tool_calls_and_results)
    assert any(f.startswith("call early (bash) TOOL_RESULT_LOST") for f in summary.known_failures)
    state = fold(_appended(records, plan.event))
    assert 2 in state.hidden  # the call and its lost answer are hidden together
    text = str(build_context(state, BuildConfig(provider="anthropic"), render=render_request).request)
    assert "early" not in text.replace("call early (bash)", "")  # only the summary names it


def test_a_late_lost_marker_does_not_block_masking() -> None:
    records = _lost_then_moved_on()
    plan = plan_compaction(fold(records), records, "mask")
    assert plan is not None and plan.event.covers_to > 2
    state = fold(_appended(records, plan.event))
    assert state.masked  # the old results are stubs; the lost call keeps its one answer
    group = state.items[2]
    assert isinstance(group, ToolGroup) and [c.status for c in group.calls] == ["lost"]


def test_a_cover_holding_a_lost_answer_but_not_its_call_is_still_refused() -> None:
    records = _lost_then_moved_on()
    state = fold(records)
    with pytest.raises(CompactionError, match="splits group g2"):
        check_compaction_cover(state, 3, len(records))
    with pytest.raises(CompactionError, match="splits group g3"):  # a real answer outside: refused
        check_compaction_cover(state, 1, 3)
    check_compaction_cover(state, 1, 2)  # the call, its recovery answer logged later
