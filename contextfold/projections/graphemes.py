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

A terminal escape sequence (:data:`ESCAPE_SEQUENCE`: a colour, a cursor move, a window title) is
kept or cut whole in the same way: it prints nothing, and half of one (``ESC [`` at a kept head's
end, ``1G`` at a tail's start) shows the model bytes the command never printed as text. A
one-line npm spinner redrawn with ``ESC [1G`` has no whitespace, so its words cut fell inside
one in a third of the budgets tried.

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

import re

import regex

__all__ = ["ESCAPE_SEQUENCE", "ceil_boundary", "floor_boundary", "head_chars"]

_CLUSTER = regex.compile(r"\X")

ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")
r"""Terminal control sequences that colour or title, never print: CSI (``ESC [ … m``), a
character-set designation (``tput sgr0`` ends its reset with ``ESC ( B``: ``error\x1b(B\x1b[m:``
hid the error), and OSC (a window title, an ``ESC ] 8`` hyperlink) up to BEL or ``ESC \``. None
spans a newline, so stripping them from the whole text strips them from each line alone."""

_ESCAPE_REACH = 2048
"""How far back from a cut an escape sequence is looked for: an OSC hyperlink's URL may be long;
one longer than this is cut as text."""


def _escape_around(text: str, i: int) -> tuple[int, int] | None:
    """The escape sequence ``i`` falls strictly inside, as (start, end), or None. It starts at
    one of the last two ESCs before ``i``: a CSI holds none after its first, an OSC one more in
    its ``ESC \\`` terminator."""
    reach = max(0, i - _ESCAPE_REACH)
    start = text.rfind("\x1b", reach, i)
    for _ in range(2):
        if start < 0:
            return None
        match = ESCAPE_SEQUENCE.match(text, start)
        if match is not None:
            return (start, match.end()) if match.end() > i else None
        start = text.rfind("\x1b", reach, start)
    return None


def ceil_boundary(text: str, i: int) -> int:
    """The least cluster boundary of ``text`` at or after ``i`` (clamped to ``[0, len(text)]``)
    outside every escape sequence: where a kept *tail* may start. An escape starts with ESC, a
    control character, which always has a cluster boundary before it: so a cluster boundary at
    or after an escape's end is never inside another."""
    escape = _escape_around(text, i) if 0 < i < len(text) else None
    return _cluster_ceil(text, i if escape is None else escape[1])


def _cluster_ceil(text: str, i: int) -> int:
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
    """The greatest cluster boundary of ``text`` at or before ``i`` (clamped to ``[0, len(text)]``)
    outside every escape sequence: where a kept *head* may end. (An escape's last letter and a
    combining mark after it are one cluster, whose start is inside the escape: hence the loop.)"""
    while True:
        floor = _cluster_floor(text, i)
        escape = _escape_around(text, floor) if 0 < floor < len(text) else None
        if escape is None:
            return floor
        i = escape[0]


def _cluster_floor(text: str, i: int) -> int:
    """The greatest cluster boundary of ``text`` at or before ``i``.

    When ``i`` is inside a cluster, its start is found by stepping back 1, 2, 4, … characters
    until the first boundary after the step is at or before ``i``, then walking forward by
    clusters: O(length of the clusters around ``i``)."""
    n = len(text)
    if i <= 0 or i >= n:
        return min(max(i, 0), n)
    if _cluster_ceil(text, i) == i:
        return i
    step = 1
    while True:
        q = max(0, i - 1 - step)
        start = _cluster_ceil(text, q)
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
