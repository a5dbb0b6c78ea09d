"""The Python API for agent loops: open a store, append typed events, project, build.

    store = contextfold.open_store("sqlite:///runs.db")      # or postgresql://...
    run = store.run("run-42")
    run.append(UserInput("Fix the failing test"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest")]))
    run.append(ToolResult(call_id="c1", content=log, is_error=True, exit_code=1))
    state = run.state()          # the projection now; run.state(turn=3) as of turn 3

This module wires the store (I/O) to the pure projections; it holds no rules
of its own. A ``Run`` keeps its folded state and catches up from its last
version, so repeated ``state()`` calls in a loop cost only the new events.

The folds, the builder, the renderers and tiktoken are imported by the methods that use them
(:meth:`Run.state`, :meth:`Run.build`...), not with this module: a process that records events
and reads them back (``store.run(id).append(...)``, ``events()``, ``verify()``) builds nothing,
and paid ~0.3 s of CPU for them (``tests/unit/test_library_light_imports.py``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from pydantic import BaseModel

from contextfold.domain.checked import checked_turn
from contextfold.domain.errors import (
    ConcurrencyConflictError,
    HandleNotPicklableError,
    InvalidInputError,
    RunNotFoundError,
)
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    ContextBuilt,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, config_of
from contextfold.replay_report import ReplayReport
from contextfold.store.event_store import VerifyReport
from contextfold.store.fork_renewal import renew_after_fork
from contextfold.store.head_check import StaleHeadError
from contextfold.store.store_url import display_url, worker_reopen_advice
from contextfold.store_api import Store, open_store
from contextfold.text_cache import TEXT_CACHE_CHARS

if TYPE_CHECKING:  # imported by the methods that use them (the module docstring says why)
    from contextfold.compaction_api import CompactionReport
    from contextfold.domain.conversation import Conversation
    from contextfold.domain.manifest import Calibration
    from contextfold.domain.turn_times import TurnAtTime
    from contextfold.projections.builder import BuildResult
    from contextfold.projections.calibration import Estimate
    from contextfold.projections.compaction import Summarizer
    from contextfold.projections.progress import Progress
    from contextfold.projections.recorded_encoding import FirstRecord
    from contextfold.projections.state import ArtifactTokens, RunState
    from contextfold.projections.tokens import TokenCounter
    from contextfold.rebuild_api import RecordChoice

__all__ = ["TEXT_CACHE_CHARS", "ReplayReport", "Run", "Store", "open_store", "render_request"]

_ENCODING_KEYS = ("encoding",)
"""The keys of a record's manifest a live fold reads (``FirstRecord.saw``), and a usage report."""


