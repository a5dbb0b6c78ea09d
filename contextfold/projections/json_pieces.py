"""A JSON cut's renders laid out in pieces, and counted by chunks without tokenizing them whole.

Why pieces: a big JSON tool result at the edge of a large window is cut again at every turn, and
every probe of the knob search dumped and counted a render of the budget's size whole: ~0.3 s per
cut of a 2.6 MB array at ~100k tokens, nearly all of it spent on subtrees that were in the last
probe too. :class:`JsonPieces` keeps, per subtree, its compact text when the knob leaves it whole
(its *saturation*: :func:`size_knob_max`), lays a render out as those texts (atoms), and counts it
by chunks cut where the encoding provably splits (``LineSplitting.word_ends``: after an ASCII
letter or digit that an ASCII character of neither kind follows), each chunk counted once. The
sum is the count of the whole text; the text, when asked for, is the atoms joined: the same
characters :func:`dump` gives (tested against it).

Apart from :mod:`~contextfold.projections.json_shrink` (the knob and its render) because that
module stays under 500 lines without it; the two give the same text and stats, knob by knob.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Protocol

from contextfold.domain.canonical import compact_json, quote
from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.projections.json_literals import scalar_literal, unquote
from contextfold.projections.json_shrink import (
    STEPS_PER_ITEM,
    ShrinkStats,
    _shrunk_scalar,
    _shrunk_string,
    marker_key,
    saturations,
)

__all__ = ["Atom", "JsonPieces", "pieces_apply"]

_WORD_END = re.compile(r"[0-9A-Za-z](?=[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])")
"""An ASCII letter or digit that an ASCII character of neither kind follows: a split after it."""
_LAST_WORD_END = re.compile("(?s:.*)" + _WORD_END.pattern)
"""Up to the last :data:`_WORD_END`: the greedy ``.*`` backs off from the end to it (one search
instead of an iterator over every one: ~100 atoms per cut build, ~10 word ends per window)."""
_SPLIT_WINDOW = 96
"""How far back from an atom's end a split is looked for (a long string atom is one chunk)."""
_WHOLE_ATOM_CHILDREN = 32
"""A subtree the knob leaves whole is one atom up to this many children; a bigger one is laid
out child by child, so that its chunks are small and shared with the renders that cut it."""
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")
_CHUNKS_KEPT = 200_000

Atom = tuple[str, int | None]
"""A piece of a render and where a chunk may end inside it (after that many characters)."""


def _split_of(text: str, ends_value: bool) -> int | None:
    """Where in ``text`` a chunk may end: after its last ASCII letter or digit followed by an ASCII
    character of neither kind; at its end when it ends with one and is a value (in compact JSON
    a value is followed by ``,``, ``]``, ``}`` or nothing)."""
    if ends_value and text and text[-1].isascii() and text[-1].isalnum():
        return len(text)
    found = _LAST_WORD_END.search(text, max(0, len(text) - _SPLIT_WINDOW))
    return None if found is None else found.end()


def pieces_apply(text: str) -> bool:
    """Whether :class:`JsonPieces` may lay out the value parsed from ``text``: not when the text
    could hold a lone surrogate, whose render :func:`dump` escapes as a whole."""
    return _SURROGATE.search(text) is None


class _Run:
    """A run of whole items of a long array, laid out as one piece: its first item's head (up to
    its split), the tokens of the chunks inside the run (each from one item's split to the
    next's), its last item's tail (from its split on), and its text when the answer asks."""

    __slots__ = ("_records", "a", "b", "head", "inner", "tail")

    def __init__(self, records: _Records, a: int, b: int, inner: int) -> None:
        self._records, self.a, self.b, self.inner = records, a, b, inner
        first, last = records.items[a], records.items[b - 1]
        self.head = first[0][:first[1]]
        self.tail = last[0][last[1]:]

    def text(self) -> str:
        return ",".join(text for text, _ in self._records.items[self.a:self.b])


class _Records:
    """A long array whose items are each laid out whole at a knob at least their saturation
    (records, typically): the items' texts, and the tokens of the chunks between consecutive
    items summed from the array's head and from its tail (a cut keeps a head and a tail of it),
    so a run of whole items is counted in O(1) once its joints were counted."""

    def __init__(self, items: list[tuple[str, int]], saturation: list[int],
                 joint: Callable[[str], int]) -> None:
        self.items = items
        self._joint = joint
        n = len(items)
        self._head_max = list(accumulate(saturation, max, initial=0))
        """The largest saturation among the first i items."""
        self._tail_max = list(accumulate(reversed(saturation), max, initial=0))
        """The largest saturation among the last i items."""
        self._head_sums = [0]
        """Tokens of the joints between the first i + 1 items."""
        self._tail_sums = [0]
        """Tokens of the joints between the last i + 1 items."""
        self._n = n

    def _pair(self, i: int) -> int:
        (left, s), (right, t) = self.items[i], self.items[i + 1]
        return self._joint(left[s:] + "," + right[:t])

    def head(self, count: int, knob: int) -> _Run | None:
        """The first ``count`` items as one run, if the knob leaves each whole."""
        if count < 1 or self._head_max[count] > knob:
            return None
        sums = self._head_sums
        while len(sums) < count:
            sums.append(sums[-1] + self._pair(len(sums) - 1))
        return _Run(self, 0, count, sums[count - 1])

    def tail(self, count: int, knob: int) -> _Run | None:
        """The last ``count`` items as one run, if the knob leaves each whole."""
        if count < 1 or self._tail_max[count] > knob:
            return None
        sums, n = self._tail_sums, self._n
        while len(sums) < count:
            sums.append(sums[-1] + self._pair(n - 1 - len(sums)))
        return _Run(self, n - count, n, sums[count - 1])


