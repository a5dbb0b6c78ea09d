"""What a provider adds to a request with tools that the declarations do not show.

Anthropic puts a tool-use system prompt of a fixed size per model before any request that
declares tools (346 tokens on Claude 4.x with ``tool_choice`` auto; Anthropic's "Tool use"
docs, Pricing); Gemini's ``functionResponse`` names the tool again beside the call id. Neither
was priced: an Anthropic build at a tight window sent a request its budget did not hold, and a
Gemini build of a run of many results sent each result's tool name uncounted. The neutral and
OpenAI builds of one turn must still price tools alike (the second reuses the first's selection).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import contextfold.projections.builder as builder_module
from contextfold.api import render_request
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
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.call_id_prices import ANTHROPIC_TOOL_RESULT_FRAMING, ANTHROPIC_TOOL_USE_FRAMING
from contextfold.projections.fold import fold
from contextfold.projections.selection import select_units
from contextfold.projections.state import RunState
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_pricing import FUNC_END, tool_bill
from contextfold.projections.tool_prompt import (
    ANTHROPIC_TOOL_PROMPT,
    CHAT_GPT5_PREAMBLE,
    DEAREST,
    MEASURED_TOOL_PROMPT,
    tool_prompt_tokens,
)

count = get_counter("cl100k_base").count

TOOLS = (
    ToolSpec(name="get_reservation", description="Look up a reservation by its confirmation code.",
             parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
    ToolSpec(name="cancel_reservation", description="Cancel a reservation.",
             parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
)


def _events(calls: int, name: str = "get_reservation", registered: bool = True) -> list[AnyEvent]:
    """A support run of ``calls`` lookups; ``registered=False``: an imported history, whose log
    registers no tool (the calls declare theirs)."""
    events: list[AnyEvent] = [PolicySet(text="You are an airline support agent."),
                              *([ToolsRegistered(tools=TOOLS)] if registered else []),
                              UserInput("Look up my reservations, then cancel the reservation ABC123.")]
    for i in range(calls):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name=name,
                                                      arguments=json.dumps({"code": f"R{i:04d}"}))]),
                   ToolResult(call_id=f"c{i}", content=f"reservation R{i:04d}: one passenger, economy, "
                                                       f"flight {i} from JFK to SFO, not cancelled")]
    events.append(UserInput("And now cancel ABC123, please."))
    return events


def _state(events: list[AnyEvent]) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def _build(state: RunState, provider: str, window: int, model: str | None = None) -> BuildResult:
    return build_context(state, BuildConfig(provider=provider, model=model, window=window, reserve=500),
                         render=render_request)


def _shown(value: Any, key: str | None = None) -> int:
    """Every string a request shows, counted with the manifest's encoding; the few tokens of
    message framing (roles, ids, types) left out: the manifest prices those per message."""
    if isinstance(value, str):
        return 0 if key in ("role", "type", "id", "tool_use_id") else count(value)
    if isinstance(value, dict):
        if key == "input" or key == "args":
            return count(json.dumps(value))
        return sum(_shown(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_shown(v, key) for v in value)
    return 0


def _anthropic_tokens(request: dict[str, Any]) -> int:
    """The request as Anthropic bills it, counted apart from the builder: the shown text of the
    system and the messages, each declared tool's JSON, and the tool-use system prompt from
    Anthropic's table (Claude Sonnet 4.5, tool_choice auto: 346 tokens), or what its requests were
    measured billed (527, ``MEASURED_TOOL_PROMPT``)."""
    tools = request.get("tools") or []
    declared = sum(count(json.dumps({k: t[k] for k in ("name", "description", "input_schema")},
                                    separators=(",", ":"))) for t in tools)
    return _shown(request.get("system")) + _shown(request["messages"]) + declared + (527 if tools else 0)


@pytest.mark.parametrize("registered", [True, False])
def test_an_anthropic_request_with_tools_fits_its_budget_once_the_tool_prompt_is_charged(
        registered: bool) -> None:
    state = _state(_events(60, registered=registered))
    cut = 0
    for window in range(1_800, 5_200, 170):
        built = _build(state, "anthropic", window, model="claude-sonnet-4-5")
        m = built.manifest
        assert built.request["tools"], window
        assert _anthropic_tokens(built.request) <= m.budget_tokens, window
        # the charge is shown: in the tools layer beside the schemas, and in the overhead
        assert m.layer_tokens["tools"] == m.tool_tokens + 527
        assert m.selected_tokens == sum(m.layer_tokens.values()) + 3 <= m.budget_tokens
        cut += m.excluded.get("low_priority", 0) > 0
    assert cut > 10  # the windows are tight: history was left out to make room


def test_an_anthropic_build_charges_its_models_row_and_an_unknown_model_the_dearest() -> None:
    state = _state(_events(3))
    for model, charged in (("claude-sonnet-4-5-20250929", 527), ("claude-opus-4-20250514", 346),
                           ("claude-3-7-sonnet-latest", 346), ("claude-haiku-4-5", 346),
                           ("claude-3-5-haiku-20241022", 340), ("claude-3-haiku-20240307", 340),
                           ("claude-3-opus-20240229", 530), ("claude-3-sonnet-20240229", 235),
                           ("claude-opus-4-6", DEAREST), ("claude-3-5-sonnet-20241022", DEAREST),
                           (None, DEAREST)):
        m = _build(state, "anthropic", 100_000, model=model).manifest
        assert m.layer_tokens["tools"] - m.tool_tokens == charged, model
        assert tool_prompt_tokens("anthropic", model) == charged
    assert DEAREST == 530
    plain = _build(state, "anthropic", 100_000, model="claude-sonnet-4-5").manifest.overhead_tokens
    for provider in ("neutral", "openai-chat", "openai-responses", "gemini"):
        m = _build(state, provider, 100_000).manifest
        assert m.layer_tokens["tools"] == m.tool_tokens, provider
        assert m.overhead_tokens < plain - 300, provider


def test_an_anthropic_request_with_no_tool_to_declare_pays_no_tool_prompt() -> None:
    state = _state([PolicySet(text="Be brief."), UserInput("hello"), ModelResponse(text="Hi!"),
                    UserInput("bye")])
    built = _build(state, "anthropic", 2_000, model="claude-sonnet-4-5")
    assert "tools" not in built.request
    assert built.manifest.layer_tokens["tools"] == 0


def test_a_gpt5_chat_request_with_tools_sets_aside_the_models_preamble() -> None:
    """gpt-5 models count 79 tokens of their own beyond the cookbook's count of a Chat request
    with tools (pydantic-ai's recorded gpt-5.4-mini requests, ``CHAT_GPT5_PREAMBLE``): charged
    once, beside the tools, as Anthropic's tool prompt is. Not for gpt-4o (within 7 of the
    cookbook), not for Responses (gpt-5.4's ~12 above it), not for a request with no tool. (Beside
    it, the tools layer holds the functions' closing ``func_end`` where the tools are priced at
    their rendering, ``tool_pricing.tool_bill``: their JSON no longer holds it.)"""
    state = _state(_events(3))
    for model in ("gpt-5.4-mini", "gpt-5", "openai/gpt-5-mini-2025-08-07"):
        m = _build(state, "openai-chat", 100_000, model=model).manifest
        assert m.layer_tokens["tools"] - m.tool_tokens == CHAT_GPT5_PREAMBLE + FUNC_END, model
        assert CHAT_GPT5_PREAMBLE == 79
        plain = _build(state, "openai-chat", 100_000, model="gpt-4o").manifest
        assert m.selected_tokens == plain.selected_tokens + CHAT_GPT5_PREAMBLE, model
    for provider, model in (("openai-chat", "gpt-4o"), ("openai-chat", "gpt-50x"),
                            ("openai-responses", "gpt-5"), ("neutral", "gpt-5")):
        m = _build(state, provider, 100_000, model=model).manifest
        closing = FUNC_END if tool_bill(provider, model).rendered else 0
        assert m.layer_tokens["tools"] == m.tool_tokens + closing, (provider, model)
    chat = _state([PolicySet(text="Be brief."), UserInput("hello"), ModelResponse(text="Hi!"),
                   UserInput("bye")])
    m = _build(chat, "openai-chat", 2_000, model="gpt-5").manifest
    assert m.layer_tokens["tools"] == 0


LONG_NAME = "lookup_the_customer_reservation_details_by_confirmation_number"


def test_a_gemini_build_prices_the_tool_name_each_function_response_repeats() -> None:
    state = _state(_events(80, name=LONG_NAME))
    big = {p: _build(state, p, 400_000).manifest for p in ("neutral", "openai-chat", "anthropic", "gemini")}
    assert sum(f.kind == "tool_result" for f in big["gemini"].fragments) == 80
    # the results' framing (the manifest's overhead): Gemini's holds the name once per result
    overhead = {p: m.overhead_tokens - (m.layer_tokens["tools"] - m.tool_tokens) for p, m in big.items()}
    assert overhead["gemini"] == overhead["neutral"] + 80 * count(LONG_NAME)
    assert overhead["neutral"] == overhead["openai-chat"]
    # Claude's markup around each call and result (``call_id_prices.anthropic_block_tokens``)
    assert overhead["anthropic"] == overhead["neutral"] + 80 * (ANTHROPIC_TOOL_USE_FRAMING
                                                                + ANTHROPIC_TOOL_RESULT_FRAMING)
    # a request sized to its manifest shows no more than it counted, the repeated names included
    whole = big["gemini"].selected_tokens
    built = _build(state, "gemini", whole + 500)
    assert not built.manifest.excluded.get("low_priority")
    assert _shown(built.request["contents"]) <= built.manifest.selected_tokens


@pytest.mark.parametrize("second", ["openai-chat", "openai-responses"])
def test_neutral_and_openai_builds_of_one_turn_share_their_selection(
        second: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent loop's pattern: the turn built for ``neutral`` first, then for OpenAI. Tools are
    priced alike for both (neither pays a tool-use prompt), so the second build's ``available``
    is the first's and it reuses the selection; a neutral priced like the dearest provider lost
    that reuse (the second build x1.46 in ``scripts/bench_ab.py --workload A``)."""
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return select_units(*args, **kwargs)

    monkeypatch.setattr(builder_module, "select_units", counted)
    state = _state(_events(40))
    for window in (3_000, 6_000):
        first = _build(state, "neutral", window)
        before = len(calls)
        again = _build(state, second, window)
        assert len(calls) == before, window  # the memo answered
        assert {f.id for f in again.manifest.fragments} == {f.id for f in first.manifest.fragments}
        assert again.manifest.tool_tokens == first.manifest.tool_tokens


def test_claude_sonnet_4_5_is_charged_the_tool_prompt_its_requests_were_billed() -> None:
    """pydantic-ai's recorded Sonnet 4.5 requests that declare tools and hold no call were billed
    450-527 tokens beyond what the build priced besides the prompt, not the table's 346
    (``MEASURED_TOOL_PROMPT``; ``tests/integration/test_estimates.py`` measures it): 100-180 tokens
    a request over its manifest. The table's cell stays what Anthropic documents."""
    assert ANTHROPIC_TOOL_PROMPT[("sonnet", 4, 5)] == (346, 313)
    assert MEASURED_TOOL_PROMPT[("sonnet", 4, 5)] == 527
    for name in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4.5"):
        assert tool_prompt_tokens("anthropic", name) == 527
    assert tool_prompt_tokens("anthropic", "claude-opus-4-5") == 346  # not measured: the table's
    assert tool_prompt_tokens("openai-chat", "claude-sonnet-4-5") == 0
