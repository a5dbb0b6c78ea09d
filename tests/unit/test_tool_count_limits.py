"""How many tools a request may declare: a build never declares more than its provider takes.

Why: OpenAI answers 400 "Invalid 'tools': array too long. Expected an array with maximum length
128" (Chat Completions and Responses alike), and Gemini's function declarations are at most 512
(``google.genai.types.Tool.function_declarations``). A run with a large MCP toolkit and a raised
``max_tools``, or one whose history called more tools than that, failed every build with a
RenderError. Now the request declares the allowed number, by the exposure's own priority (pinned,
called by the kept history, then by relevance), and the manifest says which were left out and why.
Anthropic documents no count: its requests keep every tool.
"""

from __future__ import annotations

import json

import pytest

from contextfold.api import render_request
from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.errors import RenderError
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
from contextfold.projections.fold import fold
from contextfold.projections.render import check_protocol, render
from contextfold.projections.state import RunState
from contextfold.projections.tool_reasons import not_exposed_reason


def _tools(n: int) -> tuple[ToolSpec, ...]:
    """``n`` tools, ``deploy_7`` the only ones sharing a term ("deploy") with the input below."""
    return tuple(ToolSpec(name=f"{'deploy' if i % 10 == 7 else 'tool'}_{i}", description=f"Tool number {i}",
                          parameters={"type": "object", "properties": {"x": {"type": "string"}}})
                 for i in range(n))


def _state(events: list[AnyEvent]) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def _config(provider: str, max_tools: int) -> BuildConfig:
    return BuildConfig(provider=provider, window=400_000, reserve=4000, max_tools=max_tools,
                       layer_shares={"tools": 0.5})


def _build(events: list[AnyEvent], provider: str, max_tools: int) -> BuildResult:
    return build_context(_state(events), _config(provider, max_tools),
                         render=render_request)  # validated: protocol checks and SDK types


def _declared(built: BuildResult) -> list[str]:
    body = built.request
    if "functionDeclarations" in json.dumps(body.get("tools", [])):
        return [d["name"] for t in body["tools"] for d in t["functionDeclarations"]]
    return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]


@pytest.mark.parametrize(("provider", "limit"), [
    ("openai-chat", 128), ("openai-responses", 128), ("gemini", 512), ("anthropic", None)])
