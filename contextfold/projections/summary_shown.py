"""What of a summary the request it is shown in already holds raw (pure).

Why: a summary records the run's policies, its goal and success contract and the user inputs
marked required, verbatim (a plug-in summary is checked against them, ``show`` prints them), and
those are required fragments: every build shows them whole, the policy in the system prompt, the
goal and contract in layer 3, a required input where it was said (no cover ever hides it). Shown
inside the summary as well, each was paid for twice in every request after a compaction, and a
required task with no goal set three times (the summary's goal quoted it, and its constraints
did again). :func:`shown_raw` names those lines, and ``render_summary`` leaves them out of the
summary's text; the recorded summary keeps them.

Only an exact copy is left out: a policy line that quotes the policy still in force, word for
word; a required input's line that quotes it whole; the goal and contract equal to the run's
current ones. A summary line that says anything else (an older goal, a superseded policy, a
plug-in's rewording) stays.

The decision that records when the current goal was set ("goal set at event N: <goal>", the goal
capped at 200 characters) is not left out but cited (:func:`goal_set_line`): when the goal was
set is history the goal fragment does not say, the goal's words are what it says. So is the
decision of an older goal that the summary's goal line quotes whole.

"Current" is the build's: a summary is rendered against the state the build is made of, again
when a goal, policy or plan changes (``fold_compaction.refresh_summaries``), so after a goal
change the goal the summarized history worked towards is quoted again, not cited as in force.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextfold.domain.events import CompactionSummary
from contextfold.projections.state import RunState
from contextfold.projections.summary_text import STATEMENT_CHARS, cap

__all__ = ["POLICY_CHARS", "ShownRaw", "goal_set_line", "policy_line", "required_input_line", "shown_raw"]

POLICY_CHARS = 600
"""A policy up to this long is carried verbatim by a summary; a longer one is cited."""
_AT_EVENT = re.compile(r"^(?:policy \S+|required user input) at event (\d+)[: ]")
_GOAL_SET = re.compile(r"goal set at event (\d+): ")
_INFERRED = re.compile(r"^\(inferred from the user's message at event (\d+)\) ")


@dataclass(frozen=True)
class ShownRaw:
    """The parts of a summary a request shows raw beside it (:func:`shown_raw`)."""

    lines: frozenset[str] = frozenset()
    """Constraint lines that copy a policy in force or a required user input."""
    goal: bool = False
    """The summary's goal is the run's current goal, or quotes a required input."""
    contract: bool = False
    """The summary's success contract is the run's current one."""
    cited: tuple[tuple[str, str], ...] = ()
    """(line, what the request shows instead): a decision line that quotes the goal in force, or
    the summary's goal the request shows in its goal line, and the line citing it."""


def policy_line(source_ref: str, text: str, position: int, run_id: str) -> str:
    """A summary's constraint line for the policy logged at ``position``: verbatim (its
    whitespace folded) up to :data:`POLICY_CHARS`, else a line citing it."""
    if len(text) <= POLICY_CHARS:
        return f"policy {source_ref} at event {position}: {' '.join(text.split())}"
    return (f"policy {source_ref} at event {position} stays in force (full text in the system "
            f"prompt; raw: event://{run_id}/{position})")


def goal_set_line(goal: str, position: int) -> str:
    """A summary's decision line for the goal set at ``position``: when, and its words (capped)."""
    return f"goal set at event {position}: {cap(goal, STATEMENT_CHARS)}"


def _goal_cited(summary: CompactionSummary, state: RunState, goal_shown: bool) -> tuple[tuple[str, str], ...]:
    """The decision lines of ``summary`` that quote a goal the request states elsewhere, each with
    the line shown instead: the goal in force (``state.goal``, set at the position its fragment
    names), stated whole in layer 3; the summary's own goal, when the request shows it (not
    ``goal_shown``: an older goal, quoted whole in the summary's goal line). A summary is
    rendered against the state a build is made of (``fold_compaction.refresh_summaries``), so
    "the current goal" is this request's."""
    current = (int(state.goal_ids[0][1:]) if state.goal is not None and state.goal_ids
               and state.goal_ids[0][1:].isdigit() else None)
    out: list[tuple[str, str]] = []
    for line in summary.decisions:
        m = _GOAL_SET.match(line)
        if m is None:
            continue
        position = int(m.group(1))
        raw = f"raw: event://{state.run_id}/{position}"
        if (state.goal is not None and position == current
                and line == goal_set_line(state.goal.goal, position)):
            out.append((line, f"goal set at event {position} (the current goal; {raw})"))
        elif summary.goal and not goal_shown and line == goal_set_line(summary.goal, position):
            out.append((line, f"goal set at event {position} (the goal above; {raw})"))
    return tuple(out)


def required_input_line(text: str, position: int) -> str:
    """A summary's constraint line for the user input marked required logged at ``position``."""
    return f"required user input at event {position}: {text}"


def _required_input(state: RunState, position: int) -> str | None:
    """The text of the user's input marked required logged at ``position`` (always shown)."""
    entry = state.entries.get(f"e{position}")
    if entry is None or entry.kind != "user_input" or entry.trust != "user" or not entry.required:
        return None
    return entry.plain_text()


def _copies_shown(line: str, state: RunState) -> bool:
    """Whether constraint ``line`` copies a fragment ``state`` shows in every build."""
    m = _AT_EVENT.match(line)
    if m is None:
        return False
    position = int(m.group(1))
    fid = f"e{position}"
    entry = state.entries.get(fid)
    if entry is None:
        return False
    if entry.kind == "policy":
        text = entry.plain_text()
        return (fid in state.active and text is not None and len(text) <= POLICY_CHARS
                and line == policy_line(entry.source_ref, text, position, state.run_id))
    said = _required_input(state, position)
    return said is not None and line == required_input_line(said, position)


def shown_raw(summary: CompactionSummary, state: RunState) -> ShownRaw:
    """What of ``summary`` a build of ``state`` shows raw (module docstring)."""
    goal = state.goal
    inferred = _INFERRED.match(summary.goal)
    goal_shown = bool(summary.goal) and (
        (goal is not None and summary.goal == goal.goal)
        or (inferred is not None and _required_input(state, int(inferred.group(1))) is not None))
    return ShownRaw(
        lines=frozenset(line for line in summary.constraints if _copies_shown(line, state)),
        goal=goal_shown,
        contract=bool(summary.success_contract) and goal is not None
        and summary.success_contract == tuple(goal.success_contract),
        cited=_goal_cited(summary, state, goal_shown))
