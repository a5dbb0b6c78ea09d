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

import json
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.errors import RenderError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    PolicySet,
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
from contextfold.projections.render import check_protocol, render
from contextfold.projections.render.protocol import refused_tool_schemas
from contextfold.projections.tool_reasons import not_exposed_reason

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
        "s": [("its parameters schema is of type 'string', not 'object'", (*SCHEMA_PROVIDERS, "gemini"))],
        "u": [("'anyOf' at the top level of its parameters schema", SCHEMA_PROVIDERS)]}


# ------------------------------------------------------------------ builds: not offered, said why


def _events(*tail: AnyEvent) -> list[AnyEvent]:
    return [ToolsRegistered(tools=(
                ToolSpec(name="get_resource", description="Get a CI resource", parameters=UNION),
                ToolSpec(name="list_apps", description="List apps", parameters=BRACKETED),
                ToolSpec(name="ls", description="List files"))),
            PolicySet(text="Tools may be used.", pinned_tools=("get_resource", "list_apps", "ls")),
            UserInput("get resource 7 and list apps"), *tail]


def _build(events: list[AnyEvent], provider: str) -> BuildResult:
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, window=100_000, reserve=1000),
                         render=render_request)  # validated: protocol and SDK types


@pytest.mark.parametrize(("provider", "offered"), [
    ("anthropic", ["ls"]), ("openai-chat", ["list_apps", "ls"]), ("openai-responses", ["list_apps", "ls"]),
    ("gemini", ["get_resource", "list_apps", "ls"]), ("neutral", ["get_resource", "list_apps", "ls"])])
def test_a_pinned_tool_whose_schema_the_provider_refuses_is_not_offered_and_the_manifest_says_why(
        provider: str, offered: list[str]) -> None:
    """The build used to pass and the provider to refuse the whole request, every turn; a
    RenderError would stop the agent as surely. The rest of the toolkit still goes."""
    built = _build(_events(), provider)
    assert sorted(t.name for t in built.manifest.tools) == offered
    notes = [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")]
    expected = []
    if "get_resource" not in offered:
        expected.append(f"tool_not_offered:get_resource ({provider} refuses it: 'anyOf' at the top level "
                        "of its parameters schema)")
    if "list_apps" not in offered:
        expected.append(f"tool_not_offered:list_apps ({provider} refuses it: property key "
                        "'filter[bundleId]' of its parameters schema is outside ^[a-zA-Z0-9_.-]{1,64}$)")
    assert notes == expected


@pytest.mark.parametrize("provider", SCHEMA_PROVIDERS)
def test_the_historys_calls_to_such_a_tool_are_shown_as_a_runtime_note(provider: str) -> None:
    """Its calls cannot be sent as calls of an undeclared tool: shown as the runtime's note of
    them, as a denied tool's are, the result (here the latest error) after its runtime line."""
    events = _events(ModelResponse(text="Fetching.", tool_calls=(
                         ToolCall(call_id="c1", name="get_resource", arguments='{"id": "7"}'),
                         ToolCall(call_id="c2", name="ls", arguments="{}"))),
                     ToolResult(call_id="c1", content="resource 7: pipeline dep-4411 FAILED", is_error=True,
                                exit_code=1),
                     ToolResult(call_id="c2", content="app.yaml"),
                     UserInput("and now?"))
    built = _build(events, provider)
    request = json.dumps(built.request)
    assert "TOOL_NOT_OFFERED: this request does not offer the tools" in request
    assert "call c1: get_resource" in request and "dep-4411" in request
    assert "get_resource" not in {t.name for t in built.manifest.tools}
    reasons = {f.id: f.selection_reason for f in built.manifest.fragments}
    assert reasons["e4"].endswith("its calls shown as a runtime note: the request does not offer "
                                  "get_resource")
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    config = BuildConfig(provider=provider, window=100_000, reserve=1000)
    why = not_exposed_reason(state, config, "get_resource", {t.name for t in built.manifest.tools})
    assert why == (f"tool 'get_resource' (registered) is not offered to {provider}, which refuses it: "
                   "'anyOf' at the top level of its parameters schema; the history's calls to it are shown "
                   "as runtime notes. Register it with a name and schema this API takes to offer it")


@pytest.mark.parametrize(("provider", "offered"), [
    ("openai-chat", False), ("openai-responses", False), ("anthropic", False), ("gemini", True)])
def test_a_registered_tool_whose_name_the_provider_refuses_is_not_offered_to_it(provider: str,
                                                                                offered: bool) -> None:
    """An import registers a body's tools as its provider named them: a Gemini run's
    ``github.create_issue``, handed off to OpenAI or Anthropic, failed every build with a
    RenderError on the name. It is not offered there, as a refused schema is not, its calls shown
    as the runtime's notes; Gemini, whose names it is, still gets it."""
    events: list[AnyEvent] = [
        ToolsRegistered(tools=(ToolSpec(name="github.create_issue", description="Open an issue"),
                               ToolSpec(name="ls", description="List files"))),
        UserInput("open an issue"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="github.create_issue", arguments="{}"),)),
        ToolResult(call_id="c1", content="issue #12 opened"),
        UserInput("thanks")]
    built = _build(events, provider)
    assert ("github.create_issue" in {t.name for t in built.manifest.tools}) is offered
    assert "issue #12 opened" in json.dumps(built.request)
    repairs = [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")]
    assert repairs == ([] if offered else [
        f"tool_not_offered:github.create_issue ({provider} refuses it: its name is not one this API takes "
        "(letters, digits, _ and -, at most " + ("128" if provider == "anthropic" else "64") + "))"])


# ------------------------------------------------------------------ Gemini: an object, or not offered


@pytest.mark.parametrize("parameters", [{"type": "string"}, {"type": "array", "items": {"type": "string"}}])
def test_gemini_is_not_offered_a_tool_whose_parameters_are_not_an_object(parameters: dict[str, Any]) -> None:
    """google-genai's ``FunctionDeclaration.parameters_json_schema``: "The schema must describe an
    object where the properties are the parameters to the function", and a call's ``args`` is an
    object: declared, the request is refused (or the tool can never be called as declared). Left
    out like OpenAI's and Anthropic's, said why; the rest of the toolkit still goes."""
    events: list[AnyEvent] = [
        ToolsRegistered(tools=(ToolSpec(name="echo", description="Echo a text", parameters=parameters),
                               ToolSpec(name="ls", description="List files"))),
        PolicySet(text="Tools may be used.", pinned_tools=("echo", "ls")), UserInput("echo hi")]
    built = _build(events, "gemini")
    assert sorted(t.name for t in built.manifest.tools) == ["ls"]
    assert [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")] == [
        f"tool_not_offered:echo (gemini refuses it: its parameters schema is of type "
        f"{parameters['type']!r}, not 'object')"]
    assert refused_tool_schemas([("echo", parameters)]) == {"echo": [(
        f"its parameters schema is of type {parameters['type']!r}, not 'object'",
        (*SCHEMA_PROVIDERS, "gemini"))]}


def test_a_gemini_body_declaring_a_non_object_schema_is_refused_naming_the_tool() -> None:
    body = render(conv({"type": "object", "properties": {}}), "gemini")
    check_protocol("gemini", body)
    body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] = {"type": "string"}
    with pytest.raises(RenderError, match=r"tool 'get_resource': its parameters schema is of type 'string', "
                       r"not 'object'"):
        check_protocol("gemini", body)
