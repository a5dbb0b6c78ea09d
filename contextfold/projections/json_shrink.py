"""JSON truncation's size knob: the shrink of a parsed value, and its compact text in pieces.

What the knob does (``truncate``'s JSON strategy): knob ``x`` keeps up to ``4 * x`` characters per
string (fewer when that would split a grapheme cluster) and ``ceil(x / 16)`` items per container,
recursively; the largest knob whose compact render fits is searched for. :func:`shrink` and
:func:`dump` are that render.

The pieces (a render laid out from its subtrees' texts and counted by chunks) are
:mod:`~contextfold.projections.json_pieces`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import orjson

from contextfold.domain.canonical import compact_json
from contextfold.projections.graphemes import head_chars
from contextfold.projections.json_literals import is_scalar, scalar_literal, unquote

__all__ = [
    "CHARS_PER_STEP",
    "SHRINK_DEPTH",
    "STEPS_PER_ITEM",
    "ShrinkStats",
    "dump",
    "marker_key",
    "nested_past",
    "nesting",
    "saturations",
    "shrink",
    "size_knob_max",
    "text_nested_past",
    "whole_kept",
]

CHARS_PER_STEP = 4
STEPS_PER_ITEM = 16
"""The JSON size knob ``x`` keeps up to ``4 * x`` characters per string and
``ceil(x / 16)`` items per container: strings shrink in fine steps (a few
tokens each) while containers keep one item per 64 characters of string."""


SHRINK_DEPTH = 32
"""Levels of nesting past which a document is cut as a head as written (``json_deep``), not by
the knob. Why: the knob applies to every level at once, so a document nested deep holds its
content in a chain of containers that one knob step empties together: a 450-level linked list
of 5,180 tokens kept 13 tokens at every grant under its compact size (~3,800), where one of 600
levels (past the parser, so cut as a head) kept all but a few tokens of its grant. Decided per
text, not per grant: a larger grant never changes the cut's kind, so what it keeps grows with
the grant. Shallow documents (API records, tool results: a few levels) are cut by the knob."""


def nested_past(value: Any, levels: int) -> bool:
    """Whether ``value`` holds containers nested more than ``levels`` deep (the top one is level
    1). Iterative, and stops at the first such container: a document of any depth is walked once
    at most."""
    return nesting(value, levels) > levels


def nesting(value: Any, stop: int) -> int:
    """How deep ``value``'s containers nest (the top one is level 1; 0 for a scalar), or
    ``stop + 1`` once past ``stop``. Iterative: one walk tells a cut both whether the knob applies
    (:data:`SHRINK_DEPTH`) and whether the value is read at all (``truncate.PARSE_DEPTH``).
    A level at a time, each a list of the containers in it: a 1.3 MB array of records took 76 ms
    by a stack of (container, depth) pairs, 30 so."""
    level = [value] if isinstance(value, list | dict) else []
    depth = 0
    while level:
        if depth == stop:
            return stop + 1
        depth += 1
        below: list[Any] = []
        for v in level:
            below += [c for c in (v if isinstance(v, list) else v.values()) if isinstance(c, list | dict)]
        level = below
    return depth


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def text_nested_past(text: str, levels: int) -> bool:
    """:func:`nested_past` of a JSON text not parsed: whether its brackets, outside its strings,
    nest more than ``levels`` deep. Why: the parse recurses from the caller's frame, so its
    ``RecursionError`` says how deep the caller was as much as how deep the text is; this says
    the text's depth whatever the stack. Iterative and linear; a text with no more brackets
    than ``levels`` is not scanned."""
    if text.count("[") + text.count("{") <= levels:
        return False
    return max(accumulate(_STEP[c] for c in _STRING.sub("", text) if c in _STEP), default=0) > levels


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


def _shrunk_string(value: str, knob: int, stats: ShrinkStats, top: bool = False) -> str:
    """``value`` cut to at most ``4 * knob`` characters, at a grapheme cluster boundary (no orphan
    accent or half flag before the suffix); the one cut of :func:`shrink` and of the pieces.
    A document that is one string (``top``) records the characters of it kept: its head was
    shown, and a record of no range said only a marker was."""
    cap = knob * CHARS_PER_STEP
    if len(value) <= cap:
        if top:
            stats.kept.append((1, len(value)))
        return value
    kept = head_chars(value, cap)
    if top:
        stats.kept.append((1, len(kept)))
    stats.omitted_chars += len(value) - len(kept)
    return f"{kept}… [{len(value) - len(kept)} chars omitted]"


def _shrunk_scalar(value: Any, knob: int, stats: ShrinkStats) -> Any:
    """A document that is one number (or other scalar) at ``knob``: itself while its literal has
    at most ``4 * knob`` characters, else a string of its head and what was left out, as a long
    string is cut. Why: a scalar in a container is dropped with its item or member (the marker
    says so); one at the top has none, and a 40,000-digit number kept a bare ``…`` at any grant,
    which no JSON reader parses."""
    literal = scalar_literal(value)
    if len(literal) <= knob * CHARS_PER_STEP:
        stats.kept.append((1, len(literal)))
        return value
    return _shrunk_string(literal, knob, stats, top=True)


def shrink(value: Any, knob: int, stats: ShrinkStats, top: bool = False,
           saturated: dict[int, int] | None = None) -> Any:
    """``value`` with at most ``ceil(knob/16)`` items per container, ``4*knob`` chars a string.

    ``saturated`` (:func:`saturations` of ``value``) lets a subtree the knob keeps whole be
    returned as it is, unwalked: the same render and stats, since shrinking drops nothing there.
    A cut's probes at knobs near the answer keep most subtrees whole, and walking them was most
    of a tau-bench JSON cut's time."""
    if saturated is None:
        saturated = {}
    return _shrink(value, knob, stats, top, saturated.get)


