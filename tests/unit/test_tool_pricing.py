"""A declared tool is priced at least at what OpenAI's cookbook counts for it.

The reference is the OpenAI cookbook's ``num_tokens_for_tools`` ("How to count tokens with
tiktoken", section 7), written out below from the notebook, with its two settings: gpt-4o /
gpt-4o-mini on ``o200k_base`` (``func_init`` 7) and gpt-4 / gpt-3.5-turbo on ``cl100k_base``
(``func_init`` 10). It counts each enum value with 3 tokens of its own besides the value's: a
tool whose 40-value enum the canonical JSON priced at 179 tokens (cl100k) counts 241 there. The
cookbook reads only the top-level properties; a nested object's enum is rendered the same way
(OpenAI writes the nested type out), so a tool whose enum sits one object down must cost at
least what the cookbook counts for that object declared as a tool's parameters of its own.

The cookbook's ``func_end`` (12) closes the functions once per request, not once per function:
a tool's price leaves it out and every request that may declare a tool pays it once (charged
with each tool, a request of 12 tools reserved 132 tokens it never spent); a tool priced alone
is still at least the cookbook's count of a request declaring it alone.
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
from contextfold.projections.offline_encodings import encoding_available
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_exposure import request_closing_tokens, select_tools, tool_tokens
from contextfold.projections.tool_pricing import DEAREST_BILL, FUNC_END, ToolBill, tool_bill
from contextfold.projections.tool_prompt import tool_prompt_tokens

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


def cookbook_tokens(functions: list[dict[str, Any]], encoding: str, func_init: int | None = None) -> int:
    """``num_tokens_for_tools`` of the cookbook, the functions' part (no messages); ``func_init``
    by default the setting of the encoding's models."""
    func_init = _SETTINGS[encoding] if func_init is None else func_init
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12
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
    assert tool_tokens(spec, count) + FUNC_END >= cookbook_tokens([_function(spec)], encoding)


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
        assert tool_tokens(_nested(inner), count) + FUNC_END >= floor
    flat = ToolSpec(name="update_address", description="Update the address.", parameters={
        "type": "object", "properties": {"countries": {"type": "string", "description": "Countries.",
                                                       "enum": list(COUNTRIES)}}})
    assert tool_tokens(_nested(listed), count) + FUNC_END >= cookbook_tokens([_function(flat)], encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_toolkits_price_covers_the_cookbooks_count_of_all_of_it(encoding: str) -> None:
    """Several tools, with and without enums: the sum of their prices covers the cookbook's count of
    the request that declares them all (its ``func_end`` once)."""
    tools = [_enum_tool(COUNTRIES, "set_country"), _enum_tool(COUNTRIES[:4], "set_region"),
             ToolSpec(name="ping", description="Ping."), _nested(_COUNTRY_OBJECT)]
    count = get_counter(encoding).count
    priced = sum(tool_tokens(t, count) for t in tools) + FUNC_END
    assert priced >= cookbook_tokens([_function(t) for t in tools], encoding)


def _build_tools(specs: tuple[ToolSpec, ...], provider: str,
                 model: str | None = None) -> tuple[int, list[dict[str, Any]], str]:
    events: list[AnyEvent] = [ToolsRegistered(tools=specs), UserInput("Set my country to Chad.")]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider=provider, model=model, window=100_000, reserve=1_000),
                          render=render_request)
    assert len(built.manifest.tools) == len(specs)
    tools = built.request.get("tools") or []
    return built.manifest.layer_tokens["tools"], tools, built.manifest.encoding


_TOOLKIT = tuple(_enum_tool(COUNTRIES[i:i + 30], f"set_country_{i}") for i in range(8))
"""Eight tools whose rendered enums the cookbook counts above their JSON: priced by its formula."""


