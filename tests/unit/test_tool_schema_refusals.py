"""Tool parameter schemas a provider refuses: sent in a form it takes when that changes nothing,
else not offered to it, and a body holding one is a RenderError naming the tool.

Why: MCP servers and zod/pydantic schemas publish parameters with ``anyOf``/``oneOf``/``allOf`` at
the top level, and REST bridges property keys like ``filter[bundleId]``. Anthropic refuses the
first ("input_schema does not support oneOf, allOf, or anyOf at the top level") and the second
("Property keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'"); OpenAI refuses the first and a
top-level ``enum``/``not`` ("schema must have type 'object' and not have
'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level"). Such a request was rendered, passed the
checks and was refused whole, turn after turn, for one tool the model might never call.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.errors import RenderError
from contextfold.domain.events import ToolSpec
from contextfold.projections.render import check_protocol, render
from contextfold.projections.render.protocol import refused_tool_schemas

SCHEMA_PROVIDERS = ("openai-chat", "openai-responses", "anthropic")
UNION = {"type": "object", "properties": {"id": {"type": "string"}, "full_path": {"type": "string"}},
         "anyOf": [{"required": ["id"]}, {"required": ["full_path"]}]}
"""Either of two keys required: no object schema without a combinator says that."""
BRACKETED = {"type": "object", "properties": {"filter[bundleId]": {"type": "string"}}}


def conv(parameters: dict[str, Any]) -> Conversation:
    return Conversation(
        model="m", system=(InstructionPart(text="Be brief.", authority="runtime", fragment_id="p"),),
        tools=(ToolSpec(name="get_resource", description="Get a resource", parameters=parameters),),
        messages=(UserMessage(parts=(InstructionPart(text="get 7", authority="user", fragment_id="u"),)),))


def sent(provider: str, parameters: dict[str, Any]) -> Any:
    tool = render(conv(parameters), provider)["tools"][0]
    if provider == "gemini":
        return tool["functionDeclarations"][0]["parametersJsonSchema"]
    return tool.get("input_schema") or (tool.get("function") or tool)["parameters"]


# ------------------------------------------------------------------ exact rewrites


@pytest.mark.parametrize("provider", SCHEMA_PROVIDERS)
def test_a_top_level_all_of_of_object_parts_is_sent_merged(provider: str) -> None:
    """zod's ``.and()`` and schema composition: every part must hold, so the parts' properties and
    required keys merged into one object schema say the same (a property two parts constrain
    keeps both constraints, as an allOf of its own, below the top level)."""
    parameters = {"type": "object", "properties": {"a": {"type": "string"}},
                  "allOf": [{"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
                            {"properties": {"a": {"minLength": 2}}, "required": ["a", "b"]}]}
    assert sent(provider, parameters) == {
        "type": "object", "required": ["b", "a"],
        "properties": {"a": {"allOf": [{"type": "string"}, {"minLength": 2}]}, "b": {"type": "integer"}}}


@pytest.mark.parametrize("provider", SCHEMA_PROVIDERS)
def test_a_nullable_or_single_alternative_top_level_union_is_sent_as_its_object(provider: str) -> None:
    """``Optional[Model]`` (pydantic) and zod's ``.nullable()`` give ``anyOf: [object, null]``; a
    call's input is always an object, so the object alone says the same. A union of one is it."""
    inner = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert sent(provider, {"anyOf": [inner, {"type": "null"}], "description": "x"}) == {
        **inner, "description": "x"}
    assert sent(provider, {"oneOf": [{"type": "null"}, inner]}) == inner
    assert sent(provider, {"type": "object", "anyOf": [inner]}) == inner
    defs = {"A": inner}  # one part: it stands for the whole, its refs resolving as before
    assert sent(provider, {"allOf": [{"$ref": "#/$defs/A"}], "$defs": defs}) == {
        "$defs": defs, "$ref": "#/$defs/A", "type": "object", "properties": {}}


