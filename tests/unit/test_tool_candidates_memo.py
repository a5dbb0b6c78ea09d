"""``tool_candidates`` keeps its last answer on the state, one slot per tool bill: a turn's
neutral build and an OpenAI Chat build for a measured model price a tool differently
(``tool_pricing.tool_bill``), and they alternate. With one slot, each took the other's place and
every build ranked and priced the toolkit afresh (~45 us of a tau-bench first build); with one per
bill, each build's answer must still be what a fresh state gives.
"""

from __future__ import annotations

from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.projections.tool_pricing import DEAREST_BILL, tool_bill

TOOLS = tuple(ToolSpec(name=f"tool_{n}", description=f"look up the {w} of an order",
                       parameters={"type": "object", "properties": {"order_id": {"type": "string"}},
                                   "required": ["order_id"]})
              for n, w in enumerate(("status", "price", "address", "items")))
EVENTS: tuple[AnyEvent, ...] = (
    ToolsRegistered(tools=TOOLS),
    UserInput("what is the status of order 7?"),
    ModelResponse(tool_calls=(ToolCall(call_id="c1", name="tool_0", arguments='{"order_id": "7"}'),)),
    ToolResult(call_id="c1", content="shipped"),
)
NEUTRAL = BuildConfig(provider="neutral", window=8_000, reserve=1_000)
OPENAI = BuildConfig(provider="openai-chat", model="gpt-4o", window=8_000, reserve=1_000)


def _folded() -> RunState:
    state = new_state("memo")
    for pos, event in enumerate(EVENTS, start=1):
        fold_event(state, RecordedEvent("memo", pos, event, ""))
    return state


def _tools(state: RunState, config: BuildConfig) -> tuple[object, ...]:
    manifest = build_context(state, config).manifest
    return tuple((t.name, t.tokens) for t in manifest.tools), manifest.tool_tokens


def _answer(state: RunState, bill: object) -> object:
    """The answer kept in ``bill``'s slot (the slot holds its key and the answer)."""
    slot = state.memo[("tool-candidates", bill)]
    assert isinstance(slot, tuple)
    return slot[1]


def test_alternating_builds_keep_one_answer_per_bill_each_a_fresh_states() -> None:
    assert tool_bill("openai-chat", "gpt-4o") != DEAREST_BILL  # the two builds price tools apart
    kept = _folded()
    for config in (NEUTRAL, OPENAI, NEUTRAL, OPENAI):
        assert _tools(kept, config) == _tools(_folded(), config)
    assert _tools(kept, NEUTRAL) != _tools(kept, OPENAI)
    slots = {k: v for k, v in kept.memo.items() if isinstance(k, tuple) and k[0] == "tool-candidates"}
    openai_bill = tool_bill("openai-chat", "gpt-4o")
    assert set(slots) == {("tool-candidates", DEAREST_BILL), ("tool-candidates", openai_bill)}
    neutral_answer = _answer(kept, DEAREST_BILL)
    build_context(kept, OPENAI)
    build_context(kept, NEUTRAL)  # found in its own slot, not ranked again after the OpenAI build
    assert _answer(kept, DEAREST_BILL) is neutral_answer
