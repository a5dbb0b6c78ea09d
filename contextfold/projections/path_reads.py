"""The current reads of one file path (``RunState.files``), and which of them a new read can change.

Why: the fold of a file read (:mod:`~contextfold.projections.fold_files`) weighs the new read
against the current reads of its path, and it looked at every one of them. An agent that pages
through a big file (``read_file big.py start_line=k*50 end_line=k*50+49``, thousands of times, no
revision logged) keeps every window current, so each read looked at all the windows before it
and the fold of 4,000 reads of one file took seconds: quadratic in the reads of a path.

Yet under the fold's rules most of them cannot change: an older read is kept as it is unless

- it is a read (not a stale rest) at another revision: superseded, whatever its lines;
- it is a read at the same revision whose lines meet the new read's: the new one contains it, or
  shows a line both show, which may read otherwise;
- it is a stale rest (of any revision) whose lines meet the new read's: the lines it shows, or for
  one of the same revision the lines its origin read.

So the reads are kept by kind (reads by revision, stale rests apart), each kind indexed by the
lines a read can reach (:func:`reach`), and a new read looks only at the reads of other
revisions and at the ones whose lines meet its own (:meth:`PathReads.touched_by`). The reads of
another revision are each looked at once: a read at revision r supersedes every read of another
revision, so after it only reads of r and stale rests are left, and the rests are looked at only
where the new read meets them. The fold does the same as before, in the same order (the order the
reads were filed in: a stale rest in the place of the read it stands for), to fewer reads. A path
of a few reads is not indexed (:data:`INDEXED_FROM`): each of its reads is looked at.

Mutable, like the :class:`~contextfold.projections.state.RunState` it is part of: the fold
updates it in place (O(the reads it touches)), and ``RunState.snapshot`` copies it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Sequence

__all__ = ["INDEXED_FROM", "CurrentRead", "PathReads", "reach"]

CurrentRead = tuple[str, str | None, int | None, int | None]
"""A current read of a path: (fragment id, revision, start_line, end_line); a stale rest with its
origin's revision and lines."""


def reach(start: int | None, end: int | None,
          spans: Sequence[tuple[int, int]] | None = None) -> tuple[float, float]:
    """The lines ``lo..hi`` that hold every line a read of ``start..end`` (None = from the start /
    to the end, as the fold reads them: ``start or 1``), and a stale rest's ``spans``, can meet.
    Whatever range of lines a newer read names, the fold's tests of containment and overlap hold
    between the two only when the newer range's lowest..highest line meets this one, also for
    a range named backwards (lines 10-5) or lines past the named end that a rest still shows.
    A rest that shows no line reaches everything (``spans_within`` of none holds)."""
    a: float = start or 1
    b: float = math.inf if end is None else end
    lo, hi = min(a, b), max(a, b)
    if spans is not None:
        if not spans:
            return -math.inf, math.inf
        lo = min(lo, *(s for s, _ in spans))
        hi = max(hi, *(t for _, t in spans))
    return lo, hi


class _LineIndex:
    """Line ranges (``reach``) by key, found by the ranges they meet.

    Grouped by width: a finite range of group ``c`` is less than ``2**c`` lines wide, group -1
    holds the ones without an end, each group a list sorted by first line. A range of group ``c``
    that meets ``lo..hi`` starts in ``lo - 2**c + 1 .. hi``: a query bisects each group to the
    ranges that start there and checks only those. Windows of one width fall in one or two
    groups, so a window looks at the few ranges around it, not at every range of the path."""

    __slots__ = ("_groups", "_where")

    def __init__(self) -> None:
        self._groups: dict[int, list[tuple[float, int]]] = {}
        self._where: dict[int, tuple[int, float, float]] = {}
        """key -> (group, lo, hi)"""

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: int) -> bool:
        return key in self._where

    def keys(self) -> Iterator[int]:
        return iter(self._where)

    def add(self, key: int, lo: float, hi: float) -> None:
        group = -1 if hi == math.inf or lo == -math.inf else int(hi - lo).bit_length()
        insort(self._groups.setdefault(group, []), (lo, key))
        self._where[key] = (group, lo, hi)

    def remove(self, key: int) -> None:
        group, lo, _ = self._where.pop(key)
        ranges = self._groups[group]
        del ranges[bisect_left(ranges, (lo, key))]
        if not ranges:
            del self._groups[group]

    def meeting(self, lo: float, hi: float) -> Iterator[int]:
        """The keys of the ranges that share a line with ``lo..hi``."""
        where = self._where
        for group, ranges in self._groups.items():
            first = 0 if group < 0 else bisect_left(ranges, (lo - (1 << group) + 1, -1))
            for _, key in ranges[first:bisect_right(ranges, (hi, math.inf))]:
                if where[key][2] >= lo:
                    yield key

    def copy(self) -> _LineIndex:
        out = _LineIndex()
        out._groups = {group: list(ranges) for group, ranges in self._groups.items()}
        out._where = dict(self._where)
        return out


