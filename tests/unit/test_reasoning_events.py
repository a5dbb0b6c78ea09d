"""The model response's provider reasoning field: opaque, provider-tagged, verbatim, and absent from the
canonical JSON when empty (so every event hash logged before the field existed still holds)."""

from __future__ import annotations

import re
from pathlib import Path

import blake3
import pytest
from anthropic.types import RedactedThinkingBlockParam, ThinkingBlockParam
from openai.types.responses import ResponseReasoningItemParam
from pydantic import ValidationError

import contextfold
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import (
    REASONING_ADAPTER,
    AnthropicReasoning,
    GeminiReasoning,
    GeminiSignature,
    ModelResponse,
    OpenAIResponsesReasoning,
    ReasoningItem,
    ToolCall,
    ToolResult,
    UserInput,
    canonical_json,
    event_from_json,
)
from contextfold.domain.reasoning import TAKEN_BACK, Reasoning

THINKING = {"type": "thinking", "thinking": "The user wants the sum.", "signature": "EqQBCkYIBxgCKkB+/=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
OPENAI_ITEM = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
               "encrypted_content": "gAAAAABq"}


def test_a_response_without_reasoning_dumps_as_it_did_before_the_field() -> None:
    """The bytes (and hash) of a response logged before reasoning was kept: written out by hand."""
    event = ModelResponse(text="ok", tool_calls=(ToolCall(call_id="c1", name="ls", arguments='{"a":1}'),))
    old = (b'{"model":null,"text":"ok","tool_calls":[{"arguments":"{\\"a\\":1}","call_id":"c1","name":"ls"}],'
           b'"type":"model_response","v":1}')
    assert canonical_json(event) == old
    assert blake3.blake3(canonical_json(event)).hexdigest() == blake3.blake3(old).hexdigest()
    assert event_from_json(old) == event


@pytest.mark.parametrize("reasoning", [
    AnthropicReasoning(items=(ReasoningItem(raw=THINKING), ReasoningItem(before_call=1, raw=REDACTED))),
    OpenAIResponsesReasoning(items=(ReasoningItem(raw=OPENAI_ITEM),)),
    GeminiReasoning(signatures=(GeminiSignature(signature="Ev0BCvoB", call=0),
                                GeminiSignature(signature="x"))),
])
def test_reasoning_round_trips_verbatim_through_canonical_json(reasoning: object) -> None:
    event = ModelResponse(tool_calls=(ToolCall(call_id="c1", name="ls"), ToolCall(call_id="c2", name="ls")),
                          reasoning=REASONING_ADAPTER.validate_python(reasoning))
    back = event_from_json(canonical_json(event))
    assert back == event
    assert isinstance(back, ModelResponse) and back.reasoning == reasoning
    assert b'"reasoning":{' in canonical_json(event)


def test_the_provider_tag_picks_the_model_and_the_items_must_be_that_providers() -> None:
    parsed = REASONING_ADAPTER.validate_python({"provider": "anthropic", "items": [{"raw": THINKING}]})
    assert isinstance(parsed, AnthropicReasoning) and parsed.items[0].raw == THINKING
    with pytest.raises(ValidationError, match=r"anthropic reasoning must have type .*thinking.*got 're"):
        AnthropicReasoning(items=(ReasoningItem(raw=OPENAI_ITEM),))
    with pytest.raises(ValidationError, match=r"openai-responses reasoning must have type .*got 'thinking'"):
        OpenAIResponsesReasoning(items=(ReasoningItem(raw=THINKING),))
    with pytest.raises(ValidationError):
        AnthropicReasoning(items=())  # an empty reasoning is no reasoning: None instead
    with pytest.raises(ValidationError):
        REASONING_ADAPTER.validate_python({"provider": "openai-chat", "items": []})
    with pytest.raises(ValidationError):  # extra="forbid"
        ModelResponse.model_validate({"type": "model_response", "reasoning": {
            "provider": "gemini", "signatures": [{"signature": "s", "part": 1}]}})


def test_the_keys_taken_back_are_the_sdk_request_types_keys() -> None:
    """What the fold leaves out as "a key its request type does not take" is what the SDK types the
    request is checked with declare: an SDK that learns a key fails here, not in production."""
    sdk = {"reasoning": ResponseReasoningItemParam, "thinking": ThinkingBlockParam,
           "redacted_thinking": RedactedThinkingBlockParam}
    assert {kind: frozenset(param.__annotations__) for kind, param in sdk.items()} == TAKEN_BACK


def _calling(reasoning: Reasoning) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(call_id="c1", name="ls"),), reasoning=reasoning)


@pytest.mark.parametrize(("reasoning", "why"), [
    (OpenAIResponsesReasoning(items=(ReasoningItem(before_call=1, raw=OPENAI_ITEM),)),
     "reasoning item 1 stands after the response's last call: the API takes a reasoning item back only "
     "before the item it led to"),
    (AnthropicReasoning(items=(ReasoningItem(before_call=2, raw=THINKING),)),
     "thinking block 1 stands after call 2 of a response that made 1"),
    (AnthropicReasoning(items=(ReasoningItem(raw=THINKING), ReasoningItem(raw={"type": "thinking",
                                                                               "thinking": "t"}))),
     "thinking block 2 is not what its request type takes back (signature: Field required)"),
    (AnthropicReasoning(items=(ReasoningItem(raw={"type": "redacted_thinking", "data": 7}),)),
     "thinking block 1 is not what its request type takes back (data: Input should be a valid string)"),
    (GeminiReasoning(signatures=(GeminiSignature(signature="Ev0BCvoB"),
                                 GeminiSignature(signature="no base64"))),
     "thought signature 2 is not base64"),
], ids=lambda v: getattr(v, "provider", ""))
def test_reasoning_no_api_takes_back_is_refused_at_append_and_nothing_written(
        tmp_path: Path, reasoning: Reasoning, why: str) -> None:
    """Accepted, it made every build of the run for its provider fail, for good."""
    with contextfold.open_store(f"sqlite:///{tmp_path}/runs.db") as store:
        run = store.run("r")
        run.append(UserInput("list the files"))
        with pytest.raises(InvalidInputError, match=re.escape(
                f"model_response at position 2: its {reasoning.provider} reasoning cannot go back to its "
                f"provider: {why}")):
            run.append(_calling(reasoning))
        assert run.version == 1


def test_reasoning_a_later_api_may_take_back_is_logged_as_the_provider_returned_it(tmp_path: Path) -> None:
    """A key the SDK does not know (yet), or an output item dumped with its ``None`` fields: the
    runtime logs its provider's reply as it came; builds leave the item out and say so
    (``test_reasoning_build``). Before the last call, a Responses item is where it belongs."""
    newer = dict(OPENAI_ITEM, summary_tokens=12)
    dumped = dict(OPENAI_ITEM, content=None, status=None)
    with contextfold.open_store(f"sqlite:///{tmp_path}/runs.db") as store:
        run = store.run("r")
        run.append(UserInput("list the files"))
        for raw in (newer, dumped):
            run.append(_calling(OpenAIResponsesReasoning(items=(ReasoningItem(raw=raw),))))
            run.append(ToolResult(call_id="c1", content="a.py"))
        run.append(_calling(AnthropicReasoning(items=(ReasoningItem(raw=dict(THINKING, cached=True)),))))
        assert run.version == 6
