"""Canonical events JSONL -> events (one event object per line).

This is contextfold's own export format (``contextfold events RUN``), so the
mapping is the identity through :func:`~contextfold.domain.events.event_from_json`,
which also upcasts events written by older versions. A file that does not
open with :class:`RunStarted` gets one prepended, like every other import --
unless it holds an event that names log positions (a compaction's range and its
``event://RUN/N`` refs, a build record's ``log_version``, a lost result's call
position): the export of a run recorded without one (``open_store(...).run(...)``
appends none) is then imported as it is, since a prepended event shifted every
position by one and the copy's summaries and stubs covered and cited the wrong events.
Pairing is checked as for the other formats.
"""

from __future__ import annotations

from pydantic import ValidationError

from contextfold.domain.errors import ProtocolError
from contextfold.domain.events import (
    AnyEvent,
    ContextBuilt,
    HistoryCompacted,
    RunStarted,
    ToolResultLost,
    event_from_json,
)
from contextfold.domain.log import PairingState
from contextfold.importers._json import Bad, Doc

__all__ = ["parse_doc"]

_NAMES_POSITIONS = (HistoryCompacted, ContextBuilt, ToolResultLost)
"""Events whose fields or refs name log positions: a file holding one is imported as it is."""


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    values = doc.value if doc.jsonl else [doc.value]
    parsed: list[AnyEvent] = []
    for i, raw in enumerate(values):
        if not isinstance(raw, dict):
            raise Bad((i,), "expected one event object per line")
        try:
            parsed.append(event_from_json(raw))
        except ValidationError as e:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}"
                for err in e.errors()[:3]
            )
            raise Bad((i,), f"invalid event: {detail}") from None
    start: list[AnyEvent] = []
    if parsed and not isinstance(parsed[0], RunStarted) and not any(
            isinstance(e, _NAMES_POSITIONS) for e in parsed):
        start = [RunStarted()]
    events = [*start]
    pairing = PairingState()
    for i, event in enumerate(parsed):
        try:
            pairing.apply(event, len(events) + 1)
        except ProtocolError as e:
            raise Bad((i,), f"tool call pairing: {e}") from None
        events.append(event)
    return [("", events)]
