"""Compaction for a stored run (I/O): compact, and automatic compaction before a build.

    from contextfold.compaction_api import build, compact
    report = compact(run, "mask")                      # one mask event at the widest legal cut
    report = compact(run, "summary", window=16_000)    # mask, then summarize, until it fits
    built = build(run, "anthropic", window=16_000)     # auto-compacts, then Run.build
    show(run, "event://run-42/17")                     # read back: contextfold.show_refs

Why functions over a :class:`~contextfold.api.Run` and not methods: they only
*append* events (``HistoryCompacted``) through ``Run.append`` and then fold
and build through the ordinary path. Every step is planned on a snapshot and the
events go in one transaction at the end; before a build, with the build's record,
so a build that fails (the required content still over budget) writes nothing; the rules live in
:mod:`contextfold.projections.compaction`. Raw events never leave the log, so
``Run.replay(turn)`` of any later turn rebuilds the same request.

Triggers (:func:`auto_compact`), cheap before expensive:

- *soft*: a trial build (pure, not recorded) dropped timeline content for
  budget or had to truncate: compact if a legal cut exists, else skip;
- *hard*: the required fragments alone exceed the budget: compact, and if no
  compaction makes them fit, raise the typed
  :class:`~contextfold.domain.errors.RequiredContextExceedsBudgetError`.

The ladder (:mod:`contextfold.compaction_ladder`): mask, then -- only when masking was not
enough -- summary, each step recorded only if it relieves the pressure. A mask never stubs the
latest error's group (``choose_cover``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from pydantic import ValidationError

from contextfold.api import Run
from contextfold.compaction_ladder import Mark, Pressure, climb, pressure, summary_room, trial
from contextfold.domain.errors import (
    CompactionError,
    InvalidInputError,
    RequiredContextExceedsBudgetError,
)
from contextfold.domain.events import (
    AnyEvent,
    ContextBuilt,
    HistoryCompacted,
    ToolCallCancelled,
    ToolResultLost,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, config_of
from contextfold.projections.compaction import (
    CompactionPlan,
    Strategy,
    Summarizer,
    check_keep_recent,
    plan_compactions,
)
from contextfold.projections.fold import fold_event
from contextfold.projections.progress import Progress
from contextfold.projections.repair import lost_call_events, recovery_events
from contextfold.projections.state import RunState, SummaryItem
from contextfold.show_refs import artifact_bytes, ref_run, show, show_artifact
from contextfold.store.event_reads import bulk_allocation

if TYPE_CHECKING:  # a compaction without a window builds nothing: the builder is imported by the
    # trial build that needs one (``compaction_ladder.trial``) and by ``Run.build``
    from contextfold.projections.builder import BuildResult

__all__ = ["CompactionReport", "Pressure", "artifact_bytes", "auto_compact", "build", "compact",
           "plan_auto_compaction", "pressure", "ref_run", "show", "show_artifact"]
# the read-back lives in show_refs; named here too, where a compaction's caller looks for it



@dataclass(frozen=True)
class CompactionReport:
    """What a compaction appended (or, for a dry run, would append)."""

    run_id: str
    dry_run: bool
    events: tuple[HistoryCompacted, ...]
    positions: tuple[int, ...]
    """Log positions of the appended events (empty for a dry run)."""
    replaced_tokens: int
    """Tokens of the timeline fragments the events replace."""
    stand_in_tokens: int
    """Tokens of the stubs / summaries standing in for them."""
    pressure_before: Pressure | None = None
    pressure_after: Pressure | None = None
    """With a window: the budget pressure of a trial build before and after."""
    recovery: tuple[str, ...] = ()
    """The recovery events appended with the compaction (would be, for a dry run), as a
    manifest's ``repairs`` names them (``tool_result_lost:CALL``): a lost call's group is
    compactable once its loss is recorded, so the compaction records it."""

    @property
    def saved_tokens(self) -> int:
        return self.replaced_tokens - self.stand_in_tokens


_CONFIG_KEYS = ("config",)
"""The key of a record's manifest :func:`_last_live_config` reads."""


