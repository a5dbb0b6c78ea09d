"""The search for the largest head and tail windows of whole lines that fit, and the order they grow in.

:func:`fit_line_windows` searches the kept line count (with :func:`probe_entry`, the memo that
a text's cuts to different sizes share); :class:`WindowChain` says which lines ``k`` kept lines
are (a head and a tail window); :func:`over_grant` tells a line no grant's windows can hold.
Apart from :mod:`truncate` because the lean log (:mod:`diagnose`) cuts its lines the same way,
and truncate.py stays under 500 lines.

Why a chain: a line cut keeps ``k`` lines, a fixed share of them from the head and the rest from
the tail, and searches for the largest ``k`` that fits. A line is an atom, so one longer than
the whole grant (a ``set -x`` echo of a long command first in a log, a source map last in a
bundle) can never be kept; every ``k`` whose head (or tail) share reached it failed, the search
settled on two lines, and most of the grant went unused. The windows were then made to stop
before such a line, the other window taking the rest of ``k``; but where they stopped depended
on the grant (a line over one grant fits a larger one), so a larger grant cut along other
windows and kept fewer lines (a 103-line file kept its last three lines at 35 tokens, then
its first and last line at 36: its 22-token first line no longer over the grant).

So the windows grow along one chain of ``k``, the same at every grant: the share's side takes
the next line unless that line is long (over :data:`_LONG_LINE` characters) and longer than all
the lines kept so far together; then the other side takes its next line (of two such lines,
the shorter is taken). A long line waits until the windows hold as many characters as it has:
one over the grant is never reached before the lines around it fill the grant, and a larger
grant keeps every line a smaller one kept (the search's probes are fixed by its outcomes, and
where two grants' outcomes first differ the larger goes up: :func:`fit_line_windows`). Until
the first long line the chain is the share itself, told in O(1); past it, it is walked once per
text, as far as the probes reach.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.projections.bounded_memo import str_bytes
from contextfold.projections.memo_budget import memo_share

__all__ = ["WindowChain", "fit_line_windows", "held_off", "kept_probe", "over_grant", "probe_entry"]

_LONG_LINE = 160
"""Characters over which a line waits for the windows to hold as many as it has: ~40 tokens and
more, under the smallest grant a cut is given (``SHRINK_FLOOR``, 48) only for dense text.
Shorter lines are taken in the share's order, as they always were."""
_PREFIX_CHARS_PER_TOKEN = 8
"""A long line is first counted by this many characters a token of the grant: most lines over
the grant are told without tokenizing all of a 2 MB line."""


def over_grant(line: str, limit: int, count: Callable[[str], int]) -> bool:
    """Whether ``line`` alone counts more than ``limit`` tokens. No encoding we know spends more
    than a token a UTF-8 byte (four a character), so a line of at most ``limit // 4`` characters
    is told without a count, and a long one by a prefix first."""
    if len(line) <= limit // 4:
        return False
    prefix = line[:max(limit, 0) * _PREFIX_CHARS_PER_TOKEN]
    if len(prefix) < len(line) and count(prefix) > limit:
        return True
    return count(line) > limit


