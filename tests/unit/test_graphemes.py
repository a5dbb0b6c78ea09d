"""Grapheme cluster boundaries for cuts: the helpers agree with a whole-text segmentation."""

from __future__ import annotations

import unicodedata

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections.graphemes import ESCAPE_SEQUENCE, ceil_boundary, floor_boundary

__all__ = ["CLUSTER_PIECES", "boundaries", "clustered_text", "orphan_at"]

CLUSTER_PIECES = [
    "a", "z", " ", "\r", "\n", "\r\n", "漢", "é",
    "e\u0301", "\u0301", "\u0301\u0302\u0303",                # combining marks, stacked, orphaned
    "\U0001F469\u200D\U0001F4BB", "\u200D",                   # ZWJ sequence 👩‍💻, a lone ZWJ
    "\U0001F1EB", "\U0001F1F7", "\U0001F1EB\U0001F1F7",       # regional indicators, a flag
    "\u2764\uFE0F", "\uFE0E", "\U0001F44D\U0001F3FD", "\U0001F3FB",  # variation selector, modifier
    "\u1100\u1161\u11A8", "\u0915\u094D\u0937", "\u0600", "\u0903",  # Hangul jamo, conjunct, prepend
]
"""Pieces that make texts dense in multi-code-point clusters and in orphans of them."""

clustered_text = st.lists(st.sampled_from(CLUSTER_PIECES), max_size=40).map("".join)

_CLUSTER = regex.compile(r"\X")


def boundaries(text: str) -> list[int]:
    """Every cluster boundary of ``text``, segmented whole from its start (the oracle)."""
    return [0, *(m.end() for m in _CLUSTER.finditer(text))]


_REGIONAL = range(0x1F1E6, 0x1F200)
_SELECTORS = {"\uFE0E", "\uFE0F"}
_MODIFIERS = range(0x1F3FB, 0x1F400)


def _extends(c: str) -> bool:
    return bool(unicodedata.combining(c)) or c in _SELECTORS or ord(c) in _MODIFIERS


def _pictograph(c: str) -> bool:
    return c == "\u2764" or (ord(c) >= 0x1F300 and ord(c) not in _MODIFIERS)


def orphan_at(text: str, i: int) -> bool:
    """Whether a cut of ``text`` at ``i`` splits one of the common clusters, by hand-written rules
    independent of the ``regex`` module: a combining mark, ZWJ, variation selector or emoji
    modifier right after the cut (unless a control is right before it: then the mark is an orphan
    in the source already), a pictograph joined by a ZWJ to the one before, half a
    regional-indicator pair, CR LF."""
    if not 0 < i < len(text):
        return False
    after, before = text[i], text[i - 1]
    if before == "\r" and after == "\n":
        return True
    if unicodedata.category(before) == "Cc":
        return False
    if _extends(after) or after == "\u200D":
        return True
    if before == "\u200D" and _pictograph(after):
        j = i - 2
        while j >= 0 and _extends(text[j]):
            j -= 1
        return j >= 0 and _pictograph(text[j])
    if ord(after) in _REGIONAL and ord(before) in _REGIONAL:
        run = 0
        while run < i and ord(text[i - 1 - run]) in _REGIONAL:
            run += 1
        return run % 2 == 1
    return False


@settings(max_examples=400, deadline=None)
@given(text=clustered_text, data=st.data())
def test_floor_and_ceil_are_the_nearest_boundaries_of_the_whole_text(text: str, data: st.DataObject) -> None:
    bounds = boundaries(text)
    i = data.draw(st.integers(-2, len(text) + 2))
    clamped = min(max(i, 0), len(text))
    assert floor_boundary(text, i) == max(b for b in bounds if b <= clamped)
    assert ceil_boundary(text, i) == min(b for b in bounds if b >= clamped)
    assert not orphan_at(text, floor_boundary(text, i)) and not orphan_at(text, ceil_boundary(text, i))


@settings(max_examples=200, deadline=None)
@given(text=clustered_text)
def test_both_are_monotone(text: str) -> None:
    floors = [floor_boundary(text, i) for i in range(len(text) + 1)]
    ceils = [ceil_boundary(text, i) for i in range(len(text) + 1)]
    assert floors == sorted(floors) and ceils == sorted(ceils)


def test_the_common_clusters_are_never_split() -> None:
    flags = "\U0001F1FA\U0001F1F8\U0001F1EB\U0001F1F7"
    assert [floor_boundary(flags, i) for i in range(5)] == [0, 0, 2, 2, 4]
    assert [ceil_boundary(flags, i) for i in range(5)] == [0, 2, 2, 4, 4]
    coder = "x\U0001F469\u200D\U0001F4BBy"
    assert [floor_boundary(coder, i) for i in range(6)] == [0, 1, 1, 1, 4, 5]
    zalgo = "a" + "\u0301" * 1000 + "b"
    assert floor_boundary(zalgo, 500) == 0 and ceil_boundary(zalgo, 500) == 1001
    assert floor_boundary("ab\r\ncd", 3) == 2 and ceil_boundary("ab\r\ncd", 3) == 4


ESCAPES = ["\x1b[1G", "\x1b[0K", "\x1b[31;1m", "\x1b(B", "\x1b]8;;https://x.test/a\x1b\\", "\x1b]0;title\x07"]
"""Terminal escape sequences: a cut keeps or drops each whole (``graphemes.ESCAPE_SEQUENCE``)."""

escaped_text = st.lists(st.sampled_from(CLUSTER_PIECES + ESCAPES + ["\x1b", "["]), max_size=40).map("".join)


def _inside_escape(text: str, i: int) -> bool:
    return any(m.start() < i < m.end() for m in ESCAPE_SEQUENCE.finditer(text))


@settings(max_examples=300, deadline=None)
@given(text=escaped_text)
def test_no_cut_falls_inside_an_escape_sequence_and_both_stay_monotone(text: str) -> None:
    floors = [floor_boundary(text, i) for i in range(len(text) + 1)]
    ceils = [ceil_boundary(text, i) for i in range(len(text) + 1)]
    assert floors == sorted(floors) and ceils == sorted(ceils)
    bounds = set(boundaries(text))
    for i in range(len(text) + 1):
        for cut in (floors[i], ceils[i]):
            assert cut in bounds and not _inside_escape(text, cut), (text, i, cut)
        assert floors[i] <= i <= ceils[i]


def test_an_escape_sequence_is_kept_or_cut_whole() -> None:
    text = "ab\x1b[31;1mcd"  # the escape spans 2..9
    assert [floor_boundary(text, i) for i in range(12)] == [0, 1, 2, 2, 2, 2, 2, 2, 2, 9, 10, 11]
    assert [ceil_boundary(text, i) for i in range(12)] == [0, 1, 2, 9, 9, 9, 9, 9, 9, 9, 10, 11]
    mark = "a\x1b[0m\u0301b"  # a combining mark after the escape joins its last letter's cluster
    assert floor_boundary(mark, 5) == 1 and ceil_boundary(mark, 3) == 6
    assert floor_boundary("a\x1b[ x", 3) == 3  # ESC [ and a space: no sequence, cut as text
