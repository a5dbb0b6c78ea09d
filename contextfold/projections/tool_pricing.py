"""What OpenAI counts for a declared function, by the cookbook's formula, so a tool is never
priced under it.

Why: a tool was priced at its canonical JSON plus ``tool_exposure.TOOL_OVERHEAD_TOKENS``. That
is 15-21 tokens above OpenAI's count for a typical tool, but OpenAI does not send the JSON: it
renders each function into the prompt as a TypeScript-like type, where an enum is written
``"a" | "b" | ...``, each value with its quotes and separator. The JSON spends about a token on
the ``",`` between two values; the rendered type spends about three. A tool with a 40-value enum
was priced at 158 tokens (o200k_base; 179 on cl100k_base) where the cookbook counts 217 (241).

Source: the OpenAI cookbook, "How to count tokens with tiktoken", section 7 ("Counting tokens for
chat completions with tool calls"), ``num_tokens_for_tools``, checked by its authors against the
API's ``usage.prompt_tokens``:

- per function ``func_init`` (7 for gpt-4o / gpt-4o-mini, 10 for gpt-4 / gpt-3.5-turbo) plus
  ``name:description`` (one trailing full stop dropped);
- when it has properties, ``prop_init`` (3) once, and per property ``prop_key`` (3) plus
  ``key:type:description``;
- per enum ``enum_init`` (-3), and per value ``enum_item`` (3) plus the value;
- per request ``func_end`` (12): the notebook adds it after its loop over the functions, once.

What this module adds to it:

- ``func_end`` is not in a tool's price: it is paid once by the request, set aside wherever
  tools are priced for one (the builder, :func:`~.tool_exposure.select_tools`'s budget), so a
  tool priced alone still costs at least the cookbook's count of a request declaring it alone.
  Charged with every tool (as it was), a request of 12 enum-heavy tools reserved 132 tokens it
  never spent. A tool priced at its JSON (the usual one) whose JSON is at least ``func_end``
  above its cookbook count already holds it: a request declaring one such tool pays nothing
  more (:func:`closing_tokens`);
- the cookbook reads only the top-level properties, but OpenAI writes a nested object's type out
  too: properties one object down (or in an array's ``items``, or an ``anyOf``/``oneOf``/
  ``allOf`` alternative) are counted the same way, each level with its own ``prop_init``, so an
  enum inside an object costs what it would at the top level.

:func:`tool_price` is, by :class:`ToolBill` (:func:`tool_bill` says which a build pays):

- in an OpenAI Chat Completions build for a model of a measured family
  (:data:`RENDERED_FUNC_INIT`), for a tool whose schema holds nothing the count does not read
  (``$ref``, ``anyOf``, defaults, formats, bounds, titles: :func:`_read_whole`): this count
  alone, with that family's ``func_init``, and ``func_end`` once per request. Why: OpenAI bills
  the rendering, not the JSON. On pydantic-ai's recorded requests
  (``tests/integration/test_estimates.py``), gpt-4o's one-tool request was billed 30 tokens
  beyond its message where this count is 31 (the JSON and overhead: 50); gpt-5.4-mini's requests
  of 2, 3 and 4 tools, 78-81 beyond it, every one (its preamble,
  ``tool_prompt.CHAT_GPT5_PREAMBLE``: nothing per tool), where the JSON priced each tool 20-33
  tokens above it. Priced at the JSON, gpt-5.4-mini's requests read 0.80 of the provider's count;
- in every other build and for every other tool: the dearer of this count (``func_init`` 10,
  the cookbook's dearer setting: an unknown model must not be priced under a known one) and the
  JSON price (overhead included). Claude and Gemini bill a declaration at about its JSON, and
  OpenAI's Responses requests hold tokens nothing else prices, which the JSON's surplus covers
  (:func:`tool_bill`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from contextfold.domain.canonical import canonical_utf8
from contextfold.domain.events import ToolSpec
from contextfold.projections.model_family import model_family

__all__ = ["DEAREST_BILL", "ENUM_INIT", "ENUM_ITEM", "FUNC_END", "FUNC_INIT", "PROP_INIT", "PROP_KEY",
           "RENDERED_FUNC_INIT", "ToolBill", "closing_tokens", "function_tokens", "tool_bill", "tool_price"]

FUNC_INIT = 10
"""Per function: the cookbook's dearer setting (gpt-4, gpt-3.5-turbo; gpt-4o's is 7)."""
PROP_INIT = 3
"""Once per object that has properties."""
PROP_KEY = 3
"""Per property."""
ENUM_INIT = -3
"""Per enum (the cookbook's correction: the list replaces part of the property's line)."""
ENUM_ITEM = 3
"""Per enum value, besides the value's own tokens: its quotes and the ``|`` between values."""
FUNC_END = 12
"""Per request declaring functions: set aside once by whoever prices a request's tools, never in a
tool's own price (module docstring)."""



