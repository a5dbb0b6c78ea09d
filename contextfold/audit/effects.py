"""Before and after each compaction: what the requests cost, how often the model repeated a call,
how often its calls failed.

Why: the manifest is to answer how success, cost and repeated calls change around a compaction
(the seed's section 9). A compaction that dropped something the model still needed shows as
calls it makes again (the same tool with the same arguments as a call earlier in the run) and
as calls that fail; one that worked shows as cheaper requests with neither rising. The log holds
all three: each turn's manifest (the tokens its request held), each response's calls, and each
result's error flag and exit code. Turn N is the request behind the N-th model response and
that response's calls, whose results are counted with it.

A turn may be built more than once: built, then compacted because it did not fit, then built
again (``contextfold compact`` then ``build``). Each build is a request on its own side of the
compaction: the first one before it, the rebuild after it, so the effect names the turn whose
request the compaction changed. (Only each turn's first record was read: a compaction followed
by a rebuild of the same turn showed "-> no turn", the very request it changed left out.) The
turn's calls are counted once, with its last build: the request its response answered.

Pure: events and the builds in, one :class:`CompactionEffect` per compaction out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from contextfold.domain.canonical import canonical_dumps, strict_json
from contextfold.domain.events import HistoryCompacted, ModelResponse, ToolResult
from contextfold.domain.log import RecordedEvent

__all__ = ["WINDOW_TURNS", "Around", "Build", "CompactionEffect", "compaction_effects", "describe"]

WINDOW_TURNS = 5
"""Turns compared on each side of a compaction: near enough to see its effect, enough to average."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Around(_Frozen):
    """The turns on one side of a compaction."""

    turns: tuple[int, ...]
    mean_selected_tokens: float | None
    """Mean tokens of those turns' requests (their manifests' ``selected_tokens``); None for no turn."""
    calls: int
    """Tool calls the model made in those turns' responses (a turn's calls are counted on the side
    of its last build, the request the response answered)."""
    repeated_calls: int
    """Calls of the same tool with the same arguments (compared as canonical JSON) as a call earlier
    in the run: work the model did again, often because what it learned was no longer shown."""
    results: int
    failed_results: int
    """Results of those calls that failed: ``is_error``, or an exit code other than 0."""


class CompactionEffect(_Frozen):
    positions: tuple[int, ...]
    """The compactions logged with no turn built between them (a ladder's mask then summary, say):
    one change as far as the turns around them are concerned."""
    strategies: tuple[str, ...]
    before: Around
    """Up to ``WINDOW_TURNS`` turns whose requests were built before the compaction was logged
    (each turn's latest such request)."""
    after: Around
    """Up to ``WINDOW_TURNS`` turns whose requests were built from a log holding it (each turn's
    first such request). A turn built on both sides (compacted, then built again) is on both."""


class Build(NamedTuple):
    """One request built for a turn: a ``context_built`` record, or the audit's rebuild of a turn
    without one."""

    turn: int
    log_version: int
    """The last log position it folded (the manifest's ``log_version``)."""
    selected_tokens: int


@dataclass
class _TurnWork:
    calls: int = 0
    repeated: int = 0
    results: int = 0
    failed: int = 0


def _call_key(name: str, arguments: str) -> tuple[str, str]:
    """A call's identity for "the same call again": its tool and its arguments as canonical JSON
    (key order and spacing aside), or verbatim when they are not JSON (as the renderers take
    them: 3,000 levels deep made the audit end in a RecursionError, and 1e400 and 1e401 were
    one call, both Infinity)."""
    try:
        return name, canonical_dumps(strict_json(arguments))
    except (ValueError, RecursionError):
        return name, arguments


def _work_per_turn(events: Sequence[RecordedEvent]) -> dict[int, _TurnWork]:
    """Turn N -> the calls of the N-th response, and the results that answered them."""
    work: dict[int, _TurnWork] = {}
    seen: set[tuple[str, str]] = set()
    open_calls: dict[str, int] = {}  # call id -> its response's turn, until answered
    turn = 0
    for rec in events:
        ev = rec.event
        if isinstance(ev, ModelResponse):
            turn += 1
            w = work[turn] = _TurnWork()
            for call in ev.tool_calls:
                key = _call_key(call.name, call.arguments)
                w.calls += 1
                w.repeated += key in seen
                seen.add(key)
                open_calls[call.call_id] = turn
        elif isinstance(ev, ToolResult) and ev.call_id in open_calls:
            w = work[open_calls.pop(ev.call_id)]
            w.results += 1
            w.failed += ev.is_error or ev.exit_code not in (None, 0)
    return work


