"""The parameters schema a tool is sent with, and why a provider would refuse it.

Why a module of its own: three parts must agree on it. The renderers send
:func:`sent_schema`; the protocol check refuses a body whose schema a provider refuses
(:func:`schema_refusal`, ``tool_checks``); and a build does not offer a registered tool whose
sent schema its provider refuses (:func:`refused_schema`, ``tool_candidates``), so the check
never fires on a body the builder made.

What the providers refuse, beyond a schema that is not an object (the request is refused whole,
so one such tool fails every request that declares it) and, for OpenAI and Anthropic, one that is
not valid JSON Schema (``schema_validity``):

- Anthropic: ``anyOf``/``oneOf``/``allOf`` at the top level ("input_schema does not support
  oneOf, allOf, or anyOf at the top level"), and a top-level property key outside
  ``^[a-zA-Z0-9_.-]{1,64}$`` ("Property keys should match pattern ..."): REST bridges publish
  ``filter[bundleId]``.
- OpenAI (Chat and Responses): ``oneOf``/``anyOf``/``allOf``/``enum``/``not`` at the top level
  ("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top
  level").
- Gemini's ``parametersJsonSchema`` takes JSON Schema with these: it gets the schema as before.
  But it too takes only an object ("The schema must describe an object where the properties are
  the parameters to the function": google-genai's ``FunctionDeclaration``; a call's ``args`` is an
  object), so a schema of another type is not offered to it either.

MCP servers publish such schemas (zod unions and intersections, pydantic ``Optional`` models), so
:func:`flattened` rewrites the ones that can be said without a top-level combinator *with the same
meaning*: an ``allOf`` whose parts only add properties and required keys is merged into the object
(a property two parts constrain keeps both, as an ``allOf`` below the top level, which the APIs
take), and a union with one alternative besides ``{"type": "null"}`` (a call's input is always an
object, never null) is that alternative. Anything else (``anyOf: [{required: [id]}, {required:
[path]}]``, a part beside ``additionalProperties: false``) would change what the model may send:
it is left as registered, and the tool is not offered to a provider that refuses it. Renaming
property keys is never done: the model's calls would carry keys the tool does not know.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from contextfold.projections.render._shared import object_schema
from contextfold.projections.render.schema_validity import invalid_schema

__all__ = ["SCHEMA_PROVIDERS", "flattened", "refused_schema", "refused_schemas", "schema_fix",
           "schema_refusal", "sent_schema"]

SCHEMA_PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini")
"""The APIs that refuse some schemas. All but Gemini send :func:`sent_schema`; Gemini sends the
registered schema (``render.gemini``), whose type :func:`sent_schema` does not change (it is
flattened only when its top level is an object already)."""

_TOP_LEVEL_REFUSED = {"anthropic": ("allOf", "anyOf", "oneOf"),
                      "openai-chat": ("allOf", "anyOf", "oneOf", "enum", "not"),
                      "openai-responses": ("allOf", "anyOf", "oneOf", "enum", "not"),
                      "gemini": ()}
"""The keys each API refuses at the top level of a tool's parameters schema."""

ANTHROPIC_PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
"""Anthropic's pattern for a top-level property key."""

_COMBINATORS = ("allOf", "anyOf", "oneOf")
_PART_KEYS = frozenset({"type", "properties", "required"})
"""What an ``allOf`` part may hold to be merged: the constraints a merge keeps exactly."""
_OPEN_ONLY = ("additionalProperties", "patternProperties", "unevaluatedProperties")
"""Top-level keys that read the top level's own ``properties``: a merged-in property would change
what they accept (``additionalProperties: false`` refuses a key only a part declares)."""
_ANNOTATIONS = frozenset({"type", "description", "title", "$schema", "$comment", "$defs", "definitions"})
"""Top-level keys beside which a union's one alternative may stand in for the whole: they
constrain nothing an object input could fail (``$defs`` keep the alternative's refs resolving)."""
_NULL = {"type": "null"}


