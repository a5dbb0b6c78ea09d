"""A process-wide memo bounded by its entries and by the bytes it holds (its share of the memo ceiling).

Why: a long-lived process builds for many runs, and some of its memos hold texts (a tool output
and its redacted copy). A bound on entries alone bounds nothing when an entry may be a 50 MB
log: ``functools.lru_cache(maxsize=2048)`` over ``redact`` kept ~1.1 MB of memory per MB of
distinct tool output redacted, up to 2,048 outputs of up to 256 MiB each. Past either bound the
memo starts over, as ``request_json``'s memos do: the texts of the current runs come back on
their next build, and nothing is evicted one entry at a time on a hot path.

The byte bound is the memo's share of the process-wide ceiling (:mod:`contextfold.projections.memo_budget`),
counted from the caller's estimate of what an entry holds (:func:`text_bytes`: the size of its
texts, not their characters: a CJK or emoji text takes 2-4 bytes a character, counted as 4).

A value larger than the whole bound is not held (it would empty the memo for itself); the
caller computes it again when asked again.
"""

from __future__ import annotations

import sys
from typing import Generic, TypeVar

from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.projections.memo_budget import memo_share

__all__ = ["ENTRY_BYTES", "STR_BYTES", "BoundedMemo", "str_bytes", "text_bytes"]

ENTRY_BYTES = 160
"""What an entry costs besides its texts: its slot in the table, its key and value objects."""
STR_BYTES = sys.getsizeof("")
"""A str's header (49 bytes on CPython 3.11)."""


def str_bytes(text: str) -> int:
    """At least the bytes ``text`` takes: its length for ASCII, four bytes a character for the
    rest (a CJK text takes two). ``isascii`` is O(1) on CPython (a flag of the str), and takes no
    argument parsing: ``sys.getsizeof`` parses its arguments (``PyArg_ParseTupleAndKeywords``) on
    every call, and counting with it added ~0.5% to a tau-bench first build (callgrind)."""
    return STR_BYTES + (len(text) if text.isascii() else 4 * len(text))


def text_bytes(*texts: str) -> int:
    """The bytes ``texts`` take (:func:`str_bytes`) and an entry's."""
    return ENTRY_BYTES + sum(map(str_bytes, texts))

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """``key -> value`` with ``size`` bytes counted per value, emptied past ``max_entries``
    entries or ``max_bytes`` bytes (or, with ``share``, that share of the memo ceiling, followed
    when it changes). Safe to share by threads: reads take no lock (a read racing a clear misses and
    recomputes), writes take one so the count stays exact."""

    def __init__(self, max_entries: int, max_bytes: int = 0, *, share: str | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes if share is None else memo_share(share, self._bound)
        self._data: dict[K, V] = {}
        self._bytes = 0
        self._lock = fork_safe_lock(self.clear)  # a forked child's, held by a parent's thread: emptied

    def _bound(self, max_bytes: int) -> None:
        """The ceiling changed: the new bound, and the memo emptied if it holds more."""
        self.max_bytes = max_bytes
        if self._bytes > max_bytes:
            self.clear()

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def put(self, key: K, value: V, size: int) -> V:
        """Hold ``value`` for ``key``, counting ``size`` bytes (key and value: :func:`text_bytes`)
        against the bound; returns ``value``."""
        if size > self.max_bytes:
            return value
        with self._lock:
            if key in self._data:
                return value
            if len(self._data) >= self.max_entries or self._bytes + size > self.max_bytes:
                self._data.clear()
                self._bytes = 0
            self._data[key] = value
            self._bytes += size
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    @property
    def bytes(self) -> int:
        """Bytes held now (as the entries' sizes estimated them)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)
