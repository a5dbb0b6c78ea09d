"""Canonical events JSONL -> events (one event object per line).

This is contextfold's own export format (``contextfold events RUN``), so the
mapping is the identity through :func:`~contextfold.domain.events.event_from_json`,
which also upcasts events written by older versions. A file that does not
open with :class:`RunStarted` gets one prepended, like every other import.
Pairing is checked as for the other formats.
"""

from __future__ import annotations

from pydantic import ValidationError

from contextfold.domain.errors import ProtocolError
from contextfold.domain.events import AnyEvent, RunStarted, event_from_json
from contextfold.domain.log import PairingState
from contextfold.importers._json import Bad, Doc

__all__ = ["parse_doc"]


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    values = doc.value if doc.jsonl else [doc.value]
    events: list[AnyEvent] = []
    pairing = PairingState()
    for i, raw in enumerate(values):
        if not isinstance(raw, dict):
            raise Bad((i,), "expected one event object per line")
        try:
            event = event_from_json(raw)
        except ValidationError as e:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}"
                for err in e.errors()[:3]
            )
            raise Bad((i,), f"invalid event: {detail}") from None
        if not events and not isinstance(event, RunStarted):
            events.append(RunStarted())
        try:
            pairing.apply(event, len(events) + 1)
        except ProtocolError as e:
            raise Bad((i,), f"tool call pairing: {e}") from None
        events.append(event)
    return [("", events)]
