"""The model response's provider reasoning field: opaque, provider-tagged, verbatim, and absent from the
canonical JSON when empty (so every event hash logged before the field existed still holds)."""

from __future__ import annotations

import blake3
import pytest
from pydantic import ValidationError

from contextfold.domain.events import (
    REASONING_ADAPTER,
    AnthropicReasoning,
    GeminiReasoning,
    GeminiSignature,
    ModelResponse,
    OpenAIResponsesReasoning,
    ReasoningItem,
    ToolCall,
    canonical_json,
    event_from_json,
)

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
    with pytest.raises(ValidationError, match="redacted_thinking or thinking"):
        AnthropicReasoning(items=(ReasoningItem(raw=OPENAI_ITEM),))
    with pytest.raises(ValidationError, match="reasoning"):
        OpenAIResponsesReasoning(items=(ReasoningItem(raw=THINKING),))
    with pytest.raises(ValidationError):
        AnthropicReasoning(items=())  # an empty reasoning is no reasoning: None instead
    with pytest.raises(ValidationError):
        REASONING_ADAPTER.validate_python({"provider": "openai-chat", "items": []})
    with pytest.raises(ValidationError):  # extra="forbid"
        ModelResponse.model_validate({"type": "model_response", "reasoning": {
            "provider": "gemini", "signatures": [{"signature": "s", "part": 1}]}})
