"""Anthropic refuses text blocks that hold only whitespace, and a request that ends with an
assistant message whose text ends in whitespace (it is a prefill):

    400 messages: text content blocks must contain non-whitespace text
    400 messages: final assistant content cannot end with trailing whitespace

Agents produce both: a user who presses Enter on an empty line sends ``"\\n"``, models often
say ``"\\n\\n"`` before a tool call, and a run whose last event is the model's answer (``"Done.\\n"``)
is built with that answer last. The renderer dropped only *empty* text, so these runs built
requests the API refuses; the protocol check, which should stop such a body before it is sent
or recorded, did not look at text blocks at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    Message,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
)
from contextfold.domain.errors import RenderError
from contextfold.domain.events import ToolSpec
from contextfold.projections.render import check_protocol, render

TOOLS = (ToolSpec(name="run", description="Run a command"),)


def conv(*messages: Message, system: str = "Follow the policy.") -> Conversation:
    policy = InstructionPart(text=system, authority="runtime", fragment_id="p")
    return Conversation(model="m", system=(policy,), tools=TOOLS, messages=messages)


def user(text: str) -> UserMessage:
    return UserMessage(parts=(InstructionPart(text=text, authority="user", fragment_id="u"),))


def answered(text: str) -> tuple[AssistantMessage, ToolResults]:
    output = DataPart(text="ok", source="tool://run", trust="external", label="tool_output", fragment_id="r")
    return (AssistantMessage(text=text, tool_calls=(ToolCallPart(call_id="c1", name="run", arguments="{}"),),
                             fragment_id="a"),
            ToolResults(results=(ToolResultPart(call_id="c1", name="run", status="ok", fragment_id="r",
                                                content=(output,)),)))


def texts(body: dict[str, Any]) -> list[str]:
    """Every text of a text block in the body: system, messages and tool results."""
    blocks = list(body.get("system", []))
    for message in body["messages"]:
        for block in message["content"]:
            blocks.append(block)
            blocks.extend(block.get("content", []) if block.get("type") == "tool_result" else [])
    return [b["text"] for b in blocks if b.get("type") == "text"]


@pytest.mark.parametrize("case", [
    conv(user("   \n")),
    conv(user("hi"), AssistantMessage(text="ok", fragment_id="a"), user("\t")),
    conv(user("hi"), AssistantMessage(text=" \n ", fragment_id="a"), user("again")),
    conv(user("hi"), *answered("\n\n")),
    conv(user("hi"), system="  \n"),
], ids=["only-input", "later-input", "answer", "before-a-call", "policy"])
def test_anthropic_never_sends_a_text_block_of_whitespace(case: Conversation) -> None:
    body = render(case, "anthropic")  # validated: the protocol check passes it
    assert all(text.strip() for text in texts(body))
    # a user turn of whitespace stays a user turn: the request still ends with the user's
    assert body["messages"][-1]["role"] == "user"


def test_the_final_assistant_text_ends_without_whitespace_and_only_the_final_one() -> None:
    body = render(conv(user("hi"), AssistantMessage(text="Sure.\n", fragment_id="a1"), user("and?"),
                       AssistantMessage(text="Done. \n\n", fragment_id="a2")), "anthropic")
    assert texts(body) == ["Follow the policy.", "hi", "Sure.\n", "and?", "Done."]


def test_the_protocol_check_refuses_what_the_api_refuses() -> None:
    body = render(conv(user("hi"), *answered("Running.")), "anthropic")
    body["messages"][1]["content"][0]["text"] = "\n\n"
    with pytest.raises(RenderError, match="non-whitespace text") as info:
        check_protocol("anthropic", body)
    assert info.value.index == 1
    body = render(conv(user("hi")), "anthropic")
    body["system"][0]["text"] = " "
    with pytest.raises(RenderError, match="system: text content blocks must contain non-whitespace"):
        check_protocol("anthropic", body)
    body = render(conv(user("hi")), "anthropic")
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "Done.\n"}]})
    with pytest.raises(RenderError, match="final assistant content cannot end with trailing whitespace"):
        check_protocol("anthropic", body)
