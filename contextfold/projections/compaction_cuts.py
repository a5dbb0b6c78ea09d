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

from contextfold.domain.errors import InvalidInputError
from contextfold.domain.log import RecordedEvent
from contextfold.projections.masking import wholly_inside
from contextfold.projections.repair import check_compaction_cover
from contextfold.projections.state import MessageItem, RunState, ToolGroup

__all__ = ["check_keep_recent", "choose_cover", "recovery_answers"]


def choose_cover(state: RunState, *, keep_recent: int = 3,
                 keep_input: bool = True) -> tuple[int, int] | None:
    """The widest legal cover ``(1, hi)`` that leaves the newest ``keep_recent`` visible
    tool groups (and, with ``keep_input``, the latest user input) raw; None when
    nothing can be covered."""
    timeline = state.timeline()
    groups = [it for it in timeline if isinstance(it, ToolGroup)]
    tail = [g.position for g in groups[-keep_recent:]] if keep_recent > 0 else []
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
