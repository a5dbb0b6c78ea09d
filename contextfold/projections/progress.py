"""Reporting how far a long fold has got, to a callback the caller passes in.

Why a callback: the fold is pure and knows nothing of terminals; the command line passes
``advance(n)`` (a progress bar's) so that folding a 10,000-event run, which takes seconds,
shows it is moving. Nothing here changes what is folded or in which order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias, TypeVar

__all__ = ["Progress", "reported"]

Progress: TypeAlias = Callable[[int], None]
"""``advance(n)``: ``n`` more items (events) are done."""

T = TypeVar("T")

BATCH = 64
"""Items per call: a call per event cost more than a small fold step."""


def reported(items: Iterable[T], progress: Progress | None) -> Iterable[T]:
    """``items`` as they are; with ``progress``, each batch of them reported once consumed (the
    rest when the iteration ends or stops early)."""
    if progress is None:
        return items
    return _counting(items, progress)


def _counting(items: Iterable[T], progress: Progress) -> Iterator[T]:
    pending = 0
    try:
        for item in items:
            yield item
            pending += 1
            if pending == BATCH:
                progress(pending)
                pending = 0
    finally:
        if pending:
            progress(pending)