def held_off(lines: Sequence[str], first: int, stop: int, max_tokens: int, count: Callable[[str], int],
              frame: Callable[[], int]) -> bool:
    """Whether the lines a cut left out, ``lines[first:stop]``, start and end with a line over the
    grant (less ``frame()``, the marker's tokens): then the windows hold every line outside the
    over-long ones (and those between them), and no larger grant short of them keeps more."""
    if first >= stop:
        return False
    edges = (lines[first], lines[stop - 1])
    if all(len(line) <= max_tokens // 4 for line in edges):  # the usual case: told without a count
        return False
    limit = max_tokens - frame()
    return limit > 0 and all(over_grant(line, limit, count) for line in edges)


class WindowChain:
    """The head and tail windows of ``k`` kept lines (module doc), for every ``k`` up to the
    line count: grant-independent, kept per text in its :func:`probe_entry`."""

    __slots__ = ("__weakref__", "_heads", "_kept", "_lengths", "_lock", "_n", "_share", "_shared_upto",
                 "_state")

    def __init__(self, lines: Sequence[str], share: Callable[[int], int]) -> None:
        """``share(k)``: the head window's lines of ``k`` when no long line is in the way (it
        grows by at most one a step)."""
        n = self._n = len(lines)
        self._share = share
        self._lengths = [len(line) for line in lines]
        long_at = [i for i, size in enumerate(self._lengths) if size > _LONG_LINE]
        first, last = (long_at[0], long_at[-1]) if long_at else (n, -1)
        # The chain is the share's while the windows hold no long line: up to the last k whose
        # head window stops at or before the first long line and tail window after the last.
        self._shared_upto = bisect_left(range(n + 1), True,
                                        key=lambda k: share(k) > first or k - share(k) > n - 1 - last) - 1
        self._heads: list[int] = []
        """Head windows of ``k = shared_upto + 1, ...`` as walked so far."""
        self._kept: list[int] = []
        self._lock = fork_safe_lock(self._start_over)
        self._start_over()

    def _start_over(self) -> None:
        """The walk as made: nothing past the share's part (also in a forked child whose parent's
        thread held the lock: :mod:`~contextfold.domain.fork_locks`)."""
        k = self._shared_upto
        head = self._share(k)
        tail = k - head
        self._heads = []
        sizes = self._lengths
        kept = sum(sizes[:head]) + sum(sizes[self._n - tail:]) + k  # characters, a newline a line
        self._state = (k, head, tail, kept)

    def split(self, k: int) -> tuple[int, int]:
        """(head, tail): the windows of ``k`` kept lines; each grows by at most one a step."""
        if k <= self._shared_upto:
            head = self._share(k)
            return head, k - head
        with self._lock:
            self._walk(k)
            head = self._heads[k - self._shared_upto - 1]
        return head, k - head

    def _walk(self, upto: int) -> None:
        k, head, tail, kept = self._state
        n, sizes, share, heads = self._n, self._lengths, self._share, self._heads
        while k < upto:
            at_head, at_tail = sizes[head], sizes[n - 1 - tail]
            bar = max(_LONG_LINE, kept)
            if head < share(k + 1):  # the head's turn, unless its line waits and the tail's does not
                take_head = at_head <= bar or (at_tail > bar and at_head <= at_tail)
            else:
                take_head = at_tail > bar and (at_head <= bar or at_head < at_tail)
            if take_head:
                kept += at_head + 1
                head += 1
            else:
                kept += at_tail + 1
                tail += 1
            k += 1
            heads.append(head)
        self._state = (k, head, tail, kept)


_PROBES: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Per input (text, strategy, counter): its parse and the probes already counted. A run's misfit
is cut again and again to slightly different sizes as the run grows; the searches share most
probes. Emptied past 256 inputs or its share of the memo ceiling (:mod:`contextfold.projections.memo_budget`),
counted as ``_PER_INPUT_CHAR`` bytes a character of input (its parse: lines, counts) and the
probe texts' own size."""
_probe_bytes = [0]
_PER_INPUT_CHAR = 4
"""Bytes an input holds a character of it: the text, its lines as strs (~57 bytes each besides
their text), its line counts and parse (a 185 KB log's entry held ~0.6 MB)."""
_probes_bound = [memo_share("line_probes", lambda limit: _set_probes_bound(limit))]


def _set_probes_bound(limit: int) -> None:
    _probes_bound[0] = limit
    if _probe_bytes[0] > limit:
        _PROBES.clear()
        _probe_bytes[0] = 0


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
        if len(_PROBES) >= 256 or _probe_bytes[0] >= _probes_bound[0]:
            _PROBES.clear()
            _probe_bytes[0] = 0
        entry = _PROBES[key] = {"probes": {}}
        _probe_bytes[0] += _PER_INPUT_CHAR * size
    return entry


def kept_probe(text: str) -> str:
    """``text``, counted against the memo's bound: for a probe text kept in a ``probe_entry``."""
    _probe_bytes[0] += str_bytes(text)
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
