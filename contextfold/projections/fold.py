"""The pure fold: a run's recorded events -> its :class:`RunState`.

``fold_event`` dispatches on the event type with ``functools.singledispatch``
and updates the state in place in O(that event) (plus the tokenization of its
new content); ``fold`` folds many. Events at positions the state already
holds are skipped, so a process holding a state catches up by folding the
events after its ``version``; a gap or a foreign run id is an
``IntegrityError``.

Trust never comes from content: runtime for policy, goal, plan, tool specs,
model responses (the protocol), recovery answers, hand-off and runtime notes; user for
user input; workspace for instructions and file reads; tool results, evidence
and memory carry the ``origin`` the runtime declared; a summary has the lowest
trust of what it stands for (it quotes it), a model reply counted as external there
(``fold_compaction``: the summary quotes the model's words, not the runtime's).

Protocol: a model response with tool calls opens a :class:`ToolGroup`; each
call is answered exactly once, by its result (``ok``/``error``) or by a
runtime ``ToolResultLost``/``ToolCallCancelled`` (``lost``/``cancelled``,
never a success). Pairing uses the same :class:`PairingState` as the write
side, scoped to open calls, so re-used call ids start a fresh call.

Late results: a result arriving after its call was declared lost or cancelled
is *not* an answer (the call keeps its single lost/cancelled answer). It
becomes a separate ``note`` item in the timeline at its own position: a
``history`` fragment with the result's own trust (workspace or external, so a
data block, never an instruction), reading "late result for call X (name),
issued at position P and declared lost/cancelled, arrived at position Q; it
is not an answer to that call", followed by the content. The model thus
learns that the side effect may have happened, without a second answer for
the id (which providers reject).

Compaction: a ``HistoryCompacted`` event with ``strategy="mask"`` keeps every
group visible and swaps the ok/error answers of the closed groups wholly
inside its cover for one-line runtime stubs (call id, status, exit code, the
raw result's ``event://`` ref); see ``fold_compaction``. With ``strategy="summary"``
it adds a summary (history, at the lowest trust of what it covers, ``events://RUN/A-B``) that
stands in for the timeline items lying wholly inside its cover. Legal
cuts are enforced by :func:`contextfold.projections.repair.check_compaction_cover`
before appending; the fold itself never splits a group: a group that is not
wholly inside the cover (or still open) stays visible in full, i.e. the cover
shrinks to the legal cut; a lost/cancelled answer logged after the cover does not
keep its group out (``masking.wholly_inside``). User inputs flagged ``required`` are never hidden.
Evidence, files, memory, plan and goal are state, not history: a cover does
not hide them. Raw fragments stay retrievable via ``fragments_at(position)``.

Content encoding, hashes and token counts: :mod:`contextfold.projections.fold_content`; the
state as of a past turn or log version: :mod:`contextfold.projections.past_states`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from contextfold.domain.conversation import arguments_object
from contextfold.domain.errors import IntegrityError
from contextfold.domain.event_values import media_artifact_block
from contextfold.domain.events import (
    ContextBuilt,
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    HandOff,
    HistoryCompacted,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PlanUpdated,
    PolicySet,
    RunStarted,
    RuntimeNote,
    TextBlock,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    ToolsRegistered,
    UsageObserved,
    UserInput,
)
from contextfold.domain.fragments import (
    Trust,
)
from contextfold.domain.gc_pause import paused_gc
from contextfold.domain.log import RecordedEvent
from contextfold.domain.reasoning import ReasoningRefusal, sendable_reasoning
from contextfold.domain.text_breaks import item_breaks, last_text_after
from contextfold.projections.call_ids import call_alias
from contextfold.projections.entries import AnswerStatus, Response, ToolAnswer
from contextfold.projections.fold_compaction import fold_compaction, refresh_summaries
from contextfold.projections.fold_content import (
    add_fragment,
    call_ref,
    file_key,
    payload,
    supersede,
)
from contextfold.projections.fold_files import fold_file_read, fold_retrieved_file
from contextfold.projections.fold_summary import hand_off_text
from contextfold.projections.framing import NOTE_LABEL
from contextfold.projections.offline_encodings import encoding_available, encoding_for_model
from contextfold.projections.plan_view import plan_text
from contextfold.projections.progress import Progress, reported
from contextfold.projections.reasoning import refused_note
from contextfold.projections.recorded_encoding import required_counter
from contextfold.projections.render.runtime_lines import recovery_reason
from contextfold.projections.render.tool_checks import MAX_CHAT_TOOL_CALLS
from contextfold.projections.state import (
    NOTE_PRIORITY,
    ArtifactTokens,
    CallSlot,
    MessageItem,
    RunState,
    ToolGroup,
)
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_exposure import canonical_tool_json
from contextfold.projections.usage_pairs import note_report

__all__ = [
    "fold",
    "fold_event",
    "folded_event_types",
    "new_state",
]


def new_state(run_id: str, *, encoding: str | None = None, model: str | None = None,
              artifact_tokens: ArtifactTokens | None = None,
              event_text: Callable[[int], str] | None = None,
              recorded_encoding: str | None = None) -> RunState:
    """An empty state. The encoding is ``encoding`` when loadable offline, else the model's.

    ``recorded_encoding``: the encoding the run's records name. The state counts with it whatever
    the run's ``RunStarted`` says (a recorded turn is rebuilt as it was counted), and
    EncodingUnavailableError is raised here when this process cannot load it
    (:mod:`contextfold.projections.recorded_encoding`).

    ``event_text``: the log's text port (see ``RunState.event_text``); long texts are then
    read back when rendered instead of kept."""
    if recorded_encoding is not None:
        counter = required_counter(recorded_encoding)
        return RunState(run_id=run_id, encoding=counter.encoding_name, model=model,
                        artifact_tokens=artifact_tokens, event_text=event_text, counter=counter,
                        encoding_fixed=True)
    name = encoding if encoding and encoding_available(encoding) else encoding_for_model(model)
    return RunState(run_id=run_id, encoding=name, model=model, artifact_tokens=artifact_tokens,
                    event_text=event_text, counter=get_counter(name))


# ---------------------------------------------------------------- dispatch


@functools.singledispatch
def _apply(event: Any, state: RunState, rec: RecordedEvent) -> None:
    raise TypeError(f"no fold rule for {type(event).__name__}")


@_apply.register
def _(event: RunStarted, state: RunState, rec: RecordedEvent) -> None:
    state.agent = event.agent or state.agent
    state.model = event.model or state.model
    # the encoding is fixed once fragments have been counted, or by the run's records (new_state)
    if not state.entries and not state.encoding_fixed:
        name = (event.encoding if event.encoding and encoding_available(event.encoding)
                else encoding_for_model(event.model))
        state.counter = get_counter(name)
        state.encoding = state.counter.encoding_name


@_apply.register
def _(event: PolicySet, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "policy", "runtime", (TextBlock(text=event.text),),
               source_ref=event.source_ref, required=True)
    old = state.policies.get(event.source_ref)
    supersede(state, old[0] if old else None, fid)
    state.policies[event.source_ref] = (fid, event)
    state.active[fid] = None
    if state.summaries:  # a policy a summary left out as shown raw may be superseded now
        refresh_summaries(state)


@_apply.register
def _(event: InstructionSet, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "instruction", event.origin, (TextBlock(text=event.text),),
               source_ref=event.source_ref)
    supersede(state, state.instructions.get(event.source_ref), fid)
    state.instructions[event.source_ref] = fid
    state.active[fid] = None


@_apply.register
def _(event: GoalSet, state: RunState, rec: RecordedEvent) -> None:
    # labelled: the goal, its contract and the input share the last user message, and bare they
    # read as more of the user's request (seed layer 3, "current goal + success contract")
    ids = [add_fragment(state, rec, "goal", "runtime", (TextBlock(text=f"Goal: {event.goal}"),),
                        required=True)]
    if event.success_contract:
        items = (f"- {c}" for c in event.success_contract)
        text = "\n".join(["Success contract (done when all hold):", *items])
        ids.append(add_fragment(state, rec, "success_contract", "runtime", (TextBlock(text=text),),
                        sub=1, required=True))
    for i, old in enumerate(state.goal_ids):
        supersede(state, old, ids[min(i, len(ids) - 1)])
    state.goal, state.goal_ids = event, tuple(ids)
    state.active.update(dict.fromkeys(ids))
    if state.summaries:  # the goal a summary left out or cited as in force may be an older one now
        refresh_summaries(state)


@_apply.register
def _(event: PlanUpdated, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "plan", "runtime", (TextBlock(text=plan_text(event)),),
               required=True)
    supersede(state, state.plan_id, fid)
    state.plan, state.plan_id = event, fid
    state.active[fid] = None
    if state.summaries:  # steps a summary left out as the plan's may be gone from it now
        refresh_summaries(state)


@_apply.register
def _(event: ToolsRegistered, state: RunState, rec: RecordedEvent) -> None:
    if event.replace:  # the registry is these tools alone: the others leave the projection
        names = {spec.name for spec in event.tools}
        for name in [n for n in state.tools if n not in names]:
            del state.tools[name]
            state.active.pop(state.tool_ids.pop(name), None)
            state.dropped_tools[name] = rec.position
    for i, spec in enumerate(event.tools, start=1):
        state.dropped_tools.pop(spec.name, None)
        # the spec's canonical JSON, memoised per spec object: the builder prices the same object
        text = canonical_tool_json(spec)
        fid = add_fragment(state, rec, "tool_spec", "runtime", (TextBlock(text=text),), sub=i,
                   source_ref=f"event://{state.run_id}/{rec.position}#tool={spec.name}")
        supersede(state, state.tool_ids.get(spec.name), fid)
        state.tools[spec.name], state.tool_ids[spec.name] = spec, fid
        state.active[fid] = None


@_apply.register
def _(event: UserInput, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "user_input", "user", tuple(event.content), required=event.required)
    state.items[rec.position] = MessageItem(rec.position, fid, "user")
    state.last_progress = rec.position


@_apply.register
def _(event: ModelResponse, state: RunState, rec: RecordedEvent) -> None:
    state.pairing.apply(event, rec.position)
    calls = tuple((c.call_id, c.name, c.arguments) for c in event.tool_calls)
    if not state.unparsed_arguments_seen and any(arguments_object(a) is None for _, _, a in calls):
        state.unparsed_arguments_seen = True
    reasoning, refused = event.reasoning, tuple[ReasoningRefusal, ...]()
    breaks = event.text_breaks
    if reasoning is not None:
        state.reasoning_seen = True
        reasoning, refused = sendable_reasoning(reasoning, len(calls), text_after=last_text_after(event))
        if refused and breaks:  # the pieces after as many of the parts sent
            breaks = item_breaks(event, {r.piece for r in refused})
    if len(calls) > MAX_CHAT_TOOL_CALLS:
        state.wide_reply_seen = True
    fid = add_fragment(state, rec, "history", "runtime", Response(event.text, calls, reasoning, breaks))
    if refused:  # pieces its provider never takes back, logged before the append refused them
        assert event.reasoning is not None
        state.reasoning_refused[fid] = refused_note(event.reasoning, refused)
    if calls:
        slots = []
        for c, n, _ in calls:
            alias, alias_for = call_alias(c, rec.position, state.request_call_ids)
            slots.append(CallSlot(c, n, alias=alias, alias_for=alias_for))
            if alias_for and not state.aliased_for.issuperset(alias_for):
                state.aliased_for = state.aliased_for.union(alias_for)
        state.items[rec.position] = ToolGroup(rec.position, fid, tuple(slots))
        for c, _, _ in calls:
            state.open_groups[c] = rec.position
            state.recovered_groups.pop(c, None)
    else:
        state.items[rec.position] = MessageItem(rec.position, fid, "assistant")
    state.turn += 1
    state.last_progress = rec.position


def _answer(state: RunState, rec: RecordedEvent, call_id: str, trust: Trust,
            make: Callable[[str | None], ToolAnswer]) -> int:
    """Attach the single answer for ``call_id`` to its group; returns the group position."""
    gpos = state.open_groups.pop(call_id)
    group = state.items[gpos]
    assert isinstance(group, ToolGroup)
    slot = group.slot(call_id)  # O(1): a reply's n answers scanned its n slots each
    assert slot is not None
    answer = make(slot.name)
    fid = add_fragment(state, rec, "tool_result", trust, answer,
               source_ref=call_ref(state, call_id, gpos))
    state.items[gpos] = group.answered(
        replace(slot, status=answer.status, answer_id=fid, answer_position=rec.position))
    state.answer_group[rec.position] = gpos
    return gpos


@_apply.register
def _(event: ToolResult, state: RunState, rec: RecordedEvent) -> None:
    verdict = state.pairing.apply(event, rec.position)
    status: AnswerStatus = "error" if event.is_error else "ok"
    if verdict == "answer":
        # (with an artifact, the store moved the whole text there: blocks are what it left)
        text, blocks = (event.content, event.blocks) if event.artifact is not None else event.text_and_media()
        artifact = event.artifact
        medium = None if artifact is None else media_artifact_block(artifact)
        if medium is not None:  # (a log written before the store moved it to the blocks, below)
            text, blocks = event.text_and_media()
            artifact, blocks = None, (medium, *blocks)
        _answer(state, rec, event.call_id, event.origin,
                lambda name: ToolAnswer(event.call_id, name, status, text, artifact, blocks,
                                        event.exit_code))
        return
    # late: the call already has its lost/cancelled answer; show a data note instead.
    gpos = state.recovered_groups[event.call_id]
    group = state.items[gpos]
    assert isinstance(group, ToolGroup)
    slot = group.slot(event.call_id)
    assert slot is not None
    header = (f"late result for call {event.call_id} ({slot.name}), issued at position {gpos} "
              f"and declared {slot.status} at position {slot.answer_position}, arrived at "
              f"position {rec.position}; it is not an answer to that call"
              + (f"; exit code {event.exit_code}" if event.exit_code is not None else "")
              + ("; reported as an error" if event.is_error else ""))
    content = (TextBlock(text=header),
               *payload(event.content, event.artifact, f"result of {event.call_id}",
                         event.blocks))
    fid = add_fragment(state, rec, "history", event.origin, content, priority=NOTE_PRIORITY,
                       data_label=NOTE_LABEL)
    state.items[rec.position] = MessageItem(rec.position, fid, "note")


def _recovery(state: RunState, rec: RecordedEvent, event: ToolCallCancelled | ToolResultLost,
              status: AnswerStatus, label: str) -> None:
    state.pairing.apply(event, rec.position)
    gpos = _answer(state, rec, event.call_id, "runtime",
                   lambda name: ToolAnswer(event.call_id, name, status,
                                           f"{label}: {recovery_reason(event.call_id, event.reason)}",
                                           None, (), None))
    state.recovered_groups[event.call_id] = gpos


@_apply.register
def _(event: ToolCallCancelled, state: RunState, rec: RecordedEvent) -> None:
    _recovery(state, rec, event, "cancelled", "TOOL_CALL_CANCELLED")


@_apply.register
def _(event: ToolResultLost, state: RunState, rec: RecordedEvent) -> None:
    _recovery(state, rec, event, "lost", "TOOL_RESULT_LOST")


@_apply.register
def _(event: FileRead, state: RunState, rec: RecordedEvent) -> None:
    fold_file_read(event, state, rec)


@_apply.register
def _(event: EvidenceRetrieved, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "evidence", event.origin,
               payload(event.content, event.artifact, event.source_ref, event.blocks),
               source_ref=event.source_ref)
    state.source_kinds[fid] = event.source_kind
    if event.semantic_key:  # the builder keeps one fragment per key (units._state_units); a path
        state.semantic_keys[fid] = file_key(event.semantic_key)  # as a file read's: ./a.py is a.py
    if event.source_ref.startswith("file://"):  # lines of a file at a revision: a read of them
        fold_retrieved_file(state, rec, fid, event.source_ref)
    state.active[fid] = None


def memory_source(source_ref: str, memory_id: str) -> str:
    """A recalled memory's source: ``source_ref`` naming the memory too. A memory layer (mem0,
    Zep, LangMem) gives the store as the source (``mem0://user-42``) and names each memory by
    id, so every memory of a store reached the model and the manifest under one source, and
    ``why RUN mem-7f3a`` said a memory the request held was not part of it. A ref that names
    the id already is kept as it is."""
    if memory_id in source_ref:
        return source_ref
    return f"{source_ref}{'&' if '#' in source_ref else '#'}memory={memory_id}"


@_apply.register
def _(event: MemoryRecalled, state: RunState, rec: RecordedEvent) -> None:
    fid = add_fragment(state, rec, "memory", event.origin, (TextBlock(text=event.content),),
               source_ref=memory_source(event.source_ref, event.memory_id))
    supersede(state, state.memories.get(event.memory_id), fid)
    state.memories[event.memory_id] = fid
    state.active[fid] = None


@_apply.register
def _(event: HistoryCompacted, state: RunState, rec: RecordedEvent) -> None:
    fold_compaction(event, state, rec)


@_apply.register
def _(event: HandOff, state: RunState, rec: RecordedEvent) -> None:
    state.agent = event.to_agent or state.agent
    if event.mode == "resume":
        # A resume says the process that ran the open calls is gone: their results will not
        # come, so they are lost (projections.repair), not in flight -- waiting for them could
        # never end. A hand-off to another agent keeps them open: their results may still arrive.
        state.last_progress = rec.position
    if event.note:
        text = (TextBlock(text=hand_off_text(event)),)
        if event.mode == "hand_off":
            # The task handed over: the seed's layer 8 "current worker task". Until a newer input
            # it is the request's current input (required, last), in the runtime's own voice; as a
            # lowest-priority data note it was dropped first and shown as data when it was kept.
            fid = add_fragment(state, rec, "user_input", "runtime", text)
            state.items[rec.position] = MessageItem(rec.position, fid, "user")
        else:  # a resume's note says what happened to the process: a note among the history
            fid = add_fragment(state, rec, "history", "runtime", text, priority=NOTE_PRIORITY,
                               data_label=NOTE_LABEL)
            state.items[rec.position] = MessageItem(rec.position, fid, "note")


@_apply.register
def _(event: RuntimeNote, state: RunState, rec: RecordedEvent) -> None:
    """What the runtime told the model between turns (a refused call's error): a note at its
    position, in the runtime's voice and inside a data block -- never the current input."""
    fid = add_fragment(state, rec, "history", "runtime", (TextBlock(text=event.text),),
                       source_ref=event.source_ref, priority=NOTE_PRIORITY, data_label=NOTE_LABEL)
    state.items[rec.position] = MessageItem(rec.position, fid, "note")


@_apply.register
def _(event: ContextBuilt, state: RunState, rec: RecordedEvent) -> None:
    state.builds[event.turn] = rec.position


@_apply.register
def _(event: UsageObserved, state: RunState, rec: RecordedEvent) -> None:
    """The report counts the turn's newest request recorded before it (``projections.usage_pairs``):
    a retry built after a refused request's report is another request."""
    state.usage[event.turn] = event
    note_report(event.turn, state.builds, state.usage_builds)


# ---------------------------------------------------------------- public API


def fold_event(state: RunState, recorded: RecordedEvent) -> RunState:
    """Fold one recorded event into ``state`` (in place) and return it.

    Already-folded positions are ignored (catch-up is idempotent). Protocol
    errors from the pairing rules propagate and leave the state unchanged.
    """
    if recorded.run_id != state.run_id:
        raise IntegrityError(f"event of run {recorded.run_id!r} folded into {state.run_id!r}",
                             position=recorded.position)
    if recorded.position <= state.version:
        return state
    if recorded.position != state.version + 1:
        raise IntegrityError(f"run {state.run_id!r}: expected position {state.version + 1}, "
                             f"got {recorded.position}", position=recorded.position)
    event = recorded.event
    rule = _RULES.get(type(event))
    if rule is None:  # first event of its class: resolve through singledispatch, then remember
        rule = _RULES[type(event)] = _apply.dispatch(type(event))
    rule(event, state, recorded)
    state.version = recorded.position
    return state


_RULES: dict[type, Callable[[Any, RunState, RecordedEvent], None]] = {}
"""Event class -> its rule: a plain dict lookup per event instead of singledispatch's
weakref-keyed cache (a measurable part of folding small events)."""


def fold(events: Iterable[RecordedEvent], state: RunState | None = None, *,
         artifact_tokens: ArtifactTokens | None = None,
         progress: Progress | None = None) -> RunState:
    """Fold ``events`` into ``state`` (a new one from the first event's run id when None).

    ``state`` is updated in place; take :meth:`RunState.snapshot` to keep a view.
    ``artifact_tokens`` applies to a new state only (a given state keeps its own).
    ``progress(n)`` is told of the events folded (a long run takes seconds: a caller shows it).
    """
    with paused_gc():
        for rec in reported(events, progress):
            if state is None:
                state = new_state(rec.run_id, artifact_tokens=artifact_tokens)
            fold_event(state, rec)
    if state is None:
        raise ValueError("fold() of no events needs a state (use new_state(run_id))")
    return state


def folded_event_types() -> frozenset[type]:
    """Every event class the fold has a rule for (a test checks it covers ``AnyEvent``)."""
    return frozenset(t for t in _apply.registry if t is not object)
