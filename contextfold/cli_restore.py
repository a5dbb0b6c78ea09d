"""``import`` of a run the store holds already: the artifacts its log cites and the store lost.

Why: a partial restore or a bad copy of a store keeps a run's log and loses a blob it cites (a
large tool output, a screenshot); every read of the run then fails naming the artifact (exit 3).
An export of the run made where the blob still is (``events --json --with-artifacts``) carries
it, but its import was refused as a run that exists, and the only way back was a throwaway copy
under another name, which stayed in the store. An import under the run's own name now writes the
carried artifacts the run's log cites and the store does not hold (or holds damaged), provided
the export is that log, event for event: an export of another log under a taken name is still a
RunExistsError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextfold.domain.errors import CryptoError, IntegrityError
from contextfold.domain.events import AnyEvent, ArtifactRef, artifact_refs, canonical_json
from contextfold.store.event_store import EventStore

__all__ = ["lost_artifacts", "restore_artifacts"]


Carried = Mapping[str, tuple[ArtifactRef, bytes]]
"""The artifacts an import's exports carry, by hash (``cli_import.Bundled``)."""


def lost_artifacts(store: EventStore, run_id: str, events: Sequence[AnyEvent],
                   carried: Carried) -> list[tuple[ArtifactRef, bytes]] | None:
    """The carried artifacts ``run_id``'s log cites that ``store`` does not hold, when its log is
    ``events`` exactly (canonical JSON, position for position); None when it is another log."""
    held = store.read(run_id)
    if len(held) != len(events) or any(canonical_json(rec.event) != canonical_json(event)
                                       for rec, event in zip(held, events, strict=True)):
        return None
    lost: dict[str, tuple[ArtifactRef, bytes]] = {}
    for event in events:
        for ref in artifact_refs(event):
            if ref.hash in carried and ref.hash not in lost and not _readable(store, ref):
                lost[ref.hash] = carried[ref.hash]
    return list(lost.values())


def _readable(store: EventStore, ref: ArtifactRef) -> bool:
    """Whether ``store`` holds ``ref`` as bytes its hash names (a damaged row is as good as lost)."""
    if not store.has_artifact(ref.hash):
        return False
    try:
        store.artifact(ref)
    except (IntegrityError, CryptoError):  # what ``verify`` reports as "cannot be read back"
        return False
    return True


def restore_artifacts(store: EventStore, run_id: str, lost: Sequence[tuple[ArtifactRef, bytes]]) -> str:
    """Write ``lost`` (checked against their hashes by the import's parse), as an append would;
    returns the import's note of it."""
    for ref, data in lost:
        store.put_artifact(data, ref.media_type, replace=True)
    return (f"run {run_id!r} holds these events already: restored {len(lost)} artifact(s) its log "
            "cites that the store had lost")
