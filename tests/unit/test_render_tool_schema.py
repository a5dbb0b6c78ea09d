"""A tool's parameters must be an object schema where the provider says so.

Anthropic refuses a tool whose ``input_schema`` has no ``type`` ("tools.0.custom.input_schema.type:
Field required") or one other than ``"object"``; OpenAI refuses ``parameters`` of a type other
than ``"object"`` ("schema must be a JSON Schema of 'type: \\"object\\"'"). ``ToolSpec.parameters``
takes any dict, and a parameterless tool is commonly registered with ``{}``: the request was
rendered and passed the checks, then the whole request was refused. A schema without ``type``
constrains nothing an Anthropic call could send (its input is always an object), so it is sent
with ``"type": "object"``; one of another type cannot be sent and is a RenderError naming the tool.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.errors import RenderError
from contextfold.domain.events import ToolSpec
from contextfold.projections.render import check_protocol, render


def conv(parameters: dict[str, Any]) -> Conversation:
    return Conversation(
        model="m", system=(InstructionPart(text="Be brief.", authority="runtime", fragment_id="p"),),
        tools=(ToolSpec(name="now", description="The time", parameters=parameters),),
        messages=(UserMessage(parts=(InstructionPart(text="time?", authority="user", fragment_id="u"),)),))


@pytest.mark.parametrize("parameters", [{}, {"properties": {"tz": {"type": "string"}}}])
def test_anthropic_sends_a_schema_without_a_type_as_an_object_schema(parameters: dict[str, Any]) -> None:
    schema = render(conv(parameters), "anthropic")["tools"][0]["input_schema"]
    assert schema == {"type": "object", **parameters}


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
def test_a_schema_of_another_type_is_a_render_error_naming_the_tool(provider: str) -> None:
    with pytest.raises(RenderError, match=r"tool 'now'.*'object'"):
        render(conv({"type": "string"}), provider)
    if provider != "anthropic":  # OpenAI takes {} as "no parameters": it is sent as it is
        tool = render(conv({}), provider)["tools"][0]
        assert (tool.get("function") or tool)["parameters"] == {}


def test_the_anthropic_check_refuses_a_schema_without_a_type() -> None:
    body = render(conv({}), "anthropic")
    del body["tools"][0]["input_schema"]["type"]
    with pytest.raises(RenderError, match=r"tool 'now'.*'object'"):
        check_protocol("anthropic", body)

