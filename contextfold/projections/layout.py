"""Lay selected fragments out as the provider-neutral :class:`Conversation`.

Where each semantic layer goes (the seed's order, within the protocol):

1. policy (runtime)                 -> ``system`` (instruction authority)
2. tools                            -> ``tools`` (sorted, canonical JSON)
   instructions (an AGENTS.md, examples) -> the first user message, as data blocks;
   with layers 1-2 this is the stable prefix the cache key covers
3. goal + success contract          -> a task-state user message (runtime-authored)
4. plan
5. history                          -> the timeline in log order: user turns, assistant
                                       turns, tool groups (assistant calls + their answers),
                                       compaction summaries and notes as data blocks
7. latest tool observations         -> the newest groups' results, where the protocol puts them
6. evidence + memory                -> one user message of data blocks, placed just before
                                       the current input (or at the end when the model
                                       continues after tool results)
8. current user input               -> last

Layer 6 follows layer 7 when both are present, against the seed's numbering, on purpose. No
message may sit between a call and its results, so evidence placed "before the latest
observations" would go before the call that made them. The latest observations are history by
the next turn: placed before them, evidence moved each turn into the middle of what the turn
before sent, and a provider's prompt cache (which holds a request's longest unchanged opening)
lost the latest group with it. Placed after them, a turn's request opens with the whole of the
last one's protocol-complete history, and only what is new (evidence, input) follows.

Only runtime and user text becomes an :class:`InstructionPart`; everything
else is a :class:`DataPart` that renderers wrap in a delimited data block.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Any, assert_never, cast

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
from contextfold.domain.events import ToolSpec
from contextfold.domain.fragments import ContextFragment, ToolResultBlock
from contextfold.domain.trusted import trusted
from contextfold.projections.entries import Response, reasoning_of
from contextfold.projections.fold_summary import split_summary
from contextfold.projections.framing import NOTE_LABEL, SUMMARY_LABEL, data_tag
from contextfold.projections.layout_parts import (
    SectionRow,
    assistant_message,
    authority_part,
    call_part,
    data_and_media,
    data_part,
    entry_media,
    fragment_media,
    message_of,
    text_of,
)
from contextfold.projections.not_offered import (
    RECORD_TRUST,
    not_offered_header,
    not_offered_names,
    not_offered_record,
    reply_as_shown,
)
from contextfold.projections.render.runtime_lines import runtime_header_line
from contextfold.projections.state import (
    MessageItem,
    RunState,
    SummaryItem,
    TimelineItem,
    ToolGroup,
)
from contextfold.projections.timeline_units import TimelineUnits

__all__ = ["HISTORY_OPENS_TEXT", "HISTORY_START_ID", "HISTORY_START_TEXT", "PREFIX_KINDS", "LayoutInput",
           "lay_out"]

HISTORY_START_TEXT = "[runtime] Earlier conversation is not shown."
"""The user message a request opens with when its first kept message is the model's (a provider
wants a user turn first) and earlier items of the timeline were left out: priced by the builder
when no required fragment of ``PREFIX_KINDS`` comes before the timeline (see
``finish_build.history_start_tokens``)."""
HISTORY_OPENS_TEXT = "[runtime] The conversation starts here."
"""... and the one it opens with when nothing came before that message (an agent that greets
first). The first note there told the model, with runtime authority, that part of a conversation
that never existed was hidden, which the manifest did not explain. Priced as the longer of the
two, so which one a request opens with never changes what selection kept."""
HISTORY_START_ID = "runtime:history-start"
PREFIX_KINDS = frozenset({"instruction", "goal", "success_contract", "plan"})
"""The fragments laid out as user messages before the timeline (the stable and task sections)."""

@dataclass(slots=True)
class LayoutInput:
    """What one build lays out. A slot class, not a frozen one: made once per build with 14
    fields, and a frozen dataclass sets each through ``object.__setattr__`` (6.0 us against 1.3
    here); nothing keeps or hashes it, and the layout only reads it."""

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
    units: TimelineUnits
    """The timeline's units as selection saw them (rows in timeline order): where the kept
    units' items are, what changed since the last build laid them out (``touched_since``), and
    that build's messages (``laid``)."""
    kept_units: AbstractSet[str]
    """Ids of the kept units (those not from the timeline ignored)."""
    render_media: Callable[[ContextFragment], tuple[MediaPart, ...]] | None = None
    deferred: frozenset[str] = frozenset()
    """Ids of logged payloads shown as logged whose text is not in ``texts``: read with
    ``read_text`` only if an item holding one is laid out afresh (a long output is read back
    from the log when it enters the request, not in every build that keeps it)."""
    read_text: Callable[[str], str] | None = None
    replies: Mapping[str, ContextFragment] = field(default_factory=dict)
    """Model replies with calls shown redacted (their text and arguments), by fragment id: the
    calls are read from these, not from the log."""
    blocked: frozenset[str] = frozenset()
    """Tools the history calls that the request does not offer: a group calling one is shown
    as a note (``projections.not_offered``)."""


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
        return plain if plain is not None else text_of(frag(fid))

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
    # by layer (DESIGN 4: the goal and its contract, then the plan), not by when each was set
    sections["task"].sort(key=lambda row: row[0].kind == "plan")
    kept_sections = cast(dict[str, tuple[object, tuple[Any, ...]]],
                         state.memo.setdefault("layout-sections", {}))
    system = cast(tuple[InstructionPart, ...], _section(kept_sections, "system", sections, lambda rows: tuple(
        InstructionPart(text=t, authority="runtime", fragment_id=f.id) for f, t, _ in rows)))
    stable = _section(kept_sections, "stable", sections,
                      message_of(lambda f, t, cut: (data_part(f, t, cut),)))
    task = _section(kept_sections, "task", sections,
                    message_of(lambda f, t, cut: (authority_part(f, t, cut),)))
    retrieval = _section(kept_sections, "retrieval", sections, message_of(
        lambda f, t, cut: data_and_media(
            f, t, cut, fragment_media(f, f.source_ref) if f.kind in ("evidence", "memory") else ())))

    laid, current = _timeline(inp, text)
    pieces = (stable, task, laid.version, retrieval, current)
    if laid.last is not None and all(map(operator.is_, laid.last[0], pieces)):
        messages: tuple[Message, ...] = laid.last[1]  # nothing moved: the same tuple (no copy)
    else:
        out: list[Message] = [*stable, *task, *laid.flat, *retrieval]
        if current is not None:
            out.append(current)
        if out and isinstance(out[0], AssistantMessage | ToolResults):
            out.insert(0, UserMessage(parts=(InstructionPart(
                text=_opening_text(inp), authority="runtime", fragment_id=HISTORY_START_ID),)))
        messages = tuple(out)
        laid.last = (pieces, messages)
    # Every part is a validated model already: construct without re-validating thousands.
    return trusted(Conversation, model=inp.model, system=system, tools=inp.tools,
                   messages=messages, stable_prefix_messages=1 if stable else 0)


