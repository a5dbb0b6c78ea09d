"""A model response's provider reasoning: opaque, verbatim, tagged with the provider that made it.

Anthropic ``thinking``/``redacted_thinking`` blocks, OpenAI Responses ``reasoning`` items and Gemini
``thoughtSignature`` values are signed or encrypted by their provider, who wants them back unchanged
in the next request of a tool-use loop and refuses another provider's. So they are kept as the
provider's own JSON (never parsed into fields a future API version would outgrow), one model per
provider under a ``provider`` discriminator, and only that provider is ever sent them
(``projections.reasoning``). Re-exported by :mod:`contextfold.domain.events`, where
``ModelResponse.reasoning`` holds one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Required, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, with_config
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from contextfold.domain.checked import Integer
from contextfold.domain.items import Items

__all__ = [
    "ANTHROPIC_SERVER_BLOCKS",
    "HOSTED_RESPONSES_ITEMS",
    "ITEM_KIND_ERROR",
    "KNOWN_ITEM_KINDS",
    "REASONING_ADAPTER",
    "TAKEN_BACK",
    "AnthropicReasoning",
    "GeminiReasoning",
    "GeminiSignature",
    "OpenAIResponsesReasoning",
    "Reasoning",
    "ReasoningItem",
    "ReasoningRefusal",
    "appendable_reasoning",
    "reasoning_refusals",
    "sendable_reasoning",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasoningItem(_Frozen):
    """One piece of a response's reasoning as the provider returned it, and where it stood.

    ``raw`` is the provider's JSON object, verbatim: it is signed or encrypted (an Anthropic
    ``signature``, an OpenAI ``encrypted_content``), and the provider refuses it edited or cut,
    so nothing here reads, redacts or truncates it. ``before_call`` is the number of the
    response's tool calls that came before it (0: before the first call, with the text):
    interleaved thinking goes back between the calls it stood between. It is at most the number
    of calls, and below it for an OpenAI Responses item of a response that calls (an item goes
    back before the item it led to): an append refuses the rest (:func:`reasoning_refusals`)."""

    before_call: Integer = Field(default=0, ge=0)
    raw: dict[str, Any]


ANTHROPIC_SERVER_BLOCKS = frozenset({
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result"})
"""The blocks of the tools Anthropic runs itself (server tools: web search and fetch, code
execution, tool search), kept verbatim among a response's :class:`AnthropicReasoning` blocks, as
:data:`HOSTED_RESPONSES_ITEMS` are OpenAI's. Why there: the API pairs a ``server_tool_use`` with
its ``*_tool_result`` inside the same assistant turn (never a ``tool_result`` the client sends),
runs one left without its result (a ``pause_turn``, or a turn that also called a client tool)
when the turn is sent back, and takes both back as they came; no other provider can read them.
Each is a block of the SDK's ``ContentBlockParam`` with the fields of its response block. (The
beta MCP connector's ``mcp_tool_use``/``mcp_tool_result`` are not: the requests rendered are the
SDK's non-beta ``MessageCreateParams``, which has no such block.)"""
_ANTHROPIC_REASONING = frozenset({"thinking", "redacted_thinking"})


ITEM_KIND_ERROR = "reasoning_item_kind"
"""The pydantic error type of an item whose kind (``raw["type"]``) its provider's reasoning does not
take; its context names the ``item`` (index) and the ``kind`` (the value, whatever its type). Its
own type, not a ``value_error``, so a read can tell a newer release's kind of item from damage
(``release_versions.newer_release_parts``) without parsing a message."""


def _typed(items: tuple[ReasoningItem, ...], types: frozenset[str], provider: str
           ) -> tuple[ReasoningItem, ...]:
    for n, item in enumerate(items):
        kind = item.raw.get("type")
        if kind not in types:
            raise PydanticCustomError(
                ITEM_KIND_ERROR,
                "item {item} of {provider} reasoning must have type {expected}, got {got}",
                {"item": n, "provider": provider, "expected": " or ".join(sorted(types)), "kind": kind,
                 "got": repr(kind)})
    return items


