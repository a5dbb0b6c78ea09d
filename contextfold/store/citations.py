"""What an appended batch cites by artifact: held by the store, and (media) what the bytes prove.

Apart from :mod:`contextfold.store.event_store` (the write path calls :func:`checked_citations`
on every batch, after it is prepared and before anything is written) because the checks read
artifacts and decode media, which the write path otherwise never does:

- every artifact an event cites must be held by the store or carried by the same import
  (``events --json --with-artifacts``): accepted, a ref to nothing left a run that no fold could
  read back, for good (:class:`ArtifactNotFoundError`, naming the event);
- an image or document block citing an artifact is checked as ``attach_image`` /
  ``attach_document`` check the bytes they store (:func:`contextfold.store.media.materialize`
  with ``cited``): the sniffed type replaces the declared one, dimensions and pages come from the
  bytes, and bytes that are no image or no PDF are refused, naming the event. Without it an
  export carrying its artifacts imported bytes that are no image as ``image/png 64x64``, or a
  PNG as ``image/jpeg``, and the request sent them so (Anthropic rejects a declared type that
  does not match the data);
- a cited media type holding a control character is refused (:func:`check_media_type`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from contextfold.domain.errors import ArtifactNotFoundError, InvalidInputError
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    EvidenceRetrieved,
    FileRead,
    MemoryRecalled,
    ToolResult,
    UserInput,
    artifact_refs,
)
from contextfold.store.media import materialize

if TYPE_CHECKING:
    from contextfold.store.event_reads import EventReads

__all__ = ["Prepared", "check_media_type", "checked_citations"]

class Prepared(NamedTuple):
    """An event as the store will write it, the artifact rows it brings, its canonical JSON, and
    the event a read of that JSON gives (:func:`~contextfold.store.event_checks.as_read`)."""

    event: AnyEvent
    """As given (payloads offloaded): what the write-side rules judge, as a value the JSON cannot
    hold (a tool schema's ``inf``, logged as ``null``) is refused, not stored changed."""
    blobs: list[tuple[str, int, str, bytes]]
    body: bytes
    read: AnyEvent
    """What is recorded: what a reload holds."""

_CITING = (ToolResult, FileRead, EvidenceRetrieved, UserInput, MemoryRecalled)
"""The events whose fields may cite an artifact (a payload, an image, a document)."""


def check_media_type(media_type: str, where: str = "") -> None:
    """InvalidInputError for a media type holding a control character: PostgreSQL text holds no
    NUL (a generic StoreError there, stored as is in SQLite), and an export citing one made a file
    its own import refused."""
    if any(c < " " or c == "\x7f" for c in media_type):
        raise InvalidInputError(f"{where}media type {media_type!r} holds a control character; "
                                "nothing was written")


def checked_citations(store: EventReads, prepared: list[Prepared],
                      prepare: Callable[[int, AnyEvent], Prepared],
                      carried: Mapping[str, bytes] | None = None, *, as_logged: bool = False
                      ) -> list[Prepared]:
    """``prepared`` with the media it cites as their bytes prove them (an event corrected is
    prepared again by ``prepare``: its JSON and limits); raises before anything is written.

    ``carried``: the artifacts an import brings beside its events (hash -> bytes). ``as_logged``:
    the events are a log's, their inline clips kept (``media.materialize``)."""
    carried = carried or {}
    own = {row[0] for p in prepared for row in p.blobs}  # made by this batch: checked then
    seen: set[str] = set()

    def cited(ref: ArtifactRef) -> bytes | None:
        if ref.hash in carried:
            return carried[ref.hash]
        return None if ref.hash in own else store.artifact(ref)

    out: list[Prepared] = []
    for i, item in enumerate(prepared):
        event = item.event
        if isinstance(event, _CITING):  # a record's manifest is large and cites none
            where = f"event {i} ({event.type})"
            for ref in artifact_refs(event):
                check_media_type(ref.media_type, f"{where}: ")
                if ref.hash in seen or ref.hash in carried or ref.hash in own:
                    continue
                seen.add(ref.hash)
                if not store.has_artifact(ref.hash):
                    exc = ArtifactNotFoundError(f"artifact:{ref.hash}")
                    exc.add_note(f"{where} cites it and this store does not hold it: store the bytes "
                                 "first (Store.attach_image / attach_document), or import an export "
                                 "made with --with-artifacts; nothing was written")
                    raise exc
            proven, _ = materialize(event, where=where, cited=cited, as_logged=as_logged)
            if proven is not event and proven != event:
                again = prepare(i, proven)
                item = again._replace(blobs=[*item.blobs, *again.blobs])
        out.append(item)
    return out