def _opening_text(inp: LayoutInput) -> str:
    """The note a request whose first message is the model's opens with: whether the timeline's
    first item is kept (then nothing came before that message), or something earlier was left
    out. Only a kept first item opens the laid-out timeline: the items are laid out in order."""
    rows = inp.units.rows
    first = rows[0].unit if rows else None
    return HISTORY_OPENS_TEXT if first is not None and first.id in inp.kept_units else HISTORY_START_TEXT


@dataclass(slots=True, eq=False)
class _Laid:
    """The kept timeline items' messages as the last build that used these units laid them
    out, patched by the next build (:func:`_timeline`)."""

    generation: int
    """``TimelineUnits.generation`` when they were laid out (what was derived afresh since)."""
    rows: dict[str, int] = field(default_factory=dict)
    """Kept timeline unit id -> its row (the current input's too, though ``flat`` lacks it)."""
    flat: list[Message] = field(default_factory=list)
    """The kept items' messages in timeline order, but the current input's."""
    at: list[int] = field(default_factory=list)
    """The row of each message of ``flat`` (ascending): where a unit's messages are."""
    special: frozenset[str] = frozenset()
    """Units laid out with special texts (looked at again by the next build)."""
    current: tuple[str, UserMessage] | None = None
    """The current input's unit and message (it goes last)."""
    version: object = field(default_factory=object)
    """A new object whenever ``flat`` changes."""
    last: tuple[tuple[object, ...], tuple[Message, ...]] | None = None
    """The pieces of the last messages tuple and the tuple (reused while they are the same)."""


