"""The live timeline a build reads and what it says changed, against the tuple snapshots."""

from __future__ import annotations

import operator

from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState


def _fold(state: RunState, *events: AnyEvent) -> None:
    for event in events:
        fold_event(state, RecordedEvent("live", state.version + 1, event, ""))


def _replaced(old: tuple[object, ...], new: tuple[object, ...]) -> list[int]:
    return [i for i in range(min(len(old), len(new))) if old[i] is not new[i]]


def test_changes_between_snapshots_stay_exact_after_later_steps() -> None:
    """A call answered after two snapshots were taken (and read through the live list) is not
    reported as a change between those two snapshots; it is between the second and the next."""
    state = new_state("live")
    _fold(state, UserInput("run both"),
          ModelResponse(text="", tool_calls=(ToolCall(call_id="a", name="run"),)),
          ModelResponse(text="", tool_calls=(ToolCall(call_id="c", name="run"),)))
    first = state.timeline()
    assert len(first) == 3
    _fold(state, ToolResult(call_id="a", content="ok a"))
    second = state.timeline()
    assert state.timeline_changes(first, second) == _replaced(first, second) == [1]
    live, mark = state.live_timeline()
    _fold(state, ToolResult(call_id="c", content="ok c"))
    live, _ = state.live_timeline()  # the list is patched in place: the second group is replaced
    assert state.timeline_changes(first, second) == [1]
    assert state.timeline_changes_since(mark) == [2]
    third = state.timeline()
    assert all(map(operator.is_, live, third)) and len(live) == len(third)
    assert state.timeline_changes(second, third) == _replaced(second, third) == [2]
    assert state.timeline_changes(first, third) is None  # not consecutive: the caller compares
