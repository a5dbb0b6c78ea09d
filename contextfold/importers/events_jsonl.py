"""Canonical events JSONL -> events (one event object per line).

This is contextfold's own export format (``contextfold events RUN``), so the
mapping is the identity through :func:`~contextfold.domain.events.event_from_json`,
which also upcasts events written by older versions. Unlike the other formats, a file
that does not open with :class:`RunStarted` gets none prepended: it is a log, and its
import is that log, event for event (a run recorded through the API opens with none;
a prepended one shifted every position by one, so a copy's summaries and stubs covered
and cited the wrong events, and its log was no longer the export's).
Pairing is checked as for the other formats.

An export made with ``--with-artifacts`` also carries the run's artifacts (the large payloads
and media its events cite by hash), one line each: ``{"artifact": {"data": BASE64, "hash": H,
"media_type": M, "size": N}}``. :func:`parse_doc` passes over them; :func:`bundled_artifacts`
reads them (``importers.runs_and_artifacts``: the same parse), each checked against its hash,
so another store can hold the run. The line's format, and its writer :func:`artifact_line`, are
in :mod:`contextfold.domain.export_lines` (re-exported here).
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

import blake3
from pydantic import ValidationError

from contextfold.domain.errors import ProtocolError
from contextfold.domain.event_times import source_time
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    event_from_json,
)
from contextfold.domain.export_lines import ARTIFACT_LINE, TIME_KEY, artifact_line
from contextfold.domain.log import PairingState
from contextfold.importers._json import Bad, Doc

__all__ = ["ARTIFACT_LINE", "artifact_line", "bundled_artifacts", "parse_doc", "parse_doc_timed"]


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    return [(suffix, events) for suffix, events, _ in parse_doc_timed(doc)]


def parse_doc_timed(doc: Doc) -> list[tuple[str, list[AnyEvent], list[datetime | None]]]:
    """:func:`parse_doc`'s run, with each event's time: the ``recorded_at`` its line carries
    (:data:`~contextfold.domain.export_lines.TIME_KEY`), None for a line without one (an export
    of events recorded before times were kept, or of an older release). A time that does not read
    as one is refused, naming its line: this format is contextfold's own, which writes none such."""
    values = doc.value if doc.jsonl else [doc.value]
    parsed: list[AnyEvent] = []
    times: list[datetime | None] = []
    for i, raw in enumerate(values):
        if not isinstance(raw, dict):
            raise Bad((i,), "expected one event object per line")
        if _is_artifact_line(raw):
            continue
        if TIME_KEY in raw:
            raw = dict(raw)
            stamp = raw.pop(TIME_KEY)
            at = source_time(stamp)
            if at is None:
                raise Bad((i, TIME_KEY), f"{TIME_KEY} is not an ISO 8601 time: {stamp!r}")
            times.append(at)
        else:
            times.append(None)
        try:
            parsed.append(event_from_json(raw))
        except ValidationError as e:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}"
                for err in e.errors()[:3]
            )
            raise Bad((i,), f"invalid event: {detail}") from None
    events: list[AnyEvent] = []
    pairing = PairingState()
    for i, event in enumerate(parsed):
        try:
            pairing.apply(event, len(events) + 1)
        except ProtocolError as e:
            raise Bad((i,), f"tool call pairing: {e}") from None
        events.append(event)
    return [("", events, times)]


def _is_artifact_line(raw: dict[str, Any]) -> bool:
    return len(raw) == 1 and ARTIFACT_LINE in raw


def bundled_artifacts(doc: Doc) -> list[tuple[ArtifactRef, bytes]]:
    """The artifacts an export carries, in file order, each checked: its data is its hash's."""
    values = doc.value if doc.jsonl else [doc.value]
    out: list[tuple[ArtifactRef, bytes]] = []
    for i, raw in enumerate(values):
        if not isinstance(raw, dict) or not _is_artifact_line(raw):
            continue
        body = raw[ARTIFACT_LINE]
        if not isinstance(body, dict) or set(body) != {"data", "hash", "media_type", "size"}:
            raise Bad((i,), "an artifact line holds exactly data, hash, media_type and size")
        try:
            ref = ArtifactRef(hash=body["hash"], size=body["size"], media_type=body["media_type"])
        except ValidationError as e:
            raise Bad((i,), f"invalid artifact: {e.errors()[0]['msg']}") from None
        if not isinstance(body["data"], str):
            raise Bad((i,), "an artifact's data is base64 text")
        try:
            data = base64.b64decode(body["data"], validate=True)
        except (binascii.Error, ValueError):
            raise Bad((i,), "an artifact's data is not valid base64") from None
        if len(data) != ref.size or blake3.blake3(data).hexdigest() != ref.hash:
            raise Bad((i,), f"artifact {ref.hash[:16]}: its data does not match its hash and size")
        out.append((ref, data))
    return out
