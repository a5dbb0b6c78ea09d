"""A provider response read with ``contextfold.read_response``, appended, and built for the same
provider renders the assistant turn the provider expects back, checked by its official SDK's
request types.

1. Hand-written responses of each provider (``tests/unit/test_read_response.py``), given as the
   SDK's object, go through a real store (SQLite and PostgreSQL) with the public API: build, read
   the response, report its usage, append its events, answer the calls, build again. The second
   request carries the turn as the provider wrote it: thinking blocks with their signatures
   between the calls they stood between, reasoning items with ``encrypted_content`` before the
   calls, call ids (not item ids), thought signatures on their parts, both calls of the batch.
2. Real recorded traffic (``../shared/traces/pydantic-ai-cassettes``): for every response that
   the next recorded request (which its provider accepted) sent back, the events read from the
   response are the events an import reads from that request, and the request built from the
   history before it plus those events passes the SDK's request types and carries every
   signature, reasoning item and call id of the response verbatim.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

import contextfold
from contextfold import ModelResponse, ToolResult, UserInput
from contextfold.domain.events import AnyEvent, GeminiReasoning, OpenAIResponsesReasoning
from contextfold.importers import parse
from contextfold.projections.render.validate import validate_sdk_types
from tests.integration.test_cassettes import CASSETTES, Case, cases
from tests.integration.test_reasoning_traces import _build
from tests.unit.test_read_response import (
    ANTHROPIC,
    BODIES,
    CALL_SIGNATURE,
    CHAT,
    GEMINI,
    RESPONSES,
    SIGNATURE,
    sdk_object,
)

MODELS = {"openai-chat": "gpt-4o", "openai-responses": "gpt-5", "anthropic": "claude-sonnet-4-5",
          "gemini": "gemini-3-flash-preview"}


def _without(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_without(v, key) for v in value]
    return value


def _assistant_turn(provider: str, request: dict[str, Any]) -> Any:
    """The rendered request's assistant turn (cache breakpoints aside)."""
    if provider == "openai-chat":
        (turn,) = [m for m in request["messages"] if m["role"] == "assistant"]
        return turn
    if provider == "anthropic":
        (turn,) = [m for m in request["messages"] if m["role"] == "assistant"]
        return _without(turn["content"], "cache_control")
    if provider == "gemini":
        (turn,) = [c for c in request["contents"] if c["role"] == "model"]
        return turn["parts"]
    return [i for i in request["input"] if i.get("role") != "user" and i["type"] != "function_call_output"]


EXPECTED_TURN: dict[str, Any] = {
    "openai-chat": {"role": "assistant", "content": "Checking both.", "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "read", "arguments": "{\"path\":\"a.py\"}"}},
        {"id": "call_b", "type": "function",
         "function": {"name": "read", "arguments": "{\"path\":\"b.py\"}"}},
    ]},
    "openai-responses": [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAABenc==",
         "summary": [{"type": "summary_text", "text": "Two reads."}]},
        {"type": "message", "role": "assistant", "content": "Checking both."},
        {"type": "function_call", "call_id": "call_a", "name": "read", "arguments": "{\"path\":\"a.py\"}"},
        {"type": "function_call", "call_id": "call_b", "name": "read", "arguments": "{\"path\":\"b.py\"}"},
    ],
    "anthropic": ANTHROPIC["content"],  # block for block, in the response's order
    "gemini": [
        {"text": "Checking both.", "thoughtSignature": SIGNATURE},
        {"functionCall": {"name": "read", "args": {"path": "a.py", "limit": None}, "id": "g1"},
         "thoughtSignature": CALL_SIGNATURE},
        {"functionCall": {"name": "read", "args": {"path": "b.py"}, "id": "g2"}},
    ],
}


@pytest.fixture
def public_store(store_url: str) -> Iterator[Any]:
    opened = contextfold.open_store(store_url)
    yield opened
    opened.close()


@pytest.mark.parametrize("provider", list(BODIES))
def test_a_response_appended_and_built_renders_the_turn_the_provider_wrote(provider: str,
                                                                           public_store: Any) -> None:
    run = public_store.run(f"reply-{provider}")
    run.append(UserInput("Read a.py and b.py."))
    first = run.build(provider, model=MODELS[provider], window=200_000, reserve=8_000)
    body = copy.deepcopy(BODIES[provider])
    _report_about(provider, body, first.manifest.selected_tokens)

    reply = contextfold.read_response(provider, sdk_object(provider, body))
    assert reply.usage is not None
    run.observe_usage(first.manifest.turn, **reply.usage)
    run.append(reply.events)
    run.append(ToolResult(call_id=c.call_id, content=f"contents of {json.loads(c.arguments)['path']}")
               for c in reply.calls)
    built = run.build(provider, model=MODELS[provider], window=200_000, reserve=8_000)

    assert validate_sdk_types(provider, built.request) is True
    assert _assistant_turn(provider, built.request) == EXPECTED_TURN[provider]
    assert built.manifest.turn == first.manifest.turn + 1


