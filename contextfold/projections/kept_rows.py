"""The last build's kept manifest rows, in (layer, position, id) order, patched by what changed.

Why: a long run's build keeps ~1,000 units (~2,200 fragments) and between two builds only a
few of them change (new ones at the end, old ones dropped, the unit cut at the budget's edge
re-cut). Gathering every kept unit's rows, sorting them, summing the layers and copying the
lines and views out of the sorted rows cost ~0.15 ms of Python-level and comparison work per
build, the same whatever changed. :class:`KeptRows` keeps that outcome and patches it: the rows
of units that left or changed are taken out, the new ones put in at their places (a bisect
each), and the sorted lists are re-made as slices of the old ones (C-level copies), so the
Python-level work is proportional to the change.

A unit's rows come in an *entry* ``(unit or None, rows)`` that is never mutated once made, and
the patch is computed from the entries' identities. So whatever build left a :class:`KeptRows`
(another config, budget or provider of the same facts table), patching it to this build's
entries gives exactly what gathering and sorting them would: the outcome depends on the
entries only, never on the history of patches (tested against a full sort).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

from contextfold.domain.manifest import ManifestFragment
from contextfold.projections.selected_lines import SelectedView

__all__ = ["KeptRows", "Row", "RowsEntry"]

Row = tuple[int, int, str, SelectedView, ManifestFragment, int, int]
"""(layer, position, fragment id, view, manifest line, tokens, overhead) of one kept fragment."""
RowsEntry = tuple[Any, list[Row]]
"""(the unit its rows were made for, or None when they are remade every build; its rows)."""

_KEY = itemgetter(0, 1, 2)
_IN_PLACE = 32
"""Up to this many rows in and out, the lists are edited in place (a memmove per row);
more, and they are made again from slices of the old ones (one copy, whatever the count)."""


class KeptRows:
    """A build's kept rows by unit (``entries``), in (layer, position, id) order (``rows``,
    with their ``lines`` and ``views`` alongside), the per-layer sums of their tokens and
    overheads, and each fragment's row (``row_of``).

    Mutable, for one build at a time: a builder takes it out of its memo, patches it and puts it
    back when the build is done (an exception in between leaves no half-patched one behind)."""

    __slots__ = ("_fragments", "_views", "entries", "lines", "overhead", "row_of", "rows", "tokens",
                 "views")

    def __init__(self, entries: dict[str, RowsEntry]) -> None:
        """Gather and sort every entry's rows: what :meth:`patch` keeps up to date."""
        self.entries = entries
        rows: list[Row] = list(chain.from_iterable(map(itemgetter(1), entries.values())))
        rows.sort()  # by (layer, position, id): ids are unique, so no comparison reaches the view
        self.rows = rows
        self.lines: list[ManifestFragment] = list(map(itemgetter(4), rows))
        self.views: list[SelectedView] = list(map(itemgetter(3), rows))
        self.row_of: dict[str, Row] = dict(zip(map(itemgetter(2), rows), rows, strict=True))
        self.tokens: dict[int, int] = {}
        self.overhead: dict[int, int] = {}
        for layer, group in groupby(rows, key=itemgetter(0)):  # sorted by layer first
            of_layer = list(group)
            self.tokens[layer] = sum(map(itemgetter(5), of_layer))
            self.overhead[layer] = sum(map(itemgetter(6), of_layer))
        self._fragments: tuple[ManifestFragment, ...] | None = None
        self._views: tuple[SelectedView, ...] | None = None

    def _add_sums(self, rows: Iterable[Row], sign: int) -> None:
        tokens, overhead = self.tokens, self.overhead
        for r in rows:
            layer = r[0]
            tokens[layer] = tokens.get(layer, 0) + sign * r[5]
            overhead[layer] = overhead.get(layer, 0) + sign * r[6]

    def fragments(self) -> tuple[ManifestFragment, ...]:
        """The manifest lines in order, as a tuple (the same one until the rows change)."""
        if self._fragments is None:
            self._fragments = tuple(self.lines)
        return self._fragments

    def view_tuple(self) -> tuple[SelectedView, ...]:
        """The views in order, as a tuple (the same one until the rows change)."""
        if self._views is None:
            self._views = tuple(self.views)
        return self._views

    def patch(self, gone: Iterable[str], changed: dict[str, RowsEntry]) -> None:
        """Drop the units ``gone`` and set the entries of ``changed`` (new or re-made units),
        moving their rows out of and into the sorted lists."""
        entries = self.entries
        out: list[Row] = []
        for uid in gone:
            out += entries.pop(uid)[1]
        for uid, entry in changed.items():
            old = entries.get(uid)
            if old is not None:
                out += old[1]
            entries[uid] = entry
        new: list[Row] = sorted(chain.from_iterable(map(itemgetter(1), changed.values())), key=_KEY)
        if not out and not new:
            return
        rows, row_of = self.rows, self.row_of
        # Events on the old list: insert a new row before index i (0) or drop the row at i (1).
        # A new row's index is found among the old rows, the dropped ones still there: a
        # re-made fragment (the same key) goes right before its old row, which is then dropped.
        events: list[tuple[int, int, int]] = []
        for r in out:
            i = bisect_left(rows, _KEY(r))
            if rows[i] is not r:  # an entry's rows are in the list while it is in ``entries``
                raise AssertionError(f"kept row {r[2]} not where its key says")
            events.append((i, 1, 0))
            del row_of[r[2]]
        for n, r in enumerate(new):
            events.append((bisect_left(rows, _KEY(r)), 0, n))
            row_of[r[2]] = r
        events.sort()
        if len(events) <= _IN_PLACE:
            # From the end, so the indices before each event stay valid: a memmove of the
            # pointers behind it per event, no row touched (a copy increfs ~2,200 cold objects
            # per list).
            lines, views = self.lines, self.views
            k = len(events)
            while k:
                k -= 1
                i, drop, n = events[k]
                if drop and k and events[k - 1][:2] == (i, 0):  # re-made at its place: replaced
                    k -= 1
                    r = rows[i] = new[events[k][2]]
                    lines[i], views[i] = r[4], r[3]
                elif drop:
                    del rows[i], lines[i], views[i]
                else:
                    r = new[n]
                    rows.insert(i, r)
                    lines.insert(i, r[4])
                    views.insert(i, r[3])
        else:
            self.rows = _spliced(rows, events, new)
            self.lines = _spliced(self.lines, events, list(map(itemgetter(4), new)))
            self.views = _spliced(self.views, events, list(map(itemgetter(3), new)))
        self._add_sums(out, -1)
        self._add_sums(new, 1)
        self._fragments = self._views = None


def _spliced(old: list[Any], events: list[tuple[int, int, int]], new: list[Any]) -> list[Any]:
    """``old`` with the events applied: slices of it between them, the new items put in."""
    out: list[Any] = []
    start = 0
    for i, drop, n in events:
        if i > start:
            out += old[start:i]
            start = i
        if drop:
            start = i + 1
        else:
            out.append(new[n])
    out += old[start:]
    return out
