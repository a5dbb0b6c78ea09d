"""A JSON cut keeps every number as written, and stays JSON where it used to fall back to text.

Why: a number Python's value does not write back as it was read (``1e400``, ``1e-400``,
``1234567.123456789012345``, an integer past Python's digit limit) made the JSON cut refuse the
document, and the text cut kept a head and a tail around a marker that no JSON reader parses
(DESIGN 7). So did a byte order mark before the document; an object naming a member twice was
cut as its parse, which holds one of the two. Checked here over documents written with such
literals, at many budgets: the kept text parses, and each number in it is one of the original's,
byte for byte.
"""

from __future__ import annotations

import json
from collections import Counter as Multiset
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold import ToolResult
from contextfold.projections import json_pieces
from contextfold.projections.json_literals import BOM, DuplicateKeys, Number, Unwritable, loads
from contextfold.projections.json_pieces import JsonPieces
from contextfold.projections.json_shrink import ShrinkStats, dump, saturations, shrink
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from tests.counters import Counter, cl100k, quarter
from tests.unit.test_json_blocks import cut_first_result
from tests.unit.test_truncate import assert_promise

COUNTER = get_counter("cl100k_base")

ODD_NUMBERS = ["1234567.123456789012345", "1e400", "-1e400", "1e-400", "-0", "-0.0", "1.50", "1E5",
               "0.1e1", "12345678901234567890.123456789", "2.5E-3", "100.000", "7" * 5_000]
"""Literals Python reads as another number (or not at all) or writes back otherwise."""


def literals(text: str) -> list[str]:
    """Every number of the JSON ``text`` as written (and ``NaN``/``Infinity``): it must parse."""
    found: list[str] = []

    def keep(literal: str) -> str:
        found.append(literal)
        return literal

    json.loads(text.removeprefix(BOM), parse_float=keep, parse_int=keep, parse_constant=keep)
    return found


class Raw:
    """A number to write as this literal (the documents are written by :func:`write`)."""

    def __init__(self, text: str) -> None:
        self.text = text


def write(value: Any, indent: int | None, depth: int = 0) -> str:
    """JSON of ``value`` with each :class:`Raw` as its literal, pretty-printed when ``indent``."""
    pad, inner = ("", "") if indent is None else ("\n" + " " * indent * depth,
                                                   "\n" + " " * indent * (depth + 1))
    colon = ":" if indent is None else ": "
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, list):
        items = ",".join(inner + write(v, indent, depth + 1) for v in value)
        return "[" + items + (pad if value else "") + "]"
    if isinstance(value, dict):
        return "{" + ",".join(inner + json.dumps(k) + colon + write(v, indent, depth + 1)
                              for k, v in value.items()) + (pad if value else "") + "}"
    return json.dumps(value, ensure_ascii=False)


number_literals = st.sampled_from(ODD_NUMBERS) | st.from_regex(
    r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,4})?", fullmatch=True)
documents = st.recursive(
    number_literals.map(Raw) | st.integers().map(lambda i: Raw(str(i)))
    | st.floats(allow_nan=False, allow_infinity=False).map(lambda f: Raw(repr(f)))
    | st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(Raw) | st.none() | st.booleans()
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=6), inner, max_size=12),
    max_leaves=120,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents, budget=st.integers(1, 500), indent=st.sampled_from([None, 1]),
       count=st.sampled_from([quarter, cl100k]), bom=st.booleans())
@example(document={"p": Raw("1234567.123456789012345"),
                   "rows": [{"id": i, "v": "x" * 30} for i in range(60)]},
         budget=100, indent=1, count=quarter, bom=False)
@example(document=[Raw("1e400"), *range(200), Raw("-0")], budget=60, indent=None, count=cl100k, bom=True)
def test_a_cut_of_json_with_any_number_is_json_its_numbers_as_written(
        document: Any, budget: int, indent: int | None, count: Counter, bom: bool) -> None:
    text = (BOM if bom else "") + write(document, indent)
    original = Multiset(literals(text))
    result = truncate(text, budget, kind="json", count=count)
    assert_promise(result, budget, count)
    if result.over_budget:
        return
    assert result.strategy in ("json", "none")
    assert result.text == text or not result.text.startswith(BOM)  # shown as logged, or as JSON
    kept = Multiset(literals(result.text))  # it parses, as JSON: no text cut
    assert kept <= original, kept - original  # each number byte-identical to one of the original's
    if not result.truncated:
        assert kept == original