class ToolBill(NamedTuple):
    """How a build prices a declared tool (module docstring)."""

    rendered: bool
    """The cookbook's count of OpenAI's rendering alone (``func_end`` once per request), not the
    dearer of it and the JSON."""
    func_init: int
    """The count's per-function framing."""


DEAREST_BILL = ToolBill(rendered=False, func_init=FUNC_INIT)
"""The dearer of the JSON price and the cookbook's count with its dearer ``func_init``: every build
but an OpenAI one for a measured family (``neutral``, Anthropic, Gemini, a model not known)."""

RENDERED_FUNC_INIT: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"(?:^|/)gpt-(?:4o|4\.1|5)(?![0-9])", re.IGNORECASE), 7),
    (re.compile(r"(?:^|/)gpt-(?:4|3\.5-turbo)(?![0-9.a-z])", re.IGNORECASE), 10),
)
"""OpenAI model families billed at the cookbook's count of their rendering, with its ``func_init``:
gpt-4o and gpt-4o-mini (the cookbook's 7; measured: gpt-4o's one-tool request 1 under it), gpt-4.1
(measured: ~7 under it, with 7) and gpt-5 (``gpt-5``, ``gpt-5.4-mini``: measured at it with 7, its
preamble aside); gpt-4 and gpt-3.5-turbo (the cookbook's 10, which its authors checked). Any other
OpenAI model (o1, o3, codex...) keeps :data:`DEAREST_BILL`: its rendering was not measured."""


@functools.lru_cache(maxsize=64)  # a run names a model or two, asked at every build
def tool_bill(provider: str, model: str | None) -> ToolBill:
    """How a build for ``provider`` and ``model`` prices a declared tool: OpenAI's rendering for
    an OpenAI model of a :data:`RENDERED_FUNC_INIT` family built for Chat Completions or
    Responses, :data:`DEAREST_BILL` for every other build.

    Why not OpenAI's rendering for another vendor's model sent to an OpenAI-format API (a
    gateway's ``anthropic/claude-sonnet-4.5``): the gateway's vendor renders it, and Claude and
    Gemini were measured billing a declaration at about its JSON (Gemini: JSON and overhead 4-16
    tokens above the whole bill of its three one-message requests, their text aside; Claude: the
    JSON and a tool-use prompt of ~500, ``tool_prompt``). Why not for Responses: gpt-5.4's
    recorded requests, their tools priced at the rendering, read 0.95-1.31 of the provider's count
    (0.72-1.03 at the JSON): they hold tokens nothing else prices, and seven requests do not tell
    which. Why not for ``neutral``: its request may be sent to any provider."""
    if provider != "openai-chat" or model is None or model_family(model) != "openai":
        return DEAREST_BILL
    for pattern, func_init in RENDERED_FUNC_INIT:
        if pattern.search(model):
            return ToolBill(rendered=True, func_init=func_init)
    return DEAREST_BILL


_SUBSCHEMAS = ("anyOf", "oneOf", "allOf")
_READ = frozenset({"type", "properties", "description", "enum", "items", "required", "additionalProperties"})
"""The schema keywords of the measured tools (``tool_bill``), all of which the count reads (or
OpenAI's rendering leaves out: ``required``'s ``?``, ``additionalProperties``)."""
_MEMO: dict[tuple[int, Callable[[str], int], ToolBill], tuple[ToolSpec, int, int]] = {}
_MEMO_LIMIT = 4096
"""Every build prices its candidate tools again; a run registers the same spec objects once."""


