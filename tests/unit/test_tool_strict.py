"""A tool declared strict is sent strict (``ToolSpec.strict``), and one not said is sent as before.

Why: a runtime that declared its tools strict (OpenAI's strict function calling, Anthropic's
strict tool use: the provider holds the model's arguments to the schema exactly) and resumed
from the log got requests declaring every tool non-strict, so the model's calls were no longer
held to their schemas. Every body here is validated with the provider's SDK request types
(``run.build`` validates)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.events import ToolSpec, ToolsRegistered, canonical_json, event_from_json

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
STRICT = ToolSpec(name="get_weather", description="Current weather", parameters=SCHEMA, strict=True)
LOOSE = ToolSpec(name="search", description="Search the web",
                 parameters={"type": "object", "properties": {"q": {"type": "string"}}})
OFF = ToolSpec(name="book", description="Book a table", parameters=SCHEMA, strict=False)


def _declared(request: dict[str, Any], provider: str) -> dict[str, dict[str, Any]]:
    tools = request["tools"]
    if provider == "openai-chat":
        return {t["function"]["name"]: t["function"] for t in tools}
    if provider == "gemini":
        return {d["name"]: d for t in tools for d in t["functionDeclarations"]}
    return {t["name"]: t for t in tools}


def _built(tmp_path: Path, provider: str) -> dict[str, Any]:
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("r")
        run.append(ToolsRegistered(tools=(STRICT, LOOSE, OFF)), UserInput("Weather in Paris? Then book."),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="get_weather",
                                                      arguments='{"city": "Paris"}'),)),
                   ToolResult(call_id="c1", content="12C"))
        request = run.build(provider=provider, window=50_000).request
    return _declared(request, provider)


@pytest.mark.parametrize(("provider", "strict", "loose", "off"), [
    ("openai-chat", True, None, False),  # Chat's default is non-strict: unsaid stays unsaid
    ("openai-responses", True, False, False),  # Responses' default is strict: non-strict is said
    ("anthropic", True, None, None),  # Anthropic takes strict: true; false is its default
    ("gemini", None, None, None),  # no such flag in a function declaration
])
def test_each_provider_sends_the_strict_flag_as_declared(
        tmp_path: Path, provider: str, strict: bool | None, loose: bool | None, off: bool | None) -> None:
    declared = _built(tmp_path, provider)
    assert {name: tool.get("strict") for name, tool in declared.items()} == {
        "get_weather": strict, "search": loose, "book": off}


def test_a_spec_without_the_flag_writes_and_hashes_as_before() -> None:
    """The field is left out of the JSON when not said, so a log written before it was added
    reads back to the same bytes (its hash chain holds) and older releases read new logs that
    do not use it."""
    event = ToolsRegistered(tools=(LOOSE,))
    assert b"strict" not in canonical_json(event)
    assert canonical_json(event_from_json(canonical_json(event))) == canonical_json(event)
    said = ToolsRegistered(tools=(STRICT, OFF))
    tools = json.loads(canonical_json(said))["tools"]
    assert [t["strict"] for t in tools] == [True, False]
    assert event_from_json(canonical_json(said)) == said
