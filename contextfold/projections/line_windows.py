"""The search for the largest head and tail windows of whole lines that fit, and where they stop.

:func:`fit_line_windows` searches the kept line count (with :func:`probe_entry`, the memo that
a text's cuts to different sizes share); :func:`over_long_caps` and :func:`capped_split` say
where each window must stop: before a line over the grant. Apart from :mod:`truncate` because
the lean log (:mod:`diagnose`) cuts its lines the same way, and truncate.py stays under 500 lines.

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

__all__ = ["capped_split", "fit_line_windows", "kept_probe", "over_long_caps", "probe_entry"]

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


_PROBES: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Per input (text, strategy, counter): its parse and the probes already counted. A run's misfit
is cut again and again to slightly different sizes as the run grows; the searches share most
probes. Emptied past 256 inputs or 16M characters of input and probe text."""
_probe_chars = [0]


def probe_entry(key: tuple[Any, ...], size: int) -> dict[str, Any]:
    """The process-wide memo of one input's cuts: ``key`` names the input (its text first, then
    everything else the cut depends on, counter included), ``size`` is its text's length. Holds
    ``"probes"`` (for :func:`fit_line_windows`) and whatever the caller keeps (its parse). An
    unhashable key (a counter that is not) gets a fresh entry, shared with nobody."""
    try:
        entry = _PROBES.get(key)
    except TypeError:  # an unhashable counter: nothing shared
        return {"probes": {}}
    if entry is None:
        if len(_PROBES) >= 256 or _probe_chars[0] >= 16 * 1024 * 1024:
            _PROBES.clear()
            _probe_chars[0] = 0
        entry = _PROBES[key] = {"probes": {}}
        _probe_chars[0] += size
    return entry


def kept_probe(text: str) -> str:
    """``text``, counted against the memo's bound: for a probe text kept in a ``probe_entry``."""
    _probe_chars[0] += len(text)
    return text


def fit_line_windows(
    n: int,
    render: Callable[[int], str],
    count: Callable[[str], int],
    max_tokens: int,
    probes: dict[int, tuple[str | None, int]] | None = None,
    measure: Callable[[int, int], int] | None = None,
) -> tuple[int, str, int] | None:
    """The largest ``k`` in ``[0, n]`` whose ``render(k)`` fits, with its text and tokens.

    ``None`` when even ``render(0)`` does not fit. Exponential then binary
    search: each probe counts one assembled candidate, so a 2 MB input costs
    O(log n) counts of budget-sized texts. A non-monotone counter can only
    make the result shorter, never over budget: only probes that passed are
    returned. ``measure(k, max_tokens)``, when given, is ``count(render(k))`` found without
    the text (``line_counts``, ``json_pieces``): then only the answer is rendered. It may
    return ``-b`` instead, for a count over ``max_tokens`` known only to be at least ``b``
    (``b > max_tokens``): kept so in ``probes``, it decides the grants under ``b`` and is
    measured again for a larger one.
    """
    memo: dict[int, tuple[str | None, int]] = {} if probes is None else probes  # ``render`` is pure

    def fits(k: int) -> bool:
        hit = memo.get(k)
        if hit is None or 0 < -hit[1] <= max_tokens:  # not probed, or a bound this grant passes
            if measure is not None:
                hit = memo[k] = (None, measure(k, max_tokens))
            else:
                text = render(k)
                hit = memo[k] = (text, count(text))
        return 0 <= hit[1] <= max_tokens

    if not fits(0):
        return None
    lo, hi = 0, n + 1
    probe = 1
    while probe <= n:
        if fits(probe):
            lo = probe
            probe *= 2
        else:
            hi = probe
            break
    if hi == n + 1 and lo < n:
        if fits(n):
            lo = n
        else:
            hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    found, tokens = memo[lo]
    if found is None:
        found = render(lo)
        memo[lo] = (found, tokens)
    return lo, found, tokens
