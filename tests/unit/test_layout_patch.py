"""The layout patches the last build's timeline messages instead of gathering every kept item.

A build lays out again only the items that entered or left the kept set, were derived afresh
(an answered call, a mask, a compaction), hold or held a cut or redacted text, or are or were
the current input; the rest keep their messages and place (``layout._timeline``). Whatever
builds come before (other budgets, providers, ``recent_groups``), the request must be the one
a fresh state gives, and the patch must be what the builds actually take.
"""

from __future__ import annotations

import pytest

import contextfold
from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import layout
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from tests.unit.test_build_cache import CONFIGS, _events, _outcome

SLIDING = (
    BuildConfig(provider="openai-chat", window=1_200, reserve=200),
    BuildConfig(provider="neutral", window=1_600, reserve=200, recent_groups=1),
    BuildConfig(provider="anthropic", window=900, reserve=200),
)


def _long_run(turns: int) -> list[AnyEvent]:
    """A run longer than the budgets: the kept window slides, the oldest kept group is cut."""
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(turns):
        events += [UserInput(f"step {r}: look at the queue"),
                   ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)),
                   ToolResult(call_id=f"c{r}", content="\n".join(f"row {r}.{i} ok" for i in range(40 + r))),
                   ModelResponse(text=f"done {r}")]
    return events


def _denied_run() -> list[AnyEvent]:
    """The sliding run with its tool denied from turn 8 to turn 16: its groups turn into notes
    and back (the policy of the same source replaced), and a call carries a secret."""
    events = _long_run(24)
    events[2] = ModelResponse(text="", tool_calls=(ToolCall(
        call_id="c0", name="run", arguments='{"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'),))
    events.insert(1 + 16 * 4, PolicySet(text="Be careful."))
    events.insert(1 + 8 * 4, PolicySet(text="No more runs.", denied_tools=("run",)))
    return events


def _refused(outcome: str) -> bool:
    """An outcome that is the library refusing the build (over budget, no message for a
    provider), not a failure of the layout."""
    error = getattr(contextfold, outcome.split(":", 1)[0], None)
    return isinstance(error, type) and issubclass(error, contextfold.ContextfoldError)


@pytest.mark.parametrize("events", [_long_run(24), _events(), _denied_run()],
                         ids=["sliding", "compactions", "denied"])
def test_patched_layouts_equal_fresh_ones_whatever_built_before(events: list[AnyEvent],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Configs interleaved on one state after every event (different budgets, providers and
    ``recent_groups``, so each patches from another's layout), each again with nothing new:
    every request and manifest equals a fresh state's. Most builds patch: the layout starts
    over only when the timeline's units do (a new config, a compaction)."""
    starts: list[int] = []

    class Counted(layout._Laid):
        def __init__(self, generation: int) -> None:
            starts.append(generation)
            super().__init__(generation)

    monkeypatch.setattr(layout, "_Laid", Counted)
    state = new_state("patch")
    builds = starts_here = 0
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("patch", pos, event, ""))
        for config in (*SLIDING, *CONFIGS[:2]):
            before = len(starts)
            outcome = _outcome(state, config)
            assert _outcome(state, config) == outcome, (pos, config)
            starts_here += len(starts) - before
            builds += 2
            assert outcome == _outcome(state.snapshot(), config), (pos, config)
            assert isinstance(outcome, tuple) or _refused(outcome), outcome
    assert builds > 10 * starts_here, (builds, starts_here)


def test_a_rebuild_hands_out_the_same_messages_and_a_new_turn_keeps_the_unchanged_ones() -> None:
    """With nothing new the conversation's messages are the very tuple of the last build (no
    per-item pass, no copy); after a new turn every message of an item still kept, uncut and
    not the current input is the same object as before, in the same order."""
    config = SLIDING[0]
    events = _long_run(12)
    state = new_state("keep")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("keep", pos, event, ""))
    first = build_context(state, config, render=render_request)
    assert first.manifest.truncations, "the window must slide for this test"
    again = build_context(state, config, render=render_request)
    assert again.conversation.messages is first.conversation.messages
    assert again.body_bytes == first.body_bytes

    more: list[AnyEvent] = [UserInput("step 12: once more"),
            ModelResponse(text="", tool_calls=(ToolCall(call_id="c12", name="run"),)),
            ToolResult(call_id="c12", content="short"), ModelResponse(text="done 12")]
    for pos, event in enumerate(more, start=len(events) + 1):
        fold_event(state, RecordedEvent("keep", pos, event, ""))
    moved = build_context(state, config, render=render_request)
    assert moved.body_bytes == build_context(state.snapshot(), config, render=render_request).body_bytes
    # the first build's messages are alive (``first``), so their ids are theirs
    before = {id(m): i for i, m in enumerate(first.conversation.messages)}
    same = [before[id(m)] for m in moved.conversation.messages if id(m) in before]
    assert len(same) >= len(first.conversation.messages) // 2
    assert same == sorted(same)
