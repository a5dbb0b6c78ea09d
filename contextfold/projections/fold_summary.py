"""Text of a compaction summary fragment.

Why a fixed layout: the summary is a runtime fragment that stands in for many
turns, so it must be deterministic (same event -> same bytes -> same hash)
and keep the seed's sections in a stable order. Inferences are labelled as
such so the model never reads them as recorded facts.

Why the user's constraints go first, apart: a summary is shown as a data block
at the lowest trust of what it covers (a fetched page's text in an error line
must not rise to runtime trust), and a user's "never deploy without my approval"
inside it lost its authority once compacted: the model reads a data block as
facts, not rules (the seed: constraints from turn 1 still hold at turn 50). A
constraint line the log confirms word for word (the user's own message at the
position it names, quoted as the built-in summary quotes it) is shown before
the data block, under :data:`USER_CONSTRAINTS_HEADER`, with the user's
authority; a line a plug-in summary reworded stays in the data block.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from contextfold.domain.events import HistoryCompacted
from contextfold.projections.summary_text import user_statement

__all__ = ["USER_CONSTRAINTS_HEADER", "confirmed_user_constraints", "render_summary", "split_summary"]

USER_CONSTRAINTS_HEADER = "[runtime] What the user asked in the compacted history, quoted from the log:"
_SUMMARY_START = "\n\nsummary of events "
_USER_LINE = re.compile(r"(required user input|user) at event (\d+): (.*)", re.DOTALL)

_SECTIONS: tuple[tuple[str, str], ...] = (
    ("success_contract", "success contract"),
    ("completed_steps", "completed steps"),
    ("pending_steps", "pending steps"),
    ("decisions", "decisions"),
    ("constraints", "constraints"),
    ("tool_calls_and_results", "tool calls and results"),
    ("evidence_refs", "evidence refs"),
    ("side_effects", "side effects"),
    ("known_failures", "known failures"),
    ("inferences", "inferences (not recorded facts)"),
)


def confirmed_user_constraints(event: HistoryCompacted, run_id: str,
                               user_text: Callable[[int], str | None]) -> tuple[str, ...]:
    """The constraint lines of ``event``'s summary that quote a user message word for word as the
    built-in summary does: ``user_text(position)`` is the text of the user's own input logged
    there (None for anything else: a hand-off's task, a note)."""
    out: list[str] = []
    for line in event.summary.constraints:
        m = _USER_LINE.fullmatch(line)
        if m is None:
            continue
        said = user_text(int(m.group(2)))
        if said is None:
            continue
        quoted = said if m.group(1) == "required user input" else user_statement(
            said, f"event://{run_id}/{m.group(2)}")
        if m.group(3) == quoted:
            out.append(line)
    return tuple(out)


def split_summary(text: str) -> tuple[str, str]:
    """A summary fragment's text as (the user's confirmed constraints, the rest): the first part
    is empty when there are none. Split at the first summary heading, which a quoted user
    message may hold too: then more of it is shown as data, never less."""
    if not text.startswith(USER_CONSTRAINTS_HEADER):
        return "", text
    at = text.find(_SUMMARY_START)
    if at < 0:
        return "", text
    return text[:at], text[at + 2:]


def render_summary(event: HistoryCompacted, confirmed: tuple[str, ...] = ()) -> str:
    """``event.summary`` as sectioned text; empty sections are left out. ``confirmed``
    (:func:`confirmed_user_constraints`) go first, under their header, and out of the
    constraints section."""
    s = event.summary
    lines = [f"summary of events {event.covers_from}-{event.covers_to} "
             f"({event.strategy}, {event.summarizer})"]
    if confirmed:
        lines[:0] = [USER_CONSTRAINTS_HEADER, *(f"- {c}" for c in confirmed), ""]
    if s.goal:
        lines.append(f"goal: {s.goal}")
    for attr, title in _SECTIONS:
        values: tuple[str, ...] = getattr(s, attr)
        if attr == "constraints" and confirmed:
            values = tuple(v for v in values if v not in confirmed)
        if values:
            lines.append(f"{title}:")
            lines.extend(f"- {v}" for v in values)
    if s.next_action:
        lines.append(f"next action: {s.next_action}")
    return "\n".join(lines)
