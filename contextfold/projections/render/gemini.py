"""Google Gemini ``generateContent`` request body from a :class:`Conversation`.

Shape (``POST /v1beta/models/{model}:generateContent``, REST JSON, camelCase)::

    {"systemInstruction": {"parts": [{"text": ...}]},
     "contents": [{"role": "user"|"model", "parts": [...]}...],
     "tools": [{"functionDeclarations": [...]}],
     "generationConfig": {"maxOutputTokens": N}}

Decisions:

- The model is part of the URL, not of the body, so ``model`` is not emitted
  (the caller passes ``conversation.model`` to the client).
- Consecutive contents of the same role are merged: Gemini expects a
  function-call turn to be followed by exactly one function-response turn. Except one: a user
  message after function responses is a content of its own, not merged into theirs. Gemini's
  "current turn" (the one whose signatures it validates, and bills) starts at the last user
  content with standard content, not a ``functionResponse``; recorded requests send the new user
  message so (pydantic-ai's, as Google's own examples append ``Content(role="user",
  parts=[function_response_part])``), and were billed for the signatures of the current turn
  only: gemini-3-flash-preview's first request of a new user turn was billed 304-315 tokens where
  the one before it, holding less of the same history, was billed 1,091-1,354. Merged, Gemini's
  reading of the turn's start is undocumented and unrecorded; apart, the results' content also
  keeps its bytes when the message arrives (a prompt cache's prefix).
- Calls are ``functionCall {name, args, id}`` parts; ``args`` is the parsed
  arguments object (text that is not a JSON object is sent verbatim as
  ``{"unparsed_arguments": text}``). Results are ``functionResponse {name, response, id}``
  parts in one user content, in call order; ``response`` is
  ``{"output": text}`` on success and ``{"error": text}`` otherwise, the keys
  Google documents. Media a tool returned follows the function responses as
  ``inlineData``/``fileData`` parts of the same content. A medium of a type Gemini does not take
  (an Office file, an image whose type the log does not know) is a note saying so. A call's ``id`` is its
  logged id, or its alias when the run reused the id (``projections.call_ids``):
  Google documents the id as unique.
- Gemini 3 rejects a function call without a ``thoughtSignature``. The log keeps the
  signatures Gemini returned (``events.GeminiReasoning``): each goes back on the part it came
  on. A turn another provider made (a hand-off), or one logged without them, has none: its
  first call carries Google's documented bypass value :data:`SKIP_THOUGHT_SIGNATURE` (see
  ai.google.dev/gemini-api/docs/thought-signatures). Another provider's reasoning is not sent
  (``projections.reasoning``).
- Tool schemas go in ``parametersJsonSchema`` (JSON Schema, as recorded in
  accepted requests), canonicalised. Stripped keywords: ``$schema``, ``$id``
  and ``$comment`` (metadata Gemini does not accept); every other keyword
  is kept.
"""

from __future__ import annotations

from typing import Any, assert_never

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    MediaPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
    UserPart,
)
from contextfold.domain.errors import RenderError
from contextfold.domain.events import GeminiReasoning
from contextfold.projections.render._shared import (
    object_schema,
    parse_arguments,
    refused_media_note,
    system_texts,
    turn_in_order,
)
from contextfold.projections.render.data_blocks import (
    media_caption,
    render_data,
    returned_media_note,
)
from contextfold.projections.render.runtime_lines import runtime_header

__all__ = ["PROVIDER", "SKIP_THOUGHT_SIGNATURE", "STRIPPED_SCHEMA_KEYWORDS", "render_gemini"]

PROVIDER = "gemini"
SKIP_THOUGHT_SIGNATURE = "skip_thought_signature_validator"
STRIPPED_SCHEMA_KEYWORDS = frozenset({"$schema", "$id", "$comment"})


_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                            "dependencies"})
"""Keywords whose value maps names (a property's, a definition's) to schemas: its keys are not keywords."""
_SCHEMA_DATA = frozenset({"default", "examples", "enum", "const", "dependentRequired"})
"""Keywords whose value is data, not a schema, kept as written (so is an ``x-`` extension's)."""


