"""JSON nested deeper than the parser goes is cut at a structural boundary, still JSON."""

from __future__ import annotations

import json
import json.scanner
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold import ToolResult
from contextfold.projections.json_deep import deep_cut, heads
from contextfold.projections.truncate import truncate
from tests.counters import cl100k
from tests.unit.test_json_blocks import cut_first_result


@contextmanager
def deep_parser() -> Iterator[None]:
    """Python's parser, allowed the depth of these documents (the test's own check)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def parses(text: str) -> Any:
    """``json``'s pure-Python scanner: from 3.12 the C one stops at the interpreter's own C
    recursion limit (3.12.1: between 1,200 and 1,500 levels), whatever ``sys.setrecursionlimit`` says; Python
    frames follow the limit set."""
    decoder = json.JSONDecoder()
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]  # untyped
    with deep_parser():
        return decoder.decode(text)


def tree(depth: int, items: int = 8) -> str:
    kids = [f'{{"id": {i}, "children": {"[" * depth}0{"]" * depth}}}' for i in range(items)]
    return '{"tree": [' + ", ".join(kids) + "]}"


def test_json_deeper_than_the_parser_is_cut_as_json_not_as_characters() -> None:
    """It was cut as characters: ``{"tree":`` and a tail of brackets, which no reader parses."""
    text = tree(1_500)
    result = truncate(text, 1_500, kind="json", count=cl100k)
    assert result.strategy == "json" and result.truncated and result.tokens == cl100k(result.text) <= 1_500
    shown = parses(result.text)
    assert shown["tree"][0]["id"] == 0 and len(shown["tree"]) < 9
    (kept,) = result.kept
    assert kept.start == 1 and result.text.startswith(text[:kept.end])
    assert result.omitted_chars == len(text) - kept.end


def test_deep_objects_get_a_member_marker() -> None:
    """A whole value is an atom: a long string is dropped whole, an object is closed by a member."""
    text = '{"a": ' * 1_200 + '{"x": "' + "y" * 40_000 + '"}' + "}" * 1_200
    result = truncate(text, 4_500, kind="json", count=cl100k)
    assert result.strategy == "json" and result.tokens <= 4_500
    shown = parses(result.text)
    for _ in range(1_200):
        shown = shown["a"]
    assert shown == {"…": f"{len(text) - result.kept[0].end} characters omitted"}


def test_a_deep_tool_result_is_sent_as_json() -> None:
    cut, shown = cut_first_result(ToolResult(call_id="c1", content=tree(1_500), is_error=True), 6_000)
    assert cut.strategy == "json"  # a failed tool's JSON is not a log
    assert parses(shown)["tree"][0]["id"] == 0


def test_hostile_depth_is_linear() -> None:
    start = time.perf_counter()
    valid = "[" * 200_000 + "]" * 200_000
    result = truncate(valid, 300, kind="json", count=cl100k)
    assert result.strategy == "json" and parses(result.text)
    assert truncate("[" * 400_000, 300, kind="json", count=cl100k).strategy != "json"  # not JSON
    assert time.perf_counter() - start < 20


_atoms = st.sampled_from(['"a"', '"\\u2026"', '"…"', "0", "-1.5e3", "true", "null", "NaN", "-Infinity",
                          "[]", "{}", "01", "1.", '"\x01"', "tru", "[", "]", "{", "}", ",", ":", " "])


@given(st.lists(_atoms, max_size=30).map("".join))
@example('{"a":1,}')
@example('[1 2]')
@example('{"a" 1}')
@example('{"a":1}x')
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_heads_accepts_what_the_cut_parser_reads(text: str) -> None:
    """The token pass agrees with ``json.loads`` (NaN taken) on what is one JSON container."""
    try:
        value = json.loads(text)
        container = isinstance(value, list | dict)
    except ValueError:
        container = False
    assert (heads(text) is not None) == container


@given(st.recursive(st.integers(0, 9) | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=4),
                    max_leaves=30).filter(lambda v: isinstance(v, list | dict)),
       st.integers(0, 60))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_head_is_json(value: Any, budget: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    found = heads(text)
    assert found is not None
    cut = deep_cut(text, found, budget, cl100k, {})
    if cut is not None:
        assert cl100k(cut[0]) == cut[1] <= budget and text.startswith(cut[0][:cut[2]])
        json.loads(cut[0])


def _chain(depth: int) -> str:
    """Objects nested ``depth`` levels, each a few members and its child last."""
    text = '{"name":"leaf","items":[0,1,2,3,4]}'
    for i in range(depth - 1):
        text = f'{{"name":"n{i}","data":"{"x" * 20}","items":[0,1,2,3,4],"child":{text}}}'
    return text


def test_json_the_parser_reads_but_the_shrink_cannot_walk_is_cut_as_json() -> None:
    """The parser's C code takes a frame's budget a level, the shrink two (its dict comprehension):
    a document nested ~500-990 levels parsed, then its shrink hit the recursion limit, and it was
    cut as words, no JSON at all (the shrink is taken when the counter lends no line splitting:
    a data block counted as neutralised). Now it is cut as a head as written, brackets closed."""
    text = _chain(700)
    json.loads(text)  # the parser reads it
    for budget in (300, 2_000, 9_000):
        cut = truncate(text, budget, kind="json", count=cl100k, line_splitting=None)
        assert cut.strategy == "json" and cut.unit == "char" and budget * 0.9 < cut.tokens <= budget
        parses(cut.text)
        (kept,) = cut.kept
        assert kept.start == 1 and cut.text.startswith(text[:kept.end])
