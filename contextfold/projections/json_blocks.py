"""JSON documents one after the other (a tool result's MCP text blocks), each cut as JSON.

Why: a tool result given as several text blocks (the MCP shape: one content item per record set)
is folded as one text, its blocks a line apart (``ToolResult.text_and_media``; the store keeps
only that text). Two JSON blocks make a text that is not one JSON value, so it was cut as lines,
and, its lines (the documents) longer than the grant, as characters: the head of the first
document and the tail of the last around a marker, neither of which parses (DESIGN 7: "JSON
values ... never inside a JSON token").

What is done instead (:func:`cut_blocks`): the text is read as its documents (:func:`value_spans`)
and the text between them (kept as it is: the blocks stay joined as they were); each document gets
a share of the grant, water-filled as a group's results share theirs (a short one whole, the
rest the same size), and is cut as one JSON value. Only when the line cut would have split a
document (:func:`splits_a_value`): a JSON Lines text whose line windows keep whole records is cut
as before, byte for byte; and only while every document cut keeps a useful share
(:data:`BLOCK_FLOOR`): thousands of records each cut to a marker say less than whole lines.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from contextfold.projections.json_literals import SYNTAX_DECODER
from contextfold.projections.json_shrink import nesting
from contextfold.projections.truncation_result import KeptRange, Truncation

if TYPE_CHECKING:
    from contextfold.projections.line_counts import LineSplitting

__all__ = ["BLOCK_DEPTH", "BLOCK_FLOOR", "cut_blocks", "or_blocks", "splits_a_value", "value_spans"]

_DECODER = SYNTAX_DECODER
"""The documents as a JSON cut takes one (``json_literals``: any number, ``NaN``; the cut parses
each alone again)."""
_SPACE = re.compile(r"[ \t\n\r]*")
"""JSON's whitespace, as its parser skips it."""

BLOCK_FLOOR = 48
"""The fewest tokens a document that is cut gets (as ``SHRINK_FLOOR``, a fragment's): below it
the cut is a marker, and the text is cut as lines instead."""
BLOCK_DEPTH = 100
"""Containers nested past which a document does not make its text blocks (it is cut as a text).
Why: the parser recurses, a frame a level counted from the caller's frame, and "not blocks" on a
``RecursionError`` depended on the call: two 400-level documents were blocks from a test and not
from 700 frames deeper, so one text was cut as JSON or as characters by where it was cut.
Decided by the depth, per text, the answer is the same from any stack with ~850 frames of room
(a text's documents are read once and kept: ``or_blocks``); MCP blocks are records a few levels
deep."""
_ATTEMPTS = 6
"""Tries at the shares: token counts do not add up across the joins (``}\\n{``), so the room is
lowered by the excess and the documents cut again (each cut's probes are memoised)."""


def value_spans(text: str) -> list[tuple[int, int]] | None:
    """Where ``text``'s JSON documents start and end, when it is two or more of them with a line
    break between each two (and only whitespace around them), none nested past
    :data:`BLOCK_DEPTH`; else None. Linear: each document is parsed once, left to right, and the
    first that does not parse ends the search."""
    pos = _SPACE.match(text).end()  # type: ignore[union-attr]  # matches the empty string
    spans: list[tuple[int, int]] = []
    while pos < len(text):
        if spans and "\n" not in text[spans[-1][1]:pos]:
            return None  # `{} {}`: one line, not blocks
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):  # not JSON, or past the stack (so past BLOCK_DEPTH)
            return None
        if (text.count("[", pos, end) + text.count("{", pos, end) > BLOCK_DEPTH
                and nesting(value, BLOCK_DEPTH) > BLOCK_DEPTH):  # (fewer brackets: not that deep)
            return None
        spans.append((pos, end))
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    return spans if len(spans) >= 2 else None