@pytest.mark.parametrize("parameters", [
    UNION,  # two alternatives: no single object schema says "one of these keys"
    {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"}},
     "allOf": [{"properties": {"b": {"type": "string"}}}]},  # b is refused at the top: merged it is not
    {"allOf": [{"$ref": "#/$defs/A"}, {"required": ["a"]}], "$defs": {"A": {"type": "object"}}},  # a $ref
    {"allOf": [{"type": "object"}], "anyOf": [{"type": "object"}]},  # two combinators
], ids=["union", "closed", "ref", "two"])
def test_a_rewrite_that_would_change_what_the_schema_accepts_is_not_made(parameters: dict[str, Any]) -> None:
    """Dropping or merging such a combinator lets the model send what the tool refuses (or refuses
    what it takes): the schema is left as registered, for the check to name."""
    for provider in SCHEMA_PROVIDERS:
        with pytest.raises(RenderError, match=r"tool 'get_resource': .*at the top level"):
            render(conv(parameters), provider)


def test_gemini_gets_the_schema_as_registered() -> None:
    """Gemini's ``parametersJsonSchema`` takes JSON Schema with combinators: nothing to rewrite."""
    assert sent("gemini", UNION) == UNION
    assert sent("gemini", BRACKETED) == BRACKETED


# ------------------------------------------------------------------ the checks of a body


@pytest.mark.parametrize("provider", SCHEMA_PROVIDERS)
@pytest.mark.parametrize("key", ["anyOf", "oneOf", "allOf"])
def test_a_body_with_a_combinator_at_the_top_level_is_refused_naming_the_tool(provider: str,
                                                                              key: str) -> None:
    body = render(conv({"type": "object", "properties": {}}), provider)
    tool = body["tools"][0]
    schema = tool.get("input_schema") or (tool.get("function") or tool)["parameters"]
    schema[key] = [{"required": ["id"]}, {"required": ["full_path"]}]
    with pytest.raises(RenderError, match=rf"tool 'get_resource': '{key}' at the top level of its parameters "
                       r"schema.*register the tool with"):
        check_protocol(provider, body)


def test_openai_also_refuses_enum_and_not_at_the_top_level_and_anthropic_does_not() -> None:
    for key, value in (("enum", [{"a": 1}]), ("not", {"required": ["a"]})):
        parameters = {"type": "object", "properties": {"a": {"type": "integer"}}, key: value}
        assert sent("anthropic", parameters)[key] == value
        for provider in ("openai-chat", "openai-responses"):
            with pytest.raises(RenderError, match=rf"tool 'get_resource': '{key}' at the top level"):
                render(conv(parameters), provider)


def test_anthropic_refuses_a_property_key_outside_its_pattern_and_openai_takes_it() -> None:
    with pytest.raises(RenderError, match=r"tool 'get_resource': property key 'filter\[bundleId\]' of its "
                       r"parameters schema is outside \^\[a-zA-Z0-9_.-\]\{1,64\}\$"):
        render(conv(BRACKETED), "anthropic")
    with pytest.raises(RenderError, match=r"property key 'x{65}'"):
        render(conv({"type": "object", "properties": {"x" * 65: {}}}), "anthropic")
    dotted = {"type": "object", "properties": {"a.b-c_1": {}}}
    assert sent("anthropic", dotted) == dotted
    for provider in ("openai-chat", "openai-responses"):
        assert sent(provider, BRACKETED) == BRACKETED


def test_an_import_names_each_refused_schema_with_the_apis_and_why() -> None:
    found = refused_tool_schemas([("a", {}), ("u", UNION), ("b", BRACKETED), ("s", {"type": "string"}),
                                  ("m", {"allOf": [{"properties": {"x": {}}}]})])
    assert found == {
        "b": [("property key 'filter[bundleId]' of its parameters schema is outside ^[a-zA-Z0-9_.-]{1,64}$",
               ("anthropic",))],
        "s": [("its parameters schema is of type 'string', not 'object'", SCHEMA_PROVIDERS)],
        "u": [("'anyOf' at the top level of its parameters schema", SCHEMA_PROVIDERS)]}