class _Session:
    """A snapshot of the state and the event list that planned events are folded into. Nothing
    is written until :meth:`commit` appends them all in one transaction: a compaction that
    fails half-way (the required content still over budget) leaves the log as it was."""

    def __init__(self, run: Run, *, dry_run: bool, state: RunState | None = None,
                 summarizer: Summarizer | None = None) -> None:
        self.run, self.dry_run, self.summarizer = run, dry_run, summarizer
        self.state = (run.state() if state is None else state).snapshot()
        self.base_version = self.state.version
        self._log: list[RecordedEvent] | None = None
        self._folded: list[RecordedEvent] = []
        self.pending: list[AnyEvent] = []
        self.plans: list[CompactionPlan] = []
        self.positions: list[int] = []

    @property
    def events(self) -> list[RecordedEvent]:
        """The log up to the snapshot, then the events folded into it: read from the store on
        first use. A build with ``auto_compact=True`` read the whole log every time, compaction
        or not (1,000 turns: 41 s per 100 builds against 0.6 s without it).

        Each context_built record is read with its manifest's ``config`` alone: the planner reads
        no record, and :func:`_last_live_config` that key only, where every manifest was decoded
        whole (an 800-turn run's log: ~200 MB of manifest JSON). A plug-in summarizer is handed
        the covered events as they are logged, records and all, so its session reads them whole
        (and so does one of a run with no events: :meth:`Run.events` says it does not exist)."""
        if self._log is None:
            if self.summarizer is not None or self.base_version == 0:
                self._log = self.run.events(upto=self.base_version)
            else:
                with bulk_allocation():  # (as ``Run.events()`` reads: the events hold no cycles)
                    self._log = list(self.run.store.events.fold_events(
                        self.run.run_id, upto=self.base_version, keep=_CONFIG_KEYS))
        return [*self._log, *self._folded]

    def fold(self, event: AnyEvent) -> None:
        rec = RecordedEvent(self.run.run_id, self.state.version + 1, event, "")
        fold_event(self.state, rec)
        self._folded.append(rec)
        self.pending.append(event)

    def apply(self, plan: CompactionPlan) -> None:
        self.fold(plan.event)
        self.plans.append(plan)

    def mark(self) -> Mark:
        """The session as it is now (``compaction_ladder.Session``)."""
        return Mark(self.state.snapshot(), len(self._folded), len(self.pending), len(self.plans))

    def events_at(self, mark: Mark) -> list[RecordedEvent]:
        logged = self.events[:len(self.events) - len(self._folded)] if self._log is None else self._log
        return [*logged, *self._folded[:mark.folded]]

    def rewind(self, mark: Mark) -> None:
        self.state = mark.state.snapshot()
        del self._folded[mark.folded:], self.pending[mark.pending:], self.plans[mark.plans:]

    def commit(self) -> None:
        """Append every planned event at once, against the version the plan was made on
        (nothing for a dry run, nor when no compaction was planned: the recovery events folded
        first are recorded with a compaction, as a build records them with its record)."""
        if self.dry_run or not self.plans:
            return
        recorded = self.run.append(self.pending, expected_version=self.base_version)
        planned = {id(p.event) for p in self.plans}
        self.positions = [rec.position for rec, ev in zip(recorded, self.pending, strict=True)
                          if id(ev) in planned]

    def report(self, before: Pressure | None, after: Pressure | None) -> CompactionReport:
        return CompactionReport(
            run_id=self.run.run_id, dry_run=self.dry_run,
            events=tuple(p.event for p in self.plans), positions=tuple(self.positions),
            replaced_tokens=sum(p.tokens_before for p in self.plans),
            stand_in_tokens=sum(p.tokens_after for p in self.plans),
            pressure_before=before, pressure_after=after,
            recovery=tuple(f"{e.type}:{e.call_id}" for e in self.pending
                           if isinstance(e, ToolResultLost | ToolCallCancelled)) if self.plans else ())


def _check_strategy(strategy: object) -> None:
    """An unknown strategy raised a bare AssertionError (the planner's ``assert_never``), or with
    a window was taken for masking alone."""
    if strategy not in ("mask", "summary"):
        raise InvalidInputError(f"unknown compaction strategy {strategy!r}: use 'mask' or 'summary'")