def flattened(parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` without its top-level ``allOf``/``anyOf``/``oneOf`` where a schema without
    it accepts exactly the same object inputs (module docstring), else ``parameters`` itself."""
    present = [key for key in _COMBINATORS if key in parameters]
    if len(present) != 1:
        return parameters
    key = present[0]
    parts = parameters[key]
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        return parameters
    if key != "allOf":  # an alternative an object input never takes
        parts = [p for p in parts if p != _NULL]
        if len(parts) != 1:
            return parameters
    top = {k: v for k, v in parameters.items() if k != key}
    if top.get("type", "object") != "object":
        return parameters
    if len(parts) == 1 and top.keys() <= _ANNOTATIONS and parts[0].get("type", "object") == "object" and all(
            top[k] == parts[0][k] for k in top.keys() & parts[0].keys()):
        return {**top, **parts[0]}
    return _merged(top, parts) or parameters


def _merged(top: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``top`` with every part's properties and required keys merged in; None where that would
    not be exact (a part holding anything else, a new property beside :data:`_OPEN_ONLY`)."""
    properties = top.get("properties", {})
    required = top.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    merged: dict[str, list[Any]] = {name: [schema] for name, schema in properties.items()}
    keys = list(required)
    open_top = not any(k in top and top[k] is not True for k in _OPEN_ONLY)
    for part in parts:
        if not part.keys() <= _PART_KEYS or part.get("type", "object") != "object":
            return None
        more, needed = part.get("properties", {}), part.get("required", [])
        if not isinstance(more, dict) or not isinstance(needed, list):
            return None
        for name, schema in more.items():
            if name not in merged and not open_top:
                return None
            kept = merged.setdefault(name, [])
            if schema not in kept:
                kept.append(schema)
        keys += [k for k in needed if k not in keys]
    out = {**top, "type": "object",
           "properties": {name: s[0] if len(s) == 1 else {"allOf": s} for name, s in merged.items()}}
    if keys:
        out["required"] = keys
    return out


def sent_schema(parameters: dict[str, Any]) -> Any:
    """The schema OpenAI's and Anthropic's renderers send for ``parameters``: :func:`flattened`,
    then ``_shared.object_schema`` (type and properties filled in, keys sorted)."""
    return object_schema(flattened(parameters))


def schema_refusal(provider: str, schema: Any) -> str | None:
    """Why ``provider`` refuses ``schema`` as a body's tool parameters (a clause naming what, to
    follow "tool NAME: "), or None when it takes it (and for a provider none of these rules hold
    for). Both OpenAI APIs require ``properties`` ("object schema missing properties")."""
    refused = _TOP_LEVEL_REFUSED.get(provider)
    if refused is None:
        return None
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind != "object":
        return f"its parameters schema is of type {kind!r}, not 'object'"
    if provider.startswith("openai") and "properties" not in schema:
        return "its object schema lists no 'properties'"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return f"its 'properties' must be an object, not {type(properties).__name__}"
    for key in refused:
        if key in schema:
            return f"{key!r} at the top level of its parameters schema"
    if provider == "anthropic":
        for key in properties:
            if not isinstance(key, str) or not ANTHROPIC_PROPERTY_KEY.fullmatch(key):
                return (f"property key {key!r} of its parameters schema is outside "
                        f"^{ANTHROPIC_PROPERTY_KEY.pattern}$")
    if provider != "gemini" and (why := invalid_schema(schema)) is not None:
        return f"its parameters schema is not valid JSON Schema: {why}"
    return None


def schema_fix(reason: str) -> str:
    """What the owner of a tool refused for ``reason`` can do, for a RenderError."""
    if "at the top level" in reason:
        return ("this API takes none of oneOf, anyOf, allOf (nor, for OpenAI, enum and not) there: register "
                "the tool with one object schema (alternatives as optional properties, explained in its "
                "description); a build does not offer it to this API")
    if "not valid JSON Schema" in reason:
        return ("register the tool with a schema valid under JSON Schema draft 2020-12; a build does not "
                "offer it to this API")
    if reason.startswith("property key"):
        return "register the tool with property keys this API takes; a build does not offer it to this API"
    return "fix the schema where the tool is registered; a build does not offer it to this API"


_REFUSALS: dict[int, tuple[dict[str, Any], dict[str, str | None]]] = {}
"""id of a registered schema -> (the schema, held: the id stays its own; provider -> why refused)."""
_REFUSALS_LIMIT = 4096


def refused_schema(provider: str, parameters: dict[str, Any]) -> str | None:
    """Why ``provider`` would refuse the schema its renderer sends for ``parameters``
    (:func:`sent_schema`), or None. Kept per schema object: a build asks for each registered tool."""
    if provider not in _TOP_LEVEL_REFUSED:
        return None
    hit = _REFUSALS.get(id(parameters))
    if hit is None or hit[0] is not parameters:
        if len(_REFUSALS) >= _REFUSALS_LIMIT:
            _REFUSALS.clear()
        sent = sent_schema(parameters)
        hit = _REFUSALS[id(parameters)] = (parameters, {p: schema_refusal(p, sent) for p in SCHEMA_PROVIDERS})
    return hit[1][provider]


def refused_schemas(specs: Iterable[tuple[str, dict[str, Any]]]
                    ) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """name -> [(why, the providers refusing it for that)] for the (name, parameters) ``specs``
    whose sent schema some provider refuses (a name registered twice: its last schema), by name:
    what an import can say before builds leave the tools out."""
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for name, parameters in sorted(dict(specs).items()):
        reasons: dict[str, tuple[str, ...]] = {}
        for provider in SCHEMA_PROVIDERS:
            why = refused_schema(provider, parameters)
            if why is not None:
                reasons[why] = (*reasons.get(why, ()), provider)
        if reasons:
            found[name] = list(reasons.items())
    return found
