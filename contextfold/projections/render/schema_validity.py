"""Whether a tool's parameters schema is valid JSON Schema, for the APIs that refuse one that is not.

Why: Anthropic validates ``input_schema`` against JSON Schema draft 2020-12 and OpenAI validates
``parameters`` against the metaschema too, each before anything else, and both refuse the whole
request for one invalid schema (Anthropic: "tools.0.custom.input_schema: JSON schema is invalid.
It must match JSON Schema draft 2020-12"; OpenAI: "Invalid schema for function 'read': In
context=('properties', 'path'), 'str' is not valid under any of the given schemas", "True is not
of type 'array'"). The SDK request types take any dict there, so nothing said so before the API
did, turn after turn. What runtimes register: a Python type name as the JSON type (``"str"``),
draft 3's per-property ``required: true``, draft 4's boolean ``exclusiveMinimum`` (OpenAPI 3.0
converters), ``required`` as one string.

:func:`invalid_schema` checks what the 2020-12 metaschema says of the value of each keyword it
knows (its type: a schema, an array of schemas, a non-negative integer, ...) and nothing else: a
keyword it does not know (``nullable``, ``x-...``, draft 7's ``definitions``/``dependencies``) is
annotation there and taken, and no ``format`` or ``pattern`` is judged. So it names only what
the metaschema refuses; a schema it passes may still be refused for other reasons
(``tool_schemas``). Kept apart from ``tool_schemas``, which asks it, as a rule of its own.
"""

from __future__ import annotations

from typing import Any

from contextfold.projections.render.schema_walk import KeywordGroups, schema_nodes

__all__ = ["JSON_TYPES", "invalid_schema"]

JSON_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
"""The 2020-12 metaschema's ``simpleTypes``."""

_SCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
           "unevaluatedItems", "unevaluatedProperties", "contentSchema")
"""Keywords whose value is one schema (an object or a boolean)."""
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
"""Keywords whose value is a non-empty array of schemas."""
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
"""Keywords whose value maps names to schemas."""
_KEYWORDS: KeywordGroups = (("schema", _SCHEMA), ("list", _SCHEMA_LISTS), ("map", _SCHEMA_MAPS))
_COUNTS = ("maxLength", "minLength", "maxItems", "minItems", "maxContains", "minContains",
           "maxProperties", "minProperties")
"""Keywords whose value is a non-negative integer."""
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRINGS = ("title", "description", "pattern", "format", "$ref", "$id", "$anchor", "$comment")
_STRING_LISTS = ("required",)


def _where(path: str) -> str:
    return f"at {path}" if path else "at the top level"


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict | bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _node_problem(node: dict[str, Any], path: str) -> str | None:
    """What the metaschema refuses in ``node``'s own keywords (not its subschemas), or None."""
    where = _where(path)
    kind = node.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        bad = next((k for k in kinds if not isinstance(k, str) or k not in JSON_TYPES), None)
        if bad is not None or not kinds or len(set(map(repr, kinds))) != len(kinds):
            shown = bad if bad is not None else kind
            return f"'type' {where} is {shown!r}, not one of {', '.join(sorted(JSON_TYPES))}"
    for key in _STRING_LISTS:
        if key in node:
            value = node[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"{key!r} {where} must be an array of strings, not {value!r}"
    for key in _SCHEMA:
        if key in node and not _is_schema(node[key]) and not (key == "items" and isinstance(node[key], list)):
            # (draft 7's array form of ``items``: left to the API, whose drafts differ on it)
            return f"{key!r} {where} must be a schema (an object or a boolean), not {node[key]!r}"
    for key in _SCHEMA_LISTS:
        if key in node:
            value = node[key]
            if not isinstance(value, list) or not value or not all(map(_is_schema, value)):
                return f"{key!r} {where} must be a non-empty array of schemas, not {value!r}"
    for key in _SCHEMA_MAPS:
        if key in node:
            value = node[key]
            if not isinstance(value, dict):
                return f"{key!r} {where} must be an object of schemas, not {value!r}"
            at = f"{path}.{key}" if path else key
            for name, sub in value.items():
                if not _is_schema(sub):
                    return f"{at}.{name} must be a schema (an object or a boolean), not {sub!r}"
    for key in _COUNTS:
        if key in node:
            value = node[key]
            if not (_number(value) and value >= 0 and value == int(value)):
                return f"{key!r} {where} must be a non-negative integer, not {value!r}"
    for key in _NUMBERS:
        if key in node:
            value = node[key]
            if not _number(value) or (key == "multipleOf" and value <= 0):
                kind = "positive number" if key == "multipleOf" else "number"
                return f"{key!r} {where} must be a {kind}, not {value!r}"
    for key in _STRINGS:
        if key in node and not isinstance(node[key], str):
            return f"{key!r} {where} must be a string, not {node[key]!r}"
    if "enum" in node and not isinstance(node["enum"], list):
        return f"'enum' {where} must be an array, not {node['enum']!r}"
    return None


def invalid_schema(schema: Any) -> str | None:
    """What makes ``schema`` invalid under the 2020-12 metaschema (a clause naming the keyword and
    where), or None. Only keywords are read: a property named ``type`` is a name."""
    for path, node in schema_nodes(schema, _KEYWORDS):
        problem = _node_problem(node, path)
        if problem is not None:
            return problem
    return None
