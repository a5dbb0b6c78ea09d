"""Lay selected fragments out as the provider-neutral :class:`Conversation`.

Where each semantic layer goes (the seed's order, within the protocol):

1. policy (runtime)                 -> ``system`` (instruction authority)
2. tools                            -> ``tools`` (sorted, canonical JSON)
   workspace instructions (AGENTS.md) -> the first user message, as a data block;
   with layers 1-2 this is the stable prefix the cache key covers
3. goal + success contract          -> a task-state user message (runtime-authored)
4. plan
5. history                          -> the timeline in log order: user turns, assistant
                                       turns, tool groups (assistant calls + their answers),
                                       compaction summaries and notes as data blocks
7. latest tool observations         -> the newest groups' results, where the protocol puts them
6. evidence + memory                -> one user message of data blocks, placed just before
                                       the current input (or at the end when the model
                                       continues after tool results): the protocol does not
                                       allow a message between a call and its results, so
                                       layer 6 follows layer 7 when both are present
8. current user input               -> last

Only runtime and user text becomes an :class:`InstructionPart`; everything
else is a :class:`DataPart` that renderers wrap in a delimited data block.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import suppress
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, assert_never, cast

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
from contextfold.domain.events import DocumentBlock, ImageBlock, TextBlock, ToolSpec
from contextfold.domain.fragments import ContextFragment, ToolCallBlock, ToolResultBlock
from contextfold.projections.entries import FragmentEntry, FragmentFields, Response
from contextfold.projections.request_json import misses
from contextfold.projections.state import (
    CallSlot,
    MessageItem,
    RunState,
    SummaryItem,
    TimelineItem,
    ToolGroup,
)

__all__ = ["LayoutInput", "lay_out"]

_DATA_LABEL = {
    "instruction": "instructions", "evidence": "evidence", "memory": "memory",
    "tool_result": "tool_result", "history": "note", "user_input": "user_data",
}


@dataclass(frozen=True)
class LayoutInput:
    state: RunState
    kept: frozenset[str]
    """Fragment ids selected (every fragment of a kept group)."""
    texts: Mapping[str, str]
    """Fragment id -> the text to render where it is not the logged one (cut, or redacted):
    with ``truncated``, what makes an item special (laid out afresh, never reused)."""
    truncated: frozenset[str]
    tools: tuple[ToolSpec, ...]
    model: str | None
    current_input: str | None
    """Fragment id of the user input that is the current turn's input, if any."""
    render_media: Callable[[ContextFragment], tuple[MediaPart, ...]] | None = None
    kept_items: Sequence[TimelineItem] | None = None
    """The kept timeline items in timeline order, when the caller knows them (else derived)."""
    deferred: frozenset[str] = frozenset()
    """Ids of logged payloads shown as logged whose text is not in ``texts``: read with
    ``read_text`` only if an item holding one is laid out afresh (a long output is read back
    from the log when it enters the request, not in every build that keeps it)."""
    read_text: Callable[[str], str] | None = None
    items_of: Callable[[AbstractSet[str]], Sequence[TimelineItem]] | None = None
    """The kept items holding any of some fragment ids, when the caller can find them (else
    every item is checked for special fragments)."""


_POSITION = operator.attrgetter("position")
_NOTHING: tuple[None, list[Message]] = (None, [])


def _text_of(frag: ContextFragment) -> str:
    parts: list[str] = []
    for block in frag.content:
        if isinstance(block, TextBlock | ToolResultBlock):
            parts.append(block.text)
    return "\n".join(parts)


