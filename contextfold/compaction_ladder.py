"""The auto-compaction ladder (``compaction_api``'s steps, planned on a session, recorded by it).

Why a module of its own: :mod:`contextfold.compaction_api` appends and reports, this decides
which steps to take: the trial builds that measure the budget pressure (``measure``), whether a
step relieves it (``relieves``), the steps tried in turn (``ladder``) and the climb that folds
them into a session (``climb``). ``compaction_api`` had reached 500 lines.

The ladder: mask (keeping ``recent_groups`` groups raw), mask (keeping one), then -- only when
masking was not enough -- summary (same two steps, then one that may cover the latest user
input). Each step is tried on a snapshot first and recorded only if it relieves the pressure
(``relieves``: lower pressure, or measurably nearer to fitting); a step that is merely no worse
is not recorded (a summary is required content: too big a one could turn soft pressure into a
hard failure, and one that relieves nothing only loses detail). A step that relieves the
pressure after another step of the same strategy in the same climb replaces it (``climb``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from contextfold.api import Run
from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.events import HistoryCompacted
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.compaction import (
    CompactionPlan,
    Strategy,
    Summarizer,
    plan_compactions,
)
from contextfold.projections.fold import fold_event
from contextfold.projections.state import RunState

if TYPE_CHECKING:  # the builder is imported by the trial build that needs it (``trial``): a
    # compaction without a window builds nothing (``compaction_api.compact``)
    from contextfold.projections.builder import BuildResult

__all__ = ["Mark", "Pressure", "Session", "climb", "ladder", "measure", "pressure", "relieves",
           "summary_room", "trial"]

Pressure = Literal["none", "soft", "hard"]
_RANK: dict[Pressure, int] = {"none": 0, "soft": 1, "hard": 2}


class Mark(NamedTuple):
    """A session as it was before a step (``Session.mark``): its state, and how many events,
    pending events and plans it held."""

    state: RunState
    folded: int
    pending: int
    plans: int


class Session(Protocol):
    """What :func:`climb` plans on (``compaction_api._Session``): a snapshot of the run's state,
    the log folded into it, and the steps recorded so far."""

    run: Run
    state: RunState

    @property
    def events(self) -> list[RecordedEvent]: ...

    def apply(self, plan: CompactionPlan) -> None: ...

    def mark(self) -> Mark:
        """The session as it is now (its state a snapshot: later steps do not change it)."""
        ...

    def events_at(self, mark: Mark) -> list[RecordedEvent]:
        """:attr:`events` as they were at ``mark``."""
        ...

    def rewind(self, mark: Mark) -> None:
        """Undo what was folded and planned since ``mark``."""
        ...


def trial(run: Run, state: RunState, config: BuildConfig) -> BuildResult:
    """A build of ``state`` as ``Run.build`` would make it: with the run's usage calibration,
    which shrinks the budget when the provider counts more tokens than tiktoken. Without it the
    ladder judged a state to fit that the real build then had to cut or could not build."""
    from contextfold.projections.builder import build_context

    return build_context(state, config, load_text=run.store.cited_text,
                         calibration=run._calibration(state, config))


def pressure(run: Run, state: RunState, config: BuildConfig) -> Pressure:
    """Budget pressure of a trial build of ``state`` (pure, nothing recorded)."""
    return measure(run, state, config).pressure


class _Trial(NamedTuple):
    """A trial build's pressure and how far it is from fitting (``measure``)."""

    pressure: Pressure
    over: int
    """Under hard pressure: the required tokens past the budget."""
    lost: dict[str, int]
    """Under soft pressure: fragment id -> its tokens the build could not send (left out for
    budget, or cut away by truncation)."""
    dropped: bool = False
    """Under soft pressure: whether the build left timeline content out for budget (not only cut
    some down)."""


def measure(run: Run, state: RunState, config: BuildConfig) -> _Trial:
    """The pressure of a trial build of ``state`` and what it could not send."""
    try:
        result = trial(run, state, config)
    except RequiredContextExceedsBudgetError as exc:
        return _Trial("hard", exc.required_tokens - exc.budget, {})
    m = result.manifest
    lost = {e.id: e.tokens for e in m.excluded_items if e.reason in ("low_priority", "over_budget")}
    for t in m.truncations:
        lost[t.id] = lost.get(t.id, 0) + t.original_tokens - t.tokens
    dropped = any(e.reason in ("low_priority", "over_budget") for e in m.excluded_items)
    return _Trial("soft" if lost or m.truncations else "none", 0, lost, dropped)


_RELIEF_SHARE = 20
"""Soft to soft, a step must let the build send at least 1/``_RELIEF_SHARE`` of its budget more of
what it left out (``relieves``)."""