class AnthropicReasoning(_Frozen):
    """Anthropic ``thinking`` (with ``signature``) and ``redacted_thinking`` (with ``data``) blocks,
    and the blocks of its server tools (:data:`ANTHROPIC_SERVER_BLOCKS`), in the response's order.

    With extended thinking on, the blocks of the assistant turn that made the tool calls must be
    sent back unchanged, before its ``tool_use`` blocks, in the following request."""

    provider: Literal["anthropic"] = "anthropic"
    items: Items[ReasoningItem] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _blocks(cls, items: tuple[ReasoningItem, ...]) -> tuple[ReasoningItem, ...]:
        return _typed(items, _ANTHROPIC_REASONING | ANTHROPIC_SERVER_BLOCKS, "anthropic")


HOSTED_RESPONSES_ITEMS = frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"})
"""The output items of the tools OpenAI runs itself (hosted tools: web and file search, code
interpreter, image generation, remote MCP servers), kept verbatim among a response's
:class:`OpenAIResponsesReasoning` items. Why there: like a reasoning item, such an item is the
provider's own record (its ``ws_``/``ci_``/``mcp_`` id means nothing elsewhere), it is sent back as
it came and where it stood (the API refuses a ``web_search_call`` without the reasoning item before
it, and the reverse), it is no call the runtime runs or answers (no ``call_id``, no output item:
its result is in it), and another provider can read none of it. Each kind is an input item of the
SDK's ``ResponseInputItemParam``, with the fields of its output item."""
_RESPONSES_ITEMS = HOSTED_RESPONSES_ITEMS | {"reasoning"}


class OpenAIResponsesReasoning(_Frozen):
    """OpenAI Responses ``reasoning`` items (id, summary, ``encrypted_content`` when present), and
    the items of its hosted tools (:data:`HOSTED_RESPONSES_ITEMS`), in the response's order: they
    go back as input items, verbatim, before the ``function_call`` items of their response."""

    provider: Literal["openai-responses"] = "openai-responses"
    items: Items[ReasoningItem] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _items(cls, items: tuple[ReasoningItem, ...]) -> tuple[ReasoningItem, ...]:
        return _typed(items, _RESPONSES_ITEMS, "openai-responses")



class GeminiSignature(_Frozen):
    """A Gemini ``thoughtSignature`` and the part it rode on: the ``call``-th function call of the
    response, or (None) a text, thought or bare part. It is returned on the same part."""

    signature: str = Field(min_length=1)
    call: Integer | None = Field(default=None, ge=0)


class GeminiReasoning(_Frozen):
    """The ``thoughtSignature`` values of a Gemini response's parts, verbatim."""

    provider: Literal["gemini"] = "gemini"
    signatures: Items[GeminiSignature] = Field(min_length=1)


Reasoning: TypeAlias = Annotated[
    AnthropicReasoning | OpenAIResponsesReasoning | GeminiReasoning, Field(discriminator="provider")
]
"""A response's reasoning, tagged with the provider that made it: only that provider can read it
back (a signature is the provider's own), so a build for another provider leaves it out."""

REASONING_ADAPTER: TypeAdapter[Reasoning] = TypeAdapter(Reasoning)


# ---------------------------------------------------------------- what a provider takes back


@with_config(ConfigDict(extra="forbid"))
class _SummaryText(TypedDict):
    type: Literal["summary_text"]
    text: str


@with_config(ConfigDict(extra="forbid"))
class _ReasoningText(TypedDict):
    type: Literal["reasoning_text"]
    text: str


@with_config(ConfigDict(extra="forbid"))
class _ResponsesItem(TypedDict, total=False):
    """``openai.types.responses.ResponseReasoningItemParam``: the input item a reasoning item goes
    back as (an output item dumped with its ``None`` fields is not one: ``status: null``)."""

    id: Required[str]
    type: Required[Literal["reasoning"]]
    summary: Required[list[_SummaryText]]
    content: list[_ReasoningText]
    encrypted_content: str | None
    status: Literal["in_progress", "completed", "incomplete"]


