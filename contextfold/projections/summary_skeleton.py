"""The deterministic summary skeleton (pure): what a ``summary`` compaction records, read
from the typed events it covers.

Why a module of its own: :mod:`~contextfold.projections.compaction` plans *which* event to
append (legal cuts, masks, a plug-in summarizer and its validation); this module writes the
summary itself, line by line, from the events (``compaction.py`` had passed 500 lines). Its
honesty rules are the ones ``compaction``'s docstring states: call ids verbatim (by their
``call_ref`` stand-in when not a plain token), exit codes, error flags, revisions and artifact
hashes kept; assistant statements are inferences; a failed, lost or cancelled side effect is
``unverified``; a failure is quoted by the first key error the log diagnosis finds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from contextfold.domain.events import (
    ArtifactRef,
    CompactionSummary,
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    HandOff,
    HistoryCompacted,
    MemoryRecalled,
    ModelResponse,
    PlanUpdated,
    PolicySet,
    RuntimeNote,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.fold_summary import hand_off_goal, hand_off_line, hand_off_text
from contextfold.projections.masking import writes
from contextfold.projections.plan_view import plan_steps
from contextfold.projections.render.runtime_lines import call_ref, ref_text, tool_ref
from contextfold.projections.state import RunState
from contextfold.projections.summary_bounds import (
    STATEMENTS_WHOLE,
    bounded_fields,
    earlier_lines,
    is_earlier_line,
    newest_of,
    said_once,
    with_ids,
)
from contextfold.projections.summary_shown import goal_set_line, policy_line, required_input_line
from contextfold.projections.summary_text import (
    STATEMENT_CHARS,
    args_excerpt,
    argument_facts,
    attached,
    cap,
    file_ref,
    kept_facts,
    key_line,
    media_lines,
    plan_lines,
    quoted_goal,
    raw_at,
    user_statement,
)

__all__ = ["LoadText", "bounded_summary", "deterministic_summary", "unbounded_summary"]

LoadText: TypeAlias = Callable[[ArtifactRef], str]
"""Reads an artifact-backed result's whole text (the store's ``cited_text``)."""

_ARGS_CHARS = 80
_RECENT_CALLS = 4
"""Plain successful calls listed in full; older ones keep only their ids and outcome."""


def _dedupe(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _writes(call: _Call) -> bool:
    return writes(call.name, call.arguments)


def _merged_summaries(events: Sequence[RecordedEvent]) -> list[HistoryCompacted]:
    """The summary events among ``events`` not covered by a later one among them: their
    fields are merged and the raw events they cover are not summarized twice."""
    out: list[tuple[int, HistoryCompacted]] = []
    for rec in reversed(events):
        ev = rec.event
        if (isinstance(ev, HistoryCompacted) and ev.strategy == "summary"
                and not any(s.covers_from <= rec.position <= s.covers_to  # (or a later one's
                            or (s.covers_from <= ev.covers_from and ev.covers_to <= s.covers_to)  # cover
                            for _, s in out)):  # holds its cover: it merged it, see fold)
            out.append((rec.position, ev))
    return [ev for _, ev in out]


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: str
    position: int
    outcome: str = "open"
    line: str = ""
    facts: str = ""
    """The ids and unverified state its result named (:func:`kept_facts`), failed or not."""

    @property
    def named(self) -> str:
        """``call ID (TOOL)`` as a summary line names it: by ``call_ref`` and ``tool_ref``, as the
        runtime's lines do. The id and the name are whatever the model or a trace wrote, and an id
        ``c1\n[runtime] POLICY UPDATE: ...`` put a line of its own into the summary."""
        return f"call {call_ref(self.call_id)} ({tool_ref(self.name)})"


def _cited(call: _Call) -> str:
    """A side effect's call as its line names it: by the call's line in ``tool_calls_and_results``
    (``call ID (TOOL) ... at event N``), with the ids its arguments hold, verbatim, not their excerpt.

    Why: a write's arguments were quoted three times, in its call's line, its side effect and (when
    it failed) its known failure, with the same ids, exit code and refs: two to three times the
    tokens per write in every request after a compaction. The ids stay whole (the seed, 5.3: ids
    are not summarised away), so a side effect whose call's line was folded loses none of them."""
    named = argument_facts(call.arguments)
    return f"{call.named} at event {call.position}" + (f" {{arguments {named}}}" if named else "")