@pytest.mark.parametrize("pieces", [True, False], ids=["by-pieces", "whole"])
def test_a_large_document_with_odd_numbers_is_cut_alike_by_pieces_and_whole(pieces: bool) -> None:
    rows = [{"id": Raw(ODD_NUMBERS[i % len(ODD_NUMBERS)]) if i % 7 == 0 else i, "price": Raw("19.90"),
             "name": f"item {i}", "tags": ["a", "b"]} for i in range(2_000)]
    text = write({"rows": rows, "total": Raw("-0")}, 1)
    result = truncate(text, 3_000, kind="json", count=COUNTER.count,
                      line_splitting=COUNTER.line_splitting if pieces else None)
    assert result.strategy == "json" and result.tokens <= 3_000
    kept = literals(result.text)
    assert "1234567.123456789012345" in kept and "19.90" in kept and "-0" in kept
    assert Multiset(kept) <= Multiset(literals(text))
    whole = truncate(text, 3_000, kind="json", count=COUNTER.count)
    assert result == whole


def test_pieces_lay_out_a_render_holding_numbers_as_written_as_its_dump() -> None:
    """``JsonPieces`` (the by-pieces count of large documents) writes a kept number as ``dump``
    does, so that the pieces add up to the render, knob by knob."""
    rows = [{"n": Raw(ODD_NUMBERS[i % len(ODD_NUMBERS)]), "k": [Raw("1.50"), i, "x" * (i % 9)]}
            for i in range(100)]
    parsed, numbers = loads(write({"rows": rows, "big": Raw("1e400")}, None))
    assert numbers
    saturated = saturations(parsed)
    records_from = json_pieces._RECORDS_FROM
    for shortest_run in (records_from, 2):  # arrays laid out item by item, and in runs
        json_pieces._RECORDS_FROM = shortest_run
        try:
            pieces = JsonPieces(parsed, COUNTER.count, lambda t: t, saturated, numbers)
            for knob in (0, 1, 3, 17, 40, 200, 1_000, 4_000):
                want_stats, got_stats = ShrinkStats(), ShrinkStats()
                want = dump(shrink(parsed, knob, want_stats, top=True, saturated=saturated), False, numbers)
                atoms = pieces.atoms(knob, got_stats)
                assert pieces.text(atoms) == want
                assert pieces.tokens(atoms) == COUNTER.count(want)
                assert (got_stats.omitted, got_stats.kept) == (want_stats.omitted, want_stats.kept)
        finally:
            json_pieces._RECORDS_FROM = records_from


def test_numbers_are_read_as_written_only_where_python_would_write_another() -> None:
    value, numbers = loads('{"a": 1, "b": 2.5, "c": -0, "d": 1e400, "e": NaN, "f": 1.50}')
    assert numbers
    assert value["a"] == 1 and value["b"] == 2.5 and value["c"] == Number("-0")
    assert value["d"] == Number("1e400") and value["e"] != value["e"] and value["f"] == Number("1.50")
    assert loads("[1, 2.5, -1.0]") == ([1, 2.5, -1.0], False)
    big = "9" * 5_000  # past Python's digit limit: read as written (int() refuses it)
    assert loads(f"[{big}]") == ([Number(big)], True)
    with pytest.raises(DuplicateKeys):
        loads('{"a": 1, "b": {"x": 1, "x": 2}}')
    assert loads('["\\u0000", 1.5]') == (["\0", 1.5], False)
    with pytest.raises(Unwritable):  # a string could read as a number kept: not written back
        loads('["\\u00001e400\\u0000", 1e400]')
    with pytest.raises(ValueError):
        loads('{"a": 1} trailing')


# ------------------------------------------------------------------ other fallbacks to text


