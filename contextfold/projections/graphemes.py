"""Where a cut of text may fall so that it never splits a user-perceived character.

Why: Python slices by code point, so a cut never splits a UTF-8 sequence (DESIGN.md section 7),
but one character as a reader sees it can be several code points: a letter and its combining
accent (``e`` + U+0301), an emoji ZWJ sequence (👩‍💻), a flag's two regional indicators, a base
and its variation selector or skin-tone modifier, a Hangul syllable in jamo, an Indic conjunct.
A code-point cut between them leaves the kept text ending (or starting) with an orphan mark or
half a flag: the model is shown a character the source never had. Every cut of untrusted text
that reaches a request (the words strategy's head and tail, a shortened JSON string, a lean
log's quoted error line, a compaction summary's capped statements) moves to a boundary of
extended grapheme clusters (Unicode UAX #29) with :func:`floor_boundary` or
:func:`ceil_boundary`, always toward keeping *less*, so a cut that fit its budget still does.
Both are monotone in ``i``: a larger cut never keeps less.

How: the ``regex`` module's ``\\X`` (UAX #29, updated with each Unicode release; already
installed as ``tiktoken``'s dependency) rather than hand-written rules. A match of ``\\X`` at
position ``q`` ends at the first cluster boundary after ``q`` *of the whole text*: the module
reads the text before ``q`` as context (a regional indicator's pair parity, the emoji before a
ZWJ), so the cost is that of the clusters around the cut, never of the text. Two ASCII
characters are never in one cluster but for CR LF (no ASCII character is a mark, a joiner, a
prepend, a regional indicator, Hangul or pictographic), which answers the common case without
the regex.
"""

from __future__ import annotations

import regex

__all__ = ["ceil_boundary", "floor_boundary", "head_chars"]

_CLUSTER = regex.compile(r"\X")


def ceil_boundary(text: str, i: int) -> int:
    """The least cluster boundary of ``text`` at or after ``i`` (clamped to ``[0, len(text)]``):
    where a kept *tail* may start."""
    if i <= 0:
        return 0
    if i >= len(text):
        return len(text)
    before, after = text[i - 1], text[i]
    if before < "\x80" and after < "\x80" and (before != "\r" or after != "\n"):
        return i  # two ASCII characters are two clusters, but CR LF
    match = _CLUSTER.match(text, i - 1)  # the cluster holding text[i - 1] ends at or after i
    return i if match is None else match.end()


def floor_boundary(text: str, i: int) -> int:
    """The greatest cluster boundary of ``text`` at or before ``i`` (clamped to ``[0, len(text)]``):
    where a kept *head* may end.

    When ``i`` is inside a cluster, its start is found by stepping back 1, 2, 4, … characters
    until the first boundary after the step is at or before ``i``, then walking forward by
    clusters: O(length of the clusters around ``i``)."""
    n = len(text)
    if i <= 0 or i >= n:
        return min(max(i, 0), n)
    if ceil_boundary(text, i) == i:
        return i
    step = 1
    while True:
        q = max(0, i - 1 - step)
        start = ceil_boundary(text, q)
        if start <= i:
            break
        step *= 2
    for match in _CLUSTER.finditer(text, start):  # start is a boundary: so is every match's end
        if match.end() > i:
            break
        start = match.end()
    return start


def head_chars(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, or fewer so as to end at a cluster boundary:
    the kept part of every cut that keeps a text's start."""
    return text[:floor_boundary(text, limit)]
