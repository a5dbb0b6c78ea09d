"""The ids a request shows for tool calls: ones its provider takes, the same on every rebuild.

Why: a run's call ids come from the model that issued them, and the request goes to whichever
provider the run is built for now. Anthropic refuses an id used twice in one request ("`tool_use`
ids must be unique"; 49 of the 200 tau-bench gpt-4o runs reuse ids across turns) or one with a
character outside ``[a-zA-Z0-9_-]`` (Kimi K2's ``functions.get_weather:0``); OpenAI Chat
Completions refuses an id over 40 characters. An id the provider takes is never changed.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.errors import RenderError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    ToolResultLost,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.call_ids import MAX_CHAT_ID_LENGTH, call_alias
from contextfold.projections.fold import fold
from contextfold.projections.fragment_facts import call_id_tokens
from contextfold.projections.past_states import state_at_turn
from contextfold.projections.render import PROVIDERS, check_protocol
from contextfold.projections.tokens import get_counter

KIMI = "functions.get_weather:0"
LONG = "ws_689e2d4880a0819d98acca37694989b00b15d90494fc6b87"  # 51 characters


def recorded(events: list[AnyEvent], run_id: str = "r") -> list[RecordedEvent]:
    return [RecordedEvent(run_id, i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]


def turn(call_id: str, city: str, result: str) -> list[AnyEvent]:
    call = ToolCall(call_id=call_id, name="get_weather", arguments=json.dumps({"city": city}))
    return [ModelResponse(tool_calls=(call,)), ToolResult(call_id=call_id, content=result)]


def run_events(*ids: str) -> list[AnyEvent]:
    events: list[AnyEvent] = [RunStarted(), ToolsRegistered(tools=(ToolSpec(name="get_weather"),)),
                              UserInput("weather in three cities?")]
    for i, call_id in enumerate(ids):
        events += turn(call_id, f"city{i}", f"forecast {i}")
    return [*events, UserInput("thanks")]


def build(events: list[AnyEvent], provider: str) -> BuildResult:
    return build_context(fold(recorded(events)), BuildConfig(provider=provider),
                         render=render_request)


def request_ids(provider: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(call ids, answered ids) of a rendered body, in request order."""
    calls: list[str] = []
    answers: list[str] = []
    match provider:
        case "openai-chat":
            for m in body["messages"]:
                calls += [c["id"] for c in m.get("tool_calls") or []]
                if m["role"] == "tool":
                    answers.append(m["tool_call_id"])
        case "openai-responses":
            for it in body["input"]:
                if it.get("type") == "function_call":
                    calls.append(it["call_id"])
                elif it.get("type") == "function_call_output":
                    answers.append(it["call_id"])
        case "anthropic":
            for m in body["messages"]:
                for b in m["content"]:
                    if b["type"] == "tool_use":
                        calls.append(b["id"])
                    elif b["type"] == "tool_result":
                        answers.append(b["tool_use_id"])
        case "gemini":
            for c in body["contents"]:
                for p in c["parts"]:
                    if "functionCall" in p:
                        calls.append(p["functionCall"]["id"])
                    elif "functionResponse" in p:
                        answers.append(p["functionResponse"]["id"])
    return calls, answers


# ------------------------------------------------------------------ the rule


def test_a_valid_first_use_keeps_its_logged_id_everywhere() -> None:
    shown: set[str] = set()
    assert call_alias("call_abc-1", 7, shown) == (None, ())
    assert shown == {"call_abc-1"}


def test_a_reused_id_is_aliased_for_the_providers_that_match_by_id_with_the_position_of_its_response(
) -> None:
    shown = {"call_0"}
    assert call_alias("call_0", 12, shown) == ("call_0_12", ("anthropic", "openai-responses", "gemini"))
    assert call_alias("call_0", 15, shown) == ("call_0_15", ("anthropic", "openai-responses", "gemini"))


def test_other_characters_are_aliased_for_anthropic_and_long_ids_for_openai_chat() -> None:
    shown: set[str] = set()
    assert call_alias(KIMI, 4, shown) == ("functions_get_weather_0_4", ("anthropic",))
    alias, providers = call_alias(LONG, 123, shown)
    assert alias == LONG[:MAX_CHAT_ID_LENGTH - 4] + "_123" and providers == ("openai-chat",)
    assert call_alias("::", 9, shown) == ("call_9", ("anthropic",))
    assert call_alias(LONG, 130, shown)[1] == (  # reused, long
        "anthropic", "openai-responses", "gemini", "openai-chat")


def test_an_alias_never_collides_with_an_id_shown_before_or_after() -> None:
    shown = {"a_b_5"}  # a real id that happens to look like the alias of "a.b" at position 5
    assert call_alias("a.b", 5, shown)[0] == "a_b_5_2"
    assert call_alias("a:b", 5, shown)[0] == "a_b_5_3"
    # a later real id
    assert call_alias("a_b_5_2", 8, shown) == ("a_b_5_2_8", ("anthropic", "openai-responses", "gemini"))


