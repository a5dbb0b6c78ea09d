"""Helpers every provider renderer needs and no provider owns.

Kept apart from :mod:`data_blocks` (the trust boundary) so that module stays
about one thing.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, TypeAlias

from contextfold.domain.conversation import (
    UNPARSED_ARGUMENTS_KEY,
    AssistantMessage,
    Conversation,
    MediaPart,
    ToolCallPart,
    arguments_object,
)
from contextfold.domain.errors import RenderError
from contextfold.domain.event_values import is_data_url
from contextfold.domain.events import AnthropicReasoning, OpenAIResponsesReasoning, ReasoningItem
from contextfold.domain.text_breaks import text_pieces, turn_parts
from contextfold.projections.media_limits import (
    OPENAI_CHAT_FILE_TYPES,
    OPENAI_RESPONSES_FILE_TYPES,
    refusal,
    unsent_media_note,
)
from contextfold.projections.model_family import OPENAI_CHAT_AUDIO_FORMATS
from contextfold.projections.redact_urls import shown_url

__all__ = [
    "DEFAULT_ANTHROPIC_MAX_TOKENS",
    "OPENAI_CHAT_AUDIO_FORMATS",
    "OPENAI_CHAT_FILE_TYPES",
    "OPENAI_RESPONSES_FILE_TYPES",
    "canonical_schema",
    "data_url",
    "document_filename",
    "object_schema",
    "parse_arguments",
    "reasoning_between",
    "refused_media_note",
    "shown_media",
    "system_texts",
    "turn_in_order",
    "unsent_document_note",
]

DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; this is used when the caller gives none.

4096 is the largest value every current Claude model accepts, so the default
never makes a request invalid for an older model."""


def document_filename(part: MediaPart, extension: str) -> str:
    """The ``filename`` of a document sent as a file: the last segment of its source when that
    already names such a file (``docs/spec.pdf`` -> ``spec.pdf``), else its fragment id with
    the extension (``event://run/9`` -> ``e9.pdf``). The extension is how OpenAI tells the
    file's type; a bare event position ("9") named none."""
    base = part.source.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    if base.lower().endswith(extension) and len(base) > len(extension):
        return base
    return f"{part.fragment_id}{extension}"


def unsent_document_note(part: MediaPart, why: str) -> str:
    """The text standing in for a document a provider cannot take: what it is (media type,
    URL or fragment id) and why it is not attached. Never dropped in silence, never a made-up
    rendition of its content. The URL is shown without its credentials (``redact_urls``): the
    provider fetches nothing from it, so a password or token in it only leaked."""
    return f"document ({part.media_type}) {shown_media(part)}: not attached, {why}"