def _media(frag: ContextFragment, trust_source: str) -> tuple[MediaPart, ...]:
    """Media parts of a fragment, including those a tool returned (``ToolResultBlock.blocks``)."""
    out: list[MediaPart] = []
    blocks = [b for block in frag.content
              for b in (block.blocks if isinstance(block, ToolResultBlock) else (block,))]
    for block in blocks:
        if isinstance(block, ImageBlock) and (block.url or block.artifact):
            out.append(MediaPart(kind="image", media_type=block.media_type, url=block.url,
                                 artifact=block.artifact, detail=block.detail, source=trust_source,
                                 trust=frag.trust, fragment_id=frag.id))
        elif isinstance(block, DocumentBlock) and not block.media_type.startswith("text/") and (
                block.url or block.artifact):
            out.append(MediaPart(kind="document", media_type=block.media_type, url=block.url,
                                 artifact=block.artifact, source=trust_source, trust=frag.trust,
                                 fragment_id=frag.id))
    return tuple(out)


def _entry_media(state: RunState, entry: FragmentEntry) -> tuple[MediaPart, ...]:
    """:func:`_media` of an entry's fragment (its own source as the media's), made only when the
    run has folded media: a fragment's media parts are priced media, so none before."""
    return _media(entry.fragment, entry.source_ref) if state.media_seen else ()


def _data(frag: FragmentFields, text: str, truncated: bool, label: str | None = None) -> DataPart:
    return DataPart(text=text, source=frag.source_ref, trust=frag.trust,
                    label=label or _DATA_LABEL.get(frag.kind, frag.kind), truncated=truncated,
                    fragment_id=frag.id)


def _authority_part(frag: ContextFragment, text: str, truncated: bool) -> UserPart:
    if frag.trust in ("runtime", "user"):
        return InstructionPart(text=text, authority=frag.trust, fragment_id=frag.id)
    return _data(frag, text, truncated)


def lay_out(inp: LayoutInput) -> Conversation:
    state = inp.state
    def frag(fid: str) -> ContextFragment:
        return state.entries[fid].fragment


    def text(fid: str) -> str:
        if fid in inp.texts:
            return inp.texts[fid]
        if fid in inp.deferred and inp.read_text is not None:
            return inp.read_text(fid)
        plain = state.entries[fid].plain_text()  # the same text, without making the fragment
        return plain if plain is not None else _text_of(frag(fid))

    # The state sections (policy, instructions, task, retrieval) usually hold the same
    # fragments with the same texts from build to build: their parts and messages are kept
    # per section and reused while every input is the same (identical fragment objects
    # compare in O(1)), so renderers and hashes find the same objects as last time.
    sections: dict[str, list[tuple[ContextFragment, str, bool]]] = {
        "system": [], "stable": [], "task": [], "retrieval": []}
    for fid in state.active:
        if fid not in inp.kept:
            continue
        f = frag(fid)
        match f.kind:
            case "policy":
                sections["system"].append((f, text(fid), False))
            case "instruction":
                sections["stable"].append((f, text(fid), fid in inp.truncated))
            case "goal" | "success_contract" | "plan":
                sections["task"].append((f, text(fid), fid in inp.truncated))
            case "tool_spec":
                pass  # exposed through ``tools``
            case _:  # evidence, memory and other retrieved data
                sections["retrieval"].append((f, text(fid), fid in inp.truncated))
    kept_sections = cast(dict[str, tuple[object, tuple[Any, ...]]],
                         state.memo.setdefault("layout-sections", {}))
    system = cast(tuple[InstructionPart, ...], _section(kept_sections, "system", sections, lambda rows: tuple(
        InstructionPart(text=t, authority="runtime", fragment_id=f.id) for f, t, _ in rows)))
    stable = _section(kept_sections, "stable", sections, _message_of(lambda f, t, cut: (_data(f, t, cut),)))
    task = _section(kept_sections, "task", sections,
                    _message_of(lambda f, t, cut: (_authority_part(f, t, cut),)))
    retrieval = _section(kept_sections, "retrieval", sections, _message_of(
        lambda f, t, cut: (_data(f, t, cut), *(_media(f, f.source_ref) if f.kind in ("evidence", "memory")
                                               else ()))))

    messages: list[Message] = [*stable, *task]
    kept = inp.kept
    timeline = (inp.kept_items if inp.kept_items is not None
                else [it for it in state.timeline() if it.fragment_id in kept])
    special = inp.texts.keys() | inp.truncated
    # An item whose texts are the logged ones lays out the same in every build: its messages
    # are kept per position with the item they were made for, and a long run's ~1,000
    # unchanged items are matched in C. Items holding a cut, redacted or otherwise special
    # text are laid out afresh and not kept.
    memo = cast(dict[int, tuple[TimelineItem, list[Message]]], state.memo.setdefault("layout", {}))
    positions = list(map(_POSITION, timeline))
    got: list[Any] = list(map(memo.get, positions, repeat(_NOTHING)))
    same = list(map(operator.is_, map(itemgetter(0), got), timeline))
    if special:
        kept_special = cast(dict[int, _Special], state.memo.get("layout-special") or {})
        made: dict[int, _Special] = {}
        for at, item in enumerate(timeline) if inp.items_of is None else (
                (positions.index(it.position), it) for it in inp.items_of(special)):
            if item.fragment_id in special or (
                    isinstance(item, ToolGroup) and not special.isdisjoint(item.fragment_ids)):
                got[at] = (item, _special_messages(kept_special, made, item, inp, text))
                same[at] = True
        state.memo["layout-special"] = made  # this build's: the next build's cut is compared with it
    for at in misses(same, False):
        item = timeline[at]
        got[at] = memo[positions[at]] = (item, _item_messages(item, inp, text))
    current: UserMessage | None = None
    entry = state.entries.get(inp.current_input) if inp.current_input is not None else None
    input_item = state.items.get(entry.position) if entry is not None else None
    if isinstance(input_item, MessageItem) and input_item.fragment_id == inp.current_input:
        with suppress(ValueError):  # kept: it goes last, after the retrieved data
            input_at = positions.index(input_item.position)
            current = got[input_at][1][0]
            got[input_at] = (input_item, ())
    messages.extend(chain.from_iterable(map(itemgetter(1), got)))
    messages.extend(retrieval)
    if current is not None:
        messages.append(current)
    if messages and isinstance(messages[0], AssistantMessage | ToolResults):
        messages.insert(0, UserMessage(parts=(InstructionPart(
            text="[runtime] Earlier conversation is not shown.", authority="runtime",
            fragment_id="runtime:history-start"),)))
    # Every part is a validated model already: construct without re-validating thousands.
    return Conversation.model_construct(model=inp.model, system=system, tools=inp.tools,
                                        messages=tuple(messages), stable_prefix_messages=1 if stable else 0)