# ------------------------------------------------------------------ requests


def assert_taken(provider: str, calls: list[str], logged: tuple[str, ...]) -> None:
    """The ids are the provider's to take, and only an id it would refuse was replaced."""
    if provider == "anthropic":
        assert len(set(calls)) == len(calls)
        assert all(c.replace("_", "").replace("-", "").isalnum() for c in calls)
    elif provider == "openai-chat":
        assert all(len(c) <= MAX_CHAT_ID_LENGTH for c in calls)
    elif provider in ("openai-responses", "gemini"):
        assert len(set(calls)) == len(calls)
        assert all(c == log or log in calls[:i] for i, (c, log) in enumerate(zip(calls, logged, strict=True)))
    else:
        assert tuple(calls) == logged
    assert all(c == log or c.endswith(f"_{2 * i + 4}")
               for i, (c, log) in enumerate(zip(calls, logged, strict=True)))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("ids", [("call_0", "call_0", "call_0"), (KIMI, KIMI, "functions.x:1"),
                                 (LONG, LONG + "x", "call_0")])
def test_every_provider_is_shown_ids_it_takes_answered_in_place(provider: str,
                                                                ids: tuple[str, ...]) -> None:
    result = build(run_events(*ids), provider)  # build_context validates: protocol and SDK types
    calls, answers = request_ids(provider, result.request)
    assert len(calls) == 3 and answers == calls
    assert_taken(provider, calls, ids)
    check_protocol(provider, result.request)


def test_ids_every_provider_takes_are_never_changed() -> None:
    ids = ("call_1", "toolu_01FupCqh9WiFLKTeXddq4ZXH", "c-3")
    for provider in PROVIDERS:
        assert request_ids(provider, build(run_events(*ids), provider).request)[0] == list(ids)


def test_a_reused_id_is_aliased_for_responses_whose_outputs_find_their_call_by_id_alone() -> None:
    """gpt-4o reused call ids across turns (49 of the 200 tau-bench runs); Chat Completions
    took them, but a Responses input is one flat list where an output finds its call by id:
    the request showed the same call_id twice and OpenAI refuses it ("Duplicate
    function_call_output for call_id ...")."""
    result = build(run_events("call_0", "call_0", "call_0"), "openai-responses")
    calls, answers = request_ids("openai-responses", result.request)
    assert calls == answers == ["call_0", "call_0_6", "call_0_8"]
    body = copy.deepcopy(result.request)
    for item in body["input"]:
        if item.get("call_id") == "call_0_6":
            item["call_id"] = "call_0"
    with pytest.raises(RenderError, match="repeats an id: call_id must be unique"):
        check_protocol("openai-responses", body)
    # Chat Completions answers by position: the ids it took stay as logged
    assert request_ids("openai-chat", build(run_events("call_0", "call_0"), "openai-chat").request)[0] == [
        "call_0", "call_0"]


def test_a_reused_id_is_aliased_for_gemini_whose_responses_name_their_call_by_id() -> None:
    """Google documents ``functionCall.id`` as "the unique id of the function call", and a
    ``functionResponse`` carries the id of the call it answers: a request that shows one id for
    two calls leaves which answer is whose to the model. The protocol check refuses it."""
    result = build(run_events("call_0", "call_0", "call_0"), "gemini")
    calls, answers = request_ids("gemini", result.request)
    assert calls == answers == ["call_0", "call_0_6", "call_0_8"]
    body = copy.deepcopy(result.request)
    for content in body["contents"]:
        for part in content["parts"]:
            for key in ("functionCall", "functionResponse"):
                if part.get(key, {}).get("id") == "call_0_6":
                    part[key]["id"] = "call_0"
    with pytest.raises(RenderError, match="functionCall id 'call_0' repeats an id"):
        check_protocol("gemini", body)


def test_the_neutral_request_carries_the_alias_and_whom_it_is_for() -> None:
    body = build(run_events("call_0", "call_0"), "neutral").request
    text = json.dumps(body)
    assert '"alias": "call_0_6"' in text
    assert '"alias_for": ["anthropic", "openai-responses", "gemini"]' in text
    assert text.count('"alias"') == 2  # the second call and its answer; nothing for the first


def test_the_log_keeps_its_ids_and_the_alias_names_the_response() -> None:
    events = run_events("call_0", "call_0")
    result = build(events, "anthropic")
    calls, _ = request_ids("anthropic", result.request)
    assert calls == ["call_0", "call_0_6"]  # the second call was issued at log position 6
    assert isinstance(events[5], ModelResponse) and events[5].tool_calls[0].call_id == "call_0"
    refs = {f.source_ref for f in result.manifest.fragments if f.kind == "tool_result"}
    assert refs == {"call://r/call_0@4", "call://r/call_0@6"}  # the manifest cites the log