def compact(run: Run, strategy: Strategy = "mask", *, window: int | None = None,
            reserve: int | None = None, keep_recent: int = 3, dry_run: bool = False,
            summarizer: Summarizer | None = None, config: BuildConfig | None = None,
            progress: Progress | None = None) -> CompactionReport:
    """Compact ``run``. Without a window: one ``strategy`` event at the widest legal cut
    that keeps ``keep_recent`` tool groups raw. With a window (or ``config``): climb the
    ladder (mask first; summary only for ``strategy="summary"``) until a build fits; when the
    required content still does not fit, :class:`RequiredContextExceedsBudgetError` names what
    was planned and nothing is appended. The events are appended in one transaction once all
    are planned. ``progress(n)`` is told of the events folded first (see :meth:`Run.state`). A
    plan that would not save tokens (a summary longer than the history it covers) is not
    appended. The TOOL_RESULT_LOST of calls the run moved past unanswered are folded first and
    appended with the compaction, as auto-compaction does: until a build recorded them, their
    groups were open, every cut was pulled back before them and a freshly imported trace had
    "nothing to compact"."""
    _check_strategy(strategy)
    check_keep_recent(keep_recent)  # before anything: with a window, nothing may be planned
    if reserve is not None and window is None and config is None:  # it was ignored, unchecked
        raise InvalidInputError(f"reserve ({reserve!r}) goes with a window: without one, compact makes "
                                "one cut at the widest legal point and builds nothing to reserve "
                                "room in (give window=, --window on the command line)")
    state = run.state(progress=progress)
    session = _Session(run, dry_run=dry_run, state=state, summarizer=summarizer)
    for event in lost_call_events(session.state):
        session.fold(event)  # first, so the groups they close can be compacted
    if window is None and config is None:
        last = _last_live_config(session.events) if strategy == "summary" else None
        plans = plan_compactions(session.state, session.events, strategy, keep_recent=keep_recent,
                                 summarizer=summarizer,
                                 max_summary_tokens=None if last is None else summary_room(last),
                                 load_text=run.store.cited_text)
        # a summary longer than what it stands for saves nothing (a mask's plan already says so):
        # it would only add required tokens to every later request
        for plan in plans:
            if plan.tokens_after < plan.tokens_before:
                if plan.event.strategy == "summary":
                    _check_last_window(session, plan)
                session.apply(plan)
        session.commit()
        return session.report(None, None)
    cfg = config_of(config, window=window, reserve=reserve)
    before, after = climb(session, strategy, cfg, keep_recent, summarizer)
    if after == "hard":  # asked to make the window fit, and it cannot: a mask that saved a
        _raise_unfit(session, state, cfg, "compaction")  # little was appended all the same
    session.commit()
    return session.report(before, after)


def _last_live_config(events: Sequence[RecordedEvent]) -> BuildConfig | None:
    """The configuration of the run's newest live build record (a rebuild of a past turn is an
    audit at any window, not the window the run is served at), if any."""
    for rec in reversed(events):
        ev = rec.event
        if isinstance(ev, ContextBuilt) and not ev.rebuild:
            try:
                return BuildConfig.model_validate(ev.manifest.get("config"))
            except ValidationError:  # a record of an older layout: nothing to compare with
                return None
    return None


def _check_last_window(session: _Session, plan: CompactionPlan) -> None:
    """Refuse a summary that would make the run unbuildable at the window of its newest live
    build: it is required content in every later request, and the log is append-only, so such
    a summary could never be taken back (a 4,000-call run built within 24k needed 44k after one).
    With a window, :func:`~contextfold.compaction_ladder.climb` guards the same way."""
    config = _last_live_config(session.events)
    if config is None:
        return
    tried = session.state.snapshot()
    fold_event(tried, RecordedEvent(session.run.run_id, tried.version + 1, plan.event, ""))
    try:
        trial(session.run, tried, config)
    except RequiredContextExceedsBudgetError as exc:
        if pressure(session.run, session.state, config) == "hard":
            return  # it did not fit before either: the summary makes nothing worse to refuse
        raise CompactionError(
            f"a summary of events {plan.event.covers_from}-{plan.event.covers_to} would need "
            f"{exc.required_tokens} required tokens in a build at the window of the run's last build "
            f"({config.window}, reserve {config.reserve}: a budget of {exc.budget}), which fits now; "
            "nothing was written. Compact with that window (window=, --window), which masks first and "
            "summarizes only what fits, or with strategy mask") from None


def plan_auto_compaction(run: Run, state: RunState, config: BuildConfig, *,
                         strategy: Strategy = "summary", summarizer: Summarizer | None = None
                         ) -> tuple[RunState, list[AnyEvent], CompactionReport]:
    """Plan (append nothing) what :func:`auto_compact` appends before a build of ``config``:
    the state with the events folded in, the events (recovery first), the dry report.

    Raises RequiredContextExceedsBudgetError when the required content still does not fit
    after every step of the ladder -- with nothing written, so a caller that appends the
    events only with its build's record never leaves half a compaction in the log. The error
    lists the required fragments of the state as it is (never of planned, unwritten events);
    its ``note`` names the steps that were planned.
    """
    _check_strategy(strategy)
    if not recovery_events(state, in_flight=config.in_flight) and pressure(run, state, config) == "none":
        # the common case, tried on the run's own state: its memo keeps the trial (and the build
        # that follows it on the same state) as cheap as a build without auto-compaction; a
        # snapshot starts with none, and two cold builds a turn grew with the run (400 turns:
        # 1.7 s per 100 builds at turn 100, 3.9 s at turn 400, against 0.6 s)
        return state, [], CompactionReport(run_id=run.run_id, dry_run=True, events=(), positions=(),
                                           replaced_tokens=0, stand_in_tokens=0,
                                           pressure_before="none", pressure_after="none")
    session = _Session(run, dry_run=True, state=state, summarizer=summarizer)
    for event in recovery_events(session.state, in_flight=config.in_flight):
        session.fold(event)  # first, so the groups they close can be compacted
    before, after = climb(session, strategy, config, config.recent_groups, summarizer)
    if after == "hard":
        _raise_unfit(session, state, config)
    return session.state, session.pending, session.report(before, after)