_Row = tuple[ContextFragment, str, bool]
_Special = tuple[TimelineItem, tuple[tuple[object, str, bool], ...], list[Message]]


def _special_messages(kept: dict[int, _Special], made: dict[int, _Special], item: TimelineItem,
                      inp: LayoutInput, text: Callable[[str], str]) -> list[Message]:
    """The messages of an item holding a cut, redacted or read-back text: laid out again only
    when one of its texts differs from the last build's. A rebuild with nothing new, or the
    next provider's build of the turn, keeps the cut, and the same message objects let the
    renderers, the SDK check and the JSON memos find their work done (on a long run the cut
    unit's messages were rendered, checked and dumped afresh in every build)."""
    entries = inp.state.entries
    key = tuple((entries[fid], text(fid), fid in inp.truncated) for fid in item.fragment_ids)
    hit = kept.get(item.position)
    if hit is not None and hit[0] is item and hit[1] == key:
        messages = hit[2]
    else:
        texts = {fid: t for fid, (_, t, _) in zip(item.fragment_ids, key, strict=True)}
        messages = _item_messages(item, inp, lambda fid: texts[fid] if fid in texts else text(fid))
    made[item.position] = (item, key, messages)
    return messages


def _section(memo: dict[str, tuple[object, tuple[Any, ...]]], name: str, sections: dict[str, list[_Row]],
             make: Callable[[list[_Row]], tuple[Any, ...]]) -> tuple[Any, ...]:
    """``make(rows)`` for one state section, reused while its rows are equal to the last build's."""
    rows = sections[name]
    key = tuple(rows)
    hit = memo.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = make(rows)
    memo[name] = (key, value)
    return value