def _shrink(value: Any, knob: int, stats: ShrinkStats, top: bool,
            saturation: Callable[[int, int], int]) -> Any:
    if not top and saturation(id(value), _UNKNOWN) <= knob:  # kept whole: nothing to walk
        return value
    level = -(-knob // STEPS_PER_ITEM)
    if type(value) is str:  # (a Number is a str too: it is a scalar here, never cut but at the top)
        return _shrunk_string(value, knob, stats, top)
    if top and is_scalar(value):
        return _shrunk_scalar(value, knob, stats)
    if isinstance(value, list):
        n = len(value)
        if n <= level:
            if top:
                stats.kept.append((1, n))
            return [_shrink(v, knob, stats, False, saturation) for v in value]
        head, tail = (level + 1) // 2, level // 2
        stats.omitted += n - level
        if top:
            stats.kept += [(1, head), (n - tail + 1, n)]
        items = [_shrink(v, knob, stats, False, saturation) for v in value[:head]]
        items.append(f"… {n - level} items omitted")
        items += [_shrink(v, knob, stats, False, saturation) for v in value[n - tail:]]
        return items
    if isinstance(value, dict):
        members = list(value.items())
        keep = members[:level]
        if top:
            stats.kept.append((1, len(keep)))
        out = {k: _shrink(v, knob, stats, False, saturation) for k, v in keep}
        if len(members) > level:
            stats.omitted += len(members) - level
            out[marker_key(out)] = f"{len(members) - level} members omitted"
        return out
    return value


def whole_kept(value: Any) -> list[tuple[int, int]]:
    """The ``ShrinkStats.kept`` of :func:`shrink` at ``top`` with a knob that keeps ``value``
    whole (its :func:`size_knob_max` or more): all of the top-level container, string or literal.
    Why: a cut whose compact form fits is answered without the knob's search, and without the
    :func:`saturations` that a shrink at that knob needs (``truncate``)."""
    if type(value) is str or isinstance(value, list | dict):
        return [(1, len(value))]
    return [(1, len(scalar_literal(value)))]


_UNKNOWN = 1 << 62
"""The saturation of a subtree :func:`saturations` did not record: never taken as kept whole."""


def saturations(value: Any) -> dict[int, int]:
    """``id(subtree) -> ``:func:`size_knob_max` of it, for every string, list and dict in
    ``value`` and for ``value`` itself; a scalar's is 0 (kept as it is at any knob). Valid while
    ``value`` lives unchanged (ids): keep the two together. A
    :class:`~contextfold.projections.json_literals.Number` is a scalar: 0. A document that is
    one scalar is cut as its literal (:func:`_shrunk_scalar`): its own is its literal's, as a
    string's."""
    if is_scalar(value):
        return {id(value): -(-len(scalar_literal(value)) // CHARS_PER_STEP)}
    out: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        v, done = stack.pop()
        if type(v) is str:
            out[id(v)] = -(-len(v) // CHARS_PER_STEP)
        elif isinstance(v, list | dict):
            children = v if isinstance(v, list) else list(v.values())
            if done:
                own = len(v) * STEPS_PER_ITEM
                out[id(v)] = max([own, *(out.get(id(c), 0) for c in children)])
            else:
                stack.append((v, True))
                stack.extend((c, False) for c in children)
        else:
            out[id(v)] = 0
    return out


def dump(value: Any, orjson_safe: bool = False, numbers: bool = False) -> str:
    """Compact JSON, non-ASCII kept (escaped only when a lone surrogate makes the text unencodable).

    ``orjson_safe``: the caller knows that orjson writes ``value`` as the standard encoder does
    (:func:`~contextfold.domain.canonical.orjson_writes_the_same` held for the value it was
    shrunk from: a render only drops parts of it and cuts or adds strings), so the check is not
    walked again for each of a cut's renders. orjson refuses a lone surrogate: then as below.
    ``numbers``: the value was parsed holding a number kept as written
    (:class:`~contextfold.projections.json_literals.Number`), written back as its literal."""
    text = _dump(value, orjson_safe)
    return unquote(text) if numbers else text


def _dump(value: Any, orjson_safe: bool) -> str:
    if orjson_safe:
        try:
            return orjson.dumps(value).decode()
        except TypeError:  # orjson.JSONEncodeError
            pass
    text = compact_json(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from \\ud800-style escapes
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def size_knob_max(value: Any) -> int:
    """The knob at which :func:`shrink` keeps everything: the largest of ``ceil(len / 4)`` over
    its strings and ``16 * len`` over its containers (:func:`saturations` computes it per subtree);
    for a document that is one number, ``ceil(len / 4)`` of its literal."""
    return saturations(value)[id(value)]
