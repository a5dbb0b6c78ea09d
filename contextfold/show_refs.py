"""Read-back (I/O): the raw content behind a ref a mask stub, a summary or a manifest cites.

    from contextfold.show_refs import show
    show(run, "event://run-42/17")          # the event a stub replaced
    show(run, "events://run-42/3-9")        # a summary's covered range, one header per event
    show(run, "call://run-42/call_7@12")    # that call's result
    show(run, "artifact:<blake3 hash>")     # a stored artifact (the store's, no run needed)

Why a module of its own: compaction only *cites* these refs; reading them back is what ``contextfold
show`` and ``Run.show`` do for a user auditing what a compacted request stood for, and the raw
events never leave the log, so every ref stays readable.

The folds and the summary's wording are imported by the refs that need them (a call's answer, a
summary's text, the names a summary cites), not with this module: showing an event or an artifact
read it back and paid ~0.2 s of CPU for them (``tests/unit/test_cli_light_imports.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.domain.errors import IntegrityError, InvalidInputError, NotFoundError
from contextfold.domain.event_values import is_medium
from contextfold.domain.events import (
    ArtifactRef,
    ContentBlock,
    ContextBuilt,
    DocumentBlock,
    EvidenceRetrieved,
    FileRead,
    HistoryCompacted,
    ImageBlock,
    ModelResponse,
    TextBlock,
    ToolResult,
    UserInput,
    canonical_json,
)
from contextfold.domain.log import RecordedEvent
from contextfold.replay_report import recorded_run_id
from contextfold.store.event_reads import RUN_ID_PATTERN
from contextfold.store.media_duration import is_timed_media, media_duration_ms

if TYPE_CHECKING:  # the fold and the summary's wording: imported where a ref needs them (see below)
    from contextfold.api import Run, Store

__all__ = ["FRAGMENT_ID", "artifact_bytes", "artifact_line", "artifact_media_type", "artifact_summary",
           "artifact_text", "ref_run", "show", "show_artifact"]

_EVENT = re.compile(r"^event://(?P<run>.+)/(?P<pos>\d+)(?:#.*)?$")
_RANGE = re.compile(r"^events://(?P<run>.+)/(?P<lo>\d+)-(?P<hi>\d+)$")
_CALL = re.compile(r"^call://(?P<body>.+/.+)@(?P<pos>\d+)$")
"""``call://RUN/ID@POS``: the position follows the *last* ``@``; ``body`` is ``RUN/ID``, where a
run id and an OpenAI call id (free-form) may both hold ``/`` and ``@``, so the split is decided
by what the log and store hold (:func:`_call_splits`), not by the text alone. The ref stays as
builds wrote it (recorded requests' bytes unchanged)."""
_ARTIFACT = re.compile(r"^artifact:(?://)?(?P<hash>[0-9a-f]{64})$")
FRAGMENT_ID = re.compile(r"^e(?P<pos>[1-9]\d*)(?P<part>\.\S+)?$")
"""A manifest's fragment id: ``e27`` (the event logged at 27), ``e27.c1`` (a part of it: a goal's
contract, the stub a compaction at 27 left for an older event)."""


def ref_run(ref: str, store: Store | None = None) -> str | None:
    """The run a full ``event://``, ``events://`` or ``call://`` ref names (None for another
    ref): what ``contextfold show REF`` reads it from, since a summary or stub cites full refs.

    A ``call://`` ref's run is the longest ``/``-prefix of ``RUN/ID`` that is a run of ``store``
    whose log has call ``ID`` at ``POS`` (else the longest that is a run at all): a call id
    may hold ``/`` (``fs/read-1``). With no store, or none found, the text up to the last ``/``
    (whose lookup then names the run it did not find)."""
    ref = ref.strip()
    if m := _EVENT.match(ref) or _RANGE.match(ref):
        return m["run"]
    if (m := _CALL.match(ref)) is None:
        return None
    splits = _call_splits(m["body"])
    if store is not None:
        existing = [run for run, _ in splits if RUN_ID_PATTERN.fullmatch(run) and store.events.exists(run)]
        for run_id in existing:
            if _call_slot(store, run_id, m["body"], int(m["pos"]), {run_id}) is not None:
                return run_id
        if existing:
            return existing[0]
    return splits[0][0]


def _call_splits(body: str) -> list[tuple[str, str]]:
    """Every way ``RUN/ID`` splits at a ``/`` into a run and a call id, the longest run first."""
    cuts = [i for i, ch in enumerate(body) if ch == "/" and 0 < i < len(body) - 1]
    return [(body[:i], body[i + 1:]) for i in reversed(cuts)]


def _call_slot(store: Store, run_id: str, body: str, pos: int, names: set[str]) -> tuple[str, str] | None:
    """The ``(run name, call id)`` split of ``body`` whose call run ``run_id`` issued at ``pos``
    under one of ``names`` (the longest name first); None when no split fits the log. Read off the
    one event at ``pos`` (the response whose calls make the tool group there): which run a ref
    names is asked before the run is shown, and folding each candidate run for it folded the
    run ``show`` then folds again."""
    found = store.events.read(run_id, after=pos - 1, upto=pos)
    response = found[0].event if found else None
    if not isinstance(response, ModelResponse):
        return None
    issued = {c.call_id for c in response.tool_calls}
    return next(((name, cid) for name, cid in _call_splits(body) if name in names and cid in issued), None)


def show_artifact(store: Store, ref: str) -> str:
    """The text behind an ``artifact:HASH`` ref: artifacts belong to the store (content-addressed),
    so no run is needed; another ref names none here and is refused. A medium (an image, audio,
    video, a PDF: by the type it was stored under) or bytes that are not UTF-8 text give one line
    instead (:func:`artifact_line`); :func:`artifact_bytes` reads the bytes.

    Why: a video's bytes decoded with replacements were neither the video nor text, megabytes of
    U+FFFD that said nothing of what the artifact was."""
    data = artifact_bytes(store, ref)  # (a ref that is no artifact:HASH refused)
    media_type = artifact_media_type(store, ref)
    text = artifact_text(media_type, data)
    return text if text is not None else artifact_summary(ref, media_type, data)


def artifact_media_type(store: Store, ref: str) -> str:
    """The media type the artifact ``ref`` (``artifact:HASH``, read already) was stored under."""
    return store.events.artifact_media_type(ref.strip()[-64:])


def artifact_text(media_type: str, data: bytes) -> str | None:
    """An artifact's bytes ``data``, stored under ``media_type``, as text, or None when they are
    not text: a medium by that type, or bytes that are not UTF-8."""
    if is_medium(media_type):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def artifact_summary(ref: str, media_type: str, data: bytes) -> str:
    """:func:`artifact_line` of the artifact ``ref`` stored under ``media_type`` whose bytes are
    ``data``, its playing time read from its container."""
    duration = media_duration_ms(data) if is_timed_media(media_type) else None
    return artifact_line(f"artifact:{ref.strip()[-64:]}", media_type, len(data), duration)


def artifact_line(name: str, media_type: str, size: int, duration_ms: int | None) -> str:
    """One line naming an artifact that is not text: its ref, media type, size, playing time
    when its container tells it, and where its bytes are to be had."""
    seconds = "" if duration_ms is None else f", {duration_ms / 1000:.1f} s"
    return f"{name}: {media_type}, {size:,} bytes{seconds}, not text (--out FILE writes its bytes)"


def artifact_bytes(store: Store, ref: str) -> bytes:
    """The bytes behind an ``artifact:HASH`` ref, exactly as stored (an image's included)."""
    ref = ref.strip()
    m = _ARTIFACT.match(ref)
    if m is not None:
        return store.artifact(m["hash"])
    if re.fullmatch(r"\d+(?:-\d+)?", ref):
        raise InvalidInputError(f"{ref!r} names no run: give the run too (show RUN {ref})")
    if ref.startswith("artifact:"):
        raise InvalidInputError(f"{ref!r} is no artifact ref: artifact:HASH takes the artifact's whole "
                                "blake3 hash, 64 hex digits (as events --json and the manifest show it)")
    raise InvalidInputError(
        f"unknown ref {ref!r}: use event://RUN/POS, events://RUN/A-B, call://RUN/ID@POS or artifact:HASH")


_NAME_KEYS = frozenset({"run_id"})
"""The manifest key :func:`~contextfold.replay_report.recorded_run_id` reads of a record."""


def _check_run(run: Run, named: str, ref: str) -> None:
    """A ref may name ``run`` or a name its log was written under (:func:`_recorded_names`)."""
    if named != run.run_id and named not in _recorded_names(run):
        raise InvalidInputError(f"ref {ref!r} names run {named!r}, not {run.run_id!r} "
                                "(nor a name its log was recorded under)")


def _recorded_names(run: Run) -> set[str]:
    """The names ``run``'s own log was written under, besides its own.

    A run exported (``events --json``) and imported under another name keeps its events
    verbatim, positions included: its ``context_built`` records carry the old name in their
    manifests and its compactions' summaries and mask stubs cite ``event://OLD/N``; a request
    built from the copy shows those refs. They name this log's events, so ``show COPY
    event://OLD/9`` reads the copy's position 9. A name only counts if the run's own records
    or compactions use it: a ref to some other run is still refused.

    Each record is read for its manifest's ``run_id`` only (:data:`_NAME_KEYS`): the manifest lists
    every fragment its build left out, most of a long run's log, and decoding each whole to
    refuse a ref to another run cost O(the log's manifests)."""
    from contextfold.projections.summary_check import SUMMARY_REF, summary_lines

    names: set[str] = set()
    calls: list[tuple[str, int]] = []
    for rec in run.store.events.iter_events(run.run_id, keep=_NAME_KEYS):
        ev = rec.event
        if isinstance(ev, ContextBuilt):
            names.add(recorded_run_id(ev, run.run_id))
        elif isinstance(ev, HistoryCompacted):
            for cited in SUMMARY_REF.findall(" ".join(summary_lines(ev.summary))):
                if m := _EVENT.match(cited) or _RANGE.match(cited):
                    names.add(m["run"])
                elif m := _CALL.match(cited):
                    calls.append((m["body"], int(m["pos"])))
    for body, pos in calls:  # the name a call this log issued there leaves (:func:`_call_slot`)
        everyone = {name for name, _ in _call_splits(body)}
        if found := _call_slot(run.store, run.run_id, body, pos, everyone):
            names.add(found[0])
    names.discard(run.run_id)
    return names


def _event_text(run: Run, rec: RecordedEvent) -> str:
    ev = rec.event
    match ev:
        case ToolResult():
            text, media = ev.text_and_media()  # its text blocks too (the MCP shape)
            if ev.artifact is not None and is_medium(ev.artifact.media_type):  # a log written before
                text = "\n".join([ev.content, _medium_line(ev.artifact)])  # the store moved it to blocks
            elif ev.artifact is not None:  # the whole text (text blocks moved with it, or beside it)
                text = "\n".join([run.store.cited_text(ev.artifact),
                                  *(b.text for b in ev.blocks if isinstance(b, TextBlock))])
            code = f" exit_code={ev.exit_code}" if ev.exit_code is not None else ""
            return (f"result of call {ev.call_id}{code} is_error={str(ev.is_error).lower()}\n"
                    f"{text}{_media_lines(media)}")
        case FileRead() | EvidenceRetrieved():
            if ev.artifact is not None and is_medium(ev.artifact.media_type):  # not its bytes as text
                body = _medium_line(ev.artifact)
            else:
                body = run.store.cited_text(ev.artifact) if ev.artifact is not None else ev.content
            return body + _media_lines(ev.blocks if isinstance(ev, EvidenceRetrieved) else ())
        case UserInput():
            return ev.text + _media_lines(ev.content)
        case ModelResponse():
            calls = [f"call {c.call_id} {c.name} {c.arguments}" for c in ev.tool_calls]
            return "\n".join([ev.text, *calls]) if ev.text else "\n".join(calls)
        case HistoryCompacted():
            from contextfold.projections.fold_summary import render_summary

            return render_summary(ev)
        case _:
            return canonical_json(ev).decode()


def _media_lines(blocks: Sequence[ContentBlock]) -> str:
    """A line per image or document an event carries, naming where its bytes are (and an audio's
    or video's playing time when the log holds it): ``show`` of a masked screenshot printed an
    empty result, and its stub no way back to the image."""
    lines = []
    for block in blocks:
        if isinstance(block, ImageBlock | DocumentBlock):
            ref = block.artifact
            duration = block.duration_ms if isinstance(block, DocumentBlock) else None
            seconds = "" if duration is None else f", {duration / 1000:.1f} s"
            where = (f"artifact:{ref.hash} ({ref.size} bytes{seconds})" if ref is not None
                     else block.url or "inline")
            lines.append(f"\n[{block.type} {block.media_type}: {where}]")
    return "".join(lines)


def _medium_line(ref: ArtifactRef) -> str:
    """The line naming a medium an event cites as its payload (its bytes are never text)."""
    return f"[artifact {ref.media_type}: artifact:{ref.hash} ({ref.size} bytes), not text]"


def _range(run: Run, lo: int, hi: int) -> Sequence[RecordedEvent]:
    found = run.store.events.read(run.run_id, after=lo - 1, upto=hi)
    if not found or found[0].position != lo or found[-1].position != hi:
        raise NotFoundError(f"run {run.run_id!r} has no events {lo}-{hi} (version {run.version})")
    if len(found) != hi - lo + 1:  # a hole inside the range: the log is damaged, not the ref
        missing = next(p for p, rec in enumerate(found, start=lo) if rec.position != p)
        raise IntegrityError(f"run {run.run_id!r} position {missing} is missing from the log",
                             position=missing)
    return found


def _show_call(run: Run, ref: str, body: str, pos: int) -> str:
    """The result of the call ``call://RUN/ID@POS`` cites: the split of ``RUN/ID`` that names this
    run (or a name its log was recorded under) and a call it issued at ``pos``."""
    splits = _call_splits(body)
    named = {name for name, _ in splits}
    accepted = {run.run_id} if run.run_id in named else named & _recorded_names(run)
    if not accepted:
        _check_run(run, splits[0][0], ref)  # names another run: refused, saying which
    found = _call_slot(run.store, run.run_id, body, pos, accepted)
    cid = found[1] if found else next(c for name, c in splits if name in accepted)
    from contextfold.projections.state import ToolGroup

    group = run.state().items.get(pos)
    slot = (next((c for c in group.calls if c.call_id == cid), None)
            if isinstance(group, ToolGroup) else None)
    if slot is None or slot.answer_position is None:
        raise NotFoundError(f"no answered call {cid!r} issued at position {pos}")
    return _event_text(run, _range(run, slot.answer_position, slot.answer_position)[0])


def show(run: Run, ref: str) -> str:
    """The raw content behind a ref that a mask stub or summary cites.

    ``event://RUN/POS`` (one event), ``events://RUN/A-B`` (a range, one header
    per event), ``call://RUN/ID@POS`` (that call's result), ``artifact:HASH``;
    a bare ``POS`` or ``A-B`` means this run. ``RUN`` is this run's name, or one its log
    was recorded under before an import renamed it (:func:`_recorded_names`).
    """
    ref = ref.strip()
    if ref.isdigit():
        ref = f"event://{run.run_id}/{ref}"
    elif re.fullmatch(r"\d+-\d+", ref):
        ref = f"events://{run.run_id}/{ref}"
    if _ARTIFACT.match(ref):
        return show_artifact(run.store, ref)
    if m := _EVENT.match(ref):
        _check_run(run, m["run"], ref)
        pos = int(m["pos"])
        return _event_text(run, _range(run, pos, pos)[0])
    if m := _RANGE.match(ref):
        _check_run(run, m["run"], ref)
        lo, hi = int(m["lo"]), int(m["hi"])
        if lo > hi:
            raise InvalidInputError(f"empty range in {ref!r}")
        return "\n".join(f"--- event {rec.position} {rec.event.type} ---\n{_event_text(run, rec)}"
                         for rec in _range(run, lo, hi))
    if m := _CALL.match(ref):
        return _show_call(run, ref, m["body"], int(m["pos"]))
    if m := FRAGMENT_ID.match(ref):
        return show(run, _fragment_source(run, ref, int(m["pos"]), m["part"] is not None))
    raise InvalidInputError(
        f"unknown ref {ref!r}: use event://RUN/POS, events://RUN/A-B, call://RUN/ID@POS, artifact:HASH "
        "or a manifest's fragment id (e27)")


def _fragment_source(run: Run, fid: str, pos: int, part: bool) -> str:
    """The ref to show for the fragment ``fid`` (``e{pos}`` or ``e{pos}.PART``): the event logged at
    ``pos``; for a part whose fold entry's source is an older event of this run (a mask's stub, a
    summary's entry), that event or call, the raw content the stub stood in for.

    Why: the manifest, ``audit --turn`` and ``why`` name fragments by these ids, and ``show``
    refused them: a user had to know ``e27`` is ``event://RUN/27``, and read a stub's source off the
    manifest's JSON to reach what the compaction hid."""
    own = f"event://{run.run_id}/{pos}"
    if not part or pos > run.version:  # (past the log: the event ref says so)
        return own
    entry = run.state().entries.get(fid)
    source = entry.source_ref if entry is not None else ""
    older = _EVENT.match(source) or _CALL.match(source)
    if older is None or int(older["pos"]) >= pos:  # its own event's part (a goal's contract)
        return own
    return source
