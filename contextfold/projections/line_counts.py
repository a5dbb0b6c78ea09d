"""Exact token counts of texts made of whole lines of one text, without tokenizing them whole.

Why: safe truncation searches for the largest head and tail windows of lines that fit
(``truncate.fit_line_windows``), and each probe counted its whole candidate text. A long run's
first build of a turn cuts the unit at the edge of the budget to a new size, and its probes,
each budget-sized, were a fifth of that build (~7 tokenizations of ~20k tokens on the 10k-message
run).

Why exact: a tiktoken encoding splits text into pieces with a regex and encodes each piece
apart, so a count is the sum over pieces. For the encodings we know
(``TokenCounter.line_splitting``), a piece never spans the
newline before a line that starts "plainly": ``count(a + "\\n" + b) == count(a + "\\n") +
count(b)`` for any ``a``. So a candidate is cut into *segments* at such lines, and a segment
made of original lines only is an original *block* (lines from one plain start to the next),
counted once per input and summed by prefix; only the segments at the edges of the windows
(and the marker) are tokenized per probe. The counts are exactly the whole text's:
``tests/unit/test_line_counts.py`` checks them against the tokenizer, and truncation results
are identical with and without this.

Blocks are found lazily from each end: a probe touches about as many lines as it keeps, so a
2 MB log cut to a small budget is not tokenized whole.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain

from contextfold.domain.fork_locks import fork_safe_lock

__all__ = ["KnownBlocks", "LineCounts", "LineSplitting", "joined", "split_lines"]

KnownBlocks = tuple[Sequence[int], Sequence[int]]
"""Block starts of a text's lines, ascending from 0, and the tokens of ``lines[0:start]`` for
each: where the counter that counted the text whole cut it (``TokenCounter.count``). Every
start is a line the encoding splits before, but not every such line is a start."""


def _nothing_known(text: str) -> KnownBlocks | None:
    return None


def _utf8(text: str) -> bytes:
    return text.encode()


@dataclass(frozen=True, slots=True)
class LineSplitting:
    """What an encoding lends to count texts by line blocks (``TokenCounter.line_splitting``).

    ``splits_before(line)`` holds only when the encoding never joins a piece across the
    newline before ``line``; ``count`` is that encoding's count, uncached (a :class:`LineCounts`
    keeps its blocks' counts itself); ``known(text)`` the blocks a counter already counted
    ``text`` by, if it did; ``alike(text)`` the UTF-8 of a text the encoding counts as many
    tokens as ``text`` (the key a segment's count is kept by, so texts that differ only where
    the count cannot, such as the numbers of a truncation marker, share it). ``word_ends``: the
    encoding ends a piece after every ASCII letter or digit that an ASCII character of neither
    kind follows, so a text's count is the sum of its parts' counts when cut there (JSON
    truncation counts its renders that way: ``json_pieces``)."""

    splits_before: Callable[[str], bool]
    count: Callable[[str], int]
    known: Callable[[str], KnownBlocks | None] = _nothing_known
    alike: Callable[[str], bytes] = _utf8
    word_ends: bool = False


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split on ``\\n`` only (``\\r`` stays on its line); report a final newline.

    ``str.splitlines`` would also split on form feeds and U+2028, which are
    not line boundaries of a log or a source file.
    """
    lines = text.split("\n")
    trailing = len(lines) > 1 and lines[-1] == ""
    if trailing:
        lines.pop()
    return lines, trailing


def joined(lines: Sequence[str], items: Sequence[str | range], end: str) -> str:
    """The text :meth:`LineCounts.count` counts: ``"\\n".join`` of the items' lines, then ``end``
    (an item is one extra line, or a run ``range(a, b)`` of ``lines``)."""
    pieces = [lines[item.start:item.stop] if isinstance(item, range) else (item,) for item in items]
    return "\n".join(chain.from_iterable(pieces)) + end