def _note_line(note: RuntimeNote, position: int, run_id: str) -> str:
    """The summary's line for a note the runtime showed the model (not an error), logged at
    ``position``: said to be the runtime's, with its source (``ref_text``), quoted as a user's
    message is (one line, bounded, citing the event for the full text).

    Why: a summary left such a note out, and once covered it was gone from every later request (an
    Anthropic server compaction's summary of the conversation, imported as a note, was all the
    model had of it). It stays data, in the summary's block: uncompacted the note is a data block
    too (``trust="runtime"``, never an instruction), and the block's trust is the lowest of what it
    covers, so a note does not lift it. A decision, as a resume's note is: capped with the other
    decisions (a note per turn must not grow a summary without bound)."""
    said = user_statement(note.text, f"event://{run_id}/{position}")
    return f"runtime note at event {position} ({ref_text(note.source_ref)}): {said}"


_CONTINUE = "continue from event {} (raw history after this summary)"
"""A summary's next action when nothing names one: where the raw history resumes."""
_CONTINUE_FROM = re.compile(r"continue from event \d+ \(raw history after this summary\)")


def deterministic_summary(events: Sequence[RecordedEvent], state: RunState, *,
                          scale: tuple[float, float] = (1.0, 1.0),
                          answers: Sequence[RecordedEvent] = ()) -> CompactionSummary:
    """The structured summary of ``events`` (the covered range), offline and deterministic.

    ``state`` is the run as of the compaction: it gives the current goal and
    plan. Earlier summaries inside the range are merged (their constraints,
    failures and side effects carry over), so a second compaction loses nothing
    the first one kept. ``scale``: the shares of its lists' caps kept whole
    (``summary_bounds.SCALES``). ``answers``: the runtime recovery answers logged after the
    range that close calls inside it (``recovery_answers``).
    """
    return bounded_summary(unbounded_summary(events, state, answers), events, state, scale)


def bounded_summary(summary: CompactionSummary, events: Sequence[RecordedEvent], state: RunState,
             scale: tuple[float, float]) -> CompactionSummary:
    """``summary`` (unbounded) with each capped list's older entries folded (``bounded_fields``)
    at ``scale``, a side effect an earlier summary recorded without its ids given them back first
    (``with_ids``), then a side effect's ids left out where its call's whole line says them
    (``said_once``): trying smaller shares re-folds the lists, not the events."""
    last = events[-1].position if events else 0
    ref = f"events://{state.run_id}/{events[0].position if events else 0}-{last}"
    lists = {k: getattr(summary, k) for k in _LISTS}
    calls = summary.tool_calls_and_results
    bounded = said_once(bounded_fields(with_ids(lists, calls), ref, scale), calls)
    return summary.model_copy(update=bounded)


_LISTS = ("completed_steps", "pending_steps", "decisions", "constraints", "tool_calls_and_results",
          "evidence_refs", "side_effects", "known_failures", "inferences")
"""The summary's lists (the goal, its contract and the next action are one entry each)."""


def _whole(ev: ToolResult, text: str, load_text: LoadText | None) -> str:
    """The result's whole text: ``text`` (what the event holds), else read from its artifact."""
    return load_text(ev.artifact) if ev.artifact is not None and load_text is not None else text


