"""Claude bills a call and its result above their texts and ids: an Anthropic build charges each
``tool_use`` block ``ANTHROPIC_TOOL_USE_FRAMING`` and each ``tool_result`` block
``ANTHROPIC_TOOL_RESULT_FRAMING`` (``call_id_prices.anthropic_block_tokens``).

Measured on pydantic-ai's recorded requests (``tests/integration/test_estimates.py``): each step
of a conversation that adds one call and its result grew Claude's count 11-19 tokens more than
our estimate did. The other providers, and the neutral conversation, are priced as before.
"""

from __future__ import annotations

from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.projections.builder import build_context
from contextfold.projections.call_id_prices import ANTHROPIC_TOOL_RESULT_FRAMING, ANTHROPIC_TOOL_USE_FRAMING
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from contextfold.projections.state import RunState


def _events() -> list[AnyEvent]:
    """A lone call, a parallel batch of three (one failing), and the user's next message."""
    return [
        UserInput("check the weather and the build"),
        ModelResponse(text="Looking.", tool_calls=[ToolCall(call_id="toolu_a", name="weather",
                                                            arguments='{"city": "Paris"}')]),
        ToolResult(call_id="toolu_a", content="sunny, 21 C"),
        ModelResponse(tool_calls=[ToolCall(call_id=f"toolu_b{i}", name="run_build", arguments="{}")
                                  for i in range(3)]),
        ToolResult(call_id="toolu_b0", content="ok"),
        ToolResult(call_id="toolu_b1", content="error: missing module", is_error=True, exit_code=1),
        ToolResult(call_id="toolu_b2", content="ok"),
        UserInput("and now?"),
    ]


def _state() -> RunState:
    return fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(_events())])


def _priced(state: RunState, provider: str) -> int:
    """The build's selected tokens but its tools layer (declarations, Anthropic's tool prompt)."""
    manifest: ContextManifest = build_context(
        state, BuildConfig(provider=provider, window=200_000, reserve=8_000),
        render=lambda c, p, m: render(c, p, max_tokens=m)).manifest
    return manifest.selected_tokens - manifest.layer_tokens["tools"]


def test_an_anthropic_build_charges_each_call_and_each_result_their_markup() -> None:
    """Four calls (a lone one, a batch of three) and their four results (one an error) pay four
    charges each way above what a Responses build of the same state prices (the same texts, ids
    and message framing); a run with one call and its result pays one each way."""
    pair = ANTHROPIC_TOOL_USE_FRAMING + ANTHROPIC_TOOL_RESULT_FRAMING
    state = _state()
    assert _priced(state, "anthropic") - _priced(state, "openai-responses") == 4 * pair
    one = fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(_events()[:3])])
    assert _priced(one, "anthropic") - _priced(one, "openai-responses") == pair


def test_a_run_without_calls_is_priced_as_before() -> None:
    """No call, no charge: a conversation of user messages and a text reply is priced alike."""
    events: list[AnyEvent] = [UserInput("hello"), ModelResponse(text="Hi."), UserInput("bye")]
    state = fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(events)])
    assert _priced(state, "anthropic") == _priced(state, "openai-responses")


def test_the_other_providers_and_neutral_are_priced_as_before() -> None:
    """Only Claude's markup is charged: a neutral build of the same state prices its calls and
    results as a Responses one does, before and after an Anthropic build of the state (the
    builds share facts tables where their prices agree: ``fragment_facts.BuildCtx.pricing``)."""
    state = _state()
    responses = _priced(state, "openai-responses")
    assert _priced(state, "neutral") == responses
    _priced(state, "anthropic")
    assert _priced(state, "openai-responses") == responses
    assert _priced(state, "neutral") == responses
