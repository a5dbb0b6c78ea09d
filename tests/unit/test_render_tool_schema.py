"""A tool's parameters must be an object schema where the provider says so.

Anthropic refuses a tool whose ``input_schema`` has no ``type`` ("tools.0.custom.input_schema.type:
Field required") or one other than ``"object"``; OpenAI refuses ``parameters`` of a type other
than ``"object"`` ("schema must be a JSON Schema of 'type: \\"object\\"'"). ``ToolSpec.parameters``
takes any dict, and a parameterless tool is commonly registered with ``{}``: the request was
rendered and passed the checks, then the whole request was refused. A schema without ``type``
constrains nothing an Anthropic call could send (its input is always an object), so it is sent
with ``"type": "object"``; one of another type cannot be sent and is a RenderError naming the tool.

OpenAI also refuses an object schema without ``properties`` ("Invalid schema for function 'x': In
context=(), object schema missing properties"), and a schema without a type ("got 'type:
\"None\"'"): every tau-bench import declared its tools, never registered in the log, as
``{"type": "object"}`` and was refused. All three get ``"type"`` and ``"properties"`` filled in.
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


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("parameters", [{}, {"type": "object"}, {"properties": {"tz": {"type": "string"}}},
                                        {"type": ["object", "null"]}])
def test_a_schema_without_a_type_or_properties_is_sent_as_an_object_schema(
        parameters: dict[str, Any], provider: str) -> None:
    tool = render(conv(parameters), provider)["tools"][0]
    schema = tool.get("input_schema") or (tool.get("function") or tool)["parameters"]
    assert schema == {"properties": {}, **parameters, "type": "object"}


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
def test_a_schema_of_another_type_is_a_render_error_naming_the_tool(provider: str) -> None:
    with pytest.raises(RenderError, match=r"tool 'now'.*'object'"):
        render(conv({"type": "string"}), provider)


def test_the_anthropic_check_refuses_a_schema_without_a_type() -> None:
    body = render(conv({}), "anthropic")
    del body["tools"][0]["input_schema"]["type"]
    with pytest.raises(RenderError, match=r"tool 'now'.*'object'"):
        check_protocol("anthropic", body)



@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_the_openai_checks_refuse_an_object_schema_without_properties(provider: str) -> None:
    body = render(conv({}), provider)
    tool = body["tools"][0]
    del (tool.get("function") or tool)["parameters"]["properties"]
    with pytest.raises(RenderError, match=r"tool 'now'.*no 'properties'"):
        check_protocol(provider, body)


def test_openai_chat_takes_at_most_128_tools_and_128_calls_in_a_message() -> None:
    """Chat Completions answers 400 "Invalid 'tools': array too long. Expected an array with
    maximum length 128" (and so for a message's ``tool_calls``): a typed error before anything is
    sent or recorded, not a request the API refuses."""
    body = render(conv({}), "openai-chat")
    body["tools"] = [{"type": "function", "function": {"name": f"t{i}", "parameters": {
        "type": "object", "properties": {}}}} for i in range(129)]
    with pytest.raises(RenderError, match="129 tools are declared and this API takes at most 128"):
        check_protocol("openai-chat", body)
    del body["tools"][128]
    def with_calls(n: int) -> dict[str, Any]:
        calls = [{"id": f"c{i}", "type": "function", "function": {"name": "t0", "arguments": "{}"}}
                 for i in range(n)]
        asked = {"role": "assistant", "content": None, "tool_calls": calls}
        answers = [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
        return {**body, "messages": [*body["messages"], asked, *answers]}

    check_protocol("openai-chat", with_calls(128))
    with pytest.raises(RenderError, match="makes 129 tool calls and this API takes at most 128"):
        check_protocol("openai-chat", with_calls(129))


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
def test_properties_as_null_or_an_empty_list_are_an_empty_object_and_another_value_is_refused(
        provider: str) -> None:
    """Go serialises an empty map as null, PHP as []: both are refused as "not of type 'object'"."""
    empties: tuple[None, list[Any]] = (None, [])
    for empty in empties:
        tool = render(conv({"type": "object", "properties": empty}), provider)["tools"][0]
        schema = tool.get("input_schema") or (tool.get("function") or tool)["parameters"]
        assert schema == {"type": "object", "properties": {}}
    with pytest.raises(RenderError, match=r"tool 'now': its 'properties' must be an object, not str"):
        render(conv({"type": "object", "properties": "x"}), provider)


def test_gemini_gets_an_object_schema_with_properties_too() -> None:
    """Gemini's JSON Schema got ``"properties": null`` (Go's empty map) as logged."""
    empties: tuple[None, list[Any]] = (None, [])
    for empty in empties:
        body = render(conv({"type": "object", "properties": empty}), "gemini")
        assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == {
            "type": "object", "properties": {}}


def test_an_import_names_only_the_schemas_a_renderer_cannot_send() -> None:
    from contextfold.projections.render.protocol import refused_tool_schemas

    everyone = ("openai-chat", "openai-responses", "anthropic", "gemini")  # Gemini: an object too
    assert refused_tool_schemas([("a", {}), ("b", {"type": ["object", "null"]}), ("c", {"type": "string"}),
                                 ("d", {"type": ["string", "null"]})]) == {
        "c": [("its parameters schema is of type 'string', not 'object'", everyone)],
        "d": [("its parameters schema is of type ['string', 'null'], not 'object'", everyone)]}