def _report_about(provider: str, body: dict[str, Any], tokens: int) -> None:
    """A usage report of about the request's size (what the provider would count)."""
    if provider == "openai-chat":
        body["usage"].update(prompt_tokens=tokens, prompt_tokens_details={"cached_tokens": 0})
    elif provider == "openai-responses":
        body["usage"].update(input_tokens=tokens)
        body["usage"]["input_tokens_details"]["cached_tokens"] = 0
    elif provider == "anthropic":
        body["usage"].update(input_tokens=tokens, cache_read_input_tokens=0, cache_creation_input_tokens=0)
    else:
        body["usageMetadata"].update(promptTokenCount=tokens, cachedContentTokenCount=0)


def test_the_fixtures_are_the_unit_tests() -> None:
    assert BODIES == {"openai-chat": CHAT, "openai-responses": RESPONSES, "anthropic": ANTHROPIC,
                      "gemini": GEMINI}


# ---------------------------------------------------------------- recorded traffic


def _echoed(case: Case) -> bool:
    """Whether ``case``'s request sent back the response before it: every call id of the
    response is in the request. (A response without calls is not told apart so: its text may be
    the next user message's too, "Reply with exactly: OK". The unit tests read those.)"""
    assert case.previous is not None
    if _unfinished(case.previous.response):
        return False
    reply = contextfold.read_response(case.provider, case.previous.response)
    sent = json.dumps(case.body)
    calls = [c.call_id for e in reply.events if isinstance(e, ModelResponse) for c in e.tool_calls]
    return bool(calls) and all(json.dumps(c) in sent for c in calls)


def _pairs() -> list[Case]:
    """Each recorded request whose previous request went to the same provider and got a JSON
    response, the history not kept on the server (``previous_response_id``, ``conversation``)."""
    if not CASSETTES.is_dir():
        return []
    return [c for c in cases() if c.previous is not None and c.previous.provider == c.provider
            and isinstance(c.previous.response, dict) and not c.body.get("previous_response_id")
            and not c.body.get("conversation")]


def _unfinished(response: dict[str, Any]) -> bool:
    """A background Responses call polled before it finished (``queued``, ``in_progress``)."""
    return response.get("object") == "response" and response.get("status") in ("queued", "in_progress")


PAIRS = [c for c in _pairs() if _echoed(c)]


def test_every_recorded_response_reads_but_one_not_finished() -> None:
    """Every JSON response of a model endpoint in the cassettes reads, but those a background
    Responses call returned before it finished: refused, saying so."""
    if not CASSETTES.is_dir():
        pytest.skip(f"cassettes folder {CASSETTES} is absent")
    posts = [c.previous for c in cases() if c.previous is not None and isinstance(c.previous.response, dict)
             and c.previous.response.get("object") != "conversation"]
    unfinished = [p for p in posts if _unfinished(p.response)]
    assert len(posts) > 40 and unfinished
    for post in posts:
        if post in unfinished:
            with pytest.raises(contextfold.ImportFormatError, match="the response is not finished"):
                contextfold.read_response(post.provider, post.response)
        else:
            contextfold.read_response(post.provider, post.response)


def _import(body: dict[str, Any], provider: str) -> list[AnyEvent]:
    return parse(json.dumps(body).encode(), format=provider, source="cassette")


_SIGNED = ("id", "type", "encrypted_content", "summary")
"""What of a Responses reasoning item its API needs back: a response also returns an empty
``content`` list that pydantic-ai leaves out (either is taken)."""


def _comparable(event: AnyEvent) -> Any:
    """``event`` as an import of a history reads it, with what pydantic-ai changes in what it
    sends back undone: no responding model named, Gemini's signatures as the bytes they are
    (pydantic-ai sends back URL-safe base64 what Gemini sent standard), a Responses reasoning
    item by what it needs back (:data:`_SIGNED`), and a server tool search's ``paths`` (as the
    response names them) under the ``queries`` pydantic-ai sends them as."""
    if not isinstance(event, ModelResponse):
        return event
    calls = tuple(c.model_copy(update={"arguments": c.arguments.replace('{"paths":', '{"queries":')})
                  if c.name == "tool_search" else c for c in event.tool_calls)
    reasoning: Any = event.reasoning
    if isinstance(reasoning, GeminiReasoning):
        reasoning = tuple((base64.urlsafe_b64decode(s.signature.replace("+", "-").replace("/", "_")), s.call)
                          for s in reasoning.signatures)
    elif isinstance(reasoning, OpenAIResponsesReasoning):
        reasoning = tuple((i.before_call, {k: i.raw[k] for k in _SIGNED if k in i.raw})
                          for i in reasoning.items)
    return event.model_copy(update={"model": None, "tool_calls": calls, "reasoning": reasoning})