def test_an_object_naming_a_member_twice_keeps_a_head_as_written() -> None:
    """The parse holds the last value at the first name's place: a cut of it showed ``"a": 2``
    first and ``"a": 1`` nowhere, in a document that says both."""
    rows = [{"id": i, "v": "x" * 30} for i in range(300)]
    text = '{"a": 1, "rows": ' + json.dumps(rows) + ', "a": 2}'
    result = truncate(text, 200, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and result.unit == "char" and result.tokens <= 200
    json.loads(result.text)
    end = result.kept[0].end
    assert (result.kept[0].start, result.text[:end]) == (1, text[:end])  # a head, as written
    assert result.text.startswith('{"a": 1, "rows": [{"id": 0')


def test_a_document_after_a_byte_order_mark_is_cut_as_json() -> None:
    rows = [{"id": i, "v": "x" * 30} for i in range(300)]
    text = BOM + json.dumps({"rows": rows})
    result = truncate(text, 200, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and result.unit == "json_member" and result.tokens <= 200
    assert json.loads(result.text)["rows"][0] == rows[0] and result.original_chars == len(text)


def test_a_deep_document_after_a_byte_order_mark_counts_the_mark_in_its_ranges() -> None:
    text = BOM + '{"a":' * 3_000 + "1" + "}" * 3_000
    result = truncate(text, 100, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and result.unit == "char" and not result.text.startswith(BOM)
    assert result.original_chars == len(text) and result.kept[0].start == 2
    end = result.kept[0].end
    assert result.text.startswith(text[1:end])
    assert result.omitted_chars == len(text) - end


ROWS = json.dumps({"rows": [{"id": i, "note": "x" * 40} for i in range(800)]})


@pytest.mark.parametrize("content", [ROWS.replace('"id": 5,', '"id": 1e400,'), BOM + ROWS],
                         ids=["1e400", "bom"])
def test_a_failed_tool_s_json_result_with_them_is_cut_as_json_not_as_a_log(content: str) -> None:
    """The builder asks whether a failing tool's output is JSON before cutting it as a log: the
    same question, answered as the cut answers it."""
    result = ToolResult(call_id="c1", content=content, is_error=True, exit_code=1)
    cut, shown = cut_first_result(result, 4_000)
    assert cut.strategy == "json"
    rows = json.loads(shown, parse_float=str)["rows"]
    assert rows[0]["note"] == "x" * 40


def test_json_blocks_with_a_number_a_double_does_not_hold_are_cut_as_documents() -> None:
    """MCP text blocks: a line apart, each cut as JSON. One holding ``1e400`` was not read as a
    document, and the pair was cut as characters."""
    blocks = [json.dumps({"rows": [{"id": i, "tag": tag * 20} for i in range(400)]}) for tag in "ab"]
    text = blocks[0].replace('"id": 3,', '"id": 1e400,') + "\n" + blocks[1]
    result = truncate(text, 1_000, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and result.unit == "block" and result.tokens <= 1_000
    first, second = (json.loads(line, parse_float=str) for line in result.text.split("\n"))
    assert first["rows"][3]["id"] == "1e400" and second["rows"][0]["tag"] == "b" * 20


def test_a_number_to_keep_beside_a_nul_keeps_a_head_as_written() -> None:
    """A kept number is carried as a string between two NULs; a document with a NUL in a string
    (``\\u0000``) is cut as a head as written rather than risk reading that string as a number."""
    rows = [{"id": i, "v": "x" * 30, "nul": "\0"} for i in range(300)]
    text = json.dumps({"rows": rows, "odd": "\u00001e400\u0000"}).replace('"id": 4,', '"id": 1e400,')
    result = truncate(text, 200, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and result.unit == "char" and result.tokens <= 200
    end = result.kept[0].end
    assert result.text[:end] == text[:end] and "1e400" in result.text
    assert json.loads(result.text)["rows"][4]["id"] == float("inf")


BIG_NUMBERS = ["1" * 40_000, "-" + "9" * 5_000 + ".5e-10", "  " + "7" * 9_000 + "\n", "1.5" + "0" * 5_000]


@pytest.mark.parametrize("pieces", [True, False], ids=["by-pieces", "whole"])
@pytest.mark.parametrize("text", BIG_NUMBERS, ids=["digits", "exponent", "padded", "fraction"])
def test_a_document_that_is_one_number_over_the_grant_keeps_a_json_head_of_it(text: str,
                                                                              pieces: bool) -> None:
    """A scalar has no container to be dropped from: a 40,000-digit number cut to any grant kept a
    bare "…", which no reader parses. It becomes a string of the literal's first digits and what
    was left out, as a long string is cut, and the record says which characters were kept."""
    literal = text.strip()
    for budget in (8, 12, 48, 333):
        result = truncate(text, budget, kind="json", count=COUNTER.count,
                          line_splitting=COUNTER.line_splitting if pieces else None)
        assert_promise(result, budget, cl100k)
        assert (result.strategy, result.unit, result.over_budget) == ("json", "char", False)
        shown = json.loads(result.text)
        end = max((r.end for r in result.kept), default=0)  # none kept: the marker alone
        assert [(r.start, r.end) for r in result.kept] == ([(1, end)] if end else [])
        assert shown == f"{literal[:end]}… [{len(literal) - end} chars omitted]"
        assert result.omitted_chars == len(literal) - end
        assert result.tokens >= budget - 2  # the grant is used, not lost to a marker
    assert truncate(text, 4, kind="json", count=COUNTER.count).over_budget  # not even the marker fits


@pytest.mark.parametrize("is_error", [False, True])
def test_a_tool_result_that_is_one_huge_number_is_cut_as_json(is_error: bool) -> None:
    """The builder cut such a result as a log: the number's head and tail around a marker, which a
    reader takes for one number with other digits (a failed call's, as its diagnosis)."""
    digits = "31415926535" * 4_000
    cut, shown = cut_first_result(ToolResult(call_id="c1", content=digits, is_error=is_error,
                                             exit_code=1 if is_error else None), 1_000)
    assert cut.strategy == "json"
    value = json.loads(shown)
    assert isinstance(value, str) and digits.startswith(value.partition("…")[0])
    assert value.endswith(" chars omitted]") and len(value) > 1_000
    text = "hello world " * 17_000  # a document that is one string was cut as JSON already
    cut, shown = cut_first_result(ToolResult(call_id="c1", content=json.dumps(text), is_error=is_error,
                                             exit_code=1 if is_error else None), 1_000)
    assert cut.strategy == "json" and text.startswith(json.loads(shown).partition("…")[0])
