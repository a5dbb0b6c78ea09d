"""A run's state as of a past turn or log version: the fold replayed up to that point.

Apart from the fold because replay, ``--turn N`` builds and the audit ask for past states, and
each is a fresh fold of a prefix of the log, not an update of a live state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contextfold.domain.errors import IntegrityError, TurnNotFoundError
from contextfold.domain.events import ModelResponse
from contextfold.domain.gc_pause import paused_gc
from contextfold.domain.log import RecordedEvent
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.progress import Progress, reported
from contextfold.projections.state import ArtifactTokens, RunState

__all__ = ["state_at_turn", "state_at_version", "state_before_response"]


def state_at_turn(events: Sequence[RecordedEvent], turn: int, *, run_id: str | None = None,
                  artifact_tokens: ArtifactTokens | None = None,
                  progress: Progress | None = None,
                  recorded_encoding: str | None = None) -> RunState:
    """The state just before the ``turn``-th model response (turn = responses + 1: now).

    Deterministic: the same events give a byte-identical state (``fingerprint``).
    ``progress(n)``: told of the events folded, as :func:`~contextfold.projections.fold.fold`.
    ``recorded_encoding``: the encoding the run's records name, as for
    :func:`~contextfold.projections.fold.new_state`.
    """
    rid = run_id or (events[0].run_id if events else None)
    if rid is None:
        raise ValueError("state_at_turn() of no events needs run_id")
    responses = sum(1 for r in events if isinstance(r.event, ModelResponse))
    if not 1 <= turn <= responses + 1:
        raise TurnNotFoundError(rid, turn, responses + 1)
    return state_before_response(events, turn, run_id=rid, artifact_tokens=artifact_tokens,
                                 progress=progress, recorded_encoding=recorded_encoding)


def state_before_response(events: Iterable[RecordedEvent], turn: int, *, run_id: str,
                          artifact_tokens: ArtifactTokens | None = None,
                          progress: Progress | None = None,
                          recorded_encoding: str | None = None) -> RunState:
    """:func:`state_at_turn` of ``events`` read as the fold goes, ``turn`` checked by the caller
    (against the run's count of model responses, read without the log): the events folded up to
    their ``turn``-th model response, not included (all of them when they hold fewer).

    Why apart: ``state_at_turn`` counts the responses of a list first, and a long run's log read
    into a list held every context-built record's manifest (``Run.state(turn=1)`` of an 800-turn
    run: 2.1 GB); a stream of the log, its records' manifests unread, is folded here."""
    state = new_state(run_id, artifact_tokens=artifact_tokens, recorded_encoding=recorded_encoding)
    seen = 0
    with paused_gc():
        for rec in reported(events, progress):
            if isinstance(rec.event, ModelResponse):
                seen += 1
                if seen == turn:
                    break
            fold_event(state, rec)
    return state


def state_at_version(events: Iterable[RecordedEvent], version: int, *,
                     run_id: str | None = None,
                     artifact_tokens: ArtifactTokens | None = None,
                     progress: Progress | None = None,
                     recorded_encoding: str | None = None) -> RunState:
    """The state after folding positions ``1..version`` (e.g. a ContextBuilt's ``log_version``).

    ``progress(n)``: told of the events folded, as :func:`~contextfold.projections.fold.fold`.
    ``recorded_encoding``: the encoding the record names, as for
    :func:`~contextfold.projections.fold.new_state`.

    Raises ``IntegrityError`` when the events end before ``version``.
    """
    state: RunState | None = (new_state(run_id, artifact_tokens=artifact_tokens,
                                        recorded_encoding=recorded_encoding) if run_id else None)
    with paused_gc():
        for rec in reported(events, progress):
            if rec.position > version:
                break
            if state is None:
                state = new_state(rec.run_id, artifact_tokens=artifact_tokens,
                                  recorded_encoding=recorded_encoding)
            fold_event(state, rec)
    if state is None:
        raise ValueError("state_at_version() of no events needs run_id")
    if state.version != version:
        raise IntegrityError(f"run {state.run_id!r} ends at position {state.version}, "
                             f"before version {version}", position=version)
    return state
