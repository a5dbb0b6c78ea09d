"""Which turn a time names: the turn whose request was the last one built at or before it.

Pure (:mod:`contextfold.domain.event_times` says where times come from). A turn's request was built
at the time of its ``context_built`` record (a live run: each build records one; a turn built again
has several, each a request built). A turn without a record (an imported trace holds none) was built
after the last event before its model response and before the response: the time of the last timed
event before the response, the earliest the request can have been made, is taken as its build time;
from then until the next request the model was answering, or had answered, that request. Times need
not grow with positions (an imported trace's clock may step back): requests are ordered by time,
ties by log order (the one later in the log was built last).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from contextfold.domain.errors import TimeNotInRunError
from contextfold.domain.event_times import shown_time
from contextfold.domain.events import AnyEvent, ContextBuilt, ModelResponse

__all__ = ["BuiltRequest", "TurnAtTime", "built_requests", "turn_at"]


@dataclass(frozen=True, slots=True)
class BuiltRequest:
    """One request a run's log says was built: its turn, when, and what says so."""

    turn: int
    at: datetime
    position: int
    """The log position of what gives the time: the record, or the last event before the response."""
    record: bool
    """Whether a ``context_built`` record gives it (else: inferred from the events before the response)."""


@dataclass(frozen=True, slots=True)
class TurnAtTime:
    """The answer of :func:`turn_at`: the turn, the request it stands for, and why, in words."""

    turn: int
    request: BuiltRequest
    why: str


def built_requests(events: Iterable[tuple[int, AnyEvent, datetime | None]]) -> list[BuiltRequest]:
    """The requests a run's log says were built, from its events in log order as ``(position,
    event, time or None)``: one per ``context_built`` record with a time, and for each turn
    without a record one at the time of the last timed event before its model response (the
    module's docstring says why). Events without a time give none. A record of a rebuild
    (``rebuild``: what ``replay`` or ``build --turn`` recorded of a past turn, later) is no request
    the model saw: it is passed over, its turn's time found as if it were not there."""
    out: list[BuiltRequest] = []
    recorded: set[int] = set()
    inferred: list[BuiltRequest] = []
    last: tuple[int, datetime] | None = None
    responses = 0
    for position, event, at in events:
        if isinstance(event, ModelResponse):
            responses += 1
            if last is not None:
                inferred.append(BuiltRequest(responses, last[1], last[0], record=False))
        elif isinstance(event, ContextBuilt) and not event.rebuild:  # a rebuild (an audit's) was not sent
            recorded.add(event.turn)
            if at is not None:
                out.append(BuiltRequest(event.turn, at, position, record=True))
        if at is not None:
            last = (position, at)
    out += [r for r in inferred if r.turn not in recorded]
    out.sort(key=lambda r: (r.at, r.position))
    return out


def turn_at(run_id: str, when: datetime, requests: Sequence[BuiltRequest]) -> TurnAtTime:
    """The turn whose request was the last one built at or before ``when``
    (:func:`built_requests`' requests). :class:`TimeNotInRunError` when the run has none with a
    time, or ``when`` is before the first."""
    if not requests:
        raise TimeNotInRunError(run_id, "its events carry no times (recorded before contextfold kept "
                                "them, or imported from a format without them), so no turn can be "
                                "found by time: pick one with --turn N")
    ordered = sorted(requests, key=lambda r: (r.at, r.position))
    first = ordered[0]
    if when < first.at:
        raise TimeNotInRunError(run_id, f"{shown_time(when)} is before its first request, turn "
                                f"{first.turn}'s, built at {shown_time(first.at)}: nothing was shown to "
                                "the model yet")
    chosen = [r for r in ordered if r.at <= when][-1]
    how = ("its context_built record at position" if chosen.record
           else "the last event before its model response, at position")
    later = [r for r in ordered if r.at > when]
    until = (f"; the next request (turn {later[0].turn}) was built at {shown_time(later[0].at)}" if later
             else "; no later request was built")
    why = (f"turn {chosen.turn}: its request was the last one built at or before "
           f"{shown_time(when)}, at {shown_time(chosen.at)} ({how} {chosen.position}){until}")
    return TurnAtTime(chosen.turn, chosen, why)