@pytest.mark.parametrize("specs", [(_enum_tool(COUNTRIES),), _TOOLKIT], ids=["one tool", "eight tools"])
@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_an_openai_build_charges_at_least_the_cookbooks_count_of_the_tools_it_declares(
        provider: str, specs: tuple[ToolSpec, ...]) -> None:
    charged, tools, encoding = _build_tools(specs, provider)
    functions = [t if "function" in t else {"function": t} for t in tools]  # Responses: flat
    assert len(functions) == len(specs)
    assert charged >= cookbook_tokens(functions, encoding)


@pytest.mark.parametrize("provider", ["openai-chat", "neutral", "gemini"])
def test_a_request_of_many_tools_reserves_func_end_once(provider: str) -> None:
    """Over the cookbook's count of the request, the build reserves only its dearer ``func_init``
    (10 where gpt-4o's is 7) per tool: ``func_end`` charged with each of 8 tools had added 84."""
    charged, _, encoding = _build_tools(_TOOLKIT, provider)
    exact = cookbook_tokens([_function(t) for t in _TOOLKIT], encoding)
    assert exact <= charged <= exact + (10 - _SETTINGS[encoding]) * len(_TOOLKIT)


_PLAIN = tuple(ToolSpec(name=f"read_{i}", description="Read a file of the workspace.", parameters={
    "type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "The path, relative to the workspace root."},
        "start": {"type": "integer", "description": "The first line to read.", "minimum": 1}}})
    for i in range(3))
"""The usual tool: its JSON (and the overhead) is dearer than the cookbook's count and its 12."""


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_tools_priced_at_their_json_pay_no_closing_charge_besides(provider: str) -> None:
    """A toolkit whose every price holds the cookbook's count and ``func_end`` (its JSON) is priced
    as before: the tools layer is their prices (and Anthropic's system prompt), nothing more."""
    count = get_counter("cl100k_base").count
    charged, _, encoding = _build_tools(_PLAIN, provider)
    prices = sum(tool_tokens(t, count) for t in _PLAIN)
    assert charged - tool_prompt_tokens(provider, None) == prices
    assert all(tool_tokens(t, count) >= cookbook_tokens([_function(t)], encoding) for t in _PLAIN)
    mixed, _, _ = _build_tools((*_PLAIN, _enum_tool(COUNTRIES)), provider)
    assert mixed - tool_prompt_tokens(provider, None) == (
        prices + tool_tokens(_enum_tool(COUNTRIES), count) + FUNC_END)  # one tool may be declared alone


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_tool_selected_on_its_own_budget_pays_func_end_once(encoding: str) -> None:
    """``select_tools`` prices what declaring its tools costs: a tool that fits only without
    ``func_end`` is over the budget, and the tokens it reports hold the 12 once."""
    count = get_counter(encoding).count
    spec = _enum_tool(COUNTRIES)
    alone = cookbook_tokens([_function(spec)], encoding)
    price = tool_tokens(spec, count) + FUNC_END
    assert price >= alone
    fits = select_tools([spec], query="country", pinned=(), budget_tokens=price, count=count)
    assert [t.name for t in fits.exposed] == ["set_country"] and fits.tokens == price
    short = select_tools([spec], query="country", budget_tokens=price - 1, count=count)
    assert not short.exposed and [t.reason for t in short.excluded] == ["over_budget"]
    kit = select_tools(list(_TOOLKIT), query="country", budget_tokens=100_000, count=count)
    assert kit.tokens == sum(t.tokens for t in kit.exposed) + FUNC_END
    assert kit.tokens >= cookbook_tokens([_function(t) for t in _TOOLKIT], encoding)
    assert select_tools(list(_TOOLKIT), query="country", budget_tokens=0, count=count).tokens == 0
    plain = select_tools([*_PLAIN, spec], query="country read", budget_tokens=100_000, count=count)
    assert plain.tokens == sum(t.tokens for t in plain.exposed)  # a JSON-priced tool holds the 12


