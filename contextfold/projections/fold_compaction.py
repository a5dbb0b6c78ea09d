"""Folding a compaction: a mask's stubs, a summary's fragment and what it hides.

Why a module of its own: the fold of one ``HistoryCompacted`` event is the longest of the
folds (which items a cover may take, the summary's trust and the user's confirmed constraints,
each stub as its plan priced it) and the one with the most rules; ``fold`` registers it with
the other events' folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import assert_never

from contextfold.domain.events import HistoryCompacted, TextBlock
from contextfold.domain.fragments import TRUST_RANK, ToolResultBlock, Trust
from contextfold.domain.log import RecordedEvent
from contextfold.projections.compaction_cuts import shown_task_input
from contextfold.projections.fold_content import add_fragment
from contextfold.projections.fold_summary import (
    confirmed_hand_offs,
    confirmed_user_constraints,
    render_summary,
)
from contextfold.projections.framing import SUMMARY_LABEL
from contextfold.projections.masking import mask_text, stub_trust, wholly_inside
from contextfold.projections.not_offered import RECORD_TRUST
from contextfold.projections.state import (
    SUMMARY_PRIORITY,
    MessageItem,
    RunState,
    SummaryItem,
    SummarySource,
    TimelineItem,
    ToolGroup,
)
from contextfold.projections.summary_shown import shown_raw

__all__ = ["fold_compaction", "refresh_summaries"]


def fold_compaction(event: HistoryCompacted, state: RunState, rec: RecordedEvent) -> None:
    """Fold ``event``, logged at ``rec``: mask the cover's answers, or stand a summary in for it."""
    lo, hi = event.covers_from, min(event.covers_to, rec.position - 1)
    match event.strategy:
        case "mask":
            _mask(state, rec, lo, hi)
        case "summary":
            task = shown_task_input(state, lo, hi)  # its media: a summary cannot carry them
            covered = tuple(p for p in range(lo, hi + 1)
                            if p in state.items and p not in state.hidden and p != task
                            and _coverable(state, p, lo, hi))
            # an older summary of part of this cover, logged after its end (a cover stops before
            # the compaction events that follow it), stands for history this one now covers:
            # shown beside it, the same history went out twice
            covered += tuple(p for p, item in state.items.items()
                             if p > hi and isinstance(item, SummaryItem) and p not in state.hidden
                             and lo <= item.covers_from and item.covers_to <= hi)
            confirmed = confirmed_user_constraints(event, state.run_id, lambda p: _user_text(state, p))
            handed = confirmed_hand_offs(event, state.run_id, lambda p: _handed_text(state, p))
            source = SummarySource(rec, f"e{rec.position}", lo, hi, _lowest_trust(state, covered),
                                   confirmed, handed, _plan_steps(state))
            fid = _add_summary(state, source, _summary_text(state, source))
            for p in covered:
                state.hidden[p] = rec.position
                state.summaries.pop(p, None)
            state.summaries[rec.position] = source
            state.items[rec.position] = SummaryItem(rec.position, fid, lo, hi, covered)
        case _:
            assert_never(event.strategy)


def _summary_text(state: RunState, source: SummarySource) -> str:
    """The text ``source``'s summary is shown with in a build of ``state``: its recorded summary,
    less what that build shows raw (a policy in force, the goal in force, ``render_summary``) and
    its lines about the steps of the plan now or when it was folded (that plan was current then,
    and a newer one replaces it: its next action is not what to do next), then the ref of its
    raw events."""
    event = source.rec.event
    assert isinstance(event, HistoryCompacted)
    plan = tuple(dict.fromkeys((*source.plan_steps, *_plan_steps(state))))
    shown = shown_raw(event.summary, state)
    lo, hi = source.covers_from, source.covers_to
    return (f"{render_summary(event, source.confirmed, source.handed, plan, shown)}\n"
            f"raw events: events://{state.run_id}/{lo}-{hi} (read back with `contextfold show`)")


def _plan_steps(state: RunState) -> tuple[str, ...]:
    return () if state.plan is None else tuple(s.id for s in state.plan.steps)


def _add_summary(state: RunState, source: SummarySource, text: str) -> str:
    lo, hi = source.covers_from, source.covers_to
    return add_fragment(state, source.rec, "history", source.trust, (TextBlock(text=text),),
                        priority=SUMMARY_PRIORITY, source_ref=f"events://{state.run_id}/{lo}-{hi}",
                        data_label=SUMMARY_LABEL)


def refresh_summaries(state: RunState) -> None:
    """Render each visible summary again against the goal, policies and plan now in force, after
    a fold step changed one of them; a summary whose text changes gets a new fragment entry (same
    id, position and trust).

    Why: a summary's text left out what the build of its day showed raw (the goal in force, a
    policy, the plan's steps; ``render_summary``), and was fixed when its compaction was folded.
    After a later goal change the request stated only the new goal, and the summary still left
    out the old one and cited its "goal set at event N" line as the goal in force: the goal the
    covered history worked towards was in no request (the seed, 5.3: the summary keeps the goal;
    ``summary_shown``: an older goal, shown nowhere else, stays quoted). Rendered against what is
    in force now, what is no longer shown raw is quoted again.

    ``state.memo`` is emptied when a text changes: the builder keeps per-fragment facts by id
    across builds, and the fragment's text is not what they were made of any more (this is rare:
    a goal, policy or plan change while a summary is shown)."""
    changed = False
    for source in state.summaries.values():
        entry = state.entries[source.fragment_id]
        text = _summary_text(state, source)
        if not (isinstance(entry.content, tuple) and len(entry.content) == 1
                and isinstance(block := entry.content[0], TextBlock) and block.text == text):
            _add_summary(state, source, text)
            changed = True
    if changed:
        state.memo.clear()


