"""A parameters schema that is not valid JSON Schema is not offered to OpenAI or Anthropic, said why.

Why: both validate a tool's schema before anything else and refuse the whole request for one
invalid schema: Anthropic "tools.0.custom.input_schema: JSON schema is invalid. It must match JSON
Schema draft 2020-12", OpenAI "Invalid schema for function 'read': In context=('properties',
'path'), 'str' is not valid under any of the given schemas" / "True is not of type 'array'". The
SDK request types take any dict there. What runtimes register: a Python type name as a JSON type
("str"), draft 3's per-property ``required: true``, draft 4's boolean ``exclusiveMinimum`` (OpenAPI
3.0 converters), ``required`` as a string. Every such request was refused, turn after turn, for
one tool the model might never call; now the rest of the toolkit goes (as for a top-level
``anyOf``, ``tool_schemas``). What the metaschema takes stays offered, whatever the keyword.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, PolicySet, ToolSpec, ToolsRegistered, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.render.schema_validity import invalid_schema

PROVIDERS = ("anthropic", "openai-chat", "openai-responses")


def _build(provider: str, parameters: dict[str, Any]) -> BuildResult:
    events: list[AnyEvent] = [
        ToolsRegistered(tools=(ToolSpec(name="read", description="Read a file", parameters=parameters),
                               ToolSpec(name="ls", description="List files"))),
        PolicySet(text="Tools may be used.", pinned_tools=("read", "ls")), UserInput("read the file")]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, window=100_000, reserve=1000),
                         render=render_request)  # validated: protocol and SDK types


INVALID = [
    ({"type": "object", "properties": {"path": {"type": "str"}}},
     "'type' at properties.path is 'str', not one of array, boolean, integer, null, number, object, string"),
    ({"type": "object", "properties": {"path": {"type": "string", "required": True}}},
     "'required' at properties.path must be an array of strings, not True"),
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}}},
     "'exclusiveMinimum' at properties.n must be a number, not True"),
    ({"type": "object", "properties": {"path": {"type": "string"}}, "required": "path"},
     "'required' at the top level must be an array of strings, not 'path'"),
    ({"type": "object", "properties": {"path": "string"}},
     "properties.path must be a schema (an object or a boolean), not 'string'"),
    ({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                "maxItems": -1}}},
     "'maxItems' at properties.tags must be a non-negative integer, not -1"),
    ({"type": "object", "properties": {"a": {"anyOf": []}}},
     "'anyOf' at properties.a must be a non-empty array of schemas, not []"),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("parameters", "why"), INVALID)
def test_an_invalid_schema_is_not_offered_and_the_manifest_says_why(provider: str, parameters: dict[str, Any],
                                                                    why: str) -> None:
    built = _build(provider, parameters)
    assert [t.name for t in built.manifest.tools] == ["ls"]
    assert [r for r in built.manifest.repairs if r.startswith("tool_not_offered:")] == [
        f"tool_not_offered:read ({provider} refuses it: its parameters schema is not valid JSON Schema: "
        f"{why})"]


def test_gemini_still_gets_it() -> None:
    """Its ``parametersJsonSchema`` is a free JSON value whose checks Google does not document:
    nothing is held back from it on this rule."""
    built = _build("gemini", INVALID[0][0])
    assert sorted(t.name for t in built.manifest.tools) == ["ls", "read"]


class _Address(BaseModel):
    city: str
    zip_code: str | None = Field(default=None, pattern=r"^\d{5}$")


class _Order(BaseModel):
    items: list[str] = Field(min_length=1, max_length=10)
    kind: str = Field(default="a", json_schema_extra={"examples": ["a", "b"]})
    quantity: int = Field(gt=0, le=99, multiple_of=1)
    ship_to: _Address | None = None


VALID = [
    _Order.model_json_schema(),
    {"type": "object", "properties": {"x": {"type": ["string", "null"], "nullable": True, "x-go-type": 1,
                                            "format": "made-up", "description": "any keyword is taken"}},
     "additionalProperties": True, "required": []},
    {"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}],
                                            "items": False},
                                      "b": True, "n": {"exclusiveMinimum": 0, "enum": [1, "a", None]}},
     "definitions": {"x": {"$ref": "#/definitions/x"}}, "dependencies": {"t": ["b"]}},
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("parameters", VALID)
def test_what_the_metaschema_takes_is_offered(provider: str, parameters: dict[str, Any]) -> None:
    assert invalid_schema(parameters) is None
    assert sorted(t.name for t in _build(provider, parameters).manifest.tools) == ["ls", "read"]