@with_config(ConfigDict(extra="forbid"))
class _Thinking(TypedDict):
    """``anthropic.types.ThinkingBlockParam``."""

    type: Literal["thinking"]
    thinking: str
    signature: str


@with_config(ConfigDict(extra="forbid"))
class _RedactedThinking(TypedDict):
    """``anthropic.types.RedactedThinkingBlockParam``."""

    type: Literal["redacted_thinking"]
    data: str


_TAKEN: dict[str, TypeAdapter[Any]] = {
    "reasoning": TypeAdapter(_ResponsesItem),
    "thinking": TypeAdapter(_Thinking),
    "redacted_thinking": TypeAdapter(_RedactedThinking),
}
TAKEN_BACK: dict[str, frozenset[str]] = {
    "reasoning": frozenset(_ResponsesItem.__annotations__),
    "thinking": frozenset(_Thinking.__annotations__),
    "redacted_thinking": frozenset(_RedactedThinking.__annotations__),
}
"""The keys each kind of reasoning item is taken back with, as the providers' SDK request types
declare them (a test holds them to the installed SDKs): a key outside them is refused by the
request's check, and by the API of that version."""

KNOWN_ITEM_KINDS: frozenset[str] = frozenset(TAKEN_BACK) | HOSTED_RESPONSES_ITEMS | ANTHROPIC_SERVER_BLOCKS
"""Every kind of item (``raw["type"]``) some provider's reasoning of this release takes: one of
them refused under another provider is damage, not a newer release's kind
(``release_versions.newer_release_parts``)."""

_BASE64 = TypeAdapter(bytes, config=ConfigDict(val_json_bytes="base64"))
"""A Gemini ``thoughtSignature`` as google-genai reads it (``Part`` is a model of base64 bytes)."""


class ReasoningRefusal(_Frozen):
    """Why a provider refuses one piece of a response's reasoning back (an item, or a signature)."""

    piece: Integer = Field(ge=0)
    """Its index in the response's ``items`` (or ``signatures``)."""
    why: str
    always: bool
    """No version of the API takes it back (a signed block without its signature, an item placed
    after the calls it could precede, a signature that is not base64): an append refuses it. Else
    the request type in use does not take it as it stands (a key it does not know, a field of
    another shape): a later API may, and the runtime logged its provider's own reply, so it is
    logged and only left out of the requests."""


