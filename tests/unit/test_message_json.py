"""``message_json`` writes the usual request messages' ``model_dump(mode="json")`` field by field:
the same dict, key for key and in order, or None (pydantic's then) for anything it does not write.
The suite checks every dump the builder makes this way (``trusted.CHECKED``); these pin the cases
and the fields: a field added to one of these models fails here until it is written there too.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from contextfold.domain.conversation import (
    AssistantMessage,
    DataPart,
    InstructionPart,
    MediaPart,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
)
from contextfold.domain.reasoning import AnthropicReasoning, ReasoningItem
from contextfold.projections.message_json import WRITTEN, message_json


def test_each_written_class_has_the_fields_written() -> None:
    for cls, fields in WRITTEN.items():
        assert tuple(cls.model_fields) == fields, cls.__name__


DATA = DataPart(text='"é\n\ud800', source="tool:x", trust="external", label="tool", truncated=True,
                fragment_id="e3")
CALL = ToolCallPart(call_id="c1", name="look_up", arguments='{"id": "7"}')
ALIASED = ToolCallPart(call_id="c1 re-used", alias="c1_2", alias_for=("anthropic", "openai-chat"),
                       name="look_up", arguments="")


def _result(**fields: object) -> ToolResultPart:
    return ToolResultPart.model_validate({"call_id": "c1", "name": "look_up", "status": "ok",
                                          "content": (DATA,), "fragment_id": "e4", **fields})


WRITTEN_CASES: list[BaseModel] = [
    UserMessage(parts=(InstructionPart(text="hi 運", authority="user", fragment_id="e1"),)),
    UserMessage(parts=(InstructionPart(text="", authority="runtime", fragment_id="e1"), DATA)),
    UserMessage(parts=()),
    AssistantMessage(text="sure", fragment_id="e2"),
    AssistantMessage(tool_calls=(CALL, ALIASED), fragment_id="e2"),
    ToolResults(results=(_result(),)),
    ToolResults(results=(_result(exit_code=2, status="error"), _result(alias="c1_2", alias_for=("gemini",)),
                         _result(content=(), exit_code=1 << 70))),
]


@pytest.mark.parametrize("message", WRITTEN_CASES, ids=lambda m: type(m).__name__)
def test_written_as_pydantic_dumps_it(message: BaseModel) -> None:
    got = message_json(message)
    assert got is not None
    assert json.dumps(got) == json.dumps(message.model_dump(mode="json"))  # keys in order too


MEDIA = MediaPart(kind="image", media_type="image/png", url="https://example.com/a.png", fragment_id="e5")
REASONING = AnthropicReasoning(items=(ReasoningItem(raw={"type": "thinking", "thinking": "t",
                                                         "signature": "s"}),))


@pytest.mark.parametrize("message", [
    UserMessage(parts=(MEDIA,)),
    ToolResults(results=(_result(content=(DATA, MEDIA)),)),
    AssistantMessage(text="hm", fragment_id="e2", reasoning=REASONING),
    InstructionPart(text="a part is not a message", authority="user", fragment_id="e1"),
], ids=["media", "result media", "reasoning", "not a message"])
def test_anything_else_is_left_to_pydantic(message: BaseModel) -> None:
    assert message_json(message) is None
