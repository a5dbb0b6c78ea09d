"""The texts a :class:`~contextfold.api.Store` loaded for rendering and counting, kept a while.

Why apart from :mod:`contextfold.api`: the cache has rules of its own (bounded by characters,
not by count; an event's text dropped when its run's log moved back), and the API module is
long enough.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from contextfold.domain.fork_locks import fork_safe_lock

__all__ = ["TEXT_CACHE_CHARS", "TextCache"]

TEXT_CACHE_CHARS = 8 * 1024 * 1024
"""Characters of loaded texts (long event texts, artifacts) a store keeps cached for rendering
and counting; the state keeps none."""


class TextCache:
    """LRU of loaded texts, bounded by :data:`TEXT_CACHE_CHARS` characters (not by count: 4,096
    artifacts of a few MB each would be gigabytes). Keys: ``("artifact", hash)`` for an
    artifact's text, ``(run id, position)`` for an event's. Thread-safe."""

    def __init__(self) -> None:
        self._texts: OrderedDict[tuple[str, str | int], str] = OrderedDict()
        self._chars = 0
        self._lock = fork_safe_lock(self._forget_all)

    def get(self, key: tuple[str, str | int], load: Callable[[], str]) -> str:
        """The text under ``key``, loaded by ``load()`` (outside the lock) when not cached."""
        with self._lock:
            hit = self._texts.get(key)
            if hit is not None:
                self._texts.move_to_end(key)
                return hit
        text = load()
        with self._lock:
            if key not in self._texts and len(text) <= TEXT_CACHE_CHARS:
                self._texts[key] = text
                self._chars += len(text)
                while self._chars > TEXT_CACHE_CHARS:
                    _, old = self._texts.popitem(last=False)
                    self._chars -= len(old)
        return text

    def _forget_all(self) -> None:
        """Drop every text: in a forked child whose parent's thread held the lock, the table and
        its character count may disagree (:mod:`~contextfold.domain.fork_locks`)."""
        self._texts.clear()
        self._chars = 0

    def forget_run(self, run_id: str) -> None:
        """Drop the texts of the run's events (artifacts stay: they are named by their hash).

        Why: an event's text is cached by its position, and after the run's log moved back and
        was written again (a restored backup) the position holds another event."""
        with self._lock:
            for key in [k for k in self._texts if k[0] == run_id and isinstance(k[1], int)]:
                self._chars -= len(self._texts.pop(key))
