"""Rebuilding a stored run's turns (I/O): what the model saw at turn N, and its check.

    result = rebuild(run, 3, BuildConfig(), record=True)   # Run.build(turn=3)
    report = replay(run, 3)                                # Run.replay(3)

Why functions over a :class:`~contextfold.api.Run`, apart from it: a rebuild reads the turn's
records and the log up to what its first build folded, and only appends (a rebuild record)
through ``Run.append``; the live build's path (catch-up, recovery, retries) stays in
:mod:`contextfold.api`. The comparison and its wording live in :mod:`contextfold.replay_report`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from contextfold.audit.data import ConfigChoice, config_for_turn
from contextfold.domain.checked import checked_turn
from contextfold.domain.errors import (
    BudgetError,
    ConcurrencyConflictError,
    InvalidInputError,
    RecordNotFoundError,
    RenderError,
    TurnNotFoundError,
)
from contextfold.domain.events import ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, manifest_encoding, recorded_config
from contextfold.kept_counts import counts_kept
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.past_states import state_at_turn, state_at_version, state_before_response
from contextfold.projections.progress import Progress
from contextfold.projections.state import RunState
from contextfold.replay_report import ReplayReport, first_difference, recorded_run_id, unicode_note
from contextfold.store.record_reads import TurnRead
from contextfold.turn_reads import run_encoding, turn_keys
from contextfold.turn_reads import turn_start as _turn_start

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["RecordChoice", "check_given", "named_settings", "nearest_config", "previewed", "read_turn",
           "rebuild", "record_index", "replay", "run_encoding", "state_before_turn", "turn_keys",
           "turn_records"]

RecordChoice = Literal["first", "last"] | int
"""Which of a turn's ``context_built`` records: the first, the last, or K (1-based, in log order)."""


def record_index(which: RecordChoice, count: int) -> int:
    """The 1-based index ``which`` names among a turn's ``count`` records (it may be past them:
    the caller says the turn has no such record); InvalidInputError for what names none."""
    if which == "first":
        return 1
    if which == "last":
        return count
    if isinstance(which, bool) or not isinstance(which, int) or which < 1:
        raise InvalidInputError(f"record is 'first', 'last' or a 1-based index, got {which!r}")
    return which


_CONFIG_KEYS = ("config",)
"""The key of a record's manifest ``recorded_config`` reads."""


def read_turn(run: Run, turn: int) -> TurnRead:
    """The records of ``turn`` (:meth:`Run.records`, decoded whole), read with every record after
    the turn's previous model response for its turn and ``config``: what :func:`nearest_config`
    then reads of them, when the turn has no record, is not read again."""
    turn = checked_turn(turn)
    return run.store.events.turn_read(run.run_id, turn, after=_turn_start(run, turn), keep=_CONFIG_KEYS)


def turn_records(read: TurnRead) -> list[ContextBuilt]:
    """The turn's records of ``read`` (:func:`read_turn`), as :meth:`Run.records` gives them."""
    return [r.event for r in read.records if isinstance(r.event, ContextBuilt)]


def nearest_config(run: Run, turn: int, given: ConfigChoice = None, *, read: TurnRead | None = None
                   ) -> BuildConfig:
    """The config to rebuild ``turn`` of ``run``, a turn without a record, with: the nearest record's,
    ``given`` replacing its fields (``audit.data.config_for_turn``), each record read for its turn
    and ``config`` alone. Why: the log read whole for it held every record's manifest (an
    800-turn run: 2.1 GB), though only the nearest record's settings are used. ``read``: the
    turn's :func:`read_turn`, whose records are not read again (only those before them)."""
    events = run.store.events
    if read is None:
        return config_for_turn(events.record_heads(run.run_id, _CONFIG_KEYS), turn, given)
    earlier = events.record_heads(run.run_id, _CONFIG_KEYS, upto=read.after) if read.after else ()
    heads = itertools.chain(earlier, read.later)
    return config_for_turn(heads, turn, given)


