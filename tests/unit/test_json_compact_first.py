"""A JSON text whose compact form fits is answered before the knob's search is set up.

Why: 6 of a tau-bench run's 141 first builds cut a text written with ``json.dumps``' default
separators (``", "``, ``": "``) and built the search's ``saturations`` first, ~10k bytecodes
each, only to find the compact form fits. Now the compact form is counted first: the same
answer (the search's render at its top knob is that very text), nothing else built. These
tests pin that answer to the search's own functions, for cuts made fresh and in a row.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.json_literals import loads
from contextfold.projections.json_shrink import ShrinkStats, dump, saturations, shrink, size_knob_max
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from contextfold.projections.truncation_result import Truncation, Unit, truncation_of

COUNTER = get_counter("cl100k_base")


def _cut(text: str, budget: int) -> Truncation:
    return truncate(text, budget, kind="json", count=COUNTER.count, line_splitting=COUNTER.line_splitting)


def _searched_top(text: str) -> Truncation:
    """The cut the knob's search answers when the compact form fits: its render at the top knob."""
    value, numbers = loads(text)
    stats = ShrinkStats()
    out = dump(shrink(value, size_knob_max(value), stats, top=True, saturated=saturations(value)),
               numbers=numbers)
    tokens = COUNTER.count(out)
    unit: Unit = "json_member" if isinstance(value, list | dict) else "char"
    return truncation_of(out, strategy="none", unit=unit,
                         original=text, original_tokens=COUNTER.count(text), tokens=tokens, kept=stats.kept)


@pytest.mark.parametrize("indent", [None, 4])
def test_a_fitting_compact_form_builds_nothing_for_the_search(monkeypatch: pytest.MonkeyPatch,
                                                              indent: int | None) -> None:
    text = json.dumps({"flights": [{"number": f"HAT{i:03}", "seats": i} for i in range(20)]}, indent=indent)
    expected = _searched_top(text)
    assert expected.tokens < COUNTER.count(text)
    truncate_module._PROBES.clear()

    def built(value: Any) -> dict[int, int]:
        raise AssertionError("saturations built for a text whose compact form fits")

    monkeypatch.setattr(truncate_module, "saturations", built)
    assert _cut(text, expected.tokens) == expected
    assert _cut(text, expected.tokens + 5) == expected  # again, from the memo


_scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.text(max_size=30)
            | st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=5), inner, max_size=12),
    max_leaves=120)
_literals = st.sampled_from(["1.0e400", "-0", "0.10", "1E+2", "12345678901234567890", "NaN", "-Infinity"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values, literal=_literals, with_literal=st.booleans(), padded=st.booleans(),
       indent=st.sampled_from([None, 2, "compact"]), pieces=st.booleans(),
       slack=st.lists(st.integers(-40, 40), min_size=1, max_size=4))
def test_cuts_of_a_json_text_are_the_searchs(value: Any, literal: str, with_literal: bool, padded: bool,
                                             indent: int | str | None, pieces: bool,
                                             slack: list[int]) -> None:
    """Fresh and in a row (grants below and above the compact count), counted whole or by pieces:
    a grant the compact form fits gets the search's top render, kept ranges and unit; a smaller
    one a cut within it."""
    text = (json.dumps(value, ensure_ascii=False, separators=(",", ":")) if indent == "compact"
            else json.dumps(value, ensure_ascii=False, indent=indent))
    if with_literal:  # a number kept as written (a Number), or a constant the standard encoder writes
        text = f'[\n  {literal},\n  {text}\n]'
    if padded:  # a document that is one string or number has a line break around it only
        text = f"\n{literal if with_literal else text}\n"
    try:
        expected = _searched_top(text)
    except ValueError:  # not to be written back as it was (a NUL in a string beside a Number): cut as text
        assume(False)
    truncate_module._PROBES.clear()
    with pytest.MonkeyPatch.context() as m:  # counted by pieces (a large text's search), or whole
        m.setattr(truncate_module, "_JSON_PIECES_FROM", 0 if pieces else 1 << 40)
        got_all = [(b, _cut(text, b)) for b in (max(0, expected.tokens + extra) for extra in slack)]
    truncate_module._PROBES.clear()
    for budget, got in got_all:
        if expected.original_tokens <= budget:
            assert not got.truncated
        elif expected.tokens <= budget:
            assert got == expected
        else:
            assert got.strategy != "none" and (got.over_budget or got.tokens <= budget)


def test_a_cut_with_a_line_splitting_rule_counts_by_pieces_whatever_was_cut_before() -> None:
    """The JSON memo entry holds the layout in pieces only a cut given the encoding's line
    splitting makes (``JsonPieces``), but its key left the rule out: a cut without it first made
    the entry, and every later cut of the text with the rule counted whole renders. The same
    results (the pieces' counts are exact), by another path: the key names the rule now."""
    text = json.dumps({"rows": [{"id": i, "name": f"user-{i}", "note": "x" * 40} for i in range(300)]})
    truncate_module._PROBES.clear()
    plain = truncate(text, 600, kind="json", count=COUNTER.count)
    ruled = _cut(text, 700)
    made = [entry["json"] for key, entry in truncate_module._PROBES.items() if key[:2] == ("json", text)]
    assert any(value is not None and value[3] is not None for value in made)  # JsonPieces: by pieces
    truncate_module._PROBES.clear()
    assert _cut(text, 700) == ruled and truncate(text, 600, kind="json", count=COUNTER.count) == plain