def splits_a_value(text: str, spans: Sequence[tuple[int, int]], kept: Sequence[tuple[int, int]],
                   first_line: int = 1) -> bool:
    """Whether a line cut that kept the lines ``kept`` (1-based, inclusive, numbered from
    ``first_line``) cut inside a document: a kept run starts or ends between two lines of one
    document (a pretty-printed block), so that what is shown of it does not parse."""
    if not kept:
        return True  # nothing kept whole: the documents are shown as a marker alone
    firsts = [text.count("\n", 0, s) + 1 for s, _ in spans]
    lasts = [first + text.count("\n", s, e - 1) for first, (s, e) in zip(firsts, spans, strict=True)]

    def inside(boundary: int) -> bool:  # between line ``boundary`` and the next, within a document
        at = bisect_right(firsts, boundary) - 1
        return at >= 0 and boundary < lasts[at]

    shift = first_line - 1
    return any(inside(a - 1 - shift) or inside(b - shift) for a, b in kept)


def _shares(room: int, sizes: Sequence[int]) -> list[int]:
    """Water-filling: a document that fits in an equal share of what is left stays whole, the
    longer ones get the same grant (``cut_text.split_room`` without its floor and remainder)."""
    left = max(room, 0)
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for rank, i in enumerate(order):
        others = len(order) - rank
        if sizes[i] * others > left:
            level = left // others
            return [min(size, level) for size in sizes]
        left -= sizes[i]
    return list(sizes)


def cut_blocks(text: str, spans: Sequence[tuple[int, int]], max_tokens: int,
               count: Callable[[str], int], cut_one: Callable[[str, int], Truncation]
               ) -> tuple[str, int, list[Truncation | None]] | None:
    """``text`` with each document cut by ``cut_one`` (a JSON cut) to its share of ``max_tokens``,
    the text between them kept; its tokens and each document's cut (None: shown whole). None when
    a document cut would get less than :data:`BLOCK_FLOOR` or no share fits."""
    pieces = [text[s:e] for s, e in spans]
    glue = [text[:spans[0][0]], *(text[e:s] for (_, e), (s, _) in pairwise(spans)),
            text[spans[-1][1]:]]
    sizes = [count(piece) for piece in pieces]
    room = max_tokens - count("".join(glue))
    for _ in range(_ATTEMPTS):
        shares = _shares(room, sizes)
        if any(share < size and share < BLOCK_FLOOR for share, size in zip(shares, sizes, strict=True)):
            return None
        cuts = [None if share >= size else cut_one(piece, share)
                for piece, share, size in zip(pieces, shares, sizes, strict=True)]
        if any(cut is not None and cut.over_budget for cut in cuts):
            return None
        parts = [glue[0]]
        for piece, cut, after in zip(pieces, cuts, glue[1:], strict=True):
            parts += [piece if cut is None else cut.text, after]
        out = "".join(parts)
        tokens = count(out)
        if tokens <= max_tokens:
            return out, tokens, cuts
        room -= tokens - max_tokens
    return None


def or_blocks(by_lines: Truncation, text: str, entry: dict[str, Any], max_tokens: int,
              count: Callable[[str], int], rule: LineSplitting | None = None,
              first_line: int = 1) -> Truncation:
    """``by_lines`` (the cut of ``text`` as text), or its documents cut one by one when ``text`` is
    several JSON documents that cut split (:func:`cut_blocks`): strategy ``json``, unit ``block``,
    every document shown (whole or cut), ``omitted`` the members and items the cuts dropped.
    ``entry``: the text's memo (``truncate.probe_entry``), where its documents are kept."""
    if "blocks" not in entry:
        entry["blocks"] = value_spans(text)
    spans: list[tuple[int, int]] | None = entry["blocks"]
    if spans is None or (by_lines.strategy in ("lines", "fenced_lines")
                         and not splits_a_value(text, spans, [(r.start, r.end) for r in by_lines.kept],
                                                first_line)):
        return by_lines
    from contextfold.projections.truncate import truncate  # (it imports this module)

    found = cut_blocks(text, spans, max_tokens, count, lambda piece, share: truncate(
        piece, share, kind="json", count=count, line_splitting=rule))
    if found is None:
        return by_lines

    out, tokens, cuts = found
    return Truncation(text=out, truncated=True, strategy="json", unit="block", original_chars=len(text),
                      original_tokens=by_lines.original_tokens, tokens=tokens,
                      kept=(KeptRange(start=1, end=len(spans)),),
                      omitted=sum(cut.omitted for cut in cuts if cut is not None),
                      omitted_chars=sum(cut.omitted_chars for cut in cuts if cut is not None))
