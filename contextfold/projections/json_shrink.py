"""JSON truncation's size knob: the shrink of a parsed value, and its compact text in pieces.

What the knob does (``truncate``'s JSON strategy): knob ``x`` keeps ``4 * x`` characters per
string and ``ceil(x / 16)`` items per container, recursively; the largest knob whose compact
render fits is searched for. :func:`shrink` and :func:`dump` are that render.

Why pieces: a big JSON tool result at the edge of a large window is cut again at every turn, and
every probe of the knob search dumped and counted a render of the budget's size whole: ~0.3 s per
cut of a 2.6 MB array at ~100k tokens, nearly all of it spent on subtrees that were in the last
probe too. :class:`JsonPieces` keeps, per subtree, its compact text when the knob leaves it whole
(its *saturation*: :func:`size_knob_max`), lays a render out as those texts (atoms), and counts it
by chunks cut where the encoding provably splits (``LineSplitting.word_ends``: after an ASCII
letter or digit that an ASCII character of neither kind follows), each chunk counted once. The
sum is the count of the whole text; the text, when asked for, is the atoms joined: the same
characters :func:`dump` gives (tested against it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "CHARS_PER_STEP",
    "STEPS_PER_ITEM",
    "JsonPieces",
    "ShrinkStats",
    "dump",
    "marker_key",
    "pieces_apply",
    "shrink",
    "size_knob_max",
]

CHARS_PER_STEP = 4
STEPS_PER_ITEM = 16
"""The JSON size knob ``x`` keeps ``4 * x`` characters per string and
``ceil(x / 16)`` items per container: strings shrink in fine steps (a few
tokens each) while containers keep one item per 64 characters of string."""


class ShrinkStats:
    """Counts what one JSON shrink pass dropped."""

    def __init__(self) -> None:
        self.omitted = 0
        self.omitted_chars = 0
        self.kept: list[tuple[int, int]] = []


def marker_key(kept: dict[str, Any] | list[str]) -> str:
    """The member name of an object's "members omitted" marker: not one of its kept names."""
    key = "…"
    while key in kept:
        key += "…"
    return key


def _shrunk_string(value: str, knob: int, stats: ShrinkStats) -> str:
    cap = knob * CHARS_PER_STEP
    if len(value) <= cap:
        return value
    stats.omitted_chars += len(value) - cap
    return f"{value[:cap]}… [{len(value) - cap} chars omitted]"


