"""The cut points of deep JSON read a member with a string or scalar value in one match.

``json_deep.heads`` read a document token by token: four steps of a Python loop a member, ~5 us
each, so a 7 MB AST dump of 10,000 levels took over a second to read before any cut (and
several on a busy machine). Members whose values are strings or scalars are now read in one
match each; the cut points must be the very ones the token loop found, and the document refused
where it was refused. :func:`reference_heads` is the token loop as it was (0.17.0), the oracle.
"""

from __future__ import annotations

import json
import re
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold.projections import json_deep
from contextfold.projections.json_deep import Heads, heads

# ---------------------------------------------------------------- the token loop as it was

_TOKEN = re.compile(
    r"[ \t\n\r]*(?:"
    r"([\[{])|([\]}])|(,)|(:)"
    r'|("[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*")'
    r"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|Infinity|-Infinity))")
_OPEN, _CLOSE, _COMMA, _COLON, _STRING, _SCALAR = range(1, 7)
_SPACE = re.compile(r"[ \t\n\r]*")
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON_NEXT, _AFTER = range(6)
_CLOSER = {"[": "]", "{": "}"}
_MARKER_KEY = re.compile(r"…|\\u2026", re.IGNORECASE)


def reference_heads(text: str) -> Heads | None:
    typecode = "i" if len(text) < 1 << 31 else "q"
    ends, inside, after_item = array(typecode), array(typecode), bytearray()
    closer: list[str] = []
    parent = array(typecode)
    flagged: list[bool] = []
    node = -1
    state = _VALUE
    pos = 0

    def cut_point(first: bool) -> None:
        if not flagged[-1]:
            ends.append(pos)
            inside.append(node)
            after_item.append(0 if first else 1)

    while (m := _TOKEN.match(text, pos)) is not None:
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
        elif state in (_VALUE, _VALUE_OR_CLOSE):
            if node < 0:
                return None
            state = _AFTER
            cut_point(False)
        else:
            return None
    match = _SPACE.match(text, pos)
    if node >= 0 or state != _AFTER or match is None or match.end() != len(text):
        return None
    return Heads(ends, inside, after_item, "".join(closer), parent)


def _same(text: str) -> None:
    got, want = heads(text), reference_heads(text)
    assert (got is None) == (want is None), text[:200]
    if got is not None and want is not None:
        assert (got.ends, got.inside, got.after_item, got.closer, got.parent) == (
            want.ends, want.inside, want.after_item, want.closer, want.parent)


# ---------------------------------------------------------------- the same points

_keys = st.sampled_from(["a", "…", "x…y", "\u2026", "n", "", "k k", 'q"q', "\\u2026", "é"])
_leaves = (st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False) | st.booleans()
           | st.none() | st.text(max_size=6) | st.sampled_from(["…", "\u2026", "\\u2026"]))
_values = st.recursive(_leaves, lambda inner: (st.lists(inner, max_size=6)
                                               | st.dictionaries(_keys, inner, max_size=6)), max_leaves=40)


@given(_values, st.sampled_from([None, 0, 1, 2]), st.booleans())
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_cut_points_of_a_document_are_those_the_token_loop_found(value: Any, indent: int | None,
                                                                     ascii_only: bool) -> None:
    _same(json.dumps(value, indent=indent, ensure_ascii=ascii_only))


_pieces = st.sampled_from(['"a"', '"\\u2026"', '"…"', '"k":', '"k": 1', ",", ":", "0", "-1.5e3", "1.", "01",
                           "true", "tru", "null", "NaN", "-Infinity", "[", "]", "{", "}", " ", "\n", '"\x01"',
                           '"a":"b",', "1,2,", '{"x":1,"y":"z"}'])


@given(st.lists(_pieces, max_size=40).map("".join))
@example('{"a":1,}')
@example('{"a":1,"b":2 "c":3}')
@example('{"a":1,"…":2,"b":3}')
@example('[1,2,3 4]')
@example('{"a":truefalse}')
@example('{"a":1,"b":01}')
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_document_is_refused_where_the_token_loop_refused_it(text: str) -> None:
    _same(text)


@pytest.mark.parametrize("text", [
    "".join(f'{{"type":"Call","loc":{{"line":{i},"col":7}},"a":1,"b":"x","body":' for i in range(1_200))
    + "null" + "}" * 1_200,
    "[" * 1_500 + ",".join(["1", '"s"', "true"] * 5) + "]" * 1_500,
    '{"…": 1, "a": 2, "b": {"c": 3, "d": 4}, "e": 5}',
    '{"a": 1, "b": 2, "…x": 3, "c": {"d": 4, "e": 5}, "f": 6}',
    ' { "a" : 1 ,\n "b" : [ 1 , 2 ,\t3 ] , "c" : "d" } ',
])
def test_deep_and_spaced_documents_get_the_same_points(text: str) -> None:
    _same(text)


# ---------------------------------------------------------------- the work

class _Counted:
    """``json_deep._TOKEN`` with its matches counted: the steps of the token-by-token loop."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, text: str, pos: int) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(text, pos)


def test_members_with_scalar_values_take_no_step_of_the_token_loop_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An AST dump: 2,000 levels of 30 scalar members and one child. The loop steps once per
    bracket and per member holding a container (here ~5 a level), not four times per member."""
    levels, members = 2_000, 30
    text = "".join("{" + "".join(f'"m{j}":{j},' for j in range(members)) + '"child":' for _ in range(levels))
    text += "null" + "}" * levels
    counted = _Counted(json_deep._TOKEN)
    monkeypatch.setattr(json_deep, "_TOKEN", counted)
    found = heads(text)
    assert found is not None and len(found.ends) == levels * (members + 2)
    assert counted.calls <= 6 * levels  # was 4 * (members + 1) + 2 per level: 126 here