class _Index:
    """The reads of a path by kind, each kind indexed by its lines (module docstring)."""

    __slots__ = ("fresh", "stale")

    def __init__(self) -> None:
        self.fresh: dict[str | None, _LineIndex] = {}
        """Revision -> its reads that are not stale rests."""
        self.stale = _LineIndex()

    def add(self, key: int, read: CurrentRead, rest: tuple[float, float] | None) -> None:
        """Index ``read``: a stale rest when ``rest`` (its reach) is given."""
        if rest is not None:
            self.stale.add(key, *rest)
            return
        index = self.fresh.get(read[1])
        if index is None:
            index = self.fresh[read[1]] = _LineIndex()
        index.add(key, *reach(read[2], read[3]))

    def remove(self, key: int, read: CurrentRead) -> None:
        if key in self.stale:
            self.stale.remove(key)
            return
        index = self.fresh[read[1]]
        index.remove(key)
        if not index:
            del self.fresh[read[1]]

    def touched_by(self, revision: str | None, lo: float, hi: float) -> set[int]:
        keys = set(self.stale.meeting(lo, hi))
        for rev, index in self.fresh.items():
            keys.update(index.meeting(lo, hi) if rev == revision else index.keys())
        return keys

    def copy(self) -> _Index:
        out = _Index()
        out.fresh = {rev: index.copy() for rev, index in self.fresh.items()}
        out.stale = self.stale.copy()
        return out


INDEXED_FROM = 8
"""A path is indexed once it holds this many current reads; below, every read of it is looked
at, as before. Why: an index costs about a kilobyte a path, which doubled the state a read of a
file took, and most paths of a run are read a few times, where looking at each read is cheap."""


class PathReads:
    """The current reads of one path (module docstring). Iterates them as :data:`CurrentRead`
    in the order they were filed, a stale rest in the place of the read it stands for."""

    __slots__ = ("_filed", "_index", "_reads", "_rests")

    def __init__(self) -> None:
        self._reads: dict[int, CurrentRead] = {}
        """Filing number -> the read (or the stale rest that took its place): in filing order."""
        self._filed = 0
        self._index: _Index | None = None
        """Once the path holds ``INDEXED_FROM`` reads."""
        self._rests: dict[int, tuple[float, float]] | None = None
        """Until it is indexed: filing number -> the reach of the stale rest there."""

    def __iter__(self) -> Iterator[CurrentRead]:
        return iter(self._reads.values())

    def __len__(self) -> int:
        return len(self._reads)

    def touched_by(self, revision: str | None, start: int | None,
                   end: int | None) -> list[tuple[int, CurrentRead]]:
        """The reads (key, read) that a newer read of ``start..end`` at ``revision`` may change,
        in filing order: every read (not a stale rest) at another revision, and the reads at
        ``revision`` and the stale rests whose lines meet the newer read's (module docstring).
        The fold keeps every other read as it is. (Every read, on a path not yet indexed.)"""
        if self._index is None:
            return list(self._reads.items())
        keys = self._index.touched_by(revision, *reach(start, end))
        return [(key, self._reads[key]) for key in sorted(keys)]

    def file(self, read: CurrentRead) -> None:
        """File a new read (not a stale rest) after every read of the path."""
        key = self._filed
        self._filed += 1
        self._reads[key] = read
        if self._index is not None:
            self._index.add(key, read, None)
        elif len(self._reads) >= INDEXED_FROM:
            rests = self._rests or {}
            self._index = _Index()
            for filed, current in self._reads.items():
                self._index.add(filed, current, rests.get(filed))
            self._rests = None

    def drop(self, key: int) -> None:
        """A read superseded whole: no longer current."""
        read = self._reads.pop(key)
        if self._index is not None:
            self._index.remove(key, read)
        elif self._rests is not None:
            self._rests.pop(key, None)

    def replace(self, key: int, rest: CurrentRead, spans: Sequence[tuple[int, int]]) -> None:
        """Put ``rest``, the stale rest that shows ``spans`` of read ``key``, in its place."""
        lines = reach(rest[2], rest[3], spans)
        if self._index is not None:
            self._index.remove(key, self._reads[key])
            self._index.add(key, rest, lines)
        else:
            if self._rests is None:
                self._rests = {}
            self._rests[key] = lines
        self._reads[key] = rest

    def copy(self) -> PathReads:
        """An independent copy (``RunState.snapshot``): the fold updates a path's reads in place."""
        out = PathReads()
        out._reads = dict(self._reads)
        out._filed = self._filed
        out._index = None if self._index is None else self._index.copy()
        out._rests = None if self._rests is None else dict(self._rests)
        return out
