"""Where a cut's head and tail windows of whole lines must stop: before a line over the grant.

Why: a line cut keeps ``k`` lines, a fixed share of them from the head and the rest from the
tail, and searches for the largest ``k`` that fits. A line is an atom, so one longer than the
whole grant (a ``set -x`` echo of a long command first in a log, a source map last in a bundle)
can never be kept; yet every ``k`` whose head (or tail) share reached it failed, the search
settled on two lines, and most of the grant went unused. The windows now stop before such a
line and the other window takes the rest of ``k`` (:func:`capped_split`): the over-long lines
lie in the omitted range, and the windows grow with ``k`` again, so the search finds the fill.

Finding those lines costs nothing for the usual text: a line can count more tokens than the
grant only when it has more than a quarter as many characters (no encoding we know spends more
than a token a UTF-8 byte), and the running maximum of line lengths from each end finds the
first such line by bisection. Only those lines are counted, and a long one by a prefix first.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

__all__ = ["capped_split", "over_long_caps"]

_CHECKED = 8
"""Lines counted from each end, at most, before a window is left uncapped (its old search)."""
_PREFIX_CHARS_PER_TOKEN = 8
"""A long line is first counted by this many characters a token of the grant: most over-long
lines are told without tokenizing all of a 2 MB line."""


def over_long_caps(lines: Sequence[str], budget: int, frame: Callable[[], int],
                   count: Callable[[str], int], memo: dict[str, Any]) -> tuple[int, int]:
    """(head cap, tail cap): how many lines the head window may hold (those before the first line
    counting more tokens than ``budget`` less ``frame()``, what the cut adds around its lines) and
    the tail window (those after the last); ``len(lines)`` each when no line does. ``memo`` is
    kept per text (the cut's ``probe_entry``): its line lengths' running maxima and the counts of
    the lines checked, whatever the grant."""
    n = len(lines)
    if n == 0:
        return n, n
    if "longest" not in memo:
        lengths = [len(line) for line in lines]
        memo["longest"] = (list(accumulate(lengths, max)), list(accumulate(reversed(lengths), max)))
        memo["counted"] = {}
    from_head, from_tail = memo["longest"]
    if from_head[-1] <= budget // 4:  # no line long enough: the usual case, told in O(1)
        return n, n
    limit = budget - frame()
    if limit <= 0:  # nothing fits beside the frame anyway
        return n, n
    counted: dict[int, tuple[int, int]] = memo["counted"]

    def over(i: int) -> bool:
        line = lines[i]
        chars, tokens = counted.get(i, (0, 0))
        if tokens > limit or chars == len(line):
            return tokens > limit
        prefix = line[:max(chars, limit * _PREFIX_CHARS_PER_TOKEN)]
        tokens = count(prefix)
        if tokens <= limit and len(prefix) < len(line):
            prefix, tokens = line, count(line)
        counted[i] = (len(prefix), tokens)
        return tokens > limit

    def first(longest: list[int]) -> int:
        """Index (from its end) of the first over-long line; ``n`` when none is found."""
        shortest = limit // 4
        for _ in range(_CHECKED):
            at = bisect_right(longest, shortest)
            if at == n:
                return n
            if over(at if longest is from_head else n - 1 - at):
                return at
            shortest = longest[at]  # a line no longer than one that fits is taken to fit
        return n

    head = first(from_head)
    return head, (n if head == n else first(from_tail))


def capped_split(k: int, head: int, caps: tuple[int, int]) -> tuple[int, int]:
    """``k`` kept lines as (head, tail) windows: ``head`` as the caller shares them, then each
    window held to its cap (:func:`over_long_caps`) with the rest given to the other. Both
    windows grow with ``k`` when ``head`` does by at most one a step; ``k`` is at most the sum
    of the caps."""
    head_cap, tail_cap = caps
    head = min(head, head_cap)
    tail = min(k - head, tail_cap)
    return k - tail, tail
