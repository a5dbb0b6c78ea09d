"""A tool registered strict whose schema the provider's strict mode refuses is declared non-strict,
and the manifest says so; a body that declares one strict is a RenderError naming the tool.

Why: OpenAI's strict function calling takes only schemas whose every object lists all its
properties in ``required`` and says ``additionalProperties: false``, without the keywords it does
not support (400 "Invalid schema for function 'search': In context=(), 'additionalProperties' is
required to be supplied and to be false"); Anthropic's strict tool use takes an object only with
``additionalProperties: false`` (its SDK's ``transform_schema`` sets it on every object). A
runtime that registered an MCP or pydantic schema with ``strict=True`` (an optional parameter, an
open object) got every request refused whole, turn after turn: the SDK request types take any
dict as the schema, and nothing checked it. Every body here is validated (``render_request``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.errors import RenderError
from contextfold.domain.events import AnyEvent, PolicySet, ToolSpec, ToolsRegistered, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import check_protocol
from contextfold.projections.render.strict_mode import strict_refusal

OPEN = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"]}
"""An MCP server's or pydantic model's schema: an optional parameter, an open object."""
CLOSED_OPTIONAL = {**OPEN, "additionalProperties": False}
"""Anthropic's strict mode takes it (optional properties are allowed); OpenAI's does not."""
EXACT = {**CLOSED_OPTIONAL, "required": ["query", "limit"]}
"""What every strict mode takes."""


def _build(provider: str, *specs: ToolSpec) -> BuildResult:
    events: list[AnyEvent] = [ToolsRegistered(tools=specs),
                              PolicySet(text="Tools may be used.", pinned_tools=tuple(s.name for s in specs)),
                              UserInput("search the docs for strict mode")]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, window=100_000, reserve=1000),
                         render=render_request)  # validated: protocol and SDK types


def _declared(provider: str, request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if provider == "openai-chat":
        return {t["function"]["name"]: t["function"] for t in request["tools"]}
    return {t["name"]: t for t in request["tools"]}


@pytest.mark.parametrize(("provider", "strict_off"), [
    ("openai-chat", False), ("openai-responses", False), ("anthropic", None)])
@pytest.mark.parametrize(("parameters", "refused_by"), [
    (OPEN, {"openai-chat", "openai-responses", "anthropic"}),
    (CLOSED_OPTIONAL, {"openai-chat", "openai-responses"}),
    (EXACT, set()),
])
def test_a_strict_tool_its_provider_refuses_in_strict_mode_is_declared_non_strict_and_said(
        provider: str, strict_off: bool | None, parameters: dict[str, Any], refused_by: set[str]) -> None:
    """The tool is still offered (the model can call it; its arguments are not held to the schema
    by the provider), the manifest's repairs say which tool and why; one strict mode takes stays
    strict."""
    built = _build(provider, ToolSpec(name="search", description="Search the docs", parameters=parameters,
                                      strict=True))
    tool = _declared(provider, built.request)["search"]
    notes = [r for r in built.manifest.repairs if r.startswith("tool_strict_off:")]
    if provider in refused_by:
        assert tool.get("strict") is strict_off
        assert len(notes) == 1 and notes[0].startswith(
            f"tool_strict_off:search ({provider}'s strict mode refuses its schema: ")
        assert notes[0].endswith("; declared non-strict)")
        assert "search" in {t.name for t in built.manifest.tools}
    else:
        assert tool.get("strict") is True and notes == []


def test_the_reasons_name_the_schema_node_and_the_rule() -> None:
    assert strict_refusal("openai-chat", OPEN) == (
        "the object at the top level does not say 'additionalProperties': false")
    assert strict_refusal("openai-chat", CLOSED_OPTIONAL) == (
        "the object at the top level does not list 'limit' in 'required'")
    nested = {"type": "object", "additionalProperties": False, "required": ["where"],
              "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}},
                                       "required": ["city"]}}}
    assert strict_refusal("anthropic", nested) == (
        "the object at properties.where does not say 'additionalProperties': false")
    in_defs = {"type": "object", "additionalProperties": False, "required": ["tags"],
               "properties": {"tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"},
                                       "uniqueItems": True}},
               "$defs": {"Tag": {"type": "string"}}}
    assert strict_refusal("openai-responses", in_defs) == (
        "'uniqueItems' at properties.tags is a keyword strict mode does not support")
    assert strict_refusal("anthropic", in_defs) is None
    assert strict_refusal("gemini", OPEN) is None  # no strict mode: nothing to refuse


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "anthropic"])
def test_a_body_declaring_such_a_tool_strict_is_refused_naming_it(provider: str) -> None:
    """A body edited or made elsewhere: the check names the tool rather than the API refusing it."""
    built = _build(provider, ToolSpec(name="search", description="Search the docs", parameters=EXACT,
                                      strict=True))
    body = json.loads(json.dumps(built.request))
    tool = _declared(provider, body)["search"]
    check_protocol(provider, body)
    tool["strict"] = True
    (tool.get("input_schema") or tool["parameters"]).pop("additionalProperties")
    with pytest.raises(RenderError, match=r"tool 'search' is declared strict and this API's strict mode "
                       r"refuses its schema: the object at the top level does not say"):
        check_protocol(provider, body)


def _enum_schema(*enums: list[str]) -> dict[str, Any]:
    properties = {f"p{i}": {"type": "string", "enum": values} for i, values in enumerate(enums)}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def test_openai_strict_mode_takes_at_most_1000_enum_values_and_15000_characters_past_250() -> None:
    """OpenAI's guide: "up to 1000 enum values across all enum properties", and "For a single enum
    property with string values, the total string length of all enum values cannot exceed 15,000
    characters when there are more than 250 enum values". Anthropic's strict mode names no such
    bound: it keeps them strict."""
    assert strict_refusal("openai-chat", _enum_schema([f"v{i}" for i in range(600)],
                                                      [f"w{i}" for i in range(400)])) is None
    assert strict_refusal("openai-chat", _enum_schema([f"v{i}" for i in range(600)],
                                                      [f"w{i}" for i in range(401)])) == (
        "it holds 1001 enum values and strict mode takes at most 1000")
    long = [f"{i:03d}" + "x" * 57 for i in range(251)]  # 251 values of 60 characters: 15,060
    assert strict_refusal("openai-responses", _enum_schema(long)) == (
        "the enum at properties.p0 holds 251 values of 15060 characters and strict mode takes at most "
        "15000 characters past 250 values")
    assert strict_refusal("openai-responses", _enum_schema(long[:250])) is None
    assert strict_refusal("anthropic", _enum_schema(long, [f"v{i}" for i in range(1000)])) is None
    built = _build("openai-chat", ToolSpec(name="weather", description="Weather in a city", strict=True,
                                           parameters=_enum_schema([f"city_{i}" for i in range(1200)])))
    assert _declared("openai-chat", built.request)["weather"]["strict"] is False
    assert ("tool_strict_off:weather (openai-chat's strict mode refuses its schema: it holds 1200 enum "
            "values and strict mode takes at most 1000; declared non-strict)") in built.manifest.repairs


def test_openai_strict_mode_takes_no_keyword_beside_a_ref() -> None:
    """The OpenAI SDK's own strict-schema helper (``openai.lib._pydantic._ensure_strict_json_schema``):
    "we can't use `$ref`s if there are also other properties defined, e.g. `{"$ref": "...",
    "description": "my description"}`", so it inlines them. pydantic writes a described nested
    model so; registered strict as it is, the request was refused. A bare ``$ref`` is taken."""
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
               "additionalProperties": False}
    schema = {"type": "object", "additionalProperties": False, "required": ["to"],
              "$defs": {"Address": address},
              "properties": {"to": {"$ref": "#/$defs/Address", "description": "Where to ship"}}}
    assert strict_refusal("openai-chat", schema) == (
        "the '$ref' at properties.to has other keywords beside it ('description'), which strict mode does "
        "not take")
    assert strict_refusal("anthropic", schema) is None
    bare = {**schema, "properties": {"to": {"$ref": "#/$defs/Address"}}}
    assert strict_refusal("openai-chat", bare) is None