def _timeline(inp: LayoutInput, text: Callable[[str], str]) -> tuple[_Laid, UserMessage | None]:
    """The kept timeline items' messages (in ``_Laid.flat``) and the current input's message.

    Why patched: a long run keeps hundreds of items, and between two builds they change at the
    edges (new items at the end, old ones leaving as the window slides, the unit cut at the
    walk's stop). Looking each up again (its position, its memo entry, whether it is the
    same object) and chaining their messages was most of a rebuild's layout. Only the units
    that entered or left the kept set, were derived afresh since the last build (an answered
    call, a masked result, a compaction: ``touched_since``), hold or held a cut, redacted or
    read-back text, or are or were the current input are laid out again: the others keep
    their messages and place. Any build may follow any other (another config's, another
    budget's): the difference is taken from whatever the last one laid out."""
    state, units, kept = inp.state, inp.units, inp.kept_units
    row_of_unit = units.row_of_unit
    laid = units.laid if isinstance(units.laid, _Laid) else None
    touched = units.touched_since(laid.generation) if laid is not None else None
    if laid is None or touched is None:  # start over: every kept unit enters
        laid = units.laid = _Laid(units.generation)
        redo = {uid for uid in kept if uid in row_of_unit}
    else:
        old = laid.rows
        redo = {uid for uid in touched if uid in old or uid in kept}
        redo.update(old.keys() - kept)
        redo.update(uid for uid in kept - old.keys() if uid in row_of_unit)
        redo.update(laid.special)
        if laid.current is not None:  # (its layer changed too, so it is touched: belt and braces)
            redo.add(laid.current[0])
    special_ids = inp.texts.keys() | inp.truncated
    special: set[str] = set()
    row_of, rows = units.row_of, units.rows
    # a group shown as a note is laid out apart too: the memo of logged items holds calls
    for at_row in {row_of[fid] for fid in special_ids if fid in row_of}.union(units.noted_rows):
        unit = rows[at_row].unit
        if unit is not None and unit.id in kept:
            special.add(unit.id)
    redo.update(special)
    current: str | None = None
    entry = state.entries.get(inp.current_input) if inp.current_input is not None else None
    input_item = state.items.get(entry.position) if entry is not None else None
    if isinstance(input_item, MessageItem) and input_item.fragment_id == inp.current_input:
        input_row = row_of_unit.get(input_item.fragment_id)  # a message's unit is its fragment's id
        if input_row is not None and input_item.fragment_id in kept and (
                rows[input_row].facts.item.position == input_item.position):
            current = input_item.fragment_id  # kept: it goes last, after the retrieved data
            redo.add(current)
    kept_special = cast(dict[int, _Special], state.memo.get("layout-special") or {})
    made: dict[int, _Special] = {}
    memo = cast(dict[int, tuple[TimelineItem, list[Message]]], state.memo.setdefault("layout", {}))
    old, flat, at = laid.rows, laid.flat, laid.at
    message: UserMessage | None = None
    gone: list[int] = []
    new: list[tuple[int, list[Message]]] = []
    for uid in redo:
        row = row_of_unit.get(uid) if uid in kept else None
        msgs: list[Message] = []
        if row is not None:
            item = rows[row].facts.item
            if uid in special:
                msgs = _special_messages(kept_special, made, item, inp, text)
            else:
                # An item whose texts are the logged ones lays out the same in every build: its
                # messages are kept per position with the item they were made for (shared by
                # every config's build).
                hit = memo.get(item.position)
                if hit is not None and hit[0] is item:
                    msgs = hit[1]
                else:
                    msgs = _item_messages(item, inp, text)
                    memo[item.position] = (item, msgs)
            if uid == current:
                message = cast(UserMessage, msgs[0])
                msgs = []
            old_row = old.get(uid)
            old[uid] = row
        else:
            old_row = old.pop(uid, None)
        if old_row is not None:
            if old_row == row:
                i = bisect_left(at, row)
                j = bisect_right(at, row, i)
                if j - i == len(msgs) and all(map(operator.is_, islice(flat, i, j), msgs)):
                    continue  # the same messages in the same place
            gone.append(old_row)
        if row is not None and msgs:
            new.append((row, msgs))
    for row in gone:
        i = bisect_left(at, row)
        j = bisect_right(at, row, i)
        del flat[i:j], at[i:j]
    for row, msgs in sorted(new, key=itemgetter(0)):
        i = bisect_left(at, row)
        flat[i:i] = msgs
        at[i:i] = [row] * len(msgs)
    if gone or new:
        laid.version = object()
    if special_ids:
        state.memo["layout-special"] = made  # this build's: the next build's cut is compared with it
    laid.generation, laid.special = units.generation, frozenset(special)
    laid.current = (current, message) if current is not None and message is not None else None
    return laid, message


_Row = SectionRow
_Special = tuple[TimelineItem, tuple[tuple[object, str, bool, object, object], ...], list[Message]]


