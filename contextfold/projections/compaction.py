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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, assert_never

from contextfold.domain.errors import CompactionError
from contextfold.domain.events import CompactionSummary, HistoryCompacted
from contextfold.domain.log import RecordedEvent
from contextfold.projections.compaction_cuts import (
    check_keep_recent,
    choose_cover,
    mask_covers,
    recovery_answers,
    shown_task_input,
)
from contextfold.projections.masking import SIDE_EFFECT_PATTERN, mask_stub, mask_text, wholly_inside
from contextfold.projections.state import MessageItem, RunState, ToolGroup
from contextfold.projections.summary_bounds import SCALES
from contextfold.projections.summary_check import summary_lines, validate_summary
from contextfold.projections.summary_skeleton import (
    LoadText,
    bounded_summary,
    deterministic_summary,
    unbounded_summary,
)

__all__ = ["SIDE_EFFECT_PATTERN", "CompactionPlan", "Strategy", "Summarizer", "check_keep_recent",
           "choose_cover", "deterministic_summary", "mask_stub", "plan_compaction", "plan_compactions",
           "plan_mask", "plan_summary", "recovery_answers"]

Strategy: TypeAlias = Literal["mask", "summary"]


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
    after the cover that close calls inside it (``recovery_answers``). Both are passed by
    position, so a plug-in names its parameters as it likes (``def summarize(covered,
    skeleton)``) and a caller's type checker accepts it.
    """

    def __call__(self, events: Sequence[RecordedEvent], skeleton: CompactionSummary, /
                 ) -> CompactionSummary | Mapping[str, Any] | None: ...


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
    unbounded = unbounded_summary(covered, state, answers, load_text)
    whole = skeleton = bounded_summary(unbounded, covered, state, SCALES[0])
    if max_tokens is not None:
        for scale in SCALES[1:]:
            if state.counter.count("\n".join(summary_lines(skeleton))) <= max_tokens:
                break
            skeleton = bounded_summary(unbounded, covered, state, scale)
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
                     load_text: LoadText | None = None, cover_input: bool = False
                     ) -> list[CompactionPlan]:
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
    ``cover_input``: a summary covers the latest user input whatever lies after it (none when
    that is the cover it takes anyway): auto-compaction's step for a run whose user spoke long
    ago, where nothing after the input could be summarized and the build dropped the oldest
    groups for budget, with the ids and failures they named (``compaction_ladder.ladder``). The
    summary quotes the input with the user's authority (``fold_summary``).
    """
    check_keep_recent(keep_recent)
    match strategy:
        case "mask":
            return [plan for cover in mask_covers(state, keep_recent)
                    if (plan := plan_mask(state, *cover)) is not None]
        case "summary":
            if cover_input and (choose_cover(state, keep_recent=keep_recent, keep_error=keep_error)
                                == choose_cover(state, keep_recent=keep_recent, keep_input=False,
                                                keep_error=keep_error)):
                return []  # the input bounds no cover: the step before planned this one
            for keep_input in ((False,) if cover_input else (True, False)):
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
