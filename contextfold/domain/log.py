"""Recorded events, the hash chain, and the write-side rules.

Pure: the store calls these before it writes, the projection calls the same
pairing rules while folding, so what the store accepts is exactly what the
fold understands. Three range rules (a compaction's cover, a file read's lines, a
context_built record's turn), the plan's unique step ids, the tool schemas' finite numbers,
the call position a loss names and reasoning its provider takes back are the store's alone:
the fold reads logs written before them, leniently (it leaves such reasoning out of requests).

Hash chain: ``hash_n = blake3(run_id \\n position \\n hash_{n-1} \\n canonical_json(event_n))``
with ``hash_0`` = 64 zeros. Binding the run id and position means an event
cannot be moved to another run or slot without breaking the chain.

Pairing is scoped to *open* calls, not global: real logs (tau-bench gpt-4o)
re-use a call id in a later turn once the first call with that id has been
answered. A re-issued id starts a fresh call. An id re-issued while its first call is still
open is refused (:class:`DuplicateToolCallError`): the first call needs its one answer first, a
result or a recorded loss, so every call in the log keeps exactly one (the importers record the
loss of a finished history's unanswered call, ``importers._common.RunBuilder``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import blake3

from contextfold.domain.errors import (
    DuplicateToolCallError,
    DuplicateToolResultError,
    InvalidInputError,
    UnknownToolCallError,
    quoted,
)
from contextfold.domain.events import (
    AnyEvent,
    ContextBuilt,
    FileRead,
    HistoryCompacted,
    ModelResponse,
    PlanUpdated,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    ToolsRegistered,
)
from contextfold.domain.reasoning import reasoning_refusals
from contextfold.domain.text_breaks import last_text_after

__all__ = ["GENESIS_HASH", "PairingState", "RecordedEvent", "chain_hash", "repeated_step_ids"]

GENESIS_HASH = "0" * 64


def chain_hash(run_id: str, position: int, prev_hash: str, body: bytes) -> str:
    h = blake3.blake3(f"{run_id}\n{position}\n{prev_hash}\n".encode())
    h.update(body)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored: its run, its 1-based position in the run, and its chain hash."""

    run_id: str
    position: int
    event: AnyEvent
    hash: str


_Undo = list[tuple[str | None, int | None, bool, str | None, bool]]
"""Per event, each call id's entries as they were (a None id: the event was a model response)."""


