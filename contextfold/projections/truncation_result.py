"""What a cut of content returns: :class:`Truncation`, and the two ways one is made.

Why a module of its own: the cuts live in several modules (lines and words in
:mod:`~contextfold.projections.truncate`, JSON nested past the parser in
:mod:`~contextfold.projections.json_deep`, JSON documents a line apart in
:mod:`~contextfold.projections.json_blocks`, a failing log's diagnosis in
:mod:`~contextfold.projections.diagnose`), and ``truncate`` imports each of them: the result
they share sits below all of them, so none imports ``truncate`` for its type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from contextfold.domain.errors import InvalidInputError

__all__ = ["MINIMAL_MARKER", "KeptRange", "Strategy", "TokenCounter", "Truncation", "Unit", "check_budget",
           "marker_only", "truncation_of"]

TokenCounter: TypeAlias = Callable[[str], int]
Strategy: TypeAlias = Literal["none", "lines", "fenced_lines", "words", "json", "chunks", "lean_log",
                              "marker_only"]
Unit: TypeAlias = Literal["line", "chunk", "json_member", "char", "block"]

MINIMAL_MARKER = "…"
"""Returned alone when the budget cannot hold even a real marker."""

class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KeptRange(_Frozen):
    """A kept run of units, 1-based and inclusive (``start <= end``)."""

    start: int
    end: int


class Truncation(_Frozen):
    """What a truncation kept, what it dropped, and what it cost.

    ``over_budget`` is true only when the budget could not hold even the bare
    marker; ``text`` is then :data:`MINIMAL_MARKER` and may exceed the budget.

    Every size and range is of the text that was cut, which is the text the build would have
    shown whole: for a fragment with secrets, the redacted text. So ``original_tokens - tokens``
    is what the cut dropped (the fragment's manifest line prices the same text), not the cut and
    the redaction together. A redaction keeps the line breaks of what it replaces, so line
    ranges are the logged text's lines too; characters (``original_chars``, ``char`` ranges) are
    the redacted text's, and the manifest's redaction records (offsets in the logged text) map
    them back: the logged size is ``original_chars`` plus, per record, its span less its
    placeholder and the line breaks kept.
    """

    text: str
    truncated: bool
    strategy: Strategy
    unit: Unit
    original_chars: int
    original_tokens: int
    tokens: int
    kept: tuple[KeptRange, ...]
    omitted: int = 0
    """Units dropped: lines, chunks, or JSON items + members (nested included)."""
    omitted_chars: int = 0
    """Characters cut from shortened JSON strings (or header lines of a lean log)."""
    over_budget: bool = False


def truncation_of(text: str, *, strategy: Strategy, unit: Unit, original: str, original_tokens: int,
            tokens: int, kept: Sequence[tuple[int, int]], omitted: int = 0,
            omitted_chars: int = 0) -> Truncation:
    """A cut's :class:`Truncation` (``truncated`` unless the strategy is ``none``); ``kept`` as
    1-based inclusive ranges, empty ones left out."""
    return Truncation(
        text=text, truncated=strategy != "none", strategy=strategy, unit=unit,
        original_chars=len(original), original_tokens=original_tokens, tokens=tokens,
        kept=tuple(KeptRange(start=a, end=b) for a, b in kept if a <= b),
        omitted=omitted, omitted_chars=omitted_chars,
    )


def marker_only(original: str, original_tokens: int, unit: Unit, omitted: int,
                count: TokenCounter) -> Truncation:
    """The result for a budget too small for any real marker: :data:`MINIMAL_MARKER`."""
    return Truncation(
        text=MINIMAL_MARKER, truncated=True, strategy="marker_only", unit=unit,
        original_chars=len(original), original_tokens=original_tokens,
        tokens=count(MINIMAL_MARKER), kept=(), omitted=omitted, over_budget=True,
    )


def check_budget(max_tokens: int) -> None:
    """Refuse a negative grant (:class:`InvalidInputError`): every cut's entry point checks it."""
    if max_tokens < 0:
        raise InvalidInputError(f"max_tokens must be >= 0, got {max_tokens}")