def _opaque(reply_events: tuple[AnyEvent, ...]) -> list[str]:
    """What the provider must get back verbatim: call ids, thinking signatures and redacted data,
    encrypted reasoning, thought signatures."""
    out: list[str] = []
    for event in reply_events:
        if not isinstance(event, ModelResponse):
            continue
        out += [c.call_id for c in event.tool_calls]
        reasoning = event.reasoning
        if isinstance(reasoning, GeminiReasoning):
            out += [s.signature for s in reasoning.signatures]
        elif reasoning is not None:
            out += [str(i.raw[k]) for i in reasoning.items for k in ("signature", "data", "encrypted_content")
                    if k in i.raw]
    return out


def test_recorded_traffic_holds_responses_sent_back_of_every_provider() -> None:
    if not CASSETTES.is_dir():
        pytest.skip(f"cassettes folder {CASSETTES} is absent")
    assert {c.provider for c in PAIRS} == {"openai-chat", "openai-responses", "anthropic", "gemini"}
    replies = [contextfold.read_response(c.provider, c.previous.response) for c in PAIRS if c.previous]
    reasoning = {type(e.reasoning).__name__ for r in replies for e in r.events
                 if isinstance(e, ModelResponse) and e.reasoning is not None}
    assert reasoning == {"AnthropicReasoning", "OpenAIResponsesReasoning", "GeminiReasoning"}


@pytest.mark.traces
@pytest.mark.parametrize("case", PAIRS, ids=lambda c: f"{c.cassette}#{c.index}")
def test_a_recorded_response_reads_as_the_turn_its_provider_took_back(case: Case) -> None:
    assert case.previous is not None
    provider, response = case.provider, case.previous.response
    reply = contextfold.read_response(provider, response)
    from_sdk = contextfold.read_response(provider, sdk_object(provider, copy.deepcopy(response)))
    assert from_sdk == reply

    echo = _import(case.body, provider)
    read = [_comparable(e) for e in reply.events]
    seen = [_comparable(e) for e in echo]
    at = [k for k in range(len(echo)) if seen[k:k + len(read)] == read]
    assert at, "the request that sent the response back holds no turn equal to the one read"
    live = [*echo[:at[0]], *reply.events, *echo[at[0] + len(read):]]
    built = _build(live, provider)
    assert validate_sdk_types(provider, built.request) is True
    sent = json.dumps(built.request)
    missing = [v for v in _opaque(reply.events) if json.dumps(v) not in sent]
    assert not missing


def _turn_kinds(content: list[dict[str, Any]]) -> list[str]:
    return [block["type"] for block in content]


ORDERED = [c for c in PAIRS if c.provider == "anthropic" and c.previous is not None and any(
    isinstance(e, ModelResponse) and e.text_breaks
    for e in contextfold.read_response("anthropic", c.previous.response).events)]
"""The Anthropic responses of the recorded traffic that wrote text after a call or a server
tool's block, and that the next request sent back."""


@pytest.mark.traces
@pytest.mark.parametrize("case", ORDERED, ids=lambda c: f"{c.cassette}#{c.index}")
def test_a_recorded_anthropic_turn_goes_back_in_the_order_its_provider_took_it(case: Case) -> None:
    """pydantic-ai sent [text, server_tool_use, tool_search_tool_result, tool_use] back as the
    response held it (and Anthropic took it); the text went back after the server blocks."""
    assert case.previous is not None
    reply = contextfold.read_response("anthropic", case.previous.response)
    first_id = next(b["id"] for b in case.previous.response["content"] if "id" in b)
    (recorded,) = [m for m in case.body["messages"]
                   if m["role"] == "assistant" and isinstance(m["content"], list)
                   and any(b.get("id") == first_id for b in m["content"])]
    echo = _import(case.body, "anthropic")
    read = [_comparable(e) for e in reply.events]
    seen = [_comparable(e) for e in echo]
    at = next(k for k in range(len(echo)) if seen[k:k + len(read)] == read)
    built = _build([*echo[:at], *reply.events, *echo[at + len(read):]], "anthropic")
    (sent,) = [m for m in built.request["messages"] if m["role"] == "assistant"
               and any(b.get("id") == first_id for b in m["content"])]
    assert _turn_kinds(sent["content"]) == _turn_kinds(recorded["content"])
