"""A JSON cut is the same whatever the process cut before: another grant, a cut without the
encoding's line splitting, or a cut made from a deeper call stack.

Why: a text's parse is kept in truncation's memo (``line_windows.probe_entry``) for its later
cuts, and a ``RecursionError`` once marked the memo "past the parser" (a head as written from
then on). That error came from steps that depend on the grant and on the call: the layout in
pieces (``json_pieces``, two frames a level, counted up to twice the grant) raised for a
500-level document where the compact form fitted, and the parse raised when made from a deeper
stack. A later cut then kept a head as written where a fresh process, asked the same grant,
sent the compact form whole; replay ``--verify`` compares a build's hashes across processes.
Now the kind of cut is decided per text, by its depth (``truncate.PARSE_DEPTH``), once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.json_shrink import text_nested_past
from contextfold.projections.line_counts import LineSplitting
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import PARSE_DEPTH, Truncation, truncate

COUNTER = get_counter("cl100k_base")


def _wide(depth: int, width: int = 40) -> str:
    """``depth`` arrays nested, each ``width`` short strings and the next one, pretty-printed:
    its compact form is a little over half its size, and is laid out in pieces (over 32 items
    an array, so it is walked level by level)."""
    inner = '"end"'
    for _ in range(depth):
        inner = "[" + (",\n" + " " * 8).join([*(f'"i{j}"' for j in range(width)), inner]) + "]"
    return inner


def _chain(depth: int, shape: str) -> str:
    """A narrow document ``depth`` containers deep, indented (written without the recursive
    encoder, which stops at its recursion limit)."""
    if shape == "object":
        head = "".join(f'{{\n "name": "node {i}",\n "child": ' for i in range(depth))
        return head + '"end"' + "\n}" * depth
    if shape == "array":
        return ''.join(f'[\n {i},\n "item {i}",\n ' for i in range(depth)) + '"end"' + "\n]" * depth
    return _wide(depth, 34)


def _cut(text: str, grant: int, splitting: LineSplitting | None = COUNTER.line_splitting) -> Truncation:
    return truncate(text, grant, kind="json", count=COUNTER.count, line_splitting=splitting)


def _fresh(text: str, grant: int) -> Truncation:
    truncate_module._PROBES.clear()
    return _cut(text, grant)


def _deeper(frames: int, call: Callable[[], Any]) -> Any:
    return call() if frames == 0 else _deeper(frames - 1, call)


def test_a_cut_after_a_smaller_grant_is_the_cut_a_fresh_process_makes() -> None:
    for depth in (450, 500, 560, 600):
        text = _wide(depth)
        size = COUNTER.count(text)
        small, large = size // 50, size - 1
        alone = _fresh(text, large)
        _fresh(text, small)
        assert _cut(text, large) == alone, depth
        json.loads(alone.text)


def test_a_cut_after_one_without_line_splitting_is_the_cut_a_fresh_process_makes() -> None:
    """The memo's key has no line splitting: the parse a cut without it kept was used by one
    with it. A 500-level document's compact form was sent whole after such a cut, a head of it
    as written without."""
    for depth in (300, 450, 500, 600):
        text = _wide(depth)
        grant = COUNTER.count(text) - 1
        alone = _fresh(text, grant)
        _fresh(text, grant)
        truncate_module._PROBES.clear()
        _cut(text, grant, splitting=None)
        assert _cut(text, grant) == alone, depth
        assert alone.tokens <= grant
        json.loads(alone.text)


def test_a_cut_after_one_made_from_a_deeper_stack_is_the_cut_a_fresh_process_makes() -> None:
    """The parse stops at the recursion limit, counted from wherever it is called: a document a
    parse from the test's stack reads was past the parser 300 frames deeper, and the memo kept
    that for every later cut."""
    for depth in (PARSE_DEPTH - 10, PARSE_DEPTH + 10, 700, 850):
        for shape in ("object", "array", "wide"):
            text = _chain(depth, shape)
            grant = COUNTER.count(text) - 1
            alone = _fresh(text, grant)
            truncate_module._PROBES.clear()
            _deeper(300, lambda text=text, grant=grant: _cut(text, grant))  # type: ignore[misc]
            assert _cut(text, grant) == alone, (depth, shape)


def test_documents_nested_past_the_parse_depth_are_heads_as_written_at_every_grant() -> None:
    """Decided by the depth, per text: not by where a recursion stopped."""
    for depth, past in ((PARSE_DEPTH, False), (PARSE_DEPTH + 1, True)):
        text = _chain(depth, "array")
        cut = _fresh(text, COUNTER.count(text) - 1)
        assert (cut.strategy == "json") is past, (depth, cut.strategy)
        assert json.loads(cut.text) is not None


@settings(max_examples=20, deadline=None)
@given(depth=st.sampled_from([PARSE_DEPTH - 1, PARSE_DEPTH + 1, 470, 499, 501, 530, 960, 995, 1010]),
       shape=st.sampled_from(["object", "array", "wide"]),
       shares=st.lists(st.sampled_from([0.002, 0.02, 0.3, 0.55, 0.62, 0.7, 0.9, 0.999]),
                       min_size=2, max_size=5))
def test_cuts_around_the_recursion_limit_do_not_depend_on_their_order(depth: int, shape: str,
                                                                      shares: list[float]) -> None:
    text = _chain(depth, shape)
    size = COUNTER.count(text)
    grants = [max(1, int(size * share)) for share in shares]
    fresh = {grant: _fresh(text, grant) for grant in set(grants)}
    truncate_module._PROBES.clear()
    for grant in grants:
        cut = _cut(text, grant)
        assert cut == fresh[grant], (depth, shape, grant, cut.strategy, fresh[grant].strategy)
        if not cut.over_budget:
            json.loads(cut.text)


def test_a_document_too_deep_for_the_pieces_has_its_compact_form_counted_once() -> None:
    """Past ``PARSE_DEPTH // 2`` levels the compact form is not laid out in pieces (their walk
    recurses two frames a level): it is counted whole, once per text, not once per cut."""
    text = _chain(PARSE_DEPTH // 2 + 50, "wide")
    size = COUNTER.count(text)
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    counted: list[str] = []

    def count(chunk: str) -> int:
        if chunk == compact:
            counted.append(chunk)
        return COUNTER.count(chunk)

    truncate_module._PROBES.clear()
    cuts = [truncate(text, grant, kind="json", count=count, line_splitting=COUNTER.line_splitting)
            for grant in (size // 3, size // 2, size - 1, size // 3)]
    assert [cut.strategy for cut in cuts] == ["json", "json", "none", "json"]
    assert len(counted) == 1


def test_a_cut_from_700_frames_deeper_is_the_cut_from_a_shallow_stack_in_either_order() -> None:
    """The parse recurses a frame a level, counted from the caller's frame: a document a parse
    from the test reads raised ``RecursionError`` 700 frames deeper, and that was read as "past
    ``PARSE_DEPTH``" (a head as written) and kept in the memo for the text's later cuts. Whether a
    document is past the parse depth is decided by its depth now, and its cut is the same from
    any stack, whichever stack cut the text first."""
    for depth in (PARSE_DEPTH - 10, PARSE_DEPTH, PARSE_DEPTH + 1, PARSE_DEPTH + 10):
        for shape in ("object", "array", "wide"):
            text = _chain(depth, shape)
            size = COUNTER.count(text)
            for grant in (size - 1, size // 3):
                shallow_first = _fresh(text, grant)
                deeper_second = _deeper(700, lambda text=text, grant=grant: _cut(text, grant))  # type: ignore[misc]
                truncate_module._PROBES.clear()
                deeper_first = _deeper(700, lambda text=text, grant=grant: _cut(text, grant))  # type: ignore[misc]
                shallow_second = _cut(text, grant)
                where = (depth, shape, grant)
                assert deeper_second == shallow_first, where
                assert deeper_first == shallow_first, where
                assert shallow_second == shallow_first, where


def test_the_depth_read_from_the_text_skips_brackets_in_strings() -> None:
    """``text_nested_past`` decides "past PARSE_DEPTH" where the parse ran out of stack: brackets
    and escaped quotes inside strings are not nesting."""
    inner = '"[[{{\\"[[ \\\\"'
    for levels in (3, PARSE_DEPTH, PARSE_DEPTH + 1):
        text = "[" * levels + inner + ', "]]}}"' + "]" * levels
        assert text_nested_past(text, PARSE_DEPTH) is (levels > PARSE_DEPTH), levels
        assert not text_nested_past(text, levels) and text_nested_past(text, levels - 1), levels
