"""Retrieval chunks cut to a grant: whole chunks only, in rank order, never one split.

Apart from :mod:`~contextfold.projections.truncate`'s cuts of one text because a list of
chunks has no lines, members or words to cut at: a chunk is kept or left out whole, and a marker
says how many were left out (:func:`truncate_chunks`, re-exported there).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextfold.projections.truncation_result import (
    TokenCounter,
    Truncation,
    check_budget,
    marker_only,
    truncation_of,
)

__all__ = ["CHUNK_SEPARATOR", "truncate_chunks"]


CHUNK_SEPARATOR = "\n\n"


def _chunk_marker(omitted: int, total: int) -> str:
    return f"… [{omitted} of {total} chunks omitted] …"


def truncate_chunks(chunks: Sequence[str], max_tokens: int, count: TokenCounter) -> Truncation:
    """Whole retrieval chunks, in the given (rank) order, joined by a blank line.

    Greedy by rank: a chunk that does not fit is skipped and a later, smaller
    one may still enter, so the budget is used without ever splitting a chunk.
    When anything is dropped a marker line says how many of how many.
    """
    check_budget(max_tokens)
    original = CHUNK_SEPARATOR.join(chunks)
    original_tokens = count(original)
    total = len(chunks)
    if original_tokens <= max_tokens:
        return truncation_of(original, strategy="none", unit="chunk", original=original,
                             original_tokens=original_tokens, tokens=original_tokens,
                             kept=[(1, total)])

    def render(kept: Sequence[int]) -> str:
        parts = [chunks[i] for i in kept]
        parts.append(_chunk_marker(total - len(kept), total))
        return CHUNK_SEPARATOR.join(parts)

    kept: list[int] = []
    text = render(kept)
    tokens = count(text)
    if tokens > max_tokens:
        return marker_only(original, original_tokens, "chunk", total, count)
    for i, chunk in enumerate(chunks):
        if count(chunk) > max_tokens - tokens + count(_chunk_marker(total, total)) + 2:
            continue  # cheap pre-check: cannot possibly fit
        candidate = render([*kept, i])
        candidate_tokens = count(candidate)
        if candidate_tokens <= max_tokens:
            kept.append(i)
            text, tokens = candidate, candidate_tokens
    ranges: list[tuple[int, int]] = []
    for i in kept:
        if ranges and ranges[-1][1] == i:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i + 1, i + 1))
    return truncation_of(text, strategy="chunks", unit="chunk", original=original,
                         original_tokens=original_tokens, tokens=tokens, kept=ranges,
                         omitted=total - len(kept))
