"""Compaction planning (pure): legal cuts, observation masking, the structured summary.

Why a plan and not an action: compaction must be *in the log* (a
``HistoryCompacted`` event; the raw events stay), so replays, hand-offs and
resumes see exactly what the live build saw. This module only decides which
event to append; the API appends it and the fold applies it.

Cheap before expensive:

- ``mask``: old tool results are replaced (in the fold, not in the log) by a
  one-line runtime stub naming the call id, the tool, the status, the exit code,
  a side effect's ids and unverified state and a read-back ref (``masking``).
  The groups stay, so every call keeps exactly one
  answer and the provider protocol holds. The event's summary lists the stubs.
- ``summary``: a structured :class:`CompactionSummary` stands in for the
  covered timeline items (required user inputs and state -- policy, goal,
  plan, evidence -- are never hidden). Built by :func:`deterministic_summary`
  from the typed events; a plug-in :class:`Summarizer` may rewrite it, and its
  output is validated (:func:`contextfold.projections.summary_check.validate_summary`) before
  it can be recorded.

Legal cuts (:func:`choose_cover`, in ``compaction_cuts``): the cover always starts at position 1 and
ends before the newest ``keep_recent`` visible tool groups and the current
user input; its end is pulled back until no tool group (a call, its answers,
its parallel batch) straddles it or is still open, then checked with
:func:`~contextfold.projections.repair.check_compaction_cover`. A runtime recovery
answer (lost, cancelled) logged after the end does not pull it back
(``masking.wholly_inside``): the summary reads it as the call's outcome.

Honesty rules of the summary (the seed's section 5.3): call ids (an id that is not a plain
token by its ``call_ref`` stand-in, as the runtime's lines name it), exit codes, error flags,
file revisions, artifact hashes and ids inside arguments stay verbatim; assistant statements
are *inferences* (never listed as facts); a failed, lost or cancelled side effect is marked
``unverified``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, assert_never

from contextfold.domain.errors import CompactionError
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
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.compaction_cuts import (
    check_keep_recent,
    choose_cover,
    mask_covers,
    recovery_answers,
    shown_task_input,
)
from contextfold.projections.fold_summary import hand_off_goal, hand_off_line, hand_off_text
from contextfold.projections.masking import SIDE_EFFECT_PATTERN, mask_stub, mask_text, wholly_inside, writes
from contextfold.projections.plan_view import plan_steps
from contextfold.projections.render.runtime_lines import call_ref, tool_ref
from contextfold.projections.state import MessageItem, RunState, ToolGroup
from contextfold.projections.summary_bounds import SCALES, bounded_fields, earlier_lines, is_earlier_line
from contextfold.projections.summary_check import summary_lines, validate_summary
from contextfold.projections.summary_text import (
    STATEMENT_CHARS,
    args_excerpt,
    attached,
    cap,
    kept_facts,
    key_line,
    media_lines,
    plan_lines,
    quoted_goal,
    user_statement,
)

__all__ = ["SIDE_EFFECT_PATTERN", "CompactionPlan", "Strategy", "Summarizer", "check_keep_recent",
           "choose_cover", "deterministic_summary", "mask_stub", "plan_compaction", "plan_compactions",
           "plan_mask", "plan_summary", "recovery_answers"]

Strategy: TypeAlias = Literal["mask", "summary"]
LoadText: TypeAlias = Callable[[ArtifactRef], str]

_ARGS_CHARS = 80
_POLICY_CHARS = 600
_RECENT_CALLS = 4
"""Plain successful calls listed in full; older ones keep only their ids and outcome."""
_RECENT_STATEMENTS = 6
"""Assistant statements kept as inferences (older ones: read back by the events:// ref)."""


class Summarizer(Protocol):
    """A plug-in summarizer (e.g. an LLM): given the covered events and the
    deterministic skeleton, return the summary fields (a :class:`CompactionSummary`
    or a mapping of its fields).

    Citation format the validator checks: cite a call as ``call <id>`` (or as the skeleton
    does, by its ``call_ref``; every entry of ``tool_calls_and_results``, ``side_effects`` and
    ``known_failures`` must cite at least one), refs as ``event://RUN/POS``,
    ``events://RUN/A-B``, ``file://...``, ``call://...`` or ``artifact:HASH``;
    each cited id or ref must exist in the covered events, and so must each evidence ref (a URL
    retrieved, a memory recalled). The skeleton's goal,
    constraints (verbatim), failed call ids and next action must be kept; a goal,
    constraint, pending step, decision or next action it does not hold must cite what backs it
    or say it is inferred, and a failed call is never said to have succeeded (a refusal is a
    ``SummaryRejectedError`` naming the field and ref).
    An optional ``name`` attribute is recorded as the event's ``summarizer``.

    ``events``: the covered events, then the runtime recovery answers (lost, cancelled) logged
    after the cover that close calls inside it (``recovery_answers``).
    """

    def __call__(self, events: Sequence[RecordedEvent],
                 skeleton: CompactionSummary) -> CompactionSummary | Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class CompactionPlan:
    """The event to append and what it is expected to save (token counts of the fold)."""

    event: HistoryCompacted
    tokens_before: int
    """Tokens of the timeline fragments the event replaces."""
    tokens_after: int
    """Tokens of what stands in for them (stubs or the summary)."""


# ---------------------------------------------------------------- masking


def plan_mask(state: RunState, lo: int, hi: int) -> CompactionPlan | None:
    """Mask every unmasked ok/error result of the closed groups wholly inside ``[lo, hi]``;
    None when that would save nothing."""
    stubs: list[str] = []
    before = after = 0
    for pos in range(lo, hi + 1):
        group = state.items.get(pos)
        if not isinstance(group, ToolGroup) or pos in state.hidden or not wholly_inside(group, lo, hi):
            continue
        for slot in group.calls:
            if (slot.answer_id is None or slot.answer_position is None
                    or slot.status not in ("ok", "error") or slot.answer_position in state.masked):
                continue
            stub = mask_text(state, group, slot)[1]  # (masking: what the fold writes)
            stubs.append(stub)
            before += state.entries[slot.answer_id].token_count
            after += state.counter.count(stub)
    if not stubs or after >= before:
        return None
    event = HistoryCompacted(summary=CompactionSummary(tool_calls_and_results=tuple(stubs)),
                             covers_from=lo, covers_to=hi, strategy="mask", summarizer="mask")
    return CompactionPlan(event, before, after)


# ---------------------------------------------------------------- the summary


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
    return _bounded(_unbounded_summary(events, state, answers), events, state, scale)


def _bounded(summary: CompactionSummary, events: Sequence[RecordedEvent], state: RunState,
             scale: tuple[float, float]) -> CompactionSummary:
    """``summary`` (unbounded) with each capped list's older entries folded (``bounded_fields``)
    at ``scale``: trying smaller shares re-folds the lists, not the events."""
    last = events[-1].position if events else 0
    ref = f"events://{state.run_id}/{events[0].position if events else 0}-{last}"
    lists = {k: getattr(summary, k) for k in _LISTS}
    return summary.model_copy(update=bounded_fields(lists, ref, scale))


_LISTS = ("completed_steps", "pending_steps", "decisions", "constraints", "tool_calls_and_results",
          "evidence_refs", "side_effects", "known_failures", "inferences")
"""The summary's lists (the goal, its contract and the next action are one entry each)."""


def _whole(ev: ToolResult, text: str, load_text: LoadText | None) -> str:
    """The result's whole text: ``text`` (what the event holds), else read from its artifact."""
    return load_text(ev.artifact) if ev.artifact is not None and load_text is not None else text


def _unbounded_summary(events: Sequence[RecordedEvent], state: RunState,
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
                f["constraints"].append(
                    f"policy {ev.source_ref} at event {pos}: {' '.join(ev.text.split())}"
                    if len(ev.text) <= _POLICY_CHARS else
                    f"policy {ev.source_ref} at event {pos} stays in force (full text in the "
                    f"system prompt; raw: event://{run}/{pos})")
            case UserInput():
                if ev.required:
                    f["constraints"].append(f"required user input at event {pos}: {ev.text}")
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
                f["decisions"].append(f"goal set at event {pos}: {cap(ev.goal, STATEMENT_CHARS)}")
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
                if ev.is_error:
                    f["known_failures"].append(
                        f"{call.named} failed at event {pos}:{code} "
                        f"is_error=true: {said} [{ref}]")
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
            case FileRead():
                ref = f"file://{ev.path}" + (f"@{ev.revision}" if ev.revision else "")
                newer = state.superseded_by.get(f"e{pos}")  # (a later revision or range: not cited,
                f["evidence_refs"].append(ref + (f" artifact:{ev.artifact.hash}" if ev.artifact else "") + (
                    "" if newer is None else  # it may lie past the cover)
                    f" (superseded by a newer read at event {state.entries[newer].position})"))
            case EvidenceRetrieved():
                f["evidence_refs"].append(ev.source_ref)
            case MemoryRecalled():
                f["evidence_refs"].append(f"memory {ev.memory_id}: {ev.source_ref}")
            case _:
                pass
    plain = [c for c in calls if c.outcome == "ok" and not _writes(c)]
    recent = {id(c) for c in plain[-_RECENT_CALLS:]}
    plain_ids = {id(c) for c in plain}
    older: dict[str, list[str]] = {}
    for call in calls:
        args = args_excerpt(call.arguments, _ARGS_CHARS)
        if len(call.arguments) > _ARGS_CHARS and (named := kept_facts(call.arguments, args)):
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
            f["side_effects"].append(f"{call.named} {args}: {verdict}")
    carried = [e for e in f["tool_calls_and_results"] if is_earlier_line(e)]  # from merged summaries
    f["tool_calls_and_results"] = earlier_lines(carried, older) + [
        e for e in f["tool_calls_and_results"] if not is_earlier_line(e)]
    f["inferences"] = f["inferences"][-_RECENT_STATEMENTS:]
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


def _summarizer_name(summarizer: Callable[..., object]) -> str:
    name = getattr(summarizer, "name", None) or getattr(summarizer, "__name__", None)
    return str(name or type(summarizer).__name__)


def plan_summary(state: RunState, events: Sequence[RecordedEvent], lo: int, hi: int, *,
                 summarizer: Summarizer | None = None, max_tokens: int | None = None,
                 load_text: LoadText | None = None) -> CompactionPlan | None:
    """Summarize ``[lo, hi]``; None when the range holds no visible, coverable history.

    ``max_tokens``: what the summary may take of the window it is made for. Its caps are
    absolute (``summary_bounds``), so at a small window a long run's summary outgrew the budget
    (a 4k-window loop: a 2,051-token summary beside a 643-token policy in a 2,451-token budget),
    and the build could not be made. Past ``max_tokens`` it is made again with a smaller share
    of each cap kept whole (``summary_bounds.SCALES``), the rest folded into lines citing the
    events they are read back from."""
    covered = [rec for rec in events if lo <= rec.position <= hi]
    answers = recovery_answers(state, events, lo, hi)
    task = shown_task_input(state, lo, hi)  # (as the fold leaves it)
    hidden_ids = [it.fragment_ids for pos, it in state.items.items()
                  if lo <= pos <= hi and pos not in state.hidden and pos != task
                  and not (isinstance(it, MessageItem) and it.role == "user"
                           and state.entries[it.fragment_id].required)
                  and (not isinstance(it, ToolGroup) or wholly_inside(it, lo, hi))]
    if not hidden_ids:
        return None
    unbounded = _unbounded_summary(covered, state, answers, load_text)
    whole = skeleton = _bounded(unbounded, covered, state, SCALES[0])
    if max_tokens is not None:
        for scale in SCALES[1:]:
            if state.counter.count("\n".join(summary_lines(skeleton))) <= max_tokens:
                break
            skeleton = _bounded(unbounded, covered, state, scale)
    summary, name = skeleton, "deterministic"
    if summarizer is not None:
        name = _summarizer_name(summarizer)
        try:
            candidate = summarizer([*covered, *answers], skeleton)
        except CompactionError:
            raise
        except Exception as exc:  # a failing plug-in must never leave a record
            raise CompactionError(f"summarizer {name!r} failed: {exc}") from exc
        # (what the skeleton folded to fit may be kept whole: an LLM does not rewrite the line
        # that folded them word for word)
        summary = validate_summary(candidate, covered, skeleton, state.run_id,
                                   unfolded_constraints=whole.constraints, answers=answers)
    event = HistoryCompacted(summary=summary, covers_from=lo, covers_to=hi, strategy="summary",
                             summarizer=name)
    before = sum(state.entries[fid].token_count for ids in hidden_ids for fid in ids)
    after = state.counter.count("\n".join(summary_lines(summary)))
    return CompactionPlan(event, before, after)


def plan_compaction(state: RunState, events: Sequence[RecordedEvent], strategy: Strategy, *,
                    keep_recent: int = 3, summarizer: Summarizer | None = None,
                    max_summary_tokens: int | None = None) -> CompactionPlan | None:
    """The first of :func:`plan_compactions`, or None (nothing to gain)."""
    plans = plan_compactions(state, events, strategy, keep_recent=keep_recent, summarizer=summarizer,
                             max_summary_tokens=max_summary_tokens)
    return plans[0] if plans else None


def plan_compactions(state: RunState, events: Sequence[RecordedEvent], strategy: Strategy, *,
                     keep_recent: int = 3, summarizer: Summarizer | None = None,
                     max_summary_tokens: int | None = None, keep_error: bool = False,
                     load_text: LoadText | None = None) -> list[CompactionPlan]:
    """The compaction events for ``strategy`` at the widest legal cut (none: nothing to gain);
    each is planned on ``state`` as it is (their covers do not overlap).

    A mask never stubs the latest error's group (``RunState.latest_error_ids``: the builder
    keeps it required down to its diagnosis); it hides nothing, so it may reach past the latest
    user input, and past that group: then it is two events, one each side of it
    (``mask_covers``). ``keep_error``: a summary stops before that group too (auto-compaction's
    ladder, which compacts because a build is short of room, not because it was asked to: a
    summary hid a failing test log the model was fixing, and the request kept 650 of 24,000
    tokens); a summary asked for covers it, and keeps its failure in ``known_failures``. A summary
    first tries to leave the latest user input raw; when that leaves nothing to
    cover (an agent run whose task is its only user message), it covers the input
    too: the input's text (or the goal) is then carried verbatim as the summary's goal.
    """
    check_keep_recent(keep_recent)
    match strategy:
        case "mask":
            return [plan for cover in mask_covers(state, keep_recent)
                    if (plan := plan_mask(state, *cover)) is not None]
        case "summary":
            for keep_input in (True, False):
                cover = choose_cover(state, keep_recent=keep_recent, keep_input=keep_input,
                                     keep_error=keep_error)
                plan = (None if cover is None else
                        plan_summary(state, events, *cover, summarizer=summarizer,
                                     max_tokens=max_summary_tokens, load_text=load_text))
                if plan is not None:
                    return [plan]
            return []
        case _:
            assert_never(strategy)