def _shape(raw: dict[str, Any]) -> tuple[str, bool] | None:
    """Why the request type of ``raw``'s kind refuses it, and whether always, or None. Always: an
    Anthropic block without a field its API requires (``signature``, ``data``: a signed block
    goes back whole or not at all). Not always: a key the type does not know, or a Responses item
    of another shape (a later API may take it)."""
    kind = raw.get("type")
    adapter = _TAKEN.get(kind) if isinstance(kind, str) else None
    if adapter is None:  # the reasoning's own validator names the kinds
        return None
    try:
        adapter.validate_python(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        wrong = [e for e in errors if e["type"] != "extra_forbidden"]
        if not wrong:
            keys = ", ".join(repr(str(e["loc"][-1])) for e in errors)
            return f"holds {keys}, which its request type does not take", False
        where = ".".join(map(str, wrong[0]["loc"]))
        return (f"is not what its request type takes back ({where}: {wrong[0]['msg']})",
                kind != "reasoning")
    return None


def reasoning_refusals(reasoning: Reasoning, calls: int, *, text_after: int = 0
                       ) -> tuple[ReasoningRefusal, ...]:
    """Each piece of ``reasoning`` (of a response making ``calls`` calls) its provider refuses back.
    ``text_after``: the number of the response's other parts before its last piece of text
    (``ModelResponse.text_breaks``; 0 when its text stood before its calls): a reasoning item
    after the last call that a message follows led to that message, and goes back before it.

    Why: accepted at append, such a piece made every build for its provider fail the request's
    check, for good (the log is append-only): a Responses reasoning item after the response's
    last call that no hosted tool's item follows (``before_call == calls``: the API takes a
    reasoning item back only before the item it led to; a hosted item after the calls, a
    ``web_search_call`` the model made after a ``function_call``, is the response's own and goes
    back where it stood), a ``thinking`` block without its ``signature``, a signature that is not
    base64, a key the SDK does not know. Write-side rule and fold agree through this one function: what is
    ``always`` refused is refused at append (``domain.log``), and the fold leaves out of requests
    every refused piece a log already holds (``projections.fold``), saying so in the manifest."""
    out: list[ReasoningRefusal] = []
    if isinstance(reasoning, GeminiReasoning):
        for n, signed in enumerate(reasoning.signatures):
            try:
                _BASE64.validate_json(json.dumps(signed.signature))
            except ValidationError:
                out.append(ReasoningRefusal(piece=n, why=f"thought signature {n + 1} is not base64",
                                            always=True))
        return tuple(out)
    kind = "reasoning item" if isinstance(reasoning, OpenAIResponsesReasoning) else "thinking block"
    for n, item in enumerate(reasoning.items):
        where = f"{kind} {n + 1}"
        if item.before_call > calls:
            out.append(ReasoningRefusal(piece=n, always=True, why=(
                f"{where} stands after call {item.before_call} of a response that made {calls}")))
        elif calls and item.before_call == calls and isinstance(reasoning, OpenAIResponsesReasoning) and (
                item.raw.get("type") == "reasoning" and text_after <= calls + n and not any(
                    later.raw.get("type") in HOSTED_RESPONSES_ITEMS for later in reasoning.items[n + 1:])):
            out.append(ReasoningRefusal(piece=n, always=True, why=(
                f"{where} stands after the response's last call: the API takes a reasoning item back "
                "only before the item it led to (one before the next response's output is that one's)")))
        elif (shape := _shape(item.raw)) is not None:
            out.append(ReasoningRefusal(piece=n, why=f"{where} {shape[0]}", always=shape[1]))
    return tuple(out)


def sendable_reasoning(reasoning: Reasoning, calls: int, *, text_after: int = 0
                       ) -> tuple[Reasoning | None, tuple[ReasoningRefusal, ...]]:
    """``reasoning`` without the pieces its provider refuses back (None when none is left), and
    the refusals (:func:`reasoning_refusals`). The same object when it refuses none."""
    refused = reasoning_refusals(reasoning, calls, text_after=text_after)
    if not refused:
        return reasoning, ()
    return _without(reasoning, {r.piece for r in refused}), refused


def appendable_reasoning(reasoning: Reasoning, calls: int, *, text_after: int = 0
                         ) -> tuple[Reasoning | None, tuple[ReasoningRefusal, ...]]:
    """``reasoning`` without the pieces an append refuses (those ``always`` refused back: None when
    none is left), and those refusals. What an import records of a trace that holds such a piece
    (a thinking block whose signature a logger dropped): the rest of the run, not a failed import."""
    refused = tuple(r for r in reasoning_refusals(reasoning, calls, text_after=text_after) if r.always)
    if not refused:
        return reasoning, ()
    return _without(reasoning, {r.piece for r in refused}), refused


def _without(reasoning: Reasoning, gone: set[int]) -> Reasoning | None:
    """``reasoning`` without its pieces numbered ``gone`` (None when none is left)."""
    if isinstance(reasoning, GeminiReasoning):
        signatures = tuple(s for n, s in enumerate(reasoning.signatures) if n not in gone)
        return reasoning.model_copy(update={"signatures": signatures}) if signatures else None
    items = tuple(item for n, item in enumerate(reasoning.items) if n not in gone)
    return reasoning.model_copy(update={"items": items}) if items else None
