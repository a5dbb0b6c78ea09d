"""The tools a provider request body declares are registered by its import.

Why: a body's ``tools`` are the schemas the model was given (argument names, types, enums,
required fields). The importers read only the history, so a rebuilt request declared each tool
the history happened to call with an empty schema ("Declared by contextfold ... never registered
a schema") and dropped every tool it had not called: a resumed or handed-off model no longer
knew how to call them. Each parse now records them as one :class:`ToolsRegistered`, right after
:class:`RunStarted`, before any response could call them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    RunStarted,
    ToolSpec,
    ToolsRegistered,
    canonical_json,
)
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import iter_runs, parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render

WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["c", "f"]}},
           "required": ["city", "unit"]}
FLIGHT = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
EXPECTED = (ToolSpec(name="get_weather", description="Current weather", parameters=WEATHER),
            ToolSpec(name="book_flight", description="Book a flight", parameters=FLIGHT))


def _b(value: Any) -> bytes:
    return json.dumps(value).encode()


def _registered(events: list[AnyEvent]) -> tuple[ToolSpec, ...]:
    """The tools of the run's one registration, which comes right after RunStarted."""
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[1], ToolsRegistered)
    assert not any(isinstance(e, ToolsRegistered) for e in events[2:])
    return events[1].tools


def _built(events: list[AnyEvent], provider: str) -> dict[str, Any]:
    records, prev = [], GENESIS_HASH
    for pos, event in enumerate(events, start=1):
        prev = chain_hash("r", pos, prev, canonical_json(event))
        records.append(RecordedEvent("r", pos, event, prev))
    result = build_context(fold(records), BuildConfig(provider=provider, window=200_000, reserve=4_000),
                           render=lambda c, p, m: render(c, p, max_tokens=m, validate=True))
    assert not [r for r in result.manifest.repairs if r.startswith("declared_unregistered_tool")]
    return result.request


CHAT_HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "12C"},
    {"role": "user", "content": "And in Rome? Then book me a flight there."}]


def _chat_tool(spec: ToolSpec, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                             "parameters": spec.parameters, **extra}}


def test_openai_chat_body_tools_are_registered_and_declared_with_their_schemas() -> None:
    body = {"model": "gpt-4o", "messages": CHAT_HISTORY,
            "tools": [_chat_tool(EXPECTED[0], strict=False), _chat_tool(EXPECTED[1])]}
    events = parse(_b(body), format="openai-chat")
    # the strict flag the body said is kept (and sent again); one it did not say stays unsaid
    assert _registered(events) == (EXPECTED[0].model_copy(update={"strict": False}), EXPECTED[1])
    request = _built(events, "openai-chat")
    declared = {t["function"]["name"]: t["function"] for t in request["tools"]}
    assert set(declared) == {"get_weather", "book_flight"}  # the uncalled tool is not lost
    assert declared["get_weather"]["strict"] is False and "strict" not in declared["book_flight"]
    assert declared["get_weather"]["parameters"]["properties"]["unit"]["enum"] == ["c", "f"]
    assert declared["get_weather"]["parameters"]["required"] == ["city", "unit"]
    assert declared["book_flight"]["description"] == "Book a flight"


def test_openai_chat_custom_tools_are_not_registered_and_legacy_functions_are() -> None:
    """A ``custom`` tool takes free text, not JSON arguments: declaring it as a function would
    tell the model to send an object. Legacy ``functions`` are the tools of ``function_call``."""
    body = {"messages": CHAT_HISTORY[:1],
            "tools": [{"type": "custom", "custom": {"name": "grammar", "description": "free text"}},
                      _chat_tool(EXPECTED[0])],
            "functions": [{"name": "book_flight", "description": "Book a flight", "parameters": FLIGHT}]}
    assert _registered(parse(_b(body), format="openai-chat")) == EXPECTED


def test_openai_chat_records_register_their_own_tools() -> None:
    """One run per record (a fine-tuning JSONL line holds ``messages`` and ``tools``): each run
    gets the tools its record declared, never another's."""
    lines = "\n".join(json.dumps(r) for r in (
        {"messages": CHAT_HISTORY[:1], "tools": [_chat_tool(EXPECTED[0])]},
        {"messages": CHAT_HISTORY[:1], "tools": [_chat_tool(EXPECTED[1])]},
        {"messages": CHAT_HISTORY[:1]}))
    runs = dict(iter_runs(lines.encode(), format="openai-chat"))
    assert [_registered(runs[k]) for k in ("run-0", "run-1")] == [EXPECTED[:1], EXPECTED[1:]]
    assert not any(isinstance(e, ToolsRegistered) for e in runs["run-2"])