_READ = tuple(ToolSpec(name=f"read_{i}", description="Read a file of the workspace.", parameters={
    "type": "object", "required": ["path"], "additionalProperties": False, "properties": {
        "path": {"type": "string", "description": "The path, relative to the workspace root."},
        "lines": {"type": "array", "items": {"type": "integer"}, "description": "Lines to read."}}})
    for i in range(3))
"""Tools whose schemas use only what the recorded tools use, all of it read by the count."""


@pytest.mark.parametrize(("model", "func_init"), [("gpt-4o", 7), ("gpt-4o-mini", 7), ("gpt-4.1", 7),
                                                  ("gpt-5.4-mini", 7), ("openai/gpt-5", 7), ("gpt-4", 10),
                                                  ("gpt-3.5-turbo", 10)])
def test_an_openai_chat_build_prices_its_tools_at_their_rendering(model: str, func_init: int) -> None:
    """For an OpenAI model of a measured family, Chat's tools are priced at the cookbook's count
    (that family's ``func_init``, ``func_end`` once), not at their JSON: the bill OpenAI's recorded
    requests show (``test_estimates``: gpt-4o's tool was billed 30 where its JSON priced it 50)."""
    charged, tools, encoding = _build_tools(_READ, "openai-chat", model)
    assert charged - tool_prompt_tokens("openai-chat", model) == cookbook_tokens(tools, encoding, func_init)
    count = get_counter(encoding).count
    assert charged < sum(tool_tokens(t, count) for t in _READ)  # under the JSON price
    assert tool_bill("openai-chat", model) == ToolBill(rendered=True, func_init=func_init)


@pytest.mark.parametrize("extra", [{"minimum": 1}, {"default": "README.md"}, {"format": "uri"},
                                   {"title": "Path"}, {"$ref": "#/$defs/Path"},
                                   {"anyOf": [{"type": "string"}, {"type": "null"}]}])
def test_a_schema_keyword_the_count_does_not_read_keeps_the_dearer_price(extra: dict[str, Any]) -> None:
    """What OpenAI renders of a keyword the count does not read was not measured: a tool that
    uses one, at any level, keeps the dearer of its JSON and its count, in a gpt-4o Chat build too."""
    spec = ToolSpec(name="read", description="Read a file.", parameters={
        "type": "object", "properties": {"where": {"type": "object", "properties": {
            "path": {"type": "string", **extra}}}}})
    count = get_counter("cl100k_base").count
    charged, _, _ = _build_tools((spec,), "openai-chat", "gpt-4o")
    assert charged == tool_tokens(spec, count) + request_closing_tokens([spec], count)
    plain = spec.model_copy(update={"parameters": {"type": "object", "properties": {"where": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}})
    assert _build_tools((plain,), "openai-chat", "gpt-4o")[0] < tool_tokens(plain, count)


@pytest.mark.parametrize(("provider", "model"), [
    ("openai-chat", None), ("openai-chat", "o3"), ("openai-chat", "anthropic/claude-sonnet-4.5"),
    ("openai-responses", "gpt-4o"), ("openai-responses", "gpt-5.4"), ("anthropic", "claude-sonnet-4-5"),
    ("gemini", "gemini-3-flash-preview"), ("neutral", "gpt-4o")])
def test_every_other_build_prices_its_tools_at_the_dearer_of_their_json_and_rendering(
        provider: str, model: str | None) -> None:
    """Claude and Gemini bill about the JSON; gpt-5.4's Responses requests hold tokens nothing else
    prices, which the JSON's surplus covers (``tool_pricing.tool_bill``); an OpenAI model of no
    measured family, or another vendor's through an OpenAI-format API, is not known to be billed
    the rendering; a neutral request may go anywhere: all keep the dearer price."""
    count = get_counter("cl100k_base").count
    charged, _, _ = _build_tools(_READ, provider, model)
    assert charged - tool_prompt_tokens(provider, model) == sum(tool_tokens(t, count) for t in _READ)
    assert tool_bill(provider, model) == DEAREST_BILL
