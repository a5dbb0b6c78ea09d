"""Compression of large stored events and text artifacts: a zstd frame instead of the bytes.

Why: a long run's context-built records are large and mostly alike. The manifest lists
every excluded fragment, so on the 10,000-message benchmark run (``scripts/bench_build.py``,
workload B) each turn's record was ~1.9 MB of JSON (9,772 excluded lines): ~190 MB of log per
100 turns, written with a sync per turn. zstd at level 1 made it 7.7x smaller in 2.5 ms here
(zlib level 1: 6.5x in 6.9 ms; level 6: 7.5x in 17 ms), so the write moves a seventh of the
bytes and the log grows by a seventh.

Format: ``b"cfz1:"`` + one zstd frame, its content size in the header, of the state the store
would otherwise write (64 hex chars of chain hash + canonical JSON). Why these choices:

- **Only states of** :data:`COMPRESS_MIN_BYTES` **or more.** Small events (nearly all of
  them) stay plain, readable with any SQL client, and pay nothing.
- **Compressed before encryption** (ciphertext does not compress), inside the envelope: the
  chain hash is over the canonical JSON as always, so a log verifies the same whether or not
  its rows are compressed, and ``verify`` still re-hashes the exact JSON the event was
  written with.
- **Unambiguous:** a plain state starts with hex digits and an envelope with ``cfenc1:``, so
  the ``cfz1:`` prefix needs no flag column and old stores read as they did.
- **Checked:** the frame carries zstd's content checksum, so a damaged row fails to
  decompress instead of reading back as other bytes (``verify`` would catch those too, by
  the chain hash; a plain read does not re-hash).
- **Bounded:** a frame that does not declare its size, or declares more than the reader
  allows (``StoreLimits.max_event_bytes``; ``max_record_bytes`` for a row whose topic is a
  build's record, ``StoreLimits.event_bytes``), or does not decompress, is an
  :class:`~contextfold.domain.errors.IntegrityError` before anything is allocated for it:
  a damaged or hostile row never becomes a huge allocation or half an event.

Artifacts (tool outputs, files and evidence over the offload threshold: build logs, test
output) of a text media type are stored the same way (:func:`pack_artifact`); media and
unknown binary are not (compressed already, or not worth the time). An artifact's raw bytes
may begin with anything, ``cfz1:`` included, so a row is a frame only when it is also shorter
than the artifact's recorded size: a raw artifact is exactly its size, so old rows, and new
ones left raw because compressing did not pay, are never mistaken for frames.
"""

from __future__ import annotations

import zstandard

from contextfold.domain.errors import IntegrityError
from contextfold.domain.event_values import media_type_key

__all__ = [
    "COMPRESSED_MAGIC",
    "COMPRESS_MIN_BYTES",
    "RECORD_COMPRESS_MIN_BYTES",
    "inflate",
    "is_compressed",
    "pack_artifact",
    "pack_state",
    "unpack_artifact",
    "unpack_state",
]

COMPRESSED_MAGIC = b"cfz1:"
COMPRESS_MIN_BYTES = 32 * 1024
"""States this large or larger are compressed (a long run's context-built records)."""
RECORD_COMPRESS_MIN_BYTES = 1024
"""A build's record (``context_built``) this large or larger is compressed (and stored as a delta
of the run's previous record where that is smaller: :mod:`.deltas`).

Why a threshold of its own: records are the bulk of a store (85% of a SQLite store of copied
tau-bench runs with a build recorded every turn, ``scripts/measure_big_store.py``) and each is
mostly its predecessor, but a short run's records (~2-12 KB: every fragment so far, +~870 bytes
a turn) stayed under :data:`COMPRESS_MIN_BYTES`, stored as plain JSON. Other small events stay
plain and readable with any SQL client; a record is read with ``contextfold manifest`` or
``records`` (its state is a chain hash and JSON, not a column a query reads as is)."""
_LEVEL = 1
"""zstd's fastest standard level: nearly the ratio of level 3 here (7.7x vs 7.6x) in 2/3 of the time."""


def is_compressed(state: bytes) -> bool:
    return state.startswith(COMPRESSED_MAGIC)


def pack_state(state: bytes, min_bytes: int = COMPRESS_MIN_BYTES) -> bytes:
    """``state`` as stored: a compressed frame when it is ``min_bytes`` or longer and that is
    smaller, else as is."""
    if len(state) < min_bytes:
        return state
    # one compressor per call: they are not thread-safe, and making one costs ~10 us
    packed = COMPRESSED_MAGIC + zstandard.ZstdCompressor(level=_LEVEL, write_checksum=True).compress(state)
    return packed if len(packed) < len(state) else state


def unpack_state(stored: bytes, max_bytes: int, where: str, *, position: int | None = None,
                 limit: str = "StoreLimits.max_event_bytes") -> bytes:
    """The state a stored row holds (decompressed if it is a frame), at most ``max_bytes`` long.

    ``where`` names the row in errors (run and position); ``limit``, what sets ``max_bytes``."""
    if not is_compressed(stored):
        return stored
    return inflate(stored[len(COMPRESSED_MAGIC):], max_bytes, where, position=position, limit=limit)


def inflate(frame: bytes, max_bytes: int, where: str, *, position: int | None, limit: str,
            row: str = "compressed row", decompressor: zstandard.ZstdDecompressor | None = None,
            damaged: str = "is damaged") -> bytes:
    """One zstd frame's bytes, checked: it must declare its size, at most ``max_bytes``, before
    anything is allocated for it, and inflate to exactly that (``row`` and ``damaged`` word the
    errors; ``decompressor`` is one with the frame's dictionary, if it has one)."""
    try:
        size = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{where}: {row} is damaged ({exc})", position=position) from exc
    if size < 0:
        raise IntegrityError(f"{where}: {row} does not declare its size", position=position)
    if size > max_bytes:
        raise IntegrityError(f"{where}: {row} declares {size} bytes, over this store's "
                             f"limit of {max_bytes} (raise {limit} to read it)", position=position)
    try:
        state: bytes = (decompressor or zstandard.ZstdDecompressor()).decompress(frame)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{where}: {row} {damaged} ({exc})", position=position) from exc
    if len(state) != size:
        raise IntegrityError(f"{where}: {row} decompressed to {len(state)} bytes, "
                             f"not the {size} it declares", position=position)
    return state


_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-ndjson", "application/yaml"})


def _is_text(media_type: str) -> bool:
    base = media_type_key(media_type)
    return base.startswith("text/") or base in _TEXT_TYPES or base.endswith(("+json", "+xml"))


def pack_artifact(raw: bytes, media_type: str) -> bytes:
    """An artifact's bytes as stored: a frame for large text that compresses, else ``raw``."""
    return pack_state(raw) if _is_text(media_type) else raw


def unpack_artifact(stored: bytes, size: int, where: str) -> bytes:
    """An artifact's raw bytes from its stored ones and its recorded ``size`` (module docstring)."""
    if len(stored) >= size or not is_compressed(stored):
        return stored
    return unpack_state(stored, size, where, limit="the artifact's recorded size")