def unbounded_summary(events: Sequence[RecordedEvent], state: RunState,
                       answers: Sequence[RecordedEvent] = (), load_text: LoadText | None = None
                       ) -> CompactionSummary:
    """:func:`deterministic_summary` before its lists are capped. ``load_text``: the full text of
    an artifact-backed result, whose failure is quoted from it, not from the event's head preview
    (a 3,000-test pytest run's preview held only PASSED lines)."""
    run = state.run_id
    f: dict[str, list[str]] = {k: [] for k in _LISTS}
    goal = state.goal.goal if state.goal is not None else ""
    contract = tuple(state.goal.success_contract) if state.goal is not None else ()
    next_action = ""
    open_calls: dict[str, _Call] = {}
    calls: list[_Call] = []
    merged = _merged_summaries(events)
    # a merged summary first, where its cover is, not where it was logged: the raw events its
    # cover left out were logged before it and are newer than what it says (its goal was taken
    # for a later input's words, and each list's cap took its lines for the newest)
    ordered = sorted(events, key=lambda r: r.event.covers_to if r.event in merged else r.position)
    for rec in [*ordered, *answers]:  # (a recovery answer after the range: its call's outcome)
        ev, pos = rec.event, rec.position
        if rec.event not in merged and (any(s.covers_from <= pos <= s.covers_to for s in merged) or (
                isinstance(ev, HistoryCompacted) and ev.strategy == "summary")):
            continue  # already summarized by a merged summary (a summary not merged: one merged holds it)
        match ev:
            case HistoryCompacted() if ev.strategy == "summary":
                s = ev.summary
                goal = goal or s.goal
                contract = contract or s.success_contract
                for key in f:
                    f[key].extend(getattr(s, key))
                if not _CONTINUE_FROM.fullmatch(s.next_action):  # "continue from event 74" named
                    next_action = s.next_action or next_action  # the old cover's end: now hidden
            case PolicySet():
                # policies are never hidden (always required, in the system prompt): a long
                # one is cited, a short one carried verbatim
                f["constraints"].append(policy_line(ev.source_ref, ev.text, pos, run))
            case UserInput():
                if ev.required:
                    f["constraints"].append(required_input_line(ev.text, pos))
                elif ev.text.strip():
                    # a user message is an instruction as often as not, in any words or language
                    # ("Reply in French from now on.", "Target Python 3.8."): kept as said, a long
                    # one bounded (its opening and its constraint sentences, citing the rest)
                    f["constraints"].append(
                        f"user at event {pos}: {user_statement(ev.text, f'event://{run}/{pos}')}")
                f["evidence_refs"] += media_lines(ev.content, run, pos, "attached to the user's message")
                if not goal and ev.text.strip():  # no goal was set: an inference, said to be one
                    goal = quoted_goal(f"(inferred from the user's message at event {pos})", ev.text,
                                       f"event://{run}/{pos}") + attached(ev.content, run, pos)
            case GoalSet():
                f["decisions"].append(goal_set_line(ev.goal, pos))
            case PlanUpdated():
                steps = "; ".join(f"{s.id} {s.status}" for s in ev.steps)
                f["decisions"].append(f"plan updated at event {pos}: {steps}")
            case HandOff() if ev.mode == "hand_off" and ev.note:  # the task handed over (fold_summary)
                f["constraints"].append(hand_off_line(hand_off_text(ev), pos, run))
                goal = goal or hand_off_goal(ev, pos, run)
            case HandOff():
                f["decisions"].append(f"{ev.mode} at event {pos}: {ev.from_agent or '?'} -> "
                                      f"{ev.to_agent or '?'}" + (f": {ev.note}" if ev.note else ""))
            case ModelResponse():
                if ev.text.strip():
                    f["inferences"].append(f"the assistant stated at event {pos} (not verified): "
                                           f"{cap(ev.text, STATEMENT_CHARS)}")
                for c in ev.tool_calls:
                    call = _Call(c.call_id, c.name, c.arguments, pos)
                    open_calls[c.call_id] = call
                    calls.append(call)
            case ToolResult():
                answered = open_calls.pop(ev.call_id, None)
                text, media = ev.text_and_media()  # its text blocks too (the MCP shape)
                said = (key_line(_whole(ev, text, load_text), ev.exit_code)  # (its artifact read
                        if ev.is_error or answered is None else "")        # only to quote a failure)
                where = f"in the result of call {call_ref(ev.call_id)}"
                f["evidence_refs"] += media_lines(media, run, pos, where)
                if answered is None:  # a late result (its call was closed by recovery)
                    f["known_failures"].append(
                        f"late result for call {call_ref(ev.call_id)} at event {pos}: "
                        f"{said} (after it was declared lost/cancelled; unverified)")
                    continue
                call = answered
                code = f" exit_code={ev.exit_code}" if ev.exit_code is not None else ""
                ref = f"event://{run}/{pos}" + (f" artifact:{ev.artifact.hash}" if ev.artifact else "")
                call.outcome = "error" if ev.is_error else "ok"
                call.line = f"{call.outcome}{code} is_error={str(ev.is_error).lower()} [{ref}]"
                # a failure's too: a failed deploy names the deployment it left behind ("Created
                # deployment dep-4411 ... ERROR: health check timed out"); of a payload moved to an
                # artifact, the preview the event keeps (the payload's head: what a deploy's log
                # opens with), the rest read back from the artifact its ref names
                call.facts = kept_facts(text)
                if ev.is_error:  # (its call's line gives the ref and is_error: ``_cited``)
                    f["known_failures"].append(
                        f"{call.named} failed at event {pos}:{code + ':' if code else ''} {said}"
                        + (f" [artifact:{ev.artifact.hash}]" if ev.artifact else ""))
                if ev.artifact is not None:
                    f["evidence_refs"].append(f"artifact:{ev.artifact.hash}")
            case ToolResultLost() | ToolCallCancelled():
                closed = open_calls.pop(ev.call_id, None)
                status = "TOOL_RESULT_LOST" if isinstance(ev, ToolResultLost) else "TOOL_CALL_CANCELLED"
                name = tool_ref(closed.name) if closed is not None else "?"
                if closed is not None:
                    closed.outcome = "lost" if isinstance(ev, ToolResultLost) else "cancelled"
                    closed.line = f"{status} [event://{run}/{pos}]"
                f["known_failures"].append(f"call {call_ref(ev.call_id)} ({name}) {status} at event {pos}: "
                                           f"outcome unknown, unverified")
            case FileRead():  # (a path or revision a summary line cannot quote: the event's ref)
                ref = file_ref(ev.path, ev.revision) + raw_at(f"event://{run}/{pos}", ev.path, ev.revision)
                newer = state.superseded_by.get(f"e{pos}")  # (a later revision or range: not cited,
                f["evidence_refs"].append(ref + (f" artifact:{ev.artifact.hash}" if ev.artifact else "") + (
                    "" if newer is None else  # it may lie past the cover)
                    f" (superseded by a newer read at event {state.entries[newer].position})"))
            case RuntimeNote() if ev.is_error:  # e.g. a malformed call the runtime refused
                f["known_failures"].append(f"runtime error at event {pos}: {key_line(ev.text)} "
                                           f"[event://{run}/{pos}]")
            case RuntimeNote():  # what else the runtime told the model (a server's compaction)
                f["decisions"].append(_note_line(ev, pos, run))
            case EvidenceRetrieved():
                f["evidence_refs"].append(ref_text(ev.source_ref)
                                          + raw_at(f"event://{run}/{pos}", ev.source_ref))
            case MemoryRecalled():
                f["evidence_refs"].append(f"memory {ref_text(ev.memory_id)}: {ref_text(ev.source_ref)}"
                                          + raw_at(f"event://{run}/{pos}", ev.memory_id, ev.source_ref))
            case _:
                pass
    plain = [c for c in calls if c.outcome == "ok" and not _writes(c)]
    recent = {id(c) for c in plain[-_RECENT_CALLS:]}
    plain_ids = {id(c) for c in plain}
    older: dict[str, list[str]] = {}
    for call in calls:
        args = args_excerpt(call.arguments, _ARGS_CHARS)
        if len(call.arguments) > _ARGS_CHARS and (named := argument_facts(call.arguments, args)):
            args += f" {{arguments {named}}}"  # what the cap cut off
        if (call.outcome == "ok" and id(call) not in recent and id(call) in plain_ids
                and not call.facts):  # one with facts to keep is listed whole
            # older plain successes: ids verbatim, one line per tool and outcome
            key = f"{tool_ref(call.name)} {call.line.split(' [')[0]}"
            older.setdefault(key, []).append(call_ref(call.call_id))
            continue
        facts = f" {{{call.facts}}}" if call.facts else ""
        f["tool_calls_and_results"].append(f"{call.named} {args} at event "
                                           f"{call.position} -> {call.line or 'open'}{facts}")
        if _writes(call):
            verdict = ("reported success by the tool" if call.outcome == "ok"
                       else f"{call.outcome}: unverified")
            verdict += facts  # the ids and the state its result gave
            f["side_effects"].append(f"{_cited(call)}: {verdict}")
    carried = [e for e in f["tool_calls_and_results"] if is_earlier_line(e)]  # from merged summaries
    f["tool_calls_and_results"] = earlier_lines(carried, older) + [
        e for e in f["tool_calls_and_results"] if not is_earlier_line(e)]
    covered = f"events://{run}/{events[0].position if events else 0}-{events[-1].position if events else 0}"
    f["inferences"] = newest_of("inferences", f["inferences"], STATEMENTS_WHOLE, covered)
    if state.plan is not None:
        plan = plan_steps(state.plan)  # an id listed twice: one entry, as the plan fragment reads it
        f["completed_steps"], f["pending_steps"] = plan_lines(
            [(s.id, s.title, s.status) for s in plan], f["completed_steps"], f["pending_steps"])
        ready = next((s for s in plan if s.status in ("in_progress", "ready")), None)
        if ready is not None:
            next_action = f"plan step {ready.id}: {ready.title}"
    last = events[-1].position if events else 0
    next_action = next_action or _CONTINUE.format(last + 1)
    return CompactionSummary(goal=goal, success_contract=contract, next_action=next_action,
                             **{k: _dedupe(v) for k, v in f.items()})


# ---------------------------------------------------------------- plans
