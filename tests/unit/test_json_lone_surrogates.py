"""Lone surrogate escapes are mended in the JSON text, before it is parsed: ``\\ud83d`` with no
partner becomes ``\\ufffd`` (as long: every offset and line stays), an escaped backslash
followed by ``ud83d`` stays text, whatever the run of backslashes before it.

The mend used to walk the parsed value (a list branch and a dict branch doing the same) and then
look for the first lone escape in the text without counting the backslashes before it, so the
note named the line of ``\\\\ud83d`` (a backslash, then text) when it came before the real one.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import ImportFormatError
from contextfold.importers._json import load

# pieces of a JSON string's body: an escaped backslash, surrogate escapes (high, low, upper case),
# the same letters as text, plain characters and an escaped quote
PIECES = ["\\\\", "\\ud83d", "\\ude00", "\\uDBFF", "\\udc00", "ud83d", "x", "\\n", '\\"', "\\u0041"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=12), min_size=1, max_size=4))
def test_the_mend_reads_as_the_parsed_value_with_each_lone_half_replaced(rows: list[list[str]]) -> None:
    text = "[\n" + ",\n".join('"' + "".join(row) + '"' for row in rows) + "\n]"
    parsed = json.loads(text)  # pairs joined: every surrogate left is a lone half
    halves = [re.findall("[\ud800-\udfff]", s) for s in parsed]
    doc = load(text.encode(), "t.json")
    assert doc.value == [re.sub("[\ud800-\udfff]", "\ufffd", s) for s in parsed]
    count = sum(map(len, halves))
    first = next((n for n, h in enumerate(halves, start=2) if h), 0)
    assert doc.lone_surrogates == (count, first)


def test_the_note_names_the_line_of_the_first_real_escape() -> None:
    text = '["a backslash, then text: \\\\ud83d",\n"x",\n"cut: \\ud83d"]'
    assert load(text.encode(), "t.json").lone_surrogates == (1, 3)
    jsonl = '{"a": "\\\\\\\\ud800"}\n{"b": "\\\\\\ud800"}\n'  # two escaped backslashes; one and a real escape
    doc = load(jsonl.encode(), "t.jsonl")
    assert doc.value == [{"a": "\\\\ud800"}, {"b": "\\\ufffd"}] and doc.lone_surrogates == (1, 2)


def test_a_broken_document_keeps_its_error_line_and_column() -> None:
    """The mend keeps the text's length, so a parse error after it is where it was."""
    text = '{"a": "%s",\n "b": [1,, 2]}'
    errors = []
    for escape in ("\\ud83d", "\\u0041"):
        with pytest.raises(ImportFormatError) as e:
            load((text % escape).encode(), "t.json")
        errors.append((e.value.location, e.value.reason))
    assert errors[0] == errors[1] == ("t.json:2", "invalid JSON: Expecting value (column 10)")