def test_a_rebuilt_turn_shows_the_same_ids_as_the_live_build() -> None:
    events = run_events("call_0", "call_0", KIMI)
    live = build(events, "anthropic")  # the next turn, the fourth, built live
    later = events + turn("call_0", "city3", "forecast 3")  # the run went on
    again = build_context(state_at_turn(recorded(later), 4), BuildConfig(provider="anthropic"),
                          render=render_request)
    assert "call_0_11" in json.dumps(build(later, "anthropic").request)
    assert again.request == live.request
    assert again.manifest.request_hash == live.manifest.request_hash


def test_a_lost_result_is_answered_under_the_alias_too() -> None:
    events = run_events("call_0")
    events[-1:-1] = [ModelResponse(tool_calls=(ToolCall(call_id="call_0", name="get_weather"),)),
                     ToolResultLost(call_id="call_0", reason="worker died")]
    calls, answers = request_ids("anthropic", build(events, "anthropic").request)
    assert calls == answers == ["call_0", "call_0_6"]


# ------------------------------------------------------------------ bodies checked as given


def test_anthropic_body_reusing_an_id_across_messages_is_a_render_error() -> None:
    body = build(run_events("c1", "c2"), "anthropic").request
    bad = copy.deepcopy(body)
    for m in bad["messages"]:
        for b in m["content"]:
            if b.get("id") == "c2":
                b["id"] = "c1"
            if b.get("tool_use_id") == "c2":
                b["tool_use_id"] = "c1"
    with pytest.raises(RenderError, match="tool_use ids must be unique in the request"):
        check_protocol("anthropic", bad)


def test_anthropic_body_with_an_id_outside_its_character_set_is_a_render_error() -> None:
    body = build(run_events("c1"), "anthropic").request
    for m in body["messages"]:
        for b in m["content"]:
            if b.get("id") == "c1":
                b["id"] = KIMI
            if b.get("tool_use_id") == "c1":
                b["tool_use_id"] = KIMI
    with pytest.raises(RenderError, match=r"does not match \^\[a-zA-Z0-9_-\]\+\$"):
        check_protocol("anthropic", body)


def test_openai_chat_body_with_an_id_over_40_characters_is_a_render_error() -> None:
    body = build(run_events("c1"), "openai-chat").request
    for m in body["messages"]:
        for c in m.get("tool_calls") or []:
            c["id"] = LONG
        if m["role"] == "tool":
            m["tool_call_id"] = LONG
    with pytest.raises(RenderError, match="at most 40 characters"):
        check_protocol("openai-chat", body)


# ------------------------------------------------------------------ OpenAI Responses' 64 characters

CODEX = "codex_mcp__codex_apps__google_calendar.search_events_exec-3f2b8c1e-9d4a-4f6b-8e2a-1c5d7e9f0a3b"
"""A codex app-server call id (94 characters): ``codex_mcp__<server>__<tool>_exec-<uuid>``."""


def test_an_id_over_64_characters_is_aliased_for_responses_as_well_as_chat() -> None:
    """OpenAI Responses refuses a ``call_id`` over 64 characters ("Invalid 'input[N].call_id':
    string too long. Expected a string with maximum length 64"); the id was aliased for Chat
    only. One over 40 but within 64 (a Responses id of 51) still goes to Responses unchanged."""
    shown: set[str] = set()
    alias, providers = call_alias(CODEX, 5, shown)
    assert providers == ("anthropic", "openai-chat", "openai-responses")  # "." is outside Anthropic's set
    assert alias is not None and len(alias) <= MAX_CHAT_ID_LENGTH and alias.endswith("_5")
    assert call_alias("x" * 65, 9, shown)[1] == ("openai-chat", "openai-responses")
    assert call_alias("y" * 64, 11, shown)[1] == ("openai-chat",)
    assert call_alias(LONG, 13, shown)[1] == ("openai-chat",)


def test_a_responses_request_shows_a_long_id_under_its_alias_and_prices_what_it_shows() -> None:
    events = run_events(CODEX, "call_1")
    result = build(events, "openai-responses")  # validated: protocol and SDK types
    calls, answers = request_ids("openai-responses", result.request)
    assert calls == answers and calls[1] == "call_1"
    assert calls[0] != CODEX and len(calls[0]) <= 64
    # the manifest prices the id the request shows (twice: on the call and on its output)
    state = fold(recorded(events))
    count = get_counter(result.manifest.encoding).count
    assert {f.id for f in result.manifest.fragments} >= {"e4", "e5"}  # the call's reply, its result
    assert [call_id_tokens(state, fid, "openai-responses", count) for fid in ("e4", "e5")] == [
        count(calls[0])] * 2
    assert count(calls[0]) < count(CODEX)


def test_responses_body_with_an_id_over_64_characters_is_a_render_error() -> None:
    body = build(run_events("c1"), "openai-responses").request
    for item in body["input"]:
        if item.get("call_id") == "c1":
            item["call_id"] = CODEX
    with pytest.raises(RenderError, match="at most 64 characters"):
        check_protocol("openai-responses", body)
    for item in body["input"]:
        if item.get("call_id") == CODEX:
            item["call_id"] = CODEX[:64]
    check_protocol("openai-responses", body)