def _strip_schema(value: Any) -> Any:
    """The schema without the keywords Gemini refuses, removed only where they are keywords: a
    property named ``$id`` was dropped from ``properties`` while ``required`` still named it."""
    if isinstance(value, list):
        return [_strip_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in STRIPPED_SCHEMA_KEYWORDS:
            continue
        if key in _SCHEMA_DATA or key.startswith("x-"):
            out[key] = item
        elif key in _NAMED_SCHEMAS and isinstance(item, dict):
            out[key] = {name: _strip_schema(schema) for name, schema in item.items()}
        else:
            out[key] = _strip_schema(item)
    return out


def _media_parts(part: MediaPart) -> list[dict[str, Any]]:
    """The medium as ``inlineData``/``fileData``, or the note that stands for it when Gemini
    refuses its type (``media_limits.GEMINI_MEDIA_TYPES``: "Unsupported MIME type: ...")."""
    note = refused_media_note(part, PROVIDER)
    if note is not None:
        return [{"text": media_caption(part, note)}]
    parts: list[dict[str, Any]] = []
    if part.trust in ("workspace", "external"):
        parts.append({"text": media_caption(part)})
    if part.data_base64 is not None:
        parts.append({"inlineData": {"mimeType": part.media_type, "data": part.data_base64}})
    elif part.url is not None:
        parts.append({"fileData": {"mimeType": part.media_type, "fileUri": part.url}})
    else:
        raise RenderError(
            PROVIDER,
            f"media part {part.fragment_id!r} has neither inline data nor a URL "
            "(load the artifact bytes before rendering)",
        )
    return parts


def _user_parts(parts: tuple[UserPart, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case InstructionPart():
                if part.text:
                    out.append({"text": part.text})
            case DataPart():
                out.append({"text": render_data(part)})
            case MediaPart():
                out.extend(_media_parts(part))
            case _:
                assert_never(part)
    return out


def _model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    """The text part, then one part per call (a text part the model wrote after a call goes back
    after it: ``turn_in_order``). A ``thoughtSignature`` Gemini gave goes back on the part it came
    on: a call's on that call, another's on the text part (the last, when the text stood in
    pieces; with no text, on an empty text part of its own); the first call without one carries
    the bypass value."""
    reasoning = message.reasoning
    signatures = reasoning.signatures if isinstance(reasoning, GeminiReasoning) else ()
    on_call = {s.call: s.signature for s in signatures if s.call is not None}
    loose = [s.signature for s in signatures if s.call is None or s.call >= len(message.tool_calls)]
    parts: list[dict[str, Any]] = []
    n = 0
    for entry in turn_in_order(message, ()):
        match entry:
            case ("text", text):
                parts.append({"text": text})
            case ("call", call):
                part: dict[str, Any] = {
                    "functionCall": {
                        "name": call.name,
                        "args": parse_arguments(call),
                        "id": call.shown_id(PROVIDER),
                    }
                }
                if n in on_call:
                    part["thoughtSignature"] = on_call[n]
                elif n == 0:
                    part["thoughtSignature"] = SKIP_THOUGHT_SIGNATURE
                parts.append(part)
                n += 1
    texts = [part for part in parts if "functionCall" not in part]
    if loose and texts:
        # on the text part: the one before the calls, or the last (a text signature rides on a
        # response's last part; which of its text parts is not logged)
        (texts[-1] if message.text_breaks else texts[0])["thoughtSignature"] = loose.pop(0)
    parts.extend({"text": "", "thoughtSignature": signature} for signature in loose)
    return parts


def _result_parts(message: ToolResults) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for result in message.results:
        responses.append(
            {
                "functionResponse": {
                    "name": result.name,
                    "response": _response(result),
                    "id": result.shown_id(PROVIDER),
                }
            }
        )
        for part in result.content:
            if isinstance(part, MediaPart):
                media.extend(_media_parts(part))
    return responses + media


def _response(result: ToolResultPart) -> dict[str, Any]:
    pieces: list[str] = []
    header = runtime_header(result)
    if header is not None:
        pieces.append(header)
    for part in result.content:
        match part:
            case DataPart():
                pieces.append(render_data(part))
            case MediaPart():
                pieces.append(media_caption(part, returned_media_note(part.kind, part.media_type)))
            case _:
                assert_never(part)
    text = "\n".join(pieces) if pieces else "[runtime] the tool returned no output."
    return {"error": text} if result.is_error else {"output": text}


def _answers(content: dict[str, Any]) -> bool:
    """Whether ``content`` holds function responses: a user message after it starts a new turn,
    in a content of its own (module docstring)."""
    return any("functionResponse" in part for part in content["parts"])


def render_gemini(conversation: Conversation, *, max_tokens: int | None = None
                  ) -> dict[str, Any]:
    """The generateContent body for ``conversation`` (not validated; see ``render``)."""
    contents: list[dict[str, Any]] = []
    for message in conversation.messages:
        role: str
        match message:
            case UserMessage():
                role, parts = "user", _user_parts(message.parts)
            case AssistantMessage():
                role, parts = "model", _model_parts(message)
            case ToolResults():
                role, parts = "user", _result_parts(message)
            case _:
                assert_never(message)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role and not (
                isinstance(message, UserMessage) and _answers(contents[-1])):
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    body: dict[str, Any] = {}
    texts = [t for t in system_texts(conversation, PROVIDER) if t]
    if texts:
        body["systemInstruction"] = {"parts": [{"text": t} for t in texts]}
    body["contents"] = contents
    if conversation.tools:
        declarations: list[dict[str, Any]] = []
        for spec in conversation.tools:
            decl: dict[str, Any] = {"name": spec.name}
            if spec.description:
                decl["description"] = spec.description
            # an object schema as the others get it: JSON Schema has no null or [] properties
            # (Go's and PHP's empty map), and a call's arguments are an object
            decl["parametersJsonSchema"] = object_schema(_strip_schema(spec.parameters))
            declarations.append(decl)
        body["tools"] = [{"functionDeclarations": declarations}]
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens}
    return body