class Run:
    """One run's log, seen through a store."""

    _first_record: FirstRecord
    """The first record the fold meets, watched for the encoding it names: set by
    :meth:`_fold_from_start`, before any fold reads an event (made there, not here: its module
    loads tiktoken)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._state: RunState | None = None
        self._folded_hash = ""
        """The chain hash of the event at ``_state.version``: the log still holds it there, or it
        moved back under this handle (:meth:`_new_events`)."""
        self._estimates: dict[int, Estimate | None] = {}
        self._lock = threading.RLock()
        """Held while the folded state is caught up or built from: threads sharing a Run
        folded the same new events into it twice (a false DuplicateToolResultError)."""
        renew_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child, a new lock, and the folded state dropped if a parent's thread was
        folding or building from it at the fork: that thread's lock is copied held (the child's
        first fold waited forever) and its state half caught up (:mod:`.store.fork_renewal`)."""
        if self._lock.acquire(blocking=False):  # free, or held by the thread that forked
            self._lock.release()
            return
        self._lock = threading.RLock()
        self._state, self._folded_hash, self._estimates = None, "", {}

    def __reduce__(self) -> NoReturn:
        """Refused (``HandleNotPicklableError``): the run's store is this process's."""
        raise HandleNotPicklableError("Run", worker_reopen_advice(
            self.store.url, f"open the store in the worker and take the run there, contextfold."
                            f"open_store({display_url(self.store.url)!r}).run({self.run_id!r})"))

    # ------------------------------------------------------------ projection

    def _artifact_tokens(self) -> ArtifactTokens:
        """The fold's count of a text held as an artifact, with the folding state's ``counter``: as
        a data block shows it (neutralised: ``[data]`` markers on a transcript's role lines are ~30%
        of its tokens), since the fold prices an inline text's neutralising from the text
        (``framing``) and has none here."""
        from contextfold.projections.render.data_blocks import neutralise

        def count(ref: ArtifactRef, counter: TokenCounter) -> int:
            return counter.count(neutralise(self.store.cited_text(ref)))
        return count

    def state(self, *, turn: int | None = None, progress: Progress | None = None) -> RunState:
        """The projection now (caught up incrementally), or as of ``turn`` (rebuilt from the log).

        The state now keeps long tool outputs as refs into the log and reads them back when
        a fragment is rendered or asked for whole, so use it while the store is open.
        ``progress(n)`` is told of the events folded: a 10,000-event run folds for seconds."""
        from contextfold.kept_counts import counts_kept
        from contextfold.projections.fold import fold
        from contextfold.turn_reads import run_encoding

        if turn is not None:
            from contextfold.rebuild_api import state_before_turn  # a past turn: rebuild's reads

            return state_before_turn(self, checked_turn(turn), progress=progress)
        with self._lock, counts_kept(self.store.events, self.run_id):
            try:
                if self._state is not None:
                    try:
                        state = fold(self._new_events(self._state.version), self._state, progress=progress)
                        return self._following(state, progress)
                    except StaleHeadError:  # the log moved back under this handle: fold it again
                        self._estimates = {}
                        self.store._texts.forget_run(self.run_id)  # positions that hold other events now
                return self._fold_from_start(run_encoding(self), progress)
            except BaseException:
                # An event can fail half-folded (its pairing applied, its artifact unreadable): the
                # next call would fold it again into that state and call it a duplicate. Start over.
                self._state = None
                raise

    def _fold_from_start(self, encoding: str | None, progress: Progress | None) -> RunState:
        """A new state folded from the log, counting with ``encoding`` (the run's recorded one)."""
        from contextfold.projections.fold import fold, new_state
        from contextfold.projections.recorded_encoding import FirstRecord

        self._first_record = FirstRecord(encoding)
        # long texts stay in the log (projections.entries); counted as its records were
        self._state = new_state(self.run_id, artifact_tokens=self._artifact_tokens(),
                                event_text=functools.partial(self.store.event_text, self.run_id),
                                recorded_encoding=encoding)
        return self._following(fold(self._new_events(0), self._state, progress=progress), progress)

    def _following(self, state: RunState, progress: Progress | None) -> RunState:
        """``state``, or the run folded again when the first record it folded names another
        encoding than the state picked (:class:`~.projections.recorded_encoding.FirstRecord`)."""
        encoding = self._first_record.follow(state.encoding)
        return state if encoding is None else self._fold_from_start(encoding, progress)

    def _new_events(self, version: int) -> Iterator[RecordedEvent]:
        """The events after ``version``, the state's, read with a check that the log still holds
        the event folded last (in the same query: every build's path). Why: after an earlier
        backup was restored and another writer appended, the events after the old version were
        folded on top of ones the log no longer held, and the build recorded that request. Each
        record is read for its turn and ``encoding`` (``FirstRecord``), its manifest unread: a new
        process's fold of an 800-turn run spent 20 of its 28 s decoding them whole."""
        for rec in self.store.events.iter_events(self.run_id, after=version, after_hash=self._folded_hash,
                                                 keep=_ENCODING_KEYS):
            self._first_record.saw(rec)
            yield rec
            self._folded_hash = rec.hash  # once the fold has taken it

    def _existing_state(self, progress: Progress | None = None) -> RunState:
        """:meth:`state`, or :class:`RunNotFoundError` when the log holds no event of this run: an
        operation that appends to a run (a build's record, a usage observation) must not create
        one by its first append (a mistyped run id would start a run holding only that)."""
        state = self.state(progress=progress)
        if state.version == 0:
            raise RunNotFoundError(self.run_id)
        return state

    def build(self, provider: str | None = None, *, window: int | None = None, reserve: int | None = None,
              model: str | None = None, turn: int | None = None, record: bool = True,
              in_flight: Literal["wait", "cancel"] | None = None,
              config: BuildConfig | None = None, auto_compact: bool = False, retries: int = 0,
              progress: Progress | None = None,
              before_record: Callable[[BuildResult], None] | None = None) -> BuildResult:
        """Build the next request (or rebuild ``turn``) and record a ``context_built`` event.

        ``before_record(result)`` is called with the result before anything is appended (and
        before a rebuild that records nothing returns): what it raises propagates and the log is
        left as it was (the CLI writes ``--out`` there, so a file that cannot be written is not a
        recorded build). Called once per attempt under ``retries``.

        The settings (defaults: ``provider="neutral"``, ``window=128_000``, ``in_flight="cancel"``)
        come one by one or as ``config`` (a :class:`BuildConfig`, for the rest of its fields),
        not both: a setting beside ``config`` is InvalidInputError, since it would be ignored.

        ``reserve`` (output, tool calls and a safety margin; the request gets ``window -
        reserve``) defaults to 8,000 tokens, or a quarter of a window under 32,000
        (``domain.manifest.default_reserve``).

        ``auto_compact``: under budget pressure, compaction events (observation masking,
        then a structured summary) at legal cuts, appended with the build's record; see
        :mod:`contextfold.compaction_api`.

        Live builds first append the recovery events the protocol needs
        (``tool_result_lost`` for calls the run moved past; cancellations of
        calls still in flight, or PendingToolCallsError with ``in_flight="wait"``).
        They are appended with the record against the version the build folded: if
        another writer appended meanwhile, the build raises ConcurrencyConflictError
        and writes nothing. ``retries=N`` (default 0: the error reaches the caller)
        catches up on the new events and builds again, up to N more times, then
        re-raises the last conflict. Why a retry is safe: a failed attempt wrote
        nothing, each attempt records its own result (the request returned is the one
        the logged manifest describes), and recovery another writer recorded is folded,
        not planned again. Under contention (threads appending and building one run)
        most first attempts can lose, since the tool result they would cancel arrives
        while they build; the retry then finds it answered. Not the default, because
        a caller may want to see the conflict (the README documents it as raised).
        A rebuild of a past turn (settings not named: the nearest record's) records one marked
        ``rebuild`` only when the turn has no record yet (``retries`` does not apply): when another
        worker records the turn meanwhile, the rebuild is the reproduction of that record, or
        InvalidInputError when the settings named differ from it.
        ``progress(n)`` is told of the events folded before the build (see :meth:`state`).
        :meth:`preview` makes the same next request and writes nothing.
        """
        from contextfold.rebuild_api import named_settings, rebuild

        named = {"provider": provider, "window": window, "reserve": reserve, "model": model,
                 "in_flight": in_flight}
        cfg = config_of(config, **named)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidInputError(f"retries must be an integer >= 0, got {retries!r}")
        if turn is not None:
            if auto_compact:  # it was ignored: the turn was rebuilt as it was
                raise InvalidInputError("auto_compact compacts before the next request; a past turn "
                                        "(turn=N) is rebuilt from the log as it was, which a compaction "
                                        "appended now cannot change")
            return rebuild(self, checked_turn(turn), cfg, record=record, progress=progress,
                           given=named_settings(config, named), before_record=before_record,
                           nearest=config is None)  # settings not named: the nearest record's
        attempt = 0
        while True:
            try:
                return self._build_now(cfg, record=record, auto_compact=auto_compact, progress=progress,
                                       before_record=before_record)
            except ConcurrencyConflictError:
                if attempt >= retries:
                    raise
                attempt += 1

    def preview(self, provider: str | None = None, *, window: int | None = None, reserve: int | None = None,
                model: str | None = None, in_flight: Literal["wait", "cancel"] | None = None,
                config: BuildConfig | None = None, auto_compact: bool = False,
                progress: Progress | None = None) -> BuildResult:
        """The next request as :meth:`build` would make it now, with nothing written to the log.

        Why: a look at the next request (``contextfold manifest RUN``) was a live build, which
        appends what it needs: a call still in flight was logged as cancelled while the agent's
        tool ran, and a ``context_built`` record of a request no model was sent became the turn's
        first record, the one ``replay --verify`` and audits check. The recovery events a build
        would append are folded into a copy of the state only (the manifest's ``repairs`` name
        them), and so are the compactions of ``auto_compact``; ``in_flight="wait"`` raises
        PendingToolCallsError as a build would."""
        cfg = config_of(config, provider=provider, window=window, reserve=reserve, model=model,
                        in_flight=in_flight)
        return self._build_now(cfg, record=False, auto_compact=auto_compact, progress=progress, write=False)

    def _build_now(self, cfg: BuildConfig, *, record: bool, auto_compact: bool,
                   progress: Progress | None = None, write: bool = True,
                   before_record: Callable[[BuildResult], None] | None = None) -> BuildResult:
        """One attempt of a live build, from the log as it is now (the state catches up first)."""
        with self._lock:  # the build writes to the state's memo: one thread at a time
            state = self._existing_state(progress)  # a live build records its result: never into a new run
            if not auto_compact:
                return self._build_live(state, [], cfg, record=record, write=write,
                                        before_record=before_record)
            from contextfold.compaction_api import plan_auto_compaction

            state, planned, _ = plan_auto_compaction(self, state, cfg)
            return self._build_live(state, planned, cfg, record=record, write=write,
                                    before_record=before_record)

    def _build_live(self, state: RunState, planned: Sequence[AnyEvent], cfg: BuildConfig, *,
                    record: bool = True, write: bool = True,
                    before_record: Callable[[BuildResult], None] | None = None) -> BuildResult:
        """The live build of ``state`` with ``planned`` folded in, appended with its recovery
        events and record once it succeeds (:func:`contextfold.live_build.build_live`)."""
        from contextfold.live_build import build_live

        return build_live(self, state, planned, cfg, record=record, write=write, before_record=before_record)

    def _calibration(self, state: RunState, cfg: BuildConfig) -> Calibration | None:
        """The usage calibration as of ``state`` (its own usage and build records only: replay-stable)."""
        from contextfold.projections.calibration import calibrate_state

        return calibrate_state(state, cfg, self._estimate_at)

    def _estimate_at(self, position: int) -> Estimate | None:
        """(selected_tokens, model, provider) of the ContextBuilt at ``position``; cached (events are
        immutable). Read without the rest of its manifest: a calibration reads the record of every
        turn with a usage report, and the rebuild of a turn of a long run read each whole."""
        from contextfold.projections.calibration import ESTIMATE_KEYS, record_estimate

        if position not in self._estimates:
            found = self.store.events.record_keys(self.run_id, position, ESTIMATE_KEYS)
            self._estimates[position] = record_estimate(found.event if found else None)
        return self._estimates[position]

    def observe_usage(self, turn: int, input_tokens: int, *, cached_tokens: int = 0,
                      output_tokens: int = 0, model: str | None = None,
                      progress: Progress | None = None, force: bool = False) -> RecordedEvent:
        """Record the provider-reported usage of ``turn``'s request (``usage_observed``).

        ``input_tokens`` is the whole prompt as the provider counted it, cached
        tokens included (OpenAI ``prompt_tokens``; Anthropic ``input_tokens +
        cache_read_input_tokens + cache_creation_input_tokens``). Later builds
        for the same model learn their budget correction from it. A report no request of
        the turn could produce -- over ``MAX_RATIO`` (4) times the window of the turn's
        largest recorded build -- is an InvalidInputError and nothing is recorded
        (:mod:`contextfold.projections.calibration`); record the turn again to correct one.
        So is one over 4x the largest estimate of the turn's records (a run's total passed as
        the turn's), unless ``force`` (provider-side tools can report that much).
        ``progress``: accepted for callers of 0.3.0 and not called: the turn is now checked
        without folding the run (:meth:`next_turn`).
        """
        from contextfold.usage_api import observe_usage

        return observe_usage(self, turn, input_tokens, cached_tokens=cached_tokens,
                             output_tokens=output_tokens, model=model, force=force)

    def compact(self, strategy: Literal["mask", "summary"] = "mask", *, window: int | None = None,
                reserve: int | None = None, keep_recent: int = 3, dry_run: bool = False,
                summarizer: Summarizer | None = None, config: BuildConfig | None = None,
                progress: Progress | None = None) -> CompactionReport:
        """Append a compaction event (raw events stay in the log) and say what was appended.

        See :func:`contextfold.compaction_api.compact` for the options. Spelled out here (not
        ``**options``) so a caller's type checker sees them and the report it gets back."""
        from contextfold.compaction_api import compact

        return compact(self, strategy, window=window, reserve=reserve, keep_recent=keep_recent,
                       dry_run=dry_run, summarizer=summarizer, config=config, progress=progress)

    def show(self, ref: str) -> str:
        """The raw content behind a ref that a mask or summary left.

        Refs: ``event://RUN/POS``, ``events://RUN/A-B``, ``call://RUN/ID@POS``, ``artifact:HASH``."""
        from contextfold.show_refs import show

        if not isinstance(ref, str):
            raise InvalidInputError(f"a ref is a string (event://RUN/POS, artifact:HASH, ...), got {ref!r}")
        return show(self, ref)

    def next_turn(self) -> int:
        """The turn a build now is for: the run's model responses + 1 (turns ``1..next_turn()``
        exist), counted by the store without folding the run; :class:`RunNotFoundError` for a
        run with no events. What a turn check needs: ``usage`` and ``diff`` folded a whole
        10,000-event run (~5 s) to learn it."""
        return self.store.events.count_events(self.run_id, "model_response") + 1

    def turn_at(self, when: datetime) -> TurnAtTime:
        """The turn whose request was the last one built at or before ``when`` (an aware datetime;
        :func:`contextfold.domain.event_times.utc_time` reads ISO 8601 text, a bare time as UTC),
        with the request it stands for and why, in words (:mod:`contextfold.domain.turn_times`).
        :class:`TimeNotInRunError` for a time before the run's first request, or a run whose
        events carry no times; :class:`RunNotFoundError` for a run with no events. Reads each
        record without its manifest, and the events' times (``EventStore.event_times``)."""
        from contextfold.domain.turn_times import built_requests, turn_at

        if not isinstance(when, datetime) or when.tzinfo is None:
            raise InvalidInputError(f"a time is an aware datetime (UTC, or with its zone), got {when!r}")
        times = self.store.events.event_times(self.run_id)
        events = self.store.events.iter_events(self.run_id, keep=())
        requests = built_requests((rec.position, rec.event, times.get(rec.position)) for rec in events)
        if not requests and not self.store.events.exists(self.run_id):
            raise RunNotFoundError(self.run_id)
        return turn_at(self.run_id, when, requests)

    def records(self, turn: int) -> list[ContextBuilt]:
        """The ``context_built`` records of ``turn``, oldest first: those after the turn's previous
        model response (a build of turn N folds N-1 responses), others read for their turn only."""
        from contextfold.turn_reads import turn_keys

        return turn_keys(self, turn, None)

    def replay(self, turn: int, *, record: RecordChoice = "first",
               progress: Progress | None = None) -> ReplayReport:
        """Rebuild ``turn`` from the log and compare it with the turn's first record, or the record
        ``record`` names (``"last"``, or K, 1-based: :meth:`records`), e.g. the smaller request a
        runtime built and sent after the provider refused the first as too long.

        A turn with no record, or none at ``record``, is :class:`RecordNotFoundError` (nothing to
        compare with), one the run does not have :class:`TurnNotFoundError`.
        ``progress(n)``: told of the events folded for the rebuild (see :meth:`state`)."""
        from contextfold.rebuild_api import replay

        return replay(self, checked_turn(turn), record=record, progress=progress)

    def append(self, *events: AnyEvent | Iterable[AnyEvent],
               expected_version: int | None = None) -> list[RecordedEvent]:
        """Append one or more events in one transaction (typed errors, nothing written on error)."""
        flat: list[Any] = []
        for item in events:
            if isinstance(item, BaseModel | str | bytes | dict) or not isinstance(item, Iterable):
                flat.append(item)  # the store refuses what is not an event, by its index
            else:
                flat.extend(item)
        return self.store.events.append(self.run_id, flat, expected_version=expected_version)

    def events(self, *, upto: int | None = None) -> list[RecordedEvent]:
        if upto is not None and (isinstance(upto, bool) or not isinstance(upto, int)):
            raise InvalidInputError(f"upto must be a log position (an integer), got {upto!r}")
        return self.store.events.read(self.run_id, upto=upto)

    @property
    def version(self) -> int:
        return self.store.events.version(self.run_id)

    def verify(self) -> VerifyReport:
        return self.store.events.verify(self.run_id)


def render_request(conversation: Conversation, provider: str, max_output_tokens: int) -> dict[str, Any]:
    """Render and validate ``conversation`` for ``provider``: the ``render`` port of ``build_context``.

    The renderers are pure. The body's message dicts are kept and reused by later renders of
    the same messages (read-only; ``build_context`` hands out copies); for a body of your own
    to edit, call ``contextfold.projections.render.render``.
    """
    from contextfold.projections.render import render_shared

    return render_shared(conversation, provider, max_tokens=max_output_tokens)
