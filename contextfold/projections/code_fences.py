"""Markdown code fences in a text cut by lines: which fence is open before each line.

Apart from :mod:`contextfold.projections.truncate` because it is a small grammar of its own
(CommonMark's fenced code blocks, simplified) that the line cut consults: a cut that drops the
closing line of a fence closes it again after the marker, so a request never carries a code
block left open (the rest of the prompt would read as code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from contextfold.projections.line_counts import split_lines

__all__ = ["closing_fence", "fence_after", "fence_states", "open_fence"]


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fence_states(lines: Sequence[str]) -> list[str | None]:
    """``states[i]`` = opener line of the fence open *before* line ``i`` (None if closed).

    CommonMark rules, simplified: an opener is 3+ backticks or tildes indented
    at most 3 spaces (a backtick opener's info string has no backtick); a
    closer uses the same character, at least as many, and nothing else.
    """
    states: list[str | None] = [None]
    opener: str | None = None
    char, length = "", 0
    for line in lines:
        m = _FENCE.match(line.rstrip("\r"))
        if m:
            run, rest = m.group(1), m.group(2)
            if opener is None:
                if not (run[0] == "`" and "`" in rest):
                    opener, char, length = line, run[0], len(run)
            elif run[0] == char and len(run) >= length and not rest.strip():
                opener = None
        states.append(opener)
    return states


def fence_after(opener: str | None, line: str) -> str | None:
    """The fence open after ``line`` when ``opener``'s fence (None: none) is open before it: the
    step of :func:`fence_states`, for a cut that ends or starts inside a line (a words cut)."""
    m = _FENCE.match(line.rstrip("\r"))
    if m is None:
        return opener
    run, rest = m.group(1), m.group(2)
    if opener is None:
        return None if run[0] == "`" and "`" in rest else line
    closer = closing_fence(opener)
    return None if run[0] == closer[0] and len(run) >= len(closer) and not rest.strip() else opener


def open_fence(text: str) -> str | None:
    """The opener line of a code fence left open at the end of ``text``, if any."""
    lines, _ = split_lines(text)
    return fence_states(lines)[-1]


def closing_fence(opener: str) -> str:
    """The fence run (backticks or tildes) that closes the fence ``opener`` opened."""
    m = _FENCE.match(opener.rstrip("\r"))
    assert m is not None
    return m.group(1)