def _around(side: Sequence[Build], work: dict[int, _TurnWork], answered: dict[int, int]) -> Around:
    """``side``'s builds (one per turn) summed; a turn's work only where its build is the one its
    response answered (``answered``: turn -> the log version of its last build)."""
    done = [work.get(b.turn, _TurnWork()) for b in side if answered[b.turn] == b.log_version]
    tokens = [b.selected_tokens for b in side]
    return Around(turns=tuple(b.turn for b in side),
                  mean_selected_tokens=round(sum(tokens) / len(tokens), 1) if tokens else None,
                  calls=sum(w.calls for w in done), repeated_calls=sum(w.repeated for w in done),
                  results=sum(w.results for w in done), failed_results=sum(w.failed for w in done))


def _distinct_turns(builds: Iterable[Build], window: int) -> list[Build]:
    """The first build of each turn met in ``builds``, until ``window`` turns are met."""
    seen: set[int] = set()
    out: list[Build] = []
    for b in builds:
        if b.turn not in seen:
            seen.add(b.turn)
            out.append(b)
            if len(out) == window:
                break
    return out


def compaction_effects(events: Sequence[RecordedEvent], builds: Iterable[Build],
                       window: int = WINDOW_TURNS) -> tuple[CompactionEffect, ...]:
    """One entry per compaction in ``events``: the ``window`` turns before it beside the ``window``
    after it. ``builds``: every request built for a turn (each record, and the audit's rebuild of
    a turn without one); a build's side is where it was built, by the log version it folded."""
    work = _work_per_turn(events)
    ordered: dict[tuple[int, int], Build] = {}
    for b in builds:  # a turn built twice from the same log (a replay's record) is one request
        ordered.setdefault((b.turn, b.log_version), b)
    built = sorted(ordered.values(), key=lambda b: (b.log_version, b.turn))  # in the order they were built
    versions = [b.log_version for b in built]
    answered: dict[int, int] = {}
    for b in built:
        answered[b.turn] = b.log_version  # (sorted: the last one wins)
    effects: list[CompactionEffect] = []
    last_cut = -1
    for rec in events:
        if not isinstance(rec.event, HistoryCompacted):
            continue
        cut = bisect_left(versions, rec.position)  # a long run compacts at many of its thousands of turns
        if effects and cut == last_cut:  # no request built in between (a ladder's mask then summary)
            last = effects[-1]
            effects[-1] = last.model_copy(update={"positions": (*last.positions, rec.position),
                                                  "strategies": (*last.strategies, rec.event.strategy)})
            continue
        last_cut = cut
        # walked out from the cut, never sliced: each turn's latest build before, its first after
        before = _distinct_turns((built[i] for i in range(cut - 1, -1, -1)), window)[::-1]
        after = _distinct_turns((built[i] for i in range(cut, len(built))), window)
        effects.append(CompactionEffect(positions=(rec.position,), strategies=(rec.event.strategy,),
                                        before=_around(before, work, answered),
                                        after=_around(after, work, answered)))
    return tuple(effects)


def _turns(a: Around) -> str:
    """``turns 36-39, 41``: runs of consecutive turns as ranges (a turn the audit could not
    rebuild is not among them)."""
    if not a.turns:
        return "no turn"
    spans: list[list[int]] = []
    for t in a.turns:
        if spans and t == spans[-1][1] + 1:
            spans[-1][1] = t
        else:
            spans.append([t, t])
    text = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in spans)
    return f"turn {text}" if len(a.turns) == 1 else f"turns {text}"


def _tokens(a: Around) -> str:
    return "-" if a.mean_selected_tokens is None else f"{a.mean_selected_tokens:g}"


def describe(effect: CompactionEffect) -> str:
    """One line: ``at 28 (mask): turns 1-5 -> turns 6-10: tokens per request 1912.4 -> 1063;
    repeated calls 0 of 4 -> 1 of 3; failed results 1 of 4 -> 0 of 3``."""
    b, a = effect.before, effect.after
    where = f"at {', '.join(map(str, effect.positions))} ({', '.join(effect.strategies)})"
    return (f"{where}: {_turns(b)} -> {_turns(a)}: tokens per request "
            f"{_tokens(b)} -> {_tokens(a)}; repeated calls {b.repeated_calls} of {b.calls} -> "
            f"{a.repeated_calls} of {a.calls}; failed results {b.failed_results} of {b.results} -> "
            f"{a.failed_results} of {a.results}")