def _special_messages(kept: dict[int, _Special], made: dict[int, _Special], item: TimelineItem,
                      inp: LayoutInput, text: Callable[[str], str]) -> list[Message]:
    """The messages of an item holding a cut, redacted or read-back text: laid out again only
    when one of its texts differs from the last build's. A rebuild with nothing new, or the
    next provider's build of the turn, keeps the cut, and the same message objects let the
    renderers, the SDK check and the JSON memos find their work done (on a long run the cut
    unit's messages were rendered, checked and dumped afresh in every build)."""
    entries = inp.state.entries
    key = tuple((entries[fid], text(fid), fid in inp.truncated, inp.replies.get(fid), inp.blocked)
                for fid in item.fragment_ids)
    hit = kept.get(item.position)
    if hit is not None and hit[0] is item and hit[1] == key:
        messages = hit[2]
    else:
        texts = {fid: t for fid, (_, t, _, _, _) in zip(item.fragment_ids, key, strict=True)}
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


def _item_messages(item: TimelineItem, inp: LayoutInput, text: Callable[[str], str]) -> list[Message]:
    state = inp.state
    match item:
        case ToolGroup():
            # Read from the folded entries: their fragments (blocks validated) are made only for
            # media, which a run without any never has (``state.media_seen``).
            head = state.entries[item.fragment_id]
            said, shown_calls = reply_as_shown(head, inp.replies.get(head.id))
            # A call's alias (``call_ids``) is its slot's: the slots are the calls, in order.
            calls = tuple(call_part(s, n, a) for s, (_, n, a) in zip(item.calls, shown_calls, strict=True))
            missing = not_offered_names([c.name for c in item.calls], inp.blocked) if inp.blocked else ()
            if missing:  # a note, then each result with its runtime line: no call, no tool needed
                record = not_offered_record(said, shown_calls)
                header = InstructionPart(text=not_offered_header(), authority="runtime", fragment_id=head.id)
                shown = trusted(DataPart, text=record, source=head.source_ref, trust=RECORD_TRUST,
                                label=NOTE_LABEL, truncated=False, fragment_id=head.id)
                note: list[UserPart] = [header, shown]
            reasoning = reasoning_of(head)
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
                    shown_trust, label = data_tag(answer.kind, answer.trust, status)
                    content: tuple[DataPart | MediaPart, ...] = (DataPart(
                        text=text(slot.answer_id), source=answer.source_ref, trust=shown_trust,
                        label=label, fragment_id=answer.id),)
                else:
                    content = data_and_media(answer, text(slot.answer_id), slot.answer_id in inp.truncated,
                                              entry_media(state, answer))
                if missing:
                    line = runtime_header_line(slot.call_id, None, status, exit_code)
                    if line is not None:
                        note.append(InstructionPart(text=line, authority="runtime", fragment_id=answer.id))
                    note.extend(content)
                    continue
                results.append(trusted(ToolResultPart, call_id=slot.call_id, alias=slot.alias,
                                       alias_for=slot.alias_for, name=slot.name, status=status,
                                       content=content, exit_code=exit_code, fragment_id=answer.id))
            if missing:
                return [trusted(UserMessage, parts=tuple(note))]
            # the text's pieces where they stood, unless redaction rewrote the text (then before
            # the calls, as one: its offsets are the logged text's)
            logged = head.content
            breaks = (logged.breaks if isinstance(logged, Response) and inp.replies.get(head.id) is None
                      else ())
            return [assistant_message(reasoning, breaks, text=said, tool_calls=calls, fragment_id=head.id),
                    trusted(ToolResults, results=tuple(results))]
        case MessageItem():
            e = state.entries[item.fragment_id]
            if item.role == "assistant":
                said = text(e.id)  # its pieces where they stood (a server tool's result between
                logged = e.content  # them), unless the build cut or rewrote the text
                breaks = logged.breaks if isinstance(logged, Response) and said == logged.text else ()
                return [assistant_message(reasoning_of(e), breaks, text=said, fragment_id=e.id)]
            if item.role == "user":
                parts: list[UserPart] = []
                body = text(e.id)
                if body:
                    parts.append(trusted(InstructionPart, text=body, authority="user", fragment_id=e.id))
                parts.extend(entry_media(state, e))
                if not parts:
                    parts.append(InstructionPart(text="(empty message)", authority="user", fragment_id=e.id))
                return [trusted(UserMessage, parts=tuple(parts))]
            note_part = data_part(e, text(e.id), e.id in inp.truncated, NOTE_LABEL)
            return [trusted(UserMessage, parts=(note_part,))]
        case SummaryItem():  # a hand-off's task, the user's constraints with their authority (fold_summary)
            e = state.entries[item.fragment_id]
            asked, rest = split_summary(text(e.id))
            return [trusted(UserMessage, parts=(
                *(InstructionPart(text=t, authority=a, fragment_id=e.id) for a, t in asked),
                data_part(e, rest, False, SUMMARY_LABEL)))]
        case _:
            assert_never(item)