_RECORDS_FROM = 64
"""Arrays of at least this many items are laid out in runs where they can be."""


class JsonPieces:
    """One parsed JSON value's renders in atoms, and their token counts by chunks.

    ``count`` must count with an encoding whose ``LineSplitting.word_ends`` holds. Kept with
    the parse in truncation's memo, so a value cut again reuses its subtrees' texts and its
    chunks' counts. A saturated subtree's text is kept by the subtree's identity (the parse is
    never changed, and this object holds it)."""

    def __init__(self, value: Any, count: Callable[[str], int], keep: Callable[[str], str],
                 saturated: dict[int, int] | None = None, numbers: bool = False) -> None:
        self.value = value
        self._count = count
        self._keep = keep
        self._saturated = saturations(value) if saturated is None else saturated
        """:func:`saturations` of ``value`` (the caller's, when it made them for ``shrink`` too)."""
        self._numbers = numbers
        """As :func:`dump`'s: the value holds a number kept as written."""
        self._whole: dict[int, Atom] = {}
        self._chunks: dict[str, int] = {}
        self._records: dict[int, _Records | None] = {}
        self._lock = fork_safe_lock(self._forget_tables)
        """Truncation keeps one object per input for the whole process, so two threads may cut
        with it at once; its tables (and the joints' sums) grow as it goes."""

    def _forget_tables(self) -> None:
        """Start the tables over: in a forked child whose parent's thread held the lock, they may
        be half grown (:mod:`~contextfold.domain.fork_locks`); they are made again from the parse."""
        self._whole = {}
        self._chunks = {}
        self._records = {}

    def _saturation_of(self, value: Any) -> int:
        """:func:`size_knob_max` of ``value``, a subtree of the parse."""
        return self._saturated[id(value)]

    def _whole_atom(self, value: Any) -> Atom:
        atom = self._whole.get(id(value))
        if atom is None:
            text = compact_json(value)  # dump's text: the pieces must add up to its renders
            if self._numbers:
                text = unquote(text)
            atom = self._whole[id(value)] = (self._keep(text), _split_of(text, True))
        return atom

    def _records_of(self, value: list[Any]) -> _Records | None:
        """The array as records, or None when it is short or an item has no whole form with a
        split (a big container, or a text with no ASCII word end: then it is laid out item by item)."""
        key = id(value)
        if key in self._records:
            return self._records[key]
        records = None
        if len(value) >= _RECORDS_FROM:
            items: list[tuple[str, int]] = []
            saturation: list[int] = []
            for v in value:
                if isinstance(v, list | dict) and len(v) > _WHOLE_ATOM_CHILDREN:
                    break
                text, split = self._whole_atom(v)
                if split is None:
                    break
                items.append((text, split))
                saturation.append(self._saturation_of(v))
            else:
                records = _Records(items, saturation, lambda chunk: self._chunk(chunk, self._chunks))
        self._records[key] = records
        return records

    def atoms(self, knob: int, stats: ShrinkStats) -> list[Atom | _Run]:
        """The render of the knob as atoms: ``"".join`` of their texts is
        ``dump(shrink(value, knob, stats, top=True))``, and ``stats`` is what that shrink counts."""
        out: list[Atom | _Run] = []
        with self._lock:
            self._emit(self.value, knob, stats, True, out)
        return out

    def _emit(self, value: Any, knob: int, stats: ShrinkStats, top: bool, out: _Sink) -> None:
        container = isinstance(value, list | dict)
        if not top and knob >= self._saturation_of(value) and (
                not container or len(value) <= _WHOLE_ATOM_CHILDREN):
            # kept whole (a scalar, a string, a small subtree): its text and split, made once per
            # value (a cut's ~17 probes render most of a value's members alike)
            out.append(self._whole_atom(value))
            return
        if type(value) is str:  # (a Number is a str too: it is a scalar here, never cut)
            text = quote(_shrunk_string(value, knob, stats, top))
            out.append((text, _split_of(text, True)))
            return
        if not container:  # a scalar at the top: itself, or its literal cut as a string
            shown = _shrunk_scalar(value, knob, stats)
            text = quote(shown) if type(shown) is str else scalar_literal(value)
            out.append((text, _split_of(text, True)))
            return
        level = -(-knob // STEPS_PER_ITEM)
        if isinstance(value, list):
            n = len(value)
            records = self._records_of(value)
            out.append(("[", None))
            if n <= level:
                if top:
                    stats.kept.append((1, n))
                run = records.head(n, knob) if records is not None else None
                if run is not None:
                    out.append(run)
                else:
                    self._items(value, knob, stats, out)
            else:
                head, tail = (level + 1) // 2, level // 2
                stats.omitted += n - level
                if top:
                    stats.kept += [(1, head), (n - tail + 1, n)]
                run = records.head(head, knob) if records is not None else None
                if run is not None:
                    out.append(run)
                else:
                    self._items(value[:head], knob, stats, out)
                if head:
                    out.append((",", None))
                marker = quote(f"… {n - level} items omitted")
                out.append((marker, _split_of(marker, True)))
                if tail:
                    out.append((",", None))
                run = records.tail(tail, knob) if records is not None else None
                if run is not None:
                    out.append(run)
                else:
                    self._items(value[n - tail:], knob, stats, out)
            out.append(("]", None))
            return
        members = list(value.items())
        keep = members[:level]
        if top:
            stats.kept.append((1, len(keep)))
        out.append(("{", None))
        for i, (key, member) in enumerate(keep):
            name = ("," if i else "") + quote(key) + ":"
            out.append((name, _split_of(name, False)))
            self._emit(member, knob, stats, False, out)
        if len(members) > level:
            stats.omitted += len(members) - level
            marker = (("," if keep else "") + quote(marker_key([k for k, _ in keep]))
                      + ":" + quote(f"{len(members) - level} members omitted"))
            out.append((marker, _split_of(marker, True)))
        out.append(("}", None))

    def _items(self, values: list[Any], knob: int, stats: ShrinkStats, out: _Sink) -> None:
        for i, v in enumerate(values):
            if i:
                out.append((",", None))
            self._emit(v, knob, stats, False, out)

    def text(self, atoms: list[Atom | _Run]) -> str:
        return "".join(atom.text() if isinstance(atom, _Run) else atom[0] for atom in atoms)

    def tokens(self, atoms: list[Atom | _Run]) -> int:
        """The count of the atoms' text, summed over chunks cut at their splits."""
        with self._lock:
            tally = _Tally(self._chunk, self._chunks, _NO_LIMIT)
            for atom in atoms:
                tally.append(atom)
            return tally.close()

    def tokens_within(self, knob: int, limit: int) -> int:
        """The count of the knob's render (:meth:`atoms`, :meth:`tokens`) when it is at most
        ``limit``; else that count, or ``-b`` for a ``b`` over ``limit`` that it is at least: the
        layout stops once the chunks counted so far pass ``limit``.

        Why: a probe of a knob search only has to say whether its render fits. One knob step
        can take a render from a budget's size to a whole document of some MB (a big object's
        child kept once the knob reaches its place among the members), and a cut's search made
        several such probes, each laid out and counted whole."""
        tally = _Tally(self._chunk, self._chunks, limit)
        with self._lock:
            try:
                self._emit(self.value, knob, ShrinkStats(), True, tally)
            except _OverLimit:
                return -tally.total
            return tally.close()

    def _chunk(self, chunk: str, chunks: dict[str, int]) -> int:
        n = chunks.get(chunk)
        if n is None:
            if len(chunks) >= _CHUNKS_KEPT:
                chunks.clear()
            n = chunks[self._keep(chunk)] = self._count(chunk)
        return n


_NO_LIMIT = 1 << 62


class _OverLimit(Exception):
    """Raised by :class:`_Tally` once its count passes its limit: the layout stops there."""


class _Sink(Protocol):
    def append(self, atom: Atom | _Run, /) -> None: ...


class _Tally:
    """A render's count, atom by atom as it is laid out: chunks end at the atoms' splits, so the
    total so far is the count of the text up to the last split, a lower bound of the whole's.
    Raises :class:`_OverLimit` once that bound passes ``limit``."""

    __slots__ = ("_chunk", "_chunks", "_current", "_limit", "total")

    def __init__(self, chunk: Callable[[str, dict[str, int]], int], chunks: dict[str, int],
                 limit: int) -> None:
        self._chunk, self._chunks, self._limit = chunk, chunks, limit
        self._current: list[str] = []
        self.total = 0

    def append(self, atom: Atom | _Run) -> None:
        current = self._current
        if isinstance(atom, _Run):  # its inner chunks are summed already
            current.append(atom.head)
            self.total += self._chunk("".join(current), self._chunks) + atom.inner
            self._current = [atom.tail]
        else:
            text, split = atom
            if split is None:
                current.append(text)
                return
            current.append(text[:split])
            self.total += self._chunk("".join(current), self._chunks)
            self._current = [text[split:]]
        if self.total > self._limit:
            raise _OverLimit

    def close(self) -> int:
        """The whole count: the chunks so far and the last one."""
        return self.total + self._chunk("".join(self._current), self._chunks)