class LineCounts:
    """Token counts of ``"\\n".join(items) + end``, where each item is one extra line (a str) or
    a run of the original ``lines``: a head ``range(0, h)`` or a tail ``range(a, len(lines))``.
    """

    __slots__ = ("__weakref__", "_alike", "_count", "_head_next", "_head_starts", "_head_sums", "_known",
                 "_lines", "_lock", "_segment_chars", "_segments", "_splits", "_tail_next", "_tail_starts",
                 "_tail_sums")

    def __init__(self, lines: Sequence[str], rule: LineSplitting, known: KnownBlocks | None = None) -> None:
        self._lines = lines
        self._count = rule.count
        self._splits = rule.splits_before
        self._alike = rule.alike
        self._known = known
        self._start_over()
        self._lock = fork_safe_lock(self._start_over)
        """Truncation keeps one object per input text for the whole process (``truncate._PROBES``),
        so two threads may count with it at once; its block lists grow as it goes. In a forked
        child whose parent's thread held it, the lists may be half grown (a sum appended, not its
        start): they start over (:mod:`~contextfold.domain.fork_locks`)."""

    def _start_over(self) -> None:
        """The tables as made: nothing scanned but what ``known`` gives, no segment counted."""
        lines, known = self._lines, self._known
        # Block starts: line 0 and every line the encoding splits before. From the head:
        # ascending starts with the tokens of lines[0:start]; from the tail: descending starts
        # with the tokens of lines[start:last start], the last block left out (it ends the text).
        self._head_starts = [0]
        self._head_sums = [0]
        self._head_next = 1
        self._tail_starts: list[int] = []
        self._tail_sums: list[int] = []
        self._tail_next = len(lines) - 1
        if known is not None:  # the whole text's blocks, counted already: nothing left to scan
            starts, sums = known
            self._head_starts, self._head_sums = list(starts), list(sums)
            self._tail_starts = self._head_starts[::-1]
            self._tail_sums = [sums[-1] - s for s in reversed(sums)]
            self._head_next, self._tail_next = len(lines), -1
        self._segments: dict[bytes, int] = {}
        """Edge segments counted, by ``rule.alike`` of their text. The probes of one search, and
        the searches of the builds that cut this text again to a slightly different size (a
        long run's unit at the budget's edge, every turn), count many of the same edge lines:
        a third of the segments of the 10k-message run's builds were counted before, at ~12 us
        a short line. Each probe's marker is new text (its line numbers), but not new to
        ``alike``."""
        self._segment_chars = 0
        """Characters of the texts in ``_segments`` (bounded by ``_SEGMENT_CHARS_KEPT``)."""

    def _starts_block(self, i: int) -> bool:
        return i == 0 or self._splits(self._lines[i])

    def _block_tokens(self, start: int, stop: int) -> int:
        return self._count("\n".join(self._lines[start:stop]) + "\n")

    def _scan_head(self, upto: int) -> None:
        """Know every block start up to line ``upto`` (inclusive) from the head."""
        starts, sums = self._head_starts, self._head_sums
        for i in range(self._head_next, upto + 1):
            if self._starts_block(i):
                sums.append(sums[-1] + self._block_tokens(starts[-1], i))
                starts.append(i)
        self._head_next = max(self._head_next, upto + 1)

    def _scan_tail(self, downto: int) -> None:
        """Know every block start down to line ``downto`` (inclusive) from the tail."""
        starts, sums = self._tail_starts, self._tail_sums
        for i in range(self._tail_next, downto - 1, -1):
            if self._starts_block(i):
                if starts:
                    sums.append(sums[-1] + self._block_tokens(i, starts[-1]))
                else:
                    sums.append(0)
                starts.append(i)
        self._tail_next = min(self._tail_next, downto - 1)

    def _run(self, a: int, b: int, from_a: bool) -> tuple[int, int, int, int | None] | None:
        """For the run ``lines[a:b]``: the first block start at or past ``a`` (past it unless
        ``from_a``), the last block start, the tokens of the whole blocks between those two, and
        the tokens of the last block when it ends at ``b`` (``b`` a known start: a head run
        cut at a block's end), else None. None when there is no such first start inside the run."""
        first = a if from_a else a + 1
        if a == 0 and b < len(self._lines):
            self._scan_head(b - 1)
            starts, sums = self._head_starts, self._head_sums
            lo = bisect_left(starts, first)
            hi = bisect_right(starts, b - 1) - 1
            if lo > hi:
                return None
            whole = sums[hi + 1] - sums[hi] if hi + 1 < len(starts) and starts[hi + 1] == b else None
            return starts[lo], starts[hi], sums[hi] - sums[lo], whole
        self._scan_tail(a)  # b == len(lines): starts descending, so searched by their negation
        starts, sums = self._tail_starts, self._tail_sums
        hi = bisect_right(starts, -first, key=operator.neg) - 1
        if hi < 0:
            return None
        return starts[hi], starts[0], sums[hi], None

    def count(self, items: Sequence[str | range], end: str) -> int:
        """Tokens of ``"\\n".join(lines of items) + end``, exactly as ``count`` of that text."""
        with self._lock:
            return self._count_items(items, end)

    def _count_items(self, items: Sequence[str | range], end: str) -> int:
        lines = self._lines
        n = len(lines)
        total = 0
        segment: list[str] = []  # lines of the open segment, each to be followed by "\n"
        # The open segment's tokens when it is exactly one known block (a head run's last block,
        # cut at a block start): closed by a split or a final newline, it counts as that block.
        # A head window's edge at a block's end is then not tokenized (~10 us a probe).
        whole: int | None = None
        for item in items:
            if isinstance(item, str):
                if segment and self._splits(item):
                    total += self._segment(segment) if whole is None else whole
                    segment = []
                segment.append(item)
                whole = None
                continue
            a, b = item.start, item.stop
            if a >= b:
                continue
            if a != 0 and b != n:
                raise ValueError(f"a run must be a head or a tail of the lines, got {a}:{b} of {n}")
            joins = bool(segment) and not self._splits(lines[a])  # line a continues the open segment
            if segment and not joins:
                total += self._segment(segment) if whole is None else whole
                segment = []
            whole = None
            run = self._run(a, b, not joins and self._starts_block(a))
            if run is None:  # no block starts inside: the whole run is in the open segment
                segment.extend(lines[a:b])
                continue
            first, last, between, whole_last = run
            segment.extend(lines[a:first])
            if segment:
                total += self._segment(segment)
            total += between
            segment = list(lines[last:b])  # the last block stays open: what follows may join it
            whole = whole_last
        if segment:
            total += whole if whole is not None and end == "\n" else self._segment(segment, end)
        elif end:
            total += self._count(end)
        return total

    def _segment(self, lines: list[str], end: str = "\n") -> int:
        """Tokens of a closed segment: its lines, each followed by a newline (the last by ``end``)."""
        text = "\n".join(lines) + end
        key = self._alike(text)
        known = self._segments.get(key)
        if known is None:
            known = self._count(text)
            if self._segment_chars + len(text) > _SEGMENT_CHARS_KEPT:
                self._segments.clear()
                self._segment_chars = 0
            if len(text) <= _SEGMENT_CHARS_KEPT // 16:
                self._segments[key] = known
                self._segment_chars += len(text)
        return known


_SEGMENT_CHARS_KEPT = 64 * 1024
"""Characters of edge segments kept per text (then started over); a segment over a sixteenth of
this is not kept. Truncation keeps up to 256 texts' counts: 16 MB at most."""
