"""The line of an events export that carries an artifact (``events --json --with-artifacts``).

``{"artifact": {"data": BASE64, "hash": H, "media_type": M, "size": N}}``: the large payloads and
media a run's events cite by hash, so that another store can import the run
(:mod:`contextfold.importers.events_jsonl` reads them back, each checked against its hash).

Here, not beside the reader, because the command that writes the lines exports a log and imports
nothing: taking the format from the importer loaded every importer, and through them the
renderers (~0.15 s of CPU a command; ``tests/unit/test_cli_light_imports.py``).
"""

from __future__ import annotations

import base64
from typing import Any

from contextfold.domain.events import ArtifactRef

__all__ = ["ARTIFACT_LINE", "TIME_KEY", "artifact_line", "event_line_schema", "timed_event_line"]

ARTIFACT_LINE = "artifact"
"""The one key of an artifact line (see the module docstring)."""


TIME_KEY = "recorded_at"
"""The key an event's line of an export carries its time under (``events --json``), beside the
event's own fields: ``{...the event..., "recorded_at": "2026-12-07T14:03:00.000000Z"}``; left out
for an event without a time, whose line is its canonical JSON as before. Why beside and not a
field of the event: the time is not part of the event (its chain hash, the builds:
:mod:`contextfold.domain.event_times`); the importer takes it off before it reads the event. No
event type has, or may take, a field of this name. A release before this one refuses such a
line as an event with an unknown field (ImportFormatError, naming the key): upgrade to import it,
or strip the key (``jq -c 'del(.recorded_at)'``) to import the events without their times."""


def timed_event_line(event_json: bytes, time: str | None) -> bytes:
    """An event's export line: its canonical JSON (an object) with :data:`TIME_KEY` added last
    when it has a time (spliced: a record's JSON is megabytes, not parsed again to add a key)."""
    if time is None:
        return event_json
    return b"%s,\"%s\":\"%s\"}" % (event_json.rstrip()[:-1], TIME_KEY.encode(), time.encode("ascii"))


def event_line_schema() -> dict[str, Any]:
    """The JSON Schema of an event's export line (``contextfold schema events``): the canonical
    event JSON, each event type also taking :data:`TIME_KEY`. Why not the events' schema alone:
    every event forbids fields it does not have, and a line with a time would not validate
    against the schema the tool prints for it."""
    from contextfold.domain.events import EVENT_ADAPTER

    schema: dict[str, Any] = EVENT_ADAPTER.json_schema()
    for ref in schema["discriminator"]["mapping"].values():
        event = schema["$defs"][ref.rsplit("/", 1)[1]]
        event["properties"][TIME_KEY] = {
            "type": "string", "format": "date-time",
            "description": "when the event was recorded (UTC, ISO 8601 with Z), on an export line only: "
                           "not part of the event, its hash or the builds"}
    return schema


def artifact_line(ref: ArtifactRef, data: bytes) -> dict[str, Any]:
    """The export line carrying one artifact (``events --json --with-artifacts``)."""
    return {ARTIFACT_LINE: {"data": base64.b64encode(data).decode("ascii"), "hash": ref.hash,
                            "media_type": ref.media_type, "size": ref.size}}
