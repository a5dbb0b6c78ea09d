"""The strict-mode rules: which tool schemas a provider's strict tool use refuses.

Why a module of its own: the build asks it before it declares a tool strict (``tool_strict``, whose
docstring says why and what is done instead), and the protocol check of a body asks it too
(``tool_checks``); the rule lives with the other rules a body's tools are held to, below both.
Sources: OpenAI's Structured Outputs guide ("Supported schemas"; 400 "Invalid schema for function
'search': In context=(), 'additionalProperties' is required to be supplied and to be false"),
and the Anthropic SDK's ``lib._parse._transform.transform_schema``, which sets
``additionalProperties: false`` on every object to make a schema one its strict mode takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextfold.projections.render.schema_walk import KeywordGroups, schema_nodes

__all__ = ["OPENAI_LONG_ENUM", "OPENAI_LONG_ENUM_CHARS", "OPENAI_MAX_ENUM_VALUES", "OPENAI_UNSUPPORTED",
           "STRICT_PROVIDERS", "strict_refusal"]

STRICT_PROVIDERS = ("openai-chat", "openai-responses", "anthropic")
"""The APIs with a strict mode whose schema subset is checked here (Gemini has no such flag)."""

OPENAI_UNSUPPORTED = frozenset({
    "allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
    "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems"})
"""The keywords OpenAI's Structured Outputs guide lists as not supported in strict mode. Nor does it
take a ``$ref`` with other keywords beside it (the SDK's ``lib._pydantic._ensure_strict_json_schema``
inlines such a ref: "we can't use `$ref`s if there are also other properties defined")."""

OPENAI_MAX_ENUM_VALUES = 1000
"""OpenAI's guide: "A schema may have up to 1000 enum values across all enum properties"."""
OPENAI_LONG_ENUM = 250
OPENAI_LONG_ENUM_CHARS = 15_000
"""... and "For a single enum property with string values, the total string length of all enum
values cannot exceed 15,000 characters when there are more than 250 enum values"."""

_KEYWORDS: KeywordGroups = (
    ("map", ("properties", "$defs", "definitions", "dependentSchemas", "patternProperties")),
    ("list", ("anyOf", "oneOf", "allOf", "prefixItems")),
    ("schema", ("items", "additionalProperties", "not", "if", "then", "else", "contains",
                "propertyNames", "unevaluatedItems", "unevaluatedProperties")),
)
"""The keywords whose values strict mode reads as schemas (``schema_walk``), draft 7's
``definitions`` too."""


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or (
        kind is None and "properties" in node)


def strict_refusal(provider: str, schema: Any) -> str | None:
    """Why ``provider``'s strict mode refuses ``schema`` (the schema as sent: a clause naming the
    node and the rule), or None when it takes it, and for a provider without one."""
    if provider not in STRICT_PROVIDERS:
        return None
    openai = provider != "anthropic"
    enum_values = 0
    for path, node in schema_nodes(schema, _KEYWORDS):
        where = f"at {path}" if path else "at the top level"
        if _is_object(node):
            if node.get("additionalProperties") is not False:
                return f"the object {where} does not say 'additionalProperties': false"
            properties = node.get("properties") or {}
            required = node.get("required") or []
            if openai and isinstance(properties, dict) and isinstance(required, list):
                missing = [name for name in properties if name not in required]
                if missing:
                    return f"the object {where} does not list {missing[0]!r} in 'required'"
        if openai:
            bad = sorted(OPENAI_UNSUPPORTED.intersection(node))
            if bad:
                return f"{bad[0]!r} {where} is a keyword strict mode does not support"
            if "$ref" in node and len(node) > 1:  # (OPENAI_UNSUPPORTED says why)
                others = ", ".join(repr(k) for k in sorted(node) if k != "$ref")
                return (f"the '$ref' {where} has other keywords beside it ({others}), which strict mode "
                        "does not take")
            enum = node.get("enum")
            if isinstance(enum, list):
                enum_values += len(enum)
                chars = sum(len(v) for v in enum if isinstance(v, str))
                if len(enum) > OPENAI_LONG_ENUM and chars > OPENAI_LONG_ENUM_CHARS:
                    return (f"the enum {where} holds {len(enum)} values of {chars} characters and strict "
                            f"mode takes at most {OPENAI_LONG_ENUM_CHARS} characters past "
                            f"{OPENAI_LONG_ENUM} values")
    if openai and enum_values > OPENAI_MAX_ENUM_VALUES:
        return f"it holds {enum_values} enum values and strict mode takes at most {OPENAI_MAX_ENUM_VALUES}"
    return None
