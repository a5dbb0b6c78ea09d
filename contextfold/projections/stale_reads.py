"""What stays of an older file read when a newer revision re-reads only part of the file.

Why: a read at a new revision superseded every read of the path at another revision whole. After
"read a.py whole at r1, edit it, read lines 10-20 at r2", the request showed lines 10-20 and
nothing else of a.py, though the model had read all of it: it lost what it knew of the other lines
without being told why. Showing the r1 read whole beside the r2 lines would show two versions of
lines 10-20 as current, which DESIGN 7 and the seed forbid (the current version wins).

So the older read stays as a *stale rest* (option (a) of the choice, not (b) "keep r1 whole with a
note"): a fragment of its own, holding the older read's text with the lines a newer read covers
cut out, headed by a one-line note that names its revision and the newer reads and says the rest
may be out of date. Why (a): lines 10-20 are then shown from r2 only, so no two versions of one
line stand side by side, and what the model knew of the other lines is still there, marked stale.
(b) would show r1's lines 10-20 next to r2's: the contradiction the seed rules out. The cut is by
line number: an edit that moved lines makes the numbers of r1 and r2 differ, which is why the
rest is called stale and not current.

The rest is ``e{p}.c{i}`` of the newer read at position ``p`` (the i-th read it cut), ranks and is
laid out as the older read did (its position and priority: before the newer read), and carries the
older read's source ref. The older read is superseded by the newer one as before; the manifest
says where its other lines went (``superseded_lines``) and why the rest was kept
(:func:`stale_reason`). A later read at another revision that covers some of a rest's lines cuts
it again, from the logged text, with every newer read so far; one that covers none leaves it as
it is (it is marked stale already). Nothing is kept when no line but blank ones is left (a
whole-file re-read: exactly the whole supersession of before) or when the older read's text is
held in an artifact (the fold is pure and does not load it: it is superseded whole, as before).

A newer read at the same revision (or none: most runtimes log none) that shows another text for a
line the older read shows is a newer version too (the file was edited between them), and leaves
a stale rest the same way (:func:`~contextfold.projections.fold_files.fold_file_read`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import NamedTuple

from contextfold.projections.file_lines import FileLines

__all__ = ["NewerRead", "StaleRead", "cut_read", "rest_lines", "rest_of", "spans_meet", "spans_within",
           "stale_reason", "text_lines"]


class NewerRead(NamedTuple):
    """A newer read at another revision that cut a stale rest: lines ``lo..hi`` (None = to the
    end) at ``revision``, fragment ``by`` logged at position ``at``."""

    lo: int
    hi: int | None
    revision: str | None
    by: str
    at: int


class StaleRead(NamedTuple):
    """A stale rest (module docstring): what it stands in for and how it was cut."""

    of: str
    """The read (or stale rest) it replaced, superseded by ``newer[-1].by``."""
    origin: str
    """The logged read whose text it is cut from."""
    path: str
    revision: str | None
    newer: tuple[NewerRead, ...]
    spans: tuple[tuple[int, int], ...]
    """The line ranges of the origin it still shows."""


def _shown_revision(revision: str | None) -> str:
    return f"revision {revision}" if revision else "no revision"


def _lines(lo: int, hi: int | None) -> str:
    return f"line {lo}" if hi == lo else f"lines {lo}-{'end' if hi is None else hi}"


def cut_read(text: str, start: int, newer: tuple[NewerRead, ...], path: str, revision: str | None,
             at: int) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """The text of the stale rest of a read of ``path`` (first line ``start``, logged at ``at``)
    with the lines of ``newer`` cut out, and the line ranges it keeps; None when it would keep no
    line but blank ones. Each run of cut lines leaves a marker line naming them."""
    ends = text.endswith("\n")
    lines = text_lines(text) or [""]
    reads = "; ".join(f"{_lines(r.lo, r.hi)} at {_shown_revision(r.revision)} (event {r.at})" for r in newer)
    out = [f"[stale: {path} as read at {_shown_revision(revision)} (event {at}). Read again since: "
           f"{reads}. Those lines are left out here; the rest may be out of date.]"]
    spans: list[tuple[int, int]] = []
    gap: list[int] = []
    gap_revisions: dict[str | None, None] = {}
    shown = False

    def close_gap() -> None:
        if gap:
            out.append(f"[{_lines(gap[0], gap[-1])} left out: read again at "
                       f"{', '.join(map(_shown_revision, gap_revisions))}]")
            gap.clear()
            gap_revisions.clear()

    for n, line in enumerate(lines, start=start):
        covering = [r.revision for r in newer if r.lo <= n and (r.hi is None or n <= r.hi)]
        if covering:
            gap.append(n)
            gap_revisions.update(dict.fromkeys(covering))
            continue
        close_gap()
        out.append(line)
        shown = shown or bool(line.strip())
        if spans and spans[-1][1] == n - 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    close_gap()
    if not shown:
        return None
    return "\n".join(out) + ("\n" if ends else ""), tuple(spans)


def rest_lines(start: int, spans: Iterable[tuple[int, int]]) -> FileLines:
    """Which file line each line of a stale rest's text is, the read's first line being ``start``
    and ``spans`` the lines it keeps (:func:`cut_read`): its first line is the note, then each
    span's lines, a marker line before a span that starts past the read's first line or the
    previous span (and one after the last span, which names no file line either). A cut of the
    rest names the file's lines, not the text's (:mod:`~contextfold.projections.file_lines`)."""
    runs: list[tuple[int, int, int]] = []
    at, line = 1, start  # the text line after the note; the first file line not yet shown or cut
    for a, b in spans:
        if a > line:
            at += 1  # the marker of the lines a newer read covers
        runs.append((at, a, b - a + 1))
        at, line = at + b - a + 1, b + 1
    return FileLines(tuple(runs))


def text_lines(text: str) -> list[str]:
    """A read's lines, the first being its first line's: a last line break ends the last line
    and starts none (``"a\\nb\\n"`` is two lines); an empty read has none."""
    return (text[:-1] if text.endswith("\n") else text).split("\n") if text else []


def spans_within(spans: Iterable[tuple[int, int]], rng: tuple[int | None, int | None]) -> bool:
    """Every line of ``spans`` lies inside ``rng`` (None = from the start / to the end)."""
    lo = rng[0] or 1
    return all(lo <= a and (rng[1] is None or b <= rng[1]) for a, b in spans)


def spans_meet(spans: Iterable[tuple[int, int]], rng: tuple[int | None, int | None]) -> bool:
    """Some line of ``spans`` lies inside ``rng`` (None = from the start / to the end)."""
    lo = rng[0] or 1
    return any(b >= lo and (rng[1] is None or a <= rng[1]) for a, b in spans)


def rest_of(stale: Mapping[str, StaleRead], active: Container[str]) -> dict[str, str]:
    """Read (or stale rest) id -> the ``active`` stale rest that keeps what is left of its other
    lines (a rest cut again is followed to the rest of that rest)."""
    first = {s.of: fid for fid, s in stale.items()}
    out = {}
    for old, rest in first.items():
        while rest not in active and rest in first:
            rest = first[rest]
        if rest in active:
            out[old] = rest
    return out


def stale_reason(stale: Mapping[str, StaleRead], fid: str) -> str:
    """What a selection reason adds for a stale rest: whose lines it shows and which it left out
    for which newer read; empty for any other fragment."""
    s = stale.get(fid)
    if s is None:
        return ""
    cuts = ", ".join(f"{_lines(r.lo, r.hi)} superseded by {r.by} at {_shown_revision(r.revision)}"
                     for r in s.newer)
    return (f"; stale rest of {s.origin} ({s.path} at {_shown_revision(s.revision)}): its lines no newer "
            f"read covers, marked stale ({cuts})")
