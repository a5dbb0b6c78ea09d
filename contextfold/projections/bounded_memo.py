"""A process-wide memo bounded by its entries and by the characters of the texts it holds.

Why: a long-lived process builds for many runs, and some of its memos hold texts (a tool output
and its redacted copy). A bound on entries alone bounds nothing when an entry may be a 50 MB
log: ``functools.lru_cache(maxsize=2048)`` over ``redact`` kept ~1.1 MB of memory per MB of
distinct tool output redacted, up to 2,048 outputs of up to 256 MiB each. Past either bound the
memo starts over, as ``request_json``'s memos do: the texts of the current runs come back on
their next build, and nothing is evicted one entry at a time on a hot path.

A text larger than the whole character bound is not held (it would empty the memo for itself);
the caller computes it again when asked again.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from contextfold.domain.fork_locks import fork_safe_lock

__all__ = ["BoundedMemo"]

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """``key -> value`` with ``chars`` counted per value, emptied past ``max_entries`` entries
    or ``max_chars`` characters. Safe to share by threads: reads take no lock (a read racing a
    clear misses and recomputes), writes take one so the count stays exact."""

    def __init__(self, max_entries: int, max_chars: int) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._data: dict[K, V] = {}
        self._chars = 0
        self._lock = fork_safe_lock(self.clear)  # a forked child's, held by a parent's thread: emptied

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def put(self, key: K, value: V, chars: int) -> V:
        """Hold ``value`` for ``key``, counting ``chars`` characters against the bound; returns
        ``value``."""
        if chars > self.max_chars:
            return value
        with self._lock:
            if key in self._data:
                return value
            if len(self._data) >= self.max_entries or self._chars + chars > self.max_chars:
                self._data.clear()
                self._chars = 0
            self._data[key] = value
            self._chars += chars
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._chars = 0

    @property
    def chars(self) -> int:
        """Characters of the texts held now."""
        return self._chars

    def __len__(self) -> int:
        return len(self._data)
