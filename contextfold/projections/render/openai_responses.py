"""OpenAI Responses request body from a :class:`Conversation`.

Shape (``POST /v1/responses``)::

    {"model": ..., "instructions": "...", "input": [message | function_call |
     function_call_output ...], "tools": [{"type": "function", ...}],
     "max_output_tokens": N}

Decisions:

- ``instructions`` carries the runtime segments (joined by blank lines); it is
  the Responses equivalent of the system role, so user text never goes there.
- Every input item is explicit (``"type": "message"`` included) so the body is
  self-describing and stateless: no ``previous_response_id``, the whole
  context is in ``input``.
- An assistant turn is an assistant message (when it has text) followed by one
  ``function_call`` item per call; the results are ``function_call_output``
  items by ``call_id`` in call order. Unlike Chat Completions, outputs may
  carry images and files, so media a tool returned stays in its own output.
- A turn's ``reasoning`` items (id, summary, ``encrypted_content``) and its hosted tools' items
  (``web_search_call``, ``code_interpreter_call``, ``mcp_call``...), when OpenAI Responses made
  it, go back verbatim before its message and ``function_call`` items (before the call they
  preceded); another provider's reasoning is not sent, nor any to a model that is certainly not a
  reasoning model (``projections.reasoning``).
- ``strict: false`` on tools: strict mode requires schemas we cannot promise
  (every property required, ``additionalProperties: false``).
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
from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import OpenAIResponsesReasoning
from contextfold.domain.reasoning import HOSTED_RESPONSES_ITEMS
from contextfold.projections.media_limits import RESPONSES_FILES_ONLY, file_ref
from contextfold.projections.reasoning import sent_part
from contextfold.projections.render._shared import (
    OPENAI_RESPONSES_FILE_TYPES,
    data_url,
    document_filename,
    refused_media_note,
    system_texts,
    turn_in_order,
    unsent_document_note,
)
from contextfold.projections.render.data_blocks import media_caption, render_data
from contextfold.projections.render.runtime_lines import runtime_header
from contextfold.projections.render.tool_schemas import sent_schema

__all__ = ["PROVIDER", "render_openai_responses"]

PROVIDER = "openai-responses"


def _media_items(part: MediaPart) -> list[dict[str, Any]]:
    note = refused_media_note(part, PROVIDER)
    if note is not None:
        return [{"type": "input_text", "text": media_caption(part, note)}]
    items: list[dict[str, Any]] = []
    if part.trust in ("workspace", "external"):
        items.append({"type": "input_text", "text": media_caption(part)})
    ref = file_ref(part.url)
    match part.kind:
        case "image" if ref is not None:  # a file of OpenAI's Files API: by its id
            items.append({"type": "input_image", "file_id": ref[1], "detail": part.detail})
        case "image":
            items.append(
                {"type": "input_image", "image_url": data_url(part, PROVIDER),
                 "detail": part.detail}
            )
        case "document" if ref is not None:
            items.append({"type": "input_file", "file_id": ref[1]})
        case "document":
            extension = OPENAI_RESPONSES_FILE_TYPES.get(media_type_key(part.media_type))
            if extension is None:  # audio, video, octet-stream: not a file input; named instead
                note = unsent_document_note(part, RESPONSES_FILES_ONLY)
                return [{"type": "input_text", "text": media_caption(part, note)}]
            if part.data_base64 is not None:
                items.append(
                    {"type": "input_file", "file_data": data_url(part, PROVIDER),
                     "filename": document_filename(part, extension)}
                )
            else:
                items.append({"type": "input_file", "file_url": data_url(part, PROVIDER)})
        case _:
            assert_never(part.kind)
    return items


def _user_content(parts: tuple[UserPart, ...]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case InstructionPart():
                content.append({"type": "input_text", "text": part.text})
            case DataPart():
                content.append({"type": "input_text", "text": render_data(part)})
            case MediaPart():
                content.extend(_media_items(part))
            case _:
                assert_never(part)
    return content


def _output(result: ToolResultPart) -> str | list[dict[str, Any]]:
    """A function_call_output's ``output``: a string unless the tool returned media."""
    pieces: list[dict[str, Any]] = []
    header = runtime_header(result)
    if header is not None:
        pieces.append({"type": "input_text", "text": header})
    for part in result.content:
        match part:
            case DataPart():
                pieces.append({"type": "input_text", "text": render_data(part)})
            case MediaPart():
                pieces.extend(_media_items(part))
            case _:
                assert_never(part)
    if not pieces:
        return "[runtime] the tool returned no output."
    if all(piece["type"] == "input_text" for piece in pieces):
        return "\n".join(piece["text"] for piece in pieces)
    return pieces


def _assistant_items(message: AssistantMessage, model: str | None) -> list[dict[str, Any]]:
    """The turn's reasoning and hosted tools' items (its own, verbatim: another provider's are not
    sent, nor reasoning items to a ``model`` that does not reason), its message and its calls, as
    the API returned them: reasoning before what it led to, a message the model wrote after a
    call after it (``turn_in_order``). A turn of hosted items and no text (an image generation)
    sends no empty message."""
    reasoning = message.reasoning
    sent = sent_part(reasoning, PROVIDER, model) if isinstance(reasoning, OpenAIResponsesReasoning) else None
    entries = turn_in_order(message, sent.items if isinstance(sent, OpenAIResponsesReasoning) else ())
    hosted_alone = not message.tool_calls and any(
        entry[0] == "item" and entry[1]["type"] in HOSTED_RESPONSES_ITEMS for entry in entries)
    if not message.text and not (message.tool_calls or hosted_alone):  # an empty turn says so
        entries.append(("text", ""))
    items: list[dict[str, Any]] = []
    for entry in entries:
        match entry:
            case ("text", text):
                items.append({"type": "message", "role": "assistant", "content": text})
            case ("item", raw):
                items.append(raw)
            case ("call", call):
                items.append({"type": "function_call", "call_id": call.shown_id(PROVIDER),
                              "name": call.name, "arguments": call.arguments})
    return items


def render_openai_responses(conversation: Conversation, *, max_tokens: int | None = None
                            ) -> dict[str, Any]:
    """The Responses body for ``conversation`` (not validated; see ``render``)."""
    items: list[dict[str, Any]] = []
    for message in conversation.messages:
        match message:
            case UserMessage():
                items.append(
                    {"type": "message", "role": "user",
                     "content": _user_content(message.parts)}
                )
            case AssistantMessage():
                items.extend(_assistant_items(message, conversation.model))
            case ToolResults():
                items.extend(
                    {"type": "function_call_output", "call_id": result.shown_id(PROVIDER),
                     "output": _output(result)}
                    for result in message.results
                )
            case _:
                assert_never(message)

    body: dict[str, Any] = {}
    if conversation.model is not None:
        body["model"] = conversation.model
    texts = system_texts(conversation, PROVIDER)
    if texts:
        body["instructions"] = "\n\n".join(texts)
    body["input"] = items
    if conversation.tools:
        tools: list[dict[str, Any]] = []
        for spec in conversation.tools:
            tool: dict[str, Any] = {"type": "function", "name": spec.name}
            if spec.description:
                tool["description"] = spec.description
            tool["parameters"] = sent_schema(spec.parameters)
            tool["strict"] = bool(spec.strict)  # Responses' default is strict: said either way
            tools.append(tool)
        body["tools"] = tools
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    return body
