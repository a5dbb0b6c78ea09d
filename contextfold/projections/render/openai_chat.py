"""OpenAI Chat Completions request body from a :class:`Conversation`.

Shape (``POST /v1/chat/completions``)::

    {"model": ..., "messages": [system, user, assistant{tool_calls}, tool...],
     "tools": [{"type": "function", "function": {...}}], "max_completion_tokens": N}

Decisions:

- One ``system`` message joins the runtime instruction segments with blank
  lines. A plain string (not content parts) because every OpenAI-compatible
  server accepts it; user-authority text never goes there.
- User text is a plain string when the message is a single text part, content
  parts otherwise. Data parts become text parts holding a data block.
- Tool results are text-only in this API, so each result is one ``tool``
  message by ``tool_call_id`` whose content is the runtime header plus data
  blocks. Media a tool returned cannot go in a ``tool`` message: it follows
  the batch's tool messages in one user message, labelled by the runtime.
- ``max_completion_tokens`` rather than the deprecated ``max_tokens``, which
  reasoning models reject.
- Tools keep the conversation's sorted order; schemas are canonical JSON so the
  stable prefix is byte-identical across turns. OpenAI caches prefixes
  automatically; there are no breakpoints to place.
"""

from __future__ import annotations

from typing import Any, assert_never

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    MediaPart,
    Message,
    ToolResults,
    UserMessage,
    UserPart,
)
from contextfold.domain.events import ToolSpec
from contextfold.projections.media_limits import file_ref
from contextfold.projections.render._shared import (
    OPENAI_CHAT_FILE_TYPES,
    data_url,
    document_filename,
    refused_media_note,
    system_texts,
    unsent_document_note,
)
from contextfold.projections.render.data_blocks import (
    TOOL_MEDIA_NOTE,
    media_caption,
    render_data,
    tool_result_text,
)
from contextfold.projections.render.runtime_lines import media_follows_line
from contextfold.projections.render.tool_schemas import sent_schema
from contextfold.projections.request_json import rendered, rendered_all

__all__ = ["PROVIDER", "render_openai_chat"]

PROVIDER = "openai-chat"

def _media_parts(part: MediaPart) -> list[dict[str, Any]]:
    note = refused_media_note(part, PROVIDER)
    if note is not None:
        return [{"type": "text", "text": media_caption(part, note)}]
    parts: list[dict[str, Any]] = []
    if part.trust in ("workspace", "external"):
        parts.append({"type": "text", "text": media_caption(part)})
    match part.kind:
        case "image":
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": data_url(part, PROVIDER), "detail": part.detail},
                }
            )
        case "document":
            # Chat Completions takes PDF files, inline only: anything else is named, never
            # dropped in silence (an audio file sent as a file part is refused by the API). A
            # file of OpenAI's Files API goes by its id (the API knows its type).
            ref = file_ref(part.url)
            if ref is not None:
                parts.append({"type": "file", "file": {"file_id": ref[1]}})
                return parts
            extension = OPENAI_CHAT_FILE_TYPES.get(part.media_type)
            if extension is None:
                note = unsent_document_note(part, "this API takes PDF documents only")
                return [{"type": "text", "text": media_caption(part, note)}]
            if part.data_base64 is None:
                note = unsent_document_note(part, "this API takes documents inline only")
                return [{"type": "text", "text": media_caption(part, note)}]
            parts.append(
                {"type": "file", "file": {"file_data": data_url(part, PROVIDER),
                                          "filename": document_filename(part, extension)}}
            )
        case _:
            assert_never(part.kind)
    return parts


def _user_parts(parts: tuple[UserPart, ...]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case InstructionPart():
                content.append({"type": "text", "text": part.text})
            case DataPart():
                content.append({"type": "text", "text": render_data(part)})
            case MediaPart():
                content.extend(_media_parts(part))
            case _:
                assert_never(part)
    return content


def _user_message(parts: tuple[UserPart, ...]) -> dict[str, Any]:
    content = _user_parts(parts)
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": "user", "content": content[0]["text"]}
    return {"role": "user", "content": content}


def _assistant_message(message: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    if message.tool_calls:
        out["content"] = message.text or None
        out["tool_calls"] = [
            {
                "id": call.shown_id(PROVIDER),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    else:
        out["content"] = message.text
    return out


def _tool_messages(message: ToolResults) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for result in message.results:
        out.append(
            {
                "role": "tool",
                "tool_call_id": result.shown_id(PROVIDER),
                "content": tool_result_text(result, media_note=TOOL_MEDIA_NOTE),
            }
        )
        attached = [p for p in result.content if isinstance(p, MediaPart)]
        if attached:
            media.append(
                {
                    "type": "text",
                    "text": media_follows_line(result.call_id, result.name),
                }
            )
            for part in attached:
                media.extend(_media_parts(part))
    if media:
        out.append({"role": "user", "content": media})
    return out


def _message(message: Message) -> list[dict[str, Any]]:
    match message:
        case UserMessage():
            return [_user_message(message.parts)]
        case AssistantMessage():
            return [_assistant_message(message)]
        case ToolResults():
            return _tool_messages(message)
        case _:
            assert_never(message)


def _tool(spec: ToolSpec) -> list[dict[str, Any]]:
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = sent_schema(spec.parameters)
    return [{"type": "function", "function": function}]


def render_openai_chat(conversation: Conversation, *, max_tokens: int | None = None
                       ) -> dict[str, Any]:
    """The Chat Completions body for ``conversation`` (not validated; see ``render``)."""
    messages: list[dict[str, Any]] = []
    texts = system_texts(conversation, PROVIDER)
    if texts:  # once per system tuple: the layout keeps it while the policy is unchanged
        messages.extend(rendered(f"{PROVIDER}:system", conversation.system,
                                 lambda _: [{"role": "system", "content": "\n\n".join(texts)}]))
    messages.extend(rendered_all(PROVIDER, conversation.messages, _message))  # once per message object

    body: dict[str, Any] = {}
    if conversation.model is not None:
        body["model"] = conversation.model
    body["messages"] = messages
    if conversation.tools:
        body["tools"] = rendered_all(PROVIDER, conversation.tools, _tool)
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    return body
