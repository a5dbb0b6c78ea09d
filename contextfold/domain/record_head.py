"""A context_built record read without its manifest: what a fold, or a search for one turn's
records, reads of a record.

Why: a record's manifest lists every fragment its build left out, so on a long run it is most of
the record and grows with the run (~280 KB of JSON per record at 800 turns of a loop whose history
the window cannot hold). A fold notes a record's turn and position only, and a search for one
turn's records needs each record's turn; decoding every manifest to learn them made checking one
turn cost O(the run's records), in time and in memory (``replay``, ``audit --turn``, ``why``,
``diff`` of an 800-turn run peaked at 880-970 MB). The head model names every field of
:class:`~contextfold.domain.events.ContextBuilt` but the manifest and ignores what else the JSON
holds, so pydantic skips the manifest's text without making Python objects of it (~10x faster
than decoding it whole, measured on such a run); the fields it read are then validated as the
event's own (:func:`record_without_manifest`).

Pure: JSON text in, an event out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from contextfold.domain.events import ContextBuilt

__all__ = ["RECORD_TYPE", "record_without_manifest"]

RECORD_TYPE = "context_built"

_HEAD_FIELDS: dict[str, Any] = {name: (Any, None) for name in ContextBuilt.model_fields if name != "manifest"}
_RecordHead: type[BaseModel] = create_model("RecordHead", __config__=ConfigDict(extra="ignore"),
                                            **_HEAD_FIELDS)
"""Every field of ContextBuilt but ``manifest``, as parsed (validated by ContextBuilt itself)."""


def record_without_manifest(text: bytes | str) -> ContextBuilt:
    """The ContextBuilt event whose canonical JSON is ``text``, with an empty manifest (its other
    fields validated as the event's: a field missing, of a wrong type or of an unknown version
    raises pydantic's ``ValidationError`` as a whole decode does; what the manifest holds is not
    read). Invalid JSON raises ``ValidationError`` too."""
    head = _RecordHead.model_validate_json(text)
    return ContextBuilt.model_validate({**head.model_dump(exclude_unset=True), "manifest": {}})