def _raise_unfit(session: _Session, state: RunState, config: BuildConfig,
                 what: str = "auto-compaction") -> NoReturn:
    """The typed error of a build of ``state`` as it is, naming the compaction steps that were
    planned and not written.

    The error of the compacted snapshot named fragments of events that were never appended (a
    summary ``e19`` at a position past the log's end) and sizes after steps that could make
    the required content larger (a summary is required, and may outgrow the input it covers):
    a user reading it saw neither the log nor why it does not fit."""
    try:
        trial(session.run, session.state, config)
    except RequiredContextExceedsBudgetError as exc:
        compacted: RequiredContextExceedsBudgetError = exc
    else:  # pragma: no cover - the ladder reported hard pressure for this very state
        raise AssertionError("auto-compaction reported hard pressure for a state that fits")
    plain = state.snapshot()
    for event in recovery_events(plain, in_flight=config.in_flight):  # a plain build folds them too
        fold_event(plain, RecordedEvent(session.run.run_id, plain.version + 1, event, ""))
    if session.plans:
        steps = ", ".join(f"{p.event.strategy} of events {p.event.covers_from}-{p.event.covers_to}"
                          for p in session.plans)
        note = (f"{what} planned {steps}: the required fragments would still need "
                f"{compacted.required_tokens} tokens; nothing was written, the fragments listed "
                "are the log's as it is")
    else:
        note = f"{what} found no legal cut to compact; nothing was written"
    try:
        trial(session.run, plain, config)
    except RequiredContextExceedsBudgetError as exc:
        summaries = {it.fragment_id for it in plain.timeline() if isinstance(it, SummaryItem)}
        largest, tokens = max(exc.required, key=lambda r: r[1])
        if largest in summaries:  # the note above read as if a fresh summary could help: each merges it
            note += (f"; the largest required fragment is the summary {largest} ({tokens} tokens), which "
                     "every new summary merges and cannot make smaller: build with a larger window")
        raise RequiredContextExceedsBudgetError(exc.budget, exc.required, note=note) from None
    # the ladder never raises the pressure: the state before it was under hard pressure too
    raise AssertionError("auto-compaction: the uncompacted state fits")  # pragma: no cover


def auto_compact(run: Run, config: BuildConfig, *, strategy: Strategy = "summary",
                 summarizer: Summarizer | None = None) -> CompactionReport:
    """Soft/hard-triggered compaction before a build of ``config`` (see the module docstring).

    Recovery events (lost / cancelled calls) come first, so the groups they close can be
    compacted; all events are appended in one transaction. Raises
    RequiredContextExceedsBudgetError, appending nothing, when the required content still
    does not fit after every step of the ladder.
    """
    with run._lock:  # a trial with nothing to compact builds on the run's own state (its memo)
        state = run.state()
        _, events, planned = plan_auto_compaction(run, state, config, strategy=strategy,
                                                  summarizer=summarizer)
    recorded = run.append(events, expected_version=state.version) if events else []
    positions = tuple(rec.position for rec in recorded[len(events) - len(planned.events):])
    return dataclasses.replace(planned, dry_run=False, positions=positions)


def build(run: Run, provider: str | None = None, *, window: int | None = None, reserve: int | None = None,
          model: str | None = None, auto: bool = True, strategy: Strategy = "summary",
          summarizer: Summarizer | None = None, config: BuildConfig | None = None) -> BuildResult:
    """``Run.build`` with automatic compaction first (``auto=False``: a plain build). The
    compaction events are appended with the build's record: a build that fails (over
    budget, a refused request) appends nothing. The settings come as in ``Run.build``."""
    cfg = config_of(config, provider=provider, window=window, reserve=reserve, model=model)
    if not auto:
        return run.build(config=cfg)
    with run._lock:  # as Run.build: the build writes to the state's memo
        state, events, _ = plan_auto_compaction(run, run._existing_state(), cfg, strategy=strategy,
                                                summarizer=summarizer)
        return run._build_live(state, events, cfg)
