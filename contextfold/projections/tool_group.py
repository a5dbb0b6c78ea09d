"""A tool group and its call slots, kept so that answering one call of a batch costs O(1).

Why apart from :mod:`~contextfold.projections.timeline_items` (which re-exports these): a group is
an immutable value, yet a reply with thousands of parallel calls is answered one event at a time.
Each answer made a new group holding a new tuple of every slot, found its slot by scanning them,
and the builder found each answer's slot by scanning its group again (for the answer's call id,
``fragment_facts.call_id_tokens``; for the latest error, ``RunState._latest_error``): n answers cost
n * n, 4.5 s of CPU to fold 8,000 answers and 3.3 s to build them.

So every version of one group the fold makes shares one log of its slots, indexed by call id and
answer position once; answering a call appends to the log (O(1)) and makes a new group object
that sees one more change, and the slots tuple of a version is made only when read (once per
version). The old versions are unchanged, so a snapshot (``RunState.snapshot``) keeps its view,
and each answer still replaces the group object: the timeline index and the builder's memos
notice what changed as before. A past version answered again (a snapshot folded on) starts a
log of its own.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import ClassVar, Literal, TypeAlias

__all__ = ["RECOVERY_STATUSES", "CallSlot", "CallStatus", "ToolGroup"]

CallStatus: TypeAlias = Literal["open", "ok", "error", "lost", "cancelled"]
RECOVERY_STATUSES = ("lost", "cancelled")
"""The answers the runtime wrote (``ToolResultLost``, ``ToolCallCancelled``), not the tool: logged
when a build finds the call unanswered, maybe long after it, so they neither keep a group out of
a compaction's cover (:attr:`ToolGroup.tool_positions`) nor make it rank as new
(``timeline_units.ranked_position``)."""


@dataclass(frozen=True, slots=True)
class CallSlot:
    """One call of a parallel batch and how it was answered (exactly once, or still open)."""

    call_id: str
    name: str
    status: CallStatus = "open"
    answer_id: str | None = None
    answer_position: int | None = None
    alias: str | None = None
    """The id shown instead of ``call_id`` to the providers in ``alias_for`` (``call_ids``)."""
    alias_for: tuple[str, ...] = ()


class _SlotLog:
    """The slots of one group as its calls are answered, shared by the group's versions: a version
    sees ``first`` with the first ``n`` of ``changes`` applied (module docstring). Only appended
    to, and only by the newest version, so what an older version sees never changes."""

    __slots__ = ("by_answer", "by_call", "changed", "changes", "first")

    def __init__(self, first: tuple[CallSlot, ...]) -> None:
        self.first = first
        self.by_call: dict[str, int] = {}
        """Call id -> slot index (a reply's call ids are distinct: the first, as a scan found)."""
        self.by_answer: dict[int, int] = {}
        """Answer position -> slot index, as of the newest version (a lookup checks the slot)."""
        for i, slot in enumerate(first):
            self.by_call.setdefault(slot.call_id, i)
            if slot.answer_position is not None:
                self.by_answer.setdefault(slot.answer_position, i)
        self.changes: list[tuple[int, CallSlot]] = []
        self.changed: dict[int, int] = {}
        """Slot index -> the index in ``changes`` of its change (a slot changes once per log)."""


class ToolGroup:
    """An assistant response with tool calls and their answers: one atomic unit.

    ``fragment_id`` is the assistant (history) fragment; each slot's
    ``answer_id`` the tool_result fragment that answers it. Renderers lay it
    out as the assistant message followed by the answers in call order.

    Immutable, compared and hashed by ``(position, fragment_id, calls)``; :meth:`answered` makes
    the next version in O(1) (module docstring).
    """

    __slots__ = ("_calls", "_log", "_seen", "fragment_id", "position")
    __match_args__ = ("position", "fragment_id", "calls")
    kind: ClassVar[Literal["group"]] = "group"

    position: int
    fragment_id: str
    _log: _SlotLog
    _seen: int
    _calls: tuple[CallSlot, ...] | None

    def __init__(self, position: int, fragment_id: str, calls: tuple[CallSlot, ...]) -> None:
        calls = tuple(calls)
        self._set(position, fragment_id, _SlotLog(calls), 0, calls)

    def _set(self, position: int, fragment_id: str, log: _SlotLog, seen: int,
             calls: tuple[CallSlot, ...] | None) -> None:
        for name, value in (("position", position), ("fragment_id", fragment_id), ("_log", log),
                            ("_seen", seen), ("_calls", calls)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    @property
    def calls(self) -> tuple[CallSlot, ...]:
        """The slots in call order, as of this version (made once, when first read)."""
        calls = self._calls
        if calls is None:
            slots = list(self._log.first)
            for i, slot in self._log.changes[:self._seen]:
                slots[i] = slot
            calls = tuple(slots)
            object.__setattr__(self, "_calls", calls)
        return calls

    def _slot_at(self, i: int) -> CallSlot:
        change = self._log.changed.get(i)
        if change is not None and change < self._seen:
            return self._log.changes[change][1]
        return self._log.first[i]

    def slot(self, call_id: str) -> CallSlot | None:
        """The slot of the call ``call_id``, if the group made it: O(1)."""
        i = self._log.by_call.get(call_id)
        return None if i is None else self._slot_at(i)

    def answered_at(self, position: int) -> CallSlot | None:
        """The slot the answer logged at ``position`` answered, if it is one of this group's: O(1)."""
        i = self._log.by_answer.get(position)
        slot = None if i is None else self._slot_at(i)
        return slot if slot is not None and slot.answer_position == position else None

    def answered(self, slot: CallSlot) -> ToolGroup:
        """This group with the slot of ``slot.call_id`` replaced by ``slot`` (its answer): the next
        version, in O(1) when this is the newest one (module docstring). KeyError: no such call."""
        log = self._log
        i = log.by_call[slot.call_id]
        if len(log.changes) != self._seen or i in log.changed:
            log = _SlotLog(self.calls)  # a past version answered again: a log of its own
        log.changed[i] = len(log.changes)
        log.changes.append((i, slot))
        if slot.answer_position is not None:
            log.by_answer[slot.answer_position] = i
        group = ToolGroup.__new__(ToolGroup)
        group._set(self.position, self.fragment_id, log, len(log.changes), None)
        return group

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ToolGroup):
            return NotImplemented
        return (self.position == other.position and self.fragment_id == other.fragment_id
                and self.calls == other.calls)

    def __hash__(self) -> int:
        return hash((self.position, self.fragment_id, self.calls))

    def __repr__(self) -> str:
        return (f"ToolGroup(position={self.position!r}, fragment_id={self.fragment_id!r}, "
                f"calls={self.calls!r}, kind={self.kind!r})")

    @property
    def group_id(self) -> str:
        return f"g{self.position}"

    @property
    def closed(self) -> bool:
        return all(c.status != "open" for c in self.calls)

    @property
    def fragment_ids(self) -> tuple[str, ...]:
        return (self.fragment_id, *(c.answer_id for c in self.calls if c.answer_id))

    @property
    def positions(self) -> tuple[int, ...]:
        return (self.position, *(c.answer_position for c in self.calls
                                 if c.answer_position is not None))

    @property
    def tool_positions(self) -> tuple[int, ...]:
        """``positions`` without the runtime recovery answers (lost, cancelled): what the call and
        its tool produced. A recovery marker is appended when a build finds the call unanswered,
        which may be long after it; a compaction cover need not reach it (``masking.wholly_inside``)."""
        return (self.position, *(c.answer_position for c in self.calls
                                 if c.answer_position is not None and c.status not in RECOVERY_STATUSES))
