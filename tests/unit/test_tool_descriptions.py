"""A tool description the provider bounds is declared cut to fit, never as a request it refuses.

Why: OpenAI Chat Completions answers 400 "Invalid 'tools[2].function.description': string too
long. Expected a string with maximum length 1024" for the whole request. MCP servers publish longer
descriptions, which Anthropic, Gemini and OpenAI Responses take: a run that starts on Claude and
hands off (or falls back) to a Chat Completions model was refused at every turn, and neither the
build nor the body check said so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contextfold.api import render_request
from contextfold.domain.errors import RenderError
from contextfold.domain.events import (
    AnyEvent,
    HandOff,
    ModelResponse,
    RunStarted,
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
from contextfold.projections.graphemes import floor_boundary
from contextfold.projections.render import check_protocol
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_descriptions import CUT_MARK, cut_description, utf16_length
from contextfold.projections.tool_exposure import tool_tokens

LONG = " ".join(f"Search the project's Sentry issues by query, page {i}." for i in range(60))
"""3,229 characters: sentry-mcp's list_issues was 1,103, OpenHands' browser tool 4,394."""


def _events(description: str = LONG) -> list[AnyEvent]:
    return [RunStarted(model="claude-sonnet-4-5"),
            ToolsRegistered(tools=(ToolSpec(name="search_issues", description=description),
                                   ToolSpec(name="read_file", description="Read a file."))),
            UserInput("Find the crash in the Sentry issues"),
            ModelResponse(tool_calls=(ToolCall(call_id="toolu_01", name="search_issues", arguments="{}"),)),
            ToolResult(call_id="toolu_01", content="3 issues"),
            HandOff(from_agent="claude", to_agent="gpt-4o", note="carry on")]


def _build(events: list[AnyEvent], provider: str) -> BuildResult:
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, window=100_000, reserve=4000),
                         render=render_request)  # validated: protocol checks and SDK types


def _chat_descriptions(built: BuildResult) -> dict[str, str]:
    return {t["function"]["name"]: t["function"].get("description", "") for t in built.request["tools"]}


def test_a_chat_request_declares_a_long_description_cut_to_1024_characters() -> None:
    built = _build(_events(), "openai-chat")
    sent = _chat_descriptions(built)["search_issues"]
    assert len(sent) <= 1024 and sent.endswith(CUT_MARK)
    assert LONG.startswith(sent.removesuffix(CUT_MARK))
    assert LONG[len(sent) - len(CUT_MARK)] == " "  # cut at a space, after a whole word
    cut = [r for r in built.manifest.repairs if r.startswith("tool_description_cut:")]
    assert cut == [f"tool_description_cut:search_issues (openai-chat takes at most 1024 characters of a "
                   f"tool's description: {len(LONG)} cut to {len(sent)})"]
    assert _chat_descriptions(built)["read_file"] == "Read a file."


def test_the_cut_description_is_what_the_manifest_prices() -> None:
    built = _build(_events(), "openai-chat")
    priced = {t.name: t.tokens for t in built.manifest.tools}
    sent = ToolSpec(name="search_issues", description=_chat_descriptions(built)["search_issues"])
    whole = _build(_events(), "anthropic")
    assert priced["search_issues"] == tool_tokens(sent, _counter(built))
    assert priced["search_issues"] < {t.name: t.tokens for t in whole.manifest.tools}["search_issues"]


def _counter(built: BuildResult) -> Callable[[str], int]:
    return get_counter(built.manifest.encoding).count


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses", "gemini"])
def test_providers_that_take_a_long_description_get_it_whole(provider: str) -> None:
    built = _build(_events(), provider)
    assert LONG in built.body_bytes.decode()
    assert not [r for r in built.manifest.repairs if r.startswith("tool_description_cut:")]


def test_a_description_of_1024_characters_is_sent_as_it_is() -> None:
    exact = ("word " * 205)[:1024]
    built = _build(_events(exact), "openai-chat")
    assert _chat_descriptions(built)["search_issues"] == exact
    assert not [r for r in built.manifest.repairs if r.startswith("tool_description_cut:")]


def test_the_same_description_is_cut_to_the_same_bytes_build_after_build() -> None:
    """The tools are the cached prefix: a cut that moved would change the cache key every turn."""
    first, second = _build(_events(), "openai-chat"), _build([*_events(), UserInput("again")], "openai-chat")
    assert first.request["tools"] == second.request["tools"]
    assert first.manifest.cache_key == second.manifest.cache_key


@pytest.mark.parametrize("text", [
    "x" * 3000,  # no whitespace: cut at a character
    "🙂" * 700,  # outside the BMP: 1,400 UTF-16 units in 700 code points
    "👩‍💻 " * 400,  # ZWJ sequences: never split
    "e\u0301" * 800,  # combining accents: never an orphan mark
    "a" * 1020 + " " + "b" * 10,
])
def test_a_cut_fits_in_code_points_and_utf16_units_and_ends_at_a_cluster_boundary(text: str) -> None:
    cut = cut_description(text, 1024)
    head = cut.removesuffix(CUT_MARK)
    assert cut.endswith(CUT_MARK) and len(cut) <= 1024 and utf16_length(cut) <= 1024
    assert text.startswith(head) and floor_boundary(text, len(head)) == len(head)
    assert len(head) >= 1024 // 2 if text.isascii() else len(head) > 0


def test_the_body_check_refuses_a_chat_description_over_1024_characters() -> None:
    function = {"name": "search_issues", "description": LONG,
                "parameters": {"type": "object", "properties": {}}}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": function}]}
    with pytest.raises(RenderError, match=r"tool 'search_issues': its description is 3229 characters"):
        check_protocol("openai-chat", body)
    function["description"] = LONG[:1024]
    check_protocol("openai-chat", body)
