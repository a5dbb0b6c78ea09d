"""Which line of a file each line of a text to cut is: what a line cut's marker and kept ranges name.

Why: a file excerpt's lines are the file's from its first line on (a read of lines 1000-3000 is
numbered from 1000), but a stale rest's text (:mod:`~contextfold.projections.stale_reads`) is not:
a note line heads it and one marker line stands for each run of lines a newer read covers.
Numbered from the rest's first line, a cut showed file line 143 and then said
``[773 lines omitted: lines 143–857]``, and the manifest said it kept lines 1-142 and 858-999 of
a 1000-line file: the model, which edits by line number, was told the wrong lines.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

__all__ = ["FileLines"]


class FileLines(NamedTuple):
    """The file lines of a text's lines: runs of consecutive text lines that are consecutive file
    lines. A text line in no run is the text's own (a note, a marker): it has no file line."""

    runs: tuple[tuple[int, int, int], ...]
    """``(first text line (0-based), its file line, how many lines)``, in text order."""

    @classmethod
    def from_line(cls, first_line: int, size: int) -> FileLines:
        """A text of ``size`` lines that are the file's from line ``first_line`` on (an excerpt)."""
        return cls(((0, first_line, size),) if size else ())

    def numbered(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The file lines of text lines ``lo..hi-1`` (0-based), as runs of consecutive file lines
        (1-based, inclusive), in order; text lines with no file line are skipped."""
        out: list[tuple[int, int]] = []
        at = max(bisect_right(self.runs, (lo, float("inf"))) - 1, 0)
        for start, line, size in self.runs[at:]:
            if start >= hi:
                break
            a, b = max(start, lo), min(start + size, hi)
            if a >= b:
                continue
            first, last = line + a - start, line + b - 1 - start
            if out and out[-1][1] == first - 1:
                out[-1] = (out[-1][0], last)
            else:
                out.append((first, last))
        return out
