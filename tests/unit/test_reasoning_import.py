"""Which response a reasoning item belongs to, when an import has to tell (OpenAI Responses items
carry no response id), and the shapes a provider's reasoning arrives in."""

from __future__ import annotations

import json
from typing import Any

from contextfold.domain.events import (
    AnthropicReasoning,
    AnyEvent,
    GeminiReasoning,
    GeminiSignature,
    ModelResponse,
    OpenAIResponsesReasoning,
)
from contextfold.importers import parse


def _parse(value: Any, fmt: str) -> list[AnyEvent]:
    return parse(json.dumps(value).encode(), format=fmt, source="test")


def _reasoning(i: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": f"enc{i}"}


def _responses(events: list[AnyEvent]) -> list[ModelResponse]:
    return [e for e in events if isinstance(e, ModelResponse)]


def test_openai_reasoning_opens_the_response_that_follows_it() -> None:
    items = [
        {"role": "user", "content": "go"},
        _reasoning(1),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "First."}]},
        _reasoning(2),  # after the first response's message: it opens the second response
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Second."}]},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        _reasoning(3),  # after the calls: the next response's
        {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"type": "function_call_output", "call_id": "c2", "output": "b"},
        _reasoning(4),  # followed by nothing the model said: belongs to no response
        {"role": "user", "content": "thanks"},
    ]
    got = [(r.text, [c.call_id for c in r.tool_calls],
            [i.raw["id"] for i in r.reasoning.items]
            if isinstance(r.reasoning, OpenAIResponsesReasoning) else [])
           for r in _responses(_parse(items, "openai-responses"))]
    assert got == [("First.", [], ["rs_1"]), ("Second.", ["c1"], ["rs_2"]), ("", ["c2"], ["rs_3"])]


def test_anthropic_blocks_keep_their_place_among_the_calls() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "d"}
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    thinking, {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
                    redacted, {"type": "tool_use", "id": "t2", "name": "ls", "input": {}}]}]
    (response,) = _responses(_parse(messages, "anthropic"))
    assert response.reasoning == AnthropicReasoning.model_validate(
        {"items": [{"raw": thinking}, {"before_call": 1, "raw": redacted}]})
    (plain,) = _responses(_parse([messages[0], {"role": "assistant", "content": "hi"}], "anthropic"))
    assert plain.reasoning is None


def test_gemini_signatures_name_the_call_part_they_rode_on() -> None:
    contents = [{"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [
                    {"text": "thinking...", "thought": True, "thoughtSignature": "AAAA"},
                    {"text": "Looking."},
                    {"functionCall": {"name": "ls", "args": {}, "id": "f1"}},
                    {"functionCall": {"name": "ls", "args": {}, "id": "f2"}, "thought_signature": "BBBB"},
                    {"thoughtSignature": "CCCC"}]}]
    (response,) = _responses(_parse(contents, "gemini"))
    assert response.text == "Looking."
    assert response.reasoning == GeminiReasoning(signatures=(
        GeminiSignature(signature="AAAA"), GeminiSignature(signature="BBBB", call=1),
        GeminiSignature(signature="CCCC")))