def relieves(now: _Trial, after: _Trial, replaced: set[str], budget: int, *,
             summary: bool = False) -> bool:
    """Whether a step that takes a trial build from ``now`` to ``after`` is worth recording: the
    pressure drops, or, at the same pressure, the build comes measurably nearer to fitting.

    Soft to soft: only when the build sends measurably more (1/``_RELIEF_SHARE`` of the budget)
    of the content it left out that the step does not stand in for (``replaced``: stubbing a
    result the build left out anyway makes no room). A step that was merely no worse was
    recorded: a failing 20,000-line log truncated whatever happens kept the pressure soft, so
    every build climbed the whole ladder (276 compaction events in 200 builds at 32k, each
    summary re-summarising the run), and a mask of small results the build had left out took
    room from the failing log. Hard to hard: when the required content did not grow (a next
    step may then make it fit; nothing of a ladder that ends under hard pressure is recorded).

    A ``summary`` after which the build leaves nothing out for budget, where it left groups out
    before, relieves too, whatever a truncated log loses: the summary brings what the build
    dropped back into the request. Without it, a failing log truncated whatever happens kept the
    pressure soft, the summary (required) took room from that log, and the build dropped the
    oldest groups after the user's input instead, with their deployment ids and failed, unverified
    deploys (a 6k window, a 20,000-line failing log: 5 deploys gone from the request)."""
    if summary and now.pressure == after.pressure == "soft" and now.dropped and not after.dropped:
        return True
    if now.pressure != after.pressure:
        return _RANK[after.pressure] < _RANK[now.pressure]
    if now.pressure == "hard":
        return after.over <= now.over
    before = sum(tokens for fid, tokens in now.lost.items() if fid not in replaced)
    return before - sum(after.lost.values()) >= max(1, budget // _RELIEF_SHARE)


def _timeline_ids(state: RunState) -> set[str]:
    return {fid for item in state.timeline() for fid in item.fragment_ids}


def ladder(strategy: Strategy, keep_recent: int) -> list[tuple[Strategy, int, bool, bool]]:
    """The steps tried in turn, cheap first: (strategy, keep_recent, only while the build cannot
    be made at all, a summary that may cover the latest user input).

    A summary leaves the latest user input raw, and its cover stops before it; when that is not
    enough, one more summary covers it too (quoting it with the user's authority): in a run whose
    user spoke long ago, the groups after the input could never be summarized, and the build
    dropped the oldest of them for budget, with the deployment ids and failed, unverified deploys
    they named (a 6k window: for 23 of 60 turns).

    The last, a summary that covers the newest tool group too, is tried only while the build
    cannot be made at all: the newest group is required (the model reads what its last calls
    did), and is covered only when it alone keeps the build from being made, e.g. a call whose
    arguments (a whole file written) outgrow the budget, which no cut may shorten."""
    steps: list[tuple[Strategy, int]] = [("mask", keep_recent), ("mask", 1)]
    if strategy == "summary":
        steps += [("summary", keep_recent), ("summary", 1)]
    ladder = [(step, keep, False, False) for step, keep in dict.fromkeys(steps)]
    if strategy == "summary":
        ladder.append(("summary", 1, False, True))
    if strategy == "summary" and ("summary", 0) not in steps:
        ladder.append(("summary", 0, True, False))
    return ladder


_SUMMARY_SHARE = 4
"""A summary made for a window may take up to 1/``_SUMMARY_SHARE`` of its budget whole; past
that, fewer of its lists' newest entries stay whole (``plan_summary``)."""


def summary_room(config: BuildConfig) -> int:
    """The tokens a summary made for ``config``'s window may take (:data:`_SUMMARY_SHARE`)."""
    return max(1, (config.window - config.reserve) // _SUMMARY_SHARE)


def climb(session: Session, strategy: Strategy, cfg: BuildConfig, keep_recent: int,
          summarizer: Summarizer | None) -> tuple[Pressure, Pressure]:
    """Fold the ladder's steps into ``session`` until a trial build of ``cfg`` fits; the
    pressure before and after.

    A step is planned on the session as it was before the step of the same strategy an earlier
    step of this climb recorded, if any, and replaces it: each step keeps fewer groups raw than
    the one before (or covers the user's latest input), so its covers hold the earlier one's.
    Planned on the state the earlier step left, a summary summarized that summary, and a build
    whose first summary relieved the pressure without ending it appended two at once, the second
    covering the first (a 6k window: events 149 and 150, covering 1-138 and 1-142), a record no
    build ever showed; a mask stubbed the results the first had left, and a build appended two
    masks over nested covers (1-108 and 1-115) where one planned before the first stubs both's.
    The steps of one strategy come together (masks, then summaries), so a replacement rewinds
    only steps of its own strategy."""
    now = measure(session.run, session.state, cfg)
    before = now.pressure
    recorded: dict[Strategy, Mark] = {}  # the session before this climb's step of each strategy
    for step, keep, last_resort, cover_input in ladder(strategy, keep_recent):
        if now.pressure == "none":
            break
        if last_resort and now.pressure != "hard":
            continue
        base = recorded.get(step)
        state, events = (session.state, session.events) if base is None else (
            base.state, session.events_at(base))
        plans = plan_compactions(state, events, step, keep_recent=keep, summarizer=summarizer,
                                 max_summary_tokens=summary_room(cfg), keep_error=not last_resort,
                                 load_text=session.run.store.cited_text, cover_input=cover_input)
        if base is not None and not _hold(plans, session.events[len(events):]):
            continue  # (a narrower cover: never planned so, but nothing may come back raw)
        if not plans:
            continue
        # recorded only when it relieves the pressure (``relieves``): a summary is required
        # content, and a step that changes nothing the request needs only loses detail
        tried = state.snapshot()
        for plan in plans:  # (a mask either side of the latest error: judged together)
            fold_event(tried, RecordedEvent(session.run.run_id, tried.version + 1, plan.event, ""))
        after = measure(session.run, tried, cfg)
        replaced = _timeline_ids(session.state) - _timeline_ids(tried)
        if relieves(now, after, replaced, cfg.window - cfg.reserve, summary=step == "summary"):
            if base is not None:
                session.rewind(base)
            else:
                recorded[step] = session.mark()
            for plan in plans:
                session.apply(plan)
            now = after
    return before, now.pressure


def _hold(plans: Sequence[CompactionPlan], replaced: Sequence[RecordedEvent]) -> bool:
    """Whether every compaction among ``replaced`` (the events ``plans`` would replace) lies inside
    the cover of one of ``plans`` (two masks either side of the latest error: each holds its side)."""
    return all(any(p.event.covers_from <= rec.event.covers_from and rec.event.covers_to <= p.event.covers_to
                   for p in plans)
               for rec in replaced if isinstance(rec.event, HistoryCompacted))
