"""The words cut: a head and a tail of a text's characters around a marker, for prose whose lines
are too long to keep whole (:func:`contextfold.projections.truncate.truncate` falls back to it).

Apart from the line, JSON and chunk cuts because its ends are its own problem: where a word or a
CJK clause ends, a grapheme cluster boundary, and a code fence the cut must close and re-open.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate

from contextfold.projections.code_fences import closing_fence, fence_after, fence_states
from contextfold.projections.graphemes import ceil_boundary, floor_boundary
from contextfold.projections.line_counts import split_lines
from contextfold.projections.line_windows import fit_line_windows, kept_probe, probe_entry
from contextfold.projections.truncation_result import TokenCounter, Truncation, marker_only, truncation_of

__all__ = ["has_fence", "truncate_words", "words_below_lines"]


def has_fence(text: str) -> bool:
    """Whether ``text`` may hold a code fence (a cut then keeps fences balanced)."""
    return "```" in text or "~~~" in text


def truncate_words(text: str, original_tokens: int, max_tokens: int,
                    count: TokenCounter) -> Truncation | None:
    """A head and a tail of ``text``'s characters (half each of the kept count), the head ending
    and the tail starting at a space or CJK stop where there is one near (:func:`_word_end`),
    around a marker; None when not even one character fits beside the marker. For prose whose
    lines are too long to keep whole.
    Both ends then move to a grapheme cluster boundary, toward keeping less (:mod:`graphemes`):
    a line with no whitespace (a progress bar, an emoji run) is cut by characters, and a kept
    end must not be an orphan accent or half a flag. A head that ends inside a code fence closes
    it before the marker and a tail that starts inside one re-opens it after, as line cuts do:
    the rest of the request (a log excerpt's ``[full log: …]`` line) must not read as code."""
    n = len(text)
    entry = probe_entry(("words", text, count), n)
    if "fences" not in entry:
        entry["fences"] = None
        if has_fence(text):
            lines, _ = split_lines(text)
            entry["fences"] = (list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0)),
                               fence_states(lines))
    fences: tuple[list[int], list[str | None]] | None = entry["fences"]

    def around_marker(head: int, tail_start: int) -> tuple[list[str], list[str]]:
        """The fence closer before the marker and the opener after it, if any."""
        if fences is None:
            return [], []
        starts, states = fences
        at = bisect_right(starts, head) - 1  # the line the head ends in, partly shown
        before = fence_after(states[at], text[starts[at]:head])
        at = bisect_right(starts, tail_start) - 1  # the line the tail starts in
        after = states[at] if tail_start == starts[at] else states[at + 1]
        return ([] if before is None else [closing_fence(before)]), ([] if after is None else [after])

    def ends(k: int) -> tuple[int, int]:
        head, tail_start = _word_end(text, k - k // 2), _word_start(text, n - k // 2)
        head, tail_start = floor_boundary(text, head), ceil_boundary(text, tail_start)
        if fences is not None:
            tail_start = _tail_past_fence_piece(text, fences, tail_start)
        return head, max(tail_start, head)

    def render(k: int) -> str:
        head, tail_start = ends(k)
        close, reopen = around_marker(head, tail_start)
        marker = f"… [{tail_start - head} characters omitted] …"
        return kept_probe("\n".join([text[:head], *close, marker, *reopen, text[tail_start:]]))

    found = fit_line_windows(n - 1, render, count, max_tokens, entry["probes"])
    if found is None or found[0] == 0:
        return None
    k, out_text, tokens = found
    head, tail_start = ends(k)
    if head == 0 and tail_start == n:  # the room held only part of a cluster
        return None
    omitted = tail_start - head
    return truncation_of(out_text, strategy="words", unit="char", original=text,
                         original_tokens=original_tokens, tokens=tokens,
                         kept=[(1, head), (tail_start + 1, n)], omitted=omitted, omitted_chars=omitted)


_SPACES = frozenset(" \n\u3000")
"""Where a words cut's head ends before, and its tail starts after: a space, a line break, an
ideographic space."""
_STOPS = frozenset("。，！？；：、")
"""CJK punctuation a head may end with and a tail start after: Chinese and Japanese prose has no
spaces between words, only these between clauses."""
_WORD_REACH = 32
"""How far a words cut's end moves to a word break, at most (and at most half of what it keeps):
past it the cut is at a grapheme cluster boundary instead. Why a bound: a one-line CJK page has
a space only in its title and its footer, and a head moved back to the last space before its
cut kept the title alone: a grant of ~4,900 tokens sent 23."""


def _word_end(text: str, i: int) -> int:
    """Where a head of ``i`` characters ends: before the last space, or after the last CJK stop,
    at most :data:`_WORD_REACH` characters and half the head back; else ``i``. Monotone in ``i``:
    a break within reach of a head is within reach of every shorter head that it ends."""
    n = len(text)
    for j in range(i, max(0, i - min(_WORD_REACH, i // 2)), -1):
        if (j < n and text[j] in _SPACES) or text[j - 1] in _STOPS:
            return j
    return i


def _word_start(text: str, i: int) -> int:
    """Where a tail from ``i`` starts: after the first space or CJK stop at or past ``i - 1``, at
    most :data:`_WORD_REACH` characters and half the tail on; else ``i`` (monotone as
    :func:`_word_end`)."""
    n = len(text)
    for j in range(i, min(n, i + min(_WORD_REACH, (n - i) // 2)) + 1):
        if 0 < j < n and (text[j - 1] in _SPACES or text[j - 1] in _STOPS):
            return j
    return i


def _tail_past_fence_piece(text: str, fences: tuple[list[int], list[str | None]], tail_start: int) -> int:
    """``tail_start``, or the first cluster boundary after it, in its line, from which the rest of
    the line does not read otherwise at a line's start (else the start of the next line): shown
    after the marker, the last three of a closing fence's four backticks opened a fence the text
    never had (a words cut of ``text`` then ```` ```` ```` left the rest of the request as code).

    The first such boundary at or after ``tail_start``, not the next line: then a tail starting
    earlier (a larger grant's) never starts later. Moved to the next line, a tail that reached a
    mid-line ```` ```js ```` went to the text's end, and one more token showed less (5
    characters, then 4)."""
    starts, states = fences
    at = bisect_right(starts, tail_start) - 1
    if tail_start == starts[at]:
        return tail_start
    end = text.find("\n", tail_start)
    line_end = len(text) if end < 0 else end
    state = states[at + 1]
    while tail_start < line_end and fence_after(state, text[tail_start:line_end]) != state:
        tail_start = ceil_boundary(text, tail_start + 1)
    return tail_start if tail_start < line_end else len(text) if end < 0 else end + 1


def _lines_kept(cut: Truncation) -> int:
    return sum(r.end - r.start + 1 for r in cut.kept)


def words_below_lines(text: str, original_tokens: int, max_tokens: int, count: TokenCounter,
                      by_words: Truncation, line_cut: Callable[[int], tuple[Truncation, bool, int]],
                      *, held: bool = False) -> Truncation | None:
    """The words cut ``by_words`` of a line-based cut, kept to at most the characters the line
    cut keeps at the smallest larger grant whose windows hold more lines (``line_cut(grant)``:
    the line cut, whether its windows are held off over-long lines, its characters); None where
    the line cut is to be shown instead. ``held``: the line cut at this grant keeps lines, held
    off the over-long ones (a log's, a text's): the words are shown only while every grant up
    to that smaller larger one is held off too, else those grants would show the same lines.

    Why: the words cut fills its grant, a few characters a token, and the first grant that
    showed lines kept only those its windows hold (a file's last line, 3 characters beside a
    marker), so one more token showed fewer characters (15 then 3 on an SWE-agent observation;
    25 of its 39 long ones dropped so as files, and as logs, markdown and text). Held off, a log
    showed its words until one over-long line was no longer over the grant alone, though the
    windows still could not hold it: two lines of 260 characters showed 273 characters at 73
    tokens, the line alone (261) at 74. Capped, the characters shown never fall as the grant
    grows: the words cut grows to the cap, then the lines take over with at least as many. The cap
    is looked for only when the words cut keeps more than the shorter of the text's end lines
    (what the windows keep is at least), so a minified bundle's grants are not searched."""
    def chars(cut: Truncation | None) -> int:
        return 0 if cut is None else len(text) - cut.omitted_chars

    lines, _ = split_lines(text)
    now, _, kept_now = line_cut(max_tokens)
    if not held and chars(by_words) <= min(len(lines[0]), len(lines[-1])) + 1:
        return by_words
    kept = _lines_kept(now)
    low, high = max_tokens, max_tokens + 1  # the same lines kept, then more
    while _lines_kept(line_cut(high)[0]) <= kept:
        if high >= original_tokens:  # no grant short of the whole text keeps more lines
            return None if held and not line_cut(high)[1] else by_words
        low, high = high, min(original_tokens, high + 2 * (high - max_tokens))
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if _lines_kept(line_cut(mid)[0]) > kept else (mid, high)
    if held and not line_cut(low)[1]:  # a larger grant shows these lines: so does this one
        return None
    cap = line_cut(high)[2]
    if chars(by_words) <= cap:
        return by_words
    low, high = -1, max_tokens  # the largest grant whose words cut keeps no more than the cap
    found: Truncation | None = None
    while high - low > 1:
        mid = (low + high) // 2
        cut = truncate_words(text, original_tokens, mid, count)
        if chars(cut) <= cap:
            low, found = mid, cut
        else:
            high = mid
    if held and chars(found) <= kept_now:
        return None
    return found or marker_only(text, original_tokens, "line", len(lines), count)