def _restore(d: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value


def _check_cover(event: HistoryCompacted, position: int) -> None:
    """A compaction covers positions before its own, from ``covers_from`` up to ``covers_to``.

    Checked on the write side only: the fold clips a cover to the positions before the event
    and covers nothing of a reversed one, so a log that already holds such an event still
    reads. A new one is refused, since its summary would name raw events it does not stand
    for (``events://run/1-99`` at position 5) or none at all."""
    lo, hi = event.covers_from, event.covers_to
    if lo > hi or hi >= position:
        raise InvalidInputError(
            f"history_compacted at position {position} covers positions {lo}-{hi}: it may cover "
            f"only earlier positions, covers_from <= covers_to < {position}")


def _check_lines(event: FileRead, position: int) -> None:
    """A file read's line range runs forward from line 1 (0 or None: from the start; None: to the
    end). Checked on the write side only, as :func:`_check_cover`: a reversed range (10-5) overlaps
    no other read, so a newer read of the same lines never superseded it, and its source
    (``file://a.py#L10-L5``) named lines that do not exist."""
    lo, hi = event.start_line, event.end_line
    if (lo is not None and lo < 0) or (hi is not None and hi < 1) or (lo or 1) > (hi or lo or 1):
        raise InvalidInputError(
            f"file_read at position {position} of {quoted(event.path)} reads lines {lo}-{hi}: "
            "start_line <= end_line, from line 1 (start_line 0 or None: from the start; end_line "
            "None: to the end)")


def _check_record(event: ContextBuilt, position: int, responses: int) -> None:
    """A context_built record is of a turn the run has at its position (turn N is the request
    before the N-th model response: at most ``responses + 1``), and folded only positions before
    its own. Checked on the write side only, as :func:`_check_cover`: an imported record of turn
    999 in a run of 6 turns was shown by ``manifest --turn 999`` while ``replay`` and ``audit``
    said the turn did not exist."""
    if event.turn > responses + 1 or event.log_version >= position:
        raise InvalidInputError(
            f"context_built at position {position} is of turn {event.turn} with log_version "
            f"{event.log_version}: the run has turns 1..{responses + 1} there, and a record folds "
            f"only earlier positions (log_version < {position})")


def _check_lost_call(event: ToolResultLost, position: int, issued: int | None) -> None:
    """A loss that names its call's position (``call_position``) names the open call it closes.
    Checked on the write side only, as :func:`_check_cover`: a loss is applied to the open call
    with its id, so one naming another position (an answered call of a re-used id, a position of
    no call) closed the call at 4 while the log, ``events --json`` and ``call://RUN/ID@2`` said the
    call at 2 was lost. A loss naming no position, or no open call (the pairing's own error), is
    not checked here."""
    if event.call_position is not None and issued is not None and event.call_position != issued:
        raise InvalidInputError(
            f"tool_result_lost at position {position} names call {quoted(event.call_id)} at position "
            f"{event.call_position}, and the open call with that id was issued at position {issued}: "
            f"give call_position={issued}, or leave it out")


def _check_reasoning(event: ModelResponse, position: int) -> None:
    """A response's reasoning holds no piece its provider never takes back (a Responses item after
    the last call, a ``thinking`` block without its ``signature``, a Gemini signature that is not
    base64: ``reasoning.reasoning_refusals``). Checked on the write side only, as
    :func:`_check_cover`: a log that already holds one still folds, the piece left out of every
    request and the manifest saying so; accepted, it made every build for its provider fail."""
    assert event.reasoning is not None
    refused = [r for r in reasoning_refusals(event.reasoning, len(event.tool_calls),
                                                         text_after=last_text_after(event)) if r.always]
    if refused:
        raise InvalidInputError(
            f"model_response at position {position}: its {event.reasoning.provider} reasoning cannot go "
            f"back to its provider: {'; '.join(r.why for r in refused)} (log the reasoning as the "
            "provider returned it, each piece before the call it led to)")


def repeated_step_ids(event: PlanUpdated) -> list[str]:
    """The step ids ``event`` lists more than once, in plan order: what :func:`_check_plan`
    refuses, and what a plan an older log holds says it read as each id's last entry
    (``projections.plan_view``)."""
    counts = Counter(step.id for step in event.steps)
    return [sid for sid, n in counts.items() if n > 1]


def _check_plan(event: PlanUpdated, position: int) -> None:
    """A plan names each step once. Checked on the write side only, as :func:`_check_cover`: the
    plan's views read a step by its id (what it depends on, whether it is finished), so an id
    listed twice could be shown as the current step while its other entry was stuck, and a
    dependency on it meant either. The fold reads a plan the log already holds by each id's last
    entry (``projections.plan_view.plan_steps``)."""
    repeated = repeated_step_ids(event)
    if repeated:
        named = ", ".join(quoted(sid) for sid in repeated[:5]) + (
            f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
        raise InvalidInputError(
            f"plan_updated at position {position} lists step id{'s' if len(repeated) > 1 else ''} "
            f"{named} more than once: give each step its own id (a step's new state replaces its "
            "entry in the next plan)")


_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


def _member(path: str, key: object) -> str:
    """The path of ``key`` in the object at ``path``: ``a.b``, or ``a['odd key']``."""
    if isinstance(key, str) and _KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{quoted(key, 40)}]"


def _non_finite(parameters: dict[str, Any]) -> tuple[str, float] | None:
    """The first number in ``parameters`` that JSON cannot hold (inf, -inf, NaN) and where it
    is (``properties.v.maximum``), if any. A walk with its own stack: a schema's depth is the
    caller's, checked against the store's limit only after this."""
    stack: list[tuple[str, Any]] = [("", parameters)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path, value
        if isinstance(value, dict):
            stack.extend((_member(path, k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def _check_tools(event: ToolsRegistered, position: int) -> None:
    """A tool's schema holds only numbers JSON can hold. Checked on the write side only, as
    :func:`_check_cover`: the canonical JSON writes inf and NaN as ``null``, so a schema made with
    an unbounded limit (``"maximum": float("inf")``) was logged and sent as ``"maximum": null``,
    which is no JSON Schema (a provider that validates one refused every request of the run), and
    the log no longer held the event appended."""
    for tool in event.tools:
        if (found := _non_finite(tool.parameters)) is not None:
            path, value = found
            raise InvalidInputError(
                f"tools_registered at position {position}: tool {quoted(tool.name)} parameters hold "
                f"{value} at {path or 'the top'}, a number JSON cannot hold (it would be logged and sent "
                "as null): leave the keyword out for no bound, or give a finite number")


@dataclass(slots=True)
class PairingState:
    """Which tool calls are open, answered, or closed by recovery, as of some position.

    ``open``: call id -> position of the model response that issued it.
    ``answered``: ids whose (single) result has been recorded.
    ``recovered``: ids closed by a cancellation or a TOOL_RESULT_LOST event;
    a result arriving later is recorded as *late* (once) and never becomes a
    second answer.
    """

    open: dict[str, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    recovered: dict[str, str] = field(default_factory=dict)
    late: set[str] = field(default_factory=set)
    responses: int = 0
    """Model responses applied: the run's turns are ``1..responses + 1``."""

    def apply_batch(self, items: Sequence[tuple[AnyEvent, int]]) -> list[_Undo]:
        """Apply (event, position) pairs all-or-nothing, in O(batch) (no copy of the state), and
        check the write side's range rules (:func:`_check_cover`, :func:`_check_lines`,
        :func:`_check_record`), a plan's step ids (:func:`_check_plan`), the tool schemas'
        numbers (:func:`_check_tools`), the call a loss names (:func:`_check_lost_call`) and a
        response's reasoning (:func:`_check_reasoning`).

        Returns an undo log for :meth:`undo` (e.g. when the write that follows fails).
        On a rule violation the state is restored and the error propagates.
        """
        undo: list[_Undo] = []
        try:
            for event, position in items:
                if isinstance(event, HistoryCompacted):
                    _check_cover(event, position)
                elif isinstance(event, FileRead):
                    _check_lines(event, position)
                elif isinstance(event, ContextBuilt):
                    _check_record(event, position, self.responses)
                elif isinstance(event, PlanUpdated):
                    _check_plan(event, position)
                elif isinstance(event, ToolsRegistered):
                    _check_tools(event, position)
                elif isinstance(event, ToolResultLost):
                    _check_lost_call(event, position, self.open.get(event.call_id))
                elif isinstance(event, ModelResponse) and event.reasoning is not None:
                    _check_reasoning(event, position)
                if isinstance(event, ModelResponse | ToolResult | ToolCallCancelled | ToolResultLost):
                    ids = ([c.call_id for c in event.tool_calls] if isinstance(event, ModelResponse)
                           else [event.call_id])
                    saved = self._save(ids)
                    self.apply(event, position)
                    if isinstance(event, ModelResponse):
                        saved.append((None, None, False, None, False))  # the count, not a call
                    undo.append(saved)
        except Exception:
            self.undo(undo)
            raise
        return undo

    def _save(self, ids: list[str]) -> _Undo:
        return [(cid, self.open.get(cid), cid in self.answered, self.recovered.get(cid),
                 cid in self.late) for cid in ids]

    def undo(self, log: list[_Undo]) -> None:
        for saved in reversed(log):
            for cid, opened, answered, recovered, late in saved:
                if cid is None:  # a model response's count
                    self.responses -= 1
                    continue
                _restore(self.open, cid, opened)
                _restore(self.recovered, cid, recovered)
                (self.answered.add if answered else self.answered.discard)(cid)
                (self.late.add if late else self.late.discard)(cid)

    def copy(self) -> PairingState:
        return PairingState(dict(self.open), set(self.answered), dict(self.recovered),
                            set(self.late), self.responses)

    def apply(self, event: AnyEvent, position: int) -> str | None:
        """Check ``event`` against the rules and advance. Returns a classification
        for tool results (``"answer"`` or ``"late"``), else None. Raises a
        :class:`~contextfold.domain.errors.ProtocolError` and leaves the state
        unchanged when the event breaks a rule."""
        if isinstance(event, ModelResponse):
            for call in event.tool_calls:
                if call.call_id in self.open:
                    issued = self.open[call.call_id]
                    raise DuplicateToolCallError(
                        f"call id {quoted(call.call_id)} re-issued while still open (issued at "
                        f"position {issued}): answer the first call before re-using its id (its "
                        f"ToolResult, or ToolResultLost(call_id={quoted(call.call_id)}, "
                        f"call_position={issued}) if its result will not come; a build records "
                        "that loss for a call the run moved past)",
                        call_id=call.call_id, issued_at=issued,
                    )
            for call in event.tool_calls:
                self.open[call.call_id] = position
                self.answered.discard(call.call_id)
                self.recovered.pop(call.call_id, None)
                self.late.discard(call.call_id)
            self.responses += 1
            return None
        if isinstance(event, ToolResult):
            cid = event.call_id
            if cid in self.open:
                del self.open[cid]
                self.answered.add(cid)
                return "answer"
            if cid in self.recovered and cid not in self.late:
                self.late.add(cid)
                return "late"
            if cid in self.answered or cid in self.late:
                raise DuplicateToolResultError(
                    f"call {quoted(cid)} already has a result", call_id=cid)
            raise UnknownToolCallError(f"no open tool call with id {quoted(cid)}", call_id=cid)
        if isinstance(event, ToolCallCancelled | ToolResultLost):
            cid = event.call_id
            if cid in self.open:
                del self.open[cid]
                self.recovered[cid] = event.type
                return None
            if cid in self.answered or cid in self.recovered:
                raise DuplicateToolResultError(
                    f"call {quoted(cid)} is already closed; cannot mark it {event.type}", call_id=cid)
            raise UnknownToolCallError(f"no open tool call with id {quoted(cid)}", call_id=cid)
        return None