def test_a_whole_toolkit_over_the_providers_limit_is_cut_to_it_pinned_first(provider: str,
                                                                            limit: int | None) -> None:
    """max_tools raised to the registry's size (the whole toolkit): the pinned tool and the most
    relevant ones stay, the rest are left out and named in the repairs."""
    n = 600 if provider == "gemini" else 200
    events: list[AnyEvent] = [ToolsRegistered(tools=_tools(n)),
                              PolicySet(text="Tools may be used.", pinned_tools=("tool_199",)),
                              UserInput("deploy the app")]
    built = _build(events, provider, max_tools=n)
    declared = _declared(built)
    assert len(declared) == (n if limit is None else limit)
    assert len(built.manifest.tools) == len(declared)
    assert "tool_199" in declared  # pinned
    assert {f"deploy_{i}" for i in range(7, n, 10)} <= set(declared)  # relevant: ranked first
    left = [r for r in built.manifest.repairs if r.startswith("tools_over_limit:")]
    if limit is None:
        assert left == []
        return
    assert len(left) == 1 and left[0].startswith(
        f"tools_over_limit:{provider} takes at most {limit} tools in a request; {n - limit} ranked below "
        "the declared ones were left out: ")
    named = left[0].split(": ", 1)[1].split(", ")
    assert sorted(named + declared) == sorted(t.name for t in _tools(n))
    state = _state(events)
    why = not_exposed_reason(state, _config(provider, n), named[0], declared)
    assert why is not None and f"{provider} takes at most {limit} tools in a request" in why


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_a_history_calling_more_tools_than_the_limit_keeps_the_latest_called(provider: str) -> None:
    """130 tools called, one each: the 128 called last are declared; the two called first are not
    offered, their calls shown as the runtime's notes (a call of an undeclared tool is refused),
    and the repairs and ``why`` say so."""
    events: list[AnyEvent] = [ToolsRegistered(tools=_tools(130)), UserInput("run them all")]
    for i in range(130):
        name = _tools(130)[i].name
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name=name, arguments="{}"),)),
                   ToolResult(call_id=f"c{i}", content=f"result {i}")]
    events.append(UserInput("thanks"))
    built = _build(events, provider, max_tools=12)
    declared = _declared(built)
    assert len(declared) == 128 and "tool_0" not in declared and "tool_1" not in declared
    request = json.dumps(built.request)
    assert "TOOL_NOT_OFFERED" in request and "call c0: tool_0" in request and "result 0" in request
    notes = [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")]
    assert notes == [f"tool_not_offered:tool_{i} ({provider} takes at most 128 tools in a request: the "
                     "tools pinned and called more recently came first)" for i in (0, 1)]
    why = not_exposed_reason(_state(events), _config(provider, 12), "tool_0", declared)
    assert why == (f"tool 'tool_0' (registered) is not offered to {provider}: it takes at most 128 tools "
                   "in a request, and the tools pinned and called more recently came first; the history's "
                   "calls to it are shown as runtime notes")


@pytest.mark.parametrize(("provider", "limit"), [("openai-responses", 128), ("gemini", 512)])
def test_a_body_edited_past_the_count_is_refused_before_it_is_sent(provider: str, limit: int) -> None:
    """Bodies made or edited elsewhere are held to the count as Chat Completions' are."""
    conversation = Conversation(
        model="m", system=(InstructionPart(text="Be brief.", authority="runtime", fragment_id="p"),),
        tools=_tools(limit + 1),
        messages=(UserMessage(parts=(InstructionPart(text="go", authority="user", fragment_id="u"),)),))
    refused = f"{limit + 1} tools are declared and this API takes at most {limit}"
    with pytest.raises(RenderError, match=refused):
        check_protocol(provider, render(conversation, provider))
    conversation = conversation.model_copy(update={"tools": _tools(limit)})
    check_protocol(provider, render(conversation, provider))


def test_pinned_tools_past_the_limit_are_not_offered_first_by_name() -> None:
    """A policy that pins 130 tools: the first 128 by name are declared, the rest not offered."""
    names = tuple(t.name for t in _tools(130))
    events: list[AnyEvent] = [ToolsRegistered(tools=_tools(130)),
                              PolicySet(text="Tools may be used.", pinned_tools=names), UserInput("go")]
    built = _build(events, "openai-chat", max_tools=12)
    declared = _declared(built)
    left = sorted(names)[128:]
    assert len(declared) == 128 and not set(left) & set(declared)
    assert [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")] == [
        f"tool_not_offered:{name} (openai-chat takes at most 128 tools in a request: the tools pinned and "
        "called more recently came first)" for name in left]


def test_the_tools_the_kept_history_calls_come_before_the_relevant_ones() -> None:
    """120 tools called and a whole toolkit of 200: the 120 stay (their calls are sent as calls),
    and 8 of the others, the relevant first, fill the count."""
    called = [t.name for t in _tools(200) if t.name.startswith("tool_")][:120]
    events: list[AnyEvent] = [ToolsRegistered(tools=_tools(200)), UserInput("run them")]
    for i, name in enumerate(called):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name=name, arguments="{}"),)),
                   ToolResult(call_id=f"c{i}", content=f"result {i}")]
    events.append(UserInput("now deploy"))
    built = _build(events, "openai-chat", max_tools=200)
    declared = set(_declared(built))
    assert len(declared) == 128 and set(called) <= declared
    assert declared - set(called) <= {f"deploy_{i}" for i in range(7, 200, 10)}  # the relevant ones
    assert not [r for r in built.manifest.repairs if r.startswith("declared_unregistered_tool:")]
    assert "TOOL_NOT_OFFERED" not in json.dumps(built.request)
