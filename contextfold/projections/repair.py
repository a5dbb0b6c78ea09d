"""Protocol repair planning and compaction cut checks (pure: they return events or raise).

Why the repair is planned here and appended elsewhere: the recovery events must
be *in the log* (so a replay sees the same answers), but a projection does no
I/O. The API layer calls :func:`recovery_events` before a build, appends what
it returns, and folds it; once folded the calls are closed, so a second call
returns nothing and rebuilding twice never appends twice.

- A call whose response was followed by a later model response, user input or
  resume (``HandOff(mode="resume")``: the process that ran it is gone) without its
  result is *lost*: ``ToolResultLost`` with the issuing response's position in
  ``call_position``.
- A call still in flight (its response is the latest progress event) is
  *pending*: ``in_flight="wait"`` raises :class:`PendingToolCallsError`
  (before anything is returned; the caller waits and retries), ``"cancel"``
  answers it with ``ToolCallCancelled``.

Reasons are derived from positions only, so the same log plans the same events. They are the
runtime's words, shown with its trust: a call is named in them by ``call_ref`` (its id when that
is a plain token), never by whatever the model or a trace wrote as its id.
"""

from __future__ import annotations

from typing import Literal, assert_never

from contextfold.domain.errors import CompactionError, PendingToolCallsError
from contextfold.domain.events import AnyEvent, ToolCallCancelled, ToolResultLost
from contextfold.projections.render.runtime_lines import call_ref
from contextfold.projections.state import RunState, ToolGroup

__all__ = ["check_compaction_cover", "lost_call_events", "recovery_events"]


def recovery_events(state: RunState, *,
                    in_flight: Literal["wait", "cancel"]) -> list[AnyEvent]:
    """The recovery events that make every open call answered, in call order."""
    lost: list[AnyEvent] = []
    pending: list[tuple[str, int]] = []
    for call_id, call_pos in sorted(state.pairing.open.items(),
                                    key=lambda kv: (kv[1], _call_index(state, kv[0], kv[1]))):
        if call_pos < state.last_progress:
            lost.append(ToolResultLost(
                call_id=call_id, call_position=call_pos,
                reason=(f"no result recorded for call {call_ref(call_id)} (issued at position "
                        f"{call_pos}) before the run moved on at position "
                        f"{state.last_progress}")))
        else:
            pending.append((call_id, call_pos))
    if not pending:
        return lost
    match in_flight:
        case "wait":
            raise PendingToolCallsError([cid for cid, _ in pending])
        case "cancel":
            return lost + [ToolCallCancelled(
                call_id=cid,
                reason=(f"call {call_ref(cid)} (issued at position {pos}) still in flight at "
                        f"version {state.version}; cancelled by the in_flight=cancel policy"))
                for cid, pos in pending]
        case _:
            assert_never(in_flight)


def lost_call_events(state: RunState) -> list[AnyEvent]:
    """The TOOL_RESULT_LOST events of :func:`recovery_events` alone: what is already certain
    whatever the build's ``in_flight`` policy. An explicit compaction folds these first (their
    groups are closed, so compactable) and leaves a call still in flight to the next build:
    cancelling it would log a tool the agent may still be running as cancelled."""
    return [e for e in recovery_events(state, in_flight="cancel") if isinstance(e, ToolResultLost)]


def _call_index(state: RunState, call_id: str, call_pos: int) -> int:
    group = state.items.get(call_pos)
    if isinstance(group, ToolGroup):
        for i, slot in enumerate(group.calls):
            if slot.call_id == call_id:
                return i
    return 0


def check_compaction_cover(state: RunState, covers_from: int, covers_to: int) -> None:
    """Raise :class:`CompactionError` unless ``[covers_from, covers_to]`` is a legal cut.

    Legal: inside the log, and no tool group is split — every group with a
    position in the range (its call or any answer) lies wholly inside it and
    is closed (all calls answered); only a runtime recovery answer (lost,
    cancelled) may lie after the range (``masking.wholly_inside``). Call before
    appending a HistoryCompacted.
    """
    if not 1 <= covers_from <= covers_to <= state.version:
        raise CompactionError(
            f"cover {covers_from}-{covers_to} is outside the log (positions 1-{state.version})")
    for pos in range(covers_from, covers_to + 1):
        gpos = pos if isinstance(state.items.get(pos), ToolGroup) else state.answer_group.get(pos)
        if gpos is None:
            continue
        group = state.items[gpos]
        assert isinstance(group, ToolGroup)
        if not group.closed:
            raise CompactionError(
                f"cover {covers_from}-{covers_to} splits group {group.group_id}: "
                f"calls {[c.call_id for c in group.calls if c.status == 'open']} are still open")
        outside = [p for p in group.tool_positions if not covers_from <= p <= covers_to]
        if outside:
            raise CompactionError(
                f"cover {covers_from}-{covers_to} splits group {group.group_id} "
                f"(positions {list(group.positions)}; outside the cover: {outside})")
