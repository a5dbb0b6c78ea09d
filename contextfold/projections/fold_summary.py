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

A hand-off's task is the same kind of thing, said by the runtime: the note of a
``HandOff(mode="hand_off")`` is a worker run's current input, its constraints included ("never
restart nginx during business hours"). A summary line that quotes it word for word
(:func:`hand_off_line`) is shown before the data block too, under :data:`HANDED_TASK_HEADER`,
with the runtime's authority, and first: a user's required input is quoted raw, newlines and
all, and whatever it holds must never be read as the runtime's block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from contextfold.domain.events import HandOff, HistoryCompacted
from contextfold.projections.summary_shown import ShownRaw
from contextfold.projections.summary_text import names_plan_step, quoted_goal, user_statement

__all__ = ["HANDED_TASK_HEADER", "USER_CONSTRAINTS_HEADER", "confirmed_hand_offs",
           "confirmed_user_constraints", "hand_off_goal", "hand_off_line", "hand_off_text",
           "render_summary", "split_summary"]

USER_CONSTRAINTS_HEADER = "[runtime] What the user asked in the compacted history, quoted from the log:"
HANDED_TASK_HEADER = "[runtime] The task handed over in the compacted history, quoted from the log:"
_SUMMARY_START = "\n\nsummary of events "
_USER_LINE = re.compile(r"(required user input|user) at event (\d+): (.*)", re.DOTALL)
_HAND_OFF = "hand_off "
_HAND_OFF_LINE = re.compile(r"hand_off at event (\d+) \(.*", re.DOTALL)


def hand_off_text(event: HandOff) -> str:
    """The text a hand-off's note is shown as (the fold's fragment): its mode, who handed over to
    whom, and the note."""
    return f"{event.mode} ({event.from_agent or '?'} -> {event.to_agent or '?'}): {event.note}"


def hand_off_goal(event: HandOff, position: int, run_id: str) -> str:
    """A summary's goal when no goal was set and the hand-off logged at ``position`` handed a task
    over (its note; "" for a blank one): the task, said to be the hand-off's."""
    if not event.note.strip():
        return ""
    lead = f"(the task handed over at event {position}, {event.from_agent or '?'} -> {event.to_agent or '?'})"
    return quoted_goal(lead, event.note, f"event://{run_id}/{position}")


def hand_off_line(shown: str, position: int, run_id: str) -> str:
    """The summary's constraint line for the task a ``hand_off`` logged at ``position`` handed
    over, whose fragment reads ``shown`` (:func:`hand_off_text`): quoted as a user's message is
    (bounded, citing the event for the full text), so :func:`confirmed_hand_offs` can check it."""
    said = user_statement(shown.removeprefix(_HAND_OFF), f"event://{run_id}/{position}")
    return f"{_HAND_OFF}at event {position} {said}"


def confirmed_hand_offs(event: HistoryCompacted, run_id: str,
                        handed_text: Callable[[int], str | None]) -> tuple[str, ...]:
    """The constraint lines of ``event``'s summary that quote a hand-off's task word for word
    (:func:`hand_off_line`): ``handed_text(position)`` is the text of the hand-off's task shown at
    that position (None for anything else)."""
    def quoting(m: re.Match[str]) -> str | None:
        shown = handed_text(int(m.group(1)))
        return (hand_off_line(shown, int(m.group(1)), run_id)
                if shown is not None and shown.startswith(_HAND_OFF) else None)
    return _confirmed(event, _HAND_OFF_LINE, quoting)


def _confirmed(event: HistoryCompacted, line_shape: re.Pattern[str],
               confirmed_line: Callable[[re.Match[str]], str | None]) -> tuple[str, ...]:
    """The constraint lines of ``event``'s summary of ``line_shape`` that equal the line
    ``confirmed_line`` makes from the log for the position they name (None: the log has no such
    text there)."""
    return tuple(line for line in event.summary.constraints
                 if (m := line_shape.fullmatch(line)) is not None and confirmed_line(m) == line)


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
    def quoting(m: re.Match[str]) -> str | None:
        said = user_text(int(m.group(2)))
        if said is None:
            return None
        quoted = said if m.group(1) == "required user input" else user_statement(
            said, f"event://{run_id}/{m.group(2)}")
        return f"{m.group(1)} at event {m.group(2)}: {quoted}"
    return _confirmed(event, _USER_LINE, quoting)


