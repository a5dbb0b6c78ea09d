"""Importers: existing agent histories -> contextfold events.

Pure parsers, bytes in, events out: no file, network or store access (the CLI
reads the file and appends). ``source`` only names the input in errors.

Every malformed input raises :class:`~contextfold.domain.errors.ImportFormatError`
whose ``location`` is ``source:line`` -- the JSONL line, or the line where the
offending message starts in a JSON document -- and nothing is returned, never
a partial list. Each run's events are checked against the store's pairing rules
(:class:`~contextfold.domain.log.PairingState`) while parsing, so an import the
store would refuse fails here first. Each run starts with :class:`RunStarted`, but one of
contextfold's own events format, which is imported as the log it is.

Entry points:

- :func:`iter_runs` -- every run in a source as ``(suffix, events)``; a
  single-run source yields one run with suffix ``""``. A multi-run source (the
  tau-bench JSON list, an OpenHands JSONL of runs) yields one suffix per run;
  the CLI records them as ``RUN/<suffix>``. The whole source is parsed and
  validated before the first run is yielded, so ``list(iter_runs(...))`` is the
  atomic check the CLI makes before it writes anything.
- :func:`parse` -- the events of a single-run source.
- :func:`detect_format` -- a best-effort guess from the content.
- :func:`guess_format` -- the same guess, or None for JSON of no known shape (what a
  directory import skips: a folder of trajectories also holds predictions and configs).
- :func:`parse_event_files` -- ONE OpenHands conversation stored as one JSON file per
  event (``sessions/<id>/events/<n>.json``), the files given in event-id order
  (:func:`event_files_and_notes`: and the notes on what was mended).

What an import mends (a lone surrogate escape recorded as U+FFFD) is never silent: the entry
points that return notes (:func:`runs_artifacts_and_notes`, :func:`event_files_and_notes`, which
the CLI prints) name it there, the others as an :class:`ImportNoteWarning`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import AnyEvent, ArtifactRef
from contextfold.domain.release_versions import CURRENT_VERSIONS
from contextfold.importers import (
    anthropic,
    events_jsonl,
    gemini,
    openai_chat,
    openai_responses,
    openhands,
    openhands_v1,
    swe_agent,
)
from contextfold.importers._json import Bad, Doc, load
from contextfold.importers.request_settings import dropped_settings

__all__ = ["FORMATS", "TIMED_FORMATS", "ImportNoteWarning", "RunTimes", "detect_format",
           "event_files_and_notes", "event_files_notes_and_times", "guess_format", "iter_runs", "parse",
           "parse_event_files", "runs_and_artifacts", "runs_artifacts_and_notes",
           "timed_runs_artifacts_and_notes"]

FORMATS = ("openai-chat", "anthropic", "openhands", "events", "openai-responses", "gemini", "swe-agent")

_PARSERS: dict[str, Callable[[Doc], list[tuple[str, list[AnyEvent]]]]] = {
    "openai-chat": openai_chat.parse_doc,
    "anthropic": anthropic.parse_doc,
    "openhands": openhands.parse_doc,
    "events": events_jsonl.parse_doc,
    "openai-responses": openai_responses.parse_doc,
    "gemini": gemini.parse_doc,
    "swe-agent": swe_agent.parse_doc,
}


Runs = list[tuple[str, list[AnyEvent]]]
"""``(run-id suffix, events)`` of every run of a source."""

RunTimes = list[datetime | None] | None
"""Each event's time as a run's source says (None for an event it gives none), or None for a
source whose format carries no times (:data:`TIMED_FORMATS`)."""

_TIMED_PARSERS: dict[str, Callable[[Doc], list[tuple[str, list[AnyEvent], list[datetime | None]]]]] = {
    "openhands": openhands.parse_doc_timed,
    "events": events_jsonl.parse_doc_timed,
}
TIMED_FORMATS = frozenset(_TIMED_PARSERS)
"""The formats whose sources say when each event happened: OpenHands (each event's
``timestamp``, legacy and V1 SDK alike, a folder of event files too) and contextfold's own
export (``recorded_at``, ``events --json``). The others (OpenAI chat and Responses, Anthropic,
Gemini request bodies, SWE-agent trajectories, tau-bench) hold messages without times: their
events are recorded without one, none invented."""


class ImportNoteWarning(UserWarning):
    """An entry point that returns no notes (:func:`iter_runs`, :func:`parse`,
    :func:`runs_and_artifacts`, :func:`parse_event_files`) read the source otherwise than it is
    written: a lone surrogate escape recorded as U+FFFD (``source:line``, how many). Why a
    warning: the CLI prints the same note (from :func:`runs_artifacts_and_notes` and
    :func:`event_files_and_notes`), and a caller of the Python API was told nothing."""


def _warn(notes: list[str]) -> None:
    for note in notes:
        warnings.warn(note.removeprefix("note: "), ImportNoteWarning, stacklevel=3)


def _runs(data: bytes, format: str, source: str) -> Runs:
    runs, _, _, mended, _ = _read(data, format, source, carried=False)
    _warn(mended)
    return runs


def _runs_and_artifacts(data: bytes, format: str, source: str, *, carried: bool
                        ) -> tuple[Runs, list[tuple[ArtifactRef, bytes]], list[str]]:
    """The runs of ``data``, (with ``carried``) the artifacts an events export carries, and the
    notes on what the import mended or leaves out, from one parse of it (:func:`_read`)."""
    runs, _, artifacts, mended, dropped = _read(data, format, source, carried=carried)
    return runs, artifacts, mended + dropped


def _read(data: bytes, format: str, source: str, *, carried: bool
          ) -> tuple[Runs, list[RunTimes], list[tuple[ArtifactRef, bytes]], list[str], list[str]]:
    """:func:`_runs_and_artifacts`' runs, their times (:data:`RunTimes`), its artifacts, and its
    notes in two: on what the import mended (:meth:`~._json.Doc.surrogate_note`: what
    :class:`ImportNoteWarning` tells), and on the request settings it leaves out
    (:func:`~.request_settings.dropped_settings`)."""
    parser = _PARSERS.get(format)
    if parser is None:
        raise ImportFormatError(f"{source}:1", f"unknown format {format!r}; one of {FORMATS}")
    doc = load(data, source, jsonl=True if format == "events" else None)
    try:
        timed = _TIMED_PARSERS.get(format)
        times: list[RunTimes]
        if timed is None:
            runs = parser(doc)
            times = [None] * len(runs)
        else:
            parsed = timed(doc)
            runs, times = [(suffix, events) for suffix, events, _ in parsed], [t for _, _, t in parsed]
        return (runs, times,
                events_jsonl.bundled_artifacts(doc) if carried and format == "events" else [],
                doc.surrogate_note(source), dropped_settings(doc.value, format, source))
    except Bad as e:
        raise ImportFormatError(f"{source}:{doc.line_of(e.path)}", e.reason) from None
    except RecursionError:  # defensive: load() already bounds nesting
        raise ImportFormatError(f"{source}:1", "input nested too deeply") from None


def iter_runs(data: bytes, *, format: str, source: str = "<stdin>"
              ) -> Iterator[tuple[str, list[AnyEvent]]]:
    """Every run in ``data`` as ``(run-id suffix, events)``, fully validated up front."""
    return iter(_runs(data, format, source))


def parse(data: bytes, *, format: str, source: str = "<stdin>") -> list[AnyEvent]:
    """The events of ONE run, in log order (``RunStarted`` first, but for the events format)."""
    runs = _runs(data, format, source)
    if len(runs) != 1:
        raise ImportFormatError(
            f"{source}:1", f"the input holds {len(runs)} runs; import it with iter_runs")
    return runs[0][1]


def runs_and_artifacts(data: bytes, *, format: str, source: str = "<stdin>"
                       ) -> tuple[Runs, list[tuple[ArtifactRef, bytes]]]:
    """:func:`iter_runs`' runs as a list, and the artifacts an events export made with
    ``--with-artifacts`` carries (none for any other input), each checked against its hash:
    one parse of ``data`` for both. :class:`ImportFormatError` names a bad line; what the import
    mended is an :class:`ImportNoteWarning`."""
    runs, _, artifacts, mended, _ = _read(data, format, source, carried=True)
    _warn(mended)
    return runs, artifacts


def runs_artifacts_and_notes(data: bytes, *, format: str, source: str = "<stdin>"
                             ) -> tuple[Runs, list[tuple[ArtifactRef, bytes]], list[str]]:
    """:func:`runs_and_artifacts`, and a note naming the settings of the source's requests that
    bounded the model's tool use and that a log has no place for (``tool_choice``, parallel calls: see
    :mod:`~contextfold.importers.request_settings`), so an import does not drop them silently."""
    return _runs_and_artifacts(data, format, source, carried=True)


def timed_runs_artifacts_and_notes(
        data: bytes, *, format: str, source: str = "<stdin>"
) -> tuple[Runs, list[RunTimes], list[tuple[ArtifactRef, bytes]], list[str]]:
    """:func:`runs_artifacts_and_notes`, with each run's times (:data:`RunTimes`, in the order of
    the runs): what an import records beside the events (``EventStore.append_new_runs``'s
    ``times``), from the same one parse."""
    runs, times, artifacts, mended, dropped = _read(data, format, source, carried=True)
    return runs, times, artifacts, mended + dropped


def parse_event_files(files: Sequence[tuple[str, bytes]], *, state: bytes | None = None) -> list[AnyEvent]:
    """The events of ONE OpenHands conversation stored as one JSON file per event, as
    OpenHands' file store keeps a session (``sessions/<id>/events/<n>.json``); ``files`` are
    ``(source, bytes)`` in event-id order, ``state`` the conversation's state file beside them,
    read for the model's name (best effort: state that does not parse names none; the events are
    the run). An error names the event's file and line; what the import mended is an
    :class:`ImportNoteWarning` (:func:`event_files_and_notes` returns it instead).

    Why apart from :func:`iter_runs`: the run is the files together (an action in one file is
    answered by an observation in a later one), so no single file parses on its own."""
    events, notes = event_files_and_notes(files, state=state)
    _warn(notes)
    return events


def event_files_and_notes(files: Sequence[tuple[str, bytes]], *, state: bytes | None = None
                          ) -> tuple[list[AnyEvent], list[str]]:
    """:func:`parse_event_files`' events, and a note per event file whose lone surrogates were
    recorded as U+FFFD (its name, the line of the first, how many), as a file import notes them."""
    events, notes, _ = event_files_notes_and_times(files, state=state)
    return events, notes


def event_files_notes_and_times(files: Sequence[tuple[str, bytes]], *, state: bytes | None = None
                                ) -> tuple[list[AnyEvent], list[str], list[datetime | None]]:
    """:func:`event_files_and_notes`, with each event's time (its file's ``timestamp``)."""
    if not files:
        raise ImportFormatError("<no files>:0", "an OpenHands event folder with no event file")
    docs = [load(data, source) for source, data in files]
    model = None if state is None else openhands.state_model(_json_or_none(state))
    try:
        events, times = openhands.parse_history_timed([doc.value for doc in docs], (), model=model)
    except Bad as e:
        at = e.path[0] if e.path and isinstance(e.path[0], int) and 0 <= e.path[0] < len(docs) else 0
        raise ImportFormatError(f"{files[at][0]}:{docs[at].line_of(e.path[1:])}", e.reason) from None
    except RecursionError:  # defensive: load() already bounds nesting
        raise ImportFormatError(f"{files[0][0]}:1", "input nested too deeply") from None
    return events, [note for (source, _), doc in zip(files, docs, strict=True)
                    for note in doc.surrogate_note(source)], times


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                               "server_tool_use", "container_upload", "search_result",
                               "tool_reference", "compaction"})
_RESPONSES_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning",
                              "custom_tool_call", "additional_tools", "tool_search_call"})


def _guess_messages(msgs: list[Any]) -> str | None:
    for m in msgs:
        if not isinstance(m, dict):
            return None
        if openhands_v1.is_event(m):
            return "openhands"
        if "parts" in m:
            return "gemini"
        if "action" in m or "observation" in m:
            return "openhands"
        if "history" in m:
            return "openhands"
        if "traj" in m:
            return "openai-chat"
        t = m.get("type") if isinstance(m.get("type"), str) else None  # a list is no set member
        if t in CURRENT_VERSIONS and "v" in m:
            return "events"
        if t in _RESPONSES_ITEMS and t != "message":
            return "openai-responses"
        role = m.get("role")
        if role in ("tool", "function", "system", "developer") or "tool_calls" in m:
            return "openai-chat"
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                bt = b.get("type") if isinstance(b, dict) and isinstance(b.get("type"), str) else None
                if bt in _ANTHROPIC_BLOCKS or (bt in ("image", "document") and "source" in b):
                    return "anthropic"
                if bt in ("input_text", "output_text", "input_image"):
                    return "openai-responses"
                if bt in ("image_url", "input_audio"):
                    return "openai-chat"
    return None


def detect_format(data: bytes, *, source: str = "<stdin>") -> str:
    """Guess the format of ``data`` from its structure (best effort).

    Raises :class:`ImportFormatError` when the input does not parse or matches
    no known shape; pass ``format`` explicitly in that case.
    """
    guess = guess_format(data, source=source)
    if guess is None:
        raise ImportFormatError(f"{source}:1", "cannot detect the format; pass --format")
    return guess


def guess_format(data: bytes, *, source: str = "<stdin>") -> str | None:
    """:func:`detect_format`'s guess, or None when ``data`` is JSON (or JSONL) of no known
    shape. Input that is not JSON at all is still an :class:`ImportFormatError`: a truncated
    trajectory is a broken trace, not some other file."""
    doc = load(data, source)
    value = doc.value
    if isinstance(value, dict) and not doc.jsonl:
        if "contents" in value:
            return "gemini"
        if "input" in value:
            return "openai-responses"
        if swe_agent.is_trajectory(value):
            return "swe-agent"
        if "history" in value or (isinstance(value.get("items"), list) and value["items"]
                                  and openhands_v1.is_event(value["items"][0])):
            return "openhands"
        if isinstance(value.get("messages"), list):
            # Plain text turns read the same in both APIs; a body-level ``system``
            # or ``max_tokens`` (required by Anthropic) tips the balance.
            return _guess_messages(value["messages"]) or (
                "anthropic" if "system" in value or "max_tokens" in value else "openai-chat")
        return _guess_messages([value]) or ("openai-chat" if "role" in value else None)
    if isinstance(value, list):
        return _guess_messages(value) or (
            "openai-chat" if value and all(isinstance(m, dict) and "role" in m for m in value)
            else None)
    return None
