"""The checks of a body's tools: names, descriptions and parameter schemas each provider takes, and how many.

Why a module of its own: :mod:`.protocol` walks a body's messages; these rules read only its
``tools`` (and the import reads them before any body exists: :func:`refused_tool_names`,
:func:`refused_tool_schemas`). Each failure is a :class:`RenderError` naming the tool.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

from contextfold.domain.errors import RenderError
from contextfold.projections.render.strict_mode import strict_refusal
from contextfold.projections.render.tool_schemas import refused_schemas, schema_fix, schema_refusal
from contextfold.projections.request_json import all_remembered, on_clear
from contextfold.projections.tool_descriptions import MAX_DESCRIPTION, too_long
from contextfold.projections.tool_names import TOOL_NAME_RULES, refuses_tool_name

__all__ = ["MAX_CHAT_TOOLS", "MAX_CHAT_TOOL_CALLS", "MAX_TOOLS", "anthropic_tools",
           "chat_tools", "checked_names", "declared_tool_names", "gemini_tools", "refused_tool_names",
           "refused_tool_schemas", "responses_tools"]


def _refuse(provider: str, message: str) -> None:
    raise RenderError(provider, message)


def refused_names(provider: str, names: Iterable[Any]) -> list[Any]:
    """The ``names`` ``provider`` refuses as tool names (in their order): by the rule the builder
    asks when it decides to alias a made-up name (``tool_names.refuses_tool_name``), so the two
    cannot drift apart."""
    return [name for name in names if not isinstance(name, str) or refuses_tool_name(provider, name)]


def refused_tool_names(names: Iterable[str]) -> dict[str, tuple[list[str], str]]:
    """provider -> (the ``names`` it refuses, sorted; the names it takes), for the providers that
    refuse any: what an import can say before a build for that provider fails on them."""
    wanted = sorted(set(names))
    found = {}
    for provider, (_, rule) in TOOL_NAME_RULES.items():
        refused = refused_names(provider, wanted)
        if refused:
            found[provider] = (refused, rule)
    return found


def checked_names(provider: str, names: set[Any]) -> set[Any]:
    """``names``, or a RenderError naming the first (sorted) one the provider refuses."""
    refused = refused_names(provider, names)
    if refused:
        _refuse(provider, f"tool name {min(refused, key=str)!r} is refused by this API: it takes "
              f"{TOOL_NAME_RULES[provider][1]} (rename the tool where it is registered)")
    return names


MAX_CHAT_TOOLS = 128
"""OpenAI Chat Completions takes at most 128 tools ("Invalid 'tools': array too long. Expected an
array with maximum length 128")."""

MAX_CHAT_TOOL_CALLS = 128
"""... and at most 128 calls in one assistant message (the same error for ``tool_calls``). A
build sends a reply with more as several messages (``render.openai_chat``); the protocol check
holds bodies edited or made elsewhere to it. The other APIs document no count of calls in a turn
(Responses' ``function_call`` items, Anthropic's ``tool_use`` blocks, Gemini's ``functionCall``
parts: none in their SDK types or guides), so their requests keep a reply whole."""

MAX_TOOLS: dict[str, int] = {"openai-chat": MAX_CHAT_TOOLS, "openai-responses": MAX_CHAT_TOOLS,
                             "gemini": 512}
"""provider -> how many tools one request may declare, for those that bound it. OpenAI's Responses
API answers the same "array too long ... maximum length 128" as Chat Completions for ``tools``;
Gemini takes "Maximum 512 function declarations" (``google.genai.types.Tool``). Anthropic documents
no count. A build declares at most this many (``tool_candidates``); the checks below hold bodies
edited or made elsewhere to it."""


def _count(provider: str, count: int) -> None:
    limit = MAX_TOOLS[provider]
    if count > limit:
        _refuse(provider, f"{count} tools are declared and this API takes at most {limit}: a build "
                "declares at most that many (the pinned, those the kept history calls, then the most "
                "relevant)")


refused_tool_schemas = refused_schemas
"""name -> [(why, the providers refusing it for that)] for (name, parameters) specs whose schema,
as sent, some provider refuses (``tool_schemas.refused_schemas``, under the name the import and
``protocol`` have used): what an import can say before builds leave the tools out."""


def object_schemas(provider: str, schemas: list[tuple[Any, Any]]) -> None:
    """A RenderError naming the first tool whose parameters schema the provider refuses
    (``tool_schemas.schema_refusal``: not an object, without OpenAI's ``properties``, a combinator
    at the top level, an Anthropic property key outside its pattern). The whole request would be
    refused, turn after turn, for one tool registered with such a schema; a build never declares
    one (``tool_candidates``), so this holds for bodies edited or made elsewhere."""
    for name, schema in schemas:
        why = schema_refusal(provider, schema)
        if why is not None:
            _refuse(provider, f"tool {name!r}: {why} ({schema_fix(why)})")


def strict_schemas(provider: str, schemas: Iterable[tuple[Any, Any]]) -> None:
    """A RenderError naming the first tool declared strict whose schema the provider's strict mode
    refuses (``strict_mode.strict_refusal``): the whole request would be refused. A build declares
    such a tool non-strict (``tool_strict``); this holds bodies edited or made elsewhere to it."""
    for name, schema in schemas:
        why = strict_refusal(provider, schema)
        if why is not None:
            _refuse(provider, f"tool {name!r} is declared strict and this API's strict mode refuses its "
                    f"schema: {why} (declare it non-strict, or register a schema strict mode takes)")


_DECLARED_TOOLS: dict[str, tuple[tuple[object, ...], frozenset[Any]]] = {}
"""provider -> the last tools list whose names and parameter schemas passed (remembered dicts,
held: the same objects are the same tools) and the names it declares. A run's bodies hold the
same few tools build after build; their checks were a quarter of an openai-chat protocol check."""
on_clear(_DECLARED_TOOLS.clear)


def declared_tool_names(provider: str, tools: list[Any],
                        declare: Callable[[list[Any]], set[Any]]) -> frozenset[Any]:
    """``declare(tools)``: the names the tools declare, after checking their names and schemas
    (a RenderError for the first refused); taken from the last body when it had these tools."""
    last = _DECLARED_TOOLS.get(provider)
    if last is not None and len(last[0]) == len(tools) and all(map(operator.is_, last[0], tools)):
        return last[1]
    names = frozenset(declare(tools))
    if all_remembered(tools):
        _DECLARED_TOOLS[provider] = (tuple(tools), names)
    return names


def _descriptions(provider: str, described: Iterable[tuple[Any, Any]]) -> None:
    """A RenderError naming the first tool whose description is longer than ``provider`` takes
    (``tool_descriptions.MAX_DESCRIPTION``: OpenAI Chat's "string too long. Expected a string with
    maximum length 1024" for the whole request). A build declares it cut to fit; this holds bodies
    edited or made elsewhere to it."""
    limit = MAX_DESCRIPTION[provider]
    for name, text in described:
        if isinstance(text, str) and too_long(text, limit):
            _refuse(provider, f"tool {name!r}: its description is {len(text)} characters and this API "
                    f"takes at most {limit} (a build declares it cut to fit)")


def chat_tools(tools: list[Any]) -> set[Any]:
    p = "openai-chat"
    _count(p, len(tools))
    declared = checked_names(p, {t.get("function", {}).get("name") for t in tools})
    functions = [t.get("function", {}) for t in tools]  # parameters left out: "an empty parameter list"
    _descriptions(p, ((f.get("name"), f.get("description")) for f in functions))
    object_schemas(p, [(f.get("name"), f["parameters"]) for f in functions if "parameters" in f])
    strict_schemas(p, ((f.get("name"), f.get("parameters", {})) for f in functions
                       if f.get("strict") is True))
    return declared


def responses_tools(tools: list[Any]) -> set[Any]:
    p = "openai-responses"
    _count(p, len(tools))
    declared = checked_names(p, {t.get("name") for t in tools if t.get("type") == "function"})
    object_schemas(p, [(t.get("name"), t["parameters"]) for t in tools
                        if t.get("type") == "function" and t.get("parameters") is not None])
    strict_schemas(p, ((t.get("name"), t.get("parameters") or {}) for t in tools
                       if t.get("type") == "function" and t.get("strict") is True))
    return declared


def anthropic_tools(tools: list[Any]) -> set[Any]:
    p = "anthropic"
    declared = checked_names(p, {t.get("name") for t in tools})
    object_schemas(p, [(t.get("name"), t.get("input_schema")) for t in tools])
    strict_schemas(p, ((t.get("name"), t.get("input_schema")) for t in tools if t.get("strict") is True))
    return declared


def gemini_tools(tools: list[Any]) -> set[Any]:
    declared: set[Any] = set()
    count = 0
    for tool in tools:
        functions = tool.get("functionDeclarations") or []
        count += len(functions)
        declared.update(d.get("name") for d in functions)
        object_schemas("gemini", [(d.get("name"), d["parametersJsonSchema"]) for d in functions
                                  if "parametersJsonSchema" in d])
    _count("gemini", count)
    return checked_names("gemini", declared)