def state_before_turn(run: Run, turn: int, *, progress: Progress | None = None) -> RunState:
    """The state of ``run`` as of ``turn`` (``Run.state(turn=N)``, the rebuild of a turn without a
    record): the log folded up to the turn's model response, read as the fold goes, each record's
    manifest unread (the fold notes a record's turn and position), counted as the run's records
    counted. :class:`TurnNotFoundError` for a turn the run does not have.

    Why not ``state_at_turn(run.events(), ...)``: that list held every record's manifest, the
    whole run's (``state(turn=1)`` of an 800-turn run: 27 s and 2.1 GB), where an early turn's
    state needs the log up to that turn only."""
    last = run.next_turn()
    if not 1 <= turn <= last:
        raise TurnNotFoundError(run.run_id, turn, last)
    events = run.store.events
    # the turn's response is read (as the list's fold read it), not folded: None, the turn is now
    response = events.nth_position(run.run_id, "model_response", turn)
    with counts_kept(events, run.run_id):
        return state_before_response(events.fold_events(run.run_id, upto=response), turn, run_id=run.run_id,
                                     artifact_tokens=run._artifact_tokens(), progress=progress,
                                     recorded_encoding=run_encoding(run))


def previewed(turn: int, records: Sequence[ContextBuilt], next_turn: int) -> bool:
    """Whether :func:`rebuild` makes ``turn`` (whose records are ``records``) as the preview of the
    next request: the turn not answered yet (``next_turn``, :meth:`Run.next_turn`) while no build
    of it is recorded. The commands that say which a shown request is ask this, so what they say
    follows the rule."""
    return not records and turn == next_turn


def _note_settings(exc: Exception, cfg: BuildConfig, what: str) -> None:
    """Add to ``exc`` what its build was (a turn without a record) and the settings it was tried
    with (the CLI prints an error's notes)."""
    exc.add_note(f"{what} for {cfg.provider} with window {cfg.window} and reserve {cfg.reserve}")


