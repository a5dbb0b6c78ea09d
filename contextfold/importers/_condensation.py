"""An agent's own condensation of its history -> the :class:`HistoryCompacted` that stands in for it.

Why: OpenHands' condensers (the LLM-summarizing one in long runs) take events out of what the
model sees and show a summary in their place. Imported with the events kept whole and the
condensation skipped, a rebuild showed the model history it had not seen since, and an audit
could not say what it saw. Both OpenHands streams log a condensation as an event naming the
events it forgets (``forgotten_event_ids``, or a ``forgotten_events_start_id`` ..
``forgotten_events_end_id`` range in the earlier stream) and its ``summary``.

What the model saw is the union of every condensation's forgotten events so far (a view drops
each one that any condensation forgot) with the latest summary. So each condensation with a
summary becomes one ``HistoryCompacted`` over the log positions that union maps to, when they
are one legal cover: contiguous (this log's own earlier summaries may sit inside: a later
condensation forgets its predecessor too) and splitting no tool group (every call answered
inside, every answer's call inside), the rule a compaction recorded by contextfold obeys. The
summary is an LLM's text, so it is recorded as an inference, never as facts. A condensation
without a summary (events only dropped) or one that is not a legal cover is left out, as
before: the events stay whole and the builder compacts on its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    HistoryCompacted,
    ModelResponse,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
)
from contextfold.importers._common import RunBuilder
from contextfold.importers._json import JsonPath

__all__ = ["SUMMARIZER", "Condensations", "whole_groups"]

SUMMARIZER = "openhands"
"""The ``summarizer`` an imported condensation's ``HistoryCompacted`` names."""


class Condensations:
    """The log positions each source event became, and the condensations made of them."""

    def __init__(self, run: RunBuilder) -> None:
        self._run = run
        self._positions: dict[Hashable, tuple[int, ...]] = {}
        self._forgotten: set[int] = set()
        self._summaries: set[int] = set()
        self._current: Hashable = None
        self._since = len(run.events)

    def begin(self, event: dict[str, Any], index: int) -> None:
        """Call before the source event at ``index`` is read: the log positions the previous one
        became are noted under its id (its index when it has no id a condensation could name)."""
        last = len(self._run.events)
        if last > self._since:
            self._positions[self._current] = tuple(range(self._since + 1, last + 1))
        eid = event.get("id", index)
        self._current, self._since = (eid if isinstance(eid, int | str) else index), last

    def condense(self, forgotten: Iterable[Hashable], summary: object, path: JsonPath) -> None:
        """Record a condensation: it forgets ``forgotten`` (source ids) and shows ``summary``. Its
        own ``HistoryCompacted`` may lie inside a later one's cover (``_summaries``): a view of
        the later condensation no longer shows the earlier summary either."""
        for fid in forgotten:
            self._forgotten.update(self._positions.get(fid, ()))
        if not isinstance(summary, str) or not summary.strip() or not self._forgotten:
            return
        lo, hi = min(self._forgotten), max(self._forgotten)
        if set(range(lo, hi + 1)) - self._forgotten - self._summaries:
            return  # not one contiguous cover of this log
        run = self._run
        if not whole_groups(run.events[lo - 1:hi]):
            return
        run.add(HistoryCompacted(summary=CompactionSummary(inferences=(summary.strip(),)), covers_from=lo,
                                 covers_to=hi, strategy="summary", summarizer=SUMMARIZER), path)
        self._summaries.add(len(run.events))


def whole_groups(events: Sequence[AnyEvent]) -> bool:
    """Whether ``events`` (a slice of the log) hold whole tool groups: each call answered inside,
    each answer's call inside (call ids are scoped: one may be issued again once answered)."""
    open_calls: set[str] = set()
    for event in events:
        if isinstance(event, ModelResponse):
            for call in event.tool_calls:
                if call.call_id in open_calls:
                    return False
                open_calls.add(call.call_id)
        elif isinstance(event, ToolResult | ToolResultLost | ToolCallCancelled):
            if event.call_id not in open_calls:
                return False
            open_calls.discard(event.call_id)
    return not open_calls
