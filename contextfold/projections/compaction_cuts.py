"""Legal compaction cuts (pure): where a cover may end, and what lies beyond it yet belongs to it.

Why apart from :mod:`~contextfold.projections.compaction`: which events a cover may take is the
protocol's rule (every call keeps exactly one answer wherever its group is shown), shared by the
planner and by the summary it builds, and it has exceptions of its own: a runtime recovery answer
(lost, cancelled) is appended when a build finds its call unanswered, long after the call for an
imported or resumed run, and must not pull every cut back before that call
(:func:`~contextfold.projections.masking.wholly_inside`).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextfold.domain.errors import CompactionError, InvalidInputError
from contextfold.domain.events import DocumentBlock, ImageBlock
from contextfold.domain.log import RecordedEvent
from contextfold.projections.masking import wholly_inside
from contextfold.projections.repair import check_compaction_cover
from contextfold.projections.state import MessageItem, RunState, ToolGroup

__all__ = ["check_keep_recent", "choose_cover", "mask_covers", "recovery_answers"]


def choose_cover(state: RunState, *, keep_recent: int = 3, keep_input: bool = True,
                 keep_error: bool = False) -> tuple[int, int] | None:
    """The widest legal cover ``(1, hi)`` that leaves the newest ``keep_recent`` visible
    tool groups (and, with ``keep_input``, the latest user input; with ``keep_error``, the
    latest error's group) raw; None when nothing can be covered.

    ``keep_error``: a mask must not stub the latest error's group, which the builder keeps
    required down to its diagnosis (``RunState.latest_error_ids``): auto-compaction masked a
    failing 20,000-line test log to one line, and the model was left to fix a failure it could
    no longer read (the plain build showed it cut to ~23k tokens)."""
    timeline = state.timeline()
    groups = [it for it in timeline if isinstance(it, ToolGroup)]
    tail = [g.position for g in groups[-keep_recent:]] if keep_recent > 0 else []
    if keep_error and (error := _error_group(state)) is not None:
        tail.append(error.position)
    users = [it for it in timeline if isinstance(it, MessageItem) and it.role == "user"]
    # a required input is never hidden by a cover, so it need not bound one
    if keep_input and users and not state.entries[users[-1].fragment_id].required:
        tail.append(users[-1].position)
    hi = (min(tail) if tail else state.version + 1) - 1
    changed = True
    while changed and hi >= 1:
        changed = False
        for gpos in sorted(set(state.answer_group.values()) | set(state.open_groups.values())):
            group = state.items[gpos]
            assert isinstance(group, ToolGroup)
            if gpos <= hi and not wholly_inside(group, 1, hi):  # (a recovery answer may lie beyond)
                hi, changed = gpos - 1, True
                break
    if hi < 1:
        return None
    check_compaction_cover(state, 1, hi)
    return 1, hi


def shown_task_input(state: RunState, lo: int, hi: int) -> int | None:
    """The position of the user input a summary of ``[lo, hi]`` leaves shown though its cover
    holds it: the run's latest user input, when it carries media (an image, a document) and no
    earlier summary hides it; else None.

    Why: a summary carries what it covers as text, and an image is none (it cites it:
    ``summary_text.media_refs``). An agent run whose task is its only input is summarized with
    the input covered (``plan_compactions``' fallback), and the task's screenshot left every
    later request while the goal still read "fix the bug shown in this screenshot". The latest
    input is required in every build, so shown beside the summary it asks no more room than it
    did before the compaction; a newer input makes it optional, as it would without the summary,
    and the next summary covers it. A required input stays shown the same way (never covered)."""
    for pos in reversed(state.items):  # the newest first: the items after the cover are few
        item = state.items[pos]
        if isinstance(item, MessageItem) and item.role == "user":
            media = any(isinstance(b, ImageBlock | DocumentBlock)
                        for b in state.entries[item.fragment_id].fragment.content)
            return pos if media and lo <= pos <= hi and pos not in state.hidden else None
    return None


def _error_group(state: RunState) -> ToolGroup | None:
    """The latest error's group (``RunState.latest_error_ids``), if it is one still shown."""
    error = state.latest_error_ids()
    group = state.items.get(min(state.entries[fid].position for fid in error)) if error else None
    return group if isinstance(group, ToolGroup) else None


def mask_covers(state: RunState, keep_recent: int) -> list[tuple[int, int]]:
    """The covers a mask takes: the widest legal cut, less the latest error's group (``choose_cover``'s
    ``keep_error``), and the part of the cut after that group when it is legal on its own.

    Why two: a cover is contiguous, and an error whose tool was never run again stays the latest
    however old it is; a cover that stopped before it left every later result unmasked for the
    rest of the run (what a lost call's marker did: ``masking.wholly_inside``)."""
    cover = choose_cover(state, keep_recent=keep_recent, keep_input=False)
    group = _error_group(state)
    if cover is None or group is None or group.position > cover[1]:
        return [] if cover is None else [cover]
    out = [c for c in [choose_cover(state, keep_recent=keep_recent, keep_input=False, keep_error=True)]
           if c is not None]
    after = (max(group.positions) + 1, cover[1])
    if after[0] <= after[1]:
        try:
            check_compaction_cover(state, *after)
        except CompactionError:  # a group of another batch straddles it: the part before only
            return out
        out.append(after)
    return out


def recovery_answers(state: RunState, events: Sequence[RecordedEvent], lo: int, hi: int
                     ) -> list[RecordedEvent]:
    """The runtime recovery answers (lost, cancelled) logged after ``hi`` that close calls of groups
    the cover ``[lo, hi]`` holds (``masking.wholly_inside``): a summary states them as those calls'
    outcomes, and may cite them, though the cover does not reach them."""
    wanted = {slot.answer_position for pos in range(lo, hi + 1)
              if isinstance(group := state.items.get(pos), ToolGroup) and pos not in state.hidden
              and wholly_inside(group, lo, hi)  # (a hidden one: the summary that hid it said so)
              for slot in group.calls if slot.answer_position is not None and slot.answer_position > hi}
    return [rec for rec in events if rec.position in wanted]


def check_keep_recent(keep_recent: int) -> None:
    """Refuse a negative ``keep_recent``: it would slice from the other end and mask the newest
    groups. Callers that may plan nothing (a window under no pressure) check it first too."""
    if isinstance(keep_recent, bool) or not isinstance(keep_recent, int):  # "3" raised TypeError
        raise InvalidInputError(f"keep_recent must be an integer >= 0 (tool groups kept raw), "
                                f"got {keep_recent!r}")
    if keep_recent < 0:
        raise InvalidInputError(f"keep_recent must be >= 0 (tool groups kept raw), got {keep_recent}")
