"""The visible conversation timeline: its items and the index that keeps them in layout order.

Apart from :mod:`contextfold.projections.state` because the fold writes these items and
every build reads them, and because keeping the index incremental (O(new events) per
step on a long run) is a concern of its own. ``RunState`` re-exports the item types; a tool
group and its slots are defined in :mod:`~contextfold.projections.tool_group`.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

from contextfold.domain.fragments import Trust
from contextfold.domain.log import RecordedEvent
from contextfold.projections.tool_group import RECOVERY_STATUSES, CallSlot, CallStatus, ToolGroup

if TYPE_CHECKING:
    from contextfold.projections.state import RunState

__all__ = [
    "RECOVERY_STATUSES",
    "CallSlot",
    "CallStatus",
    "MessageItem",
    "SummaryItem",
    "SummarySource",
    "TimelineIndex",
    "TimelineItem",
    "TimelineMark",
    "ToolGroup",
]


@dataclass(frozen=True, slots=True)
class MessageItem:
    """A single-fragment timeline entry.

    ``role``: ``user`` (user input), ``assistant`` (a response without tool
    calls), ``note`` (a data note: a late tool result, a hand-off note).
    """

    position: int
    fragment_id: str
    role: Literal["user", "assistant", "note"]
    kind: Literal["message"] = "message"

    @property
    def fragment_ids(self) -> tuple[str, ...]:
        return (self.fragment_id,)


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """A compaction summary standing in for the items it ``covered`` (their start positions)."""

    position: int
    fragment_id: str
    covers_from: int
    covers_to: int
    covered: tuple[int, ...]
    kind: Literal["summary"] = "summary"

    @property
    def fragment_ids(self) -> tuple[str, ...]:
        return (self.fragment_id,)


TimelineItem: TypeAlias = ToolGroup | MessageItem | SummaryItem


@dataclass(frozen=True, slots=True)
class SummarySource:
    """What a visible summary's text is rendered from besides the state in force
    (``fold_compaction.refresh_summaries``): its event, as logged, and what the fold found when
    it folded it (the cover, the trust it is shown with, the lines the log confirms)."""

    rec: RecordedEvent
    fragment_id: str
    covers_from: int
    covers_to: int
    trust: Trust
    confirmed: tuple[str, ...]
    handed: tuple[str, ...]
    plan_steps: tuple[str, ...]
    """The ids of the plan in force when it was folded: the plan its steps' lines copy, which a
    later plan replaces, not brings back."""


class TimelineMark(NamedTuple):
    """Where a reader of the live timeline was (``RunState.live_timeline``): the index and its
    serial then. A new index (a summary re-laid the timeline out) invalidates every mark."""

    source: TimelineIndex
    serial: int


_LOG_LENGTH = 64
"""Steps of the timeline whose replaced indices are remembered (``changes_since``)."""


class TimelineIndex:
    """Layout order of the visible timeline, kept up to date incrementally.

    Why: a build reads the timeline several times, and a long run has thousands
    of items; sorting them all per call was a visible part of a build. The fold
    only ever (a) appends an item at a position above every existing one, which
    sorts last unless it is a summary, (b) replaces an item in place (a call
    answered, a result masked), which does not move it, and (c) hides items,
    only when it appends a summary. So: new non-summary items are appended to
    the order; anything else (a summary, a hidden count that changed, fewer
    items: a different state) rebuilds the index with the full sort.

    Also tracked for ``required_ids``: the newest visible user input, tool group
    and summary *by position*, and the visible user inputs flagged required.

    The items themselves are kept as a list patched per step, not looked up again: an
    answered call replaces its group (``answer_group`` grows by one per answer), a mask
    replaces the groups it stubs (``masked`` grows), nothing else replaces an item.
    Looking up every position of a 10k-message run again cost ~0.6 ms per turn. The indices
    each step patched are logged, so a caller learns what changed since it last looked
    (``changes_since``, ``changes``) without comparing.

    The builder reads the patched list itself (:meth:`live`), not a tuple copy of it
    (:meth:`items`): on a 10k-message run a fresh ~4,700-item tuple per turn cost about
    0.2 ms of the first build of the turn, cold, in making it, in the cyclic GC's traversal
    of it while it was young, and in freeing the last one.
    """

    __slots__ = (
        "_at",
        "_items",
        "_items_serial",
        "_list",
        "_log",
        "_prev",
        "_prev_serial",
        "last_group",
        "last_summary",
        "last_user",
        "n_hidden",
        "n_items",
        "order",
        "required_users",
        "serial",
        "tool_names",
        "version",
    )

    def __init__(self) -> None:
        self.order: list[int] = []
        self.required_users: list[int] = []
        self.last_user: int | None = None
        self.last_group: int | None = None
        self.last_summary: int | None = None
        self.tool_names: set[str] = set()
        self.n_items = 0
        self.n_hidden = 0
        self.version: tuple[int, int, int] = (-1, 0, 0)
        """(state version, answers, masks) when ``_list`` was last brought up to date."""
        self._list: list[TimelineItem] | None = None
        self._at: dict[int, int] | None = None
        self.serial = 0
        """Counts the steps that touched ``_list``; ``_log`` keeps the recent ones' replaced indices,
        one entry per serial, the newest (``serial``'s) last."""
        self._log: deque[list[int] | None] = deque(maxlen=_LOG_LENGTH)
        self._items: tuple[TimelineItem, ...] | None = None
        self._items_serial = 0
        self._prev: tuple[TimelineItem, ...] | None = None
        self._prev_serial = 0

    @classmethod
    def of(cls, state: RunState) -> TimelineIndex:
        index = cls()
        visible = [it for pos, it in state.items.items() if pos not in state.hidden]
        for it in visible:
            index._note(state, it)
        visible.sort(key=lambda it: (it.covers_from, 0, it.position)
                     if isinstance(it, SummaryItem) else (it.position, 1, it.position))
        index.order = [it.position for it in visible]
        index.n_items, index.n_hidden = len(state.items), len(state.hidden)
        return index

    def _note(self, state: RunState, item: TimelineItem) -> None:
        if isinstance(item, MessageItem) and item.role == "user":
            self.last_user = item.position
            if state.entries[item.fragment_id].required:
                self.required_users.append(item.position)
        elif isinstance(item, ToolGroup):
            self.last_group = item.position
            self.tool_names.update(c.name for c in item.calls)
        elif isinstance(item, SummaryItem):
            self.last_summary = item.position

    def key(self, state: RunState) -> tuple[int, int, int, int]:
        return (state.version, self.n_items, self.n_hidden, len(state.answer_group) + len(state.masked))

    def extend(self, state: RunState) -> bool:
        """Catch up with items appended since; False when only a rebuild can."""
        if len(state.hidden) != self.n_hidden or len(state.items) < self.n_items:
            return False
        if len(state.items) == self.n_items:
            return True
        new = list(itertools.islice(reversed(state.items), len(state.items) - self.n_items))
        new.reverse()
        last = self.order[-1] if self.order else -1
        for pos in new:
            item = state.items[pos]
            if isinstance(item, SummaryItem) or pos <= last or pos in state.hidden:
                return False
            last = pos
        for pos in new:
            self._note(state, state.items[pos])
            if self._at is not None:
                self._at[pos] = len(self.order)
            self.order.append(pos)
        self.n_items = len(state.items)
        return True

    def _sync(self, state: RunState) -> None:
        """Bring ``_list`` up to the state's version, patched in place (class docstring); each
        step that touches it is logged under a new serial with the indices it replaced (None:
        made afresh, nothing known)."""
        version = (state.version, len(state.answer_group), len(state.masked))
        if self._list is not None and self.version == version:
            return
        items, lst = state.items, self._list
        _, answers_before, masks_before = self.version
        patched: list[int] = []
        known = lst is not None and version[2] == masks_before and version[1] >= answers_before
        if lst is None or not known:
            lst = self._list = list(map(items.__getitem__, self.order))
        else:
            lst.extend(map(items.__getitem__, self.order[len(lst):]))  # a slice: islice walks the head
            answered = version[1] - answers_before
            if answered:
                if self._at is None:  # made in C: a comprehension over a 10k-message run's ~4,700
                    # positions was ~0.9 ms of the first build of the first turn that answered
                    self._at = dict(zip(self.order, range(len(self.order)), strict=True))
                for gpos in itertools.islice(reversed(state.answer_group.values()), answered):
                    i = self._at.get(gpos)  # None: a hidden group
                    if i is not None and lst[i] is not items[gpos]:
                        lst[i] = items[gpos]
                        patched.append(i)
        self.serial += 1
        self._log.append(patched if known else None)
        self.version = version

    def live(self, state: RunState) -> list[TimelineItem]:
        """The visible items as the index's own list, patched in place by later steps."""
        self._sync(state)
        assert self._list is not None
        return self._list

    def changes_since(self, serial: int, upto: int | None = None) -> list[int] | None:
        """Indices the steps after ``serial`` (up to ``upto``, by default the last) replaced,
        appended ones excluded, ascending; None when the log does not reach back that far or a
        step made the list afresh."""
        upto = self.serial if upto is None else upto
        # The log holds the last len(_log) serials, consecutive: those after ``serial`` up to
        # ``upto`` are the ones from (self.serial - upto) to (self.serial - serial) back.
        if not serial <= upto <= self.serial or self.serial - serial > len(self._log):
            return None
        out: set[int] = set()
        for patched in itertools.islice(reversed(self._log), self.serial - upto, self.serial - serial):
            if patched is None:
                return None
            out.update(patched)
        return sorted(out)

    def items(self, state: RunState) -> tuple[TimelineItem, ...]:
        """The visible items as a tuple, made once per state version (a snapshot: :meth:`live`
        is the list it is copied from)."""
        self._sync(state)
        if self._items is None or self._items_serial != self.serial:
            assert self._list is not None
            self._prev, self._prev_serial = self._items, self._items_serial
            self._items, self._items_serial = tuple(self._list), self.serial
        return self._items

    def changes(self, old: tuple[TimelineItem, ...], new: tuple[TimelineItem, ...]) -> list[int] | None:
        """Indices below ``len(old)`` whose item differs in ``new``, when this index made ``new``
        right after ``old`` (or they are the same tuple); None when it does not know."""
        if old is new:
            return []
        if new is self._items and old is self._prev:
            changed = self.changes_since(self._prev_serial, self._items_serial)
            return None if changed is None else [i for i in changed if i < len(old)]
        return None