def shrink(value: Any, knob: int, stats: ShrinkStats, top: bool = False) -> Any:
    """``value`` with at most ``ceil(knob/16)`` items per container, ``4*knob`` chars a string."""
    level = -(-knob // STEPS_PER_ITEM)
    if isinstance(value, str):
        return _shrunk_string(value, knob, stats)
    if isinstance(value, list):
        n = len(value)
        if n <= level:
            if top:
                stats.kept.append((1, n))
            return [shrink(v, knob, stats) for v in value]
        head, tail = (level + 1) // 2, level // 2
        stats.omitted += n - level
        if top:
            stats.kept += [(1, head), (n - tail + 1, n)]
        items = [shrink(v, knob, stats) for v in value[:head]]
        items.append(f"… {n - level} items omitted")
        items += [shrink(v, knob, stats) for v in value[n - tail:]]
        return items
    if isinstance(value, dict):
        members = list(value.items())
        keep = members[:level]
        if top:
            stats.kept.append((1, len(keep)))
        out = {k: shrink(v, knob, stats) for k, v in keep}
        if len(members) > level:
            stats.omitted += len(members) - level
            out[marker_key(out)] = f"{len(members) - level} members omitted"
        return out
    return value


def dump(value: Any) -> str:
    """Compact JSON, non-ASCII kept (escaped only when a lone surrogate makes the text unencodable)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from \\ud800-style escapes
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def size_knob_max(value: Any) -> int:
    """The knob at which :func:`shrink` keeps everything."""
    best = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            best = max(best, -(-len(v) // CHARS_PER_STEP))
        elif isinstance(v, list):
            best = max(best, len(v) * STEPS_PER_ITEM)
            stack.extend(v)
        elif isinstance(v, dict):
            best = max(best, len(v) * STEPS_PER_ITEM)
            stack.extend(v.values())
    return best


# ------------------------------------------------------------------ pieces

_WORD_END = re.compile(r"[0-9A-Za-z](?=[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])")
"""An ASCII letter or digit that an ASCII character of neither kind follows: a split after it."""
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
    start = max(0, len(text) - _SPLIT_WINDOW)
    last = None
    for m in _WORD_END.finditer(text, start):
        last = m.end()
    return last


def pieces_apply(text: str) -> bool:
    """Whether :class:`JsonPieces` may lay out the value parsed from ``text``: not when the text
    could hold a lone surrogate, whose render :func:`dump` escapes as a whole."""
    return _SURROGATE.search(text) is None


class JsonPieces:
    """One parsed JSON value's renders in atoms, and their token counts by chunks.

    ``count`` must count with an encoding whose ``LineSplitting.word_ends`` holds. Kept with
    the parse in truncation's memo, so a value cut again reuses its subtrees' texts and its
    chunks' counts. A saturated subtree's text is kept by the subtree's identity (the parse is
    never changed, and this object holds it)."""

    def __init__(self, value: Any, count: Callable[[str], int], keep: Callable[[str], str]) -> None:
        self.value = value
        self._count = count
        self._keep = keep
        self._saturation: dict[int, int] = {}
        self._whole: dict[int, Atom] = {}
        self._chunks: dict[str, int] = {}

    def _saturated(self, value: list[Any] | dict[str, Any], knob: int) -> bool:
        sat = self._saturation.get(id(value))
        if sat is None:
            sat = self._saturation[id(value)] = size_knob_max(value)
        return knob >= sat

    def _whole_atom(self, value: Any) -> Atom:
        atom = self._whole.get(id(value))
        if atom is None:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            atom = self._whole[id(value)] = (self._keep(text), _split_of(text, True))
        return atom

    def atoms(self, knob: int, stats: ShrinkStats) -> list[Atom]:
        """The render of the knob as atoms: ``"".join`` of their texts is
        ``dump(shrink(value, knob, stats, top=True))``, and ``stats`` is what that shrink counts."""
        out: list[Atom] = []
        self._emit(self.value, knob, stats, True, out)
        return out

    def _emit(self, value: Any, knob: int, stats: ShrinkStats, top: bool, out: list[Atom]) -> None:
        if isinstance(value, str):
            text = json.dumps(_shrunk_string(value, knob, stats), ensure_ascii=False)
            out.append((text, _split_of(text, True)))
            return
        if not isinstance(value, list | dict):
            text = json.dumps(value)
            out.append((text, _split_of(text, True)))
            return
        if not top and len(value) <= _WHOLE_ATOM_CHILDREN and self._saturated(value, knob):
            out.append(self._whole_atom(value))
            return
        level = -(-knob // STEPS_PER_ITEM)
        if isinstance(value, list):
            n = len(value)
            out.append(("[", None))
            if n <= level:
                if top:
                    stats.kept.append((1, n))
                self._items(value, knob, stats, out)
            else:
                head, tail = (level + 1) // 2, level // 2
                stats.omitted += n - level
                if top:
                    stats.kept += [(1, head), (n - tail + 1, n)]
                self._items(value[:head], knob, stats, out)
                if head:
                    out.append((",", None))
                marker = json.dumps(f"… {n - level} items omitted", ensure_ascii=False)
                out.append((marker, _split_of(marker, True)))
                if tail:
                    out.append((",", None))
                self._items(value[n - tail:], knob, stats, out)
            out.append(("]", None))
            return
        members = list(value.items())
        keep = members[:level]
        if top:
            stats.kept.append((1, len(keep)))
        out.append(("{", None))
        for i, (key, member) in enumerate(keep):
            name = ("," if i else "") + json.dumps(key, ensure_ascii=False) + ":"
            out.append((name, _split_of(name, False)))
            self._emit(member, knob, stats, False, out)
        if len(members) > level:
            stats.omitted += len(members) - level
            marker = (("," if keep else "") + json.dumps(marker_key([k for k, _ in keep]), ensure_ascii=False)
                      + ":" + json.dumps(f"{len(members) - level} members omitted", ensure_ascii=False))
            out.append((marker, _split_of(marker, True)))
        out.append(("}", None))

    def _items(self, values: list[Any], knob: int, stats: ShrinkStats, out: list[Atom]) -> None:
        for i, v in enumerate(values):
            if i:
                out.append((",", None))
            self._emit(v, knob, stats, False, out)

    def text(self, atoms: list[Atom]) -> str:
        return "".join(text for text, _ in atoms)

    def tokens(self, atoms: list[Atom]) -> int:
        """The count of the atoms' text, summed over chunks cut at their splits."""
        total = 0
        current: list[str] = []
        chunks = self._chunks
        for text, split in atoms:
            if split is None:
                current.append(text)
                continue
            current.append(text[:split])
            total += self._chunk("".join(current), chunks)
            current = [text[split:]]
        return total + self._chunk("".join(current), chunks)

    def _chunk(self, chunk: str, chunks: dict[str, int]) -> int:
        n = chunks.get(chunk)
        if n is None:
            if len(chunks) >= _CHUNKS_KEPT:
                chunks.clear()
            n = chunks[self._keep(chunk)] = self._count(chunk)
        return n
