"""Delta frames: a large state stored as a zstd frame against an earlier state of its run.

Why: a context-built record lists every fragment the build left out, so on a long run each
record is nearly all of the one before it and grows with the history. On the 10,000-message
benchmark run (``scripts/bench_build.py``, workload B) each record is ~1.8 MB of JSON, ~240 KB
as a zstd frame of its own: the log grew by ~240 KB per turn, quadratically over a run. Two
consecutive records there differ in a few dozen of their ~9,700 excluded lines; compressed with
the run's last full frame (its *keyframe*) as a zstd raw-content dictionary, a record takes
0.5-5 KB (``scripts/bench_records.py`` measures it).

Format: ``b"cfd1:"`` + the keyframe's position (ASCII digits) + ``b":"`` + one zstd frame, its
content size in the header, whose dictionary is the keyframe's state (the bytes a ``cfz1:`` row
at that position of the same run decompresses to). Why these choices:

- **One hop:** a delta's base is always a keyframe (a ``cfz1:`` row), never another delta, so
  reading any row costs at most one more row; a reader that meets a delta whose base is not
  an earlier keyframe of the run raises :class:`~contextfold.domain.errors.IntegrityError`.
- **Same place as ``cfz1:``:** compressed before encryption, inside the envelope; the chain
  hash is over the canonical JSON, so ``verify`` re-hashes the same bytes either way.
- **Bounded:** a frame must declare its size, at most the reader's limit, before it is
  inflated (as :func:`~contextfold.store.compression.unpack_state`).
- **Writer's memory, not the log's:** the writer remembers the last keyframe of each (run,
  topic) it wrote, within :data:`BASE_CACHE_BYTES`; a writer that has none (a new process, an
  evicted run) writes a keyframe. A keyframe serves at most :data:`MAX_DELTAS` deltas. A delta
  up to an eighth of its keyframe's frame is kept; a larger one only when it is at most half the
  state's own frame (then made to compare), else that frame is stored and starts a new series.
  So a delta is always well under what a keyframe would cost, and a state unlike the keyframe
  starts a series of its own. (The rule was the eighth alone: right for a long run's ~240 KB
  frames and their 0.5-5 KB deltas, but a short run's record, a ~2 KB frame to which a turn adds
  ~300 bytes of delta, then became a keyframe every turn.)
- **Checked against the log:** the writer's memory outlives what the log holds when the log moves
  back under it (an earlier backup restored online, :mod:`.head_check`): a delta against a
  keyframe the restore removed, or that another writer's row replaced, left a run no read could
  decode again, for good. So the writer keeps the digest of each keyframe's stored row, each
  delta's insert checks that row in its transaction (:attr:`Packed.base`), and the store makes
  the writer forget a run whose log it finds moved back (:meth:`DeltaWriter.forget`).

Stores written with delta frames are read by contextfold from the version that added them on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import zstandard

from contextfold.domain.errors import IntegrityError
from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.store.compression import (
    COMPRESS_MIN_BYTES,
    RECORD_COMPRESS_MIN_BYTES,
    inflate,
    is_compressed,
    pack_state,
)
from contextfold.store.head_check import tail_digest
from contextfold.store.limits import RECORD_TYPE

__all__ = [
    "BASE_CACHE_BYTES",
    "DELTA_MAGIC",
    "MAX_DELTAS",
    "DeltaWriter",
    "KeyframesRead",
    "Packed",
    "delta_base",
    "is_delta",
    "unpack_delta",
]

DELTA_MAGIC = b"cfd1:"
MAX_DELTAS = 63
"""Deltas per keyframe: a keyframe then at most this many deltas against it."""
BASE_CACHE_BYTES = 96 * 1024 * 1024
"""What a writer keeps of keyframes (each counted as three times its state: the state and
zstd's prepared tables), least recently used dropped first."""
KEYFRAMES_READ = 4
"""Keyframes a reader keeps (:class:`KeyframesRead`), the most recently read."""
_MAX_WINDOW_LOG = 27


def is_delta(state: bytes) -> bool:
    return state.startswith(DELTA_MAGIC)


def _params(base_size: int) -> zstandard.ZstdCompressionParameters:
    """zstd's fastest strategy with a window over the keyframe and a state of its size, and a
    hash table large enough to index the keyframe (level 1's own, 2^16 slots, finds almost none
    of a 1.8 MB dictionary's matches: 240 KB instead of 1-5 KB per record)."""
    window_log = min(_MAX_WINDOW_LOG, max(20, (2 * base_size).bit_length()))
    hash_log = min(22, max(17, base_size.bit_length() - 3))
    return zstandard.ZstdCompressionParameters(
        compression_level=1, window_log=window_log, hash_log=hash_log, write_checksum=True)


class Packed(NamedTuple):
    """A state as :meth:`DeltaWriter.pack` stores it."""

    state: bytes
    learn: Callable[[bytes], None] | None
    """To call once the row is committed, with its bytes as stored (encrypted or not): the writer
    learns a keyframe, or counts a delta, only then (a batch that lost a race leaves no keyframe
    behind that the log does not hold)."""
    base: tuple[int, bytes] | None
    """A delta's keyframe: its position and the digest of its row as stored
    (:func:`~.head_check.tail_digest`), for the insert to check in its transaction."""


@dataclass
class _Keyframe:
    position: int
    state: bytes
    frame_bytes: int
    stored: bytes
    """The digest of the keyframe's row as stored."""
    dictionary: zstandard.ZstdCompressionDict | None = None
    deltas: int = 0


class DeltaWriter:
    """Packs a store's large states: a keyframe (``cfz1:``), or a delta against the last one.

    ``pack`` returns the stored bytes, a callback for once they are committed and a delta's
    keyframe row to check (:class:`Packed`). Thread-safe: a lock around the table and the
    one-time preparation of a keyframe's dictionary; compressing runs outside it."""

    def __init__(self, cache_bytes: int = BASE_CACHE_BYTES) -> None:
        self._keyframes: OrderedDict[tuple[str, str], _Keyframe] = OrderedDict()
        self._bytes = 0
        self._cache_bytes = cache_bytes
        self._lock = fork_safe_lock(self._forget_all)

    def pack(self, run_id: str, topic: str, position: int, state: bytes) -> Packed:
        record = topic.partition("@")[0] == RECORD_TYPE
        min_bytes = RECORD_COMPRESS_MIN_BYTES if record else COMPRESS_MIN_BYTES
        if len(state) < min_bytes:
            return Packed(state, None, None)
        key = (run_id, topic)
        with self._lock:  # the prepared dictionary is made once; using it is read-only
            frame = self._keyframes.get(key)
            if frame is not None and frame.deltas < MAX_DELTAS and frame.position < position:
                self._keyframes.move_to_end(key)
                if frame.dictionary is None:
                    dictionary = zstandard.ZstdCompressionDict(
                        frame.state, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
                    dictionary.precompute_compress(compression_params=_params(len(frame.state)))
                    frame.dictionary = dictionary
            else:
                frame = None
        packed: bytes | None = None
        if frame is not None:
            delta = zstandard.ZstdCompressor(
                compression_params=_params(len(frame.state)), dict_data=frame.dictionary).compress(state)
            stored = DELTA_MAGIC + str(frame.position).encode("ascii") + b":" + delta
            if len(stored) * 8 > frame.frame_bytes:  # not clearly small: against a frame of its own
                packed = pack_state(state, min_bytes)
            if packed is None or len(stored) * 2 <= len(packed):
                return Packed(stored, lambda _: self._counted(frame), (frame.position, frame.stored))
        if packed is None:
            packed = pack_state(state, min_bytes)
        if not is_compressed(packed):
            return Packed(packed, None, None)
        return Packed(packed, lambda stored: self._learn(
            key, _Keyframe(position, state, len(packed), tail_digest(stored))), None)

    def _forget_all(self) -> None:
        """Know no keyframe: in a forked child whose parent's thread held the lock, the table and
        its byte count may disagree (:mod:`~contextfold.domain.fork_locks`); the next large state
        is stored as a keyframe."""
        self._keyframes.clear()
        self._bytes = 0

    def forget(self, run_id: str) -> None:
        """Drop what this writer knows of the run's keyframes: its log moved back (a restored
        backup), so the rows at their positions may be gone or others now."""
        with self._lock:
            for key in [key for key in self._keyframes if key[0] == run_id]:
                self._bytes -= 3 * len(self._keyframes.pop(key).state)

    def _counted(self, frame: _Keyframe) -> None:
        with self._lock:
            frame.deltas += 1

    def _learn(self, key: tuple[str, str], frame: _Keyframe) -> None:
        with self._lock:
            old = self._keyframes.pop(key, None)
            if old is not None:
                self._bytes -= 3 * len(old.state)
            if 3 * len(frame.state) > self._cache_bytes:
                return
            self._keyframes[key] = frame
            self._bytes += 3 * len(frame.state)
            while self._bytes > self._cache_bytes:
                _, dropped = self._keyframes.popitem(last=False)
                self._bytes -= 3 * len(dropped.state)


class KeyframesRead:
    """The keyframes a store read last, for the deltas after them: a read of a run fetches and
    inflates a delta's keyframe once, not once per delta.

    Each is kept with its row's frame (as stored, once opened), which names the row it was read
    from: a position holds another keyframe after a log moved back and was written again (a
    restored backup), so a delta that fails against the keyframe remembered is tried against the
    log's row when that row is another (:meth:`.event_reads.EventReads._unpack`); keyed by
    position alone, a long-lived reader called an intact log damaged. Thread-safe: a store is
    shared by threads, and a plain dict evicted with ``pop(next(iter(d)))`` raised "dictionary
    changed size during iteration" out of a read when another thread inserted meanwhile."""

    def __init__(self, size: int = KEYFRAMES_READ) -> None:
        self._frames: OrderedDict[tuple[str, int], tuple[bytes, bytes]] = OrderedDict()
        self._size = size
        self._lock = fork_safe_lock(self._frames.clear)  # a forked child's, held at the fork: emptied

    def get(self, run_id: str, position: int) -> tuple[bytes, bytes] | None:
        """The keyframe at ``position`` as remembered: (its frame, its state), or None."""
        with self._lock:
            return self._frames.get((run_id, position))

    def put(self, run_id: str, position: int, frame: bytes, state: bytes) -> None:
        with self._lock:
            self._frames.pop((run_id, position), None)
            self._frames[(run_id, position)] = (frame, state)
            while len(self._frames) > self._size:
                self._frames.popitem(last=False)

    def forget(self, run_id: str) -> None:
        """Drop the run's keyframes (its log moved back: :mod:`.head_check`)."""
        with self._lock:
            for key in [key for key in self._frames if key[0] == run_id]:
                del self._frames[key]


def delta_base(stored: bytes, where: str, position: int) -> int:
    """The keyframe position a delta row names (checked: an earlier position of the run)."""
    head, sep, _ = stored[len(DELTA_MAGIC):len(DELTA_MAGIC) + 21].partition(b":")
    if not sep or not head.isdigit():
        raise IntegrityError(f"{where}: delta row does not name its keyframe", position=position)
    base = int(head)
    if not 0 < base < position:
        raise IntegrityError(f"{where}: delta row names position {base} as its keyframe, "
                             "not an earlier one", position=position)
    return base


def unpack_delta(stored: bytes, base_state: bytes, max_bytes: int, where: str, *, position: int,
                 limit: str = "StoreLimits.max_event_bytes") -> bytes:
    """The state a delta row holds, given its keyframe's state, at most ``max_bytes`` long."""
    dictionary = zstandard.ZstdCompressionDict(base_state, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return inflate(stored[stored.index(b":", len(DELTA_MAGIC)) + 1:], max_bytes, where, position=position,
                   limit=limit, row="delta row", damaged="is damaged or its keyframe is not the one it was "
                   "written against", decompressor=zstandard.ZstdDecompressor(
                       dict_data=dictionary, max_window_size=1 << _MAX_WINDOW_LOG))
