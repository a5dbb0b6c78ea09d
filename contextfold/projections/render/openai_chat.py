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
- Audio (WAV, MP3) goes as an ``input_audio`` part only when the request's model is an audio
  model (``model_family.chat_audio_model``): Chat Completions refuses the whole request of any
  other model that carries one, so for those the audio is a note naming it. The messages'
  renders are kept per message object (``request_json.rendered``), so they are kept apart for
  the two (:func:`_render_key`): a run built for gpt-4o and then for gpt-4o-audio-preview (or back)
  gets each its own form.
- Tool results are text-only in this API, so each result is one ``tool``
  message by ``tool_call_id`` whose content is the runtime header plus data
  blocks. Media a tool returned cannot go in a ``tool`` message: it follows
  the batch's tool messages in one user message, labelled by the runtime.
- An assistant message takes at most 128 tool calls (``MAX_CHAT_TOOL_CALLS``: "Invalid
  'messages[2].tool_calls': array too long"). A reply with more (imported from a runtime or
  provider that allowed it, or a model's large parallel batch) is sent as consecutive assistant
  messages of at most 128 calls each, its text in the first, each followed by the tool messages
  of its own calls: every call keeps its answer, and the run stays buildable for this API. Media
  its tools returned follow the last of them, as for any batch (``_split_turn``).
- An assistant message is one ``content`` and its ``tool_calls``, with no order between them:
  text another provider's model wrote after a call (``AssistantMessage.text_breaks``) goes in
  the content, whole, with the rest of the text (the pieces as the log joined them). Splitting
  it into a second assistant message after the tool messages would show the model a text
  written after seeing the results, which it was not.
- ``max_completion_tokens`` rather than the deprecated ``max_tokens``, which
  reasoning models reject.
- Tools keep the conversation's sorted order; schemas are canonical JSON so the
  stable prefix is byte-identical across turns. OpenAI caches prefixes
  automatically; there are no breakpoints to place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, assert_never

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    MediaPart,
    Message,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
    UserPart,
)
from contextfold.domain.event_values import base64_data_url, media_type_key
from contextfold.domain.events import ToolSpec
from contextfold.projections.media_limits import (
    AUDIO_INLINE_ONLY,
    DOCUMENTS_INLINE_ONLY,
    NOT_AN_AUDIO_MODEL,
    PDF_ONLY,
    file_ref,
)
from contextfold.projections.model_family import chat_audio_model
from contextfold.projections.render._shared import (
    OPENAI_CHAT_AUDIO_FORMATS,
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
from contextfold.projections.render.tool_checks import MAX_CHAT_TOOL_CALLS
from contextfold.projections.render.tool_schemas import sent_schema
from contextfold.projections.request_json import on_clear, rendered, rendered_all

__all__ = ["PROVIDER", "render_openai_chat"]

PROVIDER = "openai-chat"

# NOT_AN_AUDIO_MODEL (``media_limits``) names no model: the render is kept for every model that
# is not an audio model alike (:func:`_render_key`). A build plans the note (``MediaPart.unsent``).


def _render_key(audio: bool) -> str:
    """The key the messages' renders are kept under: apart for an audio model, whose requests
    carry audio where the others' carry a note."""
    return f"{PROVIDER}+audio" if audio else PROVIDER


def _inline_base64(part: MediaPart) -> str | None:
    """The part's bytes as base64 (``input_audio`` takes no URL, not even a ``data:`` one), or
    None for a medium only a remote URL holds."""
    if part.data_base64 is not None:
        return part.data_base64
    inline = None if part.url is None else base64_data_url(part.url)
    return None if inline is None else inline[1]


def _audio_parts(part: MediaPart, audio: bool, parts: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """An audio document: an ``input_audio`` part for an audio model (after its caption, if any),
    else a note; a note too where the bytes are not inline."""
    if not audio:
        return [{"type": "text", "text": media_caption(part, unsent_document_note(part, NOT_AN_AUDIO_MODEL))}]
    data = _inline_base64(part)
    if data is None:
        return [{"type": "text", "text": media_caption(part, unsent_document_note(
            part, AUDIO_INLINE_ONLY))}]
    parts.append({"type": "input_audio", "input_audio": {"data": data, "format": fmt}})
    return parts


def _media_parts(part: MediaPart, audio: bool) -> list[dict[str, Any]]:
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
            fmt = OPENAI_CHAT_AUDIO_FORMATS.get(media_type_key(part.media_type))
            if fmt is not None:
                return _audio_parts(part, audio, parts, fmt)
            extension = OPENAI_CHAT_FILE_TYPES.get(media_type_key(part.media_type))
            if extension is None:
                note = unsent_document_note(part, PDF_ONLY)
                return [{"type": "text", "text": media_caption(part, note)}]
            if part.data_base64 is None:
                note = unsent_document_note(part, DOCUMENTS_INLINE_ONLY)
                return [{"type": "text", "text": media_caption(part, note)}]
            parts.append(
                {"type": "file", "file": {"file_data": data_url(part, PROVIDER),
                                          "filename": document_filename(part, extension)}}
            )
        case _:
            assert_never(part.kind)
    return parts


def _user_parts(parts: tuple[UserPart, ...], audio: bool) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case InstructionPart():
                content.append({"type": "text", "text": part.text})
            case DataPart():
                content.append({"type": "text", "text": render_data(part)})
            case MediaPart():
                content.extend(_media_parts(part, audio))
            case _:
                assert_never(part)
    return content


def _user_message(parts: tuple[UserPart, ...], audio: bool) -> dict[str, Any]:
    content = _user_parts(parts, audio)
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": "user", "content": content[0]["text"]}
    return {"role": "user", "content": content}


def _assistant_message(text: str, calls: Sequence[ToolCallPart]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    if calls:
        out["content"] = text or None
        out["tool_calls"] = [
            {
                "id": call.shown_id(PROVIDER),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    else:
        out["content"] = text
    return out


def _tool_messages(results: Sequence[ToolResultPart], audio: bool
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One ``tool`` message per result, and the parts of the user message that carries the media
    they returned (a ``tool`` message takes text only)."""
    out: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for result in results:
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
                media.extend(_media_parts(part, audio))
    return out, media


def _with_media(out: list[dict[str, Any]], media: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if media:
        out.append({"role": "user", "content": media})
    return out


Turn: TypeAlias = tuple[AssistantMessage, ToolResults | None]
"""An assistant message with more calls than one message takes, and the results after it: rendered
together (``_split_turn``)."""


def _split_turn(turn: Turn, audio: bool) -> list[dict[str, Any]]:
    """An assistant message of more than ``MAX_CHAT_TOOL_CALLS`` calls as consecutive assistant
    messages of at most that many, its text in the first, each followed by the tool messages of
    its own calls (a result is placed by its call's id; one no call of the message has goes with
    the last part, for the protocol check to name). The media the tools returned follow the last
    tool message in one user message, as for a batch sent whole: the turn stays one run of the
    model's messages and their answers. (Chat Completions carries no reasoning back.)"""
    assistant, results = turn
    calls = assistant.tool_calls
    parts = [calls[i:i + MAX_CHAT_TOOL_CALLS] for i in range(0, len(calls), MAX_CHAT_TOOL_CALLS)]
    part_of = {call.shown_id(PROVIDER): k for k, part in enumerate(parts) for call in part}
    answers: list[list[ToolResultPart]] = [[] for _ in parts]
    for result in results.results if results is not None else ():
        answers[part_of.get(result.shown_id(PROVIDER), len(parts) - 1)].append(result)
    out: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for k, part in enumerate(parts):
        out.append(_assistant_message(assistant.text if k == 0 else "", part))
        tools, returned = _tool_messages(answers[k], audio)
        out.extend(tools)
        media.extend(returned)
    return _with_media(out, media)


def _message(message: Message | Turn, audio: bool) -> list[dict[str, Any]]:
    match message:
        case UserMessage():
            return [_user_message(message.parts, audio)]
        case AssistantMessage():
            if len(message.tool_calls) > MAX_CHAT_TOOL_CALLS:
                _noted_large(message)
            return [_assistant_message(message.text, message.tool_calls)]
        case ToolResults():
            return _with_media(*_tool_messages(message.results, audio))
        case (AssistantMessage(), _):
            return _split_turn(message, audio)
        case _:
            assert_never(message)


_LARGE: dict[int, AssistantMessage] = {}
"""id -> an assistant message rendered with more calls than one message takes. The render of a
message is kept per message object (``request_json``), so a later body is made of kept dicts
without looking at the messages: these are the ones it must send split (:func:`_history`)."""
_TURNS: dict[int, Turn] = {}
"""id of such an assistant message -> the turn last rendered for it (it and its results): the same
tuple while they are the same objects, so its render is kept like a message's."""
_large_seen = object()
"""A new object each time a large message is noted: a body whose render noted one is made again
split even if the memos were emptied meanwhile (another thread, or the render's own bound).

Why an object, not a count: ``+= 1`` on a module global is a read then a store, and threads render
at once. A thread that had read the count and stored its bump after two others had bumped it set
the count back to the value a third had read before noting its own message; with the memos
emptied meanwhile, that third sent the message unsplit. A body compares the object it read with
``is``, and no store can bring back an object another render still holds, whatever the order of
the stores."""


def _clear_large() -> None:
    _LARGE.clear()
    _TURNS.clear()


on_clear(_clear_large)  # emptied with the render memo: a message rendered again is noted again


def _noted_large(message: AssistantMessage) -> None:
    global _large_seen
    _LARGE[id(message)] = message
    _large_seen = object()


def _turn(assistant: AssistantMessage, results: ToolResults | None) -> Turn:
    hit = _TURNS.get(id(assistant))
    if hit is not None and hit[0] is assistant and hit[1] is results:
        return hit
    turn = _TURNS[id(assistant)] = (assistant, results)
    return turn


def _plain_message(message: Message | Turn) -> list[dict[str, Any]]:
    return _message(message, False)


def _audio_message(message: Message | Turn) -> list[dict[str, Any]]:
    return _message(message, True)


_RENDER: dict[bool, Callable[[Message | Turn], list[dict[str, Any]]]] = {False: _plain_message,
                                                                        True: _audio_message}


def _history(messages: tuple[Message, ...], audio: bool = False) -> list[dict[str, Any]]:
    """The rendered messages. Most runs never have a message of more than ``MAX_CHAT_TOOL_CALLS``
    calls, and a body of kept dicts is gathered in C: only when one was seen (now, or in a kept
    render of one of these messages) are the messages walked, each such message rendered with
    the results after it (:func:`_split_turn`)."""
    seen = _large_seen
    key, render = _render_key(audio), _RENDER[audio]
    out = rendered_all(key, messages, render)  # once per message object (and kind of model)
    if seen is _large_seen and (not _LARGE or _LARGE.keys().isdisjoint(map(id, messages))):
        return out
    items: list[Message | Turn] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if isinstance(message, AssistantMessage) and len(message.tool_calls) > MAX_CHAT_TOOL_CALLS:
            after = messages[i + 1] if i + 1 < n else None
            results = after if isinstance(after, ToolResults) else None
            items.append(_turn(message, results))
            i += 2 if results is not None else 1
        else:
            items.append(message)
            i += 1
    return rendered_all(key, items, render)


def _tool(spec: ToolSpec) -> list[dict[str, Any]]:
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = sent_schema(spec.parameters)
    if spec.strict is not None:
        function["strict"] = spec.strict
    return [{"type": "function", "function": function}]


def render_openai_chat(conversation: Conversation, *, max_tokens: int | None = None
                       ) -> dict[str, Any]:
    """The Chat Completions body for ``conversation`` (not validated; see ``render``)."""
    messages: list[dict[str, Any]] = []
    texts = system_texts(conversation, PROVIDER)
    if texts:  # once per system tuple: the layout keeps it while the policy is unchanged
        messages.extend(rendered(f"{PROVIDER}:system", conversation.system,
                                 lambda _: [{"role": "system", "content": "\n\n".join(texts)}]))
    messages.extend(_history(conversation.messages, chat_audio_model(conversation.model)))

    body: dict[str, Any] = {}
    if conversation.model is not None:
        body["model"] = conversation.model
    body["messages"] = messages
    if conversation.tools:
        body["tools"] = rendered_all(PROVIDER, conversation.tools, _tool)
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    return body
