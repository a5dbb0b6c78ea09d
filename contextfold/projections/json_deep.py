"""JSON nested deeper than the parser goes, cut at a structural boundary without recursion.

Why: Python's parser stops at its recursion limit (~1,000 levels), and the shrink and the encoders
recurse as deep. Valid JSON deeper than that (a serialized tree, an AST dump, a linked list as
nested objects) was cut as characters: ``{"tree":`` and a tail of closing brackets around a
marker, which no JSON reader parses (DESIGN 7: "JSON values ... never inside a JSON token").

What is done instead (:func:`deep_cut`): one pass over the text's tokens, a loop with an explicit
stack, checks that it is JSON as the cut's parser reads it (``json_literals``: ``NaN`` and
``Infinity`` taken, any number) and notes every place a head of it may end: right after a bracket
opens, or after a whole value inside a container. A cut keeps the longest such head that fits, as
written, then a marker (an item ``"… N characters omitted"`` in an array, a member
``"…": "N characters omitted"`` in an object) and the brackets that close what the head left
open. Linear in the text: each token is read once, and the search renders O(log n) heads (each
walking its open brackets once). Only the head is kept: a tail would need the brackets it sits
in re-opened, with their keys.

A document whose parse would not be written back as it says (``json_literals.Unwritable``: an
object that names a member twice, whose parse holds one of the two; a number kept as written
beside a NUL in a string) is cut here too, at any depth: a head as written shows it as it is.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from contextfold.projections.lazy_regex import LazyPattern
from contextfold.projections.line_windows import fit_line_windows, kept_probe
from contextfold.projections.truncation_result import KeptRange, Truncation

__all__ = ["Heads", "cut_deep", "deep_cut", "heads"]

_WS = r"[ \t\n\r]*"
_STRING_TOKEN = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
_SCALAR_TOKEN = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|Infinity|-Infinity"
_TOKEN = re.compile(rf"{_WS}(?:([\[{{])|([\]}}])|(,)|(:)|({_STRING_TOKEN})|({_SCALAR_TOKEN}))")
"""One JSON token after whitespace; the group that matched says its kind (``lastindex``). Two
tokens with nothing between them (``truefalse``, ``01``) are refused by the grammar below."""
_OPEN, _CLOSE, _COMMA, _COLON, _STRING, _SCALAR = range(1, 7)
_LEAF = rf"(?:{_STRING_TOKEN}|{_SCALAR_TOKEN})"
_FIRST_MEMBER = LazyPattern(rf"{_WS}({_STRING_TOKEN}){_WS}:{_WS}{_LEAF}")
_NEXT = {"}": LazyPattern(rf"{_WS},{_WS}({_STRING_TOKEN}){_WS}:{_WS}{_LEAF}"),
         "]": LazyPattern(rf"{_WS},{_WS}{_LEAF}")}
"""Per container kind: its next member (item) after a value, when its value is a string or a
scalar; and an object's first member so. The tokens the token-by-token loop reads, three (two)
at once: a document of megabytes is mostly such members, and the loop's four steps a member
were ~5 us."""
_SPACE = re.compile(r"[ \t\n\r]*")
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON_NEXT, _AFTER = range(6)
_CLOSER = {"[": "]", "{": "}"}
_MARKER_KEY = re.compile(r"…|\\u2026", re.IGNORECASE)
"""A key that could be the marker's (``…``, maybe escaped): after it, an object's members are
not cut points (the marker member would repeat a kept name)."""

@dataclass(frozen=True, slots=True)
class Heads:
    """Cut points in text order (packed: a deep document of megabytes has one every few
    characters, and they are kept in the text's memo): where the head ends (``ends``), the
    innermost bracket open there (``inside``, an index into ``closer`` and ``parent``: the
    brackets' closing characters and the bracket each is inside, -1 for none) and whether the
    marker follows an item, a comma first, rather than the opening bracket (``after_item``)."""

    ends: array[int]
    inside: array[int]
    after_item: bytearray
    closer: str
    parent: array[int]

    def closers(self, bracket: int) -> str:
        """The closing brackets of ``bracket`` and of every bracket it is inside, innermost first."""
        out: list[str] = []
        while bracket >= 0:
            out.append(self.closer[bracket])
            bracket = self.parent[bracket]
        return "".join(out)


def heads(text: str) -> Heads | None:
    """The places a head of ``text`` may end (see the module doc), or None when ``text`` is not
    one JSON value (or is a scalar: nothing to cut at). Iterative: any depth, linear time.

    A member (item) whose value is a string or a scalar is read in one match (:data:`_NEXT`),
    its cut point taken at its end: the same tokens and the same point the loop below reads one
    token at a time. A key like the marker's is left to the loop (it stops the cut points)."""
    typecode = "i" if len(text) < 1 << 31 else "q"  # offsets of 4 bytes when they fit
    ends, inside, after_item = array(typecode), array(typecode), bytearray()
    closer: list[str] = []
    parent = array(typecode)
    flagged: list[bool] = []  # per open bracket: it holds a key the marker could repeat
    node = -1  # the innermost open bracket
    state = _VALUE
    pos = 0
    match = _TOKEN.match

    def cut_point(first: bool) -> None:
        if not flagged[-1]:
            ends.append(pos)
            inside.append(node)
            after_item.append(0 if first else 1)

    while True:
        if node >= 0 and not flagged[-1] and state in (_AFTER, _KEY_OR_CLOSE):
            bracket = closer[node]
            if state == _KEY_OR_CLOSE:
                leaf = _FIRST_MEMBER.match(text, pos)
                if leaf is not None and not _MARKER_KEY.search(leaf.group(1)):
                    pos, state = leaf.end(), _AFTER
                    cut_point(False)
            if state == _AFTER:
                next_leaf, keyed, before = _NEXT[bracket].compiled.match, bracket == "}", len(ends)
                while (leaf := next_leaf(text, pos)) is not None:
                    if keyed and _MARKER_KEY.search(leaf.group(1)):
                        break  # read by the loop: the key stops the cut points
                    pos = leaf.end()
                    ends.append(pos)
                if len(ends) > before:
                    inside.extend(repeat(node, len(ends) - before))
                    after_item.extend(b"\x01" * (len(ends) - before))
        m = match(text, pos)
        if m is None:
            break
        pos, kind = m.end(), m.lastindex
        if kind == _OPEN:
            if state > _VALUE_OR_CLOSE:
                return None
            opener = m.group(_OPEN)
            parent.append(node)
            node = len(closer)
            closer.append(_CLOSER[opener])
            flagged.append(False)
            state = _VALUE_OR_CLOSE if opener == "[" else _KEY_OR_CLOSE
            cut_point(True)
        elif kind == _CLOSE:
            # (a state that is not _AFTER closes what it was set by: "[" or "{", empty)
            if node < 0 or closer[node] != m.group(_CLOSE) or state in (_VALUE, _KEY, _COLON_NEXT):
                return None
            node = parent[node]
            flagged.pop()
            state = _AFTER
            if node >= 0:
                cut_point(False)
        elif kind == _COMMA:
            if state != _AFTER or node < 0:
                return None
            state = _VALUE if closer[node] == "]" else _KEY
        elif kind == _COLON:
            if state != _COLON_NEXT:
                return None
            state = _VALUE
        elif state in (_KEY, _KEY_OR_CLOSE) and kind == _STRING:
            if _MARKER_KEY.search(m.group(_STRING)):
                flagged[-1] = True
            state = _COLON_NEXT
        elif state in (_VALUE, _VALUE_OR_CLOSE):  # a string or a scalar value
            if node < 0:
                return None  # the whole text is a scalar (or a string): nothing to cut at
            state = _AFTER
            cut_point(False)
        else:
            return None
    if node >= 0 or state != _AFTER or _SPACE.match(text, pos).end() != len(text):  # type: ignore[union-attr]
        return None
    return Heads(ends, inside, after_item, "".join(closer), parent)


def deep_cut(text: str, found: Heads, max_tokens: int, count: Callable[[str], int],
             probes: dict[int, tuple[str | None, int]]) -> tuple[str, int, int] | None:
    """The longest head of ``text`` at one of its ``found`` places that fits ``max_tokens`` with
    its marker and closing brackets: the text, its tokens and the characters of ``text`` kept.
    None when not even the first place (the top bracket opened and closed) fits."""
    n = len(text)

    def render(k: int) -> str:
        end, bracket = found.ends[k], found.inside[k]
        omitted = f"{n - end} characters omitted"
        marker = f'"… {omitted}"' if found.closer[bracket] == "]" else f'"…":"{omitted}"'
        return kept_probe(text[:end] + ("," if found.after_item[k] else "") + marker + found.closers(bracket))

    fit = fit_line_windows(len(found.ends) - 1, render, count, max_tokens, probes)
    if fit is None:
        return None
    k, out, tokens = fit
    return out, tokens, found.ends[k]


def cut_deep(text: str, entry: dict[str, Any], max_tokens: int, count: Callable[[str], int],
             original_tokens: int, skip: int = 0) -> Truncation | None:
    """:func:`deep_cut` of ``text`` as a truncation (strategy ``json``, the characters of the head
    kept), its :func:`heads` and probes kept in ``entry`` (the text's ``probe_entry``: a result at
    the budget's edge is cut again at every build); None when it is not JSON or nothing fits.
    ``skip``: the characters before ``text`` in the original (a byte order mark), neither shown
    nor cut, so the kept range and the size count in the original's characters."""
    if "heads" not in entry:
        entry["heads"] = heads(text)
    found: Heads | None = entry["heads"]
    cut = None if found is None else deep_cut(text, found, max_tokens, count,
                                              entry.setdefault("deep_probes", {}))
    if cut is None:
        return None
    out, tokens, kept = cut
    return Truncation(text=out, truncated=True, strategy="json", unit="char",
                      original_chars=skip + len(text), original_tokens=original_tokens, tokens=tokens,
                      kept=(KeptRange(start=skip + 1, end=skip + kept),),
                      omitted=len(text) - kept, omitted_chars=len(text) - kept)