def named_settings(config: BuildConfig | None, named: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a caller named for a rebuild (``given``): every field of a whole ``config``
    (a config names them all), else the ``named`` ones that are set."""
    return dict(config) if config is not None else {name: value for name, value in named.items()
                                                    if value is not None}


def rebuild(run: Run, turn: int, cfg: BuildConfig, *, record: bool, progress: Progress | None = None,
            records: list[ContextBuilt] | None = None, given: Mapping[str, Any] | None = None,
            events: Sequence[RecordedEvent] | None = None, version: int | None = None,
            before_record: Callable[[BuildResult], None] | None = None,
            superseded: Callable[[BuildResult], None] | None = None, nearest: bool = False
            ) -> BuildResult:
    """Rebuild ``turn`` (``records``: its records, and ``events``: the run's whole log, when the
    caller has read them already: a long run's records are megabytes of JSON each, and its log
    takes ~1 s to read and decode at 10,000 events). ``before_record(result)``: as for
    :meth:`~contextfold.api.Run.build`, called before a record is appended (and before a result
    that records nothing is returned). ``version``: the run's version read before ``records``
    were (read here when they are not given). ``nearest``: a past turn without a record is rebuilt
    with the nearest record's config, ``given`` replacing its fields, instead of ``cfg``, as the
    CLI's ``build``/``manifest``/``replay --turn`` do (``audit.data.config_for_turn``); the API's
    ``run.build(turn=N)`` built it for the defaults (neutral, 128k) and recorded that as the
    turn's first record, which replay, audit and calibration then read as what the model saw.
    (The turn not answered yet is the next request, made with ``cfg`` as :meth:`Run.preview` is.)

    A turn with records is rebuilt from the log its first build folded, with that build's config;
    ``given`` (the settings the caller named) that differ from it are InvalidInputError, since
    they would be ignored.
    A past turn with none is rebuilt from the log up to its model response and, with ``record``,
    records one marked ``rebuild``, appended at the version its check of the records saw: when
    another worker recorded the turn meanwhile, it is reproduced from that record instead
    (``before_record`` is called again, with the reproduction), or refused as above when ``given``
    differs from it (:func:`_record_once`); ``superseded(ours)`` is then told of this rebuild's
    own result, not recorded (what the caller says of the turn's record must name that worker's
    record, not this rebuild). The turn not answered yet, with none, is the next request:
    :meth:`~contextfold.api.Run.preview` (recovery folded into a copy, nothing written, and
    ``in_flight="wait"`` raises PendingToolCallsError as a build would)."""
    from contextfold.api import render_request

    last = run.next_turn()
    if not 1 <= turn <= last:
        raise TurnNotFoundError(run.run_id, turn, last)
    read: TurnRead | None = None
    if records is None:  # (the run's version first: see _record_once)
        version, read = run.version, read_turn(run, turn)
        records = turn_records(read)
    if previewed(turn, records, last):
        # The turn not answered yet, with no build of it: the next request. Rebuilt from the log
        # as it stands, a call still in flight had its group dropped as stale, where the build
        # appends the call's cancellation: two requests for one turn (manifest with and without
        # --turn). Nothing is recorded: the live build's record is to be the turn's first.
        try:
            previewed_result = run.preview(config=cfg, progress=progress)
        except (BudgetError, RenderError) as exc:  # say what was tried: the settings may be another turn's
            _note_settings(exc, cfg, f"turn {turn} is not answered yet and has no context_built record: "
                           "this is the next request previewed")
            raise
        if before_record is not None:
            before_record(previewed_result)
        return previewed_result
    if nearest and not records:  # a past turn without a record: the nearest record's settings
        cfg = (nearest_config(run, turn, given or None, read=read) if events is None
               else config_for_turn(events, turn, given or None))
    if records:
        first = records[0]
        # the log up to what the first build folded, not the whole run (turn 3 of a 10,000-event
        # run read and decoded every event), read as the fold goes, each record without its
        # manifest (the fold notes a record's turn and position: the last turn of an 800-turn
        # run held every earlier record's, 970 MB)
        log: Iterable[RecordedEvent] = (run.store.events.fold_events(run.run_id, upto=first.log_version)
                                        if events is None else events[:first.log_version])
        cfg = recorded_config(first.manifest, run.run_id, turn)
        check_given(turn, cfg, given or {})
        name = recorded_run_id(first, run.run_id)
        if name != run.run_id:  # imported under a new name: its refs name the run it was built in
            log = (dataclasses.replace(r, run_id=name) for r in log)
        with counts_kept(run.store.events, run.run_id):  # counted as that build counted
            state = state_at_version(log, first.log_version, run_id=name,
                                     artifact_tokens=run._artifact_tokens(), progress=progress,
                                     recorded_encoding=manifest_encoding(first.manifest)
                                     or run_encoding(run))
        # the recovery events that build appended (the builder re-derives its own repairs)
        repairs = [r for r in first.manifest.get("repairs", ())
                   if r.startswith(("tool_result_lost:", "tool_call_cancelled:"))]
    elif events is None:  # the log up to the turn, each record's manifest unread
        state, repairs = state_before_turn(run, turn, progress=progress), []
    else:
        with counts_kept(run.store.events, run.run_id):
            state = state_at_turn(events, turn, run_id=run.run_id,
                                  artifact_tokens=run._artifact_tokens(), progress=progress,
                                  recorded_encoding=run_encoding(run))
        repairs = []
    try:
        result = build_context(state, cfg, load_text=run.store.cited_text, render=render_request,
                               repairs=repairs, calibration=run._calibration(state, cfg),
                               load_bytes=run.store.events.cited_artifact)
    except (BudgetError, RenderError) as exc:
        if not records:  # say why there is nothing recorded to show instead (the CLI prints notes)
            _note_settings(exc, cfg, f"turn {turn} has no context_built record (its live build failed, or "
                           "never ran): this is the turn rebuilt from the log")
        raise
    if before_record is not None:
        before_record(result)
    if record and not records:
        return _record_once(run, turn, cfg, result, version, progress=progress, given=given,
                            before_record=before_record, superseded=superseded)
    return result


def _record_once(run: Run, turn: int, cfg: BuildConfig, result: BuildResult, version: int | None, *,
                 progress: Progress | None, given: Mapping[str, Any] | None,
                 before_record: Callable[[BuildResult], None] | None,
                 superseded: Callable[[BuildResult], None] | None = None) -> BuildResult:
    """Append ``result``'s rebuild record of ``turn``, which had no record at ``version`` (the run's
    version read before its records were), unless another worker recorded the turn since.

    Why: two rebuilds at once (``replay RUN --turn N`` on two workers) both saw no record and
    both appended one, of two providers even, though a turn gets a rebuild record only while it
    has none. The record goes in at ``version``; on a conflict only the events appended since are
    read (an agent going on appends to the run while a past turn is rebuilt): none a record of
    the turn, it goes in at the new version; one, the turn is rebuilt from it as any recorded
    turn is (settings in ``given`` that differ are InvalidInputError). Bounded: a writer
    appending without pause keeps the conflict, raised as ConcurrencyConflictError. When the
    turn's record is another worker's, ``superseded(result)`` is called first (``result``: this
    rebuild, not recorded), so the caller can say whose record the turn holds."""
    if version is None:  # records given without the version they were read at: check again
        version = run.version
        if run.records(turn):
            if superseded is not None:
                superseded(result)
            return rebuild(run, turn, cfg, record=False, progress=progress, given=given,
                           before_record=before_record)
    for attempt in range(1, _RECORD_ATTEMPTS + 1):
        try:
            run.append(result.record(rebuild=True), expected_version=version)
        except ConcurrencyConflictError:
            if attempt == _RECORD_ATTEMPTS:
                raise
        else:
            return result
        seen, version = version, run.version
        appended = run.store.events.read(run.run_id, after=seen, upto=version)
        if any(isinstance(r.event, ContextBuilt) and r.event.turn == turn for r in appended):
            break
    # another worker recorded the turn meanwhile: rebuilt from that record, as any recorded turn is
    if superseded is not None:
        superseded(result)
    return rebuild(run, turn, cfg, record=False, progress=progress, given=given, before_record=before_record)


_RECORD_ATTEMPTS = 8


def check_given(turn: int, recorded: BuildConfig, given: Mapping[str, Any]) -> None:
    """InvalidInputError when a setting the caller named differs from the recorded build's: the
    rebuild reproduces the record, so ``build(turn=1, provider="gemini")`` of a turn built for
    openai-chat returned the openai-chat request, and said nothing (and ``why`` reads the record)."""
    differ = {name: value for name, value in given.items() if getattr(recorded, name) != value}
    if differ:
        raise InvalidInputError(
            f"turn {turn} has a context_built record, and a rebuild reproduces it with that record's "
            f"settings ({', '.join(f'{name} {getattr(recorded, name)!r}' for name in differ)}): "
            f"{', '.join(f'{name} {value!r}' for name, value in differ.items())} given beside the turn "
            "would be ignored; leave them out")


def replay(run: Run, turn: int, *, record: RecordChoice = "first",
           progress: Progress | None = None) -> ReplayReport:
    """Rebuild ``turn`` from the log and compare it with the turn's record ``record`` (its first by
    default). Why another than the first: a runtime whose request the provider refused (too long)
    builds the turn again, smaller, and sends that: its second record is what the model saw, which
    only the first could be checked against before."""
    records = run.records(turn)
    index = record_index(record, len(records))
    if not records:
        last = run.next_turn()
        if not 1 <= turn <= last:
            raise TurnNotFoundError(run.run_id, turn, last)
    if not 1 <= index <= len(records):  # nothing to verify against
        raise RecordNotFoundError(run.run_id, turn, str(record), len(records))
    first = records[index - 1]  # the record checked, rebuilt as the turn's first is: from its own log
    result = rebuild(run, turn, BuildConfig(), record=False, progress=progress, records=[first])
    recorded = first.manifest
    rebuilt = result.manifest.model_dump(mode="json")
    diffs = [f"{key}: recorded {recorded.get(key)!r} != rebuilt {rebuilt.get(key)!r}"
             for key in ("request_hash", "cache_key", "config_hash", "selected_tokens")
             if recorded.get(key) != rebuilt.get(key)]
    if not diffs and recorded != rebuilt:
        diffs = [first_difference(recorded, rebuilt)]
    note = unicode_note(run.events(upto=first.log_version)) if diffs and first.log_version else None
    return ReplayReport(turn=turn, ok=not diffs, differences=tuple(diffs), recorded=first, record=index,
                        records=len(records),
                        rebuilt=result.manifest, unicode_note=note)
