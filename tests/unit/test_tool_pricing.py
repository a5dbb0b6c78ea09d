"""A declared tool is priced at least at what OpenAI's cookbook counts for it.

The reference is the OpenAI cookbook's ``num_tokens_for_tools`` ("How to count tokens with
tiktoken", section 7), written out below from the notebook, with its two settings: gpt-4o /
gpt-4o-mini on ``o200k_base`` (``func_init`` 7) and gpt-4 / gpt-3.5-turbo on ``cl100k_base``
(``func_init`` 10). It counts each enum value with 3 tokens of its own besides the value's: a
tool whose 40-value enum the canonical JSON priced at 179 tokens (cl100k) counts 241 there. The
cookbook reads only the top-level properties; a nested object's enum is rendered the same way
(OpenAI writes the nested type out), so a tool whose enum sits one object down must cost at
least what the cookbook counts for that object declared as a tool's parameters of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ToolSpec, ToolsRegistered, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.tokens import encoding_available, get_counter
from contextfold.projections.tool_exposure import tool_tokens

_SETTINGS = {"o200k_base": 7, "cl100k_base": 10}
"""The cookbook's ``func_init`` for the models of each encoding (gpt-4o family; gpt-4, 3.5)."""
ENCODINGS = [name for name in _SETTINGS if encoding_available(name)]
"""``o200k_base`` only where tiktoken has it cached and verified (``tokens`` module docstring);
``cl100k_base`` always."""

_NAMES = ("Afghanistan Albania Algeria Andorra Angola Argentina Armenia Australia Austria "
          "Azerbaijan Bahamas Bahrain Bangladesh Barbados Belarus Belgium Belize Benin Bhutan "
          "Bolivia Botswana Brazil Brunei Bulgaria Burundi Cambodia Cameroon Canada Chad Chile "
          "China Colombia Comoros Croatia Cuba Cyprus Denmark Djibouti Dominica Ecuador")
COUNTRIES = tuple(_NAMES.split(" "))


def cookbook_tokens(functions: list[dict[str, Any]], encoding: str) -> int:
    """``num_tokens_for_tools`` of the cookbook, the functions' part (no messages)."""
    func_init, prop_init, prop_key, enum_init, enum_item, func_end = _SETTINGS[encoding], 3, 3, -3, 3, 12
    encode = get_counter(encoding).count
    func_token_count = 0
    if len(functions) > 0:
        for f in functions:
            func_token_count += func_init
            function = f["function"]
            f_desc = function["description"]
            if f_desc.endswith("."):
                f_desc = f_desc[:-1]
            func_token_count += encode(function["name"] + ":" + f_desc)
            if len(function["parameters"]["properties"]) > 0:
                func_token_count += prop_init
                for key in list(function["parameters"]["properties"].keys()):
                    func_token_count += prop_key
                    prop = function["parameters"]["properties"][key]
                    p_desc = prop["description"]
                    if "enum" in prop.keys():  # noqa: SIM118 (the cookbook's own words)
                        func_token_count += enum_init
                        for item in prop["enum"]:
                            func_token_count += enum_item
                            func_token_count += encode(item)
                    if p_desc.endswith("."):
                        p_desc = p_desc[:-1]
                    func_token_count += encode(f"{key}:{prop['type']}:{p_desc}")
        func_token_count += func_end
    return func_token_count


def _function(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                             "parameters": spec.parameters}}


def _enum_tool(values: tuple[str, ...] | list[str], name: str = "set_country") -> ToolSpec:
    return ToolSpec(name=name, description="Set the customer's country.", parameters={
        "type": "object", "required": ["country"],
        "properties": {"country": {"type": "string", "description": "The country.", "enum": list(values)},
                       "note": {"type": "string", "description": "Why it changes."}}})


def _nested(inner: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name="update_address", description="Update the address.", parameters={
        "type": "object", "properties": {"address": {"type": "object", "description": "The address.",
                                                     **inner}}})


_COUNTRY_OBJECT = {"properties": {"country": {"type": "string", "description": "The country.",
                                              "enum": list(COUNTRIES)},
                                  "city": {"type": "string", "description": "The city."}}}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("values", [COUNTRIES, tuple(f"v{i}" for i in range(40)), COUNTRIES[:3],
                                    tuple(f"status_{w}" for w in "abcdefghijklmnopqrstuvwxyz")])
def test_a_tool_with_an_enum_costs_at_least_the_cookbooks_count(encoding: str,
                                                                values: tuple[str, ...]) -> None:
    spec = _enum_tool(values)
    count = get_counter(encoding).count
    assert tool_tokens(spec, count) >= cookbook_tokens([_function(spec)], encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_nested_objects_enum_costs_at_least_the_cookbooks_count_for_that_object(encoding: str) -> None:
    """The enum one object down (and one object further, and in an array's items): each at least
    what the cookbook counts for the object holding it, declared as a tool's parameters."""
    count = get_counter(encoding).count
    lifted = ToolSpec(name="update_address", description="Update the address.",
                      parameters={"type": "object", **_COUNTRY_OBJECT})
    floor = cookbook_tokens([_function(lifted)], encoding)
    deeper = {"properties": {"home": {"type": "object", "description": "Home.", **_COUNTRY_OBJECT}}}
    listed = {"properties": {"countries": {"type": "array", "description": "Countries.", "items": {
        "type": "string", "enum": list(COUNTRIES)}}}}
    for inner in (_COUNTRY_OBJECT, deeper):
        assert tool_tokens(_nested(inner), count) >= floor
    flat = ToolSpec(name="update_address", description="Update the address.", parameters={
        "type": "object", "properties": {"countries": {"type": "string", "description": "Countries.",
                                                       "enum": list(COUNTRIES)}}})
    assert tool_tokens(_nested(listed), count) >= cookbook_tokens([_function(flat)], encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_toolkits_price_covers_the_cookbooks_count_of_all_of_it(encoding: str) -> None:
    """Several tools, with and without enums: the sum of their prices covers the cookbook's count of
    the request that declares them all (its ``func_end`` once)."""
    tools = [_enum_tool(COUNTRIES, "set_country"), _enum_tool(COUNTRIES[:4], "set_region"),
             ToolSpec(name="ping", description="Ping."), _nested(_COUNTRY_OBJECT)]
    count = get_counter(encoding).count
    priced = sum(tool_tokens(t, count) for t in tools)
    assert priced >= cookbook_tokens([_function(t) for t in tools], encoding)


def _build_tools(spec: ToolSpec, provider: str) -> tuple[int, list[dict[str, Any]], str]:
    events: list[AnyEvent] = [ToolsRegistered(tools=(spec,)), UserInput("Set my country to Chad.")]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider=provider, window=100_000, reserve=1_000),
                          render=render_request)
    tools = built.request["tools"]
    return built.manifest.tool_tokens, tools, built.manifest.encoding


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_an_openai_build_charges_at_least_the_cookbooks_count_of_the_tools_it_declares(provider: str) -> None:
    charged, tools, encoding = _build_tools(_enum_tool(COUNTRIES), provider)
    functions = [t if "function" in t else {"function": t} for t in tools]  # Responses: flat
    assert len(functions) == 1
    assert charged >= cookbook_tokens(functions, encoding)
