"""A handle on a store (:class:`Store`, :func:`open_store`): the store's runs, artifacts and texts.

Apart from :mod:`contextfold.api` (which re-exports both) because a run's handle (:class:`Run`)
imports the builder, the folds and the renderers, and opening a store to list its runs or check a
run's hash chain (``contextfold runs``, ``verify``) needs none of them: :meth:`Store.run`
imports them when a run is first asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, NoReturn

from contextfold.domain.errors import HandleNotPicklableError, StoreConfigError
from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock
from contextfold.store.crypto import keyring_from
from contextfold.store.event_store import EventStore, RunInfo
from contextfold.store.limits import StoreLimits
from contextfold.store.media import attach_document, attach_image, attach_media
from contextfold.store.store_url import display_url, worker_reopen_advice
from contextfold.text_cache import TextCache

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["Store", "open_store"]


class Store:
    """A handle on one store. Use as a context manager or call ``close()``."""

    def __init__(self, events: EventStore) -> None:
        self.events = events
        self._texts = TextCache()

    @property
    def url(self) -> str:
        return self.events.url

    def run(self, run_id: str) -> Run:
        from contextfold.api import Run  # the builder and the folds: loaded by a store's first run

        return Run(self, run_id)

    def runs(self, prefix: str = "", *, limit: int | None = None) -> list[RunInfo]:
        """The store's runs with their event counts, in the order they were first written:
        those whose id starts with ``prefix``, the last ``limit`` of them (the runs started
        last) when given; each read without reading the other runs' rows
        (:meth:`~contextfold.store.event_reads.EventReads.runs`)."""
        return self.events.runs(prefix, limit=limit)

    def artifact(self, ref: str | ArtifactRef) -> bytes:
        return self.events.artifact(ref)

    def attach_image(self, data: bytes, *, media_type: str | None = None,
                     detail: Literal["auto", "low", "high"] = "auto") -> ImageBlock:
        """Check and store image bytes (PNG/JPEG/GIF/WebP); the block goes in an event's content."""
        return attach_image(self.events, data, media_type=media_type, detail=detail)

    def attach_document(self, data: bytes, *, title: str | None = None) -> DocumentBlock:
        """Check and store a PDF (pages counted); the block goes in an event's content."""
        return attach_document(self.events, data, title=title)

    def attach_media(self, data: bytes, *, media_type: str, title: str | None = None) -> DocumentBlock:
        """Check and store audio or video bytes of ``media_type`` (``audio/wav``, ``video/mp4``...),
        their playing time read when their container tells it; the block goes in an event's
        content (sent as the medium to an API that takes it, as a note to one that does not)."""
        return attach_media(self.events, data, media_type=media_type, title=title)

    def artifact_text(self, ref: str | ArtifactRef) -> str:
        """An artifact's bytes as text, through the store's text cache (artifacts are immutable).
        ``ref``: the ref or its hash, as :meth:`artifact` takes."""
        digest = ref.hash if isinstance(ref, ArtifactRef) else ref
        return self._texts.get(("artifact", digest),
                               lambda: self.events.artifact(digest).decode("utf-8", "replace"))

    def cited_text(self, ref: ArtifactRef) -> str:
        """:meth:`artifact_text` of a ref the run's log cites: a lost one is an IntegrityError."""
        return self._texts.get(("artifact", ref.hash),
                               lambda: self.events.cited_artifact(ref).decode("utf-8", "replace"))

    def event_text(self, run_id: str, position: int) -> str:
        """The text content of the event at ``position``, through the store's text cache: a
        build reads a rendered long text a few times."""
        return self._texts.get((run_id, position), lambda: self.events.event_text(run_id, position))

    def close(self) -> None:
        self.events.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> NoReturn:
        """Refused (:class:`HandleNotPicklableError`): its connections are this process's."""
        raise HandleNotPicklableError("Store", worker_reopen_advice(
            self.url, f"open the store in the worker from its URL, contextfold.open_store("
                      f"{display_url(self.url)!r}) with the same cipher key and tenant, and send run "
                      "ids, not handles"))


def open_store(url: str | None = None, *, create_schema: bool = True,
               cipher_key: str | bytes | None = None, old_cipher_keys: Sequence[str | bytes] = (),
               tenant: str | None = None, limits: StoreLimits | None = None,
               must_exist: bool = False, delta_frames: bool = True,
               clock: Callable[[], datetime] | None = None) -> Store:
    """Open (and by default create) a store: ``sqlite:///file.db`` or ``postgresql://...``.

    Without a URL: ``$CONTEXTFOLD_STORE``, else ``sqlite:///contextfold.db``.
    ``cipher_key`` (base64 AES key; else ``$CONTEXTFOLD_CIPHER_KEY``) turns on
    encryption at rest, ``old_cipher_keys`` (else ``$CONTEXTFOLD_CIPHER_KEYS_OLD``)
    keep rotated-out keys readable (:mod:`contextfold.store.crypto`). ``tenant``
    (else ``$CONTEXTFOLD_TENANT``) scopes every read and build to one tenant
    (:mod:`contextfold.store.tenants`). ``must_exist``: a store not made yet (no SQLite file,
    or one without contextfold's tables, as an empty file; a PostgreSQL schema or tenant without
    them) is a :class:`StoreConfigError`,
    with nothing created, where by default it is created: for a reader, whose mistyped URL
    would otherwise leave an empty store behind.
    ``delta_frames=False``: write each large event (a long run's ``context_built`` record) as a
    zstd frame of its own, not a delta of the run's last such frame (:mod:`contextfold.store.deltas`:
    ~1-15 KB a record of a 10,000-message run instead of ~240 KB), for a store that a contextfold
    older than delta frames must also read. This handle's writes only: what is stored reads either way.
    ``clock``: what each append reads its events' time from (an aware datetime; default: the
    system clock, UTC): ``EventStore``'s, for a test or a runtime with a clock of its own.
    """
    if url is not None and not isinstance(url, str):  # a Path too: the URL names its scheme
        raise StoreConfigError(f"a store URL is a string (sqlite:///runs.db, postgresql://...), "
                               f"got {type(url).__name__}")
    if not isinstance(delta_frames, bool):  # "no" is true: it would write the deltas it turns off
        raise StoreConfigError(f"delta_frames is True or False, got {delta_frames!r}")
    keyring = keyring_from(cipher_key, old_cipher_keys)
    tenant = tenant if tenant is not None else (os.environ.get("CONTEXTFOLD_TENANT") or None)
    return Store(EventStore(url, create_schema=create_schema, keyring=keyring, tenant=tenant,
                            limits=limits, must_exist=must_exist, delta_frames=delta_frames, clock=clock))
