"""The client function tools a source declares, as the :class:`ToolSpec`\\ s to register.

Why: a request body's ``tools`` (and an OpenHands system action's) are the schemas the model
was given: argument names, types, enums, required fields, and the tools it has not called yet.
Read from the history alone, a rebuilt request declared each tool the history happened to call
with an empty schema (``tool_candidates``' "Declared by contextfold ...") and dropped the rest,
so a resumed or handed-off model no longer knew how to call them. The importers register what
these readers return as one :class:`ToolsRegistered` before the first response.

Only client functions are read: a provider's own tools (Anthropic's ``web_search_*``,
``code_execution_*``, ``bash_*``, ...; Responses' ``web_search``, ``file_search``,
``tool_search``, ...; Gemini's ``googleSearch``, ``codeExecution``) carry no schema in the body
(the provider defines it), and a registered one would be declared to every provider as a client
function with empty parameters, one no client runs. Calls to them in the history are declared
as before, from the calls. Custom (free-text) tools are left out for the same reason: a function
declaration would tell the model to send a JSON object. A tool's ``strict`` flag (OpenAI's, and
Anthropic's strict tool use) is kept when the source says true or false (``ToolSpec.strict``);
one not said stays unsaid, whatever the API's default, so a build sends each API's own default.
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.events import ToolSpec
from contextfold.importers._common import build, get_obj, get_str, opt_str, require_obj
from contextfold.importers._json import Bad, JsonPath

__all__ = ["anthropic_tools", "chat_tool", "chat_tools", "function_shaped_tools", "gemini_json_schema",
           "gemini_tools", "responses_tools"]


def _array(d: dict[str, Any], key: str, path: JsonPath) -> list[Any]:
    """``d[key]`` as a list: ``[]`` when absent or null (a body without tools)."""
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Bad((*path, key), f"expected {key!r} to be an array")
    return value


def _spec(fn: dict[str, Any], path: JsonPath, schema_key: str, parameters: Any = None) -> ToolSpec:
    """One function's spec: its name, description, parameters schema (the default, an object
    of no properties, when it names none: OpenAI's "an empty parameter list") and ``strict``
    flag when it says one."""
    schema = fn.get(schema_key) if parameters is None else parameters
    if schema is not None:
        schema = require_obj(schema, (*path, schema_key), f"{schema_key!r} to be an object (a JSON Schema)")
    strict = fn.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise Bad((*path, "strict"), "expected 'strict' to be true, false or null")
    return build(ToolSpec, path, name=get_str(fn, "name", path),
                 description=opt_str(fn, "description", path) or "",
                 **({} if schema is None else {"parameters": schema}),
                 **({} if strict is None else {"strict": strict}))


def chat_tool(raw: Any, path: JsonPath) -> ToolSpec | None:
    """One OpenAI Chat Completions tool: ``{"type": "function", "function": {name, description,
    parameters, strict}}``; None for another type (``custom``)."""
    tool = require_obj(raw, path, "a tool object")
    if tool.get("type", "function") != "function":
        return None
    return _spec(get_obj(tool, "function", path), (*path, "function"), "parameters")


def chat_tools(body: dict[str, Any], path: JsonPath) -> list[ToolSpec]:
    """OpenAI Chat Completions: ``tools[]`` of type ``function`` (:func:`chat_tool`) and the
    legacy ``functions[]``."""
    specs = []
    for j, raw in enumerate(_array(body, "tools", path)):
        spec = chat_tool(raw, (*path, "tools", j))
        if spec is not None:
            specs.append(spec)
    for j, raw in enumerate(_array(body, "functions", path)):
        p = (*path, "functions", j)
        specs.append(_spec(require_obj(raw, p, "a function object"), p, "parameters"))
    return specs


def function_shaped_tools(tools: Any, path: JsonPath) -> list[ToolSpec]:
    """The entries of ``tools`` (at ``path``) in OpenAI chat's function shape, others passed over:
    an agent's log (OpenHands) lists its tools so in some versions and as its own classes' dumps,
    which hold no schema, in others; a log of either kind still imports."""
    return [spec for j, raw in enumerate(tools if isinstance(tools, list) else [])
            if isinstance(raw, dict) and isinstance(raw.get("function"), dict)
            and (spec := chat_tool(raw, (*path, j))) is not None]


def responses_tools(tools: list[Any], path: JsonPath) -> list[ToolSpec]:
    """OpenAI Responses: the ``tools`` (a body's, or an ``additional_tools`` item's) of type
    ``function``: ``{name, description, parameters, strict}``."""
    specs = []
    for j, raw in enumerate(tools):
        p = (*path, j)
        tool = require_obj(raw, p, "a tool object")
        if tool.get("type", "function") == "function":
            specs.append(_spec(tool, p, "parameters"))
    return specs


def anthropic_tools(body: dict[str, Any], path: JsonPath) -> list[ToolSpec]:
    """Anthropic Messages: ``tools[]`` without a ``type`` or of type ``custom``:
    ``{name, description, input_schema}``."""
    specs = []
    for j, raw in enumerate(_array(body, "tools", path)):
        p = (*path, "tools", j)
        tool = require_obj(raw, p, "a tool object")
        if tool.get("type", "custom") == "custom":
            specs.append(_spec(tool, p, "input_schema"))
    return specs


def gemini_tools(body: dict[str, Any], path: JsonPath) -> list[ToolSpec]:
    """Gemini: every ``tools[].functionDeclarations[]`` (REST camelCase or the Python SDK's
    snake_case): ``{name, description, parametersJsonSchema | parameters}``. The JSON Schema is
    kept as given; ``parameters`` (Gemini's OpenAPI subset) is read as the JSON Schema it stands
    for (:func:`gemini_json_schema`)."""
    specs = []
    for j, raw in enumerate(_array(body, "tools", path)):
        p = (*path, "tools", j)
        tool = require_obj(raw, p, "a tool object")
        key = "functionDeclarations" if "functionDeclarations" in tool else "function_declarations"
        for k, decl_raw in enumerate(_array(tool, key, p)):
            dp = (*p, key, k)
            decl = require_obj(decl_raw, dp, "a function declaration object")
            json_key = "parametersJsonSchema" if "parametersJsonSchema" in decl else "parameters_json_schema"
            if decl.get(json_key) is not None:
                specs.append(_spec(decl, dp, json_key))
                continue
            openapi = decl.get("parameters")
            if openapi is not None:
                openapi = gemini_json_schema(require_obj(openapi, (*dp, "parameters"),
                                                         "'parameters' to be an object (a Schema)"))
            specs.append(_spec(decl, dp, "parameters", openapi))
    return specs


_GEMINI_KEYWORDS = {"any_of": "anyOf", "max_items": "maxItems", "min_items": "minItems",
                    "max_length": "maxLength", "min_length": "minLength",
                    "max_properties": "maxProperties", "min_properties": "minProperties",
                    "property_ordering": "propertyOrdering"}
"""The Python SDK's snake_case spelling of a Schema's keywords -> JSON Schema's."""
_INT64 = frozenset({"maxItems", "minItems", "maxLength", "minLength", "maxProperties", "minProperties"})
"""Schema bounds that are protobuf int64, which JSON spells as a string (``"maxItems": "2"``)."""


def gemini_json_schema(schema: Any) -> Any:
    """A Gemini ``Schema`` (the OpenAPI subset of ``parameters``) as JSON Schema: types in lower
    case (``"OBJECT"`` -> ``"object"``: another provider, or Gemini's ``parametersJsonSchema``
    the renderer sends, does not read the enum's names), ``nullable: true`` as a ``"null"`` type,
    int64 bounds as numbers, snake_case keywords in camelCase; everything else as given.
    Property names are data, never renamed."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for raw_key, value in schema.items():  # a JSON object: string keys
        key = _GEMINI_KEYWORDS.get(raw_key) or raw_key
        if key == "type" and isinstance(value, str):
            if value.upper() == "TYPE_UNSPECIFIED":
                continue
            value = value.lower()
        elif key == "properties" and isinstance(value, dict):
            value = {name: gemini_json_schema(item) for name, item in value.items()}
        elif key == "items":
            value = gemini_json_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            value = [gemini_json_schema(item) for item in value]
        elif key in _INT64 and isinstance(value, str) and value.isdigit():
            value = int(value)
        out[key] = value
    if out.pop("nullable", None) is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