def _stripped(value: Any) -> str:
    """A description as the cookbook writes it: one trailing full stop dropped."""
    text = value if isinstance(value, str) else ""
    return text[:-1] if text.endswith(".") else text


def _type_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else str(canonical_utf8(value).decode())


def _enum(schema: dict[str, Any], count: Callable[[str], int]) -> int:
    values = schema.get("enum")
    if not isinstance(values, list) or not values:
        return 0
    return ENUM_INIT + sum(ENUM_ITEM + count(v if isinstance(v, str) else canonical_utf8(v).decode())
                           for v in values)


def _inner(schema: Any, count: Callable[[str], int]) -> int:
    """What a schema's values cost below its own line: its enum, its properties, its items' and
    its alternatives'."""
    if not isinstance(schema, dict):
        return 0
    n = _enum(schema, count)
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        n += PROP_INIT
        for key, prop in props.items():
            sub = prop if isinstance(prop, dict) else {}
            n += PROP_KEY + count(f"{key}:{_type_text(sub.get('type'))}:{_stripped(sub.get('description'))}")
            n += _inner(sub, count)
    n += _inner(schema.get("items"), count)
    for name in _SUBSCHEMAS:
        parts = schema.get(name)
        if isinstance(parts, list):
            n += sum(_inner(part, count) for part in parts)
    return n


def function_tokens(spec: ToolSpec, count: Callable[[str], int], func_init: int = FUNC_INIT) -> int:
    """The cookbook's count of ``spec``'s declaration in a request, with nested objects read too;
    the request's ``func_end`` (:data:`FUNC_END`) is not in it (module docstring)."""
    return func_init + count(f"{spec.name}:{_stripped(spec.description)}") + _inner(spec.parameters, count)


def _read_whole(schema: Any) -> bool:
    """Whether the count reads all of ``schema``: no keyword but :data:`_READ`, at every level.
    Why: what OpenAI renders of the others (``$ref`` and ``$defs``, ``anyOf`` alternatives, a
    default, a format, a minimum, a title) was not measured, and the JSON holds them all."""
    if not isinstance(schema, dict):
        return True
    if not schema.keys() <= _READ:
        return False
    props = schema.get("properties")
    return (_read_whole(schema.get("items"))
            and (not isinstance(props, dict) or all(map(_read_whole, props.values()))))


def _priced(spec: ToolSpec, json_price: Callable[[], int], count: Callable[[str], int],
            bill: ToolBill) -> tuple[ToolSpec, int, int]:
    key = (id(spec), count, bill)
    hit = _MEMO.get(key)
    if hit is None or hit[0] is not spec:
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        rendered = function_tokens(spec, count, bill.func_init)
        if bill.rendered and _read_whole(spec.parameters):
            hit = _MEMO[key] = (spec, rendered, FUNC_END)
        else:
            as_json = json_price()
            closing = 0 if as_json >= rendered + FUNC_END else FUNC_END
            hit = _MEMO[key] = (spec, max(as_json, rendered), closing)
    return hit


def tool_price(spec: ToolSpec, json_price: Callable[[], int], count: Callable[[str], int],
               bill: ToolBill = DEAREST_BILL) -> int:
    """``spec``'s price under ``bill``: :func:`function_tokens` for OpenAI's rendering, else the
    dearer of ``json_price()`` (the canonical JSON's, overhead included) and it; memoised per spec
    object, counter and bill."""
    return _priced(spec, json_price, count, bill)[1]


def closing_tokens(spec: ToolSpec, json_price: Callable[[], int], count: Callable[[str], int],
                   bill: ToolBill = DEAREST_BILL) -> int:
    """What a request declaring ``spec`` alone pays besides its :func:`tool_price`: 0 when that
    price, its JSON's, already holds the cookbook's count and ``func_end`` both (the usual
    tool: its JSON is larger than its rendering), else :data:`FUNC_END` (always, for OpenAI's
    rendering). A request that declares at least one tool of 0 pays nothing more: that tool's
    price holds the ``func_end`` the request pays once."""
    return _priced(spec, json_price, count, bill)[2]