def _message_of(parts: Callable[[ContextFragment, str, bool], tuple[UserPart, ...]]
                ) -> Callable[[list[_Row]], tuple[UserMessage, ...]]:
    """A section's one user message of the rows' parts (none for no rows)."""
    def make(rows: list[_Row]) -> tuple[UserMessage, ...]:
        if not rows:
            return ()
        return (UserMessage(parts=tuple(p for f, t, cut in rows for p in parts(f, t, cut))),)
    return make


def _call_part(slot: CallSlot, name: str, arguments: str) -> ToolCallPart:
    if slot.alias is None:
        return ToolCallPart(call_id=slot.call_id, name=name, arguments=arguments)
    return ToolCallPart(call_id=slot.call_id, alias=slot.alias, alias_for=slot.alias_for,
                        name=name, arguments=arguments)


def _item_messages(item: TimelineItem, inp: LayoutInput, text: Callable[[str], str]) -> list[Message]:
    state = inp.state
    match item:
        case ToolGroup():
            # Read from the folded entries: their fragments (blocks validated) are made only for
            # media, which a run without any never has (``state.media_seen``).
            head = state.entries[item.fragment_id]
            reply = head.content
            # A call's alias (``call_ids``) is its slot's: the slots are the calls, in order.
            if isinstance(reply, Response):
                calls = tuple(_call_part(s, n, a)
                              for s, (_, n, a) in zip(item.calls, reply.calls, strict=True))
                said = reply.text
            else:
                blocks = head.fragment.content
                calls = tuple(_call_part(s, b.name, b.arguments) for s, b in zip(
                    item.calls, (b for b in blocks if isinstance(b, ToolCallBlock)), strict=True))
                said = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
            results: list[ToolResultPart] = []
            for slot in item.calls:
                if slot.answer_id is None:
                    raise AssertionError(f"open call {slot.call_id} reached layout")
                answer = state.entries[slot.answer_id]
                plain = answer.answer()
                if plain is not None:
                    status, exit_code = plain.status, plain.exit_code
                else:
                    block = next(b for b in answer.fragment.content if isinstance(b, ToolResultBlock))
                    status, exit_code = block.status, block.exit_code
                if status in ("lost", "cancelled"):
                    content: tuple[DataPart | MediaPart, ...] = (DataPart(
                        text=text(slot.answer_id), source=answer.source_ref, trust="runtime",
                        label=f"tool_result_{status}", fragment_id=answer.id),)
                else:
                    content = (_data(answer, text(slot.answer_id), slot.answer_id in inp.truncated),
                               *_entry_media(state, answer))
                results.append(ToolResultPart(call_id=slot.call_id, alias=slot.alias,
                                              alias_for=slot.alias_for, name=slot.name, status=status,
                                              content=content, exit_code=exit_code,
                                              fragment_id=answer.id))
            return [AssistantMessage(text=said, tool_calls=calls, fragment_id=head.id),
                    ToolResults(results=tuple(results))]
        case MessageItem():
            e = state.entries[item.fragment_id]
            if item.role == "assistant":
                return [AssistantMessage(text=text(e.id), fragment_id=e.id)]
            if item.role == "user":
                parts: list[UserPart] = []
                body = text(e.id)
                if body:
                    parts.append(InstructionPart(text=body, authority="user", fragment_id=e.id))
                parts.extend(_entry_media(state, e))
                if not parts:
                    parts.append(InstructionPart(text="(empty message)", authority="user", fragment_id=e.id))
                return [UserMessage(parts=tuple(parts))]
            return [UserMessage(parts=(_data(e, text(e.id), e.id in inp.truncated, "note"),))]
        case SummaryItem():
            e = state.entries[item.fragment_id]
            return [UserMessage(parts=(_data(e, text(e.id), False, "compaction_summary"),))]
        case _:
            assert_never(item)