def _coverable(state: RunState, pos: int, lo: int, hi: int) -> bool:
    item = state.items[pos]
    if isinstance(item, ToolGroup):
        return wholly_inside(item, lo, hi)
    if isinstance(item, MessageItem) and item.role == "user":
        return not state.entries[item.fragment_id].required
    return True


def _user_text(state: RunState, position: int) -> str | None:
    """The text of the user's own input logged at ``position``, if that is one."""
    entry = state.entries.get(f"e{position}")
    if entry is None or entry.kind != "user_input" or entry.trust != "user":
        return None
    return entry.plain_text()


def _handed_text(state: RunState, position: int) -> str | None:
    """The text of the task a hand-off logged at ``position`` handed over (the runtime's current
    input, ``fold``), if that is one."""
    entry = state.entries.get(f"e{position}")
    if entry is None or entry.kind != "user_input" or entry.trust != "runtime":
        return None
    return entry.plain_text()


def _lowest_trust(state: RunState, covered: Sequence[int]) -> Trust:
    """The trust a summary of the items at ``covered`` is shown with: the lowest of theirs, a
    model reply's counted as :data:`~contextfold.projections.not_offered.RECORD_TRUST`.

    A summary quotes what it stands for (a failure's key line, a late result, the ids a result
    named, a user's constraint), and a plug-in one is written from it: shown as the runtime's, an
    instruction a fetched page planted in an error message ("SYSTEM OVERRIDE: ... ignore the
    policy") rose from the data layer to runtime trust once compacted (the seed, sections 2 and
    10: external text stays in the data layer, whatever it says).

    Why a model reply counts as external: its fragment is the runtime's (the protocol: the calls
    the runtime sent on), but the summary quotes its words and its calls' arguments, which are the
    model's and can repeat anything it read (a fetched page, a tool's output). DESIGN.md's layers
    (runtime > user > workspace > external) have none for the model; the summary of replies alone
    said ``trust="runtime"``, and beside a user message ``trust="user"``, claiming the runtime or
    the user said them. The lowest layer is the one that claims nothing, as the record of a call to
    a tool not offered says (``RECORD_TRUST``). The user's confirmed constraints and a hand-off's
    task keep their authority (``fold_summary``): they are shown apart, before the data block."""
    entries = state.entries
    trusts = [RECORD_TRUST if _model_reply(state.items[p], fid) else entries[fid].trust
              for p in covered for fid in state.items[p].fragment_ids]
    # a masked answer's stub is the runtime's; the summary quotes the raw answer, its own event's
    # fragment (``e{position}``), whose trust counts
    trusts += [entries[f"e{q}"].trust for p in covered if isinstance(item := state.items[p], ToolGroup)
               for q in item.positions[1:] if q in state.masked and f"e{q}" in entries]
    return min(trusts, key=TRUST_RANK.__getitem__, default="runtime")


def _model_reply(item: TimelineItem, fid: str) -> bool:
    """Whether ``fid`` of ``item`` is a model reply: a reply without calls, or a group's head."""
    return (item.fragment_id == fid and (isinstance(item, ToolGroup)
                                         or (isinstance(item, MessageItem) and item.role == "assistant")))


def _mask(state: RunState, rec: RecordedEvent, lo: int, hi: int) -> None:
    """Replace the ok/error answers of closed groups wholly inside the cover by stubs.

    The group stays (same calls, same statuses and exit codes), so the protocol
    holds; only the answer fragment changes to a stub (``masking``) whose source_ref
    is the raw result's ``event://`` ref: the runtime's, or, quoting what a side
    effect's result named, at that result's trust. The stub keeps the raw answer's log
    position for freshness, and the horizon does not move: masking changes
    nothing else a build sees.
    """
    horizon, sub = state.horizon, 0
    for pos in range(lo, hi + 1):
        group = state.items.get(pos)
        if (not isinstance(group, ToolGroup) or pos in state.hidden
                or not _coverable(state, pos, lo, hi)):
            continue
        calls, stubbed = [], False
        for slot in group.calls:
            if (slot.answer_id is not None and slot.answer_position is not None
                    and slot.status in ("ok", "error") and slot.answer_position not in state.masked):
                block, text, facts = mask_text(state, group, slot)  # as the plan priced it
                stub = ToolResultBlock(call_id=block.call_id, name=block.name, status=block.status,
                                       exit_code=block.exit_code, text=text)
                sub += 1
                fid = add_fragment(state, rec, "tool_result", stub_trust(state, slot, facts), (stub,),
                                   sub=sub, source_ref=f"event://{state.run_id}/{slot.answer_position}")
                state.entries[fid] = state.entries[fid].moved(slot.answer_position)
                state.masked[slot.answer_position] = rec.position
                slot = replace(slot, answer_id=fid)
                stubbed = True
            calls.append(slot)
        if stubbed:  # an item is replaced only when it changes (the timeline index relies on it)
            state.items[pos] = ToolGroup(pos, group.fragment_id, tuple(calls))
    state.horizon = horizon
