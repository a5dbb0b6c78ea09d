"""The parts and messages a laid-out request is made of (:mod:`contextfold.projections.layout`).

Apart from the layout because they are the leaves: how one fragment becomes an instruction, a
data block or its media, and how the model's calls and reply are made, whatever section or
timeline item holds them. The layout decides where each goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextfold.domain.conversation import (
    AssistantMessage,
    DataPart,
    InstructionPart,
    MediaPart,
    ToolCallPart,
    UserMessage,
    UserPart,
)
from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import DocumentBlock, ImageBlock, Reasoning, TextBlock, TextBreak
from contextfold.domain.fragments import ContextFragment, ToolResultBlock
from contextfold.domain.trusted import trusted
from contextfold.projections.entries import FragmentEntry, FragmentFields
from contextfold.projections.framing import data_tag, media_alone
from contextfold.projections.state import CallSlot, RunState

__all__ = ["SectionRow", "assistant_message", "authority_part", "call_part", "data_and_media", "data_part",
           "entry_media", "fragment_media", "message_of", "text_of"]

SectionRow = tuple[ContextFragment, str, bool]
"""A state section's fragment, the text to show and whether it was cut."""


def text_of(frag: ContextFragment) -> str:
    parts: list[str] = []
    for block in frag.content:
        if isinstance(block, TextBlock | ToolResultBlock):
            parts.append(block.text)
    return "\n".join(parts)


def fragment_media(frag: ContextFragment, trust_source: str) -> tuple[MediaPart, ...]:
    """Media parts of a fragment, including those a tool returned (``ToolResultBlock.blocks``),
    each named by its type's lower-case spelling (``media_type_key``): the one every rule
    compares and every provider's API lists (RFC 2045: ``Audio/WAV`` is ``audio/wav``)."""
    out: list[MediaPart] = []
    blocks = [b for block in frag.content
              for b in (block.blocks if isinstance(block, ToolResultBlock) else (block,))]
    for block in blocks:
        text = isinstance(block, DocumentBlock) and media_type_key(block.media_type).startswith("text/")
        if isinstance(block, ImageBlock) and (block.url or block.artifact):
            out.append(MediaPart(kind="image", media_type=media_type_key(block.media_type), url=block.url,
                                 artifact=block.artifact, detail=block.detail, source=trust_source,
                                 trust=frag.trust, fragment_id=frag.id))
        elif isinstance(block, DocumentBlock) and not text and (block.url or block.artifact):
            out.append(MediaPart(kind="document", media_type=media_type_key(block.media_type), url=block.url,
                                 artifact=block.artifact, source=trust_source, trust=frag.trust,
                                 fragment_id=frag.id))
    return tuple(out)


def entry_media(state: RunState, entry: FragmentEntry) -> tuple[MediaPart, ...]:
    """:func:`fragment_media` of an entry's fragment (its own source as the media's), made only when the
    run has folded media: a fragment's media parts are priced media, so none before."""
    return fragment_media(entry.fragment, entry.source_ref) if state.media_seen else ()


def data_part(frag: FragmentFields, text: str, truncated: bool, label: str | None = None) -> DataPart:
    return trusted(DataPart, text=text, source=frag.source_ref, trust=frag.trust,
                   label=label or data_tag(frag.kind, frag.trust)[1], truncated=truncated,
                   fragment_id=frag.id)


def data_and_media(frag: FragmentFields, text: str, truncated: bool, media_parts: tuple[MediaPart, ...]
                   ) -> tuple[DataPart | MediaPart, ...]:
    """A data fragment's text block, then its media: none of text that is blank beside media (a
    tool that returned only a PDF or a screenshot). Every provider was sent an empty ``<data>``
    block before such a medium, a block that said nothing."""
    if media_alone(text, bool(media_parts)):  # priced so (``fold_content.shown_as_media_alone``)
        return media_parts
    return (data_part(frag, text, truncated), *media_parts)


def authority_part(frag: ContextFragment, text: str, truncated: bool) -> UserPart:
    if frag.trust in ("runtime", "user"):
        return InstructionPart(text=text, authority=frag.trust, fragment_id=frag.id)
    return data_part(frag, text, truncated)


def message_of(parts: Callable[[ContextFragment, str, bool], tuple[UserPart, ...]]
               ) -> Callable[[list[SectionRow]], tuple[UserMessage, ...]]:
    """A section's one user message of the rows' parts (none for no rows)."""
    def make(rows: list[SectionRow]) -> tuple[UserMessage, ...]:
        if not rows:
            return ()
        return (UserMessage(parts=tuple(p for f, t, cut in rows for p in parts(f, t, cut))),)
    return make


def call_part(slot: CallSlot, name: str, arguments: str) -> ToolCallPart:
    if slot.alias is None:
        return trusted(ToolCallPart, call_id=slot.call_id, name=name, arguments=arguments)
    return trusted(ToolCallPart, call_id=slot.call_id, alias=slot.alias, alias_for=slot.alias_for,
                   name=name, arguments=arguments)


def assistant_message(reasoning: Reasoning | None, breaks: tuple[TextBreak, ...], **fields: Any
                      ) -> AssistantMessage:
    """The model's message, with its provider reasoning when it has some (the renderers send it
    to that provider only: ``projections.reasoning``), and where its text's pieces stood."""
    if reasoning is not None:
        fields["reasoning"] = reasoning
    if breaks:
        fields["text_breaks"] = breaks
    return trusted(AssistantMessage, **fields)
