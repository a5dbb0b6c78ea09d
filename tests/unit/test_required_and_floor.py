"""``RunState.required_and_floor``: the required fragments and the latest error's, from one memo
entry, kept across fold steps and equal to a fresh fold's answer at every step."""

from __future__ import annotations

from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState


def _events() -> list[AnyEvent]:
    return [
        PolicySet(text="never delete data"),
        UserInput("keep every booking under 500 USD", required=True),
        ModelResponse(text="", tool_calls=(ToolCall(call_id="a", name="book"),)),
        ToolResult(call_id="a", content="error: over limit", is_error=True),
        ModelResponse(text="", tool_calls=(ToolCall(call_id="b", name="search"),)),
        ToolResult(call_id="b", content="3 flights"),
        UserInput("and the return?"),
        ModelResponse(text="", tool_calls=(ToolCall(call_id="c", name="book"),)),
        ToolResult(call_id="c", content="error: sold out", is_error=True),
        ModelResponse(text="", tool_calls=(ToolCall(call_id="d", name="search"),)),
        ToolResult(call_id="d", content="1 flight"),
        ModelResponse(text="", tool_calls=(ToolCall(call_id="e", name="book"),)),
        ToolResult(call_id="e", content="booked"),
        UserInput("thanks"),
    ]


def _step(state: RunState, event: AnyEvent) -> None:
    fold_event(state, RecordedEvent("req", state.version + 1, event, ""))


def _fresh(events: list[AnyEvent]) -> RunState:
    state = new_state("req")
    for event in events:
        _step(state, event)
    return state


def test_required_and_floor_after_each_step_is_a_fresh_folds_and_the_two_methods() -> None:
    """The memo's answer is asked for after every step (so each next step finds the timeline index
    and the memo of the step before) and compared with a state folded afresh up to that step,
    asked once; the latest error moves (a failed book, then a newer one, then a success of the
    same tool resolves it) and the required user input stays."""
    events = _events()
    state = new_state("req")
    floors = []
    for n, event in enumerate(events, 1):
        _step(state, event)
        got = state.required_and_floor()
        fresh = _fresh(events[:n])
        assert got == fresh.required_and_floor(), n
        assert got == (state.required_ids(), state.latest_error_ids()), n
        assert got[1] <= got[0]
        floors.append(got[1])
    assert any(floors)  # an error's group was required down to its diagnosis at some step
    assert floors[-1] == frozenset()  # the last book succeeded: no latest error
