"""A context_built record read without its manifest, or with a few of its manifest's keys: what a
fold, a search for one turn's records, a check of the chain or a record's settings read of it.

Why: a record's manifest lists every fragment its build left out, so on a long run it is most of
the record and grows with the run (~280 KB of JSON per record at 800 turns of a loop whose history
the window cannot hold). A fold notes a record's turn and position only, a search for one turn's
records needs each record's turn, a rebuild of a turn without a record its nearest record's
``config``, a fold the first record's ``encoding`` and a calibration a record's ``model``,
``provider`` and ``selected_tokens``; decoding every manifest whole to learn them made checking one
turn cost O(the run's records), in time and in memory (``replay``, ``audit --turn``, ``why``,
``diff`` of an 800-turn run peaked at 880-970 MB; ``Run.state(turn=1)`` of one took 27 s and
2.1 GB). The head model names every field of :class:`~contextfold.domain.events.ContextBuilt`,
its manifest as an object of the keys asked for, so pydantic skips the rest of the manifest's text
without making Python objects of it (~10x faster than decoding it whole, measured on such a run);
the fields it read are then validated as the event's own (:func:`record_head`).

Pure: JSON text in, an event out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from contextfold.domain.events import ContextBuilt

__all__ = ["RECORD_TYPE", "manifest_encoding", "record_head"]

RECORD_TYPE = "context_built"


@functools.lru_cache(maxsize=16)
def _head_model(keep: frozenset[str]) -> type[BaseModel]:
    """The head model of a record whose manifest is read for the keys ``keep`` only (made once per
    key set: the store's readers ask for a handful; bounded, as a caller may name any keys).

    Every field of ContextBuilt is named (Any: validated by ContextBuilt itself), and the event's
    unknown fields are kept (``extra="allow"``), so that ContextBuilt refuses them as a whole decode
    does. The manifest must be an object (as ``dict[str, Any]`` requires); of its members only
    ``keep`` are read, each under an alias (a key may be any string, a field name may not)."""
    keys: dict[str, Any] = {f"key_{i}": (Any, Field(None, alias=key)) for i, key in enumerate(sorted(keep))}
    manifest = create_model("ManifestKeys", __config__=ConfigDict(extra="ignore"), **keys)
    fields: dict[str, Any] = {name: (Any, None) for name in ContextBuilt.model_fields if name != "manifest"}
    return create_model("RecordHead", __config__=ConfigDict(extra="allow"), manifest=(manifest, None),
                        **fields)


def record_head(text: bytes | str, keep: Iterable[str] = ()) -> ContextBuilt:
    """The ContextBuilt event whose canonical JSON is ``text``, its manifest holding only the keys
    in ``keep`` that it has (those the caller reads; none by default). Its other fields are
    validated as the event's: a field missing, of a wrong type or unknown, a manifest missing or not
    an object, an unknown version raise pydantic's ``ValidationError`` as a whole decode does
    (with other wording: a caller that reports the error decodes the text whole for it); what
    the rest of the manifest holds is not read. Invalid JSON raises ``ValidationError`` too."""
    head = _head_model(frozenset(keep)).model_validate_json(text)
    return ContextBuilt.model_validate(head.model_dump(exclude_unset=True, by_alias=True))


def manifest_encoding(manifest: Mapping[str, Any]) -> str | None:
    """The encoding a recorded manifest names (None for a record that names none: one appended or
    imported by hand, which then pins nothing). A run's first record pins its encoding: the
    builds that rebuild or follow it count with it (``projections.recorded_encoding``), and the
    store refuses a record naming another (``store.run_heads``).

    Here, not in :mod:`~contextfold.domain.manifest` (which re-exports it), because the store reads
    it of every record it appends or folds: importing the manifest's module for it defined the
    manifest's and the fragments' models (14, ~20 ms of CPU) in every process that opened a store,
    ``contextfold runs`` and ``verify`` too."""
    name = manifest.get("encoding")
    return name if isinstance(name, str) and name else None