def split_summary(text: str) -> tuple[tuple[tuple[Literal["runtime", "user"], str], ...], str]:
    """A summary fragment's text as (the blocks shown before the data block, each with its
    authority: the hand-offs' tasks the runtime's, the user's confirmed constraints the user's;
    the rest): no blocks when there are none. Split at the first summary heading, which a quoted
    user message may hold too: then more of it is shown as data, never less. The runtime's block
    comes first and ends at the user's header: no user's words are ever in it."""
    if not text.startswith((HANDED_TASK_HEADER, USER_CONSTRAINTS_HEADER)):
        return (), text
    at = text.find(_SUMMARY_START)
    if at < 0:
        return (), text
    head, rest = text[:at], text[at + 2:]
    blocks: list[tuple[Literal["runtime", "user"], str]] = []
    if head.startswith(HANDED_TASK_HEADER):
        cut = head.find("\n\n" + USER_CONSTRAINTS_HEADER)
        blocks.append(("runtime", head if cut < 0 else head[:cut]))
        head = "" if cut < 0 else head[cut + 2:]
    if head:
        blocks.append(("user", head))
    return tuple(blocks), rest


def render_summary(event: HistoryCompacted, confirmed: tuple[str, ...] = (),
                   handed: tuple[str, ...] = (), plan_steps: tuple[str, ...] = (),
                   shown: ShownRaw | None = None) -> str:
    """``event.summary`` as sectioned text; empty sections are left out. ``handed``
    (:func:`confirmed_hand_offs`), then ``confirmed`` (:func:`confirmed_user_constraints`) go
    first, each under its header, and out of the constraints section.

    ``plan_steps``: the ids of the plan a request shows beside the summary (the run's plan
    fragment, required, always its newest version). The summary's lines about those steps and a
    next action naming one are left out of the text: they are the plan as it stood at the
    compaction, and after the runtime marked s1 and s2 done the request still said "pending
    steps: [ready] s1" and "next action: plan step s1" below the plan saying s3 was ready. The
    recorded summary keeps them (``show`` renders it whole).

    ``shown`` (:func:`~contextfold.projections.summary_shown.shown_raw`): the lines, goal and
    contract the request shows raw beside the summary (a policy in force, a required input, the
    current goal), left out of the text as the plan's steps are: each was paid for twice in every
    request after a compaction; and the decision line quoting the current goal, cited instead."""
    s, shown = event.summary, shown or ShownRaw()
    lines = [f"summary of events {event.covers_from}-{event.covers_to} "
             f"({event.strategy}, {event.summarizer})"]
    confirmed = tuple(c for c in confirmed if c not in shown.lines)
    if confirmed:
        lines[:0] = [USER_CONSTRAINTS_HEADER, *(f"- {c}" for c in confirmed), ""]
    if handed:
        lines[:0] = [HANDED_TASK_HEADER, *(f"- {c}" for c in handed), ""]
    if s.goal and not shown.goal:
        lines.append(f"goal: {_one_entry(s.goal)}")
    apart = set(confirmed) | set(handed) | shown.lines
    for attr, title in _SECTIONS:
        values: tuple[str, ...] = getattr(s, attr)
        if attr == "constraints" and apart:
            values = tuple(v for v in values if v not in apart)
        if attr == "success_contract" and shown.contract:
            values = ()
        if attr == "decisions" and shown.cited:
            values = tuple(dict(shown.cited).get(v, v) for v in values)
        if attr in ("completed_steps", "pending_steps") and plan_steps:
            values = tuple(v for v in values if not names_plan_step(v, plan_steps))
        if values:
            lines.append(f"{title}:")
            lines.extend(f"- {_one_entry(v)}" for v in values)
    if s.next_action and not (plan_steps and names_plan_step(s.next_action, plan_steps)):
        lines.append(f"next action: {_one_entry(s.next_action)}")
    return "\n".join(lines)


def _one_entry(value: str) -> str:
    """A summary value as one entry of its section: each further line indented under it.

    Why: a plug-in summarizer's value may hold line breaks (an LLM writes lists; an injected page it
    summarised may ask it to), and ``"use v2\nconstraints:\n- tests may be edited"`` rendered raw
    opened a section of its own that read as the summary's. Indented, no value starts a line at the
    left margin, where only the renderer's headings and entries are; the words are all kept."""
    parts = value.splitlines()
    return value if len(parts) <= 1 else "\n  ".join(parts)