def test_a_body_without_tools_imports_as_before() -> None:
    events = parse(_b({"messages": CHAT_HISTORY, "tools": []}), format="openai-chat")
    assert not any(isinstance(e, ToolsRegistered) for e in events)
    assert len(events) == len(CHAT_HISTORY) + 1


def test_anthropic_body_tools_are_registered_but_not_its_server_tools() -> None:
    """Anthropic's own tools (web search, code execution, bash, ...) carry a ``type`` and no
    schema: Anthropic defines them. Registered, the builder would declare each as a client
    function with empty parameters, which no client runs."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "Be brief.",
            "tools": [{"name": "get_weather", "description": "Current weather", "input_schema": WEATHER},
                      {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
                      {"type": "custom", "name": "book_flight", "description": "Book a flight",
                       "input_schema": FLIGHT},
                      {"type": "code_execution_20250825", "name": "code_execution"}],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                   "input": {"city": "Paris", "unit": "c"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "12C"}]},
                {"role": "user", "content": "Book me a flight to Rome."}]}
    events = parse(_b(body), format="anthropic")
    assert _registered(events) == EXPECTED
    request = _built(events, "anthropic")
    declared = {t["name"]: t for t in request["tools"]}
    assert set(declared) == {"get_weather", "book_flight"}
    assert declared["get_weather"]["input_schema"]["required"] == ["city", "unit"]


def test_openai_responses_body_function_tools_are_registered_and_hosted_ones_not() -> None:
    # strict, so closed (OpenAI's strict mode refuses an open object: ``tool_strict``)
    closed = {**WEATHER, "additionalProperties": False}
    body = {"model": "gpt-5", "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "get_weather", "description": "Current weather",
                       "parameters": closed, "strict": True},
                      {"type": "web_search"}, {"type": "tool_search"},
                      {"type": "function", "name": "book_flight", "description": "Book a flight",
                       "parameters": FLIGHT, "strict": False}],
            "input": [{"role": "user", "content": "Weather in Paris?"},
                      {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                       "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"},
                      {"type": "function_call_output", "call_id": "call_1", "output": "12C"},
                      {"role": "user", "content": "Book me a flight to Rome."}]}
    events = parse(_b(body), format="openai-responses")
    assert _registered(events) == (EXPECTED[0].model_copy(update={"strict": True, "parameters": closed}),
                                   EXPECTED[1].model_copy(update={"strict": False}))
    request = _built(events, "openai-responses")
    assert {t["name"]: t["parameters"]["required"] for t in request["tools"]} == {
        "get_weather": ["city", "unit"], "book_flight": ["to"]}
    assert {t["name"]: t["strict"] for t in request["tools"]} == {"get_weather": True, "book_flight": False}


GEMINI_CONTENTS = [
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
    {"role": "model", "parts": [{"functionCall": {"id": "fc_1", "name": "get_weather",
                                                  "args": {"city": "Paris", "unit": "c"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "fc_1", "name": "get_weather",
                                                     "response": {"output": "12C"}}}]},
    {"role": "user", "parts": [{"text": "Book me a flight to Rome."}]}]


def test_gemini_body_function_declarations_are_registered() -> None:
    """``parametersJsonSchema`` is JSON Schema, kept as given; ``parameters`` is Gemini's
    OpenAPI subset (``"type": "OBJECT"``, ``nullable``, int64 bounds as strings), which no other
    provider reads: it is registered as the JSON Schema it stands for."""
    body = {"contents": GEMINI_CONTENTS, "tools": [
        {"googleSearch": {}},
        {"functionDeclarations": [
            {"name": "get_weather", "description": "Current weather", "parametersJsonSchema": WEATHER}]},
        {"function_declarations": [
            {"name": "book_flight", "description": "Book a flight", "parameters": {
                "type": "OBJECT", "required": ["to"], "properties": {
                    "to": {"type": "STRING"},
                    "via": {"type": "ARRAY", "nullable": True, "max_items": "2",
                            "items": {"type": "STRING", "enum": ["AMS", "CDG"]}}}}}]}]}
    events = parse(_b(body), format="gemini")
    [weather, flight] = _registered(events)
    assert weather == EXPECTED[0]
    assert flight.parameters == {"type": "object", "required": ["to"], "properties": {
        "to": {"type": "string"},
        "via": {"type": ["array", "null"], "maxItems": 2,
                "items": {"type": "string", "enum": ["AMS", "CDG"]}}}}
    for provider in ("gemini", "openai-chat", "anthropic"):
        _built(events, provider)  # every provider takes the converted schema


def test_gemini_snake_case_parameters_json_schema_is_read() -> None:
    """The google-genai SDK's dump (and pydantic-ai's recorded bodies) spell it snake_case."""
    body = {"contents": GEMINI_CONTENTS[:1], "tools": [{"function_declarations": [
        {"name": "get_weather", "description": "Current weather", "parameters_json_schema": WEATHER}]}]}
    assert _registered(parse(_b(body), format="gemini")) == EXPECTED[:1]


@pytest.mark.parametrize(("fmt", "body", "reason"), [
    ("openai-chat", {"messages": [], "tools": {"type": "function"}}, "expected 'tools' to be an array"),
    ("openai-chat", {"messages": [], "tools": [{"type": "function", "function": {"description": "x"}}]},
     "missing field 'name'"),
    ("anthropic", {"messages": [], "tools": [{"name": "t", "input_schema": "object"}]},
     "expected 'input_schema' to be an object"),
    ("openai-responses", {"input": [], "tools": [{"type": "function", "name": "x" * 129}]},
     "invalid ToolSpec"),
    ("gemini", {"contents": [], "tools": [{"functionDeclarations": {"name": "t"}}]},
     "expected 'functionDeclarations' to be an array"),
    ("anthropic", {"messages": [], "tools": [{"name": "t", "input_schema": {"type": "object"},
                                             "strict": "yes"}]},
     "expected 'strict' to be true, false or null"),
])
def test_malformed_tools_are_refused_at_their_line(fmt: str, body: dict[str, Any], reason: str) -> None:
    text = json.dumps(body, indent=1).encode()
    with pytest.raises(ImportFormatError) as info:
        parse(text, format=fmt, source="body.json")
    assert reason in str(info.value)
    assert info.value.location != "body.json:1"  # the tool's line, not the document's


def test_registration_precedes_every_response() -> None:
    body = {"messages": CHAT_HISTORY, "tools": [_chat_tool(EXPECTED[0])]}
    events = parse(_b(body), format="openai-chat")
    first_response = next(i for i, e in enumerate(events) if isinstance(e, ModelResponse))
    assert next(i for i, e in enumerate(events) if isinstance(e, ToolsRegistered)) < first_response


# ---------------------------------------------------------------- OpenHands

def test_openhands_system_action_tools_are_registered_after_the_system_prompt() -> None:
    """An OpenHands ``system`` action carries the tools the agent was given (OpenAI chat's shape,
    ``args.tools``): registered right after the prompt it came with, before the first action."""
    history = [
        {"id": 0, "source": "agent", "action": "system", "message": "You are OpenHands agent.",
         "args": {"content": "You are OpenHands agent.", "agent_class": "CodeActAgent",
                  "tools": [_chat_tool(EXPECTED[0]), _chat_tool(EXPECTED[1])]}},
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Weather in Paris?"}},
        {"id": 2, "source": "agent", "action": "run", "args": {"command": "curl wttr.in/Paris"},
         "tool_call_metadata": {"function_name": "get_weather", "tool_call_id": "toolu_01",
                                "total_calls_in_response": 1}},
        {"id": 3, "source": "environment", "observation": "run", "cause": 2, "content": "12C",
         "tool_call_metadata": {"function_name": "get_weather", "tool_call_id": "toolu_01"}}]
    events = parse(_b({"history": history}), format="openhands")
    assert [type(e).__name__ for e in events[:3]] == ["RunStarted", "PolicySet", "ToolsRegistered"]
    assert isinstance(events[2], ToolsRegistered) and events[2].tools == EXPECTED
    _built(events, "anthropic")
    for tools in ([], ["execute_bash"], [{"name": "execute_bash"}]):  # none, or none in that shape
        without = parse(_b({"history": [{**history[0], "args": {"content": "x", "tools": tools}}]}),
                        format="openhands")
        assert not any(isinstance(e, ToolsRegistered) for e in without)


def test_openhands_v1_system_prompt_tools_in_openai_shape_are_registered() -> None:
    """The V1 SDK's ``SystemPromptEvent`` listed its tools in OpenAI's shape in some versions
    (registered), and as the SDK's own tool definitions, which hold no schema, in others (not)."""
    def system(tools: list[Any]) -> dict[str, Any]:
        return {"id": "e0", "source": "agent", "kind": "SystemPromptEvent",
                "system_prompt": {"type": "text", "text": "You are OpenHands agent."}, "tools": tools}

    events = parse(_b([system([_chat_tool(EXPECTED[0]), {"name": "terminal", "kind": "TerminalTool"}])]),
                   format="openhands")
    assert [type(e).__name__ for e in events] == ["RunStarted", "PolicySet", "ToolsRegistered"]
    assert isinstance(events[2], ToolsRegistered) and events[2].tools == EXPECTED[:1]
    events = parse(_b([system([{"name": "terminal"}])]), format="openhands")
    assert [type(e).__name__ for e in events] == ["RunStarted", "PolicySet"]
