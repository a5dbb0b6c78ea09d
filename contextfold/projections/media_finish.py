"""The media of a laid-out request made sendable: reduced, inlined, deduped, and refused where a
rule of the whole request says so (:func:`finalize_media`, :func:`request_notes`).

Apart from :mod:`contextfold.projections.media_plan` (which prices each fragment's media before
selection) because this runs after the layout, on the conversation: that module's docstring
says what each step does and why.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    MediaPart,
    Message,
    ToolResultPart,
    ToolResults,
    UserMessage,
    UserPart,
)
from contextfold.domain.event_values import base64_data_url, media_type_key
from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock
from contextfold.projections.media_cost import media_family
from contextfold.projections.media_limits import (
    ANTHROPIC_MANY_IMAGES,
    REQUEST_LIMITS,
    base64_length,
    file_ref,
    many_images_notes,
    unsent_media_note,
)
from contextfold.projections.media_plan import inline_size, media_key, refusal_note, shown_medium
from contextfold.projections.render._shared import OPENAI_CHAT_FILE_TYPES, OPENAI_RESPONSES_FILE_TYPES
from contextfold.projections.render.runtime_lines import media_repeat_line
from contextfold.projections.request_json import on_clear

__all__ = ["MediaFinish", "finalize_media", "request_notes"]


@dataclass
class MediaFinish:
    conversation: Conversation
    shown_in: dict[str, dict[str, str]] = field(default_factory=dict)
    """Fragment id -> {media key -> fragment id that carries it} for deduped occurrences."""
    unsent: dict[str, dict[str, str]] = field(default_factory=dict)
    """Fragment id -> {media key -> the note sent in its place} for media the provider refuses
    only in this request (:func:`request_notes`): selected as media, the manifest prices them as
    their notes (:func:`priced_as_sent`)."""
    request_notes: dict[str, str] = field(default_factory=dict)
    """The :func:`request_notes` applied: media key -> why (a rule of the whole request)."""
    payloads: dict[int, str] = field(default_factory=dict)
    """id -> the base64 text of each medium carried inline: what of the body is not its text."""


def _split_data_url(part: MediaPart) -> MediaPart:
    inline = None if part.url is None else base64_data_url(part.url)
    if inline is not None:
        declared, payload = inline
        media_type = media_type_key(declared) or part.media_type  # as the part names it: lower case
        return part.model_copy(update={"data_base64": payload, "url": None, "media_type": media_type})
    return part


def _size_of(part: MediaPart, blocks_of: Callable[[str], tuple[ImageBlock | DocumentBlock, ...]] | None
             ) -> tuple[int | None, int | None]:
    """The logged width and height of ``part`` (its fragment's block of the same key)."""
    if blocks_of is None or part.kind != "image":
        return None, None
    key = media_key(part)
    block = next((b for b in blocks_of(part.fragment_id) if media_key(b) == key), None)
    return getattr(block, "width", None), getattr(block, "height", None)


def _parts(conversation: Conversation) -> list[MediaPart]:
    """The media parts of ``conversation``, in request order."""
    out: list[MediaPart] = []
    for message in conversation.messages:
        if isinstance(message, UserMessage):
            out.extend(p for p in message.parts if isinstance(p, MediaPart))
        elif isinstance(message, ToolResults):
            out.extend(p for r in message.results for p in r.content if isinstance(p, MediaPart))
    return out


def _pages_of(part: MediaPart, blocks_of: Callable[[str], tuple[ImageBlock | DocumentBlock, ...]] | None
              ) -> int | None:
    """The logged page count of a PDF ``part`` (its fragment's block of the same key)."""
    if blocks_of is None or media_type_key(part.media_type) != "application/pdf":
        return None
    key = media_key(part)
    block = next((b for b in blocks_of(part.fragment_id) if media_key(b) == key), None)
    return getattr(block, "pages", None)


def _file_input(provider: str, part: MediaPart, inline: bool) -> bool:
    """Whether an OpenAI renderer sends the document ``part`` as a file input (as the renderers
    decide: a file of OpenAI's Files API by id; Chat Completions a PDF sent as bytes; Responses
    the file types it lists): one it does not is a note, and takes nothing of the request's
    pages or file content."""
    if part.kind != "document":
        return False
    if file_ref(part.url) is not None:
        return True
    if provider == "openai-chat":
        return inline and media_type_key(part.media_type) in OPENAI_CHAT_FILE_TYPES
    return media_type_key(part.media_type) in OPENAI_RESPONSES_FILE_TYPES


def request_notes(conversation: Conversation, provider: str,
                   blocks_of: Callable[[str], tuple[ImageBlock | DocumentBlock, ...]] | None,
                   text_bytes: int) -> dict[str, str]:
    """media key -> why ``provider`` refuses that medium in this request (``media_limits``'s rules
    of the whole request), for the media the request would carry (distinct, not notes already).

    The newest are kept first, the oldest past a limit become notes: the latest input's
    screenshot is what the turn is about, and a request the provider refuses whole, every turn
    while the media are in the window, shows none of them. ``text_bytes``: what the request's
    text takes of a whole-request size, as measured (``request_size``)."""
    family = media_family(provider)
    limits = REQUEST_LIMITS.get(family)
    if limits is None:
        return {}
    media: dict[str, MediaPart] = {}
    for part in _parts(conversation):
        if part.unsent is None and media_key(part) not in media and refusal_note(
                provider, part, part.fragment_id, *_size_of(part, blocks_of), conversation.model) is None:
            media[media_key(part)] = part
    why: dict[str, str] = {}
    room = (None if limits.inline_bytes is None else
            limits.inline_bytes - (text_bytes if limits.text_counts else 0))
    images = pages = size = files = 0
    for key, part in reversed(media.items()):  # the newest first
        inline, raw = inline_size(part)
        filed = family == "openai" and _file_input(provider, part, inline)
        page_count = (_pages_of(part, blocks_of) or 0) if filed or family != "openai" else 0
        sent = base64_length(raw) if inline and raw is not None else 0
        counted = sent if limits.text_counts or part.kind == "image" else 0
        file_size = sent if filed else 0
        if part.kind == "image" and limits.images is not None and images >= limits.images:
            why[key] = f"past {limits.name}'s {limits.images} images in a request (the newest are sent)"
        elif limits.pdf_pages is not None and pages + page_count > limits.pdf_pages:
            why[key] = (f"past {limits.name}'s {limits.pdf_pages} PDF pages in a request ({page_count} "
                        "pages; the newest are sent)")
        elif room is not None and size + counted > room:
            what = "request" if limits.text_counts else "images' bytes in a request"
            why[key] = (f"past {limits.name}'s {(limits.inline_bytes or 0) // (1024 * 1024)} MB {what} "
                        f"({raw} bytes; the newest are sent)")
        elif limits.file_bytes is not None and files + file_size > limits.file_bytes:
            why[key] = (f"past {limits.name}'s {limits.file_bytes // (1024 * 1024)} MB of file inputs in a "
                        f"request ({raw} bytes; the newest are sent)")
        else:
            images += part.kind == "image"
            pages += page_count
            size += counted
            files += file_size
    if family == "anthropic" and images > ANTHROPIC_MANY_IMAGES:
        shown = [(key, *_size_of(part, blocks_of)) for key, part in media.items()
                 if key not in why and part.kind == "image"]
        why.update(many_images_notes(provider, shown))
    return why


def finalize_media(conversation: Conversation, *, reduced: frozenset[str],
                   load_bytes: Callable[[ArtifactRef], bytes] | None, provider: str = "neutral",
                   blocks_of: Callable[[str], tuple[ImageBlock | DocumentBlock, ...]] | None = None,
                   text_bytes: int = 0) -> MediaFinish:
    """Reduce, inline and dedupe the media parts of ``conversation`` (see the module docstring),
    and mark those ``provider`` refuses (``media_limits``) with the note sent in their place:
    their bytes are not loaded. ``blocks_of``: a fragment's priced media, for their logged sizes
    and pages; ``text_bytes``: the request's text, for a limit on its whole size (``request_size``)."""
    seen: dict[str, str] = {}
    finish = MediaFinish(conversation)
    finish.request_notes = notes = request_notes(conversation, provider, blocks_of, text_bytes)

    def carry(part: MediaPart) -> MediaPart | str:
        key = media_key(part)
        # A refused medium is its note wherever it is, as it was priced (never a repeat line
        # pointing at a medium that is not shown); the renderer writes it, no bytes needed.
        width, height = _size_of(part, blocks_of)
        note = refusal_note(provider, part, part.fragment_id, width, height, conversation.model)
        if note is None and (why := notes.get(key)) is not None:
            note = unsent_media_note(part.kind, part.media_type, shown_medium(part, part.fragment_id), why)
            finish.unsent.setdefault(part.fragment_id, {})[key] = note
        if note is not None:
            return part.model_copy(update={"unsent": note})
        first = seen.get(key)
        if first is not None:
            finish.shown_in.setdefault(part.fragment_id, {})[key] = first
            return media_repeat_line(part.kind, key, part.media_type, first)
        seen[key] = part.fragment_id
        if part.fragment_id in reduced and part.kind == "image":
            part = part.model_copy(update={"detail": "low"})
        if part.data_base64 is None and part.url is not None:
            part = _split_data_url(part)
        if part.data_base64 is None and part.artifact is not None and load_bytes is not None:
            data = base64.b64encode(load_bytes(part.artifact)).decode("ascii")
            part = part.model_copy(update={"data_base64": data})
        if part.data_base64 is not None:
            finish.payloads[id(part.data_base64)] = part.data_base64
        return part

    def user_part(part: UserPart) -> UserPart:
        match part:
            case InstructionPart() | DataPart():
                return part
            case MediaPart():
                out = carry(part)
                if isinstance(out, str):
                    return InstructionPart(text=out, authority="runtime", fragment_id=part.fragment_id)
                return out
            case _:
                assert_never(part)

    def result_part(part: DataPart | MediaPart) -> DataPart | MediaPart:
        if isinstance(part, DataPart):
            return part
        out = carry(part)
        if isinstance(out, str):
            return DataPart(text=out, source=part.source or part.fragment_id, trust="runtime",
                            label="media_ref", fragment_id=part.fragment_id)
        return out

    messages: list[Message] = []
    changed = False
    for message in conversation.messages:
        if not _has_media(message):  # most messages: kept as they are (no copy per build)
            messages.append(message)
            continue
        changed = True
        match message:
            case UserMessage():
                messages.append(UserMessage(parts=tuple(user_part(p) for p in message.parts)))
            case AssistantMessage():
                messages.append(message)
            case ToolResults():
                messages.append(ToolResults(results=tuple(
                    ToolResultPart(call_id=r.call_id, alias=r.alias, alias_for=r.alias_for,
                                   name=r.name, status=r.status,
                                   content=tuple(result_part(p) for p in r.content),
                                   exit_code=r.exit_code, fragment_id=r.fragment_id)
                    for r in message.results)))
            case _:
                assert_never(message)
    if changed:
        finish.conversation = conversation.model_copy(update={"messages": tuple(messages)})
    return finish


_MEDIA_FREE: dict[int, Message] = {}
"""Messages known to carry no media, by identity (the layout reuses message objects).
Emptied with ``request_json``'s memos, which hold the same messages."""
on_clear(_MEDIA_FREE.clear)


def _has_media(message: Message) -> bool:
    if _MEDIA_FREE.get(id(message)) is message:
        return False
    if not _scan_media(message):
        if len(_MEDIA_FREE) >= 100_000:
            _MEDIA_FREE.clear()
        _MEDIA_FREE[id(message)] = message
        return False
    return True


def _scan_media(message: Message) -> bool:
    match message:
        case UserMessage():
            return any(p.type == "media" for p in message.parts)
        case AssistantMessage():
            return False
        case ToolResults():
            return any(p.type == "media" for r in message.results for p in r.content)
        case _:
            assert_never(message)