def refused_media_note(part: MediaPart, provider: str) -> str | None:
    """The note to send instead of ``part`` when ``provider`` refuses it as it is: the one the
    build planned (``MediaPart.unsent``), else the rules ``media_limits`` can read from the part
    itself (type, byte size), for a conversation rendered without a build. None: send it."""
    if part.unsent is not None:
        return part.unsent
    size = (part.artifact.size if part.artifact is not None
            else len(part.data_base64) * 3 // 4 if part.data_base64 is not None else None)
    inline = part.artifact is not None or part.data_base64 is not None
    why = refusal(provider, part.kind, part.media_type, inline=inline, size=size, width=None, height=None,
                  url=part.url)
    return None if why is None else unsent_media_note(part.kind, part.media_type, shown_media(part), why)


def shown_media(part: MediaPart) -> str:
    """A medium named in a note: its URL without credentials, else its fragment id. A ``data:`` URL
    by its fragment id too: its payload is the medium itself, and a note of a document the API
    does not take (an MP3 imported from a Chat history, rendered for Responses) carried all its
    base64 as text."""
    if part.url is None or is_data_url(part.url):
        return part.fragment_id
    return shown_url(part.url)


def canonical_schema(value: Any) -> Any:
    """The JSON value with every object's keys sorted, recursively.

    Tools sit in the stable prefix: a schema whose keys arrive in a different
    order must still render byte-identically, or the prompt cache misses.
    Lists keep their order (``required``, ``enum`` and ``anyOf`` order is meaningful).
    """
    if isinstance(value, dict):
        return {key: canonical_schema(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical_schema(item) for item in value]
    return value


def object_schema(parameters: dict[str, Any]) -> Any:
    """A tool's parameters as the object schema OpenAI and Anthropic take, keys sorted: with
    ``"type": "object"`` when it names no type or a list of types with object among them
    (Anthropic: "input_schema.type: Field required";
    OpenAI: "schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'"), and
    ``"properties": {}`` when an object schema lists none, or lists them as null or ``[]``
    (OpenAI: "object schema missing properties"; a parameterless tool is often registered as
    ``{}``, and a tool the log never registered is declared as ``{"type": "object"}``). A call's
    input is always an object, so neither key narrows what the model may send. A schema of
    another type is left as it is for the protocol check to name."""
    kind = parameters.get("type")
    if kind is None or (isinstance(kind, list) and "object" in kind):  # ["object", "null"]: a call's
        parameters = {**parameters, "type": "object"}  # input is an object, never null
    if parameters["type"] == "object" and parameters.get("properties") in (None, []):
        # (null and [] are how Go and PHP serialise an empty map: both refused as not an object)
        parameters = {**parameters, "properties": {}}
    return canonical_schema(parameters)


def parse_arguments(call: ToolCallPart) -> dict[str, Any]:
    """Tool-call arguments as the JSON object Anthropic and Gemini require.

    The arguments are kept verbatim as the model produced them; these providers
    want a parsed object. Empty text means ``{}`` (OpenAI-compatible models send it
    for a parameterless call). Text that is not a JSON object (a model's output cut
    off mid-arguments, an array) is sent as ``{"unparsed_arguments": text}``: the
    model sees exactly what it wrote, nothing is guessed, and the run stays
    buildable. (Refusing to render it made every later request of the run fail for
    these providers while the call stayed in the window.) The manifest lists such
    calls as ``tool_arguments_not_an_object:<call id>`` repairs.
    """
    value = arguments_object(call.arguments)
    return {UNPARSED_ARGUMENTS_KEY: call.arguments} if value is None else value


def data_url(part: MediaPart, provider: str) -> str:
    """The part's URL, or a ``data:`` URL of its inline bytes."""
    if part.data_base64 is not None:
        return f"data:{part.media_type};base64,{part.data_base64}"
    if part.url is not None:
        return part.url
    raise RenderError(
        provider,
        f"media part {part.fragment_id!r} has neither inline data nor a URL "
        "(load the artifact bytes before rendering)",
    )


def system_texts(conversation: Conversation, provider: str) -> list[str]:
    """The system segments' texts; only runtime authority may sit in the system role."""
    texts: list[str] = []
    for part in conversation.system:
        if part.authority != "runtime":
            raise RenderError(
                provider,
                f"system part {part.fragment_id!r} has {part.authority} authority; "
                "only runtime instructions may be rendered as system",
            )
        texts.append(part.text)
    return texts


def reasoning_between(items: tuple[ReasoningItem, ...], calls: int) -> list[list[dict[str, Any]]]:
    """A response's reasoning items (Anthropic blocks, OpenAI items) placed where they stood:
    ``out[k]`` goes right before its ``k``-th call (``out[0]`` before the text as well), and
    ``out[calls]`` after the last call. Each is a deep copy of the logged JSON, verbatim (the
    body is handed out and edited, the event's JSON never)."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(calls + 1)]
    for item in items:
        out[min(item.before_call, calls)].append(copy.deepcopy(item.raw))
    return out


TurnEntry: TypeAlias = tuple[Literal["text"], str] | tuple[Literal["item"], dict[str, Any]] | tuple[
    Literal["call"], ToolCallPart]


def turn_in_order(message: AssistantMessage, sent: tuple[ReasoningItem, ...]) -> list[TurnEntry]:
    """An assistant turn's text, its ``sent`` reasoning items (deep copies of the logged JSON,
    verbatim) and its calls, in the order a renderer whose format has one sends them.

    Without ``text_breaks`` (a response whose text stood before its calls, and every response
    logged before they existed): the items before the first call, the text, then each call with
    the items that stood before it, and those after the last call at the end (as
    :func:`reasoning_between` places them). With them: each piece of the text where it stood
    among the calls and the items (``domain.text_breaks``). Why: an Anthropic turn [text,
    tool_use, text] went back with both texts first, the model shown saying before its call what
    it wrote after it. The items the message holds but ``sent`` leaves out (another provider's, a
    model's that does not reason) are skipped where they stood."""
    calls = len(message.tool_calls)
    if not message.text_breaks:
        placed = reasoning_between(sent, calls)
        out: list[TurnEntry] = [("item", raw) for raw in placed[0]]
        if message.text:
            out.append(("text", message.text))
        for n, call in enumerate(message.tool_calls):
            if n:
                out += [("item", raw) for raw in placed[n]]
            out.append(("call", call))
        if calls:
            out += [("item", raw) for raw in placed[calls]]
        return out
    reasoning = message.reasoning
    logged = reasoning.items if isinstance(reasoning, AnthropicReasoning | OpenAIResponsesReasoning) else ()
    kept = {id(item) for item in sent}
    parts = turn_parts(calls, [item.before_call for item in logged])
    pieces = text_pieces(message.text, message.text_breaks)
    out = []
    for j in range(len(parts) + 1):
        out += [("text", piece) for after, piece in pieces if min(after, len(parts)) == j and piece]
        if j < len(parts):
            kind, n = parts[j]
            if kind == "call":
                out.append(("call", message.tool_calls[n]))
            elif id(logged[n]) in kept:
                out.append(("item", copy.deepcopy(logged[n].raw)))
    return out
